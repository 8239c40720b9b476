/* The k best values of a row (a token's logits), for a sampler that needs
 * no more than them: k values and their indices cross to the host instead
 * of the whole vocabulary, and the host's passes over it go.
 *
 * Order: the larger value first, the smaller index on ties (the sampler's
 * `better`, host/text/sampler.c), so the selection is one exact set. NaN
 * counts as -inf, as the sampler takes it; a row holding any non-finite
 * value is counted, for the caller's check of the logits.
 *
 * Two launches: topk_part, one work-item (and work-group: the scan is
 * serial, not for lanes) per slice of the row keeping its k best in a
 * sorted private list (a value enters only when it beats the list's last,
 * rare once the list fills); topk_merge, one work-item merging the parts'
 * lists. Option TOPK_MAX: the largest k (private list size).
 *
 * A mask (a grammar's, issue 41): M holds a bit per value of the row (bit
 * i%32 of word i/32: 1 allowed), and a refused value counts as -inf, so
 * the k best are the masked row's exactly (the allowed ones by value,
 * then -inf ones by index, refused or not), as the sampler would choose
 * from the whole row after its grammar stage. The non-finite check reads
 * the values as they are (the model's logits, masked or not). Reads of M
 * stay below word (n + 31) / 32: the host's buffer holds that many. */

#ifndef TOPK_MAX
#define TOPK_MAX 64
#endif

inline int topk_better(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

/* (x, ix) into the sorted list v/id of *m entries (at most k). */
inline void topk_insert(float *v, int *id, int *m, int k, float x, int ix) {
    if (*m == k && !topk_better(x, ix, v[k - 1], id[k - 1])) return;
    int j = *m < k ? (*m)++ : k - 1;
    for (; j > 0 && topk_better(x, ix, v[j - 1], id[j - 1]); j--) {
        v[j] = v[j - 1];
        id[j] = id[j - 1];
    }
    v[j] = x;
    id[j] = ix;
}

/* Whether the mask allows value i (masked 0: every value). */
inline int topk_allowed(__global const uint *M, const int masked, const int i) {
    return !masked || (M[i >> 5] >> (i & 31) & 1u);
}

/* The mask's 16 bits for values i .. i + 15 (i + 15 < n), bit j for i + j;
 * the next word read only where it exists: bounds-safe at the row's end. */
inline uint topk_bits16(__global const uint *M, const int n, const int i) {
    const int w = i >> 5, sh = i & 31, words = (n + 31) >> 5;
    uint b = M[w] >> sh;
    if (sh > 16 && w + 1 < words) b |= M[w + 1] << (32 - sh);
    return b & 0xffffu;
}

/* Part p of `parts` over X[xoff .. xoff + n): its best k (padded with -inf
 * and index n when the slice is shorter) to PV/PI[p·k ..), and to BAD[p] 1
 * when the slice holds a non-finite value. masked: M is the row's mask
 * (else M is not read). Global size: parts. */
__kernel void topk_part(__global const float *X, const ulong xoff, const int n, const int k, const int parts,
                        __global float *PV, __global int *PI, __global int *BAD, __global const uint *M,
                        const int masked) {
    const int p = get_global_id(0);
    if (p >= parts) return;
    const int len = (n + parts - 1) / parts, i0 = p * len, i1 = min(n, i0 + len);
    float v[TOPK_MAX];
    int id[TOPK_MAX], m = 0, bad = 0;
    int i = i0;
    /* 16 at a time: once the list is full a run whose values all fall at
     * or below its last (a later tie loses), or all refused by the mask
     * (-inf, a later index: it loses too), is skipped whole */
    for (; i + 16 <= i1; i += 16) {
        const float16 x = vload16(0, X + xoff + i);
        const uint allow = masked ? topk_bits16(M, n, i) : 0xffffu;
        if (any(isinf(x) | isnan(x))) bad = 1;
        else if (m == k && (!allow || !any(x > (float16)v[k - 1]))) continue;
        for (int j = i; j < i + 16; j++) {
            const float y = X[xoff + j];
            topk_insert(v, id, &m, k, isnan(y) || !(allow >> (j - i) & 1u) ? -INFINITY : y, j);
        }
    }
    for (; i < i1; i++) {
        float y = X[xoff + i];
        if (!isfinite(y)) {
            bad = 1;
            if (isnan(y)) y = -INFINITY;
        }
        topk_insert(v, id, &m, k, topk_allowed(M, masked, i) ? y : -INFINITY, i);
    }
    for (int j = 0; j < k; j++) {
        PV[p * k + j] = j < m ? v[j] : -INFINITY;
        PI[p * k + j] = j < m ? id[j] : n;
    }
    BAD[p] = bad;
}

/* The best k of the parts' lists to OV/OI[0 .. k), best first, and to
 * OI[k] the number of parts with a non-finite value. One work-item. */
__kernel void topk_merge(__global const float *PV, __global const int *PI, __global const int *BAD, const int k,
                         const int parts, __global float *OV, __global int *OI) {
    if (get_global_id(0) != 0) return;
    float v[TOPK_MAX];
    int id[TOPK_MAX], m = 0, bad = 0;
    for (int p = 0; p < parts; p++) {
        bad += BAD[p];
        for (int j = 0; j < k; j++) {
            const float x = PV[p * k + j];
            const int ix = PI[p * k + j];
            if (m == k && !topk_better(x, ix, v[k - 1], id[k - 1])) break; /* the part's list is sorted */
            topk_insert(v, id, &m, k, x, ix);
        }
    }
    for (int j = 0; j < k; j++) {
        OV[j] = v[j];
        OI[j] = id[j];
    }
    OI[k] = bad;
}

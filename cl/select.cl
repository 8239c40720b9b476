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
 * lists. Option TOPK_MAX: the largest k (private list size). */

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

/* Part p of `parts` over X[xoff .. xoff + n): its best k (padded with -inf
 * and index n when the slice is shorter) to PV/PI[p·k ..), and to BAD[p] 1
 * when the slice holds a non-finite value. Global size: parts. */
__kernel void topk_part(__global const float *X, const ulong xoff, const int n, const int k, const int parts,
                        __global float *PV, __global int *PI, __global int *BAD) {
    const int p = get_global_id(0);
    if (p >= parts) return;
    const int len = (n + parts - 1) / parts, i0 = p * len, i1 = min(n, i0 + len);
    float v[TOPK_MAX];
    int id[TOPK_MAX], m = 0, bad = 0;
    int i = i0;
    /* 16 at a time: once the list is full a run whose values all fall at
     * or below its last (a later tie loses) is skipped whole */
    for (; i + 16 <= i1; i += 16) {
        const float16 x = vload16(0, X + xoff + i);
        if (any(isinf(x) | isnan(x))) bad = 1;
        else if (m == k && !any(x > (float16)v[k - 1])) continue;
        for (int j = i; j < i + 16; j++) {
            const float y = X[xoff + j];
            topk_insert(v, id, &m, k, isnan(y) ? -INFINITY : y, j);
        }
    }
    for (; i < i1; i++) {
        float y = X[xoff + i];
        if (!isfinite(y)) {
            bad = 1;
            if (isnan(y)) y = -INFINITY;
        }
        topk_insert(v, id, &m, k, y, i);
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

/* Mixture-of-experts kernels (host/compute/moe.h): the router's softmax
 * and top-k, and the gather / weighted scatter-add around each expert's
 * products. Offsets are in elements. */

/* logits [rows × n_expert] -> ids, w [rows × k]: one work-item a row.
 * Softmax over all experts, then k passes each taking the best expert
 * below the previous one in the order (probability descending, id
 * ascending), NaN as -inf: k distinct ids whatever the values. The chosen
 * probabilities are divided by their sum (norm_w, the sum clamped at
 * 6.103515625e-5 as llama.cpp does) and scaled. sm_w (gpt-oss's
 * softmax-weight gating): the k best of the logits themselves, their
 * weights a softmax over those k. Global size (>= rows). */
__kernel void moe_route_f32(__global const float *logits, const ulong l_off, const int n_expert, const int rows,
                            const int k, const int norm_w, const float w_scale, __global int *ids,
                            __global float *w, const ulong o_off, const int sm_w) {
    const int r = (int)get_global_id(0);
    if (r >= rows) return;
    __global const float *l = logits + l_off + (size_t)r * n_expert;
    __global int *id = ids + o_off + (size_t)r * k;
    __global float *wr = w + o_off + (size_t)r * k;
    float mx = -INFINITY;
    for (int e = 0; e < n_expert; e++) mx = fmax(mx, l[e]); /* fmax ignores NaN */
    float sum = 0.0f;
    for (int e = 0; e < n_expert; e++) sum += exp(l[e] - mx);
    const float inv = 1.0f / sum;
    float prev_p = INFINITY;
    int prev_i = -1;
    for (int j = 0; j < k; j++) {
        int best = -1;
        float bp = -INFINITY;
        for (int e = 0; e < n_expert; e++) {
            float p = sm_w ? l[e] : exp(l[e] - mx) * inv;
            if (isnan(p)) p = -INFINITY;
            const int below = p < prev_p || (p == prev_p && e > prev_i); /* after the previous in the order */
            if (below && (best < 0 || p > bp)) best = e, bp = p;
        }
        id[j] = best;
        prev_p = bp;
        prev_i = best;
    }
    if (sm_w) { /* softmax over the chosen logits (ggml_soft_max: max, exp, sum, scale) */
        float cm = -INFINITY, cs = 0.0f;
        for (int j = 0; j < k; j++) cm = fmax(cm, l[id[j]]);
        for (int j = 0; j < k; j++) cs += (wr[j] = exp(l[id[j]] - cm));
        for (int j = 0; j < k; j++) wr[j] *= 1.0f / cs;
    } else /* the probabilities as llama.cpp gets them (NaN stays NaN: the row's logits were) */
        for (int j = 0; j < k; j++) wr[j] = exp(l[id[j]] - mx) * inv;
    if (norm_w) {
        float tot = 0.0f;
        for (int j = 0; j < k; j++) tot += wr[j];
        tot = fmax(tot, 6.103515625e-5f);
        for (int j = 0; j < k; j++) wr[j] /= tot;
    }
    if (w_scale != 1.0f)
        for (int j = 0; j < k; j++) wr[j] *= w_scale;
}

/* dst[i, :] = src[idx[i], :], rows of n. Global size (>= n, rows). */
__kernel void moe_gather_f32(__global const float *src, const ulong s_off, __global const int *idx, const ulong i_off,
                             __global float *dst, const ulong d_off, const int n) {
    const int j = (int)get_global_id(0), i = (int)get_global_id(1);
    if (j >= n) return;
    dst[d_off + (size_t)i * n + j] = src[s_off + (size_t)idx[i_off + i] * n + j];
}

/* x[idx[i], :] += w[i] · src[i, :], rows of n; no two i share an idx.
 * Global size (>= n, rows). */
__kernel void moe_scatter_add_f32(__global float *x, const ulong x_off, __global const float *src, const ulong s_off,
                                  __global const int *idx, __global const float *w, const ulong i_off, const int n) {
    const int j = (int)get_global_id(0), i = (int)get_global_id(1);
    if (j >= n) return;
    x[x_off + (size_t)idx[i_off + i] * n + j] += w[i_off + i] * src[s_off + (size_t)i * n + j];
}

/* x[r, :] += Σ_j w[r·k + j] · y[r·k + j, :] (j in order: llama.cpp's sum of
 * the weighted experts, then the residual add), rows of n: the gpu
 * variant's indirect decode (host/compute/moe.c). Global size (>= n, rows). */
__kernel void moe_wsum_f32(__global float *x, const ulong x_off, __global const float *y, const ulong y_off,
                           __global const float *w, const ulong w_off, const int k, const int n) {
    const int c = (int)get_global_id(0), r = (int)get_global_id(1);
    if (c >= n) return;
    float s = 0.0f;
    for (int j = 0; j < k; j++) s += w[w_off + (size_t)r * k + j] * y[y_off + ((size_t)r * k + j) * n + c];
    x[x_off + (size_t)r * n + c] += s;
}

/* y[i, :] += b[idx[i], :], rows of n (gpt-oss's expert biases on the gpu
 * variant's indirect decode: each slot's gate|up or down row gets its
 * expert's bias, as the per-expert path adds it). Global size (>= n, rows). */
__kernel void moe_add_id_f32(__global float *y, const ulong y_off, __global const float *b, const ulong b_off,
                             __global const int *idx, const ulong i_off, const int n) {
    const int j = (int)get_global_id(0), i = (int)get_global_id(1);
    if (j >= n) return;
    y[y_off + (size_t)i * n + j] += b[b_off + (size_t)idx[i_off + i] * n + j];
}

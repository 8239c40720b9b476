/* Rotary position embedding, in place.
 *
 * Pair i (i < n_rot / 2) of a head at position pos turns by
 * theta = pos * freq_scale * base^(-2 i / n_rot) / ff[i]
 *       = pos * freq_scale * exp2(i * log2_scale) / ff[i], with
 * log2_scale = -2 log2(base) / n_rot computed on the host in double;
 * freq_scale is linear position interpolation (1: none) and ff the
 * per-pair frequency factors of Llama 3.1 (rope_freqs), or NULL for none.
 * YaRN (gpt-oss) where yarn.x (ext_factor) != 0: cl/common.cl
 * rope_angles_yarn, which takes pos unscaled and mixes freq_scale in per
 * pair; otherwise the code is as without it, bit for bit.
 * NORM (Llama GGUF) pairs elements (2i, 2i + 1); NEOX pairs (i, i + n_rot/2).
 *
 * Global size (ceil(n_rot / 2 / 8), >= n_tokens): a work-item takes 8 pairs
 * of one token, computes their sin/cos once and applies them to every head
 * (the angle does not depend on the head). A row's heads start at float
 * col0 of rows row_stride floats apart, so Q and K can be rotated inside a
 * fused QKV output; elements past n_rot are not touched. */

#define CLF_ROPE_PAIRS 8

/* (a, b) -> (a cos - b sin, a sin + b cos) */
#define CLF_ROT(a, b, c, s, ra, rb) \
    do {                            \
        ra = a * c - b * s;         \
        rb = a * s + b * c;         \
    } while (0)

inline __global float *rope_row(__global float *x, ulong x_off, int row_stride, int col0) {
    return x + x_off + get_global_id(1) * (size_t)row_stride + col0;
}

/* The pairs past the last whole group of 8 (n_rot / 2 not a multiple of 8). */
inline void rope_tail(__global float *row, int i0, int n_pairs, int n_heads, int head_dim, float pos,
                      float log2_scale, __global const float *ff, int neox, float freq_scale, float4 yarn) {
    for (int i = i0; i < n_pairs; i++) {
        float c, s = rope_angle1(i, pos, log2_scale, ff, freq_scale, yarn, &c);
        int ia = neox ? i : 2 * i, ib = neox ? i + n_pairs : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            __global float *p = row + h * head_dim;
            float a = p[ia], b = p[ib], ra, rb;
            CLF_ROT(a, b, c, s, ra, rb);
            p[ia] = ra;
            p[ib] = rb;
        }
    }
}


__kernel void rope_norm_f32(__global float *x, const ulong x_off, const int row_stride, const int col0,
                            const int n_heads, const int head_dim, const int n_rot, const int pos0,
                            const int n_tokens, const float log2_scale, const float freq_scale,
                            __global const float *ff, const ulong ff_off, const float4 yarn) {
    if ((int)get_global_id(1) >= n_tokens) return;
    int n_pairs = n_rot / 2, i0 = CLF_ROPE_PAIRS * get_global_id(0);
    float pos = (float)(pos0 + (int)get_global_id(1)) * (yarn.x != 0.0f ? 1.0f : freq_scale);
    __global float *row = rope_row(x, x_off, row_stride, col0);
    if (ff) ff += ff_off;
    if (i0 + CLF_ROPE_PAIRS > n_pairs) {
        rope_tail(row, i0, n_pairs, n_heads, head_dim, pos, log2_scale, ff, 0, freq_scale, yarn);
        return;
    }
    float8 c, s;
    if (yarn.x != 0.0f) s = rope_angles_yarn(i0, pos, log2_scale, ff, freq_scale, yarn, &c);
    else s = rope_angles(i0, pos, log2_scale, ff, &c);
    for (int h = 0; h < n_heads; h++) {
        __global float *p = row + h * head_dim + 2 * i0;
        float16 v = vload16(0, p);
        /* shuffle, not .even/.odd: Oclgrind's uninitialised-value check takes
         * a swizzle's element 11 for undefined (cl/common.cl CLF_HI8) */
        const float8 a = shuffle(v, (uint8)(0, 2, 4, 6, 8, 10, 12, 14)), b = shuffle(v, (uint8)(1, 3, 5, 7, 9, 11, 13, 15));
        float8 ra, rb;
        CLF_ROT(a, b, c, s, ra, rb);
        vstore16(shuffle2(ra, rb, (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)), 0, p);
    }
}

__kernel void rope_neox_f32(__global float *x, const ulong x_off, const int row_stride, const int col0,
                            const int n_heads, const int head_dim, const int n_rot, const int pos0,
                            const int n_tokens, const float log2_scale, const float freq_scale,
                            __global const float *ff, const ulong ff_off, const float4 yarn) {
    if ((int)get_global_id(1) >= n_tokens) return;
    int n_pairs = n_rot / 2, i0 = CLF_ROPE_PAIRS * get_global_id(0);
    float pos = (float)(pos0 + (int)get_global_id(1)) * (yarn.x != 0.0f ? 1.0f : freq_scale);
    __global float *row = rope_row(x, x_off, row_stride, col0);
    if (ff) ff += ff_off;
    if (i0 + CLF_ROPE_PAIRS > n_pairs) {
        rope_tail(row, i0, n_pairs, n_heads, head_dim, pos, log2_scale, ff, 1, freq_scale, yarn);
        return;
    }
    float8 c, s;
    if (yarn.x != 0.0f) s = rope_angles_yarn(i0, pos, log2_scale, ff, freq_scale, yarn, &c);
    else s = rope_angles(i0, pos, log2_scale, ff, &c);
    for (int h = 0; h < n_heads; h++) {
        __global float *p = row + h * head_dim + i0;
        float8 a = vload8(0, p), b = vload8(0, p + n_pairs), ra, rb;
        CLF_ROT(a, b, c, s, ra, rb);
        vstore8(ra, 0, p);
        vstore8(rb, 0, p + n_pairs);
    }
}

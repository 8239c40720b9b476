/* Row-wise normalizations: RMSNorm and softmax.
 *
 * One work-group of CLF_ROW_WG work-items owns a row. Each work-item walks
 * the row in float8 steps (explicit vectors: what CPU drivers vectorize),
 * strided by the group, and the group combines partial results in local
 * memory. On a CPU the host picks CLF_ROW_WG = 1 (one SIMD thread per row,
 * no barriers); on a GPU a wider group spreads the row over lanes. The
 * n % 8 tail is done by work-item 0. */

#ifndef CLF_ROW_WG
#define CLF_ROW_WG 1
#endif

/* Group-wide reductions of a per-work-item value; all work-items get the result. */
inline float clf_group_sum(float v, __local float *scratch) {
#if CLF_ROW_WG > 1
    int l = get_local_id(0);
    scratch[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = CLF_ROW_WG / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* scratch is reused by the next reduction */
#else
    (void)scratch;
#endif
    return v;
}

inline float clf_group_max(float v, __local float *scratch) {
#if CLF_ROW_WG > 1
    int l = get_local_id(0);
    scratch[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = CLF_ROW_WG / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] = fmax(scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
#else
    (void)scratch;
#endif
    return v;
}

inline float clf_hsum8(float8 v) {
    float4 s = v.lo + v.hi;
    return (s.x + s.y) + (s.z + s.w);
}

inline float clf_hmax8(float8 v) {
    float4 m = fmax(v.lo, v.hi);
    return fmax(fmax(m.x, m.y), fmax(m.z, m.w));
}

/* y = x / sqrt(mean(x^2) + eps) * w over rows of n, or y += that with acc
 * (a residual add after a post-norm). Row r is head r % heads of token
 * r / heads: it starts at x_off + (r / heads) * x_stride + (r % heads) * n
 * (likewise in y), so a whole tensor is heads = 1 with stride n, and Q and
 * K inside a fused QKV output are normed per head in place (QK-norm) in one
 * launch: heads below `split` take weight w, the others w2. y may be x:
 * each row is read in full before the group barrier that precedes any write.
 * Rows below xq_rows (whole rows, heads = 1, n a multiple of 32, no acc)
 * are also written quantized for the int8 GEMVs that read them (cl/common.cl)
 * at xq + xq_off bytes, rows n / 32 blocks apart.
 * Global size rows * CLF_ROW_WG, local size CLF_ROW_WG; offsets in floats. */
__kernel void rmsnorm_f32(__global const float *x, const ulong x_off, const int x_stride, __global const float *w,
                          const ulong w_off, __global const float *w2, const ulong w2_off, __global float *y,
                          const ulong y_off, const int y_stride, const int n, const int heads, const int split,
                          const float eps, const int acc, __global uchar *xq, const ulong xq_off, const int xq_rows) {
    __local float scratch[CLF_ROW_WG];
    size_t r = get_group_id(0), t = r / heads, h = r % heads;
    int l = get_local_id(0), n8 = n / 8;
    x += x_off + t * (size_t)x_stride + h * (size_t)n;
    y += y_off + t * (size_t)y_stride + h * (size_t)n;
    w = (int)h < split ? w + w_off : w2 + w2_off;
    float8 a8 = 0.0f;
    for (int j = l; j < n8; j += CLF_ROW_WG) {
        float8 v = vload8(j, x);
        a8 = fma(v, v, a8);
    }
    float ss = clf_hsum8(a8);
    if (l == 0)
        for (int j = 8 * n8; j < n; j++) ss = fma(x[j], x[j], ss);
    ss = clf_group_sum(ss, scratch);
    float scale = rsqrt(ss / (float)n + eps);
    if (acc) {
        for (int j = l; j < n8; j += CLF_ROW_WG) vstore8(fma(vload8(j, x) * scale, vload8(j, w), vload8(j, y)), j, y);
        if (l == 0)
            for (int j = 8 * n8; j < n; j++) y[j] = fma(x[j] * scale, w[j], y[j]);
    } else {
        for (int j = l; j < n8; j += CLF_ROW_WG) vstore8(vload8(j, x) * scale * vload8(j, w), j, y);
        if (l == 0)
            for (int j = 8 * n8; j < n; j++) y[j] = x[j] * scale * w[j];
        if ((int)r < xq_rows) { /* the group's y is written: each work-item quantizes blocks of it */
            barrier(CLK_GLOBAL_MEM_FENCE);
            xq += xq_off + r * (size_t)(n / 32) * CLF_XQ_BYTES;
            for (int b = l; b < n / 32; b += CLF_ROW_WG)
                clf_xq_store32(vload16(2 * b, y), vload16(2 * b + 1, y), xq + (size_t)b * CLF_XQ_BYTES);
        }
    }
}

/* Softmax of each row in place, stable: exp(x - max) / sum. The running
 * max starts at -FLT_MAX rather than -INFINITY so nothing depends on
 * infinities surviving the build options; masked entries (CLF_NEG_BIG)
 * give exp(...) = 0. */
__kernel void softmax_f32(__global float *x, const ulong x_off, const int n) {
    __local float scratch[CLF_ROW_WG];
    size_t r = get_group_id(0);
    int l = get_local_id(0), n8 = n / 8;
    x += x_off + r * (size_t)n;
    float8 m8 = -FLT_MAX;
    for (int j = l; j < n8; j += CLF_ROW_WG) m8 = fmax(m8, vload8(j, x));
    float m = clf_hmax8(m8);
    if (l == 0)
        for (int j = 8 * n8; j < n; j++) m = fmax(m, x[j]);
    m = clf_group_max(m, scratch);
    float8 s8 = 0.0f;
    for (int j = l; j < n8; j += CLF_ROW_WG) {
        float8 e = exp(vload8(j, x) - m);
        vstore8(e, j, x);
        s8 += e;
    }
    float s = clf_hsum8(s8);
    if (l == 0)
        for (int j = 8 * n8; j < n; j++) {
            float e = exp(x[j] - m);
            x[j] = e;
            s += e;
        }
    /* s >= 1: the max element contributes exp(0) */
    float inv = 1.0f / clf_group_sum(s, scratch);
    for (int j = l; j < n8; j += CLF_ROW_WG) vstore8(vload8(j, x) * inv, j, x);
    if (l == 0)
        for (int j = 8 * n8; j < n; j++) x[j] *= inv;
}

/* Elementwise kernels. A work-item takes 16 consecutive elements as one
 * float16 (explicit vectors are what CPU drivers vectorize); the last
 * work-item of a row finishes a partial run element by element. Global
 * sizes are rounded up to a fixed local size (one compiled variant per
 * kernel), so work-items past the end return. Offsets are in floats. */

/* y = a + b over n elements; y may alias a or b. Global size >= ceil(n / 16). */
__kernel void add_f32(__global float *y, const ulong y_off, __global const float *a, const ulong a_off,
                      __global const float *b, const ulong b_off, const int n) {
    size_t i = 16 * get_global_id(0);
    if (i >= (size_t)n) return;
    y += y_off + i;
    a += a_off + i;
    b += b_off + i;
    if (i + 16 <= (size_t)n) {
        vstore16(vload16(0, a) + vload16(0, b), 0, y);
    } else {
        for (int j = 0; j < n - (int)i; j++) y[j] = a[j] + b[j];
    }
}

/* y[r, j] = unit(gu[r, j], gu[r, ff + j]): gu is a fused gate|up output
 * [rows x 2ff], y [rows x ff]; the unit is act(g)·u with act silu (SwiGLU)
 * or GELU (GeGLU), or gpt-oss's clamped SwiGLU (cl/common.cl). Rows
 * below xq_rows (ff a multiple of 32) are also written quantized for the
 * int8 GEMV of the down product (cl/common.cl) at xq + xq_off bytes.
 * A work-item takes 32 elements. Global size (>= ceil(ff / 32), rows). */
#define CLF_GLU_KERNEL(name, unit16, unit)                                                                    \
    __kernel void name(__global const float *gu, const ulong gu_off, __global float *y, const ulong y_off,    \
                       const int ff, __global uchar *xq, const ulong xq_off, const int xq_rows) {            \
        size_t j = 32 * get_global_id(0), r = get_global_id(1);                                               \
        if (j >= (size_t)ff) return;                                                                          \
        __global const float *g = gu + gu_off + r * 2 * (size_t)ff + j;                                       \
        __global const float *u = g + ff;                                                                     \
        y += y_off + r * (size_t)ff + j;                                                                      \
        if (j + 32 <= (size_t)ff) {                                                                           \
            const float16 ya = unit16(vload16(0, g), vload16(0, u)), yb = unit16(vload16(1, g), vload16(1, u)); \
            vstore16(ya, 0, y);                                                                               \
            vstore16(yb, 1, y);                                                                               \
            if ((int)r < xq_rows)                                                                             \
                clf_xq_store32(ya, yb, xq + xq_off + (r * (size_t)(ff / 32) + j / 32) * CLF_XQ_BYTES);        \
        } else {                                                                                              \
            for (int k = 0; k < ff - (int)j; k++) y[k] = unit(g[k], u[k]);                                   \
        }                                                                                                     \
    }
#define CLF_ACT_UNIT(act, g, u) (act(g) * (u))
#define CLF_SWIGLU16(g, u) CLF_ACT_UNIT(clf_silu16, g, u)
#define CLF_SWIGLU1(g, u) CLF_ACT_UNIT(clf_silu, g, u)
#define CLF_GEGLU16(g, u) CLF_ACT_UNIT(clf_gelu16, g, u)
#define CLF_GEGLU1(g, u) CLF_ACT_UNIT(clf_gelu, g, u)
CLF_GLU_KERNEL(swiglu_f32, CLF_SWIGLU16, CLF_SWIGLU1)
CLF_GLU_KERNEL(geglu_f32, CLF_GEGLU16, CLF_GEGLU1)
CLF_GLU_KERNEL(swiglu_oai_f32, clf_swiglu_oai16, clf_swiglu_oai)

/* y = a * s over n elements; y may be a. Global size >= ceil(n / 16). */
__kernel void scale_f32(__global float *y, const ulong y_off, __global const float *a, const ulong a_off,
                        const float s, const int n) {
    size_t i = 16 * get_global_id(0);
    if (i >= (size_t)n) return;
    y += y_off + i;
    a += a_off + i;
    if (i + 16 <= (size_t)n) {
        vstore16(vload16(0, a) * s, 0, y);
    } else {
        for (int j = 0; j < n - (int)i; j++) y[j] = a[j] * s;
    }
}

/* x[r, :] += b over rows of n elements (Q/K/V biases). Global size
 * (>= ceil(n / 16), rows). */
__kernel void add_rows_f32(__global float *x, const ulong x_off, __global const float *b, const ulong b_off,
                           const int n) {
    size_t j = 16 * get_global_id(0), r = get_global_id(1);
    if (j >= (size_t)n) return;
    x += x_off + r * (size_t)n + j;
    b += b_off + j;
    if (j + 16 <= (size_t)n) {
        vstore16(vload16(0, x) + vload16(0, b), 0, x);
    } else {
        for (int k = 0; k < n - (int)j; k++) x[k] += b[k];
    }
}

/* x's rows quantized for the int8 GEMVs (cl/common.cl) where no kernel of
 * its own produces them: xq + xq_off bytes, rows n / 32 blocks apart; x's
 * rows x_stride floats apart. Global size (n / 32 rounded up to the
 * work-group, rows): the padding's work-items do nothing. */
__kernel void quantize_xq_f32(__global const float *x, const ulong x_off, const int x_stride, __global uchar *xq,
                              const ulong xq_off, const int n) {
    const size_t b = get_global_id(0), r = get_global_id(1);
    if (b >= (size_t)(n / 32)) return;
    x += x_off + r * (size_t)x_stride + 32 * b;
    clf_xq_store32(vload16(0, x), vload16(1, x), xq + xq_off + (r * (size_t)(n / 32) + b) * CLF_XQ_BYTES);
}

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

/* silu(g) = g / (1 + exp(-g)); the exponent is clamped so a very negative
 * g gives 0 without relying on exp overflowing to infinity. */
inline float16 clf_silu16(float16 g) { return g / (1.0f + exp(fmin(-g, 80.0f))); }
inline float clf_silu(float g) { return g / (1.0f + exp(fmin(-g, 80.0f))); }

/* y[r, j] = silu(gu[r, j]) * gu[r, ff + j]: gu is a fused gate|up output
 * [rows x 2ff], y [rows x ff]. Global size (>= ceil(ff / 16), rows). */
__kernel void swiglu_f32(__global const float *gu, const ulong gu_off, __global float *y, const ulong y_off,
                         const int ff) {
    size_t j = 16 * get_global_id(0), r = get_global_id(1);
    if (j >= (size_t)ff) return;
    __global const float *g = gu + gu_off + r * 2 * (size_t)ff + j;
    __global const float *u = g + ff;
    y += y_off + r * (size_t)ff + j;
    if (j + 16 <= (size_t)ff) {
        vstore16(clf_silu16(vload16(0, g)) * vload16(0, u), 0, y);
    } else {
        for (int k = 0; k < ff - (int)j; k++) y[k] = clf_silu(g[k]) * u[k];
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

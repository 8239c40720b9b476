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

/* GELU, tanh approximation (GeGLU of Gemma; llama.cpp's ggml_gelu):
 * 0.5 g (1 + tanh(u)), u = sqrt(2/pi) g (1 + 0.044715 g^2), computed as
 * g / (1 + exp(-2u)), the same value without the cancellation of 1 + tanh
 * for negative g. g is clamped to +-10 inside u (the tanh is +-1 in float
 * there), so exp stays finite. */
#define CLF_GELU(T, g)                                                                                         \
    ((g) / (1.0f + exp(-1.5957691216057308f * clamp((g), (T)-10.0f, (T)10.0f) *                              \
                       (1.0f + 0.044715f * clamp((g), (T)-10.0f, (T)10.0f) * clamp((g), (T)-10.0f, (T)10.0f)))))
inline float16 clf_gelu16(float16 g) { return CLF_GELU(float16, g); }
inline float clf_gelu(float g) { return CLF_GELU(float, g); }

/* y[r, j] = act(gu[r, j]) * gu[r, ff + j]: gu is a fused gate|up output
 * [rows x 2ff], y [rows x ff]; act is silu (SwiGLU) or GELU (GeGLU).
 * Global size (>= ceil(ff / 16), rows). */
#define CLF_GLU_KERNEL(name, act16, act)                                                                      \
    __kernel void name(__global const float *gu, const ulong gu_off, __global float *y, const ulong y_off,    \
                       const int ff) {                                                                        \
        size_t j = 16 * get_global_id(0), r = get_global_id(1);                                               \
        if (j >= (size_t)ff) return;                                                                          \
        __global const float *g = gu + gu_off + r * 2 * (size_t)ff + j;                                       \
        __global const float *u = g + ff;                                                                     \
        y += y_off + r * (size_t)ff + j;                                                                      \
        if (j + 16 <= (size_t)ff) {                                                                           \
            vstore16(act16(vload16(0, g)) * vload16(0, u), 0, y);                                             \
        } else {                                                                                              \
            for (int k = 0; k < ff - (int)j; k++) y[k] = act(g[k]) * u[k];                                    \
        }                                                                                                     \
    }
CLF_GLU_KERNEL(swiglu_f32, clf_silu16, clf_silu)
CLF_GLU_KERNEL(geglu_f32, clf_gelu16, clf_gelu)

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

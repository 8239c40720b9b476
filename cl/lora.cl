/* A LoRA adapter's product for decode rows in one launch (models/lora.c,
 * launched by clf_lora_rows in host/compute/ops.c): for each row r of x,
 *     t = s · (A x_r)                         (A [w × in], t in local memory)
 *     y_r[col0 + i] += Σ_j B[i][j] · t[j]     (B [n_out × w], i < n_out)
 * A row-major and B transposed, F16 (lora_rows_f16) or F32 (lora_rows_f32);
 * w at most CLF_LORA_T_MAX.
 * The adapters are small (rank 16 on Q and V of a 135M model: 36 KiB of A,
 * 60 KiB of B a layer), so one group reading all of A and B costs less
 * than a second launch would: decode is launch-bound.
 *
 * One work-group per row (dim 1), get_local_size(0) work-items sharing
 * the row's t: 1 on a CPU (a SIMD thread, explicit vectors), 64 on a GPU.
 * Every sum runs in a fixed order that depends neither on the rows beside
 * it nor on the local size, so a row's result is the same in any batch. */

/* Widest stacked rank (3 parts of rank 128): wider adapters take the
 * two-product path (models/lora.c checks CLF_LORA_ROWS_MAX_WIDTH, equal). */
#define CLF_LORA_T_MAX 384

/* CLF_LORA_FP16_CLANG: 1 converts F16 with clang's __fp16 vectors (the
 * CPU's conversion instructions: the "cpu" matmul variant, where the
 * compiler is clang), 0 with integer ops (exact either way). */
#ifndef CLF_LORA_FP16_CLANG
#define CLF_LORA_FP16_CLANG 0
#endif
#if CLF_LORA_FP16_CLANG
/* 2-byte aligned: rows start anywhere */
typedef __fp16 clf_lora_h16v __attribute__((ext_vector_type(16), aligned(2)));
#define LORA_LOAD16_f16(p, k) __builtin_convertvector(*(const __global clf_lora_h16v *)((p) + (k)), float16)
#else
/* Exact half -> float for 16 lanes (zero, subnormal, inf and NaN included)
 * with integer ops: vload_half is a scalar software routine on some CPUs. */
inline float16 clf_lora_h16(ushort16 h) {
    uint16 u = convert_uint16(h);
    uint16 em = u & 0x7fffu;
    uint16 bits = (em << 13) + (uint16)(112u << 23);                /* rebias exponent 15 -> 127 */
    bits = select(bits, bits + (uint16)(112u << 23), em >= 0x7c00u); /* inf/NaN: exponent to 255 */
    float16 sub = convert_float16(em) * 0x1p-24f;                    /* zero and subnormals */
    float16 f = select(as_float16(bits), sub, em < 0x400u);
    return as_float16(as_uint16(f) | ((u & 0x8000u) << 16));
}
#define LORA_LOAD16_f16(p, k) clf_lora_h16(vload16(0, (p) + (k)))
#endif

/* 16 weights from p + k as floats, and one (the tails). */
#define LORA_LOAD1_f16(p, k) vload_half((k), (const __global half *)(p))
#define LORA_LOAD16_f32(p, k) vload16(0, (p) + (k))
#define LORA_LOAD1_f32(p, k) ((p)[k])

/* a [w × in] (A's rows), bt [w × n_out] (B transposed: t[j]'s column of
 * y is bt's row j, so the second step is vectors of outputs times one
 * t[j]). x and y: F32 rows at x_off, y_off floats (y_off at column col0),
 * rows x_stride, y_stride floats apart. Global size (local, rows). */
#define CLF_LORA_ROWS_KERNEL(sfx, T)                                                                          \
    __kernel void lora_rows_##sfx(__global const T *a, __global const T *bt, const int w, const int in,       \
                                  const int n_out, __global const float *x, const ulong x_off,                \
                                  const int x_stride, __global float *y, const ulong y_off, const int y_stride, \
                                  const float s) {                                                            \
        __local float t[CLF_LORA_T_MAX];                                                                      \
        const int lid = get_local_id(0), nl = get_local_size(0);                                              \
        const size_t r = get_global_id(1);                                                                    \
        x += x_off + r * (size_t)x_stride;                                                                    \
        y += y_off + r * (size_t)y_stride;                                                                    \
        /* t[j] = s · A[j] · x: 16 columns a step, then the tail */                                          \
        for (int j = lid; j < w; j += nl) {                                                                   \
            __global const T *aj = a + (size_t)j * in;                                                        \
            float16 acc = 0;                                                                                  \
            int k = 0;                                                                                        \
            for (; k + 16 <= in; k += 16) acc += LORA_LOAD16_##sfx(aj, k) * vload16(0, x + k);               \
            const float8 s8 = acc.lo + acc.hi;                                                                \
            const float4 s4 = s8.lo + s8.hi;                                                                  \
            float sum = (s4.x + s4.y) + (s4.z + s4.w);                                                        \
            for (; k < in; k++) sum += LORA_LOAD1_##sfx(aj, k) * x[k];                                       \
            t[j] = s * sum;                                                                                   \
        }                                                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                         \
        /* y[i .. i + 16] += Σ_j t[j] · Bᵀ[j][i .. i + 16], j in order; the tail one output at a time */     \
        for (int i = 16 * lid; i < n_out; i += 16 * nl) {                                                     \
            __global const T *bi = bt + i;                                                                    \
            if (i + 16 <= n_out) {                                                                            \
                float16 acc = 0;                                                                              \
                for (int j = 0; j < w; j++) acc += t[j] * LORA_LOAD16_##sfx(bi, (size_t)j * n_out);          \
                vstore16(vload16(0, y + i) + acc, 0, y + i);                                                  \
            } else {                                                                                          \
                for (int e = 0; e < n_out - i; e++) {                                                         \
                    float acc = 0;                                                                            \
                    for (int j = 0; j < w; j++) acc += t[j] * LORA_LOAD1_##sfx(bi, (size_t)j * n_out + e);   \
                    y[i + e] += acc;                                                                          \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }
CLF_LORA_ROWS_KERNEL(f16, ushort)
CLF_LORA_ROWS_KERNEL(f32, float)

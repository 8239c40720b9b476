/* Matrix products Y (+)= X · Wᵀ for CPU-like devices (PoCL): few big
 * work-items, each a register tile in explicit wide vectors, no local memory.
 *
 * Weights arrive re-laid by host/matmul.c into panels of 32 rows: panel p
 * holds rows [32p, 32p + 32) transposed, so the 32 weights of one column k
 * are contiguous (two float16 after conversion). Rows past the end of W are
 * zero. Per type, for panel p, column k, block b = k / 32, kk = k % 32:
 *   F32   float  W[(p*K + k)*32 + j]
 *   F16   half   W[(p*K + k)*32 + j]
 *   Q8_0  uint   W[((p*nb + b)*8 + g)*32 + j]: the 4 columns kk = 4g + i of
 *                row j, byte i holding kk = 4g + i;       S: d[(p*nb + b)*32 + j]
 *   Q4_x  uint   W[((p*nb + b)*4 + g)*32 + j]: the 8 columns kk = 8g + i of
 *                row j, byte i (i < 4) holding kk = 8g + i in its low nibble
 *                and kk = 8g + 4 + i in its high one;     S: Q4_0 d as Q8_0,
 *                Q4_1 d[(p*nb + b)*64 + j], m[(p*nb + b)*64 + 32 + j]
 * (the Q8_0 and Q4 dwords are 4 consecutive columns of one row (per nibble
 * half), as the integer dot product wants them; little-endian devices).
 * X is [n × K] and Y [n × rows], rows contiguous, offsets in floats.
 *
 * Options: TM, the token rows of a work-item's tile (GEMM and skinny
 * products); MG, how many such tiles a work-item takes in turn, so its
 * weight panel is read from memory once and then from cache;
 * CLF_FP16_CLANG=1 converts halves with the compiler's native __fp16
 * vectors (clang-based drivers) instead of the portable bit recipe;
 * CLF_X86_INT8=1 builds the Q8_0/Q4 GEMVs that quantize x to int8 and use
 * AVX-512BW integer multiply-adds (clang on x86 CPUs only). */

#ifndef TM
#define TM 8
#endif
#ifndef MG
#define MG 1
#endif

#if CLF_FP16_CLANG
typedef __fp16 clf_half16 __attribute__((ext_vector_type(16)));
/* p: 32-byte aligned (every panel column and scale run is). */
#define LOAD_H16(p) __builtin_convertvector(*(const __global clf_half16 *)(p), float16)
#else
/* Exact half -> float for 16 lanes (zero, subnormal, inf and NaN included)
 * with integer ops: vload_half is a scalar software routine on some CPUs. */
inline float16 clf_half16_to_float16(ushort16 h) {
    uint16 u = convert_uint16(h);
    uint16 em = u & 0x7fffu;
    uint16 bits = (em << 13) + (uint16)(112u << 23);                /* rebias exponent 15 -> 127 */
    bits = select(bits, bits + (uint16)(112u << 23), em >= 0x7c00u); /* inf/NaN: exponent to 255 */
    float16 sub = convert_float16(em) * 0x1p-24f;                    /* zero and subnormals */
    float16 f = select(as_float16(bits), sub, em < 0x400u);
    return as_float16(as_uint16(f) | ((u & 0x8000u) << 16));
}
#define LOAD_H16(p) clf_half16_to_float16(vload16(0, (const __global ushort *)(p)))
#endif

/* The weights of 32 rows at one column, as two float16 (rows 0-15, 16-31). */
#define LOAD_F32(w, k, w0, w1) (w0 = vload16(0, (w) + 32 * (k)), w1 = vload16(1, (w) + 32 * (k)))
#define LOAD_F16(w, k, w0, w1) (w0 = LOAD_H16((w) + 32 * (k)), w1 = LOAD_H16((w) + 32 * (k) + 16))

/* Rows of X a tile reads: past the last token they repeat it (never stored). */
#define TILE_BEGIN(X, xoff, n, K, m0, x)                                                      \
    const __global float *x[TM];                                                               \
    _Pragma("unroll") for (int i = 0; i < TM; i++) x[i] = X + xoff + (size_t)min(m0 + i, n - 1) * K

/* y[j] (+)= (a0, a1)[j] for j < nvalid: whole vectors when the panel is full. */
inline void clf_store32(__global float *y, float16 a0, float16 a1, int nvalid, int accumulate) {
    if (nvalid >= 32) {
        if (accumulate) {
            a0 += vload16(0, y);
            a1 += vload16(1, y);
        }
        vstore16(a0, 0, y);
        vstore16(a1, 1, y);
    } else {
        float t[32];
        vstore16(a0, 0, t);
        vstore16(a1, 1, t);
        for (int j = 0; j < nvalid; j++) y[j] = accumulate ? y[j] + t[j] : t[j];
    }
}

/* Y[m0 + i, 32p + j] (+)= tile, for the tokens that exist. */
#define TILE_STORE(Y, yoff, n, rows, m0, p, a0, a1, accumulate)                                 \
    _Pragma("unroll") for (int i = 0; i < TM; i++) if (m0 + i < n)                              \
        clf_store32(Y + yoff + (size_t)(m0 + i) * rows + 32 * p, a0[i], a1[i], rows - 32 * p, accumulate)

/* F32 and F16 products: one work-item per (panel, MG tiles of TM tokens);
 * global size (panels, ceil(n / (TM · MG))). */
#define DEFINE_FLOAT_MM(NAME, T, LOAD)                                                          \
    __kernel void NAME(__global const T *W, __global const float *X, const ulong xoff,          \
                       __global float *Y, const ulong yoff, const int n, const int rows,        \
                       const int K, const int accumulate) {                                     \
        const int p = get_global_id(0);                                                         \
        if (32 * p >= rows) return;                                                             \
        const __global T *w = W + (size_t)p * K * 32;                                           \
        for (int g = 0; g < MG; g++) {                                                          \
            const int m0 = (get_global_id(1) * MG + g) * TM;                                    \
            if (m0 >= n) return;                                                                \
            TILE_BEGIN(X, xoff, n, K, m0, x);                                                   \
            float16 a0[TM], a1[TM], w0, w1;                                                     \
            _Pragma("unroll") for (int i = 0; i < TM; i++) a0[i] = a1[i] = 0.0f;                \
            for (int k = 0; k < K; k++) {                                                       \
                LOAD(w, k, w0, w1);                                                             \
                _Pragma("unroll") for (int i = 0; i < TM; i++) {                                \
                    float16 v = x[i][k];                                                        \
                    a0[i] = fma(v, w0, a0[i]);                                                  \
                    a1[i] = fma(v, w1, a1[i]);                                                  \
                }                                                                               \
            }                                                                                   \
            TILE_STORE(Y, yoff, n, rows, m0, p, a0, a1, accumulate);                            \
        }                                                                                       \
    }

DEFINE_FLOAT_MM(mm_f32, float, LOAD_F32)
DEFINE_FLOAT_MM(mm_f16, ushort, LOAD_F16)

/* Quantized panels: per block, the scales (and Q4_1 minimums) of 32 rows;
 * per column the 32 weights dequantized as w = q*d + m. Q4 nibbles arrive as
 * f = 1 + q/16 (see QUANTS_Q4), so their (d, m) become (16d, m - 16d); Q4_0's
 * m = -8d gives -24d, and w = 16d*f - 24d is exact in float like the
 * reference d*(q - 8). */
#define SCALES_Q8_0(s, b, d0, d1, m0, m1) (d0 = LOAD_H16((s) + 32 * (b)), d1 = LOAD_H16((s) + 32 * (b) + 16))
#define SCALES_Q4_0(s, b, d0, d1, m0, m1)                                                        \
    (SCALES_Q8_0(s, b, d0, d1, m0, m1), m0 = -24.0f * d0, m1 = -24.0f * d1, d0 *= 16.0f, d1 *= 16.0f)
#define SCALES_Q4_1(s, b, d0, d1, m0, m1)                                                        \
    (d0 = 16.0f * LOAD_H16((s) + 64 * (b)), d1 = 16.0f * LOAD_H16((s) + 64 * (b) + 16),          \
     m0 = LOAD_H16((s) + 64 * (b) + 32) - d0, m1 = LOAD_H16((s) + 64 * (b) + 48) - d1)

/* Integer weights of 32 rows at column kk of block b, as float16 pairs.
 * Q8_0: byte kk % 4 of the column group's dwords, shifted to the top and
 * back down to sign-extend it. */
#define QUANTS_Q8(q, b, kk, q0, q1)                                                              \
    do {                                                                                        \
        const __global uint *qg = (q) + 256 * (b) + 32 * ((kk) / 4);                            \
        const uint sh = 24u - 8u * ((kk) % 4);                                                  \
        q0 = convert_float16(as_int16(vload16(0, qg) << sh) >> 24);                             \
        q1 = convert_float16(as_int16(vload16(1, qg) << sh) >> 24);                             \
    } while (0)
/* A nibble rotated into the top of a float mantissa of exponent 0 is
 * 1 + q/16, exactly: two integer ops where a conversion would take more. */
#define NIBBLE_F(v, sh) as_float16((rotate(v, (uint16)((19u - (sh)) & 31u)) & 0x00780000u) | 0x3f800000u)
#define QUANTS_Q4(q, b, kk, q0, q1)                                                              \
    do {                                                                                        \
        const __global uint *qg = (q) + 128 * (b) + 32 * ((kk) / 8);                            \
        const uint sh = 8 * ((kk) % 4) + 4 * ((kk) % 8 / 4);                                    \
        q0 = NIBBLE_F(vload16(0, qg), sh);                                                      \
        q1 = NIBBLE_F(vload16(1, qg), sh);                                                      \
    } while (0)

#define DEQ_Q8(q0, q1, d0, d1, m0, m1, w0, w1) (w0 = q0 * d0, w1 = q1 * d1)
#define DEQ_Q4(q0, q1, d0, d1, m0, m1, w0, w1) (w0 = fma(q0, d0, m0), w1 = fma(q1, d1, m1))

/* Quantized GEMM and skinny products, same grid as DEFINE_FLOAT_MM;
 * BLOCK_SIZE: elements of QT per (panel, block); KK_UNROLL: a pragma for
 * the column loop (Q8_0 by 4: a column group's dwords load once and the
 * shifts are constants, which keeps it as fast as the char layout was). */
#define DEFINE_QUANT_MM(NAME, QT, BLOCK_SIZE, SCALE_HALVES, SCALES, QUANTS, DEQ, KK_UNROLL)                   \
    __kernel void NAME(__global const QT *W, __global const ushort *S, __global const float *X,  \
                       const ulong xoff, __global float *Y, const ulong yoff, const int n,       \
                       const int rows, const int K, const int accumulate) {                     \
        const int p = get_global_id(0), nb = K / 32;                                            \
        if (32 * p >= rows) return;                                                             \
        const __global QT *q = W + (size_t)p * nb * BLOCK_SIZE;                                \
        const __global ushort *s = S + (size_t)p * nb * SCALE_HALVES;                           \
        for (int g = 0; g < MG; g++) {                                                          \
            const int m0 = (get_global_id(1) * MG + g) * TM;                                    \
            if (m0 >= n) return;                                                                \
            TILE_BEGIN(X, xoff, n, K, m0, x);                                                   \
            float16 a0[TM], a1[TM], d0, d1, m0v = 0.0f, m1v = 0.0f, q0, q1, w0, w1;              \
            _Pragma("unroll") for (int i = 0; i < TM; i++) a0[i] = a1[i] = 0.0f;                \
            for (int b = 0; b < nb; b++) {                                                      \
                SCALES(s, b, d0, d1, m0v, m1v);                                                 \
                KK_UNROLL for (int kk = 0; kk < 32; kk++) {                                     \
                    QUANTS(q, b, kk, q0, q1);                                                   \
                    DEQ(q0, q1, d0, d1, m0v, m1v, w0, w1);                                      \
                    const int k = 32 * b + kk;                                                  \
                    _Pragma("unroll") for (int i = 0; i < TM; i++) {                            \
                        float16 v = x[i][k];                                                    \
                        a0[i] = fma(v, w0, a0[i]);                                              \
                        a1[i] = fma(v, w1, a1[i]);                                              \
                    }                                                                           \
                }                                                                               \
            }                                                                                   \
            TILE_STORE(Y, yoff, n, rows, m0, p, a0, a1, accumulate);                            \
        }                                                                                       \
    }

DEFINE_QUANT_MM(mm_q8_0, uint, 256, 32, SCALES_Q8_0, QUANTS_Q8, DEQ_Q8, _Pragma("unroll 4"))
DEFINE_QUANT_MM(mm_q4_0, uint, 128, 32, SCALES_Q4_0, QUANTS_Q4, DEQ_Q4, )
DEFINE_QUANT_MM(mm_q4_1, uint, 128, 64, SCALES_Q4_1, QUANTS_Q4, DEQ_Q4, )

/* GEMV (one token): one work-item per panel, global size (panels). Four
 * independent accumulator pairs hide the FMA latency that a single token's
 * tile of 1 × 32 would expose. */
#define DEFINE_FLOAT_MV(NAME, T, LOAD)                                                          \
    __kernel void NAME(__global const T *W, __global const float *X, const ulong xoff,          \
                       __global float *Y, const ulong yoff, const int rows, const int K,        \
                       const int accumulate) {                                                  \
        const int p = get_global_id(0);                                                         \
        if (32 * p >= rows) return;                                                             \
        const __global T *w = W + (size_t)p * K * 32;                                           \
        const __global float *x = X + xoff;                                                     \
        float16 a[8], w0, w1;                                                                   \
        _Pragma("unroll") for (int u = 0; u < 8; u++) a[u] = 0.0f;                              \
        int k = 0;                                                                              \
        for (; k + 4 <= K; k += 4) {                                                            \
            _Pragma("unroll") for (int u = 0; u < 4; u++) {                                     \
                LOAD(w, k + u, w0, w1);                                                         \
                a[2 * u] = fma((float16)x[k + u], w0, a[2 * u]);                                \
                a[2 * u + 1] = fma((float16)x[k + u], w1, a[2 * u + 1]);                        \
            }                                                                                   \
        }                                                                                       \
        for (; k < K; k++) {                                                                    \
            LOAD(w, k, w0, w1);                                                                 \
            a[0] = fma((float16)x[k], w0, a[0]);                                                \
            a[1] = fma((float16)x[k], w1, a[1]);                                                \
        }                                                                                       \
        clf_store32(Y + yoff + 32 * p, (a[0] + a[2]) + (a[4] + a[6]), (a[1] + a[3]) + (a[5] + a[7]), \
                    rows - 32 * p, accumulate);                                                 \
    }

DEFINE_FLOAT_MV(mv_f32, float, LOAD_F32)
DEFINE_FLOAT_MV(mv_f16, ushort, LOAD_F16)

/* Quantized GEMV: per block, sum x·q in integers-as-floats first and scale
 * once: Σ x·(q·d + m) = d·Σ x·q + m·Σ x (with Q4's f for q, as above). */
#define BLOCK_APPLY_Q8(acc0, acc1, s0, s1, sx, d0, d1, m0, m1) \
    (acc0 = fma(s0, d0, acc0), acc1 = fma(s1, d1, acc1))
#define BLOCK_APPLY_Q4(acc0, acc1, s0, s1, sx, d0, d1, m0, m1) \
    (acc0 = fma(s0, d0, fma((float16)sx, m0, acc0)), acc1 = fma(s1, d1, fma((float16)sx, m1, acc1)))

#define DEFINE_QUANT_MV(NAME, QT, BLOCK_SIZE, SCALE_HALVES, SCALES, QUANTS, APPLY)             \
    __kernel void NAME(__global const QT *W, __global const ushort *S, __global const float *X,  \
                       const ulong xoff, __global float *Y, const ulong yoff, const int rows,    \
                       const int K, const int accumulate) {                                     \
        const int p = get_global_id(0), nb = K / 32;                                            \
        if (32 * p >= rows) return;                                                             \
        const __global QT *q = W + (size_t)p * nb * BLOCK_SIZE;                                \
        const __global ushort *s = S + (size_t)p * nb * SCALE_HALVES;                           \
        const __global float *x = X + xoff;                                                     \
        float16 acc0 = 0.0f, acc1 = 0.0f, d0, d1, m0 = 0.0f, m1 = 0.0f, q0, q1;                   \
        for (int b = 0; b < nb; b++) {                                                          \
            float16 t[8];                                                                       \
            _Pragma("unroll") for (int u = 0; u < 8; u++) t[u] = 0.0f;                           \
            _Pragma("unroll") for (int kk = 0; kk < 32; kk += 4) {                              \
                _Pragma("unroll") for (int u = 0; u < 4; u++) {                                 \
                    const float xv = x[32 * b + kk + u];                                         \
                    QUANTS(q, b, kk + u, q0, q1);                                               \
                    t[2 * u] = fma((float16)xv, q0, t[2 * u]);                                  \
                    t[2 * u + 1] = fma((float16)xv, q1, t[2 * u + 1]);                          \
                }                                                                               \
            }                                                                                   \
            const float16 xs = vload16(0, x + 32 * b) + vload16(1, x + 32 * b);                 \
            const float8 xs8 = xs.lo + xs.hi;                                                   \
            const float4 xs4 = xs8.lo + xs8.hi;                                                 \
            const float sx = (xs4.x + xs4.y) + (xs4.z + xs4.w);                                 \
            SCALES(s, b, d0, d1, m0, m1);                                                       \
            APPLY(acc0, acc1, (t[0] + t[2]) + (t[4] + t[6]), (t[1] + t[3]) + (t[5] + t[7]), sx, d0, d1, m0, m1); \
        }                                                                                       \
        clf_store32(Y + yoff + 32 * p, acc0, acc1, rows - 32 * p, accumulate);                  \
    }

DEFINE_QUANT_MV(mv_q8_0, uint, 256, 32, SCALES_Q8_0, QUANTS_Q8, BLOCK_APPLY_Q8)
DEFINE_QUANT_MV(mv_q4_0, uint, 128, 32, SCALES_Q4_0, QUANTS_Q4, BLOCK_APPLY_Q4)
DEFINE_QUANT_MV(mv_q4_1, uint, 128, 64, SCALES_Q4_1, QUANTS_Q4, BLOCK_APPLY_Q4)

#if CLF_X86_INT8
/* Q8_0/Q4 GEMVs with x quantized to int8 per block of 32 (scale
 * max|x| / 127): pmaddubsw multiplies unsigned weight bytes by the signed x
 * bytes, four columns per dword lane, pmaddwd folds the pairs, so 64
 * products take one instruction where the float path needs four. The block
 * sums are exact integers; only x's rounding (~0.4% relative) separates the
 * result from the float kernels. A work-item takes NPPW panels (PPW for
 * Q4, PPW_Q8 for Q8_0) so the quantized x is shared; global size
 * (tokens, ceil(panels / NPPW)): a token per work-item, each computed as
 * the one-token GEMV computes it, and the tokens of a panel group run one
 * after another while its weights are in cache (batched decode). */
typedef char clf_char64 __attribute__((ext_vector_type(64)));
typedef short clf_short32 __attribute__((ext_vector_type(32)));

/* Σ over a block's 32 columns of q·xq for 16 rows: their dwords at q + 32g,
 * xw the block's xq, 4 columns per int. Each of the 32 shorts sums 8 pairs
 * of at most 2·15·127, so it stays below 32767. */
inline int16 clf_dot_q4_x8(const __global uint *q, const int *xw) {
    clf_short32 t = 0;
    for (int g = 0; g < 4; g++) {
        const uint16 v = vload16(0, q + 32 * g);
        t += __builtin_ia32_pmaddubsw512(__builtin_astype(v & 0x0f0f0f0fu, clf_char64),
                                         __builtin_astype((int16)xw[2 * g], clf_char64)) +
             __builtin_ia32_pmaddubsw512(__builtin_astype((v >> 4) & 0x0f0f0f0fu, clf_char64),
                                         __builtin_astype((int16)xw[2 * g + 1], clf_char64));
    }
    return __builtin_ia32_pmaddwd512(t, (clf_short32)1);
}

/* Σ over a block's 32 columns of q·xq for 16 Q8_0 rows: their dwords at
 * q + 32g, xw as above. The weights are signed, so as llama.cpp does:
 * |q| (−128 gives 0x80, 128 unsigned) times x with q's sign. A pair sums
 * to at most 2·128·127 < 32767, but two would not: each group's shorts go
 * to ints at once. */
inline int16 clf_dot_q8_x8(const __global uint *q, const int *xw) {
    int16 acc = 0;
    /* written so: vpabsb, x negated under w's sign mask (vpmovb2m, masked
     * vpsubb), 8 ops per 64 bytes; `neg ? -w : w`, rolled, took 10 and the
     * GEMV then fell behind the float one in decode */
#pragma unroll
    for (int g = 0; g < 8; g++) {
        const clf_char64 w = __builtin_astype(vload16(0, q + 32 * g), clf_char64);
        const clf_char64 x = __builtin_astype((int16)xw[g], clf_char64);
        const clf_char64 sx = w < (clf_char64)0 ? -x : x;
        acc += __builtin_ia32_pmaddwd512(__builtin_ia32_pmaddubsw512(__builtin_elementwise_abs(w), sx), (clf_short32)1);
    }
    return acc;
}

/* SCALES_RAW: the block's d and m (Q4_0: m = -8d) of 32 rows. */
#define SCALES_RAW_Q8_0(s, d0, d1, m0, m1) (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16))
#define SCALES_RAW_Q4_0(s, d0, d1, m0, m1) (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16), m0 = -8.0f * d0, m1 = -8.0f * d1)
#define SCALES_RAW_Q4_1(s, d0, d1, m0, m1)                                                       \
    (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16), m0 = LOAD_H16((s) + 32), m1 = LOAD_H16((s) + 48))

/* acc += Σq·xq · d·dx, and the minimums' m·Σx̂ where there are some. */
#define INT8_APPLY(acc, dot, sx, d, m, dx) (acc = fma(convert_float16(dot), d * dx, acc))
#define INT8_APPLY_M(acc, dot, sx, d, m, dx) (acc = fma(convert_float16(dot), d * dx, fma((float16)sx, m, acc)))

#define DEFINE_INT8_MV(NAME, NPPW, BLOCK_SIZE, SCALE_HALVES, SCALES_RAW, DOT, APPLY)             \
    __kernel void NAME(__global const uint *W, __global const ushort *S, __global const float *X, \
                       const ulong xoff, __global float *Y, const ulong yoff, const int rows,    \
                       const int K, const int accumulate) {                                     \
        const int p0 = get_global_id(1) * NPPW, nb = K / 32, np = (rows + 31) / 32;             \
        if (p0 >= np) return;                                                                   \
        const size_t r = get_global_id(0);                                                      \
        const __global float *x = X + xoff + r * K;                                             \
        float16 acc[NPPW][2], d0, d1, m0 = 0.0f, m1 = 0.0f;                                     \
        _Pragma("unroll") for (int j = 0; j < NPPW; j++) acc[j][0] = acc[j][1] = 0.0f;          \
        for (int b = 0; b < nb; b++) {                                                          \
            const float16 xa = vload16(0, x + 32 * b), xb = vload16(1, x + 32 * b);             \
            const float16 am = fmax(fabs(xa), fabs(xb));                                        \
            const float8 am8 = fmax(am.lo, am.hi);                                              \
            const float4 am4 = fmax(am8.lo, am8.hi);                                            \
            const float amax = fmax(fmax(am4.x, am4.y), fmax(am4.z, am4.w));                    \
            const float dx = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;           \
            const float16 ra = rint(xa * inv), rb = rint(xb * inv);                             \
            const int4 qa = as_int4(convert_char16(ra)), qb = as_int4(convert_char16(rb));      \
            const int xw[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};                 \
            /* m·Σx̂, not m·Σx: the error then scales with w, not with q */                      \
            const float16 xs = ra + rb;                                                         \
            const float8 xs8 = xs.lo + xs.hi;                                                   \
            const float4 xs4 = xs8.lo + xs8.hi;                                                 \
            const float sx = dx * ((xs4.x + xs4.y) + (xs4.z + xs4.w));                          \
            _Pragma("unroll") for (int j = 0; j < NPPW; j++) {                                  \
                if (p0 + j >= np) break;                                                        \
                const __global uint *q = W + ((size_t)(p0 + j) * nb + b) * BLOCK_SIZE;          \
                SCALES_RAW(S + ((size_t)(p0 + j) * nb + b) * SCALE_HALVES, d0, d1, m0, m1);      \
                APPLY(acc[j][0], DOT(q, xw), sx, d0, m0, dx);                                   \
                APPLY(acc[j][1], DOT(q + 16, xw), sx, d1, m1, dx);                              \
            }                                                                                   \
        }                                                                                       \
        _Pragma("unroll") for (int j = 0; j < NPPW; j++) if (p0 + j < np)                       \
            clf_store32(Y + yoff + r * rows + 32 * (p0 + j), acc[j][0], acc[j][1], rows - 32 * (p0 + j), accumulate); \
    }

DEFINE_INT8_MV(mvi_q8_0, PPW_Q8, 256, 32, SCALES_RAW_Q8_0, clf_dot_q8_x8, INT8_APPLY)
DEFINE_INT8_MV(mvi_q4_0, PPW, 128, 32, SCALES_RAW_Q4_0, clf_dot_q4_x8, INT8_APPLY_M)
DEFINE_INT8_MV(mvi_q4_1, PPW, 128, 64, SCALES_RAW_Q4_1, clf_dot_q4_x8, INT8_APPLY_M)
#endif

/* Panels back to row-major F32 W [rows × K] for the CLBlast backend: one
 * work-item per (panel, 32 columns); global size (panels, ceil(K / 32)). */
#define UNPACK_STORE(out, rows, K, p, k, w0, w1)                                                \
    do {                                                                                        \
        float t[32];                                                                            \
        vstore16(w0, 0, t);                                                                     \
        vstore16(w1, 1, t);                                                                     \
        for (int j = 0; j < 32 && 32 * p + j < rows; j++) out[(size_t)(32 * p + j) * K + (k)] = t[j]; \
    } while (0)

#define DEFINE_FLOAT_UNPACK(NAME, T, LOAD)                                                      \
    __kernel void NAME(__global const T *W, __global float *out, const int rows, const int K) { \
        const int p = get_global_id(0), k0 = 32 * get_global_id(1);                             \
        const __global T *w = W + (size_t)p * K * 32;                                           \
        float16 w0, w1;                                                                         \
        for (int k = k0; k < min(k0 + 32, K); k++) {                                            \
            LOAD(w, k, w0, w1);                                                                 \
            UNPACK_STORE(out, rows, K, p, k, w0, w1);                                           \
        }                                                                                       \
    }

DEFINE_FLOAT_UNPACK(unpack_f32, float, LOAD_F32)
DEFINE_FLOAT_UNPACK(unpack_f16, ushort, LOAD_F16)

#define DEFINE_QUANT_UNPACK(NAME, QT, BLOCK_SIZE, SCALE_HALVES, SCALES, QUANTS, DEQ)           \
    __kernel void NAME(__global const QT *W, __global const ushort *S, __global float *out,     \
                       const int rows, const int K) {                                           \
        const int p = get_global_id(0), b = get_global_id(1), nb = K / 32;                      \
        const __global QT *q = W + (size_t)p * nb * BLOCK_SIZE;                                \
        const __global ushort *s = S + (size_t)p * nb * SCALE_HALVES;                           \
        float16 d0, d1, m0 = 0.0f, m1 = 0.0f, q0, q1, w0, w1;                                   \
        SCALES(s, b, d0, d1, m0, m1);                                                           \
        for (int kk = 0; kk < 32; kk++) {                                                       \
            QUANTS(q, b, kk, q0, q1);                                                           \
            DEQ(q0, q1, d0, d1, m0, m1, w0, w1);                                                \
            UNPACK_STORE(out, rows, K, p, 32 * b + kk, w0, w1);                                 \
        }                                                                                       \
    }

DEFINE_QUANT_UNPACK(unpack_q8_0, uint, 256, 32, SCALES_Q8_0, QUANTS_Q8, DEQ_Q8)
DEFINE_QUANT_UNPACK(unpack_q4_0, uint, 128, 32, SCALES_Q4_0, QUANTS_Q4, DEQ_Q4)
DEFINE_QUANT_UNPACK(unpack_q4_1, uint, 128, 64, SCALES_Q4_1, QUANTS_Q4, DEQ_Q4)

/* Matrix products Y (+)= X · Wᵀ for CPU-like devices (PoCL, and any OpenCL
 * 1.2 CPU driver as cpu-portable): few big work-items, each a register tile
 * in explicit wide vectors, no local memory.
 *
 * Where it comes from: the register-tiled GEMM of CPU BLAS kernels (a
 * work-item is one "micro-kernel": 32 weight rows × TM tokens held in
 * float16 accumulators, the weights streamed once per tile), with W
 * re-laid so a column's 32 weights are one or two vector loads; the int8
 * products follow llama.cpp's x86 dot products (x quantized per block of
 * 32 to int8, pmaddubsw/pmaddwd or vpdpbusd on the codes, one float update
 * per block). host/compute/matmul.c picks the kernel and grid,
 * host/compute/matmul_panels.c re-lays the weights.
 *
 * Indexing. W [rows × K] arrives in panels of 32 rows: panel p holds rows
 * [32p, 32p + 32) transposed, so the 32 weights of one column k are
 * contiguous; rows past the end of W are zero. Per type, for panel p,
 * column k, block b = k / 32, kk = k % 32, row j of the panel:
 *   F32   float  W[(p*K + k)*32 + j]
 *   F16   half   W[(p*K + k)*32 + j]   (BF16 the same with bfloat16 halves)
 *   Q8_0  uint   W[((p*nb + b)*8 + g)*32 + j]: the 4 columns kk = 4g + i of
 *                row j, byte i holding kk = 4g + i;       S: d[(p*nb + b)*32 + j]
 *   Q4_x  uint   W[((p*nb + b)*4 + g)*32 + j]: the 8 columns kk = 8g + i of
 *                row j, byte i (i < 4) holding kk = 8g + i in its low nibble
 *                and kk = 8g + 4 + i in its high one;     S: Q4_0 d as Q8_0,
 *                Q4_1 d[(p*nb + b)*64 + j], m[(p*nb + b)*64 + 32 + j]
 *   the rest     code bit planes and scale records (below, "The other types")
 * (the Q8_0 and Q4 dwords are 4 consecutive columns of one row (per nibble
 * half), as the integer dot product wants them; little-endian devices).
 * nb = K / 32. In general a quantized panel's block b is 32·(QB + QH)
 * dwords and its scale records CLF_PANEL_REC(M_AT, SW) halves per QK
 * columns (cl/types.cl's row). X is [n × K] and Y [n × ldy] (the product
 * fills columns [0, rows) of Y at yoff: one part of a fused output), rows
 * contiguous, offsets in floats; the int8 forms read X as cl/common.cl's
 * int8 blocks (CLF_XQ_BYTES per 32 columns).
 *
 * Kernels, per type (T its name in cl/types.cl): gemm_T (GEMM and skinny
 * products), gemv_T (one token), gemv_T_rows (float types: several tokens,
 * each the GEMV's), unpack_T (panels back to F32 for another GEMM: clf_matmul_set_gemm)
 * and, for every type but the float ones when CLF_X86_INT8 is set,
 * gemv_T_i8, gemv_T_xq, gemv_T_swiglu_xq, gemv_T_geglu_xq (gemv_T_swiglu_oai_xq
 * with -DCLF_GLU_OAI=1) and gemm_T_xq.
 * Each kernel shape has one skeleton (its grid, signature, tile and store);
 * what a type changes is a piece named after its CPU family (the CPU
 * column: FLT, Q8, Q4, KQI, KQF), and the kernels are instantiated by
 * iterating the type table (MM_KERNELS). */

/* MM_IF(name)(x): x where CLF_MM_<name> is 1, nothing where it is 0. The
 * host builds a program per weight type, since PoCL reads every kernel of a
 * program on each start and compiles every one on the first: with a program
 * of all 14 types' kernels SmolLM2's warm start spent 0.44 s on kernels and
 * its first run 13 s, with one per type 0.29 s and 4.6 s (bench/RESULTS.md
 * 'The first hour'). x is collected unexpanded (MM_IF's result meets its
 * parentheses in the source), so a kernel's commas stay inside it and a
 * dropped one is never expanded; a missing flag is a build error, not an
 * empty program. */
#define MM_PASTE_(a, b) a##b
#define MM_PASTE(a, b) MM_PASTE_(a, b)
#define MM_IF_1(x) x
#define MM_IF_0(x)
#define MM_IF(name) MM_PASTE(MM_IF_, CLF_MM_##name)

/* ---- tunables ----------------------------------------------------------------
 * Every one is a -D option; the host passes all of them on every build
 * (host/compute/matmul.c cpu_options, from the device's tuning:
 * host/cl/tuning.c, `clinfer devices` lists the values). The defaults here
 * only serve a build without them (scripts/kernel_ir_diff.py, a hand run).
 *
 * TM: token rows of a work-item's register tile (GEMM and skinny
 *   products; the int8 GEMM's too). The host picks the smallest of 2, 4, 8,
 *   12 that covers n (cpu_tm), above 12 tokens the tuning's gemm_tm (table: 8),
 *   for the int8 GEMM at most int8_tm (8; 4 at 256 bits). Typical: 2-12. */
#ifndef TM
#define TM 8
#endif
/* MG: how many TM-token tiles a work-item takes in turn, so its weight panel
 *   is read from memory once and then from cache. Tuning's gemm_mg (table:
 *   16); typical 1-64. */
#ifndef MG
#define MG 1
#endif
/* PPW: weight panels (of 32 rows) per work-item of the int8 GEMVs of the Q4
 *   and code-plane types, which share one quantized x (gated units:
 *   KQ_GLU_PPW below). Tuning's int8_ppw (table: 4; 1 at 256 bits), lowered
 *   per launch where that evens the work over the compute units
 *   (balanced_ppw); 1 where there are no int8 kernels. Typical 1-8. */
#ifndef PPW
#define PPW 4
#endif
/* PPW_Q8: the same for Q8_0, whose panels are twice the bytes. Tuning's
 *   int8_ppw_q8 (table: 1). */
#ifndef PPW_Q8
#define PPW_Q8 1
#endif
/* CLF_FP16_CLANG: 1 converts halves with the compiler's native __fp16
 *   vectors (clang-based drivers: matmul=cpu), 0 with the portable bit
 *   recipe (matmul=cpu-portable). */
#ifndef CLF_FP16_CLANG
#define CLF_FP16_CLANG 0
#endif
/* CLF_X86_INT8: 512 or 256 builds the int8-activation GEMVs and GEMMs on
 *   x86 integer multiply-adds of that width (AVX-512BW or AVX2; clang on
 *   x86 CPUs only), 0 leaves them out. Tuning's int8_gemv and int8_width,
 *   resolved from the device's probed capabilities. */
#ifndef CLF_X86_INT8
#define CLF_X86_INT8 0
#endif
/* CLF_X86_VNNI (with CLF_X86_INT8): 1 takes the byte dot products with
 *   AVX512-VNNI's vpdpbusd, 2 with AVX-VNNI's VEX form (256 only), 0 with
 *   pmaddubsw/pmaddwd. Tuning's int8_vnni, resolved to what the CPU has. */
#ifndef CLF_X86_VNNI
#define CLF_X86_VNNI 0
#endif
/* CLF_MM_<name>, 1 or 0, for every type of cl/types.cl: which types'
 *   kernels the program holds (MM_IF above). No default: the host writes
 *   all of them (1 for the weight's type alone), and a missing one is a
 *   build error, not an empty program.
 *
 * Fixed by the layout, not tunable: 32 rows a panel (two float16 per
 * column), 32 columns a block; the float GEMV's 4 columns a step into 8
 * accumulators; the quantized float-path GEMM's column unroll (Q8_0 by 4,
 * MM_KK_UNROLL_<CPU>).
 *
 * Derived:
 *   panels          np = ceil(rows / 32); gemm/unpack grid (np, ceil(n / (TM·MG)))
 *                   and (np, ceil(K / 32)); gemv grid (np)
 *   int8 GEMV grid  (n, ceil(np / NPPW)), NPPW = I8_PPW_<CPU>: PPW_Q8 for Q8,
 *                   PPW otherwise
 *   gated units     (n, ceil(ff / 32 / G)), G = GLU_PPW_<CPU>: PPW_Q8, PPW,
 *                   KQ_GLU_PPW = (PPW + 1) / 2 for the code-plane types
 *   int8 x row      LOAD_XQ_ROW(K) = K / 32 · CLF_XQ_BYTES / 4 floats */

#if CLF_FP16_CLANG
typedef __fp16 clf_half16 __attribute__((ext_vector_type(16)));
/* p: 32-byte aligned (every panel column and scale run is). */
#define LOAD_H16(p) __builtin_convertvector(*(const __global clf_half16 *)(p), float16)
#else
/* cl/common.cl's exact integer conversion */
#define LOAD_H16(p) clf_half16_to_float16(vload16(0, (const __global ushort *)(p)))
#endif

/* The float types' weights of 32 rows at column k, as two float16 (rows
 * 0-15, 16-31): LOAD_<name>. BF16 panels are F16's with bfloat16 halves,
 * the top 16 bits of a float. */
#define LOAD_f32(w, k, w0, w1) (w0 = vload16(0, (w) + 32 * (k)), w1 = vload16(1, (w) + 32 * (k)))
#define LOAD_f16(w, k, w0, w1) (w0 = LOAD_H16((w) + 32 * (k)), w1 = LOAD_H16((w) + 32 * (k) + 16))
#define LOAD_bf16(w, k, w0, w1)                                                                  \
    (w0 = as_float16(convert_uint16(vload16(0, (w) + 32 * (k))) << 16),                         \
     w1 = as_float16(convert_uint16(vload16(1, (w) + 32 * (k))) << 16))

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

/* Y[m0 + i, 32p + j] (+)= tile, for the tokens that exist; Y's rows are
 * ldy apart. */
#define TILE_STORE(Y, yoff, ldy, n, rows, m0, p, a0, a1, accumulate)                            \
    _Pragma("unroll") for (int i = 0; i < TM; i++) if (m0 + i < n)                              \
        clf_store32(Y + yoff + (size_t)(m0 + i) * ldy + 32 * p, a0[i], a1[i], rows - 32 * p, accumulate)

/* ---- Q8 and Q4: the legacy 8- and 4-bit panels ---------------------------------
 *
 * Per block, the scales (and Q4_1 minimums) of 32 rows;
 * per column the 32 weights dequantized as w = q*d + m. Q4 nibbles arrive as
 * f = 1 + q/16 (see QUANTS_Q4 below), so their (d, m) become (16d, m - 16d); Q4_0's
 * m = -8d gives -24d, and w = 16d*f - 24d is exact in float like the
 * reference d*(q - 8). */
#define SCALES_q8_0(s, b, d0, d1, m0, m1) (d0 = LOAD_H16((s) + 32 * (b)), d1 = LOAD_H16((s) + 32 * (b) + 16))
#define SCALES_q4_0(s, b, d0, d1, m0, m1)                                                        \
    (SCALES_q8_0(s, b, d0, d1, m0, m1), m0 = -24.0f * d0, m1 = -24.0f * d1, d0 *= 16.0f, d1 *= 16.0f)
#define SCALES_q4_1(s, b, d0, d1, m0, m1)                                                        \
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
/* The GEMV's per-block update (MV_SUMS_Q): acc += d·Σx·q (+ m·Σx). */
#define BLOCK_APPLY_Q8(acc0, acc1, s0, s1, sx, d0, d1, m0, m1) \
    (acc0 = fma(s0, d0, acc0), acc1 = fma(s1, d1, acc1))
#define BLOCK_APPLY_Q4(acc0, acc1, s0, s1, sx, d0, d1, m0, m1) \
    (acc0 = fma(s0, d0, fma((float16)sx, m0, acc0)), acc1 = fma(s1, d1, fma((float16)sx, m1, acc1)))

/* ---- the code-plane types (Q5_0, Q5_1, IQ4_NL, the K-quants) ------------------
 *
 * The other types store each weight as an unsigned integer code c of QB + QH
 * bits, w = c·D + M with D and M per row and sub-block of SL columns (32 or
 * 16), from a scale record per row and super-block of SBK columns (32 or
 * 256). Per panel and 32-column block, the codes are bit planes of dwords
 * W[(b·(QB + QH) + dw)·32 + j], row j: a B-bit plane (QB bits at dword 0,
 * the QH bits above them at dword QB) holds column kk at bits
 * 8·(kk % 4) + (kk / 4 · B) % 8 of its dword kk / 4 · B / 8. So the 4-bit
 * plane is the Q4 layout above, and for any plane, byte i of a dword is
 * column 4c + i for some c: the integer dot takes x's bytes as they come.
 * The scale records, in halves S[(p·nsb + B)·SREC ...], are planes of 32
 * rows: 32 halves (d, dmin) or 32 dwords (64 halves: packed scale bytes,
 * as the file has them) each:
 *   Q5_0  d                 w = d (c − 16)
 *   Q5_1  d, m              w = d c + m
 *   Q4_K  d, dmin, 3 dwords w = d sc c − dmin m, 6-bit sc and m of each
 *   Q5_K  (as Q4_K)         sub-block of 32 packed in 12 bytes as in the file
 *   Q6_K  d, 4 dwords       w = d sc (c − 32), int8 sc per 16 columns
 *   Q2_K  d, dmin, 4 dwords w = d sc c − dmin m, sc and m nibbles per 16
 *   Q3_K  d, 3 dwords       w = d (sc − 32)(c − 4), 6-bit sc per 16 as the file
 * (Q3_K's code is the 2 low bits plus 4 when its hmask bit is set.) */

/* Code bits of column kk (a constant once unrolled) for rows 0-15 (h = 0)
 * or 16-31 of a block's B-bit plane starting at dword dw0. */
#define KQ_PLANE(q, dw0, B, kk, h)                                                               \
    ((vload16(h, (q) + 32 * ((dw0) + (kk) / 4 * (B) / 8)) >> (uint)(8 * ((kk) % 4) + (kk) / 4 * (B) % 8)) & \
     (uint)((1 << (B)) - 1))
#define KQ_CODE(q, QB, QH, kk, h) \
    (KQ_PLANE(q, 0, QB, kk, h) | ((QH) ? KQ_PLANE(q, QB, (QH) ? (QH) : 1, kk, h) << (uint)(QB) : (uint16)0))
/* The weight's integer value: the code, or for IQ4_NL and MXFP4 (GRID 1
 * and 2) the grid point it indexes: on x86 PoCL one vpermps at 512 bits, at
 * 256 (8 lanes a table) a vpermps in each half of the grid and a blend on
 * the code's bit 3; elsewhere arithmetic: for IQ4_NL a degree-6
 * polynomial in c − 7.5, rounded (least squares on the 16 points: within
 * 0.353 of each in float, so rounding is exact; PoCL's LLVM 15 scalarizes
 * OpenCL's shuffle with a variable mask, and its rint is a call), for
 * MXFP4 E2M1's magnitude from the code's low 3 bits (below) and its sign
 * from bit 3. MXFP4's values are biased by KQ_MXFP4_BIAS (v + 12, 0..24:
 * unsigned, so its integer dots are the unsigned codes' one vpdpbusd or
 * pmaddubsw a group, not |w| times x̂ under w's sign; kq_scales_mxfp4's
 * M = −12 D takes the bias off). KQ_GRID_*_0: no grid (never looked up,
 * but compiled). */
#define KQ_MXFP4_BIAS 12
#define KQ_GRID_LO_1 (float8)(-127.0f, -104.0f, -83.0f, -65.0f, -49.0f, -35.0f, -22.0f, -10.0f)
#define KQ_GRID_HI_1 (float8)(1.0f, 13.0f, 25.0f, 38.0f, 53.0f, 69.0f, 89.0f, 113.0f)
#define KQ_GRID_LO_2 (float8)(12.0f, 13.0f, 14.0f, 15.0f, 16.0f, 18.0f, 20.0f, 24.0f)
#define KQ_GRID_HI_2 (float8)(12.0f, 11.0f, 10.0f, 9.0f, 8.0f, 6.0f, 4.0f, 0.0f)
#define KQ_GRID_LO_0 KQ_GRID_LO_1
#define KQ_GRID_HI_0 KQ_GRID_HI_1
#if CLF_X86_INT8 == 512
#define KQ_LOOKUP(c, G) __builtin_ia32_permvarsf512((float16)(KQ_GRID_LO_##G, KQ_GRID_HI_##G), as_int16(c))
#elif CLF_X86_INT8 == 256
inline float8 kq_lookup8(int8 c, float8 lo, float8 hi) {
    return select(__builtin_ia32_permvarsf256(lo, c), __builtin_ia32_permvarsf256(hi, c), c > 7);
}
#define KQ_LOOKUP(c, G)                                                                          \
    (float16)(kq_lookup8(as_int16(c).lo, KQ_GRID_LO_##G, KQ_GRID_HI_##G),                       \
              kq_lookup8(as_int16(c).hi, KQ_GRID_LO_##G, KQ_GRID_HI_##G))
#else
#define KQ_LOOKUP(c, G) ((G) == 2 ? clf_mxfp4_lookup(c) : clf_iq4nl_lookup(c))
#endif
inline float16 clf_iq4nl_lookup(uint16 c) {
    const float16 t = convert_float16(as_int16(c)) - 7.5f;
    float16 p = fma(t, 3.783969805226661e-05f, 8.43454763526097e-05f);
    p = fma(p, t, -0.0018443544395267963f);
    p = fma(p, t, 0.07512453198432922f);
    p = fma(p, t, -0.06124495714902878f);
    p = fma(p, t, 11.508660316467285f);
    return (fma(p, t, -4.4609375f) + 12582912.0f) - 12582912.0f; /* rint: 1.5·2^23 leaves no fraction bits */
}
/* E2M1 doubled: the low 3 bits v are 0, 1, 2, 3 as they are, 4, 5 give
 * 2v − 4 (4, 6) and 6, 7 give 4v − 16 (8, 12); bit 3 the sign; plus the
 * bias. */
inline float16 clf_mxfp4_lookup(uint16 c) {
    const int16 v = as_int16(c & 7u);
    const int16 m = select(select(v, 2 * v - 4, v > 3), 4 * v - 16, v > 5);
    return convert_float16(select(m, -m, as_int16(c) > 7) + KQ_MXFP4_BIAS);
}
#define KQ_VALUE_F(q, QB, QH, kk, h, GRID) \
    ((GRID) ? KQ_LOOKUP(KQ_CODE(q, QB, QH, kk, h), GRID) : convert_float16(as_int16(KQ_CODE(q, QB, QH, kk, h))))

/* A record's plane of 32 dwords at half offset off, rows 16h.. 16h + 15. */
#define KQ_WORDS(rec, off, h) vload16(h, (const __global uint *)((rec) + (off)))
#define KQ_HALVES(rec, off, h) LOAD_H16((rec) + (off) + 16 * (h))

/* Types whose M is a fixed multiple of D (CPU KQI in cl/types.cl): w =
 * d·s·(c − CLF_OFF_T), s an integer per sub-block (kq_iscale: 1 where the
 * block has one scale). */
inline int16 kq_iscale_q5_0(const __global ushort *rec, int i, int h) {
    (void)rec, (void)i, (void)h;
    return 1;
}
#define kq_iscale_iq4_nl kq_iscale_q5_0
inline int16 kq_iscale_q6_k(const __global ushort *rec, int i, int h) {
    return as_int16(KQ_WORDS(rec, 32 + 64 * (i / 4), h) << (uint)(24 - 8 * (i % 4))) >> 24;
}
inline int16 kq_iscale_q3_k(const __global ushort *rec, int i, int h) {
    const uint16 lo = KQ_WORDS(rec, 32 + 64 * (i % 8 / 4), h) >> (uint)(8 * (i % 4) + 4 * (i / 8)) & 15u;
    const uint16 hi = KQ_WORDS(rec, 32 + 128, h) >> (uint)(8 * (i % 4) + 2 * (i / 4)) & 3u;
    return as_int16(lo | hi << 4) - 32;
}
/* Per type: D and M of sub-block i (of the super-block) for rows 16h.. */
inline void kq_scales_q5_0(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    (void)i; /* one scale per block */
    *D = KQ_HALVES(rec, 0, h);
    *M = -CLF_OFF_q5_0 * *D;
}
inline void kq_scales_iq4_nl(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    (void)i; /* one scale per block */
    *D = KQ_HALVES(rec, 0, h);
    *M = 0.0f;
}
/* MXFP4: D = 2^(e − 128) from the record's half (its low byte is the
 * block's E8M0 byte, the high one its first code byte: D_AT 0 in
 * cl/types.cl), decoded here as a float, so every exponent the type has
 * (2^-128 to 2^127) is exact: an f16 scale would hold only 2^-24 to 2^15.
 * The grid value (signed, |v| ≤ 12) plus the bias is the weight's integer:
 * w = (v + 12)·D − 12·D, exact in float (D a power of two).
 * It runs on the KQF kernels (D from here on every path; KQI's integer
 * form reads d as an f16 half, which E8M0 is not), an MXFP4 block being one
 * sub-block, so its float update per 32 columns is KQI's one update too. */
inline void kq_scales_mxfp4(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    (void)i; /* one scale per block */
    const uint16 e = convert_uint16(vload16(h, rec)) & 0xffu;
    *D = as_float16(select((e - 1u) << 23, (uint16)0x00200000u << e, e < 2u));
    *M = -KQ_MXFP4_BIAS * *D;
}
inline void kq_scales_q5_1(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    (void)i; /* one scale per block */
    *D = KQ_HALVES(rec, 0, h);
    *M = KQ_HALVES(rec, 32, h);
}
inline void kq_scales_q4_k(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    const uint16 u0 = KQ_WORDS(rec, 64, h), u1 = KQ_WORDS(rec, 128, h);
    uint16 sc, m;
    if (i < 4) {
        sc = u0 >> (uint)(8 * i) & 63u;
        m = u1 >> (uint)(8 * i) & 63u;
    } else {
        const uint16 u2 = KQ_WORDS(rec, 192, h);
        const uint t = 8 * (i - 4);
        sc = (u2 >> t & 15u) | (u0 >> (t + 6) & 3u) << 4;
        m = (u2 >> (t + 4) & 15u) | (u1 >> (t + 6) & 3u) << 4;
    }
    *D = KQ_HALVES(rec, 0, h) * convert_float16(as_int16(sc));
    *M = -KQ_HALVES(rec, 32, h) * convert_float16(as_int16(m));
}
#define kq_scales_q5_k kq_scales_q4_k
inline void kq_scales_q6_k(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    *D = KQ_HALVES(rec, 0, h) * convert_float16(kq_iscale_q6_k(rec, i, h));
    *M = -CLF_OFF_q6_k * *D;
}
inline void kq_scales_q2_k(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    const uint16 s = KQ_WORDS(rec, 64 + 64 * (i / 4), h) >> (uint)(8 * (i % 4));
    *D = KQ_HALVES(rec, 0, h) * convert_float16(as_int16(s & 15u));
    *M = -KQ_HALVES(rec, 32, h) * convert_float16(as_int16(s >> 4 & 15u));
}
inline void kq_scales_q3_k(const __global ushort *rec, int i, int h, float16 *D, float16 *M) {
    *D = KQ_HALVES(rec, 0, h) * convert_float16(kq_iscale_q3_k(rec, i, h));
    *M = -CLF_OFF_q3_k * *D;
}
#define KQ_SCALES(T, rec, i, D0, D1, M0, M1) (kq_scales_##T(rec, i, 0, &D0, &M0), kq_scales_##T(rec, i, 1, &D1, &M1))

/* Σ of x[0.. n) for n = 16 or 32. */
inline float clf_sum_x(const __global float *x, int n) {
    float16 s = vload16(0, x);
    if (n == 32) s += vload16(1, x);
    const float8 s8 = s.lo + s.hi;
    const float4 s4 = s8.lo + s8.hi;
    return (s4.x + s4.y) + (s4.z + s4.w);
}

/* The unpack kernels' store: 32 rows of column k into row-major out. */
#define UNPACK_STORE(out, rows, K, p, k, w0, w1)                                                \
    do {                                                                                        \
        float t[32];                                                                            \
        vstore16(w0, 0, t);                                                                     \
        vstore16(w1, 1, t);                                                                     \
        for (int j = 0; j < 32 && 32 * p + j < rows; j++) out[(size_t)(32 * p + j) * K + (k)] = t[j]; \
    } while (0)

/* ---- per-family pieces -------------------------------------------------------
 * Each takes the type's row as (T, QB, QH, QK, SUB, REC, GRID, BYTES): its
 * name, code bits, block and sub-block columns, scale-record halves
 * (CLF_PANEL_REC), IQ4_NL grid flag and float element bytes (cl/types.cl),
 * and works on the kernel's own p, b, nb, K, W, S:
 *   MM_WT_<CPU>(BYTES)  W's element type; MM_S_ARG_<CPU> the records' argument
 *   MM_PANEL_<CPU>      pointers to panel p's weights (and records)
 *   MM_COLUMNS_<CPU>    all K columns of the panel as 32 weights each (w0:
 *                       rows 0-15, w1: 16-31), handed to USE(k, w0, w1)
 *   MM_UNPACK_<CPU>     the same for the 32 columns of block b
 *   MV_SUMS_<CPU>       the GEMV's Σ x·w of the panel into A0, A1
 * The families keep their own pieces where their arithmetic differs (the
 * order of the sums is part of each kernel's result): floats have no
 * blocks, so columns run over K (which need not be a multiple of 32); Q8
 * and Q4 dequantize nibbles through the float mantissa (NIBBLE_F) and
 * scale per 32 columns; the code-plane types per sub-block, from records
 * shared by a super-block. */
#define MM_FLOAT_T_4 float
#define MM_FLOAT_T_2 ushort
#define MM_WT_FLT(BYTES) MM_PASTE(MM_FLOAT_T_, BYTES)
#define MM_WT_Q8(BYTES) uint
#define MM_WT_Q4(BYTES) uint
#define MM_WT_KQI(BYTES) uint
#define MM_WT_KQF(BYTES) uint
#define MM_S_ARG_FLT
#define MM_S_ARG_Q8 __global const ushort *S,
#define MM_S_ARG_Q4 __global const ushort *S,
#define MM_S_ARG_KQI __global const ushort *S,
#define MM_S_ARG_KQF __global const ushort *S,

/* Floats: column by column. The GEMV takes 4 columns a step into four
 * independent accumulator pairs, which hide the FMA latency a single
 * token's tile of 1 × 32 would expose. */
#define MM_PANEL_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES) const __global MM_WT_FLT(BYTES) *w = W + (size_t)p * K * 32
#define MM_COLUMNS_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE)                               \
    float16 w0, w1;                                                                             \
    for (int k = 0; k < K; k++) {                                                               \
        LOAD_##T(w, k, w0, w1);                                                                 \
        USE(k, w0, w1);                                                                         \
    }
#define MM_UNPACK_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE)                                \
    const int k0 = 32 * get_global_id(1);                                                      \
    MM_PANEL_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES);                                         \
    float16 w0, w1;                                                                             \
    for (int k = k0; k < min(k0 + 32, K); k++) {                                                \
        LOAD_##T(w, k, w0, w1);                                                                 \
        USE(k, w0, w1);                                                                         \
    }
#define MV_SUMS_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES, A0, A1)                               \
    float16 a[8], w0, w1;                                                                       \
    _Pragma("unroll") for (int u = 0; u < 8; u++) a[u] = 0.0f;                                  \
    int k = 0;                                                                                  \
    for (; k + 4 <= K; k += 4) {                                                                \
        _Pragma("unroll") for (int u = 0; u < 4; u++) {                                         \
            MV_PF_FLT(w + 32 * (k + u + MV_KB)); /* the column a block ahead (MV_PREFETCH) */   \
            LOAD_##T(w, k + u, w0, w1);                                                         \
            a[2 * u] = fma((float16)x[k + u], w0, a[2 * u]);                                    \
            a[2 * u + 1] = fma((float16)x[k + u], w1, a[2 * u + 1]);                            \
        }                                                                                       \
    }                                                                                           \
    for (; k < K; k++) {                                                                        \
        LOAD_##T(w, k, w0, w1);                                                                 \
        a[0] = fma((float16)x[k], w0, a[0]);                                                    \
        a[1] = fma((float16)x[k], w1, a[1]);                                                    \
    }                                                                                           \
    (void)0

/* The GEMV's result for row half h (A: the skeleton's accumulator; the
 * float family sums its four pairs in clf_store32's arguments, after Y's
 * address, as that kernel always did: the order is in the generated code). */
#define MV_RESULT_FLT(h, A) ((a[h] + a[2 + h]) + (a[4 + h] + a[6 + h]))
#define MV_RESULT_Q8(h, A) A
#define MV_RESULT_Q4(h, A) A
#define MV_RESULT_KQI(h, A) A
#define MV_RESULT_KQF(h, A) A

/* Q8 and Q4 (Q8_0, Q4_0, Q4_1): per block the scales of the type
 * (SCALES_<name>), per column the family's codes (QUANTS_<CPU>) and
 * dequantization (DEQ_<CPU>). MM_QBLOCK: the 32 columns of block b, the
 * column loop under UNROLL (the GEMM's MM_KK_UNROLL_<CPU>: Q8_0 by 4, so a
 * column group's dwords load once and the shifts are constants, which
 * keeps it as fast as the char layout was). The GEMV sums x·q per block in
 * integers-as-floats and scales once: Σ x·(q·d + m) = d·Σ x·q + m·Σ x
 * (BLOCK_APPLY_<CPU>; with Q4's f for q, as above). It stays apart from
 * the code-plane GEMV: one scale per 32 columns, no minimum term for Q8_0,
 * and the blocks addressed from the panel, not by a running pointer. */
#define MM_KK_UNROLL_Q8 _Pragma("unroll 4")
#define MM_KK_UNROLL_Q4
#define MM_PANEL_Q(T, QB, QH, QK, SUB, REC, GRID, BYTES)                                        \
    const __global uint *q = W + (size_t)p * nb * (32 * ((QB) + (QH)));                         \
    const __global ushort *s = S + (size_t)p * nb * (REC)
#define MM_PANEL_Q8 MM_PANEL_Q
#define MM_PANEL_Q4 MM_PANEL_Q
#define MM_QBLOCK(CPU, T, b, UNROLL, USE)                                                       \
    SCALES_##T(s, b, d0, d1, m0v, m1v);                                                         \
    UNROLL for (int kk = 0; kk < 32; kk++) {                                                    \
        QUANTS_##CPU(q, b, kk, q0, q1);                                                         \
        DEQ_##CPU(q0, q1, d0, d1, m0v, m1v, w0, w1);                                            \
        USE(32 * (b) + kk, w0, w1);                                                             \
    }
#define MM_COLUMNS_Q(CPU, T, USE)                                                               \
    float16 d0, d1, m0v = 0.0f, m1v = 0.0f, q0, q1, w0, w1;                                     \
    for (int b = 0; b < nb; b++) {                                                              \
        MM_QBLOCK(CPU, T, b, MM_KK_UNROLL_##CPU, USE)                                           \
    }
#define MM_UNPACK_Q(CPU, T, QB, QH, REC, USE)                                                   \
    MM_PANEL_Q(T, QB, QH, 0, 0, REC, 0, 0);                                                     \
    float16 d0, d1, m0v = 0.0f, m1v = 0.0f, q0, q1, w0, w1;                                     \
    MM_QBLOCK(CPU, T, b, , USE)
#define MV_SUMS_Q(CPU, T, A0, A1)                                                               \
    float16 d0, d1, m0 = 0.0f, m1 = 0.0f, q0, q1;                                               \
    for (int b = 0; b < nb; b++) {                                                              \
        float16 t[8];                                                                           \
        _Pragma("unroll") for (int u = 0; u < 8; u++) t[u] = 0.0f;                              \
        _Pragma("unroll") for (int kk = 0; kk < 32; kk += 4) {                                  \
            _Pragma("unroll") for (int u = 0; u < 4; u++) {                                     \
                const float xv = x[32 * b + kk + u];                                            \
                QUANTS_##CPU(q, b, kk + u, q0, q1);                                             \
                t[2 * u] = fma((float16)xv, q0, t[2 * u]);                                      \
                t[2 * u + 1] = fma((float16)xv, q1, t[2 * u + 1]);                              \
            }                                                                                   \
        }                                                                                       \
        const float16 xs = vload16(0, x + 32 * b) + vload16(1, x + 32 * b);                     \
        const float8 xs8 = xs.lo + xs.hi;                                                       \
        const float4 xs4 = xs8.lo + xs8.hi;                                                     \
        const float sx = (xs4.x + xs4.y) + (xs4.z + xs4.w);                                     \
        SCALES_##T(s, b, d0, d1, m0, m1);                                                       \
        BLOCK_APPLY_##CPU(A0, A1, (t[0] + t[2]) + (t[4] + t[6]), (t[1] + t[3]) + (t[5] + t[7]), sx, d0, d1, m0, m1); \
    }
#define MM_COLUMNS_Q8(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE) MM_COLUMNS_Q(Q8, T, USE)
#define MM_COLUMNS_Q4(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE) MM_COLUMNS_Q(Q4, T, USE)
#define MM_UNPACK_Q8(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE) MM_UNPACK_Q(Q8, T, QB, QH, REC, USE)
#define MM_UNPACK_Q4(T, QB, QH, QK, SUB, REC, GRID, BYTES, USE) MM_UNPACK_Q(Q4, T, QB, QH, REC, USE)
#define MV_SUMS_Q8(T, QB, QH, QK, SUB, REC, GRID, BYTES, A0, A1) MV_SUMS_Q(Q8, T, A0, A1)
#define MV_SUMS_Q4(T, QB, QH, QK, SUB, REC, GRID, BYTES, A0, A1) MV_SUMS_Q(Q4, T, A0, A1)

/* The code-plane types (KQI and KQF alike on the float path): w = c·D + M
 * per sub-block of SL columns, records per super-block of SBK columns
 * (SBK = QK, SL = SUB, SREC = REC). The GEMM's column loop unrolled, every
 * plane's shift a constant: 2048² × 64 tokens 7-24% faster (Q4_K 7%, Q6_K
 * 14%, Q3_K 24%). The GEMV: per sub-block the sums x·c in floats, then
 * Σ x·w = D·Σ x·c + M·Σ x. */
#define MM_PANEL_KQ(T, QB, QH, SBK, SL, SREC, GRID, BYTES)                                      \
    const __global uint *qp = W + (size_t)p * nb * 32 * ((QB) + (QH));                          \
    const __global ushort *s = S + (size_t)p * (K / (SBK)) * (SREC)
/* The GEMV's: q is its running block pointer (declared ahead of the sums,
 * as the kernel always had it: the order of a kernel's variables is the
 * order of its loop's values in the generated code). */
#define MV_PANEL_KQ(T, QB, QH, SBK, SL, SREC, GRID, BYTES)                                      \
    const __global uint *q = W + (size_t)p * nb * 32 * ((QB) + (QH));                           \
    const __global ushort *s = S + (size_t)p * (K / (SBK)) * (SREC)
#define MM_COLUMNS_KQ(T, QB, QH, SBK, SL, SREC, GRID, BYTES, USE)                               \
    float16 D0, D1, M0, M1;                                                                     \
    const __global uint *q = qp;                                                                \
    for (int b = 0; b < nb; b++, q += 32 * ((QB) + (QH))) {                                     \
        const __global ushort *rec = s + (size_t)(b / ((SBK) / 32)) * (SREC);                   \
        _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                 \
            KQ_SCALES(T, rec, b % ((SBK) / 32) * (32 / (SL)) + u, D0, D1, M0, M1);              \
            _Pragma("unroll") for (int c = u * (SL) / 4; c < (u + 1) * (SL) / 4; c++) {         \
                _Pragma("unroll") for (int i4 = 0; i4 < 4; i4++) {                              \
                    const int kk = 4 * c + i4, k = 32 * b + kk;                                 \
                    const float16 w0 = fma(KQ_VALUE_F(q, QB, QH, kk, 0, GRID), D0, M0);         \
                    const float16 w1 = fma(KQ_VALUE_F(q, QB, QH, kk, 1, GRID), D1, M1);         \
                    USE(k, w0, w1);                                                             \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
/* The unpack's block: the GEMM's columns, with the column loop flat and
 * its index taken after the weights (one block piece for both put the
 * index arithmetic elsewhere in the generated code). */
#define MM_UNPACK_KQ(T, QB, QH, SBK, SL, SREC, GRID, BYTES, USE)                                \
    const __global uint *q = W + ((size_t)p * nb + b) * 32 * ((QB) + (QH));                     \
    const __global ushort *rec = S + ((size_t)p * (K / (SBK)) + b / ((SBK) / 32)) * (SREC);     \
    float16 D0, D1, M0, M1;                                                                     \
    _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                     \
        KQ_SCALES(T, rec, b % ((SBK) / 32) * (32 / (SL)) + u, D0, D1, M0, M1);                  \
        _Pragma("unroll") for (int kk = u * (SL); kk < (u + 1) * (SL); kk++) {                  \
            const float16 w0 = fma(KQ_VALUE_F(q, QB, QH, kk, 0, GRID), D0, M0);                 \
            const float16 w1 = fma(KQ_VALUE_F(q, QB, QH, kk, 1, GRID), D1, M1);                 \
            USE(32 * b + kk, w0, w1);                                                           \
        }                                                                                       \
    }
#define MV_SUMS_KQ(T, QB, QH, SBK, SL, SREC, GRID, BYTES, A0, A1)                               \
    float16 D0, D1, M0, M1;                                                                     \
    for (int b = 0; b < nb; b++, q += 32 * ((QB) + (QH))) {                                     \
        const __global ushort *rec = s + (size_t)(b / ((SBK) / 32)) * (SREC);                   \
        _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                 \
            float16 t[8];                                                                       \
            _Pragma("unroll") for (int v = 0; v < 8; v++) t[v] = 0.0f;                          \
            _Pragma("unroll") for (int kk = u * (SL); kk < (u + 1) * (SL); kk++) {              \
                const float16 xv = x[32 * b + kk];                                              \
                t[kk % 4 * 2] = fma(xv, KQ_VALUE_F(q, QB, QH, kk, 0, GRID), t[kk % 4 * 2]);     \
                t[kk % 4 * 2 + 1] = fma(xv, KQ_VALUE_F(q, QB, QH, kk, 1, GRID), t[kk % 4 * 2 + 1]); \
            }                                                                                   \
            const float sx = clf_sum_x(x + 32 * b + u * (SL), SL);                              \
            KQ_SCALES(T, rec, b % ((SBK) / 32) * (32 / (SL)) + u, D0, D1, M0, M1);              \
            A0 = fma((t[0] + t[2]) + (t[4] + t[6]), D0, fma((float16)sx, M0, A0));              \
            A1 = fma((t[1] + t[3]) + (t[5] + t[7]), D1, fma((float16)sx, M1, A1));              \
        }                                                                                       \
    }
#define MV_PANEL_FLT MM_PANEL_FLT
#define MV_PANEL_Q8 MM_PANEL_Q
#define MV_PANEL_Q4 MM_PANEL_Q
#define MV_PANEL_KQI MV_PANEL_KQ
#define MV_PANEL_KQF MV_PANEL_KQ
#define MM_PANEL_KQI MM_PANEL_KQ
#define MM_PANEL_KQF MM_PANEL_KQ
#define MM_COLUMNS_KQI MM_COLUMNS_KQ
#define MM_COLUMNS_KQF MM_COLUMNS_KQ
#define MM_UNPACK_KQI MM_UNPACK_KQ
#define MM_UNPACK_KQF MM_UNPACK_KQ
#define MV_SUMS_KQI MV_SUMS_KQ
#define MV_SUMS_KQF MV_SUMS_KQ

/* ---- the float-activation kernels: one skeleton per shape ------------------- */

/* GEMM and skinny products: one work-item per (panel, MG tiles of TM
 * tokens); global size (panels, ceil(n / (TM · MG))). Each column's 32
 * weights are loaded (dequantized) once for the tile's TM tokens. */
#define GEMM_USE(k, w0, w1)                                                                     \
    _Pragma("unroll") for (int i = 0; i < TM; i++) {                                            \
        float16 v = x[i][k];                                                                    \
        a0[i] = fma(v, w0, a0[i]);                                                              \
        a1[i] = fma(v, w1, a1[i]);                                                              \
    }
#define DEFINE_GEMM(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES)                                  \
    __kernel void gemm_##T(__global const MM_WT_##CPU(BYTES) *W, MM_S_ARG_##CPU __global const float *X, \
                           const ulong xoff, __global float *Y, const ulong yoff, const int n,  \
                           const int ldy, const int rows, const int K, const int accumulate) {  \
        const int p = get_global_id(0), nb = K / 32;                                            \
        if (32 * p >= rows) return;                                                             \
        MM_PANEL_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES);                                   \
        for (int g = 0; g < MG; g++) {                                                          \
            const int m0 = (get_global_id(1) * MG + g) * TM;                                    \
            if (m0 >= n) return;                                                                \
            TILE_BEGIN(X, xoff, n, K, m0, x);                                                   \
            float16 a0[TM], a1[TM];                                                             \
            _Pragma("unroll") for (int i = 0; i < TM; i++) a0[i] = a1[i] = 0.0f;                \
            MM_COLUMNS_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES, GEMM_USE)                    \
            TILE_STORE(Y, yoff, ldy, n, rows, m0, p, a0, a1, accumulate);                       \
        }                                                                                       \
    }

/* GEMV (one token): one work-item per panel, global size (panels). */
#define DEFINE_GEMV(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES)                                  \
    __kernel void gemv_##T(__global const MM_WT_##CPU(BYTES) *W, MM_S_ARG_##CPU __global const float *X, \
                           const ulong xoff, __global float *Y, const ulong yoff, const int rows, \
                           const int K, const int accumulate) {                                 \
        const int p = get_global_id(0), nb = K / 32;                                            \
        if (32 * p >= rows) return;                                                             \
        MV_PANEL_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES);                                   \
        const __global float *x = X + xoff;                                                     \
        float16 acc0 = 0.0f, acc1 = 0.0f;                                                       \
        MV_SUMS_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES, acc0, acc1);                        \
        clf_store32(Y + yoff + 32 * p, MV_RESULT_##CPU(0, acc0), MV_RESULT_##CPU(1, acc1), rows - 32 * p, accumulate); \
    }

/* Float weights' rows of several tokens, each the GEMV's (clf_matmul_rowwise
 * of 2+ rows: a speculative step's verify rows, sequences decoded
 * together): one work-item per (panel, ROWS_PW tokens), global size
 * (panels, ceil(n / ROWS_PW)). Each token's 8 accumulator chains run over
 * the panel as MV_SUMS_FLT sums one token's (four columns a step into four
 * pairs, the tail into the first, the four added as MV_RESULT_FLT), so a
 * row is bit for bit the GEMV's; a lone token takes MV_SUMS_FLT itself.
 * The tokens go in groups by count (MV_GROUP_FLT):
 *   2, 3 (6 = 3 + 3)  MV_SUMSN_FLT: one pass over the panel, both halves'
 *                     chains in registers (3 × 8 + 2 weight vectors)
 *   4, 5 (7 = 4 + 3,  MV_SUMSH_FLT: the panel in blocks of MV_KB columns;
 *   8 = 4 + 4)        per block, rows 0-15 of every token, then rows 16-31
 *                     (one half's chains, 4 a token, fit the registers; the
 *                     other half's wait in the stack between blocks)
 * The split by halves converts each weight once (a pair of passes over
 * the panel, 3 + 2, converted it twice), and the blocks keep the panel's
 * stream from memory going through every pass: the second half reads its
 * block from L1, where the whole-panel passes waited on L2 and left the
 * memory idle. Both prefetch the weights MV_KB columns ahead
 * (MV_PREFETCH): the hardware's stream prefetcher alone left the loads
 * waiting on memory (bench/RESULTS.md, issue 43's F16 verify rows). The
 * GEMM's token tile (TM) sums in another order and, at 2 tokens, has 4
 * chains, bound by the FMA latency. Quantized types take the
 * int8 kernels (their rows are already the GEMV's). */
#define ROWS_PW 8
#define MV_KB 128 /* columns a block: 8 KiB of F16 weights, in L1 for the second half */
/* A hint to fetch the cache line at global address p (no fault, no effect
 * on results): the cpu variant only (CLF_FP16_CLANG: PoCL's clang), where
 * OpenCL's prefetch() is empty; clang's builtin takes a generic pointer, so
 * the address goes through an integer (PoCL's global and private pointers
 * share one flat space). cpu-portable stays plain OpenCL C 1.2 (Oclgrind,
 * which runs it, has no llvm.prefetch). */
#if CLF_FP16_CLANG
#define MV_PREFETCH(p) __builtin_prefetch((const void *)(size_t)(p), 0, 3)
#else
#define MV_PREFETCH(p) ((void)0)
#endif
/* The one-token GEMV's (MV_SUMS_FLT) prefetch, MV_KB columns ahead too. */
#ifndef MV_PF
#define MV_PF 1
#endif
#define MV_PF_FLT(p) if (MV_PF) MV_PREFETCH(p)
/* One half (h: rows 0-15 or 16-31) of 32 rows' weights at column k. */
#define LOADH_f32(w, k, h) vload16(h, (w) + 32 * (k))
#define LOADH_f16(w, k, h) LOAD_H16((w) + 32 * (k) + 16 * (h))
#define LOADH_bf16(w, k, h) as_float16(convert_uint16(vload16(h, (w) + 32 * (k))) << 16)
/* Token r's chains A[r][0..7] (the GEMV's a[]) += x_r[k] · the weights at
 * column k: A[r][2u + h] takes half h of column k (u: k's place in its step). */
#define MV_FMA_FLT(R, xs, A, k, u, h, wv)                                                       \
    _Pragma("unroll") for (int r = 0; r < (R); r++) A[r][2 * (u) + (h)] = fma((float16)xs[r][k], wv, A[r][2 * (u) + (h)])
/* The tail (K mod 4 columns) into the first pair, and the chains' start. */
#define MV_TAIL_FLT(T, R, xs, A, k0)                                                            \
    for (int k = (k0); k < K; k++) {                                                            \
        float16 w0, w1;                                                                         \
        LOAD_##T(w, k, w0, w1);                                                                 \
        MV_FMA_FLT(R, xs, A, k, 0, 0, w0);                                                      \
        MV_FMA_FLT(R, xs, A, k, 0, 1, w1);                                                      \
    }
#define MV_ZERO_FLT(R, A)                                                                       \
    float16 A[R][8];                                                                            \
    _Pragma("unroll") for (int r = 0; r < (R); r++) _Pragma("unroll") for (int u = 0; u < 8; u++) A[r][u] = 0.0f
/* R tokens' chains (x rows xs[0..R-1]) in one pass, both halves a column. */
#define MV_SUMSN_FLT(T, R, xs, A)                                                               \
    MV_ZERO_FLT(R, A);                                                                          \
    for (int k = 0; k + 4 <= K; k += 4) {                                                       \
        _Pragma("unroll") for (int u = 0; u < 4; u++) {                                         \
            float16 w0, w1;                                                                     \
            MV_PREFETCH(w + 32 * (k + u + MV_KB)); /* the column a block ahead */               \
            LOAD_##T(w, k + u, w0, w1);                                                         \
            MV_FMA_FLT(R, xs, A, k + u, u, 0, w0);                                              \
            MV_FMA_FLT(R, xs, A, k + u, u, 1, w1);                                              \
        }                                                                                       \
    }                                                                                           \
    MV_TAIL_FLT(T, R, xs, A, K & ~3)
/* The same by blocks of MV_KB columns and halves (each chain still takes
 * its columns in order, so the sums are MV_SUMSN_FLT's). */
#define MV_SUMSH_FLT(T, R, xs, A)                                                               \
    MV_ZERO_FLT(R, A);                                                                          \
    for (int kb = 0; kb < (K & ~3); kb += MV_KB) {                                              \
        const int ke = min(kb + MV_KB, K & ~3);                                                 \
        _Pragma("unroll") for (int h = 0; h < 2; h++) {                                         \
            for (int k = kb; k < ke; k += 4) {                                                  \
                _Pragma("unroll") for (int u = 0; u < 4; u++) {                                 \
                    if (h) MV_PREFETCH(w + 32 * (k + u + MV_KB)); /* the next block's column */  \
                    const float16 wv = LOADH_##T(w, k + u, h);                                  \
                    MV_FMA_FLT(R, xs, A, k + u, u, h, wv);                                      \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
    MV_TAIL_FLT(T, R, xs, A, K & ~3)
/* Token m + r's row from its chains (MV_RESULT_FLT's sums). */
#define MV_STORE_FLT(R, A)                                                                      \
    _Pragma("unroll") for (int r = 0; r < (R); r++)                                             \
        clf_store32(y + (size_t)(m + r) * ldy, (A[r][0] + A[r][2]) + (A[r][4] + A[r][6]),       \
                    (A[r][1] + A[r][3]) + (A[r][5] + A[r][7]), rows - 32 * p, accumulate)
/* R tokens from m on by SUMS (MV_SUMSN_FLT or MV_SUMSH_FLT). */
#define MV_GROUP_FLT(T, R, SUMS)                                                                \
    {                                                                                           \
        const __global float *xs[R];                                                            \
        _Pragma("unroll") for (int r = 0; r < (R); r++) xs[r] = X + xoff + (size_t)(m + r) * K; \
        SUMS(T, R, xs, A);                                                                      \
        MV_STORE_FLT(R, A);                                                                     \
        m += (R);                                                                               \
    }
#define GEMV_ROWS_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES)                                     \
    __kernel void gemv_##T##_rows(__global const MM_WT_FLT(BYTES) *W, __global const float *X, \
                                  const ulong xoff, __global float *Y, const ulong yoff, const int n, \
                                  const int ldy, const int rows, const int K, const int accumulate) { \
        const int p = get_global_id(0), m0 = get_global_id(1) * ROWS_PW, m1 = min(m0 + ROWS_PW, n); \
        if (32 * p >= rows) return;                                                             \
        MM_PANEL_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES);                                     \
        __global float *y = Y + yoff + 32 * p;                                                  \
        /* groups: 8 = 4 + 4, 7 = 4 + 3, 6 = 3 + 3, 5, 4, 3, 2, 1 */                            \
        int m = m0;                                                                             \
        while (m1 - m >= 7 || m1 - m == 4) MV_GROUP_FLT(T, 4, MV_SUMSH_FLT)                     \
        if (m1 - m == 5) MV_GROUP_FLT(T, 5, MV_SUMSH_FLT)                                       \
        while (m1 - m >= 3) MV_GROUP_FLT(T, 3, MV_SUMSN_FLT)                                    \
        if (m1 - m == 2) MV_GROUP_FLT(T, 2, MV_SUMSN_FLT)                                       \
        if (m < m1) {                                                                           \
            const __global float *x = X + xoff + (size_t)m * K;                                 \
            MV_SUMS_FLT(T, QB, QH, QK, SUB, REC, GRID, BYTES, acc0, acc1);                      \
            clf_store32(y + (size_t)m * ldy, MV_RESULT_FLT(0, a), MV_RESULT_FLT(1, a), rows - 32 * p, accumulate); \
        }                                                                                       \
    }
#define GEMV_ROWS_Q8(...)
#define GEMV_ROWS_Q4(...)
#define GEMV_ROWS_KQI(...)
#define GEMV_ROWS_KQF(...)
#define DEFINE_GEMV_ROWS(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES) GEMV_ROWS_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES)

/* Panels back to row-major F32 W [rows × K] for the CLBlast backend: one
 * work-item per (panel, block of 32 columns); global size (panels,
 * ceil(K / 32)). */
#define UNPACK_USE(k, w0, w1) UNPACK_STORE(out, rows, K, p, k, w0, w1)
#define DEFINE_UNPACK(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES)                                \
    __kernel void unpack_##T(__global const MM_WT_##CPU(BYTES) *W, MM_S_ARG_##CPU __global float *out, \
                             const int rows, const int K) {                                     \
        const int p = get_global_id(0), b = get_global_id(1), nb = K / 32;                      \
        MM_UNPACK_##CPU(T, QB, QH, QK, SUB, REC, GRID, BYTES, UNPACK_USE)                       \
    }

/* SHAPE(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES) for every type of the
 * table whose CLF_MM_<name> is 1. */
#define MM_ROW_(SHAPE, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    MM_IF(name)(SHAPE(CPU, name, QB, QH, QK, SUB, CLF_PANEL_REC(M_AT, SW), GRID, BYTES))
#define MM_KERNELS(SHAPE) CLF_TYPES(MM_ROW_, SHAPE)
MM_KERNELS(DEFINE_GEMM)
MM_KERNELS(DEFINE_GEMV)
MM_KERNELS(DEFINE_GEMV_ROWS)
MM_KERNELS(DEFINE_UNPACK)

#if CLF_X86_INT8
/* ---- int8 activations (CLF_X86_INT8) ------------------------------------------
 *
 * x quantized to int8 per block of 32 (scale max|x| / 127): pmaddubsw
 * multiplies unsigned weight bytes by the signed x bytes, four columns per
 * dword lane, pmaddwd folds the pairs, so 64 products take one instruction
 * where the float path needs four. The block sums are exact integers; only
 * x's rounding (~0.4% relative) separates the result from the float
 * kernels. The kernels' skeletons are at the end of the section. */
/* The integer products' primitives at the vector width CLF_X86_INT8 (512:
 * AVX-512BW, 256: AVX2). Every kernel below works on 16 rows at a time:
 * 64 bytes, 32 shorts or 16 ints (clf_char64, clf_short32, int16), one
 * register at 512 bits; at 256 each primitive is its AVX2 instruction on
 * the two halves, so the algorithms, their order of sums and their results
 * are the same bit for bit at either width, and only the register count
 * differs (the tuning table sets smaller tiles for 256). */
typedef char clf_char64 __attribute__((ext_vector_type(64)));
typedef short clf_short32 __attribute__((ext_vector_type(32)));

#if CLF_X86_INT8 == 512
/* pmaddubsw: unsigned bytes of u times signed bytes of s, adjacent pairs
 * summed to saturating shorts; pmaddwd: short pairs multiplied and summed
 * to ints; pshufb: bytes of t chosen by the low nibbles of i (per 128-bit
 * lane); permps: t's lanes chosen by i. */
#define CLF_MADDUBS(u, s) __builtin_ia32_pmaddubsw512(u, s)
#define CLF_MADDWD(a, b) __builtin_ia32_pmaddwd512(a, b)
#define CLF_PSHUFB(t, i) __builtin_ia32_pshufb512(t, i)
/* x's bytes under w's signs (x where w is 0 too: its product with |w| is 0
 * either way); AVX-512 has no psignb: a compare into a mask, a masked
 * subtract */
#define CLF_SIGN_OF(x, w) ((w) < (clf_char64)0 ? -(x) : (x))
#elif CLF_X86_INT8 == 256
typedef char clf_char32 __attribute__((ext_vector_type(32)));
typedef short clf_short16 __attribute__((ext_vector_type(16)));
/* F (256-bit, argument types A and B) on both halves of a and b, as R. */
#define CLF_HALVES(F, R, A, B, a, b)                                                                            \
    __builtin_astype((int16)(__builtin_astype(F(__builtin_astype(__builtin_astype(a, int16).lo, A),             \
                                                __builtin_astype(__builtin_astype(b, int16).lo, B)), int8),     \
                             __builtin_astype(F(__builtin_astype(__builtin_astype(a, int16).hi, A),             \
                                                __builtin_astype(__builtin_astype(b, int16).hi, B)), int8)),    \
                     R)
#define CLF_MADDUBS(u, s) CLF_HALVES(__builtin_ia32_pmaddubsw256, clf_short32, clf_char32, clf_char32, u, s)
#define CLF_MADDWD(a, b) CLF_HALVES(__builtin_ia32_pmaddwd256, int16, clf_short16, clf_short16, a, b)
#define CLF_PSHUFB(t, i) CLF_HALVES(__builtin_ia32_pshufb256, clf_char64, clf_char32, clf_char32, t, i)
/* vpsignb: 0 where w is 0 (where |w|·x is 0 anyway), one instruction where
 * the select above takes a compare, a subtract and a blend */
#define CLF_SIGN_OF(x, w) CLF_HALVES(__builtin_ia32_psignb256, clf_char64, clf_char32, clf_char32, x, w)
#endif

#if CLF_X86_VNNI
/* acc + Σ over each dword's 4 bytes of u's (unsigned) times s's (signed)
 * bytes: vpdpbusd, exact (no short stage, no saturation). Inline asm: PoCL
 * compiles for an LLVM CPU (skylake-avx512, haswell) that refuses the
 * builtin; the host asks for this only where its CPU has the instruction
 * (host/cl/tuning.c): CLF_X86_VNNI=1 AVX512-VNNI (EVEX; at 256 bits with
 * AVX512-VL), 2 AVX-VNNI (the VEX form of Alder Lake and Zen 5, ymm0-15). */
#if CLF_X86_INT8 == 512
inline int16 clf_dpbusd(int16 acc, uint16 u, int16 s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
}
/* The same with s's dword in global memory, broadcast by the instruction
 * ({1to16}), where LLVM would load and broadcast it in a register first. */
inline int16 clf_dpbusd_g(int16 acc, uint16 u, const __global int *s) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*s));
    return acc;
}
#else
inline int8 clf_dpbusd8(int8 acc, uint8 u, int8 s) {
#if CLF_X86_VNNI == 2
    __asm__("{vex} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
#else
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
#endif
    return acc;
}
inline int16 clf_dpbusd(int16 acc, uint16 u, int16 s) {
    return (int16)(clf_dpbusd8(acc.lo, u.lo, s.lo), clf_dpbusd8(acc.hi, u.hi, s.hi));
}
/* VEX has no embedded broadcast: s's dword broadcast in a register. */
inline int16 clf_dpbusd_g(int16 acc, uint16 u, const __global int *s) { return clf_dpbusd(acc, u, (int16)*s); }
#endif
#define KQ_DPBUSD_P(acc, u, xp) clf_dpbusd(acc, u, (int16)*(xp))
#define KQ_DPBUSD_G(acc, u, xp) clf_dpbusd_g(acc, u, xp)
#endif

/* Σ over a block's 32 columns of q·xq for 16 rows: their dwords at q + 32g,
 * xw the block's xq, 4 columns per int. Each of the 32 shorts sums 8 pairs
 * of at most 2·15·127, so it stays below 32767. */
inline int16 clf_dot_q4_x8(const __global uint *q, const int *xw) {
#if CLF_X86_VNNI
    int16 acc = 0, acc2 = 0; /* two chains: vpdpbusd's latency, not its rate, bounds one */
#pragma unroll
    for (int g = 0; g < 4; g++) {
        const uint16 v = vload16(0, q + 32 * g);
        acc = clf_dpbusd(acc, v & 0x0f0f0f0fu, (int16)xw[2 * g]);
        acc2 = clf_dpbusd(acc2, (v >> 4) & 0x0f0f0f0fu, (int16)xw[2 * g + 1]);
    }
    return acc + acc2;
#else
    clf_short32 t = 0;
    for (int g = 0; g < 4; g++) {
        const uint16 v = vload16(0, q + 32 * g);
        t += CLF_MADDUBS(__builtin_astype(v & 0x0f0f0f0fu, clf_char64),
                                         __builtin_astype((int16)xw[2 * g], clf_char64)) +
             CLF_MADDUBS(__builtin_astype((v >> 4) & 0x0f0f0f0fu, clf_char64),
                                         __builtin_astype((int16)xw[2 * g + 1], clf_char64));
    }
    return CLF_MADDWD(t, (clf_short32)1);
#endif
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
        const clf_char64 sx = CLF_SIGN_OF(x, w);
        /* pmaddubsw also where VNNI is on: vpdpbusd in this form made the
         * Q8_0 decode GEMVs ~20% slower (SmolLM2 Q8_0, kernel time 6.9-7.6
         * vs 5.9 ms a token, alternating; bench/RESULTS.md 'int8 prefill
         * GEMM and VNNI') */
        acc += CLF_MADDWD(CLF_MADDUBS(__builtin_elementwise_abs(w), sx), (clf_short32)1);
    }
    return acc;
}

/* x[0, 32) as int8 for the integer dot: x̂ 4 per int in xw, the scale dx,
 * dx·Σx̂ over each half and the block in sx[0..2], Σx̂ of each half as a
 * pair of shorts in sp (cl/common.cl's
 * block, quantized here: QUANT_X), or the same read from blocks a producer
 * kernel wrote (LOAD_XQ); the GEMVs come in both forms, *_i8 and *_xq, and
 * QUANT_X_ROW / LOAD_XQ_ROW give the floats between x's rows. */
inline void clf_quant_x32(const __global float *x, int *xw, float *dx, float *sx, int *sp) {
    const float16 xa = vload16(0, x), xb = vload16(1, x);
    float16 ra, rb;
    CLF_XQ_QUANT(xa, xb, ra, rb, *dx);
    const int4 qa = as_int4(convert_char16(ra)), qb = as_int4(convert_char16(rb));
    xw[0] = qa.x, xw[1] = qa.y, xw[2] = qa.z, xw[3] = qa.w, xw[4] = qb.x, xw[5] = qb.y, xw[6] = qb.z, xw[7] = qb.w;
    sx[0] = *dx * clf_xq_hsum16(ra);
    sx[1] = *dx * clf_xq_hsum16(rb);
    sx[2] = *dx * clf_xq_hsum16(ra + rb);
    *sp = clf_xq_pair(clf_xq_hsum16(ra), clf_xq_hsum16(rb));
}
inline void clf_load_xq32(const __global float *x, int *xw, float *dx, float *sx, int *sp) {
    const int8 w = vload8(0, (const __global int *)x);
    xw[0] = w.s0, xw[1] = w.s1, xw[2] = w.s2, xw[3] = w.s3, xw[4] = w.s4, xw[5] = w.s5, xw[6] = w.s6, xw[7] = w.s7;
    const float4 f = vload4(2, x);
    *dx = f.x, sx[0] = f.y, sx[1] = f.z, sx[2] = f.w;
    *sp = ((const __global int *)x)[CLF_XQ_PAIR];
}
#define QUANT_X(x, b, xw, dx, sx, sp) clf_quant_x32((x) + 32 * (b), xw, dx, sx, sp)
#define QUANT_X_ROW(K) (K)
#define LOAD_XQ(x, b, xw, dx, sx, sp) clf_load_xq32((x) + CLF_XQ_BYTES / 4 * (b), xw, dx, sx, sp)
#define LOAD_XQ_ROW(K) ((K) / 32 * (CLF_XQ_BYTES / 4))

/* SCALES_RAW: the block's d and m (Q4_0: m = -8d) of 32 rows. */
#define SCALES_RAW_q8_0(s, d0, d1, m0, m1) (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16))
#define SCALES_RAW_q4_0(s, d0, d1, m0, m1) (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16), m0 = -8.0f * d0, m1 = -8.0f * d1)
#define SCALES_RAW_q4_1(s, d0, d1, m0, m1)                                                       \
    (d0 = LOAD_H16(s), d1 = LOAD_H16((s) + 16), m0 = LOAD_H16((s) + 32), m1 = LOAD_H16((s) + 48))

/* acc += Σq·xq · d·dx, and the minimums' m·Σx̂ where there are some. */
#define INT8_APPLY(acc, dot, sx, d, m, dx) (acc = fma(convert_float16(dot), d * dx, acc))
#define INT8_APPLY_M(acc, dot, sx, d, m, dx) (acc = fma(convert_float16(dot), d * dx, fma((float16)sx, m, acc)))

/* h = act(g)·u of 32 rows: to Y, and its int8 block (the down GEMV's x) to yq. */
inline void glu_store32(float16 ha, float16 hb, __global float *y, __global uchar *yq) {
    vstore16(ha, 0, y);
    vstore16(hb, 1, y);
    clf_xq_store32(ha, hb, yq);
}

/* Code bits of columns 4c.. 4c + 3 (byte i: column 4c + i) of 16 rows from
 * a B-bit plane at dword dw0 (see the layout above), moved to bit `at` of
 * each byte: one shift and one mask. */
#define KQ_SHIFT_TO(v, from, at) ((from) >= (at) ? (v) >> (uint)((from) - (at)) : (v) << (uint)((at) - (from)))
#define KQ_BYTES(q, dw0, B, c, h, at)                                                            \
    (KQ_SHIFT_TO(vload16(h, (q) + 32 * ((dw0) + (c) * (B) / 8)), (c) * (B) % 8, at) &             \
     (uint)(0x01010101u * (((1u << (B)) - 1u) << (at))))

/* The codes of a block's column groups [c0, c0 + nc) for rows 16h..16h + 15
 * into u[0, nc): byte i of u[c - c0] is column 4c + i's unsigned code, or
 * (grid 1) IQ4_NL's signed grid value or (grid 2) MXFP4's biased unsigned
 * one, by pshufb. static: the loops unroll once inlined, where the counts
 * are constants (and u stays in registers). */
static inline void kq_unpack(const __global uint *q, int qb, int qh, int c0, int nc, int h, int grid, uint16 *u) {
    const int4 g4 = grid == 2 ? (int4)(0x0f0e0d0c, 0x18141210, 0x090a0b0c, 0x00040608)  /* MXFP4's + 12, 16 bytes */
                              : (int4)(0xbfad9881, 0xf6eaddcf, 0x26190d01, 0x71594535); /* IQ4_NL's grid */
    const clf_char64 g = __builtin_astype((int16)(g4, g4, g4, g4), clf_char64);
#pragma unroll
    for (int c = c0; c < c0 + nc; c++) {
        uint16 v = KQ_BYTES(q, 0, qb, c, h, 0);
        if (qh) v |= KQ_BYTES(q, qb, qh ? qh : 1, c, h, qb);
        u[c - c0] = grid ? __builtin_astype(CLF_PSHUFB(g, __builtin_astype(v, clf_char64)), uint16) : v;
    }
}

/* Σ over nc column groups of u[c]·x̂ (xw[c]: its 4 x̂) for 16 rows: codes
 * of at most `bits` bits, or (sgn) signed bytes, taken as |w| times x̂
 * with w's sign as llama.cpp does (clf_dot_q8_x8). With VNNI one vpdpbusd a
 * group; else pmaddubsw pairs summed in shorts, folded to ints by pmaddwd
 * once as many as a short holds are in (a pair is at most 2·63·127 for
 * 6-bit codes: two fit below 32767, four for 5 bits, eight for 4 or fewer;
 * a signed pair 2·128·127: one). Integer sums: exact either way. x̂ from
 * private ints (kq_dot_codes: the GEMVs) or straight from x's int8 block
 * in global memory (kq_dot_codes_g: the GEMMs, where each x̂ word is then
 * one broadcast load, not a scalar load and a register broadcast). */
#define DEFINE_KQ_DOT_CODES(NAME, XAS, DPX)                                                                 \
    static inline int16 NAME(const uint16 *u, XAS const int *xw, int nc, int bits, int sgn) {               \
        int16 acc = 0, acc2 = 0; /* VNNI: two chains past 4 groups, as clf_dot_q4_x8 */                     \
        KQ_DOT_CODES_BODY(DPX)                                                                              \
        return acc + acc2;                                                                                  \
    }
#if CLF_X86_VNNI
#define KQ_DOT_CODES_BODY(DPX)                                                                              \
    (void)bits;                                                                                             \
    _Pragma("unroll") for (int c = 0; c < nc; c++) {                                                        \
        if (sgn) {                                                                                          \
            const clf_char64 w = __builtin_astype(u[c], clf_char64), x = __builtin_astype((int16)xw[c], clf_char64); \
            const int16 d_ = clf_dpbusd(nc > 4 && c % 2 ? acc2 : acc, __builtin_astype(__builtin_elementwise_abs(w), uint16), \
                                        __builtin_astype(CLF_SIGN_OF(x, w), int16));              \
            if (nc > 4 && c % 2) acc2 = d_; else acc = d_;                                                  \
        } else if (nc > 4 && c % 2) {                                                                       \
            acc2 = DPX(acc2, u[c], xw + c);                                                                 \
        } else {                                                                                            \
            acc = DPX(acc, u[c], xw + c);                                                                   \
        }                                                                                                   \
    }
#else
#define KQ_DOT_CODES_BODY(DPX)                                                                              \
    const int widen = sgn || bits >= 7 ? 1 : bits == 6 ? 2 : bits == 5 ? 4 : 8;                            \
    _Pragma("unroll") for (int c0 = 0; c0 < nc; c0 += widen) {                                              \
        clf_short32 t = 0;                                                                                  \
        _Pragma("unroll") for (int c = c0; c < c0 + widen && c < nc; c++) {                                 \
            const clf_char64 w = __builtin_astype(u[c], clf_char64), x = __builtin_astype((int16)xw[c], clf_char64); \
            t += sgn ? CLF_MADDUBS(__builtin_elementwise_abs(w), CLF_SIGN_OF(x, w)) \
                     : CLF_MADDUBS(w, x);                                                   \
        }                                                                                                   \
        acc += CLF_MADDWD(t, (clf_short32)1);                                                \
    }
#endif
DEFINE_KQ_DOT_CODES(kq_dot_codes, , KQ_DPBUSD_P)
DEFINE_KQ_DOT_CODES(kq_dot_codes_g, __global, KQ_DPBUSD_G)

/* The dots' bits and sign for kq_unpack's bytes: IQ4_NL's are signed
 * (sgn: grid == 1), MXFP4's biased values (0..24) 5 bits, unsigned. */
#define KQ_DOT_BITS(bits, grid) ((grid) == 2 ? 5 : (bits))

/* Σ over columns [4c0, 4c0 + 4nc) of a block of code·x̂ for rows 16h... */
static inline int16 kq_dot_x8(const __global uint *q, const int *xw, int qb, int qh, int c0, int nc, int h, int grid) {
    uint16 u[8];
    kq_unpack(q, qb, qh, c0, nc, h, grid, u);
    return kq_dot_codes(u, xw + c0, nc, KQ_DOT_BITS(qb + qh, grid), grid == 1);
}

/* The code-plane types' I8_BLOCK (below): one 32-block b of panel P into
 * its two row halves A0, A1 (W, S, K, nb, b, xw, dx, sx, sp from the
 * kernel). Per sub-block
 * Σ x·w ≈ D·dx·Σ c·x̂ + M·dx·Σ x̂ (KQ_PANEL_FLOAT); where M is a multiple
 * of D (CLF_OFF_T), the block's sub-blocks are summed in integers first,
 * I = Σ_u s_u·Σ c·x̂ − OFF·Σ_u s_u·Σ x̂, then one update A += I·d·dx
 * (KQ_PANEL_INT), as llama.cpp sums a super-block (x here has a scale per
 * 32): Q6_K and Q3_K's 16-column sub-blocks took two float updates of four
 * operations per 32 columns. The CPU column picks the form: KQI the
 * integer one, KQF the float one (I8_BLOCK_<CPU>, MMI_TILE_<CPU>). */
/* Sub-block u's index in the super-block. */
#define KQ_SUB(SBK, SL, u) (b % ((SBK) / 32) * (32 / (SL)) + (u))
#define KQ_PANEL_FLOAT(T, QB, QH, SBK, SL, SREC, GRID, P, A0, A1)                                                       \
    do {                                                                                                                \
        const __global uint *q = W + ((size_t)(P) * nb + b) * 32 * ((QB) + (QH));                                       \
        const __global ushort *rec = S + ((size_t)(P) * (K / (SBK)) + b / ((SBK) / 32)) * (SREC);                       \
        float16 D0, D1, M0, M1;                                                                                         \
        _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                                         \
            KQ_SCALES(T, rec, KQ_SUB(SBK, SL, u), D0, D1, M0, M1);                                                      \
            const float su = (SL) == 16 ? sx[u] : sx[0] + sx[1];                                                        \
            const int c0 = u * (SL) / 4;                                                                                \
            A0 = fma(convert_float16(kq_dot_x8(q, xw, QB, QH, c0, (SL) / 4, 0, GRID)), D0 * dx, fma((float16)su, M0, A0));\
            A1 = fma(convert_float16(kq_dot_x8(q, xw, QB, QH, c0, (SL) / 4, 1, GRID)), D1 * dx, fma((float16)su, M1, A1));\
        }                                                                                                               \
    } while (0)
/* Σ_u KQ_OFF·s_u·Σx̂_u of 16 rows in one pmaddwd: each row's (OFF·s_0,
 * OFF·s_1) as shorts (SL = 32: one scale, over both halves' Σx̂) times
 * x's pair sp (|OFF·s| ≤ 4096, |Σx̂| ≤ 2032). */
#define KQ_OFF_PAIRS(T, SL, sc) \
    __builtin_astype((CLF_OFF_##T * (sc)[0] & 0xffff) | CLF_OFF_##T * (sc)[(SL) == 16] << 16, clf_short32)
#define KQ_OFFSETS(pairs, sp) CLF_MADDWD(pairs, __builtin_astype((int16)(sp), clf_short32))
#define KQ_PANEL_INT_HALF(T, QB, QH, SBK, SL, GRID, h, A)                                                               \
    do {                                                                                                                \
        int16 sc[32 / (SL)], I = 0;                                                                                     \
        _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                                         \
            sc[u] = kq_iscale_##T(rec, KQ_SUB(SBK, SL, u), h);                                                          \
            I += sc[u] * kq_dot_x8(q, xw, QB, QH, u * (SL) / 4, (SL) / 4, h, GRID);                                     \
        }                                                                                                               \
        if (CLF_OFF_##T) I -= KQ_OFFSETS(KQ_OFF_PAIRS(T, SL, sc), sp);                                                   \
        A = fma(convert_float16(I), KQ_HALVES(rec, 0, h) * dx, A);                                                      \
    } while (0)
#define KQ_PANEL_INT(T, QB, QH, SBK, SL, SREC, GRID, P, A0, A1)                                                         \
    do {                                                                                                                \
        const __global uint *q = W + ((size_t)(P) * nb + b) * 32 * ((QB) + (QH));                                       \
        const __global ushort *rec = S + ((size_t)(P) * (K / (SBK)) + b / ((SBK) / 32)) * (SREC);                       \
        KQ_PANEL_INT_HALF(T, QB, QH, SBK, SL, GRID, 0, A0);                                                             \
        KQ_PANEL_INT_HALF(T, QB, QH, SBK, SL, GRID, 1, A1);                                                             \
    } while (0)

/* The code-plane types' gated units (DEFINE_GEMV_GLU): a work-item takes
 * KQ_GLU_PPW gate panels and
 * their up panels: half of PPW, the bytes of a GEMV's work-item (PPW pairs
 * measured ~10% slower than the GEMV and the SwiGLU launch together). */
#define KQ_GLU_PPW ((PPW + 1) / 2)

/* int8 GEMM (prefill): X as int8 blocks (LOAD_XQ), one work-item per
 * (panel, MG tiles of TM tokens) as DEFINE_GEMM, so each block's codes
 * are unpacked once per tile: per (sub-block, row half), the codes into
 * registers, then for each token the integer dot and the float update the
 * GEMV makes (I8_BLOCK_<CPU>), in the
 * same order, so every token's row is bit for bit the int8 GEMV's. */
#define MMI_TILE_BEGIN(X, xoff, n, K, m0, x)                                                              \
    const __global float *x[TM];                                                                          \
    _Pragma("unroll") for (int i = 0; i < TM; i++) x[i] = X + xoff + (size_t)min(m0 + i, n - 1) * LOAD_XQ_ROW(K)
#define MMI_TILE_STORE(Y, yoff, ldy, n, rows, m0, p, a, accumulate)                                       \
    _Pragma("unroll") for (int i = 0; i < TM; i++) if (m0 + i < n)                                        \
        clf_store32(Y + yoff + (size_t)(m0 + i) * ldy + 32 * p, a[i][0], a[i][1], rows - 32 * p, accumulate)
#define MMI_ARGS                                                                                          \
    __global const uint *W, __global const ushort *S, __global const float *X, const ulong xoff,          \
        __global float *Y, const ulong yoff, const int n, const int ldy, const int rows, const int K,     \
        const int accumulate
/* The int8 GEMM kernel NAME: per work-item panel p and MG tiles of TM
 * tokens x[TM], sums a[TM][2] (row halves) filled by TILE over the nb
 * blocks, then stored. */
#define DEFINE_MMI(NAME, TILE)                                                                            \
    __kernel void NAME(MMI_ARGS) {                                                                        \
        const int p = get_global_id(0), nb = K / 32;                                                      \
        if (32 * p >= rows) return;                                                                       \
        for (int g = 0; g < MG; g++) {                                                                    \
            const int m0 = (get_global_id(1) * MG + g) * TM;                                              \
            if (m0 >= n) return;                                                                          \
            MMI_TILE_BEGIN(X, xoff, n, K, m0, x);                                                         \
            float16 a[TM][2];                                                                             \
            _Pragma("unroll") for (int i = 0; i < TM; i++) a[i][0] = a[i][1] = 0.0f;                      \
            TILE;                                                                                         \
            MMI_TILE_STORE(Y, yoff, ldy, n, rows, m0, p, a, accumulate);                                  \
        }                                                                                                 \
    }

/* The float form (KQ_PANEL_FLOAT's order): per block and sub-block, both
 * row halves' codes, then the tokens. */
#define KQ_MMI_FLOAT(T, QB, QH, SBK, SL, SREC, GRID)                                                      \
    for (int b = 0; b < nb; b++) {                                                                        \
        const __global uint *q = W + ((size_t)p * nb + b) * 32 * ((QB) + (QH));                           \
        const __global ushort *rec = S + ((size_t)p * (K / (SBK)) + b / ((SBK) / 32)) * (SREC);           \
        _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) {                                           \
            float16 D[2], M[2];                                                                           \
            uint16 cw[2][(SL) / 4];                                                                       \
            _Pragma("unroll") for (int h = 0; h < 2; h++) {                                               \
                kq_scales_##T(rec, KQ_SUB(SBK, SL, u), h, &D[h], &M[h]);                                  \
                kq_unpack(q, QB, QH, u * (SL) / 4, (SL) / 4, h, GRID, cw[h]);                             \
            }                                                                                             \
            _Pragma("unroll") for (int i = 0; i < TM; i++) {                                              \
                const __global float *xb = x[i] + CLF_XQ_BYTES / 4 * b; /* as LOAD_XQ reads it */         \
                const float dx = xb[8], su = (SL) == 16 ? xb[9 + u] : xb[9] + xb[10];                     \
                _Pragma("unroll") for (int h = 0; h < 2; h++) {                                           \
                    const int16 dot = kq_dot_codes_g(cw[h], (const __global int *)xb + u * (SL) / 4,      \
                                                     (SL) / 4, KQ_DOT_BITS((QB) + (QH), GRID), (GRID) == 1); \
                    a[i][h] = fma(convert_float16(dot), D[h] * dx, fma((float16)su, M[h], a[i][h]));      \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    }
/* The integer form (KQ_PANEL_INT's): row half by row half over all of K,
 * so only a half's TM sums are live: per block its codes (8 column groups)
 * and scales in registers, then each token's integer sum. */
#define KQ_MMI_INT(T, QB, QH, SBK, SL, SREC, GRID)                                                        \
    _Pragma("unroll") for (int h = 0; h < 2; h++) {                                                       \
        for (int b = 0; b < nb; b++) {                                                                    \
            const __global uint *q = W + ((size_t)p * nb + b) * 32 * ((QB) + (QH));                       \
            const __global ushort *rec = S + ((size_t)p * (K / (SBK)) + b / ((SBK) / 32)) * (SREC);       \
            int16 sc[32 / (SL)];                                                                          \
            uint16 cw[8];                                                                                 \
            _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++) sc[u] = kq_iscale_##T(rec, KQ_SUB(SBK, SL, u), h); \
            kq_unpack(q, QB, QH, 0, 8, h, GRID, cw);                                                      \
            const float16 d = KQ_HALVES(rec, 0, h);                                                       \
            const clf_short32 offs = KQ_OFF_PAIRS(T, SL, sc);                                             \
            _Pragma("unroll") for (int i = 0; i < TM; i++) {                                              \
                const __global float *xb = x[i] + CLF_XQ_BYTES / 4 * b; /* as LOAD_XQ reads it */         \
                int16 I = 0;                                                                              \
                _Pragma("unroll") for (int u = 0; u < 32 / (SL); u++)                                     \
                    I += sc[u] * kq_dot_codes_g(cw + u * (SL) / 4, (const __global int *)xb + u * (SL) / 4, \
                                                (SL) / 4, KQ_DOT_BITS((QB) + (QH), GRID), (GRID) == 1); \
                if (CLF_OFF_##T) I -= KQ_OFFSETS(offs, ((const __global int *)xb)[CLF_XQ_PAIR]);           \
                a[i][h] = fma(convert_float16(I), d * xb[8], a[i][h]);                                    \
            }                                                                                             \
        }                                                                                                 \
    }

/* Q8_0 (signed 8-bit plane), Q4_0/Q4_1 (the 4-bit plane): per block the
 * scales as the GEMV reads them, both row halves' 8 column groups, then the
 * tokens. Signed Q8_0 with VNNI: w + 128 (w ^ 0x80) unsigned, then
 * Σ(w + 128)x̂ − 128·Σx̂ = Σ w·x̂ exactly, one vpdpbusd a group and the
 * token's Σx̂ from its block's pair, where |w| and x̂ under w's sign took
 * three ops a group (pmaddubsw cannot: (w + 128)·x̂ pairs overflow shorts). */
#if CLF_X86_VNNI
#define MMI_SIGNED_FLIP 0x80808080u
#define MMI_DOT_SIGNED(cw, xg, out)                                                                       \
    do {                                                                                                  \
        const int sp_ = (xg)[CLF_XQ_PAIR], s_ = (short)sp_ + (sp_ >> 16); /* Σx̂: the pair's two shorts */ \
        _Pragma("unroll") for (int h = 0; h < 2; h++) out[h] = kq_dot_codes_g(cw[h], xg, 8, 8, 0) - (s_ << 7); \
    } while (0)
#else
#define MMI_SIGNED_FLIP 0u
#define MMI_DOT_SIGNED(cw, xg, out)                                                                       \
    _Pragma("unroll") for (int h = 0; h < 2; h++) out[h] = kq_dot_codes_g(cw[h], xg, 8, 8, 1)
#endif
#define MMI_DOT_UNSIGNED(cw, xg, out)                                                                     \
    _Pragma("unroll") for (int h = 0; h < 2; h++) out[h] = kq_dot_codes_g(cw[h], xg, 8, 4, 0)

#define INT8_MM_TILE(BLOCK_SIZE, SCALE_HALVES, SCALES_RAW, BITS, FLIP, DOT2, APPLY)                     \
    for (int b = 0; b < nb; b++) {                                                                        \
        const __global uint *q = W + ((size_t)p * nb + b) * (BLOCK_SIZE);                                 \
        float16 d[2], m[2];                                                                               \
        m[0] = m[1] = 0.0f; /* Q8_0's SCALES_RAW leaves m */                                              \
        SCALES_RAW(S + ((size_t)p * nb + b) * (SCALE_HALVES), d[0], d[1], m[0], m[1]);                    \
        uint16 cw[2][8];                                                                                  \
        _Pragma("unroll") for (int h = 0; h < 2; h++)                                                     \
            _Pragma("unroll") for (int c = 0; c < 8; c++) cw[h][c] = KQ_BYTES(q, 0, BITS, c, h, 0) ^ (FLIP); \
        _Pragma("unroll") for (int i = 0; i < TM; i++) {                                                  \
            const __global float *xb = x[i] + CLF_XQ_BYTES / 4 * b; /* as LOAD_XQ reads it */             \
            const __global int *xg = (const __global int *)xb;                                            \
            const float dx = xb[8];                                                                       \
            int16 dot[2];                                                                                 \
            DOT2(cw, xg, dot);                                                                            \
            _Pragma("unroll") for (int h = 0; h < 2; h++) APPLY(a[i][h], dot[h], xb[11], d[h], m[h], dx); \
        }                                                                                                 \
    }

/* ---- the int8-activation kernels: one skeleton per shape --------------------
 * Per family, I8_BLOCK_<CPU>(T, QB, QH, QK, SUB, REC, GRID, P, A0, A1): one
 * 32-column block b of panel P into its row halves A0, A1 (from the
 * kernel's W, S, K, nb, b and x's block: xw, dx, sx[3], sp). The GEMV and
 * its gated-unit form share it, so their sums are taken in one order.
 * Q8 and Q4 take a block in one integer dot per row half (clf_dot_q8_x8,
 * clf_dot_q4_x8) and one float update, with the minimums' m·Σx̂ (not m·Σx:
 * the error then scales with w, not with q); the code-plane types per
 * sub-block (KQ_PANEL_FLOAT) or summed in integers (KQ_PANEL_INT). */
#define I8_DOT_Q8 clf_dot_q8_x8
#define I8_DOT_Q4 clf_dot_q4_x8
#define I8_APPLY_Q8 INT8_APPLY
#define I8_APPLY_Q4 INT8_APPLY_M
#define I8_BLOCK_Q(CPU, T, QB, QH, REC, P, A0, A1)                                               \
    do {                                                                                        \
        const __global uint *q = W + ((size_t)(P) * nb + b) * (32 * ((QB) + (QH)));             \
        float16 d0, d1, m0 = 0.0f, m1 = 0.0f;                                                   \
        SCALES_RAW_##T(S + ((size_t)(P) * nb + b) * (REC), d0, d1, m0, m1);                     \
        I8_APPLY_##CPU(A0, I8_DOT_##CPU(q, xw), sx[2], d0, m0, dx);                             \
        I8_APPLY_##CPU(A1, I8_DOT_##CPU(q + 16, xw), sx[2], d1, m1, dx);                        \
    } while (0)
#define I8_BLOCK_Q8(T, QB, QH, QK, SUB, REC, GRID, P, A0, A1) I8_BLOCK_Q(Q8, T, QB, QH, REC, P, A0, A1)
#define I8_BLOCK_Q4(T, QB, QH, QK, SUB, REC, GRID, P, A0, A1) I8_BLOCK_Q(Q4, T, QB, QH, REC, P, A0, A1)
#define I8_BLOCK_KQI KQ_PANEL_INT
#define I8_BLOCK_KQF KQ_PANEL_FLOAT

/* Panels per work-item: of the GEMVs (I8_PPW_<CPU>) and of the gated
 * units (GLU_PPW_<CPU>, gate panels, each with its up panel). */
#define I8_PPW_Q8 PPW_Q8
#define I8_PPW_Q4 PPW
#define I8_PPW_KQI PPW
#define I8_PPW_KQF PPW
#define GLU_PPW_Q8 PPW_Q8
#define GLU_PPW_Q4 PPW
#define GLU_PPW_KQI KQ_GLU_PPW
#define GLU_PPW_KQF KQ_GLU_PPW

/* A hint to fetch panel P's block I8_PF blocks ahead of b, a cache line
 * (16 words) at a time (MV_PREFETCH: the cpu variant only; no effect on
 * results; past the panel's end it touches the next panel or nothing).
 * Blocks over 4 bits a weight only (Q8_0, Q6_K, Q5_*): there it won 10-25%
 * of the kernel's time; the 4-bit panels (Q4_0, Q4_1, Q4_K) gained 0-5% or
 * lost up to 10% (bench/RESULTS.md, "Prefetch in the decode GEMVs"). */
#ifndef I8_PF
#define I8_PF 2
#endif
#define I8_PREFETCH(QB, QH, P)                                                                  \
    if (I8_PF && (QB) + (QH) > 4) _Pragma("unroll") for (int l_ = 0; l_ < 32 * ((QB) + (QH)); l_ += 16)          \
        MV_PREFETCH(W + ((size_t)(P) * nb + b + I8_PF) * 32 * ((QB) + (QH)) + l_)

/* The GEMV's sums, shared with the indirect down product
 * (DEFINE_GEMV_DOWN_ID): acc[j][0..1] the two row halves of panel p0 + j,
 * over x's nb blocks (XMODE reads or quantizes them), each block by
 * I8_BLOCK_<CPU>. From the kernel: W, S, K, nb, np, p0, x. */
#define GEMV_SUMS(XMODE, CPU, T, QB, QH, QK, SUB, REC, GRID, acc)                               \
    float16 acc[I8_PPW_##CPU][2];                                                               \
    _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) acc[j][0] = acc[j][1] = 0.0f;      \
    for (int b = 0; b < nb; b++) {                                                              \
        int xw[8], sp;                                                                          \
        float dx, sx[3];                                                                        \
        XMODE(x, b, xw, &dx, sx, &sp);                                                          \
        _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) {                              \
            if (p0 + j >= np) break;                                                            \
            I8_PREFETCH(QB, QH, p0 + j);                                                        \
            I8_BLOCK_##CPU(T, QB, QH, QK, SUB, REC, GRID, p0 + j, acc[j][0], acc[j][1]);        \
        }                                                                                       \
    }

/* GEMV on int8 x (XMODE: QUANT_X quantizes it, suffix _i8; LOAD_XQ reads a
 * producer's blocks, _xq). A work-item takes NPPW panels so the quantized x
 * is shared; global size (tokens, ceil(panels / NPPW)): a token per
 * work-item, each computed as the one-token GEMV computes it, and the
 * tokens of a panel group run one after another while its weights are in
 * cache (batched decode). */
#define DEFINE_GEMV_I8X(SUFFIX, XMODE, CPU, T, QB, QH, QK, SUB, REC, GRID)                      \
    __kernel void gemv_##T##_##SUFFIX(__global const uint *W, __global const ushort *S, __global const float *X, \
                                      const ulong xoff, __global float *Y, const ulong yoff, const int ldy, \
                                      const int rows, const int K, const int accumulate) {      \
        const int p0 = get_global_id(1) * I8_PPW_##CPU, nb = K / 32, np = (rows + 31) / 32;    \
        if (p0 >= np) return;                                                                   \
        const size_t r = get_global_id(0);                                                      \
        const __global float *x = X + xoff + r * XMODE##_ROW(K);                                \
        GEMV_SUMS(XMODE, CPU, T, QB, QH, QK, SUB, REC, GRID, acc);                              \
        _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) if (p0 + j < np)               \
            clf_store32(Y + yoff + r * ldy + 32 * (p0 + j), acc[j][0], acc[j][1], rows - 32 * (p0 + j), accumulate); \
    }

/* The gated unit's sums, shared by the gate|up GEMV below and its indirect
 * form (DEFINE_GEMV_GLU_ID), so both take one order: acc[j][0..1] the two
 * row halves of gate panel p0 + j, acc[j][2..3] those of its up panel (npf
 * panels further), over x's nb int8 blocks, each block as the GEMV takes
 * it (I8_BLOCK_<CPU>). From the kernel: W, S (the weight's panel 0: the
 * indirect form moves them to its expert's), K, nb, npf (gate panels),
 * p0, x (the row's int8 blocks). */
#define GLU_SUMS(CPU, T, QB, QH, QK, SUB, REC, GRID, acc)                                       \
    float16 acc[GLU_PPW_##CPU][4];                                                              \
    _Pragma("unroll") for (int j = 0; j < GLU_PPW_##CPU; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f; \
    for (int b = 0; b < nb; b++) {                                                              \
        int xw[8], sp;                                                                          \
        float dx, sx[3];                                                                        \
        LOAD_XQ(x, b, xw, &dx, sx, &sp);                                                        \
        _Pragma("unroll") for (int j = 0; j < GLU_PPW_##CPU; j++) {                             \
            if (p0 + j >= npf) break;                                                           \
            _Pragma("unroll") for (int g = 0; g < 2; g++) { /* gate, up */                      \
                I8_PREFETCH(QB, QH, p0 + j + g * npf);                                          \
                I8_BLOCK_##CPU(T, QB, QH, QK, SUB, REC, GRID, p0 + j + g * npf, acc[j][2 * g], acc[j][2 * g + 1]); \
            }                                                                                   \
        }                                                                                       \
    }

/* The gate|up GEMV with the gated unit UNIT_FN(g, u) applied (act(g)·u,
 * or gpt-oss's clamped SwiGLU): W is a fused gate|up
 * weight (the gate's ff rows, then the up's, ff a multiple of 32); a
 * work-item takes G = GLU_PPW_<CPU> gate panels and the up panels of the
 * same rows, so it owns h = unit(g, u) for those rows and writes it to Y
 * (rows ldy apart) and, one int8 block per panel, to YQ at yq_off bytes: h
 * is the down product's x. x from its int8 blocks. The SwiGLU launch and
 * the down GEMV's quantizing go; each panel's sums are the GEMV's
 * (GLU_SUMS), so h is bit for bit what the GEMV, then clf_glu, then
 * quantizing x would give. Global size (tokens, ceil(ff / 32 / G)). */
#define DEFINE_GEMV_GLU(UNIT, UNIT_FN, CPU, T, QB, QH, QK, SUB, REC, GRID)                      \
    __kernel void gemv_##T##_##UNIT##_xq(__global const uint *W, __global const ushort *S, __global const float *X, \
                                         const ulong xoff, __global float *Y, const ulong yoff, const int ldy, \
                                         const int rows, const int K, __global uchar *YQ, const ulong yq_off) { \
        const int nb = K / 32, npf = rows / 64, p0 = get_global_id(1) * GLU_PPW_##CPU;          \
        if (p0 >= npf) return;                                                                  \
        const size_t r = get_global_id(0);                                                      \
        const __global float *x = X + xoff + r * LOAD_XQ_ROW(K);                                \
        GLU_SUMS(CPU, T, QB, QH, QK, SUB, REC, GRID, acc);                                      \
        _Pragma("unroll") for (int j = 0; j < GLU_PPW_##CPU; j++) if (p0 + j < npf)             \
            glu_store32(UNIT_FN(acc[j][0], acc[j][2]), UNIT_FN(acc[j][1], acc[j][3]),           \
                        Y + yoff + r * ldy + 32 * (p0 + j), YQ + yq_off + (r * npf + p0 + j) * CLF_XQ_BYTES); \
    }

/* The int8 GEMM's tile per family (DEFINE_MMI): the code-plane types'
 * forms above; Q8 and Q4 from their raw scales and one code plane. */
#define MMI_TILE_KQI KQ_MMI_INT
#define MMI_TILE_KQF KQ_MMI_FLOAT
#define MMI_TILE_Q8(T, QB, QH, SBK, SL, SREC, GRID) \
    INT8_MM_TILE(32 * ((QB) + (QH)), SREC, SCALES_RAW_##T, QB, MMI_SIGNED_FLIP, MMI_DOT_SIGNED, INT8_APPLY)
#define MMI_TILE_Q4(T, QB, QH, SBK, SL, SREC, GRID) \
    INT8_MM_TILE(32 * ((QB) + (QH)), SREC, SCALES_RAW_##T, QB, 0u, MMI_DOT_UNSIGNED, INT8_APPLY_M)

/* The gated units of DEFINE_GEMV_GLU: act(g)·u, or gpt-oss's clamped
 * SwiGLU (cl/common.cl), whose kernel is built only with -DCLF_GLU_OAI=1
 * (host/compute/matmul.c asks for it alone: no other model pays for it). */
#define GLU_SILU_UNIT(g, u) (clf_silu16(g) * (u))
#define GLU_GELU_UNIT(g, u) (clf_gelu16(g) * (u))
#if defined(CLF_GLU_OAI) && CLF_GLU_OAI
#define DEFINE_GEMV_GLU_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID) \
    DEFINE_GEMV_GLU(swiglu_oai, clf_swiglu_oai16, CPU, T, QB, QH, QK, SUB, REC, GRID)
#else
#define DEFINE_GEMV_GLU_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID)
#endif

/* Mixture-of-experts decode (host/compute/moe.h), built only with
 * -DCLF_MOE_ID=1 (host/compute/matmul.c asks for it for stacked experts
 * alone: dense models' programs lack these kernels). A layer's experts are
 * one stacked weight, expert e's panels from e·(its rows / 32), and each
 * row's chosen experts are read from ids on the device (no readback):
 *  - gemv_<T>_<UNIT>_id: DEFINE_GEMV_GLU for a slot s (row s / k, its
 *    (s % k)-th chosen expert) per global id 0: W the experts' fused
 *    gate|up [E · rows × K], rows = 2 ff per expert; Y [slots × ff] and its
 *    int8 blocks YQ as the dense unit writes them;
 *  - gemv_<T>_down_id: per row r and group of panels, for j < k in order
 *    the int8 GEMV of expert ids[r·k + j]'s down rows over slot r·k + j's
 *    int8 hidden row (H), times its weight wts[r·k + j], summed, then added
 *    into Y's row r (the residual): llama.cpp's Σ_j w_j·y_j, then x += it.
 * Each expert's panel sums are the dense kernels' own code (GLU_SUMS,
 * GEMV_SUMS) over W and S moved to the expert's first panel (MOE_W_AT,
 * MOE_S_AT), so a slot's hidden row is bit for bit what the per-expert
 * gated-unit GEMV gives. Moving the base pointers once, rather than adding
 * the expert's panel offset to every panel index inside the block loop
 * as the first version did, took 11-21% less CPU time for gate|up and
 * 2-30% for down at the 30B-A3B (Q4_K, Q6_K) and gpt-oss (MXFP4) shapes,
 * the outputs byte for byte the same (bench/RESULTS.md 'MoE decode
 * kernels'). The grid is the dense kernels' (the host balances panels per
 * work-item the same way: balanced_ppw); at these shapes 1-4 panels a
 * work-item moved CPU time by at most 3% either way except down at 1-2
 * (+25-37%: the x block's loads then serve one panel), so the tuning's
 * int8_ppw serves them as it serves the dense GEMVs.
 * Biases (gpt-oss; has_b 0: none, B then any buffer): B + b_off holds a
 * row per expert, [E × rows] for the gated unit (gate's then up's, added
 * to each sum before the unit) and [E × rows] for down (added to the
 * expert's output before its weight), as the per-expert path adds them. */
#if defined(CLF_MOE_ID) && CLF_MOE_ID
/* Expert e's first panel in a stack of experts of np panels each: its
 * codes' dwords (W) and scale records' halves (S) from the stack's (every
 * int8 family: a panel is nb blocks of 32·(QB + QH) dwords and K / QK
 * records of REC halves). */
#define MOE_W_AT(W, e, np, QB, QH) ((W) + (size_t)(e) * (np) * nb * 32 * ((QB) + (QH)))
#define MOE_S_AT(S, e, np, QK, REC) ((S) + (size_t)(e) * (np) * (K / (QK)) * (REC))
#define DEFINE_GEMV_GLU_ID(UNIT, UNIT_FN, CPU, T, QB, QH, QK, SUB, REC, GRID)                   \
    __kernel void gemv_##T##_##UNIT##_id(__global const uint *W_all, __global const ushort *S_all, __global const float *X, \
                                         const ulong xoff, __global const int *ids, const ulong id_off, const int k, \
                                         __global float *Y, const ulong yoff, const int rows, const int K, \
                                         __global uchar *YQ, const ulong yq_off, __global const float *B, \
                                         const ulong b_off, const int has_b) {                  \
        const int nb = K / 32, npf = rows / 64, p0 = get_global_id(1) * GLU_PPW_##CPU;          \
        if (p0 >= npf) return;                                                                  \
        const size_t s = get_global_id(0);                                                      \
        const int e = ids[id_off + s];                                                          \
        const __global uint *W = MOE_W_AT(W_all, e, 2 * npf, QB, QH); /* the expert's gate|up */ \
        const __global ushort *S = MOE_S_AT(S_all, e, 2 * npf, QK, REC);                        \
        const __global float *x = X + xoff + (s / k) * LOAD_XQ_ROW(K);                          \
        GLU_SUMS(CPU, T, QB, QH, QK, SUB, REC, GRID, acc);                                      \
        _Pragma("unroll") for (int j = 0; j < GLU_PPW_##CPU; j++) if (p0 + j < npf) {           \
            if (has_b) { /* the expert's gate and up biases of these 32 columns */              \
                const __global float *bg = B + b_off + (size_t)e * rows + 32 * (p0 + j);        \
                acc[j][0] += vload16(0, bg), acc[j][1] += vload16(1, bg);                       \
                acc[j][2] += vload16(0, bg + rows / 2), acc[j][3] += vload16(1, bg + rows / 2); \
            }                                                                                   \
            glu_store32(UNIT_FN(acc[j][0], acc[j][2]), UNIT_FN(acc[j][1], acc[j][3]),           \
                        Y + yoff + s * (rows / 2) + 32 * (p0 + j), YQ + yq_off + (s * npf + p0 + j) * CLF_XQ_BYTES); \
        }                                                                                       \
    }
#define DEFINE_GEMV_DOWN_ID(CPU, T, QB, QH, QK, SUB, REC, GRID)                                 \
    __kernel void gemv_##T##_down_id(__global const uint *W_all, __global const ushort *S_all, __global const float *H, \
                                     const ulong hoff, __global const int *ids, __global const float *wts, \
                                     const ulong id_off, const int k, __global float *Y, const ulong yoff, \
                                     const int ldy, const int rows, const int K, __global const float *B, \
                                     const ulong b_off, const int has_b) {                      \
        const int p0 = get_global_id(1) * I8_PPW_##CPU, nb = K / 32, np = rows / 32;            \
        if (p0 >= np) return;                                                                   \
        const size_t r = get_global_id(0);                                                      \
        float16 tot[I8_PPW_##CPU][2];                                                           \
        _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) tot[j][0] = tot[j][1] = 0.0f;  \
        for (int i = 0; i < k; i++) {                                                           \
            const size_t s = r * k + i;                                                         \
            const int e = ids[id_off + s];                                                      \
            const float we = wts[id_off + s];                                                   \
            const __global uint *W = MOE_W_AT(W_all, e, np, QB, QH); /* the expert's down rows */ \
            const __global ushort *S = MOE_S_AT(S_all, e, np, QK, REC);                         \
            const __global float *x = H + hoff + s * LOAD_XQ_ROW(K);                            \
            GEMV_SUMS(LOAD_XQ, CPU, T, QB, QH, QK, SUB, REC, GRID, acc);                        \
            if (has_b) { /* the expert's down bias, before its weight */                        \
                const __global float *bd = B + b_off + (size_t)e * rows;                        \
                _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) if (p0 + j < np)       \
                    acc[j][0] += vload16(0, bd + 32 * (p0 + j)), acc[j][1] += vload16(1, bd + 32 * (p0 + j)); \
            }                                                                                   \
            _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++)                            \
                tot[j][0] += we * acc[j][0], tot[j][1] += we * acc[j][1];                       \
        }                                                                                       \
        _Pragma("unroll") for (int j = 0; j < I8_PPW_##CPU; j++) if (p0 + j < np)               \
            clf_store32(Y + yoff + r * ldy + 32 * (p0 + j), tot[j][0], tot[j][1], 32, 1);       \
    }
#if defined(CLF_GLU_OAI) && CLF_GLU_OAI
#define DEFINE_GEMV_GLU_ID_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID) \
    DEFINE_GEMV_GLU_ID(swiglu_oai, clf_swiglu_oai16, CPU, T, QB, QH, QK, SUB, REC, GRID)
#else
#define DEFINE_GEMV_GLU_ID_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID)
#endif
#define DEFINE_MOE_ID_KERNELS(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES)                        \
    CLF_IF_QUANT_##CPU(DEFINE_GEMV_GLU_ID(swiglu, GLU_SILU_UNIT, CPU, T, QB, QH, QK, SUB, REC, GRID) \
                       DEFINE_GEMV_GLU_ID(geglu, GLU_GELU_UNIT, CPU, T, QB, QH, QK, SUB, REC, GRID) \
                       DEFINE_GEMV_GLU_ID_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID)               \
                       DEFINE_GEMV_DOWN_ID(CPU, T, QB, QH, QK, SUB, REC, GRID))
MM_KERNELS(DEFINE_MOE_ID_KERNELS)
#endif

/* Every int8 kernel of a type (none for the float types). */
#define DEFINE_INT8_KERNELS(CPU, T, QB, QH, QK, SUB, REC, GRID, BYTES)                          \
    CLF_IF_QUANT_##CPU(DEFINE_GEMV_I8X(i8, QUANT_X, CPU, T, QB, QH, QK, SUB, REC, GRID)         \
                       DEFINE_GEMV_I8X(xq, LOAD_XQ, CPU, T, QB, QH, QK, SUB, REC, GRID)         \
                       DEFINE_GEMV_GLU(swiglu, GLU_SILU_UNIT, CPU, T, QB, QH, QK, SUB, REC, GRID) \
                       DEFINE_GEMV_GLU(geglu, GLU_GELU_UNIT, CPU, T, QB, QH, QK, SUB, REC, GRID)  \
                       DEFINE_GEMV_GLU_OAI(CPU, T, QB, QH, QK, SUB, REC, GRID)                  \
                       DEFINE_MMI(gemm_##T##_xq, MMI_TILE_##CPU(T, QB, QH, QK, SUB, REC, GRID)))
MM_KERNELS(DEFINE_INT8_KERNELS)
#endif

/* Matrix products Y (+)= X · Wᵀ for GPUs: many work-items, tiles staged in
 * local memory. W stays in its GGUF layout ([rows × K], quantized rows as
 * runs of blocks), X is [n × K] and Y [n × ldy] (the product fills columns
 * [0, rows) at yoff), rows contiguous, offsets in floats. Halves go
 * through vload_half (hardware conversion on GPUs).
 *
 * Options: BM × BN, the GEMM tile (tokens × rows) of a work-group of
 * (BN / RN) × (BM / RM) work-items, each computing RM × RN outputs; RPW rows
 * per GEMV work-group of 32 × RPW; NT, the most tokens a GEMV work-group
 * takes at once (skinny products read each weight once for all of them). */

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef RM
#define RM 4
#endif
#ifndef RN
#define RN 4
#endif
#ifndef RPW
#define RPW 4
#endif
#ifndef NT
#define NT 1
#endif
#define BK 32 /* one quantization block */
#define TX (BN / RN)
#define TY (BM / RM)

/* w[i] = W[r, k + i] for i < 8, k a multiple of 8; 0 past K (F32/F16 only:
 * quantized K is a multiple of 32). */
inline void load8_f32(const __global float *W, int K, int r, int k, float *w) {
    const __global float *p = W + (size_t)r * K + k;
    for (int i = 0; i < 8; i++) w[i] = k + i < K ? p[i] : 0.0f;
}

inline void load8_f16(const __global half *W, int K, int r, int k, float *w) {
    const __global half *p = W + (size_t)r * K + k;
    for (int i = 0; i < 8; i++) w[i] = k + i < K ? vload_half(i, p) : 0.0f;
}

/* Q8_0 block: half d, 32 × int8; w = d·q. */
inline void load8_q8_0(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q8_0) + k / CLF_QK_q8_0) * CLF_BYTES_q8_0;
    const float d = vload_half(0, (const __global half *)blk);
    const __global char *q = (const __global char *)(blk + 2) + k % 32;
    for (int i = 0; i < 8; i++) w[i] = d * q[i];
}

/* Q4 blocks: byte j holds weight j (low nibble) and weight j + 16 (high);
 * 8 aligned weights all sit in one nibble half. */
inline void nibbles8(const __global uchar *qs, int j, float *w) {
    for (int i = 0; i < 8; i++) w[i] = j < 16 ? (qs[j + i] & 15) : (qs[j - 16 + i] >> 4);
}

/* Q4_0 block: half d, 16 bytes of nibbles; w = d·(q − 8). */
inline void load8_q4_0(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q4_0) + k / CLF_QK_q4_0) * CLF_BYTES_q4_0;
    const float d = vload_half(0, (const __global half *)blk);
    nibbles8(blk + 2, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = d * (w[i] - 8.0f);
}

/* Q4_1 block: half d, half m, 16 bytes of nibbles; w = d·q + m. */
inline void load8_q4_1(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q4_1) + k / CLF_QK_q4_1) * CLF_BYTES_q4_1;
    const float d = vload_half(0, (const __global half *)blk), m = vload_half(1, (const __global half *)blk);
    nibbles8(blk + 4, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = fma(w[i], d, m);
}

/* BF16: the top half of a float. */
inline void load8_bf16(const __global ushort *W, int K, int r, int k, float *w) {
    const __global ushort *p = W + (size_t)r * K + k;
    for (int i = 0; i < 8; i++) w[i] = k + i < K ? as_float((uint)p[i] << 16) : 0.0f;
}

/* Bits j.. j + 7 of a Q5 block's qh (4 bytes, little-endian) as 0 or 16. */
inline void fifth8(const __global uchar *qh, int j, float *w) {
    const uint h = qh[0] | qh[1] << 8 | qh[2] << 16 | (uint)qh[3] << 24;
    for (int i = 0; i < 8; i++) w[i] += (float)((h >> (j + i)) & 1u) * 16.0f;
}

/* Q5_0 block: half d, qh[4], 16 bytes of low nibbles as Q4_0; w = d·(q − 16). */
inline void load8_q5_0(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q5_0) + k / CLF_QK_q5_0) * CLF_BYTES_q5_0;
    const float d = vload_half(0, (const __global half *)blk);
    nibbles8(blk + 6, k % 32, w);
    fifth8(blk + 2, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = d * (w[i] - 16.0f);
}

/* Q5_1 block: half d, half m, qh[4], nibbles; w = d·q + m. */
inline void load8_q5_1(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q5_1) + k / CLF_QK_q5_1) * CLF_BYTES_q5_1;
    const float d = vload_half(0, (const __global half *)blk), m = vload_half(1, (const __global half *)blk);
    nibbles8(blk + 8, k % 32, w);
    fifth8(blk + 4, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = fma(w[i], d, m);
}

/* IQ4_NL block: half d, nibbles as Q4_0 indexing a non-uniform grid. */
__constant float clf_iq4nl_grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
inline void load8_iq4_nl(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_iq4_nl) + k / CLF_QK_iq4_nl) * CLF_BYTES_iq4_nl;
    const float d = vload_half(0, (const __global half *)blk);
    nibbles8(blk + 2, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = d * clf_iq4nl_grid[(int)w[i]];
}

/* MXFP4 block (17 B): E8M0 exponent byte e, nibbles as Q4_0 indexing E2M1's
 * values doubled; w = value·2^(e − 128), the scale a float (cl/types.cl's
 * CLF_E8M0_HALF_BITS: every exponent exact, none fits only an f16). */
__constant float clf_mxfp4_grid[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
inline void load8_mxfp4(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_mxfp4) + k / CLF_QK_mxfp4) * CLF_BYTES_mxfp4;
    const float d = as_float(CLF_E8M0_HALF_BITS((uint)blk[0]));
    nibbles8(blk + 1, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = d * clf_mxfp4_grid[(int)w[i]];
}

/* K-quant super-blocks of 256 weights (layouts in host/quant.h); 8 aligned
 * weights share one sub-block, so one scale. Q4_K/Q5_K: scale and min of
 * sub-block s from 12 packed bytes. */
inline void k4_scale_min(const __global uchar *sc, int s, float *scale, float *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    }
}

/* Q4_K (144 B): half d, half dmin, 12 scale bytes, qs[128]: sub-block s in
 * the low (s even) or high nibbles of qs[32 (s / 2) ...]; w = d·sc·q − dmin·m. */
inline void load8_q4_k(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q4_k) + k / CLF_QK_q4_k) * CLF_BYTES_q4_k;
    const int kb = k % 256, s = kb / 32;
    float sc, mn;
    k4_scale_min(blk + 4, s, &sc, &mn);
    const float d = vload_half(0, (const __global half *)blk) * sc, m = vload_half(1, (const __global half *)blk) * mn;
    const __global uchar *q = blk + 16 + 32 * (s / 2) + kb % 32;
    const int sh = 4 * (s % 2);
    for (int i = 0; i < 8; i++) w[i] = d * ((q[i] >> sh) & 15) - m;
}

/* Q5_K (176 B): Q4_K with qh[32] before qs: bit s of qh[l] is the fifth. */
inline void load8_q5_k(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q5_k) + k / CLF_QK_q5_k) * CLF_BYTES_q5_k;
    const int kb = k % 256, s = kb / 32;
    float sc, mn;
    k4_scale_min(blk + 4, s, &sc, &mn);
    const float d = vload_half(0, (const __global half *)blk) * sc, m = vload_half(1, (const __global half *)blk) * mn;
    const __global uchar *q = blk + 48 + 32 * (s / 2) + kb % 32, *qh = blk + 16 + kb % 32;
    const int sh = 4 * (s % 2);
    for (int i = 0; i < 8; i++) w[i] = d * (((q[i] >> sh) & 15) | ((qh[i] >> s) & 1) << 4) - m;
}

/* Q6_K (210 B): ql[128], qh[64], int8 scales[16], half d; weight j in half
 * n = j / 128, quarter c = j % 128 / 32: nibble c / 2 of ql[64 n + 32 (c % 2)
 * + j % 32], bits 2c of qh[32 n + j % 32]; w = d·scales[j / 16]·(q − 32). */
inline void load8_q6_k(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q6_k) + k / CLF_QK_q6_k) * CLF_BYTES_q6_k;
    const int kb = k % 256, n = kb / 128, c = kb % 128 / 32, l = kb % 32;
    const float d = vload_half(0, (const __global half *)(blk + 208)) * ((const __global char *)blk)[192 + kb / 16];
    const __global uchar *ql = blk + 64 * n + 32 * (c % 2) + l, *qh = blk + 128 + 32 * n + l;
    const int sl = 4 * (c / 2), sh = 2 * c;
    for (int i = 0; i < 8; i++) w[i] = d * ((float)(((ql[i] >> sl) & 15) | ((qh[i] >> sh) & 3) << 4) - 32.0f);
}

/* Q2_K (84 B): scales[16] (scale low nibble, min high), qs[64], half d,
 * half dmin; weight j: bits 2 (j % 128 / 32) of qs[32 (j / 128) + j % 32]. */
inline void load8_q2_k(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q2_k) + k / CLF_QK_q2_k) * CLF_BYTES_q2_k;
    const int kb = k % 256;
    const uchar s = blk[kb / 16];
    const float d = vload_half(40, (const __global half *)blk) * (s & 15),
                m = vload_half(41, (const __global half *)blk) * (s >> 4);
    const __global uchar *q = blk + 16 + 32 * (kb / 128) + kb % 32;
    const int sh = 2 * (kb % 128 / 32);
    for (int i = 0; i < 8; i++) w[i] = d * ((q[i] >> sh) & 3) - m;
}

/* Q3_K (110 B): hmask[32], qs[64] (low bits as Q2_K), 12 bytes of 6-bit
 * scales, half d; q = low bits − 4 unless bit j / 32 of hmask[j % 32] is
 * set; scale i: nibble i / 8 of byte i % 8, bits 2 (i / 4) of byte 8 + i % 4,
 * minus 32. */
inline void load8_q3_k(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / CLF_QK_q3_k) + k / CLF_QK_q3_k) * CLF_BYTES_q3_k;
    const int kb = k % 256, i = kb / 16;
    const __global uchar *sc = blk + 96;
    const int s = ((sc[i % 8] >> (4 * (i / 8))) & 15) | ((sc[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
    const float d = vload_half(54, (const __global half *)blk) * (s - 32);
    const __global uchar *q = blk + 32 + 32 * (kb / 128) + kb % 32, *hm = blk + kb % 32;
    const int sh = 2 * (kb % 128 / 32), hb = kb / 32;
    for (int i2 = 0; i2 < 8; i2++) w[i2] = d * (float)(((q[i2] >> sh) & 3) - ((hm[i2] >> hb) & 1 ? 0 : 4));
}

/* GEMM: work-group (TX, TY) computes Y[BM tokens × BN rows]; global size
 * (ceil(rows / BN) · TX, ceil(n / BM) · TY). Each BK step stages X and the
 * dequantized W in local memory, then every work-item multiplies its
 * RM × RN outputs, strided by TY and TX so neighbours touch neighbours. */
#define DEFINE_GEMM(NAME, T, LOAD8)                                                             \
    __kernel __attribute__((reqd_work_group_size(TX, TY, 1))) void NAME(                       \
        __global const T *W, __global const float *X, const ulong xoff, __global float *Y,      \
        const ulong yoff, const int n, const int ldy, const int rows, const int K,              \
        const int accumulate) {                                                                 \
        __local float Xs[BK][BM + 1], Ws[BK][BN + 1];                                           \
        const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * TX + tx;               \
        const int r0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;                         \
        float acc[RM][RN] = {{0.0f}}, w[8];                                                     \
        X += xoff;                                                                              \
        for (int k0 = 0; k0 < K; k0 += BK) {                                                    \
            for (int c = tid; c < BN * BK / 8; c += TX * TY) {                                  \
                const int rr = c / (BK / 8), kc = c % (BK / 8) * 8;                             \
                if (r0 + rr < rows) LOAD8(W, K, r0 + rr, k0 + kc, w);                           \
                for (int i = 0; i < 8; i++) Ws[kc + i][rr] = r0 + rr < rows ? w[i] : 0.0f;      \
            }                                                                                   \
            for (int c = tid; c < BM * BK / 8; c += TX * TY) {                                  \
                const int mm = c / (BK / 8), kc = c % (BK / 8) * 8;                             \
                const __global float *xr = X + (size_t)(m0 + mm) * K + k0 + kc;                 \
                for (int i = 0; i < 8; i++)                                                     \
                    Xs[kc + i][mm] = m0 + mm < n && k0 + kc + i < K ? xr[i] : 0.0f;             \
            }                                                                                   \
            barrier(CLK_LOCAL_MEM_FENCE);                                                       \
            for (int kk = 0; kk < BK; kk++) {                                                   \
                float a[RM], b[RN];                                                             \
                for (int i = 0; i < RM; i++) a[i] = Xs[kk][ty + i * TY];                        \
                for (int j = 0; j < RN; j++) b[j] = Ws[kk][tx + j * TX];                        \
                for (int i = 0; i < RM; i++)                                                    \
                    for (int j = 0; j < RN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);        \
            }                                                                                   \
            barrier(CLK_LOCAL_MEM_FENCE);                                                       \
        }                                                                                       \
        for (int i = 0; i < RM; i++) {                                                          \
            const int m = m0 + ty + i * TY;                                                     \
            for (int j = 0; j < RN; j++) {                                                      \
                const int r = r0 + tx + j * TX;                                                 \
                if (m < n && r < rows) {                                                        \
                    __global float *y = Y + yoff + (size_t)m * ldy + r;                         \
                    *y = accumulate ? *y + acc[i][j] : acc[i][j];                               \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

DEFINE_GEMM(gemm_f32, float, load8_f32)
DEFINE_GEMM(gemm_f16, half, load8_f16)
DEFINE_GEMM(gemm_bf16, ushort, load8_bf16)
/* D(name) for each quantized type of the table (cl/types.cl): its GEMM,
 * GEMV or dequantize through its load8_<name>. */
#define QUANT_ROW(D, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CLF_IF_QUANT_##CPU(D(name))
#define GEMM_OF(name) DEFINE_GEMM(gemm_##name, uchar, load8_##name)
CLF_TYPES(QUANT_ROW, GEMM_OF)

/* The GEMVs' end: each lane's sums acc[NT] of row r to part[ry][t][lane],
 * then lane t adds up token t's 32 and stores it (+= with accumulate). */
#define GEMV_LANES_STORE()                                                                      \
    do {                                                                                        \
        for (int t = 0; t < NT; t++) part[ry][t][lane] = acc[t];                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                           \
        if (r < rows && lane < n && lane < NT) {                                                \
            float s = 0.0f;                                                                     \
            for (int i = 0; i < 32; i++) s += part[ry][lane][i];                                \
            __global float *y = Y + yoff + (size_t)lane * ldy + r;                              \
            *y = accumulate ? *y + s : s;                                                       \
        }                                                                                       \
    } while (0)

/* GEMV and skinny products (n <= NT): work-group (32, RPW) takes RPW rows,
 * global size (32, ceil(rows / RPW) · RPW). ROW adds lane `lane`'s share of
 * row r (r < rows) into acc[t] for each token t < n; lanes' partial sums
 * meet in local memory (GEMV_LANES_STORE). */
#define DEFINE_GEMV_ROWS(NAME, T, ROW)                                                          \
    __kernel __attribute__((reqd_work_group_size(32, RPW, 1))) void NAME(                      \
        __global const T *W, __global const float *X, const ulong xoff, __global float *Y,      \
        const ulong yoff, const int n, const int ldy, const int rows, const int K,              \
        const int accumulate) {                                                                 \
        __local float part[RPW][NT][33];                                                        \
        const int lane = get_local_id(0), ry = get_local_id(1), r = get_global_id(1);          \
        float acc[NT];                                                                          \
        for (int t = 0; t < NT; t++) acc[t] = 0.0f;                                             \
        X += xoff;                                                                              \
        if (r < rows) {                                                                         \
            ROW;                                                                                \
        }                                                                                       \
        GEMV_LANES_STORE();                                                                     \
    }

/* Quantized weights: the 32 lanes stride a row in runs of 8 weights, each
 * weight read once for all n tokens. */
#define GEMV_ROW8(LOAD8)                                                                        \
    for (int k = 8 * lane; k < K; k += 8 * 32) {                                                \
        float w[8];                                                                             \
        LOAD8(W, K, r, k, w);                                                                   \
        for (int t = 0; t < NT && t < n; t++) {                                                 \
            const __global float *xr = X + (size_t)t * K + k;                                   \
            for (int i = 0; i < 8; i++) acc[t] = fma(w[i], k + i < K ? xr[i] : 0.0f, acc[t]);   \
        }                                                                                       \
    }
#define DEFINE_GEMV(NAME, T, LOAD8) DEFINE_GEMV_ROWS(NAME, T, GEMV_ROW8(LOAD8))

/* Float weights: lane l reads weights 4l, 4l + 128, ... of its row, so a
 * row's 32 lanes read 512 (F32) or 256 (F16/BF16) contiguous bytes at each
 * step, one 16- or 8-byte load a lane (rows of K % 4 == 0 start aligned:
 * the aligned vector types; else one weight a lane, still contiguous). On
 * PoCL, too, this beats 8 weights a lane (F32 1.7x, F16 2-3x at
 * 576 -> 8192): its vectorizer over lanes gets contiguous loads. */
#define GEMV_ROW4(T, LOAD4, LOAD1)                                                              \
    const __global T *wr = W + (size_t)r * K;                                                   \
    if (K % 4 == 0)                                                                             \
        for (int k = 4 * lane; k < K; k += 4 * 32) {                                            \
            const float4 w = LOAD4(wr + k);                                                     \
            for (int t = 0; t < NT && t < n; t++) acc[t] += dot(w, vload4(0, X + (size_t)t * K + k)); \
        }                                                                                       \
    else                                                                                        \
        for (int k = lane; k < K; k += 32) {                                                    \
            const float w = LOAD1(wr + k);                                                      \
            for (int t = 0; t < NT && t < n; t++) acc[t] = fma(w, X[(size_t)t * K + k], acc[t]); \
        }
#define DEFINE_GEMV_FLOAT(NAME, T, LOAD4, LOAD1) DEFINE_GEMV_ROWS(NAME, T, GEMV_ROW4(T, LOAD4, LOAD1))

/* 4 weights from an 8- or 16-byte aligned p; one weight from any p. Halves
 * are loaded as one uint2 and converted from a private copy. */
inline float4 load4_f32(const __global float *p) { return *(const __global float4 *)p; }
inline float4 load4_f16(const __global half *p) {
    const uint2 u = *(const __global uint2 *)p;
    return vload_half4(0, (const __private half *)&u);
}
inline float4 load4_bf16(const __global ushort *p) {
    return as_float4(convert_uint4(as_ushort4(*(const __global uint2 *)p)) << 16);
}
inline float load1_f32(const __global float *p) { return *p; }
inline float load1_f16(const __global half *p) { return vload_half(0, p); }
inline float load1_bf16(const __global ushort *p) { return as_float((uint)*p << 16); }

DEFINE_GEMV_FLOAT(gemv_f32, float, load4_f32, load1_f32)
DEFINE_GEMV_FLOAT(gemv_f16, half, load4_f16, load1_f16)
DEFINE_GEMV_FLOAT(gemv_bf16, ushort, load4_bf16, load1_bf16)
#define GEMV_OF(name) DEFINE_GEMV(gemv_##name, uchar, load8_##name)
CLF_TYPES(QUANT_ROW, GEMV_OF)

/* Decode GEMVs on x quantized to int8 (CLF_XQ_BYTES blocks, cl/common.cl,
 * written once by the kernel that produces x) with integer dot products.
 * Work-group (LPR, 32 · RPW / LPR): LPR lanes per weight row, rows side by
 * side; global (LPR, ceil(rows / rows per group) · rows per group, tokens),
 * each token a separate row of XQ and Y (rowwise decode).
 *
 * A row's quants are cut into chunks of 16 bytes (Q8_0: 2 a block; Q4_0,
 * Q4_1, Q5_0: 1; Q4_K, Q6_K: 8 a super-block); lane l reads chunks l, l + LPR,
 * ... so a row's lanes read consecutive 16-byte runs (coalesced), and the
 * host picks LPR so every lane has at least two chunks (more loads in
 * flight per work-item). Blocks stay in their GGUF layout: Q8_0 (34 B),
 * Q4_0 (18 B) and Q5_0 (22 B) quants are only 2-byte aligned (vload8 of
 * ushort), Q4_1's (20 B) 4-byte (vload4 of uint), Q4_K's (144 B) 16-byte
 * (one uint4); Q6_K (210 B) reads 16 bytes of ql and 16 of qh a chunk.
 * x̂ for a chunk is 16 or 32 bytes of a 16-byte aligned XQ block (uint4
 * loads).
 * Partial sums meet in local memory (OpenCL 1.2: no sub-groups needed). */
#ifndef LPR
#define LPR 32
#endif
#define XQ_ROWS (32 * RPW / LPR) /* weight rows a work-group takes */

/* acc + the dot product of the 4 int8 pairs packed in a and b, in one
 * place whatever the device offers: PTX dp4a (NVIDIA, sm_61+: the host sets
 * CLF_DOT_PTX), cl_khr_integer_dot_product (OpenCL 3.0 feature macros or
 * the extension's), else packed char4 arithmetic (PoCL). Q4 nibbles are
 * 0..15, so signed × signed is exact for every type here. */
#if CLF_DOT_PTX
inline int clf_dot4(uint a, uint b, int acc) {
    int r;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
}
#elif defined(__opencl_c_integer_dot_product_input_4x8bit_packed)
#define clf_dot4(a, b, acc) ((acc) + dot_4x8packed_ss_int((a), (b)))
#elif defined(__opencl_c_integer_dot_product_input_4x8bit) || defined(cl_khr_integer_dot_product)
#define clf_dot4(a, b, acc) ((acc) + dot(as_char4((uint)(a)), as_char4((uint)(b))))
#else
inline int clf_dot4(uint a, uint b, int acc) {
    const int4 p = convert_int4(as_char4(a)) * convert_int4(as_char4(b));
    return acc + (p.x + p.y) + (p.z + p.w);
}
#endif

/* XQ blocks are 16-byte aligned (matmul.c checks the offset): x̂ bytes
 * 16i.. and the block's floats (dx, dx·Σx̂ of each half, of the block) as
 * single 16-byte loads. */
#define XQ_Q16(xq, i) (((const __global uint4 *)(xq))[i])
#define XQ_SUMS(xq) (*(const __global float4 *)((xq) + 32))

inline int clf_dot16(uint4 q, uint4 x, int acc) {
    return clf_dot4(q.w, x.w, clf_dot4(q.z, x.z, clf_dot4(q.y, x.y, clf_dot4(q.x, x.x, acc))));
}

/* Chunk c of a row (blocks of BYTES at blk): acc += its Σ w·x. xb: the XQ
 * row; its block b holds x̂ (32 chars) then dx, dx·Σx̂ of each half and of
 * the block (floats). */
/* Q8_0: chunk = half h of block c / 2; w = d·q. */
inline float xq_chunk_q8_0(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const int b = c >> 1, h = c & 1;
    const __global uchar *blk = W + (size_t)b * CLF_BYTES_q8_0;
    const uint4 q = as_uint4(vload8(0, (const __global ushort *)(blk + 2 + 16 * h)));
    const __global uchar *xq = xb + (size_t)b * CLF_XQ_BYTES;
    const uint4 x = XQ_Q16(xq, h);
    const float dx = *(const __global float *)(xq + 32);
    return fma(vload_half(0, (const __global half *)blk) * dx, (float)clf_dot16(q, x, 0), acc);
}

/* Q4: low nibbles are weights 0..15 of the block, high ones 16..31; Σq·x̂. */
inline int xq_dot_q4(uint4 q, const __global uchar *xq) {
    const uint4 m = (uint4)(0x0f0f0f0fu);
    return clf_dot16((q >> 4) & m, XQ_Q16(xq, 1), clf_dot16(q & m, XQ_Q16(xq, 0), 0));
}

/* Q4_0 (18 B): w = d·(q − 8): d·(dx·Σq·x̂ − 8·dx·Σx̂). */
inline float xq_chunk_q4_0(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const __global uchar *blk = W + (size_t)c * CLF_BYTES_q4_0, *xq = xb + (size_t)c * CLF_XQ_BYTES;
    const uint4 q = as_uint4(vload8(0, (const __global ushort *)(blk + 2)));
    const float4 s = XQ_SUMS(xq);
    return fma(vload_half(0, (const __global half *)blk), fma(s.x, (float)xq_dot_q4(q, xq), -8.0f * s.w), acc);
}

/* Q4_1 (20 B): w = d·q + m: d·dx·Σq·x̂ + m·dx·Σx̂. */
inline float xq_chunk_q4_1(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const __global uchar *blk = W + (size_t)c * CLF_BYTES_q4_1, *xq = xb + (size_t)c * CLF_XQ_BYTES;
    const uint4 q = vload4(0, (const __global uint *)(blk + 4));
    const float4 s = XQ_SUMS(xq);
    const float2 dm = vload_half2(0, (const __global half *)blk);
    return fma(dm.x * s.x, (float)xq_dot_q4(q, xq), fma(dm.y, s.w, acc));
}

/* Bits 0..3 of b as bit 4 of each byte: a Q5 weight's fifth bit. */
inline uint fifth4(uint b) { return (b & 1u) << 4 | (b & 2u) << 11 | (b & 4u) << 18 | (b & 8u) << 25; }

/* Q5_0 (22 B: d, qh[4], 16 bytes of nibbles as Q4_0): w = d·(q − 16). */
inline float xq_chunk_q5_0(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const __global uchar *blk = W + (size_t)c * CLF_BYTES_q5_0, *xq = xb + (size_t)c * CLF_XQ_BYTES;
    const ushort2 h2 = vload2(0, (const __global ushort *)(blk + 2));
    const uint h = h2.x | (uint)h2.y << 16;
    const uint4 q = as_uint4(vload8(0, (const __global ushort *)(blk + 6))), m = (uint4)(0x0f0f0f0fu);
    const uint4 lo = (q & m) | (uint4)(fifth4(h), fifth4(h >> 4), fifth4(h >> 8), fifth4(h >> 12));
    const uint4 hi = ((q >> 4) & m) | (uint4)(fifth4(h >> 16), fifth4(h >> 20), fifth4(h >> 24), fifth4(h >> 28));
    const int dot = clf_dot16(hi, XQ_Q16(xq, 1), clf_dot16(lo, XQ_Q16(xq, 0), 0));
    const float4 s = XQ_SUMS(xq);
    return fma(vload_half(0, (const __global half *)blk), fma(s.x, (float)dot, -16.0f * s.w), acc);
}

/* MXFP4 (17 B: E8M0 e, 16 bytes of nibbles as Q4_0 indexing E2M1's values
 * doubled): each nibble's grid value as a signed byte (|v| ≤ 12; E2M1's
 * magnitude from the low 3 bits, as cl/matmul_cpu.cl's clf_mxfp4_lookup),
 * so the block is one integer dot of signed bytes, as Q8_0's, and
 * w = v·D with D = 2^(e − 128) a float (every exponent exact). */
inline uint4 mxfp4_values16(uchar16 c) {
    const uchar16 v = c & (uchar)7;
    const uchar16 m = select(select(v, (uchar)2 * v - (uchar)4, v > (uchar)3), (uchar)4 * v - (uchar)16, v > (uchar)5);
    return as_uint4(select(as_char16(m), -as_char16(m), as_char16(c) > (char)7));
}
inline float xq_chunk_mxfp4(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const __global uchar *blk = W + (size_t)c * CLF_BYTES_mxfp4, *xq = xb + (size_t)c * CLF_XQ_BYTES;
    const uchar16 q = vload16(0, blk + 1); /* byte-aligned: blocks are 17 bytes */
    const int dot = clf_dot16(mxfp4_values16(q >> (uchar)4), XQ_Q16(xq, 1),
                              clf_dot16(mxfp4_values16(q & (uchar)15), XQ_Q16(xq, 0), 0));
    const float d = as_float(CLF_E8M0_HALF_BITS((uint)blk[0]));
    return fma(d * XQ_SUMS(xq).x, (float)dot, acc);
}

/* Q4_K (144 B per 256 weights): chunk c is half h of qs group g of
 * super-block c / 8: its low nibbles are sub-block 2g, its high ones 2g + 1,
 * weights 16h.. of each, so the x̂ of two XQ blocks and their half sums;
 * w = d·sc·q − dmin·m. */
inline float xq_chunk_q4_k(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const int g = c % 8 / 2, h = c % 2;
    const __global uchar *blk = W + (size_t)(c / 8) * CLF_BYTES_q4_k;
    const __global uchar *xa = xb + (size_t)(c / 8 * 8 + 2 * g) * CLF_XQ_BYTES, *xc = xa + CLF_XQ_BYTES;
    const uint4 q = *(const __global uint4 *)(blk + 16 + 32 * g + 16 * h), m = (uint4)(0x0f0f0f0fu); /* 16-aligned */
    const float2 dm = vload_half2(0, (const __global half *)blk);
    float sa, ma, sb, mb;
    k4_scale_min(blk + 4, 2 * g, &sa, &ma);
    k4_scale_min(blk + 4, 2 * g + 1, &sb, &mb);
    const float4 fa = XQ_SUMS(xa), fc = XQ_SUMS(xc);
    const int da = clf_dot16(q & m, XQ_Q16(xa, h), 0);
    const int dc = clf_dot16((q >> 4) & m, XQ_Q16(xc, h), 0);
    acc = fma(dm.x * sa * fa.x, (float)da, fma(-dm.y * ma, h ? fa.z : fa.y, acc));
    return fma(dm.x * sb * fc.x, (float)dc, fma(-dm.y * mb, h ? fc.z : fc.y, acc));
}

/* Q6_K (210 B: ql[128], qh[64], int8 scales[16], half d): chunk r of the
 * super-block is ql[16r ..]: half n = r / 4, pair p = r / 2 % 2, weights
 * 16h.. (h = r % 2) of quarter p (low nibbles) and p + 2 (high), their two
 * top bits at bits 2p and 2p + 4 of qh[32n + 16h ..]; each 16 weights have
 * one scale: w = d·sc·(q − 32), the 32 against the x half's sum. */
inline float xq_chunk_q6_k(const __global uchar *W, const __global uchar *xb, int c, float acc) {
    const int r = c % 8, n = r / 4, p = r / 2 % 2, h = r % 2;
    const __global uchar *blk = W + (size_t)(c / 8) * CLF_BYTES_q6_k;
    const __global uchar *xa = xb + (size_t)(c / 8 * 8 + 4 * n + p) * CLF_XQ_BYTES, *xc = xa + 2 * CLF_XQ_BYTES;
    const uint4 ql = as_uint4(vload8(0, (const __global ushort *)(blk + 16 * r)));
    const uint4 qh = as_uint4(vload8(0, (const __global ushort *)(blk + 128 + 32 * n + 16 * h)));
    const uint4 m4 = (uint4)(0x0f0f0f0fu), m2 = (uint4)(0x03030303u);
    const uint4 lo = (ql & m4) | ((qh >> (uint)(2 * p)) & m2) << 4;
    const uint4 hi = ((ql >> 4) & m4) | ((qh >> (uint)(2 * p + 4)) & m2) << 4;
    const __global char *sc = (const __global char *)blk + 192 + 8 * n + 2 * p + h; /* scales[j / 16] */
    const float d = vload_half(0, (const __global half *)(blk + 208)), da = d * sc[0], dc = d * sc[4];
    const float4 fa = XQ_SUMS(xa), fc = XQ_SUMS(xc);
    const int ia = clf_dot16(lo, XQ_Q16(xa, h), 0), ic = clf_dot16(hi, XQ_Q16(xc, h), 0);
    acc = fma(da, fma(fa.x, (float)ia, -32.0f * (h ? fa.z : fa.y)), acc);
    return fma(dc, fma(fc.x, (float)ic, -32.0f * (h ? fc.z : fc.y)), acc);
}

/* QK weights of BLOCK bytes; CHUNKS: 16-byte chunks per 32 weights. */
#define DEFINE_GEMV_XQ(NAME, QK, BLOCK, CHUNKS, CHUNK)                                                  \
    __kernel __attribute__((reqd_work_group_size(LPR, XQ_ROWS, 1))) void NAME(                     \
        __global const uchar *W, __global const float *XQ, const ulong xoff, __global float *Y,     \
        const ulong yoff, const int ldy, const int rows, const int K, const int accumulate) {        \
        __local float part[XQ_ROWS][LPR + 1];                                                       \
        const int lane = get_local_id(0), ry = get_local_id(1), r = get_global_id(1);              \
        const int t = get_global_id(2), nb = K / 32, nc = (CHUNKS) * nb;                            \
        const __global uchar *xb = (const __global uchar *)(XQ + xoff) + (size_t)t * nb * CLF_XQ_BYTES; \
        float acc = 0.0f;                                                                           \
        if (r < rows) {                                                                             \
            const __global uchar *wr = W + (size_t)r * (K / (QK)) * (BLOCK);                        \
            for (int c = lane; c < nc; c += LPR) acc = CHUNK(wr, xb, c, acc);                       \
        }                                                                                           \
        part[ry][lane] = acc;                                                                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                               \
        if (r < rows && lane == 0) {                                                                \
            float s = 0.0f;                                                                         \
            for (int i = 0; i < LPR; i++) s += part[ry][i];                                         \
            __global float *y = Y + yoff + (size_t)t * ldy + r;                                     \
            *y = accumulate ? *y + s : s;                                                           \
        }                                                                                           \
    }

/* every type whose GPU_XQ (cl/types.cl) says it has one, through its xq_chunk_<name> */
#define GEMV_XQ_ROW(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CLF_IF_##GPU_XQ(DEFINE_GEMV_XQ(gemv_##name##_xq, QK, BYTES, GPU_XQ, xq_chunk_##name))
CLF_TYPES(GEMV_XQ_ROW, ~)

/* Non-F32 W to row-major F32 [rows × K] for the CLBlast backend; global size
 * (ceil(K / 8), rows). */
#define DEFINE_DEQUANT(NAME, T, LOAD8)                                                          \
    __kernel void NAME(__global const T *W, __global float *out, const int rows, const int K) { \
        const int k = 8 * get_global_id(0), r = get_global_id(1);                              \
        if (k >= K || r >= rows) return;                                                        \
        float w[8];                                                                             \
        LOAD8(W, K, r, k, w);                                                                   \
        for (int i = 0; i < 8 && k + i < K; i++) out[(size_t)r * K + k + i] = w[i];             \
    }

DEFINE_DEQUANT(dequant_f16, half, load8_f16)
DEFINE_DEQUANT(dequant_bf16, ushort, load8_bf16)
#define DEQUANT_OF(name) DEFINE_DEQUANT(dequant_##name, uchar, load8_##name)
CLF_TYPES(QUANT_ROW, DEQUANT_OF)

/* Matrix products Y (+)= X · Wᵀ for GPUs: many work-items, tiles staged in
 * local memory. W stays in its GGUF layout ([rows × K], quantized rows as
 * runs of blocks), X is [n × K] and Y [n × rows], rows contiguous, offsets
 * in floats. Halves go through vload_half (hardware conversion on GPUs).
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
    const __global uchar *blk = W + ((size_t)r * (K / 32) + k / 32) * 34;
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
    const __global uchar *blk = W + ((size_t)r * (K / 32) + k / 32) * 18;
    const float d = vload_half(0, (const __global half *)blk);
    nibbles8(blk + 2, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = d * (w[i] - 8.0f);
}

/* Q4_1 block: half d, half m, 16 bytes of nibbles; w = d·q + m. */
inline void load8_q4_1(const __global uchar *W, int K, int r, int k, float *w) {
    const __global uchar *blk = W + ((size_t)r * (K / 32) + k / 32) * 20;
    const float d = vload_half(0, (const __global half *)blk), m = vload_half(1, (const __global half *)blk);
    nibbles8(blk + 4, k % 32, w);
    for (int i = 0; i < 8; i++) w[i] = fma(w[i], d, m);
}

/* GEMM: work-group (TX, TY) computes Y[BM tokens × BN rows]; global size
 * (ceil(rows / BN) · TX, ceil(n / BM) · TY). Each BK step stages X and the
 * dequantized W in local memory, then every work-item multiplies its
 * RM × RN outputs, strided by TY and TX so neighbours touch neighbours. */
#define DEFINE_GEMM(NAME, T, LOAD8)                                                             \
    __kernel __attribute__((reqd_work_group_size(TX, TY, 1))) void NAME(                       \
        __global const T *W, __global const float *X, const ulong xoff, __global float *Y,      \
        const ulong yoff, const int n, const int rows, const int K, const int accumulate) {     \
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
                    __global float *y = Y + yoff + (size_t)m * rows + r;                        \
                    *y = accumulate ? *y + acc[i][j] : acc[i][j];                               \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

DEFINE_GEMM(gm_f32, float, load8_f32)
DEFINE_GEMM(gm_f16, half, load8_f16)
DEFINE_GEMM(gm_q8_0, uchar, load8_q8_0)
DEFINE_GEMM(gm_q4_0, uchar, load8_q4_0)
DEFINE_GEMM(gm_q4_1, uchar, load8_q4_1)

/* GEMV and skinny products (n <= NT): work-group (32, RPW) takes RPW rows,
 * its 32 lanes striding a row in runs of 8 weights, each weight read once
 * for all n tokens; global size (32, ceil(rows / RPW) · RPW). Lanes' partial
 * sums meet in local memory. */
#define DEFINE_GEMV(NAME, T, LOAD8)                                                             \
    __kernel __attribute__((reqd_work_group_size(32, RPW, 1))) void NAME(                      \
        __global const T *W, __global const float *X, const ulong xoff, __global float *Y,      \
        const ulong yoff, const int n, const int rows, const int K, const int accumulate) {     \
        __local float part[RPW][NT][33];                                                        \
        const int lane = get_local_id(0), ry = get_local_id(1), r = get_global_id(1);          \
        float acc[NT], w[8];                                                                    \
        for (int t = 0; t < NT; t++) acc[t] = 0.0f;                                             \
        X += xoff;                                                                              \
        if (r < rows) {                                                                         \
            for (int k = 8 * lane; k < K; k += 8 * 32) {                                        \
                LOAD8(W, K, r, k, w);                                                           \
                for (int t = 0; t < NT && t < n; t++) {                                         \
                    const __global float *xr = X + (size_t)t * K + k;                           \
                    for (int i = 0; i < 8; i++) acc[t] = fma(w[i], k + i < K ? xr[i] : 0.0f, acc[t]); \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        for (int t = 0; t < NT; t++) part[ry][t][lane] = acc[t];                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                           \
        if (r < rows && lane < n && lane < NT) {                                                \
            float s = 0.0f;                                                                     \
            for (int i = 0; i < 32; i++) s += part[ry][lane][i];                                \
            __global float *y = Y + yoff + (size_t)lane * rows + r;                             \
            *y = accumulate ? *y + s : s;                                                       \
        }                                                                                       \
    }

DEFINE_GEMV(gv_f32, float, load8_f32)
DEFINE_GEMV(gv_f16, half, load8_f16)
DEFINE_GEMV(gv_q8_0, uchar, load8_q8_0)
DEFINE_GEMV(gv_q4_0, uchar, load8_q4_0)
DEFINE_GEMV(gv_q4_1, uchar, load8_q4_1)

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

DEFINE_DEQUANT(dq_f16, half, load8_f16)
DEFINE_DEQUANT(dq_q8_0, uchar, load8_q8_0)
DEFINE_DEQUANT(dq_q4_0, uchar, load8_q4_0)
DEFINE_DEQUANT(dq_q4_1, uchar, load8_q4_1)

/* Dequantization to F32 of GGUF block types, as whole tensors or as rows
 * picked by token id (the embedding lookup).
 *
 * One work-item expands one run of 32 elements of one row: a whole block of
 * the 32-weight types, an eighth of a K-quant super-block, or 32 F32/F16/
 * BF16 elements (fewer at the end of a row whose length is not a multiple
 * of 32). Sources are byte pointers because the blocks (34, 18, 20, 22,
 * 144, 210... bytes) are not a multiple of any wider type. Layouts as
 * ggml's (host/quant.h describes each). */

inline float clf_scale(__global const uchar *p) { return vload_half(0, (__global const half *)p); }

/* Writes elements [32 b, min(32 b + 32, n)) of a row. */
inline void deq_f32(__global const uchar *row, int b, int n, __global float *out) {
    __global const float *x = (__global const float *)row + 32 * b;
    out += 32 * b;
    if (32 * b + 32 <= n) {
        vstore16(vload16(0, x), 0, out);
        vstore16(vload16(1, x), 1, out);
    } else {
        for (int j = 0; j < n - 32 * b; j++) out[j] = x[j];
    }
}

inline void deq_f16(__global const uchar *row, int b, int n, __global float *out) {
    __global const ushort *x = (__global const ushort *)row + 32 * b;
    out += 32 * b;
    if (32 * b + 32 <= n) {
        vstore16(clf_half16_to_float16(vload16(0, x)), 0, out);
        vstore16(clf_half16_to_float16(vload16(1, x)), 1, out);
    } else {
        for (int j = 0; j < n - 32 * b; j++) out[j] = vload_half(j, (__global const half *)x);
    }
}

/* Q8_0: fp16 d, 32 int8; w = d * q. */
inline void deq_q8_0(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q8_0 * b;
    float d = clf_scale(blk);
    __global const char *q = (__global const char *)(blk + 2);
    out += 32 * b;
    vstore16(d * convert_float16(vload16(0, q)), 0, out);
    vstore16(d * convert_float16(vload16(1, q)), 1, out);
}

/* Q4_0: fp16 d, 16 bytes; byte j holds weight j (low nibble) and j + 16
 * (high nibble); w = d * (q - 8). */
inline void deq_q4_0(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q4_0 * b;
    float d = clf_scale(blk);
    uchar16 q = vload16(0, blk + 2);
    out += 32 * b;
    vstore16(d * (convert_float16(q & (uchar)0xf) - 8.0f), 0, out);
    vstore16(d * (convert_float16(q >> (uchar)4) - 8.0f), 1, out);
}

/* Q4_1: fp16 d, fp16 m, 16 bytes of nibbles as Q4_0; w = d * q + m. */
inline void deq_q4_1(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q4_1 * b;
    float d = clf_scale(blk), m = clf_scale(blk + 2);
    uchar16 q = vload16(0, blk + 4);
    out += 32 * b;
    vstore16(d * convert_float16(q & (uchar)0xf) + m, 0, out);
    vstore16(d * convert_float16(q >> (uchar)4) + m, 1, out);
}

inline void deq_bf16(__global const uchar *row, int b, int n, __global float *out) {
    __global const ushort *x = (__global const ushort *)row + 32 * b;
    out += 32 * b;
    if (32 * b + 32 <= n) {
        vstore16(as_float16(convert_uint16(vload16(0, x)) << 16), 0, out);
        vstore16(as_float16(convert_uint16(vload16(1, x)) << 16), 1, out);
    } else {
        for (int j = 0; j < n - 32 * b; j++) out[j] = as_float((uint)x[j] << 16);
    }
}

/* The 32 fifth bits of a Q5 block, bit j for weight j (little-endian). */
inline uint clf_qh32(__global const uchar *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint)p[3] << 24; }

/* 16 bits of qh (starting at bit j0) as 0 or 16 per weight. */
inline float16 clf_bit16(uint qh, int j0) {
    const uint16 sh = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) + (uint)j0;
    return convert_float16(((uint16)qh >> sh) & 1u) * 16.0f;
}

/* Q5_0: fp16 d, qh[4], 16 bytes of low nibbles as Q4_0; w = d * (q - 16). */
inline void deq_q5_0(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q5_0 * b;
    float d = clf_scale(blk);
    uint qh = clf_qh32(blk + 2);
    uchar16 q = vload16(0, blk + 6);
    out += 32 * b;
    vstore16(d * (convert_float16(q & (uchar)0xf) + clf_bit16(qh, 0) - 16.0f), 0, out);
    vstore16(d * (convert_float16(q >> (uchar)4) + clf_bit16(qh, 16) - 16.0f), 1, out);
}

/* Q5_1: fp16 d, fp16 m, qh[4], nibbles; w = d * q + m. */
inline void deq_q5_1(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q5_1 * b;
    float d = clf_scale(blk), m = clf_scale(blk + 2);
    uint qh = clf_qh32(blk + 4);
    uchar16 q = vload16(0, blk + 8);
    out += 32 * b;
    vstore16(d * (convert_float16(q & (uchar)0xf) + clf_bit16(qh, 0)) + m, 0, out);
    vstore16(d * (convert_float16(q >> (uchar)4) + clf_bit16(qh, 16)) + m, 1, out);
}

/* IQ4_NL: fp16 d, nibbles as Q4_0 indexing a non-uniform grid. */
inline void deq_iq4_nl(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    const char16 grid = (char16)(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    __global const uchar *blk = row + CLF_BYTES_iq4_nl * b;
    float d = clf_scale(blk);
    uchar16 q = vload16(0, blk + 2);
    out += 32 * b;
    vstore16(d * convert_float16(shuffle(grid, q & (uchar)0xf)), 0, out);
    vstore16(d * convert_float16(shuffle(grid, q >> (uchar)4)), 1, out);
}

/* MXFP4: E8M0 exponent byte e, nibbles as Q4_0 indexing E2M1's values
 * doubled; w = value * 2^(e - 128) (cl/types.cl's CLF_E8M0_HALF_BITS). */
inline void deq_mxfp4(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    const char16 grid = (char16)(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    __global const uchar *blk = row + CLF_BYTES_mxfp4 * b;
    const float d = as_float(CLF_E8M0_HALF_BITS((uint)blk[0]));
    uchar16 q = vload16(0, blk + 1);
    out += 32 * b;
    vstore16(d * convert_float16(shuffle(grid, q & (uchar)0xf)), 0, out);
    vstore16(d * convert_float16(shuffle(grid, q >> (uchar)4)), 1, out);
}

/* Scale and min of sub-block s (0..7) of a Q4_K/Q5_K super-block: 6 bits
 * each, packed in 12 bytes. */
inline void clf_k4_scale_min(__global const uchar *sc, int s, float *scale, float *min) {
    if (s < 4) {
        *scale = sc[s] & 63;
        *min = sc[s + 4] & 63;
    } else {
        *scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
        *min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
    }
}

/* Q4_K (144 B): d, dmin, 12 scale bytes, 128 bytes of nibbles; run b % 8 is
 * sub-block s: nibbles (s odd: high) of qs[32 (s / 2) ...]; w = d sc q - dmin m. */
inline void deq_q4_k(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q4_k * (b / 8);
    const int s = b % 8;
    float sc, mn;
    clf_k4_scale_min(blk + 4, s, &sc, &mn);
    const float d = clf_scale(blk) * sc, m = clf_scale(blk + 2) * mn;
    const uchar sh = 4 * (s % 2);
    __global const uchar *q = blk + 16 + 32 * (s / 2);
    out += 32 * b;
    vstore16(d * convert_float16((vload16(0, q) >> sh) & (uchar)0xf) - m, 0, out);
    vstore16(d * convert_float16((vload16(1, q) >> sh) & (uchar)0xf) - m, 1, out);
}

/* Q5_K (176 B): as Q4_K with qh[32] before the nibbles: the fifth bit of
 * weight l of sub-block s is bit s of qh[l]. */
inline void deq_q5_k(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q5_k * (b / 8);
    const int s = b % 8;
    float sc, mn;
    clf_k4_scale_min(blk + 4, s, &sc, &mn);
    const float d = clf_scale(blk) * sc, m = clf_scale(blk + 2) * mn;
    const uchar sh = 4 * (s % 2);
    __global const uchar *q = blk + 48 + 32 * (s / 2), *qh = blk + 16;
    out += 32 * b;
    for (int h = 0; h < 2; h++) {
        const uchar16 v = ((vload16(h, q) >> sh) & (uchar)0xf) | (((vload16(h, qh) >> (uchar)s) & (uchar)1) << (uchar)4);
        vstore16(d * convert_float16(v) - m, h, out);
    }
}

/* Q6_K (210 B): ql[128], qh[64], int8 scales[16], d. Weight j of a
 * super-block, in half n = j / 128, quarter k = j % 128 / 32, l = j % 32:
 * low nibble of ql[64 n + 32 (k % 2) + l] (high nibble for k >= 2), bits
 * 2k of qh[32 n + l]; w = d * scales[j / 16] * (q - 32). */
inline void deq_q6_k(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q6_k * (b / 8);
    const int j0 = 32 * (b % 8), hf = j0 / 128, k = j0 % 128 / 32;
    const float d = clf_scale(blk + 208);
    __global const char *sc = (__global const char *)(blk + 192);
    __global const uchar *ql = blk + 64 * hf + 32 * (k % 2), *qh = blk + 128 + 32 * hf;
    out += 32 * b;
    for (int h = 0; h < 2; h++) {
        const uchar16 v = ((vload16(h, ql) >> (uchar)(4 * (k / 2))) & (uchar)0xf) |
                          (((vload16(h, qh) >> (uchar)(2 * k)) & (uchar)3) << (uchar)4);
        vstore16(d * sc[j0 / 16 + h] * (convert_float16(v) - 32.0f), h, out);
    }
}

/* Q2_K (84 B): scales[16] (scale low nibble, min high), qs[64], d, dmin.
 * Weight j: half n = j / 128, bits 2 (j % 128 / 32) of qs[32 n + j % 32];
 * w = d * sc * q - dmin * m of sub-block j / 16. */
inline void deq_q2_k(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q2_k * (b / 8);
    const int j0 = 32 * (b % 8);
    const float d = clf_scale(blk + 80), dmin = clf_scale(blk + 82);
    __global const uchar *q = blk + 16 + 32 * (j0 / 128);
    const uchar sh = 2 * (j0 % 128 / 32);
    out += 32 * b;
    for (int h = 0; h < 2; h++) {
        const uchar s = blk[j0 / 16 + h];
        vstore16(d * (s & 15) * convert_float16((vload16(h, q) >> sh) & (uchar)3) - dmin * (s >> 4), h, out);
    }
}

/* Q3_K (110 B): hmask[32], qs[64] (low 2 bits as Q2_K), 12 bytes of 6-bit
 * scales, d. Weight j: q = low bits - 4 unless bit j / 32 of hmask[j % 32]
 * is set; scale i = j / 16: low 4 bits nibble i / 8 of scales[i % 8], high
 * 2 bits at 2 (i / 4) of scales[8 + i % 4], minus 32; w = d * scale * q. */
inline void deq_q3_k(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + CLF_BYTES_q3_k * (b / 8);
    const int j0 = 32 * (b % 8);
    const float d = clf_scale(blk + 108);
    __global const uchar *q = blk + 32 + 32 * (j0 / 128), *sc = blk + 96;
    const uchar sh = 2 * (j0 % 128 / 32), hb = j0 / 32;
    out += 32 * b;
    for (int h = 0; h < 2; h++) {
        const int i = j0 / 16 + h;
        const int s = ((sc[i % 8] >> (4 * (i / 8))) & 15) | ((sc[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
        const uchar16 lo = (vload16(h, q) >> sh) & (uchar)3, hi = (vload16(h, blk) >> hb) & (uchar)1;
        vstore16(d * (s - 32) * (convert_float16(lo) - 4.0f + 4.0f * convert_float16(hi)), h, out);
    }
}

/* Global size (ceil(n / 32) rounded up to the local size, rows). Output row i is source row ids[i], or
 * row i when ids is NULL (a whole-tensor dequantize). src_off and dst_off
 * are in bytes and floats; row_bytes is the source row size. */
#define CLF_GET_ROWS(T)                                                                            \
    __kernel void get_rows_##T(__global const uchar *src, const ulong src_off, const ulong row_bytes, \
                               __global const int *ids, __global float *dst, const ulong dst_off,  \
                               const int n) {                                                      \
        int b = get_global_id(0);                                                                  \
        size_t i = get_global_id(1);                                                               \
        if (32 * b >= n) return;                                                                   \
        size_t r = ids ? (size_t)ids[i] : i;                                                       \
        deq_##T(src + src_off + r * row_bytes, b, n, dst + dst_off + i * (size_t)n);               \
    }

/* every type of the table (cl/types.cl) */
#define CLF_GET_ROWS_ROW(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CLF_GET_ROWS(name)
CLF_TYPES(CLF_GET_ROWS_ROW, ~)

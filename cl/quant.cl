/* Dequantization to F32 of GGUF block types, as whole tensors or as rows
 * picked by token id (the embedding lookup).
 *
 * One work-item expands one run of 32 elements of one row: a whole Q8_0,
 * Q4_0 or Q4_1 block, or 32 F32/F16 elements (fewer at the end of a row
 * whose length is not a multiple of 32). Sources are byte pointers because
 * the blocks (34, 18, 20 bytes) are not a multiple of any wider type. */

/* F16 bits to F32 for 16 values, in integer vector ops: vload_half is a
 * long software routine on some CPU drivers. Subnormal halves are made as
 * the difference of two normal floats, so the result is exact even where
 * the device flushes float denormals to zero. */
inline float16 clf_half16_to_float16(ushort16 h) {
    uint16 u = convert_uint16(h);
    uint16 em = (u & 0x7fffu) << 13; /* exponent and mantissa, in float position */
    uint16 e = em & 0x0f800000u;
    uint16 sign = (u & 0x8000u) << 16;
    uint16 normal = em + 0x38000000u;                                         /* rebias 15 -> 127 */
    uint16 special = em | 0x7f800000u;                                        /* inf / nan */
    float16 sub = as_float16(em + 0x38800000u) - (float16)6.103515625e-05f;   /* man * 2^-24 */
    uint16 r = select(normal, special, e == (uint16)0x0f800000u);
    r = select(r, as_uint16(sub), e == (uint16)0u);
    return as_float16(r | sign);
}

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
    __global const uchar *blk = row + 34 * b;
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
    __global const uchar *blk = row + 18 * b;
    float d = clf_scale(blk);
    uchar16 q = vload16(0, blk + 2);
    out += 32 * b;
    vstore16(d * (convert_float16(q & (uchar)0xf) - 8.0f), 0, out);
    vstore16(d * (convert_float16(q >> (uchar)4) - 8.0f), 1, out);
}

/* Q4_1: fp16 d, fp16 m, 16 bytes of nibbles as Q4_0; w = d * q + m. */
inline void deq_q4_1(__global const uchar *row, int b, int n, __global float *out) {
    (void)n;
    __global const uchar *blk = row + 20 * b;
    float d = clf_scale(blk), m = clf_scale(blk + 2);
    uchar16 q = vload16(0, blk + 4);
    out += 32 * b;
    vstore16(d * convert_float16(q & (uchar)0xf) + m, 0, out);
    vstore16(d * convert_float16(q >> (uchar)4) + m, 1, out);
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

CLF_GET_ROWS(f32)
CLF_GET_ROWS(f16)
CLF_GET_ROWS(q8_0)
CLF_GET_ROWS(q4_0)
CLF_GET_ROWS(q4_1)

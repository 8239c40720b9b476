#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "quant_k.h" /* every type's conversions, declared from the table */

_Static_assert(sizeof(clf_block_q8_0) == CLF_BYTES_q8_0, "Q8_0 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q4_0) == CLF_BYTES_q4_0, "Q4_0 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q4_1) == CLF_BYTES_q4_1, "Q4_1 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q5_0) == CLF_BYTES_q5_0, "Q5_0 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q5_1) == CLF_BYTES_q5_1, "Q5_1 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_iq4_nl) == CLF_BYTES_iq4_nl, "IQ4_NL block as cl/types.cl says");
_Static_assert(sizeof(clf_block_mxfp4) == CLF_BYTES_mxfp4, "MXFP4 block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q2_K) == CLF_BYTES_q2_k, "Q2_K block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q3_K) == CLF_BYTES_q3_k, "Q3_K block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q4_K) == CLF_BYTES_q4_k, "Q4_K block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q5_K) == CLF_BYTES_q5_k, "Q5_K block as cl/types.cl says");
_Static_assert(sizeof(clf_block_q6_K) == CLF_BYTES_q6_k, "Q6_K block as cl/types.cl says");

/* ggml's kvalues_iq4nl: a non-uniform 4-bit grid, denser near zero. */
const int8_t clf_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ggml's kvalues_mxfp4: E2M1's values (0, 0.5, 1, 1.5, 2, 3, 4, 6, then
 * negated) doubled to integers; the scale carries the half. */
const int8_t clf_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ---- scalar conversions ---------------------------------------------------- */

float clf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: value = man * 2^-24 */
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t clf_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past max half */
    if (ax < 0x38800000u) { /* subnormal half or zero: round man*2^-24 */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t r = ax + 0x0fff + ((ax >> 13) & 1); /* round to nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float clf_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t clf_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* NaN: keep it quiet, as ggml */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

/* ---- element types ---------------------------------------------------------- */

void clf_f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
void clf_f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void clf_f16_to_float(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = clf_f16_to_f32(((const uint16_t *)src)[i]);
}
void clf_f16_from_float(const float *src, void *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = clf_f32_to_f16(src[i]);
}

void clf_bf16_to_float(const void *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = clf_bf16_to_f32(((const uint16_t *)src)[i]);
}
void clf_bf16_from_float(const float *src, void *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = clf_f32_to_bf16(src[i]);
}

/* ---- 32-weight blocks ------------------------------------------------------- */

void clf_q8_0_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q8_0 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d);
        for (int j = 0; j < CLF_QK; j++) y[j] = x->qs[j] * d;
    }
}

void clf_q4_0_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q4_0 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d);
        for (int j = 0; j < CLF_QK / 2; j++) {
            y[j] = ((x->qs[j] & 0xf) - 8) * d;
            y[j + 16] = ((x->qs[j] >> 4) - 8) * d;
        }
    }
}

void clf_q4_1_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q4_1 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d), m = clf_f16_to_f32(x->m);
        for (int j = 0; j < CLF_QK / 2; j++) {
            y[j] = (x->qs[j] & 0xf) * d + m;
            y[j + 16] = (x->qs[j] >> 4) * d + m;
        }
    }
}

/* The 5-bit codes of a Q5 block: low nibble from qs, fifth bit from qh. */
static void q5_codes(const uint8_t *qh4, const uint8_t *qs, int q[CLF_QK]) {
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    for (int j = 0; j < CLF_QK / 2; j++) {
        q[j] = (qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

static void q5_pack(const int q[CLF_QK], uint8_t *qh4, uint8_t *qs) {
    uint32_t qh = 0;
    for (int j = 0; j < CLF_QK / 2; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
        qh |= (uint32_t)(q[j] >> 4 & 1) << j | (uint32_t)(q[j + 16] >> 4 & 1) << (j + 16);
    }
    for (int i = 0; i < 4; i++) qh4[i] = (uint8_t)(qh >> 8 * i);
}

void clf_q5_0_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q5_0 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d);
        int q[CLF_QK];
        q5_codes(x->qh, x->qs, q);
        for (int j = 0; j < CLF_QK; j++) y[j] = (q[j] - 16) * d;
    }
}

void clf_q5_1_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q5_1 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d), m = clf_f16_to_f32(x->m);
        int q[CLF_QK];
        q5_codes(x->qh, x->qs, q);
        for (int j = 0; j < CLF_QK; j++) y[j] = q[j] * d + m;
    }
}

void clf_iq4_nl_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_iq4_nl *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_f16_to_f32(x->d);
        for (int j = 0; j < CLF_QK / 2; j++) {
            y[j] = d * clf_iq4nl_values[x->qs[j] & 0xf];
            y[j + 16] = d * clf_iq4nl_values[x->qs[j] >> 4];
        }
    }
}

/* 2^(e − 128) exactly, as ggml's ggml_e8m0_to_fp32_half: e < 2 gives the
 * float subnormals 2^-128 and 2^-127, e = 255 gives 2^127 (not NaN). */
float clf_e8m0_half(uint8_t e) {
    uint32_t bits = CLF_E8M0_HALF_BITS((uint32_t)e);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void clf_mxfp4_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_mxfp4 *x = src; nb--; x++, y += CLF_QK) {
        float d = clf_e8m0_half(x->e);
        for (int j = 0; j < CLF_QK / 2; j++) {
            y[j] = clf_mxfp4_values[x->qs[j] & 0xf] * d;
            y[j + 16] = clf_mxfp4_values[x->qs[j] >> 4] * d;
        }
    }
}

/* ggml's reference quantizers (quantize_row_*_ref): a scale from the block's
 * extreme value, codes by truncating x / d plus an offset. */

void clf_q8_0_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q8_0 *y = dst; nb--; y++, x += CLF_QK) {
        float amax = 0;
        for (int j = 0; j < CLF_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y->d = clf_f32_to_f16(d);
        for (int j = 0; j < CLF_QK; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* The signed value of largest magnitude (the first of equals). */
static float signed_max(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    return max;
}

void clf_q4_0_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q4_0 *y = dst; nb--; y++, x += CLF_QK) {
        float d = signed_max(x, CLF_QK) / -8.0f, id = d ? 1.0f / d : 0.0f;
        y->d = clf_f32_to_f16(d);
        for (int j = 0; j < CLF_QK / 2; j++) {
            int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = x[0], *hi = x[0];
    for (int j = 1; j < n; j++) *lo = fminf(*lo, x[j]), *hi = fmaxf(*hi, x[j]);
}

void clf_q4_1_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q4_1 *y = dst; nb--; y++, x += CLF_QK) {
        float min, max;
        min_max(x, CLF_QK, &min, &max);
        float d = (max - min) / 15.0f, id = d ? 1.0f / d : 0.0f;
        y->d = clf_f32_to_f16(d);
        y->m = clf_f32_to_f16(min);
        for (int j = 0; j < CLF_QK / 2; j++) {
            int q0 = (int)((x[j] - min) * id + 0.5f), q1 = (int)((x[j + 16] - min) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void clf_q5_0_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q5_0 *y = dst; nb--; y++, x += CLF_QK) {
        float d = signed_max(x, CLF_QK) / -16.0f, id = d ? 1.0f / d : 0.0f;
        y->d = clf_f32_to_f16(d);
        int q[CLF_QK];
        for (int j = 0; j < CLF_QK; j++) {
            q[j] = (int)(x[j] * id + 16.5f);
            q[j] = q[j] > 31 ? 31 : q[j];
        }
        q5_pack(q, y->qh, y->qs);
    }
}

void clf_q5_1_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q5_1 *y = dst; nb--; y++, x += CLF_QK) {
        float min, max;
        min_max(x, CLF_QK, &min, &max);
        float d = (max - min) / 31.0f, id = d ? 1.0f / d : 0.0f;
        y->d = clf_f32_to_f16(d);
        y->m = clf_f32_to_f16(min);
        int q[CLF_QK];
        for (int j = 0; j < CLF_QK; j++) q[j] = (int)((x[j] - min) * id + 0.5f); /* at most 31: min..max spans 31 d */
        q5_pack(q, y->qh, y->qs);
    }
}

/* ggml's best_index_mxfp4: the value nearest x at scale d, the first of
 * equals (so 0 is code 0, never 8). */
static int mxfp4_nearest(float x, float d) {
    int best = 0;
    float best_err = fabsf(clf_mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(clf_mxfp4_values[i] * d - x);
        if (err < best_err) best = i, best_err = err;
    }
    return best;
}

/* quantize_row_mxfp4_ref: e = floor(log2 max|x|) + 125, so max|x| is 8 to
 * 16 times d = 2^(e − 128) (the grid's 8 and 12 lie there; above 12 d the
 * largest weights clip), through log2f as ggml takes it (the same float
 * rounding next to powers of two); then each weight's nearest value. ggml converts the exponent with
 * a plain (uint8_t) cast: on x86 (cvttss2si, then the low byte) a tiny max
 * (below 2^-125) wraps modulo 256 and an infinite one gives 0; written out
 * here, so the C stays defined and the bytes stay ggml's. */
void clf_mxfp4_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_mxfp4 *y = dst; nb--; y++, x += CLF_QK) {
        float amax = 0;
        for (int j = 0; j < CLF_QK; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        int e = 0;
        if (amax > 0 && isfinite(amax)) e = (int)(floorf(log2f(amax)) - 2 + 127);
        y->e = (uint8_t)(e & 0xff);
        const float d = clf_e8m0_half(y->e);
        for (int j = 0; j < CLF_QK / 2; j++)
            y->qs[j] = (uint8_t)(mxfp4_nearest(x[j], d) | mxfp4_nearest(x[j + 16], d) << 4);
    }
}

/* ---- codes (the CPU panels' integer codes; clf_type_info.codes) ------------ */

/* Each reads its block's fields through the block's struct (as quant_k.c
 * does), not at byte offsets counted by hand. */
void clf_q8_0_codes(const unsigned char *blk, uint8_t *c) {
    memcpy(c, ((const clf_block_q8_0 *)(const void *)blk)->qs, CLF_QK);
}

static void nibbles(const unsigned char *qs, uint8_t *c) {
    for (int j = 0; j < CLF_QK / 2; j++) {
        c[j] = qs[j] & 15;
        c[j + 16] = qs[j] >> 4;
    }
}

void clf_q4_0_codes(const unsigned char *blk, uint8_t *c) { nibbles(((const clf_block_q4_0 *)(const void *)blk)->qs, c); }
void clf_q4_1_codes(const unsigned char *blk, uint8_t *c) { nibbles(((const clf_block_q4_1 *)(const void *)blk)->qs, c); }
void clf_iq4_nl_codes(const unsigned char *blk, uint8_t *c) { /* grid indices */
    nibbles(((const clf_block_iq4_nl *)(const void *)blk)->qs, c);
}

void clf_mxfp4_codes(const unsigned char *blk, uint8_t *c) { /* grid indices */
    nibbles(((const clf_block_mxfp4 *)(const void *)blk)->qs, c);
}

static void fifth_bits(const unsigned char *qh, uint8_t *c) {
    for (int j = 0; j < CLF_QK; j++) c[j] |= (uint8_t)((qh[j / 8] >> (j % 8) & 1) << 4);
}

void clf_q5_0_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q5_0 *x = (const void *)blk;
    nibbles(x->qs, c);
    fifth_bits(x->qh, c);
}

void clf_q5_1_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q5_1 *x = (const void *)blk;
    nibbles(x->qs, c);
    fifth_bits(x->qh, c);
}

/* ---- the table ---------------------------------------------------------------- */

/* CLF_CODES_<CPU>(name): the type's codes function, none for floats */
#define CLF_CODES_FLT(name) NULL
#define CLF_CODES_Q8(name) clf_##name##_codes
#define CLF_CODES_Q4(name) clf_##name##_codes
#define CLF_CODES_KQI(name) clf_##name##_codes
#define CLF_CODES_KQF(name) clf_##name##_codes
#define TYPE_INFO(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    [ID] = {#NAME, #name, QK, BYTES, clf_##name##_to_float, clf_##name##_from_float, CLF_CODES_##CPU(name)},
static const clf_type_info clf_types[CLF_TYPE_COUNT] = {CLF_TYPES(TYPE_INFO, ~)};

#define TYPE_ID(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) CLF_##NAME,
const clf_type clf_type_list[CLF_NTYPES] = {CLF_TYPES(TYPE_ID, ~)};

const clf_type_info *clf_type_get(uint32_t type) {
    if (type >= CLF_TYPE_COUNT || !clf_types[type].name) return NULL;
    return &clf_types[type];
}

char *clf_type_names(char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < CLF_TYPE_COUNT && len < n; i++)
        if (clf_types[i].name) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", clf_types[i].name);
            if (w < 0) break;
            len += (size_t)w;
        }
    return buf;
}

int clf_type_from_name(const char *name) {
    for (int i = 0; i < CLF_TYPE_COUNT; i++)
        if (clf_types[i].name && strcasecmp(clf_types[i].name, name) == 0) return i;
    return -1;
}

size_t clf_row_bytes(clf_type type, int64_t n) {
    const clf_type_info *ti = clf_type_get(type);
    if (!ti || n < 0 || n % ti->block || (uint64_t)(n / ti->block) > SIZE_MAX / (size_t)ti->block_bytes) return 0;
    return (size_t)(n / ti->block) * (size_t)ti->block_bytes;
}

void clf_dequantize(clf_type type, const void *src, float *dst, int64_t n) {
    const clf_type_info *ti = clf_type_get(type);
    if (ti) ti->to_float(src, dst, n / ti->block);
}

void clf_quantize(clf_type type, const float *src, void *dst, int64_t n) {
    const clf_type_info *ti = clf_type_get(type);
    if (ti) ti->from_float(src, dst, n / ti->block);
}

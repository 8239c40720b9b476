#include "quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

_Static_assert(sizeof(clf_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(clf_block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(clf_block_q4_1) == 20, "Q4_1 block is 20 bytes");

static const clf_type_info clf_types[] = {
    [CLF_F32] = {"F32", 1, 4},
    [CLF_F16] = {"F16", 1, 2},
    [CLF_Q4_0] = {"Q4_0", CLF_QK, sizeof(clf_block_q4_0)},
    [CLF_Q4_1] = {"Q4_1", CLF_QK, sizeof(clf_block_q4_1)},
    [CLF_Q8_0] = {"Q8_0", CLF_QK, sizeof(clf_block_q8_0)},
};

const clf_type_info *clf_type_get(uint32_t type) {
    if (type >= sizeof clf_types / sizeof clf_types[0] || !clf_types[type].name) return NULL;
    return &clf_types[type];
}

int clf_type_from_name(const char *name) {
    for (size_t i = 0; i < sizeof clf_types / sizeof clf_types[0]; i++)
        if (clf_types[i].name && strcasecmp(clf_types[i].name, name) == 0) return (int)i;
    return -1;
}

size_t clf_row_bytes(clf_type type, int64_t n) {
    const clf_type_info *ti = clf_type_get(type);
    if (!ti || n < 0 || n % ti->block || (uint64_t)(n / ti->block) > SIZE_MAX / (size_t)ti->block_bytes) return 0;
    return (size_t)(n / ti->block) * (size_t)ti->block_bytes;
}

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

void clf_dequantize(clf_type type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case CLF_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case CLF_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = clf_f16_to_f32(((const uint16_t *)src)[i]);
        break;
    case CLF_Q8_0:
        for (int64_t b = 0; b < n / CLF_QK; b++) {
            const clf_block_q8_0 *x = (const clf_block_q8_0 *)src + b;
            float d = clf_f16_to_f32(x->d);
            for (int j = 0; j < CLF_QK; j++) dst[b * CLF_QK + j] = d * x->qs[j];
        }
        break;
    case CLF_Q4_0:
        for (int64_t b = 0; b < n / CLF_QK; b++) {
            const clf_block_q4_0 *x = (const clf_block_q4_0 *)src + b;
            float d = clf_f16_to_f32(x->d);
            for (int j = 0; j < CLF_QK / 2; j++) {
                dst[b * CLF_QK + j] = d * ((x->qs[j] & 0xf) - 8);
                dst[b * CLF_QK + j + 16] = d * ((x->qs[j] >> 4) - 8);
            }
        }
        break;
    case CLF_Q4_1:
        for (int64_t b = 0; b < n / CLF_QK; b++) {
            const clf_block_q4_1 *x = (const clf_block_q4_1 *)src + b;
            float d = clf_f16_to_f32(x->d), m = clf_f16_to_f32(x->m);
            for (int j = 0; j < CLF_QK / 2; j++) {
                dst[b * CLF_QK + j] = d * (x->qs[j] & 0xf) + m;
                dst[b * CLF_QK + j + 16] = d * (x->qs[j] >> 4) + m;
            }
        }
        break;
    }
}

static void quantize_q8_0(const float *x, clf_block_q8_0 *y) {
    float amax = 0;
    for (int j = 0; j < CLF_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    y->d = clf_f32_to_f16(d);
    for (int j = 0; j < CLF_QK; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
}

static void quantize_q4_0(const float *x, clf_block_q4_0 *y) {
    float amax = 0, max = 0; /* max: the signed value of largest magnitude */
    for (int j = 0; j < CLF_QK; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    y->d = clf_f32_to_f16(d);
    for (int j = 0; j < CLF_QK / 2; j++) {
        int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
        q0 = q0 > 15 ? 15 : q0;
        q1 = q1 > 15 ? 15 : q1;
        y->qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
}

static void quantize_q4_1(const float *x, clf_block_q4_1 *y) {
    float min = x[0], max = x[0];
    for (int j = 1; j < CLF_QK; j++) { min = fminf(min, x[j]); max = fmaxf(max, x[j]); }
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

void clf_quantize(clf_type type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case CLF_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case CLF_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = clf_f32_to_f16(src[i]);
        break;
    case CLF_Q8_0:
        for (int64_t b = 0; b < n / CLF_QK; b++) quantize_q8_0(src + b * CLF_QK, (clf_block_q8_0 *)dst + b);
        break;
    case CLF_Q4_0:
        for (int64_t b = 0; b < n / CLF_QK; b++) quantize_q4_0(src + b * CLF_QK, (clf_block_q4_0 *)dst + b);
        break;
    case CLF_Q4_1:
        for (int64_t b = 0; b < n / CLF_QK; b++) quantize_q4_1(src + b * CLF_QK, (clf_block_q4_1 *)dst + b);
        break;
    }
}

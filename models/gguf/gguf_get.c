/* Typed GGUF metadata accessors: a missing key or a value that cannot hold
 * the request is an error naming the key and both types. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gguf.h"

static clf_status find(const clf_gguf *g, const char *key, const clf_gguf_kv **kv) {
    *kv = clf_gguf_find(g, key);
    if (!*kv) return clf_fail(CLF_ERR_FORMAT, "missing metadata key '%s'", key);
    return CLF_OK;
}

static clf_status wrong_type(const clf_gguf_kv *kv, const char *key, const char *want) {
    if (kv->type == CLF_GGUF_ARRAY)
        return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' has type array of %s, expected %s", key,
                        clf_gguf_vtype_name(kv->arr_type), want);
    return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' has type %s, expected %s", key, clf_gguf_vtype_name(kv->type),
                    want);
}

/* An integer value, widened: *neg tells whether it is below zero (then *s
 * holds it), otherwise *u does. Returns 0 when kv is not an integer. */
static int int_value(const clf_gguf_kv *kv, int *neg, int64_t *s, uint64_t *u) {
    const void *p = kv->data;
    *neg = 0;
    switch (kv->type) {
    case CLF_GGUF_UINT8: { uint8_t v; memcpy(&v, p, 1); *u = v; return 1; }
    case CLF_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *u = v; return 1; }
    case CLF_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *u = v; return 1; }
    case CLF_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); *u = v; return 1; }
    case CLF_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); *s = v; break; }
    case CLF_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *s = v; break; }
    case CLF_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *s = v; break; }
    case CLF_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *s = v; break; }
    default: return 0;
    }
    if (*s < 0) *neg = 1;
    else *u = (uint64_t)*s;
    return 1;
}

static clf_status out_of_range(const char *key, int neg, int64_t s, uint64_t u, const char *want) {
    if (neg) return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' = %" PRId64 " is out of range for %s", key, s, want);
    return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' = %" PRIu64 " is out of range for %s", key, u, want);
}

clf_status clf_gguf_get_u32(const clf_gguf *g, const char *key, uint32_t *out) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    int neg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!int_value(kv, &neg, &s, &u)) return wrong_type(kv, key, "an integer (uint32)");
    if (neg || u > UINT32_MAX) return out_of_range(key, neg, s, u, "uint32");
    *out = (uint32_t)u;
    return CLF_OK;
}

clf_status clf_gguf_get_i64(const clf_gguf *g, const char *key, int64_t *out) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    int neg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!int_value(kv, &neg, &s, &u)) return wrong_type(kv, key, "an integer (int64)");
    if (!neg && u > INT64_MAX) return out_of_range(key, neg, s, u, "int64");
    *out = neg ? s : (int64_t)u;
    return CLF_OK;
}

clf_status clf_gguf_get_f32(const clf_gguf *g, const char *key, float *out) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    if (kv->type == CLF_GGUF_FLOAT32) {
        memcpy(out, kv->data, 4);
        return CLF_OK;
    }
    if (kv->type == CLF_GGUF_FLOAT64) {
        double d;
        memcpy(&d, kv->data, 8);
        if (isfinite(d) && fabs(d) > 3.4028234663852886e38)
            return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' = %g is out of range for float32", key, d);
        *out = (float)d;
        return CLF_OK;
    }
    int neg;
    int64_t s = 0;
    uint64_t u = 0;
    if (!int_value(kv, &neg, &s, &u)) return wrong_type(kv, key, "a number (float32)");
    *out = neg ? (float)s : (float)u;
    return CLF_OK;
}

clf_status clf_gguf_get_bool(const clf_gguf *g, const char *key, int *out) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    if (kv->type != CLF_GGUF_BOOL) return wrong_type(kv, key, "bool");
    *out = *(const uint8_t *)kv->data != 0;
    return CLF_OK;
}

clf_status clf_gguf_get_str(const clf_gguf *g, const char *key, clf_gguf_str *out) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    if (kv->type != CLF_GGUF_STRING) return wrong_type(kv, key, "string");
    *out = kv->str;
    return CLF_OK;
}

clf_status clf_gguf_get_arr(const clf_gguf *g, const char *key, clf_gguf_vtype elem_type, const void **data,
                            uint64_t *n) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    char want[48];
    snprintf(want, sizeof want, "array of %s", clf_gguf_vtype_name(elem_type));
    if (elem_type == CLF_GGUF_STRING || elem_type == CLF_GGUF_ARRAY)
        return clf_fail(CLF_ERR_ARG, "clf_gguf_get_arr('%s'): use clf_gguf_get_strs for strings; nested arrays have no accessor",
                        key);
    if (kv->type != CLF_GGUF_ARRAY || kv->arr_type != elem_type) return wrong_type(kv, key, want);
    *data = kv->data;
    *n = kv->arr_n;
    return CLF_OK;
}

clf_status clf_gguf_get_strs(const clf_gguf *g, const char *key, const clf_gguf_str **items, uint64_t *n) {
    const clf_gguf_kv *kv;
    CLF_TRY(find(g, key, &kv));
    if (kv->type != CLF_GGUF_ARRAY || kv->arr_type != CLF_GGUF_STRING) return wrong_type(kv, key, "array of string");
    *items = kv->strs;
    *n = kv->arr_n;
    return CLF_OK;
}

/* GGUF writer: key/values serialized as they are set, tensors held until
 * clf_gguf_write lays them out aligned and writes version 3 through an
 * output file that appears only when complete (tools/quantize/outfile.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "outfile.h"

#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct wkv {
    char *key;
    clf_gguf_vtype type;
    uint8_t *val; /* the value as stored in the file (after the type) */
    size_t len;
} wkv;

typedef struct wtensor {
    char *name;
    clf_type type;
    uint32_t n_dims;
    int64_t ne[4];
    void *data;
    size_t bytes;
} wtensor;

struct clf_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    int (*abort)(void *); /* a stop request, checked while writing */
    void *abort_ud;
};

void clf_gguf_writer_set_abort(clf_gguf_writer *w, int (*fn)(void *), void *ud) {
    w->abort = fn;
    w->abort_ud = ud;
}

clf_status clf_gguf_writer_create(clf_gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    return *out ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of memory creating a GGUF writer");
}

void clf_gguf_writer_free(clf_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->kvs);
    free(w->tensors);
    free(w);
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 32;
    void *p = realloc(*arr, nc * elem);
    if (!p) return 0;
    *arr = p;
    *cap = nc;
    return 1;
}

/* Stores key = (type, val[len]); takes val. Replaces an existing key. */
static clf_status put(clf_gguf_writer *w, const char *key, clf_gguf_vtype type, uint8_t *val, size_t len) {
    if (!key || !*key) {
        free(val);
        return clf_fail(CLF_ERR_ARG, "GGUF writer: empty metadata key");
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0) {
            free(w->kvs[i].val);
            w->kvs[i].type = type;
            w->kvs[i].val = val;
            w->kvs[i].len = len;
            return CLF_OK;
        }
    char *k = strdup(key);
    if (!k || !grow((void **)&w->kvs, &w->cap_kv, w->n_kv, sizeof *w->kvs)) {
        free(k);
        free(val);
        return clf_fail(CLF_ERR_MEMORY, "out of memory setting '%s'", key);
    }
    w->kvs[w->n_kv++] = (wkv){k, type, val, len};
    return CLF_OK;
}

/* A value made of one or two byte runs (header + body). */
static clf_status put2(clf_gguf_writer *w, const char *key, clf_gguf_vtype type, const void *a, size_t na,
                       const void *b, size_t nb) {
    uint8_t *val = malloc(na + nb ? na + nb : 1);
    if (!val) return clf_fail(CLF_ERR_MEMORY, "out of memory setting '%s' (%zu bytes)", key, na + nb);
    if (na) memcpy(val, a, na);
    if (nb) memcpy(val + na, b, nb);
    return put(w, key, type, val, na + nb);
}

clf_status clf_gguf_set_u32(clf_gguf_writer *w, const char *key, uint32_t v) {
    return put2(w, key, CLF_GGUF_UINT32, &v, 4, NULL, 0);
}

clf_status clf_gguf_set_f32(clf_gguf_writer *w, const char *key, float v) {
    return put2(w, key, CLF_GGUF_FLOAT32, &v, 4, NULL, 0);
}

clf_status clf_gguf_set_bool(clf_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return put2(w, key, CLF_GGUF_BOOL, &b, 1, NULL, 0);
}

static clf_status set_string(clf_gguf_writer *w, const char *key, const char *s, uint64_t n) {
    return put2(w, key, CLF_GGUF_STRING, &n, 8, s, (size_t)n);
}

clf_status clf_gguf_set_str(clf_gguf_writer *w, const char *key, const char *v) {
    return set_string(w, key, v, strlen(v));
}

static clf_status set_array(clf_gguf_writer *w, const char *key, clf_gguf_vtype elem, uint64_t n, const void *body,
                            size_t body_len) {
    uint8_t hdr[12];
    uint32_t t = elem;
    memcpy(hdr, &t, 4);
    memcpy(hdr + 4, &n, 8);
    return put2(w, key, CLF_GGUF_ARRAY, hdr, 12, body, body_len);
}

clf_status clf_gguf_set_arr(clf_gguf_writer *w, const char *key, clf_gguf_vtype elem_type, const void *data,
                            uint64_t n) {
    size_t es = clf_gguf_vtype_size(elem_type);
    if (!es)
        return clf_fail(CLF_ERR_ARG, "GGUF writer: '%s': clf_gguf_set_arr takes fixed-size elements, not %s", key,
                        clf_gguf_vtype_name(elem_type));
    if (n > SIZE_MAX / es) return clf_fail(CLF_ERR_ARG, "GGUF writer: '%s': array of %" PRIu64 " is too long", key, n);
    return set_array(w, key, elem_type, n, data, (size_t)n * es);
}

clf_status clf_gguf_set_strs(clf_gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    size_t len = 0;
    for (uint64_t i = 0; i < n; i++) len += 8 + strlen(v[i]);
    uint8_t *body = malloc(len ? len : 1), *p = body;
    if (!body) return clf_fail(CLF_ERR_MEMORY, "out of memory setting '%s' (%" PRIu64 " strings)", key, n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sl = strlen(v[i]);
        memcpy(p, &sl, 8);
        memcpy(p + 8, v[i], (size_t)sl);
        p += 8 + sl;
    }
    clf_status st = set_array(w, key, CLF_GGUF_STRING, n, body, len);
    free(body);
    return st;
}

clf_status clf_gguf_set_kv(clf_gguf_writer *w, const clf_gguf_kv *kv) {
    char key[1024];
    if (kv->key.len >= sizeof key) return clf_fail(CLF_ERR_ARG, "GGUF writer: key of %" PRIu64 " bytes is too long", kv->key.len);
    memcpy(key, kv->key.ptr, (size_t)kv->key.len);
    key[kv->key.len] = 0;
    switch (kv->type) {
    case CLF_GGUF_STRING: return set_string(w, key, kv->str.ptr, kv->str.len);
    case CLF_GGUF_ARRAY: return set_array(w, key, kv->arr_type, kv->arr_n, kv->data, (size_t)kv->data_bytes);
    default:
        if (!clf_gguf_vtype_size(kv->type))
            return clf_fail(CLF_ERR_ARG, "GGUF writer: '%s' has unknown value type %d", key, (int)kv->type);
        return put2(w, key, kv->type, kv->data, clf_gguf_vtype_size(kv->type), NULL, 0);
    }
}

/* ---- tensors --------------------------------------------------------------- */

static clf_status tensor_bytes(const char *name, clf_type type, uint32_t n_dims, const int64_t *ne, size_t *bytes) {
    const clf_type_info *ti = clf_type_get(type);
    if (!ti) return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' has unsupported type %d", name, (int)type);
    if (n_dims < 1 || n_dims > 4)
        return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' has %" PRIu32 " dimensions (1 to 4)", name, n_dims);
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0) return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' dimension %" PRIu32 " is %" PRId64, name, d, ne[d]);
        if (d > 0) {
            if (rows > SIZE_MAX / (uint64_t)ne[d]) return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' is too large", name);
            rows *= (uint64_t)ne[d];
        }
    }
    if (ne[0] % ti->block)
        return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' row length %" PRId64 " is not a multiple of the %s block %d",
                        name, ne[0], ti->name, ti->block);
    if ((uint64_t)(ne[0] / ti->block) > SIZE_MAX / (size_t)ti->block_bytes)
        return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' is too large", name);
    size_t row = (size_t)(ne[0] / ti->block) * (size_t)ti->block_bytes;
    if (rows > SIZE_MAX / row) return clf_fail(CLF_ERR_ARG, "GGUF writer: tensor '%s' is too large", name);
    *bytes = row * (size_t)rows;
    return CLF_OK;
}

clf_status clf_gguf_add_tensor_take(clf_gguf_writer *w, const char *name, clf_type type, uint32_t n_dims,
                                    const int64_t *ne, void *data) {
    size_t bytes;
    clf_status st = tensor_bytes(name, type, n_dims, ne, &bytes);
    if (st == CLF_OK && !*name) st = clf_fail(CLF_ERR_ARG, "GGUF writer: empty tensor name");
    for (size_t i = 0; st == CLF_OK && i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) st = clf_fail(CLF_ERR_ARG, "GGUF writer: duplicate tensor '%s'", name);
    char *n = NULL;
    if (st == CLF_OK && (!(n = strdup(name)) || !grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors)))
        st = clf_fail(CLF_ERR_MEMORY, "out of memory adding tensor '%s'", name);
    if (st != CLF_OK) {
        free(n);
        free(data);
        return st;
    }
    wtensor *t = &w->tensors[w->n_tensors++];
    *t = (wtensor){.name = n, .type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data, .bytes = bytes};
    memcpy(t->ne, ne, n_dims * sizeof *ne);
    return CLF_OK;
}

clf_status clf_gguf_add_tensor(clf_gguf_writer *w, const char *name, clf_type type, uint32_t n_dims,
                               const int64_t *ne, const void *data) {
    size_t bytes;
    CLF_TRY(tensor_bytes(name, type, n_dims, ne, &bytes));
    void *copy = malloc(bytes);
    if (!copy) return clf_fail(CLF_ERR_MEMORY, "out of memory copying tensor '%s' (%zu bytes)", name, bytes);
    memcpy(copy, data, bytes);
    return clf_gguf_add_tensor_take(w, name, type, n_dims, ne, copy);
}

/* ---- output ------------------------------------------------------------------ */

typedef struct out {
    FILE *f;
    const clf_gguf_writer *w;
    uint64_t off;
    int failed; /* errno of the first failed write */
    int aborted;
} out;

static void emit(out *o, const void *p, size_t n) {
    if (o->failed || o->aborted || n == 0) return;
    if (o->w->abort && o->w->abort(o->w->abort_ud)) o->aborted = 1;
    else if (fwrite(p, 1, n, o->f) != n) o->failed = errno ? errno : EIO;
    o->off += n;
}

static void emit_u32(out *o, uint32_t v) { emit(o, &v, 4); }
static void emit_u64(out *o, uint64_t v) { emit(o, &v, 8); }

static void emit_pad(out *o, size_t align) {
    static const uint8_t zeros[256];
    size_t pad = (size_t)((align - o->off % align) % align);
    while (pad && !o->failed) {
        size_t n = pad < sizeof zeros ? pad : sizeof zeros;
        emit(o, zeros, n);
        pad -= n;
    }
}

/* The alignment: general.alignment if set (an integer power of two). */
static clf_status writer_alignment(clf_gguf_writer *w, size_t *align) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment")) continue;
        uint32_t a;
        if (w->kvs[i].type != CLF_GGUF_UINT32 || ((void)memcpy(&a, w->kvs[i].val, 4), a == 0) || (a & (a - 1)))
            return clf_fail(CLF_ERR_ARG, "GGUF writer: general.alignment must be a uint32 power of two");
        *align = a;
        return CLF_OK;
    }
    *align = GGUF_DEFAULT_ALIGNMENT;
    return clf_gguf_set_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
}

static void emit_all(clf_gguf_writer *w, out *o, size_t align) {
    emit(o, "GGUF", 4);
    emit_u32(o, 3);
    emit_u64(o, w->n_tensors);
    emit_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_u64(o, strlen(w->kvs[i].key));
        emit(o, w->kvs[i].key, strlen(w->kvs[i].key));
        emit_u32(o, w->kvs[i].type);
        emit(o, w->kvs[i].val, w->kvs[i].len);
    }
    uint64_t data_off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        emit_u64(o, strlen(t->name));
        emit(o, t->name, strlen(t->name));
        emit_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) emit_u64(o, (uint64_t)t->ne[d]);
        emit_u32(o, t->type);
        emit_u64(o, data_off);
        data_off += (t->bytes + align - 1) / align * align;
    }
    emit_pad(o, align);
    for (size_t i = 0; i < w->n_tensors; i++) {
        emit(o, w->tensors[i].data, w->tensors[i].bytes);
        emit_pad(o, align);
    }
}

clf_status clf_gguf_write(clf_gguf_writer *w, const char *path) {
    size_t align;
    CLF_TRY(writer_alignment(w, &align));
    clf_outfile of;
    CLF_TRY(clf_outfile_open(path, &of));
    out o = {.f = of.f, .w = w};
    errno = 0;
    emit_all(w, &o, align);
    if (!o.failed && !o.aborted && w->abort && w->abort(w->abort_ud)) o.aborted = 1; /* during the last write */
    if (!o.failed && !o.aborted) return clf_outfile_commit(&of);
    clf_outfile_discard(&of);
    if (o.aborted) return clf_fail(CLF_ERR_INTERRUPTED, "writing '%s' stopped; nothing written", path);
    return clf_fail(CLF_ERR_IO, "cannot write '%s': %s", path, strerror(o.failed));
}

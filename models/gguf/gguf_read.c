/* GGUF reader. The file is mapped read-only and parsed in one pass by a
 * cursor that checks every read against the bytes that remain, so a hostile
 * count, length or offset fails with a message naming the byte offset and
 * the key or tensor it belongs to, before anything is allocated for it. */
#include "gguf.h"

#include "file.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NESTING 8 /* arrays of arrays: deeper is refused, not recursed */
#define GGUF_MAX_DIMS 4

struct clf_gguf {
    const uint8_t *base;
    size_t size;
    void *map;  /* non-NULL when clf_gguf_open mapped the file */
    int fd;     /* the mapped file, kept open to notice it shrink; -1 if none */
    char *path; /* for messages */
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    int64_t n_kv, n_tensors;
    clf_gguf_kv *kvs;
    clf_gguf_tensor *tensors;
    /* open-addressing hash tables of indices + 1 (0 = empty slot) */
    int64_t *kv_index, *tensor_index;
    size_t kv_cap, tensor_cap;
};

/* ---- value types --------------------------------------------------------- */

static const char *const vtype_names[] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

const char *clf_gguf_vtype_name(clf_gguf_vtype t) {
    return (unsigned)t < sizeof vtype_names / sizeof vtype_names[0] ? vtype_names[t] : "unknown";
}

size_t clf_gguf_vtype_size(clf_gguf_vtype t) {
    static const unsigned char sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < sizeof sizes ? sizes[t] : 0;
}

static int vtype_valid(uint32_t t) { return t <= CLF_GGUF_FLOAT64; }

/* GGML type names, for a clear message about types clinfer does not read. */
static const char *ggml_type_name(uint32_t t) {
    static const char *const names[] = {
        "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
        "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
        "IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0",
    };
    return t < sizeof names / sizeof names[0] && names[t] ? names[t] : "unknown";
}

/* ---- the cursor ------------------------------------------------------------ */

typedef struct cursor {
    const uint8_t *p;
    size_t size, off;
    char where[192]; /* "metadata #3 'general.name'", for messages */
} cursor;

static size_t left(const cursor *c) { return c->size - c->off; }

static clf_status truncated(const cursor *c, const char *what, uint64_t n) {
    return clf_fail(CLF_ERR_FORMAT, "%s: %s at offset %zu needs %" PRIu64 " bytes, but the file ends at %zu (truncated)",
                    c->where, what, c->off, n, c->size);
}

static clf_status take(cursor *c, size_t n, const char *what, const uint8_t **out) {
    if (n > left(c)) return truncated(c, what, n);
    *out = c->p + c->off;
    c->off += n;
    return CLF_OK;
}

/* GGUF is little-endian, as is every host clinfer targets. */
static clf_status rd_u32(cursor *c, const char *what, uint32_t *v) {
    *v = 0;
    if (left(c) < 4) return truncated(c, what, 4);
    memcpy(v, c->p + c->off, 4);
    c->off += 4;
    return CLF_OK;
}

static clf_status rd_u64(cursor *c, const char *what, uint64_t *v) {
    *v = 0;
    if (left(c) < 8) return truncated(c, what, 8);
    memcpy(v, c->p + c->off, 8);
    c->off += 8;
    return CLF_OK;
}

static clf_status rd_str(cursor *c, const char *what, clf_gguf_str *s) {
    size_t at = c->off;
    uint64_t n;
    CLF_TRY(rd_u64(c, what, &n));
    if (n > left(c))
        return clf_fail(CLF_ERR_FORMAT,
                        "%s: %s: string length %" PRIu64 " at offset %zu runs past the end of the file (%zu bytes left)",
                        c->where, what, n, at, left(c));
    s->ptr = (const char *)c->p + c->off;
    s->len = n;
    c->off += (size_t)n;
    return CLF_OK;
}

/* Skips (and validates) an array body of n elements of type t. */
static clf_status skip_array(cursor *c, uint32_t t, uint64_t n, int depth, const uint8_t **first);

static clf_status rd_array_header(cursor *c, int depth, uint32_t *t, uint64_t *n) {
    if (depth > GGUF_MAX_NESTING)
        return clf_fail(CLF_ERR_FORMAT, "%s: arrays nested deeper than %d levels at offset %zu", c->where,
                        GGUF_MAX_NESTING, c->off);
    size_t at = c->off;
    CLF_TRY(rd_u32(c, "array element type", t));
    if (!vtype_valid(*t))
        return clf_fail(CLF_ERR_FORMAT, "%s: unknown array element type %" PRIu32 " at offset %zu", c->where, *t, at);
    return rd_u64(c, "array length", n);
}

static clf_status skip_array(cursor *c, uint32_t t, uint64_t n, int depth, const uint8_t **first) {
    size_t at = c->off;
    *first = c->p + c->off;
    size_t es = clf_gguf_vtype_size((clf_gguf_vtype)t);
    /* Variable-size elements take at least a length (string) or a header
     * (array), so a count too big for the bytes left fails before looping. */
    size_t min = es ? es : t == CLF_GGUF_STRING ? 8 : 12;
    if (n > left(c) / min)
        return clf_fail(CLF_ERR_FORMAT,
                        "%s: array of %" PRIu64 " %s elements at offset %zu runs past the end of the file (%zu bytes left)",
                        c->where, n, clf_gguf_vtype_name((clf_gguf_vtype)t), at, left(c));
    if (es) {
        c->off += (size_t)n * es;
        return CLF_OK;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (t == CLF_GGUF_STRING) {
            clf_gguf_str s;
            CLF_TRY(rd_str(c, "array string", &s));
        } else {
            uint32_t et = 0;
            uint64_t en = 0;
            const uint8_t *ef;
            CLF_TRY(rd_array_header(c, depth + 1, &et, &en));
            CLF_TRY(skip_array(c, et, en, depth + 1, &ef));
        }
    }
    return CLF_OK;
}

/* ---- hash index for keys and tensor names ------------------------------------ */

/* The index reads a kv's key and a tensor's name through their first member. */
_Static_assert(offsetof(clf_gguf_kv, key) == 0, "key first");
_Static_assert(offsetof(clf_gguf_tensor, name) == 0, "name first");

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static size_t index_capacity(int64_t n) {
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    return cap;
}

/* Looks up (name, n) among strs[] through idx; returns the slot. */
static size_t index_slot(const int64_t *idx, size_t cap, const void *items, size_t stride, const char *name,
                         size_t n, int64_t *found) {
    size_t i = (size_t)hash_bytes(name, n) & (cap - 1);
    for (;; i = (i + 1) & (cap - 1)) {
        if (!idx[i]) {
            *found = -1;
            return i;
        }
        const clf_gguf_str *s = (const clf_gguf_str *)((const char *)items + (size_t)(idx[i] - 1) * stride);
        if (s->len == n && memcmp(s->ptr, name, n) == 0) {
            *found = idx[i] - 1;
            return i;
        }
    }
}

/* Builds the index; a repeated name is an error naming it. */
static clf_status index_build(const void *items, size_t stride, int64_t n, const char *what, int64_t **idx_out,
                              size_t *cap_out) {
    size_t cap = index_capacity(n);
    int64_t *idx = calloc(cap, sizeof *idx);
    if (!idx) return clf_fail(CLF_ERR_MEMORY, "out of memory indexing %" PRId64 " %ss", n, what);
    for (int64_t i = 0; i < n; i++) {
        const clf_gguf_str *s = (const clf_gguf_str *)((const char *)items + (size_t)i * stride);
        int64_t found;
        size_t slot = index_slot(idx, cap, items, stride, s->ptr, (size_t)s->len, &found);
        if (found >= 0) {
            free(idx);
            return clf_fail(CLF_ERR_FORMAT, "duplicate %s '%.*s' (#%" PRId64 " and #%" PRId64 ")", what,
                            (int)(s->len > 200 ? 200 : s->len), s->ptr, found, i);
        }
        idx[slot] = i + 1;
    }
    *idx_out = idx;
    *cap_out = cap;
    return CLF_OK;
}

/* ---- metadata ------------------------------------------------------------------ */

static void set_where(cursor *c, const char *kind, int64_t i, const clf_gguf_str *name) {
    if (name)
        snprintf(c->where, sizeof c->where, "%s #%" PRId64 " '%.*s'", kind, i, (int)(name->len > 120 ? 120 : name->len),
                 name->ptr);
    else
        snprintf(c->where, sizeof c->where, "%s #%" PRId64, kind, i);
}

static clf_status parse_kv(cursor *c, int64_t i, clf_gguf_kv *kv) {
    set_where(c, "metadata", i, NULL);
    CLF_TRY(rd_str(c, "key", &kv->key));
    if (kv->key.len == 0) return clf_fail(CLF_ERR_FORMAT, "%s: empty key at offset %zu", c->where, c->off - 8);
    /* a NUL inside would make the key unreachable by name and cut short when copied (quantize) */
    if (memchr(kv->key.ptr, 0, (size_t)kv->key.len))
        return clf_fail(CLF_ERR_FORMAT, "%s: key at offset %zu contains a NUL byte", c->where, c->off - (size_t)kv->key.len - 8);
    set_where(c, "metadata", i, &kv->key);
    size_t at = c->off;
    uint32_t t;
    CLF_TRY(rd_u32(c, "value type", &t));
    if (!vtype_valid(t))
        return clf_fail(CLF_ERR_FORMAT, "%s: unknown value type %" PRIu32 " at offset %zu", c->where, t, at);
    kv->type = (clf_gguf_vtype)t;
    const uint8_t *q = NULL;
    if (t == CLF_GGUF_STRING) {
        CLF_TRY(rd_str(c, "string value", &kv->str));
        kv->data = kv->str.ptr;
        kv->data_bytes = kv->str.len;
    } else if (t == CLF_GGUF_ARRAY) {
        uint32_t et;
        CLF_TRY(rd_array_header(c, 1, &et, &kv->arr_n));
        kv->arr_type = (clf_gguf_vtype)et;
        size_t start = c->off;
        CLF_TRY(skip_array(c, et, kv->arr_n, 1, &q));
        kv->data = q;
        kv->data_bytes = c->off - start;
        if (et == CLF_GGUF_STRING) {
            /* the array was validated above, so arr_n <= bytes / 8 */
            clf_gguf_str *strs = malloc((size_t)(kv->arr_n ? kv->arr_n : 1) * sizeof *strs);
            if (!strs) return clf_fail(CLF_ERR_MEMORY, "%s: out of memory indexing %" PRIu64 " strings", c->where, kv->arr_n);
            cursor sc = *c;
            sc.off = start;
            for (uint64_t j = 0; j < kv->arr_n; j++) (void)rd_str(&sc, "array string", &strs[j]);
            kv->strs = strs;
        }
    } else {
        size_t n = clf_gguf_vtype_size(kv->type);
        CLF_TRY(take(c, n, "value", &q));
        kv->data = q;
        kv->data_bytes = n;
    }
    return CLF_OK;
}

/* Grows *arr (of elem bytes) to hold at least n + 1 items. */
static int grow(void **arr, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap) return 1;
    int64_t nc = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return 0;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return 1;
}

/* A count read from the header must fit the bytes left, each item taking at
 * least `min` bytes: an inflated count fails here, not in malloc. */
static clf_status check_count(const cursor *c, uint64_t n, size_t min, const char *what, size_t at) {
    if (n > left(c) / min)
        return clf_fail(CLF_ERR_FORMAT,
                        "%s %" PRIu64 " at offset %zu is impossible: the %zu bytes that follow hold at most %zu",
                        what, n, at, left(c), left(c) / min);
    return CLF_OK;
}

static clf_status parse_metadata(clf_gguf *g, cursor *c, uint64_t n_kv) {
    int64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!grow((void **)&g->kvs, &cap, (int64_t)i, sizeof *g->kvs))
            return clf_fail(CLF_ERR_MEMORY, "out of memory reading metadata #%" PRIu64, i);
        g->n_kv = (int64_t)i + 1; /* counted now, so close() frees a partial strs */
        CLF_TRY(parse_kv(c, (int64_t)i, &g->kvs[i]));
    }
    CLF_TRY(index_build(g->kvs, sizeof *g->kvs, g->n_kv, "metadata key", &g->kv_index, &g->kv_cap));
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (clf_gguf_find(g, "general.alignment")) {
        uint32_t a;
        CLF_TRY(clf_gguf_get_u32(g, "general.alignment", &a));
        if (a == 0 || (a & (a - 1)))
            return clf_fail(CLF_ERR_FORMAT, "general.alignment %" PRIu32 " is not a power of two", a);
        g->alignment = a;
    }
    return CLF_OK;
}

/* ---- tensor infos ------------------------------------------------------------------ */

static clf_status parse_tensor_info(clf_gguf *g, cursor *c, int64_t i, clf_gguf_tensor *t) {
    set_where(c, "tensor", i, NULL);
    CLF_TRY(rd_str(c, "name", &t->name));
    if (t->name.len == 0) return clf_fail(CLF_ERR_FORMAT, "%s: empty name at offset %zu", c->where, c->off - 8);
    if (memchr(t->name.ptr, 0, (size_t)t->name.len))
        return clf_fail(CLF_ERR_FORMAT, "%s: name at offset %zu contains a NUL byte", c->where, c->off - (size_t)t->name.len - 8);
    set_where(c, "tensor", i, &t->name);
    size_t at = c->off;
    CLF_TRY(rd_u32(c, "dimension count", &t->n_dims));
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return clf_fail(CLF_ERR_FORMAT, "%s: %" PRIu32 " dimensions at offset %zu (1 to %d supported)", c->where,
                        t->n_dims, at, GGUF_MAX_DIMS);
    uint64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        at = c->off;
        CLF_TRY(rd_u64(c, "dimension", &ne));
        if (ne == 0 || ne > INT64_MAX)
            return clf_fail(CLF_ERR_FORMAT, "%s: dimension %" PRIu32 " is %" PRIu64 " at offset %zu (must be 1 to 2^63-1)",
                            c->where, d, ne, at);
        if (nel > INT64_MAX / ne)
            return clf_fail(CLF_ERR_FORMAT, "%s: element count overflows (dimension %" PRIu32 " = %" PRIu64 " at offset %zu)",
                            c->where, d, ne, at);
        nel *= ne;
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    at = c->off;
    CLF_TRY(rd_u32(c, "type", &type));
    const clf_type_info *ti = clf_type_get(type);
    if (!ti) {
        char known[256];
        return clf_fail(CLF_ERR_FORMAT, "%s: unsupported tensor type %" PRIu32 " (%s) at offset %zu; clinfer reads %s",
                        c->where, type, ggml_type_name(type), at, clf_type_names(known, sizeof known));
    }
    t->type = (clf_type)type;
    if (t->ne[0] % ti->block)
        return clf_fail(CLF_ERR_FORMAT, "%s: row length %" PRId64 " is not a multiple of the %s block size %d", c->where,
                        t->ne[0], ti->name, ti->block);
    /* bytes = blocks per row x block bytes x rows, each product checked */
    uint64_t blocks = (uint64_t)t->ne[0] / (uint64_t)ti->block, rows = nel / (uint64_t)t->ne[0];
    size_t row = blocks <= SIZE_MAX / (size_t)ti->block_bytes ? (size_t)blocks * (size_t)ti->block_bytes : 0;
    if (row == 0 || rows > SIZE_MAX / row)
        return clf_fail(CLF_ERR_FORMAT, "%s: byte size overflows (%" PRIu64 " elements of %s)", c->where, nel, ti->name);
    t->bytes = row * (size_t)rows;
    at = c->off;
    CLF_TRY(rd_u64(c, "data offset", &t->offset));
    if (t->offset % g->alignment)
        return clf_fail(CLF_ERR_FORMAT, "%s: data offset %" PRIu64 " (at offset %zu) is not aligned to %zu", c->where,
                        t->offset, at, g->alignment);
    return CLF_OK;
}

typedef struct span { uint64_t start, end; int64_t i; } span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : (x->i > y->i) - (x->i < y->i);
}

static const char *tname(const clf_gguf *g, int64_t i, char *buf, size_t n) {
    const clf_gguf_str *s = &g->tensors[i].name;
    snprintf(buf, n, "%.*s", (int)(s->len > 120 ? 120 : s->len), s->ptr);
    return buf;
}

/* Every tensor's bytes lie inside the data section and no two overlap. */
static clf_status check_tensor_data(clf_gguf *g) {
    uint64_t avail = g->size - g->data_offset;
    char a[128], b[128];
    for (int64_t i = 0; i < g->n_tensors; i++) {
        clf_gguf_tensor *t = &g->tensors[i];
        if (t->offset > avail || t->bytes > avail - t->offset)
            return clf_fail(CLF_ERR_FORMAT,
                            "tensor '%s': data [%" PRIu64 ", +%zu) runs past the end of the file (data section at %zu, file size %zu)",
                            tname(g, i, a, sizeof a), t->offset, t->bytes, g->data_offset, g->size);
        t->data = g->base + g->data_offset + t->offset;
    }
    span *s = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *s);
    if (!s) return clf_fail(CLF_ERR_MEMORY, "out of memory checking %" PRId64 " tensors", g->n_tensors);
    for (int64_t i = 0; i < g->n_tensors; i++) s[i] = (span){g->tensors[i].offset, g->tensors[i].offset + g->tensors[i].bytes, i};
    qsort(s, (size_t)g->n_tensors, sizeof *s, span_cmp);
    clf_status st = CLF_OK;
    for (int64_t i = 1; i < g->n_tensors && st == CLF_OK; i++)
        if (s[i].start < s[i - 1].end)
            st = clf_fail(CLF_ERR_FORMAT, "tensor '%s' [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' [%" PRIu64 ", %" PRIu64 ")",
                          tname(g, s[i].i, a, sizeof a), s[i].start, s[i].end, tname(g, s[i - 1].i, b, sizeof b),
                          s[i - 1].start, s[i - 1].end);
    free(s);
    return st;
}

static clf_status parse_tensors(clf_gguf *g, cursor *c, uint64_t n) {
    int64_t cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!grow((void **)&g->tensors, &cap, (int64_t)i, sizeof *g->tensors))
            return clf_fail(CLF_ERR_MEMORY, "out of memory reading tensor #%" PRIu64, i);
        g->n_tensors = (int64_t)i + 1;
        CLF_TRY(parse_tensor_info(g, c, (int64_t)i, &g->tensors[i]));
    }
    CLF_TRY(index_build(g->tensors, sizeof *g->tensors, g->n_tensors, "tensor", &g->tensor_index, &g->tensor_cap));
    /* the data section starts at the next multiple of the alignment; a file
     * without tensors may end before it */
    size_t pad = (g->alignment - c->off % g->alignment) % g->alignment;
    g->data_offset = c->off + pad;
    if (n > 0 && pad > left(c))
        return clf_fail(CLF_ERR_FORMAT, "data section at offset %zu (aligned to %zu) is past the end of the file (size %zu)",
                        g->data_offset, g->alignment, g->size);
    if (g->data_offset > g->size) g->data_offset = g->size;
    return check_tensor_data(g);
}

/* ---- open / close ------------------------------------------------------------------- */

static clf_status parse(clf_gguf *g) {
    cursor c = {.p = g->base, .size = g->size, .off = 4};
    snprintf(c.where, sizeof c.where, "header");
    if (g->size < 4 || memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return clf_fail(CLF_ERR_FORMAT, "not a GGUF file (the first 4 bytes are not \"GGUF\")");
    CLF_TRY(rd_u32(&c, "version", &g->version));
    if (g->version == 1)
        return clf_fail(CLF_ERR_FORMAT, "GGUF version 1 is not supported (32-bit counts; only versions 2 and 3 are); "
                                        "convert the file with a current llama.cpp");
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version)
            return clf_fail(CLF_ERR_FORMAT, "big-endian GGUF (version field 0x%08" PRIx32 ") is not supported", g->version);
        return clf_fail(CLF_ERR_FORMAT, "unsupported GGUF version %" PRIu32 " (only versions 2 and 3 are read)", g->version);
    }
    uint64_t n_tensors, n_kv;
    size_t at_nt = c.off;
    CLF_TRY(rd_u64(&c, "tensor count", &n_tensors));
    size_t at_kv = c.off;
    CLF_TRY(rd_u64(&c, "metadata count", &n_kv));
    /* the smallest key/value: key length 8 + type 4 + a one-byte value;
     * the smallest tensor info: name length 8 + n_dims 4 + one dim 8 + type 4 + offset 8 */
    CLF_TRY(check_count(&c, n_kv, 13, "metadata count", at_kv));
    CLF_TRY(check_count(&c, n_tensors, 32, "tensor count", at_nt));
    CLF_TRY(parse_metadata(g, &c, n_kv));
    CLF_TRY(check_count(&c, n_tensors, 32, "tensor count", at_nt));
    return parse_tensors(g, &c, n_tensors);
}

clf_status clf_gguf_open_memory(const void *data, size_t size, clf_gguf **out) {
    *out = NULL;
    if (!data && size) return clf_fail(CLF_ERR_ARG, "clf_gguf_open_memory: NULL data");
    clf_gguf *g = calloc(1, sizeof *g);
    if (!g) return clf_fail(CLF_ERR_MEMORY, "out of memory opening a GGUF");
    g->base = data;
    g->size = size;
    g->fd = -1;
    clf_status st = parse(g);
    if (st != CLF_OK) {
        clf_gguf_close(g);
        return st;
    }
    *out = g;
    return CLF_OK;
}

/* ---- reads of a file that shrinks under us ------------------------------------------ */

/* One guarded file at a time: its mapping in whole pages, and whether a read
 * past the file's end faulted. The handler runs in whichever thread read
 * (an OpenCL driver's too), so it does not jump anywhere: it maps zero pages
 * over the rest of the mapping, the read completes, and the loader fails at
 * its next check. */
static struct {
    const clf_gguf *volatile g;
    uintptr_t lo, hi;
    size_t page;
    int depth;
    volatile sig_atomic_t faulted;
    struct sigaction old;
} guard;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)uc;
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (guard.g && a >= guard.lo && a < guard.hi) {
        uintptr_t p = a & ~(uintptr_t)(guard.page - 1);
        if (mmap((void *)p, guard.hi - p, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
            guard.faulted = 1;
            errno = saved;
            return;
        }
    }
    /* not ours: the previous action takes the read when it runs again */
    sigaction(SIGBUS, &guard.old, NULL);
    errno = saved;
}

void clf_gguf_guard_begin(const clf_gguf *g) {
    if (!g->map) return;
    if (guard.g == g) {
        guard.depth++;
        return;
    }
    if (guard.g) return; /* another file is guarded */
    guard.page = (size_t)sysconf(_SC_PAGESIZE);
    guard.lo = (uintptr_t)g->map;
    guard.hi = (guard.lo + g->size + guard.page - 1) & ~(uintptr_t)(guard.page - 1);
    guard.faulted = 0;
    guard.depth = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    guard.g = g;
    if (sigaction(SIGBUS, &sa, &guard.old) != 0) guard.g = NULL;
}

clf_status clf_gguf_guard_check(const clf_gguf *g) {
    struct stat sb;
    int faulted = guard.g == g && guard.faulted;
    if (g->fd < 0 || (!faulted && fstat(g->fd, &sb) == 0 && (size_t)sb.st_size == g->size)) return CLF_OK;
    if (fstat(g->fd, &sb) != 0) sb.st_size = 0;
    return clf_fail(CLF_ERR_FORMAT, "%s: the file changed while it was read (truncated or rewritten in place? "
                                    "%lld bytes now, %zu when opened)",
                    g->path, (long long)sb.st_size, g->size);
}

clf_status clf_gguf_guard_end(const clf_gguf *g) {
    clf_status st = clf_gguf_guard_check(g);
    if (guard.g == g && --guard.depth == 0) {
        sigaction(SIGBUS, &guard.old, NULL);
        guard.g = NULL;
    }
    return st;
}

clf_status clf_gguf_open(const char *path, clf_gguf **out) {
    *out = NULL;
    int fd;
    CLF_TRY(clf_open_regular(path, &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return clf_fail(CLF_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return clf_fail(CLF_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, size, strerror(e));
        }
    }
    clf_gguf *g = calloc(1, sizeof *g);
    char *name = strdup(path);
    if (!g || !name) {
        free(g);
        free(name);
        if (map) munmap(map, size);
        close(fd);
        return clf_fail(CLF_ERR_MEMORY, "out of memory opening a GGUF");
    }
    g->base = map;
    g->size = size;
    g->map = map;
    g->fd = fd;
    g->path = name;
    clf_gguf_guard_begin(g);
    clf_status st = parse(g);
    clf_status changed = clf_gguf_guard_end(g); /* explains whatever the parse made of zeros */
    if (changed != CLF_OK || st != CLF_OK) {
        if (changed == CLF_OK) clf_fail_ctx(st, "%s: ", path);
        clf_gguf_close(g);
        return changed != CLF_OK ? changed : st;
    }
    *out = g;
    return CLF_OK;
}

void clf_gguf_close(clf_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) free((void *)g->kvs[i].strs);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_index);
    free(g->tensor_index);
    if (g->map) munmap(g->map, g->size);
    if (g->fd >= 0) close(g->fd);
    free(g->path);
    free(g);
}

/* ---- queries ---------------------------------------------------------------------------- */

uint32_t clf_gguf_version(const clf_gguf *g) { return g->version; }
size_t clf_gguf_alignment(const clf_gguf *g) { return g->alignment; }
size_t clf_gguf_data_offset(const clf_gguf *g) { return g->data_offset; }
uint64_t clf_gguf_header_digest(const clf_gguf *g) {
    return clf_fnv1a(CLF_FNV1A_SEED, g->base, g->data_offset < g->size ? g->data_offset : g->size);
}
size_t clf_gguf_size(const clf_gguf *g) { return g->size; }
int64_t clf_gguf_n_kv(const clf_gguf *g) { return g->n_kv; }
int64_t clf_gguf_n_tensors(const clf_gguf *g) { return g->n_tensors; }

const clf_gguf_kv *clf_gguf_kv_at(const clf_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kvs[i] : NULL;
}

const clf_gguf_tensor *clf_gguf_tensor_at(const clf_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const clf_gguf_kv *clf_gguf_find(const clf_gguf *g, const char *key) {
    if (!g->kv_index) return NULL; /* still parsing */
    int64_t found;
    index_slot(g->kv_index, g->kv_cap, g->kvs, sizeof *g->kvs, key, strlen(key), &found);
    return found >= 0 ? &g->kvs[found] : NULL;
}

const clf_gguf_tensor *clf_gguf_find_tensor(const clf_gguf *g, const char *name) {
    if (!g->tensor_index) return NULL;
    int64_t found;
    index_slot(g->tensor_index, g->tensor_cap, g->tensors, sizeof *g->tensors, name, strlen(name), &found);
    return found >= 0 ? &g->tensors[found] : NULL;
}

clf_status clf_gguf_identity(const clf_gguf *g, clf_gguf_id *id, const char **path) {
    memset(id, 0, sizeof *id);
    struct stat sb;
    if (g->fd < 0) return clf_fail(CLF_ERR_ARG, "a GGUF in memory has no file");
    if (fstat(g->fd, &sb) != 0) return clf_fail(CLF_ERR_IO, "cannot stat '%s': %s", g->path, strerror(errno));
    *id = (clf_gguf_id){(uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)sb.st_size,
                        (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec};
    if (path) *path = g->path;
    return CLF_OK;
}

void clf_gguf_release(const clf_gguf *g, const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), base = (uintptr_t)g->map;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (!g->map || a >= b || a < base || b > base + g->size) return;
    madvise((void *)a, b - a, MADV_DONTNEED); /* a hint: its failure costs memory, not correctness */
}


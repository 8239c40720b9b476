/* GGUF writer -> reader round trips of random metadata (every value type,
 * nested arrays) and random tensors (every type, 1-4 dims, odd sizes);
 * typed accessors; file errors; and the real default model's known layout
 * ($CLINFER_MODEL or the fetched default; skipped with a note when absent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf_write.h"
#include "model_path.h"
#include "testutil.h"

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char buf[160];
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/clinfer-gguf-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
    }
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*n ? *n : 1);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

/* ---- random metadata ------------------------------------------------------- */

enum { N_SCALAR = 12, ARR_MAX = 37 };

typedef struct expect_kv {
    char key[48];
    clf_gguf_vtype type, arr_type;
    uint8_t val[8]; /* scalar value */
    uint8_t arr[ARR_MAX * 8];
    uint64_t n;
    char *strs[ARR_MAX]; /* string array or string (strs[0]) */
} expect_kv;

static void random_bytes(uint64_t *s, void *p, size_t n) {
    for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)tu_next(s);
}

static char *random_string(uint64_t *s) {
    size_t n = tu_next(s) % 20; /* empty strings included */
    char *p = malloc(n + 1);
    for (size_t i = 0; i < n; i++) p[i] = (char)(' ' + tu_next(s) % 94);
    p[n] = 0;
    return p;
}

/* Sets every scalar type (through set_kv for those without a setter), an
 * array of each fixed-size type, string arrays, and returns what was set. */
static int set_random_metadata(clf_gguf_writer *w, uint64_t *s, expect_kv *e) {
    static const clf_gguf_vtype scalars[N_SCALAR] = {
        CLF_GGUF_UINT8, CLF_GGUF_INT8, CLF_GGUF_UINT16, CLF_GGUF_INT16, CLF_GGUF_UINT32, CLF_GGUF_INT32,
        CLF_GGUF_FLOAT32, CLF_GGUF_BOOL, CLF_GGUF_UINT64, CLF_GGUF_INT64, CLF_GGUF_FLOAT64, CLF_GGUF_STRING,
    };
    int n = 0;
    for (int i = 0; i < N_SCALAR; i++, n++) {
        expect_kv *k = &e[n];
        memset(k, 0, sizeof *k);
        k->type = scalars[i];
        snprintf(k->key, sizeof k->key, "test.scalar.%s", clf_gguf_vtype_name(k->type));
        size_t es = clf_gguf_vtype_size(k->type);
        random_bytes(s, k->val, es);
        if (k->type == CLF_GGUF_BOOL) k->val[0] &= 1;
        if (k->type == CLF_GGUF_UINT32) {
            uint32_t v;
            memcpy(&v, k->val, 4);
            TU_OK(clf_gguf_set_u32(w, k->key, v));
        } else if (k->type == CLF_GGUF_FLOAT32) {
            float v = tu_uniform(s, -1e6f, 1e6f);
            memcpy(k->val, &v, 4);
            TU_OK(clf_gguf_set_f32(w, k->key, v));
        } else if (k->type == CLF_GGUF_BOOL) {
            TU_OK(clf_gguf_set_bool(w, k->key, k->val[0]));
        } else if (k->type == CLF_GGUF_STRING) {
            k->strs[0] = random_string(s);
            TU_OK(clf_gguf_set_str(w, k->key, k->strs[0]));
        } else {
            clf_gguf_kv kv = {.key = {k->key, strlen(k->key)}, .type = k->type, .data = k->val, .data_bytes = es};
            TU_OK(clf_gguf_set_kv(w, &kv));
        }
    }
    for (int i = 0; i < N_SCALAR - 1; i++, n++) { /* arrays of each fixed-size type */
        expect_kv *k = &e[n];
        memset(k, 0, sizeof *k);
        k->type = CLF_GGUF_ARRAY;
        k->arr_type = scalars[i];
        k->n = tu_next(s) % ARR_MAX; /* zero-length arrays included */
        snprintf(k->key, sizeof k->key, "test.array.%s", clf_gguf_vtype_name(k->arr_type));
        random_bytes(s, k->arr, k->n * clf_gguf_vtype_size(k->arr_type));
        TU_OK(clf_gguf_set_arr(w, k->key, k->arr_type, k->arr, k->n));
    }
    for (int i = 0; i < 2; i++, n++) { /* string arrays, one possibly empty */
        expect_kv *k = &e[n];
        memset(k, 0, sizeof *k);
        k->type = CLF_GGUF_ARRAY;
        k->arr_type = CLF_GGUF_STRING;
        k->n = i == 0 ? tu_next(s) % ARR_MAX : 1 + tu_next(s) % (ARR_MAX - 1);
        snprintf(k->key, sizeof k->key, "test.strings.%d", i);
        for (uint64_t j = 0; j < k->n; j++) k->strs[j] = random_string(s);
        TU_OK(clf_gguf_set_strs(w, k->key, (const char *const *)k->strs, k->n));
    }
    return n;
}

static void check_metadata(const clf_gguf *g, const expect_kv *e, int n) {
    for (int i = 0; i < n; i++) {
        const expect_kv *k = &e[i];
        const clf_gguf_kv *kv = clf_gguf_find(g, k->key);
        assert_non_null(kv);
        assert_int_equal(kv->type, k->type);
        assert_int_equal(kv->key.len, strlen(k->key));
        if (k->type == CLF_GGUF_STRING) {
            assert_int_equal(kv->str.len, strlen(k->strs[0]));
            if (kv->str.len) assert_memory_equal(kv->str.ptr, k->strs[0], kv->str.len);
        } else if (k->type != CLF_GGUF_ARRAY) {
            assert_memory_equal(kv->data, k->val, clf_gguf_vtype_size(k->type));
        } else {
            assert_int_equal(kv->arr_type, k->arr_type);
            assert_int_equal(kv->arr_n, k->n);
            if (k->arr_type != CLF_GGUF_STRING) {
                size_t bytes = k->n * clf_gguf_vtype_size(k->arr_type);
                assert_int_equal(kv->data_bytes, bytes);
                if (bytes) assert_memory_equal(kv->data, k->arr, bytes);
                continue;
            }
            const clf_gguf_str *strs;
            uint64_t ns;
            TU_OK(clf_gguf_get_strs(g, k->key, &strs, &ns));
            assert_int_equal(ns, k->n);
            for (uint64_t j = 0; j < ns; j++) {
                assert_int_equal(strs[j].len, strlen(k->strs[j]));
                if (strs[j].len) assert_memory_equal(strs[j].ptr, k->strs[j], strs[j].len);
            }
        }
    }
}

static void free_expect(expect_kv *e, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < ARR_MAX; j++) free(e[i].strs[j]);
}

/* ---- random tensors ---------------------------------------------------------- */

typedef struct expect_tensor {
    char name[32];
    clf_type type;
    uint32_t n_dims;
    int64_t ne[4];
    uint8_t *data;
    size_t bytes;
} expect_tensor;

static int add_random_tensors(clf_gguf_writer *w, uint64_t *s, expect_tensor *e) {
    static const clf_type types[] = {CLF_F32, CLF_F16, CLF_Q4_0, CLF_Q4_1, CLF_Q8_0};
    static const int64_t odd[] = {1, 3, 7, 13, 31, 33, 97};
    int n = 0;
    for (int rep = 0; rep < 3; rep++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++, n++) {
            expect_tensor *t = &e[n];
            t->type = types[ti];
            t->n_dims = 1 + (uint32_t)((rep + ti) % 4);
            int block = clf_type_get(t->type)->block;
            t->ne[0] = block * odd[tu_next(s) % 7] + (block == 1 ? (int64_t)(tu_next(s) % 5) : 0);
            for (int d = 1; d < 4; d++) t->ne[d] = d < (int)t->n_dims ? odd[tu_next(s) % 5] : 1;
            snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", rep, clf_type_get(t->type)->name);
            t->bytes = clf_row_bytes(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            t->data = malloc(t->bytes);
            random_bytes(s, t->data, t->bytes);
            TU_OK(clf_gguf_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
        }
    return n;
}

static void check_tensors(const clf_gguf *g, const expect_tensor *e, int n, size_t align) {
    assert_int_equal(clf_gguf_n_tensors(g), n);
    assert_int_equal(clf_gguf_data_offset(g) % align, 0);
    for (int i = 0; i < n; i++) {
        const clf_gguf_tensor *t = clf_gguf_find_tensor(g, e[i].name);
        assert_non_null(t);
        assert_ptr_equal(t, clf_gguf_tensor_at(g, i));
        assert_int_equal(t->type, e[i].type);
        assert_int_equal(t->n_dims, e[i].n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], e[i].ne[d]);
        assert_int_equal(t->bytes, e[i].bytes);
        assert_int_equal(t->offset % align, 0);
        assert_memory_equal(t->data, e[i].data, e[i].bytes);
    }
}

static void test_round_trip(void **state) {
    (void)state;
    uint64_t s = tu_seed() ^ 0x6775ull;
    static const uint32_t aligns[] = {0, 32, 64, 256, 8}; /* 0: the default, not set */
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        clf_gguf_writer *w;
        TU_OK(clf_gguf_writer_create(&w));
        expect_kv ekv[40];
        expect_tensor et[16];
        int nkv = set_random_metadata(w, &s, ekv);
        if (aligns[a]) TU_OK(clf_gguf_set_u32(w, "general.alignment", aligns[a]));
        int nt = add_random_tensors(w, &s, et);
        const char *path = tmp_path("round.gguf");
        TU_OK(clf_gguf_write(w, path));
        clf_gguf_writer_free(w);

        size_t align = aligns[a] ? aligns[a] : 32;
        clf_gguf *g;
        TU_OK(clf_gguf_open(path, &g));
        assert_int_equal(clf_gguf_version(g), 3);
        assert_int_equal(clf_gguf_alignment(g), align);
        assert_int_equal(clf_gguf_n_kv(g), nkv + 1); /* + general.alignment */
        check_metadata(g, ekv, nkv);
        check_tensors(g, et, nt, align);
        assert_null(clf_gguf_find(g, "test.no.such.key"));
        assert_null(clf_gguf_find_tensor(g, "blk.0.F32.weigh"));
        assert_null(clf_gguf_kv_at(g, -1));
        assert_null(clf_gguf_tensor_at(g, nt));
        clf_gguf_close(g);

        /* the same bytes through open_memory */
        size_t n;
        void *buf = read_file(path, &n);
        TU_OK(clf_gguf_open_memory(buf, n, &g));
        assert_int_equal(clf_gguf_size(g), n);
        check_metadata(g, ekv, nkv);
        check_tensors(g, et, nt, align);
        clf_gguf_close(g);
        free(buf);
        free_expect(ekv, nkv);
        for (int i = 0; i < nt; i++) free(et[i].data);
        unlink(path);
    }
}

/* Reading a file and copying every key and tensor gives the same bytes. */
static void test_copy_is_identical(void **state) {
    (void)state;
    uint64_t s = tu_seed() ^ 0xc0b1ull;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    expect_kv ekv[40];
    expect_tensor et[16];
    int nkv = set_random_metadata(w, &s, ekv);
    /* an array of arrays of uint16, which only set_kv can write */
    uint8_t nested[2 * 12 + 5 * 2];
    uint32_t t16 = CLF_GGUF_UINT16;
    uint64_t n0 = 2, n1 = 3;
    memcpy(nested, &t16, 4), memcpy(nested + 4, &n0, 8), random_bytes(&s, nested + 12, 4);
    memcpy(nested + 16, &t16, 4), memcpy(nested + 20, &n1, 8), random_bytes(&s, nested + 28, 6);
    clf_gguf_kv kv = {.key = {"test.nested", 11}, .type = CLF_GGUF_ARRAY, .arr_type = CLF_GGUF_ARRAY,
                      .arr_n = 2, .data = nested, .data_bytes = sizeof nested};
    TU_OK(clf_gguf_set_kv(w, &kv));
    int nt = add_random_tensors(w, &s, et);
    char src[160], dst[160];
    snprintf(src, sizeof src, "%s", tmp_path("copy-src.gguf"));
    snprintf(dst, sizeof dst, "%s", tmp_path("copy-dst.gguf"));
    TU_OK(clf_gguf_write(w, src));
    clf_gguf_writer_free(w);

    clf_gguf *g;
    TU_OK(clf_gguf_open(src, &g));
    const clf_gguf_kv *nk = clf_gguf_find(g, "test.nested");
    assert_non_null(nk);
    assert_int_equal(nk->arr_type, CLF_GGUF_ARRAY);
    assert_int_equal(nk->arr_n, 2);
    assert_int_equal(nk->data_bytes, sizeof nested);
    assert_memory_equal(nk->data, nested, sizeof nested);
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) TU_OK(clf_gguf_set_kv(w, clf_gguf_kv_at(g, i)));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        TU_OK(clf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    TU_OK(clf_gguf_write(w, dst));
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
    size_t na, nb;
    void *a = read_file(src, &na), *b = read_file(dst, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
    free_expect(ekv, nkv);
    for (int i = 0; i < nt; i++) free(et[i].data);
    unlink(src);
    unlink(dst);
}

/* ---- accessors ----------------------------------------------------------------- */

static void set_scalar(clf_gguf_writer *w, const char *key, clf_gguf_vtype t, const void *v) {
    clf_gguf_kv kv = {.key = {key, strlen(key)}, .type = t, .data = v, .data_bytes = clf_gguf_vtype_size(t)};
    TU_OK(clf_gguf_set_kv(w, &kv));
}

static void test_accessors(void **state) {
    (void)state;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    uint8_t u8 = 200;
    int8_t i8 = -5;
    int32_t neg = -1;
    uint64_t big = 1ull << 40, huge = 1ull << 63;
    double f64 = 0.25;
    set_scalar(w, "a.u8", CLF_GGUF_UINT8, &u8);
    set_scalar(w, "a.i8", CLF_GGUF_INT8, &i8);
    set_scalar(w, "a.neg", CLF_GGUF_INT32, &neg);
    set_scalar(w, "a.big", CLF_GGUF_UINT64, &big);
    set_scalar(w, "a.huge", CLF_GGUF_UINT64, &huge);
    set_scalar(w, "a.f64", CLF_GGUF_FLOAT64, &f64);
    TU_OK(clf_gguf_set_f32(w, "a.f32", 1e-5f));
    TU_OK(clf_gguf_set_bool(w, "a.bool", 1));
    TU_OK(clf_gguf_set_str(w, "a.str", "llama"));
    TU_OK(clf_gguf_set_str(w, "a.str", "mistral")); /* replaces, keeps the order */
    int32_t ids[3] = {7, -8, 9};
    TU_OK(clf_gguf_set_arr(w, "a.ids", CLF_GGUF_INT32, ids, 3));
    const char *words[] = {"x", "", "yz"};
    TU_OK(clf_gguf_set_strs(w, "a.words", words, 3));
    assert_int_equal(clf_gguf_set_arr(w, "a.bad", CLF_GGUF_STRING, words, 3), CLF_ERR_ARG);
    const char *path = tmp_path("acc.gguf");
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));

    uint32_t u32;
    int64_t i64;
    float f;
    int b;
    clf_gguf_str str;
    TU_OK(clf_gguf_get_u32(g, "a.u8", &u32));
    assert_int_equal(u32, 200);
    TU_OK(clf_gguf_get_i64(g, "a.i8", &i64));
    assert_int_equal(i64, -5);
    TU_OK(clf_gguf_get_i64(g, "a.big", &i64));
    assert_int_equal(i64, 1ll << 40);
    assert_int_equal(clf_gguf_get_u32(g, "a.neg", &u32), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "'a.neg' = -1 is out of range for uint32"));
    assert_int_equal(clf_gguf_get_u32(g, "a.big", &u32), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "out of range"));
    assert_int_equal(clf_gguf_get_i64(g, "a.huge", &i64), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "out of range for int64"));
    TU_OK(clf_gguf_get_f32(g, "a.f64", &f));
    assert_true(f == 0.25f);
    TU_OK(clf_gguf_get_f32(g, "a.f32", &f));
    assert_true(f == 1e-5f);
    TU_OK(clf_gguf_get_f32(g, "a.u8", &f));
    assert_true(f == 200.0f);
    TU_OK(clf_gguf_get_bool(g, "a.bool", &b));
    assert_int_equal(b, 1);
    TU_OK(clf_gguf_get_str(g, "a.str", &str));
    assert_int_equal(str.len, 7);
    assert_memory_equal(str.ptr, "mistral", 7);
    const clf_gguf_kv *kv8 = clf_gguf_kv_at(g, 8); /* the replaced key kept its place */
    assert_int_equal(kv8->key.len, 5);
    assert_memory_equal(kv8->key.ptr, "a.str", 5);

    const void *data;
    uint64_t n;
    TU_OK(clf_gguf_get_arr(g, "a.ids", CLF_GGUF_INT32, &data, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(data, ids, sizeof ids);
    const clf_gguf_str *items;
    TU_OK(clf_gguf_get_strs(g, "a.words", &items, &n));
    assert_int_equal(n, 3);
    assert_int_equal(items[1].len, 0);
    assert_memory_equal(items[2].ptr, "yz", 2);

    /* wrong types and missing keys name the key and both types */
    assert_int_equal(clf_gguf_get_u32(g, "a.str", &u32), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "'a.str' has type string, expected an integer"));
    assert_int_equal(clf_gguf_get_str(g, "a.u8", &str), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "'a.u8' has type uint8, expected string"));
    assert_int_equal(clf_gguf_get_bool(g, "a.u8", &b), CLF_ERR_FORMAT);
    assert_int_equal(clf_gguf_get_f32(g, "a.words", &f), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "has type array of string"));
    assert_int_equal(clf_gguf_get_arr(g, "a.ids", CLF_GGUF_UINT32, &data, &n), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "array of int32, expected array of uint32"));
    assert_int_equal(clf_gguf_get_strs(g, "a.ids", &items, &n), CLF_ERR_FORMAT);
    assert_int_equal(clf_gguf_get_u32(g, "llama.block_count", &u32), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "missing metadata key 'llama.block_count'"));
    clf_gguf_close(g);
    unlink(path);
}

/* ---- file and writer errors ------------------------------------------------------ */

static void test_file_errors(void **state) {
    (void)state;
    clf_gguf *g = (clf_gguf *)1;
    assert_int_equal(clf_gguf_open("/nonexistent/model.gguf", &g), CLF_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(clf_last_error(), "/nonexistent/model.gguf"));
    assert_int_equal(clf_gguf_open("/tmp", &g), CLF_ERR_IO);
    assert_non_null(strstr(clf_last_error(), "directory"));
    const char *empty = tmp_path("empty.gguf");
    FILE *f = fopen(empty, "wb");
    fclose(f);
    assert_int_equal(clf_gguf_open(empty, &g), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "not a GGUF file"));
    assert_non_null(strstr(clf_last_error(), empty));
    unlink(empty);

    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    float x[40] = {1};
    int64_t ne[2] = {40, 1};
    assert_int_equal(clf_gguf_add_tensor(w, "q", CLF_Q8_0, 2, ne, x), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "not a multiple"));
    TU_OK(clf_gguf_add_tensor(w, "f", CLF_F32, 2, ne, x));
    assert_int_equal(clf_gguf_add_tensor(w, "f", CLF_F32, 2, ne, x), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "duplicate tensor 'f'"));
    TU_OK(clf_gguf_set_u32(w, "general.alignment", 48));
    assert_int_equal(clf_gguf_write(w, tmp_path("bad-align.gguf")), CLF_ERR_ARG);
    TU_OK(clf_gguf_set_u32(w, "general.alignment", 64));
    /* an unwritable destination leaves nothing behind */
    assert_int_equal(clf_gguf_write(w, "/nonexistent-dir/x.gguf"), CLF_ERR_IO);
    assert_non_null(strstr(clf_last_error(), "/nonexistent-dir/x.gguf"));
    TU_OK(clf_gguf_write(w, tmp_path("ok.gguf")));
    clf_gguf_writer_free(w);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", tmpdir); /* no temporaries left */
    assert_int_equal(system(cmd), 0);
    unlink(tmp_path("ok.gguf"));
}

/* ---- the real default model ---------------------------------------------------------- */


static void expect_u32(const clf_gguf *g, const char *key, uint32_t want) {
    uint32_t v;
    TU_OK(clf_gguf_get_u32(g, key, &v));
    assert_int_equal(v, want);
}

static void expect_tensor_info(const clf_gguf *g, const char *name, clf_type type, int64_t ne0, int64_t ne1) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, name);
    if (!t) fail_msg("tensor %s missing", name);
    assert_int_equal(t->type, type);
    assert_int_equal(t->ne[0], ne0);
    assert_int_equal(t->ne[1], ne1);
}

static void test_real_model(void **state) {
    (void)state;
    char path[4096];
    if (clf_model_path(NULL, path, sizeof path) != CLF_OK) {
        TU_SKIP("%s: real-model check", clf_last_error());
    }
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_gguf_str arch;
    TU_OK(clf_gguf_get_str(g, "general.architecture", &arch));
    assert_int_equal(arch.len, 5);
    assert_memory_equal(arch.ptr, "llama", 5);
    if (!strstr(path, "SmolLM2-135M")) { /* another model: the layout checks below do not apply */
        clf_gguf_close(g);
        return;
    }
    assert_int_equal(clf_gguf_version(g), 3);
    assert_int_equal(clf_gguf_alignment(g), 32);
    assert_int_equal(clf_gguf_n_tensors(g), 272);
    expect_u32(g, "llama.block_count", 30);
    expect_u32(g, "llama.embedding_length", 576);
    expect_u32(g, "llama.feed_forward_length", 1536);
    expect_u32(g, "llama.attention.head_count", 9);
    expect_u32(g, "llama.attention.head_count_kv", 3);
    expect_u32(g, "llama.context_length", 8192);
    expect_u32(g, "llama.rope.dimension_count", 64);
    expect_u32(g, "tokenizer.ggml.bos_token_id", 1);
    expect_u32(g, "tokenizer.ggml.eos_token_id", 2);
    float f;
    TU_OK(clf_gguf_get_f32(g, "llama.rope.freq_base", &f));
    assert_true(f == 100000.0f);
    TU_OK(clf_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f));
    assert_true(f == 1e-5f);
    const clf_gguf_str *tok;
    uint64_t n;
    TU_OK(clf_gguf_get_strs(g, "tokenizer.ggml.tokens", &tok, &n));
    assert_int_equal(n, 49152);
    assert_int_equal(tok[0].len, 13);
    assert_memory_equal(tok[0].ptr, "<|endoftext|>", 13);
    assert_memory_equal(tok[49151].ptr, "ectable", 7);
    TU_OK(clf_gguf_get_strs(g, "tokenizer.ggml.merges", &tok, &n));
    assert_int_equal(n, 48900);
    assert_memory_equal(tok[48899].ptr, "ect able", 8);
    const void *types;
    TU_OK(clf_gguf_get_arr(g, "tokenizer.ggml.token_type", CLF_GGUF_INT32, &types, &n));
    assert_int_equal(n, 49152);

    expect_tensor_info(g, "token_embd.weight", CLF_Q8_0, 576, 49152);
    expect_tensor_info(g, "blk.0.attn_q.weight", CLF_Q4_1, 576, 576);
    expect_tensor_info(g, "blk.0.attn_k.weight", CLF_Q4_1, 576, 192);
    expect_tensor_info(g, "blk.29.ffn_down.weight", CLF_Q4_1, 1536, 576);
    expect_tensor_info(g, "output_norm.weight", CLF_F32, 576, 1);
    assert_null(clf_gguf_find_tensor(g, "output.weight")); /* tied embeddings */
    /* absolute data offsets as the `gguf` Python package reports them */
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, "token_embd.weight");
    assert_int_equal(clf_gguf_data_offset(g) + t->offset, 1785664);
    t = clf_gguf_find_tensor(g, "output_norm.weight");
    assert_int_equal(clf_gguf_data_offset(g) + t->offset, 98360128);
    int counts[CLF_Q8_0 + 1] = {0};
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) counts[clf_gguf_tensor_at(g, i)->type]++;
    assert_int_equal(counts[CLF_Q4_1], 210);
    assert_int_equal(counts[CLF_F32], 61);
    assert_int_equal(counts[CLF_Q8_0], 1);
    clf_gguf_close(g);
}

static int teardown(void **state) {
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir); /* also what a failed case left */
    return tmpdir[0] ? system(cmd) : 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_copy_is_identical),
        cmocka_unit_test(test_accessors),  cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_real_model),
    };
    return TU_RUN_GROUP(tests, NULL, teardown);
}

/* Hostile GGUF files: a small valid file from the writer, patched byte by
 * byte into each kind of damage. Every one must fail with CLF_ERR_FORMAT
 * and its own message (a distinctive substring is checked), never crash or
 * read out of bounds (run under the sanitizer build too). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf_write.h"
#include "llama.h"
#include "ref_llama.h"
#include "testutil.h"

typedef struct file { uint8_t *p; size_t n; } file;

static file slurp_and_unlink(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    file b = {.n = (size_t)ftell(f)};
    fseek(f, 0, SEEK_SET);
    b.p = malloc(b.n);
    assert_int_equal(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    unlink(path);
    return b;
}

static file write_to_memory(clf_gguf_writer *w) {
    char path[] = "/tmp/clinfer-bad-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    return slurp_and_unlink(path);
}

/* The base file: strings, integers, arrays (of strings too), an explicit
 * alignment, and tensors of three types. */
static file base_file(void) {
    uint64_t s = tu_seed() ^ 0xbadull;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    TU_OK(clf_gguf_set_u32(w, "general.alignment", 32));
    TU_OK(clf_gguf_set_u32(w, "test.aa", 1));
    TU_OK(clf_gguf_set_u32(w, "test.ab", 2));
    TU_OK(clf_gguf_set_str(w, "general.name", "tiny"));
    const char *toks[] = {"a", "bc", "def"};
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", toks, 3));
    uint32_t ids[4] = {1, 2, 3, 4};
    TU_OK(clf_gguf_set_arr(w, "test.ids", CLF_GGUF_UINT32, ids, 4));
    TU_OK(clf_gguf_set_str(w, "llama.block_count", "three"));
    float x[7 * 3];
    tu_fill_uniform(&s, x, 21, -1, 1);
    TU_OK(clf_gguf_add_tensor(w, "t.f32", CLF_F32, 2, (int64_t[]){7, 3}, x));
    uint8_t q[2 * 2 * 34];
    for (size_t i = 0; i < sizeof q; i++) q[i] = (uint8_t)tu_next(&s);
    TU_OK(clf_gguf_add_tensor(w, "t.q8", CLF_Q8_0, 2, (int64_t[]){64, 2}, q));
    TU_OK(clf_gguf_add_tensor(w, "t.f16", CLF_F16, 1, (int64_t[]){5}, q));
    return write_to_memory(w);
}

static file copy(file b) {
    file c = {malloc(b.n), b.n};
    memcpy(c.p, b.p, b.n);
    return c;
}

/* Offset of the length-prefixed string `s` (of its length field). */
static size_t find_str(file b, const char *s) {
    uint64_t n = strlen(s);
    for (size_t i = 0; i + 8 + n <= b.n; i++)
        if (memcmp(b.p + i, &n, 8) == 0 && memcmp(b.p + i + 8, s, n) == 0) return i;
    fail_msg("'%s' not in the base file", s);
    return 0;
}

static size_t after_str(file b, const char *s) { return find_str(b, s) + 8 + strlen(s); }
/* A key's value (past its type). */
static size_t kv_value(file b, const char *key) { return after_str(b, key) + 4; }
static size_t kv_type(file b, const char *key) { return after_str(b, key); }

typedef enum { T_NDIMS, T_DIM0, T_TYPE, T_OFFSET } tfield;
static size_t tensor_field(file b, const char *name, tfield f, int dim) {
    size_t o = after_str(b, name);
    uint32_t nd;
    memcpy(&nd, b.p + o, 4);
    switch (f) {
    case T_NDIMS: return o;
    case T_DIM0: return o + 4 + 8 * (size_t)dim;
    case T_TYPE: return o + 4 + 8 * nd;
    default: return o + 4 + 8 * nd + 4;
    }
}

static void put32(file b, size_t off, uint32_t v) { memcpy(b.p + off, &v, 4); }
static void put64(file b, size_t off, uint64_t v) { memcpy(b.p + off, &v, 8); }

static void expect_fail(file b, const char *what, const char *substr) {
    clf_gguf *g = NULL;
    clf_status st = clf_gguf_open_memory(b.p, b.n, &g);
    if (st != CLF_ERR_FORMAT) {
        clf_gguf_close(g);
        fail_msg("%s: expected a format error, got '%s': %s", what, clf_status_name(st), clf_last_error());
    }
    assert_null(g);
    if (!strstr(clf_last_error(), substr)) fail_msg("%s: message '%s' lacks '%s'", what, clf_last_error(), substr);
    printf("  %-28s -> %s\n", what, clf_last_error());
}

/* ---- the table ------------------------------------------------------------------ */

static void test_sanity(void **state) {
    (void)state;
    file b = base_file();
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(b.p, b.n, &g));
    assert_int_equal(clf_gguf_n_tensors(g), 3);
    /* a wrong value type for a known key parses, and fails in its accessor */
    uint32_t n;
    assert_int_equal(clf_gguf_get_u32(g, "llama.block_count", &n), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "'llama.block_count' has type string, expected an integer"));
    clf_gguf_close(g);
    free(b.p);
}

static void test_header(void **state) {
    (void)state;
    file b = base_file(), c;
    c = copy(b), c.p[0] = 'g', expect_fail(c, "bad magic", "not a GGUF file"), free(c.p);
    c = copy(b), put32(c, 4, 1), expect_fail(c, "version 1", "GGUF version 1 is not supported"), free(c.p);
    c = copy(b), put32(c, 4, 0), expect_fail(c, "version 0", "unsupported GGUF version 0"), free(c.p);
    c = copy(b), put32(c, 4, 4), expect_fail(c, "version 4", "unsupported GGUF version 4"), free(c.p);
    c = copy(b), put32(c, 4, 3u << 24), expect_fail(c, "big-endian", "big-endian GGUF"), free(c.p);
    c = copy(b), put64(c, 8, UINT64_MAX);
    expect_fail(c, "tensor count 2^64-1", "tensor count 18446744073709551615 at offset 8 is impossible"), free(c.p);
    c = copy(b), put64(c, 16, UINT64_MAX);
    expect_fail(c, "kv count 2^64-1", "metadata count 18446744073709551615 at offset 16 is impossible"), free(c.p);
    /* a count that fits the bytes but not the items: runs into the tensor infos */
    c = copy(b), put64(c, 16, 12), expect_fail(c, "kv count + 4", "metadata #9"), free(c.p);
    free(b.p);
}

static void test_metadata(void **state) {
    (void)state;
    file b = base_file(), c;
    c = copy(b), put64(c, 24, UINT64_MAX);
    expect_fail(c, "key length 2^64-1", "metadata #0: key: string length 18446744073709551615 at offset 24"), free(c.p);
    c = copy(b), put64(c, kv_value(b, "general.name"), UINT64_MAX);
    expect_fail(c, "string value 2^64-1", "'general.name': string value: string length 18446744073709551615"), free(c.p);
    c = copy(b), put64(c, kv_value(b, "test.ids") + 4, UINT64_MAX);
    expect_fail(c, "uint32 array 2^64-1", "array of 18446744073709551615 uint32 elements"), free(c.p);
    c = copy(b), put64(c, kv_value(b, "test.ids") + 4, (UINT64_MAX >> 2) + 2); /* n * 4 wraps to 4 */
    expect_fail(c, "uint32 array wraps", "array of 4611686018427387905 uint32"), free(c.p);
    c = copy(b), put64(c, kv_value(b, "tokenizer.ggml.tokens") + 4, UINT64_MAX);
    expect_fail(c, "string array 2^64-1", "array of 18446744073709551615 string elements"), free(c.p);
    c = copy(b), put64(c, find_str(b, "bc"), UINT64_MAX);
    expect_fail(c, "string in array 2^64-1", "'tokenizer.ggml.tokens': array string: string length 18446744073709551615"),
        free(c.p);
    c = copy(b), put32(c, kv_type(b, "test.aa"), 13);
    expect_fail(c, "unknown value type", "'test.aa': unknown value type 13"), free(c.p);
    c = copy(b), put32(c, kv_value(b, "test.ids"), 77);
    expect_fail(c, "unknown array type", "'test.ids': unknown array element type 77"), free(c.p);
    c = copy(b), c.p[find_str(b, "test.ab") + 8 + 6] = 'a';
    expect_fail(c, "duplicate key", "duplicate metadata key 'test.aa' (#2 and #3)"), free(c.p);
    c = copy(b), put64(c, 24, 0), expect_fail(c, "empty key", "empty key"), free(c.p);
    c = copy(b), c.p[find_str(b, "test.aa") + 8 + 4] = 0; /* "test\0aa": unreachable by name, cut short when copied */
    expect_fail(c, "NUL in a key", "metadata #2: key at offset"), free(c.p);
    c = copy(b), put32(c, kv_value(b, "general.alignment"), 48);
    expect_fail(c, "alignment 48", "general.alignment 48 is not a power of two"), free(c.p);
    c = copy(b), put32(c, kv_value(b, "general.alignment"), 0);
    expect_fail(c, "alignment 0", "general.alignment 0 is not a power of two"), free(c.p);
    c = copy(b), put32(c, kv_type(b, "general.alignment"), CLF_GGUF_FLOAT32);
    expect_fail(c, "alignment as float", "'general.alignment' has type float32"), free(c.p);
    free(b.p);
}

static void test_nesting(void **state) {
    (void)state;
    /* arrays of arrays nested 3 deep parse (and are skipped); 9 deep fail */
    for (int depth = 3; depth <= 9; depth += 6) {
        uint8_t raw[16 * 12];
        size_t o = 0;
        for (int d = 1; d < depth; d++) { /* each level: one array element */
            uint32_t t = d + 1 < depth ? CLF_GGUF_ARRAY : CLF_GGUF_UINT8;
            uint64_t n = d + 1 < depth ? 1 : 0;
            memcpy(raw + o, &t, 4), memcpy(raw + o + 4, &n, 8), o += 12;
        }
        clf_gguf_writer *w;
        TU_OK(clf_gguf_writer_create(&w));
        clf_gguf_kv kv = {.key = {"test.deep", 9}, .type = CLF_GGUF_ARRAY, .arr_type = CLF_GGUF_ARRAY,
                          .arr_n = 1, .data = raw, .data_bytes = o};
        TU_OK(clf_gguf_set_kv(w, &kv));
        file f = write_to_memory(w);
        if (depth == 3) {
            clf_gguf *g;
            TU_OK(clf_gguf_open_memory(f.p, f.n, &g));
            assert_int_equal(clf_gguf_find(g, "test.deep")->data_bytes, o);
            clf_gguf_close(g);
        } else {
            expect_fail(f, "arrays nested 9 deep", "'test.deep': arrays nested deeper than 8 levels");
        }
        free(f.p);
    }
}

static void test_tensor_infos(void **state) {
    (void)state;
    file b = base_file(), c;
    c = copy(b), put64(c, tensor_field(b, "t.f32", T_DIM0, 0), 1ull << 62), put64(c, tensor_field(b, "t.f32", T_DIM0, 1), 4);
    expect_fail(c, "dimension product overflow", "'t.f32': element count overflows (dimension 1"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f32", T_DIM0, 0), (1ull << 62) + 1), put64(c, tensor_field(b, "t.f32", T_DIM0, 1), 1);
    expect_fail(c, "byte size overflow", "'t.f32': byte size overflows"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f32", T_DIM0, 1), 0);
    expect_fail(c, "zero dimension", "'t.f32': dimension 1 is 0"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f32", T_DIM0, 0), UINT64_MAX);
    expect_fail(c, "dimension 2^64-1", "'t.f32': dimension 0 is 18446744073709551615"), free(c.p);
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_NDIMS, 0), 5);
    expect_fail(c, "5 dimensions", "'t.q8': 5 dimensions"), free(c.p);
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_NDIMS, 0), 0);
    expect_fail(c, "0 dimensions", "'t.q8': 0 dimensions"), free(c.p);
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_TYPE, 0), 16);
    expect_fail(c, "IQ2_XXS tensor", "'t.q8': unsupported tensor type 16 (IQ2_XXS)"), free(c.p);
    /* the message lists what the type table holds */
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_TYPE, 0), 15);
    expect_fail(c, "Q8_K tensor", "(Q8_K) at offset"), free(c.p);
    assert_non_null(strstr(clf_last_error(), "clinfer reads F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, "
                                             "Q6_K, IQ4_NL, BF16, MXFP4"));
    /* a K-quant row must be whole 256-weight super-blocks (t.q8's 2 x 68
     * bytes read as Q4_K: 64 weights a row) */
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_TYPE, 0), CLF_Q4_K);
    expect_fail(c, "Q4_K row of 64", "'t.q8': row length 64 is not a multiple of the Q4_K block size 256"), free(c.p);
    c = copy(b), put32(c, tensor_field(b, "t.q8", T_TYPE, 0), 0xdead);
    expect_fail(c, "unknown tensor type", "unsupported tensor type 57005 (unknown)"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.q8", T_DIM0, 0), 48);
    expect_fail(c, "row not whole blocks", "'t.q8': row length 48 is not a multiple of the Q8_0 block size 32"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.q8", T_OFFSET, 0), 96 + 8);
    expect_fail(c, "misaligned offset", "'t.q8': data offset 104"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.q8", T_OFFSET, 0), 0);
    expect_fail(c, "overlapping tensors", "tensor 't.q8' [0, 136) overlaps tensor 't.f32' [0, 84)"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f16", T_OFFSET, 0), 1ull << 40);
    expect_fail(c, "data past the end", "tensor 't.f16': data [1099511627776, +10) runs past the end of the file"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f16", T_OFFSET, 0), UINT64_MAX - 31); /* offset + bytes wraps */
    expect_fail(c, "offset + size wraps", "runs past the end of the file"), free(c.p);
    c = copy(b), put64(c, tensor_field(b, "t.f32", T_OFFSET, 0), 96);
    expect_fail(c, "tensors swapped onto one", "overlaps"), free(c.p);
    c = copy(b), c.p[find_str(b, "t.q8") + 8 + 1] = 0;
    expect_fail(c, "NUL in a tensor name", "tensor #1: name at offset"), free(c.p);
    c = copy(b), c.p[find_str(b, "t.f16") + 8 + 3] = '3', c.p[find_str(b, "t.f16") + 8 + 4] = '2'; /* "t.f32" twice */
    expect_fail(c, "duplicate tensor", "duplicate tensor 't.f32' (#0 and #2)"), free(c.p);
    free(b.p);
}

/* Every truncation must fail cleanly, except cuts in the padding after the
 * last tensor's data, which lose nothing. */
static void test_truncation_everywhere(void **state) {
    (void)state;
    file b = base_file();
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(b.p, b.n, &g));
    size_t data_end = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        size_t end = clf_gguf_data_offset(g) + (size_t)t->offset + t->bytes;
        if (end > data_end) data_end = end;
    }
    /* section boundaries, reported for the log */
    size_t kv_end = (size_t)((const uint8_t *)clf_gguf_kv_at(g, clf_gguf_n_kv(g) - 1)->data - b.p) +
                    (size_t)clf_gguf_kv_at(g, clf_gguf_n_kv(g) - 1)->data_bytes;
    printf("  file %zu bytes: header 24, metadata to %zu, infos to <=%zu, data %zu..%zu\n", b.n, kv_end,
           clf_gguf_data_offset(g), clf_gguf_data_offset(g), data_end);
    size_t data_offset = clf_gguf_data_offset(g);
    clf_gguf_close(g);
    for (size_t cut = 0; cut < b.n; cut++) {
        uint8_t *p = malloc(cut ? cut : 1); /* exact size: ASan sees any read past the end */
        memcpy(p, b.p, cut);
        clf_status st = clf_gguf_open_memory(p, cut, &g);
        if (cut >= data_end) {
            if (st != CLF_OK) fail_msg("cut at %zu (in the final padding) failed: %s", cut, clf_last_error());
            clf_gguf_close(g);
        } else {
            if (st != CLF_ERR_FORMAT) fail_msg("cut at %zu: status %d", cut, (int)st);
            const char *m = clf_last_error();
            int ok = cut < 4 ? strstr(m, "not a GGUF file") != NULL
                   : cut < kv_end ? strstr(m, "(truncated)") || strstr(m, "past the end") || strstr(m, "is impossible")
                   : cut < data_offset ? strstr(m, "(truncated)") || strstr(m, "past the end") || strstr(m, "is impossible")
                                       : strstr(m, "runs past the end of the file") != NULL;
            if (!ok) fail_msg("cut at %zu: unclear message '%s'", cut, m);
            if (cut == 24 || cut == kv_end || cut == data_offset) printf("  cut at %-4zu -> %s\n", cut, m);
        }
        free(p);
    }
    free(b.p);
}

/* Random damage: patched words and flipped bytes must give OK or a format
 * error, and a file that still parses must survive every accessor. */
static void test_random_damage(void **state) {
    (void)state;
    uint64_t s = tu_seed() ^ 0xf022ull;
    file b = base_file();
    int parsed = 0;
    for (int it = 0; it < 3000; it++) {
        file c = copy(b);
        int edits = 1 + (int)(tu_next(&s) % 3);
        for (int e = 0; e < edits; e++) {
            size_t off = tu_next(&s) % c.n;
            uint64_t r = tu_next(&s);
            if (r % 3 == 0 && off + 8 <= c.n) put64(c, off, r % 5 == 0 ? UINT64_MAX : r >> (r % 64));
            else if (r % 3 == 1 && off + 4 <= c.n) put32(c, off, (uint32_t)(r >> 40));
            else c.p[off] ^= (uint8_t)(1u << (r % 8));
        }
        clf_gguf *g;
        clf_status st = clf_gguf_open_memory(c.p, c.n, &g);
        if (st != CLF_OK && st != CLF_ERR_FORMAT) fail_msg("damage %d: status %d (%s)", it, (int)st, clf_last_error());
        if (st == CLF_OK) {
            parsed++;
            for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) {
                const clf_gguf_kv *kv = clf_gguf_kv_at(g, i);
                char key[256];
                snprintf(key, sizeof key, "%.*s", (int)(kv->key.len < 200 ? kv->key.len : 200), kv->key.ptr);
                uint32_t u;
                int64_t i64;
                float f;
                int bo;
                clf_gguf_str str;
                const clf_gguf_str *strs;
                const void *data;
                uint64_t n;
                (void)clf_gguf_get_u32(g, key, &u), (void)clf_gguf_get_i64(g, key, &i64);
                (void)clf_gguf_get_f32(g, key, &f), (void)clf_gguf_get_bool(g, key, &bo);
                (void)clf_gguf_get_str(g, key, &str), (void)clf_gguf_get_arr(g, key, CLF_GGUF_UINT32, &data, &n);
                if (clf_gguf_get_strs(g, key, &strs, &n) == CLF_OK)
                    for (uint64_t j = 0; j < n; j++) assert_true(strs[j].ptr >= (const char *)c.p && strs[j].ptr + strs[j].len <= (const char *)c.p + c.n);
            }
            for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
                const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
                assert_true((const uint8_t *)t->data >= c.p && (const uint8_t *)t->data + t->bytes <= c.p + c.n);
            }
            clf_gguf_close(g);
        }
        free(c.p);
    }
    printf("  3000 damaged files: %d still parse, the rest fail cleanly\n", parsed);
    free(b.p);
}

/* ---- files that parse but are no Llama model ---------------------------------- */

/* A tiny model of family `arch` (tests/support) with a vocabulary of its
 * n_vocab tokens, copied without key `drop_key` and tensor `drop_tensor`
 * (NULL: none), then changed by `edit` (NULL: none). */
static file family_variant(const char *arch, const char *drop_key, const char *drop_tensor,
                           void (*edit)(clf_gguf_writer *w)) {
    char path[] = "/tmp/clinfer-bad-llama-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    tiny_model tm = {.arch = arch, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 64,
                     .n_vocab = 40, .type = CLF_Q8_0, .tied = 0, .window = 8};
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    file base = slurp_and_unlink(path);
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(base.p, base.n, &g));
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) {
        const clf_gguf_kv *kv = clf_gguf_kv_at(g, i);
        if (!drop_key || strlen(drop_key) != kv->key.len || memcmp(drop_key, kv->key.ptr, kv->key.len)) TU_OK(clf_gguf_set_kv(w, kv));
    }
    char tok[40][8];
    const char *toks[40];
    for (int i = 0; i < 40; i++) snprintf(tok[i], sizeof tok[i], "t%d", i), toks[i] = tok[i];
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", toks, 40));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (!drop_tensor || strcmp(name, drop_tensor)) TU_OK(clf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data));
    }
    clf_gguf_close(g);
    free(base.p);
    if (edit) edit(w);
    return write_to_memory(w);
}

static file llama_variant(const char *drop_key, const char *drop_tensor, void (*edit)(clf_gguf_writer *w)) {
    return family_variant("llama", drop_key, drop_tensor, edit);
}

/* The file parses; clf_llama_hparams_read refuses it with its own message. */
static void expect_llama_fail(file f, const char *what, const char *substr) {
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(f.p, f.n, &g));
    clf_llama_hparams hp;
    clf_status st = clf_llama_hparams_read(g, &hp);
    clf_gguf_close(g);
    if (st != CLF_ERR_FORMAT) fail_msg("%s: expected a format error, got '%s': %s", what, clf_status_name(st), clf_last_error());
    if (!strstr(clf_last_error(), substr)) fail_msg("%s: message '%s' lacks '%s'", what, clf_last_error(), substr);
    printf("  %-28s -> %s\n", what, clf_last_error());
    free(f.p);
}

static void vocab_41(clf_gguf_writer *w) {
    const char *toks[41];
    for (int i = 0; i < 41; i++) toks[i] = i == 40 ? "extra" : "t";
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", toks, 41));
}
static void vocab_39(clf_gguf_writer *w) {
    const char *toks[39];
    for (int i = 0; i < 39; i++) toks[i] = "t";
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", toks, 39));
}
static void layers_as_string(clf_gguf_writer *w) { TU_OK(clf_gguf_set_str(w, "llama.block_count", "2")); }
static void layers_zero(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.block_count", 0)); }
static void layers_three(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.block_count", 3)); }
static void heads_odd(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count", 5)); }
static void kv_heads_3(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count_kv", 3)); }
static void head_dim_8(clf_gguf_writer *w) { /* 8 heads of 8: consistent, but no kernel has -DHD=8 */
    TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count", 8));
    TU_OK(clf_gguf_set_u32(w, "llama.attention.key_length", 8));
}
static void arch_gpt2(clf_gguf_writer *w) { TU_OK(clf_gguf_set_str(w, "general.architecture", "gpt2")); }
static void eps_negative(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", -1)); }
static void rope_longrope(clf_gguf_writer *w) { TU_OK(clf_gguf_set_str(w, "llama.rope.scaling.type", "longrope")); }
static void rope_yarn_shrink(clf_gguf_writer *w) { /* YaRN extends a context: a factor below 1 is no YaRN */
    TU_OK(clf_gguf_set_str(w, "llama.rope.scaling.type", "yarn"));
    TU_OK(clf_gguf_set_f32(w, "llama.rope.scaling.factor", 0.5f));
}
static void value_length_32(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.attention.value_length", 32)); }
static void long_rope(clf_gguf_writer *w) {
    float f[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    TU_OK(clf_gguf_add_tensor(w, "rope_factors_long.weight", CLF_F32, 1, (int64_t[]){8}, f));
}
static void rope_freqs_short(clf_gguf_writer *w) { /* 4 factors for 8 rotated pairs */
    float f[4] = {1, 2, 4, 8};
    TU_OK(clf_gguf_add_tensor(w, "rope_freqs.weight", CLF_F32, 1, (int64_t[]){4}, f));
}
static void rope_base_tiny(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.freq_base", 1e-45f)); }
static void rope_base_one(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.freq_base", 1.0f)); }
static void rope_base_nan(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.freq_base", NAN)); }
static void rope_base_inf(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.freq_base", INFINITY)); }
static void eps_nan(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", NAN)); }
static void eps_one(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1.0f)); }
static void scale_zero(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.scaling.factor", 0.0f)); }
static void scale_linear_inf(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "llama.rope.scale_linear", INFINITY)); }
static void layers_one(clf_gguf_writer *w) { TU_OK(clf_gguf_set_u32(w, "llama.block_count", 1)); }
static void norm_q8(clf_gguf_writer *w) {
    uint8_t q[2 * 34] = {0}; /* output_norm.weight, left out of the copy, comes back as Q8_0 */
    TU_OK(clf_gguf_add_tensor(w, "output_norm.weight", CLF_Q8_0, 1, (int64_t[]){64}, q));
}

static void test_llama_hparams(void **state) {
    (void)state;
    /* the unchanged variant is a model */
    file ok = llama_variant(NULL, NULL, NULL);
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(ok.p, ok.n, &g));
    clf_llama_hparams hp;
    TU_OK(clf_llama_hparams_read(g, &hp));
    assert_int_equal(hp.n_vocab, 40);
    assert_int_equal(hp.n_layer, 2);
    clf_gguf_close(g);
    free(ok.p);

    static const char *const required[] = {"general.architecture", "llama.block_count", "llama.embedding_length",
                                           "llama.feed_forward_length", "llama.attention.head_count"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char what[64], want[96];
        snprintf(what, sizeof what, "missing %s", required[i]);
        snprintf(want, sizeof want, "missing metadata key '%s'", required[i]);
        expect_llama_fail(llama_variant(required[i], NULL, NULL), what, want);
    }
    expect_llama_fail(llama_variant(NULL, NULL, vocab_41), "vocabulary > embedding rows",
                      "vocabulary has 41 tokens but token_embd.weight has 40 rows");
    expect_llama_fail(llama_variant(NULL, NULL, vocab_39), "vocabulary < embedding rows",
                      "vocabulary has 39 tokens but token_embd.weight has 40 rows");
    expect_llama_fail(llama_variant(NULL, "token_embd.weight", NULL), "no token embedding",
                      "tensor token_embd.weight is missing");
    expect_llama_fail(llama_variant(NULL, "blk.1.ffn_down.weight", NULL), "missing layer tensor",
                      "tensor blk.1.ffn_down.weight is missing");
    expect_llama_fail(llama_variant(NULL, NULL, layers_three), "more layers than tensors",
                      "tensor blk.2.attn_norm.weight is missing");
    expect_llama_fail(llama_variant(NULL, NULL, layers_as_string), "block_count as a string",
                      "'llama.block_count' has type string, expected an integer");
    expect_llama_fail(llama_variant(NULL, NULL, layers_zero), "block_count 0", "metadata key 'llama.block_count' is 0");
    expect_llama_fail(llama_variant(NULL, NULL, heads_odd), "embedding not heads x dim",
                      "embedding_length 64 is not a multiple of head_count 5");
    expect_llama_fail(llama_variant(NULL, NULL, kv_heads_3), "heads not kv-heads multiple",
                      "head_count 4 is not a multiple of head_count_kv 3");
    expect_llama_fail(llama_variant(NULL, NULL, head_dim_8), "head_dim the kernels lack",
                      "head_dim 8 is unsupported (a multiple of 16 up to 256)");
    expect_llama_fail(llama_variant(NULL, NULL, arch_gpt2), "unsupported architecture", "unsupported architecture 'gpt2'");
    expect_llama_fail(llama_variant(NULL, NULL, eps_negative), "negative rms epsilon",
                      "llama.attention.layer_norm_rms_epsilon = -1 is out of range (finite, between 0 and 1)");
    expect_llama_fail(llama_variant(NULL, NULL, eps_nan), "NaN rms epsilon", "layer_norm_rms_epsilon = nan is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, eps_one), "rms epsilon 1", "layer_norm_rms_epsilon = 1 is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, rope_base_tiny), "rope base 1e-45",
                      "llama.rope.freq_base = 1.4013e-45 is out of range (finite and > 1)");
    expect_llama_fail(llama_variant(NULL, NULL, rope_base_one), "rope base 1", "llama.rope.freq_base = 1 is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, rope_base_nan), "NaN rope base", "llama.rope.freq_base = nan is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, rope_base_inf), "Inf rope base", "llama.rope.freq_base = inf is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, scale_zero), "rope scale 0",
                      "llama.rope.scaling.factor = 0 is out of range (finite and > 0)");
    expect_llama_fail(llama_variant(NULL, NULL, scale_linear_inf), "Inf rope scale_linear",
                      "llama.rope.scale_linear = inf is out of range");
    expect_llama_fail(llama_variant(NULL, NULL, layers_one), "fewer layers than tensors",
                      "is of block 1 but llama.block_count is 1");
    expect_llama_fail(llama_variant(NULL, "output_norm.weight", norm_q8), "quantized norm",
                      "tensor output_norm.weight must be F32, is Q8_0");
    expect_llama_fail(llama_variant(NULL, NULL, rope_longrope), "longrope",
                      "RoPE scaling 'longrope' is unsupported (none, linear, yarn are)");
    expect_llama_fail(llama_variant(NULL, NULL, rope_yarn_shrink), "YaRN factor 0.5",
                      "llama.rope.scaling.factor = 0.5 is out of range for YaRN (>= 1)");
    expect_llama_fail(llama_variant(NULL, NULL, long_rope), "LongRoPE", "LongRoPE (rope_factors_long/short) is unsupported");
    expect_llama_fail(llama_variant(NULL, NULL, value_length_32), "value_length", "value_length 32 differs from key_length 16");
    expect_llama_fail(llama_variant(NULL, NULL, rope_freqs_short), "rope_freqs of the wrong length",
                      "tensor rope_freqs.weight has shape [4, 1, 1, 1], expected [8, 1]");
}

static void gemma_scale(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "gemma3.attention.scale", 0.125f)); }
static void gemma_scale_zero(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "gemma3.attention.scale", 0.0f)); }
static void gemma_swa_base(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "gemma3.rope.freq_base_swa", 20000.0f)); }
static void gemma_swa_base_nan(clf_gguf_writer *w) { TU_OK(clf_gguf_set_f32(w, "gemma3.rope.freq_base_swa", NAN)); }

/* The attention scale and the local layers' RoPE base: the family's unless
 * the file states them (attention.scale, rope.freq_base_swa). */
static clf_llama_hparams gemma_read(void (*edit)(clf_gguf_writer *w)) {
    file f = family_variant("gemma3", NULL, NULL, edit);
    clf_gguf *g;
    TU_OK(clf_gguf_open_memory(f.p, f.n, &g));
    clf_llama_hparams hp;
    TU_OK(clf_llama_hparams_read(g, &hp));
    clf_gguf_close(g);
    free(f.p);
    return hp;
}

static void test_gemma3_metadata(void **state) {
    (void)state;
    clf_llama_hparams hp = gemma_read(NULL);
    assert_true(hp.attn_scale == 1.0f / sqrtf((float)hp.head_dim));
    assert_true(hp.rope_base_swa == 10000.0f);
    assert_true(gemma_read(gemma_scale).attn_scale == 0.125f);
    assert_true(gemma_read(gemma_swa_base).rope_base_swa == 20000.0f);
    expect_llama_fail(family_variant("gemma3", NULL, NULL, gemma_scale_zero), "attention.scale 0",
                      "gemma3.attention.scale = 0 is out of range (finite and > 0)");
    expect_llama_fail(family_variant("gemma3", NULL, NULL, gemma_swa_base_nan), "NaN rope.freq_base_swa",
                      "gemma3.rope.freq_base_swa = nan is out of range (finite and > 1)");
}

/* Each family's own keys and tensors are required. */
static void test_family_hparams(void **state) {
    (void)state;
    static const char *const fams[] = {"qwen2", "qwen3", "gemma3", "phi3"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        file ok = family_variant(fams[i], NULL, NULL, NULL);
        clf_gguf *g;
        TU_OK(clf_gguf_open_memory(ok.p, ok.n, &g));
        clf_llama_hparams hp;
        TU_OK(clf_llama_hparams_read(g, &hp));
        assert_string_equal(hp.fam->arch, fams[i]);
        assert_int_equal(hp.fused_qkv, i == 3);
        assert_int_equal(hp.fused_gate_up, i == 3);
        assert_int_equal(hp.n_swa, i == 2 ? 8 : 0);
        clf_gguf_close(g);
        free(ok.p);
    }
    expect_llama_fail(family_variant("gemma3", "gemma3.attention.sliding_window", NULL, NULL), "gemma3 without a window",
                      "missing metadata key 'gemma3.attention.sliding_window'");
    expect_llama_fail(family_variant("gemma3", NULL, "blk.1.post_ffw_norm.weight", NULL), "gemma3 without a post-norm",
                      "tensor blk.1.post_ffw_norm.weight is missing");
    expect_llama_fail(family_variant("qwen3", NULL, "blk.0.attn_k_norm.weight", NULL), "qwen3 without a K norm",
                      "tensor blk.0.attn_k_norm.weight is missing");
    expect_llama_fail(family_variant("qwen2", NULL, "blk.1.attn_v.bias", NULL), "qwen2 without a V bias",
                      "tensor blk.1.attn_v.bias is missing");
    expect_llama_fail(family_variant("phi3", NULL, "blk.0.attn_qkv.weight", NULL), "phi3 with no Q|K|V at all",
                      "tensor blk.0.attn_q.weight is missing");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sanity),       cmocka_unit_test(test_header),
        cmocka_unit_test(test_metadata),     cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_tensor_infos), cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_random_damage), cmocka_unit_test(test_llama_hparams),
        cmocka_unit_test(test_family_hparams), cmocka_unit_test(test_gemma3_metadata),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

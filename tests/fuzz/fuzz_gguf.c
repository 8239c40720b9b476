/* libFuzzer harness for the GGUF reader: the input is a whole file, parsed
 * with clf_gguf_open_memory. A parse must succeed or fail with
 * CLF_ERR_FORMAT; a file that parses must then survive every accessor over
 * every key and tensor (typed getters of every type, arrays, strings, finds
 * by name), with every pointer it hands out inside the input, and every
 * consumer a hostile file reaches: the tokenizer loader and chat format,
 * the Llama hyperparameter checks, the host dequantizers, and the writer's
 * copy (quantize's path) whose output must parse back to the same keys.
 *
 * Built by the CLINFER_FUZZ build (build-fuzz); the same code replays
 * tests/fuzz/regressions/gguf-* in the ordinary suite
 * (tests/test_fuzz_regressions.c includes this file). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "gguf_write.h"
#include "llama.h"
#include "quant.h"
#include "tokenizer.h"
#include "vocab.h"

/* A violated property: reported, then abort() so libFuzzer keeps the input
 * (test code, not the library). */
#define FG_CHECK(cond)                                                                                \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "fuzz_gguf: %s:%d: property failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    clf_last_error());                                                                \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

typedef struct fg_span { const uint8_t *lo, *hi; } fg_span;

static int fg_inside(fg_span s, const void *p, uint64_t n) {
    const uint8_t *b = p;
    return n == 0 || (b && b >= s.lo && b <= s.hi && n <= (uint64_t)(s.hi - b));
}

/* Reads every byte of [p, p+n) so that ASan checks the range. */
static unsigned fg_touch(const void *p, uint64_t n) {
    unsigned x = 0;
    for (uint64_t i = 0; i < n; i++) x += ((const uint8_t *)p)[i];
    return x;
}

/* A C string of a GGUF string, NULL when it holds a NUL byte (the reader
 * refuses such keys and names: a C-string lookup could not reach them). */
static char *fg_cstr(clf_gguf_str s) {
    if (memchr(s.ptr, 0, (size_t)s.len)) return NULL;
    char *c = malloc((size_t)s.len + 1);
    if (!c) return NULL;
    memcpy(c, s.ptr, (size_t)s.len);
    c[s.len] = 0;
    return c;
}

static volatile unsigned fg_sink;

static void fg_kv(const clf_gguf *g, fg_span span, const clf_gguf_kv *kv) {
    FG_CHECK(kv && kv->key.len > 0 && fg_inside(span, kv->key.ptr, kv->key.len));
    fg_sink += fg_touch(kv->key.ptr, kv->key.len);
    FG_CHECK(kv->type <= CLF_GGUF_FLOAT64);
    FG_CHECK(fg_inside(span, kv->data, kv->data_bytes));
    fg_sink += fg_touch(kv->data, kv->data_bytes);
    (void)clf_gguf_vtype_name(kv->type), (void)clf_gguf_vtype_size(kv->type);
    if (kv->type == CLF_GGUF_STRING) FG_CHECK(fg_inside(span, kv->str.ptr, kv->str.len));
    if (kv->type == CLF_GGUF_ARRAY && kv->arr_type == CLF_GGUF_STRING) {
        FG_CHECK(kv->strs || kv->arr_n == 0);
        for (uint64_t j = 0; j < kv->arr_n; j++) FG_CHECK(fg_inside(span, kv->strs[j].ptr, kv->strs[j].len));
    }

    char *key = fg_cstr(kv->key);
    FG_CHECK(key != NULL);
    FG_CHECK(clf_gguf_find(g, key) == kv); /* keys are unique: find gives this one */
    uint32_t u32;
    int64_t i64;
    float f32;
    int b;
    clf_gguf_str s;
    clf_status st;
    st = clf_gguf_get_u32(g, key, &u32);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    st = clf_gguf_get_i64(g, key, &i64);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st == CLF_OK && i64 >= 0 && i64 <= UINT32_MAX) FG_CHECK(clf_gguf_get_u32(g, key, &u32) == CLF_OK && u32 == i64);
    st = clf_gguf_get_f32(g, key, &f32);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    st = clf_gguf_get_bool(g, key, &b);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    st = clf_gguf_get_str(g, key, &s);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st == CLF_OK) {
        FG_CHECK(fg_inside(span, s.ptr, s.len));
        fg_sink += fg_touch(s.ptr, s.len);
    }
    for (int t = 0; t <= CLF_GGUF_FLOAT64 + 1; t++) { /* every element type, and one past the last */
        const void *data;
        uint64_t n;
        st = clf_gguf_get_arr(g, key, (clf_gguf_vtype)t, &data, &n);
        FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT || st == CLF_ERR_ARG);
        if (st == CLF_OK) {
            FG_CHECK(t != CLF_GGUF_STRING && t != CLF_GGUF_ARRAY && t <= CLF_GGUF_FLOAT64);
            size_t es = clf_gguf_vtype_size((clf_gguf_vtype)t);
            FG_CHECK(es > 0 && n <= UINT64_MAX / es && fg_inside(span, data, n * es));
            fg_sink += fg_touch(data, n * es);
        }
    }
    const clf_gguf_str *strs;
    uint64_t n;
    st = clf_gguf_get_strs(g, key, &strs, &n);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st == CLF_OK)
        for (uint64_t j = 0; j < n; j++) FG_CHECK(fg_inside(span, strs[j].ptr, strs[j].len));
    free(key);
}

static void fg_tensor(const clf_gguf *g, fg_span span, const clf_gguf_tensor *t) {
    FG_CHECK(t && t->name.len > 0 && fg_inside(span, t->name.ptr, t->name.len));
    FG_CHECK(t->n_dims >= 1 && t->n_dims <= 4);
    const clf_type_info *ti = clf_type_get(t->type);
    FG_CHECK(ti != NULL);
    int64_t rows = 1;
    for (int d = 0; d < 4; d++) {
        FG_CHECK(t->ne[d] >= 1);
        if (d >= 1) {
            FG_CHECK(rows <= INT64_MAX / t->ne[d]);
            rows *= t->ne[d];
        }
    }
    size_t row = clf_row_bytes(t->type, t->ne[0]);
    FG_CHECK(row > 0 && (uint64_t)rows <= SIZE_MAX / row && t->bytes == row * (size_t)rows);
    FG_CHECK(t->offset % clf_gguf_alignment(g) == 0);
    FG_CHECK((const uint8_t *)t->data == span.lo + clf_gguf_data_offset(g) + t->offset);
    FG_CHECK(fg_inside(span, t->data, t->bytes));
    if (t->bytes) fg_sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->bytes - 1];
    /* the host dequantizers read arbitrary bytes (NaN, Inf, denormal scales) */
    int64_t n = t->ne[0] * rows;
    if (n <= 1 << 16) {
        float *f = malloc((size_t)n * sizeof *f);
        if (f) {
            clf_dequantize(t->type, t->data, f, n);
            fg_sink += (unsigned)(f[0] == f[0]) + (unsigned)(f[n - 1] == f[n - 1]);
            free(f);
        }
    }
    char *name = fg_cstr(t->name);
    FG_CHECK(name != NULL);
    FG_CHECK(clf_gguf_find_tensor(g, name) == t); /* names are unique */
    free(name);
}

/* The tokenizer loader on whatever vocabulary the file has: it must load or
 * fail with a format error, and a loaded one must tokenize and detokenize. */
static void fg_tokenizer(const clf_gguf *g) {
    clf_tokenizer *t;
    clf_status st = clf_tokenizer_load(g, &t);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st != CLF_OK) return;
    static const char text[] = "Hello <|im_start|>world\n\n  12345 caf\xc3\xa9 \xf0\x9f\x98\x80 \xff";
    int32_t *ids;
    int n;
    for (int special = 0; special < 2; special++) {
        st = clf_tokenize(t, text, sizeof text - 1, 1, special, &ids, &n);
        FG_CHECK(st == CLF_OK);
        for (int i = 0; i < n; i++) FG_CHECK(ids[i] >= 0 && ids[i] < clf_tokenizer_n_vocab(t));
        char *out;
        size_t len;
        FG_CHECK(clf_detokenize(t, ids, n, CLF_DETOK_SPECIAL, &out, &len) == CLF_OK);
        free(out);
        free(ids);
    }
    /* the file's chat template (or its tokens) gives a format or a format error;
     * a template the Jinja engine runs renders or fails cleanly, within its bounds */
    clf_chat chat;
    st = clf_chat_init_model(t, &chat);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st == CLF_OK) {
        static const clf_chat_msg msgs[] = {{"system", " s\n"}, {"user", "u"}, {"assistant", " "}, {"user", "\t"}};
        char *buf;
        size_t len;
        st = clf_chat_render(&chat, msgs, 4, 1, &buf, &len);
        if (chat.jinja) { /* the file's template run: rendered, or refused with a message (it may write NULs) */
            FG_CHECK(st == CLF_OK ? buf && buf[len] == 0 : (st == CLF_ERR_ARG || st == CLF_ERR_FORMAT) && clf_last_error()[0]);
        } else {
            FG_CHECK(st == CLF_OK && len == strlen(buf));
        }
        if (st == CLF_OK) free(buf);
    }
    clf_tokenizer_free(t);
}

static void fg_llama(const clf_gguf *g) {
    clf_llama_hparams hp;
    clf_status st = clf_llama_hparams_read(g, &hp);
    FG_CHECK(st == CLF_OK || st == CLF_ERR_FORMAT);
    if (st == CLF_OK) FG_CHECK(hp.n_vocab > 0 && hp.n_layer > 0 && hp.head_dim % 16 == 0 && hp.n_head % hp.n_head_kv == 0);
    fg_sink += (unsigned)clf_llama_weight_bytes(g);
}

/* Copies every key and tensor through the writer (what quantize does),
 * writes the file and parses it back: same keys and types, same tensors. */
static void fg_rewrite(const clf_gguf *g) {
    clf_gguf_writer *w;
    FG_CHECK(clf_gguf_writer_create(&w) == CLF_OK);
    clf_status st = CLF_OK;
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_kv(g); i++) st = clf_gguf_set_kv(w, clf_gguf_kv_at(g, i));
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char *name = fg_cstr(t->name);
        FG_CHECK(name != NULL);
        st = clf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
        free(name);
    }
    /* the writer may refuse what it cannot write back (a key longer than
     * it takes, a general.alignment of another integer type): an argument
     * error, never a crash */
    FG_CHECK(st == CLF_OK || st == CLF_ERR_ARG || st == CLF_ERR_FORMAT);
    if (st == CLF_OK) {
        char path[64];
        /* /dev/shm where there is one: the writer fsyncs */
        snprintf(path, sizeof path, "%s/clinfer-fuzz-%d.gguf", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
                 (int)getpid());
        st = clf_gguf_write(w, path);
        FG_CHECK(st == CLF_OK || st == CLF_ERR_ARG || st == CLF_ERR_FORMAT);
        clf_gguf *h;
        if (st == CLF_OK) {
            FG_CHECK(clf_gguf_open(path, &h) == CLF_OK);
            /* general.alignment may be added */
            FG_CHECK(clf_gguf_n_kv(h) >= clf_gguf_n_kv(g) && clf_gguf_n_kv(h) <= clf_gguf_n_kv(g) + 1);
            FG_CHECK(clf_gguf_n_tensors(h) == clf_gguf_n_tensors(g));
            for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) {
                const clf_gguf_kv *a = clf_gguf_kv_at(g, i), *b = clf_gguf_kv_at(h, i);
                FG_CHECK(a->key.len == b->key.len && !memcmp(a->key.ptr, b->key.ptr, (size_t)a->key.len));
                FG_CHECK(a->type == b->type);
                if (!(a->key.len == 17 && !memcmp(a->key.ptr, "general.alignment", 17)))
                    FG_CHECK(a->data_bytes == b->data_bytes && !memcmp(a->data, b->data, (size_t)a->data_bytes));
            }
            for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
                const clf_gguf_tensor *a = clf_gguf_tensor_at(g, i), *b = clf_gguf_tensor_at(h, i);
                FG_CHECK(a->type == b->type && a->bytes == b->bytes && !memcmp(a->ne, b->ne, sizeof a->ne));
                FG_CHECK(!memcmp(a->data, b->data, a->bytes));
            }
            clf_gguf_close(h);
        }
        unlink(path);
    }
    clf_gguf_writer_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clf_gguf *g = NULL;
    clf_status st = clf_gguf_open_memory(data, size, &g);
    if (st != CLF_OK) {
        FG_CHECK(st == CLF_ERR_FORMAT && g == NULL && clf_last_error()[0]);
        return 0;
    }
    fg_span span = {data, data + size};
    FG_CHECK(clf_gguf_size(g) == size && clf_gguf_data_offset(g) <= size);
    size_t al = clf_gguf_alignment(g);
    FG_CHECK(al > 0 && (al & (al - 1)) == 0);
    FG_CHECK(clf_gguf_version(g) >= 2 && clf_gguf_version(g) <= 3);
    int64_t n_kv = clf_gguf_n_kv(g), n_t = clf_gguf_n_tensors(g);
    FG_CHECK(n_kv >= 0 && n_t >= 0);
    FG_CHECK(clf_gguf_kv_at(g, -1) == NULL && clf_gguf_kv_at(g, n_kv) == NULL);
    FG_CHECK(clf_gguf_tensor_at(g, -1) == NULL && clf_gguf_tensor_at(g, n_t) == NULL);
    for (int64_t i = 0; i < n_kv; i++) fg_kv(g, span, clf_gguf_kv_at(g, i));
    for (int64_t i = 0; i < n_t; i++) fg_tensor(g, span, clf_gguf_tensor_at(g, i));
    /* absent names */
    (void)clf_gguf_find(g, ""), (void)clf_gguf_find_tensor(g, "");
    (void)clf_gguf_find(g, "general.architecture"), (void)clf_gguf_find_tensor(g, "token_embd.weight");
    fg_tokenizer(g);
    fg_llama(g);
    fg_rewrite(g);
    clf_gguf_close(g);
    return 0;
}

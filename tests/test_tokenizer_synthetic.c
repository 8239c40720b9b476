/* Tokenizers on small vocabularies written by the test itself (so these run
 * without any model file): BPE merging and SentencePiece merging against a
 * naive reference on random vocabularies and texts, streaming
 * detokenization of split UTF-8, special tokens, BOS/EOS, invalid UTF-8,
 * and malformed vocabularies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf_write.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

/* ---- building a vocabulary file ------------------------------------------- */

enum { MAX_TOK = 1024, MAX_MERGES = 512 };

typedef struct vocab {
    const char *model, *pre;      /* pre NULL: key left out */
    char *tok[MAX_TOK];
    int32_t type[MAX_TOK];
    float score[MAX_TOK];
    int n;
    char *merge[MAX_MERGES];
    int n_merges;
    int with_merges, with_types, short_types;
    int bos, eos, add_bos, add_eos, add_space_prefix; /* -1: key left out */
} vocab;

static void vocab_init(vocab *v, const char *model, const char *pre) {
    memset(v, 0, sizeof *v);
    v->model = model;
    v->pre = pre;
    v->with_merges = v->with_types = 1;
    v->bos = v->eos = v->add_bos = v->add_eos = v->add_space_prefix = -1;
}

static int add_token(vocab *v, const char *text, int32_t type, float score) {
    assert_true(v->n < MAX_TOK);
    v->tok[v->n] = strdup(text);
    v->type[v->n] = type;
    v->score[v->n] = score;
    return v->n++;
}

static int find_token(const vocab *v, const char *text) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], text)) return i;
    return -1;
}

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merge[i]);
}

/* Writes v to a temporary GGUF and loads it; the status of the load. */
static clf_status vocab_load(const vocab *v, clf_tokenizer **t) {
    static int counter;
    char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/clf_tok_%d_%d.gguf", dir && *dir ? dir : "/tmp", (int)getpid(), counter++);
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    if (v->model) TU_OK(clf_gguf_set_str(w, "tokenizer.ggml.model", v->model));
    if (v->pre) TU_OK(clf_gguf_set_str(w, "tokenizer.ggml.pre", v->pre));
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, (uint64_t)v->n));
    if (v->with_types)
        TU_OK(clf_gguf_set_arr(w, "tokenizer.ggml.token_type", CLF_GGUF_INT32, v->type,
                               (uint64_t)(v->short_types ? v->n - 1 : v->n)));
    if (!strcmp(v->model ? v->model : "", "llama"))
        TU_OK(clf_gguf_set_arr(w, "tokenizer.ggml.scores", CLF_GGUF_FLOAT32, v->score, (uint64_t)v->n));
    if (v->with_merges && v->model && !strcmp(v->model, "gpt2"))
        TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.merges", (const char *const *)v->merge, (uint64_t)v->n_merges));
    if (v->bos >= 0) TU_OK(clf_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos));
    if (v->eos >= 0) TU_OK(clf_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos));
    if (v->add_bos >= 0) TU_OK(clf_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos));
    if (v->add_eos >= 0) TU_OK(clf_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos));
    if (v->add_space_prefix >= 0)
        TU_OK(clf_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix));
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_status st = clf_tokenizer_load(g, t);
    clf_gguf_close(g); /* the tokenizer keeps its own copy */
    unlink(path);
    return st;
}

static int32_t *tokenize(const clf_tokenizer *t, const char *text, int add_special, int special, int *n) {
    int32_t *ids;
    TU_OK(clf_tokenize(t, text, strlen(text), add_special, special, &ids, n));
    return ids;
}

static void assert_round_trip(const clf_tokenizer *t, const int32_t *ids, int n, int flags, const char *want,
                              size_t want_len) {
    char *out;
    size_t len;
    TU_OK(clf_detokenize(t, ids, n, flags, &out, &len));
    if (len != want_len || memcmp(out, want, len) != 0) fail_msg("detokenized '%s', want '%s'", out, want);
    free(out);
}

static void assert_ids(const int32_t *got, int n_got, const int32_t *want, int n_want, const char *text) {
    if (n_got == n_want && !memcmp(got, want, (size_t)n_got * sizeof *got)) return;
    fprintf(stderr, "text '%s'\n  want:", text);
    for (int i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n  got :");
    for (int i = 0; i < n_got; i++) fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n");
    fail_msg("token ids differ from the reference");
}

static size_t put_utf8(unsigned cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6); /* GPT-2's code points are all below 0x800 */
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

/* GPT-2's bytes_to_unicode(), written as in its Python original. */
static void gpt2_byte_chars(char chars[256][4]) {
    unsigned cp[256];
    int printable[256] = {0}, n = 0;
    for (int b = '!'; b <= '~'; b++) printable[b] = 1;
    for (int b = 0xa1; b <= 0xac; b++) printable[b] = 1;
    for (int b = 0xae; b <= 0xff; b++) printable[b] = 1;
    for (int b = 0; b < 256; b++) cp[b] = printable[b] ? (unsigned)b : 256u + (unsigned)n++;
    for (int b = 0; b < 256; b++) chars[b][put_utf8(cp[b], chars[b])] = 0;
}

/* ---- BPE against a naive reference ----------------------------------------- */

/* Joins symbol i and i + 1 of n; returns n - 1. */
static int merge_at(char (*sym)[64], int n, int i) {
    size_t la = strlen(sym[i]), lb = strlen(sym[i + 1]);
    assert_true(la + lb < sizeof sym[0]);
    memcpy(sym[i] + la, sym[i + 1], lb + 1);
    memmove(sym[i + 1], sym[i + 2], sizeof sym[0] * (size_t)(n - i - 2));
    return n - 1;
}

/* A random merge table over "abcde": each merge joins two existing tokens. */
static void random_bpe_vocab(vocab *v, uint64_t *s) {
    vocab_init(v, "gpt2", "gpt2");
    char bytes[256][4];
    gpt2_byte_chars(bytes);
    for (int b = 0; b < 256; b++) add_token(v, bytes[b], 1, 0);
    int pool[MAX_TOK], np = 0;
    for (const char *c = "abcde"; *c; c++) pool[np++] = find_token(v, (char[]){*c, 0});
    while (v->n_merges < 120) {
        uint64_t from = tu_next(s) % 2 ? 5 : (uint64_t)np; /* half of them letter pairs, so merges apply often */
        const char *a = v->tok[pool[tu_next(s) % from]], *b = v->tok[pool[tu_next(s) % from]];
        char ab[64], m[64];
        if (strlen(a) + strlen(b) > 12) continue;
        snprintf(ab, sizeof ab, "%s%s", a, b);
        if (find_token(v, ab) >= 0) continue;
        snprintf(m, sizeof m, "%s %s", a, b);
        v->merge[v->n_merges++] = strdup(m);
        pool[np++] = add_token(v, ab, 1, 0);
    }
}

/* Merge the adjacent pair of lowest rank (leftmost on a tie) until none has
 * a rank; then look every symbol up. O(n^2 * merges), plainly. */
static int naive_bpe(const vocab *v, const char *text, int32_t *out) {
    char sym[256][64];
    int n = 0;
    for (const char *c = text; *c; c++) snprintf(sym[n++], 64, "%c", *c);
    for (;;) {
        int best = -1, best_rank = 0;
        for (int i = 0; i + 1 < n; i++) {
            char m[130];
            snprintf(m, sizeof m, "%.63s %.63s", sym[i], sym[i + 1]);
            for (int r = 0; r < v->n_merges; r++)
                if (!strcmp(v->merge[r], m) && (best < 0 || r < best_rank)) {
                    best = i;
                    best_rank = r;
                    break;
                }
        }
        if (best < 0) break;
        n = merge_at(sym, n, best);
    }
    for (int i = 0; i < n; i++) out[i] = find_token(v, sym[i]);
    return n;
}

static void test_bpe_matches_naive_merging(void **state) {
    (void)state;
    uint64_t s = tu_seed() + 101;
    for (int round = 0; round < 4; round++) {
        vocab v;
        random_bpe_vocab(&v, &s);
        clf_tokenizer *t;
        TU_OK(vocab_load(&v, &t));
        int n_chars = 0, n_ids = 0;
        for (int k = 0; k < 200; k++) {
            char text[128];
            int len = 1 + (int)(tu_next(&s) % 90); /* one pre-token: letters only */
            for (int i = 0; i < len; i++) text[i] = "abcde"[tu_next(&s) % 5];
            text[len] = 0;
            int32_t want[128];
            int n_want = naive_bpe(&v, text, want), n;
            int32_t *ids = tokenize(t, text, 0, 0, &n);
            assert_ids(ids, n, want, n_want, text);
            assert_round_trip(t, ids, n, 0, text, strlen(text));
            n_chars += len;
            n_ids += n;
            free(ids);
        }
        assert_true(3 * n_ids < 2 * n_chars); /* the random merges do apply */
        clf_tokenizer_free(t);
        vocab_free(&v);
    }
}

/* ---- SentencePiece against a naive reference -------------------------------- */

#define SP "\xe2\x96\x81" /* U+2581 */

static void spm_base_vocab(vocab *v) {
    vocab_init(v, "llama", NULL);
    add_token(v, "<unk>", 2, 0);
    add_token(v, "<s>", 3, 0);
    add_token(v, "</s>", 3, 0);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        add_token(v, hex, 6, 0);
    }
}

/* Pieces over "abcde" and U+2581 with random scores. */
static void random_spm_vocab(vocab *v, uint64_t *s) {
    spm_base_vocab(v);
    const char *units[] = {SP, "a", "b", "c", "d", "e"};
    for (int i = 0; i < 6; i++) add_token(v, units[i], 1, -10.0f - tu_uniform(s, 0, 5));
    while (v->n < 259 + 6 + 150) {
        char p[64] = "";
        int parts = 2 + (int)(tu_next(s) % 4);
        for (int i = 0; i < parts; i++) strcat(p, units[tu_next(s) % 6]);
        if (find_token(v, p) < 0) add_token(v, p, 1, -tu_uniform(s, 0, 10));
    }
}

/* Merge the adjacent pair that forms the best-scoring token (leftmost on a
 * tie) until no pair forms one; unknown symbols become byte tokens. */
static int naive_spm(const vocab *v, const char *text, int32_t *out) {
    char esc[1024] = SP, sym[512][64];
    for (const char *c = text; *c; c++) strncat(esc, *c == ' ' ? SP : (char[]){*c, 0}, sizeof esc - strlen(esc) - 1);
    int n = 0;
    for (const unsigned char *c = (const unsigned char *)esc; *c;) {
        int l = *c >= 0xf0 ? 4 : *c >= 0xe0 ? 3 : *c >= 0xc0 ? 2 : 1;
        snprintf(sym[n++], 64, "%.*s", l, (const char *)c);
        c += l;
    }
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < n; i++) {
            char m[128];
            snprintf(m, sizeof m, "%.63s%.63s", sym[i], sym[i + 1]);
            int id = find_token(v, m);
            if (id >= 0 && (best < 0 || v->score[id] > best_score)) {
                best = i;
                best_score = v->score[id];
            }
        }
        if (best < 0) break;
        n = merge_at(sym, n, best);
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        int id = find_token(v, sym[i]);
        if (id >= 0) {
            out[k++] = id;
            continue;
        }
        for (const unsigned char *c = (const unsigned char *)sym[i]; *c; c++) out[k++] = 3 + *c; /* <0xNN> */
    }
    return k;
}

static void test_spm_matches_naive_merging(void **state) {
    (void)state;
    uint64_t s = tu_seed() + 202;
    static const char *chars[] = {"a", "b", "c", "d", "e", " ", " ", "z", "\xc3\xa9"}; /* z, é: byte fallback */
    for (int round = 0; round < 4; round++) {
        vocab v;
        random_spm_vocab(&v, &s);
        clf_tokenizer *t;
        TU_OK(vocab_load(&v, &t));
        int n_chars = 0, n_ids = 0;
        for (int k = 0; k < 200; k++) {
            char text[256] = "";
            int len = 1 + (int)(tu_next(&s) % 60);
            for (int i = 0; i < len; i++) strcat(text, chars[tu_next(&s) % 9]);
            int32_t want[512];
            int n_want = naive_spm(&v, text, want), n;
            int32_t *ids = tokenize(t, text, 0, 0, &n);
            assert_ids(ids, n, want, n_want, text);
            assert_round_trip(t, ids, n, CLF_DETOK_LSTRIP, text, strlen(text));
            n_chars += len;
            n_ids += n;
            free(ids);
        }
        assert_true(n_ids < n_chars); /* pieces merge, bytes fall back */
        clf_tokenizer_free(t);
        vocab_free(&v);
    }
}

/* ---- streaming, specials, BOS/EOS, invalid UTF-8 ----------------------------- */

static void push_expect(clf_detok *d, int32_t id, const char *want, size_t want_len) {
    char buf[64];
    size_t n;
    TU_OK(clf_detok_push(d, id, buf, sizeof buf, &n));
    if (n != want_len || memcmp(buf, want, n) != 0) fail_msg("token %d gave %zu bytes, want %zu", id, n, want_len);
}

static void test_streaming_holds_split_utf8(void **state) {
    (void)state;
    vocab v;
    spm_base_vocab(&v);
    int a = add_token(&v, "a", 1, -1), spa = add_token(&v, SP "a", 1, -1);
    clf_tokenizer *t;
    TU_OK(vocab_load(&v, &t));
    clf_detok d;
    char buf[64];

    clf_detok_init(&d, t, 0); /* U+1F600 as four byte tokens: nothing until the last */
    push_expect(&d, 3 + 0xf0, "", 0);
    push_expect(&d, 3 + 0x9f, "", 0);
    push_expect(&d, 3 + 0x98, "", 0);
    push_expect(&d, 3 + 0x80, "\xf0\x9f\x98\x80", 4);
    push_expect(&d, a, "a", 1);
    push_expect(&d, 3 + 0xe2, "", 0); /* an unfinished sequence at the end is flushed raw */
    assert_int_equal(clf_detok_flush(&d, buf, sizeof buf), 1);
    assert_int_equal((unsigned char)buf[0], 0xe2);
    assert_int_equal(clf_detok_flush(&d, buf, sizeof buf), 0);
    push_expect(&d, 3 + 0x80, "\x80", 1);        /* a stray continuation byte is let through */
    push_expect(&d, 3 + 0xc3, "", 0);
    push_expect(&d, a, "\xc3" "a", 2);           /* a broken sequence too, once it is broken */
    push_expect(&d, 3 + 0xc3, "", 0);
    push_expect(&d, 3 + 0xa9, "\xc3\xa9", 2);
    push_expect(&d, 2, "", 0);                   /* </s> is hidden by default */
    size_t n;
    assert_int_equal(clf_detok_push(&d, clf_tokenizer_n_vocab(t), buf, sizeof buf, &n), CLF_ERR_ARG);
    assert_int_equal(clf_detok_push(&d, -1, buf, sizeof buf, &n), CLF_ERR_ARG);

    clf_detok_init(&d, t, CLF_DETOK_SPECIAL | CLF_DETOK_LSTRIP);
    push_expect(&d, spa, "a", 1); /* the first piece loses the SentencePiece space */
    push_expect(&d, spa, " a", 2);
    push_expect(&d, 2, "</s>", 4);
    push_expect(&d, 3 + 0xf0, "", 0);
    assert_int_equal(clf_detok_push(&d, spa, buf, 2, &n), CLF_ERR_ARG); /* too small: nothing consumed */
    assert_true(clf_tokenizer_max_piece(t) >= 4 + 4);
    TU_OK(clf_detok_push(&d, spa, buf, clf_tokenizer_max_piece(t), &n));
    assert_int_equal(n, 3); /* the held byte, then " a" */
    assert_memory_equal(buf, "\xf0 a", 3);
    clf_tokenizer_free(t);
    vocab_free(&v);
}

static int count_id(const int32_t *ids, int n, int32_t id) {
    int c = 0;
    for (int i = 0; i < n; i++) c += ids[i] == id;
    return c;
}

static void test_special_tokens(void **state) {
    (void)state;
    uint64_t s = tu_seed() + 303;
    vocab v;
    random_bpe_vocab(&v, &s);
    int start = add_token(&v, "<|im_start|>", 3, 0), end = add_token(&v, "<|im_end|>", 3, 0);
    int user = add_token(&v, "<us>", 4, 0), prefix = add_token(&v, "<|im", 4, 0);
    int eos = add_token(&v, "</eos>", 3, 0);
    v.eos = eos;
    clf_tokenizer *t;
    TU_OK(vocab_load(&v, &t));
    const char *text = "ab<|im_start|>cd<us>e<|im_end|>";
    int n;
    int32_t *ids = tokenize(t, text, 0, 1, &n); /* parsed: each special token is one id */
    assert_int_equal(count_id(ids, n, start), 1);
    assert_int_equal(count_id(ids, n, end), 1);
    assert_int_equal(count_id(ids, n, user), 1);
    assert_int_equal(count_id(ids, n, prefix), 0); /* the longer token wins */
    assert_int_equal(ids[n - 1], end);
    assert_round_trip(t, ids, n, CLF_DETOK_SPECIAL, text, strlen(text));
    assert_round_trip(t, ids, n, 0, "abcd<us>e", 9); /* control tokens hidden, user-defined shown */
    free(ids);
    ids = tokenize(t, text, 0, 0, &n); /* not parsed: control text is plain text, user-defined still split */
    assert_int_equal(count_id(ids, n, start), 0);
    assert_int_equal(count_id(ids, n, end), 0);
    assert_int_equal(count_id(ids, n, user), 1);
    assert_int_equal(count_id(ids, n, prefix), 2);
    assert_round_trip(t, ids, n, 0, text, strlen(text));
    free(ids);

    assert_true(clf_token_is_eog(t, end));
    assert_true(clf_token_is_eog(t, eos));
    assert_false(clf_token_is_eog(t, start));
    assert_false(clf_token_is_eog(t, -1));
    assert_int_equal(clf_tokenizer_find(t, "<|im_start|>"), start);
    assert_int_equal(clf_tokenizer_find(t, "no such token"), -1);
    assert_int_equal(clf_token_type(t, user), CLF_TOKEN_USER_DEFINED);
    assert_string_equal(clf_token_text(t, start), "<|im_start|>");
    assert_null(clf_token_text(t, clf_tokenizer_n_vocab(t)));
    assert_false(clf_tokenizer_add_bos(t)); /* gpt2 pre-tokenizer: no BOS unless the file asks */
    assert_null(clf_tokenizer_chat_template(t));
    ids = tokenize(t, "", 1, 1, &n);
    assert_int_equal(n, 0);
    assert_null(ids);
    clf_tokenizer_free(t);
    vocab_free(&v);
}

static void test_bos_eos(void **state) {
    (void)state;
    vocab v;
    spm_base_vocab(&v);
    add_token(&v, SP "a", 1, -1);
    clf_tokenizer *t;
    TU_OK(vocab_load(&v, &t)); /* SentencePiece: BOS 1 by default, added */
    int n;
    int32_t *ids = tokenize(t, "a", 1, 0, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 259);
    free(ids);
    ids = tokenize(t, "", 1, 0, &n);
    assert_int_equal(n, 1); /* the empty text is just BOS */
    free(ids);
    ids = tokenize(t, "a", 0, 0, &n);
    assert_int_equal(n, 1);
    free(ids);
    clf_tokenizer_free(t);

    v.add_bos = 0;
    v.add_eos = 1;
    TU_OK(vocab_load(&v, &t));
    ids = tokenize(t, "a", 1, 0, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 259);
    assert_int_equal(ids[1], 2);
    assert_int_equal(clf_tokenizer_eos(t), 2);
    assert_true(clf_token_is_eog(t, 2));
    free(ids);
    clf_tokenizer_free(t);
    vocab_free(&v);
}

/* tokenizer.ggml.add_space_prefix false (Gemma): no U+2581 before the
 * text or after a special token, and detokenization drops no space. */
static void test_no_space_prefix(void **state) {
    (void)state;
    vocab v;
    spm_base_vocab(&v);
    int a = add_token(&v, "a", 1, -1), sp_a = add_token(&v, SP "a", 1, -1), sp = add_token(&v, SP, 1, -2);
    int turn = add_token(&v, "<start_of_turn>", 3, 0);
    for (int prefix = 1; prefix >= 0; prefix--) {
        v.add_space_prefix = prefix;
        clf_tokenizer *t;
        TU_OK(vocab_load(&v, &t));
        int n;
        int32_t *ids = tokenize(t, "a a<start_of_turn>a", 0, 1, &n);
        int32_t with[] = {sp_a, sp_a, turn, sp_a}, without[] = {a, sp_a, turn, a};
        assert_ids(ids, n, prefix ? with : without, 4, prefix ? "space prefix" : "no space prefix");
        free(ids);
        ids = tokenize(t, " a", 0, 0, &n);
        int32_t with2[] = {sp, sp_a}, without2[] = {sp_a};
        assert_ids(ids, n, prefix ? with2 : without2, prefix ? 2 : 1, "leading space");
        assert_round_trip(t, ids, n, CLF_DETOK_LSTRIP, " a", 2); /* the prefix, and only it, is dropped */
        free(ids);
        clf_tokenizer_free(t);
    }
    vocab_free(&v);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    uint64_t s = tu_seed() + 404;
    vocab v;
    random_bpe_vocab(&v, &s);
    clf_tokenizer *t;
    TU_OK(vocab_load(&v, &t));
    int n, m;
    /* BPE: each byte that starts no valid sequence reads as U+FFFD */
    int32_t *a = tokenize(t, "a\xff\xc3(\x80\x80\x80" "b\xe2\x82", 0, 0, &n);
    int32_t *b = tokenize(t, "a\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd",
                          0, 0, &m);
    assert_ids(a, n, b, m, "invalid UTF-8");
    free(a);
    free(b);
    clf_tokenizer_free(t);
    vocab_free(&v);

    /* SentencePiece: bytes that are no character become byte tokens, kept exactly */
    spm_base_vocab(&v);
    add_token(&v, SP "a", 1, -1);
    TU_OK(vocab_load(&v, &t));
    const char *text = "a\xff\xc3(b\xe2\x82";
    a = tokenize(t, text, 0, 0, &n);
    assert_round_trip(t, a, n, CLF_DETOK_LSTRIP, text, strlen(text));
    free(a);
    clf_tokenizer_free(t);
    vocab_free(&v);
}

/* ---- malformed vocabularies ---------------------------------------------------- */

static void expect_format_error(vocab *v, const char *needle) {
    clf_tokenizer *t = (clf_tokenizer *)v;
    assert_int_equal(vocab_load(v, &t), CLF_ERR_FORMAT);
    assert_null(t);
    if (!strstr(clf_last_error(), needle)) fail_msg("message '%s' lacks '%s'", clf_last_error(), needle);
}

static void test_malformed_vocabularies(void **state) {
    (void)state;
    uint64_t s = tu_seed() + 505;
    vocab v;
    random_bpe_vocab(&v, &s);
    v.model = NULL;
    expect_format_error(&v, "tokenizer.ggml.model");
    v.model = "bert";
    expect_format_error(&v, "bert");
    v.model = "gpt2";
    v.pre = "no-such-pre";
    expect_format_error(&v, "no-such-pre");
    v.pre = "gpt2";
    v.with_merges = 0;
    expect_format_error(&v, "tokenizer.ggml.merges");
    v.with_merges = 1;
    v.short_types = 1;
    expect_format_error(&v, "token_type");
    v.short_types = 0;
    free(v.tok[300]);
    v.tok[300] = strdup(v.tok[299]);
    expect_format_error(&v, "duplicate");
    vocab_free(&v);

    clf_tokenizer *t; /* no tokens at all */
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "tokenizer.ggml.model", "gpt2"));
    char path[512];
    snprintf(path, sizeof path, "/tmp/clf_tok_empty_%d.gguf", (int)getpid());
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    assert_int_equal(clf_tokenizer_load(g, &t), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "tokenizer.ggml.tokens"));
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_matches_naive_merging),
        cmocka_unit_test(test_spm_matches_naive_merging),
        cmocka_unit_test(test_streaming_holds_split_utf8),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_bos_eos),
        cmocka_unit_test(test_no_space_prefix),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_malformed_vocabularies),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

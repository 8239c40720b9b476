/* Tokenizers against llama.cpp: its vocab-only test files (four
 * vocabularies: GPT-2, StarCoder, Llama SPM, Phi-3) and ids recorded with
 * llama-cpp-python on the default model's vocabulary (tests/peer/
 * record_tokens.py); round-trip detokenization; streaming of split UTF-8;
 * special tokens; BPE and SPM merging against a naive reference on random
 * vocabularies; malformed vocabularies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "chat.h"
#include "gguf_write.h"
#include "model_path.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

/* ---- helpers -------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* llama.cpp's vocabulary-only files and their vectors, in the repository
 * (tests/data/vocab/README.md); tests run from its root. Missing is a
 * failure, not a skip: they are part of the checkout. */
#define VOCAB_DIR "tests/data/vocab"

static void vocab_dir(char *buf, size_t n) {
    snprintf(buf, n, VOCAB_DIR);
    if (access(buf, R_OK) != 0) fail_msg("cannot read %s (tests run from the repository root)", VOCAB_DIR);
}

static clf_tokenizer *load_tokenizer(const char *path, clf_gguf **g) {
    clf_tokenizer *t = NULL;
    TU_OK(clf_gguf_open(path, g));
    TU_OK(clf_tokenizer_load(*g, &t));
    return t;
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Tokenizes `text`, compares with `want`, and checks that detokenizing
 * gives back `back` (NULL: skip). Returns 1 on a match. */
static int check_case(const clf_tokenizer *t, const char *text, size_t len, int special, const int32_t *want,
                      int n_want, const char *back, size_t back_len, int detok_flags) {
    int32_t *ids;
    int n;
    TU_OK(clf_tokenize(t, text, len, 0, special, &ids, &n));
    int ok = n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "mismatch on %zu bytes (special %d): '%.*s'\n", len, special, (int)len, text);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    if (ok && back) {
        char *out;
        size_t out_len;
        TU_OK(clf_detokenize(t, ids, n, detok_flags, &out, &out_len));
        if (out_len != back_len || memcmp(out, back, back_len) != 0) {
            fprintf(stderr, "round trip of '%.*s' gave '%s'\n", (int)back_len, back, out);
            ok = 0;
        }
        free(out);
    }
    free(ids);
    return ok;
}

static int parse_ids(const char *line, int32_t *ids, int cap) {
    int n = 0;
    char *end;
    for (const char *p = line; n < cap;) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

/* ---- llama.cpp's vocab test files -------------------------------------- */

static void run_vocab_file(const char *name) {
    char dir[1024], path[1200];
    vocab_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    clf_gguf *g;
    clf_tokenizer *t = load_tokenizer(path, &g);
    size_t inp_len, out_len;
    snprintf(path, sizeof path, "%s/%s.inp", dir, name);
    char *inp = read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s/%s.out", dir, name);
    char *out = read_file(path, &out_len);
    assert_non_null(inp);
    assert_non_null(out);

    /* texts are separated by "\n__ggml_vocab_test__\n"; the .out has one
     * line of ids per text */
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    int spm = !strcmp(clf_tokenizer_model(t), "llama");
    char *text = inp, *line = out;
    int n_cases = 0, n_bad = 0;
    int32_t *want = malloc(sizeof(int32_t) * 4096);
    for (char *sep; (sep = strstr(text, SEP)) != NULL; text = sep + sizeof SEP - 1) {
        char *eol = strchr(line, '\n');
        assert_non_null(eol);
        *eol = 0;
        int n_want = parse_ids(line, want, 4096);
        line = eol + 1;
        size_t len = (size_t)(sep - text);
        /* SentencePiece prefixes a space that detokenization drops again */
        if (!check_case(t, text, len, 0, want, n_want, text, len, spm ? CLF_DETOK_LSTRIP : 0)) n_bad++;
        n_cases++;
    }
    fprintf(stderr, "[ INFO ] %s: %d texts, %d mismatches\n", name, n_cases, n_bad);
    assert_int_equal(n_cases, 46);
    assert_int_equal(n_bad, 0);
    free(want);
    free(inp);
    free(out);
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

static void test_vocab_gpt2(void **state) {
    (void)state;
    run_vocab_file("ggml-vocab-gpt-2.gguf");
}

static void test_vocab_starcoder(void **state) {
    (void)state;
    run_vocab_file("ggml-vocab-starcoder.gguf");
}

static void test_vocab_llama_spm(void **state) {
    (void)state;
    run_vocab_file("ggml-vocab-llama-spm.gguf");
}

static void test_vocab_phi3(void **state) {
    (void)state;
    run_vocab_file("ggml-vocab-phi-3.gguf");
}

/* ---- the default model, against llama-cpp-python's record ---------------- */

static int hex_decode(const char *hex, size_t n, char *out) {
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        if (sscanf(hex + i, "%2x", &v) != 1) return -1;
        out[i / 2] = (char)v;
    }
    return (int)(n / 2);
}

/* A catalogue model's path (NULL: the default), or a skip note when the
 * file is not in the cache (`make test` fetches them). */
static void catalogue_model_path(const char *name, char *path, size_t n) {
    if (clf_model_path(name, path, n) == CLF_OK) return;
    TU_SKIP("%s (run `make model%s%s`)", clf_last_error(), name ? " MODEL=" : "", name ? name : "");
}

static void default_model_path(char *path, size_t n) { catalogue_model_path(NULL, path, n); }

static clf_tokenizer *default_model_tokenizer(clf_gguf **g) {
    char path[4096];
    default_model_path(path, sizeof path);
    return load_tokenizer(path, g);
}

/* Checks every case of a record written by tests/peer/record_tokens.py:
 * lines "[PRE ]SPECIAL HEX | IDS". With pre NULL the lines carry no PRE;
 * else only the lines of that pre-tokenizer are run. Returns the count.
 * Detokenization must give the text back; for SentencePiece (which adds a
 * space, and for Phi-3 drops whitespace, around special tokens) only where
 * no special token was parsed. */
static int run_record(const clf_tokenizer *t, const char *file, const char *pre, int *n_special) {
    int spm = !strcmp(clf_tokenizer_model(t), "llama");
    size_t len, pre_len = pre ? strlen(pre) : 0;
    char *data = read_file(file, &len);
    if (!data) fail_msg("cannot read %s (tests run from the repository root)", file);
    int n_cases = 0, n_bad = 0;
    int32_t *want = malloc(sizeof(int32_t) * 8192);
    char *text = malloc(len);
    *n_special = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        if (pre) {
            if (strncmp(line, pre, pre_len) != 0 || line[pre_len] != ' ') continue;
            line += pre_len + 1;
        }
        char *bar = strstr(line, " |");
        assert_non_null(bar);
        assert_true(line[0] == '0' || line[0] == '1');
        int special = line[0] == '1';
        const char *hex = line + 2;
        int n_text = hex[0] == '-' ? 0 : hex_decode(hex, (size_t)(bar - hex), text);
        assert_true(n_text >= 0);
        int n_want = parse_ids(bar + 2, want, 8192);
        /* with special parsing, control tokens come back only when rendered */
        const char *back = spm && special ? NULL : text;
        if (!check_case(t, text, (size_t)n_text, special, want, n_want, back, (size_t)n_text,
                        special ? CLF_DETOK_SPECIAL : spm ? CLF_DETOK_LSTRIP : 0))
            n_bad++;
        n_cases++;
        *n_special += special;
    }
    fprintf(stderr, "[ INFO ] %s%s%s: %d texts (%d with special tokens), %d mismatches\n", file, pre ? " " : "",
            pre ? pre : "", n_cases, *n_special, n_bad);
    assert_int_equal(n_bad, 0);
    free(text);
    free(want);
    free(data);
    return n_cases;
}

static void test_recorded_smollm2(void **state) {
    (void)state;
    clf_gguf *g;
    clf_tokenizer *t = default_model_tokenizer(&g);
    assert_string_equal(clf_tokenizer_pre(t), "smollm");
    int n_special, n_cases = run_record(t, "tests/data/tokens_smollm2.txt", NULL, &n_special);
    assert_true(n_cases >= 40 && n_special >= 5);

    /* the chat model's end-of-turn and its template */
    int32_t im_end = clf_tokenizer_find(t, "<|im_end|>");
    assert_true(im_end >= 0 && clf_token_is_eog(t, im_end));
    assert_true(clf_token_is_eog(t, clf_tokenizer_eos(t)));
    assert_false(clf_token_is_eog(t, clf_tokenizer_find(t, "Hello")));
    assert_non_null(clf_tokenizer_chat_template(t));
    assert_non_null(strstr(clf_tokenizer_chat_template(t), "<|im_start|>"));
    assert_false(clf_tokenizer_add_bos(t));
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

/* SentencePiece with special tokens: Phi-3's, around which llama.cpp adds
 * the space prefix and drops whitespace. */
static void test_recorded_phi3(void **state) {
    (void)state;
    char dir[1024], path[1200];
    vocab_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ggml-vocab-phi-3.gguf", dir);
    clf_gguf *g;
    clf_tokenizer *t = load_tokenizer(path, &g);
    int n_special, n_cases = run_record(t, "tests/data/tokens_phi3.txt", NULL, &n_special);
    assert_true(n_cases >= 40 && n_special >= 5);
    assert_true(clf_token_is_eog(t, clf_tokenizer_find(t, "<|end|>")));
    assert_true(clf_tokenizer_add_bos(t));
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

/* gpt-oss's Harmony ends every message with <|end|> (its analysis
 * channel's too) and generation at <|return|> or <|call|>: Phi-3's
 * vocabulary (<|end|> an end of generation) with two of its placeholders
 * renamed so, as llama.cpp's o200k_harmony rule reads it. */
static void test_harmony_eog(void **state) {
    (void)state;
    char dir[1024], path[1200], tmp[512];
    vocab_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ggml-vocab-phi-3.gguf", dir);
    snprintf(tmp, sizeof tmp, "/tmp/clf_harmony_%d.gguf", (int)getpid());
    clf_gguf *g;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) TU_OK(clf_gguf_set_kv(w, clf_gguf_kv_at(g, i)));
    const clf_gguf_str *items;
    uint64_t n;
    TU_OK(clf_gguf_get_strs(g, "tokenizer.ggml.tokens", &items, &n));
    char **toks = calloc(n, sizeof *toks);
    int renamed = 0;
    for (uint64_t i = 0; i < n; i++) {
        toks[i] = strndup(items[i].ptr, items[i].len);
        if (!strcmp(toks[i], "<|placeholder1|>") || !strcmp(toks[i], "<|placeholder2|>")) {
            free(toks[i]);
            toks[i] = strdup(renamed++ ? "<|call|>" : "<|return|>");
        }
    }
    assert_int_equal(renamed, 2);
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", (const char *const *)toks, n));
    TU_OK(clf_gguf_write(w, tmp));
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
    for (uint64_t i = 0; i < n; i++) free(toks[i]);
    free(toks);
    clf_tokenizer *t = load_tokenizer(tmp, &g);
    assert_false(clf_token_is_eog(t, clf_tokenizer_find(t, "<|end|>")));
    assert_true(clf_token_is_eog(t, clf_tokenizer_find(t, "<|return|>")));
    assert_true(clf_token_is_eog(t, clf_tokenizer_find(t, "<|call|>")));
    clf_tokenizer_free(t);
    clf_gguf_close(g);
    unlink(tmp);
}

/* The GPT-2 vocabulary with tokenizer.ggml.pre replaced, through a copy
 * of the file made with the GGUF writer. */
static clf_tokenizer *load_with_pre(const char *path, const char *pre) {
    char tmp[512];
    const char *dir = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/clf_pre_%d_%s.gguf", dir && *dir ? dir : "/tmp", (int)getpid(), pre);
    clf_gguf *g;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) TU_OK(clf_gguf_set_kv(w, clf_gguf_kv_at(g, i)));
    TU_OK(clf_gguf_set_str(w, "tokenizer.ggml.pre", pre));
    TU_OK(clf_gguf_write(w, tmp));
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
    clf_tokenizer *t = load_tokenizer(tmp, &g);
    clf_gguf_close(g);
    unlink(tmp);
    return t;
}

/* Each pre-tokenizer's regexes (Llama 3, Qwen2, default, ...) on the GPT-2
 * vocabulary, against llama.cpp run with the same override. */
static void test_recorded_pretokenizers(void **state) {
    (void)state;
    static const char *const PRES[] = {"gpt-2", "smollm", "llama-bpe", "dbrx", "qwen2", "default"};
    char dir[1024], path[1200];
    vocab_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", dir);
    for (size_t i = 0; i < sizeof PRES / sizeof PRES[0]; i++) {
        clf_tokenizer *t = load_with_pre(path, PRES[i]);
        assert_string_equal(clf_tokenizer_pre(t), PRES[i]);
        int n_special;
        assert_true(run_record(t, "tests/data/tokens_pretok.txt", PRES[i], &n_special) >= 40);
        clf_tokenizer_free(t);
    }
}

/* Long inputs: a megabyte of mixed text, and single pre-tokens of 100k
 * bytes (runs of spaces, letters, digits, newlines, mixed whitespace), which
 * stress the regex matcher and the merge heap; each must come back exactly. */
static void long_inputs(const clf_tokenizer *t, const char *what, int detok_flags) {
    static const char BASE[] = "The quick brown fox, 12,345.67 times: \"don't\" 🚀 Привет 我想 \n\t  def f(x):\n        return x\n";
    enum { BIG = 1 << 20, RUN = 100000 };
    char *text = malloc(BIG + 1);
    size_t n = 0;
    while (n + sizeof BASE < BIG) {
        memcpy(text + n, BASE, sizeof BASE - 1);
        n += sizeof BASE - 1;
    }
    int32_t *ids;
    int n_ids;
    clock_t t0 = clock();
    TU_OK(clf_tokenize(t, text, n, 0, 0, &ids, &n_ids));
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    fprintf(stderr, "[ INFO ] %s: %zu bytes -> %d tokens in %.3f s (%.1f MB/s)\n", what, n, n_ids, s, n / s / 1e6);
    char *back;
    size_t back_len;
    TU_OK(clf_detokenize(t, ids, n_ids, detok_flags, &back, &back_len));
    assert_int_equal(back_len, n);
    assert_memory_equal(back, text, n);
    free(back);
    free(ids);

    static const char *const FILL[] = {" ", "a", "7", "\n", " \n", "\r\n\t "};
    for (size_t k = 0; k < sizeof FILL / sizeof FILL[0]; k++) {
        size_t fl = strlen(FILL[k]);
        for (n = 0; n + fl <= RUN; n += fl) memcpy(text + n, FILL[k], fl);
        TU_OK(clf_tokenize(t, text, n, 0, 0, &ids, &n_ids));
        assert_true(n_ids > 0 && (size_t)n_ids <= n + 1); /* + the SentencePiece space */
        TU_OK(clf_detokenize(t, ids, n_ids, detok_flags, &back, &back_len));
        assert_int_equal(back_len, n);
        assert_memory_equal(back, text, n);
        free(back);
        free(ids);
    }
    free(text);
}

static void test_long_inputs(void **state) {
    (void)state;
    char dir[1024], path[1200];
    vocab_dir(dir, sizeof dir);
    { /* the regexes with the most backtracking */
        snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", dir);
        static const char *const PRES[] = {"llama-bpe", "qwen2", "default"};
        for (int i = 0; i < 3; i++) {
            clf_tokenizer *t = load_with_pre(path, PRES[i]);
            long_inputs(t, PRES[i], 0);
            clf_tokenizer_free(t);
        }
        snprintf(path, sizeof path, "%s/ggml-vocab-llama-spm.gguf", dir); /* SentencePiece: one fragment */
        clf_gguf *g;
        clf_tokenizer *t = load_tokenizer(path, &g);
        long_inputs(t, "llama-spm", CLF_DETOK_LSTRIP);
        clf_tokenizer_free(t);
        clf_gguf_close(g);
    }
    clf_gguf *g;
    clf_tokenizer *t = default_model_tokenizer(&g);
    long_inputs(t, "smollm", 0);
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

/* Gemma 3's SentencePiece vocabulary (262,144 tokens, byte fallback, no
 * space prefix, user-defined runs of spaces, tabs and newlines, HTML tags)
 * from the real file, fetched into the cache by `make test`. */
static void test_recorded_gemma3(void **state) {
    (void)state;
    char path[4096];
    catalogue_model_path("gemma3-270m", path, sizeof path);
    clf_gguf *g;
    clf_tokenizer *t = NULL;
    clf_status st = clf_gguf_open(path, &g);
    if (st == CLF_ERR_FORMAT && strstr(clf_last_error(), "unsupported tensor type")) {
        TU_SKIP("%s: this build's GGUF reader lacks the file's weight types", clf_last_error());
    }
    TU_OK(st);
    clock_t t0 = clock();
    TU_OK(clf_tokenizer_load(g, &t));
    fprintf(stderr, "[ INFO ] Gemma 3's vocabulary loaded in %.3f s\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    assert_int_equal(clf_tokenizer_n_vocab(t), 262144);
    assert_string_equal(clf_tokenizer_model(t), "llama");
    assert_true(clf_tokenizer_add_bos(t));
    assert_int_equal(clf_tokenizer_bos(t), 2);
    int n_special, n_cases = run_record(t, "tests/data/tokens_gemma3.txt", NULL, &n_special);
    assert_true(n_cases >= 40 && n_special >= 5);

    /* the end of a turn ends generation; there is no template, the tokens tell the format */
    assert_true(clf_token_is_eog(t, clf_tokenizer_find(t, "<end_of_turn>")));
    assert_true(clf_token_is_eog(t, clf_tokenizer_eos(t)));
    assert_false(clf_token_is_eog(t, clf_tokenizer_find(t, "<start_of_turn>")));
    assert_null(clf_tokenizer_chat_template(t));
    clf_chat c;
    TU_OK(clf_chat_init_model(t, &c));
    assert_int_equal(c.format, CLF_CHAT_GEMMA);
    long_inputs(t, "gemma3", CLF_DETOK_LSTRIP); /* 6,400 special tokens to split out first */
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

/* `clinfer tokenize` prints what the library gives, and fails clearly. */
static int run_cli(const char *args, char *out, size_t cap) {
    const char *bin = getenv("CLINFER_BIN");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "\"%s\" tokenize %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `clinfer tokenize -m PATH` prints what the library's tokenizer gives
 * for the file at PATH, with and without --special. */
static void cli_matches_library(const char *path, const char *text) {
    char args[8192], out[4096], want[4096];
    clf_gguf *g;
    clf_tokenizer *t = load_tokenizer(path, &g);
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        int n;
        TU_OK(clf_tokenize(t, text, strlen(text), 1, special, &ids, &n));
        want[0] = 0;
        for (int i = 0; i < n; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "", ids[i]);
        strcat(want, "\n");
        free(ids);
        snprintf(args, sizeof args, "-m \"%s\" -p \"%s\"%s", path, text, special ? " --special" : "");
        int rc = run_cli(args, out, sizeof out);
        if (rc != 0) fail_msg("clinfer tokenize %s: exit %d: %s", args, rc, out);
        assert_string_equal(out, want);
    }
    clf_tokenizer_free(t);
    clf_gguf_close(g);
}

static void test_cli_tokenize(void **state) {
    (void)state;
    if (!getenv("CLINFER_BIN")) fail_msg("CLINFER_BIN is not set (run through ctest)");
    char path[4096], out[4096];
    /* a vocabulary-only file (no weights): tokenize needs nothing else */
    cli_matches_library(VOCAB_DIR "/ggml-vocab-gpt-2.gguf", "Hello world, 12,345.67 <|endoftext|>x");
    cli_matches_library(VOCAB_DIR "/ggml-vocab-llama-spm.gguf", "Hello world, 12,345.67 </s>x");
    default_model_path(path, sizeof path);
    cli_matches_library(path, "Hello world, 12,345.67 <|im_start|>user");
    assert_int_equal(run_cli("-m /no/such/model.gguf -p x", out, sizeof out), CLF_ERR_IO);
    assert_non_null(strstr(out, "/no/such/model.gguf"));
    assert_int_equal(run_cli("-p", out, sizeof out), CLF_ERR_ARG);
    assert_non_null(strstr(out, "usage"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_gpt2),
        cmocka_unit_test(test_vocab_starcoder),
        cmocka_unit_test(test_vocab_llama_spm),
        cmocka_unit_test(test_vocab_phi3),
        cmocka_unit_test(test_recorded_smollm2),
        cmocka_unit_test(test_recorded_pretokenizers),
        cmocka_unit_test(test_recorded_phi3),
        cmocka_unit_test(test_harmony_eog),
        cmocka_unit_test(test_recorded_gemma3),
        cmocka_unit_test(test_long_inputs),
        cmocka_unit_test(test_cli_tokenize),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

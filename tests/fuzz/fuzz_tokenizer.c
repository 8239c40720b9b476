/* libFuzzer harness for the tokenizers: random bytes as text.
 *
 * Vocabularies (loaded once, in LLVMFuzzerInitialize): the default model's
 * byte-level BPE when it is there ($CLINFER_MODEL, else the model cache;
 * CLINFER_FUZZ_TINY=1 skips it), else a tiny BPE vocabulary written with
 * the GGUF writer; and always a tiny SentencePiece vocabulary.
 *
 * Input: byte 0 picks the vocabulary (bit 0) and add_special (bit 1); the
 * rest is the text. For it, with and without special-token parsing:
 *  - every id is inside the vocabulary;
 *  - clf_detokenize, with each flag combination, equals the text streamed
 *    through clf_detok_push (a buffer of exactly clf_tokenizer_max_piece
 *    bytes) and clf_detok_flush;
 *  - BPE without special parsing gives back valid UTF-8 text exactly (when
 *    the vocabulary has a token for each of its bytes).
 * Then the same bytes read as token ids (some out of range) are streamed
 * through the detokenizer: out-of-range ids are refused, consuming nothing.
 *
 * The regression replay test (tests/test_fuzz_regressions.c) includes this
 * file and feeds tests/fuzz/regressions/tokenizer-* to the same code. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_vocab.h"
#include "gguf.h"
#include "model_path.h"
#include "tokenizer.h"
#include "vocab.h"

#define FT_CHECK(cond)                                                                                \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "fuzz_tokenizer: %s:%d: property failed: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, clf_last_error());                                                         \
            abort();                                                                                  \
        }                                                                                             \
    } while (0)

static clf_tokenizer *ft_vocab[2]; /* [0] BPE (model or tiny), [1] tiny SPM */
/* Whether the BPE vocabulary has a token for each byte: llama.cpp drops the
 * bytes it has none for (SmolLM2 lacks some control characters), so the
 * exact round trip holds only for texts made of covered bytes. */
static unsigned char ft_bpe_byte[256];

static clf_tokenizer *ft_load(const char *path) {
    clf_gguf *g;
    clf_tokenizer *t = NULL;
    if (clf_gguf_open(path, &g) != CLF_OK) return NULL;
    if (clf_tokenizer_load(g, &t) != CLF_OK) t = NULL;
    clf_gguf_close(g); /* the tokenizer keeps its own copy */
    return t;
}

static clf_tokenizer *ft_load_tiny(int spm) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/clinfer-fuzz-vocab-%d-%d.gguf", (int)getpid(), spm);
    clf_tokenizer *t = fz_vocab_write(path, spm) == CLF_OK ? ft_load(path) : NULL;
    unlink(path);
    return t;
}

/* Returns 0 when the vocabularies are ready. */
static int ft_init(void) {
    if (ft_vocab[0]) return 0;
    char path[4096];
    const char *tiny = getenv("CLINFER_FUZZ_TINY");
    if ((!tiny || !*tiny || *tiny == '0') && clf_model_path(NULL, path, sizeof path) == CLF_OK &&
        (ft_vocab[0] = ft_load(path)) != NULL)
        fprintf(stderr, "fuzz_tokenizer: vocabulary of %s (%d tokens)\n", path, clf_tokenizer_n_vocab(ft_vocab[0]));
    if (!ft_vocab[0]) ft_vocab[0] = ft_load_tiny(0);
    ft_vocab[1] = ft_load_tiny(1);
    for (unsigned b = 0; ft_vocab[0] && b < 256; b++) {
        char u[4];
        fz_byte_utf8(b, u);
        ft_bpe_byte[b] = clf_tokenizer_find(ft_vocab[0], u) >= 0;
    }
    if (!ft_vocab[0] || !ft_vocab[1]) {
        fprintf(stderr, "fuzz_tokenizer: cannot build the vocabularies: %s\n", clf_last_error());
        return -1;
    }
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (ft_init() != 0) abort();
    return 0;
}

/* Strict UTF-8 (RFC 3629: no overlongs, surrogates or code points past
 * U+10FFFF). */
static int ft_valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) k = 1, cp = c;
        else if (c >= 0xc2 && c < 0xe0) k = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c < 0xf0) k = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c < 0xf5) k = 4, cp = c & 0x07;
        else return 0;
        if (i + k > n) return 0;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k;
    }
    return 1;
}

/* clf_detokenize == the stream of clf_detok_push + clf_detok_flush. */
static void ft_stream_matches(const clf_tokenizer *t, const int32_t *ids, int n, int flags) {
    char *whole;
    size_t whole_len;
    FT_CHECK(clf_detokenize(t, ids, n, flags, &whole, &whole_len) == CLF_OK);
    FT_CHECK(whole[whole_len] == 0);
    size_t cap = clf_tokenizer_max_piece(t), used = 0;
    char *buf = malloc(cap);
    FT_CHECK(buf);
    clf_detok d;
    clf_detok_init(&d, t, flags);
    for (int i = 0; i <= n; i++) {
        size_t k;
        if (i < n) FT_CHECK(clf_detok_push(&d, ids[i], buf, cap, &k) == CLF_OK);
        else k = clf_detok_flush(&d, buf, cap);
        FT_CHECK(k <= cap && used + k <= whole_len && memcmp(whole + used, buf, k) == 0);
        used += k;
        FT_CHECK(d.n_held >= 0 && d.n_held <= 3);
    }
    FT_CHECK(used == whole_len);
    free(buf);
    free(whole);
}

static void ft_text(const clf_tokenizer *t, const uint8_t *text, size_t len, int add_special) {
    int bpe = !strcmp(clf_tokenizer_model(t), "gpt2"), covered = 1;
    for (size_t i = 0; bpe && i < len; i++) covered &= ft_bpe_byte[text[i]];
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        int n;
        FT_CHECK(clf_tokenize(t, (const char *)text, len, add_special, special, &ids, &n) == CLF_OK);
        FT_CHECK(n >= 0 && (n == 0) == (ids == NULL));
        for (int i = 0; i < n; i++) FT_CHECK(ids[i] >= 0 && ids[i] < clf_tokenizer_n_vocab(t));
        if (len > 0 && covered) FT_CHECK(n > 0); /* bytes never vanish where there are byte tokens */
        static const int flags[] = {0, CLF_DETOK_SPECIAL, CLF_DETOK_LSTRIP, CLF_DETOK_SPECIAL | CLF_DETOK_LSTRIP};
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) ft_stream_matches(t, ids, n, flags[f]);
        if (bpe && covered && !special && !add_special && ft_valid_utf8(text, len)) {
            char *back;
            size_t back_len;
            FT_CHECK(clf_detokenize(t, ids, n, 0, &back, &back_len) == CLF_OK);
            if (back_len != len || memcmp(back, text, len) != 0) {
                fprintf(stderr, "fuzz_tokenizer: round trip of %zu bytes gave %zu bytes\n", len, back_len);
                FT_CHECK(!"BPE round trip is exact for valid UTF-8");
            }
            free(back);
        }
        free(ids);
    }
    /* the text as a token's text */
    if (len < 256 && !memchr(text, 0, len)) {
        char s[256];
        memcpy(s, text, len);
        s[len] = 0;
        int32_t id = clf_tokenizer_find(t, s);
        FT_CHECK(id >= -1 && id < clf_tokenizer_n_vocab(t));
        if (id >= 0) FT_CHECK(strcmp(clf_token_text(t, id), s) == 0);
    }
}

/* The bytes as 16-bit ids, shifted so that some fall outside [0, n_vocab). */
static void ft_ids(const clf_tokenizer *t, const uint8_t *p, size_t len, int flags) {
    int32_t nv = clf_tokenizer_n_vocab(t);
    size_t cap = clf_tokenizer_max_piece(t);
    char *buf = malloc(cap);
    FT_CHECK(buf);
    clf_detok d;
    clf_detok_init(&d, t, flags);
    for (size_t i = 0; i + 1 < len; i += 2) {
        uint32_t r = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8;
        int32_t id = (int32_t)(r % (uint32_t)(nv + 16)) - 8;
        size_t k = 99;
        clf_detok before = d;
        clf_status st = clf_detok_push(&d, id, buf, cap, &k);
        if (id < 0 || id >= nv) {
            FT_CHECK(st == CLF_ERR_ARG && k == 0 && !memcmp(&before, &d, sizeof d));
            FT_CHECK(clf_token_text(t, id) == NULL && clf_token_type(t, id) == 0 && !clf_token_is_eog(t, id));
        } else {
            FT_CHECK(st == CLF_OK && k <= cap);
            size_t pl;
            FT_CHECK(clf_token_text(t, id) != NULL && clf_token_piece(t, id, &pl) != NULL);
            FT_CHECK(pl <= cap);
        }
    }
    char tiny[4];
    size_t k = clf_detok_flush(&d, tiny, sizeof tiny);
    FT_CHECK(k <= 3 && d.n_held == 0);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ft_init() != 0) abort();
    if (size == 0) return 0;
    const clf_tokenizer *t = ft_vocab[data[0] & 1];
    int add_special = (data[0] >> 1) & 1;
    ft_text(t, data + 1, size - 1, add_special);
    ft_ids(t, data + 1, size - 1, (data[0] >> 2) & 3);
    return 0;
}

/* Tiny tokenizer vocabularies written with the GGUF writer, shared by the
 * fuzz harnesses (a vocabulary when the default model is absent), the seed
 * and tiny-model generator (tests/fuzz/tiny_gguf.c) and the regression
 * replay test. Header-only (static) so that each user compiles it into its
 * own translation unit without a build-system entry.
 *
 *  - BPE ("gpt2", pre-tokenizer "smollm"): the 256 GPT-2 byte tokens, a few
 *    merges, control tokens <|endoftext|> (EOS) <|im_start|> <|im_end|>,
 *    and a user-defined <tool>;
 *  - SPM ("llama"): <unk> <s> </s>, the 256 <0xNN> byte tokens, a few
 *    scored pieces with the U+2581 space marker, and two control tokens.
 *
 * Every byte string can be tokenized with either (byte fallback). */
#ifndef CLF_FUZZ_VOCAB_H
#define CLF_FUZZ_VOCAB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "status.h"

#define FZ_VOCAB_MAX 400

typedef struct fz_vocab {
    int n;
    char *text[FZ_VOCAB_MAX];
    int32_t type[FZ_VOCAB_MAX];
    float score[FZ_VOCAB_MAX];
    int n_merges;
    char *merges[64];
} fz_vocab;

static inline void fz_vocab_free(fz_vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->text[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    memset(v, 0, sizeof *v);
}

static inline void fz_vocab_push(fz_vocab *v, const char *text, int32_t type, float score) {
    if (v->n >= FZ_VOCAB_MAX) return;
    size_t n = strlen(text);
    v->text[v->n] = malloc(n + 1);
    if (!v->text[v->n]) return;
    memcpy(v->text[v->n], text, n + 1);
    v->type[v->n] = type;
    v->score[v->n] = score;
    v->n++;
}

/* GPT-2's byte -> code point map (text/tokenizer/tokenizer_bpe.c has the library's
 * own; repeated here so the vocabulary does not trust what it tests). */
static inline size_t fz_byte_utf8(unsigned b, char *out) {
    unsigned cp = b <= 0x20 ? 256 + b : b >= 0x7f && b <= 0xa0 ? 256 + 33 + (b - 0x7f) : b == 0xad ? 256 + 67 : b;
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
        return 1;
    }
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    out[2] = 0;
    return 2;
}

/* spm: 0 BPE, 1 SentencePiece. Token types as in tokenizer.h. eog 0 names
 * the control tokens so that none ends generation (a long `clinfer run` on
 * a random model must not stop by chance). */
static inline void fz_vocab_build2(fz_vocab *v, int spm, int eog) {
    memset(v, 0, sizeof *v);
    if (!spm) {
        char u[4];
        for (unsigned b = 0; b < 256; b++) fz_byte_utf8(b, u), fz_vocab_push(v, u, 1, 0);
        /* "Ġ" is the space, "Ċ" the newline */
        static const char *const pairs[][2] = {
            {"Ġ", "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {"Ġt", "he"}, {"Ġ", "a"},
            {"o", "n"}, {"r", "e"}, {"Ġ", "s"}, {"e", "n"}, {"Ġa", "n"}, {"Ġan", "d"}, {"in", "g"},
            {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"Ċ", "Ċ"}, {"1", "2"}, {"Ã", "©"}, {"Ġ", "<"}, {"t", "h"},
        };
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            char m[32], cat[32];
            snprintf(m, sizeof m, "%s %s", pairs[i][0], pairs[i][1]);
            snprintf(cat, sizeof cat, "%s%s", pairs[i][0], pairs[i][1]);
            v->merges[v->n_merges] = malloc(strlen(m) + 1);
            if (v->merges[v->n_merges]) strcpy(v->merges[v->n_merges++], m);
            fz_vocab_push(v, cat, 1, 0);
        }
        fz_vocab_push(v, eog ? "<|endoftext|>" : "<|fz_text|>", 3, 0);
        fz_vocab_push(v, eog ? "<|im_start|>" : "<|fz_start|>", 3, 0);
        fz_vocab_push(v, eog ? "<|im_end|>" : "<|fz_end|>", 3, 0);
        fz_vocab_push(v, "<tool>", 4, 0);
        return;
    }
    fz_vocab_push(v, "<unk>", 2, 0);
    fz_vocab_push(v, "<s>", 3, 0);
    fz_vocab_push(v, eog ? "</s>" : "<fz/>", 3, 0);
    for (unsigned b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        fz_vocab_push(v, hex, 6, 0);
    }
    static const char *const pieces[] = {
        "\xe2\x96\x81", "e", "t", "h", "a", "n", "d", "i", "g", "s", "o", "r", "\xe2\x96\x81t", "he",
        "\xe2\x96\x81the", "in", "\xe2\x96\x81" "a", "\xe2\x96\x81" "and", "er", "ing", "\xc3\xa9", "\xe2\x96\x81\xe2\x96\x81",
    };
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) fz_vocab_push(v, pieces[i], 1, -(float)i);
    fz_vocab_push(v, eog ? "<|im_start|>" : "<|fz_start|>", 3, 0);
    fz_vocab_push(v, eog ? "<|im_end|>" : "<|fz_end|>", 3, 0);
    fz_vocab_push(v, "<tool>", 4, 0);
}

static inline void fz_vocab_build(fz_vocab *v, int spm) { fz_vocab_build2(v, spm, 1); }

/* Writes the vocabulary's tokenizer.ggml.* keys into w (eog as built). */
static inline clf_status fz_vocab_set2(clf_gguf_writer *w, const fz_vocab *v, int spm, int eog) {
    CLF_TRY(clf_gguf_set_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2"));
    if (!spm) CLF_TRY(clf_gguf_set_str(w, "tokenizer.ggml.pre", "smollm"));
    CLF_TRY(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", (const char *const *)v->text, (uint64_t)v->n));
    CLF_TRY(clf_gguf_set_arr(w, "tokenizer.ggml.token_type", CLF_GGUF_INT32, v->type, (uint64_t)v->n));
    if (spm) {
        CLF_TRY(clf_gguf_set_arr(w, "tokenizer.ggml.scores", CLF_GGUF_FLOAT32, v->score, (uint64_t)v->n));
        CLF_TRY(clf_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
        /* without eog, SPM's default EOS (id 2) is pointed at <unk> */
        CLF_TRY(clf_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", eog ? 2 : 0));
        CLF_TRY(clf_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    } else {
        CLF_TRY(clf_gguf_set_strs(w, "tokenizer.ggml.merges", (const char *const *)v->merges, (uint64_t)v->n_merges));
        if (eog) {
            CLF_TRY(clf_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + (uint32_t)v->n_merges));
            CLF_TRY(clf_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 256 + (uint32_t)v->n_merges));
        }
        CLF_TRY(clf_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 0));
    }
    return CLF_OK;
}

static inline clf_status fz_vocab_set(clf_gguf_writer *w, const fz_vocab *v, int spm) { return fz_vocab_set2(w, v, spm, 1); }

/* A vocabulary-only GGUF at `path` (the fuzzers' fallback vocabulary). */
static inline clf_status fz_vocab_write(const char *path, int spm) {
    fz_vocab v;
    fz_vocab_build(&v, spm);
    clf_gguf_writer *w;
    clf_status st = clf_gguf_writer_create(&w);
    if (st == CLF_OK) {
        st = clf_gguf_set_str(w, "general.architecture", "llama");
        if (st == CLF_OK) st = fz_vocab_set(w, &v, spm);
        if (st == CLF_OK) st = clf_gguf_write(w, path);
        clf_gguf_writer_free(w);
    }
    fz_vocab_free(&v);
    return st;
}

/* Whole file -> malloc'd buffer (NULL on failure). */
static inline uint8_t *fz_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *p = NULL;
    long len;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = malloc(len ? (size_t)len : 1)) != NULL && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    if (p) *n = (size_t)len;
    fclose(f);
    return p;
}

#endif

/* Tokenizers built from a model file's own vocabulary (its GGUF keys, read by
 * models/vocab.c into a clf_vocab_desc), matching llama.cpp:
 *
 *  - tokenizer.ggml.model "gpt2": byte-level BPE with merge ranks, the text
 *    first split by the pre-tokenizer regexes named by tokenizer.ggml.pre
 *    (PCRE2, Unicode classes);
 *  - tokenizer.ggml.model "llama": SentencePiece-style BPE by scores, with
 *    the U+2581 space marker and <0xNN> byte fallback.
 *
 * Special tokens (control and user-defined types) are matched in the text
 * before either: user-defined ones always, control ones only when the caller
 * asks for special-token parsing. Detokenization streams: a token whose
 * bytes end inside a UTF-8 sequence is held back until the sequence ends. */
#ifndef CLF_TOKENIZER_H
#define CLF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "str.h"

typedef struct clf_tokenizer clf_tokenizer;

/* GGUF tokenizer.ggml.token_type values. */
enum {
    CLF_TOKEN_NORMAL = 1,
    CLF_TOKEN_UNKNOWN = 2,
    CLF_TOKEN_CONTROL = 3,
    CLF_TOKEN_USER_DEFINED = 4,
    CLF_TOKEN_UNUSED = 5,
    CLF_TOKEN_BYTE = 6,
};

/* What a tokenizer is made of: a model file's tokenizer keys, as
 * models/vocab.c reads them from GGUF (the keys' names in brackets). Nothing
 * is owned: the tokenizer copies what it keeps, so the source may go. */
typedef struct clf_vocab_desc {
    clf_str model;          /* [tokenizer.ggml.model] "gpt2": byte-level BPE; "llama": SentencePiece */
    clf_str pre;            /* [tokenizer.ggml.pre] the pre-tokenizer; "default" when absent */
    const clf_str *tokens;  /* [n_tokens] [tokenizer.ggml.tokens] */
    uint64_t n_tokens;
    const void *types;      /* [n_tokens] int32 [tokenizer.ggml.token_type], unaligned; NULL: all normal */
    const void *scores;     /* [n_tokens] float32 (or int32) [tokenizer.ggml.scores], unaligned; NULL: all 0 */
    int scores_int;         /* the scores are int32 */
    const clf_str *merges;  /* [n_merges] [tokenizer.ggml.merges] "left right" pairs by rank: BPE */
    uint64_t n_merges;
    /* token ids, -1 when absent; one out of range is ignored, as llama.cpp does */
    int64_t bos, eos, unk; /* [tokenizer.ggml.bos_token_id] ... */
    int64_t eot, eom;      /* [tokenizer.ggml.eot_token_id], [.eom_token_id]: end generation too */
    /* [tokenizer.ggml.add_space_prefix], [.add_bos_token], [.add_eos_token]:
     * 0 or 1; -1 when absent (the model kind's default) */
    int add_space_prefix, add_bos, add_eos;
    clf_str name;          /* [general.name]: per-model token attributes; len 0 when absent */
    clf_str chat_template; /* [tokenizer.chat_template]; ptr NULL when absent */
} clf_vocab_desc;

/* A tokenizer of the vocabulary `d` describes. CLF_ERR_FORMAT for a
 * malformed vocabulary and for an unsupported model or pre-tokenizer. */
clf_status clf_tokenizer_create(const clf_vocab_desc *d, clf_tokenizer **out);
void clf_tokenizer_free(clf_tokenizer *t);

/* Text -> ids (`len` bytes, need not be NUL-terminated). add_special adds
 * BOS (and EOS) where the model asks for them (tokenizer.ggml.add_bos_token,
 * add_eos_token); parse_special turns control-token text such as
 * "<|im_start|>" into its id. *ids is malloc'd (free() it; NULL when *n is
 * 0). Invalid UTF-8 is tokenized as llama.cpp does (U+FFFD for BPE, raw
 * bytes for SentencePiece). */
clf_status clf_tokenize(const clf_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **ids, int *n);

/* A byte range of a text. */
typedef struct clf_span {
    size_t off, len;
} clf_span;
/* clf_tokenize with control tokens read everywhere but inside the `plain`
 * ranges (n_plain of them, in order, disjoint): there control-token text
 * is text, as with parse_special off. A chat prompt's messages are plain,
 * its template's markers around them tokens (clf_chat_tokenize). The text
 * is cut into the same fragments as with parse_special on, so a text
 * without control-token text inside the plain ranges gives the same ids. */
clf_status clf_tokenize_plain(const clf_tokenizer *t, const char *text, size_t len, int add_special,
                              const clf_span *plain, int n_plain, int32_t **ids, int *n);

int32_t clf_tokenizer_n_vocab(const clf_tokenizer *t);
int32_t clf_tokenizer_bos(const clf_tokenizer *t); /* -1 when the model has none */
int32_t clf_tokenizer_eos(const clf_tokenizer *t);
int clf_tokenizer_add_bos(const clf_tokenizer *t); /* does add_special add BOS */
const char *clf_tokenizer_model(const clf_tokenizer *t); /* "gpt2" or "llama" */
const char *clf_tokenizer_pre(const clf_tokenizer *t);   /* "smollm", "default", ... */
/* tokenizer.chat_template, NULL when the file has none. */
const char *clf_tokenizer_chat_template(const clf_tokenizer *t);
/* The id whose vocabulary text is exactly `text` (e.g. "<|im_end|>"), or -1. */
int32_t clf_tokenizer_find(const clf_tokenizer *t, const char *text);

/* End of generation: EOS and the end-of-turn tokens (<|im_end|>,
 * <|eot_id|>, <|endoftext|>, <|end|>, ...). False for ids out of range. */
int clf_token_is_eog(const clf_tokenizer *t, int32_t id);
/* The GGUF token type (CLF_TOKEN_*), 0 for ids out of range. */
int clf_token_type(const clf_tokenizer *t, int32_t id);
/* The vocabulary text of a token (NUL-terminated), NULL out of range. */
const char *clf_token_text(const clf_tokenizer *t, int32_t id);
/* The bytes a token stands for (byte-level decoded, U+2581 -> ' ', <0xNN>
 * -> one byte; control tokens their text); *len set, may hold a NUL byte.
 * NULL out of range. */
const char *clf_token_piece(const clf_tokenizer *t, int32_t id, size_t *len);
/* A buffer of this many bytes always holds one clf_detok_push result. */
size_t clf_tokenizer_max_piece(const clf_tokenizer *t);

/* ---- streaming detokenization ------------------------------------------ */

enum {
    CLF_DETOK_SPECIAL = 1, /* render control and unknown tokens as their text (default: "") */
    CLF_DETOK_LSTRIP = 2,  /* undo the SPM space prefix: drop one leading space of the first token where the model adds one */
};

typedef struct clf_detok {
    const clf_tokenizer *t;
    int flags;
    int started;
    int n_held;
    unsigned char held[3]; /* the start of an unfinished UTF-8 sequence */
} clf_detok;

void clf_detok_init(clf_detok *d, const clf_tokenizer *t, int flags);
/* Appends token `id`; writes to buf the bytes that are now complete UTF-8
 * (possibly none) and sets *n. CLF_ERR_ARG for an id out of range or cap
 * smaller than clf_tokenizer_max_piece(), with nothing consumed. */
clf_status clf_detok_push(clf_detok *d, int32_t id, char *buf, size_t cap, size_t *n);
/* Writes out whatever is still held (an unfinished sequence at the end of
 * generation, as raw bytes). cap >= 3 always suffices. */
size_t clf_detok_flush(clf_detok *d, char *buf, size_t cap);

/* Whole sequence -> malloc'd NUL-terminated text (*len without the NUL). */
clf_status clf_detokenize(const clf_tokenizer *t, const int32_t *ids, int n, int flags, char **text, size_t *len);

#endif

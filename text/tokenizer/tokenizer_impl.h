/* Internals shared by tokenizer.c (vocabulary, special tokens, pieces),
 * tokenizer_bpe.c (byte-level BPE) and tokenizer_spm.c (SentencePiece). */
#ifndef CLF_TOKENIZER_IMPL_H
#define CLF_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef enum { CLF_VOCAB_BPE, CLF_VOCAB_SPM } clf_vocab_kind;

/* Per-token flags beyond the GGUF type: ends generation; treated as control
 * whatever its type; whitespace after it is dropped when it is split out. */
enum { CLF_TOKF_EOG = 1, CLF_TOKF_CONTROL = 2, CLF_TOKF_RSTRIP = 4 };

/* A growable list of ids. */
typedef struct clf_ids {
    int32_t *v;
    int n, cap;
} clf_ids;

clf_status clf_ids_push(clf_ids *a, int32_t id);

/* A queued merge of the adjacent symbols left and right. Both tokenizers
 * merge the best pair first — BPE the lowest merge rank, SentencePiece the
 * highest score — and on a tie the leftmost, so `key` holds the rank or
 * minus the score and the heap pops the lowest key. a, b, c are the
 * tokenizer's own record of the pair, to recognise entries gone stale. */
typedef struct clf_bigram {
    float key;
    int32_t left, right;
    int32_t a, b, c;
} clf_bigram;

typedef struct clf_bigram_heap {
    clf_bigram *v; /* sized by the caller: n - 1 pairs, then at most 2 per merge */
    int n;
} clf_bigram_heap;

void clf_bigram_push(clf_bigram_heap *h, clf_bigram x);
clf_bigram clf_bigram_pop(clf_bigram_heap *h); /* h->n > 0 */

/* Merge (left id, right id) -> rank and the merged id; open addressing. */
typedef struct clf_merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank, id;
} clf_merge_slot;

#define CLF_PRE_MAX_REGEX 4

struct clf_tokenizer {
    clf_vocab_kind kind;
    char model[16], pre[48];
    int32_t n_vocab;

    char *text;             /* every token's text, NUL-terminated */
    char *pieces;           /* every token's decoded bytes (clf_token_piece) */
    uint32_t *text_off, *text_len, *piece_off, *piece_len;
    size_t max_piece;
    float *score;           /* SPM merge priority; 0 when the file has none */
    uint8_t *type;          /* CLF_TOKEN_* */
    uint8_t *flags;         /* CLF_TOKF_* */

    int32_t *map;           /* text -> id hash (open addressing, -1 empty) */
    uint32_t map_mask;

    int32_t *special;       /* control / user-defined / unknown ids, longest text first */
    int n_special;

    int32_t bos, eos, unk;
    int add_bos, add_eos, add_space_prefix;
    char *chat_template;

    /* BPE */
    int32_t byte_tok[256];  /* each byte's token: its GPT-2 code point (BPE) or <0xNN> (SPM); -1 if none */
    clf_merge_slot *merges;
    uint64_t merge_mask;
    void *regex[CLF_PRE_MAX_REGEX]; /* pcre2_code_8 */
    int n_regex;
    int ignore_merges;      /* a whole pre-token found in the vocab is used as is (Llama 3) */
};

/* The id of the token whose text is s[0..n), or -1. */
int32_t clf_tok_lookup(const clf_tokenizer *t, const char *s, size_t n);

/* GPT-2 byte <-> code point mapping: printable Latin-1 bytes map to
 * themselves, the rest to 256 + k in byte order. */
uint32_t clf_bpe_byte_to_cp(uint8_t b);
int clf_bpe_cp_to_byte(uint32_t cp); /* -1 if cp encodes no byte */

/* Per-kind setup (after the vocabulary and its hash are in place) and
 * teardown; tokenization of one fragment of plain text. */
clf_status clf_bpe_init(clf_tokenizer *t, const clf_vocab_desc *d);
void clf_bpe_free(clf_tokenizer *t);
clf_status clf_bpe_tokenize(const clf_tokenizer *t, const char *s, size_t n, clf_ids *out);
clf_status clf_spm_init(clf_tokenizer *t);
/* prefix_space: prepend the SentencePiece space (after BOS or a special token). */
clf_status clf_spm_tokenize(const clf_tokenizer *t, const char *s, size_t n, int prefix_space, clf_ids *out);

#endif

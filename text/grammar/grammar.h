/* GBNF grammars (llama.cpp's format) compiled into a pushdown automaton
 * over bytes, and the token masks it allows for a vocabulary.
 *
 * A grammar's rules become one flat array of elements; every character
 * class, UTF-8 included, is lowered to sequences of byte sets, so the
 * automaton reads bytes as tokens hold them. A state is a set of stacks;
 * a stack is the positions to return to, its top a byte-set element (an
 * empty stack: the sentence is complete). */
#ifndef CLF_GRAMMAR_H
#define CLF_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct clf_grammar clf_grammar;

/* Parses and checks gbnf[0, len) (root: the start rule, NULL "root"):
 * CLF_ERR_ARG with line:column for a syntax error, an undefined rule, left
 * recursion or an empty language. */
clf_status clf_grammar_compile(const char *gbnf, size_t len, const char *root, clf_grammar **out);
void clf_grammar_free(clf_grammar *g);

/* Whether text[0, n) is a whole sentence (1) of g's language, else 0: for
 * tests and checkers (it walks the automaton byte by byte). */
int clf_grammar_accepts(const clf_grammar *g, const char *text, size_t n);

/* ---- states (grammar_match.c) ---------------------------------------------
 * A state: the stacks it may be in, flat: for each stack its length, then
 * its positions (indices into el) bottom first; every top is a G_BYTES
 * element. An empty stack: the text is a whole sentence. The stacks are
 * distinct and in a canonical order, so equal states are equal bytes. */
typedef struct gstate {
    int32_t *d;
    int n, cap;   /* int32s used / allocated */
    int n_stacks;
    int accepting; /* holds the empty stack */
    int overflow;  /* the step here dropped a path that needed a stack deeper than GSTATE_MAX_DEPTH */
    uint64_t tops[4]; /* the union of the tops' byte sets: the bytes that may come next */
} gstate;

/* The matcher's bounds (per state, per byte's step): the ways to read the
 * text at once, the stack's depth, and the expansion steps one byte may
 * take (a grammar's text is bounded, its expansions are not otherwise:
 * chains of nullable rules). A step past the depth drops the path (the
 * text it would read is refused, overflow says so); past the others it is
 * CLF_ERR_ARG. */
enum { GSTATE_MAX_STACKS = 2048, GSTATE_MAX_DEPTH = 512, GSTATE_MAX_WORK = 1 << 20 };

/* The state before any byte. */
clf_status clf_gstate_start(const clf_grammar *g, gstate *out);
/* The state after byte b (out->n_stacks 0: b is not allowed; a path that
 * would nest deeper than GSTATE_MAX_DEPTH is dropped, out->overflow set).
 * CLF_ERR_ARG when the grammar is too ambiguous (more than
 * GSTATE_MAX_STACKS stacks) or a step's work is over GSTATE_MAX_WORK.
 * out must not be in. */
clf_status clf_gstate_advance(const clf_grammar *g, const gstate *in, unsigned b, gstate *out);
/* clf_gstate_advance through the grammar's literal characters only: from
 * the stacks whose top reads byte b and no other (a "literal"'s byte, or
 * a one-byte class), not a class that holds b among others. How a
 * preserved token's bytes are read (below). */
clf_status clf_gstate_advance_literal(const clf_grammar *g, const gstate *in, unsigned b, gstate *out);
clf_status clf_gstate_copy(const gstate *in, gstate *out);
void clf_gstate_free(gstate *s);
uint64_t clf_gstate_hash(const gstate *s);
/* The state whose token masks are s's for tokens of at most `depth`
 * bytes (a bounded repetition's far positions read as near ones: see
 * grammar_match.c); *mapped: whether it differs from s. */
clf_status clf_gstate_mask_key(const clf_grammar *g, const gstate *s, int depth, gstate *out, int *mapped);
/* Whether no byte continues s only because every way on nests past
 * GSTATE_MAX_DEPTH: the grammar's nesting limit, not its end. */
int clf_gstate_at_limit(const clf_grammar *g, const gstate *s);

/* ---- a grammar over a vocabulary (grammar_vocab.c) -------------------------- */

typedef struct clf_tokenizer clf_tokenizer;

/* Whether token id is text a grammar reads (not a control, unknown,
 * unused or end token, nor empty), and its bytes. */
int clf_grammar_token_is_text(const clf_tokenizer *t, int32_t id, const char **piece, size_t *len);

/* The vocabulary's text tokens (not control, unknown or unused ones) as a
 * byte trie: the tokens that share a prefix are walked once. */
typedef struct clf_vocab_trie clf_vocab_trie;
clf_status clf_vocab_trie_build(const clf_tokenizer *t, clf_vocab_trie **out);
void clf_vocab_trie_free(clf_vocab_trie *v);
/* The longest text token's bytes. */
int clf_vocab_trie_depth(const clf_vocab_trie *v);

/* A grammar's masks over a trie: the tokens a state allows, computed by
 * walking the trie with the state, kept per state (up to a memory budget,
 * then forgotten), behind a lock: one per grammar, any number of users. */
typedef struct clf_grammar_masks clf_grammar_masks;
clf_status clf_grammar_masks_create(const clf_grammar *g, const clf_vocab_trie *v, int n_vocab,
                                    clf_grammar_masks **out);
void clf_grammar_masks_free(clf_grammar_masks *gm);
/* Sets logits[i] = -INFINITY for every token state s does not allow (a
 * token outside the trie included, but a preserved token that s reads);
 * *n_allowed: how many it allows.
 * CLF_ERR_ARG when the grammar is too ambiguous to step. */
clf_status clf_grammar_masks_apply(clf_grammar_masks *gm, const gstate *s, float *logits, int *n_allowed);
/* Preserved tokens (llama.cpp's preserved_tokens): the control tokens, not
 * end ones, whose bytes occur inside one of g's literals (a run of
 * literal characters in a rule: "[TOOL_CALLS][" holds [TOOL_CALLS]) are
 * read as text where the grammar's literal characters spell them (never
 * through a class: not inside a JSON string), in the masks and in
 * clf_grammar_masks_advance. So a tool-call format's markers, control
 * tokens in the models that use them, may be drawn as themselves. Kept
 * out of the shared trie: apply checks each one on its state. Called once,
 * before gm is used; t: the vocabulary gm's masks are for. */
clf_status clf_grammar_masks_preserve(clf_grammar_masks *gm, const clf_tokenizer *t);
int clf_grammar_masks_n_preserved(const clf_grammar_masks *gm);
/* The state after token id from *cur, in *cur (*tmp: scratch): a text
 * token's bytes, a preserved one's through literal characters. 0 when
 * the grammar refuses it (*cur is then undefined), or a step failed. */
int clf_grammar_masks_advance(const clf_grammar_masks *gm, const clf_tokenizer *t, int32_t id, gstate *cur,
                              gstate *tmp);
/* The same mask over candidates alone (a device's k best): allowed[i] = 1
 * where s allows ids[i] (i < k), no logit row written; *n_allowed: how
 * many tokens of the whole vocabulary s allows; refused[0..n_refused): the
 * smallest ids s refuses, rising (-1 past the last). */
clf_status clf_grammar_masks_filter(clf_grammar_masks *gm, const gstate *s, const int32_t *ids, int k,
                                    uint8_t *allowed, int *n_allowed, int32_t *refused, int n_refused);
/* The same mask as bits for a device (issue 41: the top-k selection
 * skips the refused): bits[(n_vocab + 31) / 32], bit i % 32 of word i / 32
 * set where s allows token i (a preserved one included, as apply); no
 * logit row written; *n_allowed as apply's. */
clf_status clf_grammar_masks_bits(clf_grammar_masks *gm, const gstate *s, uint32_t *bits, int *n_allowed);
/* The masks computed and the ones found kept, since creation. */
void clf_grammar_masks_stats(clf_grammar_masks *gm, long *computed, long *hits, double *compute_seconds);

#endif

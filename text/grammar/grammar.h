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

/* ---- a grammar over a vocabulary (grammar_vocab.c) -------------------------- */

typedef struct clf_tokenizer clf_tokenizer;
typedef struct gstate gstate;

/* Whether token id is text a grammar reads (not a control, unknown,
 * unused or end token, nor empty), and its bytes. */
int clf_grammar_token_is_text(const clf_tokenizer *t, int32_t id, const char **piece, size_t *len);

/* The vocabulary's text tokens (not control, unknown or unused ones) as a
 * byte trie: the tokens that share a prefix are walked once. */
typedef struct clf_vocab_trie clf_vocab_trie;
clf_status clf_vocab_trie_build(const clf_tokenizer *t, clf_vocab_trie **out);
void clf_vocab_trie_free(clf_vocab_trie *v);

/* A grammar's masks over a trie: the tokens a state allows, computed by
 * walking the trie with the state, kept per state (up to a memory budget,
 * then forgotten), behind a lock: one per grammar, any number of users. */
typedef struct clf_grammar_masks clf_grammar_masks;
clf_status clf_grammar_masks_create(const clf_grammar *g, const clf_vocab_trie *v, int n_vocab,
                                    clf_grammar_masks **out);
void clf_grammar_masks_free(clf_grammar_masks *gm);
/* Sets logits[i] = -INFINITY for every token state s does not allow (a
 * token outside the trie included); *n_allowed: how many it allows.
 * CLF_ERR_ARG when the grammar is too ambiguous to step. */
clf_status clf_grammar_masks_apply(clf_grammar_masks *gm, const gstate *s, float *logits, int *n_allowed);
/* The masks computed and the ones found kept, since creation. */
void clf_grammar_masks_stats(clf_grammar_masks *gm, long *computed, long *hits, double *compute_seconds);

#endif

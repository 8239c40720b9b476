/* What grammar.c compiles and grammar_match.c / grammar_vocab.c walk. */
#ifndef CLF_GRAMMAR_IMPL_H
#define CLF_GRAMMAR_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "grammar.h"

/* One element of a rule. A rule is its alternatives one after the other,
 * each ended by G_ALT, the last by G_END. */
enum { G_END, G_ALT, G_REF, G_BYTES };
typedef struct gel {
    uint8_t type;
    int32_t val; /* G_REF: the rule; G_BYTES: the byte set; G_END: the rule it ends */
} gel;

struct clf_grammar {
    gel *el; /* every rule's elements, flat [n_el] */
    int n_el;
    int *rule_start; /* [n_rules]: where each rule's first alternative starts */
    char **names;    /* [n_rules]; generated rules start with \x01 */
    int n_rules, root;
    uint64_t (*sets)[4]; /* [n_sets] 256-bit byte sets */
    int n_sets, cap_sets;
};

static inline int gset_has(const uint64_t *s, unsigned b) { return (int)(s[b >> 6] >> (b & 63) & 1); }

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
clf_status clf_gstate_copy(const gstate *in, gstate *out);
void clf_gstate_free(gstate *s);
uint64_t clf_gstate_hash(const gstate *s);

#endif

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

#endif

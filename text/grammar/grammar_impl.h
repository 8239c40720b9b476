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
    /* A bounded repetition x{m,n} ends in a chain of optional rules
     * O_k ::= x O_{k-1} | (empty), k = n - m .. 1, made one after the other
     * (O_k's id is O_1's + k - 1): chain_k[r] = k for such a rule whose x
     * cannot match the empty text, else 0. A state's masks see only a
     * token's bytes ahead, so O_k and O_K (k, K >= the longest token's
     * bytes + 1) give the same mask: clf_gstate_mask_key. */
    int32_t *chain_k; /* [n_rules] */
    int32_t *el_rule; /* [n_el]: the rule each element is in */
};

static inline int gset_has(const uint64_t *s, unsigned b) { return (int)(s[b >> 6] >> (b & 63) & 1); }

#endif

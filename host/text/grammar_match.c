/* The grammar's automaton: states as sets of stacks (grammar_impl.h), the
 * start state, one byte's step, and whole-text acceptance. */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

typedef struct expander {
    const clf_grammar *g;
    gstate *out;
    int32_t fr[GSTATE_MAX_DEPTH + 1]; /* the stack being expanded */
    clf_status st;
} expander;

static void add_stack(expander *x, int len) {
    gstate *o = x->out;
    if (o->n_stacks >= GSTATE_MAX_STACKS) {
        if (x->st == CLF_OK)
            x->st = clf_fail(CLF_ERR_ARG, "grammar: more than %d ways to read the text at once (an ambiguous grammar)",
                             GSTATE_MAX_STACKS);
        return;
    }
    if (o->n + len + 1 > o->cap) {
        int cap = o->cap ? o->cap : 64;
        while (cap < o->n + len + 1) cap *= 2;
        int32_t *d = realloc(o->d, (size_t)cap * sizeof *d);
        if (!d) {
            if (x->st == CLF_OK) x->st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
            return;
        }
        o->d = d;
        o->cap = cap;
    }
    o->d[o->n++] = len;
    memcpy(o->d + o->n, x->fr, (size_t)len * sizeof *o->d);
    o->n += len;
    o->n_stacks++;
}

/* Expands fr[0, len) until its top is a byte set: a rule reference becomes
 * each of its alternatives (its continuation kept below, unless the
 * reference ends its sequence: a tail call, so right recursion keeps the
 * stack flat); an alternative's end pops. */
static void expand(expander *x, int len) {
    if (x->st != CLF_OK) return;
    if (len == 0) {
        add_stack(x, 0);
        return;
    }
    const gel *el = x->g->el;
    int p = x->fr[len - 1];
    switch (el[p].type) {
    case G_BYTES: add_stack(x, len); return;
    case G_ALT:
    case G_END: expand(x, len - 1); return;
    default: break;
    }
    int next = p + 1, cont = el[next].type != G_END && el[next].type != G_ALT;
    int base = cont ? len : len - 1;
    if (base + 1 > GSTATE_MAX_DEPTH) {
        x->st = clf_fail(CLF_ERR_ARG, "grammar: nesting deeper than %d", GSTATE_MAX_DEPTH);
        return;
    }
    if (cont) x->fr[len - 1] = next;
    int r = el[p].val, a = x->g->rule_start[r];
    for (;;) {
        x->fr[base] = a;
        expand(x, base + 1);
        while (el[a].type != G_ALT && el[a].type != G_END) a++;
        if (el[a].type == G_END) break;
        a++;
    }
    x->fr[len - 1] = p;
}

static int cmp_stack(const int32_t *a, const int32_t *b) {
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    for (int i = 1; i <= a[0]; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static _Thread_local const int32_t *g_sort_base; /* qsort has no context argument in C11 */
static int cmp_off(const void *x, const void *y) {
    return cmp_stack(g_sort_base + *(const int *)x, g_sort_base + *(const int *)y);
}

/* Sorts and deduplicates out's stacks, and sets accepting and tops. */
static clf_status canonical(const clf_grammar *g, gstate *o) {
    memset(o->tops, 0, sizeof o->tops);
    o->accepting = 0;
    if (o->n_stacks > 1) {
        /* on the stack for the usual few stacks (a step runs per trie node) */
        int off_small[64];
        int32_t copy_small[1024];
        int big = o->n_stacks > 64 || o->n > 1024;
        int *off = big ? malloc((size_t)o->n_stacks * sizeof *off) : off_small;
        int32_t *copy = big ? malloc((size_t)o->n * sizeof *copy) : copy_small;
        if (!off || !copy) {
            if (big) free(off), free(copy);
            return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
        }
        for (int i = 0, k = 0; i < o->n_stacks; i++, k += o->d[k] + 1) off[i] = k;
        memcpy(copy, o->d, (size_t)o->n * sizeof *copy);
        g_sort_base = copy;
        qsort(off, (size_t)o->n_stacks, sizeof *off, cmp_off);
        int n = 0, kept = 0;
        const int32_t *prev = NULL;
        for (int i = 0; i < o->n_stacks; i++) {
            const int32_t *s = copy + off[i];
            if (prev && !cmp_stack(prev, s)) continue;
            prev = s;
            memcpy(o->d + n, s, (size_t)(s[0] + 1) * sizeof *s);
            n += s[0] + 1;
            kept++;
        }
        o->n = n;
        o->n_stacks = kept;
        if (big) free(off), free(copy);
    }
    for (int k = 0; k < o->n; k += o->d[k] + 1) {
        const int32_t *s = o->d + k;
        if (s[0] == 0) o->accepting = 1;
        else {
            const uint64_t *set = g->sets[g->el[s[s[0]]].val];
            for (int w = 0; w < 4; w++) o->tops[w] |= set[w];
        }
    }
    return CLF_OK;
}

/* Per thread (a step is called for every node of the vocabulary's trie:
 * no allocation per call); a state's step never nests another. */
static _Thread_local expander t_exp;

static void reset(gstate *o) {
    o->n = 0;
    o->n_stacks = 0;
}

clf_status clf_gstate_start(const clf_grammar *g, gstate *out) {
    expander *e = &t_exp;
    *e = (expander){.g = g, .out = out};
    reset(out);
    /* the root's alternatives from an empty stack */
    int a = g->rule_start[g->root];
    for (;;) {
        e->fr[0] = a;
        expand(e, 1);
        while (g->el[a].type != G_ALT && g->el[a].type != G_END) a++;
        if (g->el[a].type == G_END) break;
        a++;
    }
    return e->st != CLF_OK ? e->st : canonical(g, out);
}

clf_status clf_gstate_advance(const clf_grammar *g, const gstate *in, unsigned b, gstate *out) {
    reset(out);
    if (!gset_has(in->tops, b)) return canonical(g, out);
    expander *e = &t_exp;
    e->g = g;
    e->out = out;
    e->st = CLF_OK;
    for (int k = 0; k < in->n && e->st == CLF_OK; k += in->d[k] + 1) {
        int len = in->d[k];
        if (!len) continue;
        const int32_t *s = in->d + k + 1;
        int top = s[len - 1];
        if (!gset_has(g->sets[g->el[top].val], b)) continue;
        memcpy(e->fr, s, (size_t)len * sizeof *s);
        e->fr[len - 1] = top + 1;
        expand(e, len);
    }
    return e->st != CLF_OK ? e->st : canonical(g, out);
}

clf_status clf_gstate_copy(const gstate *in, gstate *out) {
    if (out->cap < in->n) {
        int32_t *d = realloc(out->d, (size_t)(in->n ? in->n : 1) * sizeof *d);
        if (!d) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
        out->d = d;
        out->cap = in->n ? in->n : 1;
    }
    if (in->n) memcpy(out->d, in->d, (size_t)in->n * sizeof *in->d);
    out->n = in->n;
    out->n_stacks = in->n_stacks;
    out->accepting = in->accepting;
    memcpy(out->tops, in->tops, sizeof out->tops);
    return CLF_OK;
}

void clf_gstate_free(gstate *s) {
    free(s->d);
    *s = (gstate){0};
}

uint64_t clf_gstate_hash(const gstate *s) { /* FNV-1a over the stacks */
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < s->n; i++) {
        h ^= (uint32_t)s->d[i];
        h *= 1099511628211ull;
    }
    return h;
}

int clf_grammar_accepts(const clf_grammar *g, const char *text, size_t n) {
    gstate a = {0}, b = {0};
    int ok = clf_gstate_start(g, &a) == CLF_OK;
    for (size_t i = 0; ok && i < n; i++) {
        ok = clf_gstate_advance(g, &a, (unsigned char)text[i], &b) == CLF_OK && b.n_stacks > 0;
        gstate t = a;
        a = b;
        b = t;
    }
    ok = ok && a.accepting;
    clf_gstate_free(&a);
    clf_gstate_free(&b);
    return ok;
}

/* The grammar's automaton: states as sets of stacks (grammar_impl.h), the
 * start state, one byte's step, and whole-text acceptance. */
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

/* A reference being expanded: the stack's length where it stood, its
 * position (put back when its alternatives are done), the next alternative,
 * and where the alternatives go on the stack. */
typedef struct xframe {
    int32_t len, p, a, base;
} xframe;

typedef struct expander {
    const clf_grammar *g;
    gstate *out;
    int32_t fr[GSTATE_MAX_DEPTH + 1]; /* the stack being expanded */
    long steps; /* this byte's expansion steps, against GSTATE_MAX_WORK */
    int overflow; /* a path was dropped at GSTATE_MAX_DEPTH */
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
 * stack flat); an alternative's end pops. Depth first, with the references
 * being expanded on a stack of its own rather than the C stack (chains of
 * tail calls are as long as the grammar).
 * A path that would need more than GSTATE_MAX_DEPTH levels is dropped
 * (x->overflow): the text it would read is beyond the matcher's bound. */
static void expand(expander *x, int len) {
    const gel *el = x->g->el;
    xframe small[256], *work = small; /* the usual few on the C stack, more on the heap */
    int nw = 0, cap = 256;
    for (;;) {
        /* down: to a leaf (a stack added or dropped), or into a reference */
        for (;;) {
            if (x->st != CLF_OK) goto out;
            if (++x->steps > GSTATE_MAX_WORK) {
                x->st = clf_fail(CLF_ERR_ARG, "grammar: a byte needs more than %d expansion steps (the bound on a "
                                 "step's work)", GSTATE_MAX_WORK);
                goto out;
            }
            if (len == 0) {
                add_stack(x, 0);
                break;
            }
            int p = x->fr[len - 1];
            if (el[p].type == G_BYTES) {
                add_stack(x, len);
                break;
            }
            if (el[p].type == G_ALT || el[p].type == G_END) {
                len--;
                continue;
            }
            int next = p + 1, cont = el[next].type != G_END && el[next].type != G_ALT;
            int base = cont ? len : len - 1;
            if (base + 1 > GSTATE_MAX_DEPTH) {
                x->overflow = 1;
                break;
            }
            if (nw == cap) {
                xframe *w = work == small ? malloc((size_t)cap * 2 * sizeof *w) : realloc(work, (size_t)cap * 2 * sizeof *w);
                if (!w) {
                    x->st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
                    goto out;
                }
                if (work == small) memcpy(w, small, sizeof small);
                work = w;
                cap *= 2;
            }
            if (cont) x->fr[len - 1] = next;
            int a = x->g->rule_start[el[p].val];
            work[nw++] = (xframe){len, p, a, base};
            x->fr[base] = a;
            len = base + 1;
        }
        /* up: the innermost reference with an alternative left */
        for (;;) {
            if (nw == 0) goto out;
            xframe *f = &work[nw - 1];
            int a = f->a;
            while (el[a].type != G_ALT && el[a].type != G_END) a++;
            if (el[a].type == G_END) {
                x->fr[f->len - 1] = f->p;
                nw--;
                continue;
            }
            f->a = a + 1;
            x->fr[f->base] = f->a;
            len = f->base + 1;
            break;
        }
    }
out:
    if (work != small) free(work);
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
    o->overflow = 0;
}

clf_status clf_gstate_start(const clf_grammar *g, gstate *out) {
    expander *e = &t_exp;
    e->g = g;
    e->out = out;
    e->st = CLF_OK;
    e->steps = 0;
    e->overflow = 0;
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
    out->overflow = e->overflow;
    return e->st != CLF_OK ? e->st : canonical(g, out);
}

/* Whether set s holds byte b and no other: a literal's character (or a
 * one-byte class, which reads alike). */
static int only_byte(const uint64_t *s, unsigned b) {
    for (int w = 0; w < 4; w++)
        if (s[w] != ((unsigned)w == b >> 6 ? 1ull << (b & 63) : 0)) return 0;
    return 1;
}

/* One byte's step; literal: from the stacks whose top is that byte alone. */
static clf_status advance(const clf_grammar *g, const gstate *in, unsigned b, int literal, gstate *out) {
    reset(out);
    if (!gset_has(in->tops, b)) return canonical(g, out);
    expander *e = &t_exp;
    e->g = g;
    e->out = out;
    e->st = CLF_OK;
    e->steps = 0;
    e->overflow = 0;
    for (int k = 0; k < in->n && e->st == CLF_OK; k += in->d[k] + 1) {
        int len = in->d[k];
        if (!len) continue;
        const int32_t *s = in->d + k + 1;
        int top = s[len - 1];
        if (!gset_has(g->sets[g->el[top].val], b) || (literal && !only_byte(g->sets[g->el[top].val], b))) continue;
        memcpy(e->fr, s, (size_t)len * sizeof *s);
        e->fr[len - 1] = top + 1;
        expand(e, len);
    }
    out->overflow = e->overflow;
    return e->st != CLF_OK ? e->st : canonical(g, out);
}

clf_status clf_gstate_advance(const clf_grammar *g, const gstate *in, unsigned b, gstate *out) {
    return advance(g, in, b, 0, out);
}

clf_status clf_gstate_advance_literal(const clf_grammar *g, const gstate *in, unsigned b, gstate *out) {
    return advance(g, in, b, 1, out);
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
    out->overflow = in->overflow;
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

/* Whether no byte continues s only because every way on nests past
 * GSTATE_MAX_DEPTH (a recursive grammar's depth is the text's: met while
 * matching, not when compiling). Asked where no token continues the text. */
int clf_gstate_at_limit(const clf_grammar *g, const gstate *s) {
    gstate next = {0};
    int overflow = 0, goes_on = 0;
    for (unsigned b = 0; b < 256 && !goes_on; b++) {
        if (!gset_has(s->tops, b)) continue;
        if (clf_gstate_advance(g, s, b, &next) != CLF_OK) break;
        goes_on = next.n_stacks > 0;
        overflow |= next.overflow;
    }
    clf_gstate_free(&next);
    return overflow && !goes_on;
}

/* The state s's masks are kept under: s with every bounded repetition's
 * optional rule O_k, k > depth, read as O_depth (grammar_impl.h, chain_k).
 * Exact for the masks of tokens of at most `depth` bytes: O_k and O_depth
 * differ only after depth more x's, each at least a byte, and the frames
 * above and below are the same. So the positions 1..n - depth of a
 * string's char{1,n} share one mask instead of one each. *mapped: whether
 * any position moved (else out is a copy of s). depth < 2: no mapping (O_1
 * has another shape than the O_k above it). */
clf_status clf_gstate_mask_key(const clf_grammar *g, const gstate *s, int depth, gstate *out, int *mapped) {
    *mapped = 0;
    CLF_TRY(clf_gstate_copy(s, out));
    if (depth < 2) return CLF_OK;
    for (int k = 0; k < out->n; k += out->d[k] + 1)
        for (int i = 1; i <= out->d[k]; i++) {
            int32_t p = out->d[k + i];
            int r = g->el_rule[p], c = g->chain_k[r];
            if (c <= depth) continue;
            int to = r - (c - depth);
            out->d[k + i] = g->rule_start[to] + (p - g->rule_start[r]);
            *mapped = 1;
        }
    return *mapped ? canonical(g, out) : CLF_OK;
}

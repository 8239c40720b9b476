/* Token masks: the vocabulary as a byte trie, walked with a grammar state
 * (a token is allowed when the automaton takes all its bytes), and the
 * masks kept per state so that a state seen again costs a lookup. Most
 * states of a structured reply recur (inside a string, after a comma),
 * and one grammar serves every request that uses it. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar_impl.h"
#include "tokenizer.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the trie ------------------------------------------------------------- */

/* Nodes in depth-first order: a node's children follow it, each child's
 * subtree ends where its `end` says, so the next sibling is nodes[end]. */
typedef struct tnode {
    int32_t end;          /* one past this node's subtree */
    int32_t tok_lo, tok_hi; /* the tokens that end here: ids[tok_lo, tok_hi) */
    uint8_t byte;         /* the edge into this node */
} tnode;

struct clf_vocab_trie {
    tnode *nodes;
    int n_nodes, cap_nodes;
    int32_t *ids; /* the text tokens sorted by their bytes */
    int n_ids, max_len;
    const char **piece;
    size_t *len;
};

static _Thread_local const clf_vocab_trie *g_trie_sort; /* for qsort: while building only */
static int cmp_piece(const void *x, const void *y) {
    const clf_vocab_trie *v = g_trie_sort;
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    size_t la = v->len[a], lb = v->len[b], n = la < lb ? la : lb;
    int c = memcmp(v->piece[a], v->piece[b], n);
    return c ? c : la < lb ? -1 : la > lb ? 1 : (a > b) - (a < b);
}

/* The node for the tokens ids[lo, hi), which share their first `depth`
 * bytes; returns its index, -1 out of memory. */
static int build(clf_vocab_trie *v, int lo, int hi, int depth, uint8_t byte) {
    if (v->n_nodes == v->cap_nodes) {
        int cap = v->cap_nodes ? v->cap_nodes * 2 : 4096;
        tnode *n = realloc(v->nodes, (size_t)cap * sizeof *n);
        if (!n) return -1;
        v->nodes = n;
        v->cap_nodes = cap;
    }
    int me = v->n_nodes++;
    int k = lo;
    while (k < hi && v->len[v->ids[k]] == (size_t)depth) k++; /* a prefix sorts first */
    v->nodes[me] = (tnode){.tok_lo = lo, .tok_hi = k, .byte = byte};
    while (k < hi) {
        uint8_t b = (uint8_t)v->piece[v->ids[k]][depth];
        int e = k;
        while (e < hi && (uint8_t)v->piece[v->ids[e]][depth] == b) e++;
        if (build(v, k, e, depth + 1, b) < 0) return -1;
        k = e;
    }
    v->nodes[me].end = v->n_nodes;
    return me;
}

clf_status clf_vocab_trie_build(const clf_tokenizer *t, clf_vocab_trie **out) {
    *out = NULL;
    int n = clf_tokenizer_n_vocab(t);
    clf_vocab_trie *v = calloc(1, sizeof *v);
    if (v) {
        v->ids = malloc((size_t)n * sizeof *v->ids);
        v->piece = malloc((size_t)n * sizeof *v->piece);
        v->len = malloc((size_t)n * sizeof *v->len);
    }
    if (!v || !v->ids || !v->piece || !v->len) {
        clf_vocab_trie_free(v);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory for the vocabulary's trie");
    }
    for (int id = 0; id < n; id++) {
        int type = clf_token_type(t, id);
        v->piece[id] = clf_token_piece(t, id, &v->len[id]);
        if (type == CLF_TOKEN_CONTROL || type == CLF_TOKEN_UNKNOWN || type == CLF_TOKEN_UNUSED || !v->piece[id] ||
            !v->len[id] || clf_token_is_eog(t, id))
            continue;
        v->ids[v->n_ids++] = id;
        if ((int)v->len[id] > v->max_len) v->max_len = (int)v->len[id];
    }
    g_trie_sort = v;
    qsort(v->ids, (size_t)v->n_ids, sizeof *v->ids, cmp_piece);
    g_trie_sort = NULL;
    if (build(v, 0, v->n_ids, 0, 0) < 0) {
        clf_vocab_trie_free(v);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory for the vocabulary's trie");
    }
    *out = v;
    return CLF_OK;
}

void clf_vocab_trie_free(clf_vocab_trie *v) {
    if (!v) return;
    free(v->nodes);
    free(v->ids);
    free(v->piece);
    free(v->len);
    free(v);
}

/* ---- masks ----------------------------------------------------------------- */

typedef struct mask_entry {
    uint64_t hash;
    int32_t *key; /* the state's stacks, key_n int32s; NULL: an empty slot */
    int key_n;
    uint64_t *bits; /* [n_words] */
    int n_allowed;
} mask_entry;

/* What the masks may keep before they are all forgotten. */
enum { MASKS_BUDGET = 64 << 20 };

struct clf_grammar_masks {
    const clf_grammar *g;
    const clf_vocab_trie *v;
    int n_vocab, n_words;
    pthread_mutex_t lock;
    mask_entry *tab; /* open addressing, cap a power of two */
    int cap, used;
    size_t bytes;
    long computed, hits;
    double seconds;
    gstate *depth; /* [v->max_len + 1]: a trie walk's state at each depth */
};

clf_status clf_grammar_masks_create(const clf_grammar *g, const clf_vocab_trie *v, int n_vocab,
                                    clf_grammar_masks **out) {
    *out = NULL;
    clf_grammar_masks *gm = calloc(1, sizeof *gm);
    if (!gm) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    *gm = (clf_grammar_masks){.g = g, .v = v, .n_vocab = n_vocab, .n_words = (n_vocab + 63) / 64, .cap = 64};
    gm->tab = calloc((size_t)gm->cap, sizeof *gm->tab);
    gm->depth = calloc((size_t)v->max_len + 2, sizeof *gm->depth);
    if (!gm->tab || !gm->depth) {
        free(gm->tab);
        free(gm->depth);
        free(gm);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    }
    pthread_mutex_init(&gm->lock, NULL);
    *out = gm;
    return CLF_OK;
}

static void forget(clf_grammar_masks *gm) {
    for (int i = 0; i < gm->cap; i++) {
        free(gm->tab[i].key);
        free(gm->tab[i].bits);
        gm->tab[i] = (mask_entry){0};
    }
    gm->used = 0;
    gm->bytes = 0;
}

void clf_grammar_masks_free(clf_grammar_masks *gm) {
    if (!gm) return;
    forget(gm);
    free(gm->tab);
    for (int d = 0; d <= gm->v->max_len + 1; d++) clf_gstate_free(&gm->depth[d]);
    free(gm->depth);
    pthread_mutex_destroy(&gm->lock);
    free(gm);
}

/* Depth-first over the trie below `node` with state s (at depth d): a
 * child whose byte the state takes keeps its tokens and is walked on; a
 * byte it refuses prunes the subtree. */
static clf_status walk(clf_grammar_masks *gm, int node, const gstate *s, int d, uint64_t *bits, int *n) {
    const tnode *nodes = gm->v->nodes;
    gstate *next = &gm->depth[d];
    for (int c = node + 1; c < nodes[node].end; c = nodes[c].end) {
        unsigned b = nodes[c].byte;
        if (!gset_has(s->tops, b)) continue;
        CLF_TRY(clf_gstate_advance(gm->g, s, b, next));
        if (!next->n_stacks) continue;
        for (int k = nodes[c].tok_lo; k < nodes[c].tok_hi; k++) {
            int32_t id = gm->v->ids[k];
            bits[id >> 6] |= 1ull << (id & 63);
            (*n)++;
        }
        if (nodes[c].end > c + 1) CLF_TRY(walk(gm, c, next, d + 1, bits, n));
    }
    return CLF_OK;
}

static mask_entry *find(clf_grammar_masks *gm, const gstate *s, uint64_t h) {
    for (int i = (int)(h & (uint64_t)(gm->cap - 1));; i = (i + 1) & (gm->cap - 1)) {
        mask_entry *e = &gm->tab[i];
        if (!e->key) return e;
        if (e->hash == h && e->key_n == s->n && (!s->n || !memcmp(e->key, s->d, (size_t)s->n * sizeof *s->d))) return e;
    }
}

static clf_status grow_table(clf_grammar_masks *gm) {
    mask_entry *old = gm->tab;
    int old_cap = gm->cap;
    mask_entry *tab = calloc((size_t)old_cap * 2, sizeof *tab);
    if (!tab) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    gm->tab = tab;
    gm->cap = old_cap * 2;
    for (int i = 0; i < old_cap; i++)
        if (old[i].key) {
            int k = (int)(old[i].hash & (uint64_t)(gm->cap - 1));
            while (tab[k].key) k = (k + 1) & (gm->cap - 1);
            tab[k] = old[i];
        }
    free(old);
    return CLF_OK;
}

/* The entry for s, computed when new; under the lock. */
static clf_status lookup(clf_grammar_masks *gm, const gstate *s, mask_entry **out) {
    uint64_t h = clf_gstate_hash(s);
    mask_entry *e = find(gm, s, h);
    if (e->key) {
        gm->hits++;
        *out = e;
        return CLF_OK;
    }
    size_t need = (size_t)gm->n_words * 8 + (size_t)s->n * 4 + sizeof *e;
    if (gm->bytes + need > MASKS_BUDGET) forget(gm);
    if ((gm->used + 1) * 2 > gm->cap) CLF_TRY(grow_table(gm));
    double t0 = now_s();
    uint64_t *bits = calloc((size_t)gm->n_words, sizeof *bits);
    int32_t *key = malloc((size_t)(s->n ? s->n : 1) * sizeof *key);
    if (!bits || !key) {
        free(bits);
        free(key);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    }
    int n = 0;
    clf_status st = gm->v->nodes ? walk(gm, 0, s, 0, bits, &n) : CLF_OK;
    if (st != CLF_OK) {
        free(bits);
        free(key);
        return st;
    }
    if (s->n) memcpy(key, s->d, (size_t)s->n * sizeof *key);
    e = find(gm, s, h); /* the table may have grown */
    *e = (mask_entry){.hash = h, .key = key, .key_n = s->n, .bits = bits, .n_allowed = n};
    gm->used++;
    gm->bytes += need;
    gm->computed++;
    gm->seconds += now_s() - t0;
    *out = e;
    return CLF_OK;
}

clf_status clf_grammar_masks_apply(clf_grammar_masks *gm, const gstate *s, float *logits, int *n_allowed) {
    pthread_mutex_lock(&gm->lock);
    mask_entry *e = NULL;
    clf_status st = lookup(gm, s, &e);
    if (st == CLF_OK) {
        const uint64_t *bits = e->bits;
        for (int w = 0; w < gm->n_words; w++) {
            uint64_t m = bits[w];
            if (m == ~0ull) continue;
            int lo = w * 64, hi = lo + 64 < gm->n_vocab ? lo + 64 : gm->n_vocab;
            for (int i = lo; i < hi; i++)
                if (!(m >> (i - lo) & 1)) logits[i] = -INFINITY;
        }
        *n_allowed = e->n_allowed;
    }
    pthread_mutex_unlock(&gm->lock);
    return st;
}

void clf_grammar_masks_stats(clf_grammar_masks *gm, long *computed, long *hits, double *seconds) {
    pthread_mutex_lock(&gm->lock);
    *computed = gm->computed;
    *hits = gm->hits;
    *seconds = gm->seconds;
    pthread_mutex_unlock(&gm->lock);
}

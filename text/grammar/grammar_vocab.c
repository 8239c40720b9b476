/* Token masks: the vocabulary as a byte trie, walked with a grammar state
 * (a token is allowed when the automaton takes all its bytes), and the
 * masks kept per state (over a lazily built DFA of the states, below) so
 * that a state seen again costs a lookup. Most
 * states of a structured reply recur (inside a string, after a comma),
 * and one grammar serves every request that uses it.
 *
 * What makes it fast (issue 41 item 5; bench/RESULTS.md has the figures),
 * chosen to fit the pushdown matcher as it is (sets of stacks, exact):
 *  - the trie: shared prefixes are stepped once and a refused byte prunes
 *    its subtree (llguidance's and XGrammar's walk), on an explicit stack
 *    reading each DFA state's 256-entry transition row;
 *  - byte classes: bytes that every byte set of the grammar holds alike
 *    step every state alike, so one automaton step fills a row for its
 *    whole class (a string's letters: one step, not 52);
 *  - tiers and keys: a repetition x{m,n} compiles to a chain of optional
 *    rules, and char{1,80} made 80 states, each a fresh walk of nearly
 *    the whole vocabulary (the cost of a cold mask in a string). A token
 *    of L bytes cannot tell O_k from O_L apart when k > L (each x reads a
 *    byte), so the tokens are split by length into tiers (<= 8, 16, 32
 *    bytes, longer) and each tier's mask is kept under the state with its
 *    far chain positions read as near ones (clf_gstate_mask_key): most
 *    positions of a string share the short tiers' masks, and only the few
 *    long tokens are walked again. XGrammar's split of context-independent
 *    tokens per grammar position needs rule inlining to pay off on these
 *    grammars (a JSON string's char rule pops after each byte), which this
 *    matcher does not have: the keys get the same sharing for the
 *    repetition chains that cause the walks.
 *  - a tier's mask that allows few tokens is kept as their ids, not a
 *    bitset (a cold state's 4 zeroed 32 KB bitsets on Gemma 3 were most of
 *    a small mask's cost), and apply ORs the tiers into one bitset;
 *  - applying a kept mask: a word of 64 tokens at a time (all refused: one
 *    fill; mixed: 8 logits blended at once from a byte table), not a bit
 *    at a time (150 us a kept mask on SmolLM2 before, 580 on Gemma 3). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grammar_impl.h"
#include "tokenizer.h"

int clf_grammar_token_is_text(const clf_tokenizer *t, int32_t id, const char **piece, size_t *len) {
    int type = clf_token_type(t, id);
    *piece = clf_token_piece(t, id, len);
    return *piece && *len && type != CLF_TOKEN_CONTROL && type != CLF_TOKEN_UNKNOWN && type != CLF_TOKEN_UNUSED &&
           !clf_token_is_eog(t, id);
}

/* ---- the trie ------------------------------------------------------------- */

/* Nodes in depth-first order: a node's children follow it, each child's
 * subtree ends where its `end` says, so the next sibling is nodes[end]. */
typedef struct tnode {
    int32_t end;          /* one past this node's subtree */
    int32_t tok_lo, tok_hi; /* the tokens that end here: ids[tok_lo, tok_hi) */
    uint8_t byte;         /* the edge into this node */
} tnode;

/* The tokens in tiers by their length, a trie each: a mask is kept per
 * tier, under the state as far as the tier's longest token sees it
 * (clf_gstate_mask_key), so the short tokens' mask is shared by the far
 * positions of a repetition (char{1,80}) that the long tokens tell apart. */
enum { N_TIERS = 4 };
static const int TIER_MAX[N_TIERS] = {8, 16, 32, 1 << 30}; /* a tier's longest token, bytes */

struct clf_vocab_trie {
    tnode *nodes; /* the tiers' tries one after the other */
    int n_nodes, cap_nodes;
    int32_t *ids; /* the text tokens by tier, each tier's sorted by their bytes */
    int n_ids;
    int depth; /* the longest token's bytes: the deepest node */
    int root[N_TIERS], tier_depth[N_TIERS]; /* each tier's root node (-1: no token) and longest token */
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
    if (depth > v->depth) v->depth = depth;
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
    for (int id = 0; id < n; id++)
        if (clf_grammar_token_is_text(t, id, &v->piece[id], &v->len[id])) v->ids[v->n_ids++] = id;
    g_trie_sort = v;
    qsort(v->ids, (size_t)v->n_ids, sizeof *v->ids, cmp_piece);
    g_trie_sort = NULL;
    /* a stable partition into the tiers (each stays sorted), then a trie each */
    int32_t *sorted = malloc((size_t)(v->n_ids ? v->n_ids : 1) * sizeof *sorted);
    if (!sorted) {
        clf_vocab_trie_free(v);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory for the vocabulary's trie");
    }
    memcpy(sorted, v->ids, (size_t)v->n_ids * sizeof *sorted);
    int k = 0, st_ok = 1;
    for (int t = 0; t < N_TIERS; t++) {
        int lo = k, min = t ? TIER_MAX[t - 1] : 0;
        v->tier_depth[t] = 0;
        for (int i = 0; i < v->n_ids; i++) {
            int l = (int)v->len[sorted[i]];
            if (l > min && l <= TIER_MAX[t]) {
                v->ids[k++] = sorted[i];
                if (l > v->tier_depth[t]) v->tier_depth[t] = l;
            }
        }
        v->root[t] = k > lo ? v->n_nodes : -1;
        if (k > lo && build(v, lo, k, 0, 0) < 0) st_ok = 0;
    }
    free(sorted);
    if (!st_ok) {
        clf_vocab_trie_free(v);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory for the vocabulary's trie");
    }
    *out = v;
    return CLF_OK;
}

int clf_vocab_trie_depth(const clf_vocab_trie *v) { return v->depth; }

void clf_vocab_trie_free(clf_vocab_trie *v) {
    if (!v) return;
    free(v->nodes);
    free(v->ids);
    free(v->piece);
    free(v->len);
    free(v);
}

/* ---- masks: a lazily built DFA over the automaton's states ---------------- */

/* Every state a walk meets is interned with its transitions filled in as
 * they are taken: inside a string nearly every byte leads back to a state
 * already seen, so walking the trie costs a table read a node once the
 * grammar's common states are known, and the masks of states seen before
 * are kept. Both are forgotten together past MASKS_BUDGET bytes. */
enum { MASKS_BUDGET = 64 << 20, DEAD = -2, UNKNOWN = -1 }; /* a grammar's: a server keeps a few */

typedef struct dstate {
    gstate st;
    uint64_t hash;
    int32_t *next;  /* [256] the state after each byte (UNKNOWN, DEAD), allocated at the first step */
    /* each tier's mask once asked for (done): as a bitset [n_words] where
     * it allows many tokens, else as their ids [n_allowed] (a long tokens'
     * tier allows a few hundred: 1 KB, not Gemma's 32 KB a state) */
    uint64_t *bits[N_TIERS];
    int32_t *list[N_TIERS];
    int n_allowed[N_TIERS];
    uint8_t done[N_TIERS];
} dstate;

struct clf_grammar_masks {
    const clf_grammar *g;
    const clf_vocab_trie *v;
    int n_vocab, n_words;
    pthread_mutex_t lock;
    dstate *st; /* [n_st] interned states */
    int n_st, cap_st;
    int32_t *tab; /* [tab_cap] open addressing over st by hash: -1 empty */
    int tab_cap;
    /* the grammar's byte classes: bytes every byte set of the grammar
     * holds both or neither of step every state alike (a step reads a byte
     * only through its sets), so one step fills the row for its class */
    uint8_t cls[256];           /* each byte's class */
    uint8_t members[256];       /* the bytes class by class: members[mstart[k], mstart[k + 1]) */
    int16_t mstart[257];
    int n_cls;
    size_t bytes;
    long computed, hits;
    double seconds;
    gstate scratch;
    int key_depth[N_TIERS]; /* a tier's longest token where the grammar has a longer repetition chain, else 0 */
    gstate key;             /* a state's mask key (clf_gstate_mask_key) */
    uint64_t *wbits; /* [n_words] a walk's mask, all clear between walks */
    uint64_t *ubits; /* [n_words] apply's union of the tiers' masks */
    /* preserved tokens (clf_grammar_masks_preserve): control tokens kept
     * out of the shared trie, checked one by one at each apply */
    int32_t *pres;         /* [n_pres] their ids */
    const char **pres_piece; /* [n_pres] their bytes */
    size_t *pres_len;
    float *pres_saved;     /* [n_pres] their logits while the mask runs */
    int n_pres;
    gstate px, py;         /* apply's reading of one */
};

/* keep[m][i]: all ones where bit i of the byte m is set, else 0: a
 * mixed word is applied 8 logits at a time as (x & keep) | (-inf & ~keep)
 * on the floats' bits (a loop the compiler vectorises without AVX; the
 * clear bits of a mask in a string, scattered, cost a store each else). */
static uint32_t g_keep[256][8];
static pthread_once_t g_keep_once = PTHREAD_ONCE_INIT;
static void keep_init(void) {
    for (int m = 0; m < 256; m++)
        for (int i = 0; i < 8; i++) g_keep[m][i] = m >> i & 1 ? 0xffffffffu : 0;
}

/* Partition refinement of the 256 bytes by every byte set of g: a class
 * splits in two where a set holds some of its bytes and not the others
 * (n_sets x 256 steps, stopping once every byte is alone). */
static void byte_classes(const clf_grammar *g, clf_grammar_masks *gm) {
    memset(gm->cls, 0, sizeof gm->cls);
    int n = 1;
    for (int s = 0; s < g->n_sets && n < 256; s++) {
        int16_t split[256]; /* per class: the class its bytes in s go to, -1 none yet */
        for (int k = 0; k < n; k++) split[k] = -1;
        /* the first byte met of each class keeps its class's id for its side */
        int16_t side0[256];
        for (int k = 0; k < n; k++) side0[k] = -1;
        for (unsigned b = 0; b < 256; b++) {
            int k = gm->cls[b], in = gset_has(g->sets[s], b);
            if (side0[k] < 0) side0[k] = (int16_t)in; /* this side keeps k */
            if (in == side0[k]) continue;
            if (split[k] < 0) split[k] = (int16_t)n++;
            gm->cls[b] = (uint8_t)split[k];
        }
    }
    gm->n_cls = n;
    int16_t fill[257] = {0};
    for (unsigned b = 0; b < 256; b++) fill[gm->cls[b] + 1]++;
    for (int k = 0; k < n; k++) fill[k + 1] += fill[k];
    memcpy(gm->mstart, fill, sizeof fill);
    for (unsigned b = 0; b < 256; b++) gm->members[fill[gm->cls[b]]++] = (uint8_t)b;
}

clf_status clf_grammar_masks_create(const clf_grammar *g, const clf_vocab_trie *v, int n_vocab,
                                    clf_grammar_masks **out) {
    *out = NULL;
    clf_grammar_masks *gm = calloc(1, sizeof *gm);
    if (!gm) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    *gm = (clf_grammar_masks){.g = g, .v = v, .n_vocab = n_vocab, .n_words = (n_vocab + 63) / 64, .tab_cap = 1024};
    gm->tab = malloc((size_t)gm->tab_cap * sizeof *gm->tab);
    gm->wbits = calloc((size_t)gm->n_words + 1, sizeof *gm->wbits);
    gm->ubits = calloc((size_t)gm->n_words + 1, sizeof *gm->ubits);
    if (!gm->tab || !gm->wbits || !gm->ubits) {
        free(gm->tab);
        free(gm->wbits);
        free(gm->ubits);
        free(gm);
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    }
    memset(gm->tab, 0xff, (size_t)gm->tab_cap * sizeof *gm->tab);
    byte_classes(g, gm);
    for (int t = 0; t < N_TIERS; t++)
        for (int r = 0; r < g->n_rules && v->tier_depth[t] >= 2; r++)
            if (g->chain_k[r] > v->tier_depth[t]) gm->key_depth[t] = v->tier_depth[t];
    pthread_once(&g_keep_once, keep_init);
    pthread_mutex_init(&gm->lock, NULL);
    *out = gm;
    return CLF_OK;
}

static void forget(clf_grammar_masks *gm) {
    for (int i = 0; i < gm->n_st; i++) {
        clf_gstate_free(&gm->st[i].st);
        free(gm->st[i].next);
        for (int t = 0; t < N_TIERS; t++) free(gm->st[i].bits[t]), free(gm->st[i].list[t]);
    }
    gm->n_st = 0;
    gm->bytes = 0;
    memset(gm->tab, 0xff, (size_t)gm->tab_cap * sizeof *gm->tab);
}

void clf_grammar_masks_free(clf_grammar_masks *gm) {
    if (!gm) return;
    forget(gm);
    free(gm->st);
    free(gm->tab);
    clf_gstate_free(&gm->scratch);
    clf_gstate_free(&gm->key);
    free(gm->wbits);
    free(gm->ubits);
    free(gm->pres);
    free(gm->pres_piece);
    free(gm->pres_len);
    free(gm->pres_saved);
    clf_gstate_free(&gm->px);
    clf_gstate_free(&gm->py);
    pthread_mutex_destroy(&gm->lock);
    free(gm);
}

static int same(const gstate *a, const gstate *b) {
    return a->n == b->n && (!a->n || !memcmp(a->d, b->d, (size_t)a->n * sizeof *a->d));
}

/* s's id, interned when new (-1: out of memory, the message set). */
static int intern(clf_grammar_masks *gm, const gstate *s) {
    uint64_t h = clf_gstate_hash(s);
    int mask = gm->tab_cap - 1, i = (int)(h & (uint64_t)mask);
    for (; gm->tab[i] >= 0; i = (i + 1) & mask) {
        const dstate *d = &gm->st[gm->tab[i]];
        if (d->hash == h && same(&d->st, s)) return gm->tab[i];
    }
    if ((gm->n_st + 1) * 2 > gm->tab_cap) { /* grow the table, then find the slot again */
        int cap = gm->tab_cap * 2;
        int32_t *t = malloc((size_t)cap * sizeof *t);
        if (!t) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory"), -1;
        memset(t, 0xff, (size_t)cap * sizeof *t);
        for (int k = 0; k < gm->n_st; k++) {
            int j = (int)(gm->st[k].hash & (uint64_t)(cap - 1));
            while (t[j] >= 0) j = (j + 1) & (cap - 1);
            t[j] = k;
        }
        free(gm->tab);
        gm->tab = t;
        gm->tab_cap = cap;
        mask = cap - 1;
        for (i = (int)(h & (uint64_t)mask); gm->tab[i] >= 0; i = (i + 1) & mask) {}
    }
    if (gm->n_st == gm->cap_st) {
        int cap = gm->cap_st ? gm->cap_st * 2 : 256;
        dstate *n = realloc(gm->st, (size_t)cap * sizeof *n);
        if (!n) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory"), -1;
        gm->st = n;
        gm->cap_st = cap;
    }
    dstate *d = &gm->st[gm->n_st];
    *d = (dstate){.hash = h};
    if (clf_gstate_copy(s, &d->st) != CLF_OK) return -1;
    gm->bytes += sizeof *d + (size_t)s->n * sizeof *s->d;
    gm->tab[i] = gm->n_st;
    return gm->n_st++;
}

/* State id's transition row, made at its first step: DEAD for the bytes
 * its tops refuse, UNKNOWN for the others until taken (NULL: out of
 * memory, the message set). The rows are allocated one by one, so a
 * pointer to one stays valid while gm->st grows. */
static int32_t *next_row(clf_grammar_masks *gm, int id) {
    dstate *d = &gm->st[id];
    if (d->next) return d->next;
    if (!(d->next = malloc(256 * sizeof *d->next))) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory"), NULL;
    for (unsigned b = 0; b < 256; b++) d->next[b] = gset_has(d->st.tops, b) ? UNKNOWN : DEAD;
    gm->bytes += 256 * sizeof *d->next;
    return d->next;
}

/* The state after byte b from state id when its row says UNKNOWN: the
 * automaton's step, interned (an id or DEAD; -1 with *st set). */
static int step_slow(clf_grammar_masks *gm, int id, unsigned b, clf_status *st) {
    if ((*st = clf_gstate_advance(gm->g, &gm->st[id].st, b, &gm->scratch)) != CLF_OK) return -1;
    int n = gm->scratch.n_stacks ? intern(gm, &gm->scratch) : DEAD; /* may move gm->st */
    if (n == -1) {
        *st = CLF_ERR_MEMORY;
        return -1;
    }
    int32_t *row = gm->st[id].next;
    int k = gm->cls[b];
    for (int i = gm->mstart[k]; i < gm->mstart[k + 1]; i++) row[gm->members[i]] = n; /* the class steps alike */
    return n;
}

/* Depth-first over the trie from state id, on an explicit stack of the
 * nodes being walked (one frame a byte of the longest token): a child
 * whose byte the state takes keeps its tokens and is walked on, a byte it
 * refuses prunes the subtree. Each step is a read of the state's row
 * (nodes are in depth-first order, so the walk reads them forward); only a
 * transition never taken before steps the automaton. */
typedef struct wframe {
    int32_t c, end;      /* the next child to visit, and one past the last */
    const int32_t *row;  /* the state's transitions */
    int32_t id;          /* the state at this node */
} wframe;

static clf_status walk(clf_grammar_masks *gm, int root, int id, uint64_t *bits, int *n) {
    const tnode *nodes = gm->v->nodes;
    const int32_t *ids = gm->v->ids;
    wframe small[64], *fr = small;
    if (gm->v->depth + 2 > 64 && !(fr = malloc((size_t)(gm->v->depth + 2) * sizeof *fr)))
        return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    clf_status st = CLF_OK;
    int top = 0, count = 0;
    const int32_t *row = next_row(gm, id);
    if (!row) st = CLF_ERR_MEMORY;
    else fr[0] = (wframe){root + 1, nodes[root].end, row, id};
    while (st == CLF_OK && top >= 0) {
        wframe *f = &fr[top];
        if (f->c >= f->end) { /* this node's children are done */
            top--;
            continue;
        }
        int c = f->c;
        const tnode *nd = &nodes[c];
        f->c = nd->end;
        int next = f->row[nd->byte];
        if (next == DEAD) continue;
        if (next == UNKNOWN && (next = step_slow(gm, f->id, nd->byte, &st)) < 0) {
            if (next == DEAD) continue;
            break;
        }
        for (int k = nd->tok_lo; k < nd->tok_hi; k++) bits[ids[k] >> 6] |= 1ull << (ids[k] & 63);
        count += nd->tok_hi - nd->tok_lo;
        if (nd->end > c + 1) { /* on below it */
            if (!(row = next_row(gm, next))) {
                st = CLF_ERR_MEMORY;
                break;
            }
            fr[++top] = (wframe){c + 1, nd->end, row, next};
        }
    }
    if (fr != small) free(fr);
    *n = count;
    return st;
}

/* logits[i] = -INFINITY for every i whose bit is clear, a word at a time:
 * a run of all-clear words is one fill, an all-set word is skipped, a
 * mixed one blended by its bytes (above); the vocabulary's last, partial
 * word bit by bit. */
static void mask_row(const uint64_t *bits, int n_words, int n_vocab, float *logits) {
    const float ninf = -INFINITY;
    uint32_t ninf_bits;
    memcpy(&ninf_bits, &ninf, sizeof ninf_bits);
    for (int w = 0; w < n_words;) {
        uint64_t m = bits[w];
        int lo = w * 64, hi = lo + 64 < n_vocab ? lo + 64 : n_vocab;
        if (!m) {
            int e = w + 1;
            while (e < n_words && !bits[e]) e++;
            float *p = logits + lo;
            size_t k = (size_t)((e * 64 < n_vocab ? e * 64 : n_vocab) - lo);
            for (size_t i = 0; i < k; i++) p[i] = -INFINITY;
            w = e;
            continue;
        }
        w++;
        if (m == ~0ull) continue;
        if (hi - lo < 64) {
            uint64_t z = ~m & ((1ull << (hi - lo)) - 1);
            for (; z; z &= z - 1) logits[lo + __builtin_ctzll(z)] = -INFINITY;
            continue;
        }
        for (int j = 0; j < 8; j++) {
            const uint32_t *k = g_keep[m >> (8 * j) & 0xff];
            uint32_t x[8];
            memcpy(x, logits + lo + 8 * j, sizeof x);
            for (int i = 0; i < 8; i++) x[i] = (x[i] & k[i]) | (ninf_bits & ~k[i]);
            memcpy(logits + lo + 8 * j, x, sizeof x);
        }
    }
}

/* The mask of tier t's tokens for state s: kept under s's key for the
 * tier (its far repetition positions as near ones), computed by walking
 * the tier's trie when first asked; OR'd into gm->ubits, *n: how many it
 * allows, *walked set when it was computed now. */
static clf_status tier_mask(clf_grammar_masks *gm, int t, const gstate *s, int *n, int *walked) {
    int mapped = 0, id;
    if (gm->key_depth[t]) CLF_TRY(clf_gstate_mask_key(gm->g, s, gm->key_depth[t], &gm->key, &mapped));
    if ((id = intern(gm, mapped ? &gm->key : s)) < 0) return CLF_ERR_MEMORY; /* the message is set */
    if (!gm->st[id].done[t]) {
        double t0 = clf_now_s();
        int k = 0;
        clf_status st = walk(gm, gm->v->root[t], id, gm->wbits, &k);
        uint64_t *bits = NULL;
        int32_t *list = NULL;
        size_t size = 0;
        if (st == CLF_OK && k < 2 * gm->n_words) { /* few: their ids (smaller than the bitset) */
            if (k && !(list = malloc((size_t)k * sizeof *list))) st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
            for (int w = 0, j = 0; list && w < gm->n_words; w++)
                for (uint64_t m = gm->wbits[w]; m; m &= m - 1) list[j++] = w * 64 + __builtin_ctzll(m);
            size = (size_t)k * sizeof *list;
        } else if (st == CLF_OK) {
            if (!(bits = malloc((size_t)gm->n_words * sizeof *bits))) st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
            else memcpy(bits, gm->wbits, (size_t)gm->n_words * sizeof *bits);
            size = (size_t)gm->n_words * sizeof *bits;
        }
        memset(gm->wbits, 0, (size_t)gm->n_words * sizeof *gm->wbits);
        if (st != CLF_OK) return st;
        gm->st[id].bits[t] = bits;
        gm->st[id].list[t] = list;
        gm->st[id].n_allowed[t] = k;
        gm->st[id].done[t] = 1;
        gm->bytes += size;
        gm->seconds += clf_now_s() - t0;
        *walked = 1;
    }
    const dstate *d = &gm->st[id];
    if (d->bits[t])
        for (int w = 0; w < gm->n_words; w++) gm->ubits[w] |= d->bits[t][w];
    else
        for (int j = 0; j < d->n_allowed[t]; j++) gm->ubits[d->list[t][j] >> 6] |= 1ull << (d->list[t][j] & 63);
    *n = d->n_allowed[t];
    return CLF_OK;
}

/* ---- preserved tokens ----------------------------------------------------- */

/* Reads p[0, n) (n > 0) from state s, byte by byte (literal: through the
 * grammar's literal characters only): *ok 1 with the state after in *x,
 * 0 when a byte is refused. *y is scratch; s may be x. */
static clf_status read_bytes(const clf_grammar *g, int literal, const gstate *s, const char *p, size_t n, gstate *x,
                             gstate *y, int *ok) {
    *ok = 0;
    for (size_t i = 0; i < n; i++) {
        const gstate *in = i ? x : s;
        CLF_TRY(literal ? clf_gstate_advance_literal(g, in, (unsigned char)p[i], y)
                        : clf_gstate_advance(g, in, (unsigned char)p[i], y));
        if (!y->n_stacks) return CLF_OK;
        gstate t = *x;
        *x = *y;
        *y = t;
    }
    *ok = 1;
    return CLF_OK;
}

/* The byte a set holds when it holds one alone, else -1. */
static int single_byte(const uint64_t *set) {
    int n = 0, b = -1;
    for (int w = 0; w < 4; w++)
        if (set[w]) {
            n += __builtin_popcountll(set[w]);
            b = w * 64 + __builtin_ctzll(set[w]);
        }
    return n == 1 ? b : -1;
}

clf_status clf_grammar_masks_preserve(clf_grammar_masks *gm, const clf_tokenizer *t) {
    const clf_grammar *g = gm->g;
    /* the grammar's literal runs: consecutive one-byte elements of a rule,
     * one after the other in text, each run's end in ends (ascending) */
    char *text = malloc((size_t)g->n_el + 1);
    int *ends = malloc(((size_t)g->n_el + 1) * sizeof *ends);
    int n_text = 0, n_runs = 0, n = clf_tokenizer_n_vocab(t);
    if (n > gm->n_vocab) n = gm->n_vocab;
    clf_status st = text && ends ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    for (int i = 0; st == CLF_OK && i <= g->n_el; i++) {
        int b = i < g->n_el && g->el[i].type == G_BYTES ? single_byte(g->sets[g->el[i].val]) : -1;
        if (b >= 0) text[n_text++] = (char)b;
        else if (n_runs == 0 || ends[n_runs - 1] != n_text) ends[n_runs++] = n_text; /* a run ends */
    }
    /* every control token, not an end one, whose bytes are inside a run */
    for (int id = 0; st == CLF_OK && id < n; id++) {
        size_t len = 0;
        const char *p = clf_token_piece(t, id, &len);
        if (!p || !len || clf_token_type(t, id) != CLF_TOKEN_CONTROL || clf_token_is_eog(t, id)) continue;
        /* memmem over all runs at once (linear: a schema's literals may be
         * megabytes), a match kept when it does not cross a run's end */
        int found = 0;
        for (const char *at = text, *e = text + n_text; !found && (at = memmem(at, (size_t)(e - at), p, len)); at++) {
            int k = (int)(at - text), lo = 0, hi = n_runs - 1; /* the run holding k: the first end > k */
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (ends[mid] > k) hi = mid;
                else lo = mid + 1;
            }
            found = k + (int)len <= ends[lo];
        }
        if (!found) continue;
        if (gm->n_pres % 16 == 0) { /* grow the four arrays by 16 */
            size_t cap = (size_t)gm->n_pres + 16;
            int32_t *a = realloc(gm->pres, cap * sizeof *a);
            if (a) gm->pres = a;
            const char **b = realloc(gm->pres_piece, cap * sizeof *b);
            if (b) gm->pres_piece = b;
            size_t *c = realloc(gm->pres_len, cap * sizeof *c);
            if (c) gm->pres_len = c;
            float *d = realloc(gm->pres_saved, cap * sizeof *d);
            if (d) gm->pres_saved = d;
            if (!a || !b || !c || !d) {
                st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
                break;
            }
        }
        gm->pres[gm->n_pres] = id;
        gm->pres_piece[gm->n_pres] = p;
        gm->pres_len[gm->n_pres++] = len;
    }
    free(text);
    free(ends);
    return st;
}

int clf_grammar_masks_n_preserved(const clf_grammar_masks *gm) { return gm->n_pres; }

int clf_grammar_masks_advance(const clf_grammar_masks *gm, const clf_tokenizer *t, int32_t id, gstate *cur,
                              gstate *tmp) {
    size_t len = 0;
    const char *p;
    int ok = 0, literal = 0;
    if (!clf_grammar_token_is_text(t, id, &p, &len)) { /* a preserved token, else refused */
        for (int k = 0; k < gm->n_pres && !literal; k++) literal = gm->pres[k] == id;
        if (!literal) return 0;
        p = clf_token_piece(t, id, &len);
    }
    return read_bytes(gm->g, literal, cur, p, len, cur, tmp, &ok) == CLF_OK && ok;
}

/* The tiers' masks of s OR'd into gm->ubits, counted as computed or found
 * kept; *n_allowed: how many tokens s allows. Under the lock. */
static clf_status union_mask(clf_grammar_masks *gm, const gstate *s, int *n_allowed) {
    clf_status st = CLF_OK;
    if (gm->bytes > MASKS_BUDGET) forget(gm);
    int total = 0, walked = 0;
    memset(gm->ubits, 0, (size_t)gm->n_words * sizeof *gm->ubits);
    for (int t = 0; t < N_TIERS && st == CLF_OK; t++) {
        int n = 0;
        if (gm->v->root[t] >= 0) st = tier_mask(gm, t, s, &n, &walked);
        total += n;
    }
    /* a preserved token: allowed where the grammar's literal characters
     * read its bytes (not kept: they are few), its bit set like a text
     * token's, so the row and the candidates read it alike */
    for (int k = 0; k < gm->n_pres && st == CLF_OK; k++) {
        int ok = 0;
        st = read_bytes(gm->g, 1, s, gm->pres_piece[k], gm->pres_len[k], &gm->px, &gm->py, &ok);
        if (ok && !(gm->ubits[gm->pres[k] >> 6] >> (gm->pres[k] & 63) & 1))
            gm->ubits[gm->pres[k] >> 6] |= 1ull << (gm->pres[k] & 63), total++;
    }
    if (st != CLF_OK) return st;
    if (walked) gm->computed++; /* a mask with any tier walked, else one found kept */
    else gm->hits++;
    *n_allowed = total;
    return CLF_OK;
}

clf_status clf_grammar_masks_apply(clf_grammar_masks *gm, const gstate *s, float *logits, int *n_allowed) {
    pthread_mutex_lock(&gm->lock);
    clf_status st = union_mask(gm, s, n_allowed);
    if (st == CLF_OK) mask_row(gm->ubits, gm->n_words, gm->n_vocab, logits);
    pthread_mutex_unlock(&gm->lock);
    return st;
}

clf_status clf_grammar_masks_filter(clf_grammar_masks *gm, const gstate *s, const int32_t *ids, int k,
                                    uint8_t *allowed, int *n_allowed, int32_t *refused, int n_refused) {
    pthread_mutex_lock(&gm->lock);
    clf_status st = union_mask(gm, s, n_allowed);
    /* a bit looked up per candidate: no row written */
    for (int i = 0; st == CLF_OK && i < k; i++)
        allowed[i] = ids[i] >= 0 && ids[i] < gm->n_vocab && (gm->ubits[ids[i] >> 6] >> (ids[i] & 63) & 1);
    /* the first refused ids, from the clear bits of the first words */
    int j = 0;
    for (int w = 0; st == CLF_OK && w < gm->n_words && j < n_refused; w++)
        for (uint64_t z = ~gm->ubits[w]; z && j < n_refused; z &= z - 1) {
            int id = w * 64 + __builtin_ctzll(z);
            if (id < gm->n_vocab) refused[j++] = id;
        }
    for (; j < n_refused; j++) refused[j] = -1;
    pthread_mutex_unlock(&gm->lock);
    return st;
}

clf_status clf_grammar_masks_bits(clf_grammar_masks *gm, const gstate *s, uint32_t *bits, int *n_allowed) {
    pthread_mutex_lock(&gm->lock);
    clf_status st = union_mask(gm, s, n_allowed);
    /* the 64-bit words as two 32-bit ones each, low half first (the
     * device's words; the last one only as far as the vocabulary goes) */
    const int words = (gm->n_vocab + 31) / 32;
    for (int w = 0; st == CLF_OK && w < words; w++) bits[w] = (uint32_t)(gm->ubits[w >> 1] >> (32 * (w & 1)));
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

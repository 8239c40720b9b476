/* --cache-ram (prompt_cache.h): a list of entries, each a prompt's tokens
 * and its state's bytes, looked up by a linear scan of common prefixes
 * (tens of entries at most in practice: each holds a whole conversation's
 * KV, megabytes). */
#include "prompt_cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    int32_t *tokens;
    int n;
    void *state; /* the slot file's bytes (clinfer_session_save_seq_buf) */
    size_t bytes;
    unsigned long long used; /* the cache's clock at its last store or load */
} entry;

struct srv_pcache {
    size_t max_bytes, bytes;
    entry *e;
    int n, cap;
    unsigned long long clock;
    srv_pcache_stats st;
};

clinfer_status srv_pcache_create(size_t max_bytes, srv_pcache **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    (*out)->max_bytes = max_bytes;
    return CLINFER_OK;
}

static void drop(srv_pcache *c, int i) {
    c->bytes -= c->e[i].bytes;
    free(c->e[i].tokens);
    clinfer_free(c->e[i].state);
    c->e[i] = c->e[--c->n];
}

void srv_pcache_free(srv_pcache *c) {
    if (!c) return;
    while (c->n) drop(c, c->n - 1);
    free(c->e);
    free(c);
}

static int common(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

void srv_pcache_put(srv_pcache *c, srv_engine *e, int slot, const int32_t *tokens, int n) {
    if (n <= 0) return;
    /* held already (a longer entry holds these tokens) */
    for (int i = 0; i < c->n; i++)
        if (common(c->e[i].tokens, c->e[i].n, tokens, n) == n) {
            c->e[i].used = ++c->clock;
            return;
        }
    entry en = {.n = n, .used = ++c->clock};
    if (c->n == c->cap) {
        const int cap = c->cap ? 2 * c->cap : 16;
        entry *g = realloc(c->e, (size_t)cap * sizeof *g);
        if (!g) return;
        c->e = g, c->cap = cap;
    }
    en.tokens = malloc((size_t)n * sizeof *tokens);
    if (!en.tokens || srv_engine_slot_save_buf(e, slot, tokens, n, &en.state, &en.bytes) != CLINFER_OK ||
        en.bytes > c->max_bytes) {
        free(en.tokens);
        clinfer_free(en.state);
        return;
    }
    memcpy(en.tokens, tokens, (size_t)n * sizeof *tokens);
    /* superseded: an entry that is a prefix of these tokens goes, once the
     * new one is saved (a failed save keeps it) */
    for (int i = 0; i < c->n; i++)
        if (common(c->e[i].tokens, c->e[i].n, tokens, n) == c->e[i].n) drop(c, i--);
    /* room: the least recently used entries go */
    while (c->n && c->bytes + en.bytes > c->max_bytes) {
        int lru = 0;
        for (int i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        drop(c, lru);
        c->st.evictions++;
    }
    c->e[c->n++] = en;
    c->bytes += en.bytes;
    c->st.stores++;
}

int srv_pcache_best(const srv_pcache *c, const int32_t *prompt, int n, int *len) {
    int best = -1;
    *len = 0;
    for (int i = 0; c && i < c->n; i++) {
        const int p = common(c->e[i].tokens, c->e[i].n, prompt, n);
        if (p > *len) best = i, *len = p;
    }
    return best;
}

int srv_pcache_len(const srv_pcache *c, int idx) { return c->e[idx].n; }

clinfer_status srv_pcache_load(srv_pcache *c, int idx, srv_engine *e, int slot, int32_t *out, int cap, int *n) {
    entry *en = &c->e[idx];
    clinfer_status st = srv_engine_slot_load_buf(e, slot, en->state, en->bytes, out, cap, n);
    if (st != CLINFER_OK) return st;
    en->used = ++c->clock;
    c->st.hits++;
    return CLINFER_OK;
}

void srv_pcache_stats_get(const srv_pcache *c, srv_pcache_stats *out) {
    *out = c->st;
    out->entries = c->n;
    out->bytes = c->bytes;
    out->max_bytes = c->max_bytes;
}

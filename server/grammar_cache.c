#include "grammar_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    char *key; /* the GBNF text */
    size_t len;
    clinfer_grammar *g; /* the cache's reference */
    unsigned long long used;
} entry;

struct srv_gcache {
    const clinfer_model *m;
    pthread_mutex_t mu;
    entry *e;
    int n, cap;
    unsigned long long clock, hits, misses;
};

clinfer_status srv_gcache_create(const clinfer_model *m, int capacity, srv_gcache **out) {
    srv_gcache *c = calloc(1, sizeof *c);
    *out = NULL;
    if (capacity < 1) capacity = 1;
    if (!c || !(c->e = calloc((size_t)capacity, sizeof *c->e))) {
        free(c);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    c->m = m;
    c->cap = capacity;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return CLINFER_OK;
}

void srv_gcache_free(srv_gcache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        clinfer_grammar_free(c->e[i].g);
    }
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

/* Under the lock: the entry of key, or -1. */
static int find(srv_gcache *c, const char *key, size_t len) {
    for (int i = 0; i < c->n; i++)
        if (c->e[i].len == len && !memcmp(c->e[i].key, key, len)) return i;
    return -1;
}

clinfer_status srv_gcache_get(srv_gcache *c, const char *gbnf, size_t len, clinfer_grammar **out) {
    *out = NULL;
    pthread_mutex_lock(&c->mu);
    int i = find(c, gbnf, len);
    if (i >= 0) {
        c->e[i].used = ++c->clock;
        c->hits++;
        *out = clinfer_grammar_retain(c->e[i].g);
    }
    pthread_mutex_unlock(&c->mu);
    if (*out) return CLINFER_OK;
    /* compiled outside the lock: a long grammar does not hold up the others */
    clinfer_grammar *g;
    clinfer_status st = clinfer_grammar_create(c->m, gbnf, len, NULL, &g);
    if (st != CLINFER_OK) return st;
    char *key = malloc(len + 1);
    pthread_mutex_lock(&c->mu);
    c->misses++;
    if ((i = find(c, gbnf, len)) >= 0) { /* another request compiled it meanwhile: theirs is kept */
        clinfer_grammar_free(g);
        free(key);
        c->e[i].used = ++c->clock;
        *out = clinfer_grammar_retain(c->e[i].g);
    } else {
        *out = g;
        if (key) { /* out of memory: served, not cached */
            memcpy(key, gbnf, len);
            key[len] = 0;
            if (c->n == c->cap) { /* the least recently used goes; its jobs keep their references */
                int lru = 0;
                for (int k = 1; k < c->n; k++)
                    if (c->e[k].used < c->e[lru].used) lru = k;
                free(c->e[lru].key);
                clinfer_grammar_free(c->e[lru].g);
                c->e[lru] = c->e[--c->n];
            }
            c->e[c->n++] = (entry){key, len, clinfer_grammar_retain(g), ++c->clock};
        }
    }
    pthread_mutex_unlock(&c->mu);
    return CLINFER_OK;
}

void srv_gcache_stats_get(srv_gcache *c, srv_gcache_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = (srv_gcache_stats){c->hits, c->misses, c->n};
    pthread_mutex_unlock(&c->mu);
}

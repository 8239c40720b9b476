/* Compiled grammars shared across requests, keyed by their GBNF text: the
 * same schema or grammar in the next request reuses the compiled automaton
 * and the token masks its earlier requests built (the masks are most of a
 * grammar's cost). A few entries, least recently used evicted first; each
 * job holds its own reference (clinfer_grammar_retain), so an evicted
 * grammar lives on until its last job ends. */
#ifndef SRV_GRAMMAR_CACHE_H
#define SRV_GRAMMAR_CACHE_H

#include <stddef.h>

#include "clinfer.h"

/* A grammar's masks are bounded (64 MiB a grammar): 8 entries bound the
 * cache's memory while serving the few schemas a workload repeats. */
enum { SRV_GCACHE_ENTRIES = 8 };

typedef struct srv_gcache srv_gcache;

typedef struct srv_gcache_stats {
    unsigned long long hits, misses; /* lookups that found a compiled grammar, that compiled one */
    int entries;
} srv_gcache_stats;

clinfer_status srv_gcache_create(const clinfer_model *m, int capacity, srv_gcache **out);
void srv_gcache_free(srv_gcache *c);
/* The compiled grammar of gbnf[0, len) (root "root"), a reference of the
 * caller's (clinfer_grammar_free it): from the cache, or compiled and
 * added. A grammar that does not compile is clinfer_grammar_create's
 * error (CLINFER_ERR_ARG with its line and column) and is not cached. Any
 * thread. */
clinfer_status srv_gcache_get(srv_gcache *c, const char *gbnf, size_t len, clinfer_grammar **out);
void srv_gcache_stats_get(srv_gcache *c, srv_gcache_stats *out);

#endif

/* Compiled grammars shared across requests, keyed by what they are
 * compiled from (a GBNF text, a JSON Schema's text, a tools array with its
 * choice): the same schema, grammar or tools in the next request reuse the
 * compiled automaton and the token masks its earlier requests built (the
 * masks are most of a grammar's cost), and the schema is not converted
 * again. A few entries, least recently used evicted first; each job holds
 * its own reference (clinfer_grammar_retain), so an evicted grammar lives
 * on until its last job ends.
 *
 * Grammars are compiled on the cache's own thread, one at a time, never on
 * a connection's: a request waits for its grammar until its deadline or
 * until its client leaves, whichever comes first, and requests for the same
 * source wait for one compilation. A source whose requests all left before
 * its compilation began is dropped unstarted. One that has begun runs to
 * its end (the converter and the compiler take no cancellation); its result
 * is kept for the next request, a failure too (compiling it again would
 * fail the same way). So hostile schemas hold one core at most, and a
 * repeated one costs once. */
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
    unsigned long long abandoned; /* compilations dropped unstarted: their requests had all left */
} srv_gcache_stats;

/* What a grammar is compiled from. */
typedef enum srv_gsource {
    SRV_GSRC_GBNF = 'G',   /* GBNF text, root "root" */
    SRV_GSRC_SCHEMA = 'S', /* a JSON Schema's text (clinfer_json_schema_to_gbnf) */
    SRV_GSRC_TOOLS = 'T',  /* srv_gcache_tools_key's text (clinfer_tools_grammar) */
} srv_gsource;

/* How long a request waits for its grammar. */
typedef struct srv_gcache_wait {
    double deadline;         /* on srv_now_s()'s clock */
    int (*gone)(void *arg);  /* nonzero: the requester left (NULL: never asked) */
    void *arg;
} srv_gcache_wait;

typedef enum srv_gcache_result {
    SRV_GCACHE_OK,      /* *out: a reference of the caller's (clinfer_grammar_free it) */
    SRV_GCACHE_FAILED,  /* it does not compile: *st and clinfer_last_error say why (CLINFER_ERR_ARG: its fault) */
    SRV_GCACHE_TIMEOUT, /* its compilation ran past the deadline (and goes on, for the next request) */
    SRV_GCACHE_BUSY,    /* the deadline passed while others' compilations ran before it */
    SRV_GCACHE_GONE,    /* the requester left */
} srv_gcache_result;

clinfer_status srv_gcache_create(const clinfer_model *m, int capacity, srv_gcache **out);
/* Waits for the compilation under way, if any (it cannot be stopped). */
void srv_gcache_free(srv_gcache *c);
/* The grammar of src[0, len), as kind says, from the cache or compiled on
 * the cache's thread while the caller waits as w says (w NULL: until it
 * is done). Any thread. */
srv_gcache_result srv_gcache_get(srv_gcache *c, srv_gsource kind, const char *src, size_t len,
                                 const srv_gcache_wait *w, clinfer_grammar **out, clinfer_status *st);
/* The source text of a tools grammar (SRV_GSRC_TOOLS): malloc'd, *len
 * bytes; NULL when out of memory. */
char *srv_gcache_tools_key(const char *tools, clinfer_tool_choice choice, const char *name, int parallel, size_t *len);
void srv_gcache_stats_get(srv_gcache *c, srv_gcache_stats *out);

/* The tests' hook: f compiles in place of the cache's own (one that waits
 * for the test, to see what requests do while a compilation runs). */
typedef clinfer_status (*srv_gcache_compiler)(const clinfer_model *m, srv_gsource kind, const char *src, size_t len,
                                              clinfer_grammar **out);
void srv_gcache_set_compiler(srv_gcache *c, srv_gcache_compiler f);

#endif

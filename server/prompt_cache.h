/* --cache-ram: prompt caches that left the device kept in host memory.
 * When a slot's cache is given up for another job (the pool needed its
 * blocks, or the slot took a prompt it shares little with), its prompt
 * tokens and their KV are copied into host memory (the slot file's bytes,
 * clinfer_session_save_seq_buf); a later prompt that shares a longer prefix
 * with an entry than with any slot gets it back into its slot instead of
 * evaluating it again. Bounded in bytes, the least recently used entry
 * dropped first. Only the scheduler's thread calls these (they reach the
 * engine); srv_pcache_stats may be called under the scheduler's lock. */
#ifndef SRV_PROMPT_CACHE_H
#define SRV_PROMPT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct srv_pcache srv_pcache;

typedef struct srv_pcache_stats {
    unsigned long long stores, hits, evictions;
    int entries;
    size_t bytes, max_bytes;
} srv_pcache_stats;

/* max_bytes > 0. */
clinfer_status srv_pcache_create(size_t max_bytes, srv_pcache **out);
void srv_pcache_free(srv_pcache *c);

/* Keeps slot's cache: tokens[0..n) (the slot holds exactly these). An
 * entry that is a prefix of them is replaced; one that holds them already
 * (they are its prefix) makes this a no-op. Failures (memory, too large)
 * only leave it out. */
void srv_pcache_put(srv_pcache *c, srv_engine *e, int slot, const int32_t *tokens, int n);

/* The entry sharing the longest prefix with prompt[0..n): its index and
 * *len (the tokens shared), or -1. */
int srv_pcache_best(const srv_pcache *c, const int32_t *prompt, int n, int *len);

/* Entry idx's tokens. */
int srv_pcache_len(const srv_pcache *c, int idx);

/* Entry idx's tokens and KV into slot (tokens into out[0..cap), *n of
 * them), the entry now the most recently used; counts a hit. On a failure
 * the slot is as clinfer_session_load_seq_buf leaves it. */
clinfer_status srv_pcache_load(srv_pcache *c, int idx, srv_engine *e, int slot, int32_t *out, int cap, int *n);

void srv_pcache_stats_get(const srv_pcache *c, srv_pcache_stats *out);

#endif

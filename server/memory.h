/* The memory a server takes, counted where it is checked: at start (one
 * model: srv_mem_check, before "ready") and in the router's
 * --models-memory (router.c: each model's weights and KV from its loader,
 * and its --cache-ram bound, srv_router_set_overhead). The model alone is
 * checked as it loads (clinfer's fit: weights, KV cache and scratch against
 * the device); here what a server holds beside it counts too: a draft
 * model (-md, loaded after it and fitted on its own), its LoRA adapters,
 * and --cache-ram's host memory. */
#ifndef SRV_MEMORY_H
#define SRV_MEMORY_H

#include "clinfer.h"

typedef struct srv_mem {
    double weights;   /* bytes: the model's weights on the device (srv_engine_bytes) */
    double kv;        /* its KV cache (srv_engine_bytes) */
    double adapters;  /* its LoRA adapters (srv_lora_bytes) */
    double draft;     /* -md: the draft model's weights and KV pool (srv_draft_bytes) */
    double draft_laws; /* -md: host memory its sampled drafts' laws q may take, a bound (srv_mem_draft_laws) */
    double cache_ram; /* --cache-ram's bound: host memory */
} srv_mem;

/* Bytes of host memory the system could give now (/proc/meminfo's
 * MemAvailable: free and reclaimable; the physical memory where it does
 * not say): read before the model loads, as clinfer's fit reads it. */
double srv_host_available(void);

/* The device `selector` picks (NULL: the default, as the model's load
 * took it): its global memory in bytes and whether it is a CPU (its memory
 * the host's). CLINFER_ERR_DEVICE when it picks none. */
clinfer_status srv_mem_device(const char *selector, double *global_mem, int *is_cpu);

/* A bound on the host bytes the server's draft model (server/draft.c)
 * keeps for sampled requests' drafts, their laws q for the rule
 * min(1, p/q): n_slots × draft_max laws, each an (id, chance) pair, int32
 * and float (8 bytes), per candidate, every id both vocabularies share
 * (min(n_target, n_draft)) where top-k is off (top-p 1, min-p 0: nothing
 * cuts the candidates); and one set of scratch rows: a row's logits and
 * srv_draft_q's dense row (n_target floats each), the candidates' ids and
 * logits (min(...) each). The figure is draft.c's storage as it is
 * (srv_draft_law, srv_draft's lg, cid, cl, qd): a change there (how q is
 * kept) changes it. 0 where n_slots or draft_max is 0. */
double srv_mem_draft_laws(int n_slots, int draft_max, int n_target, int n_draft);

/* CLINFER_ERR_MEMORY, every part named, where b passes what is allowed:
 * the device's parts (weights, KV, adapters, draft) over global_mem (0:
 * not checked: a split or MPI, whose stages were each fitted), or the host's
 * (the draft's laws, --cache-ram; with the device's on a CPU) over
 * host_avail (<= 0: not checked). */
clinfer_status srv_mem_check(const srv_mem *b, double global_mem, int is_cpu, double host_avail);

#endif

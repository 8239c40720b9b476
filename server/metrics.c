#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void metric(FILE *f, const char *name, const char *type, const char *help, const char *model, double v) {
    fprintf(f, "# HELP clinfer_%s %s\n# TYPE clinfer_%s %s\nclinfer_%s{model=\"%s\"} %.17g\n", name, help, name, type,
            name, model, v);
}

char *srv_metrics_text(const srv_stats *st, const srv_gcache_stats *g, const char *model_name) {
    /* a label value escapes backslash, quote and newline */
    char model[256];
    size_t o = 0;
    for (const char *p = model_name; *p && o + 3 < sizeof model; p++) {
        if (*p == '\\' || *p == '"') model[o++] = '\\';
        if (*p == '\n') model[o++] = '\\', model[o++] = 'n';
        else model[o++] = *p;
    }
    model[o] = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    metric(f, "prompt_tokens_total", "counter", "Prompt tokens processed (cached prefixes not counted).", model,
           (double)st->prompt_tokens);
    metric(f, "prompt_tokens_cached_total", "counter",
           "Prompt tokens reused from a slot's cache (its own or copied from another slot's).", model,
           (double)st->cached_tokens);
    metric(f, "prompt_tokens_admitted_total", "counter",
           "Prompt tokens of the requests that took a slot, cached or not.", model, (double)st->admitted_tokens);
    /* the two counters' ratio since the start, for a glance; rate() of each gives it over a window */
    metric(f, "prompt_cache_hit_ratio", "gauge", "Prompt tokens cached over prompt tokens admitted, since the start.",
           model, st->admitted_tokens ? (double)st->cached_tokens / (double)st->admitted_tokens : 0);
    metric(f, "generated_tokens_total", "counter", "Tokens generated.", model, (double)st->gen_tokens);
    metric(f, "requests_completed_total", "counter", "Requests that ended with stop or length.", model,
           (double)st->requests_done);
    metric(f, "requests_cancelled_total", "counter", "Requests whose client went away before the end.", model,
           (double)st->requests_cancelled);
    metric(f, "requests_failed_total", "counter", "Requests that failed in the engine or at shutdown.", model,
           (double)st->requests_failed);
    metric(f, "draft_tokens_total", "counter", "Tokens drafted (prompt lookup or --model-draft) and verified.", model,
           (double)st->drafted_tokens);
    metric(f, "draft_tokens_accepted_total", "counter", "Drafted tokens the model chose (each saved a step).", model,
           (double)st->accepted_tokens);
    metric(f, "draft_acceptance_ratio", "gauge", "Drafted tokens accepted over drafted, since the start.", model,
           st->drafted_tokens ? (double)st->accepted_tokens / (double)st->drafted_tokens : 0);
    metric(f, "steps_total", "counter", "Engine steps (one pass over every busy slot).", model, (double)st->steps);
    metric(f, "prompt_tokens_per_second", "gauge", "Prompt tokens per second over the last 10 s.", model,
           st->prompt_tps);
    metric(f, "generated_tokens_per_second", "gauge", "Generated tokens per second over the last 10 s.", model,
           st->gen_tps);
    metric(f, "requests_running", "gauge", "Requests in a slot.", model, st->running);
    metric(f, "requests_queued", "gauge", "Requests waiting for a slot.", model, st->queued);
    metric(f, "slots", "gauge", "Slots (sequences decoded together).", model, st->n_slots);
    metric(f, "slots_busy", "gauge", "Slots running a request.", model, st->running);
    metric(f, "slots_idle", "gauge", "Slots free for a request.", model, st->n_slots - st->running);
    /* a leak (a cancelled request that kept its slot or its blocks) shows
     * as busy slots or reserved blocks that do not return to 0 when idle */
    metric(f, "kv_blocks", "gauge", "Blocks of the shared KV cache.", model, st->kv_blocks);
    metric(f, "kv_blocks_used", "gauge",
           "KV blocks held by a sequence: running requests', and idle slots' caches (given up when needed).", model,
           st->kv_blocks - st->kv_free);
    metric(f, "kv_blocks_free", "gauge", "KV blocks held by no sequence.", model, st->kv_free);
    metric(f, "kv_blocks_reserved", "gauge", "KV blocks set aside for the running requests (their most).", model,
           st->kv_reserved);
    metric(f, "batch_occupancy", "gauge", "Mean busy slots per step over the last 10 s, divided by the slots.",
           model, st->occupancy);
    metric(f, "slot_saves_total", "counter", "Slots saved to files (POST /slots/{id}?action=save).", model,
           (double)st->slot_saves);
    metric(f, "slot_restores_total", "counter", "Slots restored from files (POST /slots/{id}?action=restore).", model,
           (double)st->slot_restores);
    metric(f, "slot_erases_total", "counter", "Slots' caches erased (POST /slots/{id}?action=erase).", model,
           (double)st->slot_erases);
    metric(f, "slot_action_failures_total", "counter",
           "Slot saves and restores that failed (a refused file, a full disk).", model, (double)st->slot_failures);
    metric(f, "cache_ram_hits_total", "counter",
           "Prompts whose prefix came back from the host-RAM cache of evicted prompt caches (--cache-ram).", model,
           (double)st->cache_ram_hits);
    metric(f, "cache_ram_tokens_total", "counter", "Prompt tokens the host-RAM cache gave back (not evaluated again).",
           model, (double)st->cache_ram_tokens);
    metric(f, "cache_ram_stores_total", "counter", "Slots' prompt caches kept in host RAM as they were given up.",
           model, (double)st->cache_ram_stores);
    metric(f, "cache_ram_evictions_total", "counter", "Host-RAM cache entries dropped for room (least recently used).",
           model, (double)st->cache_ram_evictions);
    metric(f, "cache_ram_entries", "gauge", "Prompt caches held in host RAM.", model, st->cache_ram_entries);
    metric(f, "cache_ram_bytes", "gauge", "Bytes the host-RAM cache holds.", model, (double)st->cache_ram_bytes);
    metric(f, "cache_ram_max_bytes", "gauge", "The host-RAM cache's bound (--cache-ram; 0: off).", model,
           (double)st->cache_ram_max_bytes);
    if (g) {
        metric(f, "grammar_cache_hits_total", "counter",
               "Structured-output requests whose grammar was compiled already (its masks reused).", model,
               (double)g->hits);
        metric(f, "grammar_cache_misses_total", "counter", "Structured-output requests that compiled their grammar.",
               model, (double)g->misses);
        metric(f, "grammar_cache_entries", "gauge", "Compiled grammars kept.", model, g->entries);
        metric(f, "grammar_compilations_abandoned_total", "counter",
               "Grammar compilations dropped before they began: their requests had left or timed out.", model,
               (double)g->abandoned);
    }
    if (fclose(f) != 0) {
        free(buf);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    return buf;
}

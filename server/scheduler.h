/* Continuous batching: requests (jobs) wait in a bounded queue, a step loop
 * on its own thread admits them into free slots between steps (the longest
 * prompt prefix that any slot's cache shares, the free slot's own or copied
 * from another's, is not processed again), feeds each slot a prefill chunk
 * or its next token, samples each slot with its own sampler, applies stop
 * strings and limits, and retires finished and cancelled jobs. HTTP threads
 * submit jobs and read their text through the functions below (one mutex,
 * condition variables); only the step loop touches the engine. A
 * request's n choices are a group of jobs that evaluate the prompt once
 * (srv_sched_submit_group); a job asked for logprobs keeps each token's
 * (srv_sched_logprobs). */
#ifndef SRV_SCHEDULER_H
#define SRV_SCHEDULER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "api_openai.h"
#include "clinfer.h"
#include "engine.h"

typedef struct srv_sched srv_sched;
typedef struct srv_job srv_job;

typedef struct srv_job_params {
    int max_tokens; /* 0: until the context is full */
    clinfer_sampler_params sp;
    const char *stop[SRV_MAX_STOP];
    int n_stop;
    /* NULL, or the grammar the job's sampler is held to: the job takes a
     * reference of its own (clinfer_grammar_retain), the caller keeps its.
     * Under a grammar the stop strings are not applied, the job ends (stop)
     * as soon as the grammar is DONE, and a draft is cut where the grammar
     * refuses it. */
    clinfer_grammar *grammar;
    /* each generated token's logprob and top_logprobs alternatives
     * (clinfer_logprobs of the raw logits, before the logit bias) */
    int logprobs, top_logprobs;
    /* logit_bias (ids in the vocabulary): -100 bans a token, else added */
    const int32_t *bias_ids;
    const float *bias;
    int n_bias;
    /* the reply starts inside <think> (the prompt opened it, reasoning.h):
     * the grammar holds only what follows </think>, the thought is free */
    int think_open;
    /* control tokens in the text as their text (gpt-oss's Harmony markers,
     * which reasoning.c splits on); 0: left out, as for every other model */
    int special;
    /* a reasoning budget (reasoning.h's srv_budget): after this many
     * tokens of an open thought its close is forced (tokens the job
     * generates, counted in n_gen); 0: none. think_syntax: how the reply
     * marks its thought (an srv_think_syntax), think_open as above */
    int reasoning_budget, think_syntax;
    /* the scale of each of the model's LoRA adapters (adapters.h; n_lora 0: none loaded) */
    float lora[SRV_MAX_LORA];
    int n_lora;
} srv_job_params;

/* A generated token's logprobs; its text is bytes [start, end) of the job's. */
typedef struct srv_token_lp {
    int32_t token;
    float logprob;
    size_t start, end;
    int n_top;
    int32_t top_ids[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
} srv_token_lp;

typedef enum srv_state { SRV_QUEUED, SRV_RUNNING, SRV_DONE } srv_state;
typedef enum srv_finish { SRV_FINISH_NONE, SRV_FINISH_STOP, SRV_FINISH_LENGTH, SRV_FINISH_ERROR } srv_finish;

/* What a job has become, as srv_sched_wait reports it. */
typedef struct srv_job_view {
    srv_state state;
    srv_finish finish;
    int shutdown; /* SRV_FINISH_ERROR because the server stopped before it ran */
    int stop_hit; /* SRV_FINISH_STOP by a stop string: 1 + its index in srv_job_params.stop; else 0 */
    size_t text_len; /* bytes of final text (held-back text that may begin a stop string excluded) */
    int n_prompt, n_cached, n_gen;
    double queue_ms, prompt_ms, gen_ms;
    char error[256];
} srv_job_view;

typedef struct srv_stats {
    int n_slots, running, queued;
    /* prompt tokens evaluated, reused (a slot's own or copied from another's), of the jobs that took a slot */
    unsigned long long prompt_tokens, cached_tokens, admitted_tokens;
    unsigned long long gen_tokens, requests_done, requests_cancelled, requests_failed;
    unsigned long long steps;
    unsigned long long drafted_tokens, accepted_tokens; /* speculation (srv_sched_speculate) */
    double gen_tps, prompt_tps; /* over the last seconds (SRV_STATS_WINDOW_S) */
    double occupancy;           /* mean busy slots per step / n_slots, same window */
    /* the shared KV cache as the step loop last saw it: blocks in all, held
     * by no sequence, set aside for the running jobs (idle slots' caches
     * hold the rest of the used ones, and give them up when a step needs
     * them) */
    int kv_blocks, kv_free, kv_reserved;
    /* POST /slots/{id}: slots saved to files, restored from them, erased, and actions that failed */
    unsigned long long slot_saves, slot_restores, slot_erases, slot_failures;
    /* --cache-ram: prompts that found their prefix in host memory, the tokens it gave them, caches stored there
     * and dropped from it (the least recently used, for room), and what it holds */
    unsigned long long cache_ram_hits, cache_ram_tokens, cache_ram_stores, cache_ram_evictions;
    int cache_ram_entries;
    size_t cache_ram_bytes, cache_ram_max_bytes;
} srv_stats;

/* Starts the step loop; n_slots as the engine's, max_queue waiting jobs. */
/* The server's clock, and a condition variable whose timed waits use it:
 * CLOCK_MONOTONIC, so a wall-clock step moves no deadline. */
double srv_now_s(void);
void srv_cond_init_monotonic(pthread_cond_t *c);

clinfer_status srv_sched_create(srv_engine *e, const clinfer_model *m, int n_slots, int max_queue, srv_sched **out);
/* Greedy jobs admitted from now on are sped up by prompt lookup: each step
 * verifies up to draft_max drafted tokens a slot (clinfer_drafter) with
 * its token, the text the same as without; 0: off (the default). */
void srv_sched_speculate(srv_sched *s, int draft_max);
/* serve --model-draft: every job (greedy or sampled) speculates with the
 * draft model's drafts instead (draft.h: all slots drafted together before
 * each step), up to its draft_max a slot; d stays the caller's and must
 * outlive the scheduler. Before the first job. */
struct srv_draft;
clinfer_status srv_sched_set_draft(srv_sched *s, struct srv_draft *d);
/* --cache-ram: prompt caches given up for other jobs are kept in host
 * memory, up to `bytes` (prompt_cache.h), and a prompt sharing a longer
 * prefix with one than with any slot gets it back; 0: off (the default).
 * Before the first job. */
clinfer_status srv_sched_cache_ram(srv_sched *s, size_t bytes);
/* Stops taking jobs, fails the queued ones, cuts the running ones
 * (SRV_FINISH_LENGTH) after the current step, joins the thread. */
void srv_sched_free(srv_sched *s);
/* Stops taking jobs (srv_sched_submit: SRV_SUBMIT_CLOSED) and cuts the
 * running ones at the next step; returns at once. */
void srv_sched_shutdown(srv_sched *s);

/* Whether a request can ever be admitted: n choices of a prompt of
 * n_prompt tokens, each generating up to *max_tokens (0: until the context
 * is full) must find the KV blocks they may take (n's copies of the
 * prompt's last block included) in the whole pool. 0 when they fit; with
 * *max_tokens 0 it is then set to the most that fit where the pool holds
 * less than the context (the answer ends there with length, as at the
 * context's end). -1 when even one token each cannot fit, or when the
 * max_tokens given cannot: *need and *have say the blocks. */
int srv_sched_fits(srv_sched *s, int n_prompt, int n, int *max_tokens, int *need, int *have);

/* The job copies the prompt and parameters. */
clinfer_status srv_job_create(const int32_t *prompt, int n_prompt, const srv_job_params *p, srv_job **out);

typedef enum srv_submit { SRV_SUBMIT_OK, SRV_SUBMIT_FULL, SRV_SUBMIT_CLOSED } srv_submit;
/* Queues the job: refused (FULL) only when every slot is busy and max_queue
 * jobs already wait for one. On success the scheduler shares it until
 * srv_sched_release. */
srv_submit srv_sched_submit(srv_sched *s, srv_job *j);
/* Waits up to timeout_ms for final text beyond `from` bytes or the job's
 * end, then reports the job and copies its text [from, text_len) to a
 * malloc'd *text (*n bytes; NULL when none). */
void srv_sched_wait(srv_sched *s, srv_job *j, size_t from, int timeout_ms, srv_job_view *v, char **text, size_t *n);
/* The n jobs of one request's n choices, queued together: they take n
 * slots at once (n <= the slots), the first evaluates the prompt, and the
 * others copy its KV blocks (clinfer_seq_copy) and sample their first
 * token from its logits: the prompt is evaluated once. FULL as for n
 * submits. */
srv_submit srv_sched_submit_group(srv_sched *s, srv_job **jobs, int n);
/* Waits up to timeout_ms until one of the jobs not marked in skip (may be
 * NULL) has final text beyond from[i] bytes, or has ended. */
void srv_sched_wait_any(srv_sched *s, srv_job **jobs, int n, const size_t *from, const int *skip, int timeout_ms);
/* The logprobs of the tokens from token `from` on whose text lies in the
 * first `have` bytes of final text (a text a caller got from
 * srv_sched_wait), malloc'd into *out (NULL when none): how many (-1: out
 * of memory). With
 * `done` (the job had ended when its text was got), a token whose text the
 * final text cuts (a stop string) counts too. Tokens are reported in their
 * order: a stream sends each with the chunk that completes its text. */
int srv_sched_logprobs(srv_sched *s, srv_job *j, int from, size_t have, int done, srv_token_lp **out);
/* The caller is done with the job (a client gone, an answer sent): a
 * running job is cancelled and its slot freed at the next step. Frees an
 * unsubmitted job too. */
void srv_sched_release(srv_sched *s, srv_job *j);

void srv_sched_stats(srv_sched *s, srv_stats *out);
/* Jobs submitted and not yet released: 0 when no HTTP thread will call
 * this scheduler for a job again (a router may then free it). */
int srv_sched_held(srv_sched *s);

/* ---- slots (GET /slots, POST /slots/{id}?action=...) ------------------------ */

/* A slot as GET /slots shows it (llama-server's fields where they apply). */
typedef struct srv_slot_view {
    int id, n_ctx, is_processing, speculative;
    int n_cached;  /* prompt tokens the slot's cache holds for reuse (a restore sets them) */
    int n_prompt, n_prompt_processed, n_prompt_cache, n_decoded; /* its running job's; 0 when idle */
} srv_slot_view;
/* The slots' views into out[0 .. n_slots). */
void srv_sched_slots(srv_sched *s, srv_slot_view *out);

typedef enum srv_slot_op { SRV_SLOT_SAVE, SRV_SLOT_RESTORE, SRV_SLOT_ERASE } srv_slot_op;
typedef enum srv_slot_why { SRV_SLOT_OK, SRV_SLOT_NO_SUCH, SRV_SLOT_BUSY, SRV_SLOT_FAILED } srv_slot_why;
typedef struct srv_slot_result {
    srv_slot_why why;
    clinfer_status st;    /* SRV_SLOT_FAILED: the API's status */
    int n_tokens;         /* saved, restored or erased */
    size_t bytes;         /* written or read */
    double ms;
    char error[512];
} srv_slot_result;
/* Runs an action on slot `slot` in the step loop between two steps (only
 * it touches the engine) and waits for it: a save writes the prompt tokens
 * the slot's cache holds for reuse and their KV (what it generated after
 * them is forgotten first: a prompt reuses prompt tokens only), a restore
 * makes a file's the slot's cache (the next prompt sharing its tokens
 * reuses them), an erase empties it. A slot running a request is BUSY,
 * not waited for. path: the file (save, restore). */
void srv_sched_slot_action(srv_sched *s, srv_slot_op op, int slot, const char *path, srv_slot_result *r);

/* Stop strings: of text [0, len), the first stop string's start at or after
 * `from` (*matched = 1 + that string's index), else how much is final: len less the longest end
 * that begins a stop string. */
size_t srv_stop_scan(const char *text, size_t from, size_t len, char *const *stop, int n_stop, int *matched);

#endif

#include "scheduler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "draft.h"
#include "prompt_cache.h"
#include "reasoning.h"


/* Prompt tokens a slot processes in one step: long prompts are split so
 * that the other slots' decodes go on between the chunks. */
enum { PREFILL_CHUNK = 128, STATS_RING = 512 };
/* Drafts take the rows a step's decode tokens leave of this many: past it
 * a step is compute-bound (on this machine's CPU 16 rows cost 4.6 times
 * one; bench/RESULTS.md, issue 27), so a wasted row costs a whole token's
 * work and speculation slows a busy server (0.5x at 16 streams without
 * this bound). */
enum { SPEC_STEP_ROWS = 16 };
#define STATS_WINDOW_S 10.0

struct srv_job {
    int32_t *prompt;
    int n_prompt, max_tokens;
    clinfer_sampler_params sp;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int logprobs, top_logprobs;
    int special; /* its detokenizer writes control tokens (srv_job_params.special) */
    int32_t *bias_ids;
    float *bias;
    int n_bias;
    unsigned long long group; /* srv_sched_submit_group's jobs share it (0: alone) */
    float lora[SRV_MAX_LORA]; /* its LoRA adapters' scales (srv_job_params.lora) */
    int n_lora;
    /* the rest is under the scheduler's lock */
    srv_state state;
    srv_finish finish;
    int submitted, cancelled, orphaned, shutdown;
    srv_buf text;     /* the reply's bytes so far */
    int stop_hit;     /* 1 + the index of the stop string that ended the job; 0: none did */
    size_t final_len; /* of text, those that can no longer start a stop string */
    int n_eval, n_cached, n_gen, slot;
    int reserve; /* KV blocks set aside for it while it runs (admit) */
    int32_t next; /* the sampled token the next step evaluates */
    clinfer_sampler *smp;
    clinfer_detokenizer *detok;
    clinfer_drafter *drafter; /* greedy jobs under srv_sched_speculate */
    clinfer_grammar *grammar; /* its sampler's (a reference of its own), or NULL */
    srv_think *think;         /* a grammar held back until the thought ends: the reply's splitter till then */
    size_t think_fed;         /* bytes of text fed to it */
    srv_budget *budget;       /* a reasoning budget (srv_job_params.reasoning_budget), or NULL */
    int budget_n, budget_syntax, budget_open; /* its parameters, until job_start tokenizes its close */
    srv_token_lp *lp;         /* with logprobs: a record a generated token */
    int n_lp, cap_lp;
    /* a group's prompt: the job that evaluates it and the ones that wait
     * to copy it (admit, share_prompt); NULL / 0 once shared or ended */
    srv_job *leader;
    srv_job **followers;
    int n_followers;
    double t_submit, t_start, t_first, t_end;
    char error[256];
    srv_job *qnext;
};

typedef struct slot {
    srv_job *job;
    unsigned long long used; /* the step it last ran in: idle caches go least recently used first */
    int32_t *cached; /* the tokens in the slot's KV cache (n_ctx) */
    int n_prefilled; /* how many of them came from prompts (the rest were generated) */
    float lora[SRV_MAX_LORA]; /* the LoRA scales its cache was computed with (n_lora of them) */
    int n_lora;
} slot;

/* A slot action waiting for the step loop (srv_sched_slot_action): the
 * HTTP thread's, on its stack until done. */
typedef struct slot_act {
    srv_slot_op op;
    int slot;
    const char *path;
    srv_slot_result *r;
    int done;
    struct slot_act *next;
} slot_act;

typedef struct step_sample {
    double t;
    int gen, prompt, busy;
} step_sample;

struct srv_sched {
    srv_engine *e;
    const clinfer_model *m;
    int n_slots, max_queue, n_ctx, n_vocab;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t work, progress;
    srv_job *q_head, *q_tail;
    int n_queued, n_running, closed;
    int n_held; /* jobs submitted and not yet released (srv_sched_held) */
    int reserved; /* KV blocks set aside for the running jobs */
    int block, n_blocks; /* the KV pool's, fixed */
    clinfer_kv_pool seen; /* the pool as the step loop last saw it (srv_sched_stats) */
    int draft_max; /* srv_sched_speculate */
    int prefill_from; /* the slot the next step's prompt budget goes to first (round robin) */
    slot *slots;
    srv_entry *entries;
    int *len0;
    srv_stats st;
    step_sample ring[STATS_RING];
    int ring_n, ring_at;
    slot_act *acts; /* slot actions for the loop, oldest first */
    srv_pcache *pcache; /* --cache-ram: evicted prompt caches in host memory; NULL: off */
    int32_t *scratch;   /* [n_ctx] tokens a restore reads before they are the slot's */
    /* serve --model-draft (srv_sched_set_draft; NULL: prompt lookup or none):
     * the step's drafting slots, drafted together before the step's decode */
    srv_draft *draft;
    srv_draft_req *dreq; /* [n_slots] */
    int n_dreq;
    int32_t *drows;      /* [n_slots][1 + draft_max]: each slot's verify rows, the pending token first */
};

double srv_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_cond_init_monotonic(pthread_cond_t *c) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

/* ---- stop strings --------------------------------------------------------- */

size_t srv_stop_scan(const char *text, size_t from, size_t len, char *const *stop, int n_stop, int *matched) {
    *matched = 0;
    for (size_t p = from; p < len; p++) /* the earliest whole match wins */
        for (int i = 0; i < n_stop; i++) {
            size_t k = strlen(stop[i]);
            if (k && p + k <= len && !memcmp(text + p, stop[i], k)) {
                *matched = 1 + i; /* which one: 1 + its index */
                return p;
            }
        }
    for (size_t p = from; p < len; p++) /* else hold back an end that may begin one */
        for (int i = 0; i < n_stop; i++)
            if (p + strlen(stop[i]) > len && !memcmp(text + p, stop[i], len - p)) return p;
    return len;
}

/* ---- jobs ----------------------------------------------------------------- */

static void job_free(srv_job *j) {
    if (!j) return;
    clinfer_sampler_free(j->smp);
    clinfer_detokenizer_free(j->detok);
    clinfer_drafter_free(j->drafter);
    clinfer_grammar_free(j->grammar);
    if (j->think) srv_think_free(j->think);
    free(j->think);
    if (j->budget) srv_budget_free(j->budget);
    free(j->budget);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->lp);
    free(j->bias_ids);
    free(j->bias);
    free(j->followers);
    free(j->prompt);
    srv_buf_free(&j->text);
    free(j);
}

clinfer_status srv_job_create(const int32_t *prompt, int n_prompt, const srv_job_params *p, srv_job **out) {
    srv_job *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j || !(j->prompt = malloc((size_t)n_prompt * sizeof *prompt))) {
        free(j);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    j->max_tokens = p->max_tokens;
    j->sp = p->sp;
    j->logprobs = p->logprobs;
    j->top_logprobs = p->top_logprobs < SRV_MAX_TOP_LOGPROBS ? p->top_logprobs : SRV_MAX_TOP_LOGPROBS;
    if (p->n_bias > 0) {
        j->bias_ids = malloc((size_t)p->n_bias * sizeof *j->bias_ids);
        j->bias = malloc((size_t)p->n_bias * sizeof *j->bias);
        if (!j->bias_ids || !j->bias) {
            job_free(j);
            return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        }
        memcpy(j->bias_ids, p->bias_ids, (size_t)p->n_bias * sizeof *j->bias_ids);
        memcpy(j->bias, p->bias, (size_t)p->n_bias * sizeof *j->bias);
        j->n_bias = p->n_bias;
    }
    /* under a grammar no stop string: one would cut the text where the
     * grammar has not ended it, and the answer would say stop */
    for (int i = 0; !p->grammar && i < p->n_stop; i++)
        if (!(j->stop[j->n_stop++] = strdup(p->stop[i]))) {
            job_free(j);
            return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        }
    j->grammar = p->grammar ? clinfer_grammar_retain(p->grammar) : NULL; /* n jobs of a group: n references */
    j->special = p->special;
    j->n_lora = p->n_lora < SRV_MAX_LORA ? p->n_lora : SRV_MAX_LORA;
    memcpy(j->lora, p->lora, (size_t)j->n_lora * sizeof *j->lora);
    if (j->grammar && p->think_open) { /* the grammar waits for </think> (sample) */
        if (!(j->think = malloc(sizeof *j->think))) {
            job_free(j);
            return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        }
        srv_think_init(j->think, SRV_THINK_TAGS, 1);
    }
    if (p->reasoning_budget > 0 && p->think_syntax != SRV_THINK_OFF)
        j->budget_n = p->reasoning_budget, j->budget_syntax = p->think_syntax, j->budget_open = p->think_open;
    *out = j;
    return CLINFER_OK;
}

static int append(srv_job *j, const char *s, size_t n) {
    return n ? srv_buf_add(&j->text, s, n) : 0; /* a token whose bytes are held back (UTF-8) adds none */
}

/* All the text is final: what was held back was no stop string after all,
 * and a UTF-8 sequence cut short goes out as bytes. */
static void release_all(srv_sched *s, srv_job *j) {
    (void)s;
    if (j->state == SRV_RUNNING && j->detok) {
        const char *piece;
        size_t n;
        clinfer_detokenizer_flush(j->detok, &piece, &n);
        append(j, piece, n);
        if (j->n_lp) j->lp[j->n_lp - 1].end = j->text.n; /* the held bytes were the last token's */
    }
    j->final_len = j->text.n;
}

/* A group's job that ends before the prompt is shared: a follower leaves
 * its leader's list; a leader's followers evaluate the prompt themselves. */
static void unlink_group(srv_job *j) {
    if (j->leader) {
        for (int i = 0; i < j->leader->n_followers; i++)
            if (j->leader->followers[i] == j) j->leader->followers[i] = NULL;
        j->leader = NULL;
    }
    for (int i = 0; i < j->n_followers; i++)
        if (j->followers[i]) j->followers[i]->leader = NULL;
    j->n_followers = 0;
}

/* Ends a job (under the lock): its slot, if any, is free; a job its client
 * released is freed. */
static void finish(srv_sched *s, srv_job *j, srv_finish why, const char *error) {
    if (error && error != j->error) snprintf(j->error, sizeof j->error, "%s", error);
    j->finish = why;
    j->t_end = srv_now_s();
    if (!j->t_first) j->t_first = j->t_end;
    unlink_group(j);
    if (j->state == SRV_RUNNING) {
        s->slots[j->slot].job = NULL;
        s->n_running--;
        s->reserved -= j->reserve;
    }
    j->state = SRV_DONE;
    if (why == SRV_FINISH_ERROR) j->cancelled ? s->st.requests_cancelled++ : s->st.requests_failed++;
    else s->st.requests_done++;
    if (j->orphaned) job_free(j);
}

/* ---- the step loop -------------------------------------------------------- */

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* No LoRA adapter at a nonzero scale: the base's KV. Host-memory entries
 * (--cache-ram) and slot files hold such caches only: they carry no adapters. */
static int lora_plain(const float *l, int n) {
    for (int i = 0; i < n; i++)
        if (l[i] != 0) return 0;
    return 1;
}

/* A slot's cache serves a job only when computed with the job's LoRA scales. */
/* The same adapters at the same scales; a missing entry reads as 0 (no
 * adapter and a zero scale both mean the base's KV: a slot restored from a
 * file holds none, a job one scale per loaded adapter). */
static int same_lora(const slot *sl, const srv_job *j) {
    const int n = sl->n_lora > j->n_lora ? sl->n_lora : j->n_lora;
    for (int i = 0; i < n; i++)
        if ((i < sl->n_lora ? sl->lora[i] : 0.0f) != (i < j->n_lora ? j->lora[i] : 0.0f)) return 0;
    return 1;
}

/* The slot's sequence takes the job's LoRA adapters; -1 with the message set. */
static int slot_lora(srv_sched *s, int i, const srv_job *j) {
    if (srv_engine_slot_lora(s->e, i, j->lora, j->n_lora) != CLINFER_OK) return -1;
    s->slots[i].n_lora = j->n_lora;
    memcpy(s->slots[i].lora, j->lora, (size_t)j->n_lora * sizeof *j->lora);
    return 0;
}

/* Queued jobs into free slots. A prompt is matched against the prompt
 * tokens of every slot, busy or idle: a busy slot's stay in its cache while
 * it generates (only a failed step rewinds it below n_prefilled, and that
 * ends its job and lowers n_prefilled), and a job admitted earlier in this
 * call holds its reused prefix already. The job takes the free slot that
 * shares the longest prefix; when another slot shares more, that prefix is
 * copied from it on the device instead of being evaluated (a copy refused,
 * as over a wrapped sliding-window ring, is evaluated after all). Only
 * prompt tokens are reused, and the last two are evaluated again: a decode
 * step (one token) computes with other kernels than a prompt's (on AVX-512
 * CPUs its products round the activations to int8), so a cached answer or a
 * last token evaluated alone would change the logits a little, and a seed
 * would not give the same text again. */
/* The KV blocks a job may come to hold: its prompt's and its answer's
 * most tokens, within a slot's context (a sequence's positions from 0). Not
 * capped at the pool: one that can never fit is refused (srv_sched_fits),
 * never admitted to fail at the full cache mid-answer. */
static int64_t leader_blocks(const srv_sched *s, int n_prompt, int max_tokens) {
    int64_t tokens = (int64_t)n_prompt + (max_tokens ? max_tokens : s->n_ctx);
    if (tokens > s->n_ctx) tokens = s->n_ctx;
    return (tokens + s->block - 1) / s->block;
}

/* A follower's blocks: its answer's, from the prompt's last block on,
 * which it copies before writing into it (the whole blocks before it it
 * shares). */
static int64_t follower_blocks(const srv_sched *s, int n_prompt, int max_tokens) {
    int64_t tokens = (int64_t)n_prompt + (max_tokens ? max_tokens : s->n_ctx);
    if (tokens > s->n_ctx) tokens = s->n_ctx;
    return (tokens + s->block - 1) / s->block - n_prompt / s->block;
}

/* n choices: the first evaluates the prompt, the others copy it. */
static int64_t group_blocks(const srv_sched *s, int n_prompt, int max_tokens, int n) {
    return leader_blocks(s, n_prompt, max_tokens) + (int64_t)(n - 1) * follower_blocks(s, n_prompt, max_tokens);
}

int srv_sched_fits(srv_sched *s, int n_prompt, int n, int *max_tokens, int *need, int *have) {
    /* block, n_blocks and n_ctx are fixed once the scheduler exists: no lock */
    const int64_t b = group_blocks(s, n_prompt, *max_tokens, n);
    *have = s->n_blocks;
    *need = b < INT32_MAX ? (int)b : INT32_MAX;
    if (b <= s->n_blocks) return 0;
    if (*max_tokens) return -1; /* asked for more than can ever be held */
    /* until the context is full: as far as the pool holds (the most tokens
     * whose blocks fit, found by bisection: the need grows with them) */
    int lo = 0, hi = s->n_ctx - n_prompt;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (group_blocks(s, n_prompt, mid, n) <= s->n_blocks) lo = mid;
        else hi = mid - 1;
    }
    if (lo == 0) {
        *need = (int)group_blocks(s, n_prompt, 1, n);
        return -1;
    }
    *max_tokens = lo;
    return 0;
}

/* Prompt tokens a slot must lose, at least, for its cache to go to host
 * memory (--cache-ram) first: a block's worth. */
enum { STASH_MIN = 32 };

/* Before slot i's cache is cut to its first `keep` tokens: its prompt
 * tokens and their KV into host memory (--cache-ram), when it loses at
 * least STASH_MIN of them. What it generated after its prompt goes first
 * (a prompt reuses prompt tokens only). */
static void stash(srv_sched *s, int i, int keep) {
    slot *sl = &s->slots[i];
    if (!s->pcache || sl->n_prefilled - keep < STASH_MIN || !lora_plain(sl->lora, sl->n_lora)) return;
    srv_engine_slot_rewind(s->e, i, sl->n_prefilled);
    if (srv_engine_slot_len(s->e, i) != sl->n_prefilled) return; /* a sliding window that could not go back */
    srv_pcache_put(s->pcache, s->e, i, sl->cached, sl->n_prefilled);
}

/* Empties the idle slot whose cache was used least recently (kept in host
 * memory first: stash; its prefix is then evaluated again by whoever would
 * have reused it): 0 when no idle slot holds anything. */
static int evict_one(srv_sched *s) {
    int lru = -1;
    for (int i = 0; i < s->n_slots; i++)
        if (!s->slots[i].job && srv_engine_slot_len(s->e, i) > 0 && (lru < 0 || s->slots[i].used < s->slots[lru].used))
            lru = i;
    if (lru < 0) return 0;
    stash(s, lru, 0);
    srv_engine_slot_rewind(s->e, lru, 0);
    s->slots[lru].n_prefilled = 0;
    return 1;
}

/* Frees KV blocks until `blocks` are free, emptying idle slots' caches,
 * the least recently used first. */
static void make_room(srv_sched *s, int blocks) {
    for (;;) {
        clinfer_kv_pool pool;
        srv_engine_kv_pool(s->e, &pool);
        if (pool.n_free >= blocks || !evict_one(s)) return;
    }
}

/* A running job's sampler (its seed, its logit bias: -100 bans a token, as
 * OpenAI's -100 means), detokenizer and drafter; -1 with the message set. */
static int job_start(srv_sched *s, srv_job *j) {
    if (clinfer_detokenizer_create(s->m, j->special, &j->detok) != CLINFER_OK ||
        clinfer_sampler_create(s->m, &j->sp, &j->smp) != CLINFER_OK)
        return -1;
    for (int i = 0; i < j->n_bias; i++)
        if (clinfer_sampler_add_logit_bias(j->smp, j->bias_ids[i], j->bias[i] <= -100 ? -INFINITY : j->bias[i]) !=
            CLINFER_OK)
            return -1;
    /* after the bias: a biased token the grammar refuses stays refused */
    if (j->grammar && !j->think && clinfer_sampler_set_grammar(j->smp, j->grammar) != CLINFER_OK) return -1;
    if (j->budget_n && (!(j->budget = malloc(sizeof *j->budget)) ||
                        srv_budget_init(j->budget, s->m, (srv_think_syntax)j->budget_syntax, j->budget_open,
                                        j->budget_n) != CLINFER_OK)) {
        if (!j->budget) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        free(j->budget);
        j->budget = NULL;
        return -1;
    }
    for (int i = 0; i < j->n_prompt; i++) clinfer_sampler_accept(j->smp, j->prompt[i]);
    /* greedy or sampled (the acceptance rule: clinfer_next_token_draft),
     * under a grammar with its drafts cut where the grammar refuses */
    if (s->draft) srv_draft_reset(s->draft, j->slot); /* a draft model's drafts: srv_draft_run, no drafter */
    else if (s->draft_max > 0 && clinfer_drafter_create(s->draft_max, &j->drafter) != CLINFER_OK)
        j->drafter = NULL; /* out of memory: this job goes without */
    clinfer_drafter_set_sampler(j->drafter, j->smp);
    return 0;
}

/* The queue's head, a follower of `leader` (admitted just before), into
 * the free slot whose cache was used least recently: it waits for the
 * leader's prompt (share_prompt) instead of evaluating it. */
static void admit_follower(srv_sched *s, srv_job *leader, int need) {
    srv_job *f = s->q_head;
    s->q_head = f->qnext;
    if (!s->q_head) s->q_tail = NULL;
    s->n_queued--;
    int slot = -1;
    for (int i = 0; i < s->n_slots; i++)
        if (!s->slots[i].job && (slot < 0 || s->slots[i].used < s->slots[slot].used)) slot = i;
    stash(s, slot, 0);
    srv_engine_slot_rewind(s->e, slot, 0);
    s->slots[slot].n_prefilled = 0;
    const int lora_failed = slot_lora(s, slot, f);
    f->slot = slot;
    f->n_eval = f->n_cached = 0;
    f->state = SRV_RUNNING;
    f->t_start = srv_now_s();
    s->slots[slot].job = f;
    s->n_running++;
    f->reserve = need;
    s->reserved += need;
    s->st.admitted_tokens += (unsigned long long)f->n_prompt;
    if (lora_failed || job_start(s, f)) {
        finish(s, f, SRV_FINISH_ERROR, clinfer_last_error());
        return;
    }
    srv_job **grown = leader->state == SRV_RUNNING && leader->n_eval < leader->n_prompt
                          ? realloc(leader->followers, (size_t)(leader->n_followers + 1) * sizeof *grown)
                          : NULL;
    if (!grown) return; /* out of memory (or nothing to wait for): it evaluates the prompt itself */
    leader->followers = grown;
    leader->followers[leader->n_followers++] = f;
    f->leader = leader;
}

/* Slot `land` takes the host-memory entry sharing the longest prefix with
 * prompt[0..n_prompt) (its own cache kept there first), cut to what it
 * shares with the prompt and `keep` at most: how many it then holds (0
 * where none is left, the load failed, or a sliding window could not be
 * cut there). The entry is looked up again after each store (keeping the
 * slot's cache, make_room's) as those may evict or move entries, and the
 * tokens loaded are compared with the prompt's. */
static int from_ram(srv_sched *s, const int32_t *prompt, int n_prompt, int land, int keep) {
    stash(s, land, 0);
    srv_engine_slot_rewind(s->e, land, 0);
    s->slots[land].n_prefilled = 0;
    int n = 0, len = 0, ram = srv_pcache_best(s->pcache, prompt, n_prompt, &len);
    clinfer_status st = ram < 0 ? CLINFER_ERR_ARG : srv_pcache_load(s->pcache, ram, s->e, land, s->scratch, s->n_ctx, &n);
    if (st == CLINFER_ERR_CONTEXT) { /* idle slots' caches give their blocks, once */
        make_room(s, (srv_pcache_len(s->pcache, ram) + s->block - 1) / s->block);
        ram = srv_pcache_best(s->pcache, prompt, n_prompt, &len);
        st = ram < 0 ? CLINFER_ERR_ARG : srv_pcache_load(s->pcache, ram, s->e, land, s->scratch, s->n_ctx, &n);
    }
    if (st != CLINFER_OK) {
        srv_engine_slot_rewind(s->e, land, 0);
        return 0;
    }
    srv_engine_slot_rewind(s->e, land, min_int(keep, common_prefix(s->scratch, n, prompt, n_prompt)));
    const int held = srv_engine_slot_len(s->e, land);
    s->st.cache_ram_hits++;
    s->st.cache_ram_tokens += (unsigned long long)held;
    return held;
}

/* Of two free slots sharing as much with a prompt (nothing, or a system
 * prompt alone), whether the prompt takes slot a rather than b: an empty
 * one, else the least recently used, as llama-server picks (the first such
 * slot lost its cache to every unrelated prompt while others stood empty). */
static int rather(const srv_sched *s, int a, int b) {
    const int empty_a = srv_engine_slot_len(s->e, a) == 0, empty_b = srv_engine_slot_len(s->e, b) == 0;
    return empty_a != empty_b ? empty_a : s->slots[a].used < s->slots[b].used;
}

static void admit(srv_sched *s) {
    while (s->q_head && s->n_running < s->n_slots) {
        srv_job *j = s->q_head;
        int g = 1; /* j and the rest of its group: they take their slots at once */
        for (srv_job *f = j->qnext; j->group && f && f->group == j->group; f = f->qnext) g++;
        /* a job runs with its blocks set aside, so that no running job
         * finds the cache full: it waits its turn while they are not free.
         * One that can never fit (the HTTP side refuses it first:
         * srv_sched_fits) fails here, before any work, with its group */
        const int64_t need = leader_blocks(s, j->n_prompt, j->max_tokens),
                      need_f = g > 1 ? follower_blocks(s, j->n_prompt, j->max_tokens) : 0;
        if (need + (g - 1) * need_f > s->n_blocks) {
            char why[160];
            snprintf(why, sizeof why, "the request may take %lld KV blocks, more than the cache's %d",
                     (long long)(need + (g - 1) * need_f), s->n_blocks);
            for (int k = 0; k < g; k++) {
                srv_job *f = s->q_head;
                s->q_head = f->qnext;
                if (!s->q_head) s->q_tail = NULL;
                s->n_queued--;
                finish(s, f, SRV_FINISH_ERROR, why);
            }
            continue;
        }
        if (s->n_slots - s->n_running < g) break;
        if (s->reserved + need + (g - 1) * need_f > s->n_blocks) break;
        int land = -1, land_len = -1, src = -1, src_len = -1;
        for (int i = 0; i < s->n_slots; i++) {
            int p = same_lora(&s->slots[i], j)
                        ? common_prefix(s->slots[i].cached, s->slots[i].n_prefilled, j->prompt, j->n_prompt)
                        : 0;
            if (!s->slots[i].job && (p > land_len || (p == land_len && rather(s, i, land)))) land = i, land_len = p;
            if (p > src_len) src = i, src_len = p;
        }
        s->q_head = j->qnext;
        if (!s->q_head) s->q_tail = NULL;
        s->n_queued--;
        int keep = j->n_prompt > 2 ? j->n_prompt - 2 : 0; /* the most a prompt reuses */
        /* a longer prefix in host memory (--cache-ram) than any slot's: taken
         * when it gives STASH_MIN tokens more, and a quarter of the entry at
         * least (the whole entry is loaded, then cut; a load costs a tenth of
         * an evaluation or less a token) */
        int ram_len = 0;
        const int ram =
            lora_plain(j->lora, j->n_lora) ? srv_pcache_best(s->pcache, j->prompt, j->n_prompt, &ram_len) : -1;
        const int ram_use = min_int(ram_len, keep);
        int reuse;
        if (ram >= 0 && ram_use - min_int(land_len, keep) >= STASH_MIN && ram_use - min_int(src_len, keep) >= STASH_MIN &&
            4 * (int64_t)ram_use >= srv_pcache_len(s->pcache, ram)) {
            reuse = from_ram(s, j->prompt, j->n_prompt, land, keep);
        } else {
            stash(s, land, min_int(land_len, keep));
            srv_engine_slot_rewind(s->e, land, min_int(land_len, keep));
            reuse = srv_engine_slot_len(s->e, land); /* 0 where a wrapped sliding-window ring cleared */
            if (src != land && min_int(src_len, keep) > reuse) /* replaces what the landing slot holds */
                reuse = srv_engine_slot_copy(s->e, src, land, min_int(src_len, keep)) == CLINFER_OK
                            ? min_int(src_len, keep)
                            : srv_engine_slot_len(s->e, land); /* refused: unchanged; failed: empty */
        }
        memcpy(s->slots[land].cached, j->prompt, (size_t)reuse * sizeof *j->prompt);
        s->slots[land].n_prefilled = reuse;
        j->slot = land;
        j->n_eval = j->n_cached = reuse;
        j->state = SRV_RUNNING;
        j->t_start = srv_now_s();
        s->slots[land].job = j;
        s->n_running++;
        j->reserve = (int)need;
        s->reserved += (int)need;
        s->st.cached_tokens += (unsigned long long)reuse;
        s->st.admitted_tokens += (unsigned long long)j->n_prompt;
        if (slot_lora(s, land, j) || job_start(s, j)) {
            finish(s, j, SRV_FINISH_ERROR, clinfer_last_error());
            continue; /* its followers, at the queue's head, are a group of their own */
        }
        for (int k = 1; k < g; k++) admit_follower(s, j, (int)need_f);
    }
}

/* A generated token's logprobs from the raw logits its row gave (what
 * the logit bias and the sampler's stages then changed is not seen). */
static int record_logprobs(srv_sched *s, srv_job *j, const float *logits, int32_t token, size_t start) {
    if (j->n_lp == j->cap_lp) {
        int cap = j->cap_lp ? 2 * j->cap_lp : 64;
        srv_token_lp *t = realloc(j->lp, (size_t)cap * sizeof *t);
        if (!t) {
            snprintf(j->error, sizeof j->error, "out of host memory");
            return -1;
        }
        j->lp = t;
        j->cap_lp = cap;
    }
    srv_token_lp *r = &j->lp[j->n_lp];
    r->token = token;
    r->start = start;
    r->end = j->text.n;
    r->n_top = j->top_logprobs < s->n_vocab ? j->top_logprobs : s->n_vocab;
    if (clinfer_logprobs(logits, s->n_vocab, token, &r->logprob, r->n_top, r->top_ids, r->top_lp) != CLINFER_OK) {
        snprintf(j->error, sizeof j->error, "logprobs: %s", clinfer_last_error());
        return -1;
    }
    j->n_lp++;
    return 0;
}

/* A job whose grammar waits for the end of its thought: the token's text
 * through the splitter, and the grammar on the sampler once </think> has
 * come (the tokens after it are the grammar's text). -1 with the message. */
static int think_ended(srv_job *j) {
    srv_buf r = {0}, c = {0};
    int rc = srv_think_feed(j->think, j->text.p + j->think_fed, j->text.n - j->think_fed, 0, &r, &c);
    j->think_fed = j->text.n;
    srv_buf_free(&r), srv_buf_free(&c);
    if (rc) {
        snprintf(j->error, sizeof j->error, "out of host memory");
        return -1;
    }
    if (srv_think_in_reasoning(j->think)) return 0;
    srv_think_free(j->think);
    free(j->think);
    j->think = NULL;
    if (clinfer_sampler_set_grammar(j->smp, j->grammar) != CLINFER_OK) {
        snprintf(j->error, sizeof j->error, "%s", clinfer_last_error());
        return -1;
    }
    return 0;
}

/* What a sampled token does to its job. */
typedef enum { TAKE_ON, TAKE_STOP, TAKE_EOG, TAKE_LENGTH, TAKE_ERROR } take;

/* The job's next token from a row's logits, its text and stop strings, as
 * clinfer_generate's loop body; len: the slot's tokens once the row's token
 * is kept. TAKE_ON: the token is j->next. */
static take sample(srv_sched *s, srv_job *j, const float *logits, int len, int32_t draft, const float *q) {
    clinfer_next nx;
    /* a reasoning budget spent: the thought's close, token by token, instead of a sample */
    int forced = j->budget ? srv_budget_take(j->budget, j->smp, j->detok, &nx) : 0;
    clinfer_status st = forced < 0 ? CLINFER_ERR_MEMORY
                        : forced ? CLINFER_OK
                                 : clinfer_next_token_draft_q(j->smp, j->detok, logits, s->n_vocab, draft, q, &nx);
    if (st != CLINFER_OK && j->grammar && clinfer_sampler_grammar_state(j->smp) == CLINFER_GRAMMAR_LIMIT)
        return TAKE_LENGTH; /* the grammar's nesting bound: the text ends as at max_tokens */
    if (st != CLINFER_OK) {
        snprintf(j->error, sizeof j->error, "%s", clinfer_last_error());
        return TAKE_ERROR;
    }
    if (nx.eog) return TAKE_EOG;
    j->n_gen++;
    s->st.gen_tokens++;
    const size_t start = j->text.n;
    if (append(j, nx.piece, nx.len)) {
        snprintf(j->error, sizeof j->error, "out of host memory");
        return TAKE_ERROR;
    }
    if (j->logprobs && record_logprobs(s, j, logits, nx.token, start)) return TAKE_ERROR;
    if (j->budget && srv_budget_push(j->budget, nx.piece, nx.len)) {
        snprintf(j->error, sizeof j->error, "out of host memory");
        return TAKE_ERROR;
    }
    /* a grammar waiting for the thought's end waits for a forced close's last token too */
    if (j->think && !(j->budget && srv_budget_forcing(j->budget)) && think_ended(j)) return TAKE_ERROR;
    /* a sentence nothing may follow: ended now, not a step later by the
     * grammar's EOG (nor cut as length when it is the last token allowed) */
    if (j->grammar && clinfer_sampler_grammar_state(j->smp) == CLINFER_GRAMMAR_DONE) return TAKE_EOG;
    int matched;
    size_t fin = srv_stop_scan(j->text.p, j->final_len, j->text.n, j->stop, j->n_stop, &matched);
    j->final_len = fin;
    if (matched) {
        j->stop_hit = matched; /* 1 + the stop string's index (Anthropic's stop_sequence names it) */
        j->text.n = fin; /* the stop string and what followed it are cut */
        j->text.p[fin] = 0;
        return TAKE_STOP;
    }
    j->next = nx.token;
    if ((j->max_tokens && j->n_gen >= j->max_tokens) || len >= s->n_ctx) return TAKE_LENGTH; /* not evaluated */
    return TAKE_ON;
}

/* A sampled token's end of its job, if it is one. */
static void conclude(srv_sched *s, srv_job *j, take t) {
    if (t == TAKE_ON) return;
    if (t != TAKE_STOP && t != TAKE_ERROR) release_all(s, j);
    finish(s, j, t == TAKE_ERROR ? SRV_FINISH_ERROR : t == TAKE_LENGTH ? SRV_FINISH_LENGTH : SRV_FINISH_STOP,
           t == TAKE_ERROR ? j->error : NULL);
}

/* A leader's prompt is evaluated: each waiting follower gets its KV blocks
 * (clinfer_seq_copy shares them) and samples its first token, with its own
 * sampler, from the same logits; one whose copy is refused (a wrapped
 * sliding-window ring) evaluates the prompt itself. */
static void share_prompt(srv_sched *s, srv_job *j, const float *logits) {
    for (int i = 0; i < j->n_followers; i++) {
        srv_job *f = j->followers[i];
        if (!f) continue;
        f->leader = NULL;
        if (srv_engine_slot_copy(s->e, j->slot, f->slot, j->n_prompt) != CLINFER_OK) {
            srv_engine_slot_rewind(s->e, f->slot, 0);
            continue;
        }
        memcpy(s->slots[f->slot].cached, j->prompt, (size_t)j->n_prompt * sizeof *j->prompt);
        s->slots[f->slot].n_prefilled = f->n_eval = f->n_cached = j->n_prompt;
        s->st.cached_tokens += (unsigned long long)j->n_prompt;
        f->t_first = srv_now_s();
        conclude(s, f, sample(s, f, logits, j->n_prompt + 1, -1, NULL));
    }
    j->n_followers = 0;
}

/* After a step: the slot's job takes its prompt chunk or samples its next
 * token; after a speculative step, the tokens of row after row while each
 * is the draft's next (evaluated already), the rest of the draft dropped
 * (the step's accounting is the drafter's, as clinfer_generate's). */
static void advance(srv_sched *s, srv_entry *en, int len0) {
    srv_job *j = s->slots[en->slot].job;
    memcpy(s->slots[en->slot].cached + len0, en->tokens, (size_t)en->n * sizeof *en->tokens);
    if (j->n_eval < j->n_prompt) {
        j->n_eval += en->n;
        s->slots[en->slot].n_prefilled = j->n_eval;
        if (j->n_eval < j->n_prompt) return;
        j->t_first = srv_now_s();
        share_prompt(s, j, en->logits);
    }
    const int rows = en->want_logits == SRV_LOGITS_EVERY ? en->n : 1;
    int r = 0;
    take t;
    for (;; r++) {
        /* a draft's next token: the acceptance rule, by the law the draft model drew it from where it did */
        const float *q = r + 1 < rows && !j->drafter && s->draft ? srv_draft_q(s->draft, en->slot, r) : NULL;
        t = sample(s, j, rows > 1 ? srv_engine_row_logits(s->e, en->row0 + r) : en->logits, len0 + r + 1,
                   r + 1 < rows ? en->tokens[r + 1] : -1, q);
        if (t != TAKE_ON || rows == 1) break;
        /* a draft model's rows are its draft (srv_draft); a lookup's, its drafter's */
        if (!(j->drafter ? clinfer_drafter_accept(j->drafter, r, j->next) : r + 1 < rows && en->tokens[r + 1] == j->next))
            break;
        s->st.accepted_tokens++;
    }
    if (rows > 1) {
        s->st.drafted_tokens += (unsigned long long)(rows - 1);
        /* the pending token and the draft taken stay */
        const int keep = j->drafter ? clinfer_drafter_settle(j->drafter, r) : srv_draft_settle(s->draft, en->slot, rows - 1, r);
        srv_engine_slot_rewind(s->e, en->slot, len0 + keep);
    }
    conclude(s, j, t);
}

static void record_step(srv_sched *s, int gen, int prompt, int busy) {
    s->ring[s->ring_at] = (step_sample){srv_now_s(), gen, prompt, busy};
    s->ring_at = (s->ring_at + 1) % STATS_RING;
    if (s->ring_n < STATS_RING) s->ring_n++;
    s->st.steps++;
}

/* The jobs their clients released end before the next step. */
static void end_cancelled(srv_sched *s) {
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].job->cancelled) finish(s, s->slots[i].job, SRV_FINISH_ERROR, "cancelled");
}

/* A decoding slot's entry: its pending token, with a draft after it where
 * its job speculates and the step has rows to spare (*budget: the pass's
 * rows left; *draft_rows: the step's rows left for drafts). */
static void decode_entry(srv_sched *s, int i, srv_entry *en, int *budget, int *draft_rows) {
    srv_job *j = s->slots[i].job;
    const int len = srv_engine_slot_len(s->e, i), left = j->max_tokens ? j->max_tokens - j->n_gen : s->n_ctx;
    const int max = min_int(min_int(s->draft_max, *budget), *draft_rows);
    int rows = 0;
    const int32_t *batch = NULL;
    if (s->draft && len < s->n_ctx) {
        /* a draft model's draft, made with every other slot's before the
         * step's decode (decode_step): the rows are reserved here, the
         * entry shrinks to the draft made */
        const int k = min_int(min_int(srv_draft_want(s->draft, i, max), left - 1), s->n_ctx - len - 1);
        if (k > 0) {
            int32_t *dr = s->drows + (size_t)i * (size_t)(1 + s->draft_max);
            s->slots[i].cached[len] = dr[0] = j->next;
            s->dreq[s->n_dreq++] = (srv_draft_req){.slot = i, .text = s->slots[i].cached, .n = len + 1, .k = k, .sp = &j->sp, .smp = j->smp,
                                                   .out = dr + 1, .tag = (int)(en - s->entries)};
            rows = 1 + k;
            batch = dr;
        }
    } else if (j->drafter && len < s->n_ctx) {
        /* the text so far (the slot's tokens, then the pending one) drafts what follows */
        s->slots[i].cached[len] = j->next;
        rows = clinfer_drafter_propose(j->drafter, s->slots[i].cached, len + 1, max, left, s->n_ctx - len - 1, &batch);
    }
    if (rows > 1) {
        *budget -= rows - 1, *draft_rows -= rows - 1;
        en->tokens = batch; /* the drafter's until its next proposal: past this step's advance */
        en->n = rows;
        en->want_logits = SRV_LOGITS_EVERY;
    } else {
        en->tokens = &j->next;
        en->n = 1;
        en->want_logits = SRV_LOGITS_LAST;
    }
}

/* The step: every decoding slot's token, then prompt chunks within one
 * pass's budget (decodes are never held up by a long prompt), handed to
 * the prefilling slots in turn. Fills s->entries and s->len0; how many. */
static int build_step(srv_sched *s) {
    int n = 0, budget = srv_engine_n_batch(s->e), n_decode = 0;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job && s->slots[i].job->n_eval >= s->slots[i].job->n_prompt) budget--, n_decode++;
    int draft_rows = SPEC_STEP_ROWS - n_decode;
    s->n_dreq = 0;
    if (s->draft && srv_draft_max_streams(s->draft) > 0 && n_decode > srv_draft_max_streams(s->draft))
        draft_rows = 0; /* a busy step: the draft model's drafts would cost more than they save */
    for (int k = 0; k < s->n_slots; k++) {
        const int i = (s->prefill_from + k) % s->n_slots;
        srv_job *j = s->slots[i].job;
        if (!j || j->leader) continue; /* a follower waits for its leader's prompt */
        srv_entry *en = &s->entries[n];
        en->slot = i;
        if (j->n_eval < j->n_prompt) {
            int rem = j->n_prompt - j->n_eval, take = rem < PREFILL_CHUNK ? rem : PREFILL_CHUNK;
            if (take > budget) take = budget;
            if (take <= 0) continue;
            budget -= take;
            en->tokens = j->prompt + j->n_eval;
            en->n = take;
            en->want_logits = en->n == rem ? SRV_LOGITS_LAST : SRV_LOGITS_NONE;
        } else {
            decode_entry(s, i, en, &budget, &draft_rows);
        }
        s->len0[n++] = srv_engine_slot_len(s->e, i);
        s->slots[i].used = s->st.steps;
    }
    s->prefill_from = (s->prefill_from + 1) % s->n_slots;
    /* the blocks this step may take (a chunk's, and one where it straddles) */
    clinfer_kv_pool pool;
    srv_engine_kv_pool(s->e, &pool);
    int step_blocks = 0;
    for (int k = 0; k < n; k++) step_blocks += (s->entries[k].n + pool.block - 1) / pool.block + 1;
    make_room(s, step_blocks);
    return n;
}

/* Evaluates the step's n entries without the lock: the HTTP threads read
 * and submit meanwhile. */
static clinfer_status decode_step(srv_sched *s, int n) {
    pthread_mutex_unlock(&s->mu);
    if (s->n_dreq) { /* the draft model's drafts, every slot's together; an entry keeps the rows drafted */
        srv_draft_run(s->draft, s->dreq, s->n_dreq);
        for (int k = 0; k < s->n_dreq; k++) {
            srv_entry *en = &s->entries[s->dreq[k].tag];
            en->n = 1 + s->dreq[k].nd;
            if (en->n == 1) en->want_logits = SRV_LOGITS_LAST;
        }
    }
    clinfer_status st = srv_engine_step(s->e, s->entries, n);
    pthread_mutex_lock(&s->mu);
    return st;
}

/* After the step: each entry's job advances (sample, accept, conclude), or,
 * when the step failed, is ended with its slot as it was. How many prompt
 * tokens the step evaluated. */
static int after_step(srv_sched *s, int n, clinfer_status st) {
    int prompt = 0;
    for (int k = 0; k < n; k++) {
        srv_entry *en = &s->entries[k];
        srv_job *j = s->slots[en->slot].job;
        if (st != CLINFER_OK) { /* the step is lost: every slot as it was, its job ended */
            srv_engine_slot_rewind(s->e, en->slot, s->len0[k]);
            if (s->slots[en->slot].n_prefilled > s->len0[k]) s->slots[en->slot].n_prefilled = s->len0[k];
            if (st == CLINFER_ERR_INTERRUPTED) release_all(s, j), finish(s, j, SRV_FINISH_LENGTH, NULL);
            else finish(s, j, SRV_FINISH_ERROR, clinfer_last_error());
            continue;
        }
        if (j->n_eval < j->n_prompt) prompt += en->n;
        advance(s, en, s->len0[k]);
    }
    /* the runtime's abort hook fires only when the server is stopping:
     * admit nothing more (the queue may be reached before
     * srv_sched_shutdown is called) */
    if (st == CLINFER_ERR_INTERRUPTED) s->closed = 1;
    return prompt;
}

/* ---- slot actions ------------------------------------------------------------ */

/* One action on an idle slot, without the lock while its file is written
 * or read: the loop's thread alone touches the engine and the slot's
 * cache, and the HTTP threads read the slot's fields after. */
static void slot_action(srv_sched *s, slot_act *a) {
    srv_slot_result *r = a->r;
    slot *sl = &s->slots[a->slot];
    const double t0 = srv_now_s();
    r->st = CLINFER_OK;
    if (a->op == SRV_SLOT_ERASE) {
        r->n_tokens = sl->n_prefilled;
        srv_engine_slot_rewind(s->e, a->slot, 0);
        sl->n_prefilled = 0;
        if (s->draft) srv_draft_forget(s->draft, a->slot); /* its draft sequence too */
        s->st.slot_erases++;
    } else if (a->op == SRV_SLOT_SAVE && !lora_plain(sl->lora, sl->n_lora)) {
        r->st = clinfer_fail(CLINFER_ERR_ARG, "slot %d's cache was computed with LoRA adapters: not saved", a->slot);
    } else if (a->op == SRV_SLOT_SAVE) {
        /* what a prompt can reuse: the prompt tokens (generated ones after
         * them are evaluated again by the next turn anyway) */
        srv_engine_slot_rewind(s->e, a->slot, sl->n_prefilled);
        /* a sliding window that could not go back that far cleared it */
        if (sl->n_prefilled > srv_engine_slot_len(s->e, a->slot)) sl->n_prefilled = srv_engine_slot_len(s->e, a->slot);
        const int n = sl->n_prefilled;
        pthread_mutex_unlock(&s->mu);
        r->st = srv_engine_slot_save(s->e, a->slot, sl->cached, n, a->path, &r->bytes);
        pthread_mutex_lock(&s->mu);
        r->n_tokens = n;
        if (r->st == CLINFER_OK) s->st.slot_saves++;
    } else {
        pthread_mutex_unlock(&s->mu);
        int n = 0;
        r->st = srv_engine_slot_load(s->e, a->slot, a->path, s->scratch, s->n_ctx, &n, &r->bytes);
        /* the pool's free blocks are short (the failed load left this slot
         * empty): idle slots' caches give theirs, the least recently used
         * first, one at a time with another try after each, so that only as
         * many go as the file needs (room for a whole context emptied every
         * other idle slot: its tokens are not known before it is read). Not
         * for a file of more tokens than a slot's context, refused by its
         * header whatever the pool: a load with no room for its tokens
         * tells the two apart (CLINFER_ERR_ARG: they fit; the slot is left
         * as it is) */
        for (int more = 1; r->st == CLINFER_ERR_CONTEXT && more;) {
            int n0 = 0;
            if (srv_engine_slot_load(s->e, a->slot, a->path, NULL, 0, &n0, NULL) != CLINFER_ERR_ARG) break;
            pthread_mutex_lock(&s->mu);
            more = evict_one(s);
            pthread_mutex_unlock(&s->mu);
            r->st = more ? srv_engine_slot_load(s->e, a->slot, a->path, s->scratch, s->n_ctx, &n, &r->bytes)
                         : clinfer_fail(CLINFER_ERR_CONTEXT, "the KV cache is full: no idle slot's cache is left to "
                                                             "give its blocks");
        }
        pthread_mutex_lock(&s->mu);
        if (r->st == CLINFER_OK) {
            memcpy(sl->cached, s->scratch, (size_t)n * sizeof *s->scratch);
            sl->n_prefilled = n;
            sl->n_lora = 0; /* a file holds the base's KV (lora_plain) */
            sl->used = s->st.steps; /* as recent as a request's */
            r->n_tokens = n;
            s->st.slot_restores++;
        } else if (sl->n_prefilled > srv_engine_slot_len(s->e, a->slot)) {
            sl->n_prefilled = srv_engine_slot_len(s->e, a->slot); /* emptied by a failure past its header */
        }
    }
    if (r->st != CLINFER_OK) {
        r->why = SRV_SLOT_FAILED;
        snprintf(r->error, sizeof r->error, "%s", clinfer_last_error());
        s->st.slot_failures++;
    }
    r->ms = (srv_now_s() - t0) * 1e3;
}

/* The waiting slot actions, between steps. */
static void run_actions(srv_sched *s) {
    while (s->acts) {
        slot_act *a = s->acts;
        s->acts = a->next;
        if (s->slots[a->slot].job) {
            a->r->why = SRV_SLOT_BUSY;
            snprintf(a->r->error, sizeof a->r->error, "slot %d is processing a request", a->slot);
        } else {
            slot_action(s, a);
        }
        a->done = 1;
        pthread_cond_broadcast(&s->progress);
    }
}

void srv_sched_slot_action(srv_sched *s, srv_slot_op op, int slot, const char *path, srv_slot_result *r) {
    memset(r, 0, sizeof *r);
    if (slot < 0 || slot >= s->n_slots) {
        r->why = SRV_SLOT_NO_SUCH;
        snprintf(r->error, sizeof r->error, "no slot %d: the server has %d (0 to %d)", slot, s->n_slots, s->n_slots - 1);
        return;
    }
    slot_act a = {.op = op, .slot = slot, .path = path, .r = r};
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        r->why = SRV_SLOT_FAILED;
        r->st = CLINFER_ERR_INTERRUPTED;
        snprintf(r->error, sizeof r->error, "the server is shutting down");
    } else {
        slot_act **at = &s->acts;
        while (*at) at = &(*at)->next;
        *at = &a;
        pthread_cond_signal(&s->work);
        while (!a.done) pthread_cond_wait(&s->progress, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_slots(srv_sched *s, srv_slot_view *out) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        const slot *sl = &s->slots[i];
        const srv_job *j = sl->job;
        out[i] = (srv_slot_view){.id = i, .n_ctx = s->n_ctx, .is_processing = j != NULL,
                                 .speculative = s->draft_max > 0, .n_cached = sl->n_prefilled};
        if (j) {
            out[i].n_prompt = j->n_prompt;
            out[i].n_prompt_processed = j->n_eval - j->n_cached;
            out[i].n_prompt_cache = j->n_cached;
            out[i].n_decoded = j->n_gen;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* Shut down: queued jobs never ran, running ones are cut. */
static void end_all(srv_sched *s) {
    while (s->q_head) {
        srv_job *j = s->q_head;
        s->q_head = j->qnext;
        s->n_queued--;
        j->shutdown = 1;
        finish(s, j, SRV_FINISH_ERROR, "the server is shutting down");
    }
    s->q_tail = NULL;
    for (slot_act *a = s->acts; a; a = a->next) {
        a->r->why = SRV_SLOT_FAILED;
        a->r->st = CLINFER_ERR_INTERRUPTED;
        snprintf(a->r->error, sizeof a->r->error, "the server is shutting down");
        a->done = 1;
    }
    s->acts = NULL;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job) release_all(s, s->slots[i].job), finish(s, s->slots[i].job, SRV_FINISH_LENGTH, NULL);
    pthread_cond_broadcast(&s->progress);
}

/* The step loop: admit, build the step, decode it, advance its jobs,
 * record it; idle until there is work. */
static void *loop(void *arg) {
    srv_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        end_cancelled(s);
        if (s->closed) break;
        run_actions(s);
        admit(s);
        const int n = build_step(s);
        if (n == 0) {
            srv_engine_kv_pool(s->e, &s->seen);
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        const clinfer_status st = decode_step(s, n);
        const unsigned long long gen0 = s->st.gen_tokens;
        const int prompt = after_step(s, n, st);
        s->st.prompt_tokens += (unsigned long long)prompt;
        record_step(s, (int)(s->st.gen_tokens - gen0), prompt, n);
        srv_engine_kv_pool(s->e, &s->seen);
        pthread_cond_broadcast(&s->progress);
    }
    end_all(s);
    pthread_mutex_unlock(&s->mu);
    /* PoCL compiles kernels with LLVM in the thread that enqueues them, and
     * LLVM gives it an alternate signal stack from malloc; ASan's thread
     * teardown munmaps the current one and aborts on that (serve's exit
     * under make test-asan). Off before the end: LLVM keeps its memory. */
    sigaltstack(&(stack_t){.ss_flags = SS_DISABLE}, NULL);
    return NULL;
}

/* ---- the HTTP threads' side ----------------------------------------------- */

clinfer_status srv_sched_create(srv_engine *e, const clinfer_model *m, int n_slots, int max_queue, srv_sched **out) {
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    s->e = e;
    s->m = m;
    s->n_slots = n_slots;
    s->max_queue = max_queue;
    s->n_ctx = srv_engine_n_ctx(e);
    s->n_vocab = clinfer_model_n_vocab(m);
    s->st.n_slots = n_slots;
    srv_engine_kv_pool(e, &s->seen);
    s->block = s->seen.block > 0 ? s->seen.block : 1;
    s->n_blocks = s->seen.n_blocks;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work, NULL);
    srv_cond_init_monotonic(&s->progress);
    s->slots = calloc((size_t)n_slots, sizeof *s->slots);
    s->entries = calloc((size_t)n_slots, sizeof *s->entries);
    s->len0 = calloc((size_t)n_slots, sizeof *s->len0);
    s->scratch = malloc((size_t)s->n_ctx * sizeof *s->scratch);
    int ok = s->slots && s->entries && s->len0 && s->scratch;
    for (int i = 0; ok && i < n_slots; i++) ok = (s->slots[i].cached = malloc((size_t)s->n_ctx * sizeof(int32_t))) != NULL;
    if (!ok) {
        srv_sched_free(s);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    int err = pthread_create(&s->thread, NULL, loop, s);
    if (err) {
        srv_sched_free(s);
        return clinfer_fail(CLINFER_ERR_MEMORY, "cannot start the scheduler thread: %s", strerror(err));
    }
    s->started = 1;
    *out = s;
    return CLINFER_OK;
}

clinfer_status srv_sched_cache_ram(srv_sched *s, size_t bytes) {
    srv_pcache *c = NULL;
    if (bytes && srv_pcache_create(bytes, &c) != CLINFER_OK) return CLINFER_ERR_MEMORY;
    pthread_mutex_lock(&s->mu);
    srv_pcache_free(s->pcache);
    s->pcache = c;
    pthread_mutex_unlock(&s->mu);
    return CLINFER_OK;
}

void srv_sched_speculate(srv_sched *s, int draft_max) {
    pthread_mutex_lock(&s->mu);
    s->draft_max = draft_max > 0 ? draft_max : 0; /* each job's drafter holds its batch's rows */
    pthread_mutex_unlock(&s->mu);
}

clinfer_status srv_sched_set_draft(srv_sched *s, srv_draft *d) {
    const int max = srv_draft_max(d);
    srv_draft_req *q = calloc((size_t)s->n_slots, sizeof *q);
    int32_t *rows = malloc((size_t)s->n_slots * (size_t)(1 + max) * sizeof *rows);
    if (!q || !rows) {
        free(q), free(rows);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    pthread_mutex_lock(&s->mu);
    free(s->dreq), free(s->drows);
    s->dreq = q, s->drows = rows;
    s->draft = d;
    s->draft_max = max; /* the rows a slot's verification may take */
    pthread_mutex_unlock(&s->mu);
    return CLINFER_OK;
}

void srv_sched_shutdown(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    if (s->started) {
        srv_sched_shutdown(s);
        pthread_join(s->thread, NULL);
    }
    for (int i = 0; s->slots && i < s->n_slots; i++) free(s->slots[i].cached);
    free(s->slots);
    free(s->entries);
    free(s->len0);
    free(s->scratch);
    free(s->dreq);
    free(s->drows);
    srv_pcache_free(s->pcache);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->progress);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Queued jobs that a free slot takes at the next step do not wait: only
 * the rest count against max_queue and in the stats (a burst must not be
 * refused while slots are idle, nor a request when max_queue is 0). */
static int n_waiting(const srv_sched *s) {
    int w = s->n_queued - (s->n_slots - s->n_running);
    return w > 0 ? w : 0;
}

srv_submit srv_sched_submit_group(srv_sched *s, srv_job **jobs, int n) {
    static unsigned long long groups; /* under s->mu: a group's mark */
    pthread_mutex_lock(&s->mu);
    srv_submit r = s->closed ? SRV_SUBMIT_CLOSED
                   : n > s->n_slots || s->n_running + s->n_queued + n > s->n_slots + s->max_queue ? SRV_SUBMIT_FULL
                   : SRV_SUBMIT_OK;
    const unsigned long long group = n > 1 ? ++groups : 0;
    for (int i = 0; r == SRV_SUBMIT_OK && i < n; i++) {
        srv_job *j = jobs[i];
        j->submitted = 1;
        j->state = SRV_QUEUED;
        j->t_submit = srv_now_s();
        j->group = group;
        if (s->q_tail) s->q_tail->qnext = j;
        else s->q_head = j;
        s->q_tail = j;
        s->n_queued++;
    }
    if (r == SRV_SUBMIT_OK) s->n_held += n, pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return r;
}

srv_submit srv_sched_submit(srv_sched *s, srv_job *j) { return srv_sched_submit_group(s, &j, 1); }

static double ms(double a, double b) { return b > a && a > 0 ? (b - a) * 1e3 : 0; }

/* timeout_ms from now on the progress condition's clock. */
static struct timespec deadline(int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    return until;
}

void srv_sched_wait_any(srv_sched *s, srv_job **jobs, int n, const size_t *from, const int *skip, int timeout_ms) {
    const struct timespec until = deadline(timeout_ms);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int ready = 0;
        for (int i = 0; i < n; i++)
            if (!(skip && skip[i]) && (jobs[i]->state == SRV_DONE || jobs[i]->final_len > from[i])) ready = 1;
        if (ready || pthread_cond_timedwait(&s->progress, &s->mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&s->mu);
}

int srv_sched_logprobs(srv_sched *s, srv_job *j, int from, size_t have, int done, srv_token_lp **out) {
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    int k = from;
    while (k < j->n_lp && (j->lp[k].end <= have || (done && j->lp[k].start < have))) k++;
    int n = k - from;
    if (n > 0 && !(*out = malloc((size_t)n * sizeof **out))) n = -1;
    if (n > 0) memcpy(*out, j->lp + from, (size_t)n * sizeof **out);
    pthread_mutex_unlock(&s->mu);
    if (n < 0) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    return n;
}

void srv_sched_wait(srv_sched *s, srv_job *j, size_t from, int timeout_ms, srv_job_view *v, char **text, size_t *n) {
    const struct timespec until = deadline(timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (j->state != SRV_DONE && j->final_len <= from)
        if (pthread_cond_timedwait(&s->progress, &s->mu, &until) == ETIMEDOUT) break;
    memset(v, 0, sizeof *v);
    v->state = j->state;
    v->finish = j->finish;
    v->shutdown = j->shutdown;
    v->stop_hit = j->stop_hit;
    v->text_len = j->final_len;
    v->n_prompt = j->n_prompt;
    v->n_cached = j->n_cached;
    v->n_gen = j->n_gen;
    v->queue_ms = ms(j->t_submit, j->t_start);
    v->prompt_ms = ms(j->t_start, j->t_first);
    v->gen_ms = ms(j->t_first, j->t_end);
    snprintf(v->error, sizeof v->error, "%s", j->error);
    *text = NULL;
    *n = 0;
    if (j->final_len > from && (*text = malloc(j->final_len - from))) {
        memcpy(*text, j->text.p + from, j->final_len - from);
        *n = j->final_len - from;
    }
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_release(srv_sched *s, srv_job *j) {
    if (!j) return;
    if (!s || !j->submitted) {
        job_free(j);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->n_held--;
    if (j->state == SRV_QUEUED) { /* never ran: out of the queue */
        srv_job **p = &s->q_head, *prev = NULL;
        while (*p != j) prev = *p, p = &(*p)->qnext;
        *p = j->qnext;
        if (s->q_tail == j) s->q_tail = prev;
        s->n_queued--;
        s->st.requests_cancelled++;
        job_free(j);
    } else if (j->state == SRV_RUNNING) { /* the step loop frees it */
        j->cancelled = j->orphaned = 1;
        pthread_cond_signal(&s->work);
    } else {
        job_free(j);
    }
    pthread_mutex_unlock(&s->mu);
}

int srv_sched_held(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    const int n = s->n_held;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void srv_sched_stats(srv_sched *s, srv_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->running = s->n_running;
    out->queued = n_waiting(s);
    out->kv_blocks = s->seen.n_blocks;
    out->kv_free = s->seen.n_free;
    out->kv_reserved = s->reserved;
    if (s->pcache) {
        srv_pcache_stats ps;
        srv_pcache_stats_get(s->pcache, &ps);
        out->cache_ram_stores = ps.stores;
        out->cache_ram_evictions = ps.evictions;
        out->cache_ram_entries = ps.entries;
        out->cache_ram_bytes = ps.bytes;
        out->cache_ram_max_bytes = ps.max_bytes;
    }
    double t = srv_now_s(), t_first = t;
    long gen = 0, prompt = 0, busy = 0, steps = 0;
    for (int k = 0; k < s->ring_n; k++) {
        const step_sample *r = &s->ring[(s->ring_at - 1 - k + STATS_RING) % STATS_RING];
        if (t - r->t > STATS_WINDOW_S) break;
        gen += r->gen, prompt += r->prompt, busy += r->busy, steps++;
        t_first = r->t;
    }
    pthread_mutex_unlock(&s->mu);
    /* rates over the window (or since the first step in it, when it is busy only now) */
    double span = steps > 1 ? t - t_first : STATS_WINDOW_S;
    if (span < 1) span = 1;
    out->gen_tps = gen / span;
    out->prompt_tps = prompt / span;
    out->occupancy = steps ? (double)busy / steps / s->n_slots : 0;
}

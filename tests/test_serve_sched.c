/* server/scheduler.c over the engine on a tiny model ($CLINFER_TINY_GGUF
 * writes it; it has no end-of-generation token): a seed gives the same text
 * whether the prompt was cached or not, max_tokens and the context end in
 * "length", stop strings cut the text, a full queue refuses, a released job
 * frees its slot, stopping cuts running jobs and fails queued ones, and a
 * prefix cached in one slot is copied into another for a prompt sharing it,
 * the text as without the cache; a --cache-ram entry evicted by the
 * landing slot's own is not loaded in another's stead. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clinfer.h"
#include "draft.h"
#include "engine.h"
#include "grammar_cache.h"
#include "scheduler.h"
#include "support/stats.h" /* gamma_q, chi2_p */

typedef struct fixture {
    char path[256];
    clinfer_model *m;
} fixture;

static fixture fx;

static int setup(void **state) {
    (void)state;
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) {
        fprintf(stderr, "CLINFER_TINY_GGUF is not set (ctest sets it)\n");
        return -1;
    }
    snprintf(fx.path, sizeof fx.path, "/tmp/clinfer-test-sched-%d.gguf", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --no-eog", tool, fx.path);
    if (system(cmd) != 0) return -1;
    if (clinfer_model_load(fx.path, NULL, NULL, &fx.m)) {
        fprintf(stderr, "%s\n", clinfer_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    clinfer_model_free(fx.m);
    unlink(fx.path);
    return 0;
}

typedef struct server {
    srv_engine *e;
    srv_sched *s;
} server;

static server start(int slots, int n_ctx, int queue) {
    server sv;
    assert_int_equal(srv_engine_create(fx.m, slots, n_ctx, CLINFER_KV_F32, 0, &sv.e), CLINFER_OK);
    assert_int_equal(srv_sched_create(sv.e, fx.m, slots, queue, &sv.s), CLINFER_OK);
    return sv;
}

static void stop(server *sv) {
    srv_sched_free(sv->s);
    srv_engine_free(sv->e);
}

static const int32_t PROMPT[] = {5, 9, 12, 3, 7, 30, 2, 8};
enum { N_PROMPT = sizeof PROMPT / sizeof PROMPT[0] };

static srv_job *job(const srv_job_params *p, int n_prompt) {
    srv_job *j;
    assert_int_equal(srv_job_create(PROMPT, n_prompt, p, &j), CLINFER_OK);
    return j;
}

/* Runs a job to its end; its text (malloc'd) and view. */
static char *run(server *sv, srv_job *j, srv_job_view *v) {
    assert_int_equal(srv_sched_submit(sv->s, j), SRV_SUBMIT_OK);
    char *all = calloc(1, 1), *t;
    size_t have = 0, n;
    do {
        srv_sched_wait(sv->s, j, have, 1000, v, &t, &n);
        all = realloc(all, have + n + 1);
        if (n) memcpy(all + have, t, n);
        all[have += n] = 0;
        free(t);
    } while (v->state != SRV_DONE);
    srv_sched_release(sv->s, j);
    return all;
}

static srv_job_params sampled(int max_tokens) {
    srv_job_params p = {.max_tokens = max_tokens, .sp = clinfer_sampler_default_params()};
    p.sp.temperature = 1.0f;
    p.sp.top_k = 0;
    p.sp.seed = 77;
    return p;
}

static void test_seed_same_text_cached_or_not(void **state) {
    (void)state;
    server sv = start(1, 256, 4);
    srv_job_params p = sampled(24);
    srv_job_view v1, v2;
    char *a = run(&sv, job(&p, N_PROMPT), &v1);
    char *b = run(&sv, job(&p, N_PROMPT), &v2); /* the same slot: its prompt is cached */
    assert_int_equal(v1.n_cached, 0);
    assert_int_equal(v2.n_cached, N_PROMPT - 2); /* the last two are evaluated again */
    assert_string_equal(a, b);
    assert_int_equal(v1.finish, SRV_FINISH_LENGTH);
    assert_int_equal(v1.n_gen, 24);
    free(a);
    free(b);
    stop(&sv);
}

static void test_context_end_is_length(void **state) {
    (void)state;
    server sv = start(1, 20, 4);
    srv_job_params p = sampled(0); /* no max_tokens: up to the context */
    srv_job_view v;
    free(run(&sv, job(&p, N_PROMPT), &v));
    assert_int_equal(v.finish, SRV_FINISH_LENGTH);
    assert_int_equal(v.n_prompt + v.n_gen, 21); /* the last token is sampled, never evaluated */
    stop(&sv);
}

static void test_stop_string_cuts(void **state) {
    (void)state;
    server sv = start(2, 256, 4);
    srv_job_params p = sampled(32);
    srv_job_view v;
    char *full = run(&sv, job(&p, N_PROMPT), &v);
    size_t len = strlen(full);
    assert_true(len > 8);
    char text[4] = {0};
    memcpy(text, full + len / 2, 3); /* some text from the middle */
    size_t cut = (size_t)(strstr(full, text) - full);
    p.stop[0] = text;
    p.n_stop = 1;
    char *part = run(&sv, job(&p, N_PROMPT), &v);
    assert_int_equal(v.finish, SRV_FINISH_STOP);
    assert_int_equal(strlen(part), cut);
    assert_memory_equal(part, full, cut);
    free(full);
    free(part);
    stop(&sv);
}

static void test_queue_full_release_and_shutdown(void **state) {
    (void)state;
    server sv = start(1, 4096, 1);
    srv_job_params p = sampled(0);
    srv_job *a = job(&p, N_PROMPT), *b = job(&p, N_PROMPT), *c = job(&p, N_PROMPT);
    srv_job_view v;
    char *t;
    size_t n;
    assert_int_equal(srv_sched_submit(sv.s, a), SRV_SUBMIT_OK);
    do { /* a is running */
        srv_sched_wait(sv.s, a, 0, 1000, &v, &t, &n);
        free(t);
    } while (v.state != SRV_RUNNING || n == 0);
    assert_int_equal(srv_sched_submit(sv.s, b), SRV_SUBMIT_OK);
    srv_sched_wait(sv.s, b, 0, 10, &v, &t, &n);
    assert_int_equal(v.state, SRV_QUEUED);
    assert_int_equal(srv_sched_submit(sv.s, c), SRV_SUBMIT_FULL);
    srv_sched_release(sv.s, c); /* never submitted: freed */
    srv_sched_release(sv.s, a); /* gone: b gets the slot */
    do {
        srv_sched_wait(sv.s, b, 0, 1000, &v, &t, &n);
        free(t);
    } while (v.state != SRV_RUNNING);
    srv_stats st;
    srv_sched_stats(sv.s, &st);
    assert_int_equal(st.requests_cancelled, 1);
    assert_int_equal(st.running, 1);
    assert_int_equal(st.queued, 0);
    /* stopping cuts b (length); a job queued behind it fails */
    srv_job *d = job(&p, N_PROMPT);
    assert_int_equal(srv_sched_submit(sv.s, d), SRV_SUBMIT_OK);
    srv_sched_shutdown(sv.s);
    do {
        srv_sched_wait(sv.s, b, 0, 1000, &v, &t, &n);
        free(t);
    } while (v.state != SRV_DONE);
    assert_int_equal(v.finish, SRV_FINISH_LENGTH);
    srv_sched_wait(sv.s, d, 0, 1000, &v, &t, &n);
    free(t);
    assert_int_equal(v.state, SRV_DONE);
    assert_int_equal(v.finish, SRV_FINISH_ERROR);
    assert_true(v.shutdown);
    srv_job *e = job(&p, N_PROMPT);
    assert_int_equal(srv_sched_submit(sv.s, e), SRV_SUBMIT_CLOSED);
    srv_sched_release(sv.s, e);
    srv_sched_release(sv.s, b);
    srv_sched_release(sv.s, d);
    stop(&sv);
}

/* The queue counts only the jobs that wait for a slot: n_slots + max_queue
 * jobs submitted at once are all taken (max_queue 0 too: the free slots take
 * them), one more is refused, and the stats show only the waiting ones. */
static void test_burst_takes_free_slots(void **state) {
    (void)state;
    static const int QUEUES[] = {0, 2};
    for (int q = 0; q < 2; q++) {
        enum { SLOTS = 3 };
        server sv = start(SLOTS, 4096, QUEUES[q]);
        srv_job_params p = sampled(0);
        srv_job *jobs[SLOTS + 2];
        int n = SLOTS + QUEUES[q];
        for (int i = 0; i < n; i++) assert_int_equal(srv_sched_submit(sv.s, jobs[i] = job(&p, N_PROMPT)), SRV_SUBMIT_OK);
        srv_job *extra = job(&p, N_PROMPT);
        assert_int_equal(srv_sched_submit(sv.s, extra), SRV_SUBMIT_FULL);
        srv_sched_release(sv.s, extra);
        srv_stats st;
        for (int i = 0; i < SLOTS; i++) { /* the first ones reach the slots */
            srv_job_view v;
            char *t;
            size_t m;
            do {
                srv_sched_wait(sv.s, jobs[i], 0, 1000, &v, &t, &m);
                free(t);
            } while (v.state == SRV_QUEUED);
        }
        srv_sched_stats(sv.s, &st);
        assert_int_equal(st.running, SLOTS);
        assert_int_equal(st.queued, QUEUES[q]);
        for (int i = 0; i < n; i++) srv_sched_release(sv.s, jobs[i]);
        stop(&sv);
    }
}

/* ---- the prefix cache across slots ---------------------------------------- */

enum { LONG = 300, LONG_CTX = 512, LONG_GEN = 24 };

/* n tokens of a fixed pseudo-random stream from `seed`, in [3, n_vocab) */
static void fill(int32_t *t, int n, uint32_t seed) {
    int n_vocab = clinfer_model_n_vocab(fx.m);
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 3 + (int32_t)((seed >> 8) % (uint32_t)(n_vocab - 3));
    }
}


/* Submits n jobs of parameters p at once and waits for them all: their texts and views. */
static void run_jobs(server *sv, const srv_job_params *p, int32_t *const *prompts, const int *lens, int n,
                     char **texts, srv_job_view *views) {
    srv_job *jobs[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        assert_int_equal(srv_job_create(prompts[i], lens[i], p, &jobs[i]), CLINFER_OK);
        assert_int_equal(srv_sched_submit(sv->s, jobs[i]), SRV_SUBMIT_OK);
    }
    for (int i = 0; i < n; i++) {
        char *t;
        size_t m;
        do {
            srv_sched_wait(sv->s, jobs[i], 0, 1000, &views[i], &t, &m);
            free(t);
        } while (views[i].state != SRV_DONE);
        srv_sched_wait(sv->s, jobs[i], 0, 0, &views[i], &texts[i], &m);
        texts[i] = realloc(texts[i], m + 1);
        texts[i][m] = 0;
        srv_sched_release(sv->s, jobs[i]);
    }
}

/* run_jobs on seeded draws of LONG_GEN tokens (greedy, the tiny model soon repeats one token). */
static void run_together(server *sv, int32_t *const *prompts, const int *lens, int n, char **texts,
                         srv_job_view *views) {
    srv_job_params p = sampled(LONG_GEN);
    run_jobs(sv, &p, prompts, lens, n, texts, views);
}

/* What each prompt gives alone on a fresh scheduler, nothing cached. */
static void expect_uncached(int32_t *const *prompts, const int *lens, int n, char **texts) {
    for (int i = 0; i < n; i++) {
        server sv = start(1, LONG_CTX, 1);
        char *want;
        srv_job_view v;
        run_together(&sv, &prompts[i], &lens[i], 1, &want, &v);
        assert_int_equal(v.n_cached, 0);
        assert_int_equal(v.finish, SRV_FINISH_LENGTH);
        assert_string_equal(texts[i], want);
        free(want);
        stop(&sv);
    }
}

/* The counters of the jobs so far: cached and admitted prompt tokens. */
static void expect_stats(server *sv, unsigned long long cached, unsigned long long admitted) {
    srv_stats st;
    srv_sched_stats(sv->s, &st);
    assert_int_equal(st.cached_tokens, cached);
    assert_int_equal(st.admitted_tokens, admitted);
}

/* Greedy jobs sped up by prompt lookup give the texts they give without
 * (four at once, their drafts verified in the same steps), on the float
 * tiny model (whose greedy text repeats: drafts taken) and a Q8_0 one
 * (drafts missed, their rows dropped); *drafted and *accepted count them. */
static void check_speculation(clinfer_model *m, unsigned long long *drafted, unsigned long long *accepted) {
    enum { JOBS = 4 };
    int32_t toks[JOBS][24], *prompts[JOBS];
    for (int i = 0; i < JOBS; i++) {
        fill(toks[i], 24, 300 + (uint32_t)i);
        for (int k = 6; i % 2 == 0 && k < 24; k++) toks[i][k] = toks[i][k % 6]; /* a pattern repeated */
        prompts[i] = toks[i];
    }
    char *texts[2][JOBS];
    for (int spec = 0; spec < 2; spec++) {
        server sv;
        assert_int_equal(srv_engine_create(m, JOBS, 256, CLINFER_KV_F32, 0, &sv.e), CLINFER_OK);
        assert_int_equal(srv_sched_create(sv.e, m, JOBS, JOBS, &sv.s), CLINFER_OK);
        srv_sched_speculate(sv.s, spec ? 8 : 0);
        srv_job_params p = {.max_tokens = 40, .sp = clinfer_sampler_default_params()};
        p.sp.temperature = 0; /* greedy */
        int lens[JOBS] = {24, 24, 24, 24};
        srv_job_view v[JOBS];
        run_jobs(&sv, &p, prompts, lens, JOBS, texts[spec], v);
        for (int i = 0; i < JOBS; i++) {
            assert_int_equal(v[i].finish, SRV_FINISH_LENGTH);
            assert_int_equal(v[i].n_gen, 40);
        }
        srv_stats st;
        srv_sched_stats(sv.s, &st);
        assert_true(st.accepted_tokens <= st.drafted_tokens);
        if (spec) *drafted += st.drafted_tokens, *accepted += st.accepted_tokens;
        else assert_int_equal(st.drafted_tokens, 0);
        stop(&sv);
    }
    for (int i = 0; i < JOBS; i++) {
        assert_string_equal(texts[1][i], texts[0][i]);
        free(texts[0][i]);
        free(texts[1][i]);
    }
}

/* Sampled jobs speculate too (the acceptance rule, clinfer_next_token_draft:
 * its law is tests/test_spec.c's): drafts taken and refused, every job to
 * its length. */
static void test_speculation_sampled(void **state) {
    (void)state;
    enum { JOBS = 4 };
    int32_t toks[JOBS][24], *prompts[JOBS];
    for (int i = 0; i < JOBS; i++) {
        fill(toks[i], 24, 500 + (uint32_t)i);
        for (int k = 6; k < 24; k++) toks[i][k] = toks[i][k % 6]; /* a pattern repeated */
        prompts[i] = toks[i];
    }
    server sv;
    assert_int_equal(srv_engine_create(fx.m, JOBS, 256, CLINFER_KV_F32, 0, &sv.e), CLINFER_OK);
    assert_int_equal(srv_sched_create(sv.e, fx.m, JOBS, JOBS, &sv.s), CLINFER_OK);
    srv_sched_speculate(sv.s, 8);
    srv_job_params p = {.max_tokens = 40, .sp = clinfer_sampler_default_params()};
    p.sp.temperature = 0.3f;
    int lens[JOBS] = {24, 24, 24, 24};
    srv_job_view v[JOBS];
    char *texts[JOBS];
    run_jobs(&sv, &p, prompts, lens, JOBS, texts, v);
    for (int i = 0; i < JOBS; i++) {
        assert_int_equal(v[i].finish, SRV_FINISH_LENGTH);
        assert_int_equal(v[i].n_gen, 40);
        free(texts[i]);
    }
    srv_stats st;
    srv_sched_stats(sv.s, &st);
    print_message("sampled speculation: %llu drafted, %llu accepted\n", st.drafted_tokens, st.accepted_tokens);
    assert_true(st.accepted_tokens > 0 && st.accepted_tokens < st.drafted_tokens);
    stop(&sv);
}

static void test_speculation_same_text(void **state) {
    (void)state;
    unsigned long long drafted = 0, accepted = 0;
    check_speculation(fx.m, &drafted, &accepted);
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s.q8.gguf", fx.path);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' Q8_0 --kquant --no-eog", getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *q;
    assert_int_equal(clinfer_model_load(path, NULL, NULL, &q), CLINFER_OK);
    check_speculation(q, &drafted, &accepted);
    clinfer_model_free(q);
    unlink(path);
    print_message("speculation: %llu drafted, %llu accepted\n", drafted, accepted);
    assert_true(accepted > 0);        /* drafts taken: rows kept */
    assert_true(accepted < drafted);  /* drafts missed: rows dropped */
}

/* serve --model-draft (server/draft.c): four greedy jobs at once, every
 * slot's draft made in the same draft steps, give the texts they give
 * without; the tiny model drafting for itself has every draft taken, its
 * Q8_0 conversion some; a greedy and a sampled job share steps; a draft
 * model of another vocabulary is refused. */
static void draft_run(clinfer_model *draft, float temp, char **texts, unsigned long long *drafted,
                      unsigned long long *accepted) {
    enum { JOBS = 4 };
    int32_t toks[JOBS][24], *prompts[JOBS];
    for (int i = 0; i < JOBS; i++) {
        fill(toks[i], 24, 700 + (uint32_t)i);
        prompts[i] = toks[i];
    }
    server sv;
    assert_int_equal(srv_engine_create(fx.m, JOBS, 256, CLINFER_KV_F32, 0, &sv.e), CLINFER_OK);
    assert_int_equal(srv_sched_create(sv.e, fx.m, JOBS, JOBS, &sv.s), CLINFER_OK);
    srv_draft *d = NULL;
    if (draft) {
        assert_int_equal(srv_draft_create(fx.m, draft, JOBS, 256, CLINFER_KV_F32, &(srv_draft_params){6, 0, 0, 0}, &d),
                         CLINFER_OK);
        assert_int_equal(srv_sched_set_draft(sv.s, d), CLINFER_OK);
    }
    srv_job_params p = {.max_tokens = 32, .sp = clinfer_sampler_default_params()};
    p.sp.temperature = temp;
    int lens[JOBS] = {24, 20, 16, 24};
    srv_job_view v[JOBS];
    run_jobs(&sv, &p, prompts, lens, JOBS, texts, v);
    for (int i = 0; i < JOBS; i++) assert_int_equal(v[i].n_gen, 32);
    srv_stats st;
    srv_sched_stats(sv.s, &st);
    *drafted = st.drafted_tokens, *accepted = st.accepted_tokens;
    stop(&sv);
    srv_draft_free(d);
}

static void test_draft_model_same_text(void **state) {
    (void)state;
    char *want[4], *got[4];
    unsigned long long drafted, accepted;
    draft_run(NULL, 0, want, &drafted, &accepted);
    assert_int_equal(drafted, 0);
    /* the target drafting for itself: its very tokens */
    draft_run(fx.m, 0, got, &drafted, &accepted);
    print_message("self draft: %llu drafted, %llu accepted\n", drafted, accepted);
    assert_true(drafted > 0 && accepted == drafted);
    for (int i = 0; i < 4; i++) assert_string_equal(got[i], want[i]), free(got[i]);
    /* its Q8_0 conversion: the same vocabulary, other logits */
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s.dq8.gguf", fx.path);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' Q8_0 --kquant --no-eog", getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *q;
    assert_int_equal(clinfer_model_load(path, NULL, NULL, &q), CLINFER_OK);
    draft_run(q, 0, got, &drafted, &accepted);
    print_message("Q8_0 draft: %llu drafted, %llu accepted\n", drafted, accepted);
    assert_true(accepted > 0 && accepted <= drafted);
    for (int i = 0; i < 4; i++) assert_string_equal(got[i], want[i]), free(got[i]), free(want[i]);
    /* sampled jobs: drafts taken by the rule, every job to its length */
    draft_run(q, 0.3f, got, &drafted, &accepted);
    print_message("Q8_0 draft, sampled: %llu drafted, %llu accepted\n", drafted, accepted);
    for (int i = 0; i < 4; i++) free(got[i]);
    clinfer_model_free(q);
    unlink(path);
    /* another vocabulary: refused, named */
    snprintf(path, sizeof path, "%s.other.gguf", fx.path);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --seed 3", getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *o;
    assert_int_equal(clinfer_model_load(path, NULL, NULL, &o), CLINFER_OK);
    srv_draft *d = (srv_draft *)1;
    assert_int_equal(srv_draft_create(fx.m, o, 2, 64, CLINFER_KV_F32, &(srv_draft_params){4, 0, 0, 0}, &d),
                     CLINFER_ERR_ARG);
    assert_null(d);
    print_message("refused: %s\n", clinfer_last_error());
    clinfer_model_free(o);
    unlink(path);
}

/* srv_engine_bytes counts the KV cache as allocated: a Gemma 3's sliding-
 * window layers (5 in 6) keep a window each, not the pool's context, so
 * counting every layer on the pool overstated a long context several
 * times over (and the start-up check refused servers that fit). */
static void test_engine_bytes_sliding_window(void **state) {
    (void)state;
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s.g3.gguf", fx.path);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --arch gemma3 --layers 6 --window 32 --no-eog",
             getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *g;
    assert_int_equal(clinfer_model_load(path, NULL, NULL, &g), CLINFER_OK);
    srv_engine *e;
    assert_int_equal(srv_engine_create(g, 2, 2048, CLINFER_KV_F32, 0, &e), CLINFER_OK);
    clinfer_model_info i = {.size = sizeof i};
    assert_int_equal(clinfer_model_get_info(g, &i), CLINFER_OK);
    clinfer_kv_pool pool;
    srv_engine_kv_pool(e, &pool);
    double w = 0, kv = 0;
    srv_engine_bytes(e, &w, &kv);
    /* every layer on the pool: the upper bound the count must stay well under */
    const double all = (double)pool.n_blocks * pool.block * 2.0 * i.n_layer * i.n_head_kv * i.head_dim * 4;
    print_message("gemma3, 6 layers, window 32, 2 x 2048: KV %.0f bytes, every layer on the pool %.0f\n", kv, all);
    assert_true(w > 0 && kv > 0);
    assert_true(kv < all / 2);
    srv_engine_free(e);
    clinfer_model_free(g);
    unlink(path);
}

/* Eight jobs on a KV cache of three blocks (each job sets aside one for its
 * 8 prompt tokens and 24 answer tokens) run three at a time, the rest
 * waiting their turn, and give the texts each gives alone: a full cache
 * queues, it never cuts a job short or mixes blocks. */
static void test_small_cache_queues(void **state) {
    (void)state;
    enum { JOBS = 8, CTX = 64 };
    clinfer_model_info mi = {.size = sizeof mi};
    assert_int_equal(clinfer_model_get_info(fx.m, &mi), CLINFER_OK);
    const size_t block_bytes = 2 * (size_t)mi.n_layer * mi.n_head_kv * (mi.n_embd / mi.n_head) * 32 * sizeof(float);
    server sv;
    assert_int_equal(srv_engine_create(fx.m, JOBS, CTX, CLINFER_KV_F32, 3 * block_bytes, &sv.e), CLINFER_OK);
    clinfer_kv_pool pool;
    srv_engine_kv_pool(sv.e, &pool);
    assert_int_equal(pool.n_blocks, 3);
    assert_int_equal(srv_sched_create(sv.e, fx.m, JOBS, JOBS, &sv.s), CLINFER_OK);
    int32_t toks[JOBS][N_PROMPT], *prompts[JOBS];
    int lens[JOBS];
    char *texts[JOBS];
    srv_job_view views[JOBS];
    for (int i = 0; i < JOBS; i++) fill(toks[i], N_PROMPT, 100 + (uint32_t)i), prompts[i] = toks[i], lens[i] = N_PROMPT;
    run_together(&sv, prompts, lens, JOBS, texts, views);
    for (int i = 0; i < JOBS; i++) {
        assert_int_equal(views[i].finish, SRV_FINISH_LENGTH);
        assert_int_equal(views[i].n_gen, LONG_GEN);
    }
    stop(&sv);
    expect_uncached(prompts, lens, JOBS, texts);
    for (int i = 0; i < JOBS; i++) free(texts[i]);
}

/* What a cache of three blocks of 32 tokens can ever hold (srv_sched_fits,
 * issue 37): a prompt of 8 tokens and 24 answer tokens take a block; n
 * choices take one more each (the prompt's last block copied, the answer
 * in it); more than three blocks is refused, never admitted to fail at the
 * full cache; without max_tokens the answer is bounded by the cache where
 * it holds less than the context. */
static void test_fits_the_whole_cache(void **state) {
    (void)state;
    enum { CTX = 64 };
    clinfer_model_info mi = {.size = sizeof mi};
    assert_int_equal(clinfer_model_get_info(fx.m, &mi), CLINFER_OK);
    const size_t block_bytes = 2 * (size_t)mi.n_layer * mi.n_head_kv * (mi.n_embd / mi.n_head) * 32 * sizeof(float);
    server sv;
    assert_int_equal(srv_engine_create(fx.m, 4, CTX, CLINFER_KV_F32, 3 * block_bytes, &sv.e), CLINFER_OK);
    assert_int_equal(srv_sched_create(sv.e, fx.m, 4, 4, &sv.s), CLINFER_OK);
    int mt, need, have;
    mt = 24;
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 1, &mt, &need, &have), 0);
    assert_int_equal(need, 1);
    assert_int_equal(have, 3);
    mt = 25; /* a second block */
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 1, &mt, &need, &have), 0);
    assert_int_equal(need, 2);
    mt = 24;
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 3, &mt, &need, &have), 0);
    assert_int_equal(need, 3);
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 4, &mt, &need, &have), -1); /* n's copies counted */
    assert_int_equal(need, 4);
    mt = 25;
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 2, &mt, &need, &have), -1);
    assert_int_equal(need, 4);
    assert_int_equal(mt, 25); /* a max_tokens given is not changed */
    mt = 0; /* until the context is full: two blocks, held */
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 1, &mt, &need, &have), 0);
    assert_int_equal(mt, 0);
    mt = 0; /* two choices of the whole context would take four: the answers end where three hold them */
    assert_int_equal(srv_sched_fits(sv.s, N_PROMPT, 2, &mt, &need, &have), 0);
    assert_int_equal(mt, 24);
    mt = 0;
    assert_int_equal(srv_sched_fits(sv.s, 40, 4, &mt, &need, &have), -1); /* not even one token each */
    /* four choices submitted past the check fail at once, without running */
    srv_job_params p = sampled(24);
    srv_job *g[4];
    for (int i = 0; i < 4; i++) g[i] = job(&p, N_PROMPT);
    assert_int_equal(srv_sched_submit_group(sv.s, g, 4), SRV_SUBMIT_OK);
    for (int i = 0; i < 4; i++) {
        srv_job_view v;
        char *text;
        size_t n;
        do srv_sched_wait(sv.s, g[i], 0, 1000, &v, &text, &n), free(text);
        while (v.state != SRV_DONE);
        assert_int_equal(v.finish, SRV_FINISH_ERROR);
        assert_int_equal(v.n_gen, 0);
        srv_sched_release(sv.s, g[i]);
    }
    srv_stats st;
    srv_sched_stats(sv.s, &st);
    assert_int_equal(st.steps, 0);
    stop(&sv);
}

/* The grammar cache's compiler under the test's hand: it counts its
 * compilations and holds each until the gate opens. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, entered, compiled;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static clinfer_status gated_compile(const clinfer_model *m, srv_gsource kind, const char *src, size_t len,
                                    clinfer_grammar **out) {
    pthread_mutex_lock(&gate.mu);
    gate.entered++;
    gate.compiled++;
    pthread_cond_broadcast(&gate.cv);
    while (!gate.open) pthread_cond_wait(&gate.cv, &gate.mu);
    pthread_mutex_unlock(&gate.mu);
    *out = NULL;
    if (kind != SRV_GSRC_SCHEMA) return clinfer_grammar_create(m, src, len, NULL, out);
    char *gbnf;
    clinfer_status st = clinfer_json_schema_to_gbnf(src, len, &gbnf);
    if (st == CLINFER_OK) st = clinfer_grammar_create(m, gbnf, strlen(gbnf), NULL, out);
    clinfer_free(gbnf);
    return st;
}

typedef struct getter {
    srv_gcache *c;
    const char *gbnf;
    srv_gcache_result r;
    clinfer_grammar *g;
} getter;

static void *get_thread(void *arg) {
    getter *t = arg;
    clinfer_status st;
    t->r = srv_gcache_get(t->c, SRV_GSRC_GBNF, t->gbnf, strlen(t->gbnf), NULL, &t->g, &st);
    return NULL;
}

static int left(void *arg) { return *(int *)arg; }

/* Grammars compile on the cache's thread, one at a time, while requests
 * wait until their deadline or until they leave (issue 37): a request for
 * a source whose compilation has run for half its timeout or more times
 * out (the compilation goes on for the next one), one for a source whose
 * compilation began later than that in its wait is busy (it waited behind
 * others': retryable), one queued behind it is busy, one that left is
 * gone, and the sources nobody waits for any more are dropped unstarted. A source
 * compiles once, however many requests wait for it or come after, a
 * schema is not converted again, and a failure is kept as well. */
static void test_grammar_cache_waits(void **state) {
    (void)state;
    srv_gcache *c;
    assert_int_equal(srv_gcache_create(fx.m, 4, &c), CLINFER_OK);
    srv_gcache_set_compiler(c, gated_compile);
    getter a = {c, "root ::= \"a\"", SRV_GCACHE_FAILED, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, get_thread, &a), 0);
    pthread_mutex_lock(&gate.mu);
    while (!gate.entered) pthread_cond_wait(&gate.cv, &gate.mu); /* a's compilation runs, held */
    pthread_mutex_unlock(&gate.mu);
    clinfer_grammar *g;
    clinfer_status st;
    /* a's compilation began before this wait of 0.1 s did: at its deadline
     * (0.05 s in) it has run for half of it at least */
    srv_gcache_wait soon = {srv_now_s() + 0.05, NULL, NULL, 0.1};
    assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, a.gbnf, strlen(a.gbnf), &soon, &g, &st), SRV_GCACHE_TIMEOUT);
    /* a wait of an hour that ends 0.05 s in (its time spent behind others'
     * compilations): a's ran for far less than half of it */
    srv_gcache_wait late = {srv_now_s() + 0.05, NULL, NULL, 3600};
    assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, a.gbnf, strlen(a.gbnf), &late, &g, &st), SRV_GCACHE_BUSY);
    soon.deadline = srv_now_s() + 0.05;
    assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, "root ::= \"b\"", 12, &soon, &g, &st), SRV_GCACHE_BUSY);
    int gone = 1;
    srv_gcache_wait until_gone = {srv_now_s() + 3600, left, &gone, 3600};
    assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, "root ::= \"c\"", 12, &until_gone, &g, &st), SRV_GCACHE_GONE);
    assert_null(g);
    srv_gcache_stats gs;
    srv_gcache_stats_get(c, &gs);
    assert_int_equal(gs.abandoned, 2); /* b and c: never compiled */
    assert_int_equal(gs.misses, 3);
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    pthread_join(t, NULL);
    assert_int_equal(a.r, SRV_GCACHE_OK);
    assert_non_null(a.g);
    clinfer_grammar_free(a.g);
    assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, a.gbnf, strlen(a.gbnf), NULL, &g, &st), SRV_GCACHE_OK);
    clinfer_grammar_free(g);
    static const char BAD[] = "root ::= (", SCHEMA[] = "{\"type\": \"boolean\"}";
    for (int i = 0; i < 2; i++) {
        assert_int_equal(srv_gcache_get(c, SRV_GSRC_GBNF, BAD, sizeof BAD - 1, NULL, &g, &st), SRV_GCACHE_FAILED);
        assert_int_equal(st, CLINFER_ERR_ARG);
        assert_int_equal(srv_gcache_get(c, SRV_GSRC_SCHEMA, SCHEMA, sizeof SCHEMA - 1, NULL, &g, &st), SRV_GCACHE_OK);
        clinfer_grammar_free(g);
    }
    srv_gcache_stats_get(c, &gs);
    assert_int_equal(gate.compiled, 3); /* a, the bad grammar, the schema: each once */
    assert_int_equal(gs.hits, 2);       /* a again, the schema again */
    assert_int_equal(gs.entries, 2);
    assert_int_equal(srv_gcache_free(c), 0); /* idle: its thread joined, all freed */
}

/* The cache is freed at shutdown without waiting for a compilation under
 * way (a hostile schema's would hold up the exit, with the signals held):
 * its thread is left running, and the cache and the model to the exit
 * (a request still waiting there gets its grammar). */
static void test_grammar_cache_free_does_not_wait(void **state) {
    (void)state;
    pthread_mutex_lock(&gate.mu);
    gate.open = 0;
    gate.entered = 0;
    pthread_mutex_unlock(&gate.mu);
    srv_gcache *c;
    assert_int_equal(srv_gcache_create(fx.m, 4, &c), CLINFER_OK);
    srv_gcache_set_compiler(c, gated_compile);
    getter a = {c, "root ::= \"a\"", SRV_GCACHE_FAILED, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, get_thread, &a), 0);
    pthread_mutex_lock(&gate.mu);
    while (!gate.entered) pthread_cond_wait(&gate.cv, &gate.mu); /* a's compilation runs, held */
    pthread_mutex_unlock(&gate.mu);
    assert_int_equal(srv_gcache_free(c), 1); /* returns with the compilation held: not joined */
    pthread_mutex_lock(&gate.mu);
    const int entered = gate.entered;
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    pthread_join(t, NULL); /* a's request gets its grammar: the cache was not freed under it */
    assert_int_equal(a.r, SRV_GCACHE_OK);
    clinfer_grammar_free(a.g);
    assert_int_equal(entered, 1);
}

/* A long prompt P ran in one slot while another prompt of its length runs
 * on in a second slot; then three prompts P + a suffix of their own, sent
 * together, take the three free slots: the first P's slot, the others P
 * copied from it (or from one that holds it already), never from the busy
 * slot. Each reuses all of P and answers as it does with nothing cached. */
static void test_shared_prefix_copied_across_slots(void **state) {
    (void)state;
    enum { SUFFIX = 12, N = 3, BUSY_CTX = 4096 }; /* the busy job runs until the context is full, or released */
    server sv = start(4, BUSY_CTX, 4);
    int32_t p[LONG], other[LONG], q[N][LONG + SUFFIX];
    fill(p, LONG, 1);
    fill(other, LONG, 2);
    other[0] = p[0] == 3 ? 4 : 3; /* shares nothing with P */
    srv_job_params until_full = sampled(0); /* until the context is full: busy until the others are done */
    srv_job *busy;
    assert_int_equal(srv_job_create(other, LONG, &until_full, &busy), CLINFER_OK);
    assert_int_equal(srv_sched_submit(sv.s, busy), SRV_SUBMIT_OK);
    int32_t *pp = p, *qs[N];
    int len_p = LONG, lens[N];
    char *texts[N];
    srv_job_view v[N];
    run_together(&sv, &pp, &len_p, 1, texts, v);
    assert_int_equal(v[0].n_cached, 0);
    free(texts[0]);
    for (int i = 0; i < N; i++) {
        memcpy(q[i], p, sizeof p);
        fill(q[i] + LONG, SUFFIX, 10 + (uint32_t)i);
        q[i][LONG] = 3 + i; /* the suffixes differ from their first token */
        qs[i] = q[i];
        lens[i] = LONG + SUFFIX;
    }
    run_together(&sv, qs, lens, N, texts, v);
    srv_sched_release(sv.s, busy); /* busy or done: its prompt shares nothing, so it is no source either way */
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].n_prompt, LONG + SUFFIX);
        assert_int_equal(v[i].n_cached, LONG); /* all of P, not computed again */
        for (int k = 0; k < i; k++) assert_string_not_equal(texts[i], texts[k]); /* a wrong copy would show */
    }
    expect_stats(&sv, N * LONG, 2 * LONG + N * (LONG + SUFFIX));
    stop(&sv);
    expect_uncached(qs, lens, N, texts);
    for (int i = 0; i < N; i++) free(texts[i]);
}

/* --cache-ram with room for one conversation: a prompt whose prefix is in
 * host memory lands on a slot whose own cache, kept there first, evicts
 * that very entry; it is evaluated again, not given the other
 * conversation's KV (its text as without any cache). */
static void test_cache_ram_entry_evicted_by_landing(void **state) {
    (void)state;
    enum { SUFFIX = 12 };
    int32_t a[LONG + SUFFIX], b[LONG], *pa = a, *pb = b;
    fill(a, LONG + SUFFIX, 7);
    fill(b, LONG, 8);
    b[0] = a[0] == 3 ? 4 : 3; /* shares nothing with A */
    int len = LONG, len_a = LONG + SUFFIX;
    char *text;
    srv_job_view v;
    srv_stats st;
    size_t one = 0; /* an entry's bytes: A's prompt kept when B takes the slot */
    for (int pass = 0; pass < 2; pass++) {
        server sv = start(1, LONG_CTX, 1);
        assert_int_equal(srv_sched_cache_ram(sv.s, pass ? one + one / 2 : (size_t)1 << 30), CLINFER_OK);
        run_together(&sv, &pa, &len, 1, &text, &v);
        free(text);
        run_together(&sv, &pb, &len, 1, &text, &v); /* A into host memory */
        free(text);
        srv_sched_stats(sv.s, &st);
        assert_int_equal(st.cache_ram_entries, 1);
        one = st.cache_ram_bytes;
        if (pass) {
            run_together(&sv, &pa, &len_a, 1, &text, &v); /* B kept, A out: nothing to take */
            srv_sched_stats(sv.s, &st);
            assert_int_equal(st.cache_ram_evictions, 1);
            assert_int_equal(v.n_cached, 0);
        }
        stop(&sv);
    }
    expect_uncached(&pa, &len_a, 1, &text);
    free(text);
}

/* Prompts that share a beginning and then part: each reuses exactly the part
 * it shares with a slot (but its own last two tokens), copied from a slot
 * busy with another of them. */
static void test_prefix_copied_up_to_divergence(void **state) {
    (void)state;
    enum { X = 200, Y = 100, HALF = 100, N = 3 };
    server sv = start(3, LONG_CTX, 4);
    int32_t a[X + Y], b[X + Y], c[X - 50], d[HALF + Y];
    fill(a, X + Y, 5);
    memcpy(b, a, X * sizeof *a); /* X, then its own Y */
    fill(b + X, Y, 6);
    b[X] = a[X] == 3 ? 4 : 3;
    memcpy(c, a, sizeof c); /* a beginning of X: all of it shared */
    memcpy(d, a, HALF * sizeof *a); /* half of X, then its own */
    fill(d + HALF, Y, 7);
    d[HALF] = a[HALF] == 3 ? 4 : 3;
    int32_t *pa = a, *qs[N] = {b, c, d};
    int len_a = X + Y, lens[N] = {X + Y, X - 50, HALF + Y};
    char *texts[N];
    srv_job_view v[N];
    run_together(&sv, &pa, &len_a, 1, texts, v);
    free(texts[0]);
    run_together(&sv, qs, lens, N, texts, v);
    assert_int_equal(v[0].n_cached, X);          /* a's slot, its own prefix */
    assert_int_equal(v[1].n_cached, X - 50 - 2); /* copied; its last two evaluated again */
    assert_int_equal(v[2].n_cached, HALF);       /* copied up to where it parts */
    for (int i = 0; i < N; i++)
        for (int k = 0; k < i; k++) assert_string_not_equal(texts[i], texts[k]);
    expect_stats(&sv, X + X - 50 - 2 + HALF, X + Y + X + Y + X - 50 + HALF + Y);
    stop(&sv);
    expect_uncached(qs, lens, N, texts);
    for (int i = 0; i < N; i++) free(texts[i]);
}

/* Jobs of a group to their ends (the texts malloc'd), each read in turn. */
static void run_group(server *sv, srv_job **jobs, int n, char **texts, srv_job_view *views) {
    for (int i = 0; i < n; i++) {
        char *all = calloc(1, 1), *t;
        size_t have = 0, m;
        do {
            srv_sched_wait(sv->s, jobs[i], have, 1000, &views[i], &t, &m);
            all = realloc(all, have + m + 1);
            if (m) memcpy(all + have, t, m);
            all[have += m] = 0;
            free(t);
        } while (views[i].state != SRV_DONE);
        texts[i] = all;
    }
}

/* n choices: the prompt evaluated once (the others copy its KV), each
 * choice's text the one its seed gives alone, its logprobs a record a
 * token whose pieces make the text; a leader released at once (queued or
 * running) leaves its followers to finish on their own, the same texts. */
static void test_group_shares_the_prompt(void **state) {
    (void)state;
    enum { G = 3, LONG = 300 }; /* LONG: a prompt of several prefill chunks */
    int32_t prompt[LONG];
    for (int i = 0; i < LONG; i++) prompt[i] = 1 + (i * 7) % 29;
    for (int round = 0; round < 2; round++) {
        const int n_prompt = round ? LONG : N_PROMPT;
        const int32_t *ids = round ? prompt : PROMPT;
        char *alone[G], *texts[G];
        srv_job_view views[G];
        srv_job *jobs[G];
        for (int i = 0; i < G; i++) { /* each choice's seed alone, in a server of its own (no cache) */
            server one = start(1, 512, 0);
            srv_job_params p = sampled(12);
            p.sp.seed += (uint64_t)i;
            assert_int_equal(srv_job_create(ids, n_prompt, &p, &jobs[i]), CLINFER_OK);
            alone[i] = run(&one, jobs[i], &views[i]);
            stop(&one);
        }
        server sv = start(G, 512, 0);
        for (int i = 0; i < G; i++) {
            srv_job_params p = sampled(12);
            p.sp.seed += (uint64_t)i;
            p.logprobs = 1;
            p.top_logprobs = 2;
            assert_int_equal(srv_job_create(ids, n_prompt, &p, &jobs[i]), CLINFER_OK);
        }
        srv_job *extra = job(&(srv_job_params){.max_tokens = 1, .sp = sampled(1).sp}, N_PROMPT);
        srv_job *four[G + 1] = {jobs[0], jobs[1], jobs[2], extra};
        assert_int_equal(srv_sched_submit_group(sv.s, four, G + 1), SRV_SUBMIT_FULL); /* more than the slots */
        srv_sched_release(sv.s, extra);
        assert_int_equal(srv_sched_submit_group(sv.s, jobs, G), SRV_SUBMIT_OK);
        if (round) srv_sched_release(sv.s, jobs[0]); /* the leader gone before its prompt is done */
        run_group(&sv, jobs + round, G - round, texts + round, views + round);
        srv_stats st;
        srv_sched_stats(sv.s, &st);
        if (!round) assert_int_equal(st.prompt_tokens, n_prompt); /* once, not G times */
        for (int i = round; i < G; i++) {
            assert_int_equal(views[i].finish, SRV_FINISH_LENGTH);
            assert_string_equal(texts[i], alone[i]);
            srv_token_lp *lp;
            int n = srv_sched_logprobs(sv.s, jobs[i], 0, views[i].text_len, 1, &lp);
            assert_int_equal(n, views[i].n_gen);
            size_t at = 0;
            for (int k = 0; k < n; k++) {
                assert_true(lp[k].start == at && lp[k].end >= at); /* the pieces tile the text */
                assert_true(lp[k].logprob <= 0 && lp[k].n_top == 2 && lp[k].top_lp[0] >= lp[k].top_lp[1]);
                assert_true(lp[k].top_lp[0] >= lp[k].logprob);
                at = lp[k].end;
            }
            assert_int_equal(at, views[i].text_len);
            free(lp);
            srv_sched_release(sv.s, jobs[i]);
        }
        for (int i = 0; i < G; i++) {
            free(alone[i]);
            if (i >= round) free(texts[i]);
        }
        stop(&sv);
    }
}

/* ---- a sampled draft model's law ------------------------------------------------
 * serve -md's sampled drafts (drawn from the draft model's law q, verified
 * by min(1, p/q): server/draft.c, clinfer_next_token_draft_q) keep plain
 * sampling's law: the texts of LAW_SEEDS jobs of LAW_GEN tokens each,
 * through the scheduler with a draft model of the target's vocabulary
 * (another seed's weights: drafts taken and refused), against LAW_SEEDS
 * plain jobs (other seeds: independent samples), by a chi-square test of
 * homogeneity on the 2 x K table of their texts (a function of the tokens,
 * so equal laws of tokens give equal laws of texts; texts seen fewer than
 * LAW_POOL times in both pooled into one cell). It fails below LAW_ALPHA:
 * for a correct rule that happens with probability 1e-3 a run (the seeds
 * come fresh from the clock each run, printed). The draft model runs with
 * draft_min 2 and p_min 0.02, so sampled drafts of one token occur and are
 * proposed (a draft dropped for its length would be kept by its tokens;
 * this test did not detect that old bias here: p 0.60 and 0.51 without the
 * fix, so it rests on the argument in server/draft.c). The seeds fix each job's streams, but the steps group the jobs as
 * they arrive, and a slot's draft length follows what it was taken, so the
 * drafts (and texts) of a seed vary from run to run: each run is a fresh
 * test at that false-alarm rate (p 0.094 and 0.023 in two runs; 2172 and
 * 2588 drafted, 695 and 767 taken). The test can fail: given q a
 * row of 1e-9 (every draft in p's support taken, the wrong rule) it gave
 * p 4.5e-7. Given q = NULL (the point-mass rule, which is exact for any
 * proposal drawn apart from the verification, only less often taken) p
 * 0.21, 525 of 1936 taken. */
enum { LAW_SEEDS = 1000, LAW_GEN = 4, LAW_POOL = 10, LAW_SLOTS = 8 };
#define LAW_ALPHA 1e-3

/* The texts of LAW_SEEDS sampled jobs (seeds from seed0 on), LAW_SLOTS at a
 * time, with the draft model `draft` (NULL: plain) into texts[]. */
static void law_texts(clinfer_model *draft, uint64_t seed0, char **texts, unsigned long long *drafted,
                      unsigned long long *accepted) {
    int32_t prompt[12];
    fill(prompt, 12, 900);
    server sv;
    assert_int_equal(srv_engine_create(fx.m, LAW_SLOTS, 64, CLINFER_KV_F32, 0, &sv.e), CLINFER_OK);
    assert_int_equal(srv_sched_create(sv.e, fx.m, LAW_SLOTS, LAW_SLOTS, &sv.s), CLINFER_OK);
    srv_draft *d = NULL;
    if (draft) {
        assert_int_equal(srv_draft_create(fx.m, draft, LAW_SLOTS, 64, CLINFER_KV_F32, &(srv_draft_params){4, 2, 0.02f, 0}, &d),
                         CLINFER_OK);
        assert_int_equal(srv_sched_set_draft(sv.s, d), CLINFER_OK);
    }
    for (int k0 = 0; k0 < LAW_SEEDS; k0 += LAW_SLOTS) {
        srv_job *jobs[LAW_SLOTS];
        for (int i = 0; i < LAW_SLOTS; i++) {
            srv_job_params p = {.max_tokens = LAW_GEN, .sp = clinfer_sampler_default_params()};
            p.sp.temperature = 0.3f; /* top-k 40, top-p 0.95, min-p 0.05: the defaults */
            p.sp.seed = seed0 + (uint64_t)(k0 + i);
            assert_int_equal(srv_job_create(prompt, 12, &p, &jobs[i]), CLINFER_OK);
            assert_int_equal(srv_sched_submit(sv.s, jobs[i]), SRV_SUBMIT_OK);
        }
        for (int i = 0; i < LAW_SLOTS; i++) {
            srv_job_view v;
            char *t;
            size_t m;
            do {
                srv_sched_wait(sv.s, jobs[i], 0, 1000, &v, &t, &m);
                free(t);
            } while (v.state != SRV_DONE);
            srv_sched_wait(sv.s, jobs[i], 0, 0, &v, &t, &m);
            assert_int_equal(v.n_gen, LAW_GEN);
            texts[k0 + i] = realloc(t, m + 1);
            texts[k0 + i][m] = 0;
            srv_sched_release(sv.s, jobs[i]);
        }
    }
    srv_stats st;
    srv_sched_stats(sv.s, &st);
    *drafted = st.drafted_tokens, *accepted = st.accepted_tokens;
    stop(&sv);
    srv_draft_free(d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_draft_model_sampled_law(void **state) {
    (void)state;
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s.law.gguf", fx.path);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --no-eog --seed 7", getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *dm;
    assert_int_equal(clinfer_model_load(path, NULL, NULL, &dm), CLINFER_OK);
    unlink(path); /* loaded: nothing left behind should a check below fail */
    static char *texts[2][LAW_SEEDS];
    unsigned long long drafted, accepted;
    /* fresh seeds each run (from the clock, printed; CLINFER_SEED replays), so each run is an
     * independent test at LAW_ALPHA, not one conditioned on a fixed plain sample */
    const char *env = getenv("CLINFER_SEED");
    const uint64_t s0 = (env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL)) % 1000000000u;
    print_message("sampled draft model's law: seeds from %llu (CLINFER_SEED=%llu replays)\n", (unsigned long long)s0,
                  (unsigned long long)s0);
    law_texts(NULL, s0, texts[0], &drafted, &accepted);
    assert_int_equal(drafted, 0);
    law_texts(dm, s0 + 2 * LAW_SEEDS, texts[1], &drafted, &accepted);
    print_message("sampled draft model: %llu drafted, %llu taken\n", drafted, accepted);
    /* both of the rule's ways, many times */
    assert_true(accepted > 200 && drafted - accepted > 200);
    /* the 2 x K table: both samples sorted, merged by text */
    qsort(texts[0], LAW_SEEDS, sizeof texts[0][0], cmp_str);
    qsort(texts[1], LAW_SEEDS, sizeof texts[1][0], cmp_str);
    double x2 = 0, pa = 0, pb = 0;
    int cells = 0;
    for (int i = 0, j = 0; i < LAW_SEEDS || j < LAW_SEEDS;) {
        const char *t = i == LAW_SEEDS ? texts[1][j] : j == LAW_SEEDS ? texts[0][i]
                        : strcmp(texts[0][i], texts[1][j]) <= 0 ? texts[0][i] : texts[1][j];
        double a = 0, b = 0;
        while (i < LAW_SEEDS && !strcmp(texts[0][i], t)) a++, i++;
        while (j < LAW_SEEDS && !strcmp(texts[1][j], t)) b++, j++;
        if (a + b < LAW_POOL) {
            pa += a, pb += b;
            continue;
        }
        x2 += (a - b) * (a - b) / (a + b); /* equal sample sizes: expected (a + b) / 2 each */
        cells++;
    }
    if (pa + pb > 0) x2 += (pa - pb) * (pa - pb) / (pa + pb), cells++;
    const double pv = cells > 1 ? gamma_q((cells - 1) / 2.0, x2 / 2) : 1;
    print_message("texts: %d cells, chi-square %.1f, p %.3g\n", cells, x2, pv);
    assert_true(cells >= 6); /* a spread law, not a near-certain text */
    if (pv < LAW_ALPHA) fail_msg("the texts' law differs from plain sampling's: p %.3g < %g", pv, LAW_ALPHA);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < LAW_SEEDS; i++) free(texts[k][i]);
    clinfer_model_free(dm);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_same_text_cached_or_not),
        cmocka_unit_test(test_context_end_is_length),
        cmocka_unit_test(test_stop_string_cuts),
        cmocka_unit_test(test_queue_full_release_and_shutdown),
        cmocka_unit_test(test_burst_takes_free_slots),
        cmocka_unit_test(test_shared_prefix_copied_across_slots),
        cmocka_unit_test(test_prefix_copied_up_to_divergence),
        cmocka_unit_test(test_small_cache_queues),
        cmocka_unit_test(test_fits_the_whole_cache),
        cmocka_unit_test(test_grammar_cache_waits),
        cmocka_unit_test(test_grammar_cache_free_does_not_wait),
        cmocka_unit_test(test_speculation_same_text),
        cmocka_unit_test(test_speculation_sampled),
        cmocka_unit_test(test_draft_model_same_text),
        cmocka_unit_test(test_draft_model_sampled_law),
        cmocka_unit_test(test_group_shares_the_prompt),
        cmocka_unit_test(test_cache_ram_entry_evicted_by_landing),
        cmocka_unit_test(test_engine_bytes_sliding_window),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* Speculative decoding's exactness (issue 43): sampled speculation keeps
 * plain sampling's distribution, greedy speculation plain greedy's tokens,
 * with a prompt lookup's drafts and a draft model's alike; a draft model of
 * another vocabulary is refused.
 *
 * The distribution tests compare, position by position, the tokens of
 * N_SEEDS plain sampled generations with those of N_SEEDS speculative ones
 * (other seeds: the samples are independent) by a chi-square test of
 * homogeneity on the 2 x K table of counts (tokens seen fewer than POOL
 * times in both samples pooled into one cell). A position fails below
 * ALPHA / (its family's positions) (Bonferroni): for a correct
 * implementation and seeds drawn at random, the chance that one check
 * fails is at most ALPHA = 1e-3 (the seeds are fixed, so a run is
 * reproducible: the test either passes or fails, every time). The rule
 * itself (clf_spec_pick) is checked first against its exact law by a
 * goodness-of-fit test on draws.
 *
 * The test can fail: CLINFER_TEST_SPEC_WRONG=1 replaces the acceptance
 * rule of the step loop below by "take every draft token" (run with
 * CLINFER_TESTS=test_sampled_step). Run once (1000 seeds a side,
 * temperature 0.3, every one of 1509 draft tokens taken): positions 1..4
 * had p = 6.3e-4, 1.2e-9, 1.5e-12, 2.0e-3, so positions 2 and 3 failed
 * below 1e-3 / 5 and the test failed, as it must; with the rule, every
 * family's p-values were above 0.01.
 *
 * The tiny model comes from tests/tools/tiny_gguf ($CLINFER_TINY_GGUF);
 * the greedy check on the default model (SmolLM2 Q4_1 drafting for itself:
 * every draft token taken) needs ~/.cache/clinfer's model. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clinfer.h"
#include "sampler.h"
#include "testutil.h"
#include "support/stats.h" /* gamma_q, chi2_p */

enum { GEN = 5, POOL = 10, MAX_V = 4096 };
static int N_SEEDS = 1000;
static float TEMP = 0.3f; /* peaked enough that drafts are often taken, spread over ~10 tokens a position */
static const double ALPHA = 1e-3;

static char tiny_path[256], draft_path[256], other_path[256];
/* the target; a draft of its vocabulary (another seed); another vocabulary */
static clinfer_model *tiny, *draft, *other;
static int n_vocab;

static int make(const char *path, const char *opts) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' model '%s' %s", getenv("CLINFER_TINY_GGUF"), path, opts);
    return system(cmd);
}

static int setup(void **state) {
    (void)state;
    if (!getenv("CLINFER_TINY_GGUF")) {
        fprintf(stderr, "CLINFER_TINY_GGUF is not set (ctest sets it)\n");
        return -1;
    }
    snprintf(tiny_path, sizeof tiny_path, "/tmp/clinfer-test-spec-%d.gguf", (int)getpid());
    snprintf(draft_path, sizeof draft_path, "/tmp/clinfer-test-spec-%d-draft.gguf", (int)getpid());
    snprintf(other_path, sizeof other_path, "/tmp/clinfer-test-spec-%d-other.gguf", (int)getpid());
    /* no end token: every generation runs GEN tokens */
    if (make(tiny_path, "--no-eog") || make(draft_path, "--no-eog --seed 7") || make(other_path, "--seed 3")) return -1;
    if (clinfer_model_load(tiny_path, NULL, NULL, &tiny) != CLINFER_OK ||
        clinfer_model_load(draft_path, NULL, NULL, &draft) != CLINFER_OK ||
        clinfer_model_load(other_path, NULL, NULL, &other) != CLINFER_OK)
        return -1;
    clinfer_model_info info = {.size = sizeof info};
    if (clinfer_model_get_info(tiny, &info) != CLINFER_OK) return -1;
    n_vocab = info.n_vocab;
    return n_vocab <= MAX_V ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    clinfer_model_free(tiny);
    clinfer_model_free(draft);
    clinfer_model_free(other);
    unlink(tiny_path);
    unlink(draft_path);
    unlink(other_path);
    return 0;
}

/* ---- the chi-square tail ------------------------------------------------------ */

/* Homogeneity of two samples' counts a[], b[] (k categories): the p-value
 * (cells with fewer than POOL tokens in both samples together pooled). */
static double homogeneity_p(const int *a, const int *b, int k, int *df_out) {
    double na = 0, nb = 0;
    for (int i = 0; i < k; i++) na += a[i], nb += b[i];
    double x2 = 0, pa = 0, pb = 0;
    int cells = 0;
    for (int i = 0; i <= k; i++) {
        double oa, ob;
        if (i < k && a[i] + b[i] >= POOL) oa = a[i], ob = b[i];
        else if (i < k) {
            pa += a[i], pb += b[i];
            continue;
        } else if (pa + pb > 0) oa = pa, ob = pb; /* the pooled cell, last */
        else continue;
        double t = oa + ob, ea = t * na / (na + nb), eb = t * nb / (na + nb);
        x2 += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
        cells++;
    }
    *df_out = cells - 1;
    return chi2_p(x2, cells - 1);
}

/* ---- the rule alone ----------------------------------------------------------- */

static double unif(uint64_t *s) { return (double)(tu_next(s) >> 11) * 0x1p-53; }

/* clf_spec_pick's token against p exactly: a draft inside the support
 * (likely, unlikely), outside it, and the one token of a point mass. */
static void test_pick_rule(void **state) {
    (void)state;
    const int32_t ids[] = {4, 9, 2, 7, 5};
    const float w[] = {3.0f, 1.0f, 0.5f, 0.4f, 0.1f}; /* z = 5 */
    const int n = 5;
    const int32_t drafts[] = {4, 9, 5, 11};
    enum { DRAWS = 200000 };
    uint64_t rng = tu_seed();
    for (size_t c = 0; c < sizeof drafts / sizeof *drafts; c++) {
        int count[5] = {0};
        for (int i = 0; i < DRAWS; i++) {
            int32_t t = clf_spec_pick(ids, w, n, 5.0, drafts[c], unif(&rng), unif(&rng));
            int j = 0;
            while (j < n && ids[j] != t) j++;
            assert_true(j < n);
            count[j]++;
        }
        double x2 = 0;
        for (int j = 0; j < n; j++) {
            double e = DRAWS * w[j] / 5.0;
            x2 += (count[j] - e) * (count[j] - e) / e;
        }
        double p = chi2_p(x2, n - 1);
        print_message("draft %d: chi2 %.2f, p %.3g\n", (int)drafts[c], x2, p);
        /* fresh seeds every run (tu_seed), so the false-alarm rate is what CI sees: 1e-7 a check,
         * not ALPHA; with 200,000 draws a wrong rule (accepting every draft) gives p far below it */
        if (p < 1e-7) fail_msg("draft %d: the rule's tokens are not p's (chi2 %.1f, p %.3g)", drafts[c], x2, p);
    }
    /* a point mass: its token whatever the draft */
    const int32_t one[] = {3};
    const float w1[] = {1.0f};
    assert_int_equal(clf_spec_pick(one, w1, 1, 1.0, 3, 0.999, 0.5), 3);
    assert_int_equal(clf_spec_pick(one, w1, 1, 1.0, 8, 0.0, 0.999), 3);
}

/* ---- generations ---------------------------------------------------------------- */

/* The prompt: a few tokens twice, so that the text's tokens recur and
 * prompt lookup drafts. */
static int prompt_of(int32_t *t) {
    int n = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 8; i++) t[n++] = (int32_t)(20 + (i * 13) % (n_vocab - 40));
    return n;
}

static clinfer_sampler *sampler(clinfer_model *m, float temp, uint64_t seed) {
    clinfer_sampler_params sp = clinfer_sampler_default_params();
    sp.temperature = temp;
    sp.seed = seed;
    sp.top_k = 0; /* the whole vocabulary: the law has many tokens */
    sp.top_p = 1;
    sp.min_p = 0;
    clinfer_sampler *smp;
    ASSERT_OK(clinfer_sampler_create(m, &sp, &smp));
    return smp;
}

typedef struct rec {
    int32_t t[GEN];
    int n;
} rec;

static int on_tok(void *ud, int32_t token, const char *piece, size_t len) {
    (void)piece, (void)len;
    rec *r = ud;
    if (token >= 0 && r->n < GEN) r->t[r->n++] = token;
    return 0;
}

/* One generation by clinfer_generate (draft_max 0: plain); its tokens in out. */
static void generate(clinfer_session *s, clinfer_sampler *smp, int draft_max, clinfer_drafter *d, int32_t *out,
                     clinfer_generate_result *res) {
    int32_t p[64];
    int np = prompt_of(p);
    ASSERT_OK(clinfer_session_rewind(s, 0));
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.max_tokens = GEN;
    gp.sampler = smp;
    gp.draft_max = draft_max;
    clinfer_session_set_drafter(s, d);
    rec r = {.n = 0};
    gp.on_token = on_tok;
    gp.user_data = &r;
    *res = (clinfer_generate_result){.size = sizeof *res};
    ASSERT_OK(clinfer_generate(s, p, np, &gp, res));
    clinfer_session_set_drafter(s, NULL);
    assert_int_equal(r.n, GEN);
    memcpy(out, r.t, sizeof r.t);
}

/* The server's way (include/clinfer.h's step): propose, decode the rows,
 * sample row after row with clinfer_next_token_draft, settle. wrong: take
 * every draft token instead (the failure the test must see). */
static void step_loop(clinfer_session *s, clinfer_sampler *smp, clinfer_drafter *d, int32_t *out, int wrong,
                      int *drafted, int *accepted) {
    int32_t text[128];
    int n = prompt_of(text), got = 0;
    clinfer_detokenizer *dt;
    ASSERT_OK(clinfer_detokenizer_create(tiny, 0, &dt));
    ASSERT_OK(clinfer_session_rewind(s, 0));
    ASSERT_OK(clinfer_eval(s, text, n));
    for (int i = 0; i < n; i++) ASSERT_OK(clinfer_sampler_accept(smp, text[i]));
    clinfer_next nx;
    ASSERT_OK(clinfer_next_token(smp, dt, clinfer_session_logits(s), n_vocab, &nx));
    out[got++] = text[n++] = nx.token;
    static const int8_t all[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    while (got < GEN) {
        const int32_t *rows;
        const int base = clinfer_session_n_past(s);
        int n_rows = clinfer_drafter_propose(d, text, n, 8, GEN - got, 64, &rows);
        assert_true(n_rows >= 1 && n_rows <= 16);
        clinfer_batch b = {.n_tokens = n_rows, .token = rows, .logits = all};
        ASSERT_OK(clinfer_decode(s, &b));
        *drafted += n_rows - 1;
        int r = 0;
        for (;; r++) {
            const int32_t next = r + 1 < n_rows ? rows[r + 1] : -1;
            if (wrong && next >= 0) { /* accept always: wrong */
                ASSERT_OK(clinfer_sampler_accept(smp, next));
                nx.token = next;
            } else {
                ASSERT_OK(clinfer_next_token_draft(smp, dt, clinfer_batch_logits(s, r), n_vocab, next, &nx));
            }
            out[got++] = text[n++] = nx.token;
            if (got == GEN || !clinfer_drafter_accept(d, r, nx.token)) break;
            ++*accepted;
        }
        ASSERT_OK(clinfer_seq_rewind(s, 0, base + clinfer_drafter_settle(d, r)));
    }
    clinfer_detokenizer_free(dt);
}

/* The counts [GEN][n_vocab] of N_SEEDS generations by `how` (0 plain,
 * 1 clinfer_generate with a lookup, 2 with the draft model, 3 the step
 * loop with a lookup), seeds from seed0 on. */
static void sample_counts(clinfer_session *s, clinfer_session *ds, int how, float temp, uint64_t seed0, int *counts,
                          int *drafted, int *accepted) {
    memset(counts, 0, (size_t)GEN * (size_t)n_vocab * sizeof *counts);
    const int wrong = getenv("CLINFER_TEST_SPEC_WRONG") && atoi(getenv("CLINFER_TEST_SPEC_WRONG"));
    clinfer_drafter *d = NULL;
    if (how == 2) {
        clinfer_draft_model_params dp = clinfer_draft_model_default_params();
        dp.draft_max = 4;
        ASSERT_OK(clinfer_drafter_create_model(tiny, ds, &dp, &d));
    } else if (how == 3) {
        ASSERT_OK(clinfer_drafter_create(4, &d));
    }
    for (int k = 0; k < N_SEEDS; k++) {
        clinfer_sampler *smp = sampler(tiny, temp, seed0 + (uint64_t)k);
        int32_t t[GEN];
        clinfer_generate_result r;
        if (how == 3) {
            step_loop(s, smp, d, t, wrong, drafted, accepted);
        } else {
            generate(s, smp, how == 1 ? 4 : 0, d, t, &r);
            *drafted += r.n_drafted, *accepted += r.n_accepted;
        }
        for (int i = 0; i < GEN; i++) counts[i * n_vocab + t[i]]++;
        clinfer_sampler_free(smp);
    }
    clinfer_drafter_free(d);
}

/* Each position's tokens, plain against `how`, by the chi-square test. */
static void distribution_check(int how, const char *name) {
    clinfer_session *s, *ds = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 64;
    ASSERT_OK(clinfer_session_create(tiny, &sp, &s));
    if (how == 2) ASSERT_OK(clinfer_session_create(draft, &sp, &ds));
    static int *plain; /* plain sampling's counts, shared by the families */
    int *spec = malloc((size_t)GEN * (size_t)n_vocab * sizeof *spec);
    assert_non_null(spec);
    int d0 = 0, a0 = 0, drafted = 0, accepted = 0;
    const float temp = TEMP;
    if (!plain) {
        plain = malloc((size_t)GEN * (size_t)n_vocab * sizeof *plain);
        assert_non_null(plain);
        sample_counts(s, NULL, 0, temp, 1000000, plain, &d0, &a0);
    }
    sample_counts(s, ds, how, temp, 2000000, spec, &drafted, &accepted);
    print_message("%s: %d drafted, %d taken\n", name, drafted, accepted);
    /* both of the rule's ways ran many times: a draft taken, one refused
     * (not so with the wrong rule, which takes every one) */
    if (!getenv("CLINFER_TEST_SPEC_WRONG")) assert_true(accepted > 200 && drafted - accepted > 200);
    int failed = 0;
    for (int i = 0; i < GEN; i++) {
        int df;
        double p = homogeneity_p(plain + i * n_vocab, spec + i * n_vocab, n_vocab, &df);
        print_message("%s: token %d: %d degrees of freedom, p %.3g\n", name, i, df, p);
        assert_true(df >= 5); /* a spread law, not a near-certain token */
        if (p < ALPHA / GEN) failed++, print_message("%s: token %d's law differs from plain sampling's\n", name, i);
    }
    free(spec);
    clinfer_session_free(s);
    clinfer_session_free(ds);
    if (failed) fail_msg("%s: %d of %d positions differ from plain sampling (alpha %g, Bonferroni)", name, failed, GEN,
                         ALPHA);
}

static void test_sampled_lookup(void **state) {
    (void)state;
    distribution_check(1, "clinfer_generate, prompt lookup");
}

static void test_sampled_step(void **state) {
    (void)state;
    distribution_check(3, "the step, prompt lookup");
}

static void test_sampled_draft_model(void **state) {
    (void)state;
    distribution_check(2, "clinfer_generate, draft model");
}

/* A sampled draft model that is the target's file: its law q is the
 * target's p (the same logits, the same settings), so the rule takes every
 * draft token (p / q = 1, to float rounding): the laws kept per draft
 * token are the ones verified, row by row. */
static void test_sampled_self_draft(void **state) {
    (void)state;
    clinfer_session *s, *ds;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 64;
    ASSERT_OK(clinfer_session_create(tiny, &sp, &s));
    ASSERT_OK(clinfer_session_create(tiny, &sp, &ds));
    clinfer_draft_model_params dp = clinfer_draft_model_default_params();
    dp.draft_max = 4;
    clinfer_drafter *d;
    ASSERT_OK(clinfer_drafter_create_model(tiny, ds, &dp, &d));
    int drafted = 0, accepted = 0;
    for (int k = 0; k < 100; k++) {
        clinfer_sampler *smp = sampler(tiny, TEMP, 7000 + (uint64_t)k);
        int32_t t[GEN];
        clinfer_generate_result r;
        generate(s, smp, 0, d, t, &r);
        drafted += r.n_drafted, accepted += r.n_accepted;
        clinfer_sampler_free(smp);
    }
    print_message("sampled self-draft: %d drafted, %d taken\n", drafted, accepted);
    assert_true(drafted > 100);
    assert_true(accepted >= drafted - drafted / 50);
    clinfer_drafter_free(d);
    clinfer_session_free(ds);
    clinfer_session_free(s);
}

/* Sampled under a grammar, a lookup's drafts cut and a draft model's
 * masked by it: every token the grammar's (the sampler's stage fails the
 * generation on a token outside it), drafts made and verified. */
static void test_sampled_grammar(void **state) {
    (void)state;
    const char *gbnf = "root ::= [a-m ]+";
    clinfer_grammar *g;
    ASSERT_OK(clinfer_grammar_create(tiny, gbnf, strlen(gbnf), NULL, &g));
    clinfer_session *s, *ds;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 128;
    ASSERT_OK(clinfer_session_create(tiny, &sp, &s));
    ASSERT_OK(clinfer_session_create(draft, &sp, &ds));
    clinfer_draft_model_params dp = clinfer_draft_model_default_params();
    dp.draft_max = 4;
    clinfer_drafter *d;
    ASSERT_OK(clinfer_drafter_create_model(tiny, ds, &dp, &d));
    int32_t p[64];
    int np = prompt_of(p);
    for (int how = 0; how < 2; how++) {
        int drafted = 0;
        for (int k = 0; k < 20; k++) {
            clinfer_sampler *smp = sampler(tiny, 0.8f, 300 + (uint64_t)k);
            ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
            ASSERT_OK(clinfer_session_rewind(s, 0));
            clinfer_generate_params gp = clinfer_generate_default_params();
            gp.max_tokens = 24;
            gp.sampler = smp;
            gp.draft_max = how ? 0 : 4;
            clinfer_session_set_drafter(s, how ? d : NULL);
            clinfer_generate_result r = {.size = sizeof r};
            ASSERT_OK(clinfer_generate(s, p, np, &gp, &r));
            assert_int_equal(r.n_generated, 24);
            assert_int_not_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_NONE);
            drafted += r.n_drafted;
            clinfer_sampler_free(smp);
        }
        print_message("sampled under a grammar, %s: %d drafted\n", how ? "draft model" : "lookup", drafted);
        if (how) assert_true(drafted > 0);
    }
    clinfer_drafter_free(d);
    clinfer_session_free(ds);
    clinfer_session_free(s);
    clinfer_grammar_free(g);
}

/* ---- greedy: plain decoding's tokens -------------------------------------------- */

typedef struct rec_big {
    int32_t t[256];
    int n;
} rec_big;

static int on_tok_big(void *ud, int32_t token, const char *piece, size_t len) {
    (void)piece, (void)len;
    rec_big *r = ud;
    if (token >= 0 && r->n < 256) r->t[r->n++] = token;
    return 0;
}

/* max_tokens of greedy text from m after prompt p: plain, with a prompt
 * lookup, with a draft model (a session on dm), under an optional
 * grammar: the same tokens each time. */
static void greedy_same(clinfer_model *m, clinfer_model *dm, const int32_t *p, int np, int max_tokens, const char *gbnf,
                        int expect_all_taken) {
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 256;
    clinfer_session *s, *ds;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    ASSERT_OK(clinfer_session_create(dm, &sp, &ds));
    clinfer_grammar *g = NULL;
    if (gbnf) ASSERT_OK(clinfer_grammar_create(m, gbnf, strlen(gbnf), NULL, &g));
    clinfer_draft_model_params dp = clinfer_draft_model_default_params();
    dp.draft_max = m == tiny ? 6 : 16;
    clinfer_drafter *d;
    ASSERT_OK(clinfer_drafter_create_model(m, ds, &dp, &d));
    rec_big want = {.n = 0};
    for (int how = 0; how < 3; how++) {
        clinfer_sampler *smp = sampler(m, 0, 1);
        if (g) ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
        ASSERT_OK(clinfer_session_rewind(s, 0));
        clinfer_generate_params gp = clinfer_generate_default_params();
        gp.max_tokens = max_tokens;
        gp.sampler = smp;
        gp.draft_max = how == 1 ? 5 : 0;
        clinfer_session_set_drafter(s, how == 2 ? d : NULL);
        rec_big got = {.n = 0};
        gp.on_token = on_tok_big;
        gp.user_data = &got;
        clinfer_generate_result r = {.size = sizeof r};
        ASSERT_OK(clinfer_generate(s, p, np, &gp, &r));
        clinfer_sampler_free(smp);
        if (how == 0) want = got;
        assert_int_equal(got.n, want.n);
        assert_memory_equal(got.t, want.t, (size_t)got.n * sizeof *got.t);
        if (how > 0)
            print_message("greedy%s, %s: %d tokens, %d drafted, %d taken\n", g ? " (grammar)" : "",
                          how == 1 ? "lookup" : "draft model", got.n, r.n_drafted, r.n_accepted);
        if (how == 2) assert_true(r.n_drafted > 0);
        if (how == 2 && expect_all_taken) assert_int_equal(r.n_accepted, r.n_drafted);
    }
    clinfer_drafter_free(d);
    clinfer_grammar_free(g);
    clinfer_session_free(ds);
    clinfer_session_free(s);
}

static void test_greedy(void **state) {
    (void)state;
    int32_t p[64];
    int np = prompt_of(p);
    greedy_same(tiny, draft, p, np, 40, NULL, 0);
    greedy_same(tiny, tiny, p, np, 40, NULL, 1);
    /* under a grammar: drafts masked (a draft model) or cut (a lookup) by it */
    greedy_same(tiny, draft, p, np, 30, "root ::= [a-m ]+", 0);
}

/* Two generations on one session, as `chat`'s turns (the first's last
 * token evaluated, then the next turn's tokens): with m2 drafting, the
 * plain tokens, and every draft taken when m2 is m's file (the draft
 * session follows the conversation). */
static void two_turns(clinfer_model *m, clinfer_model *m2, const int32_t *p1, int n1, const int32_t *p2, int n2) {
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 256;
    rec_big want[2], got[2];
    for (int spec = 0; spec < 2; spec++) {
        clinfer_session *s, *ds;
        ASSERT_OK(clinfer_session_create(m, &sp, &s));
        ASSERT_OK(clinfer_session_create(m2, &sp, &ds));
        clinfer_drafter *d;
        ASSERT_OK(clinfer_drafter_create_model(m, ds, NULL, &d));
        for (int turn = 0; turn < 2; turn++) {
            rec_big *r = spec ? &got[turn] : &want[turn];
            r->n = 0;
            clinfer_generate_params gp = clinfer_generate_default_params();
            gp.max_tokens = 24;
            clinfer_session_set_drafter(s, spec ? d : NULL);
            gp.on_token = on_tok_big;
            gp.user_data = r;
            clinfer_generate_result res = {.size = sizeof res};
            ASSERT_OK(clinfer_generate(s, turn ? p2 : p1, turn ? n2 : n1, &gp, &res));
            if (res.stop != CLINFER_STOP_EOG && res.last >= 0) ASSERT_OK(clinfer_eval(s, &res.last, 1));
            if (spec) {
                print_message("turn %d: %d drafted, %d taken\n", turn, res.n_drafted, res.n_accepted);
                assert_true(res.n_drafted > 0);
                assert_int_equal(res.n_accepted, res.n_drafted);
            }
        }
        clinfer_drafter_free(d);
        clinfer_session_free(ds);
        clinfer_session_free(s);
    }
    for (int turn = 0; turn < 2; turn++) {
        assert_int_equal(got[turn].n, want[turn].n);
        assert_memory_equal(got[turn].t, want[turn].t, (size_t)want[turn].n * sizeof *want[turn].t);
    }
}

/* The default model (SmolLM2 Q4_1) drafting for itself: every draft
 * token taken, the text plain greedy's. */
static void test_greedy_default_model(void **state) {
    (void)state;
    char path[4096];
    if (clinfer_model_path(NULL, path, sizeof path) != CLINFER_OK || access(path, R_OK) != 0)
        fail_msg("no default model (%s): sh tests/fetch_model.sh", path);
    clinfer_model *m;
    ASSERT_OK(clinfer_model_load(path, NULL, NULL, &m));
    int32_t *p;
    int np;
    const char *text = "The lighthouse keeper opened the bottle and read the letter inside. It said:";
    ASSERT_OK(clinfer_tokenize(m, text, strlen(text), 1, 0, &p, &np));
    greedy_same(m, m, p, np, 48, NULL, 1);
    /* a second load of the file: two models on one device */
    clinfer_model *m2;
    ASSERT_OK(clinfer_model_load(path, NULL, NULL, &m2));
    greedy_same(m, m2, p, np, 48, NULL, 1);
    int32_t *p2;
    int np2;
    const char *more = " Then the keeper wrote back:";
    ASSERT_OK(clinfer_tokenize(m, more, strlen(more), 0, 0, &p2, &np2));
    two_turns(m, m2, p, np, p2, np2);
    clinfer_free(p2);
    clinfer_free(p);
    clinfer_model_free(m2);
    clinfer_model_free(m);
}

/* A draft model with draft_min 2 that misses (another seed's model,
 * greedy drafts: the server's step, under a sampled target): a miss sets
 * the drafter's length to the tokens taken + 1, which may fall below
 * draft_min; the drafter drafts on after misses (it asked the model for
 * fewer than draft_min tokens, a draft that is none, and so never
 * drafted again). */
static void test_draft_min_keeps_drafting(void **state) {
    (void)state;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 64;
    clinfer_session *s, *ds;
    ASSERT_OK(clinfer_session_create(tiny, &sp, &s));
    ASSERT_OK(clinfer_session_create(draft, &sp, &ds));
    clinfer_draft_model_params dp = clinfer_draft_model_default_params();
    dp.draft_max = 4;
    dp.draft_min = 2;
    clinfer_drafter *d;
    ASSERT_OK(clinfer_drafter_create_model(tiny, ds, &dp, &d));
    int drafted = 0, accepted = 0;
    for (int k = 0; k < 20; k++) {
        clinfer_sampler *smp = sampler(tiny, TEMP, 500 + (uint64_t)k);
        int32_t t[GEN];
        step_loop(s, smp, d, t, 0, &drafted, &accepted);
        clinfer_sampler_free(smp);
    }
    print_message("draft_min 2: %d drafted, %d refused\n", drafted, drafted - accepted);
    /* misses happened, and drafts went on after them: far more than a first draft's tokens */
    assert_true(drafted > accepted);
    assert_true(drafted > 5 * dp.draft_max);
    clinfer_drafter_free(d);
    clinfer_session_free(ds);
    clinfer_session_free(s);
}

/* ---- vocabularies ----------------------------------------------------------------- */

static void test_vocab_mismatch(void **state) {
    (void)state;
    ASSERT_OK(clinfer_model_vocab_compatible(tiny, draft));
    assert_int_equal(clinfer_model_vocab_compatible(tiny, other), CLINFER_ERR_ARG);
    print_message("refused: %s\n", clinfer_last_error());
    clinfer_session *ds;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 32;
    ASSERT_OK(clinfer_session_create(other, &sp, &ds));
    clinfer_drafter *d = (clinfer_drafter *)1;
    assert_int_equal(clinfer_drafter_create_model(tiny, ds, NULL, &d), CLINFER_ERR_ARG);
    assert_null(d);
    assert_non_null(strstr(clinfer_last_error(), "draft model"));
    clinfer_session_free(ds);
}

/* ---- a sampled draft's law (clinfer_draft_draw) and the one keep rule ------------------- */

/* The law over a whole row, by hand: the top-k cut (ties: the smaller id),
 * the temperature; the row's k best given with their ids (as the device's
 * selection gives them) make the same law; top-p and min-p cut; nothing
 * finite, or greedy settings: no token. */
static void test_draft_draw(void **state) {
    (void)state;
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = 0.8f, p.top_k = 3, p.top_p = 1, p.min_p = 0;
    const float lg[8] = {1, 3, 2, -INFINITY, 0.5f, 3, NAN, 2.5f};
    int32_t cid[8], cid2[8];
    float cl[8], cl2[8];
    int n = -1, n2 = -1;
    assert_int_equal(clinfer_draft_draw(&p, lg, NULL, 8, 0.0, cid, cl, &n), 1); /* u 0: the first of the law */
    assert_int_equal(n, 3);
    const int32_t want_id[3] = {1, 5, 7};
    const double w1 = 1, w2 = exp(-0.5 / 0.8), z = 2 * w1 + w2;
    const double want_p[3] = {w1 / z, w1 / z, w2 / z};
    double sum = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cid[i], want_id[i]);
        assert_true(fabs(cl[i] - want_p[i]) < 1e-6);
        sum += cl[i];
    }
    assert_true(fabs(sum - 1) < 1e-6);
    assert_int_equal(clinfer_draft_draw(&p, lg, NULL, 8, 0.999, cid, cl, &n), 7); /* u near 1: the last */
    /* the row's 4 best, best first, with their ids: the same law and draws */
    const float top_v[4] = {3, 3, 2.5f, 2};
    const int32_t top_i[4] = {1, 5, 7, 2};
    for (double u = 0.05; u < 1; u += 0.1) {
        const int32_t a = clinfer_draft_draw(&p, lg, NULL, 8, u, cid, cl, &n);
        const int32_t b = clinfer_draft_draw(&p, top_v, top_i, 4, u, cid2, cl2, &n2);
        assert_int_equal(a, b);
        assert_int_equal(n, n2);
        assert_memory_equal(cid, cid2, (size_t)n * sizeof *cid);
        assert_memory_equal(cl, cl2, (size_t)n * sizeof *cl);
    }
    /* top-p: the fewest best reaching it (the row unsorted, no top-k); min-p */
    p.temperature = 1, p.top_k = 0, p.top_p = 0.5f;
    const float r3[3] = {0, 2, 1};
    assert_int_equal(clinfer_draft_draw(&p, r3, NULL, 3, 0.7, cid, cl, &n), 1);
    assert_int_equal(n, 1);
    assert_true(fabs(cl[0] - 1) < 1e-6);
    p.top_p = 1, p.min_p = 0.3f; /* e^-1 = 0.37 of the best kept, e^-2 = 0.14 not */
    assert_int_equal(clinfer_draft_draw(&p, r3, NULL, 3, 0.0, cid, cl, &n), 1); /* id order without a cut by rank */
    assert_int_equal(cid[1], 2);
    assert_int_equal(n, 2);
    assert_true(fabs(cl[0] + cl[1] - 1) < 1e-6);
    /* nothing finite, greedy settings, no output: none */
    const float none[2] = {-INFINITY, NAN};
    assert_int_equal(clinfer_draft_draw(&p, none, NULL, 2, 0.5, cid, cl, &n), -1);
    assert_int_equal(n, 0);
    p.temperature = 0;
    assert_int_equal(clinfer_draft_draw(&p, r3, NULL, 3, 0.5, cid, cl, &n), -1);
    /* the engine's call: the row's k best with their ids and top_k k (the
     * given order kept, ties included), as the whole row's law */
    p.temperature = 0.8f, p.top_k = 4, p.top_p = 1, p.min_p = 0;
    assert_int_equal(clinfer_draft_draw(&p, top_v, top_i, 4, 0.5, cid2, cl2, &n2),
                     clinfer_draft_draw(&p, lg, NULL, 8, 0.5, cid, cl, &n));
    assert_int_equal(n, 4);
    assert_int_equal(n2, 4);
    assert_memory_equal(cid, cid2, 4 * sizeof *cid);
    assert_memory_equal(cl, cl2, 4 * sizeof *cl);
    /* a wide top-k (one sort, not insertion: a request's top_k may be the
     * vocabulary's) against the k best by hand, ties by id, on a fresh row
     * with many ties */
    {
        enum { N = 4099, K = 1000 };
        float *row = malloc(N * sizeof *row), *wl = malloc(N * sizeof *wl), *ref = malloc(N * sizeof *ref);
        int32_t *wid = malloc(N * sizeof *wid), *rid = malloc(N * sizeof *rid);
        assert_true(row && wl && ref && wid && rid);
        uint64_t x = (uint64_t)time(NULL) | 1;
        print_message("wide top-k row seed %llu\n", (unsigned long long)x);
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            row[i] = (i % 97 == 0) ? -INFINITY : (float)(x % 64) / 8; /* 64 levels: ties everywhere */
        }
        int m = 0; /* by hand: the finite ones ordered by (logit desc, id asc), cut to K */
        for (int lv = 63; lv >= 0 && m < K; lv--)
            for (int i = 0; i < N && m < K; i++)
                if (row[i] == (float)lv / 8) rid[m++] = i;
        p.temperature = 1, p.top_k = K;
        int nw = -1;
        const int32_t tok = clinfer_draft_draw(&p, row, NULL, N, 0.3, wid, wl, &nw);
        assert_int_equal(nw, K);
        assert_memory_equal(wid, rid, K * sizeof *rid);
        double zz = 0, cum = 0;
        for (int i = 0; i < K; i++) zz += ref[i] = (float)exp(row[rid[i]] - row[rid[0]]);
        int32_t want = rid[K - 1];
        for (int i = 0; i < K; i++)
            if (0.3 * zz < (cum += ref[i])) {
                want = rid[i];
                break;
            }
        assert_int_equal(tok, want);
        for (int i = 0; i < K; i++) assert_true(fabs(wl[i] - ref[i] / zz) < 1e-6);
        free(row), free(wl), free(ref), free(wid), free(rid);
    }
    /* the keep rule: a greedy draft below draft_min is none, a sampled one is kept */
    assert_int_equal(clinfer_draft_proposed(2, 3, 0), 0);
    assert_int_equal(clinfer_draft_proposed(3, 3, 0), 3);
    assert_int_equal(clinfer_draft_proposed(2, 3, 1), 2);
    assert_int_equal(clinfer_draft_proposed(0, 0, 1), 0);
}

int main(void) {
    if (getenv("CLINFER_TEST_SPEC_TEMP")) TEMP = (float)atof(getenv("CLINFER_TEST_SPEC_TEMP"));
    if (getenv("CLINFER_TEST_SPEC_SEEDS")) N_SEEDS = atoi(getenv("CLINFER_TEST_SPEC_SEEDS"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_rule),
        cmocka_unit_test(test_vocab_mismatch),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_greedy_default_model),
        cmocka_unit_test(test_draft_min_keeps_drafting),
        cmocka_unit_test(test_sampled_lookup),
        cmocka_unit_test(test_sampled_step),
        cmocka_unit_test(test_sampled_draft_model),
        cmocka_unit_test(test_sampled_self_draft),
        cmocka_unit_test(test_sampled_grammar),
        cmocka_unit_test(test_draft_draw),
    };
    return TU_RUN_GROUP(tests, setup, teardown);
}

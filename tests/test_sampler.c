/* Sampler: each filter against a plain C reference distribution (double,
 * full sort), by drawing many times on fresh random logits and comparing
 * frequencies (chi-square) and support (never a token the reference drops);
 * greedy, seeding, the repetition penalty and bad parameters. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "sampler.h"
#include "testutil.h"

enum { N_DRAWS = 20000 };

static clf_sampler_params plain(float temperature) {
    clf_sampler_params p = clf_sampler_defaults();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = tu_seed() ^ 0x5a5a;
    return p;
}

static void random_logits(uint64_t *s, float *l, int n, float scale) {
    for (int i = 0; i < n; i++) l[i] = scale * tu_normal(s);
}

/* ---- the reference: the chain written out with a full sort ----------------- */

static const float *g_logits;

static int by_logit_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_logits[x] != g_logits[y]) return g_logits[x] > g_logits[y] ? -1 : 1;
    return x - y;
}

/* prob[i] for every token after penalty (already applied to l), top-k,
 * top-p, min-p and temperature. */
static void ref_probs(const float *l, int n, const clf_sampler_params *p, double *prob) {
    int *order = malloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++) order[i] = i;
    g_logits = l;
    qsort(order, (size_t)n, sizeof *order, by_logit_desc);
    double max = l[order[0]];
    int keep = n;
    if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
    if (p->top_p < 1) {
        double z = 0, cum = 0;
        for (int i = 0; i < keep; i++) z += exp(l[order[i]] - max);
        for (int i = 0; i < keep; i++) {
            cum += exp(l[order[i]] - max) / z;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        int m = 0;
        while (m < keep && exp(l[order[m]] - max) >= p->min_p) m++;
        keep = m;
    }
    double z = 0;
    for (int i = 0; i < n; i++) prob[i] = 0;
    for (int i = 0; i < keep; i++) z += prob[order[i]] = exp((l[order[i]] - max) / p->temperature);
    for (int i = 0; i < keep; i++) prob[order[i]] /= z;
    free(order);
}

/* Draws N_DRAWS tokens and checks them against prob: no draw where prob is
 * 0, and a chi-square (bins with an expectation under 5 pooled) below
 * df + 6 sqrt(2 df) + 10, a bound a correct sampler fails about never. */
static void check_draws(clf_sampler *s, const float *l, int n, const double *prob) {
    int *count = calloc((size_t)n, sizeof *count);
    for (int d = 0; d < N_DRAWS; d++) {
        int32_t id = clf_sampler_sample(s, l, n);
        assert_true(id >= 0 && id < n);
        if (prob[id] == 0) fail_msg("drew token %d, which the reference filters out", id);
        count[id]++;
    }
    double chi2 = 0, pool_exp = 0, pool_obs = 0;
    int df = 0;
    for (int i = 0; i < n; i++) {
        double e = prob[i] * N_DRAWS;
        if (e == 0) continue;
        if (e < 5) {
            pool_exp += e;
            pool_obs += count[i];
            continue;
        }
        chi2 += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    if (pool_exp > 0) {
        chi2 += (pool_obs - pool_exp) * (pool_obs - pool_exp) / (pool_exp > 1 ? pool_exp : 1);
        df++;
    }
    df = df > 1 ? df - 1 : 1;
    double bound = df + 6 * sqrt(2.0 * df) + 10;
    if (chi2 > bound) fail_msg("chi-square %.1f over %d degrees of freedom exceeds %.1f", chi2, df, bound);
    free(count);
}

static void run_distribution(int n, float scale, clf_sampler_params p) {
    uint64_t seed = tu_seed() + (uint64_t)n * 7919;
    float *l = malloc((size_t)n * sizeof *l);
    double *prob = malloc((size_t)n * sizeof *prob);
    random_logits(&seed, l, n, scale);
    ref_probs(l, n, &p, prob);
    clf_sampler *s;
    TU_OK(clf_sampler_create(&p, n, &s));
    check_draws(s, l, n, prob);
    clf_sampler_free(s);
    free(l);
    free(prob);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_temperature_matches_softmax(void **state) {
    (void)state;
    run_distribution(37, 1.5f, plain(0.8f));
    run_distribution(1, 1.0f, plain(1.0f));
    run_distribution(2, 0.5f, plain(2.0f));
}

static void test_top_k(void **state) {
    (void)state;
    clf_sampler_params p = plain(1.2f);
    p.top_k = 5;
    run_distribution(101, 2.0f, p);
    p.top_k = 1; /* top-1 is greedy whatever the temperature */
    run_distribution(64, 1.0f, p);
    p.top_k = 200; /* k above the vocabulary: off */
    run_distribution(97, 1.0f, p);
}

static void test_top_p(void **state) {
    (void)state;
    clf_sampler_params p = plain(1.0f);
    p.top_p = 0.7f;
    run_distribution(211, 2.0f, p);
    p.top_p = 0.0f; /* keeps only the best */
    run_distribution(31, 1.0f, p);
}

/* A nucleus that reaches past the sorted head: one token at 0 and 2000 at
 * -17 (e^-17 of it each): p = 0.99999 needs ~200 of the low ones. */
static void test_top_p_into_the_tail(void **state) {
    (void)state;
    enum { N = 2001 };
    float l[N];
    double prob[N];
    l[0] = 0;
    for (int i = 1; i < N; i++) l[i] = -17.0f;
    clf_sampler_params p = plain(60.0f); /* flat enough that the tail gets drawn */
    p.top_p = 0.99999f;
    ref_probs(l, N, &p, prob);
    int kept = 0;
    for (int i = 0; i < N; i++) kept += prob[i] > 0;
    assert_true(kept > 50 && kept < N);
    clf_sampler *s;
    TU_OK(clf_sampler_create(&p, N, &s));
    check_draws(s, l, N, prob);
    clf_sampler_free(s);
}

static void test_min_p(void **state) {
    (void)state;
    clf_sampler_params p = plain(0.9f);
    p.min_p = 0.1f;
    run_distribution(173, 1.5f, p);
    p.min_p = 1.0f; /* only the most likely */
    run_distribution(50, 1.0f, p);
}

static void test_chain(void **state) {
    (void)state;
    clf_sampler_params p = plain(0.7f);
    p.top_k = 40;
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    run_distribution(1000, 2.5f, p);
}

static void test_greedy(void **state) {
    (void)state;
    uint64_t seed = tu_seed() + 3;
    enum { N = 333 };
    float l[N];
    for (int round = 0; round < 20; round++) {
        random_logits(&seed, l, N, 3.0f);
        int best = 0;
        for (int i = 1; i < N; i++)
            if (l[i] > l[best]) best = i;
        clf_sampler_params p = plain(round % 2 ? 0.0f : -1.0f);
        p.top_k = 3; /* filters do not matter at temperature 0 */
        p.seed = tu_next(&seed);
        clf_sampler *s;
        TU_OK(clf_sampler_create(&p, N, &s));
        assert_int_equal(clf_sampler_sample(s, l, N), best);
        int other = best == N - 1 ? 0 : N - 1;
        l[other] = l[best]; /* a tie goes to the lower id */
        assert_int_equal(clf_sampler_sample(s, l, N), best < other ? best : other);
        l[best] = NAN; /* NaN is never chosen */
        assert_int_equal(clf_sampler_sample(s, l, N), other);
        clf_sampler_free(s);
    }
}

static void test_same_seed_same_tokens(void **state) {
    (void)state;
    uint64_t seed = tu_seed() + 5;
    enum { N = 500, STEPS = 300 };
    float *l = malloc(sizeof(float) * N * STEPS);
    random_logits(&seed, l, N * STEPS, 2.0f);
    clf_sampler_params p = clf_sampler_defaults();
    p.seed = tu_next(&seed);
    p.repeat_penalty = 1.3f;
    clf_sampler *a, *b, *c;
    TU_OK(clf_sampler_create(&p, N, &a));
    TU_OK(clf_sampler_create(&p, N, &b));
    p.seed ^= 1;
    TU_OK(clf_sampler_create(&p, N, &c));
    int32_t first[STEPS];
    int differ = 0;
    for (int i = 0; i < STEPS; i++) {
        int32_t x = clf_sampler_sample(a, l + (size_t)i * N, N), y = clf_sampler_sample(b, l + (size_t)i * N, N);
        int32_t z = clf_sampler_sample(c, l + (size_t)i * N, N);
        assert_int_equal(x, y);
        differ += x != z;
        first[i] = x;
        clf_sampler_accept(a, x);
        clf_sampler_accept(b, y);
        clf_sampler_accept(c, z);
    }
    assert_true(differ > 0); /* another seed, another sequence */
    clf_sampler_reset(a); /* history and RNG from the start again */
    for (int i = 0; i < STEPS; i++) {
        int32_t x = clf_sampler_sample(a, l + (size_t)i * N, N);
        assert_int_equal(x, first[i]);
        clf_sampler_accept(a, x);
    }
    clf_sampler_free(a);
    clf_sampler_free(b);
    clf_sampler_free(c);
    free(l);
}

static void test_repetition_penalty(void **state) {
    (void)state;
    clf_sampler_params p = plain(0.0f);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    clf_sampler *s;
    TU_OK(clf_sampler_create(&p, 8, &s));
    float pos[8] = {2.0f, 1.8f, -1.0f, -1.1f, 0.5f, 0.1f, -3.0f, 0.0f};
    assert_int_equal(clf_sampler_sample(s, pos, 8), 0);
    clf_sampler_accept(s, 0); /* 2.0 / 1.5 = 1.33 < 1.8 */
    assert_int_equal(clf_sampler_sample(s, pos, 8), 1);
    clf_sampler_accept(s, 5);
    clf_sampler_accept(s, 6); /* token 0 has left the 2-token window */
    assert_int_equal(clf_sampler_sample(s, pos, 8), 0);

    float neg[8] = {-1.0f, -1.2f, -5.0f, -6.0f, -7.0f, -8.0f, -9.0f, -9.5f};
    clf_sampler_reset(s);
    clf_sampler_accept(s, 0); /* negative logits are multiplied: -1.5 < -1.2 */
    assert_int_equal(clf_sampler_sample(s, neg, 8), 1);
    clf_sampler_free(s);

    /* a token repeated in the window is penalized once, not per occurrence */
    p.repeat_last_n = 8;
    TU_OK(clf_sampler_create(&p, 2, &s));
    float two[2] = {2.0f, 1.0f};
    for (int i = 0; i < 3; i++) clf_sampler_accept(s, 0);
    assert_int_equal(clf_sampler_sample(s, two, 2), 0); /* 1.33 > 1.0; 2 / 1.5^3 would lose */
    clf_sampler_free(s);

    /* penalty 1 or an empty window changes nothing; out-of-range history is ignored */
    p.repeat_penalty = 1.0f;
    TU_OK(clf_sampler_create(&p, 8, &s));
    clf_sampler_accept(s, 0);
    assert_int_equal(clf_sampler_accept(s, -7), CLF_ERR_ARG);
    assert_int_equal(clf_sampler_accept(s, 1000), CLF_ERR_ARG);
    assert_int_equal(clf_sampler_sample(s, pos, 8), 0);
    clf_sampler_free(s);

    /* a token outside the vocabulary is refused, naming it, and leaves the
     * history as it was: the penalty still falls on the token accepted before */
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 1;
    TU_OK(clf_sampler_create(&p, 2, &s));
    TU_OK(clf_sampler_accept(s, 0));
    assert_int_equal(clf_sampler_accept(s, 2), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "token 2 is not in the vocabulary of 2");
    assert_int_equal(clf_sampler_accept(s, INT32_MIN), CLF_ERR_ARG);
    float near[2] = {1.4f, 1.0f};
    assert_int_equal(clf_sampler_sample(s, near, 2), 1); /* 1.4 / 1.5 < 1.0: token 0 still penalized */
    clf_sampler_free(s);
}

/* The k best of l, best first (the larger logit, then the smaller id), as
 * clf_llama_eval_top gives them. */
static void best_k(const float *l, int n, int k, float *vals, int32_t *ids) {
    int *order = malloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++) order[i] = i;
    g_logits = l;
    qsort(order, (size_t)n, sizeof *order, by_logit_desc);
    for (int j = 0; j < k; j++) vals[j] = l[order[j]], ids[j] = order[j];
    free(order);
}

/* Given only the k best logits (clf_sampler_sample_top), the same token as
 * from all of them, draw for draw with one seed: greedy and sampling with
 * each filter, on logits with ties (a coarse grid). */
static void test_top_k_candidates_same_tokens(void **state) {
    (void)state;
    enum { N = 3001, DRAWS = 400, KMAX = 64 };
    uint64_t s = tu_seed() ^ 0x70b;
    float *l = malloc(N * sizeof *l), vals[KMAX];
    int32_t ids[KMAX];
    const struct { float t; int k; float p, minp; } set[] = {
        {0, 40, 0.95f, 0.05f}, {0.8f, 40, 0.95f, 0.05f}, {1.0f, 1, 1, 0}, {1.5f, 64, 1, 0}, {0.7f, 10, 0.5f, 0},
        {1.2f, 64, 1, 0.2f}};
    for (size_t c = 0; c < sizeof set / sizeof set[0]; c++) {
        clf_sampler_params p = clf_sampler_defaults();
        p.temperature = set[c].t, p.top_k = set[c].k, p.top_p = set[c].p, p.min_p = set[c].minp;
        p.seed = tu_next(&s);
        clf_sampler *full, *top;
        assert_int_equal(clf_sampler_create(&p, N, &full), CLF_OK);
        assert_int_equal(clf_sampler_create(&p, N, &top), CLF_OK);
        const int k = clf_sampler_top_k(top, KMAX);
        assert_int_equal(k, set[c].t <= 0 ? 1 : set[c].k);
        for (int d = 0; d < DRAWS; d++) {
            for (int i = 0; i < N; i++) l[i] = d % 2 ? floorf(6 * tu_normal(&s)) / 2 : 3 * tu_normal(&s);
            best_k(l, N, k, vals, ids);
            const int32_t a = clf_sampler_sample(full, l, N), b = clf_sampler_sample_top(top, vals, ids, k);
            if (a != b) fail_msg("settings %zu, draw %d: %d from every logit, %d from the best %d (replay: CLINFER_SEED=%llu)",
                                 c, d, (int)a, (int)b, k, (unsigned long long)tu_seed());
        }
        clf_sampler_free(full);
        clf_sampler_free(top);
    }
    /* when all the logits are needed: a penalty, top-k off, above the most, or the whole vocabulary */
    clf_sampler_params p = clf_sampler_defaults();
    clf_sampler *sm;
    const struct { float pen; int k, kmax, n; } none[] = {{1.1f, 40, KMAX, N}, {1, 0, KMAX, N}, {1, 65, KMAX, N}, {1, 40, KMAX, 40}};
    for (size_t c = 0; c < sizeof none / sizeof none[0]; c++) {
        p.repeat_penalty = none[c].pen, p.top_k = none[c].k;
        assert_int_equal(clf_sampler_create(&p, none[c].n, &sm), CLF_OK);
        assert_int_equal(clf_sampler_top_k(sm, none[c].kmax), 0);
        clf_sampler_free(sm);
    }
    /* a k the settings do not take, an id outside the vocabulary */
    p = clf_sampler_defaults();
    assert_int_equal(clf_sampler_create(&p, N, &sm), CLF_OK);
    best_k(l, N, 40, vals, ids);
    assert_int_equal(clf_sampler_sample_top(sm, vals, ids, 39), -1);
    ids[3] = N;
    assert_int_equal(clf_sampler_sample_top(sm, vals, ids, 40), -1);
    clf_sampler_free(sm);
    free(l);
}

static void test_bad_parameters(void **state) {
    (void)state;
    clf_sampler *s = (clf_sampler *)&s;
    clf_sampler_params p = clf_sampler_defaults();
    assert_int_equal(clf_sampler_create(&p, 0, &s), CLF_ERR_ARG);
    assert_null(s);
    p.temperature = NAN;
    assert_int_equal(clf_sampler_create(&p, 10, &s), CLF_ERR_ARG);
    p = clf_sampler_defaults();
    p.top_p = -0.1f;
    assert_int_equal(clf_sampler_create(&p, 10, &s), CLF_ERR_ARG);
    p = clf_sampler_defaults();
    p.min_p = NAN;
    assert_int_equal(clf_sampler_create(&p, 10, &s), CLF_ERR_ARG);
    p = clf_sampler_defaults();
    p.repeat_penalty = 0.0f;
    assert_int_equal(clf_sampler_create(&p, 10, &s), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "penalty"));
    p = clf_sampler_defaults();
    p.repeat_last_n = -1;
    assert_int_equal(clf_sampler_create(&p, 10, &s), CLF_ERR_ARG);
    p = clf_sampler_defaults();
    TU_OK(clf_sampler_create(&p, 10, &s));
    float l[11] = {0};
    assert_int_equal(clf_sampler_sample(s, l, 11), -1); /* more logits than the sampler's vocabulary */
    assert_non_null(strstr(clf_last_error(), "11"));
    clf_sampler_free(s);
    clf_sampler_free(NULL);
}

/* The default chain on the default model's vocabulary size: report the cost
 * of one token (the filters avoid sorting 49152 logits). */
static void test_vocab_sized_cost(void **state) {
    (void)state;
    enum { N = 49152, STEPS = 200 };
    uint64_t seed = tu_seed() + 11;
    float *l = malloc(sizeof(float) * N);
    random_logits(&seed, l, N, 3.0f);
    clf_sampler_params p = clf_sampler_defaults();
    clf_sampler *s;
    TU_OK(clf_sampler_create(&p, N, &s));
    const char *names[] = {"defaults (top-k 40)", "top-p 0.95 alone", "temperature alone"};
    for (int v = 0; v < 3; v++) {
        clf_sampler_free(s);
        p = clf_sampler_defaults();
        p.top_k = v ? 0 : p.top_k;
        p.min_p = v ? 0 : p.min_p;
        p.top_p = v == 2 ? 1 : p.top_p;
        TU_OK(clf_sampler_create(&p, N, &s));
        clock_t t0 = clock();
        for (int i = 0; i < STEPS; i++) assert_true(clf_sampler_sample(s, l, N) >= 0);
        double us = (double)(clock() - t0) / CLOCKS_PER_SEC / STEPS * 1e6;
        fprintf(stderr, "[ INFO ] sampling %d logits, %s: %.0f us per token\n", N, names[v], us);
    }
    clf_sampler_free(s);
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature_matches_softmax),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_top_p_into_the_tail),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_top_k_candidates_same_tokens),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_vocab_sized_cost),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

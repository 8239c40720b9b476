/* clinfer_logprobs against a plain reference: log-softmax written out in
 * long double without subtracting the maximum (its range holds exp of the
 * logits used here), on fresh random logits of odd vocabulary sizes, large
 * offsets, -inf entries and ties (values on a coarse grid); the n best
 * against a full sort (the larger logit, then the smaller id); bad
 * arguments. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "clinfer.h"
#include "testutil.h"

static const float *g_logits;

static int by_better(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_logits[x] != g_logits[y]) return g_logits[x] > g_logits[y] ? -1 : 1;
    return x - y;
}

/* The reference log-probability of every token. */
static void reference(const float *l, int n, long double *lp) {
    long double z = 0;
    for (int i = 0; i < n; i++) z += expl((long double)l[i]);
    for (int i = 0; i < n; i++) lp[i] = l[i] == -INFINITY ? -INFINITY : (long double)l[i] - logl(z);
}

static void near(float got, long double want, const char *what, int i) {
    if (want == -INFINITY) {
        if (got != -INFINITY) fail_msg("%s %d: %g, want -inf", what, i, got);
        return;
    }
    const double tol = 4 * FLT_EPSILON * fmax(1.0, fabs((double)want));
    if (!(fabs(got - (double)want) <= tol)) fail_msg("%s %d: %.9g, want %.9Lg (tolerance %g)", what, i, got, want, tol);
}

/* One random row: every token's logprob, the n best in order, the
 * probabilities summing to 1. */
static void check(uint64_t *rng, int n, float scale, float offset, int grid, int n_inf, int n_top) {
    float *l = malloc((size_t)n * sizeof *l);
    long double *ref = malloc((size_t)n * sizeof *ref);
    int *order = malloc((size_t)n * sizeof *order);
    int32_t *top = malloc((size_t)(n_top + 1) * sizeof *top);
    float *top_lp = malloc((size_t)(n_top + 1) * sizeof *top_lp);
    assert_true(l && ref && order && top && top_lp);
    for (int i = 0; i < n; i++) {
        float x = scale * tu_normal(rng);
        l[i] = offset + (grid ? roundf(x * grid) / grid : x);
    }
    for (int k = 0; k < n_inf && k < n - 1; k++) l[tu_next(rng) % (uint64_t)n] = -INFINITY;
    if (n_inf >= n) l[0] = offset; /* one token left to draw */
    reference(l, n, ref);
    double total = 0;
    /* every token of a small vocabulary (their probabilities sum to 1), a sample of a large one's */
    const int probes = n <= 1024 ? n : 128;
    for (int k = 0; k < probes; k++) {
        const int32_t t = n <= 1024 ? k : (int32_t)(tu_next(rng) % (uint64_t)n);
        float lp;
        assert_int_equal(clinfer_logprobs(l, n, t, &lp, 0, NULL, NULL), CLINFER_OK);
        near(lp, ref[t], "token", t);
        if (n <= 1024) total += exp(lp);
    }
    if (n <= 1024) assert_true(fabs(total - 1) < 1e-4);
    /* the n best with the logprob of a token among them */
    for (int i = 0; i < n; i++) order[i] = i;
    g_logits = l;
    qsort(order, (size_t)n, sizeof *order, by_better);
    float lp;
    const int32_t t = order[n_top > 0 ? n_top - 1 : 0];
    assert_int_equal(clinfer_logprobs(l, n, t, &lp, n_top, top, top_lp), CLINFER_OK);
    near(lp, ref[t], "token", t);
    for (int i = 0; i < n_top; i++) {
        if (top[i] != order[i]) fail_msg("n=%d top %d of %d: token %d, want %d", n, i, n_top, top[i], order[i]);
        near(top_lp[i], ref[order[i]], "top", i);
        if (i) assert_true(top_lp[i] <= top_lp[i - 1]);
    }
    free(l);
    free(ref);
    free(order);
    free(top);
    free(top_lp);
}

static void test_random_rows(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    static const int SIZES[] = {1, 2, 3, 7, 61, 1001, 4093, 49157, 262147};
    for (size_t k = 0; k < sizeof SIZES / sizeof *SIZES; k++) {
        const int n = SIZES[k], most = n < 20 ? n : 20;
        check(&rng, n, 3.0f, 0.0f, 0, 0, most);                        /* plain */
        check(&rng, n, 8.0f, 1000.0f, 0, 0, (int)(tu_next(&rng) % (uint64_t)(most + 1))); /* exp(1000) overflows a double */
        check(&rng, n, 2.0f, -50.0f, 2, 0, most);                      /* ties: a grid of 0.5 */
        check(&rng, n, 4.0f, 5.0f, 0, n / 3 + 1, most);                /* -inf entries */
        check(&rng, n, 1.0f, 0.0f, 1, n, most < n ? most : n);         /* most -inf */
    }
}

/* A single finite logit has probability 1; equal logits share it. */
static void test_exact_cases(void **state) {
    (void)state;
    float l[5] = {-INFINITY, 2.5f, -INFINITY, -INFINITY, -INFINITY}, lp;
    int32_t top[5];
    float top_lp[5];
    assert_int_equal(clinfer_logprobs(l, 5, 1, &lp, 5, top, top_lp), CLINFER_OK);
    assert_true(lp == 0.0f);
    assert_int_equal(top[0], 1);
    assert_int_equal(top[1], 0); /* the -inf ties: the smaller id first */
    assert_int_equal(top[4], 4);
    assert_true(top_lp[1] == -INFINITY);
    float same[4] = {7, 7, 7, 7};
    assert_int_equal(clinfer_logprobs(same, 4, 3, &lp, 4, top, top_lp), CLINFER_OK);
    assert_true(fabsf(lp - logf(0.25f)) < 1e-6f);
    for (int i = 0; i < 4; i++) assert_int_equal(top[i], i);
}

static void test_bad_arguments(void **state) {
    (void)state;
    float l[3] = {1, 2, 3}, lp;
    int32_t top[4];
    float top_lp[4];
    assert_int_equal(clinfer_logprobs(l, 3, -1, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    assert_non_null(strstr(clinfer_last_error(), "token -1"));
    assert_int_equal(clinfer_logprobs(l, 3, 3, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(l, 3, 0, &lp, 4, top, top_lp), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(l, 3, 0, &lp, -1, top, top_lp), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(l, 3, 0, &lp, 2, NULL, top_lp), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(l, 0, 0, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(NULL, 3, 0, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_logprobs(l, 3, 0, NULL, 0, NULL, NULL), CLINFER_ERR_ARG);
    l[1] = NAN;
    assert_int_equal(clinfer_logprobs(l, 3, 0, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    assert_non_null(strstr(clinfer_last_error(), "NaN"));
    float none[2] = {-INFINITY, -INFINITY};
    assert_int_equal(clinfer_logprobs(none, 2, 0, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
    float inf[2] = {INFINITY, 0};
    assert_int_equal(clinfer_logprobs(inf, 2, 0, &lp, 0, NULL, NULL), CLINFER_ERR_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_rows),
        cmocka_unit_test(test_exact_cases),
        cmocka_unit_test(test_bad_arguments),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* The prompt-lookup drafter (api/lookup.c) against a brute-force reference
 * on fresh random token arrays (small alphabets, so n-grams recur), and a
 * worked example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lookup.h"
#include "testutil.h"

/* Every start j, each compared token by token; the last match kept. */
static int reference(const int32_t *t, int n, int kmin, int kmax, int draft_max, int32_t *draft) {
    if (kmin < 1) kmin = 1;
    for (int k = kmax; k >= kmin; k--) {
        if (k > n - 1) continue; /* no earlier start */
        int found = -1;
        for (int j = 0; j + k < n; j++) {
            int same = 1;
            for (int x = 0; x < k; x++) same &= t[j + x] == t[n - k + x];
            if (same) found = j;
        }
        if (found < 0) continue;
        /* the text, extended by the occurrence's shift until it is long enough */
        int32_t ext[96 + 40];
        memcpy(ext, t, (size_t)n * sizeof *t);
        for (int i = n; i < n + draft_max; i++) ext[i] = ext[i - (n - k - found)];
        memcpy(draft, ext + n, (size_t)draft_max * sizeof *draft);
        return draft_max;
    }
    return 0;
}

static void test_random(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    int drafted = 0, empty = 0;
    for (int it = 0; it < 20000; it++) {
        int32_t t[96], got[40], want[40];
        int alphabet = 2 + (int)(tu_next(&rng) % 12), n = (int)(tu_next(&rng) % 97);
        int kmin = 1 + (int)(tu_next(&rng) % 3), kmax = kmin + (int)(tu_next(&rng) % 4);
        int draft_max = (int)(tu_next(&rng) % 41);
        for (int i = 0; i < n; i++) t[i] = (int32_t)(tu_next(&rng) % (uint64_t)alphabet);
        memset(got, 0xff, sizeof got);
        int g = clf_lookup_draft(t, n, kmin, kmax, draft_max, got);
        int w = reference(t, n, kmin, kmax, draft_max, want);
        if (g != w) fail_msg("n %d alphabet %d ngram %d..%d draft_max %d: %d tokens, reference %d", n, alphabet, kmin,
                             kmax, draft_max, g, w);
        assert_memory_equal(got, want, (size_t)w * sizeof *want);
        if (w < 40) assert_int_equal(got[w], -1); /* nothing written past the draft */
        drafted += w > 0, empty += w == 0;
    }
    print_message("%d drafts, %d without an occurrence\n", drafted, empty);
    assert_true(drafted > 1000 && empty > 1000); /* both branches exercised */
}

static void test_example(void **state) {
    (void)state;
    /* "a b c d a b" : the 2-gram "a b" occurred at 0, followed by "c d a b",
     * then as the text repeats "c d" */
    const int32_t t[] = {1, 2, 3, 4, 1, 2};
    int32_t d[8];
    assert_int_equal(clf_lookup_draft(t, 6, 1, 3, 6, d), 6);
    const int32_t dt[] = {3, 4, 1, 2, 3, 4};
    assert_memory_equal(d, dt, sizeof dt);
    assert_int_equal(clf_lookup_draft(t, 6, 1, 3, 2, d), 2);
    /* the most recent occurrence wins: "x 5 x 6 x" drafts "6 x 6 x" after the last x */
    const int32_t u[] = {9, 5, 9, 6, 9};
    assert_int_equal(clf_lookup_draft(u, 5, 1, 3, 4, d), 4);
    const int32_t du[] = {6, 9, 6, 9};
    assert_memory_equal(d, du, sizeof du);
    /* a longer n-gram is preferred to a later short one: "1 2 7 . 3 2 8 . 1 2" drafts 7 */
    const int32_t v[] = {1, 2, 7, 0, 3, 2, 8, 0, 1, 2};
    assert_int_equal(clf_lookup_draft(v, 10, 1, 3, 1, d), 1);
    assert_int_equal(d[0], 7);
    assert_int_equal(clf_lookup_draft(v, 10, 3, 3, 4, d), 0); /* "0 1 2" never occurred before */
    assert_int_equal(clf_lookup_draft(v, 1, 1, 3, 4, d), 0);
    assert_int_equal(clf_lookup_draft(v, 0, 1, 3, 4, d), 0);
    assert_int_equal(clf_lookup_draft(t, 6, 1, 3, 0, d), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random), cmocka_unit_test(test_example)};
    return TU_RUN_GROUP(tests, NULL, NULL);
}

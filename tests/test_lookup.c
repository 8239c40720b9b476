/* The prompt-lookup drafter (api/lookup.c) against a brute-force reference
 * on fresh random token arrays (small alphabets, so n-grams recur), and a
 * worked example; the speculative step (clinfer_drafter_propose, _accept,
 * _settle) driving a toy model's generation against the plain loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "clinfer.h"
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

/* ---- the speculative step ------------------------------------------------ */

/* A toy model: the token after a text is a table's entry for its last two
 * tokens (so texts fall into repeating cycles that the drafts find, with
 * misses where a cycle is entered). */
enum { TOY_ALPHABET = 6, TOY_MAX = 400 };
static int32_t toy_next(const uint8_t *table, const int32_t *t, int n) {
    int a = n > 1 ? t[n - 2] : 0, b = n > 0 ? t[n - 1] : 0;
    return table[a * TOY_ALPHABET + b];
}

static int min3(int a, int b, int c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* clinfer_generate's loop on the toy model: the pending token and the
 * drafter's proposal are "evaluated" (each row's token is toy_next of the
 * sequence's tokens, then the rows before it and its own), tokens are
 * taken row after row while each is accepted, and the sequence keeps what
 * settle says. Checked: the text is the plain loop's; each proposal is the
 * pending token, then a twin drafter's draft under the bound the header
 * gives (the caller's max, left - 1, room); settle keeps row + 1 rows. */
static void spec_run(const uint8_t *table, const int32_t *prompt, int n_prompt, int max_tokens, int draft_max,
                     int n_ctx, int *drafted, int *accepted) {
    int32_t plain[TOY_MAX], text[TOY_MAX], seq[TOY_MAX], rows_seen[TOY_MAX];
    /* the plain loop: each token from the text before it */
    memcpy(plain, prompt, (size_t)n_prompt * sizeof *prompt);
    int n_plain = n_prompt;
    /* a token is sampled while the tokens before it fit the context (the last is not evaluated) */
    for (int i = 0; i < max_tokens && n_plain <= n_ctx; i++, n_plain++)
        plain[n_plain] = toy_next(table, plain, n_plain);
    /* the speculative one */
    clinfer_drafter *d, *twin;
    assert_int_equal(clinfer_drafter_create(draft_max, &d), CLINFER_OK);
    assert_int_equal(clinfer_drafter_create(draft_max, &twin), CLINFER_OK);
    memcpy(text, prompt, (size_t)n_prompt * sizeof *prompt);
    memcpy(seq, prompt, (size_t)n_prompt * sizeof *prompt);
    int n_text = n_prompt, n_seq = n_prompt, generated = 0;
    text[n_text++] = toy_next(table, seq, n_seq), generated++; /* from the prompt's logits */
    while (generated < max_tokens && n_seq < n_ctx) {
        const int left = max_tokens - generated, room = n_ctx - n_seq - 1;
        const int max = 1 + (int)(text[n_text - 1] % (uint32_t)draft_max); /* a caller's own bound, varied */
        const int32_t *rows = NULL;
        int n_rows = clinfer_drafter_propose(d, text, n_text, max, left, room, &rows);
        assert_true(n_rows >= 1 && rows);
        assert_int_equal(rows[0], text[n_text - 1]);
        /* the twin, asked directly for the bound's draft */
        const int cap = min3(max, left - 1, room);
        const int nd = cap > 0 ? clinfer_drafter_draft(twin, text, n_text, cap, rows_seen) : 0;
        assert_int_equal(n_rows, 1 + nd);
        assert_memory_equal(rows + 1, rows_seen, (size_t)nd * sizeof *rows);
        /* the batch's rows, evaluated after the sequence */
        memcpy(seq + n_seq, rows, (size_t)n_rows * sizeof *rows);
        int r = 0;
        for (;; r++) {
            int32_t tok = toy_next(table, seq, n_seq + r + 1); /* row r's "logits" */
            text[n_text++] = tok, generated++;
            if (generated == max_tokens) break; /* the loop's end: the rest of the batch dropped */
            int took = clinfer_drafter_accept(d, r, tok);
            assert_int_equal(took, r + 1 < n_rows && tok == rows[r + 1]);
            if (!took) break;
        }
        if (n_rows > 1) *drafted += n_rows - 1, *accepted += r;
        assert_int_equal(clinfer_drafter_settle(d, r), r + 1);
        assert_int_equal(clinfer_drafter_settle(d, r), 0); /* settled once */
        if (nd) clinfer_drafter_taken(twin, nd, r);
        n_seq += r + 1;
        assert_memory_equal(seq, text, (size_t)n_seq * sizeof *seq); /* the rows kept are the text's */
    }
    assert_int_equal(n_text, n_plain);
    assert_memory_equal(text, plain, (size_t)n_plain * sizeof *plain);
    clinfer_drafter_free(d);
    clinfer_drafter_free(twin);
}

static void test_spec_step(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    int drafted = 0, accepted = 0;
    for (int it = 0; it < 2000; it++) {
        uint8_t table[TOY_ALPHABET * TOY_ALPHABET];
        for (size_t i = 0; i < sizeof table; i++) table[i] = (uint8_t)(tu_next(&rng) % TOY_ALPHABET);
        int32_t prompt[64];
        int n_prompt = 1 + (int)(tu_next(&rng) % 64), max_tokens = 1 + (int)(tu_next(&rng) % 200);
        int draft_max = 1 + (int)(tu_next(&rng) % 16);
        int n_ctx = n_prompt + 1 + (int)(tu_next(&rng) % 250); /* at times the context ends the text */
        for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)(tu_next(&rng) % TOY_ALPHABET);
        spec_run(table, prompt, n_prompt, max_tokens, draft_max, n_ctx, &drafted, &accepted);
    }
    print_message("speculation: %d drafted, %d accepted\n", drafted, accepted);
    assert_true(accepted > 1000 && accepted < drafted); /* drafts taken and missed */
    /* no proposal: nothing to accept or settle; bad arguments: no rows */
    clinfer_drafter *d;
    const int32_t t[] = {1, 2, 1, 2}, *rows = NULL;
    assert_int_equal(clinfer_drafter_create(4, &d), CLINFER_OK);
    assert_int_equal(clinfer_drafter_settle(d, 0), 0);
    assert_int_equal(clinfer_drafter_accept(d, 0, 1), 0);
    assert_int_equal(clinfer_drafter_propose(d, NULL, 4, 4, 10, 10, &rows), 0);
    assert_int_equal(clinfer_drafter_propose(d, t, 0, 4, 10, 10, &rows), 0);
    assert_int_equal(clinfer_drafter_propose(NULL, t, 4, 4, 10, 10, &rows), 0);
    /* "1 2 1 2" with 2 pending: drafts "1 2 1 2"; a bound of left 3 keeps 2 */
    assert_int_equal(clinfer_drafter_propose(d, t, 4, 4, 3, 10, &rows), 3);
    assert_int_equal(rows[0], 2);
    assert_int_equal(rows[1], 1);
    assert_int_equal(rows[2], 2);
    assert_true(clinfer_drafter_accept(d, 0, 1));
    assert_false(clinfer_drafter_accept(d, 1, 1));
    assert_false(clinfer_drafter_accept(d, 2, 2)); /* the last row: nothing after it */
    assert_int_equal(clinfer_drafter_settle(d, 1), 2);
    /* room 0 (the context's last position): no draft, the pending token alone */
    assert_int_equal(clinfer_drafter_propose(d, t, 4, 4, 10, 0, &rows), 1);
    assert_int_equal(rows[0], 2);
    assert_int_equal(clinfer_drafter_settle(d, 0), 1);
    clinfer_drafter_free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random), cmocka_unit_test(test_example),
                                       cmocka_unit_test(test_spec_step)};
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* The device's k best of a row (host/compute/select.h, cl/select.cl) against
 * a full sort in C: rows of odd lengths around the slice size, k from 1 to
 * the most, values on a coarse grid so that ties are common (the smaller
 * index wins), NaN (as -inf) and infinities (flagged); a row not at the
 * start of its buffer; the same rows under a grammar's mask (a refused
 * value as -inf: sparse masks with fewer allowed than k, words all refused
 * or all allowed, mixed); bad arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "select.h"
#include "testutil.h"

static const float *g_row;
static const uint32_t *g_mask; /* NULL: none */

/* The larger value first, the smaller index on ties; NaN as -inf, and a
 * value the mask refuses. */
static float key_at(const float *row, const uint32_t *mask, int i) {
    return isnan(row[i]) || (mask && !(mask[i >> 5] >> (i & 31) & 1)) ? -INFINITY : row[i];
}
static int by_better(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    const float u = key_at(g_row, g_mask, x), v = key_at(g_row, g_mask, y);
    if (u != v) return u > v ? -1 : 1;
    return x - y;
}

/* Row r of a [rows × n] tensor filled with `row`, its k best read back and
 * compared with the sort: values bit for bit, indices exactly. */
static void check_row(clf_topk *t, const float *row, const uint32_t *mask, int n, int k, int rows, int r) {
    clf_runtime *rt = tu_runtime();
    float *all = calloc((size_t)n * rows, sizeof *all);
    int *order = malloc((size_t)n * sizeof *order);
    assert_non_null(all);
    assert_non_null(order);
    memcpy(all + (size_t)r * n, row, (size_t)n * sizeof *row);
    clf_tensor x;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, n, rows, &x));
    TU_OK(clf_tensor_upload(rt, &x, all, (size_t)n * rows * sizeof *all));
    const clf_tensor xr = clf_tensor_rows(&x, r, 1);
    float vals[CLF_TOPK_MAX];
    int32_t ids[CLF_TOPK_MAX];
    int bad = -1, want_bad = 0;
    TU_OK(clf_topk_read_masked(t, &xr, k, mask, vals, ids, &bad));
    for (int i = 0; i < n; i++) order[i] = i, want_bad |= !isfinite(row[i]);
    g_row = row;
    g_mask = mask;
    qsort(order, (size_t)n, sizeof *order, by_better);
    for (int j = 0; j < k; j++) {
        const float want = key_at(row, mask, order[j]);
        if (ids[j] != order[j] || memcmp(&vals[j], &want, sizeof want))
            fail_msg("n %d k %d%s, rank %d: got %g at %d, want %g at %d (replay: CLINFER_SEED=%llu)", n, k,
                     mask ? " masked" : "", j, (double)vals[j], (int)ids[j], (double)want, order[j],
                     (unsigned long long)tu_seed());
    }
    assert_int_equal(bad, want_bad);
    clf_tensor_free(&x);
    free(order);
    free(all);
}

static void test_topk_against_sort(void **state) {
    (void)state;
    clf_topk t;
    TU_OK(clf_topk_create(tu_runtime(), &t));
    uint64_t s = tu_seed() ^ 0x70b;
    /* below, at and around one slice (512) and the most slices (64 x 512),
     * SmolLM2's and Gemma 3's vocabularies (+3) */
    const int ns[] = {1, 2, 7, 63, 511, 512, 1000, 32767, 32768, 49155, 262147};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        const int n = ns[a];
        float *row = malloc((size_t)n * sizeof *row);
        uint32_t *mask = malloc((size_t)(n + 31) / 32 * sizeof *mask);
        assert_non_null(row);
        assert_non_null(mask);
        const int ks[] = {1, 2, 40, CLF_TOPK_MAX};
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; b++) {
            const int k = ks[b] < n ? ks[b] : n;
            for (int v = 0; v < 3; v++) {
                /* v 0: a normal spread; 1: 16 levels, ties everywhere; 2: with NaN, +-inf */
                for (int i = 0; i < n; i++)
                    row[i] = v == 1 ? floorf(tu_uniform(&s, 0, 16)) : 4 * tu_normal(&s);
                if (v == 2) {
                    row[tu_next(&s) % n] = NAN;
                    row[tu_next(&s) % n] = -INFINITY;
                    if (n > 2) row[tu_next(&s) % n] = INFINITY;
                }
                check_row(&t, row, NULL, n, k, v == 0 ? 3 : 1, v == 0 ? 2 : 0);
                /* masked: v 0 words all refused, all allowed or mixed; 1 a
                 * bit in one word of 8 (fewer allowed than k: -inf pads by
                 * index); 2 mixed (bits past n set: never read as values) */
                for (int w = 0; w < (n + 31) / 32; w++) {
                    const uint64_t r = tu_next(&s) % 8;
                    mask[w] = v == 1 ? (r == 0 ? 1u << (tu_next(&s) % 32) : 0)
                              : v == 0 && r < 3 ? 0 : v == 0 && r == 3 ? ~0u : (uint32_t)tu_next(&s);
                }
                check_row(&t, row, mask, n, k, v == 0 ? 3 : 1, v == 0 ? 2 : 0);
            }
        }
        free(row);
        free(mask);
    }
    clf_topk_free(&t);
}

static void test_topk_bad_arguments(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    clf_topk t;
    TU_OK(clf_topk_create(rt, &t));
    clf_tensor x;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 10, 1, &x));
    float vals[CLF_TOPK_MAX];
    int32_t ids[CLF_TOPK_MAX];
    int bad;
    assert_int_equal(clf_topk_read(&t, &x, 0, vals, ids, &bad), CLF_ERR_ARG);
    assert_int_equal(clf_topk_read(&t, &x, 11, vals, ids, &bad), CLF_ERR_ARG); /* more than the row */
    clf_tensor_free(&x);
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 1000, 1, &x));
    assert_int_equal(clf_topk_read(&t, &x, CLF_TOPK_MAX + 1, vals, ids, &bad), CLF_ERR_ARG);
    clf_tensor_free(&x);
    clf_topk_free(&t);
    assert_int_equal(clf_topk_read(&t, &x, 1, vals, ids, &bad), CLF_ERR_ARG); /* no scratch */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_against_sort),
        cmocka_unit_test(test_topk_bad_arguments),
    };
    tu_seed();
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

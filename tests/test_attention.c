/* Attention: KV write, tiled prefill (CPU and GPU shapes), split-K decode,
 * naive kernels, each against the double-precision reference of
 * tools/check/check_attention.c on fresh random data; argument errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "check_attention.h"
#include "testutil.h"

static const clf_attn_variant VARIANTS[] = {CLF_ATTN_CPU, CLF_ATTN_GPU};

/* Runs one case on its own seed; fails with the case and its error. */
static double check_case(clf_attn_case cs) {
    static uint64_t n;
    clf_check_result r;
    TU_OK(clf_check_attention(tu_runtime(), tu_seed() + 1000 * ++n, &cs, &r));
    fprintf(stderr, "  %-78s err %.2e (tol %.0e)\n", r.detail, r.err, r.tol);
    if (!(r.err <= r.tol)) fail_msg("%s: err %.3g > tol %.3g", r.detail, r.err, r.tol);
    const char *m = strstr(r.detail, "|s|max ");
    return m ? atof(m + 7) : 0;
}

/* SmolLM2's heads: 9 query heads sharing 3 KV heads of 64. */
static clf_attn_case smol(int n_tokens, int pos0) {
    return (clf_attn_case){.n_tokens = n_tokens, .pos0 = pos0, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                           .kv_type = CLF_F32};
}

static void test_kv_write(void **state) {
    (void)state;
    static const int cases[][4] = {{1, 0, 3, 64}, {7, 5, 3, 64}, {64, 1, 2, 128}, {33, 100, 1, 64}};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            clf_check_result r;
            TU_OK(clf_check_kv_write(tu_runtime(), tu_seed() + i, t ? CLF_F16 : CLF_F32, cases[i][2], cases[i][3],
                                     cases[i][0], cases[i][1], &r));
            if (r.err != 0) fail_msg("kv_write %s: %.3g of the elements wrong", r.detail, r.err);
        }
}

/* One-shot prefill from an empty cache; n = 1 is the decode path. */
static void test_sequence_lengths(void **state) {
    (void)state;
    static const int lens[] = {1, 2, 7, 64, 129, 1000};
    for (int v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
            clf_attn_case cs = smol(lens[i], 0);
            cs.variant = VARIANTS[v];
            check_case(cs);
        }
}

/* New tokens after a cached prefix, and a prompt prefilled in chunks (each
 * chunk attends to the earlier ones through the cache): both must match the
 * one-shot reference. */
static void test_offsets_and_chunks(void **state) {
    (void)state;
    static const int cases[][3] = {/* n_tokens, pos0, chunk */
                                   {50, 77, 0}, {2, 1, 0}, {200, 0, 37}, {129, 13, 64}, {31, 0, 1}};
    for (int v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            clf_attn_case cs = smol(cases[i][0], cases[i][1]);
            cs.chunk = cases[i][2];
            cs.variant = VARIANTS[v];
            check_case(cs);
        }
}

/* Prefill over GQA 1, 3, 4 x head_dim 64, 128 x F32, F16; decode (n = 1)
 * over the same ratios and head dims with the cache types alternating (each
 * ratio is a separate decode build, and builds dominate this test's time). */
static void test_gqa_head_dims_types(void **state) {
    (void)state;
    static const int gqa[] = {1, 3, 4}, hds[] = {64, 128};
    for (int v = 0; v < 2; v++)
        for (int g = 0; g < 3; g++)
            for (int d = 0; d < 2; d++) {
                const int n_kv_head = gqa[g] == 1 ? 5 : 2;
                clf_attn_case cs = {.n_tokens = 37, .pos0 = 20, .n_head = n_kv_head * gqa[g],
                                    .n_kv_head = n_kv_head, .head_dim = hds[d], .variant = VARIANTS[v]};
                for (int t = 0; t < 2; t++) {
                    cs.kv_type = t ? CLF_F16 : CLF_F32;
                    check_case(cs);
                }
                cs.n_tokens = 1;
                cs.pos0 = 170;
                cs.kv_type = (g + d) % 2 ? CLF_F16 : CLF_F32;
                check_case(cs);
            }
}

/* Q8_0 and Q4_0 caches, read fused by every kernel (prefill in chunks,
 * decode with its splits, the fused write with RoPE, a sliding window, the
 * naive reference), against the reference over ggml's quantized K and V. */
static void test_quantized_cache(void **state) {
    (void)state;
    static const clf_type types[] = {CLF_Q8_0, CLF_Q4_0};
    for (int v = 0; v < 2; v++)
        for (int t = 0; t < 2; t++) {
            clf_attn_case cs = {.n_tokens = 37, .pos0 = 20, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                                .kv_type = types[t], .variant = VARIANTS[v], .chunk = 11};
            check_case(cs);
            cs.chunk = 0, cs.head_dim = 128, cs.n_head = 4, cs.n_kv_head = 4;
            check_case(cs);
            cs = (clf_attn_case){.n_tokens = 1, .pos0 = 600, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                                 .kv_type = types[t], .variant = VARIANTS[v]};
            check_case(cs); /* several splits */
            cs.fused = 1, cs.rope = 2, cs.n_rot = 64;
            check_case(cs);
            cs = (clf_attn_case){.n_tokens = 30, .pos0 = 50, .n_head = 4, .n_kv_head = 1, .head_dim = 256,
                                 .kv_type = types[t], .variant = VARIANTS[v], .window = 24, .chunk = 7};
            check_case(cs);
        }
    clf_attn_case naive = {.n_tokens = 9, .pos0 = 30, .n_head = 9, .n_kv_head = 3, .head_dim = 64, .kv_type = CLF_Q8_0,
                           .naive = 1};
    check_case(naive);
}

/* One split, the automatic count, and more splits than 16-key blocks (the
 * ones past the end hold no keys and must weigh nothing). */
static void test_decode_splits(void **state) {
    (void)state;
    static const int caches[] = {1, 100, 1000, 5000};
    static const int splits[] = {1, 0, 200};
    for (int v = 0; v < 2; v++)
        for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++)
            for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
                clf_attn_case cs = smol(1, caches[i] - 1);
                cs.variant = VARIANTS[v];
                cs.n_split = splits[s];
                cs.kv_type = (i + s) % 2 ? CLF_F16 : CLF_F32;
                check_case(cs);
                cs.fused = 1; /* the cache write in the decode kernel, one split's output without the reduction */
                check_case(cs);
                cs.rope = 1 + (int)(i + s) % 2; /* and RoPE there: NORM or NEOX pairs, all or half the head */
                cs.n_rot = (i + v) % 2 ? cs.head_dim : cs.head_dim / 2;
                check_case(cs);
            }
}

/* Q and K in ±7.5 give scores up to about ±80 (scale 1/8): exp must not overflow
 * and the max subtraction must hold precision. */
static void test_large_scores(void **state) {
    (void)state;
    for (int v = 0; v < 2; v++) {
        clf_attn_case cs = smol(64, 100);
        cs.variant = VARIANTS[v];
        cs.magnitude = 7.5f;
        assert_true(check_case(cs) > 60);
        cs = smol(1, 700);
        cs.variant = VARIANTS[v];
        cs.magnitude = 7.5f;
        cs.kv_type = CLF_F16;
        assert_true(check_case(cs) > 60);
    }
    clf_attn_case cs = smol(40, 3);
    cs.naive = 1;
    cs.magnitude = 7.5f;
    assert_true(check_case(cs) > 60);
}

static void test_naive(void **state) {
    (void)state;
    static const int cases[][2] = {{1, 0}, {7, 0}, {129, 0}, {30, 45}, {1, 99}};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            clf_attn_case cs = smol(cases[i][0], cases[i][1]);
            cs.naive = 1;
            cs.kv_type = t ? CLF_F16 : CLF_F32;
            check_case(cs);
        }
    check_case((clf_attn_case){.n_tokens = 20, .pos0 = 3, .n_head = 8, .n_kv_head = 2, .head_dim = 128,
                               .kv_type = CLF_F16, .naive = 1});
}

/* Sliding windows (Gemma 3's local layers): no effect when wider than the
 * span, a window of 1 (each query sees itself), windows that start inside
 * a key block, chunked prefill and decode through a ring of slots shorter
 * than the positions (wrapping several times), GQA 4 with heads of 256. */
static void test_sliding_window(void **state) {
    (void)state;
    for (int v = 0; v < 2; v++) {
        clf_attn_case cs = smol(40, 10);
        cs.variant = VARIANTS[v];
        cs.window = 1000;
        check_case(cs);
        cs.window = 1;
        check_case(cs);
        cs = smol(100, 0); /* one prefill, the window from the middle of blocks */
        cs.variant = VARIANTS[v];
        cs.window = 21;
        check_case(cs);
        cs.chunk = 11; /* a ring of 32 slots: 11 + 21 - 1 fit */
        cs.n_slots = 32;
        check_case(cs);
        cs = (clf_attn_case){.n_tokens = 70, .pos0 = 130, .n_head = 4, .n_kv_head = 1, .head_dim = 256,
                             .kv_type = CLF_F16, .variant = VARIANTS[v], .chunk = 33, .window = 24, .n_slots = 64};
        check_case(cs);
        /* decode: the window's first key in mid-block, across the ring's end, several split counts */
        static const int splits[] = {1, 0, 7};
        for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
            cs = smol(1, 300 + 37 * (int)i);
            cs.variant = VARIANTS[v];
            cs.window = 45 + (int)i;
            cs.n_slots = 64;
            cs.n_split = splits[i];
            cs.kv_type = i % 2 ? CLF_F16 : CLF_F32;
            check_case(cs);
            cs.fused = 1; /* the fused cache write into a ring, across its end */
            check_case(cs);
            cs.rope = 2 - (int)i % 2;
            cs.n_rot = cs.head_dim - 2 * (int)i; /* 64, 62, 60: a partial group of 8 pairs */
            check_case(cs);
        }
    }
    check_case((clf_attn_case){.n_tokens = 30, .pos0 = 50, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                               .kv_type = CLF_F32, .naive = 1, .window = 13, .chunk = 7, .n_slots = 32});
}

/* Attention sinks (gpt-oss: a logit a head in every row's denominator),
 * with YaRN RoPE in the fused decode,
 * both kernel shapes: prefill one-shot and in chunks, GQA 1 and 8 (gpt-oss's
 * 64 heads over 8), decode with one, the automatic and more splits than
 * blocks (the sink counted once), the fused write with RoPE, a quantized
 * cache, the naive kernels; and at a sliding window's edge (gpt-oss's
 * window of 128 over a ring, the window's first key in mid-block, a window
 * of 1: the query's own key and the sink), paged rows of several
 * sequences. */
static void test_sinks(void **state) {
    (void)state;
    for (int v = 0; v < 2; v++) {
        clf_attn_case cs = smol(37, 0);
        cs.variant = VARIANTS[v];
        cs.sinks = 1;
        check_case(cs);
        cs.pos0 = 20, cs.chunk = 11, cs.kv_type = CLF_F16;
        check_case(cs);
        cs = (clf_attn_case){.n_tokens = 19, .pos0 = 5, .n_head = 8, .n_kv_head = 1, .head_dim = 64,
                             .kv_type = CLF_F32, .variant = VARIANTS[v], .sinks = 1};
        check_case(cs);
        cs.n_head = 5, cs.n_kv_head = 5, cs.head_dim = 128, cs.kv_type = CLF_Q8_0;
        check_case(cs);
        static const int splits[] = {1, 0, 200};
        for (int i = 0; i < 3; i++) {
            cs = smol(1, 150 + 61 * i);
            cs.variant = VARIANTS[v];
            cs.n_split = splits[i];
            cs.sinks = 1;
            check_case(cs);
            cs.fused = 1, cs.rope = 1 + i % 2, cs.n_rot = 64;
            check_case(cs);
        }
        /* the window's edge: gpt-oss's 128 over a ring, prefill in chunks then decode across the ring's end */
        cs = (clf_attn_case){.n_tokens = 100, .pos0 = 170, .n_head = 8, .n_kv_head = 1, .head_dim = 64,
                             .kv_type = CLF_F16, .variant = VARIANTS[v], .chunk = 33, .window = 128, .n_slots = 192,
                             .sinks = 1};
        check_case(cs);
        cs.n_tokens = 3, cs.chunk = 1, cs.fused = 1, cs.rope = 2, cs.n_rot = 64, cs.n_split = 3;
        check_case(cs);
        cs = smol(40, 10); /* a window of 1 */
        cs.variant = VARIANTS[v], cs.window = 1, cs.sinks = 1;
        check_case(cs);
        cs = smol(100, 0); /* the window's first key inside blocks, a ring of 32 */
        cs.variant = VARIANTS[v], cs.window = 21, cs.chunk = 11, cs.n_slots = 32, cs.sinks = 1;
        check_case(cs);
        cs = smol(1, 300); /* decode: the window's first key in mid-block */
        cs.variant = VARIANTS[v], cs.window = 45, cs.n_slots = 64, cs.n_split = 2, cs.sinks = 1;
        check_case(cs);
        /* YaRN RoPE in the fused decode (gpt-oss's factor 32 over all of a head, and 4 over half of it) */
        cs = smol(3, 500);
        cs.variant = VARIANTS[v], cs.chunk = 1, cs.fused = 1, cs.rope = 2, cs.n_rot = 64, cs.yarn = 32.0f;
        cs.n_split = 3, cs.sinks = 1;
        check_case(cs);
        cs.rope = 1, cs.n_rot = 32, cs.yarn = 4.0f, cs.n_split = 0, cs.sinks = 0;
        check_case(cs);
        clf_check_result r;
        TU_OK(clf_check_attention_rows(tu_runtime(), tu_seed() + (uint64_t)v, CLF_F16, 1 + v, VARIANTS[v], 1, &r));
        fprintf(stderr, "  %-78s err %.2e (tol %.0e)\n", r.detail, r.err, r.tol);
        if (!(r.err <= r.tol)) fail_msg("%s: err %.3g > tol %.3g", r.detail, r.err, r.tol);
    }
    check_case((clf_attn_case){.n_tokens = 30, .pos0 = 50, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                               .kv_type = CLF_F32, .naive = 1, .window = 13, .chunk = 7, .n_slots = 32, .sinks = 1});
    check_case((clf_attn_case){.n_tokens = 1, .pos0 = 99, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                               .kv_type = CLF_F16, .naive = 1, .sinks = 1});
}

static void test_bad_arguments(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    clf_kv_cache c;
    assert_int_equal(clf_kv_cache_create(rt, CLF_Q4_1, 1, 3, 64, 16, 0, &c), CLF_ERR_ARG);
    assert_int_equal(clf_kv_cache_create(rt, CLF_Q8_0, 1, 3, 48, 16, 0, &c), CLF_ERR_ARG); /* not whole blocks */
    assert_int_equal(clf_kv_cache_create(rt, CLF_F32, 1, 3, 72, 16, 0, &c), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "head_dim 72"));
    assert_int_equal(clf_kv_cache_create(rt, CLF_F32, 0, 3, 64, 16, 0, &c), CLF_ERR_ARG);

    TU_OK(clf_kv_cache_create(rt, CLF_F32, 2, 3, 64, 16, 0, &c));
    clf_tensor qkv, out;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 15 * 64, 16, &qkv));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 9 * 64, 16, &out));
    const clf_rows q = {&qkv, 0, 15 * 64}, k = {&qkv, 9 * 64, 15 * 64}, v = {&qkv, 12 * 64, 15 * 64};
    TU_OK(clf_kv_write(rt, &c, 1, k, v, 4, 0));
    TU_OK(clf_finish(rt));
    assert_int_equal(clf_kv_write(rt, &c, 1, k, v, 4, 13), CLF_ERR_CONTEXT);
    assert_int_equal(clf_kv_write(rt, &c, 2, k, v, 4, 0), CLF_ERR_ARG);
    assert_int_equal(clf_attention(rt, &c, 1, q, 9, 17, 0, 0.125f, &out), CLF_ERR_CONTEXT);
    assert_int_equal(clf_attention(rt, &c, 1, q, 8, 4, 0, 0.125f, &out), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "multiple"));
    const clf_rows q_wide = {&qkv, 7 * 64, 15 * 64}; /* 9 heads from column 7*64 overrun the row */
    assert_int_equal(clf_attention(rt, &c, 1, q_wide, 9, 4, 0, 0.125f, &out), CLF_ERR_ARG);
    clf_tensor small = clf_tensor_rows(&out, 0, 2);
    assert_int_equal(clf_attention(rt, &c, 1, q, 9, 4, 0, 0.125f, &small), CLF_ERR_ARG);
    assert_int_equal(clf_attention_naive(rt, &c, 1, q, 9, 4, -1, 0.125f, &out), CLF_ERR_ARG);
    /* sinks: one F32 logit a query head */
    clf_tensor sk8 = clf_tensor_rows(&qkv, 15, 1); /* a row the queries do not read */
    sk8.ne[0] = 8;
    assert_int_equal(clf_attention_ex(rt, &c, 1, q, 9, 4, 0, 0.125f, &sk8, &out), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "sinks"));
    assert_int_equal(clf_attention_naive_ex(rt, &c, 1, q, 9, 4, 0, 0.125f, &sk8, &out), CLF_ERR_ARG);
    sk8.ne[0] = 9;
    TU_OK(clf_attention_ex(rt, &c, 1, q, 9, 4, 0, 0.125f, &sk8, &out));
    TU_OK(clf_finish(rt));
    clf_kv_cache_free(&c);
    /* a ring: chunks that leave the window's keys in their slots only */
    assert_int_equal(clf_kv_cache_create(rt, CLF_F32, 1, 3, 64, 32, -1, &c), CLF_ERR_ARG);
    TU_OK(clf_kv_cache_create(rt, CLF_F32, 1, 3, 64, 32, 20, &c));
    TU_OK(clf_kv_write(rt, &c, 0, k, v, 13, 100)); /* 13 + 20 - 1 = 32 */
    assert_int_equal(clf_kv_write(rt, &c, 0, k, v, 14, 100), CLF_ERR_CONTEXT);
    assert_non_null(strstr(clf_last_error(), "ring"));
    TU_OK(clf_kv_write(rt, &c, 0, k, v, 16, 0)); /* below the slots: any chunk */
    clf_kv_cache_free(&c);
    TU_OK(clf_kv_cache_create(rt, CLF_F32, 1, 3, 64, 40, 20, &c)); /* not a multiple of 32: no wrapping */
    TU_OK(clf_kv_write(rt, &c, 0, k, v, 4, 36));
    assert_int_equal(clf_kv_write(rt, &c, 0, k, v, 4, 37), CLF_ERR_CONTEXT);
    TU_OK(clf_finish(rt));
    clf_tensor_free(&qkv);
    clf_tensor_free(&out);
    clf_kv_cache_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kv_write),         cmocka_unit_test(test_sequence_lengths),
        cmocka_unit_test(test_offsets_and_chunks), cmocka_unit_test(test_gqa_head_dims_types),
        cmocka_unit_test(test_decode_splits),    cmocka_unit_test(test_quantized_cache),
        cmocka_unit_test(test_large_scores),     cmocka_unit_test(test_naive),
        cmocka_unit_test(test_sliding_window),   cmocka_unit_test(test_sinks),
        cmocka_unit_test(test_bad_arguments),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

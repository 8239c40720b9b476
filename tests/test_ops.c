/* The small kernels (host/compute/ops.h) against their double-precision C
 * references (tools/check/check_ops.c) over a sweep of odd and real shapes, and
 * the launchers' argument validation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "check_ops.h"
#include "testutil.h"

/* Lengths: 1, small odd primes, one short of and at the SmolLM2 width, a
 * length that is not a multiple of 8, 16 or 32. */
static const int LENGTHS[] = {1, 3, 37, 575, 576, 1000};
#define NLEN (int)(sizeof LENGTHS / sizeof LENGTHS[0])

static void expect_pass(clf_status st, const clf_check_result *r, const char *what) {
    if (st != CLF_OK) fail_msg("%s: %s: %s", what, clf_status_name(st), clf_last_error());
    if (!(r->err <= r->tol))
        fail_msg("%s [%s]: error %.3e > tolerance %.3e (replay: CLINFER_SEED=%llu)", what, r->detail, r->err, r->tol,
                 (unsigned long long)tu_seed());
}

static void test_get_rows_every_type(void **state) {
    (void)state;
    const clf_type *types = clf_type_list; /* every type of the table */
    for (size_t t = 0; t < CLF_NTYPES; t++) {
        int block = clf_type_get(types[t])->block;
        /* widths in whole blocks (K-quants: 1 and 3 super-blocks); F32/F16/BF16 also at widths that leave a
         * partial run of 32 */
        const int widths[] = {32, 96, 576, 1, 37, 575}, kwidths[] = {256, 768};
        int nw = block == 1 ? 6 : block == 32 ? 3 : 2;
        for (int w = 0; w < nw; w++) {
            const int shapes[][2] = {{1, 1}, {3, 5}, {257, 13}}; /* table rows, ids */
            for (int s = 0; s < 3; s++) {
                clf_check_result r;
                expect_pass(clf_check_get_rows(tu_runtime(), tu_seed() + (uint64_t)(100 * t + 10 * w + s), types[t],
                                               block == 256 ? kwidths[w] : widths[w], shapes[s][0], shapes[s][1], &r),
                            &r, "get_rows");
            }
        }
    }
}

static void test_get_rows_embedding_shape(void **state) {
    (void)state;
    /* the SmolLM2 token_embd table: 49152 x 576 in Q8_0, a prompt of 17 ids */
    clf_check_result r;
    expect_pass(clf_check_get_rows(tu_runtime(), tu_seed(), CLF_Q8_0, 576, 49152, 17, &r), &r, "get_rows embd");
}

static void test_f16_every_bit_pattern(void **state) {
    (void)state;
    clf_check_result r;
    expect_pass(clf_check_f16_bits(tu_runtime(), tu_seed(), &r), &r, "f16 bits");
}

static void test_rmsnorm(void **state) {
    (void)state;
    for (int i = 0; i < NLEN; i++)
        for (int rows = 1; rows <= 3; rows += 2)
            for (int mode = 0; mode < 4; mode++) { /* in place or not, accumulating or not */
                clf_check_result r;
                expect_pass(clf_check_rmsnorm(tu_runtime(), tu_seed() + (uint64_t)(i * 8 + rows + mode), rows,
                                              LENGTHS[i], mode & 1, mode >> 1, &r),
                            &r, "rmsnorm");
            }
    clf_check_result r;
    expect_pass(clf_check_rmsnorm(tu_runtime(), tu_seed(), 512, 576, 1, 0, &r), &r, "rmsnorm prefill");
}

static void test_rope(void **state) {
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        clf_rope_mode m = mode ? CLF_ROPE_NEOX : CLF_ROPE_NORM;
        const clf_rope_case cases[] = {
            /* tokens, stride, col0, heads, head_dim, n_rot, pos0, base */
            {1, 64, 0, 1, 64, 64, 0, 10000.0f, m, 0, 0},     /* position 0: the identity */
            {7, 576, 0, 9, 64, 64, 3, 100000.0f, m, 0, 0},   /* SmolLM2 Q alone */
            {5, 960, 0, 12, 64, 64, 250, 100000.0f, m, 0, 0}, /* Q and K of a fused QKV row, one launch */
            {4, 960, 576, 3, 64, 64, 1, 100000.0f, m, 0, 0}, /* K alone inside the fused row */
            {3, 960, 0, 9, 64, 32, 11, 10000.0f, m, 0, 0},   /* n_rot < head_dim */
            {2, 37, 5, 1, 6, 6, 9, 500.0f, m, 0, 0},         /* 3 pairs: the tail path only */
            {9, 131, 3, 3, 40, 36, 2, 10000.0f, m, 0, 0},    /* 18 pairs: 16 vectorized + a tail */
            {1, 128, 0, 2, 64, 64, 4000, 100000.0f, m, 0, 0}, /* a far position */
            {64, 960, 0, 12, 64, 64, 0, 100000.0f, m, 0, 0}, /* a prefill chunk */
            /* Llama 3.1 frequency factors, linear scaling, both, with a tail; Gemma 3's heads of 256 */
            {6, 3072, 0, 24, 128, 128, 900, 500000.0f, m, 0, 1},
            {3, 960, 0, 12, 64, 64, 77, 10000.0f, m, 0.125f, 0},
            {4, 131, 3, 3, 40, 36, 2000, 10000.0f, m, 0.5f, 1},
            {5, 1536, 0, 5, 256, 256, 511, 1000000.0f, m, 0, 0},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            clf_check_result r;
            expect_pass(clf_check_rope(tu_runtime(), tu_seed() + i, &cases[i], &r), &r, "rope");
        }
        /* YaRN against llama.cpp's rope_yarn: gpt-oss's (factor 32 over 4096, base 150000, its 64 Q and 8 K
         * heads of 64 in a fused row) at position 0 (cos, sin scaled by mscale alone), past the original
         * context, a prefill chunk; a tail with frequency factors, a tail alone, a factor below 1 */
        const struct {
            clf_rope_case c;
            float factor;
            int ctx;
        } yarn[] = {
            {{1, 5120, 0, 72, 64, 64, 0, 150000.0f, m, 0, 0}, 32.0f, 4096},
            {{3, 5120, 0, 72, 64, 64, 5000, 150000.0f, m, 0, 0}, 32.0f, 4096},
            {{64, 5120, 0, 72, 64, 64, 100, 150000.0f, m, 0, 0}, 32.0f, 4096},
            {{9, 131, 3, 3, 40, 36, 2000, 10000.0f, m, 0, 1}, 4.0f, 256},
            {{2, 37, 5, 1, 6, 6, 9, 500.0f, m, 0, 0}, 2.0f, 64},
            {{3, 960, 0, 12, 64, 64, 77, 10000.0f, m, 0, 0}, 0.5f, 128},
        };
        for (size_t i = 0; i < sizeof yarn / sizeof yarn[0]; i++) {
            clf_check_result r;
            expect_pass(clf_check_rope_yarn(tu_runtime(), tu_seed() + 100 + i, &yarn[i].c, yarn[i].factor, yarn[i].ctx,
                                            &r),
                        &r, "rope yarn");
        }
    }
}

/* QK-norm: Q's heads at the start of a fused row, K's after them, Gemma 3's
 * heads of 256 and Qwen3's of 128, odd heads and strides. */
static void test_rmsnorm_heads(void **state) {
    (void)state;
    const int cases[][6] = {/* tokens, stride, col0, head_dim, heads with the first weight, with the second */
                            {1, 1536, 0, 256, 4, 1}, {9, 1536, 1024, 256, 1, 0}, {5, 4096, 0, 128, 16, 8},
                            {3, 50, 7, 13, 1, 2},    {2, 8, 0, 8, 1, 0},         {64, 960, 0, 64, 9, 3}};
    for (int ops = 0; ops < 2; ops++) {
        tu_tune(ops ? "ops=gpu" : NULL);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            clf_check_result r;
            expect_pass(clf_check_rmsnorm_heads(tu_runtime(), tu_seed() + i, cases[i][0], cases[i][1], cases[i][2],
                                                cases[i][3], cases[i][4], cases[i][5], &r),
                        &r, ops ? "rmsnorm_heads (gpu variant)" : "rmsnorm_heads");
        }
    }
    tu_tune(NULL);
}

/* SwiGLU, GeGLU and gpt-oss's clamped SwiGLU (its clamps on both halves
 * reached: gate|up in ±12), through clf_glu, and clf_glu_xq where the
 * width is whole blocks (576, 2048: the same y, its int8 form
 * clf_quantize_x's). */
static void test_glu(void **state) {
    (void)state;
    const int ffs[] = {1, 3, 37, 575, 576, 2048};
    static const char *const names[] = {"swiglu", "geglu", "swiglu_oai"};
    for (int act = 0; act < 3; act++)
        for (int i = 0; i < 6; i++)
            for (int rows = 1; rows <= 5; rows += 4) {
                clf_check_result r;
                expect_pass(clf_check_glu(tu_runtime(), tu_seed() + (uint64_t)(i * 8 + rows), (clf_glu_act)act, rows,
                                          ffs[i], &r),
                            &r, names[act]);
            }
}

/* Activations quantized once by the kernel that produces them (the norm,
 * SwiGLU, or a quantize launch): odd row counts, part of the rows quantized,
 * row lengths of one block up to SmolLM2's n_ff, every row-reduction shape. */
static void test_quantized_activations(void **state) {
    (void)state;
    const int ns[] = {32, 96, 576, 1536};
    for (int shape = 0; shape < 2; shape++) {
        tu_tune(shape ? "ops=gpu" : NULL);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < 4; i++)
                for (int rows = 1; rows <= 7; rows += 3) {
                    clf_check_result r;
                    expect_pass(clf_check_xq(tu_runtime(), tu_seed() + (uint64_t)(i * 16 + rows + 100 * p),
                                             (clf_xq_producer)p, rows, rows > 1 ? rows - 1 : 1, ns[i], &r),
                                &r, "quantized activation");
                }
    }
    tu_tune(NULL);
}

static void test_scale(void **state) {
    (void)state;
    for (int i = 0; i < NLEN; i++) {
        clf_check_result r;
        expect_pass(clf_check_scale(tu_runtime(), tu_seed() + (uint64_t)i, 1 + i % 3, LENGTHS[i], i % 2, &r), &r,
                    "scale");
    }
}

static void test_add(void **state) {
    (void)state;
    for (int i = 0; i < NLEN; i++)
        for (int alias = 0; alias < 3; alias++) {
            clf_check_result r;
            expect_pass(clf_check_add(tu_runtime(), tu_seed() + (uint64_t)(i * 4 + alias), 1 + alias, LENGTHS[i],
                                      alias, &r),
                        &r, "add");
        }
}

static void test_add_rows(void **state) {
    (void)state;
    for (int i = 0; i < NLEN; i++) {
        clf_check_result r;
        expect_pass(clf_check_add_rows(tu_runtime(), tu_seed() + (uint64_t)i, 1 + i % 3, LENGTHS[i], &r), &r,
                    "add_rows");
    }
}

static void test_softmax(void **state) {
    (void)state;
    for (int i = 0; i < NLEN; i++) {
        clf_check_result r;
        expect_pass(clf_check_softmax(tu_runtime(), tu_seed() + (uint64_t)i, 5, LENGTHS[i], &r), &r, "softmax");
    }
    clf_check_result r;
    expect_pass(clf_check_softmax(tu_runtime(), tu_seed(), 2, 49152, &r), &r, "softmax vocab");
}

/* The row reductions with a work-group of 64 lanes per row, as a GPU runs
 * them: the local-memory tree and the strided loops on this device too. */
static void test_row_reductions_gpu_variant(void **state) {
    (void)state;
    tu_tune("ops=gpu");
    for (int i = 0; i < NLEN; i++) {
        clf_check_result r;
        expect_pass(clf_check_rmsnorm(tu_runtime(), tu_seed() + (uint64_t)i, 3, LENGTHS[i], i % 2, i % 3 == 0, &r), &r,
                    "rmsnorm (gpu variant)");
        expect_pass(clf_check_softmax(tu_runtime(), tu_seed() + (uint64_t)i, 3, LENGTHS[i], &r), &r,
                    "softmax (gpu variant)");
    }
    clf_check_result r;
    expect_pass(clf_check_softmax(tu_runtime(), tu_seed(), 1, 49152, &r), &r, "softmax vocab (gpu variant)");
    tu_tune(NULL);
}

static void expect_arg_error(clf_status st, const char *needle) {
    assert_int_equal(st, CLF_ERR_ARG);
    if (!strstr(clf_last_error(), needle)) fail_msg("message '%s' lacks '%s'", clf_last_error(), needle);
}

static void test_bad_arguments(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    clf_tensor a, b, q, h;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 64, 2, &a));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 64, 3, &b));
    TU_OK(clf_tensor_alloc(rt, CLF_Q8_0, 64, 2, &q));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 32, 2, &h));
    expect_arg_error(clf_add(rt, &a, &b, &a), "shapes differ");
    expect_arg_error(clf_add(rt, &a, &q, &a), "must be F32");
    expect_arg_error(clf_rmsnorm(rt, &a, &b, 1e-5f, &a, 0), "rmsnorm");
    expect_arg_error(clf_glu(rt, CLF_GLU_SILU, &a, &a), "glu");
    expect_arg_error(clf_glu(rt, (clf_glu_act)7, &a, &h), "activation");
    expect_arg_error(clf_scale(rt, &a, 2.0f, &b), "shapes differ");
    /* rmsnorm_heads: heads past the row, a weight not head_dim long */
    expect_arg_error(clf_rmsnorm_heads(rt, &a, 2, 64, 8, 32, 2, &h, 0, NULL, 1e-6f), "exceed");
    expect_arg_error(clf_rmsnorm_heads(rt, &a, 2, 64, 0, 16, 2, &h, 0, NULL, 1e-6f), "weights");
    expect_arg_error(clf_rmsnorm_heads(rt, &a, 2, 64, 0, 32, 1, &h, 1, NULL, 1e-6f), "a weight for each");
    expect_arg_error(clf_add_rows(rt, &a, &b), "bias");
    expect_arg_error(clf_dequantize_dev(rt, &q, &b), "dequantize");
    expect_arg_error(clf_get_rows(rt, &q, NULL, 1, &a), "get_rows");
    /* rope: odd n_rot, n_rot past head_dim, heads past the row, rows past the tensor, bad mode */
    const clf_rope_params odd = {.mode = CLF_ROPE_NORM, .n_rot = 63, .base = 1e4f, .freq_scale = 1},
                          wide = {.mode = CLF_ROPE_NORM, .n_rot = 34, .base = 1e4f, .freq_scale = 1};
    const clf_rope_params ok = {.mode = CLF_ROPE_NORM, .n_rot = 64, .base = 1e4f, .freq_scale = 1},
                          mode = {.mode = (clf_rope_mode)1, .n_rot = 64, .base = 1e4f, .freq_scale = 1};
    const clf_rope_params unscaled = {.mode = CLF_ROPE_NORM, .n_rot = 64, .base = 1e4f, .freq_scale = 0},
                          factors = {.mode = CLF_ROPE_NORM, .n_rot = 64, .base = 1e4f, .freq_scale = 1, .factors = &h};
    expect_arg_error(clf_rope(rt, &a, 2, 64, 0, 1, 64, 0, &odd), "rope");
    expect_arg_error(clf_rope(rt, &a, 2, 64, 0, 1, 32, 0, &wide), "rope");
    expect_arg_error(clf_rope(rt, &a, 2, 64, 8, 1, 64, 0, &ok), "exceed");
    expect_arg_error(clf_rope(rt, &a, 3, 64, 0, 1, 64, 0, &ok), "exceed");
    expect_arg_error(clf_rope(rt, &a, 1, 64, 0, 1, 64, 0, &mode), "mode");
    expect_arg_error(clf_rope(rt, &a, 1, 64, 0, 1, 64, 0, &unscaled), "freq_scale");
    expect_arg_error(clf_rope(rt, &a, 1, 64, 0, 1, 64, 0, &factors), "frequency factors"); /* 64 for 32 pairs */
    /* the matching shapes are accepted: gate|up 64 wide, output 32 */
    TU_OK(clf_glu(rt, CLF_GLU_GELU_TANH, &a, &h));
    TU_OK(clf_rope(rt, &a, 2, 64, 0, 1, 64, 0, &ok));
    clf_rope_params y = ok;
    expect_arg_error(clf_rope_yarn(&y, 0.0f, 4096, 1.0f, CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW), "YaRN");
    expect_arg_error(clf_rope_yarn(&y, 32.0f, 0, 1.0f, CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW), "YaRN");
    TU_OK(clf_rope_yarn(&y, 32.0f, 4096, 1.0f, CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW));
    assert_true(clf_rope_yarn_valid(&y) && clf_rope_yarn_valid(&ok));
    y.mscale = 0;
    expect_arg_error(clf_rope(rt, &a, 2, 64, 0, 1, 64, 0, &y), "YaRN");
    /* a value that is not finite is refused by the one check clf_rope and the
     * fused decode RoPE share (the decode took a NaN ramp end) */
    y.mscale = 1.0f;
    y.corr_hi = NAN;
    assert_false(clf_rope_yarn_valid(&y));
    expect_arg_error(clf_rope(rt, &a, 2, 64, 0, 1, 64, 0, &y), "YaRN");
    y.corr_hi = 8.0f, y.ext_factor = INFINITY;
    assert_false(clf_rope_yarn_valid(&y));
    TU_OK(clf_finish(rt));
    clf_tensor_free(&a);
    clf_tensor_free(&b);
    clf_tensor_free(&q);
    clf_tensor_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_rows_every_type),
        cmocka_unit_test(test_get_rows_embedding_shape),
        cmocka_unit_test(test_f16_every_bit_pattern),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rmsnorm_heads),
        cmocka_unit_test(test_glu),
        cmocka_unit_test(test_quantized_activations),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_add_rows),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_row_reductions_gpu_variant),
        cmocka_unit_test(test_bad_arguments),
    };
    tu_seed();
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

/* Matrix products: every weight type through GEMV, skinny and GEMM paths of
 * every kernel variant (cpu, cpu-portable, gpu: forced through
 * the runtime's tuning, so all run on any device) and the CLBlast backend,
 * against dequantize-then-multiply in double (tools/check/check_matmul.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "check_matmul.h"
#include "clblast.h"
#include "ops.h"
#include "testutil.h"

/* every type of the table (cl/types.cl) */
#define types clf_type_list
enum { NTYPES = CLF_NTYPES };

static int is_float(clf_type t) { return clf_type_get(t)->block == 1; }

/* The types with a kernel of form f in the cpu (panels) or gpu family, into
 * qt; returns their count. */
static int types_with(int panels, clf_mm_form f, clf_type *qt) {
    int n = 0;
    char name[48];
    for (int t = 0; t < NTYPES; t++)
        if (clf_matmul_kernel_name(types[t], panels, f, name, sizeof name)) qt[n++] = types[t];
    return n;
}

/* cols rounded up to whole blocks: K-quants take multiples of 256 */
static void check(clf_runtime *rt, clf_type type, int rows, int cols, int n, int accumulate) {
    const int block = clf_type_get(type)->block;
    cols = (cols + block - 1) / block * block;
    clf_check_result r;
    TU_OK(clf_check_matmul(rt, tu_seed(), type, rows, cols, n, accumulate, &r));
    if (!(r.err <= r.tol)) fail_msg("%s: rel err %.3g > tol %.3g", r.detail, r.err, r.tol);
}

/* Odd rows (1, primes, not multiples of 32) and columns (odd for F32/F16,
 * whole blocks otherwise) through every path: GEMV (1), skinny (2..16),
 * GEMM (17+, with partial token tiles). */
static void sweep_small(clf_runtime *rt) {
    static const int ns[] = {1, 2, 5, 7, 13, 16, 17, 67, 129};
    static const int rows[] = {1, 37, 97};
    static const int fcols[] = {33, 1001, 64}, qcols[] = {96, 160, 576}, kcols[] = {256, 512, 768};
    int i = 0;
    for (int t = 0; t < NTYPES; t++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (int s = 0; s < 3; s++, i++)
                check(rt, types[t], rows[s], is_float(types[t]) ? fcols[s] : clf_type_get(types[t])->block == 32 ? qcols[s] : kcols[s],
                      ns[ni], i % 2);
}

/* SmolLM2-135M's products: Q, K|V, gate/up, down; decode, skinny, prefill. */
static void sweep_model(clf_runtime *rt, const int *ns, int nn) {
    static const int shapes[][2] = {{576, 576}, {576, 192}, {576, 1536}, {1536, 576}}; /* in, out */
    int i = 0;
    for (int t = 0; t < NTYPES; t++)
        for (int s = 0; s < 4; s++)
            for (int ni = 0; ni < nn; ni++, i++) check(rt, types[t], shapes[s][1], shapes[s][0], ns[ni], i % 2);
}

static void with_variant(const char *v) {
    char a[64];
    snprintf(a, sizeof a, "matmul=%s", v ? v : "");
    tu_tune(v ? a : NULL);
}

/* The cpu variant at each int8 width this device runs, widest first, as
 * tunings ("matmul=cpu int8_width=512"): the int8 tests run at each, so a
 * suite on an AVX-512 machine checks the AVX2 kernels too. 0 where the
 * device has no int8 products. */
static int int8_widths(const char *w[2]) {
    clf_runtime *rt = tu_runtime();
    static const char *all[] = {"matmul=cpu int8_width=512", "matmul=cpu int8_width=256"};
    int n = 0, last = -1;
    for (int i = 0; i < 2; i++) {
        tu_tune(all[i]);
        if (rt->tune.int8_gemv && rt->tune.int8_width != last) w[n++] = all[i], last = rt->tune.int8_width;
    }
    tu_tune(NULL);
    return n;
}

static void test_default_variant(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    with_variant(NULL);
    sweep_small(rt);
    static const int ns[] = {1, 7, 64};
    sweep_model(rt, ns, 3);
}

static void test_head_gemv(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    with_variant(NULL);
    for (int t = 0; t < NTYPES; t++) check(rt, types[t], 49152, 576, 1, t % 2);
}

/* The int8 widths this device does not choose by itself (AVX2 on an
 * AVX-512 CPU), forced, against the reference. */
static void test_int8_other_widths(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    const char *w[2] = {NULL, NULL};
    const int nw = int8_widths(w);
    if (nw < 2) TU_SKIP_CAP("this device runs %s int8 width: none other to force", nw ? "one" : "no");
    static const int ns[] = {1, 7, 64};
    for (int i = 1; i < nw; i++) {
        tu_tune(w[i]);
        print_message("  %s\n", w[i]);
        sweep_small(rt);
        sweep_model(rt, ns, 3);
        char t[96]; /* and its float GEMM, whose IQ4_NL grid lookup is width-specific too */
        snprintf(t, sizeof t, "%s int8_gemm=0", w[i]);
        tu_tune(t);
        sweep_small(rt);
    }
    tu_tune(NULL);
}

/* The variants this device does not choose by itself, forced. */
static void test_other_variants(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    /* the cpu panels on float activations too: what a CPU without x86 int8 kernels runs */
    static const char *variants[] = {"cpu", "cpu int8_gemv=0", "cpu-portable", "gpu"};
    enum { NV = sizeof variants / sizeof variants[0] };
    static const int ns[] = {1, 16, 64};
    char done[NV + 1][48] = {""};
    with_variant(NULL);
    snprintf(done[0], sizeof done[0], "%s %d", clf_matmul_variant(rt), rt->tune.int8_gemv);
    for (int v = 0; v < NV; v++) {
        with_variant(variants[v]);
        char got[48]; /* "cpu" is "cpu-portable" where clang's __fp16 is not known */
        snprintf(got, sizeof got, "%s %d", clf_matmul_variant(rt), rt->tune.int8_gemv);
        int seen = 0;
        for (int i = 0; i <= v; i++) seen |= !strcmp(done[i], got);
        if (seen) continue;
        snprintf(done[v + 1], sizeof done[v + 1], "%s", got);
        sweep_small(rt);
        sweep_model(rt, ns, 3);
    }
    with_variant(NULL);
}

/* CLBlast serves n > 1 from weights dequantized by our own kernels (from
 * either layout): a second, independent product. */
static void test_clblast_backend(void **state) {
    (void)state;
    if (!clf_clblast_available()) TU_SKIP("built without CLINFER_CLBLAST");
    clf_runtime *rt = tu_runtime();
    clf_matmul_use_clblast(rt, 1);
    for (int v = 0; v < 2; v++) {
        with_variant(v ? "gpu" : "cpu");
        for (int t = 0; t < NTYPES; t++) {
            const int f = is_float(types[t]);
            check(rt, types[t], 97, f ? 1001 : 160, 17, 1);
            check(rt, types[t], 37, f ? 33 : 96, 129, 0);
            check(rt, types[t], 1536, 576, 64, t % 2);
        }
    }
    clf_matmul_use_clblast(rt, 0);
    with_variant(NULL);
}

/* Every finite half through the F16 kernels, exactly: X rows are one-hot, so
 * Y[m, r] = W[r, m] with no rounding. Covers zeros, subnormals, both half
 * conversions (clang __fp16 and the portable bit recipe), GEMV and GEMM. */
static void test_f16_every_half(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { COLS = 32, ROWS = 63488 / COLS }; /* the 2 · 31 · 1024 halves with exponent < 31 */
    uint16_t *w = malloc(ROWS * COLS * sizeof *w);
    float *x = calloc(COLS * COLS, sizeof *x), *y = malloc(ROWS * COLS * sizeof *y);
    assert_non_null(w);
    assert_non_null(x);
    assert_non_null(y);
    int i = 0;
    for (uint32_t h = 0; h < 65536; h++)
        if ((h & 0x7c00) != 0x7c00) w[i++] = (uint16_t)h;
    assert_int_equal(i, ROWS * COLS);
    for (int m = 0; m < COLS; m++) x[m * COLS + m] = 1.0f;
    static const char *variants[] = {"cpu", "cpu-portable", "gpu"};
    for (int v = 0; v < 3; v++) {
        with_variant(variants[v]);
        clf_weight W;
        TU_OK(clf_weight_upload(rt, CLF_F16, ROWS, COLS, w, &W));
        for (int n = 1; n <= COLS; n += COLS - 1) { /* GEMV with x = e0, then GEMM with all 32 */
            clf_tensor X, Y;
            TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, n, &X));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, ROWS, n, &Y));
            TU_OK(clf_tensor_upload(rt, &X, x, (size_t)n * COLS * sizeof *x));
            TU_OK(clf_tensor_fill(rt, &Y, 0xff));
            TU_OK(clf_matmul(rt, &W, &X, &Y, 0));
            TU_OK(clf_tensor_download(rt, &Y, y, (size_t)n * ROWS * sizeof *y));
            for (int m = 0; m < n; m++)
                for (int r = 0; r < ROWS; r++) {
                    float want = clf_f16_to_f32(w[r * COLS + m]), got = y[(size_t)m * ROWS + r];
                    if (got != want)
                        fail_msg("%s, n = %d: half 0x%04x -> %g, want %g", variants[v], n, w[r * COLS + m], got, want);
                }
            clf_tensor_free(&X);
            clf_tensor_free(&Y);
        }
        clf_weight_free(&W);
    }
    with_variant(NULL);
    free(w);
    free(x);
    free(y);
}

/* X and Y as row views at offsets inside larger tensors: only Y's view
 * changes, and X is read from its own rows. */
static void test_views(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { ROWS = 70, COLS = 64, N = 19, X0 = 3, Y0 = 5, XT = 25, YT = 30 };
    uint64_t s = tu_seed() + 3;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc(XT * COLS * sizeof *x), *y = malloc(YT * ROWS * sizeof *y);
    float *out = malloc(YT * ROWS * sizeof *out);
    double *ref = malloc(N * ROWS * sizeof *ref);
    clf_block_q8_0 *wq = malloc(ROWS * COLS / CLF_QK * sizeof *wq);
    assert_true(wf && x && y && out && ref && wq);
    tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
    tu_fill_uniform(&s, x, XT * COLS, -1, 1);
    tu_fill_uniform(&s, y, YT * ROWS, -1, 1);
    clf_quantize(CLF_Q8_0, wf, wq, ROWS * COLS);
    clf_dequantize(CLF_Q8_0, wq, wf, ROWS * COLS);
    for (int m = 0; m < N; m++)
        for (int r = 0; r < ROWS; r++) {
            double acc = y[(Y0 + m) * ROWS + r];
            for (int k = 0; k < COLS; k++) acc += (double)x[(X0 + m) * COLS + k] * wf[r * COLS + k];
            ref[m * ROWS + r] = acc;
        }
    static const char *variants[] = {"cpu", "gpu"};
    for (int v = 0; v < 2; v++) {
        with_variant(variants[v]);
        for (int n = 1; n <= N; n += N - 1) {
            clf_weight W;
            clf_tensor X, Y;
            TU_OK(clf_weight_upload(rt, CLF_Q8_0, ROWS, COLS, wq, &W));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, XT, &X));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, ROWS, YT, &Y));
            TU_OK(clf_tensor_upload(rt, &X, x, XT * COLS * sizeof *x));
            TU_OK(clf_tensor_upload(rt, &Y, y, YT * ROWS * sizeof *y));
            clf_tensor xv = clf_tensor_rows(&X, X0, n), yv = clf_tensor_rows(&Y, Y0, n);
            TU_OK(clf_matmul(rt, &W, &xv, &yv, 1));
            TU_OK(clf_tensor_download(rt, &Y, out, YT * ROWS * sizeof *out));
            for (int i = 0; i < YT * ROWS; i++)
                if ((i < Y0 * ROWS || i >= (Y0 + n) * ROWS) && out[i] != y[i])
                    fail_msg("%s, n = %d: element %d outside the Y view changed", variants[v], n, i);
            double err = tu_rel_err(out + Y0 * ROWS, ref, (size_t)n * ROWS);
            const double tol = clf_matmul_quantizes_x(rt, &W, n)
                                   ? clf_check_matmul_int8_tol(CLF_Q8_0, x + X0 * COLS, wf, ref, ROWS, COLS, n)
                                   : clf_check_matmul_tol(CLF_Q8_0);
            if (!(err <= tol)) fail_msg("%s, n = %d: view rel err %.3g > tol %.3g", variants[v], n, err, tol);
            clf_tensor_free(&X);
            clf_tensor_free(&Y);
            clf_weight_free(&W);
        }
    }
    with_variant(NULL);
    free(wf);
    free(x);
    free(y);
    free(out);
    free(ref);
    free(wq);
}

/* clf_matmul_rowwise: each of n rows (views inside larger tensors,
 * accumulating) as the one-row product gives it: bit for bit where that
 * rounds x to int8 (the same kernel), else within F32 summation order. */
static void test_rowwise(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { ROWS = 97, COLS = 512, N = 5, X0 = 2, Y0 = 3, T = 9 }; /* COLS: whole K-quant super-blocks */
    uint64_t s = tu_seed() + 5;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc(T * COLS * sizeof *x), *y = malloc(T * ROWS * sizeof *y);
    float *got = malloc(T * ROWS * sizeof *got), *want = malloc(T * ROWS * sizeof *want);
    void *wq = malloc(ROWS * COLS * sizeof(float));
    assert_true(wf && x && y && got && want && wq);
    tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
    tu_fill_uniform(&s, x, T * COLS, -1, 1);
    tu_fill_uniform(&s, y, T * ROWS, -1, 1);
    for (int t = 0; t < NTYPES; t++) {
        clf_weight W;
        clf_tensor X, Y;
        if (types[t] == CLF_F32) memcpy(wq, wf, ROWS * COLS * sizeof *wf);
        else clf_quantize(types[t], wf, wq, ROWS * COLS);
        TU_OK(clf_weight_upload(rt, types[t], ROWS, COLS, wq, &W));
        TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, T, &X));
        TU_OK(clf_tensor_alloc(rt, CLF_F32, ROWS, T, &Y));
        TU_OK(clf_tensor_upload(rt, &X, x, T * COLS * sizeof *x));
        for (int pass = 0; pass < 2; pass++) {
            TU_OK(clf_tensor_upload(rt, &Y, y, T * ROWS * sizeof *y));
            for (int m = 0; m < (pass ? N : 1); m++) {
                clf_tensor xv = clf_tensor_rows(&X, X0 + m, pass ? 1 : N), yv = clf_tensor_rows(&Y, Y0 + m, pass ? 1 : N);
                TU_OK(pass ? clf_matmul(rt, &W, &xv, &yv, 1) : clf_matmul_rowwise(rt, &W, &xv, &yv, 0, 1));
            }
            TU_OK(clf_tensor_download(rt, &Y, pass ? want : got, T * ROWS * sizeof *got));
        }
        /* exact where x rounds to int8 (the same kernel), and for floats on the cpu family (gemv_<type>_rows) */
        const int exact = clf_matmul_quantizes_x(rt, &W, 1) || (is_float(types[t]) && clf_weight_host_layout(rt));
        double err = tu_rel_err_f(got, want, T * ROWS);
        print_message("  %s rowwise vs row by row: rel diff %.2e%s\n", clf_type_get(types[t])->name, err,
                      exact ? " (must be 0)" : "");
        assert_true(exact ? err == 0 : err <= 1e-5);
        clf_tensor_free(&X);
        clf_tensor_free(&Y);
        clf_weight_free(&W);
    }
    free(wf);
    free(x);
    free(y);
    free(got);
    free(want);
    free(wq);
}

/* clf_matmul_rowwise of float weights on both cpu variants (the verify
 * step of speculative decoding, sequences decoded together: 2-8 rows, and
 * more over several work-items): each row bit for bit the one-row GEMV's
 * (gemv_<type>_rows sums as gemv_<type>), at odd sizes (rows not whole
 * panels, columns not a multiple of 4: the GEMV's tail), into columns of
 * a wider Y, accumulating or not. */
static void test_rowwise_float(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    static const char *variants[] = {"cpu", "cpu-portable"};
    static const clf_type ft[] = {CLF_F32, CLF_F16, CLF_BF16};
    /* rows, cols: a partial column block and a tail (33), several blocks, a partial one and a tail (1001), one
     * block short of MV_KB (64), two whole blocks (256; cl/matmul_cpu.cl gemv_<type>_rows) */
    static const int shapes[][2] = {{97, 33}, {37, 1001}, {64, 64}, {32, 256}};
    static const int ns[] = {2, 3, 4, 5, 6, 7, 8, 9, 17};
    enum { X0 = 1, COL0 = 3, PAD = 5, NMAX = 17 };
    uint64_t s = tu_seed() + 43;
    for (int v = 0; v < 2; v++) {
        with_variant(variants[v]);
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            const int rows = shapes[si][0], cols = shapes[si][1], ldy = COL0 + rows + PAD;
            float *wf = malloc((size_t)rows * cols * sizeof *wf), *x = malloc((size_t)(X0 + NMAX) * cols * sizeof *x);
            float *y = malloc((size_t)NMAX * ldy * sizeof *y), *got = malloc((size_t)NMAX * ldy * sizeof *got);
            float *want = malloc((size_t)NMAX * ldy * sizeof *want);
            void *wq = malloc((size_t)rows * cols * sizeof(float));
            assert_true(wf && x && y && got && want && wq);
            tu_fill_uniform(&s, wf, (size_t)rows * cols, -1, 1);
            tu_fill_uniform(&s, x, (size_t)(X0 + NMAX) * cols, -1, 1);
            tu_fill_uniform(&s, y, (size_t)NMAX * ldy, -1, 1);
            for (int t = 0; t < 3; t++) {
                if (ft[t] == CLF_F32) memcpy(wq, wf, (size_t)rows * cols * sizeof *wf);
                else clf_quantize(ft[t], wf, wq, (int64_t)rows * cols);
                clf_weight W;
                clf_tensor X, Y;
                TU_OK(clf_weight_upload(rt, ft[t], rows, cols, wq, &W));
                TU_OK(clf_tensor_alloc(rt, CLF_F32, cols, X0 + NMAX, &X));
                TU_OK(clf_tensor_alloc(rt, CLF_F32, ldy, NMAX, &Y));
                TU_OK(clf_tensor_upload(rt, &X, x, (size_t)(X0 + NMAX) * cols * sizeof *x));
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                    const int n = ns[ni], acc = (int)(ni % 2);
                    for (int pass = 0; pass < 2; pass++) { /* 0: rowwise; 1: each row alone (the GEMV) */
                        TU_OK(clf_tensor_upload(rt, &Y, y, (size_t)NMAX * ldy * sizeof *y));
                        for (int m = 0; m < (pass ? n : 1); m++) {
                            clf_tensor xv = clf_tensor_rows(&X, X0 + m, pass ? 1 : n), yv = clf_tensor_rows(&Y, m, pass ? 1 : n);
                            TU_OK(pass ? clf_matmul_cols(rt, &W, &xv, &yv, COL0, acc)
                                       : clf_matmul_rowwise(rt, &W, &xv, &yv, COL0, acc));
                        }
                        TU_OK(clf_tensor_download(rt, &Y, pass ? want : got, (size_t)NMAX * ldy * sizeof *got));
                    }
                    for (int i = 0; i < NMAX * ldy; i++)
                        if (memcmp(&got[i], &want[i], sizeof got[i]))
                            fail_msg("%s %s %d x %d, n = %d: Y[%d][%d] = %.9g rowwise, %.9g alone", variants[v],
                                     clf_type_get(ft[t])->name, rows, cols, n, i / ldy, i % ldy, got[i], want[i]);
                }
                clf_tensor_free(&X);
                clf_tensor_free(&Y);
                clf_weight_free(&W);
            }
            free(wf);
            free(x);
            free(y);
            free(got);
            free(want);
            free(wq);
        }
    }
    with_variant(NULL);
}

/* The rowwise-xq tests' inputs: x [t × cols] on the device as X, its rows
 * x0 .. x0 + n as the view xv and quantized (clf_quantize_x) into the view
 * xqv of XQ, and Y [n × rows] for the products. */
static void xq_inputs(clf_runtime *rt, const float *x, int t, int cols, int x0, int n, int rows, clf_tensor *X,
                      clf_tensor *XQ, clf_tensor *Y, clf_tensor *xv, clf_tensor *xqv) {
    TU_OK(clf_tensor_alloc(rt, CLF_F32, cols, t, X));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(cols), t, XQ));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, rows, n, Y));
    TU_OK(clf_tensor_upload(rt, X, x, (size_t)t * cols * sizeof *x));
    *xv = clf_tensor_rows(X, x0, n);
    *xqv = clf_tensor_rows(XQ, x0, n);
    TU_OK(clf_quantize_x(rt, xv, xqv));
}

/* clf_matmul_rowwise_xq: x quantized once (clf_quantize_x) and read by
 * every work-item gives the product that quantizes x in each work-item, bit
 * for bit, for every type (those without an int8 GEMV read the float rows),
 * views at row offsets, accumulating. */
static void test_rowwise_xq(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { ROWS = 133, COLS = 768, N = 3, X0 = 1, T = 5 }; /* COLS: whole K-quant super-blocks */
    uint64_t s = tu_seed() + 7;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc(T * COLS * sizeof *x), *y = malloc(N * ROWS * sizeof *y);
    float *got = malloc(N * ROWS * sizeof *got), *want = malloc(N * ROWS * sizeof *want);
    void *wq = malloc(ROWS * COLS * sizeof(float));
    assert_true(wf && x && y && got && want && wq);
    tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
    tu_fill_uniform(&s, x, T * COLS, -2, 2);
    tu_fill_uniform(&s, y, N * ROWS, -1, 1);
    clf_tensor X, XQ, Y, xv, xqv;
    xq_inputs(rt, x, T, COLS, X0, N, ROWS, &X, &XQ, &Y, &xv, &xqv);
    for (int t = 0; t < NTYPES; t++) {
        clf_weight W;
        if (types[t] == CLF_F32) memcpy(wq, wf, ROWS * COLS * sizeof *wf);
        else clf_quantize(types[t], wf, wq, ROWS * COLS);
        TU_OK(clf_weight_upload(rt, types[t], ROWS, COLS, wq, &W));
        for (int pass = 0; pass < 2; pass++) {
            TU_OK(clf_tensor_upload(rt, &Y, y, N * ROWS * sizeof *y));
            TU_OK(pass ? clf_matmul_rowwise(rt, &W, &xv, &Y, 0, 1) : clf_matmul_rowwise_xq(rt, &W, &xv, &xqv, &Y, 0, 1));
            TU_OK(clf_tensor_download(rt, &Y, pass ? want : got, N * ROWS * sizeof *got));
        }
        const double err = tu_rel_err_f(got, want, N * ROWS);
        print_message("  %s x quantized once vs per work-item: rel diff %.2e%s\n", clf_type_get(types[t])->name, err,
                      clf_matmul_quantizes_x(rt, &W, 1) ? " (int8)" : "");
        assert_true(err == 0);
        clf_weight_free(&W);
    }
    /* a quantized x of another width is refused */
    clf_tensor bad = clf_tensor_rows(&X, 0, N);
    clf_weight W;
    clf_quantize(CLF_Q4_0, wf, wq, ROWS * COLS);
    TU_OK(clf_weight_upload(rt, CLF_Q4_0, ROWS, COLS, wq, &W));
    assert_int_equal(clf_matmul_rowwise_xq(rt, &W, &xv, &bad, &Y, 0, 0), CLF_ERR_ARG);
    clf_weight_free(&W);
    clf_tensor_free(&X);
    clf_tensor_free(&XQ);
    clf_tensor_free(&Y);
    free(wf), free(x), free(y), free(got), free(want), free(wq);
}

/* clf_matmul_glu_xq: the gate|up GEMV with SwiGLU/GeGLU applied gives, bit
 * for bit, the product then the unit then quantizing (for the down GEMV),
 * for 1 and 3 decode rows at a row offset, 5 panels per half (a partial
 * work-item), every quantized type (rows of 768: whole K-quant
 * super-blocks); gpt-oss's clamped SwiGLU (a program of its own a type)
 * on the first and last of them. Devices without it refuse it. */
static void test_gated_unit_gemv(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { FF = 160, COLS = 768, T = 4 };
    clf_type qt[CLF_NTYPES];
    const int NQ = types_with(1, CLF_MM_SWIGLU_XQ, qt);
    assert_true(NQ > 0);
    uint64_t s = tu_seed() + 11;
    float *wf = malloc(2 * FF * COLS * sizeof *wf), *x = malloc(T * COLS * sizeof *x);
    float *got = malloc(T * FF * sizeof *got), *want = malloc(T * FF * sizeof *want);
    float *gq = malloc(T * CLF_XQ_FLOATS(FF) * sizeof *gq), *wantq = malloc(T * CLF_XQ_FLOATS(FF) * sizeof *wantq);
    void *wq = malloc(2 * FF * COLS * sizeof(float));
    assert_true(wf && x && got && want && gq && wantq && wq);
    tu_fill_uniform(&s, wf, 2 * FF * COLS, -1, 1);
    tu_fill_uniform(&s, x, T * COLS, -2, 2);
    clf_tensor X, XQ, GU, Y, YQ;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, T, &X));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(COLS), T, &XQ));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 2 * FF, T, &GU));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, FF, T, &Y));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(FF), T, &YQ));
    TU_OK(clf_tensor_upload(rt, &X, x, T * COLS * sizeof *x));
    TU_OK(clf_quantize_x(rt, &X, &XQ));
    static const char *const acts[] = {"swiglu", "geglu", "swiglu_oai"};
    for (int t = 0; t < NQ; t++)
        for (int act = 0; act < 3; act++)
            for (int n = 1; n <= 3; n += 2) {
                if (act == CLF_GLU_SWIGLU_OAI && t != 0 && t != NQ - 1) continue;
                clf_weight W;
                clf_quantize(qt[t], wf, wq, 2 * FF * COLS);
                TU_OK(clf_weight_upload(rt, qt[t], 2 * FF, COLS, wq, &W));
                clf_tensor xv = clf_tensor_rows(&X, 1, n), xqv = clf_tensor_rows(&XQ, 1, n);
                clf_tensor guv = clf_tensor_rows(&GU, 1, n), yv = clf_tensor_rows(&Y, 1, n), yqv = clf_tensor_rows(&YQ, 1, n);
                if (!clf_matmul_fuses_glu(rt, &W)) {
                    assert_int_equal(clf_matmul_glu_xq(rt, &W, (clf_glu_act)act, &xqv, &yv, &yqv), CLF_ERR_ARG);
                    clf_weight_free(&W);
                    continue;
                }
                TU_OK(clf_matmul_rowwise_xq(rt, &W, &xv, &xqv, &guv, 0, 0));
                TU_OK(clf_glu_xq(rt, (clf_glu_act)act, &guv, &yv, &yqv));
                TU_OK(clf_tensor_download(rt, &Y, want, T * FF * sizeof *want));
                TU_OK(clf_tensor_download(rt, &YQ, wantq, T * CLF_XQ_FLOATS(FF) * sizeof *wantq));
                const float nan = NAN;
                for (int i = 0; i < T * FF; i++) got[i] = nan;
                TU_OK(clf_tensor_upload(rt, &Y, got, T * FF * sizeof *got));
                TU_OK(clf_tensor_upload(rt, &YQ, got, T * CLF_XQ_FLOATS(FF) * sizeof *got));
                TU_OK(clf_matmul_glu_xq(rt, &W, (clf_glu_act)act, &xqv, &yv, &yqv));
                TU_OK(clf_tensor_download(rt, &Y, got, T * FF * sizeof *got));
                TU_OK(clf_tensor_download(rt, &YQ, gq, T * CLF_XQ_FLOATS(FF) * sizeof *gq));
                const double err = tu_rel_err_f(got + FF, want + FF, n * FF);
                print_message("  %s %s, %d rows: fused vs product then unit: rel diff %.2e\n",
                              clf_type_get(qt[t])->name, acts[act], n, err);
                assert_true(err == 0);
                assert_memory_equal(gq + CLF_XQ_FLOATS(FF), wantq + CLF_XQ_FLOATS(FF), n * CLF_XQ_FLOATS(FF) * sizeof *gq);
                clf_weight_free(&W);
            }
    clf_tensor *ts[] = {&X, &XQ, &GU, &Y, &YQ};
    for (int i = 0; i < 5; i++) clf_tensor_free(ts[i]);
    free(wf), free(x), free(got), free(want), free(gq), free(wantq), free(wq);
}

/* clf_matmul_cols: a Q4_K weight of 37 rows fills columns 41..77 of Y
 * [n × 100] (one part of a fused output) and leaves the rest alone, on every
 * variant, through GEMV, skinny, GEMM and the CLBlast backend. */
static void test_column_part(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    enum { ROWS = 37, COLS = 512, YC = 100, C0 = 41, N = 19 };
    uint64_t s = tu_seed() + 5;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc(N * COLS * sizeof *x), *y = malloc(N * YC * sizeof *y);
    float *out = malloc(N * YC * sizeof *out);
    double *ref = malloc(N * ROWS * sizeof *ref);
    unsigned char *wq = malloc(clf_row_bytes(CLF_Q4_K, COLS) * ROWS);
    assert_true(wf && x && y && out && ref && wq);
    tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
    tu_fill_uniform(&s, x, N * COLS, -1, 1);
    tu_fill_uniform(&s, y, N * YC, -1, 1);
    clf_quantize(CLF_Q4_K, wf, wq, ROWS * COLS);
    clf_dequantize(CLF_Q4_K, wq, wf, ROWS * COLS);
    static const char *variants[] = {"cpu", "cpu-portable", "gpu", "cpu"};
    for (int v = 0; v < 4; v++) {
        if (v == 3 && !clf_clblast_available()) continue;
        with_variant(variants[v]);
        clf_matmul_use_clblast(rt, v == 3);
        static const int ns[] = {1, 7, N};
        for (int ni = 0; ni < 3; ni++) {
            const int n = ns[ni], acc = ni % 2;
            for (int m = 0; m < n; m++)
                for (int r = 0; r < ROWS; r++) {
                    double a = acc ? y[m * YC + C0 + r] : 0;
                    for (int k = 0; k < COLS; k++) a += (double)x[m * COLS + k] * wf[r * COLS + k];
                    ref[m * ROWS + r] = a;
                }
            clf_weight W;
            clf_tensor X, Y;
            TU_OK(clf_weight_upload(rt, CLF_Q4_K, ROWS, COLS, wq, &W));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, n, &X));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, YC, n, &Y));
            TU_OK(clf_tensor_upload(rt, &X, x, (size_t)n * COLS * sizeof *x));
            TU_OK(clf_tensor_upload(rt, &Y, y, (size_t)n * YC * sizeof *y));
            TU_OK(clf_matmul_cols(rt, &W, &X, &Y, C0, acc));
            TU_OK(clf_tensor_download(rt, &Y, out, (size_t)n * YC * sizeof *out));
            double e2 = 0, r2 = 0;
            for (int m = 0; m < n; m++)
                for (int c = 0; c < YC; c++) {
                    const float got = out[m * YC + c];
                    if (c < C0 || c >= C0 + ROWS) {
                        if (got != y[m * YC + c]) fail_msg("%s, n = %d: column %d outside the part changed", variants[v], n, c);
                        continue;
                    }
                    const double want = ref[m * ROWS + c - C0];
                    e2 += (got - want) * (got - want);
                    r2 += want * want;
                }
            const double tol = clf_matmul_quantizes_x(rt, &W, n) ? 2e-2 : clf_check_matmul_tol(CLF_Q4_K);
            if (!(sqrt(e2 / r2) <= tol)) fail_msg("%s, n = %d: rel err %.3g > %.3g", variants[v], n, sqrt(e2 / r2), tol);
            assert_int_equal(clf_matmul_cols(rt, &W, &X, &Y, YC - ROWS + 1, 0), CLF_ERR_ARG); /* past Y's end */
            clf_tensor_free(&X);
            clf_tensor_free(&Y);
            clf_weight_free(&W);
        }
    }
    clf_matmul_use_clblast(rt, 0);
    with_variant(NULL);
    free(wf);
    free(x);
    free(y);
    free(out);
    free(ref);
    free(wq);
}

/* The gpu variant's int8 GEMVs (cl/matmul_gpu.cl DEFINE_GEMV_XQ): against
 * the C reference within x's int8 rounding, at rows that leave a
 * work-group part empty and K of 1 to 33 blocks (every lanes-per-row
 * choice); and, for 3 decode rows at row offsets, accumulating, the
 * product from XQ equals the one that quantizes x itself, bit for bit, and
 * is within that rounding of the gpu float GEMV (the skinny product). */
static void test_gpu_int8_gemv(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    clf_type qt[CLF_NTYPES];
    const int NQ = types_with(0, CLF_MM_GEMV_XQ, qt);
    assert_true(NQ > 0);
    static const int rows[] = {1, 37, 97, 130}, cols[] = {32, 96, 576, 1056};
    tu_tune("matmul=gpu int8_gemv=1"); /* whatever this device's row says */
    int i = 0;
    for (int t = 0; t < NQ; t++)
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++, i++) check(rt, qt[t], rows[r], cols[c], 1, i % 2);
    enum { ROWS = 101, COLS = 512, N = 3, X0 = 2, T = 6 }; /* COLS: whole K-quant super-blocks */
    uint64_t s = tu_seed() + 11;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc(T * COLS * sizeof *x), *y = malloc(N * ROWS * sizeof *y);
    float *out[3];
    double *ref = malloc(N * ROWS * sizeof *ref);
    void *wq = malloc(ROWS * COLS * sizeof(float));
    for (int k = 0; k < 3; k++) out[k] = malloc(N * ROWS * sizeof *out[k]);
    assert_true(wf && x && y && ref && wq && out[0] && out[1] && out[2]);
    tu_fill_uniform(&s, x, T * COLS, -2, 2);
    tu_fill_uniform(&s, y, N * ROWS, -1, 1);
    clf_tensor X, XQ, Y, xv, xqv;
    xq_inputs(rt, x, T, COLS, X0, N, ROWS, &X, &XQ, &Y, &xv, &xqv);
    for (int t = 0; t < NQ; t++) {
        tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
        clf_quantize(qt[t], wf, wq, ROWS * COLS);
        clf_dequantize(qt[t], wq, wf, ROWS * COLS);
        clf_weight W;
        TU_OK(clf_weight_upload(rt, qt[t], ROWS, COLS, wq, &W));
        assert_true(clf_matmul_quantizes_x(rt, &W, 1));
        for (int k = 0; k < 3; k++) { /* from XQ, quantizing x itself, the float skinny product */
            TU_OK(clf_tensor_upload(rt, &Y, y, N * ROWS * sizeof *y));
            TU_OK(k == 0   ? clf_matmul_rowwise_xq(rt, &W, &xv, &xqv, &Y, 0, 1)
                  : k == 1 ? clf_matmul_rowwise(rt, &W, &xv, &Y, 0, 1)
                           : clf_matmul(rt, &W, &xv, &Y, 1));
            TU_OK(clf_tensor_download(rt, &Y, out[k], N * ROWS * sizeof *out[k]));
        }
        for (int j = 0; j < N * ROWS; j++) ref[j] = out[2][j];
        const double exact = tu_rel_err_f(out[0], out[1], N * ROWS), err = tu_rel_err(out[0], ref, N * ROWS);
        const double tol = clf_check_matmul_int8_tol(qt[t], x + X0 * COLS, wf, ref, ROWS, COLS, N);
        print_message("  %s gpu int8: XQ vs quantizing x %.2e (must be 0), vs float GEMV %.2e (tol %.2e)\n",
                      clf_type_get(qt[t])->name, exact, err, tol);
        assert_true(exact == 0);
        if (!(err <= tol)) fail_msg("%s: int8 vs float GEMV rel err %.3g > tol %.3g", clf_type_get(qt[t])->name, err, tol);
        clf_weight_free(&W);
    }
    /* int8_gemv=0: the gpu variant's float GEMVs, x not quantized */
    tu_tune("matmul=gpu int8_gemv=0");
    clf_weight Wf;
    TU_OK(clf_weight_upload(rt, CLF_Q8_0, 64, 64, wq, &Wf));
    assert_false(clf_matmul_quantizes_x(rt, &Wf, 1));
    tu_tune("matmul=gpu int8_gemv=1");
    assert_true(clf_matmul_quantizes_x(rt, &Wf, 1));
    clf_weight_free(&Wf);
    with_variant(NULL);
    clf_tensor_free(&X);
    clf_tensor_free(&XQ);
    clf_tensor_free(&Y);
    for (int k = 0; k < 3; k++) free(out[k]);
    free(wf), free(x), free(y), free(ref), free(wq);
}

/* One product of n rows X0.. of X into Y (accumulating onto y) under the
 * tuning `tune`: rowwise (each row as its GEMV computes it), or as one
 * product; the result downloaded into out. */
static void product_under(const char *tune, const clf_weight *W, clf_tensor *X, clf_tensor *Y, const float *y, int x0,
                          int n, int rowwise, float *out) {
    clf_runtime *rt = tu_runtime();
    tu_tune(tune);
    clf_tensor xv = clf_tensor_rows(X, x0, n), yv = clf_tensor_rows(Y, 0, n);
    TU_OK(clf_tensor_upload(rt, &yv, y, clf_tensor_bytes(&yv)));
    TU_OK(rowwise ? clf_matmul_rowwise(rt, W, &xv, &yv, 0, 1) : clf_matmul(rt, W, &xv, &yv, 1));
    TU_OK(clf_tensor_download(rt, &yv, out, clf_tensor_bytes(&yv)));
}

/* The int8 GEMM (int8_gemm): over n tokens, bit for bit the int8 GEMV token
 * by token, for every type with an int8 GEMV, n odd, rows not a multiple of
 * 32, K several (super-)blocks, a view at a row offset, accumulating; and
 * at every width the device runs, with and without vpdpbusd, GEMV and GEMM
 * alike bit for bit the widest width's pmaddubsw GEMV: one contract, so a
 * model's results do not depend on which kernels the host gets. */
static void test_int8_gemm(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    const char *widths[2] = {NULL, NULL};
    const int nw = int8_widths(widths);
    if (!nw) TU_SKIP_CAP("no int8 products on this device (x86 AVX2 or AVX-512BW under PoCL)");
    enum { ROWS = 97, COLS = 512, X0 = 3, NMAX = 513 };
    uint64_t s = tu_seed() + 11;
    float *wf = malloc(ROWS * COLS * sizeof *wf), *x = malloc((X0 + NMAX) * COLS * sizeof *x);
    float *y = malloc(NMAX * ROWS * sizeof *y), *got = malloc(NMAX * ROWS * sizeof *got);
    float *want = malloc(NMAX * ROWS * sizeof *want);
    void *wq = malloc(ROWS * COLS * sizeof(float));
    assert_true(wf && x && y && got && want && wq);
    tu_fill_uniform(&s, wf, ROWS * COLS, -1, 1);
    tu_fill_uniform(&s, x, (X0 + NMAX) * COLS, -2, 2);
    tu_fill_uniform(&s, y, NMAX * ROWS, -1, 1);
    clf_tensor X, Y;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, COLS, X0 + NMAX, &X));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, ROWS, NMAX, &Y));
    TU_OK(clf_tensor_upload(rt, &X, x, (X0 + NMAX) * COLS * sizeof *x));
    static const int ns[] = {1, 7, 33, NMAX};
    int tested = 0, forms = 0;
    for (int t = 0; t < NTYPES; t++) {
        tu_tune(widths[0]);
        clf_weight W;
        clf_quantize(types[t], wf, wq, ROWS * COLS);
        TU_OK(clf_weight_upload(rt, types[t], ROWS, COLS, wq, &W));
        if (is_float(types[t]) || !clf_matmul_quantizes_x(rt, &W, 1)) {
            clf_weight_free(&W);
            continue;
        }
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            const int n = ns[ni];
            const size_t bytes = (size_t)n * ROWS * sizeof *got;
            char tune[128];
            snprintf(tune, sizeof tune, "%s int8_vnni=0 int8_gemm=0", widths[0]);
            product_under(tune, &W, &X, &Y, y, X0, n, 1, want);
            assert_int_equal(clf_matmul_quantizes_x(rt, &W, n), n == 1);
            forms = 0;
            for (int wi = 0; wi < nw; wi++)
                for (int v = 0; v <= 1; v++) {
                    snprintf(tune, sizeof tune, "%s int8_vnni=%d int8_gemm=2", widths[wi], v);
                    tu_tune(tune);
                    if (v && !rt->tune.int8_vnni) continue; /* no vpdpbusd on this CPU */
                    forms++;
                    for (int rowwise = 0; rowwise < 2; rowwise++) {
                        product_under(tune, &W, &X, &Y, y, X0, n, rowwise, got);
                        assert_true(clf_matmul_quantizes_x(rt, &W, n));
                        if (memcmp(got, want, bytes))
                            fail_msg("%s, n = %d, %s, %s: differs from the int8 GEMV (rel %.3g)",
                                     clf_type_get(types[t])->name, n, rowwise ? "rowwise" : "one product", tune,
                                     tu_rel_err_f(got, want, (size_t)n * ROWS));
                    }
                }
        }
        tested++;
        clf_weight_free(&W);
    }
    print_message("  int8 GEMM = int8 GEMV bit for bit: %d types, %d widths, %d kernel forms\n", tested, nw, forms);
    assert_true(tested >= 11);
    tu_tune(NULL);
    clf_tensor_free(&X);
    clf_tensor_free(&Y);
    free(wf), free(x), free(y), free(got), free(want), free(wq);
}

static void test_bad_arguments(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    clf_weight W;
    uint8_t data[4 * 34] = {0};
    assert_int_equal(clf_weight_upload(rt, CLF_Q8_0, 2, 48, data, &W), CLF_ERR_ARG); /* not whole blocks */
    assert_non_null(strstr(clf_last_error(), "48"));
    assert_int_equal(clf_weight_upload(rt, CLF_Q8_0, 0, 32, data, &W), CLF_ERR_ARG);
    assert_int_equal(clf_weight_upload(rt, (clf_type)4, 2, 32, data, &W), CLF_ERR_FORMAT); /* Q4_2: gone from ggml */
    assert_int_equal(clf_weight_upload(rt, CLF_Q8_0, 2, 32, NULL, &W), CLF_ERR_ARG);
    TU_OK(clf_weight_upload(rt, CLF_Q8_0, 4, 32, data, &W));
    clf_tensor X, Y, Xh;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 33, 2, &X)); /* 33 != 32 columns */
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 4, 2, &Y));
    TU_OK(clf_tensor_alloc(rt, CLF_F16, 32, 2, &Xh));
    assert_int_equal(clf_matmul(rt, &W, &X, &Y, 0), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "shapes do not fit"));
    assert_int_equal(clf_matmul(rt, &W, &Xh, &Y, 0), CLF_ERR_ARG);
    clf_weight none = {0};
    assert_int_equal(clf_matmul(rt, &none, &X, &Y, 0), CLF_ERR_ARG);
    clf_tensor_free(&X);
    clf_tensor_free(&Y);
    clf_tensor_free(&Xh);
    clf_weight_free(&W);
}

/* The selftest table passes on this device, each entry named and run. */
static void test_selftest_table(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    with_variant(NULL);
    int n = 0;
    for (const clf_check *c = clf_checks_matmul; c->name; c++, n++) {
        clf_check_result r;
        TU_OK(c->fn(rt, tu_seed(), &r));
        if (!(r.err <= r.tol)) fail_msg("%s (%s): rel err %.3g > tol %.3g", c->name, r.detail, r.err, r.tol);
    }
    assert_int_equal(n, 3 * NTYPES);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_variant), cmocka_unit_test(test_head_gemv),
        cmocka_unit_test(test_other_variants),  cmocka_unit_test(test_int8_other_widths),
        cmocka_unit_test(test_clblast_backend), cmocka_unit_test(test_f16_every_half),
        cmocka_unit_test(test_views),           cmocka_unit_test(test_rowwise), cmocka_unit_test(test_rowwise_float),
        cmocka_unit_test(test_rowwise_xq),
        cmocka_unit_test(test_gated_unit_gemv),
        cmocka_unit_test(test_column_part),
        cmocka_unit_test(test_gpu_int8_gemv),
        cmocka_unit_test(test_int8_gemm),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_selftest_table),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

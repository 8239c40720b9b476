/* Matrix product checks: every weight type through GEMV, skinny and GEMM
 * paths, against dequantize-then-multiply in double. */
#include "check_matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double clf_check_matmul_tol(clf_type type) {
    /* F32/F16/BF16 products see only float rounding in the sums (~sqrt(K)·2^-24
     * relative); quantized ones the same, with room for a different order of
     * block partial sums. */
    return type == CLF_F32 || type == CLF_F16 || type == CLF_BF16 ? 1e-5 : 1e-4;
}

typedef struct mm_data {
    void *wq;          /* W in its file type */
    float *wd, *x, *y; /* dequantized W, X, Y (prior values, then results) */
    double *ref;
    double ref2, abs2; /* Σ ref², Σ (|prior y| + Σ |x·w|)² over the outputs */
} mm_data;

static void mm_data_free(mm_data *d) {
    free(d->wq);
    free(d->wd);
    free(d->x);
    free(d->y);
    free(d->ref);
}

static clf_status make_data(uint64_t seed, clf_type type, int rows, int cols, int n, int accumulate, mm_data *d) {
    const size_t nw = (size_t)rows * (size_t)cols, nx = (size_t)n * (size_t)cols, ny = (size_t)n * (size_t)rows;
    memset(d, 0, sizeof *d);
    d->wq = malloc(clf_row_bytes(type, cols) * (size_t)rows);
    d->wd = malloc(nw * sizeof(float));
    d->x = malloc(nx * sizeof(float));
    d->y = malloc(ny * sizeof(float));
    d->ref = malloc(ny * sizeof(double));
    if (!d->wq || !d->wd || !d->x || !d->y || !d->ref) {
        mm_data_free(d);
        return clf_fail(CLF_ERR_MEMORY, "matmul check: out of host memory for %d x %d, n = %d", rows, cols, n);
    }
    uint64_t s = clf_rng_init(seed, ((uint64_t)type << 48) ^ ((uint64_t)rows << 32) ^ ((uint64_t)cols << 12) ^
                                        ((uint64_t)n << 1) ^ (uint64_t)accumulate);
    /* POOL_ROWS distinct rows, repeated below them: the K-quant and IQ4_NL
     * reference quantizers search (100-400 ns a weight), and 97 is prime,
     * so no two rows of a 32-row panel or of neighbouring panels repeat */
    enum { POOL_ROWS = 97 };
    const int pool = rows < POOL_ROWS ? rows : POOL_ROWS;
    const size_t np = (size_t)pool * (size_t)cols, rb = clf_row_bytes(type, cols);
    for (size_t i = 0; i < np; i++) d->wd[i] = clf_rng_uniform(&s, -1, 1);
    clf_quantize(type, d->wd, d->wq, (int64_t)np);
    clf_dequantize(type, d->wq, d->wd, (int64_t)np);
    for (int r = pool; r < rows; r++) {
        memcpy((char *)d->wq + (size_t)r * rb, (char *)d->wq + (size_t)(r % pool) * rb, rb);
        memcpy(d->wd + (size_t)r * cols, d->wd + (size_t)(r % pool) * cols, (size_t)cols * sizeof(float));
    }
    for (size_t i = 0; i < nx; i++) d->x[i] = clf_rng_uniform(&s, -1, 1);
    for (size_t i = 0; i < ny; i++) d->y[i] = accumulate ? clf_rng_uniform(&s, -1, 1) : 0.0f;
    for (int m = 0; m < n; m++)
        for (int r = 0; r < rows; r++) {
            const float *xm = d->x + (size_t)m * cols, *wr = d->wd + (size_t)r * cols;
            double acc = d->y[(size_t)m * rows + r], abs = fabs(acc);
            for (int k = 0; k < cols; k++) {
                acc += (double)xm[k] * wr[k];
                abs += fabs((double)xm[k] * wr[k]);
            }
            d->ref[(size_t)m * rows + r] = acc;
            d->ref2 += acc * acc;
            d->abs2 += abs * abs;
        }
    return CLF_OK;
}

/* Upload, run, download; Y comes back in d->y. */
static clf_status run_device(clf_runtime *rt, clf_type type, int rows, int cols, int n, int accumulate,
                             mm_data *d, int *quantizes_x) {
    clf_weight w;
    clf_tensor X = {0}, Y = {0};
    clf_status st = clf_weight_upload(rt, type, rows, cols, d->wq, &w);
    if (st != CLF_OK) return st;
    *quantizes_x = clf_matmul_quantizes_x(rt, &w, n);
    st = clf_tensor_alloc(rt, CLF_F32, cols, n, &X);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, rows, n, &Y);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &X, d->x, (size_t)n * cols * sizeof(float));
    if (st == CLF_OK)
        st = accumulate ? clf_tensor_upload(rt, &Y, d->y, (size_t)n * rows * sizeof(float))
                        : clf_tensor_fill(rt, &Y, 0xff);
    if (st == CLF_OK) st = clf_matmul(rt, &w, &X, &Y, accumulate);
    if (st == CLF_OK) st = clf_tensor_download(rt, &Y, d->y, (size_t)n * rows * sizeof(float));
    clf_tensor_free(&X);
    clf_tensor_free(&Y);
    clf_weight_free(&w);
    return st;
}

/* Where x is rounded to int8 per block (step dx = max|x|/127), each product
 * term w·x is off by w·e with e uniform in ±dx/2: independent errors of
 * variance w²·dx²/12. The tolerance is 4 standard deviations of the error
 * norm over the norm of the result (plus the float one): a wrong kernel is
 * off by far more, a right one fails about once in 10^4 single outputs and
 * practically never on real shapes, where it comes to ~0.5%. */
double clf_check_matmul_int8_tol(clf_type type, const float *x, const float *wd, const double *ref, int rows,
                                 int cols, int n) {
    double var = 0, ref2 = 0;
    for (int m = 0; m < n; m++) {
        const float *xm = x + (size_t)m * cols;
        for (int b = 0; b < cols / CLF_QK; b++) {
            float amax = 0;
            for (int k = 0; k < CLF_QK; k++) amax = fmaxf(amax, fabsf(xm[b * CLF_QK + k]));
            const double step = amax / 127.0;
            for (int r = 0; r < rows; r++) {
                double w2 = 0;
                for (int k = 0; k < CLF_QK; k++) {
                    const double w = wd[(size_t)r * cols + b * CLF_QK + k];
                    w2 += w * w;
                }
                var += w2 * step * step / 12.0;
            }
        }
        for (int r = 0; r < rows; r++) ref2 += ref[(size_t)m * rows + r] * ref[(size_t)m * rows + r];
    }
    return clf_check_matmul_tol(type) + (ref2 > 0 ? 4.0 * sqrt(var / ref2) : 4.0 * sqrt(var));
}

clf_status clf_check_matmul(clf_runtime *rt, uint64_t seed, clf_type type, int rows, int cols, int n,
                            int accumulate, clf_check_result *res) {
    const clf_type_info *ti = clf_type_get(type);
    if (!ti || rows <= 0 || cols <= 0 || n <= 0 || cols % ti->block)
        return clf_fail(CLF_ERR_ARG, "matmul check: bad shape %d x %d (n = %d) for type %u", rows, cols, n,
                        (unsigned)type);
    mm_data d;
    CLF_TRY(make_data(seed, type, rows, cols, n, accumulate, &d));
    int int8 = 0;
    clf_status st = run_device(rt, type, rows, cols, n, accumulate, &d, &int8);
    if (st == CLF_OK) {
        res->err = clf_rel_err(d.y, d.ref, (size_t)n * rows);
        /* Rounding scales with Σ|x·w| (and with the kernels' per-block
         * sums, D·Σx·c + M·Σx, about as much), not with the result: where
         * outputs cancel to well below their typical size, Σ|x·w| / √cols
         * (a typical |Σ x·w|), the float tolerance widens by that much. A
         * single output (rows = n = 1) near zero would otherwise fail a
         * right kernel now and then. */
        const double cond = d.ref2 > 0 ? fmax(1.0, sqrt(d.abs2 / cols / d.ref2)) : 1.0;
        res->tol = (int8 ? clf_check_matmul_int8_tol(type, d.x, d.wd, d.ref, rows, cols, n) : clf_check_matmul_tol(type)) +
                   (cond - 1) * clf_check_matmul_tol(type);
        snprintf(res->detail, sizeof res->detail, "%s %s%s: %d -> %d, n = %d%s", ti->name, clf_matmul_variant(rt),
                 n > 1 && rt->gemm_f32 ? " (CLBlast)" : int8 ? " (int8 x)" : "", cols, rows, n,
                 accumulate ? ", accumulate" : "");
    }
    mm_data_free(&d);
    return st;
}

/* ---- the selftest table: per path and type, an odd shape and a real one;
 * the result is the worse of the two. ---- */

typedef struct mm_case {
    int rows, cols, n, accumulate;
} mm_case;

static clf_status check_cases(clf_runtime *rt, uint64_t seed, clf_type type, const mm_case *cases, int ncases,
                              clf_check_result *res) {
    res->err = -1;
    for (int i = 0; i < ncases; i++) {
        mm_case c = cases[i];
        const int block = clf_type_get(type)->block; /* whole blocks: 32, or 256 for K-quants */
        c.cols = (c.cols + block - 1) / block * block;
        clf_check_result r;
        CLF_TRY(clf_check_matmul(rt, seed, type, c.rows, c.cols, c.n, c.accumulate, &r));
        if (!(r.err <= res->err)) *res = r; /* NaN-safe max */
    }
    return CLF_OK;
}

/* Odd columns (1001, rounded up to whole blocks for block types), rows
 * that are not multiples of 32, then a SmolLM2-135M shape. */
static const mm_case gemv_cases[] = {{97, 1001, 1, 0}, {576, 1536, 1, 1}};
static const mm_case skinny_cases[] = {{37, 1001, 7, 1}, {1536, 576, 16, 0}};
static const mm_case gemm_cases[] = {{97, 1001, 67, 1}, {576, 576, 64, 0}};

#define CHECK_FN(path, T)                                                                                  \
    static clf_status check_##path##_##T(clf_runtime *rt, uint64_t seed, clf_check_result *res) {          \
        return check_cases(rt, seed, CLF_##T, path##_cases, (int)(sizeof path##_cases / sizeof path##_cases[0]), res); \
    }
/* every type of the table (cl/types.cl) on each path */
#define CHECK_ROW(path, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CHECK_FN(path, NAME)
CLF_TYPES(CHECK_ROW, gemv)
CLF_TYPES(CHECK_ROW, skinny)
CLF_TYPES(CHECK_ROW, gemm)

#define ENTRY(path, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    {#path "_" #name, check_##path##_##NAME},

const clf_check clf_checks_matmul[] = {CLF_TYPES(ENTRY, gemv) CLF_TYPES(ENTRY, skinny) CLF_TYPES(ENTRY, gemm) {NULL, NULL}};

/* ---- the quick table (`selftest --quick`): shapes a simulator runs in
 * seconds. GEMV rows not a multiple of the rows a work-group takes, K at
 * 1024 (the int8 GEMV's 32 lanes a row) and at one or two blocks (its
 * fewest); skinny n of each token tile (4, 16) with partial ones; the GEMM
 * over two of the device's largest tiles (gpu_tile_max, within its local
 * memory: the tile a one-compute-unit device takes), the second partial, in
 * each dimension (tests/oclgrind.sh runs it at gpu_tile_max 32 and 64). ---- */

static const mm_case q_gemv_cases[] = {{37, 1001, 1, 0}, {9, 64, 1, 1}};
static const mm_case q_skinny_cases[] = {{37, 300, 3, 1}, {13, 100, 7, 0}};

static clf_status q_cases(clf_runtime *rt, uint64_t seed, clf_type type, int path, clf_check_result *res) {
    if (path == 0) return check_cases(rt, seed, type, q_gemv_cases, 2, res);
    if (path == 1) return check_cases(rt, seed, type, q_skinny_cases, 2, res);
    int t = rt->tune.gpu_tile_max >= 32 ? rt->tune.gpu_tile_max : 32;
    /* and whose Xs, Ws fit the local memory (host/compute/matmul.c gpu_tile) */
    while (t > 32 && rt->dev.local_mem && 32u * (uint64_t)(2 * t + 2) * 4u > rt->dev.local_mem) t /= 2;
    const mm_case gemm[] = {{t + 3, 40, t + 5, 1}};
    return check_cases(rt, seed, type, gemm, 1, res);
}

#define Q_FN(path, T)                                                                                   \
    static clf_status q_##path##_##T(clf_runtime *rt, uint64_t seed, clf_check_result *res) {          \
        return q_cases(rt, seed, CLF_##T, Q_PATH_##path, res);                                         \
    }
enum { Q_PATH_gemv, Q_PATH_skinny, Q_PATH_gemm };
#define Q_ROW(path, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) Q_FN(path, NAME)
CLF_TYPES(Q_ROW, gemv)
CLF_TYPES(Q_ROW, skinny)
CLF_TYPES(Q_ROW, gemm)

#define Q_ENTRY(path, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    {#path "_" #name, q_##path##_##NAME},
const clf_check clf_checks_matmul_quick[] = {CLF_TYPES(Q_ENTRY, gemv) CLF_TYPES(Q_ENTRY, skinny)
                                                 CLF_TYPES(Q_ENTRY, gemm){NULL, NULL}};

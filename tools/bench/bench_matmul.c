/* Matrix product benchmark: our kernels, the CLBlast backend and (on a CPU
 * device) host OpenBLAS, at SmolLM2-135M's decode and prefill shapes. */
#include "bench_matmul.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "matmul.h"
#include "clblast.h"
#include "ops.h"
#include "tensor.h"
#ifdef CLINFER_HAVE_OPENBLAS
#include <cblas.h>
#endif

enum { MAX_RUNS = 50 };
#define BUDGET_MS 300.0 /* keep repeating a case until this much time is spent */

typedef struct bm_case {
    const char *kind; /* "gemv", "gemm"; "gemv_cold": a decode GEMV, weights from memory, x quantized once */
    clf_type type;
    int cols, rows, n; /* in, out, tokens */
} bm_case;

/* What a run needs: the case's device and host data. */
typedef struct bm_ctx {
    clf_runtime *rt;
    const bm_case *c;
    clf_weight w;
    clf_tensor x, y;
    float *wf, *xf, *yf; /* host F32 copies for OpenBLAS */
    clf_weight *cold;    /* gemv_cold: copies of w, more bytes than a CPU's last-level cache, taken in turn */
    int n_cold;
    clf_tensor xq;       /* gemv_cold: x as the kernel that produces it quantizes it (matmul.h) */
} bm_ctx;

enum { COLD_BYTES = 96 << 20 }; /* weight bytes a gemv_cold case cycles through */

static double now_ms(void) { return clf_now_s() * 1e3; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef clf_status (*run_fn)(bm_ctx *ctx, double *ms);

/* One warm-up run (kernel builds), then runs until min_runs and the time
 * budget are both reached; the median. */
static clf_status median_ms(run_fn fn, bm_ctx *ctx, int min_runs, double *med) {
    double t[MAX_RUNS], total = 0;
    int n = 0;
    CLF_TRY(fn(ctx, &t[0]));
    while (n < MAX_RUNS && (n < min_runs || total < BUDGET_MS)) {
        CLF_TRY(fn(ctx, &t[n]));
        total += t[n++];
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return CLF_OK;
}

/* Ends the profiling that clf_profile_start began: *ms the device time of
 * every launch since, st the launches' own status (passed through). */
static clf_status profiled_ms(bm_ctx *ctx, clf_status st, double *ms) {
    clf_profile_entry *e;
    int n;
    clf_status st2 = clf_profile_stop(ctx->rt, &e, &n);
    if (st == CLF_OK) st = st2;
    *ms = 0;
    for (int i = 0; i < n; i++) *ms += e[i].ms;
    free(e);
    return st;
}

/* Device time of one product, from the runtime's launch profiling. */
static clf_status run_native(bm_ctx *ctx, double *ms) {
    CLF_TRY(clf_profile_start(ctx->rt));
    return profiled_ms(ctx, clf_matmul(ctx->rt, &ctx->w, &ctx->x, &ctx->y, 0), ms);
}

/* A decode GEMV as a token meets it: weights not in cache (each run takes
 * the next copy), x read in its int8 form where the device's GEMV takes
 * one (clf_matmul_rowwise_xq); kernel time per product. */
static clf_status run_cold(bm_ctx *ctx, double *ms) {
    CLF_TRY(clf_profile_start(ctx->rt));
    clf_status st = CLF_OK;
    for (int i = 0; i < ctx->n_cold && st == CLF_OK; i++)
        st = clf_matmul_rowwise_xq(ctx->rt, &ctx->cold[i], &ctx->x, &ctx->xq, &ctx->y, 0, 0);
    st = profiled_ms(ctx, st, ms);
    *ms /= ctx->n_cold;
    return st;
}

/* CLBlast launches its own kernels, so: wall time through the finish. */
static clf_status run_clblast(bm_ctx *ctx, double *ms) {
    clf_matmul_use_clblast(ctx->rt, 1);
    double t0 = now_ms();
    clf_status st = clf_matmul(ctx->rt, &ctx->w, &ctx->x, &ctx->y, 0);
    if (st == CLF_OK) st = clf_finish(ctx->rt);
    *ms = now_ms() - t0;
    clf_matmul_use_clblast(ctx->rt, 0);
    return st;
}

#ifdef CLINFER_HAVE_OPENBLAS
static clf_status run_openblas(bm_ctx *ctx, double *ms) {
    const bm_case *c = ctx->c;
    double t0 = now_ms();
    if (c->n == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, c->rows, c->cols, 1.0f, ctx->wf, c->cols, ctx->xf, 1, 0.0f, ctx->yf,
                    1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->n, c->rows, c->cols, 1.0f, ctx->xf, c->cols, ctx->wf,
                    c->cols, 0.0f, ctx->yf, c->rows);
    *ms = now_ms() - t0;
    return CLF_OK;
}
#endif

static void ctx_free(bm_ctx *ctx) {
    for (int i = 0; i < ctx->n_cold; i++) clf_weight_free(&ctx->cold[i]);
    free(ctx->cold);
    clf_tensor_free(&ctx->xq);
    clf_weight_free(&ctx->w);
    clf_tensor_free(&ctx->x);
    clf_tensor_free(&ctx->y);
    free(ctx->wf);
    free(ctx->xf);
    free(ctx->yf);
}

static clf_status ctx_init(clf_runtime *rt, const bm_case *c, uint64_t seed, bm_ctx *ctx) {
    memset(ctx, 0, sizeof *ctx);
    ctx->rt = rt;
    ctx->c = c;
    const size_t nw = (size_t)c->rows * c->cols, nx = (size_t)c->n * c->cols, ny = (size_t)c->n * c->rows;
    ctx->wf = malloc(nw * sizeof(float));
    ctx->xf = malloc(nx * sizeof(float));
    ctx->yf = malloc(ny * sizeof(float));
    unsigned char *wq = malloc(clf_row_bytes(c->type, c->cols) * (size_t)c->rows);
    clf_status st = CLF_OK;
    if (!ctx->wf || !ctx->xf || !ctx->yf || !wq) st = clf_fail(CLF_ERR_MEMORY, "bench: out of host memory");
    if (st == CLF_OK) {
        uint64_t s = seed;
        for (size_t i = 0; i < nw; i++) ctx->wf[i] = clf_rng_uniform(&s, -1, 1);
        for (size_t i = 0; i < nx; i++) ctx->xf[i] = clf_rng_uniform(&s, -1, 1);
        /* at most 256 distinct rows, repeated: the K-quant and IQ4_NL
         * quantizers search (100-400 ns a weight); the time does not care */
        const int pool = c->rows < 256 ? c->rows : 256;
        const size_t rb = clf_row_bytes(c->type, c->cols);
        clf_quantize(c->type, ctx->wf, wq, (int64_t)pool * c->cols);
        for (int r = pool; r < c->rows; r++) memcpy(wq + (size_t)r * rb, wq + (size_t)(r % pool) * rb, rb);
        st = clf_weight_upload(rt, c->type, c->rows, c->cols, wq, &ctx->w);
    }
    if (st == CLF_OK && !strcmp(c->kind, "gemv_cold")) {
        const size_t wb = clf_row_bytes(c->type, c->cols) * (size_t)c->rows;
        const int n_cold = (int)(COLD_BYTES / wb) + 2;
        ctx->cold = calloc((size_t)n_cold, sizeof *ctx->cold);
        if (!ctx->cold) st = clf_fail(CLF_ERR_MEMORY, "bench: out of host memory");
        for (; st == CLF_OK && ctx->n_cold < n_cold; ctx->n_cold++)
            st = clf_weight_upload(rt, c->type, c->rows, c->cols, wq, &ctx->cold[ctx->n_cold]);
    }
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, c->cols, c->n, &ctx->x);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, c->rows, c->n, &ctx->y);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &ctx->x, ctx->xf, nx * sizeof(float));
    if (st == CLF_OK && ctx->cold && c->cols % 32 == 0) {
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(c->cols), c->n, &ctx->xq);
        if (st == CLF_OK) st = clf_quantize_x(rt, &ctx->x, &ctx->xq);
    }
    free(wq);
    if (st != CLF_OK) ctx_free(ctx);
    return st;
}

/* Printing: a table row or a JSON object; ms <= 0 means "not measured". */
typedef struct bm_result {
    double ms, clblast_ms, blas_ms;
    size_t weight_bytes;
} bm_result;

static void print_header(FILE *out, const clf_runtime *rt, double peak_gflops, double peak_gbs) {
    fprintf(out, "matrix products on %s (kernel variant %s)", rt->dev.name, clf_matmul_variant(rt));
    if (peak_gflops > 0 && peak_gbs > 0) fprintf(out, "; roofs %.0f GFLOP/s, %.1f GB/s", peak_gflops, peak_gbs);
    fprintf(out, "\n%-9s %-6s %12s %4s %9s %8s %7s %6s %11s %6s %11s %6s\n", "kind", "type", "in->out", "n", "ms",
            "GFLOP/s", "GB/s", "%roof", "CLBlast ms", "x", "OpenBLAS ms", "x");
}

static void print_row(FILE *out, int json, int first, const bm_case *c, const bm_result *r, double peak_gflops,
                      double peak_gbs) {
    const double flops = 2.0 * c->n * (double)c->rows * c->cols;
    const double bytes = (double)r->weight_bytes + 4.0 * c->n * ((double)c->cols + c->rows);
    const double gflops = flops / (r->ms * 1e6), gbs = bytes / (r->ms * 1e6);
    const double roof = fmin(peak_gflops, flops / bytes * peak_gbs);
    const double pct = peak_gflops > 0 && peak_gbs > 0 ? 100.0 * gflops / roof : -1;
    const char *tn = clf_type_get(c->type)->name;
    if (json) {
        fprintf(out, "%s\n  {\"kind\": \"%s\", \"type\": \"%s\", \"in\": %d, \"out\": %d, \"n\": %d, \"ms\": %.5f, "
                     "\"gflops\": %.2f, \"gbs\": %.2f",
                first ? "" : ",", c->kind, tn, c->cols, c->rows, c->n, r->ms, gflops, gbs);
        if (pct >= 0) fprintf(out, ", \"roof_pct\": %.1f", pct);
        if (r->clblast_ms > 0)
            fprintf(out, ", \"clblast_ms\": %.5f, \"clblast_ratio\": %.3f", r->clblast_ms, r->clblast_ms / r->ms);
        if (r->blas_ms > 0)
            fprintf(out, ", \"openblas_ms\": %.5f, \"openblas_ratio\": %.3f", r->blas_ms, r->blas_ms / r->ms);
        fprintf(out, "}");
        return;
    }
    char shape[32], pcts[16] = "", cl[2][16] = {"", ""}, bl[2][16] = {"", ""};
    snprintf(shape, sizeof shape, "%d->%d", c->cols, c->rows);
    if (pct >= 0) snprintf(pcts, sizeof pcts, "%.0f%%", pct);
    if (r->clblast_ms > 0) {
        snprintf(cl[0], sizeof cl[0], "%.3f", r->clblast_ms);
        snprintf(cl[1], sizeof cl[1], "%.2f", r->clblast_ms / r->ms);
    }
    if (r->blas_ms > 0) {
        snprintf(bl[0], sizeof bl[0], "%.3f", r->blas_ms);
        snprintf(bl[1], sizeof bl[1], "%.2f", r->blas_ms / r->ms);
    }
    fprintf(out, "%-9s %-6s %12s %4d %9.3f %8.1f %7.1f %6s %11s %6s %11s %6s\n", c->kind, tn, shape, c->n, r->ms,
            gflops, gbs, pcts, cl[0], cl[1], bl[0], bl[1]);
    fflush(out);
}

static clf_status bench_case(clf_runtime *rt, const bm_case *c, uint64_t seed, bm_result *r) {
    bm_ctx ctx;
    memset(r, 0, sizeof *r);
    CLF_TRY(ctx_init(rt, c, seed, &ctx));
    r->weight_bytes = ctx.w.bytes;
    clf_status st = median_ms(ctx.cold ? run_cold : run_native, &ctx, 5, &r->ms);
    if (st == CLF_OK && c->n > 1 && clf_clblast_available()) st = median_ms(run_clblast, &ctx, 1, &r->clblast_ms);
#ifdef CLINFER_HAVE_OPENBLAS
    if (st == CLF_OK && !ctx.cold && (rt->dev.type & CL_DEVICE_TYPE_CPU))
        st = median_ms(run_openblas, &ctx, 3, &r->blas_ms);
#endif
    ctx_free(&ctx);
    return st;
}

int clf_bench_matmul(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs) {
    static const int shapes[][2] = {{576, 576}, {576, 192}, {576, 1536}, {1536, 576}, {576, 49152}}; /* in, out */
    static const clf_type types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0, CLF_Q4_1};
    enum { NS = sizeof shapes / sizeof shapes[0], NT = sizeof types / sizeof types[0] };
    /* every type at a 7B model's 4096 -> 4096: the GEMV, and prefill for the
     * rest of the table's types (cl/types.cl) */
    clf_type more[CLF_NTYPES];
    int NM = 0;
    for (int i = 0; i < CLF_NTYPES; i++) {
        int first = 0;
        for (int t = 0; t < NT; t++) first |= clf_type_list[i] == types[t];
        if (!first) more[NM++] = clf_type_list[i];
    }
    bm_case cases[2 * NS * NT + 2 + NT + 2 * CLF_NTYPES + 4 + NS * 3 + 2 + 9];
    int nc = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < NS; s++)
            for (int t = 0; t < NT; t++)
                cases[nc++] = (bm_case){pass ? "gemm" : "gemv", types[t], shapes[s][0], shapes[s][1], pass ? 512 : 1};
    cases[nc++] = (bm_case){"gemm", CLF_F32, 1024, 1024, 1024};
    cases[nc++] = (bm_case){"gemm", CLF_F32, 2048, 2048, 2048};
    for (int t = 0; t < NT; t++) cases[nc++] = (bm_case){"gemv", types[t], 4096, 4096, 1};
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < NM; t++) cases[nc++] = (bm_case){pass ? "gemm" : "gemv", more[t], 4096, 4096, pass ? 512 : 1};
    /* the 256-row Llama's prefill products, up and down (issue 12's pp512) */
    for (int t = 0; t < 2; t++) {
        cases[nc++] = (bm_case){"gemm", t ? CLF_Q6_K : CLF_Q4_K, 1024, 2816, 512};
        cases[nc++] = (bm_case){"gemm", t ? CLF_Q6_K : CLF_Q4_K, 2816, 1024, 512};
    }
    /* decode as a token meets it: each product's weights cold (issue 15) */
    static const clf_type cold_types[] = {CLF_Q8_0, CLF_Q4_1, CLF_F16};
    for (int s = 0; s < NS; s++)
        for (int t = 0; t < 3; t++) cases[nc++] = (bm_case){"gemv_cold", cold_types[t], shapes[s][0], shapes[s][1], 1};
    /* and the K-quant target's 4096 -> 4096 (issue 12), whose warm row above fits a large cache */
    cases[nc++] = (bm_case){"gemv_cold", CLF_Q4_K, 4096, 4096, 1};
    cases[nc++] = (bm_case){"gemv_cold", CLF_Q6_K, 4096, 4096, 1};
    /* the gpu variant's int8 GEMV targets (issue 15): Q4_0 at the head, and
     * a 7B model's 4096 -> 4096 and 4096 -> 11008 */
    if (!strcmp(clf_matmul_variant(rt), "gpu")) {
        static const clf_type gt[] = {CLF_Q8_0, CLF_Q4_0, CLF_Q4_1, CLF_F16};
        cases[nc++] = (bm_case){"gemv_cold", CLF_Q4_0, 576, 49152, 1};
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 4; t++) cases[nc++] = (bm_case){"gemv_cold", gt[t], 4096, s ? 11008 : 4096, 1};
    }

    if (json)
        fprintf(out, "[");
    else
        print_header(out, rt, peak_gflops, peak_gbs);
    for (int i = 0; i < nc; i++) {
        bm_result r;
        clf_status st = bench_case(rt, &cases[i], 0x9e3779b97f4a7c15ull + (uint64_t)i, &r);
        if (st != CLF_OK) {
            if (json) fprintf(out, "\n]\n");
            return clf_fail_ctx(st, "bench %s %s %d->%d n=%d: ", cases[i].kind, clf_type_get(cases[i].type)->name,
                                cases[i].cols, cases[i].rows, cases[i].n);
        }
        print_row(out, json, i == 0, &cases[i], &r, peak_gflops, peak_gbs);
    }
    if (json) fprintf(out, "\n]\n");
    return CLF_OK;
}

#include "bench_ops.h"

#include <stdlib.h>

#include "check.h"
#include "ops.h"
#include "roof.h"
#include "sampler.h"
#include "select.h"

/* SmolLM2-135M: d = 576, ff = 1536, 9 + 3 heads of 64 (Q and K side by side
 * in a fused QKV row of 576 + 2 * 192), vocab 49152. */
enum { D = 576, FF = 1536, HEADS_QK = 12, HEAD_DIM = 64, QKV = 960, VOCAB = 49152, PREFILL = 512 };
enum { VOCAB_BIG = 262144 }; /* Gemma 3's */
#define ROPE_BASE 100000.0f
#define EMBD_ROWS 4096 /* a lookup costs the same in a smaller table */

typedef struct ops_ctx {
    clf_tensor x, r, w, qkv, gu, ff, logits, embd, logits_big;
    cl_mem ids;
    int rows; /* tokens of the current row */
    /* from a token's logits to the next token: the sampler (llama.cpp's
     * defaults, top-k 40) on every logit read back, or on the 40 best
     * chosen on the device (clf_llama_eval_top) */
    clf_sampler *smp[2];
    clf_topk topk;
    float *host;
} ops_ctx;

static clf_status run_get_rows(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    clf_tensor x = clf_tensor_rows(&c->x, 0, c->rows);
    return clf_get_rows(rt, &c->embd, c->ids, c->rows, &x);
}
static clf_status run_rmsnorm(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    clf_tensor x = clf_tensor_rows(&c->x, 0, c->rows), y = clf_tensor_rows(&c->r, 0, c->rows);
    return clf_rmsnorm(rt, &x, &c->w, 1e-5f, &y, 0);
}
static clf_status run_rope(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    const clf_rope_params rp = {.mode = CLF_ROPE_NORM, .n_rot = HEAD_DIM, .base = ROPE_BASE, .freq_scale = 1.0f};
    return clf_rope(rt, &c->qkv, c->rows, QKV, 0, HEADS_QK, HEAD_DIM, 100, &rp);
}
static clf_status run_swiglu(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    clf_tensor gu = clf_tensor_rows(&c->gu, 0, c->rows), y = clf_tensor_rows(&c->ff, 0, c->rows);
    return clf_glu(rt, CLF_GLU_SILU, &gu, &y);
}
static clf_status run_add(clf_runtime *rt, void *p) { /* the residual add: x += r */
    ops_ctx *c = p;
    clf_tensor x = clf_tensor_rows(&c->x, 0, c->rows), r = clf_tensor_rows(&c->r, 0, c->rows);
    return clf_add(rt, &x, &r, &x);
}
static clf_status run_softmax(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    clf_tensor l = clf_tensor_rows(&c->logits, 0, c->rows);
    return clf_softmax(rt, &l);
}

static clf_status logits_of(ops_ctx *c, const clf_tensor **l, clf_sampler **smp) {
    const int big = c->rows == VOCAB_BIG;
    *l = big ? &c->logits_big : &c->logits;
    *smp = c->smp[big];
    return CLF_OK;
}
static clf_status run_sample_all(clf_runtime *rt, void *p) {
    ops_ctx *c = p;
    const clf_tensor *l;
    clf_sampler *smp;
    logits_of(c, &l, &smp);
    CLF_TRY(clf_tensor_download(rt, l, c->host, clf_tensor_bytes(l)));
    return clf_sampler_sample(smp, c->host, c->rows) < 0 ? CLF_ERR_ARG : CLF_OK;
}
static clf_status run_sample_top(clf_runtime *rt, void *p) {
    (void)rt;
    ops_ctx *c = p;
    const clf_tensor *l;
    clf_sampler *smp;
    logits_of(c, &l, &smp);
    float vals[CLF_TOPK_MAX];
    int32_t ids[CLF_TOPK_MAX];
    int bad, k = clf_sampler_top_k(smp, CLF_TOPK_MAX);
    CLF_TRY(clf_topk_read(&c->topk, l, k, vals, ids, &bad));
    return clf_sampler_sample_top(smp, vals, ids, k) < 0 ? CLF_ERR_ARG : CLF_OK;
}

typedef struct bench_row {
    const char *op, *shape;
    clf_bench_launch fn;
    int rows;
    double bytes; /* the minimum: each input read once, each output written once */
} bench_row;

static clf_status setup(clf_runtime *rt, ops_ctx *c) {
    uint64_t s = clf_rng_init(1, 0);
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, D, PREFILL, &c->x));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, D, PREFILL, &c->r));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, D, 1, &c->w));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, QKV, PREFILL, &c->qkv));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, 2 * FF, PREFILL, &c->gu));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, FF, PREFILL, &c->ff));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, VOCAB, 1, &c->logits));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, VOCAB_BIG, 1, &c->logits_big));
    clf_tensor *inputs[] = {&c->x, &c->r, &c->w, &c->qkv, &c->gu, &c->logits, &c->logits_big};
    for (int i = 0; i < 7; i++) CLF_TRY(clf_rng_fill_tensor(rt, inputs[i], &s, -1.0f, 1.0f));
    const clf_sampler_params sp = clf_sampler_defaults();
    CLF_TRY(clf_sampler_create(&sp, VOCAB, &c->smp[0]));
    CLF_TRY(clf_sampler_create(&sp, VOCAB_BIG, &c->smp[1]));
    CLF_TRY(clf_topk_create(rt, &c->topk));
    if (!(c->host = malloc(VOCAB_BIG * sizeof *c->host))) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    /* a Q8_0 table of valid blocks (quantized random rows) */
    size_t n = (size_t)EMBD_ROWS * D;
    float *f = malloc(n * sizeof *f);
    void *q = malloc(clf_row_bytes(CLF_Q8_0, D) * EMBD_ROWS);
    int *ids = malloc(PREFILL * sizeof *ids);
    clf_status st = f && q && ids ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) {
        for (size_t i = 0; i < n; i++) f[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        clf_quantize(CLF_Q8_0, f, q, (int64_t)n);
        for (int i = 0; i < PREFILL; i++) ids[i] = (i * 977) % EMBD_ROWS;
        st = clf_tensor_alloc(rt, CLF_Q8_0, D, EMBD_ROWS, &c->embd);
    }
    if (st == CLF_OK) st = clf_tensor_upload(rt, &c->embd, q, clf_tensor_bytes(&c->embd));
    if (st == CLF_OK)
        st = clf_buffer_create(rt, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, PREFILL * sizeof *ids, ids, &c->ids);
    free(f), free(q), free(ids);
    return st;
}

static void teardown(ops_ctx *c) {
    clf_tensor *ts[] = {&c->x, &c->r, &c->w, &c->qkv, &c->gu, &c->ff, &c->logits, &c->embd, &c->logits_big};
    for (int i = 0; i < 9; i++) clf_tensor_free(ts[i]);
    clf_sampler_free(c->smp[0]);
    clf_sampler_free(c->smp[1]);
    clf_topk_free(&c->topk);
    free(c->host);
    if (c->ids) clReleaseMemObject(c->ids);
}

clf_status clf_bench_ops(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs) {
    (void)peak_gflops; /* a few FLOPs per byte: these ops are judged by bandwidth and launch cost */
    const double q8_row = (double)clf_row_bytes(CLF_Q8_0, D), f = sizeof(float);
    const bench_row rows[] = {
        {"get_rows", "Q8_0 576, 1 id", run_get_rows, 1, q8_row + D * f},
        {"get_rows", "Q8_0 576, 512 ids", run_get_rows, PREFILL, PREFILL * (q8_row + D * f)},
        {"rmsnorm", "1x576", run_rmsnorm, 1, (2.0 * D + D) * f},
        {"rmsnorm", "512x576", run_rmsnorm, PREFILL, (2.0 * PREFILL * D + D) * f},
        {"rope", "q+k 1x12x64 in 960", run_rope, 1, 2.0 * HEADS_QK * HEAD_DIM * f},
        {"rope", "q+k 512x12x64 in 960", run_rope, PREFILL, 2.0 * PREFILL * HEADS_QK * HEAD_DIM * f},
        {"swiglu", "1x1536", run_swiglu, 1, 3.0 * FF * f},
        {"swiglu", "512x1536", run_swiglu, PREFILL, 3.0 * PREFILL * FF * f},
        {"add", "1x576", run_add, 1, 3.0 * D * f},
        {"add", "512x576", run_add, PREFILL, 3.0 * PREFILL * D * f},
        {"softmax", "1x49152", run_softmax, 1, 2.0 * VOCAB * f},
        /* a token from its logits (the bytes: the row read once) */
        {"sample", "all of 49152", run_sample_all, VOCAB, VOCAB * f},
        {"sample", "top 40 of 49152", run_sample_top, VOCAB, VOCAB * f},
        {"sample", "all of 262144", run_sample_all, VOCAB_BIG, VOCAB_BIG * f},
        {"sample", "top 40 of 262144", run_sample_top, VOCAB_BIG, VOCAB_BIG * f},
    };
    const int nrows = (int)(sizeof rows / sizeof rows[0]);
    ops_ctx c = {0};
    clf_status st = setup(rt, &c);
    if (json) fprintf(out, "[");
    else fprintf(out, "%-9s %-22s %10s %9s %7s\n", "op", "shape", "us/op", "GB/s", "%copy");
    for (int i = 0; i < nrows && st == CLF_OK; i++) {
        double us;
        c.rows = rows[i].rows;
        /* batches long enough to amortize the final clFinish */
        st = clf_bench_batched_us(rt, rows[i].fn, &c, rows[i].rows == 1 ? 200 : 20, 5, &us); /* sample: each waits */
        if (st != CLF_OK) break;
        double gbs = rows[i].bytes / (us * 1e-6) * 1e-9, pct = peak_gbs > 0 ? 100.0 * gbs / peak_gbs : 0;
        if (json)
            fprintf(out, "%s\n    {\"op\": \"%s\", \"shape\": \"%s\", \"us\": %.3f, \"bytes\": %.0f, \"gbs\": %.3f, "
                         "\"pct_copy\": %.2f}",
                    i ? "," : "", rows[i].op, rows[i].shape, us, rows[i].bytes, gbs, pct);
        else
            fprintf(out, "%-9s %-22s %10.2f %9.2f %6.1f%%\n", rows[i].op, rows[i].shape, us, gbs, pct);
    }
    if (json) fprintf(out, "\n  ]");
    teardown(&c);
    return st;
}

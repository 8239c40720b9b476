#include "bench_launches.h"

#include <stdlib.h>
#include <string.h>

#include <CL/cl_ext.h>

#include "check.h"
#include "cli.h"
#include "json.h"
#include "matmul.h"
#include "ops.h"
#include "options.h"
#include "quant.h"
#include "roof.h"

static const char *USAGE = "clinfer bench launches [--device SEL] [--layers 30] [--rounds 15] [--json]";

/* SmolLM2-135M's decode shapes (bench_ops.c): d 576, ff 1536, Q|K|V 960. */
enum { D = 576, FF = 1536, QKV = 960, HEADS_QK = 12, HEAD_DIM = 64 };

/* cl_khr_command_buffer 0.9 (PoCL 3.1), through the platform's entry points. */
typedef struct cb_api {
    clCreateCommandBufferKHR_fn create;
    clFinalizeCommandBufferKHR_fn finalize;
    clReleaseCommandBufferKHR_fn release;
    clEnqueueCommandBufferKHR_fn enqueue;
    clCommandNDRangeKernelKHR_fn ndrange;
} cb_api;

/* Whether the space-separated list names `name` itself (not a longer name
 * it begins, as cl_khr_command_buffer_mutable_dispatch). */
static int has_word(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return 1;
    return 0;
}

static int cb_api_load(const clf_runtime *rt, cb_api *a) {
    size_t n = 0;
    if (clGetDeviceInfo(rt->dev.id, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS) return 0;
    char *ext = calloc(n + 1, 1);
    int has = ext && clGetDeviceInfo(rt->dev.id, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS &&
              has_word(ext, "cl_khr_command_buffer");
    free(ext);
    if (!has) return 0;
    cl_platform_id p = rt->dev.platform;
    a->create = (clCreateCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(p, "clCreateCommandBufferKHR");
    a->finalize = (clFinalizeCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(p, "clFinalizeCommandBufferKHR");
    a->release = (clReleaseCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(p, "clReleaseCommandBufferKHR");
    a->enqueue = (clEnqueueCommandBufferKHR_fn)clGetExtensionFunctionAddressForPlatform(p, "clEnqueueCommandBufferKHR");
    a->ndrange = (clCommandNDRangeKernelKHR_fn)clGetExtensionFunctionAddressForPlatform(p, "clCommandNDRangeKernelKHR");
    return a->create && a->finalize && a->release && a->enqueue && a->ndrange;
}

/* OpenCL 2.1 core (the headers here stop at 1.2); every platform with
 * cl_khr_command_buffer has it. */
extern CL_API_ENTRY cl_kernel CL_API_CALL clCloneKernel(cl_kernel source_kernel, cl_int *errcode_ret);

/* clf_launch's record hook: each kernel after the one before (a sync-point
 * chain, so the buffer runs in order whatever the queue). Each command gets
 * its own clone of the kernel: PoCL 3.1 reads a recorded kernel's arguments
 * when the buffer runs, not when it is recorded (as the extension says), so
 * a kernel launched twice with different arguments would replay twice with
 * the last ones (RESULTS.md, "Command buffers"); and a clone of a kernel
 * holding a NULL buffer argument faults, so the token below avoids them. */
typedef struct recorder {
    const cb_api *api;
    cl_command_buffer_khr cb;
    cl_sync_point_khr last;
    cl_kernel *clones;
    int n, cap;
} recorder;

static cl_int record_kernel(void *ud, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local) {
    recorder *r = ud;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 512;
        cl_kernel *grown = realloc(r->clones, (size_t)cap * sizeof *grown);
        if (!grown) return CL_OUT_OF_HOST_MEMORY;
        r->clones = grown, r->cap = cap;
    }
    cl_int err;
    cl_kernel clone = clCloneKernel(k, &err);
    if (err != CL_SUCCESS) return err;
    cl_sync_point_khr sp;
    err = r->api->ndrange(r->cb, NULL, NULL, clone, dims, NULL, global, local, r->n ? 1 : 0, r->n ? &r->last : NULL,
                          &sp, NULL);
    if (err != CL_SUCCESS) {
        clReleaseKernel(clone);
        return err;
    }
    r->clones[r->n++] = clone;
    r->last = sp;
    return CL_SUCCESS;
}

static void recorder_free(recorder *r) {
    if (r->cb) r->api->release(r->cb);
    for (int i = 0; i < r->n; i++) clReleaseKernel(r->clones[i]);
    free(r->clones);
}

/* One decode layer's launches; which ones a workload takes. */
typedef enum { RMSNORM, GEMV_QKV, ROPE, SMALL_A, SMALL_B, SMALL_C, GEMV_WO, RMSNORM2, GEMV_GU, SWIGLU, GEMV_DOWN } step;
typedef struct workload {
    const char *name, *what;
    int n;
    step steps[11];
    int gemvs; /* 0: every GEMV replaced by a 576-float add (launch cost alone) */
} workload;

static const workload WORKLOADS[] = {
    {"layer11", "a decode layer as today: 2 norms, 4 Q4_1 GEMVs, RoPE, SwiGLU, 3 small ops for KV write/attention",
     11, {RMSNORM, GEMV_QKV, ROPE, SMALL_A, SMALL_B, SMALL_C, GEMV_WO, RMSNORM2, GEMV_GU, SWIGLU, GEMV_DOWN}, 1},
    {"layer7", "the fused target: norm, 4 Q4_1 GEMVs, RoPE, one attention op", 7,
     {RMSNORM, GEMV_QKV, ROPE, SMALL_A, GEMV_WO, GEMV_GU, GEMV_DOWN}, 1},
    {"ops11", "11 small ops a layer (GEMVs replaced by 576-float adds): launch cost alone", 11,
     {RMSNORM, GEMV_QKV, ROPE, SMALL_A, SMALL_B, SMALL_C, GEMV_WO, RMSNORM2, GEMV_GU, SWIGLU, GEMV_DOWN}, 0},
};

typedef struct token {
    int layers;
    clf_weight *qkv, *wo, *gu, *down; /* one of each per layer */
    clf_tensor x, r, w, qkvt, gut, fft, a, b;
    clf_tensor rq, fq; /* r and fft quantized for the GEMVs, as the decode path passes them */
    /* RoPE factors of 1, and the _xq launchers: PoCL 3.1's clCloneKernel
     * faults on a NULL buffer argument (see record_kernel) */
    clf_tensor freqs;
} token;

static clf_status upload_random(clf_runtime *rt, int rows, int cols, uint64_t *s, clf_weight *w) {
    size_t n = (size_t)rows * cols;
    float *f = malloc(n * sizeof *f);
    void *q = malloc(clf_row_bytes(CLF_Q4_1, cols) * rows);
    clf_status st = f && q ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) {
        for (size_t i = 0; i < n; i++) f[i] = clf_rng_uniform(s, -0.05f, 0.05f);
        clf_quantize(CLF_Q4_1, f, q, (int64_t)n);
        st = clf_weight_upload(rt, CLF_Q4_1, rows, cols, q, w);
    }
    free(f), free(q);
    return st;
}

static clf_status token_setup(clf_runtime *rt, int layers, token *t) {
    uint64_t s = clf_rng_init(3, 0);
    t->layers = layers;
    t->qkv = calloc((size_t)layers * 4, sizeof *t->qkv);
    if (!t->qkv) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    t->wo = t->qkv + layers, t->gu = t->wo + layers, t->down = t->gu + layers;
    for (int l = 0; l < layers; l++) {
        CLF_TRY(upload_random(rt, QKV, D, &s, &t->qkv[l]));
        CLF_TRY(upload_random(rt, D, D, &s, &t->wo[l]));
        CLF_TRY(upload_random(rt, 2 * FF, D, &s, &t->gu[l]));
        CLF_TRY(upload_random(rt, D, FF, &s, &t->down[l]));
    }
    const struct { clf_tensor *t; int n; } ts[] = {{&t->x, D},   {&t->r, D},      {&t->w, D}, {&t->qkvt, QKV},
                                                   {&t->gut, 2 * FF}, {&t->fft, FF}, {&t->a, D}, {&t->b, D}};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, ts[i].n, 1, ts[i].t));
        CLF_TRY(clf_rng_fill_tensor(rt, ts[i].t, &s, -1.0f, 1.0f));
    }
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(D), 1, &t->rq));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(FF), 1, &t->fq));
    float ones[HEAD_DIM / 2];
    for (int i = 0; i < HEAD_DIM / 2; i++) ones[i] = 1.0f;
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, HEAD_DIM / 2, 1, &t->freqs));
    return clf_tensor_upload(rt, &t->freqs, ones, sizeof ones);
}

static void token_free(token *t) {
    for (int i = 0; t->qkv && i < 4 * t->layers; i++) clf_weight_free(&t->qkv[i]);
    free(t->qkv);
    clf_tensor *ts[] = {&t->x, &t->r, &t->w, &t->qkvt, &t->gut, &t->fft, &t->a, &t->b, &t->rq, &t->fq, &t->freqs};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clf_tensor_free(ts[i]);
}

/* A token's launches through the real launchers (clf_launch: enqueued, or
 * recorded while rt->record is set). The small stand-ins write a and b
 * only, so the layer's data flow stays that of a decode layer. */
static clf_status token_launch(clf_runtime *rt, token *t, const workload *w) {
    const clf_rope_params rp = {.mode = CLF_ROPE_NORM, .n_rot = HEAD_DIM, .base = 100000.0f,
        .freq_scale = 1.0f, .factors = &t->freqs};
    for (int l = 0; l < t->layers; l++)
        for (int i = 0; i < w->n; i++) {
            step s = w->steps[i];
            int gemv = s == GEMV_QKV || s == GEMV_WO || s == GEMV_GU || s == GEMV_DOWN;
            if (gemv && !w->gemvs) {
                CLF_TRY(clf_add(rt, &t->a, &t->b, &t->a));
                continue;
            }
            switch (s) {
            case RMSNORM: case RMSNORM2: CLF_TRY(clf_rmsnorm_xq(rt, &t->x, &t->w, 1e-5f, &t->r, &t->rq)); break;
            case GEMV_QKV: CLF_TRY(clf_matmul_rowwise_xq(rt, &t->qkv[l], &t->r, &t->rq, &t->qkvt, 0, 0)); break;
            case ROPE: CLF_TRY(clf_rope(rt, &t->qkvt, 1, QKV, 0, HEADS_QK, HEAD_DIM, 100, &rp)); break;
            case SMALL_A: case SMALL_B: case SMALL_C: CLF_TRY(clf_add(rt, &t->a, &t->b, &t->a)); break;
            case GEMV_WO: CLF_TRY(clf_matmul_rowwise_xq(rt, &t->wo[l], &t->r, &t->rq, &t->x, 0, 1)); break;
            case GEMV_GU: CLF_TRY(clf_matmul_rowwise_xq(rt, &t->gu[l], &t->r, &t->rq, &t->gut, 0, 0)); break;
            case SWIGLU: CLF_TRY(clf_glu_xq(rt, CLF_GLU_SILU, &t->gut, &t->fft, &t->fq)); break;
            case GEMV_DOWN: CLF_TRY(clf_matmul_rowwise_xq(rt, &t->down[l], &t->fft, &t->fq, &t->x, 0, 1)); break;
            }
        }
    return CLF_OK;
}

/* The residual after a token (replay and plain launches from the same
 * start must leave the same bytes). */
static clf_status token_result(clf_runtime *rt, token *t, float *x) {
    CLF_TRY(clf_finish(rt));
    return clf_tensor_download(rt, &t->x, x, D * sizeof *x);
}

typedef struct figures {
    double plain_us, replay_us, record_us; /* per token, medians */
    int launches, identical;
} figures;

static clf_status run_workload(clf_runtime *rt, token *t, const workload *w, const cb_api *api, int rounds,
                               figures *f) {
    enum { MAX_ROUNDS = 101 };
    double plain[MAX_ROUNDS], replay[MAX_ROUNDS];
    float x0[D], xp[D], xr[D];
    *f = (figures){0};
    f->launches = t->layers * w->n;
    /* a fixed start: the residual the first plain run begins from */
    CLF_TRY(clf_finish(rt));
    CLF_TRY(clf_tensor_download(rt, &t->x, x0, sizeof x0));
    CLF_TRY(token_launch(rt, t, w)); /* warm-up: builds, first touches */
    CLF_TRY(clf_tensor_upload(rt, &t->x, x0, sizeof x0));
    CLF_TRY(token_launch(rt, t, w));
    CLF_TRY(token_result(rt, t, xp));
    recorder rec = {api, NULL, 0, NULL, 0, 0};
    if (api) {
        cl_int err;
        double t0 = clf_bench_now_us();
        rec.cb = api->create(1, &rt->queue, NULL, &err);
        CLF_TRY(clf_cl_check(err, "clCreateCommandBufferKHR"));
        rt->record = record_kernel, rt->record_ud = &rec;
        clf_status st = token_launch(rt, t, w);
        rt->record = NULL, rt->record_ud = NULL;
        if (st == CLF_OK) st = clf_cl_check(api->finalize(rec.cb), "clFinalizeCommandBufferKHR");
        f->record_us = clf_bench_now_us() - t0;
        if (st == CLF_OK) st = clf_tensor_upload(rt, &t->x, x0, sizeof x0);
        if (st == CLF_OK) st = clf_cl_check(api->enqueue(1, &rt->queue, rec.cb, 0, NULL, NULL), "clEnqueueCommandBufferKHR");
        if (st == CLF_OK) st = token_result(rt, t, xr);
        if (st != CLF_OK) {
            recorder_free(&rec);
            return st;
        }
        f->identical = !memcmp(xp, xr, sizeof xp);
    }
    if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
    clf_status st = CLF_OK;
    for (int i = 0; i < rounds && st == CLF_OK; i++) { /* interleaved: the machine drifts */
        double t0 = clf_bench_now_us();
        st = token_launch(rt, t, w);
        if (st == CLF_OK) st = clf_finish(rt);
        plain[i] = clf_bench_now_us() - t0;
        if (st != CLF_OK || !api) continue;
        t0 = clf_bench_now_us();
        st = clf_cl_check(api->enqueue(1, &rt->queue, rec.cb, 0, NULL, NULL), "clEnqueueCommandBufferKHR");
        if (st == CLF_OK) st = clf_finish(rt);
        replay[i] = clf_bench_now_us() - t0;
    }
    if (api) recorder_free(&rec);
    if (st != CLF_OK) return st;
    f->plain_us = clf_bench_median(plain, rounds);
    if (api) f->replay_us = clf_bench_median(replay, rounds);
    return CLF_OK;
}

int clf_bench_launches_main(int argc, char **argv) {
    const char *sel = NULL;
    int json = 0, layers = 30, rounds = 15;
    const cli_option opts[] = {CLI_OPT_STR("--device", &sel, .arg = "SEL", .help = "the OpenCL device (P:D or a name's part)"),
                               CLI_OPT_INT("--layers", &layers, 1, 1000, .help = "layers of the synthetic model (default 30)"),
                               CLI_OPT_INT("--rounds", &rounds, 1, 101, .help = "rounds measured (default 15): the median"),
                               CLI_OPT_FLAG("--json", &json, .help = "as JSON"), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clf_runtime *rt;
    clf_status st = clf_runtime_create(sel, &rt);
    if (st != CLF_OK) return cli_error(st);
    cb_api api;
    const cb_api *a = cb_api_load(rt, &api) ? &api : NULL;
    token t = {0};
    st = token_setup(rt, layers, &t);
    FILE *out = stdout;
    if (st == CLF_OK) {
        if (json) {
            fprintf(out, "{\"device\": ");
            cli_json_str(out, rt->dev.name);
            fprintf(out, ", \"command_buffer\": %s, \"layers\": %d, \"rounds\": %d, \"workloads\": [", a ? "true" : "false",
                    layers, rounds);
        } else {
            fprintf(out, "%s: %d layers at SmolLM2-135M's decode shapes (Q4_1), medians of %d interleaved rounds; %s\n",
                    rt->dev.name, layers, rounds,
                    a ? "replay: one clEnqueueCommandBufferKHR of the recorded token (cl_khr_command_buffer)"
                      : "the device has no cl_khr_command_buffer: plain launches only");
            fprintf(out, "%-8s %8s %12s %12s %8s %14s %10s %9s\n", "workload", "launches", "plain us", "replay us",
                    "replay/", "saved us/launch", "record us", "same out");
        }
    }
    const int nw = (int)(sizeof WORKLOADS / sizeof WORKLOADS[0]);
    for (int i = 0; i < nw && st == CLF_OK; i++) {
        figures f;
        st = run_workload(rt, &t, &WORKLOADS[i], a, rounds, &f);
        if (st != CLF_OK) break;
        double saved = a ? (f.plain_us - f.replay_us) / f.launches : 0;
        if (json) {
            fprintf(out, "%s\n  {\"name\": \"%s\", \"what\": ", i ? "," : "", WORKLOADS[i].name);
            cli_json_str(out, WORKLOADS[i].what);
            fprintf(out, ", \"launches\": %d, \"plain_us\": %.1f", f.launches, f.plain_us);
            if (a)
                fprintf(out, ", \"replay_us\": %.1f, \"replay_ratio\": %.4f, \"saved_us_per_launch\": %.3f, "
                             "\"record_us\": %.1f, \"identical\": %s",
                        f.replay_us, f.replay_us / f.plain_us, saved, f.record_us, f.identical ? "true" : "false");
            fprintf(out, "}");
        } else if (a) {
            fprintf(out, "%-8s %8d %12.1f %12.1f %8.3f %14.2f %10.1f %9s\n", WORKLOADS[i].name, f.launches, f.plain_us,
                    f.replay_us, f.replay_us / f.plain_us, saved, f.record_us, f.identical ? "yes" : "NO");
        } else {
            fprintf(out, "%-8s %8d %12.1f\n", WORKLOADS[i].name, f.launches, f.plain_us);
        }
    }
    if (st == CLF_OK && json) fprintf(out, "\n]}\n");
    token_free(&t);
    clf_runtime_free(rt);
    return cli_error(st);
}

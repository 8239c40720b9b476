#include "bench_attention.h"

#include <stdlib.h>

#include "attention.h"
#include "check.h"
#include "roof.h"

/* SmolLM2-135M: Q, K, V side by side in a fused QKV row. */
enum { N_HEAD = 9, N_KV_HEAD = 3, HEAD_DIM = 64, QKV = (N_HEAD + 2 * N_KV_HEAD) * HEAD_DIM, MAX_CTX = 8192 };
#define SCALE 0.125f /* 1 / sqrt(HEAD_DIM) */

/* The cache types timed: as they come from --kv */
static const clf_type KV_TYPES[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0};
enum { N_KV_TYPES = sizeof KV_TYPES / sizeof KV_TYPES[0] };

typedef struct attn_ctx {
    clf_kv_cache cache[N_KV_TYPES]; /* every position 0 .. MAX_CTX - 1 written */
    clf_tensor qkv, out;
    int kv, n_tokens, pos0, naive; /* the call being timed */
} attn_ctx;

static clf_status run(clf_runtime *rt, void *p) {
    attn_ctx *c = p;
    clf_tensor rows = clf_tensor_rows(&c->qkv, c->pos0, c->n_tokens), out = clf_tensor_rows(&c->out, 0, c->n_tokens);
    const clf_rows q = {&rows, 0, QKV};
    if (c->naive) return clf_attention_naive(rt, &c->cache[c->kv], 0, q, N_HEAD, c->n_tokens, c->pos0, SCALE, &out);
    return clf_attention(rt, &c->cache[c->kv], 0, q, N_HEAD, c->n_tokens, c->pos0, SCALE, &out);
}

static clf_status setup(clf_runtime *rt, attn_ctx *c) {
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, QKV, MAX_CTX, &c->qkv));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, N_HEAD * HEAD_DIM, 4096, &c->out));
    const size_t n = (size_t)QKV * MAX_CTX;
    float *h = malloc(n * sizeof *h);
    if (!h) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    uint64_t s = clf_rng_init(1, 0xA7);
    for (size_t i = 0; i < n; i++) h[i] = clf_rng_uniform(&s, -1.0f, 1.0f);
    clf_status st = clf_tensor_upload(rt, &c->qkv, h, n * sizeof *h);
    free(h);
    const clf_rows k = {&c->qkv, N_HEAD * HEAD_DIM, QKV}, v = {&c->qkv, (N_HEAD + N_KV_HEAD) * HEAD_DIM, QKV};
    for (int i = 0; i < N_KV_TYPES && st == CLF_OK; i++) {
        st = clf_kv_cache_create(rt, KV_TYPES[i], 1, N_KV_HEAD, HEAD_DIM, MAX_CTX, 0, &c->cache[i]);
        if (st == CLF_OK) st = clf_kv_write(rt, &c->cache[i], 0, k, v, MAX_CTX, 0);
    }
    return st == CLF_OK ? clf_finish(rt) : st;
}

static void teardown(attn_ctx *c) {
    for (int i = 0; i < N_KV_TYPES; i++) clf_kv_cache_free(&c->cache[i]);
    clf_tensor_free(&c->qkv);
    clf_tensor_free(&c->out);
}

/* ---- counts ------------------------------------------------------------------ */

/* Causal prefill of L tokens from an empty cache: 2 FLOPs per multiply-add
 * of QKᵀ and of PV over the keys each query sees. */
static double prefill_flops(int L) { return 4.0 * HEAD_DIM * N_HEAD * (double)L * (L + 1) / 2; }

/* Tiled: Q read and O written once; K and V read once per tile of `rows`
 * query rows (token, group head) of a KV head, up to the last key the tile's
 * last token sees. */
static double tiled_bytes(int L, int rows) {
    const int g = N_HEAD / N_KV_HEAD, n_rows = L * g;
    double keys = 0;
    for (int r0 = 0; r0 < n_rows; r0 += rows) keys += (r0 + rows < n_rows ? r0 + rows - 1 : n_rows - 1) / g + 1;
    return 2.0 * L * N_HEAD * HEAD_DIM * sizeof(float) + N_KV_HEAD * keys * 2 * HEAD_DIM * sizeof(float);
}

/* The naive score table S [heads × L × L]. */
static double score_bytes(int L) { return (double)N_HEAD * L * L * sizeof(float); }

/* Naive: Q, K, V read and O written once, plus S written by the score
 * kernel, read three times and written once by the softmax, read by S·V. */
static double naive_bytes(int L) {
    return 2.0 * L * N_HEAD * HEAD_DIM * sizeof(float) + 2.0 * L * N_KV_HEAD * HEAD_DIM * sizeof(float) +
           6 * score_bytes(L);
}

/* Decode: all cached K and V (row_bytes a head's row), Q and O, the split partials written and read. */
static double decode_bytes(int n_kv, size_t row_bytes, int n_split) {
    return 2.0 * n_kv * N_KV_HEAD * (double)row_bytes + 2.0 * N_HEAD * HEAD_DIM * sizeof(float) +
           2.0 * N_HEAD * n_split * (HEAD_DIM + 2) * sizeof(float);
}

static double roof_gflops(double flops, double bytes, double peak_gflops, double peak_gbs) {
    const double mem = flops / bytes * peak_gbs;
    return peak_gflops > 0 && (peak_gbs <= 0 || peak_gflops < mem) ? peak_gflops : mem;
}

/* ---- the bench ---------------------------------------------------------------- */

static clf_status bench_prefill(clf_runtime *rt, attn_ctx *c, int json, FILE *out, double peak_gflops,
                                double peak_gbs, int *first) {
    static const int lens[] = {128, 512, 2048, 4096};
    const int rows = clf_attention_plan(rt, &c->cache[0], 1).prefill_rows;
    if (!json)
        fprintf(out, "prefill (causal, F32 cache; GB/s on the bytes each algorithm moves)\n%6s | %9s %8s %7s %9s %6s |"
                     " %9s %8s %7s %9s %10s | %7s\n",
                "tokens", "tiled ms", "GFLOP/s", "GB/s", "MB moved", "%roof", "naive ms", "GFLOP/s", "GB/s",
                "MB moved", "scores MB", "speedup");
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        const int L = lens[i], reps = L <= 512 ? 8 : 1;
        double us[2];
        c->kv = 0;
        c->n_tokens = L;
        c->pos0 = 0;
        for (int naive = 0; naive < 2; naive++) {
            c->naive = naive;
            CLF_TRY(clf_bench_batched_us(rt, run, c, reps, 3, &us[naive]));
        }
        const double fl = prefill_flops(L), tb = tiled_bytes(L, rows), nb = naive_bytes(L);
        const double tg = fl / us[0] * 1e-3, ng = fl / us[1] * 1e-3;
        const double roof = roof_gflops(fl, tb, peak_gflops, peak_gbs), pct = roof > 0 ? 100 * tg / roof : 0;
        if (json)
            fprintf(out,
                    "%s\n    {\"kernel\": \"attn_prefill\", \"tokens\": %d, \"heads\": \"%d/%d x %d\", \"flops\": %.0f, "
                    "\"tiled_us\": %.1f, \"tiled_gflops\": %.3f, \"tiled_bytes\": %.0f, \"tiled_gbs\": %.3f, "
                    "\"pct_roof\": %.2f, \"naive_us\": %.1f, \"naive_gflops\": %.3f, \"naive_bytes\": %.0f, "
                    "\"naive_gbs\": %.3f, \"score_bytes\": %.0f, \"speedup\": %.3f}",
                    *first ? "" : ",", L, N_HEAD, N_KV_HEAD, HEAD_DIM, fl, us[0], tg, tb, tb / us[0] * 1e-3, pct,
                    us[1], ng, nb, nb / us[1] * 1e-3, score_bytes(L), us[1] / us[0]);
        else
            fprintf(out, "%6d | %9.3f %8.1f %7.1f %9.1f %5.1f%% | %9.3f %8.1f %7.1f %9.1f %10.1f | %6.2fx\n", L,
                    us[0] * 1e-3, tg, tb / us[0] * 1e-3, tb * 1e-6, pct, us[1] * 1e-3, ng, nb / us[1] * 1e-3,
                    nb * 1e-6, score_bytes(L) * 1e-6, us[1] / us[0]);
        *first = 0;
    }
    return CLF_OK;
}

static clf_status bench_decode(clf_runtime *rt, attn_ctx *c, int json, FILE *out, double peak_gbs, int *first) {
    static const int caches[] = {512, 2048, 8192};
    if (!json)
        fprintf(out, "\ndecode (1 token; GB/s on cached K/V + Q/O + split partials)\n%6s %5s %6s | %9s %8s %7s\n",
                "cache", "type", "splits", "us", "GB/s", "%copy");
    for (int kv = 0; kv < N_KV_TYPES; kv++)
        for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++) {
            const int n_kv = caches[i];
            double us;
            c->kv = kv;
            c->n_tokens = 1;
            c->pos0 = n_kv - 1;
            c->naive = 0;
            CLF_TRY(clf_bench_batched_us(rt, run, c, n_kv <= 2048 ? 50 : 20, 5, &us));
            const int n_split = clf_attention_plan(rt, &c->cache[kv], n_kv).n_split;
            const double bytes = decode_bytes(n_kv, clf_kv_row_bytes(KV_TYPES[kv], HEAD_DIM), n_split);
            const double gbs = bytes / us * 1e-3, pct = peak_gbs > 0 ? 100 * gbs / peak_gbs : 0;
            const char *type = clf_type_get(KV_TYPES[kv])->name;
            if (json)
                fprintf(out,
                        "%s\n    {\"kernel\": \"attn_decode\", \"cache\": %d, \"type\": \"%s\", \"splits\": %d, "
                        "\"us\": %.2f, \"bytes\": %.0f, \"gbs\": %.3f, \"pct_copy\": %.2f}",
                        *first ? "" : ",", n_kv, type, n_split, us, bytes, gbs, pct);
            else
                fprintf(out, "%6d %5s %6d | %9.1f %8.1f %6.1f%%\n", n_kv, type, n_split, us, gbs, pct);
            *first = 0;
        }
    return CLF_OK;
}

int clf_bench_attention(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs) {
    attn_ctx c = {0};
    int first = 1;
    clf_status st = setup(rt, &c);
    if (json) fprintf(out, "[");
    if (st == CLF_OK) st = bench_prefill(rt, &c, json, out, peak_gflops, peak_gbs, &first);
    if (st == CLF_OK) st = bench_decode(rt, &c, json, out, peak_gbs, &first);
    if (json) fprintf(out, "\n  ]");
    teardown(&c);
    return st;
}

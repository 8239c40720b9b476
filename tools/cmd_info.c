/* clinfer info: what a model is and what it costs, from the GGUF alone:
 * hyperparameters, parameters per group, bytes per type, FLOPs per token
 * and per prefill, memory for inference and for training, arithmetic
 * intensity, and, given a device's peaks, the roofline ceilings. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "estimate.h"
#include "gguf.h"
#include "options.h"
#include "place.h"
#include "roof.h"

static const char *USAGE =
    "clinfer info [-m MODEL] [--ctx N] [--batch B] [--kv f32|f16] [--device SEL] [--gflops G --gbs B]\n"
    "             [--devices SEL,SEL,... [--split layers] [--split-ratio a,b,...]] [--json]\n"
    "  --ctx: context for the KV cache and attention terms (default: the model's, at most 4096)\n"
    "  --batch: prefill length (default 512, at most the context)\n"
    "  --device: measure that device's roofs (copy GB/s, FMA GFLOP/s; a few seconds) for the roofline\n"
    "  --gflops/--gbs: give the peaks instead (FP32 GFLOP/s, memory GB/s)\n"
    "  --devices: the plan of a split by layers over those devices (refused when a stage does not fit)\n"
    "  --price USD_PER_HOUR: what training and serving cost at the roofs (measured on the default device unless\n"
    "      --device or --gflops/--gbs say otherwise)\n"
    "  --train-tokens N: training tokens (default 20 x parameters, Chinchilla's compute-optimal ratio)\n"
    "  --util F: the fraction of the FMA roof achieved (default 0.4); the copy roof is taken as measured\n"
    "  --serve-tokens N: generated tokens to serve (default 1e6); --parallel N: sequences a decode step (default 1)";

typedef struct tally {
    int64_t count[CLF_GROUP_COUNT];
    double bytes[CLF_GROUP_COUNT];
    int tensors[CLF_TYPE_COUNT];
    int64_t type_elems[CLF_TYPE_COUNT];
    double type_bytes[CLF_TYPE_COUNT];
    double total_bytes;
} tally;

typedef struct report {
    const char *path;
    char name[128];
    const clf_gguf *g;
    clf_model_shape s;
    clf_params p;
    tally file;
    int64_t ctx, batch;
    int kv_bytes; /* 4 or 2 */
    double flops_c1, flops_ctx, flops_prefill;
    double kv_tok[2], kv_ctx[2]; /* [F32, F16] */
    double weights_device, scratch, mem_total[2];
    double bytes_c1, bytes_ctx, bytes_prefill;
    clf_train_mem train_f32, train_mixed;
    double act, act_flash;
    int has_roof;
    clf_roof roof;
    char roof_source[200]; /* the device measured, or "given" */
    clf_bound dec_c1, dec_ctx, pre;
    const clf_place_split *split; /* --devices: the plan */
    /* --price: money matters */
    double price, util;
    int chinchilla; /* the training tokens are 20 x parameters, not given */
    clf_train_cost train;
    clf_serve_cost serve;
} report;

static void tally_file(const clf_gguf *g, tally *t) {
    memset(t, 0, sizeof *t);
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *x = clf_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(x->name.len < 127 ? x->name.len : 127), x->name.ptr);
        int64_t n = x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3];
        clf_group gr = clf_group_of_tensor(name);
        t->count[gr] += n;
        t->bytes[gr] += (double)x->bytes;
        t->tensors[x->type]++;
        t->type_elems[x->type] += n;
        t->type_bytes[x->type] += (double)x->bytes;
        t->total_bytes += (double)x->bytes;
    }
}

static void compute(report *r) {
    const clf_model_shape *s = &r->s;
    r->p = clf_estimate_params(s);
    tally_file(r->g, &r->file);
    r->flops_c1 = clf_flops_token(s, 1);
    r->flops_ctx = clf_flops_token(s, r->ctx);
    r->flops_prefill = clf_flops_prefill(s, r->batch);
    r->scratch = clf_scratch_bytes(s, r->batch);
    r->weights_device = clf_device_weight_bytes(s);
    for (int k = 0; k < 2; k++) {
        r->kv_tok[k] = clf_kv_bytes_per_token(s, k ? 2 : 4);
        r->kv_ctx[k] = clf_kv_cache_bytes(s, r->ctx, r->batch, k ? 2 : 4);
        r->mem_total[k] = r->weights_device + r->kv_ctx[k] + r->scratch;
    }
    r->bytes_c1 = clf_bytes_token(s, 1, r->kv_bytes);
    r->bytes_ctx = clf_bytes_token(s, r->ctx, r->kv_bytes);
    r->bytes_prefill = clf_bytes_prefill(s, r->batch, r->kv_bytes);
    r->train_f32 = clf_train_mem_f32(r->p.total);
    r->train_mixed = clf_train_mem_mixed(r->p.total);
    r->act = clf_train_activation_bytes(s, r->ctx, 1, 0);
    r->act_flash = clf_train_activation_bytes(s, r->ctx, 1, 1);
    if (r->has_roof) {
        r->dec_c1 = clf_roofline(r->flops_c1, r->bytes_c1, 1, r->roof);
        r->dec_ctx = clf_roofline(r->flops_ctx, r->bytes_ctx, 1, r->roof);
        r->pre = clf_roofline(r->flops_prefill, r->bytes_prefill, (double)r->batch, r->roof);
    }
    if (r->price > 0) {
        double tokens = r->train.tokens > 0 ? r->train.tokens : CLF_CHINCHILLA_TOKENS_PER_PARAM * (double)r->p.total;
        r->train = clf_estimate_train_cost((double)r->p.total, tokens, r->roof.gflops, r->util, r->price);
        r->serve = clf_estimate_serve_cost(s, r->serve.tokens, r->serve.parallel, r->kv_bytes, r->roof, r->util, r->price);
    }
}

/* ---- text ------------------------------------------------------------------ */

static const char *human(double v, const char *unit, char *buf) {
    static const char *const pre[] = {"", " K", " M", " G", " T", " P"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 5) v /= 1000, i++;
    snprintf(buf, 32, i ? "%.2f%s%s" : "%.0f%s%s", v, pre[i], unit);
    return buf;
}

static const char *mib(double bytes, char *buf) {
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, 32, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(buf, 32, "%.2f MiB", bytes / (1024.0 * 1024));
    else snprintf(buf, 32, "%.1f KiB", bytes / 1024.0);
    return buf;
}

static const char *type_name(clf_type t) { return clf_type_get(t) ? clf_type_get(t)->name : "?"; }

static const char *duration(double s, char *buf) {
    if (s < 120) snprintf(buf, 32, "%.3g s", s);
    else if (s < 7200) snprintf(buf, 32, "%.3g min", s / 60);
    else if (s < 2 * 86400) snprintf(buf, 32, "%.3g h", s / 3600);
    else if (s < 2 * 365.25 * 86400) snprintf(buf, 32, "%.4g days", s / 86400);
    else snprintf(buf, 32, "%.4g years", s / (365.25 * 86400));
    return buf;
}

static const char *dollars(double usd, char *buf) {
    snprintf(buf, 32, usd >= 1e4 ? "$%.0f" : "$%.4g", usd);
    return buf;
}

/* The deck's "money matters": compute turned into time and dollars. */
static void print_money(const report *r) {
    char a[32], b[32], c[32], d[32];
    const double peak = r->util * r->roof.gflops;
    printf("\nmoney at $%.2f an hour (%.0f%% of the FMA roof = %.1f GFLOP/s; memory at the copy roof, %.1f GB/s)\n",
           r->price, 100 * r->util, peak, r->roof.gbs);
    const clf_train_cost *t = &r->train;
    printf("  training on %s tokens (%s):\n", human(t->tokens, "", a),
           r->chinchilla ? "20 x parameters, Chinchilla's compute-optimal ratio; --train-tokens to change" : "--train-tokens");
    printf("    6 * N * D = 6 * %s parameters * %s tokens = %.3g FLOP -> %s at %.1f GFLOP/s -> %s\n",
           human(t->params, "", b), human(t->tokens, "", c), t->flops, duration(t->seconds, a), peak, dollars(t->usd, d));
    const clf_serve_cost *v = &r->serve;
    printf("  serving %s generated tokens, %d sequence%s a decode step (short context; --serve-tokens, --parallel):\n",
           human(v->tokens, "", a), v->parallel, v->parallel > 1 ? "s" : "");
    printf("    a step computes %d x %s (2*P_mm + attention at c = 1) = %.3f ms at %.1f GFLOP/s,\n", v->parallel,
           human(v->flops_token, "FLOP", a), v->t_compute_s * 1e3, peak);
    printf("    reads %s (the weights once, each sequence's K and V) = %.3f ms at %.1f GB/s\n", mib(v->bytes_step, b),
           v->t_memory_s * 1e3, r->roof.gbs);
    printf("    %s-bound: %.3f ms a step -> %s for all -> %s (%s per million tokens)\n",
           v->memory_bound ? "memory" : "compute", (v->memory_bound ? v->t_memory_s : v->t_compute_s) * 1e3,
           duration(v->seconds, c), dollars(v->usd, a), dollars(v->usd_per_mtok, d));
}

static void print_text(const report *r) {
    const clf_model_shape *s = &r->s;
    char a[32], b[32], c[32], d[32];
    printf("%s\n  %s: GGUF v%" PRIu32 ", %s, alignment %zu, %" PRId64 " tensors, %" PRId64 " metadata keys\n",
           r->name, r->path, clf_gguf_version(r->g), mib((double)clf_gguf_size(r->g), a), clf_gguf_alignment(r->g),
           clf_gguf_n_tensors(r->g), clf_gguf_n_kv(r->g));
    char swa[96] = "";
    if (s->n_swa_layers)
        snprintf(swa, sizeof swa, ", sliding window %" PRId64 " on %" PRId64 " of the layers", s->n_swa, s->n_swa_layers);
    char moe[96] = "";
    if (s->n_expert)
        snprintf(moe, sizeof moe, ", %" PRId64 " experts of n_ff %" PRId64 " (%" PRId64 " a token)", s->n_expert,
                 s->n_ff_exp, s->n_expert_used);
    printf("  %s: %" PRId64 " layers, n_embd %" PRId64 ", n_ff %" PRId64 "%s, %" PRId64 " heads / %" PRId64
           " KV heads, head_dim %" PRId64 ", vocab %" PRId64 ", trained context %" PRId64 "%s%s%s%s%s\n\n",
           s->arch, s->n_layer, s->n_embd, s->n_ff, moe, s->n_head, s->n_head_kv, s->head_dim, s->n_vocab,
           s->n_ctx_train, s->tied ? ", tied embeddings" : "", s->qkv_bias ? ", Q/K/V biases" : "",
           s->qk_norm ? ", QK-norm" : "", s->post_norms ? ", post-norms" : "", swa);

    printf("parameters       %12s %7s  %-5s %12s %12s\n", "count", "share", "type", "bytes", "in the file");
    static const clf_type none = (clf_type)-1;
    const clf_type gt[CLF_GROUP_COUNT] = {s->type_embd, s->type_attn, s->type_ffn, s->type_norm, s->type_out, none};
    int mismatch = 0;
    for (int g = 0; g < CLF_GROUP_COUNT; g++) {
        if (g == CLF_GROUP_OTHER && !r->file.count[g]) continue;
        int differs = r->file.count[g] != r->p.count[g] || fabs(r->file.bytes[g] - r->p.bytes[g]) > 0.5;
        mismatch |= differs;
        printf("  %-14s %12" PRId64 " %6.1f%%  %-5s %12s %12s%s\n",
               g == CLF_GROUP_OUTPUT && s->tied ? "output (tied)" : clf_group_name((clf_group)g), r->p.count[g],
               100.0 * r->p.count[g] / r->p.total, r->p.count[g] && gt[g] != none ? type_name(gt[g]) : "",
               mib(r->p.bytes[g], a), mib(r->file.bytes[g], b), differs ? "  *" : "");
    }
    printf("  %-14s %12" PRId64 " (%s) %5s %12s %12s\n", "total", r->p.total, human((double)r->p.total, "", a), "",
           mib(r->p.total_bytes, b), mib(r->file.total_bytes, c));
    if (mismatch) printf("  * the file differs from the estimate from hyperparameters\n");
    printf("  by type in the file:");
    for (int t = 0; t < CLF_TYPE_COUNT; t++)
        if (r->file.tensors[t])
            printf(" %s %d tensors %s (%.3f B/weight);", type_name((clf_type)t), r->file.tensors[t],
                   mib(r->file.type_bytes[t], a), r->file.type_bytes[t] / (double)r->file.type_elems[t]);
    printf("\n\n");

    printf("compute (a multiply-add = 2 FLOPs; norms, RoPE, softmax, SwiGLU left out)\n");
    printf("  P_mm = weights a token multiplies (layer matrices + output projection) = %" PRId64 "\n", r->p.matmul);
    printf("  per token attending to c positions: 2*P_mm + 4*n_layer*n_head*head_dim*c = %s + %.0f*c\n",
           human(2.0 * r->p.matmul, "FLOP", a), 4.0 * s->n_layer * s->n_head * s->head_dim);
    if (s->n_swa_layers)
        printf("    (n_layer*c is the keys attended: %" PRId64 " layers see at most the %" PRId64 "-token window)\n",
               s->n_swa_layers, s->n_swa);
    printf("    c = 1: %s    c = %" PRId64 ": %s\n", human(r->flops_c1, "FLOP", a), r->ctx, human(r->flops_ctx, "FLOP", b));
    printf("  prefill of B = %" PRId64 " tokens: 2*P_layers*B + 2*n_vocab*n_embd (last logits) + 4*n_layer*n_head*head_dim*B(B+1)/2\n",
           r->batch);
    printf("    = %s (%s per token)\n\n", human(r->flops_prefill, "FLOP", a),
           human(r->flops_prefill / (double)r->batch, "FLOP", b));

    printf("memory for inference (context %" PRId64 ", batch %" PRId64 ")\n", r->ctx, r->batch);
    printf("  weights (as stored)              %s\n", mib(r->file.total_bytes, a));
    if (s->tied)
        printf("  weights on a clinfer device      %s (the tied embedding twice: lookup rows, output matrix)\n",
               mib(r->weights_device, a));
    printf("  KV cache per token: 2*n_layer*n_head_kv*head_dim*bytes = F32 %s, F16 %s\n", mib(r->kv_tok[0], a),
           mib(r->kv_tok[1], b));
    printf("  KV cache at %-6" PRId64 "              F32 %s, F16 %s\n", r->ctx, mib(r->kv_ctx[0], a), mib(r->kv_ctx[1], b));
    printf("  activations, F32, batch %-6" PRId64 "  %s (x, normed x, QKV, attention out, gate|up, SwiGLU, logits)\n",
           r->batch, mib(r->scratch, a));
    printf("  total on a clinfer device        F32 cache %s, F16 cache %s\n\n", mib(r->mem_total[0], a),
           mib(r->mem_total[1], b));

    printf("memory for training with Adam (%s parameters; ZeRO paper figures)\n", human((double)r->p.total, "", a));
    printf("  full F32:        4 weights + 4 gradients + 8 moments                    = 16 B/param = %s\n",
           mib(r->train_f32.total, a));
    printf("  mixed precision: 2 fp16 weights + 2 fp16 gradients + 4 fp32 master + 8 moments = 16 B/param = %s\n",
           mib(r->train_mixed.total, a));
    printf("  + activations for one sequence of %" PRId64 " (fp16, no recomputation, Korthikanti et al.):\n", r->ctx);
    printf("    n_layer*s*h*(34 + 5*a*s/h) = %s; with flash attention 34*n_layer*s*h = %s\n\n", mib(r->act, a),
           mib(r->act_flash, b));

    char label[3][40];
    snprintf(label[0], sizeof label[0], "decode at c = 1");
    snprintf(label[1], sizeof label[1], "decode at c = %" PRId64, r->ctx);
    snprintf(label[2], sizeof label[2], "prefill of %" PRId64, r->batch);
    const double fl[3] = {r->flops_c1, r->flops_ctx, r->flops_prefill}, by[3] = {r->bytes_c1, r->bytes_ctx, r->bytes_prefill};
    printf("arithmetic intensity (FLOPs per byte moved, at least: weights read once, %s KV cache)\n",
           r->kv_bytes == 4 ? "F32" : "F16");
    for (int i = 0; i < 3; i++)
        printf("  %-22s %s / %s = %.2f FLOP/B\n", label[i], human(fl[i], "FLOP", a), mib(by[i], b), fl[i] / by[i]);
    if (!r->has_roof) {
        printf("  (--device or --gflops/--gbs for the roofline)\n");
        return;
    }
    printf("\nroofline at %.1f GFLOP/s and %.1f GB/s (%s; ridge %.2f FLOP/B)\n", r->roof.gflops, r->roof.gbs,
           r->roof_source, r->roof.gflops / r->roof.gbs);
    const clf_bound *bs[3] = {&r->dec_c1, &r->dec_ctx, &r->pre};
    /* the verdict in words: which bound, how far the other is, what would move it */
    for (int i = 0; i < 3; i++) {
        const clf_bound *b = bs[i];
        const double slow = b->memory_bound ? b->t_memory_s : b->t_compute_s,
                     fast = b->memory_bound ? b->t_compute_s : b->t_memory_s;
        printf("  %-22s %s-bound (%.2f FLOP/B, %s the ridge): %s %s takes %.3f ms, %s %.3f ms (%.1fx less)\n"
               "  %-22s -> at most %s tokens/s; %s\n",
               label[i], b->memory_bound ? "memory" : "compute", fl[i] / by[i], b->memory_bound ? "below" : "above",
               b->memory_bound ? "reading" : "the arithmetic of", b->memory_bound ? mib(by[i], a) : human(fl[i], "FLOP", a),
               slow * 1e3, b->memory_bound ? "the arithmetic" : "reading", fast * 1e3, fast > 0 ? slow / fast : 0, "",
               human(b->tokens_per_s, "", d),
               b->memory_bound ? "fewer bytes a token (a smaller weight type, an F16 KV cache) or more GB/s would move "
                                 "it; more FLOP/s would not"
                               : "more FLOP/s (int8 kernels, a faster device) would move it; a smaller weight type "
                                 "would not");
    }
    if (r->price > 0) print_money(r);
}

/* ---- JSON ---------------------------------------------------------------------- */

static void json_groups(const char *key, const int64_t *count, const double *bytes) {
    printf("  \"%s\": {", key);
    for (int g = 0; g < CLF_GROUP_COUNT; g++) {
        printf("%s\"%s\": ", g ? ", " : "", clf_group_name((clf_group)g));
        if (count) printf("%" PRId64, count[g]);
        else printf("%.0f", bytes[g]);
    }
    printf("}");
}

static void json_bound(const char *key, const clf_bound *b) {
    printf("\"%s\": {\"bound\": \"%s\", \"intensity\": %.4g, \"t_compute_s\": %.6g, \"t_memory_s\": %.6g, "
           "\"tokens_per_s\": %.6g}",
           key, b->memory_bound ? "memory" : "compute", b->intensity, b->t_compute_s, b->t_memory_s, b->tokens_per_s);
}

static void print_json(const report *r) {
    const clf_model_shape *s = &r->s;
    printf("{\n  \"model\": ");
    cli_json_strn(stdout, r->path, strlen(r->path));
    printf(",\n  \"name\": ");
    cli_json_strn(stdout, r->name, strlen(r->name));
    printf(",\n  \"gguf_version\": %" PRIu32 ", \"file_bytes\": %zu, \"alignment\": %zu, \"tensors\": %" PRId64 ",\n",
           clf_gguf_version(r->g), clf_gguf_size(r->g), clf_gguf_alignment(r->g), clf_gguf_n_tensors(r->g));
    printf("  \"shape\": {\"arch\": \"%s\", \"n_layer\": %" PRId64 ", \"n_embd\": %" PRId64 ", \"n_ff\": %" PRId64
           ", \"n_head\": %" PRId64 ", \"n_head_kv\": %" PRId64 ", \"head_dim\": %" PRId64 ", \"n_vocab\": %" PRId64
           ", \"n_ctx_train\": %" PRId64 ", \"tied\": %s, \"qkv_bias\": %s, \"qk_norm\": %s, \"post_norms\": %s"
           ", \"sliding_window\": %" PRId64 ", \"sliding_layers\": %" PRId64 "},\n",
           s->arch, s->n_layer, s->n_embd, s->n_ff, s->n_head, s->n_head_kv, s->head_dim, s->n_vocab, s->n_ctx_train,
           s->tied ? "true" : "false", s->qkv_bias ? "true" : "false", s->qk_norm ? "true" : "false",
           s->post_norms ? "true" : "false", s->n_swa, s->n_swa_layers);
    json_groups("params", r->p.count, NULL);
    printf(",\n  \"params_total\": %" PRId64 ", \"params_matmul\": %" PRId64 ",\n", r->p.total, r->p.matmul);
    json_groups("weight_bytes", NULL, r->p.bytes);
    printf(",\n  \"weight_bytes_total\": %.0f,\n", r->p.total_bytes);
    json_groups("file_params", r->file.count, NULL);
    printf(",\n");
    json_groups("file_bytes_by_group", NULL, r->file.bytes);
    printf(",\n  \"file_types\": {");
    int first = 1;
    for (int t = 0; t < CLF_TYPE_COUNT; t++)
        if (r->file.tensors[t]) {
            printf("%s\"%s\": {\"tensors\": %d, \"elements\": %" PRId64 ", \"bytes\": %.0f}", first ? "" : ", ",
                   type_name((clf_type)t), r->file.tensors[t], r->file.type_elems[t], r->file.type_bytes[t]);
            first = 0;
        }
    printf("},\n");
    printf("  \"flops\": {\"formula_token\": \"2*P_mm + 4*n_layer*n_head*head_dim*c\", "
           "\"formula_prefill\": \"2*P_layers*B + 2*n_vocab*n_embd + 4*n_layer*n_head*head_dim*B*(B+1)/2\", "
           "\"per_token_c1\": %.0f, \"per_token_ctx\": %.0f, \"prefill\": %.0f},\n",
           r->flops_c1, r->flops_ctx, r->flops_prefill);
    printf("  \"inference_memory\": {\"ctx\": %" PRId64 ", \"batch\": %" PRId64 ", \"weights\": %.0f, "
           "\"kv_per_token_f32\": %.0f, \"kv_per_token_f16\": %.0f, \"kv_ctx_f32\": %.0f, \"kv_ctx_f16\": %.0f, "
           "\"activations\": %.0f, \"weights_device\": %.0f, \"total_f32_cache\": %.0f, \"total_f16_cache\": %.0f},\n",
           r->ctx, r->batch, r->file.total_bytes, r->kv_tok[0], r->kv_tok[1], r->kv_ctx[0], r->kv_ctx[1], r->scratch,
           r->weights_device, r->mem_total[0], r->mem_total[1]);
    printf("  \"training_memory\": {\"f32\": {\"weights\": %.0f, \"grads\": %.0f, \"moments\": %.0f, \"total\": %.0f}, "
           "\"mixed\": {\"weights\": %.0f, \"grads\": %.0f, \"master\": %.0f, \"moments\": %.0f, \"total\": %.0f}, "
           "\"activations\": %.0f, \"activations_flash\": %.0f, "
           "\"activations_formula\": \"n_layer*s*b*h*(34 + 5*a*s/h)\"},\n",
           r->train_f32.weights, r->train_f32.grads, r->train_f32.moments, r->train_f32.total, r->train_mixed.weights,
           r->train_mixed.grads, r->train_mixed.master, r->train_mixed.moments, r->train_mixed.total, r->act,
           r->act_flash);
    printf("  \"bytes_moved\": {\"kv\": \"%s\", \"decode_c1\": %.0f, \"decode_ctx\": %.0f, \"prefill\": %.0f},\n",
           r->kv_bytes == 4 ? "f32" : "f16", r->bytes_c1, r->bytes_ctx, r->bytes_prefill);
    printf("  \"intensity\": {\"decode_c1\": %.4g, \"decode_ctx\": %.4g, \"prefill\": %.4g},\n",
           r->flops_c1 / r->bytes_c1, r->flops_ctx / r->bytes_ctx, r->flops_prefill / r->bytes_prefill);
    if (r->split) {
        const clf_split_plan *p = &r->split->plan;
        printf("  \"split\": {\"mode\": \"layers\", \"hop_bytes_per_token\": %.0f, \"stages\": [", p->hop_bytes_per_token);
        for (int i = 0; i < p->n; i++) {
            const clf_split_stage *st = &p->st[i];
            printf("%s\n    {\"device\": \"%s\", \"name\": ", i ? "," : "", r->split->sel[i]);
            cli_json_strn(stdout, r->split->names[i], strlen(r->split->names[i]));
            printf(", \"layers\": [%d, %d], \"weight_bytes\": %.0f, \"kv_bytes\": %.0f, \"scratch_bytes\": %.0f, "
                   "\"total_bytes\": %.0f, \"device_bytes\": %.0f}",
                   st->l0, st->l1, st->weight_bytes, st->kv_bytes, st->scratch_bytes, st->total_bytes, st->device_bytes);
        }
        printf("]},\n");
    }
    if (!r->has_roof) {
        printf("  \"roofline\": null\n}\n");
        return;
    }
    printf("  \"roofline\": {\"source\": ");
    cli_json_strn(stdout, r->roof_source, strlen(r->roof_source));
    printf(", \"gflops\": %.6g, \"gbs\": %.6g, ", r->roof.gflops, r->roof.gbs);
    json_bound("decode_c1", &r->dec_c1);
    printf(", ");
    json_bound("decode_ctx", &r->dec_ctx);
    printf(", ");
    json_bound("prefill", &r->pre);
    printf("}");
    if (r->price > 0) {
        const clf_train_cost *t = &r->train;
        const clf_serve_cost *v = &r->serve;
        printf(",\n  \"money\": {\"usd_per_hour\": %.6g, \"util\": %.6g, \"gflops_used\": %.6g, \"gbs_used\": %.6g,\n",
               r->price, r->util, r->util * r->roof.gflops, r->roof.gbs);
        printf("    \"training\": {\"formula\": \"6*N*D\", \"params\": %.0f, \"tokens\": %.6g, \"tokens_rule\": \"%s\", "
               "\"flops\": %.6g, \"seconds\": %.6g, \"usd\": %.6g},\n",
               t->params, t->tokens, r->chinchilla ? "chinchilla: 20 x params" : "given", t->flops, t->seconds, t->usd);
        printf("    \"serving\": {\"tokens\": %.6g, \"parallel\": %d, \"ctx\": 1, \"flops_per_token\": %.6g, "
               "\"bytes_per_step\": %.6g, \"t_compute_step_s\": %.6g, \"t_memory_step_s\": %.6g, \"bound\": \"%s\", "
               "\"seconds\": %.6g, \"usd\": %.6g, \"usd_per_mtok\": %.6g}}",
               v->tokens, v->parallel, v->flops_token, v->bytes_step, v->t_compute_s, v->t_memory_s,
               v->memory_bound ? "memory" : "compute", v->seconds, v->usd, v->usd_per_mtok);
    }
    printf("\n}\n");
}

/* ---- a vocabulary-only file ------------------------------------------------------ */

/* A file with a vocabulary but no weights (llama.cpp's ggml-vocab-*.gguf,
 * what `clinfer tokenize` loads): no tensors at all, a tokenizer.ggml.tokens
 * array. The weights' checks (clf_model_shape_from_gguf) are not asked of
 * it; a file with any tensor never takes this path (one without
 * token_embd.weight keeps its format error: a damaged model, not a
 * vocabulary). */
static int vocab_only(const clf_gguf *g) {
    return clf_gguf_n_tensors(g) == 0 && clf_gguf_find(g, "tokenizer.ggml.tokens");
}

/* What the vocabulary says of itself: its size, tokenizer model,
 * pre-tokenizer and whether a chat template comes with it. */
static void print_vocab_only(const char *path, const clf_gguf *g, int json) {
    const clf_gguf_str *toks = NULL;
    uint64_t n_tokens = 0;
    int has_tokens = clf_gguf_get_strs(g, "tokenizer.ggml.tokens", &toks, &n_tokens) == CLF_OK;
    clf_gguf_str model = {0}, pre = {0}, arch = {0}, name = {0};
    int has_model = clf_gguf_get_str(g, "tokenizer.ggml.model", &model) == CLF_OK;
    int has_pre = clf_gguf_get_str(g, "tokenizer.ggml.pre", &pre) == CLF_OK;
    int has_arch = clf_gguf_get_str(g, "general.architecture", &arch) == CLF_OK;
    int has_name = clf_gguf_get_str(g, "general.name", &name) == CLF_OK;
    int has_template = clf_gguf_find(g, "tokenizer.chat_template") != NULL;
    /* the strings as GGUF holds them (not NUL-terminated): copied, capped, for the text form */
    char m[64], p[64], a[64], nm[128];
    snprintf(m, sizeof m, "%.*s", has_model ? (int)(model.len < 63 ? model.len : 63) : 0, has_model ? model.ptr : "");
    snprintf(p, sizeof p, "%.*s", has_pre ? (int)(pre.len < 63 ? pre.len : 63) : 0, has_pre ? pre.ptr : "");
    snprintf(a, sizeof a, "%.*s", has_arch ? (int)(arch.len < 63 ? arch.len : 63) : 0, has_arch ? arch.ptr : "");
    snprintf(nm, sizeof nm, "%.*s", has_name ? (int)(name.len < 127 ? name.len : 127) : 0, has_name ? name.ptr : "");
    if (json) {
        printf("{\n  \"file\": ");
        cli_json_str(stdout, path);
        printf(",\n  \"vocab_only\": true");
        if (has_name) printf(",\n  \"name\": "), cli_json_strn(stdout, name.ptr, name.len);
        if (has_arch) printf(",\n  \"arch\": "), cli_json_strn(stdout, arch.ptr, arch.len);
        printf(",\n  \"vocab\": {\"n_tokens\": %" PRIu64 ", \"model\": ", has_tokens ? n_tokens : 0);
        if (has_model) cli_json_strn(stdout, model.ptr, model.len);
        else printf("null");
        printf(", \"pre\": ");
        if (has_pre) cli_json_strn(stdout, pre.ptr, pre.len);
        else printf("null");
        printf(", \"chat_template\": %s},\n  \"n_tensors\": %" PRId64 ", \"file_bytes\": %zu\n}\n",
               has_template ? "true" : "false", clf_gguf_n_tensors(g), clf_gguf_size(g));
        return;
    }
    printf("%s: a vocabulary only (no weights: nothing to run, estimate or bench; `clinfer tokenize` reads it)\n",
           path);
    if (has_name) printf("  name            %s\n", nm);
    if (has_arch) printf("  architecture    %s\n", a);
    if (has_tokens) printf("  vocabulary      %" PRIu64 " tokens\n", n_tokens);
    else printf("  vocabulary      unreadable tokenizer.ggml.tokens\n");
    printf("  tokenizer       %s\n", has_model ? m : "(not given)");
    printf("  pre-tokenizer   %s\n", has_pre ? p : "(not given)");
    printf("  chat template   %s\n", has_template ? "yes" : "no");
    printf("  tensors         %" PRId64 "\n", clf_gguf_n_tensors(g));
}

/* ---- command ------------------------------------------------------------------------ */

/* The device's measured roofs (tools/bench/roof.c): copy bandwidth, FMA peak. */
static clf_status measure_roof(const char *device, report *r) {
    clf_runtime *rt;
    CLF_TRY(clf_runtime_create(device, &rt));
    fprintf(stderr, "clinfer: measuring the roofs of %s...\n", rt->dev.name);
    clf_roofs roofs;
    clf_status st = clf_roofs_measure(rt, &roofs);
    if (st == CLF_OK) {
        r->has_roof = 1;
        r->roof = (clf_roof){roofs.fma_gflops, roofs.copy_gbs};
        snprintf(r->roof_source, sizeof r->roof_source, "measured on %s: FMA float%d, copy", rt->dev.name,
                 roofs.fma_width);
    }
    clf_runtime_free(rt);
    return st;
}

int cmd_info(int argc, char **argv) {
    const char *m = NULL, *device = NULL;
    clf_place place = {0};
    int ctx = 0, batch = 512, json = 0;
    clinfer_kv_type kv = CLINFER_KV_F32; /* --kv (cli/options.h) */
    float gflops = 0, gbs = 0, price = 0, train_tokens = 0, serve_tokens = 1e6, util = 0.4f;
    int parallel = 1;
    const cli_option opts[] = {CLI_OPT_STR("-m", &m, .arg = "MODEL", .help = "a GGUF file or a catalogue name (default: the cache's default)"),
                               CLI_OPT_POSITIVE("--price", &price, .arg = "USD_PER_HOUR",
                                                .help = "the machine's price: training and serving cost at --util of the roofs"),
                               CLI_OPT_POSITIVE("--train-tokens", &train_tokens, .arg = "N",
                                                .help = "training tokens for --price (default 20 a parameter, Chinchilla's)"),
                               CLI_OPT_POSITIVE("--serve-tokens", &serve_tokens, .arg = "N",
                                                .help = "tokens served for --price (default 1e6)"),
                               {.name = "--util", .kind = CLI_FLOAT, .dst = &util, .flo = 0, .fhi = 1, .open_lo = 1, .arg = "U",
                                .help = "the share of the FMA roof training reaches, for --price (default 0.4)"},
                               CLI_OPT_INT("--parallel", &parallel, 1, 1 << 20, .help = "sequences served at once, for --price (default 1)"),
                               CLI_OPT_INT("--ctx", &ctx, 1, 1 << 24, .alias = "-c",
                                           .help = "context for the KV cache and attention terms (default: the model's, at most 4096)"),
                               CLI_OPT_INT("--batch", &batch, 1, 1 << 24, .help = "prefill length (default 512, at most the context)"),
                               CLI_OPT_KV("--kv", &kv, .help = "the KV cache's type: f32 or f16"),
                               CLI_OPT_POSITIVE("--gflops", &gflops, .arg = "G", .help = "the FP32 GFLOP/s peak, instead of measuring (with --gbs)"),
                               CLI_OPT_POSITIVE("--gbs", &gbs, .arg = "B", .help = "the memory GB/s peak, instead of measuring (with --gflops)"),
                               CLI_OPT_STR("--device", &device, .arg = "SEL",
                                           .help = "measure that device's roofs (copy GB/s, FMA GFLOP/s; a few seconds) for the roofline"),
                               CLI_OPT_STR("--devices", &place.devices, .arg = "SEL,SEL,...",
                                           .help = "the plan of a split by layers over those devices"),
                               CLI_OPT_STR("--split", &place.split, .arg = "layers", .help = "how --devices splits (only: layers)"),
                               CLI_OPT_STR("--split-ratio", &place.ratio, .arg = "a,b,...", .help = "the share of layers of each device"),
                               CLI_OPT_FLAG("--json", &json, .help = "as JSON"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (kv != CLINFER_KV_F32 && kv != CLINFER_KV_F16) return cli_usage(USAGE, "--kv: info estimates f32 or f16");
    int kv_bytes = kv == CLINFER_KV_F32 ? 4 : 2;
    if ((gflops > 0) != (gbs > 0)) return cli_usage(USAGE, "--gflops and --gbs go together");

    char path[4096];
    clf_status st = (clf_status)cli_model_fetch(m, 0, path, sizeof path); /* a catalogue name: fetched on first use */
    clf_gguf *g = NULL;
    report r = {.path = path, .kv_bytes = kv_bytes, .has_roof = gflops > 0, .roof = {gflops, gbs}, .price = price,
                .util = util, .chinchilla = !(train_tokens > 0), .train = {.tokens = train_tokens},
                .serve = {.tokens = serve_tokens, .parallel = parallel}};
    snprintf(r.roof_source, sizeof r.roof_source, "given");
    if (st == CLF_OK) st = clf_gguf_open(path, &g);
    if (st == CLF_OK && vocab_only(g)) { /* what it holds, exit 0: the weights' figures do not apply */
        print_vocab_only(path, g, json);
        clf_gguf_close(g);
        return 0;
    }
    if (st == CLF_OK) st = clf_model_shape_from_gguf(g, &r.s);
    /* --price needs the roofs: the default device's when none is named or given */
    if (st == CLF_OK && (device || price > 0) && !r.has_roof) st = measure_roof(device, &r);
    if (st != CLF_OK) {
        clf_gguf_close(g);
        return cli_error(st);
    }
    r.g = g;
    clf_gguf_str name;
    if (clf_gguf_get_str(g, "general.name", &name) == CLF_OK)
        snprintf(r.name, sizeof r.name, "%.*s", (int)(name.len < 127 ? name.len : 127), name.ptr);
    else
        snprintf(r.name, sizeof r.name, "%s model", r.s.arch);
    int64_t train = r.s.n_ctx_train ? r.s.n_ctx_train : 2048;
    r.ctx = ctx ? ctx : train < 4096 ? train : 4096; /* as `run` sizes its context */
    r.batch = batch < r.ctx ? batch : r.ctx;
    compute(&r);
    /* the split's plan, from the file and the devices' memory: nothing loads */
    clf_place_split split;
    int planned = 0;
    if (place.devices || place.split || place.ratio) {
        st = clf_place_plan(&place, g, r.ctx, r.batch, kv_bytes, &split, &planned);
        if (planned) r.split = &split;
        if (st != CLF_OK && !planned) {
            clf_gguf_close(g);
            return cli_error(st);
        }
    }
    if (json) print_json(&r);
    else print_text(&r);
    if (r.split && !json) {
        printf("\n");
        clf_place_print(stdout, &split);
    }
    clf_gguf_close(g);
    return cli_error(st); /* a plan that does not fit: shown, then refused */
}

/* Model cost estimates; the formulas are stated in estimate.h. */
#include "estimate.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "attention.h"
#include "family.h"
#include "moe.h"

/* ---- shape from a GGUF --------------------------------------------------- */

static clf_status arch_u32(const clf_gguf *g, const char *arch, const char *key, int required, int64_t *out) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!required && !clf_gguf_find(g, full)) return CLF_OK;
    uint32_t v;
    CLF_TRY(clf_gguf_get_u32(g, full, &v));
    if (v == 0) return clf_fail(CLF_ERR_FORMAT, "metadata key '%s' is 0", full);
    *out = v;
    return CLF_OK;
}

/* <arch>.<key> where it is a u32 in 1..max, else def (a value out of
 * range reads as absent: the products below stay far from int64's end). */
static int64_t lenient_u32(const clf_gguf *g, const char *arch, const char *key, int64_t max, int64_t def) {
    char full[96];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v = 0;
    if (!clf_gguf_find(g, full) || clf_gguf_get_u32(g, full, &v) != CLF_OK || v == 0 || v > max) return def;
    return v;
}

static clf_type tensor_type(const clf_gguf *g, const char *name, clf_type fallback) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, name);
    return t ? t->type : fallback;
}

clf_status clf_model_shape_from_gguf(const clf_gguf *g, clf_model_shape *s) {
    memset(s, 0, sizeof *s);
    clf_gguf_str arch;
    CLF_TRY(clf_gguf_get_str(g, "general.architecture", &arch));
    if (arch.len == 0 || arch.len >= sizeof s->arch)
        return clf_fail(CLF_ERR_FORMAT, "general.architecture of %" PRIu64 " bytes is not a name", arch.len);
    memcpy(s->arch, arch.ptr, (size_t)arch.len);
    const char *a = s->arch;
    CLF_TRY(arch_u32(g, a, "block_count", 1, &s->n_layer));
    CLF_TRY(arch_u32(g, a, "embedding_length", 1, &s->n_embd));
    CLF_TRY(arch_u32(g, a, "feed_forward_length", 1, &s->n_ff));
    CLF_TRY(arch_u32(g, a, "attention.head_count", 1, &s->n_head));
    s->n_head_kv = s->n_head;
    CLF_TRY(arch_u32(g, a, "attention.head_count_kv", 0, &s->n_head_kv));
    CLF_TRY(arch_u32(g, a, "context_length", 0, &s->n_ctx_train));
    s->head_dim = s->n_embd / s->n_head;
    CLF_TRY(arch_u32(g, a, "attention.key_length", 0, &s->head_dim));
    if (s->head_dim == 0)
        return clf_fail(CLF_ERR_FORMAT, "%s.attention.head_count %" PRId64 " exceeds embedding_length %" PRId64, a,
                        s->n_head, s->n_embd);
    const clf_gguf_tensor *embd = clf_gguf_find_tensor(g, "token_embd.weight");
    if (!embd) return clf_fail(CLF_ERR_FORMAT, "tensor token_embd.weight is missing");
    if (embd->ne[0] != s->n_embd)
        return clf_fail(CLF_ERR_FORMAT, "token_embd.weight rows have %" PRId64 " elements, %s.embedding_length is %" PRId64,
                        embd->ne[0], a, s->n_embd);
    s->n_vocab = embd->ne[1];
    s->type_embd = embd->type;
    s->tied = clf_gguf_find_tensor(g, "output.weight") == NULL;
    s->type_out = tensor_type(g, "output.weight", s->type_embd);
    /* projections stored fused (Phi-3: attn_qkv, ffn_up of gate|up) or apart */
    s->type_attn = tensor_type(g, "blk.0.attn_q.weight", tensor_type(g, "blk.0.attn_qkv.weight", CLF_F32));
    s->type_ffn = tensor_type(g, "blk.0.ffn_gate.weight", tensor_type(g, "blk.0.ffn_up.weight", CLF_F32));
    s->type_ffn = tensor_type(g, "blk.0.ffn_gate_exps.weight", s->type_ffn);
    s->type_norm = tensor_type(g, "blk.0.attn_norm.weight", CLF_F32);
    const clf_gguf_tensor *freqs = clf_gguf_find_tensor(g, "rope_freqs.weight");
    s->n_rope_freqs = freqs ? freqs->ne[0] : 0;
    static const clf_family llama = {.arch = "llama"};
    const clf_family *f = clf_family_find(s->arch);
    if (!f) f = &llama;
    s->qkv_bias = f->qkv_bias;
    s->qk_norm = f->qk_norm;
    s->post_norms = f->post_norms;
    s->attn_sinks = f->attn_sinks, s->attn_out_bias = f->attn_out_bias, s->moe_biases = f->moe_biases;
    if (f->swa_period) {
        CLF_TRY(arch_u32(g, a, "attention.sliding_window", 1, &s->n_swa));
        for (int64_t l = 0; l < s->n_layer; l++) s->n_swa_layers += clf_family_layer_swa(f, (int)l);
    }
    /* experts: any file whose expert_count is above 0 (a dense llama may say 0; Mixtral is a llama with
     * experts), the width as llama.cpp reads it; values out of range read as absent here
     * (models/llama_hparams.c says what is wrong where a file is loaded) */
    s->n_expert = lenient_u32(g, a, "expert_count", CLF_MOE_MAX_EXPERTS, 0);
    if (s->n_expert) {
        const int64_t max_used = s->n_expert < CLF_MOE_MAX_USED ? s->n_expert : CLF_MOE_MAX_USED;
        s->n_expert_used = lenient_u32(g, a, "expert_used_count", max_used, 1);
        s->n_ff_exp = f->moe ? s->n_ff / s->n_expert_used : s->n_ff;
        if (f->moe) s->n_ff_exp = lenient_u32(g, a, "expert_feed_forward_length", 1 << 30, s->n_ff_exp);
    }
    return CLF_OK;
}

/* ---- groups and parameters --------------------------------------------------- */

const char *clf_group_name(clf_group g) {
    static const char *const names[CLF_GROUP_COUNT] = {"embeddings", "attention", "mlp", "norms", "output", "other"};
    return (unsigned)g < CLF_GROUP_COUNT ? names[g] : "?";
}

clf_group clf_group_of_tensor(const char *name) {
    if (!strcmp(name, "token_embd.weight")) return CLF_GROUP_EMBD;
    if (!strcmp(name, "output.weight")) return CLF_GROUP_OUTPUT;
    if (strstr(name, "_norm.")) return CLF_GROUP_NORM;
    if (!strncmp(name, "blk.", 4)) {
        if (strstr(name, ".attn_")) return CLF_GROUP_ATTN;
        if (strstr(name, ".ffn_")) return CLF_GROUP_MLP;
    }
    return CLF_GROUP_OTHER;
}

double clf_type_bytes_per_elem(clf_type t) {
    const clf_type_info *ti = clf_type_get(t);
    return ti ? (double)ti->block_bytes / ti->block : 0;
}

static int64_t q_dim(const clf_model_shape *s) { return s->n_head * s->head_dim; }
static int64_t kv_dim(const clf_model_shape *s) { return s->n_head_kv * s->head_dim; }

/* A layer's MLP matrices that `tokens` tokens multiply or read (0: all
 * of them): gate, up, down, or the router and the experts chosen (at most
 * all of them; one token: its n_expert_used). */
static int64_t experts_used(const clf_model_shape *s, int64_t tokens) {
    return tokens <= 0 || tokens * s->n_expert_used > s->n_expert ? s->n_expert : tokens * s->n_expert_used;
}

static int64_t mlp_matrices(const clf_model_shape *s, int64_t tokens) {
    if (!s->n_expert) return 3 * s->n_embd * s->n_ff;
    return 3 * s->n_embd * s->n_ff_exp * experts_used(s, tokens);
}

/* A layer's MLP biases (F32) that `tokens` tokens read (0: all): the
 * router's and the chosen experts' (gpt-oss). */
static int64_t mlp_biases(const clf_model_shape *s, int64_t tokens) {
    if (!s->moe_biases || !s->n_expert) return 0;
    return s->n_expert + (2 * s->n_ff_exp + s->n_embd) * experts_used(s, tokens);
}

/* The router's elements in a layer (F32). */
static int64_t router(const clf_model_shape *s) { return s->n_expert * s->n_embd; }

/* Q, K, V and output projection matrices of one layer. */
static int64_t attn_matrices(const clf_model_shape *s) {
    return s->n_embd * q_dim(s) + 2 * s->n_embd * kv_dim(s) + q_dim(s) * s->n_embd;
}

clf_params clf_estimate_params(const clf_model_shape *s) {
    clf_params p;
    memset(&p, 0, sizeof p);
    int64_t bias = s->qkv_bias ? q_dim(s) + 2 * kv_dim(s) : 0; /* F32 in every file seen */
    bias += (s->attn_sinks ? s->n_head : 0) + (s->attn_out_bias ? s->n_embd : 0); /* gpt-oss, F32 */
    p.count[CLF_GROUP_EMBD] = s->n_vocab * s->n_embd;
    p.count[CLF_GROUP_ATTN] = s->n_layer * (attn_matrices(s) + bias);
    p.count[CLF_GROUP_MLP] = s->n_layer * (mlp_matrices(s, 0) + router(s) + mlp_biases(s, 0)); /* gate, up, down (of every expert) */
    p.count[CLF_GROUP_NORM] = s->n_layer * ((2 + 2 * s->post_norms) * s->n_embd + 2 * s->qk_norm * s->head_dim) + s->n_embd;
    p.count[CLF_GROUP_OUTPUT] = s->tied ? 0 : s->n_vocab * s->n_embd;
    p.bytes[CLF_GROUP_EMBD] = p.count[CLF_GROUP_EMBD] * clf_type_bytes_per_elem(s->type_embd);
    p.bytes[CLF_GROUP_ATTN] = (double)s->n_layer * (attn_matrices(s) * clf_type_bytes_per_elem(s->type_attn) + bias * 4.0);
    p.bytes[CLF_GROUP_MLP] = (double)s->n_layer * (mlp_matrices(s, 0) * clf_type_bytes_per_elem(s->type_ffn) +
                                                   (router(s) + mlp_biases(s, 0)) * 4.0);
    p.bytes[CLF_GROUP_NORM] = p.count[CLF_GROUP_NORM] * clf_type_bytes_per_elem(s->type_norm);
    p.bytes[CLF_GROUP_OUTPUT] = p.count[CLF_GROUP_OUTPUT] * clf_type_bytes_per_elem(s->type_out);
    p.count[CLF_GROUP_OTHER] = s->n_rope_freqs;
    p.bytes[CLF_GROUP_OTHER] = 4.0 * s->n_rope_freqs;
    for (int g = 0; g < CLF_GROUP_COUNT; g++) {
        p.total += p.count[g];
        p.total_bytes += p.bytes[g];
    }
    p.matmul = s->n_layer * (attn_matrices(s) + mlp_matrices(s, 1) + router(s)) + s->n_vocab * s->n_embd;
    return p;
}

double clf_device_weight_bytes(const clf_model_shape *s) {
    clf_params p = clf_estimate_params(s);
    return p.total_bytes + (s->tied ? p.bytes[CLF_GROUP_EMBD] : 0);
}

/* ---- FLOPs and bytes ------------------------------------------------------------ */

/* per token: a token multiplies its chosen experts only, however many a batch reads */
static double layer_matmul_params(const clf_model_shape *s) {
    return (double)s->n_layer * (double)(attn_matrices(s) + mlp_matrices(s, 1) + router(s));
}

/* A(c): keys attended over the layers by a query with c positions before
 * it and itself (estimate.h). */
static double attended(const clf_model_shape *s, int64_t c) {
    int64_t local = c < s->n_swa ? c : s->n_swa;
    return (double)(s->n_layer - s->n_swa_layers) * c + (double)s->n_swa_layers * local;
}

/* sum_{t=1..b} A(t) */
static double attended_prefill(const clf_model_shape *s, int64_t batch) {
    double b = (double)batch, w = (double)(s->n_swa < batch ? s->n_swa : batch);
    double local = w * (w + 1) / 2 + (b - w) * w; /* sum of min(t, W) */
    return (double)(s->n_layer - s->n_swa_layers) * b * (b + 1) / 2 + (double)s->n_swa_layers * local;
}

double clf_flops_token(const clf_model_shape *s, int64_t ctx) {
    return 2.0 * clf_estimate_params(s).matmul + 4.0 * q_dim(s) * attended(s, ctx);
}

double clf_flops_prefill(const clf_model_shape *s, int64_t batch) {
    double b = (double)batch;
    return 2.0 * layer_matmul_params(s) * b + 2.0 * s->n_vocab * s->n_embd + 4.0 * q_dim(s) * attended_prefill(s, batch);
}

double clf_kv_bytes_per_token(const clf_model_shape *s, int elem_bytes) {
    return 2.0 * s->n_layer * kv_dim(s) * elem_bytes;
}

double clf_kv_cache_bytes(const clf_model_shape *s, int64_t ctx, int64_t batch, int elem_bytes) {
    /* a paged cache's blocks (attention.h): the context's, and the window's in a sliding layer */
    const int fits = ctx <= INT_MAX && batch <= INT_MAX;
    double all = fits ? (double)clf_kv_seq_blocks(0, (int)batch, (int)ctx, CLF_KV_BLOCK) * CLF_KV_BLOCK : (double)ctx;
    double ring = s->n_swa_layers && fits ? (double)clf_kv_seq_blocks((int)s->n_swa, (int)batch, (int)ctx, CLF_KV_BLOCK) * CLF_KV_BLOCK : all;
    double slots = (double)(s->n_layer - s->n_swa_layers) * all + (double)s->n_swa_layers * ring;
    return 2.0 * kv_dim(s) * elem_bytes * slots;
}

/* Weights a forward pass of `tokens` tokens reads: every matrix, norm and
 * bias (of the experts, those chosen: clf_model_shape), the output
 * projection (the embedding matrix when tied), one embedding row. */
static double weight_bytes_read(const clf_model_shape *s, int64_t tokens) {
    clf_params p = clf_estimate_params(s);
    double out = s->n_vocab * s->n_embd * clf_type_bytes_per_elem(s->type_out);
    double row = s->n_embd * clf_type_bytes_per_elem(s->type_embd);
    double mlp = (double)s->n_layer * (mlp_matrices(s, tokens) * clf_type_bytes_per_elem(s->type_ffn) +
                                       (router(s) + mlp_biases(s, tokens)) * 4.0);
    return p.bytes[CLF_GROUP_ATTN] + mlp + p.bytes[CLF_GROUP_NORM] + out + row;
}

double clf_weight_bytes_read(const clf_model_shape *s) { return weight_bytes_read(s, 1); }

double clf_bytes_token(const clf_model_shape *s, int64_t ctx, int kv_elem_bytes) {
    /* the keys and values attended (the window's in a sliding layer), and the new token's */
    double per_layer = 2.0 * kv_dim(s) * kv_elem_bytes;
    return clf_weight_bytes_read(s) + per_layer * attended(s, ctx) + clf_kv_bytes_per_token(s, kv_elem_bytes);
}

double clf_bytes_prefill(const clf_model_shape *s, int64_t batch, int kv_elem_bytes) {
    /* embedding rows: batch of them instead of one */
    double rows = (double)(batch - 1) * s->n_embd * clf_type_bytes_per_elem(s->type_embd);
    return weight_bytes_read(s, batch) + rows + 2.0 * clf_kv_bytes_per_token(s, kv_elem_bytes) * (double)batch;
}

double clf_scratch_bytes(const clf_model_shape *s, int64_t batch) {
    double per_token = 2.0 * s->n_embd            /* x, normed x */
                       + q_dim(s) + 2 * kv_dim(s) /* Q|K|V */
                       + q_dim(s)                 /* attention output */
                       + 3.0 * (s->n_expert ? s->n_ff_exp : s->n_ff); /* gate|up, SwiGLU */
    if (s->n_expert) /* the routing (logits, ids, weights, grouped rows and weights) and an expert's rows */
        per_token += (double)s->n_expert + 4.0 * s->n_expert_used + 2.0 * s->n_embd + 3.0 * s->n_ff_exp;
    /* one row of logits: every token's (perplexity) is allocated when asked */
    return (double)batch * (4.0 * per_token + 4.0 /* token id */) + 4.0 * s->n_vocab + clf_xq_bytes(s);
}

double clf_xq_bytes(const clf_model_shape *s) {
    /* 64 bytes per 32 (host/compute/matmul.h CLF_XQ_FLOATS) */
    return 64.0 * (double)(s->n_embd / 32 + (s->n_expert ? s->n_ff_exp : s->n_ff) / 32 + q_dim(s) / 32);
}

/* ---- training ----------------------------------------------------------------------- */

clf_train_mem clf_train_mem_f32(int64_t params) {
    double p = (double)params;
    return (clf_train_mem){.weights = 4 * p, .grads = 4 * p, .master = 0, .moments = 8 * p, .total = 16 * p};
}

clf_train_mem clf_train_mem_mixed(int64_t params) {
    double p = (double)params;
    return (clf_train_mem){.weights = 2 * p, .grads = 2 * p, .master = 4 * p, .moments = 8 * p, .total = 16 * p};
}

double clf_train_activation_bytes(const clf_model_shape *s, int64_t seq, int64_t batch, int flash) {
    double sbh = (double)seq * batch * s->n_embd;
    double per_layer = sbh * (34.0 + (flash ? 0.0 : 5.0 * s->n_head * (double)seq / s->n_embd));
    return s->n_layer * per_layer;
}

/* ---- roofline ---------------------------------------------------------------------------- */

clf_bound clf_roofline(double flops, double bytes, double tokens, clf_roof roof) {
    clf_bound b = {0};
    b.intensity = bytes > 0 ? flops / bytes : 0;
    b.t_compute_s = roof.gflops > 0 ? flops / (roof.gflops * 1e9) : 0;
    b.t_memory_s = roof.gbs > 0 ? bytes / (roof.gbs * 1e9) : 0;
    b.memory_bound = b.t_memory_s >= b.t_compute_s;
    double t = b.memory_bound ? b.t_memory_s : b.t_compute_s;
    b.tokens_per_s = t > 0 ? tokens / t : 0;
    return b;
}

/* ---- money ------------------------------------------------------------------------------ */

double clf_usd_per_mtok(double usd_per_hour, double tokens_per_s) {
    return tokens_per_s > 0 ? usd_per_hour * 1e6 / (3600.0 * tokens_per_s) : 0;
}

clf_train_cost clf_estimate_train_cost(double params, double tokens, double gflops, double util, double usd_per_hour) {
    clf_train_cost c = {.params = params, .tokens = tokens, .flops = 6.0 * params * tokens};
    c.seconds = gflops > 0 && util > 0 ? c.flops / (util * gflops * 1e9) : 0;
    c.usd = c.seconds / 3600.0 * usd_per_hour;
    return c;
}

clf_serve_cost clf_estimate_serve_cost(const clf_model_shape *s, double tokens, int parallel, int kv_elem_bytes,
                                       clf_roof roof, double util, double usd_per_hour) {
    clf_serve_cost c = {.tokens = tokens, .parallel = parallel > 0 ? parallel : 1};
    const double weights = clf_weight_bytes_read(s);
    c.flops_token = clf_flops_token(s, 1);
    c.bytes_step = weights + c.parallel * (clf_bytes_token(s, 1, kv_elem_bytes) - weights);
    c.t_compute_s = roof.gflops > 0 && util > 0 ? c.parallel * c.flops_token / (util * roof.gflops * 1e9) : 0;
    c.t_memory_s = roof.gbs > 0 ? c.bytes_step / (roof.gbs * 1e9) : 0;
    c.memory_bound = c.t_memory_s >= c.t_compute_s;
    const double step = c.memory_bound ? c.t_memory_s : c.t_compute_s;
    c.seconds = tokens / c.parallel * step;
    c.usd = c.seconds / 3600.0 * usd_per_hour;
    c.usd_per_mtok = step > 0 ? clf_usd_per_mtok(usd_per_hour, c.parallel / step) : 0;
    return c;
}

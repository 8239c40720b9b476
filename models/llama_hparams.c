/* Hyperparameters from the GGUF metadata, and every tensor's presence,
 * type and shape checked before anything is uploaded. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "llama_impl.h"

static clf_status get_u32(const clf_gguf *g, const char *arch, const char *key, int required, int *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!clf_gguf_find(g, full) && !required) return CLF_OK;
    uint32_t v;
    CLF_TRY(clf_gguf_get_u32(g, full, &v));
    if (v == 0 || v >= (1u << 30)) return clf_fail(CLF_ERR_FORMAT, "%s = %u is out of range", full, v);
    *out = (int)v;
    return CLF_OK;
}

static clf_status get_f32(const clf_gguf *g, const char *arch, const char *key, float *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!clf_gguf_find(g, full)) return CLF_OK; /* keep the default */
    return clf_gguf_get_f32(g, full, out);
}

/* The tensor `name` with the given shape (ne1 = 0 for a vector) or an error. */
static clf_status want_tensor(const clf_gguf *g, const char *name, int64_t ne0, int64_t ne1,
                              const clf_gguf_tensor **out) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, name);
    if (!t) return clf_fail(CLF_ERR_FORMAT, "tensor %s is missing", name);
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return clf_fail(CLF_ERR_FORMAT, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                        (long long)ne0, (long long)want1);
    if (!ne1 && t->type != CLF_F32)
        return clf_fail(CLF_ERR_FORMAT, "tensor %s must be F32, is %s", name, clf_type_get(t->type)->name);
    *out = t;
    return CLF_OK;
}

/* The 3-D tensor `name` [ne0, ne1, ne2] (experts stacked) or an error. */
static clf_status want_tensor3(const clf_gguf *g, const char *name, int64_t ne0, int64_t ne1, int64_t ne2) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, name);
    if (!t) return clf_fail(CLF_ERR_FORMAT, "tensor %s is missing", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return clf_fail(CLF_ERR_FORMAT, "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                        (long long)ne0, (long long)ne1, (long long)ne2);
    return CLF_OK;
}

/* The experts' keys: expert_count (a family with experts needs it; one
 * whose experts are optional has them where it is above 0: a llama file is
 * Mixtral then; any other family's file with experts is refused),
 * expert_used_count, expert_feed_forward_length, expert_weights_scale
 * (where the family reads it), each checked against what the routing
 * kernel takes (host/compute/moe.h). */
static clf_status moe_keys(const clf_gguf *g, const char *a, const clf_family *f, clf_llama_hparams *hp) {
    char key[128];
    snprintf(key, sizeof key, "%s.expert_count", a);
    uint32_t v = 0;
    if (clf_gguf_find(g, key)) CLF_TRY(clf_gguf_get_u32(g, key, &v));
    else if (f->moe) return clf_fail(CLF_ERR_FORMAT, "%s is missing (a %s file has experts)", key, a);
    if (v == 0 && !f->moe) return CLF_OK; /* dense */
    if (!f->moe && !f->moe_optional)
        return clf_fail(CLF_ERR_FORMAT, "%s = %u: a %s file with experts is not supported (its layers have no "
                        "expert step)", key, v, a);
    if (v == 0 || v > CLF_MOE_MAX_EXPERTS)
        return clf_fail(CLF_ERR_FORMAT, "%s = %u is out of range (1 to %d)", key, v, CLF_MOE_MAX_EXPERTS);
    hp->n_expert = (int)v;
    snprintf(key, sizeof key, "%s.expert_used_count", a);
    if (!clf_gguf_find(g, key)) return clf_fail(CLF_ERR_FORMAT, "%s is missing (the file has %d experts)", key, hp->n_expert);
    CLF_TRY(clf_gguf_get_u32(g, key, &v));
    const int max_used = hp->n_expert < CLF_MOE_MAX_USED ? hp->n_expert : CLF_MOE_MAX_USED;
    if (v == 0 || v > (uint32_t)max_used)
        return clf_fail(CLF_ERR_FORMAT, "%s = %u is out of range (1 to %d for %d experts)", key, v, max_used, hp->n_expert);
    hp->n_expert_used = (int)v;
    /* llama.cpp: llama's experts (Mixtral) are feed_forward_length wide, whatever other key the file
     * has; a family with experts reads expert_feed_forward_length, else n_ff / used */
    hp->n_ff_exp = f->moe ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    if (f->moe) CLF_TRY(get_u32(g, a, "expert_feed_forward_length", 0, &hp->n_ff_exp));
    if (hp->n_ff_exp <= 0)
        return clf_fail(CLF_ERR_FORMAT, "%s.expert_feed_forward_length is missing and feed_forward_length %d / %d "
                        "experts used is 0", a, hp->n_ff, hp->n_expert_used);
    hp->moe_norm_w = !f->moe_raw_weights;
    float scale = 0.0f;
    if (f->moe_scale_key) CLF_TRY(get_f32(g, a, "expert_weights_scale", &scale));
    if (!isfinite(scale) || scale < 0)
        return clf_fail(CLF_ERR_FORMAT, "%s.expert_weights_scale = %g is out of range (finite, >= 0)", a, scale);
    hp->expert_w_scale = scale == 0.0f ? 1.0f : scale; /* llama.cpp scales only by a value other than 0 and 1 */
    return CLF_OK;
}

/* An int-sized dimension from the shape reader, or an error naming it. */
static clf_status dim(const char *arch, const char *key, int64_t v, int *out) {
    if (v <= 0 || v >= (1 << 30)) return clf_fail(CLF_ERR_FORMAT, "%s.%s = %lld is out of range", arch, key, (long long)v);
    *out = (int)v;
    return CLF_OK;
}

/* Position scaling as llama.cpp reads it: 1 / rope.scaling.factor (else
 * the older rope.scale_linear) unless rope.scaling.type is "none"; "yarn"
 * (gpt-oss) also sets *yarn (the factor then YaRN's, applied by
 * clf_rope_yarn); other schemes (LongRoPE, ...) are refused by name. The
 * factors' ranges are checked by the caller. */
static clf_status rope_scaling(const clf_gguf *g, const char *a, float *freq_scale, int *yarn) {
    char key[128];
    float factor = 1.0f;
    *yarn = 0;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (clf_gguf_find(g, key)) {
        clf_gguf_str type;
        CLF_TRY(clf_gguf_get_str(g, key, &type));
        int none = type.len == 4 && !memcmp(type.ptr, "none", 4), linear = type.len == 6 && !memcmp(type.ptr, "linear", 6);
        *yarn = type.len == 4 && !memcmp(type.ptr, "yarn", 4);
        if (!none && !linear && !*yarn)
            return clf_fail(CLF_ERR_FORMAT, "RoPE scaling '%.*s' is unsupported (none, linear, yarn are)",
                            type.len > 32 ? 32 : (int)type.len, type.ptr);
        if (none) {
            *freq_scale = 1.0f;
            return CLF_OK;
        }
    }
    CLF_TRY(get_f32(g, a, "rope.scale_linear", &factor));
    CLF_TRY(get_f32(g, a, "rope.scaling.factor", &factor));
    *freq_scale = 1.0f / factor;
    return CLF_OK;
}

/* YaRN's other keys (rope.scaling.original_context_length, else the
 * training context; rope.scaling.attn_factor, else 1) and a trial of
 * clf_rope_yarn, so a value it refuses is a load error naming the key. */
static clf_status yarn_keys(const clf_gguf *g, const char *a, clf_llama_hparams *hp) {
    hp->yarn_factor = 1.0f / hp->rope_freq_scale;
    hp->yarn_n_ctx_orig = hp->n_ctx_train;
    hp->yarn_attn_factor = 1.0f;
    CLF_TRY(get_u32(g, a, "rope.scaling.original_context_length", 0, &hp->yarn_n_ctx_orig));
    CLF_TRY(get_f32(g, a, "rope.scaling.attn_factor", &hp->yarn_attn_factor));
    if (!isfinite(hp->yarn_attn_factor) || !(hp->yarn_attn_factor > 0))
        return clf_fail(CLF_ERR_FORMAT, "%s.rope.scaling.attn_factor = %g is out of range (finite and > 0)", a,
                        hp->yarn_attn_factor);
    if (!(hp->yarn_factor >= 1.0f))
        return clf_fail(CLF_ERR_FORMAT, "%s.rope.scaling.factor = %g is out of range for YaRN (>= 1)", a,
                        hp->yarn_factor);
    clf_rope_params p = {.mode = hp->fam->rope, .n_rot = hp->n_rot, .base = hp->rope_base};
    clf_status st = clf_rope_yarn(&p, hp->yarn_factor, hp->yarn_n_ctx_orig, hp->yarn_attn_factor, CLF_YARN_BETA_FAST,
                                  CLF_YARN_BETA_SLOW);
    return st == CLF_OK ? CLF_OK : clf_fail(CLF_ERR_FORMAT, "%s: YaRN of this file: %s", a, clf_last_error());
}

clf_status clf_llama_hparams_read(const clf_gguf *g, clf_llama_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    CLF_TRY(clf_family_of(g, &hp->fam));
    const clf_family *f = hp->fam;
    /* the keys and the embedding as `clinfer info` reads them; what the
     * kernels and the tensors further require is checked here */
    clf_model_shape s;
    CLF_TRY(clf_model_shape_from_gguf(g, &s));
    const char *a = memcpy(hp->arch, s.arch, sizeof hp->arch);
    CLF_TRY(dim(a, "block_count", s.n_layer, &hp->n_layer));
    CLF_TRY(dim(a, "embedding_length", s.n_embd, &hp->n_embd));
    CLF_TRY(dim(a, "feed_forward_length", s.n_ff, &hp->n_ff));
    CLF_TRY(dim(a, "attention.head_count", s.n_head, &hp->n_head));
    CLF_TRY(dim(a, "attention.head_count_kv", s.n_head_kv, &hp->n_head_kv));
    CLF_TRY(dim(a, "attention.key_length", s.head_dim, &hp->head_dim));
    hp->n_ctx_train = 2048;
    if (s.n_ctx_train) CLF_TRY(dim(a, "context_length", s.n_ctx_train, &hp->n_ctx_train));
    if (s.n_vocab > INT32_MAX) return clf_fail(CLF_ERR_FORMAT, "vocabulary of %lld tokens is too large", (long long)s.n_vocab);
    hp->n_vocab = (int)s.n_vocab;
    hp->tied = s.tied;
    /* what the file says its embeddings pool with (embedding models; generative ones rarely say) */
    hp->pooling = -1;
    char pool_key[128];
    snprintf(pool_key, sizeof pool_key, "%s.pooling_type", a);
    if (clf_gguf_find(g, pool_key)) {
        uint32_t v;
        CLF_TRY(clf_gguf_get_u32(g, pool_key, &v));
        hp->pooling = v > 16 ? -1 : (int)v;
    }
    char key[128];
    snprintf(key, sizeof key, "%s.attention.key_length", a);
    /* without key_length a head is n_embd / n_head wide; with it (Gemma 3,
     * Qwen3) Q may be wider or narrower than the embedding */
    if (!clf_gguf_find(g, key) && hp->n_embd % hp->n_head)
        return clf_fail(CLF_ERR_FORMAT, "embedding_length %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    int value_length = hp->head_dim;
    CLF_TRY(get_u32(g, a, "attention.value_length", 0, &value_length));
    if (value_length != hp->head_dim)
        return clf_fail(CLF_ERR_FORMAT, "value_length %d differs from key_length %d (unsupported)", value_length,
                        hp->head_dim);
    if ((int64_t)hp->head_dim * hp->n_head > (1 << 28))
        return clf_fail(CLF_ERR_FORMAT, "head_dim %d × heads %d is too large", hp->head_dim, hp->n_head);
    /* what the attention kernels are built for (-DHD): float16 lanes */
    if (hp->head_dim % 16 || hp->head_dim > 256)
        return clf_fail(CLF_ERR_FORMAT, "head_dim %d is unsupported (a multiple of 16 up to 256)", hp->head_dim);
    if (hp->n_head % hp->n_head_kv)
        return clf_fail(CLF_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    hp->n_rot = hp->head_dim;
    CLF_TRY(get_u32(g, a, "rope.dimension_count", 0, &hp->n_rot));
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return clf_fail(CLF_ERR_FORMAT, "rope.dimension_count %d does not fit head_dim %d", hp->n_rot, hp->head_dim);
    /* Ranges: a base <= 1 makes RoPE's frequencies grow with the dimension
     * (1e-45 underflows the angles to NaN), an epsilon outside (0, 1) is no
     * RMSNorm guard, a scale <= 0 no scale; none of them may be NaN or Inf. */
    hp->rope_base = 10000.0f;
    hp->eps = 1e-5f;
    float scale = 1.0f, scale_linear = 1.0f;
    CLF_TRY(get_f32(g, a, "rope.freq_base", &hp->rope_base));
    CLF_TRY(get_f32(g, a, "attention.layer_norm_rms_epsilon", &hp->eps));
    CLF_TRY(get_f32(g, a, "rope.scaling.factor", &scale));
    CLF_TRY(get_f32(g, a, "rope.scale_linear", &scale_linear));
    if (!isfinite(hp->rope_base) || !(hp->rope_base > 1))
        return clf_fail(CLF_ERR_FORMAT, "%s.rope.freq_base = %g is out of range (finite and > 1)", a, hp->rope_base);
    if (!isfinite(hp->eps) || !(hp->eps > 0) || !(hp->eps < 1))
        return clf_fail(CLF_ERR_FORMAT, "%s.attention.layer_norm_rms_epsilon = %g is out of range (finite, between 0 and 1)",
                        a, hp->eps);
    if (!isfinite(scale) || !(scale > 0) || !isfinite(scale_linear) || !(scale_linear > 0))
        return clf_fail(CLF_ERR_FORMAT, "%s.rope.%s = %g is out of range (finite and > 0)", a,
                        !isfinite(scale) || !(scale > 0) ? "scaling.factor" : "scale_linear",
                        !isfinite(scale) || !(scale > 0) ? scale : scale_linear);
    CLF_TRY(rope_scaling(g, a, &hp->rope_freq_scale, &hp->yarn));
    if (hp->yarn) CLF_TRY(yarn_keys(g, a, hp));
    /* Scores are scaled by 1/sqrt(query_pre_attn_scalar): the file's
     * attention.scale where it has one (llama.cpp's key for the scale
     * itself), else the head's width, but n_embd / n_head for the one size
     * the family names. Gemma 3's files carry no key for it, and no rule on
     * their shapes tells 27B (5376 / 32 = 168, heads of 128) from the others
     * (256, the head's width, where n_embd / n_head is 160, 288, 320, 240):
     * llama.cpp keys it on the 62 layers (its LLM_TYPE_27B), so the family
     * does (q_scale_embd_n_layer). */
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (f->q_scale_embd_n_layer && hp->n_layer == f->q_scale_embd_n_layer)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    CLF_TRY(get_f32(g, a, "attention.scale", &hp->attn_scale));
    if (!isfinite(hp->attn_scale) || !(hp->attn_scale > 0))
        return clf_fail(CLF_ERR_FORMAT, "%s.attention.scale = %g is out of range (finite and > 0)", a, hp->attn_scale);
    if (f->swa_period) {
        CLF_TRY(get_u32(g, a, "attention.sliding_window", 1, &hp->n_swa));
        /* the local layers' base: llama.cpp's fixed one unless the file states it */
        hp->rope_base_swa = f->swa_rope_base > 0 ? f->swa_rope_base : hp->rope_base;
        CLF_TRY(get_f32(g, a, "rope.freq_base_swa", &hp->rope_base_swa));
        if (!isfinite(hp->rope_base_swa) || !(hp->rope_base_swa > 1))
            return clf_fail(CLF_ERR_FORMAT, "%s.rope.freq_base_swa = %g is out of range (finite and > 1)", a,
                            hp->rope_base_swa);
        hp->rope_freq_scale_swa = f->swa_rope_scaled ? hp->rope_freq_scale : 1.0f;
    }

    CLF_TRY(moe_keys(g, a, f, hp));

    const clf_gguf_tensor *t;
    CLF_TRY(want_tensor(g, "token_embd.weight", hp->n_embd, hp->n_vocab, &t));
    const clf_gguf_kv *toks = clf_gguf_find(g, "tokenizer.ggml.tokens");
    if (toks && toks->arr_n != (uint64_t)hp->n_vocab)
        return clf_fail(CLF_ERR_FORMAT, "vocabulary has %llu tokens but token_embd.weight has %d rows",
                        (unsigned long long)toks->arr_n, hp->n_vocab);
    if (!hp->tied) CLF_TRY(want_tensor(g, "output.weight", hp->n_embd, hp->n_vocab, &t));
    CLF_TRY(want_tensor(g, "output_norm.weight", hp->n_embd, 0, &t));
    if (clf_gguf_find_tensor(g, "rope_factors_long.weight") || clf_gguf_find_tensor(g, "rope_factors_short.weight"))
        return clf_fail(CLF_ERR_FORMAT, "LongRoPE (rope_factors_long/short) is unsupported");
    if ((hp->rope_freqs = clf_gguf_find_tensor(g, "rope_freqs.weight") != NULL))
        CLF_TRY(want_tensor(g, "rope_freqs.weight", hp->n_rot / 2, 0, &t));

    /* a block_count below the blocks present would run part of the model */
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_str *nm = &clf_gguf_tensor_at(g, i)->name;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(nm->len < 120 ? nm->len : 120), nm->ptr);
        if (strncmp(name, "blk.", 4) || !isdigit((unsigned char)name[4])) continue;
        char *end;
        unsigned long long blk = strtoull(name + 4, &end, 10);
        if (*end == '.' && blk >= (unsigned long long)hp->n_layer)
            return clf_fail(CLF_ERR_FORMAT, "tensor %s is of block %llu but %s.block_count is %d", name, blk, a,
                            hp->n_layer);
    }

    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    hp->fused_qkv = clf_gguf_find_tensor(g, "blk.0.attn_qkv.weight") != NULL;
    hp->fused_gate_up = !hp->n_expert && !clf_gguf_find_tensor(g, "blk.0.ffn_gate.weight");
    const int dense = !hp->n_expert;
    for (int l = 0; l < hp->n_layer; l++) {
        char name[96];
        struct { const char *n; int64_t ne0, ne1; int on; } want[] = {
            {"attn_norm", hp->n_embd, 0, 1}, {"ffn_norm", hp->n_embd, 0, !f->ffn_norm_post_attn},
            {"attn_qkv", hp->n_embd, q_dim + 2 * kv_dim, hp->fused_qkv},
            {"attn_q", hp->n_embd, q_dim, !hp->fused_qkv}, {"attn_k", hp->n_embd, kv_dim, !hp->fused_qkv},
            {"attn_v", hp->n_embd, kv_dim, !hp->fused_qkv}, {"attn_output", q_dim, hp->n_embd, 1},
            {"ffn_gate", hp->n_embd, hp->n_ff, dense && !hp->fused_gate_up},
            {"ffn_up", hp->n_embd, hp->fused_gate_up ? 2 * (int64_t)hp->n_ff : hp->n_ff, dense},
            {"ffn_down", hp->n_ff, hp->n_embd, dense},
            {"ffn_gate_inp", hp->n_embd, hp->n_expert, !dense},
            {"attn_q_norm", hp->head_dim, 0, f->qk_norm}, {"attn_k_norm", hp->head_dim, 0, f->qk_norm},
            {"post_attention_norm", hp->n_embd, 0, f->post_norms || f->ffn_norm_post_attn},
            {"post_ffw_norm", hp->n_embd, 0, f->post_norms},
            {"attn_sinks", hp->n_head, 0, f->attn_sinks},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            if (!want[i].on) continue;
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, want[i].n);
            CLF_TRY(want_tensor(g, name, want[i].ne0, want[i].ne1, &t));
        }
        if (!dense) { /* the experts stacked: [n_embd, n_ff_exp, n_expert], down [n_ff_exp, n_embd, n_expert] */
            const char *e[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, e[i]);
                CLF_TRY(want_tensor3(g, name, i < 2 ? hp->n_embd : hp->n_ff_exp, i < 2 ? hp->n_ff_exp : hp->n_embd,
                                     hp->n_expert));
            }
        }
        if (f->qkv_bias) {
            const char *b[] = {"attn_q", "attn_k", "attn_v"};
            int64_t nb[] = {q_dim, kv_dim, kv_dim};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "blk.%d.%s.bias", l, b[i]);
                CLF_TRY(want_tensor(g, name, nb[i], 0, &t));
            }
        }
        if (f->attn_out_bias) {
            snprintf(name, sizeof name, "blk.%d.attn_output.bias", l);
            CLF_TRY(want_tensor(g, name, hp->n_embd, 0, &t));
        }
        if (f->moe_biases && !dense) { /* F32 [n_expert], [n_ff_exp | n_embd × n_expert] */
            snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.bias", l);
            CLF_TRY(want_tensor(g, name, hp->n_expert, 0, &t));
            const char *e[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "blk.%d.%s.bias", l, e[i]);
                CLF_TRY(want_tensor(g, name, i < 2 ? hp->n_ff_exp : hp->n_embd, hp->n_expert, &t));
                if (t->type != CLF_F32)
                    return clf_fail(CLF_ERR_FORMAT, "tensor %s must be F32, is %s", name, clf_type_get(t->type)->name);
            }
        }
    }
    return CLF_OK;
}

size_t clf_llama_weight_bytes(const clf_gguf *g) {
    size_t total = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) total += clf_gguf_tensor_at(g, i)->bytes;
    const clf_gguf_tensor *emb = clf_gguf_find_tensor(g, "token_embd.weight");
    if (emb && !clf_gguf_find_tensor(g, "output.weight")) total += emb->bytes; /* tied: a second copy */
    return total;
}

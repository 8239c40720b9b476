/* llama.cpp's per-tensor type choice for its file types, rewritten from
 * llama-quant.cpp (llama-cpp-python 0.3.36's llama.cpp): no Falcon, no
 * importance matrix; of the expert rules only MXFP4_MOE's (experts, the
 * tensors of 3 dimensions, in MXFP4, every other matrix in Q8_0). */
#include "quant_mix.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* LLAMA_FTYPE_MOSTLY_* (llama.h) of the mixes with per-tensor rules */
enum {
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14,
    FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_IQ4_NL = 25, FT_MXFP4_MOE = 38,
};

static const clf_quant_mix MIXES[] = {
    {"F32", 0, CLF_F32},         {"F16", 1, CLF_F16},         {"BF16", 32, CLF_BF16},      {"Q8_0", 7, CLF_Q8_0},
    {"Q6_K", 18, CLF_Q6_K},      {"Q5_K_M", FT_Q5_K_M, CLF_Q5_K}, {"Q5_K_S", FT_Q5_K_S, CLF_Q5_K},
    {"Q5_1", 9, CLF_Q5_1},       {"Q5_0", 8, CLF_Q5_0},       {"Q4_K_M", FT_Q4_K_M, CLF_Q4_K},
    {"Q4_K_S", FT_Q4_K_S, CLF_Q4_K}, {"Q4_1", 3, CLF_Q4_1},   {"Q4_0", 2, CLF_Q4_0},
    {"IQ4_NL", FT_IQ4_NL, CLF_IQ4_NL}, {"Q3_K_L", FT_Q3_K_L, CLF_Q3_K}, {"Q3_K_M", FT_Q3_K_M, CLF_Q3_K},
    {"Q3_K_S", FT_Q3_K_S, CLF_Q3_K}, {"Q2_K", FT_Q2_K, CLF_Q2_K}, {"MXFP4_MOE", FT_MXFP4_MOE, CLF_MXFP4},
};
enum { N_MIXES = sizeof MIXES / sizeof MIXES[0] };

const clf_quant_mix *clf_quant_mix_find(const char *name) {
    for (int i = 0; i < N_MIXES; i++)
        if (strcasecmp(MIXES[i].name, name) == 0) return &MIXES[i];
    return NULL;
}

const clf_quant_mix *clf_quant_mix_of_ftype(uint32_t ftype) {
    for (int i = 0; i < N_MIXES; i++)
        if (MIXES[i].ftype == ftype) return &MIXES[i];
    return NULL;
}

char *clf_quant_mix_names(char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < N_MIXES && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", MIXES[i].name);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

/* ---- tensors ------------------------------------------------------------------ */

typedef enum { CAT_OTHER, CAT_TOKEN_EMBD, CAT_OUTPUT, CAT_ATTN_V, CAT_ATTN_OUTPUT, CAT_FFN_DOWN } category;

/* llama.cpp's tensor_get_category, in its order of tests (attn_qkv and
 * attn_kv_b count as attn_v: as sensitive to quantization). */
static category category_of(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight"))
        return CAT_ATTN_V;
    if (strstr(name, "attn_k.weight") || strstr(name, "attn_q.weight")) return CAT_OTHER;
    if (strstr(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(name, "ffn_up") || strstr(name, "ffn_gate")) return CAT_OTHER;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

/* llama.cpp's tensor_allows_quantization for a tensor of 2+ dimensions:
 * names ending in "weight", less norms, routers, position and small
 * special-purpose matrices. */
static int allows_quantization(const char *name) {
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
        "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
        "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
        "mm.a.code_embd",
    };
    size_t n = strlen(name);
    if (n < 6 || strcmp(name + n - 6, "weight")) return 0;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return 0;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (strstr(name, keep[i])) return 0;
    return 1;
}

/* Layer of "blk.N...." names, -1 for the others. */
static int layer_of(const char *name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* ---- the model ------------------------------------------------------------------ */

typedef struct mix_state {
    const clf_quant_mix *mix;
    int n_layer, gqa, tied, is_70b;
    int n_attn_v, i_attn_v, i_ffn_down;
} mix_state;

static int64_t optional_u32(const clf_gguf *g, const char *arch, const char *key, int64_t dflt) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    uint32_t v;
    return clf_gguf_find(g, full) && clf_gguf_get_u32(g, full, &v) == CLF_OK ? (int64_t)v : dflt;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one between. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int is_quantized(clf_type t) { return clf_type_get(t)->block > 1; }

/* llama_tensor_get_type_impl: the mix's type for one quantizable matrix
 * of ne0 columns and ne2 (its third dimension: experts) planes. */
static clf_type mix_type(mix_state *s, category cat, int64_t ne0, int64_t ne2) {
    const uint32_t ft = s->mix->ftype;
    clf_type t = s->mix->base;
    /* MXFP4_MOE: the head (or tied embeddings) and every 2-D matrix Q8_0, the
     * experts' 3-D tensors MXFP4 (llama.cpp's rule; its BailingMoE3
     * exception concerns an architecture clinfer does not load) */
    if (ft == FT_MXFP4_MOE) return (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD) || ne2 <= 1) ? CLF_Q8_0 : t;
    if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        if (ne0 % clf_type_get(t)->block) return CLF_Q8_0;
        return t != CLF_Q8_0 ? CLF_Q6_K : t;
    }
    if (cat == CAT_ATTN_V) {
        const int i = s->i_attn_v++, n = s->n_attn_v;
        if (ft == FT_Q2_K) t = s->gqa >= 4 ? CLF_Q4_K : CLF_Q3_K;
        else if (ft == FT_Q3_K_M) t = i < 2 ? CLF_Q5_K : CLF_Q4_K;
        else if (ft == FT_Q3_K_L) t = CLF_Q5_K;
        else if (ft == FT_IQ4_NL && s->gqa >= 4) t = CLF_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, n)) t = CLF_Q6_K;
        else if (ft == FT_Q4_K_S && i < 4) t = CLF_Q5_K;
        /* a 70B's attn_v is 8x smaller than attn_q (8 heads share it): more bits are cheap */
        if (s->is_70b && (t == CLF_Q3_K || t == CLF_Q4_K)) t = CLF_Q5_K;
    } else if (cat == CAT_FFN_DOWN) {
        const int i = s->i_ffn_down++, n = s->n_layer;
        if (ft == FT_Q2_K) t = CLF_Q3_K;
        else if (ft == FT_Q3_K_M) t = i < n / 16 ? CLF_Q5_K : CLF_Q4_K;
        else if (ft == FT_Q3_K_L) t = CLF_Q5_K;
        else if (ft == FT_Q4_K_M && use_more_bits(i, n)) t = CLF_Q6_K;
        else if (ft == FT_IQ4_NL && i < n / 8) t = CLF_Q5_K;
        else if (ft == FT_Q5_K_M && use_more_bits(i, n)) t = CLF_Q6_K;
        else if (ft == FT_Q4_K_S && i < n / 8) t = CLF_Q5_K;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (ft == FT_Q2_K) t = CLF_Q3_K;
        else if (ft == FT_Q3_K_M) t = CLF_Q4_K;
        else if (ft == FT_Q3_K_L) t = CLF_Q5_K;
    }
    return t;
}

/* tensor_type_fallback: a 32-weight-block type for rows that are not whole
 * super-blocks; F32 when not even those fit. */
static clf_type fallback(clf_type t, int64_t ne0, int *fell) {
    if (ne0 % clf_type_get(t)->block == 0) return t;
    clf_type f = t;
    switch (t) {
    case CLF_Q2_K:
    case CLF_Q3_K: f = CLF_Q4_0; break;
    case CLF_Q4_K: f = CLF_Q5_0; break;
    case CLF_Q5_K: f = CLF_Q5_1; break;
    case CLF_Q6_K: f = CLF_Q8_0; break;
    default: break;
    }
    *fell = 1;
    return ne0 % clf_type_get(f)->block ? CLF_F32 : f;
}

/* ---- the plan ------------------------------------------------------------------ */

typedef struct ordered { int64_t i; int layer; const char *name; } ordered;

/* llama.cpp's weights_map order: by layer, then by name. */
static int ordered_cmp(const void *a, const void *b) {
    const ordered *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

clf_status clf_quant_mix_plan(const clf_quant_mix *mix, const clf_gguf *g, clf_type *types, int *n_fallback) {
    const int64_t n = clf_gguf_n_tensors(g);
    ordered *ord = calloc((size_t)(n ? n : 1), sizeof *ord);
    char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    clf_status st = ord && names ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of memory planning %" PRId64 " tensors", n);
    mix_state s = {.mix = mix, .tied = 1};
    int max_layer = -1;
    for (int64_t i = 0; st == CLF_OK && i < n; i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        names[i] = malloc((size_t)t->name.len + 1);
        if (!names[i]) {
            st = clf_fail(CLF_ERR_MEMORY, "out of memory planning %" PRId64 " tensors", n);
            break;
        }
        memcpy(names[i], t->name.ptr, (size_t)t->name.len);
        names[i][t->name.len] = 0;
        ord[i] = (ordered){i, layer_of(names[i]), names[i]};
        category c = category_of(names[i]);
        s.n_attn_v += c == CAT_ATTN_V;
        if (c == CAT_OUTPUT) s.tied = 0;
        if (ord[i].layer > max_layer) max_layer = ord[i].layer;
    }
    if (st == CLF_OK) {
        clf_gguf_str a = {"", 0};
        char arch[64] = "";
        if (clf_gguf_find(g, "general.architecture") && clf_gguf_get_str(g, "general.architecture", &a) == CLF_OK &&
            a.len < sizeof arch)
            memcpy(arch, a.ptr, (size_t)a.len), arch[a.len] = 0;
        s.n_layer = (int)optional_u32(g, arch, "block_count", max_layer + 1);
        int64_t n_head = optional_u32(g, arch, "attention.head_count", 0);
        int64_t n_head_kv = optional_u32(g, arch, "attention.head_count_kv", n_head);
        s.gqa = n_head_kv ? (int)(n_head / n_head_kv) : 0;
        s.is_70b = !strcmp(arch, "llama") && s.n_layer == 80 && n_head != n_head_kv;
        qsort(ord, (size_t)n, sizeof *ord, ordered_cmp);
        int fell_total = 0;
        for (int64_t k = 0; k < n; k++) {
            const clf_gguf_tensor *t = clf_gguf_tensor_at(g, ord[k].i);
            clf_type *out = &types[ord[k].i];
            if (t->ne[1] * t->ne[2] * t->ne[3] == 1) { /* a vector (ggml_n_dims < 2) */
                *out = CLF_F32;
                continue;
            }
            if (!allows_quantization(ord[k].name)) {
                *out = t->type;
                continue;
            }
            clf_type want = mix->base;
            int fell = 0;
            if (is_quantized(want))
                want = fallback(mix_type(&s, category_of(ord[k].name), t->ne[0], t->ne[2]), t->ne[0], &fell);
            *out = want;
            fell_total += fell;
        }
        if (n_fallback) *n_fallback = fell_total;
    }
    for (int64_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(ord);
    return st;
}

#include "llama.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"
#include "split.h"

/* ---- hyperparameters and tensor checks -------------------------------- */

static clf_status get_u32(const clf_gguf *g, const char *arch, const char *key, int required, int *out) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!clf_gguf_find(g, full) && !required) return CLF_OK;
    uint32_t v;
    CLF_TRY(clf_gguf_get_u32(g, full, &v));
    if (v == 0 || v > (1u << 30)) return clf_fail(CLF_ERR_FORMAT, "%s = %u is out of range", full, v);
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

/* An int-sized dimension from the shape reader, or an error naming it. */
static clf_status dim(const char *arch, const char *key, int64_t v, int *out) {
    if (v <= 0 || v > (1 << 30)) return clf_fail(CLF_ERR_FORMAT, "%s.%s = %lld is out of range", arch, key, (long long)v);
    *out = (int)v;
    return CLF_OK;
}

/* Linear position scaling as llama.cpp reads it: 1 / rope.scaling.factor
 * (else the older rope.scale_linear) unless rope.scaling.type is "none";
 * other schemes (YaRN, LongRoPE) are refused by name. The factors' ranges
 * are checked by the caller. */
static clf_status rope_scaling(const clf_gguf *g, const char *a, float *freq_scale) {
    char key[128];
    float factor = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (clf_gguf_find(g, key)) {
        clf_gguf_str type;
        CLF_TRY(clf_gguf_get_str(g, key, &type));
        int none = type.len == 4 && !memcmp(type.ptr, "none", 4), linear = type.len == 6 && !memcmp(type.ptr, "linear", 6);
        if (!none && !linear)
            return clf_fail(CLF_ERR_FORMAT, "RoPE scaling '%.*s' is unsupported (none, linear are)",
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
    if ((int64_t)hp->head_dim * hp->n_head > (1 << 30))
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
    CLF_TRY(rope_scaling(g, a, &hp->rope_freq_scale));
    /* Gemma 3 27B scales scores by 1/sqrt(n_embd / n_head), not by the
     * head's width (gemma_pytorch's query_pre_attn_scalar; llama.cpp keys it
     * on the 62 layers) */
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (f->post_norms && hp->n_layer == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if (f->swa_period) CLF_TRY(get_u32(g, a, "attention.sliding_window", 1, &hp->n_swa));

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
    hp->fused_gate_up = !clf_gguf_find_tensor(g, "blk.0.ffn_gate.weight");
    for (int l = 0; l < hp->n_layer; l++) {
        char name[96];
        struct { const char *n; int64_t ne0, ne1; int on; } want[] = {
            {"attn_norm", hp->n_embd, 0, 1}, {"ffn_norm", hp->n_embd, 0, 1},
            {"attn_qkv", hp->n_embd, q_dim + 2 * kv_dim, hp->fused_qkv},
            {"attn_q", hp->n_embd, q_dim, !hp->fused_qkv}, {"attn_k", hp->n_embd, kv_dim, !hp->fused_qkv},
            {"attn_v", hp->n_embd, kv_dim, !hp->fused_qkv}, {"attn_output", q_dim, hp->n_embd, 1},
            {"ffn_gate", hp->n_embd, hp->n_ff, !hp->fused_gate_up},
            {"ffn_up", hp->n_embd, hp->fused_gate_up ? 2 * (int64_t)hp->n_ff : hp->n_ff, 1},
            {"ffn_down", hp->n_ff, hp->n_embd, 1},
            {"attn_q_norm", hp->head_dim, 0, f->qk_norm}, {"attn_k_norm", hp->head_dim, 0, f->qk_norm},
            {"post_attention_norm", hp->n_embd, 0, f->post_norms}, {"post_ffw_norm", hp->n_embd, 0, f->post_norms},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            if (!want[i].on) continue;
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, want[i].n);
            CLF_TRY(want_tensor(g, name, want[i].ne0, want[i].ne1, &t));
        }
        if (f->qkv_bias) {
            const char *b[] = {"attn_q", "attn_k", "attn_v"};
            int64_t nb[] = {q_dim, kv_dim, kv_dim};
            for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "blk.%d.%s.bias", l, b[i]);
                CLF_TRY(want_tensor(g, name, nb[i], 0, &t));
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

/* ---- loading ------------------------------------------------------------ */

typedef struct loader {
    clf_llama *m;
    const clf_gguf *g;
    int done, total;
    double t0, shown; /* start, last progress line */
} loader;

/* Counts an uploaded tensor; only a load that takes a while reports, a few
 * times a second. Between tensors the runtime's abort hook may stop it. */
static clf_status progress(loader *ld) {
    ld->done++;
    double t = clf_now_s();
    if (t - ld->t0 >= 1.0 && (t - ld->shown >= 0.25 || ld->done == ld->total)) {
        ld->shown = t;
        fprintf(stderr, "\rclinfer: uploading weights %d/%d", ld->done, ld->total);
        if (ld->done == ld->total) fputc('\n', stderr);
    }
    if (clf_runtime_aborted(ld->m->rt))
        return clf_fail(CLF_ERR_INTERRUPTED, "loading stopped on request after %d of %d tensors", ld->done, ld->total);
    return clf_gguf_guard_check(ld->g); /* the file shrank: stop uploading zeros */
}

static clf_status upload_vec(loader *ld, const char *name, clf_tensor *t) {
    const clf_gguf_tensor *gt = clf_gguf_find_tensor(ld->g, name);
    CLF_TRY(clf_tensor_alloc(ld->m->rt, CLF_F32, gt->ne[0], 1, t));
    CLF_TRY(clf_tensor_upload(ld->m->rt, t, gt->data, gt->bytes));
    ld->m->device_bytes += gt->bytes;
    return progress(ld);
}

/* Uploads the row-concatenation of `n` tensors (same type and columns; see
 * upload_proj) as one weight: fusing Q|K|V and gate|up turns three or two
 * launches into one. */
static clf_status upload_fused(loader *ld, const char *const *names, int n, clf_weight *w) {
    const clf_gguf_tensor *ts[3] = {NULL};
    int64_t rows = 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        ts[i] = clf_gguf_find_tensor(ld->g, names[i]);
        rows += ts[i]->ne[1];
        bytes += ts[i]->bytes;
    }
    const void *data = ts[0]->data;
    unsigned char *cat = NULL;
    if (n > 1) {
        cat = malloc(bytes);
        if (!cat) return clf_fail(CLF_ERR_MEMORY, "out of host memory fusing %s", names[0]);
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            memcpy(cat + off, ts[i]->data, ts[i]->bytes);
            off += ts[i]->bytes;
        }
        data = cat;
    }
    clf_status st = clf_weight_upload(ld->m->rt, ts[0]->type, rows, ts[0]->ne[0], data, w);
    free(cat);
    if (st != CLF_OK) return clf_fail_ctx(st, "uploading %s: ", names[0]);
    ld->m->device_bytes += w->bytes;
    for (int i = 0; i < n; i++) CLF_TRY(progress(ld));
    return CLF_OK;
}

/* The group `names` as runs of equal types (one, unless the file mixes
 * them): converting a tensor to its neighbours' type would cost precision,
 * and keeping the output row fused keeps one RoPE launch over Q|K, the KV
 * write and SwiGLU as they are; a mixed group costs a launch per run. */
static clf_status upload_proj(loader *ld, const char *const *names, int n, clf_llama_proj *p) {
    int64_t col = 0;
    for (int i = 0; i < n;) {
        const clf_gguf_tensor *t0 = clf_gguf_find_tensor(ld->g, names[i]);
        int run = 1;
        while (i + run < n && clf_gguf_find_tensor(ld->g, names[i + run])->type == t0->type) run++;
        CLF_TRY(upload_fused(ld, names + i, run, &p->part[p->n]));
        p->col0[p->n++] = col;
        col += p->part[p->n - 1].rows;
        i += run;
    }
    return CLF_OK;
}

static void proj_free(clf_llama_proj *p) {
    for (int i = 0; i < p->n; i++) clf_weight_free(&p->part[i]);
    p->n = 0;
}

static clf_status upload_bias(loader *ld, int l, clf_tensor *t) {
    const clf_llama_hparams *hp = &ld->m->hp;
    int kv_dim = hp->n_head_kv * hp->head_dim, n = hp->n_head * hp->head_dim + 2 * kv_dim;
    float *cat = malloc((size_t)n * sizeof *cat);
    if (!cat) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    const char *b[] = {"attn_q", "attn_k", "attn_v"};
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%d.%s.bias", l, b[i]);
        const clf_gguf_tensor *gt = clf_gguf_find_tensor(ld->g, name);
        memcpy(cat + off, gt->data, gt->bytes);
        off += (size_t)gt->ne[0];
    }
    clf_status st = clf_tensor_alloc(ld->m->rt, CLF_F32, n, 1, t);
    if (st == CLF_OK) st = clf_tensor_upload(ld->m->rt, t, cat, (size_t)n * sizeof *cat);
    free(cat);
    ld->m->device_bytes += (size_t)n * sizeof *cat;
    for (int i = 0; st == CLF_OK && i < 3; i++) st = progress(ld);
    return st;
}

/* "1.5 GiB", "12.0 MiB", "36.0 KiB", "100 bytes": small limits stay readable. */
static const char *size_str(double b, char *buf, size_t n) {
    if (b >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else if (b >= 1024.0) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else snprintf(buf, n, "%.0f bytes", b);
    return buf;
}

/* The weights of the model's layer range against its device. */
static clf_status check_fits(const clf_llama *m, const clf_gguf *g) {
    const clf_runtime *rt = m->rt;
    int n_layer = m->hp.n_layer;
    size_t need = clf_split_range_bytes(g, m->l0, m->l1, n_layer, NULL);
    char a[32], b[32], range[48] = "";
    if (m->l0 > 0 || m->l1 < n_layer) snprintf(range, sizeof range, " of layers %d-%d", m->l0, m->l1 - 1);
    if (need > rt->dev.global_mem)
        return clf_fail(CLF_ERR_MEMORY, "model weights%s need %s but %s has %s of global memory", range,
                        size_str((double)need, a, sizeof a), rt->dev.name, size_str((double)rt->dev.global_mem, b, sizeof b));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        if (!clf_split_tensor_on_stage(t->name.ptr, t->name.len, m->l0, m->l1, n_layer)) continue;
        if (t->bytes > rt->dev.max_alloc)
            return clf_fail(CLF_ERR_MEMORY, "tensor %.*s (%s) exceeds %s's max allocation of %s", (int)t->name.len,
                            t->name.ptr, size_str((double)t->bytes, a, sizeof a), rt->dev.name,
                            size_str((double)rt->dev.max_alloc, b, sizeof b));
    }
    return CLF_OK;
}

/* blk.<l>.<what>.weight */
static const char *layer_name(char *buf, size_t n, int l, const char *what) {
    snprintf(buf, n, "blk.%d.%s.weight", l, what);
    return buf;
}

static clf_status upload_layer_vec(loader *ld, int l, const char *what, clf_tensor *t) {
    char name[96];
    return upload_vec(ld, layer_name(name, sizeof name, l, what), t);
}

/* blk.<l>.<what[i]>.weight for i < n as one weight (upload_fused). */
static clf_status upload_layer(loader *ld, int l, const char *const *what, int n, clf_weight *w) {
    char names[3][96];
    const char *p[3];
    for (int i = 0; i < n; i++) p[i] = layer_name(names[i], sizeof names[i], l, what[i]);
    return upload_fused(ld, p, n, w);
}

/* The same for a fused projection whose tensors may differ in type. */
static clf_status upload_layer_proj(loader *ld, int l, const char *const *what, int n, clf_llama_proj *pr) {
    char names[3][96];
    const char *p[3];
    for (int i = 0; i < n; i++) p[i] = layer_name(names[i], sizeof names[i], l, what[i]);
    return upload_proj(ld, p, n, pr);
}

static clf_status upload_all(loader *ld) {
    clf_llama *m = ld->m;
    const clf_gguf *g = ld->g;
    const clf_llama_hparams *hp = &m->hp;
    const clf_family *f = hp->fam;
    CLF_TRY(check_fits(m, g));
    /* the embedding on the first stage, the head on the last (stage.h) */
    if (m->l0 == 0) {
        const clf_gguf_tensor *emb = clf_gguf_find_tensor(g, "token_embd.weight");
        CLF_TRY(clf_tensor_alloc(m->rt, emb->type, emb->ne[0], emb->ne[1], &m->tok_embd));
        CLF_TRY(clf_tensor_upload(m->rt, &m->tok_embd, emb->data, emb->bytes));
        m->device_bytes += emb->bytes;
        CLF_TRY(progress(ld));
    }
    if (m->l1 == hp->n_layer) {
        const char *out_name[] = {hp->tied ? "token_embd.weight" : "output.weight"};
        CLF_TRY(upload_fused(ld, out_name, 1, &m->output));
        CLF_TRY(upload_vec(ld, "output_norm.weight", &m->out_norm));
    }
    if (hp->rope_freqs) CLF_TRY(upload_vec(ld, "rope_freqs.weight", &m->rope_freqs));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    /* Q|K|V and gate|up become one weight each, fused here unless stored so */
    static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"}, *const qkv_fused[] = {"attn_qkv"};
    static const char *const gate_up[] = {"ffn_gate", "ffn_up"}, *const gate_up_fused[] = {"ffn_up"};
    static const char *const wo[] = {"attn_output"}, *const down[] = {"ffn_down"};
    for (int l = m->l0; l < m->l1; l++) {
        clf_llama_layer *L = &m->layers[l];
        CLF_TRY(upload_layer_vec(ld, l, "attn_norm", &L->attn_norm));
        CLF_TRY(upload_layer_vec(ld, l, "ffn_norm", &L->ffn_norm));
        if (f->qk_norm) {
            CLF_TRY(upload_layer_vec(ld, l, "attn_q_norm", &L->q_norm));
            CLF_TRY(upload_layer_vec(ld, l, "attn_k_norm", &L->k_norm));
        }
        if (f->post_norms) {
            CLF_TRY(upload_layer_vec(ld, l, "post_attention_norm", &L->post_attn_norm));
            CLF_TRY(upload_layer_vec(ld, l, "post_ffw_norm", &L->post_ffn_norm));
        }
        CLF_TRY(hp->fused_qkv ? upload_layer_proj(ld, l, qkv_fused, 1, &L->wqkv)
                              : upload_layer_proj(ld, l, qkv, 3, &L->wqkv));
        CLF_TRY(upload_layer(ld, l, wo, 1, &L->wo));
        CLF_TRY(hp->fused_gate_up ? upload_layer_proj(ld, l, gate_up_fused, 1, &L->wgu)
                                  : upload_layer_proj(ld, l, gate_up, 2, &L->wgu));
        CLF_TRY(upload_layer(ld, l, down, 1, &L->wdown));
        if (f->qkv_bias) CLF_TRY(upload_bias(ld, l, &L->bqkv));
    }
    return CLF_OK;
}

static clf_status load(clf_llama *m, const clf_gguf *g) {
    int total;
    clf_split_range_bytes(g, m->l0, m->l1, m->hp.n_layer, &total);
    loader ld = {m, g, 0, total, clf_now_s(), 0};
    clf_status st = upload_all(&ld);
    /* a progress line cut short (Ctrl-C, an error) ends before the message */
    if (ld.shown > 0 && ld.done < ld.total) fputc('\n', stderr);
    return st;
}

clf_status clf_llama_load_range(clf_runtime *rt, const clf_gguf *g, int l0, int l1, clf_llama **out) {
    *out = NULL;
    clf_llama *m = calloc(1, sizeof *m);
    if (!m) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    m->rt = rt;
    clf_gguf_guard_begin(g); /* weights and keys are read from the mapping */
    clf_status st = clf_llama_hparams_read(g, &m->hp);
    if (st == CLF_OK && l1 < 0) l1 = m->hp.n_layer;
    if (st == CLF_OK && (l0 < 0 || l1 <= l0 || l1 > m->hp.n_layer))
        st = clf_fail(CLF_ERR_ARG, "layers %d-%d are not a range of the model's %d", l0, l1 - 1, m->hp.n_layer);
    m->l0 = l0;
    m->l1 = l1;
    if (st == CLF_OK) st = load(m, g);
    clf_status changed = clf_gguf_guard_end(g);
    if (changed != CLF_OK) st = changed; /* it explains whatever else failed */
    if (st != CLF_OK) {
        clf_llama_free(m);
        return st;
    }
    *out = m;
    return CLF_OK;
}

clf_status clf_llama_load(clf_runtime *rt, const clf_gguf *g, clf_llama **out) {
    return clf_llama_load_range(rt, g, 0, -1, out);
}

void clf_llama_set_next(clf_llama *m, const clf_stage_ops *ops, void *next) {
    m->next_ops = ops;
    m->next = next;
}

void clf_llama_free(clf_llama *m) {
    if (!m) return;
    clf_tensor_free(&m->tok_embd);
    clf_tensor_free(&m->out_norm);
    clf_tensor_free(&m->rope_freqs);
    clf_weight_free(&m->output);
    for (int l = 0; m->layers && l < m->hp.n_layer; l++) {
        clf_llama_layer *L = &m->layers[l];
        clf_tensor *vecs[] = {&L->attn_norm, &L->ffn_norm, &L->post_attn_norm, &L->post_ffn_norm, &L->q_norm, &L->k_norm};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) clf_tensor_free(vecs[i]);
        clf_tensor_free(&L->bqkv);
        proj_free(&L->wqkv);
        clf_weight_free(&L->wo);
        proj_free(&L->wgu);
        clf_weight_free(&L->wdown);
    }
    free(m->layers);
    free(m);
}

/* ---- context -------------------------------------------------------------- */

/* One sequence's caches: the global layers', and the sliding-window
 * layers' ring of the window and a chunk. */
static clf_status create_caches(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type, clf_kv_cache *kv,
                                clf_kv_cache *kv_swa) {
    const clf_llama_hparams *hp = &m->hp;
    int n_swa_layers = 0, n_layer = m->l1 - m->l0; /* the stage's layers only */
    for (int l = m->l0; l < m->l1; l++) n_swa_layers += clf_family_layer_swa(hp->fam, l);
    if (n_swa_layers < n_layer)
        CLF_TRY(clf_kv_cache_create(m->rt, kv_type, n_layer - n_swa_layers, hp->n_head_kv, hp->head_dim, n_ctx, 0,
                                    kv));
    if (n_swa_layers)
        CLF_TRY(clf_kv_cache_create(m->rt, kv_type, n_swa_layers, hp->n_head_kv, hp->head_dim,
                                    clf_kv_ring_slots(hp->n_swa, n_batch, n_ctx), hp->n_swa, kv_swa));
    return CLF_OK;
}

/* 1 when a decode product reading the norms' or SwiGLU's output quantizes
 * it to int8 (the first layer's weights stand for all; a product that does
 * not just reads the float rows). */
static int takes_xq(const clf_llama *m) {
    const clf_llama_hparams *hp = &m->hp;
    if (hp->n_embd % 32 || hp->n_ff % 32) return 0;
    const clf_llama_layer *L = &m->layers[m->l0]; /* a stage's first layer; the head on the last stage only */
    const clf_llama_proj *ps[] = {&L->wqkv, &L->wgu};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < ps[i]->n; j++)
            if (clf_matmul_quantizes_x(m->rt, &ps[i]->part[j], 1)) return 1;
    return clf_matmul_quantizes_x(m->rt, &L->wdown, 1) ||
           (m->l1 == hp->n_layer && clf_matmul_quantizes_x(m->rt, &m->output, 1));
}

clf_status clf_llama_ctx_create_seqs(const clf_llama *m, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                     clf_llama_ctx **out) {
    const clf_llama_hparams *hp = &m->hp;
    *out = NULL;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (n_batch <= 0 || n_batch > n_ctx) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (kv_type != CLF_F32 && kv_type != CLF_F16) return clf_fail(CLF_ERR_ARG, "KV cache type must be F32 or F16");
    if (n_seq < 1 || n_seq > 4096) return clf_fail(CLF_ERR_ARG, "%d sequences: 1 to 4096 are possible", n_seq);
    clf_llama_ctx *c = calloc(1, sizeof *c);
    if (!c) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->n_seq = n_seq;
    clf_runtime *rt = m->rt;
    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    c->seqs = calloc((size_t)n_seq, sizeof *c->seqs); /* [0] unused: sequence 0 is c->kv */
    c->host_ids = malloc((size_t)n_batch * sizeof *c->host_ids);
    clf_status st = c->seqs && c->host_ids ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = create_caches(m, n_ctx, n_batch, kv_type, &c->kv, &c->kv_swa);
    for (int i = 1; st == CLF_OK && i < n_seq; i++)
        st = create_caches(m, n_ctx, n_batch, kv_type, &c->seqs[i].kv, &c->seqs[i].kv_swa);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->x);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->xn);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, q_dim + 2 * kv_dim, n_batch, &c->qkv);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, q_dim, n_batch, &c->att);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, 2 * hp->n_ff, n_batch, &c->gu);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_ff, n_batch, &c->ff);
    int logit_rows = n_seq < n_batch ? n_seq : n_batch;
    if (m->next_ops) {
        /* a stage before the last: the next stage's context, and host rows for the hop */
        for (int i = 0; st == CLF_OK && i < 2; i++)
            if (!(c->hop_x[i] = malloc((size_t)n_batch * (size_t)hp->n_embd * sizeof(float))))
                st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        if (st == CLF_OK && !(c->hop_logits = malloc((size_t)logit_rows * (size_t)hp->n_vocab * sizeof(float))))
            st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        if (st == CLF_OK && (st = m->next_ops->ctx_create(m->next, n_ctx, n_batch, n_seq, kv_type, &c->next)) != CLF_OK) {
            clf_llama_ctx_free(c); /* the next stage's message says what it was creating */
            return st;
        }
        /* a prompt crosses in micro-batches: while the next stage runs one,
         * this one runs the next (a product's rows do not depend on how
         * many it takes at once on PoCL: the logits stay one device's) */
        c->n_micro = n_batch >= 128 ? n_batch / 4 : n_batch;
    } else if (m->l1 == hp->n_layer && st == CLF_OK) {
        /* a row per sequence (grown by all_logits) */
        st = clf_tensor_alloc(rt, CLF_F32, hp->n_vocab, logit_rows, &c->logits);
    }
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_ONLY, (size_t)n_batch * sizeof(int32_t), NULL, &c->ids);
    /* a decode row's activation quantized once by the norm or SwiGLU that makes it, where the GEMVs take int8 x */
    const int n_dec = n_seq < n_batch ? n_seq : n_batch;
    if (st == CLF_OK && takes_xq(m))
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(hp->n_embd), n_dec, &c->xq_e);
    if (st == CLF_OK && takes_xq(m))
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(hp->n_ff), n_dec, &c->xq_f);
    /* the attention output's, written by the decode kernel, where heads are whole blocks */
    if (st == CLF_OK && takes_xq(m) && hp->head_dim % 32 == 0)
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(q_dim), n_dec, &c->xq_a);
    if (st != CLF_OK) {
        clf_llama_ctx_free(c);
        return clf_fail_ctx(st, "creating a context of %d tokens: ", n_ctx);
    }
    c->device_bytes = c->kv.bytes + c->kv_swa.bytes + (size_t)n_batch * sizeof(int32_t);
    for (int i = 1; i < n_seq; i++) c->device_bytes += c->seqs[i].kv.bytes + c->seqs[i].kv_swa.bytes;
    const clf_tensor *ts[] = {&c->x, &c->xn, &c->qkv, &c->att, &c->gu, &c->ff, &c->logits, &c->xq_e, &c->xq_f, &c->xq_a};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) c->device_bytes += clf_tensor_bytes(ts[i]);
    *out = c;
    return CLF_OK;
}

clf_status clf_llama_ctx_create(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type, clf_llama_ctx **out) {
    return clf_llama_ctx_create_seqs(m, n_ctx, n_batch, 1, kv_type, out);
}

void clf_llama_ctx_free(clf_llama_ctx *c) {
    if (!c) return;
    clf_kv_cache_free(&c->kv);
    clf_kv_cache_free(&c->kv_swa);
    for (int i = 1; c->seqs && i < c->n_seq; i++) {
        clf_kv_cache_free(&c->seqs[i].kv);
        clf_kv_cache_free(&c->seqs[i].kv_swa);
    }
    free(c->seqs);
    free(c->host_ids);
    if (c->next) c->next->ops->free(c->next);
    free(c->hop_x[0]);
    free(c->hop_x[1]);
    free(c->hop_logits);
    free(c->top_logits);
    clf_topk_free(&c->topk);
    clf_tensor *ts[] = {&c->x, &c->xn, &c->qkv, &c->att, &c->gu, &c->ff, &c->logits, &c->xq_e, &c->xq_f, &c->xq_a};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clf_tensor_free(ts[i]);
    if (c->ids) clReleaseMemObject(c->ids);
    free(c);
}

/* Sequence s's caches and length: sequence 0 lives in the context's own
 * fields, which the single-sequence API has always used. */
typedef struct seq_ref {
    clf_kv_cache *kv, *kv_swa;
    int *n_past;
} seq_ref;

static seq_ref seq_at(clf_llama_ctx *c, int s) {
    if (s == 0) return (seq_ref){&c->kv, &c->kv_swa, &c->n_past};
    return (seq_ref){&c->seqs[s].kv, &c->seqs[s].kv_swa, &c->seqs[s].n_past};
}

int clf_llama_seq_len(const clf_llama_ctx *c, int seq) { return seq == 0 ? c->n_past : c->seqs[seq].n_past; }

/* Whether the model has sliding-window layers anywhere: every stage of a
 * split decides a rewind alike, whichever layers it holds. */
static int model_has_swa(const clf_llama_hparams *hp) {
    for (int l = 0; l < hp->n_layer; l++)
        if (clf_family_layer_swa(hp->fam, l)) return 1;
    return 0;
}

void clf_llama_seq_rewind(clf_llama_ctx *c, int seq, int pos) {
    seq_ref r = seq_at(c, seq);
    if (pos < 0 || pos >= *r.n_past) return;
    /* a ring that wrapped keeps the window before pos only if fewer than
     * slots - window + 1 positions are dropped */
    const clf_llama_hparams *hp = &c->m->hp;
    if (model_has_swa(hp)) {
        int slots = clf_kv_ring_slots(hp->n_swa, c->n_batch, c->n_ctx);
        if (*r.n_past > slots && *r.n_past - pos > slots - hp->n_swa + 1) pos = 0;
    }
    *r.n_past = pos;
    if (c->next) c->next->ops->seq_rewind(c->next, seq, pos);
}

void clf_llama_rewind(clf_llama_ctx *c, int pos) { clf_llama_seq_rewind(c, 0, pos); }

/* ---- forward pass ----------------------------------------------------------- */

/* out (+)= W · in where the first n1 rows are single tokens (decodes):
 * those computed as each token alone would be (clf_matmul_rowwise), reading
 * their int8 form xq [n1 rows] where given, the rest as one product. */
static clf_status product_cols(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                               clf_tensor *out, int64_t col0, int accumulate, int n1) {
    const int64_t n = clf_tensor_nrows(in);
    if (n1 <= 0) return clf_matmul_cols(rt, w, in, out, col0, accumulate);
    clf_tensor i1 = clf_tensor_rows(in, 0, n1), o1 = clf_tensor_rows(out, 0, n1);
    CLF_TRY(xq ? clf_matmul_rowwise_xq(rt, w, &i1, xq, &o1, col0, accumulate)
               : clf_matmul_rowwise(rt, w, &i1, &o1, col0, accumulate));
    if (n1 >= n) return CLF_OK;
    clf_tensor i2 = clf_tensor_rows(in, n1, n - n1), o2 = clf_tensor_rows(out, n1, n - n1);
    return clf_matmul_cols(rt, w, &i2, &o2, col0, accumulate);
}

static clf_status product(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                          clf_tensor *out, int accumulate, int n1) {
    return product_cols(rt, w, in, xq, out, 0, accumulate, n1);
}

/* A fused projection: each part (a run of one type) into its columns. */
static clf_status proj_product(clf_runtime *rt, const clf_llama_proj *p, const clf_tensor *in, const clf_tensor *xq,
                               clf_tensor *out, int n1) {
    for (int i = 0; i < p->n; i++) CLF_TRY(product_cols(rt, &p->part[i], in, xq, out, p->col0[i], 0, n1));
    return CLF_OK;
}

/* x += post_norm(W · in), the add fused into the norm, or x += W · in fused
 * into the product when the family has no post-norm; tmp is scratch as
 * wide as x. */
static clf_status residual(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                           const clf_tensor *post_norm, float eps, clf_tensor *x, clf_tensor *tmp, int n1) {
    if (!post_norm) return product(rt, w, in, xq, x, 1, n1);
    CLF_TRY(product(rt, w, in, xq, tmp, 0, n1));
    return clf_rmsnorm(rt, tmp, post_norm, eps, x, 1);
}

/* ff = act(gate) ⊙ up of the fused gate|up projection of xn; the n1 decode
 * rows in one launch where a GEMV applies the unit (from xq, writing ff's
 * int8 form ffq), else the product and then the unit (also into ffq). */
static clf_status gated_unit(clf_runtime *rt, const clf_llama_proj *p, clf_glu_act act, const clf_tensor *xn,
                             const clf_tensor *xq, clf_tensor *gu, clf_tensor *ff, const clf_tensor *ffq, int n1) {
    const int64_t n = clf_tensor_nrows(xn);
    if (!xq || !ffq || p->n != 1 || !clf_matmul_fuses_glu(rt, &p->part[0])) {
        CLF_TRY(proj_product(rt, p, xn, xq, gu, n1));
        return ffq ? clf_glu_xq(rt, act, gu, ff, ffq) : clf_glu(rt, act, gu, ff);
    }
    clf_tensor f1 = clf_tensor_rows(ff, 0, n1);
    CLF_TRY(clf_matmul_glu_xq(rt, &p->part[0], act, xq, &f1, ffq));
    if (n1 >= n) return CLF_OK;
    clf_tensor x2 = clf_tensor_rows(xn, n1, n - n1), g2 = clf_tensor_rows(gu, n1, n - n1);
    clf_tensor f2 = clf_tensor_rows(ff, n1, n - n1);
    CLF_TRY(clf_matmul_cols(rt, &p->part[0], &x2, &g2, 0, 0));
    return clf_glu(rt, act, &g2, &f2);
}

/* y = norm(x), its first rows also quantized into xq where given. */
static clf_status norm_xq(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                          const clf_tensor *xq) {
    return xq ? clf_rmsnorm_xq(rt, x, w, eps, y, xq) : clf_rmsnorm(rt, x, w, eps, y, 0);
}

/* A forward pass's rows of one sequence (stage.h). */
typedef clf_stage_segment segment;

/* Enqueues one pass over n ≤ n_batch tokens grouped in segments, the
 * single-token ones first (n1 rows), through the model's layers: from the
 * tokens' embeddings on the first stage, from x_in ([n × n_embd], copied
 * before it returns) on the others. On the last stage logits land in
 * c->logits: with all_logits every row's, else row i for the row want[i]
 * (i < n_want); on the others the activations are read into x_out, *x_ev
 * completing the read. Nothing else waits. */
static clf_status forward(clf_llama_ctx *c, const int32_t *tokens, const float *x_in, int n, const segment *segs,
                          int n_seg, int all_logits, const int *want, int n_want, float *x_out, cl_event *x_ev) {
    int n1 = 0;
    while (n1 < n_seg && segs[n1].n == 1) n1++;
    const clf_llama *m = c->m;
    const clf_llama_hparams *hp = &m->hp;
    const clf_family *f = hp->fam;
    clf_runtime *rt = m->rt;
    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim, qkv_dim = q_dim + 2 * kv_dim;
    if (m->l1 < hp->n_layer && !x_out)
        return clf_fail(CLF_ERR_ARG, "layers %d-%d end before the head, and nothing takes their activations "
                                     "(clf_llama_set_next)", m->l0, m->l1 - 1);
    clf_tensor x = clf_tensor_rows(&c->x, 0, n), xn = clf_tensor_rows(&c->xn, 0, n);
    clf_tensor qkv = clf_tensor_rows(&c->qkv, 0, n), att = clf_tensor_rows(&c->att, 0, n);
    clf_tensor gu = clf_tensor_rows(&c->gu, 0, n), ff = clf_tensor_rows(&c->ff, 0, n);
    /* the decode rows' int8 form for the GEMVs, written by the norms and SwiGLU */
    clf_tensor xq_e = {0}, xq_f = {0}, xq_a = {0};
    const clf_tensor *xqe = NULL, *xqf = NULL, *xqa = NULL;
    if (n1 > 0 && c->xq_e.mem) {
        xq_e = clf_tensor_rows(&c->xq_e, 0, n1);
        xq_f = clf_tensor_rows(&c->xq_f, 0, n1);
        xqe = &xq_e;
        xqf = &xq_f;
    }
    if (n1 > 0 && c->xq_a.mem) { /* written by the attention of each decode row */
        xq_a = clf_tensor_rows(&c->xq_a, 0, n1);
        xqa = &xq_a;
    }
    if (m->l0 == 0) {
        /* x = embeddings (times sqrt(n_embd): Gemma) */
        /* over a split the caller refills its tokens while this pass runs: copied before returning */
        CLF_CL_TRY(clEnqueueWriteBuffer(rt->queue, c->ids, c->next ? CL_TRUE : CL_FALSE, 0, (size_t)n * sizeof *tokens,
                                        tokens, 0, NULL, NULL));
        CLF_TRY(clf_get_rows(rt, &m->tok_embd, c->ids, n, &x));
        if (f->embd_scale) CLF_TRY(clf_scale(rt, &x, sqrtf((float)hp->n_embd), &x));
    } else {
        /* x = the previous stage's activations */
        CLF_TRY(clf_tensor_upload(rt, &x, x_in, clf_tensor_bytes(&x)));
    }
    for (int l = m->l0, n_global = 0, n_local = 0; l < m->l1; l++) {
        const clf_llama_layer *L = &m->layers[l];
        /* a sliding-window layer: its own ring cache, the family's local RoPE base, no position scaling */
        const int swa = clf_family_layer_swa(f, l);
        const int kl = swa ? n_local++ : n_global++;
        const clf_rope_params rope = {f->rope, hp->n_rot, swa ? f->swa_rope_base : hp->rope_base,
                                      swa ? 1.0f : hp->rope_freq_scale, hp->rope_freqs ? &m->rope_freqs : NULL};
        /* attention: x += [post-norm] Wo · attn(rope([QK-norm] Wqkv · norm(x) [+ b])) */
        CLF_TRY(norm_xq(rt, &x, &L->attn_norm, hp->eps, &xn, xqe));
        CLF_TRY(proj_product(rt, &L->wqkv, &xn, xqe, &qkv, n1));
        if (f->qkv_bias) CLF_TRY(clf_add_rows(rt, &qkv, &L->bqkv));
        /* Q's heads then K's: one launch */
        if (f->qk_norm)
            CLF_TRY(clf_rmsnorm_heads(rt, &qkv, n, qkv_dim, 0, hp->head_dim, hp->n_head, &L->q_norm, hp->n_head_kv,
                                      &L->k_norm, hp->eps));
        /* positions and caches are the sequence's own: a launch of each per segment */
        for (int s = 0; s < n_seg; s++) {
            const segment *sg = &segs[s];
            seq_ref r = seq_at(c, sg->seq);
            clf_kv_cache *kv = swa ? r.kv_swa : r.kv;
            clf_tensor sq = clf_tensor_rows(&c->qkv, sg->row0, sg->n), sa = clf_tensor_rows(&c->att, sg->row0, sg->n);
            clf_rows q = {&sq, 0, qkv_dim}, k = {&sq, q_dim, qkv_dim}, v = {&sq, q_dim + kv_dim, qkv_dim};
            if (sg->n == 1) { /* RoPE and the cache write fused into the decode kernel, which quantizes its output */
                /* only a decode row's (s < n1): xq_a has n_dec rows, and a chunk given the pass's last
                 * row only (fill_pass) is a one-row segment past them */
                clf_tensor aq = c->xq_a.mem ? clf_tensor_rows(&c->xq_a, sg->row0, 1) : sa;
                CLF_TRY(clf_attention_decode(rt, kv, kl, q, k, v, hp->n_head, sg->pos, hp->attn_scale, &rope, &sa,
                                             xqe && c->xq_a.mem && s < n1 ? &aq : NULL));
                continue;
            }
            /* Q and K are adjacent in each row: one launch rotates both */
            CLF_TRY(clf_rope(rt, &sq, sg->n, qkv_dim, 0, hp->n_head + hp->n_head_kv, hp->head_dim, sg->pos, &rope));
            CLF_TRY(clf_kv_write(rt, kv, kl, k, v, sg->n, sg->pos));
            CLF_TRY(clf_attention(rt, kv, kl, q, hp->n_head, sg->n, sg->pos, hp->attn_scale, &sa));
        }
        CLF_TRY(residual(rt, &L->wo, &att, xqa, f->post_norms ? &L->post_attn_norm : NULL, hp->eps, &x, &xn, n1));
        /* MLP: x += [post-norm] Wdown · (act(Wgate · norm(x)) * (Wup · norm(x))) */
        CLF_TRY(norm_xq(rt, &x, &L->ffn_norm, hp->eps, &xn, xqe));
        CLF_TRY(gated_unit(rt, &L->wgu, f->act, &xn, xqe, &gu, &ff, xqf, n1));
        CLF_TRY(residual(rt, &L->wdown, &ff, xqf, f->post_norms ? &L->post_ffn_norm : NULL, hp->eps, &x, &xn, n1));
    }
    if (m->l1 < hp->n_layer) /* the head is a later stage's */
        return clf_cl_check(clEnqueueReadBuffer(rt->queue, c->x.mem, CL_FALSE, c->x.offset, clf_tensor_bytes(&x), x_out,
                                                0, NULL, x_ev),
                            "reading activations for the next stage");
    /* the head over the rows asked for only, gathered by the norm into xn's first rows */
    int rows = all_logits ? n : n_want;
    if (all_logits) {
        CLF_TRY(clf_rmsnorm(rt, &x, &m->out_norm, hp->eps, &xn, 0));
    } else {
        for (int i = 0; i < n_want; i++) {
            clf_tensor xs = clf_tensor_rows(&c->x, want[i], 1), xns = clf_tensor_rows(&c->xn, i, 1);
            clf_tensor xqs = c->xq_e.mem ? clf_tensor_rows(&c->xq_e, i, 1) : xs;
            CLF_TRY(norm_xq(rt, &xs, &m->out_norm, hp->eps, &xns, c->xq_e.mem ? &xqs : NULL));
        }
    }
    if (rows == 0) return CLF_OK;
    clf_tensor xns = clf_tensor_rows(&c->xn, 0, rows), logits = clf_tensor_rows(&c->logits, 0, rows);
    clf_tensor xqh = c->xq_e.mem && !all_logits ? clf_tensor_rows(&c->xq_e, 0, rows) : xns;
    CLF_TRY(product(rt, &m->output, &xns, c->xq_e.mem && !all_logits ? &xqh : NULL, &logits, 0, all_logits ? 0 : rows));
    return CLF_OK;
}

/* A pass's logits for every row (perplexity) need a chunk's worth of rows
 * on the last stage, allocated on first use. */
static clf_status grow_logits(clf_llama_ctx *c) {
    const clf_llama *m = c->m;
    if (m->l1 < m->hp.n_layer || c->logits.ne[1] >= c->n_batch) return CLF_OK;
    clf_tensor grown;
    CLF_TRY(clf_tensor_alloc(m->rt, CLF_F32, m->hp.n_vocab, c->n_batch, &grown));
    c->device_bytes += clf_tensor_bytes(&grown) - clf_tensor_bytes(&c->logits);
    clf_tensor_free(&c->logits);
    c->logits = grown;
    return CLF_OK;
}

/* Waits for a pass's activations (ev, released here) and hands them with
 * the pass to the next stage, which writes the logits rows. */
static clf_status hop(clf_llama_ctx *c, const clf_stage_pass *p, cl_event ev, const float *x, float *logits) {
    clf_status st = clf_cl_check(clWaitForEvents(1, &ev), "reading activations for the next stage");
    clReleaseEvent(ev);
    if (st == CLF_OK) st = c->next->ops->pass(c->next, p, x, logits);
    return st;
}

/* A prompt chunk whose activations are on their way to the next stage. */
typedef struct pending_hop {
    segment seg;
    int want, all_logits;
    float *x, *logits;
    cl_event ev;
} pending_hop;

static clf_status hop_pending(clf_llama_ctx *c, pending_hop *h) {
    clf_stage_pass p = {h->seg.n, &h->seg, 1, h->all_logits, &h->want, h->logits && !h->all_logits};
    return hop(c, &p, h->ev, h->x, h->logits);
}

clf_status clf_llama_eval(clf_llama_ctx *c, const int32_t *tokens, int n, int all_logits, float *logits) {
    const clf_llama_hparams *hp = &c->m->hp;
    if (n <= 0) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate");
    if (all_logits && !logits) return clf_fail(CLF_ERR_ARG, "every token's logits asked for, nowhere to write them");
    if (n > c->n_ctx - c->n_past)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit: %d of the context's %d are used", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", tokens[i], i, hp->n_vocab);
    clf_runtime *rt = c->m->rt;
    /* one row of logits serves generation; every token's (perplexity) needs
     * a chunk's worth, allocated on first use */
    if (all_logits) CLF_TRY(grow_logits(c));
    /* Over a split the chunks pipeline: chunk k+1 is enqueued on this
     * stage before chunk k hops to the next (its own queue, its own
     * device), so the stages overlap. `hopped`: where every stage is. */
    pending_hop pend = {0};
    int pending = 0, hopped = c->n_past;
    clf_status st = CLF_OK;
    for (int done = 0, k = 0; done < n; k++) {
        /* between chunks the abort hook may stop a long prompt: once the
         * previous chunk has run (forward only enqueues), so that the stop
         * is prompt; the chunks done stay counted in n_past */
        if (done > 0 && rt->abort_fn && (st = clf_finish(rt)) != CLF_OK) break;
        if (clf_runtime_aborted(rt)) {
            if (pending && (st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
            pending = 0;
            if (st == CLF_OK)
                st = clf_fail(CLF_ERR_INTERRUPTED, "evaluation stopped on request after %d of %d tokens", done, n);
            break;
        }
        int step = c->next ? c->n_micro : c->n_batch;
        int chunk = n - done < step ? n - done : step, last = chunk - 1, final = done + chunk == n;
        segment seg = {0, 0, chunk, c->n_past};
        float *dst = all_logits ? logits + (size_t)done * hp->n_vocab : final ? logits : NULL;
        cl_event ev = NULL;
        st = forward(c, tokens + done, NULL, chunk, &seg, 1, all_logits, &last, final, c->next ? c->hop_x[k & 1] : NULL,
                     &ev);
        if (st == CLF_OK && !c->next && dst) {
            size_t bytes = (size_t)(all_logits ? chunk : 1) * (size_t)hp->n_vocab * sizeof(float);
            st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, CL_TRUE, c->logits.offset, bytes, dst, 0,
                                                  NULL, NULL),
                              "reading logits");
        }
        if (st == CLF_OK && pending) {
            pending = 0;
            if ((st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
        }
        if (st == CLF_OK && c->next) {
            pend = (pending_hop){seg, last, all_logits, c->hop_x[k & 1], dst, ev};
            pending = 1;
        } else if (ev) {
            clReleaseEvent(ev);
        }
        if (st != CLF_OK) break;
        c->n_past += chunk;
        done += chunk;
        if (!c->next) hopped = c->n_past;
    }
    if (st == CLF_OK && pending) {
        pending = 0;
        if ((st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
    }
    if (st != CLF_OK) {
        clFinish(rt->queue);
        if (pending) clReleaseEvent(pend.ev);
        /* a chunk that did not reach every stage is forgotten */
        if (c->n_past > hopped) clf_llama_rewind(c, hopped);
    }
    return st;
}

/* The k best of a host row, as cl/select.cl chooses them. */
static void top_of_row(const float *row, int n, int k, float *vals, int32_t *ids, int *nonfinite) {
    int m = 0;
    *nonfinite = 0;
    for (int i = 0; i < n; i++) {
        float x = row[i];
        if (!isfinite(x)) {
            *nonfinite = 1;
            if (isnan(x)) x = -INFINITY;
        }
        if (m == k && !(x > vals[k - 1])) continue; /* ids rise: a tie loses */
        int j = m < k ? m++ : k - 1;
        for (; j > 0 && x > vals[j - 1]; j--) vals[j] = vals[j - 1], ids[j] = ids[j - 1];
        vals[j] = x;
        ids[j] = i;
    }
}

clf_status clf_llama_eval_top(clf_llama_ctx *c, const int32_t *tokens, int n, int k, float *vals, int32_t *ids,
                              int *nonfinite) {
    const int n_vocab = c->m->hp.n_vocab;
    if (k < 1 || k > CLF_TOPK_MAX || k > n_vocab)
        return clf_fail(CLF_ERR_ARG, "top-k: k = %d is not in 1 .. %d", k, n_vocab < CLF_TOPK_MAX ? n_vocab : CLF_TOPK_MAX);
    if (c->next) { /* the logits arrive on the host */
        if (!c->top_logits && !(c->top_logits = malloc((size_t)n_vocab * sizeof *c->top_logits)))
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        CLF_TRY(clf_llama_eval(c, tokens, n, 0, c->top_logits));
        top_of_row(c->top_logits, n_vocab, k, vals, ids, nonfinite);
        return CLF_OK;
    }
    if (!c->topk.out_i) CLF_TRY(clf_topk_create(c->m->rt, &c->topk));
    CLF_TRY(clf_llama_eval(c, tokens, n, 0, NULL)); /* the last token's logits stay in row 0 */
    const clf_tensor row = clf_tensor_rows(&c->logits, 0, 1);
    return clf_topk_read(&c->topk, &row, k, vals, ids, nonfinite);
}

/* Checks a batch before anything runs: sequences in range and distinct,
 * tokens in the vocabulary, each entry within its sequence's room. */
static clf_status check_batch(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n) {
    const clf_llama_hparams *hp = &c->m->hp;
    for (int i = 0; i < n; i++) {
        if (b[i].seq < 0 || b[i].seq >= c->n_seq)
            return clf_fail(CLF_ERR_ARG, "sequence %d is outside the context's %d", b[i].seq, c->n_seq);
        for (int j = 0; j < i; j++)
            if (b[j].seq == b[i].seq) return clf_fail(CLF_ERR_ARG, "sequence %d appears twice in a batch", b[i].seq);
        if (b[i].n <= 0 || !b[i].tokens) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate for sequence %d", b[i].seq);
        int len = clf_llama_seq_len(c, b[i].seq);
        if (b[i].n > c->n_ctx - len)
            return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit sequence %d: %d of the context's %d are used", b[i].n,
                            b[i].seq, len, c->n_ctx);
        for (int t = 0; t < b[i].n; t++)
            if (b[i].tokens[t] < 0 || b[i].tokens[t] >= hp->n_vocab)
                return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", b[i].tokens[t], t,
                                hp->n_vocab);
    }
    return CLF_OK;
}

/* One pass of clf_llama_eval_seqs: its rows grouped in segments, the
 * logits rows it asks for and where they go; over a split, its
 * activations on their way (x, completed by ev). */
typedef struct seq_pass {
    int rows, n_seg, n_want;
    segment *segs;
    int *want;
    float **dst;
    float *x;
    cl_event ev;
} seq_pass;

/* Fills up to n_batch rows from the entries' remaining tokens (in order):
 * their ids into host_ids, positions from the sequences' lengths. */
static void fill_pass(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n, const int *done, seq_pass *p) {
    p->rows = p->n_seg = p->n_want = 0;
    /* the single tokens first (forward computes them as if alone), then the chunks */
    for (int i = 0, sweep = 0; sweep < 2 && p->rows < c->n_batch; i = i + 1 < n ? i + 1 : (sweep++, 0)) {
        int left = b[i].n - done[i], take = left < c->n_batch - p->rows ? left : c->n_batch - p->rows;
        if (take <= 0 || (left == 1) != (sweep == 0)) continue;
        p->segs[p->n_seg++] = (segment){b[i].seq, p->rows, take, clf_llama_seq_len(c, b[i].seq)};
        memcpy(c->host_ids + p->rows, b[i].tokens + done[i], (size_t)take * sizeof *c->host_ids);
        if (take == left && b[i].logits) {
            p->want[p->n_want] = p->rows + take - 1;
            p->dst[p->n_want++] = b[i].logits;
        }
        p->rows += take;
    }
}

/* Counts a pass in its sequences and entries (by = 1), or takes it back
 * (by = -1: the sequences rewind to where the pass began). */
static void count_pass(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n, int *done, const seq_pass *p, int by) {
    for (int s = 0; s < p->n_seg; s++) {
        const segment *g = &p->segs[s];
        if (by > 0) *seq_at(c, g->seq).n_past += g->n;
        else clf_llama_seq_rewind(c, g->seq, g->pos);
        for (int i = 0; i < n; i++)
            if (b[i].seq == g->seq) done[i] += by * g->n;
    }
}

/* One device, or the last stage: runs the pass, reads the logits of the
 * entries it finishes. */
static clf_status run_pass(clf_llama_ctx *c, const seq_pass *p) {
    clf_runtime *rt = c->m->rt;
    size_t row_bytes = (size_t)c->m->hp.n_vocab * sizeof(float);
    clf_status st = forward(c, c->host_ids, NULL, p->rows, p->segs, p->n_seg, 0, p->want, p->n_want, NULL, NULL);
    for (int i = 0; st == CLF_OK && i < p->n_want; i++)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, i == p->n_want - 1,
                                              c->logits.offset + i * row_bytes, row_bytes, p->dst[i], 0, NULL, NULL),
                          "reading logits");
    /* host_ids and the caller's buffers must outlive the pass */
    if (st == CLF_OK && p->n_want == 0) st = clf_finish(rt);
    if (st != CLF_OK) clFinish(rt->queue);
    return st;
}

/* Over a split: hands a pass enqueued here to the next stage (which runs
 * it while this one runs the next pass), the logits back to the entries. */
static clf_status hop_pass(clf_llama_ctx *c, seq_pass *p) {
    clf_stage_pass sp = {p->rows, p->segs, p->n_seg, 0, p->want, p->n_want};
    clf_status st = hop(c, &sp, p->ev, p->x, c->hop_logits);
    p->ev = NULL;
    size_t row_bytes = (size_t)c->m->hp.n_vocab * sizeof(float);
    for (int i = 0; st == CLF_OK && i < p->n_want; i++)
        memcpy(p->dst[i], c->hop_logits + (size_t)i * c->m->hp.n_vocab, row_bytes);
    return st;
}

clf_status clf_llama_eval_seqs(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n) {
    CLF_TRY(check_batch(c, b, n));
    clf_runtime *rt = c->m->rt;
    /* two passes' descriptions: over a split one is on its way while the next is filled */
    size_t m = (size_t)n + 1;
    int *done = calloc(m, sizeof *done), *want = malloc(2 * m * sizeof *want);
    segment *segs = malloc(2 * m * sizeof *segs);
    float **dst = malloc(2 * m * sizeof *dst);
    clf_status st = done && want && segs && dst ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    seq_pass ps[2] = {{0}};
    for (int k = 0; st == CLF_OK && k < 2; k++)
        ps[k] = (seq_pass){0, 0, 0, segs + k * m, want + k * m, dst + k * m, c->hop_x[k], NULL};
    seq_pass *pending = NULL;
    for (int pass = 0; st == CLF_OK; pass++) {
        int left = 0;
        for (int i = 0; i < n; i++) left += b[i].n - done[i];
        if (!left) break;
        /* the abort hook may stop it before any pass (the server's step sees it so) */
        if (clf_runtime_aborted(rt)) {
            st = clf_fail(CLF_ERR_INTERRUPTED, "evaluation stopped on request after %d of its passes", pass);
            break;
        }
        seq_pass *p = &ps[pass & 1];
        fill_pass(c, b, n, done, p);
        if (!c->next) {
            if ((st = run_pass(c, p)) == CLF_OK) count_pass(c, b, n, done, p, 1);
            continue;
        }
        /* a split: this pass runs here while the previous one hops on */
        if ((st = forward(c, c->host_ids, NULL, p->rows, p->segs, p->n_seg, 0, p->want, p->n_want, p->x, &p->ev)) != CLF_OK)
            break;
        count_pass(c, b, n, done, p, 1);
        if (pending && (st = hop_pass(c, pending)) != CLF_OK) {
            count_pass(c, b, n, done, p, -1);
            break;
        }
        pending = p;
    }
    if (st == CLF_OK && pending) st = hop_pass(c, pending);
    if (st != CLF_OK && c->next) {
        clFinish(rt->queue);
        if (pending) count_pass(c, b, n, done, pending, -1); /* it did not reach every stage */
    }
    for (int k = 0; k < 2; k++)
        if (ps[k].ev) clReleaseEvent(ps[k].ev);
    free(done);
    free(want);
    free(segs);
    free(dst);
    return st;
}

/* ---- a stage of a split (stage.h) ------------------------------------------------ */

/* A pass arriving from another stage (another device, another rank): its
 * segments must tile its rows and continue their sequences here. */
static clf_status check_pass(const clf_llama_ctx *c, const clf_stage_pass *p) {
    if (c->m->l0 == 0) return clf_fail(CLF_ERR_ARG, "the first stage evaluates tokens, not activations");
    if (p->n < 1 || p->n > c->n_batch || p->n_seg < 1 || p->n_seg > p->n)
        return clf_fail(CLF_ERR_ARG, "a pass of %d rows in %d segments (1 to %d rows)", p->n, p->n_seg, c->n_batch);
    for (int s = 0, row = 0; s < p->n_seg; s++) {
        const segment *g = &p->segs[s];
        if (g->seq < 0 || g->seq >= c->n_seq || g->row0 != row || g->n < 1 || g->row0 + g->n > p->n)
            return clf_fail(CLF_ERR_ARG, "segment %d (sequence %d, rows %d+%d) does not fit the pass", s, g->seq,
                            g->row0, g->n);
        int len = clf_llama_seq_len(c, g->seq);
        if (g->pos != len || g->n > c->n_ctx - len)
            return clf_fail(CLF_ERR_ARG, "segment %d starts at %d of sequence %d, which holds %d of %d here", s, g->pos,
                            g->seq, len, c->n_ctx);
        row += g->n;
    }
    int cap = c->n_seq < c->n_batch ? c->n_seq : c->n_batch;
    if (!p->all_logits && (p->n_want < 0 || p->n_want > cap))
        return clf_fail(CLF_ERR_ARG, "%d logits rows asked (at most %d)", p->n_want, cap);
    for (int i = 0; !p->all_logits && i < p->n_want; i++)
        if (p->want[i] < 0 || p->want[i] >= p->n) return clf_fail(CLF_ERR_ARG, "logits of row %d asked", p->want[i]);
    return CLF_OK;
}

clf_status clf_llama_stage_pass(clf_llama_ctx *c, const clf_stage_pass *p, const float *x_in, float *out) {
    CLF_TRY(check_pass(c, p));
    const clf_llama *m = c->m;
    clf_runtime *rt = m->rt;
    int last = m->l1 == m->hp.n_layer, rows = clf_stage_pass_rows(p);
    if (p->all_logits) CLF_TRY(grow_logits(c));
    cl_event ev = NULL;
    clf_status st = forward(c, NULL, x_in, p->n, p->segs, p->n_seg, p->all_logits, p->want, p->n_want,
                            c->next ? c->hop_x[0] : out, &ev);
    if (st == CLF_OK && last && rows)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, CL_TRUE, c->logits.offset,
                                              (size_t)rows * (size_t)m->hp.n_vocab * sizeof(float), out, 0, NULL, NULL),
                          "reading logits");
    else if (st == CLF_OK && last) st = clf_finish(rt);
    else if (st == CLF_OK && c->next) st = hop(c, p, ev, c->hop_x[0], out), ev = NULL;
    else if (st == CLF_OK) st = clf_cl_check(clWaitForEvents(1, &ev), "reading activations for the next stage");
    if (ev) clReleaseEvent(ev);
    if (st != CLF_OK) {
        clFinish(rt->queue);
        return st;
    }
    for (int s = 0; s < p->n_seg; s++) *seq_at(c, p->segs[s].seq).n_past += p->segs[s].n;
    return CLF_OK;
}

#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

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

clf_status clf_llama_hparams_read(const clf_gguf *g, clf_llama_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    clf_gguf_str arch;
    CLF_TRY(clf_gguf_get_str(g, "general.architecture", &arch));
    if (!(arch.len == 5 && !memcmp(arch.ptr, "llama", 5)) && !(arch.len == 7 && !memcmp(arch.ptr, "mistral", 7)) &&
        !(arch.len == 5 && !memcmp(arch.ptr, "qwen2", 5)))
        return clf_fail(CLF_ERR_FORMAT, "unsupported architecture '%.*s' (llama, mistral, qwen2 are)",
                        arch.len > 64 ? 64 : (int)arch.len, arch.ptr);
    /* the keys and the embedding as `clinfer info` reads them; what the
     * kernels and the tensors further require is checked here */
    clf_model_shape s;
    CLF_TRY(clf_model_shape_from_gguf(g, &s));
    const char *a = memcpy(hp->arch, s.arch, sizeof hp->arch);
    hp->rope_mode = strcmp(a, "qwen2") == 0 ? CLF_ROPE_NEOX : CLF_ROPE_NORM;
    hp->qkv_bias = strcmp(a, "qwen2") == 0;
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
    if (hp->n_embd % hp->n_head) return clf_fail(CLF_ERR_FORMAT, "embedding_length %d is not a multiple of head_count %d", hp->n_embd, hp->n_head);
    if ((int64_t)hp->head_dim * hp->n_head != hp->n_embd)
        return clf_fail(CLF_ERR_FORMAT, "head_dim %d × heads %d != embedding_length %d (unsupported)", hp->head_dim,
                        hp->n_head, hp->n_embd);
    /* what the attention kernels are built for (-DHD): float16 lanes */
    if (hp->head_dim % 16 || hp->head_dim > 256)
        return clf_fail(CLF_ERR_FORMAT, "head_dim %d is unsupported (a multiple of 16 up to 256)", hp->head_dim);
    if (hp->n_head % hp->n_head_kv)
        return clf_fail(CLF_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp->n_head, hp->n_head_kv);
    hp->n_rot = hp->head_dim;
    CLF_TRY(get_u32(g, a, "rope.dimension_count", 0, &hp->n_rot));
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return clf_fail(CLF_ERR_FORMAT, "rope.dimension_count %d does not fit head_dim %d", hp->n_rot, hp->head_dim);
    hp->rope_base = 10000.0f;
    hp->eps = 1e-5f;
    CLF_TRY(get_f32(g, a, "rope.freq_base", &hp->rope_base));
    CLF_TRY(get_f32(g, a, "attention.layer_norm_rms_epsilon", &hp->eps));
    if (!(hp->rope_base > 0) || !(hp->eps > 0) || !(hp->eps < 1))
        return clf_fail(CLF_ERR_FORMAT, "rope.freq_base %g or rms epsilon %g out of range", hp->rope_base, hp->eps);

    const clf_gguf_tensor *t;
    CLF_TRY(want_tensor(g, "token_embd.weight", hp->n_embd, hp->n_vocab, &t));
    const clf_gguf_kv *toks = clf_gguf_find(g, "tokenizer.ggml.tokens");
    if (toks && toks->arr_n != (uint64_t)hp->n_vocab)
        return clf_fail(CLF_ERR_FORMAT, "vocabulary has %llu tokens but token_embd.weight has %d rows",
                        (unsigned long long)toks->arr_n, hp->n_vocab);
    if (!hp->tied) CLF_TRY(want_tensor(g, "output.weight", hp->n_embd, hp->n_vocab, &t));
    CLF_TRY(want_tensor(g, "output_norm.weight", hp->n_embd, 0, &t));

    int kv_dim = hp->n_head_kv * hp->head_dim;
    for (int l = 0; l < hp->n_layer; l++) {
        char name[96];
        struct { const char *n; int64_t ne0, ne1; } want[] = {
            {"attn_norm", hp->n_embd, 0}, {"ffn_norm", hp->n_embd, 0},
            {"attn_q", hp->n_embd, hp->n_embd}, {"attn_k", hp->n_embd, kv_dim}, {"attn_v", hp->n_embd, kv_dim},
            {"attn_output", hp->n_embd, hp->n_embd}, {"ffn_gate", hp->n_embd, hp->n_ff},
            {"ffn_up", hp->n_embd, hp->n_ff}, {"ffn_down", hp->n_ff, hp->n_embd},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, want[i].n);
            CLF_TRY(want_tensor(g, name, want[i].ne0, want[i].ne1, &t));
        }
        if (hp->qkv_bias) {
            const char *b[] = {"attn_q", "attn_k", "attn_v"};
            int64_t nb[] = {hp->n_embd, kv_dim, kv_dim};
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

/* Only a load that takes a while reports, a few times a second. */
static void progress(loader *ld) {
    ld->done++;
    double t = clf_now_s();
    if (t - ld->t0 < 1.0 || (t - ld->shown < 0.25 && ld->done < ld->total)) return;
    ld->shown = t;
    fprintf(stderr, "\rclinfer: uploading weights %d/%d", ld->done, ld->total);
    if (ld->done == ld->total) fputc('\n', stderr);
}

static clf_status upload_vec(loader *ld, const char *name, clf_tensor *t) {
    const clf_gguf_tensor *gt = clf_gguf_find_tensor(ld->g, name);
    CLF_TRY(clf_tensor_alloc(ld->m->rt, CLF_F32, gt->ne[0], 1, t));
    CLF_TRY(clf_tensor_upload(ld->m->rt, t, gt->data, gt->bytes));
    ld->m->device_bytes += gt->bytes;
    progress(ld);
    return CLF_OK;
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
    for (int i = 0; i < n; i++) progress(ld);
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

static clf_status proj_matmul(clf_runtime *rt, const clf_llama_proj *p, const clf_tensor *x, clf_tensor *y) {
    for (int i = 0; i < p->n; i++) CLF_TRY(clf_matmul_cols(rt, &p->part[i], x, y, p->col0[i], 0));
    return CLF_OK;
}

static clf_status upload_bias(loader *ld, int l, clf_tensor *t) {
    const clf_llama_hparams *hp = &ld->m->hp;
    int kv_dim = hp->n_head_kv * hp->head_dim, n = hp->n_embd + 2 * kv_dim;
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
    for (int i = 0; i < 3; i++) progress(ld);
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

static clf_status check_fits(clf_runtime *rt, const clf_gguf *g) {
    size_t need = clf_llama_weight_bytes(g);
    char a[32], b[32];
    if (need > rt->dev.global_mem)
        return clf_fail(CLF_ERR_MEMORY, "model weights need %s but %s has %s of global memory",
                        size_str((double)need, a, sizeof a), rt->dev.name, size_str((double)rt->dev.global_mem, b, sizeof b));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        if (t->bytes > rt->dev.max_alloc)
            return clf_fail(CLF_ERR_MEMORY, "tensor %.*s (%s) exceeds %s's max allocation of %s", (int)t->name.len,
                            t->name.ptr, size_str((double)t->bytes, a, sizeof a), rt->dev.name,
                            size_str((double)rt->dev.max_alloc, b, sizeof b));
    }
    return CLF_OK;
}

static clf_status load(clf_llama *m, const clf_gguf *g) {
    const clf_llama_hparams *hp = &m->hp;
    loader ld = {m, g, 0, (int)clf_gguf_n_tensors(g) + (hp->tied ? 1 : 0), clf_now_s(), 0};
    CLF_TRY(check_fits(m->rt, g));
    const clf_gguf_tensor *emb = clf_gguf_find_tensor(g, "token_embd.weight");
    CLF_TRY(clf_tensor_alloc(m->rt, emb->type, emb->ne[0], emb->ne[1], &m->tok_embd));
    CLF_TRY(clf_tensor_upload(m->rt, &m->tok_embd, emb->data, emb->bytes));
    m->device_bytes += emb->bytes;
    progress(&ld);
    const char *out_name[] = {hp->tied ? "token_embd.weight" : "output.weight"};
    CLF_TRY(upload_fused(&ld, out_name, 1, &m->output));
    CLF_TRY(upload_vec(&ld, "output_norm.weight", &m->out_norm));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int l = 0; l < hp->n_layer; l++) {
        clf_llama_layer *L = &m->layers[l];
        char n[9][96];
        const char *sfx[] = {"attn_norm", "ffn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                             "ffn_gate", "ffn_up", "ffn_down"};
        for (int i = 0; i < 9; i++) snprintf(n[i], sizeof n[i], "blk.%d.%s.weight", l, sfx[i]);
        const char *qkv[] = {n[2], n[3], n[4]}, *o[] = {n[5]}, *gu[] = {n[6], n[7]}, *down[] = {n[8]};
        CLF_TRY(upload_vec(&ld, n[0], &L->attn_norm));
        CLF_TRY(upload_vec(&ld, n[1], &L->ffn_norm));
        CLF_TRY(upload_proj(&ld, qkv, 3, &L->wqkv));
        CLF_TRY(upload_fused(&ld, o, 1, &L->wo));
        CLF_TRY(upload_proj(&ld, gu, 2, &L->wgu));
        CLF_TRY(upload_fused(&ld, down, 1, &L->wdown));
        if (hp->qkv_bias) CLF_TRY(upload_bias(&ld, l, &L->bqkv));
    }
    return CLF_OK;
}

clf_status clf_llama_load(clf_runtime *rt, const clf_gguf *g, clf_llama **out) {
    *out = NULL;
    clf_llama *m = calloc(1, sizeof *m);
    if (!m) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    m->rt = rt;
    clf_status st = clf_llama_hparams_read(g, &m->hp);
    if (st == CLF_OK) st = load(m, g);
    if (st != CLF_OK) {
        clf_llama_free(m);
        return st;
    }
    *out = m;
    return CLF_OK;
}

void clf_llama_free(clf_llama *m) {
    if (!m) return;
    clf_tensor_free(&m->tok_embd);
    clf_tensor_free(&m->out_norm);
    clf_weight_free(&m->output);
    for (int l = 0; m->layers && l < m->hp.n_layer; l++) {
        clf_llama_layer *L = &m->layers[l];
        clf_tensor_free(&L->attn_norm);
        clf_tensor_free(&L->ffn_norm);
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

clf_status clf_llama_ctx_create(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type, clf_llama_ctx **out) {
    const clf_llama_hparams *hp = &m->hp;
    *out = NULL;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (n_batch <= 0 || n_batch > n_ctx) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (kv_type != CLF_F32 && kv_type != CLF_F16) return clf_fail(CLF_ERR_ARG, "KV cache type must be F32 or F16");
    clf_llama_ctx *c = calloc(1, sizeof *c);
    if (!c) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    clf_runtime *rt = m->rt;
    int kv_dim = hp->n_head_kv * hp->head_dim;
    clf_status st = clf_kv_cache_create(rt, kv_type, hp->n_layer, hp->n_head_kv, hp->head_dim, n_ctx, &c->kv);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->x);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->xn);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd + 2 * kv_dim, n_batch, &c->qkv);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->att);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, 2 * hp->n_ff, n_batch, &c->gu);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_ff, n_batch, &c->ff);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_vocab, 1, &c->logits); /* grown by all_logits */
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_ONLY, (size_t)n_batch * sizeof(int32_t), NULL, &c->ids);
    if (st != CLF_OK) {
        clf_llama_ctx_free(c);
        return clf_fail_ctx(st, "creating a context of %d tokens: ", n_ctx);
    }
    c->device_bytes = c->kv.bytes +
                      (size_t)n_batch * sizeof(float) * ((size_t)hp->n_embd * 3 + hp->n_embd + 2 * kv_dim + 3 * (size_t)hp->n_ff) +
                      (size_t)n_batch * sizeof(int32_t) + clf_tensor_bytes(&c->logits);
    *out = c;
    return CLF_OK;
}

void clf_llama_ctx_free(clf_llama_ctx *c) {
    if (!c) return;
    clf_kv_cache_free(&c->kv);
    clf_tensor *ts[] = {&c->x, &c->xn, &c->qkv, &c->att, &c->gu, &c->ff, &c->logits};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clf_tensor_free(ts[i]);
    if (c->ids) clReleaseMemObject(c->ids);
    free(c);
}

void clf_llama_rewind(clf_llama_ctx *c, int pos) {
    if (pos >= 0 && pos < c->n_past) c->n_past = pos;
}

/* ---- forward pass ----------------------------------------------------------- */

/* Enqueues one chunk of n ≤ n_batch tokens at position pos; logits for the
 * last token (or all) land in c->logits. Nothing waits. */
static clf_status forward(clf_llama_ctx *c, const int32_t *tokens, int n, int pos, int all_logits) {
    const clf_llama *m = c->m;
    const clf_llama_hparams *hp = &m->hp;
    clf_runtime *rt = m->rt;
    int kv_dim = hp->n_head_kv * hp->head_dim, qkv_dim = hp->n_embd + 2 * kv_dim;
    float scale = 1.0f / sqrtf((float)hp->head_dim);
    CLF_CL_TRY(clEnqueueWriteBuffer(rt->queue, c->ids, CL_FALSE, 0, (size_t)n * sizeof *tokens, tokens, 0, NULL, NULL));
    clf_tensor x = clf_tensor_rows(&c->x, 0, n), xn = clf_tensor_rows(&c->xn, 0, n);
    clf_tensor qkv = clf_tensor_rows(&c->qkv, 0, n), att = clf_tensor_rows(&c->att, 0, n);
    clf_tensor gu = clf_tensor_rows(&c->gu, 0, n), ff = clf_tensor_rows(&c->ff, 0, n);
    CLF_TRY(clf_get_rows(rt, &m->tok_embd, c->ids, n, &x));
    for (int l = 0; l < hp->n_layer; l++) {
        const clf_llama_layer *L = &m->layers[l];
        /* attention: x += Wo · attn(rope(Wqkv · norm(x))) */
        CLF_TRY(clf_rmsnorm(rt, &x, &L->attn_norm, hp->eps, &xn));
        CLF_TRY(proj_matmul(rt, &L->wqkv, &xn, &qkv));
        if (hp->qkv_bias) CLF_TRY(clf_add_rows(rt, &qkv, &L->bqkv));
        /* Q and K are adjacent in each row: one launch rotates both */
        CLF_TRY(clf_rope(rt, &qkv, n, qkv_dim, 0, hp->n_head + hp->n_head_kv, hp->head_dim, hp->n_rot, pos,
                         hp->rope_base, hp->rope_mode));
        clf_rows q = {&qkv, 0, qkv_dim}, k = {&qkv, hp->n_embd, qkv_dim}, v = {&qkv, hp->n_embd + kv_dim, qkv_dim};
        CLF_TRY(clf_kv_write(rt, &c->kv, l, k, v, n, pos));
        CLF_TRY(clf_attention(rt, &c->kv, l, q, hp->n_head, n, pos, scale, &att));
        CLF_TRY(clf_matmul(rt, &L->wo, &att, &x, 1));
        /* MLP: x += Wdown · (silu(Wgate · norm(x)) * (Wup · norm(x))) */
        CLF_TRY(clf_rmsnorm(rt, &x, &L->ffn_norm, hp->eps, &xn));
        CLF_TRY(proj_matmul(rt, &L->wgu, &xn, &gu));
        CLF_TRY(clf_swiglu(rt, &gu, &ff));
        CLF_TRY(clf_matmul(rt, &L->wdown, &ff, &x, 1));
    }
    int first = all_logits ? 0 : n - 1, rows = all_logits ? n : 1;
    clf_tensor xs = clf_tensor_rows(&c->x, first, rows), xns = clf_tensor_rows(&c->xn, first, rows);
    clf_tensor logits = clf_tensor_rows(&c->logits, 0, rows);
    CLF_TRY(clf_rmsnorm(rt, &xs, &m->out_norm, hp->eps, &xns));
    CLF_TRY(clf_matmul(rt, &m->output, &xns, &logits, 0));
    return CLF_OK;
}

clf_status clf_llama_eval(clf_llama_ctx *c, const int32_t *tokens, int n, int all_logits, float *logits) {
    const clf_llama_hparams *hp = &c->m->hp;
    if (n <= 0) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate");
    if (n > c->n_ctx - c->n_past)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit: %d of the context's %d are used", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", tokens[i], i, hp->n_vocab);
    clf_runtime *rt = c->m->rt;
    /* one row of logits serves generation; every token's (perplexity) needs
     * a chunk's worth, allocated on first use */
    if (all_logits && c->logits.ne[1] < c->n_batch) {
        clf_tensor grown;
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, hp->n_vocab, c->n_batch, &grown));
        c->device_bytes += clf_tensor_bytes(&grown) - clf_tensor_bytes(&c->logits);
        clf_tensor_free(&c->logits);
        c->logits = grown;
    }
    for (int done = 0; done < n;) {
        int chunk = n - done < c->n_batch ? n - done : c->n_batch;
        clf_status st = forward(c, tokens + done, chunk, c->n_past, all_logits);
        if (st == CLF_OK && (all_logits || done + chunk == n)) {
            size_t bytes = (size_t)(all_logits ? chunk : 1) * (size_t)hp->n_vocab * sizeof(float);
            float *dst = all_logits ? logits + (size_t)done * hp->n_vocab : logits;
            st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, CL_TRUE, c->logits.offset, bytes, dst, 0,
                                                  NULL, NULL),
                              "reading logits");
        }
        if (st != CLF_OK) {
            clFinish(rt->queue);
            return st;
        }
        c->n_past += chunk;
        done += chunk;
    }
    return CLF_OK;
}

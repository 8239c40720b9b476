/* The weights onto the device: each tensor in its file type, Q|K|V and
 * gate|up fused into one weight per run of equal types, a stage's layer
 * range only (stage.h).
 *
 * Two walks over the same code (upload_all): the first only lists the
 * weights and their bytes in the device's layout (the packed-weights
 * cache's entry is keyed and laid out by that list, weight_cache.h), the
 * second loads them: from the cache's mapping in place, or packed into it
 * first, or packed into device memory where there is no cache. Each
 * tensor's pages of the file mapping are dropped once it is loaded, so
 * the file and its packed copy are never both resident. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"
#include "matmul.h"
#include "split.h"
#include "weight_cache.h"

typedef struct loader {
    clf_llama *m;
    const clf_gguf *g;
    int done, total;
    int listing;      /* the first walk: list the weights in w, load nothing */
    clf_wc_weight *w; /* [n] the weights in load order */
    int n, cap;
    int next;         /* the second walk: the next weight's index in w */
    int embd;         /* the token embedding's index in w; -1: not on this stage */
    clf_wcache *wc;   /* the cache entry (NULL: in memory) */
} loader;

/* The first walk: one more weight. */
static clf_status list_weight(loader *ld, const char *name, clf_type type, int64_t rows, int64_t cols,
                              size_t main_bytes, size_t aux_bytes) {
    if (ld->n == ld->cap) {
        int cap = ld->cap ? 2 * ld->cap : 64;
        clf_wc_weight *w = realloc(ld->w, (size_t)cap * sizeof *w);
        if (!w) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        ld->w = w;
        ld->cap = cap;
    }
    clf_wc_weight *e = &ld->w[ld->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->type = (uint32_t)type;
    e->rows = rows;
    e->cols = cols;
    e->bytes[0] = main_bytes;
    e->bytes[1] = aux_bytes;
    return CLF_OK;
}

/* The second walk: the next weight's slot in the cache entry (NULLs
 * without one), and whether to pack into it. */
static int next_slot(loader *ld, void **main, void **aux) {
    const int i = ld->next++;
    *main = *aux = NULL;
    if (!ld->wc) return 0;
    clf_wcache_slot(ld->wc, i, main, aux);
    return clf_wcache_building(ld->wc);
}

/* Counts an uploaded tensor for the runtime's progress hook, which, like
 * the abort hook, may stop the load between tensors (the library prints
 * nothing: the CLI draws the progress line). */
static clf_status progress(loader *ld) {
    ld->done++;
    clf_runtime *rt = ld->m->rt;
    if ((rt->progress_fn && rt->progress_fn(rt->progress_ud, ld->done, ld->total)) || clf_runtime_aborted(rt))
        return clf_fail(CLF_ERR_INTERRUPTED, "loading stopped on request after %d of %d tensors", ld->done, ld->total);
    return clf_gguf_guard_check(ld->g); /* the file shrank: stop uploading zeros */
}

static clf_status upload_vec(loader *ld, const char *name, clf_tensor *t) {
    if (ld->listing) return CLF_OK; /* vectors stay in process memory: a few KiB each */
    const clf_gguf_tensor *gt = clf_gguf_find_tensor(ld->g, name);
    CLF_TRY(clf_tensor_alloc(ld->m->rt, CLF_F32, gt->ne[0], 1, t));
    CLF_TRY(clf_tensor_upload(ld->m->rt, t, gt->data, gt->bytes));
    ld->m->device_bytes += gt->bytes;
    return progress(ld);
}

/* Uploads the row-concatenation of `n` tensors (same type and columns; see
 * upload_proj) as one weight: fusing Q|K|V and gate|up turns three or two
 * launches into one. The rows are re-laid from the file's mapping straight
 * into the cache entry or the device buffer (no staging copy). */
/* The rows `src` gives (of one type and width) as one weight named `name`
 * in the cache's list: listed on the first walk, loaded on the second. */
static clf_status upload_parts(loader *ld, const char *name, clf_type type, int64_t cols, const clf_rows_src *src,
                               int n_part, clf_weight *w);
static clf_status upload_src(loader *ld, const char *name, clf_type type, int64_t cols, const clf_rows_src *src,
                             clf_weight *w) {
    return upload_parts(ld, name, type, cols, src, 1, w);
}

/* The same for n_part stacked parts (clf_weight_upload_parts). */
static clf_status upload_parts(loader *ld, const char *name, clf_type type, int64_t cols, const clf_rows_src *src,
                               int n_part, clf_weight *w) {
    clf_runtime *rt = ld->m->rt;
    int64_t rows = 0;
    for (int i = 0; i < n_part; i++) rows += clf_rows_src_total(&src[i]);
    clf_status st;
    if (ld->listing) {
        size_t mb, ab;
        st = clf_weight_layout(rt, type, rows, cols, &mb, &ab);
        if (st == CLF_OK) st = list_weight(ld, name, type, rows, cols, mb, ab);
        return st == CLF_OK ? CLF_OK : clf_fail_ctx(st, "%s: ", name);
    }
    void *mh, *ah;
    const int pack = next_slot(ld, &mh, &ah);
    if (!mh) st = clf_weight_upload_parts(rt, type, cols, src, n_part, w);
    else {
        st = pack ? clf_weight_pack_parts(rt, type, cols, src, n_part, mh, ah) : CLF_OK;
        if (st == CLF_OK) st = clf_weight_wrap(rt, type, rows, cols, mh, ah, w);
    }
    if (st != CLF_OK) return clf_fail_ctx(st, "uploading %s: ", name);
    ld->m->device_bytes += w->bytes;
    return CLF_OK;
}

static clf_status upload_fused(loader *ld, const char *const *names, int n, clf_weight *w) {
    const clf_gguf_tensor *ts[3] = {NULL};
    clf_rows_src src = {.n = n};
    for (int i = 0; i < n; i++) {
        ts[i] = clf_gguf_find_tensor(ld->g, names[i]);
        src.data[i] = ts[i]->data;
        src.rows[i] = ts[i]->ne[1];
    }
    CLF_TRY(upload_src(ld, names[0], ts[0]->type, ts[0]->ne[0], &src, w));
    if (ld->listing) return CLF_OK;
    for (int i = 0; i < n; i++) clf_gguf_release(ld->g, ts[i]->data, ts[i]->bytes);
    for (int i = 0; i < n; i++) CLF_TRY(progress(ld));
    return CLF_OK;
}

/* The token embedding as the file has it (rows looked up, not multiplied). */
static clf_status upload_embd(loader *ld, clf_tensor *t) {
    const clf_gguf_tensor *e = clf_gguf_find_tensor(ld->g, "token_embd.weight");
    if (ld->listing) {
        ld->embd = ld->n;
        return list_weight(ld, "token_embd.weight", e->type, e->ne[1], e->ne[0], e->bytes, 0);
    }
    void *mh, *ah;
    const int pack = next_slot(ld, &mh, &ah);
    if (mh) {
        if (pack) memcpy(mh, e->data, e->bytes);
        CLF_TRY(clf_tensor_wrap(ld->m->rt, e->type, e->ne[0], e->ne[1], mh, t));
    } else {
        CLF_TRY(clf_tensor_alloc(ld->m->rt, e->type, e->ne[0], e->ne[1], t));
        CLF_TRY(clf_tensor_upload(ld->m->rt, t, e->data, e->bytes));
    }
    clf_gguf_release(ld->g, e->data, e->bytes);
    ld->m->device_bytes += e->bytes;
    return progress(ld);
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
    if (ld->listing) return CLF_OK;
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

/* gpt-oss's expert biases of layer l: ffn_down_exps.bias [n_embd × n_expert]
 * as it is (row e expert e's), and ffn_{gate,up}_exps.bias [n_ff_exp ×
 * n_expert] interleaved into rows of gate_e | up_e, the columns of the
 * gate|up product they are added to (host/compute/moe.h). */
static clf_status upload_exp_biases(loader *ld, int l, clf_tensor *b_gu, clf_tensor *b_down) {
    if (ld->listing) return CLF_OK;
    const clf_llama_hparams *hp = &ld->m->hp;
    char name[96];
    const clf_gguf_tensor *tg, *tu, *td;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.bias", l), tg = clf_gguf_find_tensor(ld->g, name);
    snprintf(name, sizeof name, "blk.%d.ffn_up_exps.bias", l), tu = clf_gguf_find_tensor(ld->g, name);
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.bias", l), td = clf_gguf_find_tensor(ld->g, name);
    const size_t ff = (size_t)hp->n_ff_exp, E = (size_t)hp->n_expert;
    float *cat = malloc(2 * ff * E * sizeof *cat);
    if (!cat) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (size_t e = 0; e < E; e++) {
        memcpy(cat + 2 * ff * e, (const float *)tg->data + ff * e, ff * sizeof *cat);
        memcpy(cat + 2 * ff * e + ff, (const float *)tu->data + ff * e, ff * sizeof *cat);
    }
    clf_status st = clf_tensor_alloc(ld->m->rt, CLF_F32, 2 * (int64_t)ff, (int64_t)E, b_gu);
    if (st == CLF_OK) st = clf_tensor_upload(ld->m->rt, b_gu, cat, 2 * ff * E * sizeof *cat);
    free(cat);
    if (st == CLF_OK) st = clf_tensor_alloc(ld->m->rt, CLF_F32, hp->n_embd, (int64_t)E, b_down);
    if (st == CLF_OK) st = clf_tensor_upload(ld->m->rt, b_down, td->data, td->bytes);
    ld->m->device_bytes += 2 * ff * E * sizeof(float) + td->bytes;
    for (int i = 0; st == CLF_OK && i < 3; i++) st = progress(ld);
    return st;
}

/* blk.<l>.<what>.bias: a vector (upload_vec). */
static clf_status upload_layer_bias(loader *ld, int l, const char *what, clf_tensor *t) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.bias", l, what);
    return upload_vec(ld, name, t);
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
                        clf_bytes_str((double)need, a, sizeof a), rt->dev.name, clf_bytes_str((double)rt->dev.global_mem, b, sizeof b));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        if (!clf_split_tensor_on_stage(t->name.ptr, t->name.len, m->l0, m->l1, n_layer)) continue;
        /* stacked experts (ffn_*_exps) load as a weight each: an expert's bytes are the allocation */
        const size_t alloc = m->hp.n_expert && t->ne[2] > 1 ? t->bytes / (size_t)t->ne[2] : t->bytes;
        if (alloc > rt->dev.max_alloc)
            return clf_fail(CLF_ERR_MEMORY, "tensor %.*s (%s%s) exceeds %s's max allocation of %s", (int)t->name.len,
                            t->name.ptr, clf_bytes_str((double)alloc, a, sizeof a), alloc < t->bytes ? " an expert" : "",
                            rt->dev.name,
                            clf_bytes_str((double)rt->dev.max_alloc, b, sizeof b));
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

/* Layer l's experts: expert e's rows of ffn_{gate,up}_exps (its slice
 * [n_ff_exp × n_embd] of each) as one gate|up weight when both tensors
 * have one type (two weights, n_gu = 2, where they differ), and its slice
 * of ffn_down_exps. Each expert is its own weight (a row range of the
 * file's stacked tensor), so every product kernel takes it as it takes a
 * dense matrix. Where the device has the indirect GEMVs for both types
 * (clf_matmul_stacks: decode's one launch for all chosen experts), the
 * experts load as two stacked weights instead, gate|up [E · 2 n_ff rows]
 * and down [E · n_embd rows], each expert's weights parts of them
 * (clf_weight_part): one entry each in the packed-weights cache. */
/* Layer l's experts stacked (see upload_experts), each expert's weights parts of the stacks. */
static clf_status upload_stack(loader *ld, int l, const clf_gguf_tensor *const *ts, clf_llama_layer *L) {
    const int E = ld->m->hp.n_expert;
    clf_rows_src *gu = calloc((size_t)E, sizeof *gu), *dn = calloc((size_t)E, sizeof *dn);
    clf_status st = gu && dn ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int e = 0; st == CLF_OK && e < E; e++) {
        const unsigned char *slice[3];
        for (int i = 0; i < 3; i++)
            slice[i] = ts[i]->data + (size_t)e * (size_t)ts[i]->ne[1] * clf_row_bytes(ts[i]->type, ts[i]->ne[0]);
        gu[e] = (clf_rows_src){.data = {slice[0], slice[1]}, .rows = {ts[0]->ne[1], ts[1]->ne[1]}, .n = 2};
        dn[e] = (clf_rows_src){.data = {slice[2]}, .rows = {ts[2]->ne[1]}, .n = 1};
    }
    char name[64];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps", l);
    if (st == CLF_OK) st = upload_parts(ld, name, ts[0]->type, ts[0]->ne[0], gu, E, &L->gu_stack);
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps", l);
    if (st == CLF_OK) st = upload_parts(ld, name, ts[2]->type, ts[2]->ne[0], dn, E, &L->down_stack);
    free(gu), free(dn);
    if (st != CLF_OK || ld->listing) return st;
    for (int e = 0; e < E; e++) {
        L->experts[e].n_gu = 1;
        CLF_TRY(clf_weight_part(&L->gu_stack, E, e, &L->experts[e].gu[0]));
        CLF_TRY(clf_weight_part(&L->down_stack, E, e, &L->experts[e].down));
    }
    return CLF_OK;
}

static clf_status upload_experts(loader *ld, int l, clf_llama_layer *L) {
    const clf_llama_hparams *hp = &ld->m->hp;
    const char *what[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const clf_gguf_tensor *ts[3];
    char name[96];
    for (int i = 0; i < 3; i++) ts[i] = clf_gguf_find_tensor(ld->g, layer_name(name, sizeof name, l, what[i]));
    if (!ld->listing && !(L->experts = calloc((size_t)hp->n_expert, sizeof *L->experts)))
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    const int fused = ts[0]->type == ts[1]->type, E = hp->n_expert;
    const int64_t ff = ts[0]->ne[1], d = ts[2]->ne[1];
    /* CLINFER_MOE_STACK=0 keeps them apart (the A/B of the indirect decode, bench/RESULTS.md) */
    const char *env = getenv("CLINFER_MOE_STACK");
    if (!(env && !strcmp(env, "0")) && fused && ff == ts[1]->ne[1] && ff % 32 == 0 && clf_matmul_stacks(ld->m->rt, ts[0]->type, 2 * ff, ts[0]->ne[0], E) &&
        clf_matmul_stacks(ld->m->rt, ts[2]->type, d, ts[2]->ne[0], E)) {
        /* two weights: expert e's gate rows then its up rows, e ascending; the downs */
        CLF_TRY(upload_stack(ld, l, ts, L));
        if (ld->listing) return CLF_OK;
        for (int i = 0; i < 3; i++) clf_gguf_release(ld->g, ts[i]->data, ts[i]->bytes);
        for (int i = 0; i < 3; i++) CLF_TRY(progress(ld));
        return CLF_OK;
    }
    for (int e = 0; e < hp->n_expert; e++) {
        clf_moe_expert dummy, *x = ld->listing ? &dummy : &L->experts[e];
        const unsigned char *slice[3];
        for (int i = 0; i < 3; i++)
            slice[i] = ts[i]->data + (size_t)e * (size_t)ts[i]->ne[1] * clf_row_bytes(ts[i]->type, ts[i]->ne[0]);
        char wname[64];
        if (fused) {
            clf_rows_src src = {.data = {slice[0], slice[1]}, .rows = {ts[0]->ne[1], ts[1]->ne[1]}, .n = 2};
            snprintf(wname, sizeof wname, "blk.%d.ffn_gate_up_exps/%d", l, e);
            CLF_TRY(upload_src(ld, wname, ts[0]->type, ts[0]->ne[0], &src, &x->gu[0]));
            x->n_gu = 1;
        } else {
            for (int i = 0; i < 2; i++) {
                clf_rows_src src = {.data = {slice[i]}, .rows = {ts[i]->ne[1]}, .n = 1};
                snprintf(wname, sizeof wname, "blk.%d.%s/%d", l, what[i], e);
                CLF_TRY(upload_src(ld, wname, ts[i]->type, ts[i]->ne[0], &src, &x->gu[i]));
            }
            x->n_gu = 2;
        }
        clf_rows_src src = {.data = {slice[2]}, .rows = {ts[2]->ne[1]}, .n = 1};
        snprintf(wname, sizeof wname, "blk.%d.ffn_down_exps/%d", l, e);
        CLF_TRY(upload_src(ld, wname, ts[2]->type, ts[2]->ne[0], &src, &x->down));
    }
    if (ld->listing) return CLF_OK;
    for (int i = 0; i < 3; i++) clf_gguf_release(ld->g, ts[i]->data, ts[i]->bytes);
    for (int i = 0; i < 3; i++) CLF_TRY(progress(ld));
    return CLF_OK;
}

static clf_status upload_all(loader *ld) {
    clf_llama *m = ld->m;
    const clf_gguf *g = ld->g;
    const clf_llama_hparams *hp = &m->hp;
    const clf_family *f = hp->fam;
    CLF_TRY(check_fits(m, g));
    /* the embedding on the first stage, the head on the last (stage.h) */
    if (m->l0 == 0) CLF_TRY(upload_embd(ld, &m->tok_embd));
    if (m->l1 == hp->n_layer) {
        const char *out_name[] = {hp->tied ? "token_embd.weight" : "output.weight"};
        CLF_TRY(upload_fused(ld, out_name, 1, &m->output));
        CLF_TRY(upload_vec(ld, "output_norm.weight", &m->out_norm));
    }
    if (hp->rope_freqs) CLF_TRY(upload_vec(ld, "rope_freqs.weight", &m->rope_freqs));
    if (!m->layers) m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    /* Q|K|V and gate|up become one weight each, fused here unless stored so */
    static const char *const qkv[] = {"attn_q", "attn_k", "attn_v"}, *const qkv_fused[] = {"attn_qkv"};
    static const char *const gate_up[] = {"ffn_gate", "ffn_up"}, *const gate_up_fused[] = {"ffn_up"};
    static const char *const wo[] = {"attn_output"}, *const down[] = {"ffn_down"}, *const router[] = {"ffn_gate_inp"};
    for (int l = m->l0; l < m->l1; l++) {
        clf_llama_layer *L = &m->layers[l];
        CLF_TRY(upload_layer_vec(ld, l, "attn_norm", &L->attn_norm));
        /* the FFN's norm: post_attention_norm in a gpt-oss file */
        CLF_TRY(upload_layer_vec(ld, l, f->ffn_norm_post_attn ? "post_attention_norm" : "ffn_norm", &L->ffn_norm));
        if (f->attn_sinks) CLF_TRY(upload_layer_vec(ld, l, "attn_sinks", &L->sinks));
        if (f->attn_out_bias) CLF_TRY(upload_layer_bias(ld, l, "attn_output", &L->bo));
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
        if (hp->n_expert) { /* the router and the experts (Mixtral, Qwen3-MoE) */
            CLF_TRY(upload_layer(ld, l, router, 1, &L->router));
            CLF_TRY(upload_experts(ld, l, L));
            if (f->moe_biases) { /* gpt-oss */
                CLF_TRY(upload_layer_bias(ld, l, "ffn_gate_inp", &L->router_b));
                CLF_TRY(upload_exp_biases(ld, l, &L->exp_b_gu, &L->exp_b_down));
            }
        } else {
            CLF_TRY(hp->fused_gate_up ? upload_layer_proj(ld, l, gate_up_fused, 1, &L->wgu)
                                      : upload_layer_proj(ld, l, gate_up, 2, &L->wgu));
            CLF_TRY(upload_layer(ld, l, down, 1, &L->wdown));
        }
        if (f->qkv_bias) CLF_TRY(upload_bias(ld, l, &L->bqkv));
    }
    return CLF_OK;
}

/* The layout's name in the cache's key: the kernels' family and the
 * panel format's version (bump it with any change to matmul_panels.c's
 * bytes). */
#define PANELS_VERSION 1

static clf_status load(clf_llama *m, const clf_gguf *g) {
    int total;
    clf_split_range_bytes(g, m->l0, m->l1, m->hp.n_layer, &total);
    clf_runtime *rt = m->rt;
    loader ld = {m, g, 0, total, 1, NULL, 0, 0, 0, -1, NULL};
    clf_status st = upload_all(&ld); /* the list */
    if (m->layers) memset(m->layers, 0, (size_t)m->hp.n_layer * sizeof *m->layers); /* the list's part counts */
    char layout[64];
    snprintf(layout, sizeof layout, "%s panels v%d", clf_matmul_variant(rt), PANELS_VERSION);
    if (st == CLF_OK && clf_weight_host_layout(rt) && !rt->weights_in_memory)
        st = clf_wcache_open(rt, g, layout, m->l0, m->l1, ld.w, ld.n, &ld.wc);
    m->wcache = ld.wc;
    ld.listing = 0;
    if (st == CLF_OK) st = upload_all(&ld); /* the weights */
    if (st == CLF_OK && ld.next != ld.n)
        st = clf_fail(CLF_ERR_FORMAT, "the load listed %d weights but loaded %d", ld.n, ld.next);
    if (st == CLF_OK && ld.wc) {
        clf_status done = clf_wcache_done(ld.wc);
        if (done != CLF_OK) clf_runtime_notice(rt, "the packed weights stay in this process only: %s", clf_last_error());
    }
    if (st == CLF_OK && ld.wc && ld.embd >= 0) clf_wcache_drop(ld.wc, ld.embd); /* rows come back as looked up */
    if (st == CLF_OK && ld.wc && rt->weights_mlock && clf_wcache_lock(ld.wc) != CLF_OK)
        clf_runtime_notice(rt, "--mlock: %s", clf_last_error());
    free(ld.w);
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
        clf_tensor *vecs[] = {&L->attn_norm, &L->ffn_norm, &L->post_attn_norm, &L->post_ffn_norm, &L->q_norm, &L->k_norm,
                              &L->sinks, &L->bo, &L->router_b, &L->exp_b_gu, &L->exp_b_down};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) clf_tensor_free(vecs[i]);
        clf_tensor_free(&L->bqkv);
        proj_free(&L->wqkv);
        clf_weight_free(&L->wo);
        proj_free(&L->wgu);
        clf_weight_free(&L->wdown);
        clf_weight_free(&L->router);
        for (int e = 0; L->experts && e < m->hp.n_expert; e++) {
            /* both slots, not n_gu's: a failed upload of up leaves gate uploaded and n_gu unset */
            for (int i = 0; i < 2; i++) clf_weight_free(&L->experts[e].gu[i]);
            clf_weight_free(&L->experts[e].down);
        }
        free(L->experts);
        clf_weight_free(&L->gu_stack);
        clf_weight_free(&L->down_stack);
    }
    free(m->layers);
    clf_wcache_close(m->wcache); /* after the buffers that use its mapping */
    free(m);
}

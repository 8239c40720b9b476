/* Contexts: each sequence's KV caches (a ring for the sliding-window
 * layers), the scratch one pass needs, and the sequences' lengths
 * (rewind, copy). */
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"

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

/* Slots [0, n_slots) of every layer's and head's rows from one cache to
 * another of the same shape ([layer][kv_head][slot][head_dim], K and V):
 * one rectangle of n_layer × n_kv_head rows per buffer. */
static clf_status copy_slots(clf_runtime *rt, const clf_kv_cache *from, const clf_kv_cache *to, int n_slots) {
    if (!from->k || n_slots <= 0) return CLF_OK;
    const size_t elem = from->type == CLF_F16 ? 2 : 4, slot = (size_t)from->head_dim * elem;
    const size_t origin[3] = {0, 0, 0}, region[3] = {(size_t)n_slots * slot, (size_t)from->n_layer * from->n_kv_head, 1};
    const size_t pitch = (size_t)from->n_ctx * slot;
    cl_mem src[2] = {from->k, from->v}, dst[2] = {to->k, to->v};
    for (int i = 0; i < 2; i++)
        CLF_CL_TRY(clEnqueueCopyBufferRect(rt->queue, src[i], dst[i], origin, origin, region, pitch, 0, pitch, 0, 0,
                                           NULL, NULL));
    return CLF_OK;
}

clf_status clf_llama_seq_copy(clf_llama_ctx *c, int src, int dst, int n) {
    if (src < 0 || src >= c->n_seq || dst < 0 || dst >= c->n_seq)
        return clf_fail(CLF_ERR_ARG, "copying sequence %d to %d: the context has %d", src, dst, c->n_seq);
    const int len = clf_llama_seq_len(c, src);
    if (n < 0 || n > len)
        return clf_fail(CLF_ERR_ARG, "copying %d tokens of sequence %d, which holds %d", n, src, len);
    if (c->next) return clf_fail(CLF_ERR_ARG, "copying a sequence is not supported over a split");
    const clf_llama_hparams *hp = &c->m->hp;
    const int slots = model_has_swa(hp) ? clf_kv_ring_slots(hp->n_swa, c->n_batch, c->n_ctx) : c->n_ctx;
    const int wrapped = model_has_swa(hp) && len > slots;
    /* clf_llama_seq_rewind's rule: the ring holds the window before n */
    if (wrapped && len - n > slots - hp->n_swa + 1)
        return clf_fail(CLF_ERR_ARG, "copying %d of sequence %d's %d tokens: its sliding-window ring no longer "
                        "holds the window before token %d", n, src, len, n);
    seq_ref from = seq_at(c, src), to = seq_at(c, dst);
    if (src != dst) {
        *to.n_past = 0; /* a copy cut short leaves an empty sequence */
        CLF_TRY(copy_slots(c->m->rt, from.kv, to.kv, n));
        /* the ring: positions p at slot p % slots; once wrapped, all of it */
        CLF_TRY(copy_slots(c->m->rt, from.kv_swa, to.kv_swa, wrapped ? from.kv_swa->n_ctx : n));
    }
    *to.n_past = n;
    return CLF_OK;
}

clf_status clf_llama_grow_logits(clf_llama_ctx *c) {
    const clf_llama *m = c->m;
    if (m->l1 < m->hp.n_layer || c->logits.ne[1] >= c->n_batch) return CLF_OK;
    clf_tensor grown;
    CLF_TRY(clf_tensor_alloc(m->rt, CLF_F32, m->hp.n_vocab, c->n_batch, &grown));
    c->device_bytes += clf_tensor_bytes(&grown) - clf_tensor_bytes(&c->logits);
    clf_tensor_free(&c->logits);
    c->logits = grown;
    return CLF_OK;
}


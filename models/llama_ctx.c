/* Contexts: the paged KV caches every sequence shares (a pool of blocks
 * for the global layers, one for the sliding-window layers), the scratch
 * one pass needs, and the sequences: their blocks, lengths, rewinds and
 * copies (a copy shares the blocks; a shared block is copied before it is
 * written). */
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"
#include "lora.h"

/* Positions a sliding-window sequence keeps below the window, so that a
 * rewind by up to this many (a server evaluating a prompt's last tokens
 * again) keeps its keys: one block (clf_kv_seq_blocks counts it). */
static int swa_slack(const clf_kv_cache *kv) { return kv->block; }

/* The caches of the stage's layers: the global layers' and the
 * sliding-window layers', each a pool of n_seq sequences' worth of blocks. */
static clf_status create_caches(clf_llama_ctx *c, clf_type kv_type, size_t kv_memory) {
    const clf_llama *m = c->m;
    const clf_llama_hparams *hp = &m->hp;
    const int block = CLF_KV_BLOCK, n_tbl = (c->n_ctx + block - 1) / block;
    int n_swa_layers = 0, n_layer = m->l1 - m->l0; /* the stage's layers only */
    for (int l = m->l0; l < m->l1; l++) n_swa_layers += clf_family_layer_swa(hp->fam, l);
    if (n_swa_layers < n_layer) {
        int64_t n_blocks = (int64_t)c->n_seq * clf_kv_seq_blocks(0, c->n_batch, c->n_ctx, block);
        if (kv_memory) {
            /* K and V of every global layer's KV heads, a block's slots */
            const int64_t per_block = 2 * (int64_t)(n_layer - n_swa_layers) * hp->n_head_kv * block *
                                      (int64_t)clf_kv_row_bytes(kv_type, hp->head_dim);
            const int64_t least = (c->n_batch + block - 1) / block + 1; /* a chunk, wherever it starts */
            n_blocks = (int64_t)(kv_memory / (uint64_t)per_block);
            if (n_blocks < least)
                return clf_fail(CLF_ERR_ARG, "a KV cache of %zu bytes holds %lld blocks of %d tokens; a batch of %d "
                                "needs %lld (%lld bytes)", kv_memory, (long long)n_blocks, block, c->n_batch,
                                (long long)least, (long long)(least * per_block));
            if (n_blocks > INT32_MAX / block) n_blocks = INT32_MAX / block;
        }
        CLF_TRY(clf_kv_pool_create(m->rt, kv_type, n_layer - n_swa_layers, hp->n_head_kv, hp->head_dim,
                                   (int)n_blocks, block, c->n_seq, n_tbl, 0, &c->kv));
        CLF_TRY(clf_kv_blocks_init(&c->blk, (int)n_blocks, c->n_seq, n_tbl));
    }
    if (n_swa_layers) {
        const int per_seq = clf_kv_seq_blocks(hp->n_swa, c->n_batch, c->n_ctx, block);
        CLF_TRY(clf_kv_pool_create(m->rt, kv_type, n_swa_layers, hp->n_head_kv, hp->head_dim, c->n_seq * per_seq,
                                   block, c->n_seq, n_tbl, hp->n_swa, &c->kv_swa));
        CLF_TRY(clf_kv_blocks_init(&c->blk_swa, c->n_seq * per_seq, c->n_seq, n_tbl));
    }
    return CLF_OK;
}

/* 1 when a decode product reading the norms' or SwiGLU's output quantizes
 * it to int8 (the first layer's weights stand for all; a product that does
 * not just reads the float rows). */
static int takes_xq(const clf_llama *m) {
    const clf_llama_hparams *hp = &m->hp;
    if (hp->n_embd % 32 || (hp->n_expert ? hp->n_ff_exp : hp->n_ff) % 32) return 0;
    const clf_llama_layer *L = &m->layers[m->l0]; /* a stage's first layer; the head on the last stage only */
    /* the MLP's: with experts the first expert's (xq_f then holds one expert's hidden row) */
    const clf_llama_proj gu_one = {.part = {hp->n_expert ? L->experts[0].gu[0] : (clf_weight){0}}, .n = 1};
    const clf_llama_proj *ps[] = {&L->wqkv, hp->n_expert ? &gu_one : &L->wgu};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < ps[i]->n; j++)
            if (clf_matmul_quantizes_x(m->rt, &ps[i]->part[j], 1)) return 1;
    return clf_matmul_quantizes_x(m->rt, hp->n_expert ? &L->experts[0].down : &L->wdown, 1) ||
           (m->l1 == hp->n_layer && clf_matmul_quantizes_x(m->rt, &m->output, 1));
}

clf_status clf_llama_ctx_create_pool(const clf_llama *m, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                     size_t kv_memory, clf_llama_ctx **out) {
    const clf_llama_hparams *hp = &m->hp;
    *out = NULL;
    if (n_ctx <= 0) n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (n_batch <= 0 || n_batch > n_ctx) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (kv_type != CLF_F32 && kv_type != CLF_F16 && kv_type != CLF_Q8_0 && kv_type != CLF_Q4_0)
        return clf_fail(CLF_ERR_ARG, "KV cache type must be F32, F16, Q8_0 or Q4_0");
    if ((kv_type == CLF_Q8_0 || kv_type == CLF_Q4_0) && m->hp.head_dim % 32)
        return clf_fail(CLF_ERR_ARG, "a %s KV cache needs heads of a multiple of 32 dimensions; this model's are %d",
                        kv_type == CLF_Q8_0 ? "q8_0" : "q4_0", m->hp.head_dim);
    if (n_seq < 1 || n_seq > 4096) return clf_fail(CLF_ERR_ARG, "%d sequences: 1 to 4096 are possible", n_seq);
    clf_llama_ctx *c = calloc(1, sizeof *c);
    if (!c) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->n_seq = n_seq;
    clf_runtime *rt = m->rt;
    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    const int n_dec = n_seq < n_batch ? n_seq : n_batch; /* decode rows a pass can hold */
    c->seqs = calloc((size_t)n_seq, sizeof *c->seqs); /* [0] unused: sequence 0's length is c->n_past */
    c->host_ids = malloc((size_t)n_batch * sizeof *c->host_ids);
    c->n_dec = n_dec;
    c->row_seq = malloc((size_t)n_batch * sizeof *c->row_seq); /* a verification's rows too (clf_llama_eval_rows) */
    c->row_pos = malloc((size_t)n_batch * sizeof *c->row_pos);
    c->tbl_up = malloc(((size_t)n_ctx / CLF_KV_BLOCK + 1) * sizeof *c->tbl_up);
    clf_status st = c->seqs && c->host_ids && c->row_seq && c->row_pos && c->tbl_up
                        ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = create_caches(c, kv_type, kv_memory);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->x);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, hp->n_embd, n_batch, &c->xn);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, q_dim + 2 * kv_dim, n_batch, &c->qkv);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, q_dim, n_batch, &c->att);
    /* with experts: gu, ff unused (c->moe has an expert's rows), xq_f an expert's hidden row */
    /* 2 * n_ff and q_dim + 2 * kv_dim fit an int: llama_hparams bounds every
     * dimension below 2^30 and q_dim (>= kv_dim) by 2^28 */
    const int n_ff = hp->n_expert ? hp->n_ff_exp : hp->n_ff;
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, 2 * n_ff, n_batch, &c->gu);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, n_ff, n_batch, &c->ff);
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
    /* a mixture of experts' routing and one expert's rows */
    if (st == CLF_OK && hp->n_expert)
        st = clf_moe_scratch_alloc(rt, n_batch, hp->n_expert, hp->n_expert_used, hp->n_embd, hp->n_ff_exp, &c->moe);
    /* a decode row's activation quantized once by the norm or SwiGLU that makes it, where the GEMVs take int8 x */
    if (st == CLF_OK && takes_xq(m))
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(hp->n_embd), n_dec, &c->xq_e);
    if (st == CLF_OK && takes_xq(m))
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(n_ff), n_dec, &c->xq_f);
    /* the attention output's, written by the decode kernel, where heads are whole blocks */
    if (st == CLF_OK && takes_xq(m) && hp->head_dim % 32 == 0)
        st = clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(q_dim), n_dec, &c->xq_a);
    if (st != CLF_OK) {
        clf_llama_ctx_free(c);
        return clf_fail_ctx(st, "creating a context of %d tokens: ", n_ctx);
    }
    c->device_bytes = c->kv.bytes + c->kv_swa.bytes + (size_t)n_batch * sizeof(int32_t);
    const clf_tensor *ts[] = {&c->x, &c->xn, &c->qkv, &c->att, &c->gu, &c->ff, &c->logits, &c->xq_e, &c->xq_f, &c->xq_a};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) c->device_bytes += clf_tensor_bytes(ts[i]);
    c->device_bytes += clf_moe_scratch_bytes(&c->moe);
    *out = c;
    return CLF_OK;
}

clf_status clf_llama_ctx_create_seqs(const clf_llama *m, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                     clf_llama_ctx **out) {
    return clf_llama_ctx_create_pool(m, n_ctx, n_batch, n_seq, kv_type, 0, out);
}

clf_status clf_llama_ctx_create(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type, clf_llama_ctx **out) {
    return clf_llama_ctx_create_seqs(m, n_ctx, n_batch, 1, kv_type, out);
}

void clf_llama_ctx_free(clf_llama_ctx *c) {
    if (!c) return;
    clf_kv_cache_free(&c->kv);
    clf_kv_cache_free(&c->kv_swa);
    clf_kv_blocks_free(&c->blk);
    clf_kv_blocks_free(&c->blk_swa);
    clf_attn_rows_free(&c->rows);
    clf_attn_rows_free(&c->rows_swa);
    clf_lora_ctx_free(c->lora);
    free(c->seqs);
    free(c->host_ids);
    free(c->row_seq);
    free(c->row_pos);
    free(c->tbl_up);
    if (c->next) c->next->ops->free(c->next);
    free(c->hop_x[0]);
    free(c->hop_x[1]);
    free(c->hop_logits);
    free(c->top_logits);
    clf_topk_free(&c->topk);
    clf_tensor *ts[] = {&c->x, &c->xn, &c->qkv, &c->att, &c->gu, &c->ff, &c->logits, &c->xq_e, &c->xq_f, &c->xq_a};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) clf_tensor_free(ts[i]);
    clf_moe_scratch_free(&c->moe);
    if (c->ids) clReleaseMemObject(c->ids);
    free(c);
}

int clf_llama_seq_len(const clf_llama_ctx *c, int seq) { return seq == 0 ? c->n_past : c->seqs[seq].n_past; }

/* ---- blocks ------------------------------------------------------------------- */

/* A shared block's first n slots into the sequence's own copy. */
static clf_status copy_block(void *user, int from, int to, int n) {
    const clf_llama_ctx *c = ((void **)user)[0];
    return clf_kv_block_copy(c->m->rt, ((void **)user)[1], from, to, n);
}

/* Tables that changed onto the device, unmapped entries as block 0 (no
 * kernel reads them: they lie below a window or past a length). */
static clf_status upload_tables(clf_llama_ctx *c, const clf_kv_cache *kv, clf_kv_blocks *b) {
    for (int s = 0; s < b->n_seq; s++) {
        if (!b->dirty[s]) continue;
        const int32_t *t = b->tbl + (int64_t)s * b->n_tbl;
        for (int i = 0; i < b->n_tbl; i++) c->tbl_up[i] = t[i] < 0 ? 0 : t[i];
        CLF_TRY(clf_kv_table_upload(c->m->rt, kv, s, c->tbl_up));
        b->dirty[s] = 0;
    }
    return CLF_OK;
}

/* The first key the next query of a sequence of length len sees in a
 * sliding-window cache, less the rewind slack. */
static int swa_keep_from(const clf_kv_cache *kv, int len) {
    const int k = len - kv->window + 1 - swa_slack(kv);
    return k > 0 ? k : 0;
}

/* The positions [*lo, *hi) a pass writes into sequence seq (its segments:
 * a verification gives one a row); 0 when segment s is not seq's first. */
static int seq_span(const segment *segs, int n_seg, int s, int *lo, int *hi) {
    for (int t = 0; t < s; t++)
        if (segs[t].seq == segs[s].seq) return 0;
    *lo = segs[s].pos, *hi = segs[s].pos + segs[s].n;
    for (int t = s + 1; t < n_seg; t++)
        if (segs[t].seq == segs[s].seq) {
            if (segs[t].pos < *lo) *lo = segs[t].pos;
            if (segs[t].pos + segs[t].n > *hi) *hi = segs[t].pos + segs[t].n;
        }
    return 1;
}

clf_status clf_llama_seq_reserve(clf_llama_ctx *c, const segment *segs, int n_seg) {
    const clf_kv_cache *kvs[2] = {&c->kv, &c->kv_swa};
    clf_kv_blocks *bs[2] = {&c->blk, &c->blk_swa};
    for (int k = 0; k < 2; k++) {
        if (!kvs[k]->k) continue;
        const int bt = kvs[k]->block;
        int lo, hi, need = 0;
        /* blocks that left the window first, then the count: all or nothing */
        for (int s = 0; s < n_seg; s++)
            if (seq_span(segs, n_seg, s, &lo, &hi)) {
                if (kvs[k]->window) clf_kv_blocks_drop_below(bs[k], segs[s].seq, swa_keep_from(kvs[k], lo) / bt);
                need += clf_kv_blocks_need(bs[k], segs[s].seq, lo / bt, (hi - 1) / bt);
            }
        if (need > bs[k]->n_free)
            return clf_fail(CLF_ERR_CONTEXT, "the KV cache is full: this pass needs %d more blocks of %d tokens, %d of "
                            "%d are free", need, bt, bs[k]->n_free, bs[k]->n_blocks);
        void *user[2] = {c, (void *)kvs[k]};
        for (int s = 0; s < n_seg; s++)
            if (seq_span(segs, n_seg, s, &lo, &hi))
                CLF_TRY(clf_kv_blocks_write(bs[k], segs[s].seq, lo / bt, (hi - 1) / bt, lo % bt, copy_block, user));
        CLF_TRY(upload_tables(c, kvs[k], bs[k]));
    }
    return CLF_OK;
}

clf_status clf_llama_seq_room(const clf_llama_ctx *c, const int *seq, const int *n, int count) {
    if (!c->kv.k) return CLF_OK;
    const int bt = c->kv.block;
    int need = 0;
    for (int i = 0; i < count; i++) {
        const int pos = clf_llama_seq_len(c, seq[i]);
        if (n[i] > 0) need += clf_kv_blocks_need(&c->blk, seq[i], pos / bt, (pos + n[i] - 1) / bt);
    }
    if (need > c->blk.n_free)
        return clf_fail(CLF_ERR_CONTEXT, "the KV cache is full: %d more blocks of %d tokens are needed, %d of %d are "
                        "free", need, bt, c->blk.n_free, c->blk.n_blocks);
    return CLF_OK;
}

/* Whether a sliding-window sequence still holds the keys the query at
 * position pos sees (those below were given back). */
static int swa_holds(const clf_llama_ctx *c, int seq, int pos) {
    if (!c->kv_swa.k || pos == 0) return 1;
    const int first = pos - c->kv_swa.window + 1 > 0 ? pos - c->kv_swa.window + 1 : 0;
    for (int b = first / c->kv_swa.block; b <= (pos - 1) / c->kv_swa.block; b++)
        if (!clf_kv_blocks_mapped(&c->blk_swa, seq, b)) return 0;
    return 1;
}

/* Keeps positions below pos: the blocks from the one after pos's on go back. */
static void drop_from(clf_llama_ctx *c, int seq, int pos) {
    if (c->kv.k) clf_kv_blocks_drop_from(&c->blk, seq, (pos + c->kv.block - 1) / c->kv.block);
    if (c->kv_swa.k) clf_kv_blocks_drop_from(&c->blk_swa, seq, (pos + c->kv_swa.block - 1) / c->kv_swa.block);
}

void clf_llama_seq_rewind(clf_llama_ctx *c, int seq, int pos) {
    int *n_past = seq_past(c, seq);
    if (pos < 0 || pos >= *n_past) return;
    /* a sliding window whose keys before pos were given back starts over;
     * every stage of a split decides alike (the window is the model's) */
    if (!swa_holds(c, seq, pos)) pos = 0;
    drop_from(c, seq, pos);
    *n_past = pos;
    if (c->next) c->next->ops->seq_rewind(c->next, seq, pos);
}

void clf_llama_rewind(clf_llama_ctx *c, int pos) { clf_llama_seq_rewind(c, 0, pos); }

clf_status clf_llama_seq_copy(clf_llama_ctx *c, int src, int dst, int n) {
    if (src < 0 || src >= c->n_seq || dst < 0 || dst >= c->n_seq)
        return clf_fail(CLF_ERR_ARG, "copying sequence %d to %d: the context has %d", src, dst, c->n_seq);
    const int len = clf_llama_seq_len(c, src);
    if (n < 0 || n > len)
        return clf_fail(CLF_ERR_ARG, "copying %d tokens of sequence %d, which holds %d", n, src, len);
    if (c->next) return clf_fail(CLF_ERR_ARG, "copying a sequence is not supported over a split");
    if (!swa_holds(c, src, n))
        return clf_fail(CLF_ERR_ARG, "copying %d of sequence %d's %d tokens: its sliding-window layers no longer "
                        "hold the window before token %d", n, src, len, n);
    if (src == dst) {
        clf_llama_seq_rewind(c, src, n);
        return CLF_OK;
    }
    /* dst shares src's blocks of positions below n; the block holding n is
     * copied by whichever of the two writes it first */
    if (c->kv.k) clf_kv_blocks_share(&c->blk, src, dst, (n + c->kv.block - 1) / c->kv.block);
    if (c->kv_swa.k) clf_kv_blocks_share(&c->blk_swa, src, dst, (n + c->kv_swa.block - 1) / c->kv_swa.block);
    *seq_past(c, dst) = n;
    return CLF_OK;
}

clf_status clf_llama_grow_rows(clf_llama_ctx *c, int n) {
    clf_tensor *ts[] = {&c->xq_e, &c->xq_f, &c->xq_a};
    if (n <= c->n_dec) return CLF_OK;
    for (int i = 0; i < 3; i++) {
        if (!ts[i]->mem) continue;
        clf_tensor grown;
        CLF_TRY(clf_tensor_alloc(c->m->rt, CLF_F32, ts[i]->ne[0], n, &grown));
        c->device_bytes += clf_tensor_bytes(&grown) - clf_tensor_bytes(ts[i]);
        clf_tensor_free(ts[i]);
        *ts[i] = grown;
    }
    c->n_dec = n;
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


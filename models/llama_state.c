/* A sequence's KV state out of a context and back (llama_state.h). A pool's
 * K (and V) buffer is rows of n_layer × n_kv_head, each n_slots slots of a
 * cache row's bytes (host/compute/attention.c); a block is one rectangle
 * of it: `block` slots in every row. A block's rectangle travels as
 * rows × used slots × slot bytes, the rows in the pool's order. */
#include "llama_state.h"

#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"

/* The pools of a context, global first. */
static int pools(clf_llama_ctx *c, clf_kv_cache **kv, clf_kv_blocks **b) {
    int n = 0;
    if (c->kv.k) kv[n] = &c->kv, b[n++] = &c->blk;
    if (c->kv_swa.k) kv[n] = &c->kv_swa, b[n++] = &c->blk_swa;
    return n;
}

clf_status clf_llama_seq_geom(const clf_llama_ctx *c, clf_seq_geom *g) {
    if (c->next) return clf_fail(CLF_ERR_ARG, "a sequence's state cannot be saved or restored over a split");
    const clf_kv_cache *any = c->kv.k ? &c->kv : &c->kv_swa;
    *g = (clf_seq_geom){.kv_type = (int32_t)any->type,
                        .n_layer = c->kv.k ? c->kv.n_layer : 0,
                        .n_layer_swa = c->kv_swa.k ? c->kv_swa.n_layer : 0,
                        .n_kv_head = any->n_kv_head,
                        .head_dim = any->head_dim,
                        .block = any->block,
                        .window = c->kv_swa.k ? c->kv_swa.window : 0};
    return CLF_OK;
}

/* The bytes of one block's rectangle with n slots used. */
static size_t rect_bytes(const clf_kv_cache *kv, int n) {
    return (size_t)kv->n_layer * kv->n_kv_head * (size_t)n * clf_kv_row_bytes(kv->type, kv->head_dim);
}

/* Block `blk`'s first n slots of K (which 0) or V (1) between the device
 * and host (rows × n × slot bytes, packed); blocking. */
static clf_status rect(clf_llama_ctx *c, const clf_kv_cache *kv, int which, int blk, int n, void *host, int write) {
    const size_t slot = clf_kv_row_bytes(kv->type, kv->head_dim), pitch = (size_t)kv->n_slots * slot;
    const size_t dev[3] = {(size_t)blk * kv->block * slot, 0, 0}, hst[3] = {0, 0, 0};
    const size_t region[3] = {(size_t)n * slot, (size_t)kv->n_layer * kv->n_kv_head, 1};
    cl_mem m = which ? kv->v : kv->k;
    cl_command_queue q = c->m->rt->queue;
    cl_int err = write ? clEnqueueWriteBufferRect(q, m, CL_TRUE, dev, hst, region, pitch, 0, (size_t)n * slot, 0, host,
                                                  0, NULL, NULL)
                       : clEnqueueReadBufferRect(q, m, CL_TRUE, dev, hst, region, pitch, 0, (size_t)n * slot, 0, host,
                                                 0, NULL, NULL);
    return clf_cl_check(err, write ? "writing a KV block" : "reading a KV block");
}

/* Slots of logical block i in use by a sequence of len tokens. */
static int used(int len, int block, int i) {
    const int64_t n = (int64_t)len - (int64_t)i * block;
    return n <= 0 ? 0 : n >= block ? block : (int)n;
}

clf_status clf_llama_seq_save(clf_llama_ctx *c, int seq, clf_state_write_fn wr, void *user, size_t *bytes) {
    clf_seq_geom g;
    CLF_TRY(clf_llama_seq_geom(c, &g));
    if (seq < 0 || seq >= c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d of %d", seq, c->n_seq);
    const int len = *seq_past(c, seq);
    clf_kv_cache *kv[2];
    clf_kv_blocks *b[2];
    const int np = pools(c, kv, b);
    size_t total = 0, cap = 0;
    unsigned char *buf = NULL;
    clf_status st = CLF_OK;
    for (int p = 0; p < np && st == CLF_OK; p++) {
        const int bt = kv[p]->block, n_blk = (len + bt - 1) / bt;
        const int32_t *t = b[p]->tbl + (int64_t)seq * b[p]->n_tbl;
        /* the count first: the blocks the sequence holds below its length
         * (a sliding window's below the window were given back) */
        uint32_t count = 0;
        for (int i = 0; i < n_blk; i++) count += t[i] >= 0;
        st = wr(user, &count, sizeof count);
        total += sizeof count;
        const size_t need = rect_bytes(kv[p], bt);
        if (st == CLF_OK && need > cap) {
            free(buf);
            buf = malloc(cap = need);
            if (!buf) st = clf_fail(CLF_ERR_MEMORY, "out of host memory (%zu bytes for a KV block)", need);
        }
        for (int i = 0; i < n_blk && st == CLF_OK; i++) {
            if (t[i] < 0) continue;
            const int32_t head[2] = {i, used(len, bt, i)};
            st = wr(user, head, sizeof head);
            total += sizeof head;
            /* K then V of the block's used slots */
            for (int w = 0; w < 2 && st == CLF_OK; w++) {
                st = rect(c, kv[p], w, t[i], head[1], buf, 0);
                if (st == CLF_OK) st = wr(user, buf, rect_bytes(kv[p], head[1]));
                total += rect_bytes(kv[p], head[1]);
            }
        }
    }
    free(buf);
    if (bytes) *bytes = total;
    return st;
}

/* Empties sequence seq of every pool (its tables go up with the next pass
 * or load). */
static void clear(clf_llama_ctx *c, int seq) {
    if (c->kv.k) clf_kv_blocks_drop_from(&c->blk, seq, 0);
    if (c->kv_swa.k) clf_kv_blocks_drop_from(&c->blk_swa, seq, 0);
    *seq_past(c, seq) = 0;
}

/* Changed tables onto the device (unmapped entries as block 0: no kernel
 * reads them), as the passes upload them. */
static clf_status upload(clf_llama_ctx *c, const clf_kv_cache *kv, clf_kv_blocks *b, int seq) {
    if (!b->dirty[seq]) return CLF_OK;
    const int32_t *t = b->tbl + (int64_t)seq * b->n_tbl;
    for (int i = 0; i < b->n_tbl; i++) c->tbl_up[i] = t[i] < 0 ? 0 : t[i];
    CLF_TRY(clf_kv_table_upload(c->m->rt, kv, seq, c->tbl_up));
    b->dirty[seq] = 0;
    return CLF_OK;
}

/* One pool's blocks from the stream into sequence seq. */
static clf_status load_pool(clf_llama_ctx *c, clf_kv_cache *kv, clf_kv_blocks *b, int seq, int len,
                            clf_state_read_fn rd, void *user, unsigned char *buf) {
    const int bt = kv->block, n_blk = (len + bt - 1) / bt;
    uint32_t count;
    CLF_TRY(rd(user, &count, sizeof count));
    if (count > (uint32_t)n_blk)
        return clf_fail(CLF_ERR_FORMAT, "the state claims %u KV blocks for %d tokens (at most %d)", count, len, n_blk);
    /* the global layers hold every position; a sliding window at least
     * the blocks its next query sees */
    if (!kv->window && count != (uint32_t)n_blk)
        return clf_fail(CLF_ERR_FORMAT, "the state holds %u of the %d KV blocks of %d tokens", count, n_blk, len);
    int prev = -1;
    for (uint32_t k = 0; k < count; k++) {
        int32_t head[2];
        CLF_TRY(rd(user, head, sizeof head));
        if (head[0] <= prev || head[0] >= n_blk || head[1] != used(len, bt, head[0]))
            return clf_fail(CLF_ERR_FORMAT, "a KV block of the state is out of place (index %d after %d, %d slots; "
                            "%d blocks of %d tokens)", (int)head[0], prev, (int)head[1], n_blk, bt);
        prev = head[0];
        CLF_TRY(clf_kv_blocks_write(b, seq, head[0], head[0], 0, NULL, NULL));
        const int blk = b->tbl[(int64_t)seq * b->n_tbl + head[0]];
        for (int w = 0; w < 2; w++) {
            CLF_TRY(rd(user, buf, rect_bytes(kv, head[1])));
            CLF_TRY(rect(c, kv, w, blk, head[1], buf, 1));
        }
    }
    if (kv->window && len > 0) {
        /* the window before the next token's position: its blocks present */
        const int first = len - kv->window + 1 > 0 ? len - kv->window + 1 : 0;
        for (int i = first / bt; i <= (len - 1) / bt; i++)
            if (!clf_kv_blocks_mapped(b, seq, i))
                return clf_fail(CLF_ERR_FORMAT, "the state lacks the sliding window's block %d of %d tokens", i, len);
    }
    return upload(c, kv, b, seq);
}

clf_status clf_llama_seq_load(clf_llama_ctx *c, int seq, int n_tokens, clf_state_read_fn rd, void *user) {
    clf_seq_geom g;
    CLF_TRY(clf_llama_seq_geom(c, &g));
    if (seq < 0 || seq >= c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d of %d", seq, c->n_seq);
    if (n_tokens < 0 || n_tokens > c->n_ctx)
        return clf_fail(CLF_ERR_CONTEXT, "the state holds %d tokens; the session's sequences hold %d", n_tokens,
                        c->n_ctx);
    clf_kv_cache *kv[2];
    clf_kv_blocks *b[2];
    const int np = pools(c, kv, b);
    size_t cap = 0;
    for (int p = 0; p < np; p++)
        if (rect_bytes(kv[p], kv[p]->block) > cap) cap = rect_bytes(kv[p], kv[p]->block);
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory (%zu bytes for a KV block)", cap);
    clear(c, seq);
    clf_status st = CLF_OK;
    for (int p = 0; p < np && st == CLF_OK; p++) st = load_pool(c, kv[p], b[p], seq, n_tokens, rd, user, buf);
    free(buf);
    if (st == CLF_OK) {
        *seq_past(c, seq) = n_tokens;
    } else {
        /* nothing half-restored stays: the sequence is empty */
        clear(c, seq);
        for (int p = 0; p < np; p++) (void)upload(c, kv[p], b[p], seq);
    }
    return st;
}

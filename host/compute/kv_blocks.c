#include "kv_blocks.h"

#include <stdlib.h>
#include <string.h>

clf_status clf_kv_blocks_init(clf_kv_blocks *b, int n_blocks, int n_seq, int n_tbl) {
    memset(b, 0, sizeof *b);
    if (n_blocks <= 0 || n_seq <= 0 || n_tbl <= 0 || (int64_t)n_seq * n_tbl > INT32_MAX)
        return clf_fail(CLF_ERR_ARG, "KV blocks: %d blocks, %d sequences of %d", n_blocks, n_seq, n_tbl);
    b->ref = calloc((size_t)n_blocks, sizeof *b->ref);
    b->free_stack = malloc((size_t)n_blocks * sizeof *b->free_stack);
    b->tbl = malloc((size_t)n_seq * n_tbl * sizeof *b->tbl);
    b->dirty = calloc((size_t)n_seq, 1);
    if (!b->ref || !b->free_stack || !b->tbl || !b->dirty) {
        clf_kv_blocks_free(b);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    b->n_blocks = n_blocks, b->n_seq = n_seq, b->n_tbl = n_tbl;
    /* the lowest block on top: a lone sequence fills the pool in order */
    for (int i = 0; i < n_blocks; i++) b->free_stack[i] = n_blocks - 1 - i;
    b->n_free = n_blocks;
    for (int64_t i = 0; i < (int64_t)n_seq * n_tbl; i++) b->tbl[i] = -1;
    memset(b->dirty, 1, (size_t)n_seq);
    return CLF_OK;
}

void clf_kv_blocks_free(clf_kv_blocks *b) {
    free(b->ref);
    free(b->free_stack);
    free(b->tbl);
    free(b->dirty);
    memset(b, 0, sizeof *b);
}

static int32_t *row(const clf_kv_blocks *b, int seq) { return b->tbl + (int64_t)seq * b->n_tbl; }

static void unref(clf_kv_blocks *b, int blk) {
    if (--b->ref[blk] == 0) b->free_stack[b->n_free++] = blk;
}

int clf_kv_blocks_need(const clf_kv_blocks *b, int seq, int first, int last) {
    const int32_t *t = row(b, seq);
    int need = 0;
    for (int i = first; i <= last; i++) need += t[i] < 0 || b->ref[t[i]] > 1;
    return need;
}

clf_status clf_kv_blocks_write(clf_kv_blocks *b, int seq, int first, int last, int keep, clf_kv_copy_fn copy,
                               void *user) {
    if (seq < 0 || seq >= b->n_seq || first < 0 || last >= b->n_tbl || first > last)
        return clf_fail(CLF_ERR_ARG, "KV blocks %d..%d of sequence %d (of %d, %d blocks each)", first, last, seq,
                        b->n_seq, b->n_tbl);
    const int need = clf_kv_blocks_need(b, seq, first, last);
    if (need > b->n_free)
        return clf_fail(CLF_ERR_CONTEXT, "the KV cache is full: %d more blocks needed, %d of %d free", need, b->n_free,
                        b->n_blocks);
    int32_t *t = row(b, seq);
    for (int i = first; i <= last; i++) {
        if (t[i] >= 0 && b->ref[t[i]] == 1) continue;
        const int blk = b->free_stack[--b->n_free];
        if (t[i] >= 0) { /* shared: this sequence's own copy from now on */
            if (copy) {
                clf_status st = copy(user, t[i], blk, i == first ? keep : 0);
                if (st != CLF_OK) {
                    b->free_stack[b->n_free++] = blk;
                    return st;
                }
            }
            unref(b, t[i]);
        }
        b->ref[blk] = 1;
        t[i] = blk;
        b->dirty[seq] = 1;
    }
    return CLF_OK;
}

void clf_kv_blocks_drop_from(clf_kv_blocks *b, int seq, int first) {
    int32_t *t = row(b, seq);
    for (int i = first < 0 ? 0 : first; i < b->n_tbl; i++)
        if (t[i] >= 0) unref(b, t[i]), t[i] = -1, b->dirty[seq] = 1;
}

void clf_kv_blocks_drop_below(clf_kv_blocks *b, int seq, int end) {
    int32_t *t = row(b, seq);
    for (int i = 0; i < end && i < b->n_tbl; i++)
        if (t[i] >= 0) unref(b, t[i]), t[i] = -1, b->dirty[seq] = 1;
}

void clf_kv_blocks_share(clf_kv_blocks *b, int src, int dst, int n) {
    if (src == dst) return;
    clf_kv_blocks_drop_from(b, dst, 0);
    const int32_t *s = row(b, src);
    int32_t *d = row(b, dst);
    for (int i = 0; i < n && i < b->n_tbl; i++)
        if (s[i] >= 0) b->ref[s[i]]++, d[i] = s[i];
    b->dirty[dst] = 1;
}

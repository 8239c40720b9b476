/* The blocks of a paged KV cache (attention.h): which sequence holds which,
 * shared between sequences by reference count (a prefix copied to another
 * sequence costs no copy), taken as a sequence grows, copied before a
 * shared one is written, given back as a sequence shrinks or its keys
 * leave a sliding window. Bookkeeping only: the device's tables and block
 * copies are the caller's (models/llama_ctx.c). */
#ifndef CLF_KV_BLOCKS_H
#define CLF_KV_BLOCKS_H

#include <stdint.h>

#include "status.h"

typedef struct clf_kv_blocks {
    int n_blocks, n_seq, n_tbl;
    int *ref;        /* [n_blocks] the sequences holding each block (0: free) */
    int *free_stack; /* [n_blocks] the free blocks, n_free of them */
    int n_free;
    int32_t *tbl;   /* [n_seq][n_tbl] each logical block's block, -1: none */
    uint8_t *dirty; /* [n_seq] table changed since the device was told */
} clf_kv_blocks;

clf_status clf_kv_blocks_init(clf_kv_blocks *b, int n_blocks, int n_seq, int n_tbl);
void clf_kv_blocks_free(clf_kv_blocks *b);

/* Blocks that writing logical blocks [first, last] of seq would take from
 * the free list: the unmapped ones and the shared ones. */
int clf_kv_blocks_need(const clf_kv_blocks *b, int seq, int first, int last);

/* Called for a shared block before it is written: the first `n` slots of
 * block `from` into block `to` (n may be 0: nothing kept). */
typedef clf_status (*clf_kv_copy_fn)(void *user, int from, int to, int n);

/* Makes logical blocks [first, last] of seq its own to write, keeping the
 * first `keep` slots of block `first` (the positions before the write):
 * CLF_ERR_CONTEXT, nothing changed, when the free list is short. */
clf_status clf_kv_blocks_write(clf_kv_blocks *b, int seq, int first, int last, int keep, clf_kv_copy_fn copy,
                               void *user);

/* Gives back seq's logical blocks from `first` on, or below `end`. */
void clf_kv_blocks_drop_from(clf_kv_blocks *b, int seq, int first);
void clf_kv_blocks_drop_below(clf_kv_blocks *b, int seq, int end);

/* dst holds src's first n logical blocks, shared (dst's own given back first). */
void clf_kv_blocks_share(clf_kv_blocks *b, int src, int dst, int n);

static inline int clf_kv_blocks_mapped(const clf_kv_blocks *b, int seq, int blk) {
    return blk >= 0 && blk < b->n_tbl && b->tbl[(int64_t)seq * b->n_tbl + blk] >= 0;
}

#endif

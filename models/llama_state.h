/* A sequence's KV cache out of a context and back into one (a slot saved
 * to a file and restored, api/seq_state.c): the blocks the sequence holds
 * in the global layers' pool and in the sliding-window layers' pool, read
 * from the device and written back into blocks the sequence takes anew.
 * The bytes go through the caller's reader and writer (a file, a buffer):
 * this layer knows the blocks, not the file. */
#ifndef CLF_LLAMA_STATE_H
#define CLF_LLAMA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"

/* What a sequence's KV bytes mean: a state is restored only into a context
 * of the same geometry (the model's layers and heads, the cache's element
 * type, the block size). Integers of the file's header. */
typedef struct clf_seq_geom {
    int32_t kv_type;          /* clf_type of the K/V elements */
    int32_t n_layer, n_layer_swa; /* the global and the sliding-window layers of the context */
    int32_t n_kv_head, head_dim;
    int32_t block;            /* tokens per block of both pools */
    int32_t window;           /* the sliding window (0: none) */
} clf_seq_geom;

/* The context's geometry. CLF_ERR_ARG over a split (a context with a next
 * stage: the later stages' caches are out of reach). */
clf_status clf_llama_seq_geom(const clf_llama_ctx *c, clf_seq_geom *g);

/* The caller's byte stream: CLF_OK when all n bytes went or came. */
typedef clf_status (*clf_state_write_fn)(void *user, const void *p, size_t n);
typedef clf_status (*clf_state_read_fn)(void *user, void *p, size_t n);

/* Writes sequence seq's KV state: for each pool (global, then sliding
 * window, those the context has) a count of blocks, then each block the
 * sequence holds as its logical index, its slots in use and their K and V
 * bytes (rows of the pool × slots × a slot's bytes). Waits for the device's
 * passes before (the reads block). *bytes: what was written. */
clf_status clf_llama_seq_save(clf_llama_ctx *c, int seq, clf_state_write_fn wr, void *user, size_t *bytes);

/* Reads what clf_llama_seq_save wrote for a sequence of n_tokens tokens
 * into sequence seq (emptied first): blocks taken from the pools, the bytes
 * written to the device, the sequence's length n_tokens. Every count and
 * index is checked before it is used (a hostile stream ends in
 * CLF_ERR_FORMAT, never past the pools); CLF_ERR_CONTEXT when the pools
 * lack free blocks. On any failure the sequence is left empty. */
clf_status clf_llama_seq_load(clf_llama_ctx *c, int seq, int n_tokens, clf_state_read_fn rd, void *user);

#endif

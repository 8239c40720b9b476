/* Attention with a KV cache: FlashAttention-style tiled prefill (online
 * softmax, never a tokens × tokens table), split-K decode (flash-decoding)
 * with a reduction kernel, GQA, and a naive reference kernel. */
#ifndef CLF_ATTENTION_H
#define CLF_ATTENTION_H

#include "ops.h"
#include "tensor.h"

/* Kernel shapes. The CPU shape gives few work-items large register tiles in
 * wide vectors (what PoCL vectorizes); the GPU shape uses work-groups with
 * local-memory tiles and one row per work-item. */
typedef enum clf_attn_variant {
    CLF_ATTN_AUTO = 0, /* from the device type */
    CLF_ATTN_CPU = 1,
    CLF_ATTN_GPU = 2,
} clf_attn_variant;

typedef struct clf_attn_scratch clf_attn_scratch;

/* Layout: [layer][kv_head][slot][head_dim], K and V in separate buffers,
 * F32 or F16 elements (vstore_half / vload_half). head_dim is a multiple of
 * 16 up to 256. Position p lives in slot p % n_ctx: a cache without a
 * window takes positions below n_ctx; with a sliding window (attention
 * sees the last `window` keys) it is a ring that takes any position, so
 * it need hold only the window plus a chunk: a chunk of n tokens fits
 * when n + window - 1 <= n_ctx, and a ring's n_ctx is a multiple of 32. */
typedef struct clf_kv_cache {
    clf_type type; /* CLF_F32 or CLF_F16 */
    int n_layer, n_kv_head, head_dim, n_ctx;
    int window; /* 0: causal over every position; > 0: sliding window */
    cl_mem k, v;
    size_t bytes; /* both buffers */
    /* Overrides, for tests and tuning: variant AUTO (what create sets)
     * takes the device's tuning (rt->tune.attn, $CLINFER_ATTN_VARIANT);
     * n_split 0 lets decode choose its splits from the cache length, the
     * compute units and the tuning's attn_split_*. */
    clf_attn_variant variant;
    int n_split;
    clf_attn_scratch *scratch; /* decode partials: allocated on first decode, reused */
} clf_kv_cache;

clf_status clf_kv_cache_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim,
                               int n_ctx, int window, clf_kv_cache *c);
void clf_kv_cache_free(clf_kv_cache *c);

/* Slots a cache with a sliding window needs for chunks of up to n_batch
 * tokens: the window and a chunk, rounded up to the ring's alignment; n_ctx
 * when that is not fewer (the positions then never wrap). */
int clf_kv_ring_slots(int window, int n_batch, int n_ctx);

/* Where Q/K/V rows live in an activation tensor: element column col0 in
 * rows `row_stride` floats apart (a fused QKV output has all three). */
typedef struct clf_rows {
    const clf_tensor *t;
    int col0, row_stride;
} clf_rows;

/* Writes n_tokens rows of K and V (n_kv_head × head_dim each) into the cache
 * of `layer` at positions pos0 .. pos0 + n_tokens - 1. */
clf_status clf_kv_write(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows k, clf_rows v, int n_tokens,
                        int pos0);

/* out [n_tokens × n_head × head_dim] = softmax(Q Kᵀ · scale + mask) V
 * for queries at positions pos0 .. pos0 + n_tokens - 1 against cache
 * positions 0 .. pos0 + n_tokens - 1 of `layer` (K/V already written); the
 * mask is causal, and with the cache's window a query at p sees keys from
 * p - window + 1 on. n_tokens == 1 takes the split-K decode path, > 1 the
 * tiled prefill. */
clf_status clf_attention(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                         int n_tokens, int pos0, float scale, clf_tensor *out);

/* One token at position pos: with rope, clf_rope of its Q and K heads
 * (unrotated in q and k), then clf_kv_write of its K and V and
 * clf_attention of its queries, the same result; the CPU decode kernel
 * rotates, writes the cache and, with one split, the output itself: one
 * launch (q and k are left unrotated then). out_q (or NULL): the output
 * row's int8 form for the Wo GEMV (matmul.h, CLF_XQ_FLOATS of n_head ×
 * head_dim; head_dim a multiple of 32), written with the output. */
clf_status clf_attention_decode(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                int n_head, int pos, float scale, const clf_rope_params *rope, clf_tensor *out,
                                const clf_tensor *out_q);

/* The same result through the naive kernels (scores materialised in a
 * [n_head × n_tokens × n_kv] buffer allocated here); for tests and bench. */
clf_status clf_attention_naive(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                               int n_tokens, int pos0, float scale, clf_tensor *out);

/* How clf_attention runs for this cache and device (for the bench's
 * byte counts): the resolved variant, the query rows that share one pass
 * over K/V in prefill, and the decode split of n_kv keys seen. */
typedef struct clf_attn_plan {
    clf_attn_variant variant;
    int prefill_rows;   /* rows of (token, group head) per K/V pass */
    int n_split, chunk; /* decode: splits of `chunk` keys */
} clf_attn_plan;

clf_attn_plan clf_attention_plan(const clf_runtime *rt, const clf_kv_cache *c, int n_kv);

#endif

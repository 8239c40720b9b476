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

/* A paged KV cache: K and V each [layer][kv_head][slot][head_dim] over a
 * pool of n_slots slots in blocks of `block` tokens, F32 or F16 elements
 * (vstore_half / vload_half), or Q8_0 / Q4_0 rows that attention reads
 * fused (cl/attention.cl KV_Q); head_dim a multiple of 16 up to 256. Each
 * sequence has a block table of n_tbl entries in `tbl` ([n_seq][n_tbl]
 * int32): position p lives in slot tbl[(p / block) % n_tbl] * block + p %
 * block, so a sequence holds positions below n_ctx = n_tbl * block and
 * takes blocks as it grows (kv_blocks.h hands them out).
 *
 * A cache created alone (clf_kv_cache_create: tests, the bench) is one
 * sequence with the identity table over ceil(n_ctx / 32) blocks of 32: a
 * cache without a window takes positions below n_ctx; with a sliding window
 * (attention sees the last `window` keys) and n_ctx a multiple of 32 it is
 * a ring that takes any position, so it need hold only the window plus a
 * chunk: a chunk of n tokens fits when n + window - 1 <= n_ctx.
 *
 * The functions below take a view of one sequence (clf_kv_cache_seq), which
 * shares the pool's buffers. */
typedef struct clf_kv_cache {
    clf_type type; /* CLF_F32, CLF_F16, or CLF_Q8_0 / CLF_Q4_0 (ggml's blocks of 32; head_dim a multiple of 32) */
    int n_layer, n_kv_head, head_dim;
    int n_ctx;   /* positions a sequence may hold */
    int n_slots; /* slots in the pool: blocks × block */
    int block;   /* tokens per block, a multiple of 32 */
    int window;  /* 0: causal over every position; > 0: sliding window */
    cl_mem k, v;
    cl_mem tbl;           /* block tables [n_seq][n_tbl] */
    int n_seq, n_tbl, seq; /* this view's sequence */
    size_t bytes;          /* K and V */
    /* Overrides, for tests and tuning: variant AUTO (what create sets)
     * takes the device's tuning (rt->tune.attn, $CLINFER_ATTN_VARIANT);
     * n_split 0 lets decode choose its splits from the cache length, the
     * compute units and the tuning's attn_split_*. */
    clf_attn_variant variant;
    int n_split;
    clf_attn_scratch *scratch; /* decode partials and rows: allocated on first decode, reused */
} clf_kv_cache;

/* The bytes of one cache row of head_dim elements of `type`. */
size_t clf_kv_row_bytes(clf_type type, int head_dim);

clf_status clf_kv_cache_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim,
                               int n_ctx, int window, clf_kv_cache *c);
/* A pool of n_blocks blocks of `block` tokens for n_seq sequences of up to
 * n_tbl blocks each, every table entry 0 until set. */
clf_status clf_kv_pool_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim, int n_blocks,
                              int block, int n_seq, int n_tbl, int window, clf_kv_cache *c);
void clf_kv_cache_free(clf_kv_cache *c);
/* Sequence seq's view of a pool (shares its buffers; not freed). */
clf_kv_cache clf_kv_cache_seq(const clf_kv_cache *pool, int seq);
/* Sequence seq's block table (n_tbl entries) onto the device. */
clf_status clf_kv_table_upload(clf_runtime *rt, const clf_kv_cache *pool, int seq, const int32_t *tbl);
/* Copies slots [0, n) of block `from` to block `to` in every layer and
 * head (a block shared by two sequences before one writes it). */
clf_status clf_kv_block_copy(clf_runtime *rt, const clf_kv_cache *pool, int from, int to, int n);

/* The most blocks of `block` tokens one sequence of a paged cache holds at
 * once: every position's below n_ctx; with a sliding window, the window
 * and a chunk of up to n_batch tokens, a block of slack for rewinds (a
 * server evaluates a prompt's last tokens again), and one more where the
 * span straddles blocks. */
int clf_kv_seq_blocks(int window, int n_batch, int n_ctx, int block);
#define CLF_KV_BLOCK 32 /* tokens per block unless the tuning says (attention.cl: a multiple of 32) */

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

/* Attention sinks (gpt-oss's attn_sinks): each *_ex below takes `sinks`,
 * an F32 tensor of n_head logits (or NULL: none, the plain function's
 * result bit for bit), head h's joining every softmax row of that head
 * in the denominator without a value, in the scores' units (after the
 * scale): out = Σ_j e^(s_j) v_j / (Σ_j e^(s_j) + e^(sinks[h])), the max
 * taken over the scores and the sink as llama.cpp's soft_max does. A
 * sliding window leaves the sink in: a query sees its window's keys and
 * its head's sink. */
clf_status clf_attention_ex(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head, int n_tokens,
                            int pos0, float scale, const clf_tensor *sinks, clf_tensor *out);

/* The decode rows of one step: n query tokens, row i the token of
 * sequence seq[i] at position pos[i] (rows of one sequence in the order of
 * their positions: a speculative step's verification). Set once a step
 * per cache (uploaded where it changed), used by every layer's
 * clf_attention_decode_rows. */
typedef struct clf_attn_rows {
    int n, split_max, cap;
    int distinct; /* every row a sequence of its own: each may write its key while the others attend */
    int *host; /* [cap][5]: n_kv, k0, chunk, n_split, table offset (cl/attention.cl ROW_INFO) */
    cl_mem info;
} clf_attn_rows;

clf_status clf_attn_rows_set(clf_runtime *rt, const clf_kv_cache *pool, clf_attn_rows *r, int n, const int *seq,
                             const int *pos);
void clf_attn_rows_free(clf_attn_rows *r);

/* Every row in one launch (two with the reduction, three on the GPU
 * shape, one more where rows share a sequence): with rope, the RoPE of each row's Q and K heads (unrotated in q
 * and k), then the write of its K and V into its sequence's cache and
 * attention of its queries, as clf_rope, clf_kv_write and clf_attention
 * would give row by row; k.t NULL: the keys are written already, q
 * rotated. q, k, v: n rows, one row stride; out: n rows of n_head ×
 * head_dim. out_q (or NULL): the output rows' int8 form for the Wo GEMV
 * (matmul.h, CLF_XQ_FLOATS of n_head × head_dim; head_dim a multiple of
 * 32), written with the output. */
clf_status clf_attention_decode_rows(clf_runtime *rt, const clf_kv_cache *pool, const clf_attn_rows *rows, int layer,
                                     clf_rows q, clf_rows k, clf_rows v, int n_head, float scale,
                                     const clf_rope_params *rope, clf_tensor *out, const clf_tensor *out_q);
/* ... with attention sinks (clf_attention_ex). */
clf_status clf_attention_decode_rows_ex(clf_runtime *rt, const clf_kv_cache *pool, const clf_attn_rows *rows,
                                        int layer, clf_rows q, clf_rows k, clf_rows v, int n_head, float scale,
                                        const clf_rope_params *rope, const clf_tensor *sinks, clf_tensor *out,
                                        const clf_tensor *out_q);

/* One token at position pos of one sequence's view: clf_attention_decode_rows
 * of one row. */
clf_status clf_attention_decode(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                int n_head, int pos, float scale, const clf_rope_params *rope, clf_tensor *out,
                                const clf_tensor *out_q);
clf_status clf_attention_decode_ex(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                   int n_head, int pos, float scale, const clf_rope_params *rope,
                                   const clf_tensor *sinks, clf_tensor *out, const clf_tensor *out_q);

/* The same result through the naive kernels (scores materialised in a
 * [n_head × n_tokens × n_kv] buffer allocated here); for tests and bench. */
clf_status clf_attention_naive(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                               int n_tokens, int pos0, float scale, clf_tensor *out);
clf_status clf_attention_naive_ex(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                                  int n_tokens, int pos0, float scale, const clf_tensor *sinks, clf_tensor *out);

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

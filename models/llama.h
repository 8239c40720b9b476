/* The transformer of every supported family (models/family.h: Llama 2/3,
 * SmolLM2, TinyLlama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Gemma 3, Phi-3, gpt-oss) on an OpenCL
 * device: one forward pass, parameterized by the family's differences.
 *
 * A clf_llama holds the weights (uploaded once, in their file types); a
 * clf_llama_ctx holds what one conversation needs (KV cache, scratch), so
 * several contexts can share a model. */
#ifndef CLF_LLAMA_H
#define CLF_LLAMA_H

#include "attention.h"
#include "family.h"
#include "gguf.h"
#include "kv_blocks.h"
#include "matmul.h"
#include "moe.h"
#include "ops.h"
#include "select.h"
#include "stage.h"

typedef struct clf_llama_hparams {
    char arch[32];
    const clf_family *fam;
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_vocab, n_ctx_train;
    float rope_base, rope_freq_scale, eps;
    float attn_scale; /* applied to Q·K: 1/sqrt(query_pre_attn_scalar) (llama_hparams.c) */
    float rope_base_swa; /* RoPE base of the sliding-window layers */
    float rope_freq_scale_swa; /* their position scale (1: none; the global one where the family says) */
    /* YaRN (rope.scaling.type "yarn": gpt-oss), applied to every layer by clf_rope_yarn */
    int yarn;                /* 1: rotate with YaRN (rope_freq_scale = 1 / yarn_factor) */
    float yarn_factor;       /* rope.scaling.factor */
    int yarn_n_ctx_orig;     /* rope.scaling.original_context_length, else context_length */
    float yarn_attn_factor;  /* rope.scaling.attn_factor, 1 where absent */
    int n_swa;        /* the sliding window of the family's local layers; 0: none */
    int fused_qkv;    /* stored as one attn_qkv (Phi-3) rather than attn_q, attn_k, attn_v */
    int fused_gate_up; /* stored as one ffn_up of 2 n_ff rows (Phi-3), no ffn_gate */
    int rope_freqs;   /* rope_freqs.weight: Llama 3.1 frequency factors */
    int tied;         /* output projection reuses token_embd */
    int pooling;      /* <arch>.pooling_type in llama.cpp's values (0 none, 1 mean, 2 cls, 3 last, ...); -1 absent */
    /* a mixture of experts in every layer's FFN (0 experts: the dense ffn_gate/up/down) */
    int n_expert, n_expert_used; /* <arch>.expert_count, expert_used_count */
    int n_ff_exp;                /* an expert's hidden width: expert_feed_forward_length, else n_ff
                                    (llama: Mixtral) or n_ff / n_expert_used (qwen3moe), as llama.cpp */
    int moe_norm_w;              /* the chosen experts' weights renormalised to sum 1 (family) */
    float expert_w_scale;        /* <arch>.expert_weights_scale where the family reads it (family.h), 1 where
                                    absent, 0 or not read */
} clf_llama_hparams;

/* A fused projection (Q|K|V, gate|up): its tensors' rows concatenated, one
 * output row. Consecutive tensors of one type share a weight, so a group in
 * one type is one product; a file that mixes types inside the group (a
 * Q4_K_M stores some attn_v in Q6_K beside Q4_K attn_q and attn_k) gets a
 * weight per run of equal types, each writing its own columns of the row. */
typedef struct clf_llama_proj {
    clf_weight part[3];
    int64_t col0[3]; /* first output column of each part */
    int n;           /* parts */
} clf_llama_proj;

typedef struct clf_llama_layer {
    clf_tensor attn_norm, ffn_norm;           /* F32 [n_embd] */
    clf_tensor post_attn_norm, post_ffn_norm; /* F32 [n_embd], post_norms families */
    clf_tensor q_norm, k_norm;                /* F32 [head_dim], qk_norm families */
    clf_tensor bqkv;                          /* F32 [q_dim + 2 kv_dim], qkv_bias families */
    clf_llama_proj wqkv;                      /* fused [q_dim + 2 kv_dim × n_embd] */
    clf_weight wo;                            /* [n_embd × q_dim] */
    clf_llama_proj wgu;                       /* fused gate|up [2 n_ff × n_embd] */
    clf_weight wdown;                         /* [n_embd × n_ff] */
    /* hp.n_expert > 0: the FFN is a mixture of experts (wgu, wdown unused) */
    clf_weight router;                        /* ffn_gate_inp [n_expert × n_embd] */
    clf_moe_expert *experts;                  /* [n_expert]: expert e's rows of ffn_{gate,up,down}_exps */
    clf_weight gu_stack, down_stack;          /* the experts stacked where the device takes them so (mem NULL: apart);
                                                 experts[e]'s weights are then parts of these (clf_weight_part) */
    /* gpt-oss (family.h attn_sinks, attn_out_bias, moe_biases) */
    clf_tensor sinks;                         /* F32 [n_head] attn_sinks */
    clf_tensor bo;                            /* F32 [n_embd] attn_output.bias */
    clf_tensor router_b;                      /* F32 [n_expert] ffn_gate_inp.bias */
    clf_tensor exp_b_gu;                      /* F32 [n_expert × 2 n_ff_exp]: row e expert e's gate | up biases */
    clf_tensor exp_b_down;                    /* F32 [n_expert × n_embd]: row e expert e's down bias */
} clf_llama_layer;

typedef struct clf_llama {
    clf_runtime *rt;
    clf_llama_hparams hp;
    clf_tensor tok_embd; /* [n_vocab × n_embd], file type, for the row lookup */
    clf_tensor out_norm;
    clf_tensor rope_freqs; /* F32 [n_rot / 2] when hp.rope_freqs */
    clf_weight output;     /* [n_vocab × n_embd] */
    clf_llama_layer *layers; /* [hp.n_layer], those of [l0, l1) loaded */
    size_t device_bytes; /* weights on the device */
    struct clf_wcache *wcache; /* the packed-weights cache entry the weights use in place; NULL: in memory */
    int l0, l1;          /* the layers this model holds: all but on a stage of a split (stage.h) */
    const clf_stage_ops *next_ops; /* a stage before the last: how its contexts reach the next */
    void *next;
} clf_llama;

/* Reads hyperparameters and checks every tensor's presence, type and shape. */
clf_status clf_llama_hparams_read(const clf_gguf *g, clf_llama_hparams *hp);
/* Device bytes the weights will take (checked against the device up front). */
size_t clf_llama_weight_bytes(const clf_gguf *g);

/* The runtime's abort hook may stop it between tensors (CLF_ERR_INTERRUPTED). */
clf_status clf_llama_load(clf_runtime *rt, const clf_gguf *g, clf_llama **out);
void clf_llama_free(clf_llama *m);

/* One sequence's cache: sequences share the weights and the scratch. */
typedef struct clf_llama_seq {
    int n_past; /* tokens in the cache */
} clf_llama_seq;

typedef struct clf_llama_ctx {
    const clf_llama *m;
    /* Paged KV caches (attention.h) shared by every sequence, a block
     * table each: */
    clf_kv_cache kv;          /* the global layers: every position */
    clf_kv_cache kv_swa;      /* the sliding-window layers: the window and a chunk */
    clf_kv_blocks blk, blk_swa; /* which sequence holds which of their blocks */
    clf_attn_rows rows, rows_swa; /* a pass's decode rows against each */
    int n_ctx, n_batch; /* n_ctx per sequence; n_batch rows per forward pass over all of them */
    int n_past;         /* sequence 0's tokens, the one the single-sequence calls use */
    int n_seq;
    clf_llama_seq *seqs; /* sequences 1 .. n_seq - 1 */
    clf_tensor x, xn, qkv, att, gu, ff; /* scratch for n_batch tokens */
    clf_tensor xq_e, xq_f, xq_a; /* decode rows of xn, ff and att quantized for the int8 GEMVs (unallocated: none do) */
    clf_tensor logits;                  /* n_seq rows, n_batch once all_logits is asked */
    clf_moe_scratch moe;                /* n_batch rows of routing and expert scratch (hp.n_expert > 0) */
    cl_mem ids;
    int32_t *host_ids; /* a pass's tokens, gathered from its entries */
    int n_dec;              /* decode rows the int8 forms hold: min(n_seq, n_batch), grown by a verification */
    int *row_seq, *row_pos; /* a pass's decode rows: sequence and position [n_batch] */
    int32_t *tbl_up;        /* a block table on its way to the device [n_tbl] */
    size_t device_bytes; /* KV cache + scratch */
    clf_stage_link *next; /* a stage before the last: the next stage's context */
    float *hop_x[2];      /* [n_batch × n_embd]: a pass's activations for the next stage, two in flight */
    float *hop_logits;    /* the logits rows a pass over the link returns */
    int n_micro;          /* over a link, clf_llama_eval's chunks: n_batch / 4 from 128 rows on, so stages overlap */
    clf_topk topk;        /* clf_llama_eval_top's device scratch (on first use) */
    float *top_logits;    /* over a split, its host row [n_vocab] (on first use) */
    struct clf_lora_ctx *lora; /* LoRA adapters chosen per sequence (models/lora.h); NULL: none ever set */
} clf_llama_ctx;

/* n_ctx 0 = the model's training context (capped at 4096); n_batch: the
 * largest chunk processed at once. */
clf_status clf_llama_ctx_create(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type,
                                clf_llama_ctx **out);
/* The same with n_seq independent sequences (each of up to n_ctx
 * positions, blocks of the shared paged caches taken as it grows) that
 * clf_llama_eval_seqs advances together. */
clf_status clf_llama_ctx_create_seqs(const clf_llama *m, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                     clf_llama_ctx **out);
/* The same with the global layers' pool of kv_memory bytes (0: every
 * sequence's whole n_ctx; include/clinfer.h clinfer_kv_pool); the stages
 * after this one of a split take their whole. */
clf_status clf_llama_ctx_create_pool(const clf_llama *m, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                     size_t kv_memory, clf_llama_ctx **out);
void clf_llama_ctx_free(clf_llama_ctx *c);

/* Appends n tokens at position c->n_past (processing in chunks of n_batch)
 * and writes logits: the last token's [n_vocab] to `logits`, or with
 * all_logits every token's [n × n_vocab]. CLF_ERR_CONTEXT when the tokens do
 * not fit; nothing is changed then. CLF_ERR_INTERRUPTED when the runtime's
 * abort hook (clf_runtime_set_abort) stops it before a chunk: the chunks
 * done stay in the cache, counted in n_past (rewind to drop them). Over
 * a split (stage.h) the chunks pipeline: chunk k+1 runs on this stage
 * while chunk k runs on the next; on a failure the chunks that did not
 * reach every stage are forgotten. logits NULL: nothing is read back (a
 * token only to extend the cache). */
clf_status clf_llama_eval(clf_llama_ctx *c, const int32_t *tokens, int n, int all_logits, float *logits);

/* clf_llama_eval for the last token's k best logits only (1 <= k <=
 * CLF_TOPK_MAX, host/compute/select.h): vals/ids best first (the larger
 * logit, then the smaller id; NaN as -inf), *nonfinite 1 when any of its
 * logits is NaN or infinite. On one device the choice is made there and k
 * values cross instead of n_vocab (what clf_sampler_sample_top needs);
 * over a split the logits come back and are chosen on the host. */
clf_status clf_llama_eval_top(clf_llama_ctx *c, const int32_t *tokens, int n, int k, float *vals, int32_t *ids,
                              int *nonfinite);
/* The mask of clf_llama_eval_top_masked: called once the forward pass is
 * queued, while the device runs it; returns the row's mask words
 * ((n_vocab + 31) / 32, bit i%32 of word i/32: 1 where token i may be
 * chosen; host/compute/select.h) or NULL for none. The words must stay
 * valid until clf_llama_eval_top_masked returns. It may let other
 * contexts of the model use the runtime meanwhile (the API's callback
 * gives the model's turn away while it works): the pass is queued, and
 * nothing of this context is touched by them. */
typedef const uint32_t *(*clf_llama_mask_fn)(void *user);
/* clf_llama_eval_top with the row masked before the choice: mask_fn(user)
 * gives the words (mask_fn NULL: none, clf_llama_eval_top itself). *masked
 * 1 when the k best are the masked row's; 0 when they are the plain row's:
 * no words, or over a split (the row is chosen on the host; mask_fn is not
 * called). */
clf_status clf_llama_eval_top_masked(clf_llama_ctx *c, const int32_t *tokens, int n, int k, clf_llama_mask_fn mask_fn,
                                     void *user, float *vals, int32_t *ids, int *nonfinite, int *masked);
/* The whole row [n_vocab] clf_llama_eval_top chose from, read back after it
 * (nothing evaluated between): a sampler under a grammar whose k best are
 * too few once masked falls back to every logit. */
clf_status clf_llama_top_row(clf_llama_ctx *c, float *logits);

/* One entry of a batch: n tokens appended to sequence `seq` at its length;
 * with `logits` set, its last token's [n_vocab] is written there, or with
 * every_row each token's [n × n_vocab], the tokens computed as decode
 * steps (clf_llama_eval_rows: a speculative step's verification; not over
 * a split). */
typedef struct clf_llama_seq_batch {
    int seq;
    const int32_t *tokens;
    int n;
    float *logits;
    int every_row;
} clf_llama_seq_batch;

/* Evaluates n entries (one per sequence at most) in forward passes of up to
 * n_batch rows: every product runs once over the rows of all the entries,
 * each sequence's RoPE, cache write and attention over its own rows. Long
 * entries are split across passes. CLF_ERR_CONTEXT/CLF_ERR_ARG before
 * anything runs when an entry does not fit or is malformed;
 * CLF_ERR_INTERRUPTED when the runtime's abort hook stops it before a pass
 * (the first included); on a failure after a pass the sequences' lengths
 * count the passes that completed. */
clf_status clf_llama_eval_seqs(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n);

/* clf_llama_eval with every token's logits, each row computed as a decode
 * step computes a token alone (the decode kernels, a row each, in passes of
 * up to n_batch rows): the logits are those of n evaluations one token at
 * a time (speculative decoding's verification, whose greedy text must be
 * plain decoding's): bit for bit where the weights are quantized (the int8
 * GEMV's and GEMM's rows are one arithmetic, clf_matmul_rowwise), to
 * rounding with F32/F16 weights. Over a split the rows are a prompt's
 * (clf_llama_eval). last_only: the last row's logits alone, into logits'
 * first row (the head skipped for the others: a draft model catching up
 * on a verified step, whose rows must be the decode steps' but only the
 * last one's logits are read). */
clf_status clf_llama_eval_rows(clf_llama_ctx *c, const int32_t *tokens, int n, int last_only, float *logits);
/* Tokens in sequence `seq`'s cache, and forgetting them from pos on. */
int clf_llama_seq_len(const clf_llama_ctx *c, int seq);
void clf_llama_seq_rewind(clf_llama_ctx *c, int seq, int pos);
/* Sequence dst becomes the first n tokens of sequence src (0 <= n <=
 * len(src)): their K/V rows copied on the device (enqueued, in order with
 * the passes), dst's length n; src is unchanged; src == dst only shortens
 * it. For shared prompt prefixes. A sliding-window layer's ring holds the
 * last positions only, so its whole ring is copied: that serves dst from n
 * on while the ring still holds the window before n, which is the rule of
 * clf_llama_seq_rewind (always when src's length is within the ring's
 * slots or n is within slots - window + 1 of it); where it does not,
 * CLF_ERR_ARG and nothing changes (rewind would clear instead). Over a
 * split (a context with a link to a next stage) CLF_ERR_ARG: the later
 * stages' caches are reached through the stage ops, which have no copy. */
clf_status clf_llama_seq_copy(clf_llama_ctx *c, int src, int dst, int n);

/* How clf_llama_embed pools the rows (llama.cpp's values). */
typedef enum clf_pooling { CLF_POOL_NONE = 0, CLF_POOL_MEAN = 1, CLF_POOL_CLS = 2, CLF_POOL_LAST = 3 } clf_pooling;

/* The embedding of n tokens (n <= n_ctx) evaluated from an empty sequence
 * `seq` (emptied before and after): every token's hidden state after the
 * output norm (the head's input), pooled into out [n_embd] (CLF_POOL_NONE:
 * out [n × n_embd], each row), not normalised. CLF_ERR_ARG over a split;
 * CLF_ERR_INTERRUPTED when the abort hook stops it between chunks. */
clf_status clf_llama_embed(clf_llama_ctx *c, int seq, const int32_t *tokens, int n, clf_pooling pooling, float *out);

/* Forgets cached tokens from position `pos` on (pos = 0 clears). A
 * sliding-window layer's ring keeps the window and n_batch positions more:
 * going back further than n_batch tokens (but not to 0) forgets everything
 * (n_past becomes 0). */
void clf_llama_rewind(clf_llama_ctx *c, int pos);

#endif

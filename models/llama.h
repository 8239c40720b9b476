/* The Llama-family transformer (Llama 2/3, SmolLM2, TinyLlama, Mistral, and
 * Qwen2 with Q/K/V biases and NeoX RoPE) on an OpenCL device.
 *
 * A clf_llama holds the weights (uploaded once, in their file types); a
 * clf_llama_ctx holds what one conversation needs (KV cache, scratch), so
 * several contexts can share a model. */
#ifndef CLF_LLAMA_H
#define CLF_LLAMA_H

#include "attention.h"
#include "gguf.h"
#include "matmul.h"
#include "ops.h"

typedef struct clf_llama_hparams {
    char arch[32];
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_vocab, n_ctx_train;
    float rope_base, eps;
    clf_rope_mode rope_mode;
    int qkv_bias; /* Qwen2 */
    int tied;     /* output projection reuses token_embd */
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
    clf_tensor attn_norm, ffn_norm; /* F32 [n_embd] */
    clf_tensor bqkv;                /* F32 [n_embd + 2 kv_dim], Qwen2 only */
    clf_llama_proj wqkv;            /* fused [n_embd + 2 kv_dim × n_embd] */
    clf_weight wo;                  /* [n_embd × n_embd] */
    clf_llama_proj wgu;             /* fused gate|up [2 n_ff × n_embd] */
    clf_weight wdown;               /* [n_embd × n_ff] */
} clf_llama_layer;

typedef struct clf_llama {
    clf_runtime *rt;
    clf_llama_hparams hp;
    clf_tensor tok_embd; /* [n_vocab × n_embd], file type, for the row lookup */
    clf_tensor out_norm;
    clf_weight output; /* [n_vocab × n_embd] */
    clf_llama_layer *layers;
    size_t device_bytes; /* weights on the device */
} clf_llama;

/* Reads hyperparameters and checks every tensor's presence, type and shape. */
clf_status clf_llama_hparams_read(const clf_gguf *g, clf_llama_hparams *hp);
/* Device bytes the weights will take (checked against the device up front). */
size_t clf_llama_weight_bytes(const clf_gguf *g);

clf_status clf_llama_load(clf_runtime *rt, const clf_gguf *g, clf_llama **out);
void clf_llama_free(clf_llama *m);

typedef struct clf_llama_ctx {
    const clf_llama *m;
    clf_kv_cache kv;
    int n_ctx, n_batch;
    int n_past; /* tokens in the cache */
    clf_tensor x, xn, qkv, att, gu, ff; /* scratch for n_batch tokens */
    clf_tensor logits;                  /* one row, n_batch once all_logits is asked */
    cl_mem ids;
    size_t device_bytes; /* KV cache + scratch */
} clf_llama_ctx;

/* n_ctx 0 = the model's training context (capped at 4096); n_batch: the
 * largest chunk processed at once. */
clf_status clf_llama_ctx_create(const clf_llama *m, int n_ctx, int n_batch, clf_type kv_type,
                                clf_llama_ctx **out);
void clf_llama_ctx_free(clf_llama_ctx *c);

/* Appends n tokens at position c->n_past (processing in chunks of n_batch)
 * and writes logits: the last token's [n_vocab] to `logits`, or with
 * all_logits every token's [n × n_vocab]. CLF_ERR_CONTEXT when the tokens do
 * not fit; nothing is changed then. */
clf_status clf_llama_eval(clf_llama_ctx *c, const int32_t *tokens, int n, int all_logits, float *logits);

/* Forgets cached tokens from position `pos` on (pos = 0 clears). */
void clf_llama_rewind(clf_llama_ctx *c, int pos);

#endif

/* Plain scalar C reference of the forward pass of every supported family
 * (llama2.c style, double accumulation), straight from a GGUF's dequantized
 * weights. Independent of the device code and of models/: it knows the
 * families itself and shares only the GGUF reader and host dequantizers. */
#ifndef CLF_REF_LLAMA_H
#define CLF_REF_LLAMA_H

#include <stdint.h>

#include "gguf_write.h"

/* logits [n × n_vocab] for tokens[0..n) at positions 0..n-1. 0 on success. */
int ref_llama_forward(const clf_gguf *g, const int32_t *tokens, int n, double *logits);

/* Writes a random GGUF with weights of `type` (norms F32), a vocabulary of
 * n_vocab made-up tokens, and each family's tensors and keys: arch "llama"
 * (or "mistral"), "qwen2" (Q/K/V biases), "qwen3" (QK-norm), "gemma3"
 * (QK-norm, post-norms, sliding window, rope base 1e6), "phi3" (fused
 * attn_qkv and gate|up), "qwen3moe" (QK-norm, experts); n_expert > 0 gives
 * a llama file experts (Mixtral). The reference routes as llama.cpp: softmax
 * over the experts, the best n_expert_used (ties: the smaller id), their
 * probabilities renormalised. 0 on success. */
typedef struct tiny_model {
    const char *arch;
    int n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    clf_type type;
    int tied;
    int embd_q8_0;    /* token_embd in Q8_0, as llama.cpp's Q4 files have it */
    int n_embd;       /* 0: head_dim * n_head; else key_length = head_dim is written */
    int n_rot;        /* rope.dimension_count; 0: head_dim */
    int rope_freqs;   /* a rope_freqs.weight (Llama 3.1 frequency factors from 1 to 8) */
    float rope_scale; /* > 0: linear RoPE scaling by this factor */
    int window;       /* gemma3's and gpt-oss's sliding window */
    clf_type mix;     /* nonzero: attn_v, ffn_up, ffn_down and output in this type (a Q4_K_M keeps some in Q6_K) */
    int n_expert, n_expert_used; /* > 0: a mixture of experts in every layer (qwen3moe, gpt-oss; llama: Mixtral) */
    int n_ff_exp;     /* an expert's width (qwen3moe's and gpt-oss's expert_feed_forward_length; llama's experts
                         are n_ff wide); gpt-oss (arch "gpt-oss") also gets YaRN, sinks and every bias */
} tiny_model;
int tiny_model_write(const tiny_model *tm, uint64_t seed, const char *path);

#endif

/* Plain scalar C reference of the Llama forward pass (llama2.c style, double
 * accumulation), straight from a GGUF's dequantized weights. Independent of
 * the device code: it shares only the GGUF reader and host dequantizers. */
#ifndef CLF_REF_LLAMA_H
#define CLF_REF_LLAMA_H

#include <stdint.h>

#include "gguf.h"

/* logits [n × n_vocab] for tokens[0..n) at positions 0..n-1. 0 on success. */
int ref_llama_forward(const clf_gguf *g, const int32_t *tokens, int n, double *logits);

/* Writes a random Llama GGUF with weights of `type` (norms F32): n_embd =
 * head_dim * n_head, a vocabulary of n_vocab made-up tokens. arch "llama" or
 * "qwen2" (Q/K/V biases, NeoX RoPE). 0 on success. */
typedef struct tiny_model {
    const char *arch;
    int n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    clf_type type;
    int tied;
    int embd_q8_0; /* token_embd in Q8_0, as llama.cpp's Q4 files have it */
    clf_type mix;  /* nonzero: attn_v, ffn_up, ffn_down and output in this type (a Q4_K_M keeps some in Q6_K) */
} tiny_model;
int tiny_model_write(const tiny_model *tm, uint64_t seed, const char *path);

#endif

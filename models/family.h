/* The model families clinfer runs, each as its differences from Llama:
 * one forward pass (models/llama_forward.c), the hyperparameter reader and the
 * cost estimates (models/estimate.c) read these instead of naming
 * architectures. How a file stores its projections (Q|K|V as one attn_qkv,
 * gate|up as one ffn_up) is read from its tensors, whatever the family. */
#ifndef CLF_FAMILY_H
#define CLF_FAMILY_H

#include "gguf.h"
#include "ops.h"

typedef struct clf_family {
    const char *arch;    /* general.architecture */
    clf_rope_mode rope;  /* Llama GGUF pairs or NeoX halves */
    clf_glu_act act;     /* SwiGLU or GeGLU */
    int qkv_bias;        /* attn_{q,k,v}.bias (Qwen2) */
    int qk_norm;         /* per-head RMSNorm of Q and K before RoPE: attn_{q,k}_norm (Qwen3, Gemma 3) */
    int post_norms;      /* attention and MLP outputs RMS-normed before their residual adds:
                            post_attention_norm, post_ffw_norm (Gemma 3) */
    int embd_scale;      /* embeddings times sqrt(n_embd) (Gemma) */
    int swa_period;      /* sliding-window attention on every layer but each swa_period-th
                            (Gemma 3: 6, layer l global when (l + 1) % 6 == 0); 0: none */
    float swa_rope_base; /* RoPE base of the sliding-window layers (global ones: the file's), unless
                            the file has rope.freq_base_swa; 0: the file's rope.freq_base (gpt-oss) */
    int q_scale_embd_n_layer; /* the block_count of the size whose Q·K scale is 1/sqrt(n_embd / n_head),
                                 not 1/sqrt(head_dim), unless the file has attention.scale (Gemma 3 27B:
                                 62; llama_hparams.c says why a layer count); 0: none */
    int moe;             /* a mixture of experts in every layer (qwen3moe) */
    int moe_optional;    /* experts where the file has <arch>.expert_count > 0 (llama: Mixtral), as
                            llama.cpp reads it; another family's file with experts is refused */
    int moe_raw_weights; /* the chosen experts' softmax probabilities used as they are; 0: renormalised
                            to sum 1 over the chosen (llama.cpp's norm_w, true for llama and qwen3moe) */
    int moe_scale_key;   /* the chosen weights times <arch>.expert_weights_scale (DeepSeek-style families);
                            0: the key is ignored, as llama.cpp does for llama and qwen3moe */
    int moe_softmax_weight; /* routing on the raw router logits: top-k of them, then a softmax over the
                               chosen k (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT: gpt-oss);
                               0: softmax over all experts, then top-k */
    int moe_biases;      /* biases on the router (ffn_gate_inp.bias [n_expert]) and on every expert's
                            products (ffn_{gate,up,down}_exps.bias [n_ff_exp | n_embd × n_expert]) (gpt-oss) */
    int attn_sinks;      /* a learned logit per head in the attention softmax: attn_sinks [n_head] (gpt-oss) */
    int attn_out_bias;   /* attn_output.bias [n_embd] (gpt-oss) */
    int ffn_norm_post_attn; /* the FFN's norm is stored as post_attention_norm (gpt-oss), not ffn_norm */
    int swa_rope_scaled; /* the sliding-window layers scale positions as the global ones (YaRN, linear)
                            (gpt-oss); 0: unscaled (Gemma 3) */
} clf_family;

/* The family named `arch`, or NULL. */
const clf_family *clf_family_find(const char *arch);

/* The family of the file's general.architecture; CLF_ERR_FORMAT naming it
 * and listing the supported ones when clinfer has none. */
clf_status clf_family_of(const clf_gguf *g, const clf_family **f);

/* Whether layer l attends through a sliding window. */
int clf_family_layer_swa(const clf_family *f, int l);

#endif

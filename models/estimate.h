/* What a model costs: parameters, FLOPs, bytes moved and memory, for
 * inference and for training, from hyperparameters alone (pure functions of
 * a clf_model_shape), and a roofline verdict against a device's peaks.
 *
 * Conventions (the `info` command prints them beside the numbers):
 *   q_dim = n_head * head_dim, kv_dim = n_head_kv * head_dim
 *   P_mm  = weights a token multiplies = n_layer * (attention + MLP matrices)
 *           + n_vocab * n_embd (the output projection, tied or not); with
 *           experts the MLP's are the router and the chosen experts'
 *   FLOPs per token attending to c positions = 2 * P_mm + 4 * q_dim * A(c)
 *     (a multiply-add is 2 FLOPs; QK^T and AV each 2 * head_dim * c per head;
 *     norms, RoPE, softmax and SwiGLU are O(n_embd) and left out), where
 *     A(c) = keys attended over the layers = n_layer * c, or with a sliding
 *     window W on n_swa_layers of them (n_layer - n_swa_layers) * c +
 *     n_swa_layers * min(c, W)
 *   prefill of B tokens = 2 * P_layers * B + 2 * n_vocab * n_embd (logits of
 *     the last token only) + 4 * q_dim * sum_{t=1..B} A(t) (causal; without
 *     a window n_layer * B(B+1)/2) */
#ifndef CLF_ESTIMATE_H
#define CLF_ESTIMATE_H

#include <stdint.h>

#include "gguf.h"
#include "quant.h"

typedef struct clf_model_shape {
    char arch[32];
    int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
    int64_t n_ctx_train; /* 0 when the file does not say */
    int tied;            /* the output projection reuses token_embd */
    int qkv_bias;        /* Q/K/V biases (Qwen2) */
    clf_type type_embd, type_out, type_attn, type_ffn, type_norm;
    /* the family's differences that change the counts (models/family.h) */
    int qk_norm, post_norms;             /* norms per layer: 2 + 2 head-wide, + 2 more */
    int64_t n_swa, n_swa_layers;         /* sliding window and the layers using it; 0: none */
    int64_t n_rope_freqs;                /* rope_freqs.weight elements (F32, "other"); 0: none */
    /* a mixture of experts (0 experts: dense): each layer's MLP is a router [n_expert × n_embd] (F32
     * in every file seen) and n_expert experts of gate, up, down [n_ff_exp × n_embd] in type_ffn, of
     * which a token multiplies n_expert_used; the counts below take a token's chosen experts as the
     * matrices it multiplies and reads, a prefill of B tokens min(n_expert, B · n_expert_used) */
    int64_t n_expert, n_expert_used, n_ff_exp;
    /* gpt-oss (family.h): attention sinks [n_head] and attn_output.bias [n_embd] a layer; the router's
     * bias [n_expert] and each expert's biases [2 n_ff_exp + n_embd] (a token reads its chosen ones'),
     * all F32 */
    int attn_sinks, attn_out_bias, moe_biases;
} clf_model_shape;

/* Hyperparameters from `<arch>.*` keys, vocabulary size and weight types
 * from the tensors, the family's differences from its description (Llama's
 * for an architecture clinfer does not run); CLF_ERR_FORMAT naming what is
 * missing or inconsistent. */
clf_status clf_model_shape_from_gguf(const clf_gguf *g, clf_model_shape *s);

typedef enum clf_group {
    CLF_GROUP_EMBD, CLF_GROUP_ATTN, CLF_GROUP_MLP, CLF_GROUP_NORM, CLF_GROUP_OUTPUT, CLF_GROUP_OTHER,
    CLF_GROUP_COUNT,
} clf_group;

const char *clf_group_name(clf_group g);
/* The group of a GGUF tensor name ("blk.3.attn_k.weight" -> attention). */
clf_group clf_group_of_tensor(const char *name);

typedef struct clf_params {
    int64_t count[CLF_GROUP_COUNT];
    double bytes[CLF_GROUP_COUNT]; /* in the shape's weight types */
    int64_t total, matmul;         /* matmul: P_mm above */
    double total_bytes;
} clf_params;

clf_params clf_estimate_params(const clf_model_shape *s);
/* Weight bytes clinfer allocates on a device: the weights as stored, and a
 * tied embedding twice (rows for the lookup, the matrix for the output
 * projection). */
double clf_device_weight_bytes(const clf_model_shape *s);
/* Bytes per element of a type (Q4_1: 20/32 = 0.625). */
double clf_type_bytes_per_elem(clf_type t);

double clf_flops_token(const clf_model_shape *s, int64_t ctx);
double clf_flops_prefill(const clf_model_shape *s, int64_t batch);

/* K and V of one token in every layer, with elements of elem_bytes (4 or 2). */
double clf_kv_bytes_per_token(const clf_model_shape *s, int elem_bytes);
/* The KV cache of a context of ctx positions taken in chunks of batch, in
 * blocks of CLF_KV_BLOCK: the global layers hold every position, the
 * sliding-window layers the window and a chunk (clf_kv_seq_blocks). */
double clf_kv_cache_bytes(const clf_model_shape *s, int64_t ctx, int64_t batch, int elem_bytes);
/* Minimum bytes moved: a decode step at context ctx reads every weight once
 * (one embedding row) and the K and V it attends (A(ctx) positions' worth),
 * writes one token's K and V; a
 * prefill of B tokens reads the weights once and writes and reads the B
 * tokens' K and V once. */
double clf_bytes_token(const clf_model_shape *s, int64_t ctx, int kv_elem_bytes);
double clf_bytes_prefill(const clf_model_shape *s, int64_t batch, int kv_elem_bytes);
/* F32 activations for a batch of B tokens: x, normed x, Q|K|V, attention
 * output, gate|up, SwiGLU output per token, one row of logits, and a decode
 * row's int8 forms (clf_xq_bytes). */
double clf_scratch_bytes(const clf_model_shape *s, int64_t batch);
/* A decode row's activations quantized once for the int8 GEMVs (normed x,
 * the MLP's hidden row, the attention output): allocated where the
 * device's GEMVs take int8 x, counted always (a few KiB). */
double clf_xq_bytes(const clf_model_shape *s);

/* Training memory per parameter with Adam (ZeRO paper, Rajbhandari et al.
 * 2020): full F32 = 4 weights + 4 gradients + 8 moments = 16 bytes; mixed
 * precision = 2 fp16 weights + 2 fp16 gradients + 4 fp32 master + 8 fp32
 * moments = 16 bytes. */
typedef struct clf_train_mem {
    double weights, grads, master, moments, total;
} clf_train_mem;
clf_train_mem clf_train_mem_f32(int64_t params);
clf_train_mem clf_train_mem_mixed(int64_t params);
/* Activations kept for the backward pass, fp16, no recomputation
 * (Korthikanti et al. 2022): n_layer * s * b * h * (34 + 5 * a * s / h) bytes
 * for sequence s, micro-batch b, hidden h, heads a; with flash attention
 * (no s^2 score matrix stored) the 5as/h term drops. */
double clf_train_activation_bytes(const clf_model_shape *s, int64_t seq, int64_t batch, int flash);

typedef struct clf_roof {
    double gflops, gbs; /* peak FP32 GFLOP/s and memory GB/s */
} clf_roof;

typedef struct clf_bound {
    double intensity;     /* FLOPs per byte */
    double t_compute_s;   /* flops / peak */
    double t_memory_s;    /* bytes / bandwidth */
    double tokens_per_s;  /* ceiling: tokens / max(t_compute, t_memory) */
    int memory_bound;
} clf_bound;

/* The roofline for `tokens` tokens costing flops and bytes. */
clf_bound clf_roofline(double flops, double bytes, double tokens, clf_roof roof);

/* ---- money: compute turned into time and dollars -------------------------------
 * A machine rented at usd_per_hour costs usd_per_hour / 3600 a second, so a
 * million tokens at r tokens/s cost usd_per_hour * 1e6 / (3600 * r). */
double clf_usd_per_mtok(double usd_per_hour, double tokens_per_s);

/* Weights a forward pass reads (every matrix, norm and bias, the output
 * projection, one embedding row): what a decode step reads once however
 * many sequences it carries. */
double clf_weight_bytes_read(const clf_model_shape *s);

/* Training on `tokens` tokens: 6 * params * tokens FLOPs (a forward pass 2
 * per parameter and token, the backward pass 4; Kaplan et al. 2020), at a
 * fraction `util` of the FMA roof. Chinchilla's compute-optimal count
 * (Hoffmann et al. 2022) is CLF_CHINCHILLA_TOKENS_PER_PARAM * params. */
#define CLF_CHINCHILLA_TOKENS_PER_PARAM 20.0
typedef struct clf_train_cost {
    double params, tokens, flops, seconds, usd;
} clf_train_cost;
clf_train_cost clf_estimate_train_cost(double params, double tokens, double gflops, double util, double usd_per_hour);

/* Serving `tokens` generated tokens, `parallel` sequences a decode step at
 * a short context (c = 1): a step computes parallel * clf_flops_token(s, 1)
 * FLOPs at `util` of the FMA roof and reads the weights once plus each
 * sequence's K and V (clf_bytes_token's other terms) at the copy roof as
 * measured (no utilisation: that roof is itself achieved). A step takes the
 * longer of the two; memory_bound says which. */
typedef struct clf_serve_cost {
    double tokens;
    int parallel;
    double flops_token, bytes_step;    /* a token's FLOPs; a step's bytes */
    double t_compute_s, t_memory_s;    /* a step's */
    int memory_bound;
    double seconds, usd, usd_per_mtok; /* all `tokens`; a million */
} clf_serve_cost;
clf_serve_cost clf_estimate_serve_cost(const clf_model_shape *s, double tokens, int parallel, int kv_elem_bytes,
                                       clf_roof roof, double util, double usd_per_hour);

#endif

/* Splitting a model by layers across devices (or MPI ranks): which tensors
 * a stage holds, and the plan — layer ranges in proportion to a ratio
 * (default: each device's global memory), each stage's weight, KV and
 * scratch bytes, the bytes crossing each boundary per token — checked
 * against each device before anything is loaded. Pure arithmetic: no
 * device is touched here. */
#ifndef CLF_SPLIT_H
#define CLF_SPLIT_H

#include <stdint.h>

#include "gguf.h"
#include "status.h"

enum { CLF_SPLIT_MAX = 16 }; /* stages at most */

/* Whether the tensor `name` (len bytes, not NUL-terminated) belongs on the
 * stage holding layers [l0, l1) of n_layer: its blk.N.* for N in range,
 * token_embd on the first, output_norm and output on the last, anything
 * else (rope_freqs) on every stage. A tied head (token_embd on the last
 * stage) is counted by clf_split_range_bytes, not here. */
int clf_split_tensor_on_stage(const char *name, size_t len, int l0, int l1, int n_layer);

/* Device bytes of the weights of layers [l0, l1) and the stage's extras
 * (a tied embedding on the last stage counted again as its head, as
 * clf_llama_weight_bytes does for the whole model); *n_tensors: the
 * uploads it makes (a tied head counts one). */
size_t clf_split_range_bytes(const clf_gguf *g, int l0, int l1, int n_layer, int *n_tensors);

/* What the plan needs of a model, per layer. */
typedef struct clf_split_model {
    int n_layer;
    int64_t n_embd, n_vocab;
    double layer_bytes[4096];   /* weights of layer l */
    double layer_kv[4096];      /* its KV cache for the context planned (every sequence) */
    double first_bytes;         /* token_embd (+ what every stage holds) */
    double last_bytes;          /* output_norm, output (or the tied copy of token_embd) */
    double common_bytes;        /* on every stage (rope_freqs) */
    double scratch_bytes;       /* a context's activations, on every stage */
    double logits_bytes;        /* the logits buffer, on the last stage */
} clf_split_model;

/* From a file: weights per layer as stored; KV for n_seq sequences of
 * n_ctx positions in chunks of n_batch with elements of kv_elem_bytes (4:
 * F32, 2: F16), sliding-window layers as rings (clf_kv_cache_bytes). */
clf_status clf_split_model_from_gguf(const clf_gguf *g, int64_t n_ctx, int64_t n_batch, int n_seq, int kv_elem_bytes,
                                     clf_split_model *sm);

typedef struct clf_split_stage {
    int l0, l1;
    double weight_bytes, kv_bytes, scratch_bytes, total_bytes;
    double device_bytes; /* what the device offers (its global memory) */
} clf_split_stage;

typedef struct clf_split_plan {
    int n;
    clf_split_stage st[CLF_SPLIT_MAX];
    double hop_bytes_per_token; /* one boundary: n_embd F32 activations */
} clf_split_plan;

/* Parses "a,b,..." (positive numbers) into ratio[0 .. *n-1]; CLF_ERR_ARG
 * naming the bad item. */
clf_status clf_split_parse_ratio(const char *text, double *ratio, int max, int *n);

/* Layer ranges for n stages: stage i gets a share of the layers in
 * proportion to ratio[i] (NULL: to device_bytes[i]), at least one each,
 * in order. Then each stage's bytes; CLF_ERR_MEMORY, with the numbers of
 * the first stage that does not fit its device, when one does not (the
 * plan is filled either way, for printing). CLF_ERR_ARG for n outside
 * 1..min(CLF_SPLIT_MAX, n_layer). */
clf_status clf_split_plan_make(const clf_split_model *sm, int n, const double *ratio, const double *device_bytes,
                               clf_split_plan *plan);

#endif

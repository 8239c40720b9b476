/* LoRA adapters in llama.cpp's GGUF format (convert_lora_to_gguf.py,
 * src/llama-adapter.cpp): general.type "adapter", adapter.type "lora",
 * adapter.lora.alpha, and per adapted weight W [out × in] of the base the
 * pair W.lora_a (GGUF ne [in, r]: r rows of in) and W.lora_b (ne [r, out]:
 * out rows of r). With an adapter at scale s a product becomes
 *     y = W x + s' · B (A x),   s' = s · alpha / r  (alpha 0: s' = s),
 * computed after W's (no merged copy of W) as two small products over a
 * prompt's rows, in one launch over decode rows (lora.c), in any weight
 * type of the base; A and B in F32 or F16.
 *
 * Several adapters may be loaded against one model; a context chooses, per
 * sequence, which apply and at what scale (clf_llama_ctx_set_lora), so one
 * forward pass serves sequences with different adapters. */
#ifndef CLF_LORA_H
#define CLF_LORA_H

#include "llama.h"

/* The products an adapter can reach, by the base's fused weights: Q|K|V
 * (attn_q, attn_k, attn_v or attn_qkv), the attention output, gate|up
 * (ffn_gate, ffn_up), down. */
typedef enum clf_lora_slot { CLF_LORA_QKV, CLF_LORA_WO, CLF_LORA_GU, CLF_LORA_DOWN, CLF_LORA_SLOTS } clf_lora_slot;

/* One adapted product (a slot of a layer), its parts (Q, K, V or gate, up;
 * one elsewhere) in one pair so that it costs two products whatever their
 * number: their A stacked, A [P·rank_dev × in], and their B side by side
 * over the slot's output columns col0 .. col0 + b.rows, B [b.rows ×
 * P·rank_dev], part p's B in its own rows and in columns p·rank_dev ..,
 * zeros elsewhere (exact: the sums gain zeros). The rank is padded to
 * rank_dev with zero rows of A and zero columns of B. F16 on the device
 * where the file's parts are all F16, else F32 (values exact). */
/* Parts per slot at most. */
#define CLF_LORA_PARTS 3

typedef struct clf_lora_ab {
    clf_weight a, b;
    int64_t col0;
    int width; /* P·rank_dev: A·x's width */
    /* A [width × in] row-major and B in panels of 16 outputs (ops.h), in
     * a's type, for the decode rows' one-launch kernel (clf_lora_rows);
     * mem NULL: the pair is wider than that kernel takes (two products) */
    clf_tensor a_rows, bp_rows;
    int n_part;                          /* P */
    int part_out[CLF_LORA_PARTS][2];     /* part k's outputs (from col0), k in stacking order */
} clf_lora_ab;


typedef struct clf_lora {
    const clf_llama *m; /* the base it was checked against */
    float alpha;        /* adapter.lora.alpha (0: scales taken as given) */
    int rank;           /* the file's rank r (every pair's; alpha / r is the adapter's own factor) */
    int rank_dev;       /* the rank on the device, padded */
    float fold;         /* the part of alpha / r multiplied into B (a power of two; 1: none) */
    clf_lora_ab (*ab)[CLF_LORA_SLOTS]; /* [n_layer]: a pair per adapted slot; a.mem NULL: none */
    int n_pairs;        /* adapted weights */
    size_t device_bytes;
} clf_lora;

/* Loads an adapter for model m (all its layers: CLF_ERR_ARG over a split):
 * CLF_ERR_FORMAT with the reason when the file is no LoRA adapter, names
 * another architecture, a tensor the base lacks or one it cannot adapt,
 * or a shape that does not fit the base. */
clf_status clf_lora_load(const clf_llama *m, const clf_gguf *g, clf_lora **out);
void clf_lora_free(clf_lora *a);

/* The factor s' an adapter's products take at user scale s. */
float clf_lora_factor(const clf_lora *a, float scale);

/* One adapter as a sequence uses it. */
typedef struct clf_lora_use {
    const clf_lora *lora;
    float scale; /* the user's scale (0: as if not used) */
} clf_lora_use;

/* Adapters per sequence at most. */
#define CLF_LORA_PER_SEQ 8

/* Sequence seq's adapters become use[0 .. n) (n 0: none; the adapters must
 * be this context's model's and outlive their use). Affects passes
 * enqueued after it. */
clf_status clf_llama_ctx_set_lora(clf_llama_ctx *c, int seq, const clf_lora_use *use, int n);

/* ---- the forward pass (llama_forward.c) ---- */

/* Before a pass: which rows use which adapters: the decode rows by their
 * adapters wherever they sit (their row list uploaded without waiting),
 * prompts' rows in runs of consecutive rows. */
clf_status clf_lora_plan(clf_llama_ctx *c, const clf_stage_segment *segs, int n_seg, int n1);
/* 1 when this pass applies an adapter to layer l's `slot`. */
int clf_lora_touches(const clf_llama_ctx *c, int l, clf_lora_slot slot);
/* out [n × ...] += each row's adapters' s' · B (A in) for layer l's slot,
 * after the base product wrote out; the first n1 rows (the decode rows)
 * each computed as alone (clf_lora_rows, or clf_matmul_rowwise for pairs
 * wider than that kernel takes). */
clf_status clf_lora_add(clf_llama_ctx *c, int l, clf_lora_slot slot, const clf_tensor *in, clf_tensor *out);

/* The context's adapter state (llama_ctx.c frees it). */
void clf_lora_ctx_free(struct clf_lora_ctx *lc);

#endif

/* Mixture-of-experts FFN (qwen3moe, Mixtral): a router picks n_used of
 * n_expert expert MLPs per row, whose outputs are summed with the router's
 * weights. cl/moe.cl has the kernels (routing, gather, weighted
 * scatter-add); the expert products are the dense path's (matmul.h).
 *
 * What runs where (this first version; see clf_moe_ffn):
 *   - router logits W_inp · xn: one product on the device;
 *   - softmax over all experts, top-k, chosen weights renormalised and
 *     scaled: one kernel on the device (clf_moe_route), a work-item a row;
 *   - the small routing result (ids and weights, n × n_used) is read back
 *     and the rows grouped by expert on the host (llama.cpp's mul_mat_id
 *     grouping), then per expert picked by any row: gather its rows, the
 *     fused gate|up product, the activation, the down product, and the
 *     weighted scatter-add into x (5 launches an active expert; 3 or 4
 *     for a group of one decode row, from its int8 form: no gather).
 *   - decode (a pass of single-token rows, at most the scratch's n_id
 *     rows) where the layer's experts are stacked (clf_moe.gu_stack,
 *     down_stack) and the device has the indirect GEMVs: no readback and
 *     two launches for all chosen experts on the cpu variant, the fused
 *     gate|up with the activation reading each row's expert ids from the
 *     device (clf_matmul_glu_id_xq), then the down products with the
 *     weighted sum into x (clf_matmul_down_id_xq); four on the gpu variant
 *     (clf_matmul_rows_id_xq for gate|up, clf_glu_xq, clf_matmul_rows_id_xq
 *     for down, the weighted sum). gpt-oss's expert biases: inside the cpu
 *     kernels (each slot's expert's row, before the unit and before the
 *     weight), on the gpu variant one launch more per product
 *     (moe_add_id_f32). Else the grouping above.
 *
 * The tie rule of the top-k: the larger probability first, then the
 * smaller expert id (llama.cpp sorts with std::sort, which leaves equal
 * probabilities in no specified order); NaN counts as -inf, so every row
 * always gets n_used distinct experts. */
#ifndef CLF_MOE_H
#define CLF_MOE_H

#include "matmul.h"
#include "ops.h"

/* Bounds the routing kernel is built for (checked where hyperparameters are read). */
#define CLF_MOE_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */
#define CLF_MOE_MAX_USED 64

/* One expert's MLP weights. gate|up as one weight of 2 n_ff rows (gate's
 * rows then up's) where both tensors have one type, else two weights
 * (n_gu = 2) written into columns 0 and n_ff of the same output row.
 * gpt-oss's biases are the layer's (clf_moe's b_gu, b_down: a row an
 * expert, added after each product, before the activation and the
 * weighted sum). */
typedef struct clf_moe_expert {
    clf_weight gu[2]; /* [2 n_ff × n_embd], or gate, up [n_ff × n_embd] each */
    int n_gu;
    clf_weight down; /* [n_embd × n_ff] */
} clf_moe_expert;

/* A layer's experts and how they are routed. */
typedef struct clf_moe {
    const clf_weight *router;     /* ffn_gate_inp [n_expert × n_embd] */
    const clf_moe_expert *experts; /* [n_expert] */
    int n_expert, n_used, n_ff;
    int norm_w;        /* chosen weights divided by their sum (clamped at 2^-14 as llama.cpp does) */
    float w_scale;     /* then times this (1: none) */
    clf_glu_act act;   /* the gated unit's activation; gpt-oss's clamped SwiGLU goes here */
    /* the experts stacked where the loader could (clf_matmul_stacks: experts[e]'s weights are parts of
     * these), else NULL: gate|up [n_expert · 2 n_ff × n_embd], down [n_expert · n_embd × n_ff] */
    const clf_weight *gu_stack, *down_stack;
    /* gpt-oss's options (zero/NULL: none; a designated initializer leaves them so): */
    int softmax_weight;         /* gating: top-k of the (biased) logits, softmax over the chosen k
                                   (llama.cpp's SOFTMAX_WEIGHT), not softmax then top-k */
    const clf_tensor *router_b; /* F32 [n_expert]: added to the router's logits */
    const clf_tensor *b_gu;     /* F32 [n_expert × 2 n_ff]: row e added to expert e's gate|up output */
    const clf_tensor *b_down;   /* F32 [n_expert × n_embd]: row e added to expert e's down output */
} clf_moe;

/* A context's scratch for up to n_rows rows. */
typedef struct clf_moe_scratch {
    int n_rows, n_expert, n_used;
    clf_tensor logits;   /* F32 [n_rows × n_expert] router logits */
    clf_tensor sel_w;    /* F32 [n_rows × n_used] each row's chosen weights, best first */
    clf_tensor sel_id;   /* I32 as F32-sized cells [n_rows × n_used]: each row's chosen experts */
    clf_tensor grp_row;  /* I32 cells [n_rows × n_used]: rows grouped by expert */
    clf_tensor grp_w;    /* F32 [n_rows × n_used]: their weights */
    clf_tensor xg, gu, ff, yg; /* [n_rows × n_embd | 2 n_ff | n_ff | n_embd] one expert's rows */
    int32_t *h_id, *h_row; /* host copies [n_rows × n_used] */
    float *h_w, *h_gw;
    int *h_cnt; /* [n_expert + 1] */
    int n_id;            /* most decode rows the indirect path takes (its scratch's) */
    clf_tensor hid, hidq; /* [n_id · n_used × n_ff | CLF_XQ_FLOATS(n_ff)] each slot's hidden row and its int8 form */
    clf_tensor gus, ys;   /* gpu variant: [n_id · n_used × 2 n_ff | n_embd] each slot's gate|up and down rows */
} clf_moe_scratch;

clf_status clf_moe_scratch_alloc(clf_runtime *rt, int n_rows, int n_expert, int n_used, int n_embd, int n_ff,
                                 clf_moe_scratch *s);
void clf_moe_scratch_free(clf_moe_scratch *s);
size_t clf_moe_scratch_bytes(const clf_moe_scratch *s);

/* logits [n × n_expert] -> ids [n × n_used] (int32 in F32-sized cells),
 * w [n × n_used]: softmax over each row, the n_used best (tie rule above),
 * their probabilities divided by their sum (norm_w; the sum clamped at
 * 6.1035e-5) and times w_scale. */
clf_status clf_moe_route(clf_runtime *rt, const clf_tensor *logits, int n_used, int norm_w, float w_scale,
                         clf_tensor *ids, clf_tensor *w);
/* The same with softmax_weight (clf_moe): the n_used best logits (the same
 * tie rule, on the logits), their weights a softmax over those n_used,
 * then norm_w and w_scale as above. */
clf_status clf_moe_route_ex(clf_runtime *rt, const clf_tensor *logits, int n_used, int softmax_weight, int norm_w,
                            float w_scale, clf_tensor *ids, clf_tensor *w);

/* dst[i, :] = src[idx[i], :] for i < rows(dst); idx int32 cells. */
clf_status clf_moe_gather(clf_runtime *rt, const clf_tensor *src, const clf_tensor *idx, clf_tensor *dst);

/* x[idx[i], :] += w[i] · src[i, :] for i < rows(src); the idx must be
 * distinct (one launch has no two writers of a row). */
clf_status clf_moe_scatter_add(clf_runtime *rt, clf_tensor *x, const clf_tensor *src, const clf_tensor *idx,
                               const clf_tensor *w);

/* x [n × n_embd] += Σ_chosen w · down_e(act(gate_e · xn) ⊙ up_e · xn), xn
 * [n × n_embd]; the first n1 rows are decode rows, computed as each one
 * alone computes it (clf_matmul_rowwise), the rest through the GEMMs.
 * xq: the decode rows' int8 forms [n1 × CLF_XQ_FLOATS(n_embd)] as the norm
 * wrote them, ffq: one row's int8 form of an expert's hidden row
 * [≥ 1 × CLF_XQ_FLOATS(n_ff)], or both NULL: where an expert's group is one
 * decode row (a lone token's every expert), its products read them (gate|up
 * with the activation in one GEMV where the device fuses it,
 * clf_matmul_glu_xq) and the gather is skipped; the result is the same
 * (matmul.h: the int8 forms are what the GEMVs would make). Reads the
 * routing back (waits for the queue), except on the indirect path above
 * (all n rows decode rows, xq given, n ≤ s->n_id, stacks given). */
clf_status clf_moe_ffn(clf_runtime *rt, const clf_moe *moe, const clf_tensor *xn, const clf_tensor *xq, int n1,
                       const clf_tensor *ffq, clf_tensor *x, clf_moe_scratch *s);

#endif

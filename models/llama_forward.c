/* The forward pass: one batch of rows (tokens of one or more sequences)
 * through the model's layers, enqueued without waiting. */
#include <math.h>

#include "llama_impl.h"
#include "lora.h"

/* out (+)= W · in where the first n1 rows are single tokens (decodes):
 * those computed as each token alone would be (clf_matmul_rowwise), reading
 * their int8 form xq [n1 rows] where given, the rest as one product. */
static clf_status product_cols(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                               clf_tensor *out, int64_t col0, int accumulate, int n1) {
    const int64_t n = clf_tensor_nrows(in);
    if (n1 <= 0) return clf_matmul_cols(rt, w, in, out, col0, accumulate);
    clf_tensor i1 = clf_tensor_rows(in, 0, n1), o1 = clf_tensor_rows(out, 0, n1);
    CLF_TRY(xq ? clf_matmul_rowwise_xq(rt, w, &i1, xq, &o1, col0, accumulate)
               : clf_matmul_rowwise(rt, w, &i1, &o1, col0, accumulate));
    if (n1 >= n) return CLF_OK;
    clf_tensor i2 = clf_tensor_rows(in, n1, n - n1), o2 = clf_tensor_rows(out, n1, n - n1);
    return clf_matmul_cols(rt, w, &i2, &o2, col0, accumulate);
}

static clf_status product(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                          clf_tensor *out, int accumulate, int n1) {
    return product_cols(rt, w, in, xq, out, 0, accumulate, n1);
}

/* A fused projection: each part (a run of one type) into its columns. */
static clf_status proj_product(clf_runtime *rt, const clf_llama_proj *p, const clf_tensor *in, const clf_tensor *xq,
                               clf_tensor *out, int n1) {
    for (int i = 0; i < p->n; i++) CLF_TRY(product_cols(rt, &p->part[i], in, xq, out, p->col0[i], 0, n1));
    return CLF_OK;
}

/* x += post_norm(W · in), the add fused into the norm, or x += W · in fused
 * into the product when the family has no post-norm; tmp is scratch as
 * wide as x. The LoRA adapters of layer l's `slot` (lora.h) add to W · in. */
static clf_status residual(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, const clf_tensor *xq,
                           const clf_tensor *post_norm, float eps, clf_tensor *x, clf_tensor *tmp, int n1,
                           clf_llama_ctx *c, int l, clf_lora_slot slot) {
    if (!post_norm) {
        CLF_TRY(product(rt, w, in, xq, x, 1, n1));
        return clf_lora_add(c, l, slot, in, x);
    }
    CLF_TRY(product(rt, w, in, xq, tmp, 0, n1));
    CLF_TRY(clf_lora_add(c, l, slot, in, tmp));
    return clf_rmsnorm(rt, tmp, post_norm, eps, x, 1);
}

/* ff = act(gate) ⊙ up of the fused gate|up projection of xn; the n1 decode
 * rows in one launch where a GEMV applies the unit (from xq, writing ff's
 * int8 form ffq), else the product and then the unit (also into ffq). */
static clf_status gated_unit(clf_runtime *rt, const clf_llama_proj *p, clf_glu_act act, const clf_tensor *xn,
                             const clf_tensor *xq, clf_tensor *gu, clf_tensor *ff, const clf_tensor *ffq, int n1,
                             clf_llama_ctx *c, int l) {
    const int64_t n = clf_tensor_nrows(xn);
    /* a LoRA adapter on gate or up adds to gu before the unit: no fused launch then */
    const int lora = clf_lora_touches(c, l, CLF_LORA_GU);
    if (lora || !xq || !ffq || p->n != 1 || !clf_matmul_fuses_glu(rt, &p->part[0])) {
        CLF_TRY(proj_product(rt, p, xn, xq, gu, n1));
        if (lora) CLF_TRY(clf_lora_add(c, l, CLF_LORA_GU, xn, gu));
        return ffq ? clf_glu_xq(rt, act, gu, ff, ffq) : clf_glu(rt, act, gu, ff);
    }
    clf_tensor f1 = clf_tensor_rows(ff, 0, n1);
    CLF_TRY(clf_matmul_glu_xq(rt, &p->part[0], act, xq, &f1, ffq));
    if (n1 >= n) return CLF_OK;
    clf_tensor x2 = clf_tensor_rows(xn, n1, n - n1), g2 = clf_tensor_rows(gu, n1, n - n1);
    clf_tensor f2 = clf_tensor_rows(ff, n1, n - n1);
    CLF_TRY(clf_matmul_cols(rt, &p->part[0], &x2, &g2, 0, 0));
    return clf_glu(rt, act, &g2, &f2);
}

/* y = norm(x), its first rows also quantized into xq where given. */
static clf_status norm_xq(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                          const clf_tensor *xq) {
    return xq ? clf_rmsnorm_xq(rt, x, w, eps, y, xq) : clf_rmsnorm(rt, x, w, eps, y, 0);
}

/* ---- int8 activations ----------------------------------------------------------
 * Where a decode GEMV takes int8 activations (clf_matmul_rowwise_xq), the
 * op that makes its input quantizes a decode row once: the norms (n_embd
 * wide, into c->xq_e), SwiGLU (n_ff, c->xq_f), the decode attention
 * (q_dim, c->xq_a, where heads are whole blocks). The context holds n_dec
 * = min(n_seq, n_batch) rows of each, or none where no product takes them
 * (llama_ctx.c); a NULL form below: the products read the float rows. */

/* Rows [row0, row0 + n) of one of the context's int8 buffers, viewed in
 * *view, or NULL when the context has none. */
static const clf_tensor *xq_view(const clf_tensor *buf, int64_t row0, int64_t n, clf_tensor *view) {
    if (!buf->mem) return NULL;
    *view = clf_tensor_rows(buf, row0, n);
    return view;
}

/* A pass's decode rows (its first n1, the single-token segments) in int8. */
typedef struct xq_rows {
    const clf_tensor *embd, *ff, *att; /* [n1 × CLF_XQ_FLOATS(n_embd | n_ff | q_dim)], or NULL */
    clf_tensor embd_v, ff_v, att_v;    /* what they point at */
    int n1;
} xq_rows;

static void xq_rows_init(xq_rows *q, const clf_llama_ctx *c, int n1) {
    *q = (xq_rows){.n1 = n1};
    if (n1 <= 0) return;
    q->embd = xq_view(&c->xq_e, 0, n1, &q->embd_v);
    q->ff = xq_view(&c->xq_f, 0, n1, &q->ff_v);
    q->att = xq_view(&c->xq_a, 0, n1, &q->att_v);
}

/* ---- the pass -------------------------------------------------------------------- */

/* The pass's decode rows (its first n1 segments, one token each) against
 * both caches: their sequences and positions, set once for every layer. */
static clf_status decode_rows(clf_llama_ctx *c, const segment *segs, int n1) {
    if (n1 <= 0) return CLF_OK;
    for (int s = 0; s < n1; s++) c->row_seq[s] = segs[s].seq, c->row_pos[s] = segs[s].pos;
    if (c->kv.k) CLF_TRY(clf_attn_rows_set(c->m->rt, &c->kv, &c->rows, n1, c->row_seq, c->row_pos));
    if (c->kv_swa.k) CLF_TRY(clf_attn_rows_set(c->m->rt, &c->kv_swa, &c->rows_swa, n1, c->row_seq, c->row_pos));
    return CLF_OK;
}

/* qkv [n × (q_dim + 2 kv_dim)] -> att [n × q_dim], K and V into the caches
 * of layer kl (swa: the sliding-window layers'), sinks (or NULL) the
 * layer's attention sinks (gpt-oss): the decode rows (the
 * first n1) in one launch, RoPE and the cache write fused (the output's
 * int8 form too); each longer segment through its own sequence's view. */
static clf_status attend(clf_llama_ctx *c, const segment *segs, int n_seg, int swa, int kl,
                         const clf_rope_params *rope, const clf_tensor *sinks, const xq_rows *xq) {
    const clf_llama_hparams *hp = &c->m->hp;
    clf_runtime *rt = c->m->rt;
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim, qkv_dim = q_dim + 2 * kv_dim;
    const clf_kv_cache *pool = swa ? &c->kv_swa : &c->kv;
    const int n1 = xq->n1;
    if (n1 > 0) {
        clf_tensor sq = clf_tensor_rows(&c->qkv, 0, n1), sa = clf_tensor_rows(&c->att, 0, n1);
        clf_rows q = {&sq, 0, qkv_dim}, k = {&sq, q_dim, qkv_dim}, v = {&sq, q_dim + kv_dim, qkv_dim};
        CLF_TRY(clf_attention_decode_rows_ex(rt, pool, swa ? &c->rows_swa : &c->rows, kl, q, k, v, hp->n_head,
                                             hp->attn_scale, rope, sinks, &sa, xq->att));
    }
    for (int s = n1; s < n_seg; s++) {
        const segment *sg = &segs[s];
        clf_kv_cache kv = clf_kv_cache_seq(pool, sg->seq);
        clf_tensor sq = clf_tensor_rows(&c->qkv, sg->row0, sg->n), sa = clf_tensor_rows(&c->att, sg->row0, sg->n);
        clf_rows q = {&sq, 0, qkv_dim}, k = {&sq, q_dim, qkv_dim}, v = {&sq, q_dim + kv_dim, qkv_dim};
        /* Q and K are adjacent in each row: one launch rotates both */
        CLF_TRY(clf_rope(rt, &sq, sg->n, qkv_dim, 0, hp->n_head + hp->n_head_kv, hp->head_dim, sg->pos, rope));
        CLF_TRY(clf_kv_write(rt, &kv, kl, k, v, sg->n, sg->pos));
        CLF_TRY(clf_attention_ex(rt, &kv, kl, q, hp->n_head, sg->n, sg->pos, hp->attn_scale, sinks, &sa));
    }
    return CLF_OK;
}

/* x [n × n_embd] -> logits [rows × n_vocab]: the output norm and the head
 * over the rows asked for (all_logits: every row; else want[i] into row
 * i), the norm gathering them into xn's first rows. These rows are the
 * head's own decode rows: one GEMV each, from c->xq_e's int8 form.
 * CLF_FWD_HIDDEN: the norm of every row alone, left in xn (embeddings). */
static clf_status head(clf_llama_ctx *c, const clf_tensor *x, int n, int all_logits, const int *want, int n_want) {
    const clf_llama *m = c->m;
    clf_runtime *rt = m->rt;
    const float eps = m->hp.eps;
    int rows = all_logits ? n : n_want;
    if (all_logits) {
        clf_tensor xn = clf_tensor_rows(&c->xn, 0, n);
        CLF_TRY(clf_rmsnorm(rt, x, &m->out_norm, eps, &xn, 0));
        if (all_logits == CLF_FWD_HIDDEN) return CLF_OK;
    } else {
        for (int i = 0; i < n_want; i++) {
            clf_tensor xs = clf_tensor_rows(&c->x, want[i], 1), xns = clf_tensor_rows(&c->xn, i, 1), xqs;
            CLF_TRY(norm_xq(rt, &xs, &m->out_norm, eps, &xns, xq_view(&c->xq_e, i, 1, &xqs)));
        }
    }
    if (rows == 0) return CLF_OK;
    clf_tensor xns = clf_tensor_rows(&c->xn, 0, rows), logits = clf_tensor_rows(&c->logits, 0, rows), xqh;
    const clf_tensor *xq = all_logits ? NULL : xq_view(&c->xq_e, 0, rows, &xqh);
    return product(rt, &m->output, &xns, xq, &logits, 0, all_logits ? 0 : rows);
}

clf_status clf_llama_forward(clf_llama_ctx *c, const int32_t *tokens, const float *x_in, int n, const segment *segs,
                             int n_seg, int all_logits, const int *want, int n_want, float *x_out, cl_event *x_ev) {
    const clf_llama *m = c->m;
    const clf_llama_hparams *hp = &m->hp;
    const clf_family *f = hp->fam;
    clf_runtime *rt = m->rt;
    const int qkv_dim = (hp->n_head + 2 * hp->n_head_kv) * hp->head_dim;
    if (m->l1 < hp->n_layer && !x_out)
        return clf_fail(CLF_ERR_ARG, "layers %d-%d end before the head, and nothing takes their activations "
                                     "(clf_llama_set_next)", m->l0, m->l1 - 1);
    int n1 = 0; /* the decode rows: one-token segments first */
    while (n1 < n_seg && segs[n1].n == 1) n1++;
    /* this pass's rows of the scratch, and the decode rows' int8 forms */
    clf_tensor x = clf_tensor_rows(&c->x, 0, n), xn = clf_tensor_rows(&c->xn, 0, n);
    clf_tensor qkv = clf_tensor_rows(&c->qkv, 0, n), att = clf_tensor_rows(&c->att, 0, n);
    clf_tensor gu = clf_tensor_rows(&c->gu, 0, n), ff = clf_tensor_rows(&c->ff, 0, n);
    xq_rows xq;
    xq_rows_init(&xq, c, n1);
    /* the sequences' blocks for these positions, the decode rows' descriptions */
    CLF_TRY(clf_llama_seq_reserve(c, segs, n_seg));
    CLF_TRY(decode_rows(c, segs, n1));
    CLF_TRY(clf_lora_plan(c, segs, n_seg, n1)); /* which rows take which LoRA adapters */

    if (m->l0 == 0) {
        /* tokens [n] -> x [n × n_embd]: embedding rows (times sqrt(n_embd): Gemma); over a split the
         * caller refills its tokens while this pass runs: copied before returning */
        CLF_CL_TRY(clEnqueueWriteBuffer(rt->queue, c->ids, c->next ? CL_TRUE : CL_FALSE, 0, (size_t)n * sizeof *tokens,
                                        tokens, 0, NULL, NULL));
        CLF_TRY(clf_get_rows(rt, &m->tok_embd, c->ids, n, &x));
        if (f->embd_scale) CLF_TRY(clf_scale(rt, &x, sqrtf((float)hp->n_embd), &x));
    } else {
        /* x_in [n × n_embd] -> x: the previous stage's activations */
        CLF_TRY(clf_tensor_upload(rt, &x, x_in, clf_tensor_bytes(&x)));
    }
    for (int l = m->l0, n_global = 0, n_local = 0; l < m->l1; l++) {
        const clf_llama_layer *L = &m->layers[l];
        /* a sliding-window layer: its own ring cache, its RoPE base, the family's position scaling (Gemma 3:
         * none); YaRN (gpt-oss) on every layer from its base */
        const int swa = clf_family_layer_swa(f, l);
        const int kl = swa ? n_local++ : n_global++; /* the layer's index in its cache */
        clf_rope_params rope = {.mode = f->rope,
                                .n_rot = hp->n_rot,
                                .base = swa ? hp->rope_base_swa : hp->rope_base,
                                .freq_scale = swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale,
                                .factors = hp->rope_freqs ? &m->rope_freqs : NULL};
        if (hp->yarn) /* checked when the file was read (llama_hparams.c) */
            CLF_TRY(clf_rope_yarn(&rope, hp->yarn_factor, hp->yarn_n_ctx_orig, hp->yarn_attn_factor,
                                  CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW));

        /* x [n × n_embd] -> xn [n × n_embd]: RMSNorm with attn_norm */
        CLF_TRY(norm_xq(rt, &x, &L->attn_norm, hp->eps, &xn, xq.embd));
        /* xn [n × n_embd] -> qkv [n × (q_dim + 2 kv_dim)]: Wqkv · xn (+ bqkv: Qwen2) */
        CLF_TRY(proj_product(rt, &L->wqkv, &xn, xq.embd, &qkv, n1));
        CLF_TRY(clf_lora_add(c, l, CLF_LORA_QKV, &xn, &qkv));
        if (f->qkv_bias) CLF_TRY(clf_add_rows(rt, &qkv, &L->bqkv));
        /* qkv's Q and K heads [n × (n_head + n_head_kv) × head_dim]: RMSNorm per head with q_norm, k_norm
         * (Qwen3, Gemma 3), one launch */
        if (f->qk_norm)
            CLF_TRY(clf_rmsnorm_heads(rt, &qkv, n, qkv_dim, 0, hp->head_dim, hp->n_head, &L->q_norm, hp->n_head_kv,
                                      &L->k_norm, hp->eps));
        /* qkv [n × qkv_dim] -> att [n × q_dim]: RoPE, K/V into each sequence's cache, attention */
        CLF_TRY(attend(c, segs, n_seg, swa, kl, &rope, f->attn_sinks ? &L->sinks : NULL, &xq));
        /* att [n × q_dim] -> x [n × n_embd]: x += Wo · att (post_attention_norm first: Gemma 3) (+ bo: gpt-oss) */
        CLF_TRY(residual(rt, &L->wo, &att, xq.att, f->post_norms ? &L->post_attn_norm : NULL, hp->eps, &x, &xn, n1, c, l,
                         CLF_LORA_WO));
        if (f->attn_out_bias) CLF_TRY(clf_add_rows(rt, &x, &L->bo));

        /* x [n × n_embd] -> xn [n × n_embd]: RMSNorm with ffn_norm (gpt-oss: its post_attention_norm) */
        CLF_TRY(norm_xq(rt, &x, &L->ffn_norm, hp->eps, &xn, xq.embd));
        if (hp->n_expert) {
            /* xn [n × n_embd] -> x [n × n_embd]: x += Σ over each row's chosen experts of its weight times
             * Wdown_e · (act(Wgate_e · xn) ⊙ (Wup_e · xn)) (host/compute/moe.h; no post-norm family has experts) */
            const clf_moe moe = {.router = &L->router,
                                 .experts = L->experts,
                                 .n_expert = hp->n_expert,
                                 .n_used = hp->n_expert_used,
                                 .n_ff = hp->n_ff_exp,
                                 .norm_w = hp->moe_norm_w,
                                 .w_scale = hp->expert_w_scale,
                                 .act = f->act,
                                 .softmax_weight = f->moe_softmax_weight,
                                 .router_b = f->moe_biases ? &L->router_b : NULL,
                                 .b_gu = f->moe_biases ? &L->exp_b_gu : NULL,
                                 .b_down = f->moe_biases ? &L->exp_b_down : NULL,
                                 .gu_stack = L->gu_stack.mem ? &L->gu_stack : NULL,
                                 .down_stack = L->down_stack.mem ? &L->down_stack : NULL};
            CLF_TRY(clf_moe_ffn(rt, &moe, &xn, xq.embd, n1, xq.ff, &x, &c->moe));
            continue;
        }
        /* xn [n × n_embd] -> gu [n × 2 n_ff] -> ff [n × n_ff]: act(Wgate · xn) ⊙ (Wup · xn) */
        CLF_TRY(gated_unit(rt, &L->wgu, f->act, &xn, xq.embd, &gu, &ff, xq.ff, n1, c, l));
        /* ff [n × n_ff] -> x [n × n_embd]: x += Wdown · ff (post_ffw_norm first: Gemma 3) */
        CLF_TRY(residual(rt, &L->wdown, &ff, xq.ff, f->post_norms ? &L->post_ffn_norm : NULL, hp->eps, &x, &xn, n1, c, l,
                         CLF_LORA_DOWN));
    }
    if (m->l1 < hp->n_layer) /* x [n × n_embd] -> x_out: the head is a later stage's */
        return clf_cl_check(clEnqueueReadBuffer(rt->queue, c->x.mem, CL_FALSE, c->x.offset, clf_tensor_bytes(&x), x_out,
                                                0, NULL, x_ev),
                            "reading activations for the next stage");
    /* x [n × n_embd] -> xn [rows × n_embd] -> logits [rows × n_vocab]: RMSNorm with output_norm, output · xn */
    return head(c, &x, n, all_logits, want, n_want);
}

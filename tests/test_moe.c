/* Mixtures of experts (host/compute/moe.h, cl/moe.cl, the qwen3moe and
 * llama-with-experts paths of models/):
 *  - the routing kernel against a C softmax and top-k on fresh random
 *    logits of odd widths, rows with ties (the larger probability, then the
 *    smaller id), all-equal rows, NaN rows; weights renormalised or not,
 *    scaled;
 *  - the whole expert FFN (router, routing, grouping, gate|up, SwiGLU,
 *    down, weighted scatter-add) against a double-precision reference, F32
 *    and Q8_0 experts, odd widths, decode rows beside prefill rows (a lone
 *    decode row's experts from its int8 form), a batch where every row
 *    picks one expert and one where every expert is picked;
 *  - the indirect gated unit on stacked experts: each slot's hidden row
 *    and its int8 form byte for byte the per-expert fused GEMV's;
 *  - gpt-oss's routing (top-k of the biased logits, then a softmax over the
 *    chosen), its biased experts and clamped SwiGLU, against the same
 *    reference;
 *  - batched = alone on tiny qwen3moe, Mixtral and gpt-oss models: a prefill chunk
 *    beside decode rows of other sequences gives each the logits it gets
 *    alone;
 *  - a tiny gpt-oss in MXFP4 against its own F32 dequantization;
 *  - the estimates (models/estimate.h) against what the model and a context
 *    allocate, and the bytes a token reads counting its chosen experts;
 *  - keys out of range and missing or misshapen expert tensors (gpt-oss's
 *    sinks, biases, window and YaRN context too): a format error naming the
 *    key or tensor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "estimate.h"
#include "llama.h"
#include "moe.h"
#include "quant.h"
#include "ref_llama.h"
#include "testutil.h"

/* ---- the routing reference ------------------------------------------------------ */

/* Row r's softmax, its k best (probability descending, then id ascending;
 * NaN as -inf) and their weights. sm_w (gpt-oss): the k best logits, their
 * weights a softmax over those k. */
static void ref_route_ex(const float *l, int E, int k, int sm_w, int norm_w, float scale, int *ids, double *w,
                         double *p_out) {
    double mx = -INFINITY, sum = 0;
    double *p = malloc((size_t)E * sizeof *p);
    for (int e = 0; e < E; e++)
        if (!isnan(l[e]) && l[e] > mx) mx = l[e];
    for (int e = 0; e < E; e++) sum += (p[e] = sm_w ? l[e] : exp((double)l[e] - mx));
    for (int e = 0; e < E; e++) p[e] /= sm_w ? 1.0 : sum;
    double tot = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++) taken |= ids[i] == e;
            const double pe = isnan(p[e]) ? -INFINITY : p[e], pb = best < 0 || isnan(p[best]) ? -INFINITY : p[best];
            if (!taken && (best < 0 || pe > pb)) best = e;
        }
        ids[j] = best;
        w[j] = p[best];
        tot += p[best];
    }
    if (sm_w) { /* softmax over the chosen k logits */
        double cm = -INFINITY, cs = 0;
        for (int j = 0; j < k; j++) cm = fmax(cm, w[j]);
        for (int j = 0; j < k; j++) cs += (w[j] = exp(w[j] - cm));
        tot = 0;
        for (int j = 0; j < k; j++) tot += (w[j] /= cs);
    }
    for (int j = 0; j < k; j++) w[j] = (norm_w ? w[j] / fmax(tot, 6.103515625e-5) : w[j]) * scale;
    if (p_out) memcpy(p_out, p, (size_t)E * sizeof *p);
    free(p);
}


/* The kernel on `rows` rows of E logits; ids exactly, weights to 1e-5 relative. */
static void check_route_ex(const float *logits, int rows, int E, int k, int sm_w, int norm_w, float scale) {
    clf_runtime *rt = tu_runtime();
    clf_tensor lt, it, wt;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, E, rows, &lt));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, k, rows, &it));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, k, rows, &wt));
    TU_OK(clf_tensor_upload(rt, &lt, logits, (size_t)rows * E * sizeof *logits));
    TU_OK(clf_moe_route_ex(rt, &lt, k, sm_w, norm_w, scale, &it, &wt));
    int32_t *ids = malloc((size_t)rows * k * sizeof *ids), want_ids[CLF_MOE_MAX_USED];
    float *w = malloc((size_t)rows * k * sizeof *w);
    double want_w[CLF_MOE_MAX_USED];
    TU_OK(clf_tensor_download(rt, &it, ids, (size_t)rows * k * sizeof *ids));
    TU_OK(clf_tensor_download(rt, &wt, w, (size_t)rows * k * sizeof *w));
    double *p = malloc((size_t)E * sizeof *p);
    for (int r = 0; r < rows; r++) {
        ref_route_ex(logits + (size_t)r * E, E, k, sm_w, norm_w, scale, want_ids, want_w, p);
        for (int j = 0; j < k; j++) {
            const float got = w[(size_t)r * k + j];
            const int nan_ok = isnan(want_w[j]) && isnan(got);
            /* another expert at this rank only at a near-tie: the kernel's float softmax cannot order two
             * probabilities within ~1e-6 of each other as the double reference does (1 row of 200 random
             * experts in ~16 runs); exact ties (equal logits) must still follow the tie rule */
            const int gi = ids[(size_t)r * k + j], wi = want_ids[j];
            const int near_tie = gi != wi && gi >= 0 && gi < E && !isnan(p[gi]) && !isnan(p[wi]) && p[gi] != p[wi] &&
                                 fabs(p[gi] - p[wi]) <= 1e-5 * fabs(p[wi]);
            if ((gi != wi && !near_tie) || (!nan_ok && !(fabs(got - want_w[j]) <= 1e-5 * fabs(want_w[j]) + 1e-7)))
                fail_msg("E %d k %d%s row %d rank %d: expert %d weight %.7g, want %d %.7g (replay: CLINFER_SEED=%llu)", E,
                         k, sm_w ? " softmax-weight" : "", r, j, (int)ids[(size_t)r * k + j], (double)got, want_ids[j],
                         want_w[j], (unsigned long long)tu_seed());
        }
    }
    free(ids);
    free(w);
    free(p);
    clf_tensor_free(&lt);
    clf_tensor_free(&it);
    clf_tensor_free(&wt);
}

static void check_route(const float *logits, int rows, int E, int k, int norm_w, float scale) {
    check_route_ex(logits, rows, E, k, 0, norm_w, scale);
}

static void test_route(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    static const int shapes[][2] = {{8, 2}, {13, 3}, {60, 4}, {128, 8}, {7, 7}, {1, 1}, {200, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int E = shapes[i][0], k = shapes[i][1], rows = 37;
        float *l = malloc((size_t)rows * E * sizeof *l);
        for (int r = 0; r < rows; r++)
            for (int e = 0; e < E; e++) {
                float *v = &l[(size_t)r * E + e];
                if (r % 4 == 1) *v = (float)(tu_next(&s) % 4); /* a coarse grid: ties at every rank */
                else if (r % 4 == 2) *v = 0.5f;                /* all equal: the k smallest ids */
                else *v = 3.0f * tu_normal(&s);
            }
        for (int e = 0; e < E; e++) l[(size_t)3 * E + e] = NAN; /* NaN row: k distinct ids, NaN weights */
        if (E > 2) l[(size_t)7 * E + 1] = NAN;                     /* one NaN: never chosen before a number */
        check_route(l, rows, E, k, 1, 1.0f);
        check_route(l, rows, E, k, 0, 1.0f);
        check_route(l, rows, E, k, 1, 2.5f);
        /* gpt-oss's softmax-weight gating: the k best logits, a softmax over them (ties and NaN as above) */
        check_route_ex(l, rows, E, k, 1, 0, 1.0f);
        /* logits that tie only after a softmax (exp underflows to 0 below ~-104 under the max), so
         * softmax-then-top-k would take the smaller ids: the logits order them, the larger ids first */
        for (int e = 0; e < E; e++) l[(size_t)5 * E + e] = e == 0 ? 0.0f : -200.0f + (float)e;
        check_route_ex(l, rows, E, k, 1, 0, 1.0f);
        free(l);
    }
    /* bad arguments */
    clf_runtime *rt = tu_runtime();
    clf_tensor lt, it, wt;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 8, 4, &lt));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 2, 4, &it));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 2, 4, &wt));
    assert_int_equal(clf_moe_route(rt, &lt, 9, 1, 1.0f, &it, &wt), CLF_ERR_ARG);
    assert_int_equal(clf_moe_route(rt, &lt, 3, 1, 1.0f, &it, &wt), CLF_ERR_ARG);
    clf_tensor_free(&lt);
    clf_tensor_free(&it);
    clf_tensor_free(&wt);
}

/* ---- the expert FFN ------------------------------------------------------------- */

/* Random weights as the device gets them and as the reference reads them. */
typedef struct {
    int E, k, d, ff;
    clf_type type;
    float *router;    /* [E × d] */
    float *g, *u, *dn; /* [E × ff × d], [E × ff × d], [E × d × ff], dequantized */
    clf_weight wr;
    clf_moe_expert *ex;
    clf_weight gu_stack, down_stack; /* stacked (experts_make_stacked): ex[e]'s weights are parts of these */
    int use_stack;                    /* check_ffn hands the stacks to clf_moe_ffn */
    /* gpt-oss (experts_oss): softmax-weight routing, the clamped SwiGLU, biases */
    int oss;
    float *rb, *bgu, *bdn;        /* [E], [E × 2 ff] (gate | up), [E × d] */
    clf_tensor trb, tbgu, tbdn;   /* the same on the device */
} experts;

/* A [rows × cols] matrix of N(0, sc²) in `type` on the device, *deq its dequantized values. */
static void rand_weight(clf_type type, int64_t rows, int64_t cols, float sc, uint64_t *s, float *deq, clf_weight *w) {
    const int64_t n = rows * cols;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sc * tu_normal(s);
    void *q = malloc(clf_row_bytes(type, cols) * (size_t)rows);
    clf_quantize(type, x, q, n);
    clf_dequantize(type, q, deq, n);
    TU_OK(clf_weight_upload(tu_runtime(), type, rows, cols, q, w));
    free(q);
    free(x);
}

static void experts_make(experts *x, int E, int k, int d, int ff, clf_type type, uint64_t *s) {
    *x = (experts){.E = E, .k = k, .d = d, .ff = ff, .type = type};
    x->router = malloc((size_t)E * d * sizeof(float));
    x->g = malloc((size_t)E * ff * d * sizeof(float));
    x->u = malloc((size_t)E * ff * d * sizeof(float));
    x->dn = malloc((size_t)E * ff * d * sizeof(float));
    x->ex = calloc((size_t)E, sizeof *x->ex);
    rand_weight(CLF_F32, E, d, 2.0f / sqrtf((float)d), s, x->router, &x->wr);
    float *gu = malloc((size_t)2 * ff * d * sizeof *gu);
    for (int e = 0; e < E; e++) {
        /* even experts: gate|up as one weight; odd ones: two (the layout of a file whose gate and up differ in type) */
        const size_t m = (size_t)ff * d;
        if (e % 2 == 0) {
            rand_weight(type, 2 * ff, d, 1.0f / sqrtf((float)d), s, gu, &x->ex[e].gu[0]);
            memcpy(x->g + e * m, gu, m * sizeof *gu);
            memcpy(x->u + e * m, gu + m, m * sizeof *gu);
            x->ex[e].n_gu = 1;
        } else {
            rand_weight(type, ff, d, 1.0f / sqrtf((float)d), s, x->g + e * m, &x->ex[e].gu[0]);
            rand_weight(type, ff, d, 1.0f / sqrtf((float)d), s, x->u + e * m, &x->ex[e].gu[1]);
            x->ex[e].n_gu = 2;
        }
        rand_weight(type, d, ff, 1.0f / sqrtf((float)ff), s, x->dn + e * m, &x->ex[e].down);
    }
    free(gu);
}

/* The same with every expert's gate|up fused and the experts stacked as the
 * loader stacks them where the device takes them so (clf_matmul_stacks):
 * returns 0 (and stacks nothing) where it does not. */
static int experts_make_stacked(experts *x, int E, int k, int d, int ff, clf_type type, uint64_t *s) {
    clf_runtime *rt = tu_runtime();
    *x = (experts){.E = E, .k = k, .d = d, .ff = ff, .type = type};
    const int stacks = ff % 32 == 0 && clf_matmul_stacks(rt, type, 2 * ff, d, E) && clf_matmul_stacks(rt, type, d, ff, E);
    const size_t m = (size_t)ff * d;
    x->router = malloc((size_t)E * d * sizeof(float));
    x->g = malloc(E * m * sizeof(float));
    x->u = malloc(E * m * sizeof(float));
    x->dn = malloc(E * m * sizeof(float));
    x->ex = calloc((size_t)E, sizeof *x->ex);
    rand_weight(CLF_F32, E, d, 2.0f / sqrtf((float)d), s, x->router, &x->wr);
    /* each expert's gate|up [2 ff × d] and down [d × ff] quantized, in the file's stacked order */
    const size_t gub = clf_row_bytes(type, d) * 2 * ff, dnb = clf_row_bytes(type, ff) * d;
    unsigned char *qgu = malloc(E * gub), *qdn = malloc(E * dnb);
    float *v = malloc(2 * m * sizeof *v), *deq = malloc(2 * m * sizeof *deq);
    for (int e = 0; e < E; e++) {
        for (size_t i = 0; i < 2 * m; i++) v[i] = tu_normal(s) / sqrtf((float)d);
        clf_quantize(type, v, qgu + e * gub, (int64_t)(2 * m));
        clf_dequantize(type, qgu + e * gub, deq, (int64_t)(2 * m));
        memcpy(x->g + e * m, deq, m * sizeof *deq);
        memcpy(x->u + e * m, deq + m, m * sizeof *deq);
        for (size_t i = 0; i < m; i++) v[i] = tu_normal(s) / sqrtf((float)ff);
        clf_quantize(type, v, qdn + e * dnb, (int64_t)m);
        clf_dequantize(type, qdn + e * dnb, x->dn + e * m, (int64_t)m);
    }
    if (stacks) {
        clf_rows_src *pg = calloc((size_t)E, sizeof *pg), *pd = calloc((size_t)E, sizeof *pd);
        for (int e = 0; e < E; e++) {
            pg[e] = (clf_rows_src){.data = {qgu + e * gub, qgu + e * gub + gub / 2}, .rows = {ff, ff}, .n = 2};
            pd[e] = (clf_rows_src){.data = {qdn + e * dnb}, .rows = {d}, .n = 1};
        }
        TU_OK(clf_weight_upload_parts(rt, type, d, pg, E, &x->gu_stack));
        TU_OK(clf_weight_upload_parts(rt, type, ff, pd, E, &x->down_stack));
        for (int e = 0; e < E; e++) {
            x->ex[e].n_gu = 1;
            TU_OK(clf_weight_part(&x->gu_stack, E, e, &x->ex[e].gu[0]));
            TU_OK(clf_weight_part(&x->down_stack, E, e, &x->ex[e].down));
        }
        x->use_stack = 1;
        free(pg), free(pd);
    } else {
        for (int e = 0; e < E; e++) {
            x->ex[e].n_gu = 1;
            TU_OK(clf_weight_upload(rt, type, 2 * ff, d, qgu + e * gub, &x->ex[e].gu[0]));
            TU_OK(clf_weight_upload(rt, type, d, ff, qdn + e * dnb, &x->ex[e].down));
        }
    }
    free(qgu), free(qdn), free(v), free(deq);
    return stacks;
}

/* x becomes gpt-oss's: its router and every expert product biased. */
static void experts_oss(experts *x, uint64_t *s) {
    clf_runtime *rt = tu_runtime();
    x->oss = 1;
    x->rb = malloc((size_t)x->E * sizeof *x->rb);
    x->bgu = malloc((size_t)x->E * 2 * x->ff * sizeof *x->bgu);
    x->bdn = malloc((size_t)x->E * x->d * sizeof *x->bdn);
    /* router biases a quarter of the logits' spread (std ~2): large ones left an expert unpicked in the
     * every-expert case (1 seed of a few: 33 rows, 6 experts, k 2), which that case asserts never happens */
    for (int i = 0; i < x->E; i++) x->rb[i] = 0.25f * tu_normal(s);
    for (int i = 0; i < x->E * 2 * x->ff; i++) x->bgu[i] = 0.5f * tu_normal(s);
    for (int i = 0; i < x->E * x->d; i++) x->bdn[i] = 0.5f * tu_normal(s);
    TU_OK(clf_tensor_alloc(rt, CLF_F32, x->E, 1, &x->trb));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 2 * x->ff, x->E, &x->tbgu));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, x->d, x->E, &x->tbdn));
    TU_OK(clf_tensor_upload(rt, &x->trb, x->rb, (size_t)x->E * sizeof *x->rb));
    TU_OK(clf_tensor_upload(rt, &x->tbgu, x->bgu, (size_t)x->E * 2 * x->ff * sizeof *x->bgu));
    TU_OK(clf_tensor_upload(rt, &x->tbdn, x->bdn, (size_t)x->E * x->d * sizeof *x->bdn));
}

static void experts_free(experts *x) {
    clf_tensor_free(&x->trb), clf_tensor_free(&x->tbgu), clf_tensor_free(&x->tbdn);
    free(x->rb), free(x->bgu), free(x->bdn);
    for (int e = 0; e < x->E; e++) {
        for (int i = 0; i < x->ex[e].n_gu; i++) clf_weight_free(&x->ex[e].gu[i]);
        clf_weight_free(&x->ex[e].down);
    }
    clf_weight_free(&x->gu_stack);
    clf_weight_free(&x->down_stack);
    clf_weight_free(&x->wr);
    free(x->ex), free(x->router), free(x->g), free(x->u), free(x->dn);
}

/* y[r] = x0[r] + Σ_chosen w · down(silu(gate · xn) ⊙ up · xn); marks each chosen expert in picked[E].
 * gpt-oss (x->oss): the router's logits biased, softmax-weight routing, each product biased, and
 * llama.cpp's swiglu_oai: min(g, 7) · sigmoid(1.702 min(g, 7)) · (clamp(u, -7, 7) + 1). */
static void ref_ffn(const experts *x, const float *xn, const float *x0, int n, double *y, int *picked) {
    const int d = x->d, ff = x->ff, E = x->E;
    float *l = calloc((size_t)E, sizeof *l);
    double *h = calloc((size_t)ff, sizeof *h), w[CLF_MOE_MAX_USED];
    int ids[CLF_MOE_MAX_USED];
    for (int r = 0; r < n; r++) {
        const float *v = xn + (size_t)r * d;
        for (int e = 0; e < E; e++) {
            double a = 0;
            for (int c = 0; c < d; c++) a += (double)x->router[(size_t)e * d + c] * v[c];
            l[e] = (float)a + (x->oss ? x->rb[e] : 0.0f);
        }
        ref_route_ex(l, E, x->k, x->oss, !x->oss, 1.0f, ids, w, NULL);
        for (int c = 0; c < d; c++) y[(size_t)r * d + c] = x0[(size_t)r * d + c];
        for (int j = 0; j < x->k; j++) {
            const int e = ids[j];
            picked[e]++;
            const float *G = x->g + (size_t)e * ff * d, *U = x->u + (size_t)e * ff * d, *D = x->dn + (size_t)e * ff * d;
            for (int i = 0; i < ff; i++) {
                double a = 0, b = 0;
                for (int c = 0; c < d; c++) a += (double)G[(size_t)i * d + c] * v[c], b += (double)U[(size_t)i * d + c] * v[c];
                if (x->oss) {
                    a = fmin(a + x->bgu[(size_t)e * 2 * ff + i], 7.0);
                    b = fmax(fmin(b + x->bgu[(size_t)e * 2 * ff + ff + i], 7.0), -7.0);
                    h[i] = a / (1 + exp(-1.702 * a)) * (b + 1);
                } else
                    h[i] = a / (1 + exp(-a)) * b;
            }
            for (int c = 0; c < d; c++) {
                double a = x->oss ? x->bdn[(size_t)e * d + c] : 0;
                for (int i = 0; i < ff; i++) a += (double)D[(size_t)c * ff + i] * h[i];
                y[(size_t)r * d + c] += w[j] * a;
            }
        }
    }
    free(l);
    free(h);
}

/* n rows (the first n1 decode rows) of xn through clf_moe_ffn against the
 * reference; dominant >= 0: every row's column 0 large and the router's
 * column 0 pointing at that expert, so every row picks it. */
/* The layer x describes, as clf_moe_ffn takes it: qwen3moe's gating
 * (softmax, top-k, renormalised) or gpt-oss's (x->oss: biases, softmax over
 * the chosen, the clamped SwiGLU), per-expert or stacked weights. */
static clf_moe moe_of(experts *x) {
    return (clf_moe){.router = &x->wr,
                     .experts = x->ex,
                     .n_expert = x->E,
                     .n_used = x->k,
                     .n_ff = x->ff,
                     .norm_w = !x->oss,
                     .w_scale = 1.0f,
                     .act = x->oss ? CLF_GLU_SWIGLU_OAI : CLF_GLU_SILU,
                     .softmax_weight = x->oss,
                     .router_b = x->oss ? &x->trb : NULL,
                     .b_gu = x->oss ? &x->tbgu : NULL,
                     .b_down = x->oss ? &x->tbdn : NULL,
                     .gu_stack = x->use_stack ? &x->gu_stack : NULL,
                     .down_stack = x->use_stack ? &x->down_stack : NULL};
}

static void check_ffn(experts *x, int n, int n1, int dominant, uint64_t *s, double tol, int want_all) {
    clf_runtime *rt = tu_runtime();
    const int d = x->d;
    float *xn = malloc((size_t)n * d * sizeof *xn), *x0 = malloc((size_t)n * d * sizeof *x0);
    float *got = malloc((size_t)n * d * sizeof *got);
    double *want = malloc((size_t)n * d * sizeof *want);
    int *picked = calloc((size_t)x->E, sizeof *picked);
    for (int i = 0; i < n * d; i++) xn[i] = tu_normal(s), x0[i] = tu_normal(s);
    float saved[CLF_MOE_MAX_EXPERTS];
    if (dominant >= 0) {
        for (int r = 0; r < n; r++) xn[(size_t)r * d] = 8.0f;
        for (int e = 0; e < x->E; e++) saved[e] = x->router[(size_t)e * d], x->router[(size_t)e * d] = e == dominant ? 2.0f : 0.0f;
        clf_weight_free(&x->wr);
        TU_OK(clf_weight_upload(rt, CLF_F32, x->E, d, x->router, &x->wr));
    }
    ref_ffn(x, xn, x0, n, want, picked);
    clf_moe_scratch sc;
    TU_OK(clf_moe_scratch_alloc(rt, n + 3, x->E, x->k, d, x->ff, &sc));
    clf_tensor tx, txn;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, d, n, &tx));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, d, n, &txn));
    TU_OK(clf_tensor_upload(rt, &tx, x0, (size_t)n * d * sizeof *x0));
    TU_OK(clf_tensor_upload(rt, &txn, xn, (size_t)n * d * sizeof *xn));
    const clf_moe moe = moe_of(x);
    /* the decode rows' int8 forms where widths are whole blocks (a lone decode row's experts read them) */
    clf_tensor xq = {0}, ffq = {0};
    const int int8 = n1 > 0 && d % 32 == 0 && x->ff % 32 == 0;
    if (int8) {
        TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(d), n1, &xq));
        TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(x->ff), 1, &ffq));
        clf_tensor x1 = clf_tensor_rows(&txn, 0, n1);
        TU_OK(clf_quantize_x(rt, &x1, &xq));
    }
    TU_OK(clf_moe_ffn(rt, &moe, &txn, int8 ? &xq : NULL, n1, int8 ? &ffq : NULL, &tx, &sc));
    TU_OK(clf_tensor_download(rt, &tx, got, (size_t)n * d * sizeof *got));
    const double err = tu_rel_err(got, want, (size_t)n * d);
    int n_picked = 0;
    for (int e = 0; e < x->E; e++) n_picked += picked[e] > 0;
    print_message("  %s%s E %d k %d d %d ff %d: %d rows (%d decode)%s, %d experts picked: rel err %.2e (tol %.0e)\n",
                  clf_type_get(x->type)->name, x->oss ? " gpt-oss" : "", x->E, x->k, d, x->ff, n, n1, dominant >= 0 ? ", one expert dominant" : "",
                  n_picked, err, tol);
    if (dominant >= 0) assert_int_equal(picked[dominant], n);
    if (want_all) assert_int_equal(n_picked, x->E);
    if (!(err <= tol)) fail_msg("rel err %.3g > %.3g (replay: CLINFER_SEED=%llu)", err, tol, (unsigned long long)tu_seed());
    if (dominant >= 0) {
        for (int e = 0; e < x->E; e++) x->router[(size_t)e * d] = saved[e];
        clf_weight_free(&x->wr);
        TU_OK(clf_weight_upload(rt, CLF_F32, x->E, d, x->router, &x->wr));
    }
    clf_moe_scratch_free(&sc);
    clf_tensor_free(&tx);
    clf_tensor_free(&txn);
    clf_tensor_free(&xq);
    clf_tensor_free(&ffq);
    free(xn), free(x0), free(got), free(want), free(picked);
}

static void run_ffn_as(clf_type type, int d, int ff, double tol, int oss) {
    uint64_t s = tu_seed() + (uint64_t)type;
    experts x;
    experts_make(&x, 6, 2, d, ff, type, &s);
    if (oss) experts_oss(&x, &s);
    check_ffn(&x, 1, 1, -1, &s, tol, 0);  /* one decode row */
    check_ffn(&x, 5, 5, -1, &s, tol, 0);  /* decode rows of several sequences */
    check_ffn(&x, 33, 3, -1, &s, tol, 1); /* a prompt chunk beside decode rows: every expert picked */
    check_ffn(&x, 17, 0, 4, &s, tol, 0);  /* every row picks expert 4 */
    experts_free(&x);
}

static void run_ffn(clf_type type, int d, int ff, double tol) { run_ffn_as(type, d, ff, tol, 0); }

/* F32: summation order only. Q8_0: where the device's products quantize the
 * activations to int8 (the cpu variant), their rounding (~0.4% relative). */
static void test_ffn_f32(void **state) {
    (void)state;
    run_ffn(CLF_F32, 48, 40, 1e-5);
    tu_tune("matmul=gpu");
    run_ffn(CLF_F32, 48, 40, 1e-5);
    tu_tune(NULL);
}

/* gpt-oss's routing (biased logits, top-k then softmax), biased products and clamped SwiGLU, F32 and
 * Q8_0 experts (96 wide: a lone decode row's experts from its int8 form), both variants. */
static void test_ffn_oss(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        tu_tune(t ? "matmul=gpu" : NULL);
        run_ffn_as(CLF_F32, 48, 40, 1e-5, 1);
        run_ffn_as(CLF_Q8_0, 64, 96, 2e-2, 1);
    }
    tu_tune(NULL);
}

static void test_ffn_q8_0(void **state) {
    (void)state;
    run_ffn(CLF_Q8_0, 64, 96, 2e-2);
    tu_tune("matmul=gpu");
    run_ffn(CLF_Q8_0, 64, 96, 2e-2);
    tu_tune(NULL);
}

/* x [n × d] through the decode path of experts x (stacked or not), the rows
 * all decode rows from their int8 forms, into got [n × d]. */
static void ffn_decode(experts *x, int n, const float *xn, const float *x0, float *got) {
    clf_runtime *rt = tu_runtime();
    const int d = x->d;
    clf_moe_scratch sc;
    TU_OK(clf_moe_scratch_alloc(rt, n, x->E, x->k, d, x->ff, &sc));
    clf_tensor tx, txn, xq, ffq;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, d, n, &tx));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, d, n, &txn));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(d), n, &xq));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(x->ff), 1, &ffq));
    TU_OK(clf_tensor_upload(rt, &tx, x0, (size_t)n * d * sizeof *x0));
    TU_OK(clf_tensor_upload(rt, &txn, xn, (size_t)n * d * sizeof *xn));
    TU_OK(clf_quantize_x(rt, &txn, &xq));
    const clf_moe moe = moe_of(x);
    TU_OK(clf_moe_ffn(rt, &moe, &txn, &xq, n, &ffq, &tx, &sc));
    TU_OK(clf_tensor_download(rt, &tx, got, (size_t)n * d * sizeof *got));
    clf_moe_scratch_free(&sc);
    clf_tensor_free(&tx), clf_tensor_free(&txn), clf_tensor_free(&xq), clf_tensor_free(&ffq);
}

/* The indirect gated unit (clf_matmul_glu_id_xq) on stacked experts x: every
 * slot's hidden row and its int8 form byte for byte the per-expert fused
 * GEMV's (clf_matmul_glu_xq on that expert's part), as cl/matmul_cpu.cl
 * says (both kernels take GLU_SUMS); 3 rows of k random distinct experts.
 * Returns 0 (and checks nothing) where the device has no fused gated unit
 * for the type. */
static int check_glu_id_exact(experts *x, uint64_t *s) {
    clf_runtime *rt = tu_runtime();
    if (!x->use_stack || !clf_matmul_fuses_glu(rt, &x->ex[0].gu[0])) return 0;
    const int n = 3, k = x->k, d = x->d, ff = x->ff, slots = n * k;
    float *xn = malloc((size_t)n * d * sizeof *xn), *got = malloc((size_t)slots * ff * sizeof *got);
    float *gotq = malloc((size_t)slots * CLF_XQ_FLOATS(ff) * sizeof *gotq), *one = malloc((size_t)ff * sizeof *one);
    float *oneq = malloc((size_t)CLF_XQ_FLOATS(ff) * sizeof *oneq);
    int32_t *ids = malloc((size_t)slots * sizeof *ids);
    for (int i = 0; i < n * d; i++) xn[i] = tu_normal(s);
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = (int)(tu_next(s) % (uint64_t)x->E), dup = 0;
                for (int i = 0; i < j; i++) dup |= ids[r * k + i] == e;
            } while (dup);
            ids[r * k + j] = e;
        }
    clf_tensor txn, xq, tid, hid, hidq, f, fq;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, d, n, &txn));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(d), n, &xq));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, k, n, &tid));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, ff, slots, &hid));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(ff), slots, &hidq));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, ff, 1, &f));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(ff), 1, &fq));
    TU_OK(clf_tensor_upload(rt, &txn, xn, (size_t)n * d * sizeof *xn));
    TU_OK(clf_tensor_upload(rt, &tid, ids, (size_t)slots * sizeof *ids));
    TU_OK(clf_quantize_x(rt, &txn, &xq));
    TU_OK(clf_matmul_glu_id_xq(rt, &x->gu_stack, x->E, CLF_GLU_SILU, &xq, &tid, k, NULL, &hid, &hidq));
    TU_OK(clf_tensor_download(rt, &hid, got, (size_t)slots * ff * sizeof *got));
    TU_OK(clf_tensor_download(rt, &hidq, gotq, (size_t)slots * CLF_XQ_FLOATS(ff) * sizeof *gotq));
    for (int sl = 0; sl < slots; sl++) {
        const clf_tensor xr = clf_tensor_rows(&xq, sl / k, 1);
        TU_OK(clf_matmul_glu_xq(rt, &x->ex[ids[sl]].gu[0], CLF_GLU_SILU, &xr, &f, &fq));
        TU_OK(clf_tensor_download(rt, &f, one, (size_t)ff * sizeof *one));
        TU_OK(clf_tensor_download(rt, &fq, oneq, (size_t)CLF_XQ_FLOATS(ff) * sizeof *oneq));
        if (memcmp(one, got + (size_t)sl * ff, (size_t)ff * sizeof *one) ||
            memcmp(oneq, gotq + (size_t)sl * CLF_XQ_FLOATS(ff), (size_t)CLF_XQ_FLOATS(ff) * sizeof *oneq))
            fail_msg("%s: slot %d (expert %d): the indirect gated unit differs from the per-expert GEMV's row "
                     "(replay: CLINFER_SEED=%llu)", clf_type_get(x->type)->name, sl, ids[sl],
                     (unsigned long long)tu_seed());
    }
    clf_tensor_free(&txn), clf_tensor_free(&xq), clf_tensor_free(&tid), clf_tensor_free(&hid);
    clf_tensor_free(&hidq), clf_tensor_free(&f), clf_tensor_free(&fq);
    free(xn), free(got), free(gotq), free(one), free(oneq), free(ids);
    return 1;
}

/* Stacked experts' decode (the indirect GEMVs: no readback, two launches)
 * against the reference, several rows batched = each alone bit for bit,
 * and near the per-expert path's (the same sums, added in another order).
 * oss: gpt-oss's experts (biases inside the indirect kernels, its unit and
 * routing). */
static void run_stacked(clf_type type, int d, int ff, double tol, int want_stacked, int oss) {
    uint64_t s = tu_seed() + 7 * (uint64_t)type + 131 * (uint64_t)oss;
    experts x;
    const int stacked = experts_make_stacked(&x, 8, 3, d, ff, type, &s);
    if (oss) experts_oss(&x, &s);
    print_message("  %s%s d %d ff %d on %s: experts %s\n", clf_type_get(type)->name, oss ? " gpt-oss" : "", d, ff,
                  clf_matmul_variant(tu_runtime()), stacked ? "stacked (indirect decode)" : "apart (no indirect GEMV here)");
    if (want_stacked >= 0) assert_int_equal(stacked, want_stacked);
    if (!oss && check_glu_id_exact(&x, &s)) print_message("  indirect gated unit = per-expert GEMV: byte for byte\n");
    check_ffn(&x, 1, 1, -1, &s, tol, 0);   /* one decode row */
    check_ffn(&x, 40, 40, -1, &s, tol, 1); /* serve's streams: every expert picked */
    check_ffn(&x, 6, 6, 5, &s, tol, 0);    /* every row picks expert 5 */
    check_ffn(&x, 9, 2, -1, &s, tol, 0);   /* decode rows beside a prompt: the grouping */
    /* batched = alone, and the stacked path near the per-expert one (decode rows from int8 forms: whole blocks) */
    if (d % 32 || ff % 32) {
        experts_free(&x);
        return;
    }
    const int n = 7;
    float *xn = malloc((size_t)n * d * sizeof *xn), *x0 = malloc((size_t)n * d * sizeof *x0);
    float *all = malloc((size_t)n * d * sizeof *all), *one = malloc((size_t)d * sizeof *one);
    float *apart = malloc((size_t)n * d * sizeof *apart);
    for (int i = 0; i < n * d; i++) xn[i] = tu_normal(&s), x0[i] = tu_normal(&s);
    ffn_decode(&x, n, xn, x0, all);
    double *ref = malloc((size_t)n * d * sizeof *ref), err1 = 0;
    for (int r = 0; r < n; r++) {
        /* the F32 router's batched rows differ from its lone ones in the last bits (test_batched), so the
         * weights may too: near, not bit for bit */
        ffn_decode(&x, 1, xn + (size_t)r * d, x0 + (size_t)r * d, one);
        for (int c = 0; c < d; c++) ref[(size_t)r * d + c] = one[c];
    }
    err1 = tu_rel_err(all, ref, (size_t)n * d);
    const int use = x.use_stack;
    x.use_stack = 0;
    ffn_decode(&x, n, xn, x0, apart);
    x.use_stack = use;
    for (int i = 0; i < n * d; i++) ref[i] = apart[i];
    const double err = tu_rel_err(all, ref, (size_t)n * d);
    print_message("  batched vs alone: rel %.2e; stacked vs per-expert path: rel %.2e (tol 1e-5 each)\n", err1, err);
    if (!(err1 <= 1e-5)) fail_msg("batched vs alone %.3g (replay: CLINFER_SEED=%llu)", err1, (unsigned long long)tu_seed());
    if (!(err <= 1e-5)) fail_msg("stacked vs per-expert %.3g (replay: CLINFER_SEED=%llu)", err, (unsigned long long)tu_seed());
    free(ref);
    free(xn), free(x0), free(all), free(one), free(apart);
    experts_free(&x);
}

static void test_ffn_stacked(void **state) {
    (void)state;
    /* each variant stacks where its int8 GEMVs run (the cpu one on x86 PoCL; the gpu one where the
     * tuning's int8_gemv says) */
    static const char *const tunes[] = {NULL, "matmul=gpu"};
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        clf_runtime *rt = tu_runtime();
        const int int8 = clf_matmul_quantizes_x(rt, &(clf_weight){.type = CLF_Q8_0, .layout = rt->tune.matmul}, 1);
        run_stacked(CLF_Q8_0, 64, 96, 2e-2, int8, 0);
        run_stacked(CLF_Q4_0, 96, 64, 3e-2, int8, 0);
        run_stacked(CLF_Q4_K, 256, 256, 3e-2, int8, 0);
        run_stacked(CLF_F32, 48, 40, 1e-5, 0, 0); /* no int8 GEMV (and ff not whole blocks of 32): apart */
        /* gpt-oss: MXFP4 experts (its file's), biased, through the same indirect kernels */
        const int int8_mx = clf_matmul_quantizes_x(rt, &(clf_weight){.type = CLF_MXFP4, .layout = rt->tune.matmul}, 1);
        run_stacked(CLF_MXFP4, 64, 64, 3e-2, int8_mx, 1);
        run_stacked(CLF_Q8_0, 64, 96, 2e-2, int8, 1);
    }
    tu_tune(NULL);
}

/* The experts' groups' products (clf_matmul_cols_tile: a long prompt's
 * kernel whatever the rows, so a first prompt builds no kernel per group
 * size) equal clf_matmul_cols's rows bit for bit, for every count from one
 * row (the GEMM, not the GEMV) past the tile classes (2, 4, 8, 12). */
static void test_group_tile(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    static const clf_type types[] = {CLF_Q4_K, CLF_Q8_0, CLF_MXFP4, CLF_F32};
    const int rows = 96, K = 256, nmax = 14;
    uint64_t s = tu_seed() ^ 0x711e;
    float *x = malloc((size_t)nmax * K * sizeof *x), *deq = malloc((size_t)rows * K * sizeof *deq);
    float *a = malloc((size_t)nmax * rows * sizeof *a), *b = malloc((size_t)nmax * rows * sizeof *b);
    for (int i = 0; i < nmax * K; i++) x[i] = tu_normal(&s);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        clf_weight w;
        rand_weight(types[t], rows, K, 1.0f / sqrtf((float)K), &s, deq, &w);
        int differ = 0;
        for (int n = 1; n <= nmax; n++) {
            clf_tensor tx, ta, tb;
            TU_OK(clf_tensor_alloc(rt, CLF_F32, K, n, &tx));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, rows, n, &ta));
            TU_OK(clf_tensor_alloc(rt, CLF_F32, rows, n, &tb));
            TU_OK(clf_tensor_upload(rt, &tx, x, (size_t)n * K * sizeof *x));
            TU_OK(clf_matmul_cols(rt, &w, &tx, &ta, 0, 0));
            TU_OK(clf_matmul_cols_tile(rt, &w, &tx, &tb, 0, 0, CLF_MATMUL_TILE_LONG));
            TU_OK(clf_tensor_download(rt, &ta, a, (size_t)n * rows * sizeof *a));
            TU_OK(clf_tensor_download(rt, &tb, b, (size_t)n * rows * sizeof *b));
            if (memcmp(a, b, (size_t)n * rows * sizeof *a)) differ = n;
            clf_tensor_free(&tx), clf_tensor_free(&ta), clf_tensor_free(&tb);
        }
        print_message("  %s %d x %d on %s: 1-%d rows, the long prompt's kernel = the sized one: %s\n",
                      clf_type_get(types[t])->name, rows, K, clf_matmul_variant(rt), nmax, differ ? "no" : "bit for bit");
        if (differ) fail_msg("%s: %d rows differ (replay: CLINFER_SEED=%llu)", clf_type_get(types[t])->name, differ,
                             (unsigned long long)tu_seed());
        clf_weight_free(&w);
    }
    free(x), free(deq), free(a), free(b);
}

/* ---- tiny models ---------------------------------------------------------------- */

static const tiny_model QWEN3MOE = {.arch = "qwen3moe", .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 32,
                                    .n_ff = 64, .n_vocab = 97, .type = CLF_F32, .n_embd = 64, .n_expert = 8,
                                    .n_expert_used = 3, .n_ff_exp = 24};
/* gpt-oss: 4 layers (even ones through a window of 4 the sequences outgrow), sinks, biases, YaRN */
static const tiny_model GPTOSS = {.arch = "gpt-oss", .n_layer = 4, .n_head = 2, .n_head_kv = 1, .head_dim = 32,
                                  .n_ff = 64, .n_vocab = 97, .type = CLF_F32, .n_embd = 64, .n_expert = 8,
                                  .n_expert_used = 4, .n_ff_exp = 40, .window = 4};
static const tiny_model MIXTRAL = {.arch = "llama", .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 32,
                                   .n_ff = 40, .n_vocab = 97, .type = CLF_F32, .n_expert = 8, .n_expert_used = 2};

static void write_tiny(const tiny_model *tm, char *path) {
    strcpy(path, "/tmp/clinfer-moe-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(tm, tu_seed() + (uint64_t)tm->type, path), 0);
}

/* Three sequences: A prefilled alone, then a batch of A's decode row, B's
 * 9-token prompt and C's first token, then 3 decode steps of all three,
 * against each alone (to tol), and each alone against the scalar
 * reference (to tol_ref; < 0: the reference has no such family, gpt-oss,
 * whose logits test_model_peer checks against llama.cpp's). */
static void check_batched(const tiny_model *tm, double tol, double tol_ref) {
    char path[32];
    write_tiny(tm, path);
    clf_gguf *g;
    clf_llama *m;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    const int V = tm->n_vocab, S = 3, T = 16;
    int32_t toks[3][16];
    uint64_t r = tu_seed() ^ 0x3e;
    for (int s = 0; s < S; s++)
        for (int i = 0; i < T; i++) toks[s][i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    static const int hist[3] = {6, 0, 0}, first[3] = {1, 9, 1};
    float *got = malloc((size_t)S * 4 * V * sizeof *got), *want = malloc((size_t)S * 4 * V * sizeof *want);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(m, 32, 16, S, CLF_F32, &c));
    clf_llama_seq_batch a = {.seq = 0, .tokens = toks[0], .n = hist[0]};
    TU_OK(clf_llama_eval_seqs(c, &a, 1));
    for (int step = 0; step < 4; step++) {
        clf_llama_seq_batch b[3];
        for (int s = 0; s < S; s++) {
            const int at = clf_llama_seq_len(c, s);
            b[s] = (clf_llama_seq_batch){.seq = s, .tokens = toks[s] + at, .n = step ? 1 : first[s],
                                         .logits = got + ((size_t)s * 4 + step) * V};
        }
        TU_OK(clf_llama_eval_seqs(c, b, S));
    }
    clf_llama_ctx_free(c);
    double err = 0, err_ref = 0;
    for (int s = 0; s < S; s++) {
        TU_OK(clf_llama_ctx_create(m, 32, 16, CLF_F32, &c));
        float *w = want + (size_t)s * 4 * V;
        if (hist[s]) TU_OK(clf_llama_eval(c, toks[s], hist[s], 0, NULL));
        TU_OK(clf_llama_eval(c, toks[s] + hist[s], first[s], 0, w));
        for (int step = 1; step < 4; step++) TU_OK(clf_llama_eval(c, toks[s] + c->n_past, 1, 0, w + (size_t)step * V));
        clf_llama_ctx_free(c);
        const double e = tu_rel_err_f(got + (size_t)s * 4 * V, w, (size_t)4 * V);
        err = e > err ? e : err;
        /* the scalar reference's logits of the same positions */
        if (tol_ref < 0) continue;
        const int n = hist[s] + first[s] + 3;
        double *ref = malloc((size_t)n * V * sizeof *ref);
        assert_int_equal(ref_llama_forward(g, toks[s], n, ref), 0);
        for (int step = 0; step < 4; step++) {
            const int pos = hist[s] + first[s] - 1 + step;
            const double er = tu_rel_err(w + (size_t)step * V, ref + (size_t)pos * V, (size_t)V);
            err_ref = er > err_ref ? er : err_ref;
        }
        free(ref);
    }
    print_message("  %s%s %s (%d experts, %d used): batched vs alone %.2e (tol %.0e), alone vs reference %.2e (tol %.0e)\n",
                  tm->arch, strcmp(tm->arch, "llama") ? "" : " (Mixtral)", clf_type_get(tm->type)->name, tm->n_expert,
                  tm->n_expert_used, err, tol, err_ref, tol_ref);
    assert_true(err <= tol);
    assert_true(tol_ref < 0 || err_ref <= tol_ref);
    free(got);
    free(want);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

static void test_batched(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=gpu"};
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        print_message(" %s variant\n", clf_matmul_variant(tu_runtime()));
        check_batched(&QWEN3MOE, 1e-5, 1e-4);
        check_batched(&MIXTRAL, 1e-5, 1e-4);
        check_batched(&GPTOSS, 1e-5, -1);
        /* quantized experts, each one's rows sliced from the stacked tensor in whole blocks: batched =
         * alone still (a decode row's products are the GEMV's batched or not). Against the reference
         * the decode GEMVs' int8 activations round (~1e-2), and a router near-tie they tip picks
         * another expert now and then (measured up to 0.2 over seeds): the bound only catches a wrong
         * slice (another expert's rows: logits uncorrelated, ~1.4) */
        tiny_model q = QWEN3MOE;
        q.type = CLF_Q8_0, q.n_ff_exp = 32;
        check_batched(&q, 1e-5, 0.5);
    }
    tu_tune(NULL);
}

/* ---- gpt-oss with MXFP4 weights ------------------------------------------------------ */

/* `src` with every quantized tensor dequantized to F32 (its own dequantization, bit for bit). */
static void write_dequantized(const char *src, const char *dst) {
    clf_gguf *g;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_open(src, &g));
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) TU_OK(clf_gguf_set_kv(w, clf_gguf_kv_at(g, i)));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        float *x = malloc((size_t)n * sizeof *x);
        clf_dequantize(t->type, t->data, x, n);
        TU_OK(clf_gguf_add_tensor(w, name, CLF_F32, t->n_dims, t->ne, x));
        free(x);
    }
    TU_OK(clf_gguf_write(w, dst));
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
}

/* A prompt of 12 and 4 decode steps: the last logits of each [5 × V]. */
static void oss_logits(const char *path, const int32_t *toks, float *out, int V) {
    clf_gguf *g;
    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_llama_ctx_create(m, 32, 16, CLF_F32, &c));
    TU_OK(clf_llama_eval(c, toks, 12, 0, out));
    for (int i = 1; i < 5; i++) TU_OK(clf_llama_eval(c, toks + 11 + i, 1, 0, out + (size_t)i * V));
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
}

/* A tiny gpt-oss whose matrices are MXFP4 (the token embedding Q8_0), as
 * the real files' experts are, against the same file dequantized to F32,
 * on both variants: MXFP4's products take int8 activations on both (the
 * cpu panels' and the gpu's xq_chunk_mxfp4), which round (measured 1.4e-2
 * and 2.1e-2), and a router near-tie that rounding tips picks another
 * expert now and then (test_batched's Q8_0 qwen3moe: up to 0.2 over
 * seeds): the bound catches a wrong block layout or scale, whose logits
 * are unrelated. */
static void test_mxfp4(void **state) {
    (void)state;
    tiny_model tm = GPTOSS;
    tm.type = CLF_MXFP4, tm.embd_q8_0 = 1, tm.n_ff_exp = 64; /* rows of whole 32-weight blocks */
    char q[32], f[] = "/tmp/clinfer-moe-f32-XXXXXX";
    write_tiny(&tm, q);
    int fd = mkstemp(f);
    assert_true(fd >= 0);
    close(fd);
    write_dequantized(q, f);
    const int V = tm.n_vocab;
    int32_t toks[16];
    uint64_t r = tu_seed() ^ 0x4f;
    for (int i = 0; i < 16; i++) toks[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *a = malloc((size_t)5 * V * sizeof *a), *b = malloc((size_t)5 * V * sizeof *b);
    static const char *const tunes[] = {NULL, "matmul=gpu"};
    static const double tol[] = {0.5, 0.5};
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        oss_logits(q, toks, a, V);
        oss_logits(f, toks, b, V);
        const double err = tu_rel_err_f(a, b, (size_t)5 * V);
        print_message("  %s variant: MXFP4 gpt-oss against its F32 dequantization: rel err %.2e (tol %.0e)\n",
                      clf_matmul_variant(tu_runtime()), err, tol[t]);
        assert_true(err <= tol[t]);
    }
    tu_tune(NULL);
    free(a);
    free(b);
    unlink(q);
    unlink(f);
}

/* ---- estimates -------------------------------------------------------------------- */

/* The device bytes of the weights and of a context as estimated, exactly;
 * a token's weights read count its chosen experts only. */
static void check_memory(const tiny_model *tm) {
    char path[32];
    write_tiny(tm, path);
    clf_gguf *g;
    clf_model_shape s;
    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    assert_int_equal(s.n_expert, tm->n_expert);
    assert_int_equal(s.n_expert_used, tm->n_expert_used);
    const int64_t fe = strcmp(tm->arch, "llama") ? tm->n_ff_exp : tm->n_ff;
    assert_int_equal(s.n_ff_exp, fe);
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_llama_ctx_create(m, 256, 64, CLF_F16, &c));
    const double weights = clf_device_weight_bytes(&s), kv = clf_kv_cache_bytes(&s, 256, 64, 2);
    const double scratch = clf_scratch_bytes(&s, 64);
    const double xq = (double)(clf_tensor_bytes(&c->xq_e) + clf_tensor_bytes(&c->xq_f) + clf_tensor_bytes(&c->xq_a));
    print_message("  %s: weights %zu (estimate %.0f), context %zu (estimate %.0f)\n", tm->arch, m->device_bytes, weights,
                  c->device_bytes, kv + scratch - clf_xq_bytes(&s) + xq);
    /* GGUF layout (gpu): the bytes as stored; the cpu's panels pad an expert's rows to whole panels,
     * which these odd widths (24, 40) are not (a real model's, 768 or 14336, are) */
    if (clf_weight_host_layout(tu_runtime()))
        assert_true((double)m->device_bytes >= weights && (double)m->device_bytes <= 1.25 * weights);
    else
        assert_true((double)m->device_bytes == weights);
    assert_true((double)c->device_bytes == kv + scratch - clf_xq_bytes(&s) + xq);
    /* a token reads the router and its chosen experts of each layer (F32 weights) */
    const clf_params p = clf_estimate_params(&s);
    /* gpt-oss: the router's bias and an expert's three biases too */
    const int oss = !strcmp(tm->arch, "gpt-oss");
    const double expert = 3.0 * s.n_embd * fe * 4.0 + (oss ? 4.0 * (2 * fe + s.n_embd) : 0);
    const double router = 4.0 * tm->n_expert * s.n_embd + (oss ? 4.0 * tm->n_expert : 0);
    const double read = p.bytes[CLF_GROUP_ATTN] + p.bytes[CLF_GROUP_NORM] + 4.0 * s.n_vocab * s.n_embd + 4.0 * s.n_embd +
                        (double)s.n_layer * (router + tm->n_expert_used * expert);
    assert_true(fabs(clf_weight_bytes_read(&s) - read) < 1.0);
    assert_true(p.bytes[CLF_GROUP_MLP] == (double)s.n_layer * (router + tm->n_expert * expert));
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

static void test_memory(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=gpu"};
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        check_memory(&QWEN3MOE);
        check_memory(&MIXTRAL);
        check_memory(&GPTOSS);
    }
    tu_tune(NULL);
}

/* ---- keys and tensors out of range ------------------------------------------------ */

/* `src` copied to `dst` with key `key` set to v (absent: v < 0) and tensor
 * `drop` left out (NULL: none), or `reshape` written as [ne0 - 1, ...]. */
static void rewrite(const char *src, const char *dst, const char *key, long v, const char *drop, const char *reshape) {
    clf_gguf *g;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_open(src, &g));
    TU_OK(clf_gguf_writer_create(&w));
    for (int64_t i = 0; i < clf_gguf_n_kv(g); i++) {
        const clf_gguf_kv *kv = clf_gguf_kv_at(g, i);
        if (key && kv->key.len == strlen(key) && !memcmp(kv->key.ptr, key, kv->key.len)) continue;
        TU_OK(clf_gguf_set_kv(w, kv));
    }
    if (key && v >= 0) TU_OK(clf_gguf_set_u32(w, key, (uint32_t)v));
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        if (drop && !strcmp(name, drop)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (reshape && !strcmp(name, reshape)) ne[1] -= 1, ne[2] += 0; /* fewer rows per expert: the data still fits */
        TU_OK(clf_gguf_add_tensor(w, name, t->type, t->n_dims, ne, t->data));
    }
    TU_OK(clf_gguf_write(w, dst));
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
}

/* Loading `path` fails with a format error whose message holds `want`. */
static void expect_format(const char *path, const char *want) {
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_llama_hparams hp;
    const clf_status st = clf_llama_hparams_read(g, &hp);
    print_message("  %s\n", clf_last_error());
    assert_int_equal(st, CLF_ERR_FORMAT);
    if (!strstr(clf_last_error(), want)) fail_msg("'%s' does not say '%s'", clf_last_error(), want);
    clf_gguf_close(g);
}

/* The estimates' shape of `path` (clinfer info, placement: read before
 * the loader's checks). */
static clf_model_shape shape_of(const char *path) {
    clf_gguf *g;
    clf_model_shape s;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    clf_gguf_close(g);
    return s;
}

static void test_bad_keys(void **state) {
    (void)state;
    char q[32], mx[32], bad[] = "/tmp/clinfer-moe-bad-XXXXXX";
    write_tiny(&QWEN3MOE, q);
    write_tiny(&MIXTRAL, mx);
    int fd = mkstemp(bad);
    assert_true(fd >= 0);
    close(fd);
    rewrite(q, bad, "qwen3moe.expert_count", 0, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_count = 0");
    rewrite(q, bad, "qwen3moe.expert_count", -1, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_count is missing");
    rewrite(q, bad, "qwen3moe.expert_count", 2000, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_count = 2000");
    /* the estimates read a count out of range as absent (estimate.c): dense here, where 2^32 - 1
     * experts times a 2^32 - 1 expert_feed_forward_length overflowed clf_estimate_params' int64 */
    assert_int_equal(shape_of(bad).n_expert, 0);
    rewrite(q, bad, "qwen3moe.expert_count", 4294967295L, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_count = 4294967295");
    const clf_model_shape big = shape_of(bad);
    assert_int_equal(big.n_expert, 0);
    assert_true(clf_estimate_params(&big).count[CLF_GROUP_MLP] > 0);
    rewrite(q, bad, "qwen3moe.expert_used_count", 9, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_used_count = 9");
    assert_int_equal(shape_of(bad).n_expert_used, 1);
    rewrite(q, bad, "qwen3moe.expert_feed_forward_length", 4294967295L, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_feed_forward_length = 4294967295");
    assert_true(shape_of(bad).n_ff_exp <= 1 << 30);
    rewrite(q, bad, "qwen3moe.expert_used_count", 0, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_used_count = 0");
    rewrite(q, bad, "qwen3moe.expert_used_count", -1, NULL, NULL);
    expect_format(bad, "qwen3moe.expert_used_count is missing");
    rewrite(q, bad, "qwen3moe.expert_count", 9, NULL, NULL); /* the tensors hold 8 */
    expect_format(bad, "blk.0.ffn_gate_inp.weight has shape");
    rewrite(q, bad, NULL, 0, "blk.1.ffn_down_exps.weight", NULL);
    expect_format(bad, "blk.1.ffn_down_exps.weight is missing");
    rewrite(q, bad, NULL, 0, NULL, "blk.0.ffn_up_exps.weight");
    expect_format(bad, "blk.0.ffn_up_exps.weight has shape");
    rewrite(mx, bad, "llama.expert_used_count", 65, NULL, NULL);
    expect_format(bad, "llama.expert_used_count = 65");
    rewrite(mx, bad, NULL, 0, "blk.0.ffn_gate_inp.weight", NULL);
    expect_format(bad, "blk.0.ffn_gate_inp.weight is missing");
    /* llama with expert_count 0 is dense: the experts' tensors are no FFN of it */
    rewrite(mx, bad, "llama.expert_count", 0, NULL, NULL);
    expect_format(bad, "blk.0.ffn_up.weight is missing");
    /* a family whose layers have no expert step (qwen3, dense) with experts is refused, where it
     * loaded as a MoE that skipped the family's own FFN parts (Gemma 3's post-FFN norm) */
    char d[32];
    const tiny_model qwen3 = {.arch = "qwen3", .n_layer = 1, .n_head = 2, .n_head_kv = 1, .head_dim = 32,
                              .n_ff = 64, .n_vocab = 97, .type = CLF_F32, .n_embd = 64};
    write_tiny(&qwen3, d);
    rewrite(d, bad, "qwen3.expert_count", 8, NULL, NULL);
    expect_format(bad, "qwen3.expert_count = 8: a qwen3 file with experts is not supported");
    rewrite(d, bad, "qwen3.expert_count", 0, NULL, NULL); /* 0: dense, as before */
    clf_gguf *dg;
    TU_OK(clf_gguf_open(bad, &dg));
    clf_llama_hparams dhp;
    TU_OK(clf_llama_hparams_read(dg, &dhp));
    assert_int_equal(dhp.n_expert, 0);
    clf_gguf_close(dg);
    unlink(d);
    /* gpt-oss: its window, YaRN's context, its sinks, biases and FFN norm */
    char o[32];
    write_tiny(&GPTOSS, o);
    rewrite(o, bad, "gpt-oss.attention.sliding_window", -1, NULL, NULL);
    expect_format(bad, "gpt-oss.attention.sliding_window");
    rewrite(o, bad, "gpt-oss.attention.sliding_window", 0, NULL, NULL);
    expect_format(bad, "gpt-oss.attention.sliding_window' is 0");
    rewrite(o, bad, "gpt-oss.rope.scaling.original_context_length", 0, NULL, NULL);
    expect_format(bad, "gpt-oss.rope.scaling.original_context_length = 0 is out of range");
    rewrite(o, bad, "gpt-oss.expert_feed_forward_length", 0, NULL, NULL);
    expect_format(bad, "gpt-oss.expert_feed_forward_length = 0 is out of range");
    rewrite(o, bad, NULL, 0, "blk.1.attn_sinks.weight", NULL);
    expect_format(bad, "blk.1.attn_sinks.weight is missing");
    rewrite(o, bad, NULL, 0, "blk.2.attn_output.bias", NULL);
    expect_format(bad, "blk.2.attn_output.bias is missing");
    rewrite(o, bad, NULL, 0, "blk.0.ffn_gate_inp.bias", NULL);
    expect_format(bad, "blk.0.ffn_gate_inp.bias is missing");
    rewrite(o, bad, NULL, 0, "blk.3.ffn_up_exps.bias", NULL);
    expect_format(bad, "blk.3.ffn_up_exps.bias is missing");
    rewrite(o, bad, NULL, 0, NULL, "blk.0.ffn_down_exps.bias");
    expect_format(bad, "blk.0.ffn_down_exps.bias has shape");
    rewrite(o, bad, NULL, 0, "blk.0.post_attention_norm.weight", NULL);
    expect_format(bad, "blk.0.post_attention_norm.weight is missing");
    unlink(o);
    unlink(q);
    unlink(mx);
    unlink(bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_route), cmocka_unit_test(test_ffn_f32),
                                       cmocka_unit_test(test_ffn_q8_0), cmocka_unit_test(test_ffn_stacked),
                                       cmocka_unit_test(test_ffn_oss), cmocka_unit_test(test_group_tile),
                                       cmocka_unit_test(test_batched),
                                       cmocka_unit_test(test_mxfp4),
                                       cmocka_unit_test(test_memory), cmocka_unit_test(test_bad_keys)};
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

/* Launchers of the small kernels (host/compute/ops.h): cl/quant.cl, cl/norm.cl,
 * cl/rope.cl, cl/elementwise.cl. Each validates shapes, sets arguments and
 * enqueues through clf_launch without waiting. */
#include "ops.h"

#include "matmul.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Local size of the flat kernels (dim 0). Fixed, because a driver like PoCL
 * compiles a kernel once per local size; global sizes are rounded up to it
 * and the kernels return past the end. */
#define EW_LOCAL 64
/* Tokens per work-group of the RoPE kernels (dim 1). */
#define ROPE_LOCAL 8


static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

static int64_t elems_of(const clf_tensor *t) { return t->ne[0] * clf_tensor_nrows(t); }

static int same_shape(const clf_tensor *a, const clf_tensor *b) {
    for (int i = 0; i < 4; i++)
        if (a->ne[i] != b->ne[i]) return 0;
    return 1;
}

/* An F32 tensor's offset in floats, for the kernels' pointer arithmetic. */
static clf_status f32_offset(const clf_tensor *t, const char *what, cl_ulong *off) {
    if (t->type != CLF_F32) return clf_fail(CLF_ERR_ARG, "%s must be F32 (got type %u)", what, (unsigned)t->type);
    if (t->offset % sizeof(float))
        return clf_fail(CLF_ERR_ARG, "%s: offset %zu is not a multiple of 4 bytes", what, t->offset);
    if (t->ne[0] > INT_MAX) return clf_fail(CLF_ERR_ARG, "%s: row of %lld elements is too long", what, (long long)t->ne[0]);
    *off = t->offset / sizeof(float);
    return CLF_OK;
}

/* Work-items per row of the row-reduction kernels (cl/norm.cl) for rows of
 * n: one SIMD thread per row on a CPU ("cpu"); elsewhere ("gpu") a group
 * of 64 lanes, 256 for long rows (a vocabulary) whose single group would
 * otherwise walk the row serially. The device's tuning picks (rt->tune.ops;
 * CLINFER_OPS_VARIANT=cpu|gpu forces one, so tests run both on one device). */
static int row_wg(const clf_runtime *rt, int64_t n) {
    if (rt->tune.ops == CLF_SHAPE_CPU) return 1;
    int wg = n >= 8192 ? 256 : 64;
    while (wg > 1 && (size_t)wg > rt->dev.max_work_group) wg /= 2;
    return wg;
}

/* ---- dequantize / get_rows (cl/quant.cl) ------------------------------- */

/* cl/quant.cl has get_rows_<suffix> for every type clinfer reads. */
static const char *deq_kernel(clf_type t, char *buf, size_t n) {
    const clf_type_info *ti = clf_type_get(t);
    if (!ti) return NULL;
    snprintf(buf, n, "get_rows_%s", ti->suffix);
    return buf;
}

/* out rows i < n are table rows ids[i] (or row i when ids is NULL). */
static clf_status rows_launch(clf_runtime *rt, const clf_tensor *table, cl_mem ids, size_t n, clf_tensor *out) {
    char buf[32];
    const char *name = deq_kernel(table->type, buf, sizeof buf);
    if (!name || !clf_tensor_row_bytes(table))
        return clf_fail(CLF_ERR_ARG, "cannot dequantize type %u with rows of %lld", (unsigned)table->type,
                        (long long)table->ne[0]);
    cl_ulong dst_off;
    CLF_TRY(f32_offset(out, "dequantize output", &dst_off));
    if (n == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "quant", "", name, &k));
    cl_ulong src_off = table->offset, row_bytes = clf_tensor_row_bytes(table);
    cl_int ne0 = (cl_int)table->ne[0];
    clf_arg a[] = {CLF_ARG(table->mem), CLF_ARG(src_off), CLF_ARG(row_bytes), CLF_ARG(ids), CLF_ARG(out->mem), CLF_ARG(dst_off), CLF_ARG(ne0)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)(ne0 + 31) / 32, EW_LOCAL), n}, local[2] = {EW_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_dequantize_dev(clf_runtime *rt, const clf_tensor *src, clf_tensor *dst) {
    if (src->ne[0] != dst->ne[0] || clf_tensor_nrows(src) != clf_tensor_nrows(dst))
        return clf_fail(CLF_ERR_ARG, "dequantize: source %lld x %lld and destination %lld x %lld differ",
                        (long long)src->ne[0], (long long)clf_tensor_nrows(src), (long long)dst->ne[0],
                        (long long)clf_tensor_nrows(dst));
    return rows_launch(rt, src, NULL, (size_t)clf_tensor_nrows(src), dst);
}

clf_status clf_get_rows(clf_runtime *rt, const clf_tensor *table, cl_mem ids, int n, clf_tensor *out) {
    if (n < 0 || !ids) return clf_fail(CLF_ERR_ARG, "get_rows: %d ids in buffer %p", n, (void *)ids);
    if (out->ne[0] != table->ne[0] || clf_tensor_nrows(out) < n)
        return clf_fail(CLF_ERR_ARG, "get_rows: output %lld x %lld cannot hold %d rows of %lld",
                        (long long)out->ne[0], (long long)clf_tensor_nrows(out), n, (long long)table->ne[0]);
    return rows_launch(rt, table, ids, (size_t)n, out);
}

/* ---- RMSNorm and softmax (cl/norm.cl) ----------------------------------- */

static clf_status row_kernel(clf_runtime *rt, const char *name, int64_t n, cl_kernel *k, size_t *local) {
    char opts[32];
    int wg = row_wg(rt, n);
    snprintf(opts, sizeof opts, "-DCLF_ROW_WG=%d", wg);
    *local = (size_t)wg;
    return clf_kernel_get(rt, "norm", opts, name, k);
}

/* Rows of n at x_off + (r / heads) * x_stride + (r % heads) * n, likewise in
 * y; heads below split weighted by w, the others by w2. */
typedef struct norm_rows {
    cl_mem x, y;
    cl_ulong x_off, y_off, w_off, w2_off;
    int x_stride, y_stride, n, heads, split, acc;
    const clf_tensor *w, *w2;
    size_t rows;
    cl_mem xq; /* the first xq_rows rows quantized too, from byte xq_off; NULL: none */
    cl_ulong xq_off;
    int xq_rows;
} norm_rows;

static clf_status rmsnorm_launch(clf_runtime *rt, const norm_rows *r, float eps) {
    if (!(eps >= 0)) return clf_fail(CLF_ERR_ARG, "rmsnorm: eps %g must be >= 0", eps);
    if (r->rows == 0) return CLF_OK;
    cl_kernel k;
    size_t local;
    CLF_TRY(row_kernel(rt, "rmsnorm_f32", r->n, &k, &local));
    clf_arg a[] = {CLF_ARG(r->x),        CLF_ARG(r->x_off), CLF_ARG(r->x_stride), CLF_ARG(r->w->mem), CLF_ARG(r->w_off),
                   CLF_ARG(r->w2->mem),  CLF_ARG(r->w2_off), CLF_ARG(r->y),       CLF_ARG(r->y_off),  CLF_ARG(r->y_stride),
                   CLF_ARG(r->n),        CLF_ARG(r->heads), CLF_ARG(r->split),    CLF_ARG(eps),       CLF_ARG(r->acc),
                   CLF_ARG(r->xq),       CLF_ARG(r->xq_off), CLF_ARG(r->xq_rows)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global = r->rows * local;
    return clf_launch(rt, k, 1, &global, &local);
}

clf_status clf_rmsnorm(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                       int accumulate) {
    norm_rows r = {.x = x->mem, .y = y->mem, .w = w, .w2 = w, .heads = 1, .split = 1, .acc = accumulate != 0};
    CLF_TRY(f32_offset(x, "rmsnorm input", &r.x_off));
    CLF_TRY(f32_offset(w, "rmsnorm weight", &r.w_off));
    CLF_TRY(f32_offset(y, "rmsnorm output", &r.y_off));
    if (!same_shape(x, y) || elems_of(w) != x->ne[0])
        return clf_fail(CLF_ERR_ARG, "rmsnorm: input %lld x %lld, weight of %lld, output %lld x %lld",
                        (long long)x->ne[0], (long long)clf_tensor_nrows(x), (long long)elems_of(w), (long long)y->ne[0],
                        (long long)clf_tensor_nrows(y));
    r.n = r.x_stride = r.y_stride = (int)x->ne[0];
    r.w2_off = r.w_off;
    r.rows = (size_t)clf_tensor_nrows(x);
    return rmsnorm_launch(rt, &r, eps);
}

/* xq holds the quantized form of rows of n (matmul.h), at most `rows` of
 * them, at a 16-byte aligned offset; *off is its offset in bytes. */
static clf_status xq_check(const char *what, const clf_tensor *xq, int64_t n, int64_t rows, cl_ulong *off) {
    if (xq->type != CLF_F32 || xq->offset % 16 || n % 32 || xq->ne[0] != CLF_XQ_FLOATS(n) ||
        clf_tensor_nrows(xq) > rows)
        return clf_fail(CLF_ERR_ARG, "%s: quantized rows %lld x %lld do not fit %lld rows of %lld (%lld floats each, "
                        "n a multiple of 32)", what, (long long)clf_tensor_nrows(xq), (long long)xq->ne[0],
                        (long long)rows, (long long)n, (long long)CLF_XQ_FLOATS(n));
    *off = xq->offset;
    return CLF_OK;
}

clf_status clf_rmsnorm_xq(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                          const clf_tensor *xq) {
    norm_rows r = {.x = x->mem, .y = y->mem, .w = w, .w2 = w, .heads = 1, .split = 1, .xq = xq->mem};
    CLF_TRY(f32_offset(x, "rmsnorm input", &r.x_off));
    CLF_TRY(f32_offset(w, "rmsnorm weight", &r.w_off));
    CLF_TRY(f32_offset(y, "rmsnorm output", &r.y_off));
    if (!same_shape(x, y) || elems_of(w) != x->ne[0])
        return clf_fail(CLF_ERR_ARG, "rmsnorm: input %lld x %lld, weight of %lld, output %lld x %lld",
                        (long long)x->ne[0], (long long)clf_tensor_nrows(x), (long long)elems_of(w), (long long)y->ne[0],
                        (long long)clf_tensor_nrows(y));
    CLF_TRY(xq_check("rmsnorm", xq, x->ne[0], clf_tensor_nrows(x), &r.xq_off));
    r.n = r.x_stride = r.y_stride = (int)x->ne[0];
    r.w2_off = r.w_off;
    r.rows = (size_t)clf_tensor_nrows(x);
    r.xq_rows = (int)clf_tensor_nrows(xq);
    return rmsnorm_launch(rt, &r, eps);
}

/* n_tokens rows of n_heads x head_dim at col0, row_stride apart, inside x. */
static clf_status heads_check(const char *what, const clf_tensor *x, int n_tokens, int row_stride, int col0,
                              int n_heads, int head_dim) {
    int64_t row_end = (int64_t)col0 + (int64_t)n_heads * head_dim;
    if (n_tokens < 0 || n_heads < 1 || head_dim < 1 || col0 < 0 || row_end > row_stride ||
        (n_tokens > 0 && (int64_t)(n_tokens - 1) * row_stride + row_end > elems_of(x)))
        return clf_fail(CLF_ERR_ARG, "%s: %d tokens of %d heads x %d at column %d, stride %d, exceed the tensor (%lld floats)",
                        what, n_tokens, n_heads, head_dim, col0, row_stride, (long long)elems_of(x));
    return CLF_OK;
}

clf_status clf_rmsnorm_heads(clf_runtime *rt, clf_tensor *x, int n_tokens, int row_stride, int col0, int head_dim,
                             int n_a, const clf_tensor *w_a, int n_b, const clf_tensor *w_b, float eps) {
    if (n_a < 1 || n_b < 0 || (n_b > 0 && !w_b))
        return clf_fail(CLF_ERR_ARG, "rmsnorm_heads: %d + %d heads (a weight for each set)", n_a, n_b);
    norm_rows r = {.x = x->mem, .y = x->mem, .w = w_a, .w2 = n_b ? w_b : w_a, .n = head_dim, .heads = n_a + n_b,
                   .split = n_a, .x_stride = row_stride, .y_stride = row_stride};
    CLF_TRY(f32_offset(x, "rmsnorm_heads input", &r.x_off));
    CLF_TRY(f32_offset(r.w, "rmsnorm_heads weight", &r.w_off));
    CLF_TRY(f32_offset(r.w2, "rmsnorm_heads weight", &r.w2_off));
    CLF_TRY(heads_check("rmsnorm_heads", x, n_tokens, row_stride, col0, n_a + n_b, head_dim));
    if (elems_of(r.w) != head_dim || elems_of(r.w2) != head_dim)
        return clf_fail(CLF_ERR_ARG, "rmsnorm_heads: weights of %lld and %lld for heads of %d", (long long)elems_of(r.w),
                        (long long)elems_of(r.w2), head_dim);
    r.x_off += (cl_ulong)col0;
    r.y_off = r.x_off;
    r.rows = (size_t)n_tokens * (size_t)(n_a + n_b);
    return rmsnorm_launch(rt, &r, eps);
}

clf_status clf_softmax(clf_runtime *rt, clf_tensor *x) {
    cl_ulong x_off;
    CLF_TRY(f32_offset(x, "softmax input", &x_off));
    if (clf_tensor_nrows(x) == 0) return CLF_OK;
    cl_kernel k;
    size_t local;
    CLF_TRY(row_kernel(rt, "softmax_f32", x->ne[0], &k, &local));
    cl_int n = (cl_int)x->ne[0];
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global = (size_t)clf_tensor_nrows(x) * local;
    return clf_launch(rt, k, 1, &global, &local);
}

/* ---- RoPE (cl/rope.cl) --------------------------------------------------- */

/* ggml_rope_yarn_corr_dim: the pair index whose wavelength makes n_rot turns over n_ctx_orig, in float as ggml */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_turns, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

clf_status clf_rope_yarn(clf_rope_params *p, float factor, int n_ctx_orig, float attn_factor, float beta_fast,
                         float beta_slow) {
    if (!(factor > 0) || !isfinite(factor) || n_ctx_orig < 1 || !(attn_factor > 0) || !isfinite(attn_factor) ||
        !(beta_fast > 0) || !(beta_slow > 0) || !(p->base > 1) || p->n_rot < 2)
        return clf_fail(CLF_ERR_ARG, "YaRN: bad parameters (factor %g, original context %d, attn_factor %g, beta %g/%g, "
                        "base %g, n_rot %d)", factor, n_ctx_orig, attn_factor, beta_fast, beta_slow, p->base, p->n_rot);
    p->freq_scale = 1.0f / factor;
    p->ext_factor = 1.0f;
    /* start and end of the ramp (ggml_rope_yarn_corr_dims) */
    const float lo = floorf(yarn_corr_dim(p->n_rot, n_ctx_orig, beta_fast, p->base));
    const float hi = ceilf(yarn_corr_dim(p->n_rot, n_ctx_orig, beta_slow, p->base));
    p->corr_lo = lo > 0 ? lo : 0;
    p->corr_hi = hi < (float)(p->n_rot - 1) ? hi : (float)(p->n_rot - 1);
    /* llama_context: yarn_attn_factor = get_mscale(factor) / (1 + 0.1 ln factor) · attn_factor (the first two
     * cancel above a factor of 1), then rope_yarn multiplies by 1 + 0.1 ln(1 / freq_scale) */
    const float get_mscale = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    const float yarn_attn = get_mscale * (1.0f / (1.0f + 0.1f * logf(factor))) * attn_factor;
    p->mscale = yarn_attn * (1.0f + 0.1f * logf(1.0f / p->freq_scale));
    return CLF_OK;
}

int clf_rope_yarn_valid(const clf_rope_params *p) {
    return p->ext_factor == 0 || (isfinite(p->ext_factor) && isfinite(p->corr_lo) && isfinite(p->corr_hi) &&
                                  p->mscale > 0 && isfinite(p->mscale));
}

cl_float4 clf_rope_yarn_arg(const clf_rope_params *p) {
    cl_float4 y = {{0, 0, 0, 1}};
    if (p && p->ext_factor != 0) y = (cl_float4){{p->ext_factor, p->corr_lo, p->corr_hi, p->mscale}};
    return y;
}

clf_status clf_rope(clf_runtime *rt, clf_tensor *x, int n_tokens, int row_stride, int col0, int n_heads,
                    int head_dim, int pos0, const clf_rope_params *p) {
    cl_ulong x_off, ff_off = 0;
    CLF_TRY(f32_offset(x, "rope input", &x_off));
    if (p->mode != CLF_ROPE_NORM && p->mode != CLF_ROPE_NEOX) return clf_fail(CLF_ERR_ARG, "rope: unknown mode %d", (int)p->mode);
    if (n_tokens < 0 || n_heads < 1 || head_dim < 2 || p->n_rot < 2 || p->n_rot % 2 || p->n_rot > head_dim ||
        col0 < 0 || pos0 < 0 || !(p->base > 0) || !(p->freq_scale > 0))
        return clf_fail(CLF_ERR_ARG,
                        "rope: bad parameters (tokens %d, heads %d, head_dim %d, n_rot %d, col0 %d, pos0 %d, base %g, freq_scale %g)",
                        n_tokens, n_heads, head_dim, p->n_rot, col0, pos0, p->base, p->freq_scale);
    if (!clf_rope_yarn_valid(p))
        return clf_fail(CLF_ERR_ARG, "rope: bad YaRN parameters (ext_factor %g, corr dims %g..%g, mscale %g)",
                        p->ext_factor, p->corr_lo, p->corr_hi, p->mscale);
    if (p->factors) {
        CLF_TRY(f32_offset(p->factors, "rope frequency factors", &ff_off));
        if (elems_of(p->factors) != p->n_rot / 2)
            return clf_fail(CLF_ERR_ARG, "rope: %lld frequency factors for %d rotated pairs",
                            (long long)elems_of(p->factors), p->n_rot / 2);
    }
    CLF_TRY(heads_check("rope", x, n_tokens, row_stride, col0, n_heads, head_dim));
    if (n_tokens == 0) return CLF_OK;
    const char *name = p->mode == CLF_ROPE_NEOX ? "rope_neox_f32" : "rope_norm_f32";
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "rope", "", name, &k));
    /* base^(-2i/n_rot) = exp2(i * log2_scale), the constant taken in double */
    float log2_scale = (float)(-2.0 * log2((double)p->base) / p->n_rot), freq_scale = p->freq_scale;
    cl_mem ff = p->factors ? p->factors->mem : NULL; /* a NULL buffer is a NULL pointer in the kernel */
    cl_int n_rot = p->n_rot;
    const cl_float4 yarn = clf_rope_yarn_arg(p);
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off),  CLF_ARG(row_stride), CLF_ARG(col0),       CLF_ARG(n_heads),
                   CLF_ARG(head_dim), CLF_ARG(n_rot), CLF_ARG(pos0),      CLF_ARG(n_tokens),   CLF_ARG(log2_scale),
                   CLF_ARG(freq_scale), CLF_ARG(ff),  CLF_ARG(ff_off),    CLF_ARG(yarn)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {(size_t)(n_rot / 2 + 7) / 8, round_up((size_t)n_tokens, ROPE_LOCAL)}, local[2] = {1, ROPE_LOCAL};
    return clf_launch(rt, k, 2, global, local);
}

/* ---- gated units, add, scale (cl/elementwise.cl) ---------------------------- */

static clf_status glu_launch(clf_runtime *rt, clf_glu_act act, const clf_tensor *gu, clf_tensor *y,
                             const clf_tensor *xq) {
    cl_ulong gu_off, y_off, xq_off = 0;
    CLF_TRY(f32_offset(gu, "glu input", &gu_off));
    CLF_TRY(f32_offset(y, "glu output", &y_off));
    static const char *const kernels[] = {"swiglu_f32", "geglu_f32", "swiglu_oai_f32"}; /* by clf_glu_act */
    if ((unsigned)act >= sizeof kernels / sizeof kernels[0])
        return clf_fail(CLF_ERR_ARG, "glu: unknown activation %d", (int)act);
    if (gu->ne[0] != 2 * y->ne[0] || clf_tensor_nrows(gu) != clf_tensor_nrows(y))
        return clf_fail(CLF_ERR_ARG, "glu: gate|up %lld x %lld does not match output %lld x %lld",
                        (long long)gu->ne[0], (long long)clf_tensor_nrows(gu), (long long)y->ne[0], (long long)clf_tensor_nrows(y));
    if (xq) CLF_TRY(xq_check("glu", xq, y->ne[0], clf_tensor_nrows(y), &xq_off));
    if (clf_tensor_nrows(y) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", kernels[act], &k));
    cl_int ff = (cl_int)y->ne[0], xq_rows = xq ? (cl_int)clf_tensor_nrows(xq) : 0;
    cl_mem xq_mem = xq ? xq->mem : NULL;
    clf_arg a[] = {CLF_ARG(gu->mem), CLF_ARG(gu_off), CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(ff),
                   CLF_ARG(xq_mem),  CLF_ARG(xq_off), CLF_ARG(xq_rows)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)(ff + 31) / 32, EW_LOCAL), (size_t)clf_tensor_nrows(y)}, local[2] = {EW_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_glu(clf_runtime *rt, clf_glu_act act, const clf_tensor *gu, clf_tensor *y) {
    return glu_launch(rt, act, gu, y, NULL);
}

clf_status clf_glu_xq(clf_runtime *rt, clf_glu_act act, const clf_tensor *gu, clf_tensor *y, const clf_tensor *xq) {
    return glu_launch(rt, act, gu, y, xq);
}

clf_status clf_quantize_x(clf_runtime *rt, const clf_tensor *x, const clf_tensor *xq) {
    cl_ulong x_off, xq_off;
    CLF_TRY(f32_offset(x, "quantize input", &x_off));
    CLF_TRY(xq_check("quantize", xq, x->ne[0], clf_tensor_nrows(x), &xq_off));
    if (clf_tensor_nrows(xq) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", "quantize_xq_f32", &k));
    cl_int n = (cl_int)x->ne[0];
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(n), CLF_ARG(xq->mem), CLF_ARG(xq_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    /* a fixed work-group, the blocks padded to it: PoCL compiles a kernel per
     * work-group size, and left to choose it picks one from the rows (a MoE
     * layer's expert groups quantize 1 to n rows as the routing falls: a
     * build of ~0.2 s for each new count, ~200 inside a first 512-token
     * prompt of Qwen3-30B-A3B's shape) */
    size_t global[2] = {round_up((size_t)n / 32, EW_LOCAL), (size_t)clf_tensor_nrows(xq)}, local[2] = {EW_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_scale(clf_runtime *rt, const clf_tensor *a, float s, clf_tensor *y) {
    cl_ulong a_off, y_off;
    CLF_TRY(f32_offset(a, "scale input", &a_off));
    CLF_TRY(f32_offset(y, "scale output", &y_off));
    if (!same_shape(a, y))
        return clf_fail(CLF_ERR_ARG, "scale: shapes differ (%lld x %lld, %lld x %lld)", (long long)a->ne[0],
                        (long long)clf_tensor_nrows(a), (long long)y->ne[0], (long long)clf_tensor_nrows(y));
    if (elems_of(a) > INT_MAX) return clf_fail(CLF_ERR_ARG, "scale: %lld elements is too many", (long long)elems_of(a));
    if (elems_of(a) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", "scale_f32", &k));
    cl_int n = (cl_int)elems_of(a);
    clf_arg args[] = {CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(a->mem), CLF_ARG(a_off), CLF_ARG(s), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, args, CLF_NARGS(args)));
    size_t global = round_up((size_t)(n + 15) / 16, EW_LOCAL), local = EW_LOCAL;
    return clf_launch(rt, k, 1, &global, &local);
}

clf_status clf_add(clf_runtime *rt, const clf_tensor *a, const clf_tensor *b, clf_tensor *y) {
    cl_ulong a_off, b_off, y_off;
    CLF_TRY(f32_offset(a, "add input a", &a_off));
    CLF_TRY(f32_offset(b, "add input b", &b_off));
    CLF_TRY(f32_offset(y, "add output", &y_off));
    if (!same_shape(a, b) || !same_shape(a, y))
        return clf_fail(CLF_ERR_ARG, "add: shapes differ (%lld x %lld, %lld x %lld, %lld x %lld)", (long long)a->ne[0],
                        (long long)clf_tensor_nrows(a), (long long)b->ne[0], (long long)clf_tensor_nrows(b), (long long)y->ne[0],
                        (long long)clf_tensor_nrows(y));
    if (elems_of(a) > INT_MAX) return clf_fail(CLF_ERR_ARG, "add: %lld elements is too many", (long long)elems_of(a));
    if (elems_of(a) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", "add_f32", &k));
    cl_int n = (cl_int)elems_of(a);
    clf_arg args[] = {CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(a->mem), CLF_ARG(a_off), CLF_ARG(b->mem), CLF_ARG(b_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, args, CLF_NARGS(args)));
    size_t global = round_up((size_t)(n + 15) / 16, EW_LOCAL), local = EW_LOCAL;
    return clf_launch(rt, k, 1, &global, &local);
}

/* ---- LoRA decode rows (cl/lora.cl) ------------------------------------------ */

clf_status clf_lora_rows(clf_runtime *rt, clf_type type, cl_mem a, cl_mem bp, int w, int n_out, int n_part,
                         const int *bounds, const clf_tensor *x, clf_tensor *y, int64_t col0, float s, cl_mem rows,
                         int idx0, int n_rows) {
    cl_ulong x_off, y_off;
    CLF_TRY(f32_offset(x, "LoRA input", &x_off));
    CLF_TRY(f32_offset(y, "LoRA output", &y_off));
    if (type != CLF_F16 && type != CLF_F32) return clf_fail(CLF_ERR_ARG, "LoRA rows: A and B must be F16 or F32");
    if (w <= 0 || w > CLF_LORA_ROWS_MAX_WIDTH)
        return clf_fail(CLF_ERR_ARG, "LoRA rows: width %d outside 1 .. %d", w, CLF_LORA_ROWS_MAX_WIDTH);
    if (n_out <= 0 || col0 < 0 || col0 + n_out > y->ne[0] || clf_tensor_nrows(x) != clf_tensor_nrows(y))
        return clf_fail(CLF_ERR_ARG, "LoRA rows: %d columns from %lld into rows of %lld, %lld rows into %lld", n_out,
                        (long long)col0, (long long)y->ne[0], (long long)clf_tensor_nrows(x),
                        (long long)clf_tensor_nrows(y));
    if (n_part < 1 || n_part > 3 || w % n_part)
        return clf_fail(CLF_ERR_ARG, "LoRA rows: %d parts over a width of %d", n_part, w);
    cl_int8 pb = {{0}};
    for (int p = 0; p < n_part; p++) {
        if (bounds[2 * p] < 0 || bounds[2 * p] > bounds[2 * p + 1] || bounds[2 * p + 1] > n_out)
            return clf_fail(CLF_ERR_ARG, "LoRA rows: part %d's outputs %d .. %d outside 0 .. %d", p, bounds[2 * p],
                            bounds[2 * p + 1], n_out);
        pb.s[2 * p] = bounds[2 * p], pb.s[2 * p + 1] = bounds[2 * p + 1];
    }
    if (rows && (idx0 < 0 || n_rows < 0))
        return clf_fail(CLF_ERR_ARG, "LoRA rows: %d indexed rows from %d", n_rows, idx0);
    /* the launch's rows: x's, or the indexed ones (-1: none) */
    const size_t n = rows ? (size_t)n_rows : (size_t)clf_tensor_nrows(x);
    cl_int ci0 = rows ? idx0 : -1;
    if (n == 0) return CLF_OK;
    cl_kernel k;
    /* halves through clang's __fp16 where the products take them so (the "cpu" variant: clang) */
    char opts[96]; /* and the local t[]'s size from the one bound (cl/lora.cl's CLF_LORA_T_MAX) */
    snprintf(opts, sizeof opts, "-DCLF_LORA_T_MAX=%d%s", CLF_LORA_ROWS_MAX_WIDTH,
             rt->tune.matmul == CLF_MATMUL_CPU ? " -DCLF_LORA_FP16_CLANG=1" : "");
    CLF_TRY(clf_kernel_get(rt, "lora", opts, type == CLF_F16 ? "lora_rows_f16" : "lora_rows_f32", &k));
    y_off += (cl_ulong)col0;
    cl_int cw = w, in = (cl_int)x->ne[0], no = n_out, xs = (cl_int)x->ne[0], ys = (cl_int)y->ne[0], np = n_part;
    clf_arg args[] = {CLF_ARG(a),  CLF_ARG(bp),    CLF_ARG(cw),    CLF_ARG(in), CLF_ARG(no), CLF_ARG(x->mem),
                      CLF_ARG(x_off), CLF_ARG(xs), CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(ys), CLF_ARG(s),
                      CLF_ARG(np),    CLF_ARG(pb),   CLF_ARG(rows),  CLF_ARG(ci0)};
    CLF_TRY(clf_set_args(k, args, CLF_NARGS(args)));
    /* groups of one SIMD thread on a CPU, of lanes elsewhere (row_wg); a row's outputs split over the compute
     * units the rows leave idle, 256 outputs a group at least (each group forms all of A·x: more groups, more
     * work, spent only where cores would wait) */
    const size_t wg = (size_t)row_wg(rt, 0);
    const size_t idle = rt->dev.compute_units > n ? rt->dev.compute_units / n : 1;
    size_t groups = ((size_t)n_out + 255) / 256;
    if (groups > idle) groups = idle;
    size_t global[2] = {wg * groups, n}, local[2] = {wg, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_add_rows(clf_runtime *rt, clf_tensor *x, const clf_tensor *b) {
    cl_ulong x_off, b_off;
    CLF_TRY(f32_offset(x, "add_rows input", &x_off));
    CLF_TRY(f32_offset(b, "add_rows bias", &b_off));
    if (elems_of(b) != x->ne[0])
        return clf_fail(CLF_ERR_ARG, "add_rows: bias of %lld elements for rows of %lld", (long long)elems_of(b),
                        (long long)x->ne[0]);
    if (clf_tensor_nrows(x) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", "add_rows_f32", &k));
    cl_int n = (cl_int)x->ne[0];
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(b->mem), CLF_ARG(b_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)(n + 15) / 16, EW_LOCAL), (size_t)clf_tensor_nrows(x)}, local[2] = {EW_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

/* Launchers of the small kernels (host/ops.h): cl/quant.cl, cl/norm.cl,
 * cl/rope.cl, cl/elementwise.cl. Each validates shapes, sets arguments and
 * enqueues through clf_launch without waiting. */
#include "ops.h"

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
 * otherwise walk the row serially. CLINFER_OPS_VARIANT=cpu|gpu overrides,
 * so tests run both on one device. */
static int row_wg(const clf_runtime *rt, int64_t n) {
    const char *env = getenv("CLINFER_OPS_VARIANT"); /* anything but cpu|gpu means auto */
    int cpu = env && !strcmp(env, "cpu")   ? 1
              : env && !strcmp(env, "gpu") ? 0
                                           : (rt->dev.type & CL_DEVICE_TYPE_CPU) != 0;
    if (cpu) return 1;
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

clf_status clf_rmsnorm(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y) {
    cl_ulong x_off, w_off, y_off;
    CLF_TRY(f32_offset(x, "rmsnorm input", &x_off));
    CLF_TRY(f32_offset(w, "rmsnorm weight", &w_off));
    CLF_TRY(f32_offset(y, "rmsnorm output", &y_off));
    if (!same_shape(x, y) || elems_of(w) != x->ne[0])
        return clf_fail(CLF_ERR_ARG, "rmsnorm: input %lld x %lld, weight of %lld, output %lld x %lld",
                        (long long)x->ne[0], (long long)clf_tensor_nrows(x), (long long)elems_of(w), (long long)y->ne[0],
                        (long long)clf_tensor_nrows(y));
    if (!(eps >= 0)) return clf_fail(CLF_ERR_ARG, "rmsnorm: eps %g must be >= 0", eps);
    if (clf_tensor_nrows(x) == 0) return CLF_OK;
    cl_kernel k;
    size_t local;
    CLF_TRY(row_kernel(rt, "rmsnorm_f32", x->ne[0], &k, &local));
    cl_int n = (cl_int)x->ne[0];
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(w->mem), CLF_ARG(w_off), CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(n), CLF_ARG(eps)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global = (size_t)clf_tensor_nrows(x) * local;
    return clf_launch(rt, k, 1, &global, &local);
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

clf_status clf_rope(clf_runtime *rt, clf_tensor *x, int n_tokens, int row_stride, int col0, int n_heads,
                    int head_dim, int n_rot, int pos0, float base, clf_rope_mode mode) {
    cl_ulong x_off;
    CLF_TRY(f32_offset(x, "rope input", &x_off));
    if (mode != CLF_ROPE_NORM && mode != CLF_ROPE_NEOX) return clf_fail(CLF_ERR_ARG, "rope: unknown mode %d", (int)mode);
    if (n_tokens < 0 || n_heads < 1 || head_dim < 2 || n_rot < 2 || n_rot % 2 || n_rot > head_dim || col0 < 0 ||
        pos0 < 0 || !(base > 0))
        return clf_fail(CLF_ERR_ARG, "rope: bad parameters (tokens %d, heads %d, head_dim %d, n_rot %d, col0 %d, pos0 %d, base %g)",
                        n_tokens, n_heads, head_dim, n_rot, col0, pos0, base);
    int64_t row_end = (int64_t)col0 + (int64_t)n_heads * head_dim;
    if (row_end > row_stride || (n_tokens > 0 && (int64_t)(n_tokens - 1) * row_stride + row_end > elems_of(x)))
        return clf_fail(CLF_ERR_ARG, "rope: %d tokens of %d heads x %d at column %d, stride %d, exceed the tensor (%lld floats)",
                        n_tokens, n_heads, head_dim, col0, row_stride, (long long)elems_of(x));
    if (n_tokens == 0) return CLF_OK;
    const char *name = mode == CLF_ROPE_NEOX ? "rope_neox_f32" : "rope_norm_f32";
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "rope", "", name, &k));
    /* base^(-2i/n_rot) = exp2(i * log2_scale), the constant taken in double */
    float log2_scale = (float)(-2.0 * log2((double)base) / n_rot);
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(row_stride), CLF_ARG(col0), CLF_ARG(n_heads), CLF_ARG(head_dim),
                CLF_ARG(n_rot), CLF_ARG(pos0), CLF_ARG(n_tokens), CLF_ARG(log2_scale)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {(size_t)(n_rot / 2 + 7) / 8, round_up((size_t)n_tokens, ROPE_LOCAL)}, local[2] = {1, ROPE_LOCAL};
    return clf_launch(rt, k, 2, global, local);
}

/* ---- SwiGLU and add (cl/elementwise.cl) ------------------------------------ */

clf_status clf_swiglu(clf_runtime *rt, const clf_tensor *gu, clf_tensor *y) {
    cl_ulong gu_off, y_off;
    CLF_TRY(f32_offset(gu, "swiglu input", &gu_off));
    CLF_TRY(f32_offset(y, "swiglu output", &y_off));
    if (gu->ne[0] != 2 * y->ne[0] || clf_tensor_nrows(gu) != clf_tensor_nrows(y))
        return clf_fail(CLF_ERR_ARG, "swiglu: gate|up %lld x %lld does not match output %lld x %lld",
                        (long long)gu->ne[0], (long long)clf_tensor_nrows(gu), (long long)y->ne[0], (long long)clf_tensor_nrows(y));
    if (clf_tensor_nrows(y) == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "elementwise", "", "swiglu_f32", &k));
    cl_int ff = (cl_int)y->ne[0];
    clf_arg a[] = {CLF_ARG(gu->mem), CLF_ARG(gu_off), CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(ff)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)(ff + 15) / 16, EW_LOCAL), (size_t)clf_tensor_nrows(y)}, local[2] = {EW_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
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

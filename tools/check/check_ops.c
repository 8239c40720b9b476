/* Checks of the small kernels against plain C references in double
 * (tools/check/check_ops.h), and the clf_checks_ops[] table that `selftest` runs. */
#include "check_ops.h"

#include "matmul.h"
#include "select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tolerances on ||out - ref|| / ||ref||. Dequantization computes the same
 * float products as the C reference (a fused multiply-add may differ in
 * the last bit); reductions accumulate float rounding that grows like the
 * square root of the row length. */
#define TOL_EXACT 1e-6
#define TOL_ELEMENTWISE 1e-6
/* GELU's tail g / (1 + exp(-u)) carries exp's relative error times |u|
 * (up to ~44 at the clamp): a lone negative gate may be off by ~5e-6. */
#define TOL_GELU 1e-5
static double tol_reduction(int n) { return 2e-6 + 1.5e-7 * sqrt((double)n); }
/* RoPE angles are pos * base^(-2i/n_rot) in float, so their absolute error
 * grows with the position (~2^-24 relative, a few roundings). */
static double tol_rope(int max_pos) { return 2e-6 + 5e-8 * max_pos; }

static void *xmalloc(size_t n, clf_status *st) {
    void *p = *st == CLF_OK ? malloc(n ? n : 1) : NULL;
    if (!p && *st == CLF_OK) *st = clf_fail(CLF_ERR_MEMORY, "out of host memory (%zu bytes)", n);
    return p;
}

static clf_status tensor_from(clf_runtime *rt, clf_type type, int64_t ne0, int64_t rows, const void *data,
                              clf_tensor *t) {
    CLF_TRY(clf_tensor_alloc(rt, type, ne0, rows, t));
    return clf_tensor_upload(rt, t, data, clf_tensor_bytes(t));
}

static void fill(uint64_t *s, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = clf_rng_uniform(s, lo, hi);
}

/* A poisoned (NaN) F32 output tensor. */
static clf_status poisoned(clf_runtime *rt, int64_t ne0, int64_t rows, clf_tensor *t) {
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, ne0, rows, t));
    return clf_tensor_fill(rt, t, 0xff);
}

static void result(clf_check_result *res, double err, double tol) {
    res->err = err;
    res->tol = tol;
}

/* ---- dequantize / get_rows ---------------------------------------------- */

clf_status clf_check_get_rows(clf_runtime *rt, uint64_t seed, clf_type type, int ne0, int rows, int n_ids,
                              clf_check_result *res) {
    const clf_type_info *ti = clf_type_get(type);
    size_t row_bytes = clf_row_bytes(type, ne0);
    if (!ti || !row_bytes || rows < 1 || n_ids < 1)
        return clf_fail(CLF_ERR_ARG, "get_rows check: type %u, %d x %d, %d ids", (unsigned)type, rows, ne0, n_ids);
    snprintf(res->detail, sizeof res->detail, "%s %dx%d, %d ids + dequantize view", ti->name, rows, ne0, n_ids);
    size_t n = (size_t)rows * ne0, nout = (size_t)n_ids * ne0;
    clf_status st = CLF_OK;
    float *x = xmalloc(n * sizeof *x, &st), *deq = xmalloc(n * sizeof *deq, &st);
    float *out = xmalloc((nout > n ? nout : n) * sizeof *out, &st);
    double *ref = xmalloc((nout > n ? nout : n) * sizeof *ref, &st);
    unsigned char *q = xmalloc((size_t)rows * row_bytes, &st);
    int *ids = xmalloc((size_t)n_ids * sizeof *ids, &st);
    clf_tensor table = {0}, got = {0}, all = {0};
    cl_mem dev_ids = NULL;
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 1);
    fill(&s, x, n, -1.0f, 1.0f);
    clf_quantize(type, x, q, (int64_t)n);
    clf_dequantize(type, q, deq, (int64_t)n);
    for (int i = 0; i < n_ids; i++) ids[i] = (int)(clf_rng_next(&s) % (uint64_t)rows);

    if ((st = tensor_from(rt, type, ne0, rows, q, &table)) != CLF_OK) goto out;
    if ((st = clf_buffer_create(rt, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)n_ids * sizeof *ids, ids,
                                &dev_ids)) != CLF_OK)
        goto out;
    if ((st = poisoned(rt, ne0, n_ids, &got)) != CLF_OK) goto out;
    if ((st = clf_get_rows(rt, &table, dev_ids, n_ids, &got)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, &got, out, nout * sizeof *out)) != CLF_OK) goto out;
    for (int i = 0; i < n_ids; i++)
        for (int j = 0; j < ne0; j++) ref[(size_t)i * ne0 + j] = deq[(size_t)ids[i] * ne0 + j];
    double err = clf_rel_err(out, ref, nout);

    /* Whole-tensor dequantize of a view that skips row 0 (a byte offset on
     * both sides); the output's row 0 must stay poisoned. */
    int r0 = rows > 1 ? 1 : 0;
    if ((st = poisoned(rt, ne0, rows, &all)) != CLF_OK) goto out;
    clf_tensor src_view = clf_tensor_rows(&table, r0, rows - r0), dst_view = clf_tensor_rows(&all, r0, rows - r0);
    if ((st = clf_dequantize_dev(rt, &src_view, &dst_view)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, &all, out, n * sizeof *out)) != CLF_OK) goto out;
    for (size_t i = 0; i < n; i++) ref[i] = deq[i];
    size_t skip = (size_t)r0 * ne0;
    double err2 = clf_rel_err(out + skip, ref + skip, n - skip);
    for (size_t i = 0; i < skip; i++)
        if (!isnan(out[i])) err2 = INFINITY; /* written outside the view */
    result(res, fmax(err, err2), TOL_EXACT);
out:
    if (dev_ids) clReleaseMemObject(dev_ids);
    clf_tensor_free(&table);
    clf_tensor_free(&got);
    clf_tensor_free(&all);
    free(x), free(deq), free(out), free(ref), free(q), free(ids);
    return st;
}

clf_status clf_check_f16_bits(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    (void)seed; /* exhaustive: no random data */
    enum { N = 65536 };
    clf_status st = CLF_OK;
    uint16_t *h = xmalloc(N * sizeof *h, &st);
    float *out = xmalloc(N * sizeof *out, &st);
    clf_tensor src = {0}, dst = {0};
    if (st != CLF_OK) goto out;
    for (int i = 0; i < N; i++) h[i] = (uint16_t)i;
    /* rows of 37 (a partial run of 32 at each row end) and of 256 */
    int widths[2] = {37, 256}, bad = 0;
    for (int w = 0; w < 2 && st == CLF_OK; w++) {
        int ne0 = widths[w], rows = N / ne0, n = ne0 * rows;
        if ((st = tensor_from(rt, CLF_F16, ne0, rows, h, &src)) != CLF_OK) break;
        if ((st = poisoned(rt, ne0, rows, &dst)) != CLF_OK) break;
        if ((st = clf_dequantize_dev(rt, &src, &dst)) != CLF_OK) break;
        if ((st = clf_tensor_download(rt, &dst, out, (size_t)n * sizeof *out)) != CLF_OK) break;
        for (int i = 0; i < n; i++) {
            float want = clf_f16_to_f32(h[i]);
            if (isnan(want) ? !isnan(out[i]) : memcmp(&want, &out[i], sizeof want) != 0) bad++;
        }
        clf_tensor_free(&src);
        clf_tensor_free(&dst);
    }
    if (st == CLF_OK) {
        snprintf(res->detail, sizeof res->detail, "all 65536 F16 bit patterns, rows of 37 and 256: %d wrong", bad);
        result(res, bad / (2.0 * N), 0.0); /* the fraction of wrong conversions */
    }
out:
    clf_tensor_free(&src);
    clf_tensor_free(&dst);
    free(h), free(out);
    return st;
}

/* ---- RMSNorm ------------------------------------------------------------ */

clf_status clf_check_rmsnorm(clf_runtime *rt, uint64_t seed, int rows, int n, int in_place, int accumulate,
                             clf_check_result *res) {
    if (rows < 1 || n < 1) return clf_fail(CLF_ERR_ARG, "rmsnorm check: %d x %d", rows, n);
    snprintf(res->detail, sizeof res->detail, "%dx%d%s%s", rows, n, in_place ? " in place" : "",
             accumulate ? ", accumulate" : "");
    size_t total = (size_t)rows * n;
    const float eps = 1e-5f;
    clf_status st = CLF_OK;
    float *x = xmalloc(total * sizeof *x, &st), *w = xmalloc((size_t)n * sizeof *w, &st);
    float *y0 = xmalloc(total * sizeof *y0, &st), *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tx = {0}, tw = {0}, ty = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 2);
    fill(&s, x, total, -2.0f, 2.0f);
    fill(&s, w, (size_t)n, -1.5f, 1.5f);
    fill(&s, y0, total, -3.0f, 3.0f);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        double ss = 0;
        for (int j = 0; j < n; j++) ss += (double)xr[j] * xr[j];
        double scale = 1.0 / sqrt(ss / n + eps);
        for (int j = 0; j < n; j++) {
            const size_t i = (size_t)r * n + j;
            ref[i] = xr[j] * scale * w[j] + (accumulate ? (in_place ? xr[j] : y0[i]) : 0.0);
        }
    }
    if ((st = tensor_from(rt, CLF_F32, n, rows, x, &tx)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, n, 1, w, &tw)) != CLF_OK) goto out;
    if (!in_place && accumulate && (st = tensor_from(rt, CLF_F32, n, rows, y0, &ty)) != CLF_OK) goto out;
    if (!in_place && !accumulate && (st = poisoned(rt, n, rows, &ty)) != CLF_OK) goto out;
    clf_tensor *y = in_place ? &tx : &ty;
    if ((st = clf_rmsnorm(rt, &tx, &tw, eps, y, accumulate)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, y, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), tol_reduction(n));
out:
    clf_tensor_free(&tx);
    clf_tensor_free(&tw);
    clf_tensor_free(&ty);
    free(x), free(w), free(y0), free(out), free(ref);
    return st;
}

clf_status clf_check_rmsnorm_heads(clf_runtime *rt, uint64_t seed, int n_tokens, int row_stride, int col0,
                                   int head_dim, int n_a, int n_b, clf_check_result *res) {
    const int n_heads = n_a + n_b;
    if (n_tokens < 1 || n_a < 1 || n_b < 0 || head_dim < 1 || col0 + n_heads * head_dim > row_stride)
        return clf_fail(CLF_ERR_ARG, "rmsnorm_heads check: %d tokens of %d + %d x %d at %d/%d", n_tokens, n_a, n_b,
                        head_dim, col0, row_stride);
    snprintf(res->detail, sizeof res->detail, "%dx(%d+%d)x%d at col %d/%d", n_tokens, n_a, n_b, head_dim, col0,
             row_stride);
    size_t total = (size_t)n_tokens * row_stride;
    const float eps = 1e-6f;
    clf_status st = CLF_OK;
    float *x = xmalloc(total * sizeof *x, &st), *w = xmalloc(2 * (size_t)head_dim * sizeof *w, &st);
    float *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tx = {0}, tw = {0}, tw2 = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 8);
    fill(&s, x, total, -2.0f, 2.0f);
    fill(&s, w, 2 * (size_t)head_dim, 0.5f, 1.5f);
    for (size_t i = 0; i < total; i++) ref[i] = x[i];
    for (int t = 0; t < n_tokens; t++)
        for (int h = 0; h < n_heads; h++) {
            const float *wh = w + (h < n_a ? 0 : head_dim);
            size_t o = (size_t)t * row_stride + col0 + (size_t)h * head_dim;
            double ss = 0;
            for (int j = 0; j < head_dim; j++) ss += (double)x[o + j] * x[o + j];
            double scale = 1.0 / sqrt(ss / head_dim + eps);
            for (int j = 0; j < head_dim; j++) ref[o + j] = x[o + j] * scale * wh[j];
        }
    if ((st = tensor_from(rt, CLF_F32, row_stride, n_tokens, x, &tx)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, head_dim, 1, w, &tw)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, head_dim, 1, w + head_dim, &tw2)) != CLF_OK) goto out;
    if ((st = clf_rmsnorm_heads(rt, &tx, n_tokens, row_stride, col0, head_dim, n_a, &tw, n_b, n_b ? &tw2 : NULL,
                                eps)) != CLF_OK)
        goto out;
    if ((st = clf_tensor_download(rt, &tx, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), tol_reduction(head_dim));
out:
    clf_tensor_free(&tx);
    clf_tensor_free(&tw);
    clf_tensor_free(&tw2);
    free(x), free(w), free(out), free(ref);
    return st;
}

/* ---- RoPE --------------------------------------------------------------- */

static double rope_freq_scale(const clf_rope_case *c) { return c->freq_scale > 0 ? c->freq_scale : 1.0; }

/* llama.cpp's YaRN (ggml_rope_yarn_corr_dims, rope_yarn, llama_context's
 * yarn_attn_factor with attn_factor 1, ext_factor 1, betas 32 and 1), in
 * double: pair i's angle from its unscaled theta, *mscale its magnitude. */
typedef struct {
    double factor; /* 0: no YaRN */
    int ctx;
} yarn_ref;
static double yarn_corr_dim_ref(const clf_rope_case *c, const yarn_ref *y, double beta) {
    return c->n_rot * log(y->ctx / (beta * 2 * M_PI)) / (2 * log((double)c->base));
}
static double yarn_theta_ref(const clf_rope_case *c, const yarn_ref *yr, int i, double theta_extrap, double *mscale) {
    const double f = yr->factor, fs = 1.0 / f;
    const double lo = fmax(0.0, floor(yarn_corr_dim_ref(c, yr, 32.0)));
    const double hi = fmin(c->n_rot - 1, ceil(yarn_corr_dim_ref(c, yr, 1.0)));
    const double y = (i - lo) / fmax(0.001, hi - lo), mix = 1.0 - fmin(1.0, fmax(0.0, y));
    const double attn = (f <= 1 ? 1.0 : 0.1 * log(f) + 1.0) / (1.0 + 0.1 * log(f));
    *mscale = attn * (1.0 + 0.1 * log(1.0 / fs));
    return fs * theta_extrap * (1 - mix) + theta_extrap * mix;
}

static void rope_ref(const clf_rope_case *c, const yarn_ref *yr, const float *x, const float *factors, double *ref) {
    for (size_t i = 0; i < (size_t)c->n_tokens * c->row_stride; i++) ref[i] = x[i];
    int half = c->n_rot / 2;
    for (int t = 0; t < c->n_tokens; t++)
        for (int h = 0; h < c->n_heads; h++) {
            size_t base = (size_t)t * c->row_stride + c->col0 + (size_t)h * c->head_dim;
            for (int i = 0; i < half; i++) {
                double theta = (c->pos0 + t) * pow((double)c->base, -2.0 * i / c->n_rot), m = 1.0;
                if (factors) theta /= factors[i];
                if (yr->factor > 0) theta = yarn_theta_ref(c, yr, i, theta, &m);
                else theta *= rope_freq_scale(c);
                size_t ia = base + (c->mode == CLF_ROPE_NEOX ? i : 2 * i);
                size_t ib = base + (c->mode == CLF_ROPE_NEOX ? i + half : 2 * i + 1);
                double a = x[ia], b = x[ib];
                ref[ia] = m * (a * cos(theta) - b * sin(theta));
                ref[ib] = m * (a * sin(theta) + b * cos(theta));
            }
        }
}

static clf_status check_rope(clf_runtime *rt, uint64_t seed, const clf_rope_case *c, const yarn_ref *yr,
                             clf_check_result *res) {
    if (c->n_tokens < 1 || c->row_stride < 1 || c->n_rot < 2)
        return clf_fail(CLF_ERR_ARG, "rope check: %d tokens, stride %d, n_rot %d", c->n_tokens, c->row_stride, c->n_rot);
    snprintf(res->detail, sizeof res->detail, "%s %dx%dx%d rot %d, col %d/%d, pos0 %d%s%s",
             c->mode == CLF_ROPE_NEOX ? "neox" : "norm", c->n_tokens, c->n_heads, c->head_dim, c->n_rot, c->col0,
             c->row_stride, c->pos0, c->factors ? ", factors" : "",
             yr->factor > 0 ? ", yarn" : rope_freq_scale(c) != 1.0 ? ", scaled" : "");
    size_t total = (size_t)c->n_tokens * c->row_stride;
    clf_status st = CLF_OK;
    float *x = xmalloc(total * sizeof *x, &st), *out = xmalloc(total * sizeof *out, &st);
    float *ff = xmalloc((size_t)c->n_rot / 2 * sizeof *ff, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tx = {0}, tff = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 3);
    fill(&s, x, total, -1.0f, 1.0f);
    fill(&s, ff, (size_t)c->n_rot / 2, 1.0f, 40.0f);
    rope_ref(c, yr, x, c->factors ? ff : NULL, ref);
    if ((st = tensor_from(rt, CLF_F32, c->row_stride, c->n_tokens, x, &tx)) != CLF_OK) goto out;
    if (c->factors && (st = tensor_from(rt, CLF_F32, c->n_rot / 2, 1, ff, &tff)) != CLF_OK) goto out;
    clf_rope_params p = {.mode = c->mode, .n_rot = c->n_rot, .base = c->base,
        .freq_scale = (float)rope_freq_scale(c), .factors = c->factors ? &tff : NULL};
    if (yr->factor > 0 &&
        (st = clf_rope_yarn(&p, (float)yr->factor, yr->ctx, 1.0f, CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW)) != CLF_OK)
        goto out;
    if ((st = clf_rope(rt, &tx, c->n_tokens, c->row_stride, c->col0, c->n_heads, c->head_dim, c->pos0, &p)) != CLF_OK)
        goto out;
    if ((st = clf_tensor_download(rt, &tx, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), tol_rope(c->pos0 + c->n_tokens - 1));
out:
    clf_tensor_free(&tx);
    clf_tensor_free(&tff);
    free(x), free(out), free(ff), free(ref);
    return st;
}

clf_status clf_check_rope(clf_runtime *rt, uint64_t seed, const clf_rope_case *c, clf_check_result *res) {
    const yarn_ref none = {0, 0};
    return check_rope(rt, seed, c, &none, res);
}

clf_status clf_check_rope_yarn(clf_runtime *rt, uint64_t seed, const clf_rope_case *c, float factor, int n_ctx_orig,
                               clf_check_result *res) {
    const yarn_ref y = {factor, n_ctx_orig};
    return check_rope(rt, seed, c, &y, res);
}

/* ---- activations quantized for the int8 GEMVs -------------------------------- */

/* One block of 32 as cl/common.cl quantizes it, in float: x̂ and dx, dx·Σx̂
 * over each half and the block. */
static void xq_block_ref(const float *x, float *q, float out[4]) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
    double s[2] = {0, 0};
    for (int j = 0; j < 32; j++) {
        q[j] = rintf(x[j] * inv);
        s[j / 16] += q[j];
    }
    out[0] = dx;
    out[1] = dx * (float)s[0];
    out[2] = dx * (float)s[1];
    out[3] = dx * (float)(s[0] + s[1]);
}

clf_status clf_check_xq(clf_runtime *rt, uint64_t seed, clf_xq_producer p, int rows, int xq_rows, int n,
                        clf_check_result *res) {
    if (rows < 1 || xq_rows < 1 || xq_rows > rows || n < 32 || n % 32 || p < 0 || p > 2)
        return clf_fail(CLF_ERR_ARG, "quantized activation check: %d (%d) x %d by %d", rows, xq_rows, n, (int)p);
    static const char *names[] = {"quantize", "rmsnorm", "swiglu"};
    snprintf(res->detail, sizeof res->detail, "%s %dx%d, %d rows quantized", names[p], rows, n, xq_rows);
    const size_t total = (size_t)rows * n, nb = (size_t)n / 32, xq_floats = (size_t)CLF_XQ_FLOATS(n);
    const float eps = 1e-5f;
    clf_status st = CLF_OK;
    const size_t in_n = p == CLF_XQ_SWIGLU ? 2 * total : total;
    float *in = xmalloc(in_n * sizeof *in, &st), *w = xmalloc((size_t)n * sizeof *w, &st);
    float *y = xmalloc(total * sizeof *y, &st), *y_plain = xmalloc(total * sizeof *y_plain, &st);
    float *xq = xmalloc((size_t)xq_rows * xq_floats * sizeof *xq, &st), *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tin = {0}, tw = {0}, ty = {0}, ty2 = {0}, txq = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 11);
    fill(&s, in, in_n, -3.0f, 3.0f);
    fill(&s, w, (size_t)n, -1.5f, 1.5f);
    if (p == CLF_XQ_QUANTIZE) /* zero blocks (scale 0) and a lone large value */
        for (size_t i = 0; i < total; i++) in[i] = (i / 32) % 5 == 3 ? 0.0f : i % 97 == 5 ? 1e3f : in[i];
    if ((st = tensor_from(rt, CLF_F32, p == CLF_XQ_SWIGLU ? 2 * n : n, rows, in, &tin)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, n, 1, w, &tw)) != CLF_OK) goto out;
    if ((st = poisoned(rt, n, rows, &ty)) != CLF_OK) goto out;
    if ((st = poisoned(rt, n, rows, &ty2)) != CLF_OK) goto out;
    if ((st = poisoned(rt, (int64_t)xq_floats, xq_rows, &txq)) != CLF_OK) goto out;
    /* the producer with its quantized rows, and alone (its float output must not change) */
    if (p == CLF_XQ_QUANTIZE) {
        st = clf_quantize_x(rt, &tin, &txq);
    } else if (p == CLF_XQ_RMSNORM) {
        st = clf_rmsnorm_xq(rt, &tin, &tw, eps, &ty, &txq);
        if (st == CLF_OK) st = clf_rmsnorm(rt, &tin, &tw, eps, &ty2, 0);
    } else {
        st = clf_glu_xq(rt, CLF_GLU_SILU, &tin, &ty, &txq);
        if (st == CLF_OK) st = clf_glu(rt, CLF_GLU_SILU, &tin, &ty2);
    }
    if (st != CLF_OK) goto out;
    if (p == CLF_XQ_QUANTIZE) {
        memcpy(y, in, total * sizeof *y);
        memcpy(y_plain, in, total * sizeof *y);
    } else {
        if ((st = clf_tensor_download(rt, &ty, y, total * sizeof *y)) != CLF_OK) goto out;
        if ((st = clf_tensor_download(rt, &ty2, y_plain, total * sizeof *y)) != CLF_OK) goto out;
    }
    if ((st = clf_tensor_download(rt, &txq, xq, (size_t)xq_rows * xq_floats * sizeof *xq)) != CLF_OK) goto out;
    /* out: the device's x̂·dx and sums; ref: the C quantization of the device's y */
    double err = 0;
    for (size_t i = 0; i < total; i++)
        if (memcmp(&y[i], &y_plain[i], sizeof *y)) err = INFINITY;
    double num = 0, den = 0;
    for (int r = 0; r < xq_rows; r++)
        for (size_t b = 0; b < nb; b++) {
            const float *blk = xq + (size_t)r * xq_floats + CLF_XQ_FLOATS(32) * b;
            const signed char *qd = (const signed char *)blk;
            float qr[32], sr[4];
            int32_t si[4], sum[2] = {0, 0};
            xq_block_ref(y + (size_t)r * n + 32 * b, qr, sr);
            for (int j = 0; j < 32; j++) sum[j / 16] += qd[j];
            memcpy(si, blk + 12, sizeof si); /* Σx̂ of each half of the block's own x̂ as two shorts, then zeros */
            if (si[0] != (int32_t)(((uint32_t)sum[0] & 0xffff) | (uint32_t)sum[1] << 16) || si[1] || si[2] || si[3])
                err = INFINITY;
            for (int j = 0; j < 32; j++) {
                const double d = (double)qd[j] * blk[8] - (double)qr[j] * sr[0];
                num += isfinite(blk[8]) ? d * d : INFINITY;
                den += (double)qr[j] * sr[0] * qr[j] * sr[0];
            }
            for (int k = 1; k < 4; k++) {
                const double d = (double)blk[8 + k] - sr[k];
                num += isfinite(blk[8 + k]) ? d * d : INFINITY;
            }
        }
    err = fmax(err, sqrt(num) / fmax(sqrt(den), 1e-30));
    result(res, err, tol_reduction(32));
out:
    clf_tensor_free(&tin);
    clf_tensor_free(&tw);
    clf_tensor_free(&ty);
    clf_tensor_free(&ty2);
    clf_tensor_free(&txq);
    free(in), free(w), free(y), free(y_plain), free(xq), free(out), free(ref);
    return st;
}

/* ---- SwiGLU, add, softmax -------------------------------------------------- */

static double gelu_tanh(double g) { return 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * g * (1.0 + 0.044715 * g * g))); }

/* gpt-oss's clamped SwiGLU as llama.cpp's swiglu_oai computes it, in double */
static double swiglu_oai_ref(double g, double u) {
    const double alpha = 1.702, limit = 7.0, x = fmin(g, limit), y = fmax(-limit, fmin(u, limit));
    return x / (1.0 + exp(-alpha * x)) * (y + 1.0);
}

clf_status clf_check_glu(clf_runtime *rt, uint64_t seed, clf_glu_act act, int rows, int ff, clf_check_result *res) {
    if (rows < 1 || ff < 1) return clf_fail(CLF_ERR_ARG, "glu check: %d x %d", rows, ff);
    static const char *const names[] = {"silu", "gelu", "swiglu_oai"};
    if ((unsigned)act > 2) return clf_fail(CLF_ERR_ARG, "glu check: activation %d", (int)act);
    snprintf(res->detail, sizeof res->detail, "%s %dx%d from gate|up %dx%d%s", names[act], rows, ff, rows, 2 * ff,
             ff % 32 ? "" : ", glu_xq");
    size_t total = (size_t)rows * ff;
    clf_status st = CLF_OK;
    float *gu = xmalloc(2 * total * sizeof *gu, &st), *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    float *out2 = ff % 32 ? NULL : xmalloc(total * sizeof *out2, &st);
    float *q = ff % 32 ? NULL : xmalloc((size_t)rows * CLF_XQ_FLOATS(ff) * sizeof *q, &st);
    float *q_ref = ff % 32 ? NULL : xmalloc((size_t)rows * CLF_XQ_FLOATS(ff) * sizeof *q_ref, &st);
    clf_tensor tgu = {0}, ty = {0}, ty2 = {0}, tq = {0}, tq_ref = {0};
    int xq_same = 1;
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 4);
    /* wide enough to reach the saturated ends of silu and GELU (past the kernel's clamp at 10), and
     * swiglu_oai's limits at +-7 on both halves */
    fill(&s, gu, 2 * total, -12.0f, 12.0f);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ff; j++) {
            double g = gu[(size_t)r * 2 * ff + j], u = gu[(size_t)r * 2 * ff + ff + j];
            ref[(size_t)r * ff + j] = act == CLF_GLU_SWIGLU_OAI ? swiglu_oai_ref(g, u)
                                      : (act == CLF_GLU_SILU ? g / (1.0 + exp(-g)) : gelu_tanh(g)) * u;
        }
    if ((st = tensor_from(rt, CLF_F32, 2 * ff, rows, gu, &tgu)) != CLF_OK) goto out;
    if ((st = poisoned(rt, ff, rows, &ty)) != CLF_OK) goto out;
    if ((st = clf_glu(rt, act, &tgu, &ty)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, &ty, out, total * sizeof *out)) != CLF_OK) goto out;
    if (ff % 32 == 0) { /* clf_glu_xq: the same y bit for bit, its int8 form clf_quantize_x's byte for byte */
        const int64_t qf = CLF_XQ_FLOATS(ff);
        if ((st = poisoned(rt, ff, rows, &ty2)) != CLF_OK) goto out;
        if ((st = poisoned(rt, qf, rows, &tq)) != CLF_OK) goto out;
        if ((st = poisoned(rt, qf, rows, &tq_ref)) != CLF_OK) goto out;
        if ((st = clf_glu_xq(rt, act, &tgu, &ty2, &tq)) != CLF_OK) goto out;
        if ((st = clf_quantize_x(rt, &ty, &tq_ref)) != CLF_OK) goto out;
        if ((st = clf_tensor_download(rt, &ty2, out2, total * sizeof *out2)) != CLF_OK) goto out;
        if ((st = clf_tensor_download(rt, &tq, q, (size_t)rows * qf * sizeof *q)) != CLF_OK) goto out;
        if ((st = clf_tensor_download(rt, &tq_ref, q_ref, (size_t)rows * qf * sizeof *q_ref)) != CLF_OK) goto out;
        xq_same = !memcmp(out, out2, total * sizeof *out) && !memcmp(q, q_ref, (size_t)rows * qf * sizeof *q);
    }
    /* ||out - ref|| / ||ref||, the denominator floored at 1e-3 ||up||: an
     * output saturated to ~0 (gate far below 0) has no relative error to
     * speak of, and a one-element case may draw one */
    double num = 0, den = 0, uden = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ff; j++) {
            const size_t i = (size_t)r * ff + j;
            const double u = gu[(size_t)r * 2 * ff + ff + j], d = (double)out[i] - ref[i];
            num += isfinite(out[i]) ? d * d : INFINITY;
            den += ref[i] * ref[i];
            uden += u * u;
        }
    result(res, xq_same ? sqrt(num) / fmax(sqrt(den), 1e-3 * sqrt(uden)) : INFINITY,
           act == CLF_GLU_GELU_TANH ? TOL_GELU : TOL_ELEMENTWISE);
out:
    clf_tensor_free(&tgu);
    clf_tensor_free(&ty);
    clf_tensor_free(&ty2), clf_tensor_free(&tq), clf_tensor_free(&tq_ref);
    free(gu), free(out), free(ref), free(out2), free(q), free(q_ref);
    return st;
}

clf_status clf_check_scale(clf_runtime *rt, uint64_t seed, int rows, int n, int in_place, clf_check_result *res) {
    if (rows < 1 || n < 1) return clf_fail(CLF_ERR_ARG, "scale check: %d x %d", rows, n);
    snprintf(res->detail, sizeof res->detail, "%dx%d%s", rows, n, in_place ? " in place" : "");
    size_t total = (size_t)rows * n;
    clf_status st = CLF_OK;
    float *a = xmalloc(total * sizeof *a, &st), *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor ta = {0}, ty = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 9);
    fill(&s, a, total, -1.0f, 1.0f);
    const float k = 25.298221f; /* sqrt(640): Gemma 3 270M's embedding scale */
    for (size_t i = 0; i < total; i++) ref[i] = (double)a[i] * k;
    if ((st = tensor_from(rt, CLF_F32, n, rows, a, &ta)) != CLF_OK) goto out;
    if (!in_place && (st = poisoned(rt, n, rows, &ty)) != CLF_OK) goto out;
    clf_tensor *y = in_place ? &ta : &ty;
    if ((st = clf_scale(rt, &ta, k, y)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, y, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), TOL_EXACT);
out:
    clf_tensor_free(&ta);
    clf_tensor_free(&ty);
    free(a), free(out), free(ref);
    return st;
}

clf_status clf_check_add(clf_runtime *rt, uint64_t seed, int rows, int n, int alias, clf_check_result *res) {
    if (rows < 1 || n < 1 || alias < 0 || alias > 2)
        return clf_fail(CLF_ERR_ARG, "add check: %d x %d, alias %d", rows, n, alias);
    static const char *const how[] = {"", ", y = a", ", y = b"};
    snprintf(res->detail, sizeof res->detail, "%dx%d%s", rows, n, how[alias]);
    size_t total = (size_t)rows * n;
    clf_status st = CLF_OK;
    float *a = xmalloc(total * sizeof *a, &st), *b = xmalloc(total * sizeof *b, &st);
    float *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor ta = {0}, tb = {0}, ty = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 5);
    fill(&s, a, total, -1.0f, 1.0f);
    fill(&s, b, total, -1.0f, 1.0f);
    for (size_t i = 0; i < total; i++) ref[i] = (double)a[i] + b[i];
    if ((st = tensor_from(rt, CLF_F32, n, rows, a, &ta)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, n, rows, b, &tb)) != CLF_OK) goto out;
    if (alias == 0 && (st = poisoned(rt, n, rows, &ty)) != CLF_OK) goto out;
    clf_tensor *y = alias == 1 ? &ta : alias == 2 ? &tb : &ty;
    if ((st = clf_add(rt, &ta, &tb, y)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, y, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), TOL_EXACT);
out:
    clf_tensor_free(&ta);
    clf_tensor_free(&tb);
    clf_tensor_free(&ty);
    free(a), free(b), free(out), free(ref);
    return st;
}

clf_status clf_check_add_rows(clf_runtime *rt, uint64_t seed, int rows, int n, clf_check_result *res) {
    if (rows < 1 || n < 1) return clf_fail(CLF_ERR_ARG, "add_rows check: %d x %d", rows, n);
    snprintf(res->detail, sizeof res->detail, "%dx%d += bias of %d", rows, n, n);
    size_t total = (size_t)rows * n;
    clf_status st = CLF_OK;
    float *x = xmalloc(total * sizeof *x, &st), *b = xmalloc((size_t)n * sizeof *b, &st);
    float *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tx = {0}, tb = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 7);
    fill(&s, x, total, -1.0f, 1.0f);
    fill(&s, b, (size_t)n, -1.0f, 1.0f);
    for (size_t i = 0; i < total; i++) ref[i] = (double)x[i] + b[i % (size_t)n];
    if ((st = tensor_from(rt, CLF_F32, n, rows, x, &tx)) != CLF_OK) goto out;
    if ((st = tensor_from(rt, CLF_F32, n, 1, b, &tb)) != CLF_OK) goto out;
    if ((st = clf_add_rows(rt, &tx, &tb)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, &tx, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), TOL_EXACT);
out:
    clf_tensor_free(&tx);
    clf_tensor_free(&tb);
    free(x), free(b), free(out), free(ref);
    return st;
}

#define NEG_BIG (-1.0e30f) /* the mask value of cl/common.cl */

clf_status clf_check_softmax(clf_runtime *rt, uint64_t seed, int rows, int n, clf_check_result *res) {
    if (rows < 1 || n < 1) return clf_fail(CLF_ERR_ARG, "softmax check: %d x %d", rows, n);
    snprintf(res->detail, sizeof res->detail, "%dx%d, offsets to 300, masked entries%s", rows, n,
             rows >= 3 ? ", a masked row" : "");
    size_t total = (size_t)rows * n;
    clf_status st = CLF_OK;
    float *x = xmalloc(total * sizeof *x, &st), *out = xmalloc(total * sizeof *out, &st);
    double *ref = xmalloc(total * sizeof *ref, &st);
    clf_tensor tx = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 6);
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * n;
        /* odd rows sit near 300, where exp() overflows unless the max is taken off */
        float offset = (r & 1) ? 300.0f : 0.0f;
        for (int j = 0; j < n; j++) {
            int masked = (r == 2) || (j > 0 && clf_rng_next(&s) % 8 == 0);
            xr[j] = masked ? NEG_BIG : offset + clf_rng_uniform(&s, -8.0f, 8.0f);
        }
        double m = xr[0], sum = 0;
        for (int j = 1; j < n; j++) m = fmax(m, xr[j]);
        for (int j = 0; j < n; j++) sum += exp((double)xr[j] - m);
        for (int j = 0; j < n; j++) ref[(size_t)r * n + j] = exp((double)xr[j] - m) / sum;
    }
    if ((st = tensor_from(rt, CLF_F32, n, rows, x, &tx)) != CLF_OK) goto out;
    if ((st = clf_softmax(rt, &tx)) != CLF_OK) goto out;
    if ((st = clf_tensor_download(rt, &tx, out, total * sizeof *out)) != CLF_OK) goto out;
    result(res, clf_rel_err(out, ref, total), tol_reduction(n));
out:
    clf_tensor_free(&tx);
    free(x), free(out), free(ref);
    return st;
}

/* ---- device-side top-k ------------------------------------------------------ */

typedef struct topk_entry {
    float v; /* NaN as -inf */
    int i;
} topk_entry;

/* The larger value first, the smaller index on ties. */
static int topk_better(const void *a, const void *b) {
    const topk_entry *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

clf_status clf_check_topk(clf_runtime *rt, uint64_t seed, int n, int k, int special, clf_check_result *res) {
    if (n < 1 || k < 1 || k > n || k > CLF_TOPK_MAX) return clf_fail(CLF_ERR_ARG, "top-k check: k %d of %d", k, n);
    snprintf(res->detail, sizeof res->detail, "k %d of %d%s, plain and masked", k, n,
             special ? ", ties, NaN and infinities" : "");
    clf_status st = CLF_OK;
    float *x = xmalloc((size_t)n * sizeof *x, &st);
    topk_entry *ref = xmalloc((size_t)n * sizeof *ref, &st);
    uint32_t *mask = NULL;
    clf_tensor tx = {0};
    clf_topk t = {0};
    if (st != CLF_OK) goto out;
    uint64_t s = clf_rng_init(seed, 12);
    /* special: 16 levels (ties everywhere), a NaN and both infinities */
    for (int i = 0; i < n; i++) x[i] = special ? floorf(clf_rng_uniform(&s, 0, 16)) : clf_rng_uniform(&s, -8, 8);
    if (special) {
        x[clf_rng_next(&s) % (uint64_t)n] = NAN;
        x[clf_rng_next(&s) % (uint64_t)n] = -INFINITY;
        if (n > 2) x[clf_rng_next(&s) % (uint64_t)n] = INFINITY;
    }
    int want_bad = 0;
    for (int i = 0; i < n; i++) {
        ref[i] = (topk_entry){isnan(x[i]) ? -INFINITY : x[i], i};
        want_bad |= !isfinite(x[i]);
    }
    qsort(ref, (size_t)n, sizeof *ref, topk_better);
    float vals[CLF_TOPK_MAX];
    int32_t ids[CLF_TOPK_MAX];
    int bad = -1;
    if ((st = tensor_from(rt, CLF_F32, n, 1, x, &tx)) != CLF_OK) goto out;
    if ((st = clf_topk_create(rt, &t)) != CLF_OK) goto out;
    if ((st = clf_topk_read(&t, &tx, k, vals, ids, &bad)) != CLF_OK) goto out;
    int wrong = bad != want_bad;
    for (int j = 0; j < k; j++) wrong += ids[j] != ref[j].i || memcmp(&vals[j], &ref[j].v, sizeof vals[j]) != 0;
    /* the same row under a grammar's mask (clf_topk_read_masked): words all
     * refused, all allowed and mixed, stray bits past n (never read as
     * values); special: a sparse mask, fewer allowed than k, so -inf pads
     * (refused ids, by index) fill the list. A refused value is -inf. */
    const int words = (n + 31) / 32;
    mask = xmalloc((size_t)words * sizeof *mask, &st);
    if (st != CLF_OK) goto out;
    for (int w = 0; w < words; w++) {
        const uint64_t r = clf_rng_next(&s) % 8;
        mask[w] = special ? (r == 0 ? 1u << (clf_rng_next(&s) % 32) : 0)
                  : r < 3 ? 0 : r == 3 ? ~0u : (uint32_t)clf_rng_next(&s);
    }
    for (int i = 0; i < n; i++)
        ref[i] = (topk_entry){isnan(x[i]) || !(mask[i >> 5] >> (i & 31) & 1) ? -INFINITY : x[i], i};
    qsort(ref, (size_t)n, sizeof *ref, topk_better);
    bad = -1;
    if ((st = clf_topk_read_masked(&t, &tx, k, mask, vals, ids, &bad)) != CLF_OK) goto out;
    wrong += bad != want_bad;
    for (int j = 0; j < k; j++) wrong += ids[j] != ref[j].i || memcmp(&vals[j], &ref[j].v, sizeof vals[j]) != 0;
    result(res, (double)wrong / (2 * k + 2), 0.0); /* the fraction of wrong ranks (and flags), both reads */
out:
    clf_topk_free(&t);
    clf_tensor_free(&tx);
    free(x), free(ref), free(mask);
    return st;
}

/* ---- the selftest table -------------------------------------------------- */

/* Several shapes make one selftest line: the shape with the worst err/tol
 * is the one reported. */
static double ratio(const clf_check_result *r) { return r->tol > 0 ? r->err / r->tol : r->err; }

static void fold(clf_check_result *acc, const clf_check_result *r, int index) {
    if (index == 0 || ratio(r) > ratio(acc) || isnan(r->err)) *acc = *r;
}

static void fold_done(clf_check_result *acc, int n) {
    char worst[sizeof acc->detail];
    snprintf(worst, sizeof worst, "%s", acc->detail);
    snprintf(acc->detail, sizeof acc->detail, "%d shapes, worst: %.130s", n, worst);
}

/* A selftest line from a table of shapes: each row's values are the
 * check's arguments after the seed (`arg`: the type, mode or activation
 * the line is for); row i runs with seed + i. The full and the quick
 * table differ only in their shapes. */
typedef clf_status (*shape_check)(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r);

static clf_status shapes_line(clf_runtime *rt, uint64_t seed, shape_check fn, int arg, const void *shapes, size_t size,
                              int n, clf_check_result *res) {
    for (int i = 0; i < n; i++) {
        clf_check_result r;
        CLF_TRY(fn(rt, seed + (uint64_t)i, (const char *)shapes + (size_t)i * size, arg, &r));
        fold(res, &r, i);
    }
    fold_done(res, n);
    return CLF_OK;
}
#define SHAPES(fn, arg, table) \
    shapes_line(rt, seed, fn, arg, table, sizeof table[0], (int)(sizeof table / sizeof table[0]), res)

/* each check with its table row spread into its arguments */
static clf_status at_get_rows(clf_runtime *rt, uint64_t seed, const void *shape, int type, clf_check_result *r) {
    const int *s = shape, block = clf_type_get((clf_type)type)->block; /* widths rounded up to whole blocks */
    return clf_check_get_rows(rt, seed, (clf_type)type, (s[0] + block - 1) / block * block, s[1], s[2], r);
}
static clf_status at_rmsnorm(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_rmsnorm(rt, seed, s[0], s[1], s[2], s[3], r);
}
static clf_status at_rmsnorm_heads(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_rmsnorm_heads(rt, seed, s[0], s[1], s[2], s[3], s[4], s[5], r);
}
static clf_status at_rope(clf_runtime *rt, uint64_t seed, const void *shape, int mode, clf_check_result *r) {
    clf_rope_case c = *(const clf_rope_case *)shape;
    c.mode = (clf_rope_mode)mode;
    return clf_check_rope(rt, seed, &c, r);
}
static clf_status at_glu(clf_runtime *rt, uint64_t seed, const void *shape, int act, clf_check_result *r) {
    const int *s = shape;
    return clf_check_glu(rt, seed, (clf_glu_act)act, s[0], s[1], r);
}
static clf_status at_scale(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_scale(rt, seed, s[0], s[1], s[2], r);
}
static clf_status at_add(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_add(rt, seed, s[0], s[1], s[2], r);
}
static clf_status at_add_rows(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_add_rows(rt, seed, s[0], s[1], r);
}
static clf_status at_softmax(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_softmax(rt, seed, s[0], s[1], r);
}
static clf_status at_xq(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_xq(rt, seed, (clf_xq_producer)s[0], s[1], s[2], s[3], r);
}
static clf_status at_topk(clf_runtime *rt, uint64_t seed, const void *shape, int arg, clf_check_result *r) {
    const int *s = shape;
    (void)arg;
    return clf_check_topk(rt, seed, s[0], s[1], s[2], r);
}

/* ---- the full table ---- */

/* the SmolLM2 embedding width, and a width that is not a multiple of 32
 * where the type allows (ne0, rows, ids) */
#define CHK_GET_ROWS(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    static clf_status chk_get_rows_##NAME(clf_runtime *rt, uint64_t seed, clf_check_result *res) {          \
        const int s[2][3] = {{576, 301, 7}, {QK == 1 ? 37 : 96, 5, 3}};                                      \
        return SHAPES(at_get_rows, CLF_##NAME, s);                                                           \
    }
CLF_TYPES(CHK_GET_ROWS, ~) /* every type of the table (cl/types.cl) */

static clf_status chk_rmsnorm(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    /* rows, n, in place, accumulate (a post-norm's residual add: Gemma 3's 640) */
    static const int s[4][4] = {{1, 576, 1, 0}, {64, 576, 0, 0}, {5, 37, 0, 0}, {3, 640, 0, 1}};
    return SHAPES(at_rmsnorm, 0, s);
}

/* Gemma 3 270M's QK-norm: 4 query heads of 256 and 1 K head in a fused
 * row of 1024 + 2 * 256; one weight alone; a short odd head. */
static clf_status chk_rmsnorm_heads(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[3][6] = {{17, 1536, 0, 256, 4, 1}, {1, 1536, 1024, 256, 1, 0}, {3, 50, 7, 13, 1, 2}};
    return SHAPES(at_rmsnorm_heads, 0, s);
}

/* SmolLM2: Q and K rotated together inside a fused QKV row (9 + 3 heads of
 * 64, stride 576 + 2 * 192), plus a partial rotation with a tail, Llama
 * 3.1 frequency factors and linear position scaling (the mode is the line's). */
static const clf_rope_case rope_full[4] = {
    {1, 960, 0, 12, 64, 64, 700, 100000.0f, CLF_ROPE_NORM, 0, 0},
    {33, 960, 0, 12, 64, 64, 5, 100000.0f, CLF_ROPE_NORM, 0, 0},
    {3, 100, 10, 2, 40, 36, 17, 10000.0f, CLF_ROPE_NORM, 0, 0},
    {5, 3072, 0, 24, 128, 128, 300, 500000.0f, CLF_ROPE_NORM, 0.25f, 1},
};
static clf_status chk_rope_norm(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope, CLF_ROPE_NORM, rope_full);
}
static clf_status chk_rope_neox(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope, CLF_ROPE_NEOX, rope_full);
}
/* YaRN: gpt-oss's (factor 32 over 4096, base 150000, Q and K heads of 64 in a fused row, past the original
 * context), and a tail of pairs with frequency factors */
typedef struct {
    clf_rope_case c;
    float factor;
    int ctx;
} yarn_case;
static const yarn_case rope_yarn_full[2] = {
    {{3, 5120, 0, 72, 64, 64, 5000, 150000.0f, CLF_ROPE_NEOX, 0, 0}, 32.0f, 4096},
    {{4, 131, 3, 3, 40, 36, 700, 10000.0f, CLF_ROPE_NORM, 0, 1}, 4.0f, 256},
};
static clf_status at_rope_yarn(clf_runtime *rt, uint64_t seed, const void *shape, int mode, clf_check_result *r) {
    const yarn_case *y = shape;
    clf_rope_case c = y->c;
    c.mode = (clf_rope_mode)mode;
    return clf_check_rope_yarn(rt, seed, &c, y->factor, y->ctx, r);
}
static clf_status chk_rope_yarn(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope_yarn, CLF_ROPE_NEOX, rope_yarn_full);
}

static const int glu_full[2][2] = {{1, 1536}, {7, 37}}; /* rows, ff */
static clf_status chk_swiglu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_SILU, glu_full);
}
static clf_status chk_geglu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_GELU_TANH, glu_full);
}
static clf_status chk_swiglu_oai(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_SWIGLU_OAI, glu_full);
}

static clf_status chk_scale(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][3] = {{1, 640, 1}, {3, 1001, 0}}; /* rows, n, in place */
    return SHAPES(at_scale, 0, s);
}

static clf_status chk_add(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][3] = {{1, 576, 1}, {3, 1001, 0}}; /* rows, n, alias */
    return SHAPES(at_add, 0, s);
}

static clf_status chk_add_rows(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][2] = {{1, 960}, {5, 37}}; /* SmolLM2-shaped fused QKV row; odd */
    return SHAPES(at_add_rows, 0, s);
}

static clf_status chk_softmax(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][2] = {{4, 37}, {1, 49152}};
    return SHAPES(at_softmax, 0, s);
}

static clf_status chk_xq(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[3][4] = {{CLF_XQ_QUANTIZE, 3, 2, 96}, {CLF_XQ_RMSNORM, 2, 1, 576}, {CLF_XQ_SWIGLU, 3, 3, 1536}};
    return SHAPES(at_xq, 0, s);
}

#define GET_ROWS_ENTRY(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    {"get_rows_" #name, chk_get_rows_##NAME},
const clf_check clf_checks_ops[] = {
    {"dequantize_f16_bits", clf_check_f16_bits},
    CLF_TYPES(GET_ROWS_ENTRY, ~)
    {"rmsnorm", chk_rmsnorm},
    {"rmsnorm_heads", chk_rmsnorm_heads},
    {"rope_norm", chk_rope_norm},
    {"rope_neox", chk_rope_neox},
    {"rope_yarn", chk_rope_yarn},
    {"swiglu", chk_swiglu},
    {"swiglu_oai", chk_swiglu_oai},
    {"geglu", chk_geglu},
    {"add", chk_add},
    {"scale", chk_scale},
    {"add_rows", chk_add_rows},
    {"softmax", chk_softmax},
    {"quantize_x", chk_xq},
    {NULL, NULL},
};

/* ---- the quick table (`selftest --quick`): the same checks at shapes a
 * simulator (Oclgrind) runs in seconds, each odd, with two or more
 * work-groups and a partial one where the kernel has groups (the gpu row
 * ops: 64-256 lanes a row, so rows past 256). ---- */

#define Q_GET_ROWS(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    static clf_status q_get_rows_##NAME(clf_runtime *rt, uint64_t seed, clf_check_result *res) {          \
        const int s[2][3] = {{QK == 1 ? 37 : 64, 5, 3}, {QK == 1 ? 300 : 2 * QK, 3, 2}};                   \
        return SHAPES(at_get_rows, CLF_##NAME, s);                                                         \
    }
CLF_TYPES(Q_GET_ROWS, ~)

static clf_status q_rmsnorm(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[4][4] = {{1, 37, 1, 0}, {3, 300, 0, 0}, {2, 1001, 0, 1}, {5, 64, 0, 0}};
    return SHAPES(at_rmsnorm, 0, s);
}

static clf_status q_rmsnorm_heads(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][6] = {{3, 50, 7, 13, 1, 2}, {2, 700, 5, 96, 4, 2}};
    return SHAPES(at_rmsnorm_heads, 0, s);
}

/* a group of 8 pairs and a tail, a tail alone, frequency factors with scaling */
static const clf_rope_case rope_quick[3] = {
    {3, 100, 10, 2, 40, 36, 17, 10000.0f, CLF_ROPE_NORM, 0, 0},
    {2, 77, 3, 3, 16, 10, 500, 100000.0f, CLF_ROPE_NORM, 0, 0},
    {5, 2 * 64 + 3, 1, 2, 64, 64, 300, 500000.0f, CLF_ROPE_NORM, 0.25f, 1},
};
static clf_status q_rope_norm(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope, CLF_ROPE_NORM, rope_quick);
}
static clf_status q_rope_neox(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope, CLF_ROPE_NEOX, rope_quick);
}
static const yarn_case rope_yarn_quick[2] = {
    {{2, 2 * 64 + 3, 1, 2, 64, 64, 5000, 150000.0f, CLF_ROPE_NEOX, 0, 0}, 32.0f, 4096},
    {{3, 100, 10, 2, 40, 36, 300, 10000.0f, CLF_ROPE_NORM, 0, 1}, 4.0f, 256},
};
static clf_status q_rope_yarn(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_rope_yarn, CLF_ROPE_NEOX, rope_yarn_quick);
}

static const int glu_quick[2][2] = {{3, 37}, {1, 300}};
static clf_status q_swiglu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_SILU, glu_quick);
}
static clf_status q_geglu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_GELU_TANH, glu_quick);
}
static const int glu_oai_quick[2][2] = {{3, 37}, {2, 64}}; /* a partial run; whole blocks through clf_glu_xq */
static clf_status q_swiglu_oai(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return SHAPES(at_glu, CLF_GLU_SWIGLU_OAI, glu_oai_quick);
}

static clf_status q_elementwise(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    clf_check_result r;
    int i = 0;
    for (int alias = 0; alias < 3; alias++, i++) {
        CLF_TRY(clf_check_add(rt, seed + (uint64_t)i, 3, 37 + 64 * alias, alias, &r));
        fold(res, &r, i);
    }
    for (int in_place = 0; in_place < 2; in_place++, i++) {
        CLF_TRY(clf_check_scale(rt, seed + (uint64_t)i, 2, 101, in_place, &r));
        fold(res, &r, i);
    }
    CLF_TRY(clf_check_add_rows(rt, seed + (uint64_t)i, 5, 37, &r));
    fold(res, &r, i++);
    fold_done(res, i);
    return CLF_OK;
}

static clf_status q_softmax(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[2][2] = {{4, 37}, {3, 700}};
    return SHAPES(at_softmax, 0, s);
}

static clf_status q_xq(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[3][4] = {{CLF_XQ_QUANTIZE, 3, 2, 96}, {CLF_XQ_RMSNORM, 2, 1, 320}, {CLF_XQ_SWIGLU, 3, 3, 64}};
    return SHAPES(at_xq, 0, s);
}

/* one slice and two (a slice is 1024 values, two per compute unit), k from 1 to the most */
static clf_status q_topk(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const int s[4][3] = {{37, 1, 0}, {700, 40, 1}, {2500, CLF_TOPK_MAX, 0}, {2049, 5, 1}};
    return SHAPES(at_topk, 0, s);
}

#define Q_GET_ROWS_ENTRY(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    {"get_rows_" #name, q_get_rows_##NAME},
const clf_check clf_checks_ops_quick[] = {
    {"dequantize_f16_bits", clf_check_f16_bits},
    CLF_TYPES(Q_GET_ROWS_ENTRY, ~)
    {"rmsnorm", q_rmsnorm},
    {"rmsnorm_heads", q_rmsnorm_heads},
    {"rope_norm", q_rope_norm},
    {"rope_neox", q_rope_neox},
    {"rope_yarn", q_rope_yarn},
    {"swiglu", q_swiglu},
    {"swiglu_oai", q_swiglu_oai},
    {"geglu", q_geglu},
    {"elementwise", q_elementwise},
    {"softmax", q_softmax},
    {"quantize_x", q_xq},
    {"topk", q_topk},
    {NULL, NULL},
};

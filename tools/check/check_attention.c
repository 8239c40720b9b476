/* Attention checks: KV write bit-exactness and attention (tiled prefill,
 * split-K decode, naive) against a double-precision C reference. */
#include "check_attention.h"

#include "matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* F32 accumulation over head_dim products and exp2 against double: a few
 * 1e-7 relative in practice; scores near ±80 lose more to the rounding of
 * the score itself before exp. */
#define TOL 1e-5
#define TOL_LARGE 5e-5

/* n values (a whole number of blocks where quantized) as the cache holds them. */
static void kv_round_row(clf_type t, const float *x, float *y, int n) {
    if (t == CLF_Q8_0 || t == CLF_Q4_0) {
        unsigned char q[34 * 512 / 32]; /* the blocks of a row of up to 512 values */
        for (int i = 0; i < n; i += 512) {
            const int m = n - i < 512 ? n - i : 512;
            clf_quantize(t, x + i, q, m);
            clf_dequantize(t, q, y + i, m);
        }
        return;
    }
    for (int i = 0; i < n; i++) y[i] = t == CLF_F16 ? clf_f16_to_f32(clf_f32_to_f16(x[i])) : x[i];
}

/* Every cache byte 0xff (NaN halves, -1 quant bytes), so a kernel reading
 * a slot nobody wrote fails the check. Written from the host rather than by
 * clEnqueueFillBuffer: after a fill, Oclgrind 21.10's uninitialised-value
 * plugin takes what kernels later write there for uninitialised. */
static clf_status cache_poison(clf_runtime *rt, clf_kv_cache *c) {
    const size_t one = c->bytes / 2;
    unsigned char *ff = malloc(one ? one : 1);
    if (!ff) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    memset(ff, 0xff, one);
    clf_status st = clf_cl_check(clEnqueueWriteBuffer(rt->queue, c->k, CL_TRUE, 0, one, ff, 0, NULL, NULL),
                                 "clEnqueueWriteBuffer");
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueWriteBuffer(rt->queue, c->v, CL_TRUE, 0, one, ff, 0, NULL, NULL),
                          "clEnqueueWriteBuffer");
    free(ff);
    return st;
}

/* ---- reference ------------------------------------------------------------- */

/* qkv: rows of positions 0 .. pos0 + n_tokens - 1, `stride` floats apart, Q at
 * column 0, K at n_head * hd, V after K. out [n_tokens][n_head][hd] for the
 * new tokens. sinks (or NULL): a logit per head in every row's denominator
 * (llama.cpp's soft_max with sinks). Returns the largest |score|. */
static double attention_ref(const float *qkv, int stride, const clf_attn_case *cs, double scale, const float *sinks,
                            double *out) {
    const int hd = cs->head_dim, n_kv = cs->pos0 + cs->n_tokens, g = cs->n_head / cs->n_kv_head;
    const int kcol = cs->n_head * hd, vcol = kcol + cs->n_kv_head * hd, kvw = cs->n_kv_head * hd;
    /* K and V as the cache holds them */
    float *k = malloc((size_t)n_kv * kvw * sizeof *k), *v = malloc((size_t)n_kv * kvw * sizeof *v);
    double *s = malloc((size_t)n_kv * sizeof *s);
    double maxabs = 0;
    if (!k || !v || !s) {
        free(k), free(v), free(s);
        return -1;
    }
    for (int j = 0; j < n_kv; j++) { /* a head's row a whole number of blocks where quantized */
        kv_round_row(cs->kv_type, qkv + (size_t)j * stride + kcol, k + (size_t)j * kvw, kvw);
        kv_round_row(cs->kv_type, qkv + (size_t)j * stride + vcol, v + (size_t)j * kvw, kvw);
    }
    for (int t = 0; t < cs->n_tokens; t++) {
        const int pos = cs->pos0 + t, first = cs->window > 0 && pos >= cs->window ? pos - cs->window + 1 : 0;
        for (int h = 0; h < cs->n_head; h++) {
            const float *q = qkv + (size_t)pos * stride + h * hd;
            const int off = (h / g) * hd;
            double mx = -INFINITY, sum = 0;
            for (int j = first; j <= pos; j++) {
                double dot = 0;
                for (int d = 0; d < hd; d++) dot += (double)q[d] * k[(size_t)j * kvw + off + d];
                s[j] = dot * scale;
                mx = fmax(mx, s[j]);
                maxabs = fmax(maxabs, fabs(s[j]));
            }
            if (sinks) mx = fmax(mx, sinks[h]);
            double *o = out + ((size_t)t * cs->n_head + h) * hd;
            memset(o, 0, (size_t)hd * sizeof *o);
            if (sinks) sum += exp(sinks[h] - mx); /* in the denominator only */
            for (int j = first; j <= pos; j++) {
                const double p = exp(s[j] - mx);
                sum += p;
                for (int d = 0; d < hd; d++) o[d] += p * v[(size_t)j * kvw + off + d];
            }
            for (int d = 0; d < hd; d++) o[d] /= sum;
        }
    }
    free(k), free(v), free(s);
    return maxabs;
}

/* ---- attention check ----------------------------------------------------------- */

typedef struct {
    clf_kv_cache cache;
    clf_tensor qkv, out;
    float *host_qkv, *host_out;
    double *ref;
    clf_tensor out_q, out_q_ref; /* a fused single decode's output in int8 form, and clf_quantize_x's */
    clf_tensor sinks;            /* [n_head], where the case has sinks */
    float *host_sinks;
} attn_bufs;

static void bufs_free(attn_bufs *b) {
    clf_kv_cache_free(&b->cache);
    clf_tensor_free(&b->qkv);
    clf_tensor_free(&b->out);
    clf_tensor_free(&b->out_q);
    clf_tensor_free(&b->out_q_ref);
    clf_tensor_free(&b->sinks);
    free(b->host_sinks);
    free(b->host_qkv);
    free(b->host_out);
    free(b->ref);
}

/* RoPE of a row's Q and K heads (they are adjacent) at position pos, as
 * clf_check_attention's fused decode asks it: base 10000, linear scale 0.5
 * (the position halved), n_rot of each head, NORM or NEOX pairs. The angle
 * is formed in float as the kernels form it (an angle of a few thousand
 * radians is only that exact), its cos and sin and the rotation in double. */
static void rope_ref_row(float *row, const clf_attn_case *cs, int pos) {
    const int n_pairs = cs->n_rot / 2, neox = cs->rope == 2;
    const float log2_scale = (float)(-2.0 * log2(10000.0) / cs->n_rot);
    /* YaRN as llama.cpp's rope_yarn (ext_factor 1, betas 32 and 1, attn_factor 1), original context 64 */
    const double f = cs->yarn, corr0 = cs->n_rot * log(64 / (32 * 2 * M_PI)) / (2 * log(10000.0));
    const double corr1 = cs->n_rot * log(64 / (1 * 2 * M_PI)) / (2 * log(10000.0));
    const double lo = fmax(0, floor(corr0)), hi = fmin(cs->n_rot - 1, ceil(corr1));
    const double mscale = f > 0 ? (f <= 1 ? 1 : 0.1 * log(f) + 1) / (1 + 0.1 * log(f)) * (1 + 0.1 * log(f)) : 1;
    for (int h = 0; h < cs->n_head + cs->n_kv_head; h++) {
        float *x = row + (size_t)h * cs->head_dim;
        for (int i = 0; i < n_pairs; i++) {
            double theta = (float)pos * 0.5f * exp2f((float)i * log2_scale);
            if (f > 0) { /* the unscaled angle, then the ramp's mix of it and theta / f */
                const double extrap = (float)pos * exp2f((float)i * log2_scale);
                const double mix = 1 - fmin(1, fmax(0, (i - lo) / fmax(0.001, hi - lo)));
                theta = extrap / f * (1 - mix) + extrap * mix;
            }
            const double c = cos(theta) * mscale, s = sin(theta) * mscale;
            const int ia = neox ? i : 2 * i, ib = neox ? i + n_pairs : 2 * i + 1;
            const double a = x[ia], b = x[ib];
            x[ia] = (float)(a * c - b * s);
            x[ib] = (float)(a * s + b * c);
        }
    }
}

/* Writes K/V of the cached prefix, then runs the new tokens (in chunks when
 * asked), each chunk writing its K/V before attending. */
static clf_status run_case(clf_runtime *rt, const clf_attn_case *cs, attn_bufs *b, int stride, float scale) {
    const int hd = cs->head_dim, kcol = cs->n_head * hd, vcol = kcol + cs->n_kv_head * hd;
    const int ring = b->cache.n_ctx < cs->pos0 + cs->n_tokens;
    const int pre_step = ring ? b->cache.n_ctx - cs->window + 1 : cs->pos0;
    for (int p = 0; p < cs->pos0; p += pre_step) {
        const int n = p + pre_step <= cs->pos0 ? pre_step : cs->pos0 - p;
        clf_tensor pre = clf_tensor_rows(&b->qkv, p, n);
        CLF_TRY(clf_kv_write(rt, &b->cache, 1, (clf_rows){&pre, kcol, stride}, (clf_rows){&pre, vcol, stride}, n, p));
    }
    const int step = cs->chunk > 0 ? cs->chunk : cs->n_tokens;
    const clf_tensor *sk = cs->sinks ? &b->sinks : NULL;
    for (int t0 = 0; t0 < cs->n_tokens; t0 += step) {
        const int n = t0 + step <= cs->n_tokens ? step : cs->n_tokens - t0, pos = cs->pos0 + t0;
        clf_tensor rows = clf_tensor_rows(&b->qkv, pos, n), out = clf_tensor_rows(&b->out, t0, n);
        const clf_rows q = {&rows, 0, stride};
        if (cs->fused && n == 1) {
            clf_rope_params rope = {.mode = cs->rope == 2 ? CLF_ROPE_NEOX : CLF_ROPE_NORM, .n_rot = cs->n_rot,
                                    .base = 10000.0f, .freq_scale = 0.5f};
            if (cs->yarn > 0) CLF_TRY(clf_rope_yarn(&rope, cs->yarn, 64, 1.0f, CLF_YARN_BETA_FAST, CLF_YARN_BETA_SLOW));
            CLF_TRY(clf_attention_decode_ex(rt, &b->cache, 1, q, (clf_rows){&rows, kcol, stride},
                                            (clf_rows){&rows, vcol, stride}, cs->n_head, pos, scale,
                                            cs->rope ? &rope : NULL, sk, &out, b->out_q.mem ? &b->out_q : NULL));
            continue;
        }
        CLF_TRY(clf_kv_write(rt, &b->cache, 1, (clf_rows){&rows, kcol, stride}, (clf_rows){&rows, vcol, stride}, n,
                             pos));
        CLF_TRY(cs->naive ? clf_attention_naive_ex(rt, &b->cache, 1, q, cs->n_head, n, pos, scale, sk, &out)
                          : clf_attention_ex(rt, &b->cache, 1, q, cs->n_head, n, pos, scale, sk, &out));
    }
    return clf_tensor_download(rt, &b->out, b->host_out, clf_tensor_bytes(&b->out));
}

clf_status clf_check_attention(clf_runtime *rt, uint64_t seed, const clf_attn_case *cs, clf_check_result *res) {
    memset(res, 0, sizeof *res);
    if (cs->n_tokens <= 0 || cs->pos0 < 0 || cs->n_kv_head <= 0 || cs->n_head % cs->n_kv_head)
        return clf_fail(CLF_ERR_ARG, "bad attention check case");
    const int hd = cs->head_dim, n_pos = cs->pos0 + cs->n_tokens;
    const int stride = (cs->n_head + 2 * cs->n_kv_head) * hd + 5; /* odd: rows not 16-aligned */
    const float scale = 1.0f / sqrtf((float)hd), mag = cs->magnitude > 0 ? cs->magnitude : 1.0f;
    const size_t n_out = (size_t)cs->n_tokens * cs->n_head * hd;
    attn_bufs b;
    memset(&b, 0, sizeof b);
    b.host_qkv = malloc((size_t)n_pos * stride * sizeof(float));
    b.host_out = malloc(n_out * sizeof(float));
    b.ref = malloc(n_out * sizeof(double));
    if (!b.host_qkv || !b.host_out || !b.ref) {
        bufs_free(&b);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    uint64_t s = clf_rng_init(seed, 0xA77);
    const int vcol = (cs->n_head + cs->n_kv_head) * hd;
    for (int p = 0; p < n_pos; p++)
        for (int i = 0; i < stride; i++) {
            const float a = i < vcol ? mag : 1.0f; /* Q and K scaled, V (and padding) in ±1 */
            b.host_qkv[(size_t)p * stride + i] = clf_rng_uniform(&s, -a, a);
        }

    /* sinks from -3 to 5: from nothing beside the keys' e^s (|s| about 0.3) to most of the weight */
    if (cs->sinks && !(b.host_sinks = malloc((size_t)cs->n_head * sizeof(float)))) {
        bufs_free(&b);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    for (int h = 0; cs->sinks && h < cs->n_head; h++) b.host_sinks[h] = clf_rng_uniform(&s, -3.0f, 5.0f);
    clf_status st = clf_kv_cache_create(rt, cs->kv_type, 2, cs->n_kv_head, hd, cs->n_slots > 0 ? cs->n_slots : n_pos + 3,
                                        cs->window, &b.cache);
    if (st == CLF_OK && cs->sinks) st = clf_tensor_alloc(rt, CLF_F32, cs->n_head, 1, &b.sinks);
    if (st == CLF_OK && cs->sinks) st = clf_tensor_upload(rt, &b.sinks, b.host_sinks, (size_t)cs->n_head * sizeof(float));
    if (st == CLF_OK) {
        b.cache.variant = cs->variant;
        b.cache.n_split = cs->n_split;
        st = cache_poison(rt, &b.cache);
    }
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, stride, n_pos, &b.qkv);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &b.qkv, b.host_qkv, (size_t)n_pos * stride * sizeof(float));
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, (int64_t)cs->n_head * hd, cs->n_tokens, &b.out);
    if (st == CLF_OK) st = clf_tensor_fill(rt, &b.out, 0xff);
    /* a fused single decode also writes its output's int8 form: it must be clf_quantize_x's, byte for byte */
    const int want_q = cs->fused && cs->n_tokens == 1 && hd % 32 == 0;
    const int64_t qf = CLF_XQ_FLOATS((int64_t)cs->n_head * hd);
    if (st == CLF_OK && want_q) st = clf_tensor_alloc(rt, CLF_F32, qf, 1, &b.out_q);
    if (st == CLF_OK && want_q) st = clf_tensor_alloc(rt, CLF_F32, qf, 1, &b.out_q_ref);
    if (st == CLF_OK && want_q) st = clf_tensor_fill(rt, &b.out_q, 0xff);
    if (st == CLF_OK) st = run_case(rt, cs, &b, stride, scale);
    int q_same = 1;
    if (st == CLF_OK && want_q) {
        float *got = malloc((size_t)qf * sizeof *got), *want = malloc((size_t)qf * sizeof *want);
        st = got && want ? clf_quantize_x(rt, &b.out, &b.out_q_ref) : clf_fail(CLF_ERR_MEMORY, "out of host memory");
        if (st == CLF_OK) st = clf_tensor_download(rt, &b.out_q, got, (size_t)qf * sizeof *got);
        if (st == CLF_OK) st = clf_tensor_download(rt, &b.out_q_ref, want, (size_t)qf * sizeof *want);
        q_same = st == CLF_OK && !memcmp(got, want, (size_t)qf * sizeof *got);
        free(got), free(want);
    }
    /* the reference sees Q and K rotated where run_case decoded a token through the fused kernel */
    const int step = cs->chunk > 0 ? cs->chunk : cs->n_tokens;
    for (int t = 0; cs->fused && cs->rope && t < cs->n_tokens; t++)
        if (t / step * step + 1 == cs->n_tokens || step == 1)
            rope_ref_row(b.host_qkv + (size_t)(cs->pos0 + t) * stride, cs, cs->pos0 + t);
    const double maxabs = st == CLF_OK ? attention_ref(b.host_qkv, stride, cs, scale, b.host_sinks, b.ref) : 0;
    if (maxabs < 0) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) {
        res->err = q_same ? clf_rel_err(b.host_out, b.ref, n_out) : INFINITY;
        res->tol = maxabs > 20 ? TOL_LARGE : TOL;
        /* fused RoPE: a last-bit difference in exp2 moves an angle of p/2 radians by p·3e-8 */
        if (cs->fused && cs->rope) res->tol += 2e-9 * n_pos;
        /* a quantized value may land one level off the reference's: OpenCL's float division (the block's
         * scale) may be 2.5 ulp off, and a fused RoPE rotates K in float, the reference in double; a q4_0
         * level is 16 q8_0 levels (measured over 6 runs: at most 1.5e-4 and 7.5e-4) */
        if (cs->kv_type == CLF_Q8_0) res->tol = 5e-4;
        if (cs->kv_type == CLF_Q4_0) res->tol = 3e-3;
        const clf_attn_plan plan = clf_attention_plan(rt, &b.cache, n_pos);
        char splits[24] = "", win[40] = "";
        if (cs->n_tokens == 1 && !cs->naive) snprintf(splits, sizeof splits, " splits %d", plan.n_split);
        if (cs->window) snprintf(win, sizeof win, " win %d/%d", cs->window, b.cache.n_ctx);
        snprintf(res->detail, sizeof res->detail, "%s n=%d pos0=%d chunk %d heads %d/%d hd %d %s%s%s%s%s |s|max %.0f",
                 cs->naive ? "naive" : plan.variant == CLF_ATTN_GPU ? "gpu" : "cpu", cs->n_tokens, cs->pos0,
                 cs->chunk, cs->n_head, cs->n_kv_head, hd, clf_type_get(cs->kv_type)->name, win, splits,
                 cs->sinks ? " sinks" : "", cs->yarn > 0 ? " yarn" : "", maxabs);
    }
    bufs_free(&b);
    return st;
}

/* ---- KV write check ------------------------------------------------------------ */

static int kv_elem_ok(clf_type type, const unsigned char *cache, size_t idx, int written, float x) {
    if (type == CLF_F16) {
        uint16_t h;
        memcpy(&h, cache + 2 * idx, 2);
        return written ? h == clf_f32_to_f16(x) : h == 0xffff;
    }
    uint32_t u, want;
    memcpy(&u, cache + 4 * idx, 4);
    memcpy(&want, &x, 4);
    return written ? u == want : u == 0xffffffffu;
}

clf_status clf_check_kv_write(clf_runtime *rt, uint64_t seed, clf_type type, int n_kv_head, int head_dim,
                              int n_tokens, int pos0, clf_check_result *res) {
    memset(res, 0, sizeof *res);
    const int width = n_kv_head * head_dim, stride = 2 * width + 3, kcol = 1, vcol = width + 2;
    const int n_ctx = pos0 + n_tokens + 2;
    float *src = malloc((size_t)n_tokens * stride * sizeof *src);
    clf_kv_cache c;
    clf_tensor t;
    memset(&c, 0, sizeof c);
    memset(&t, 0, sizeof t);
    unsigned char *kh = NULL, *vh = NULL;
    if (!src) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    uint64_t s = clf_rng_init(seed, 0xA78);
    for (size_t i = 0; i < (size_t)n_tokens * stride; i++) src[i] = clf_rng_uniform(&s, -3, 3);

    clf_status st = clf_kv_cache_create(rt, type, 2, n_kv_head, head_dim, n_ctx, 0, &c);
    if (st == CLF_OK) st = cache_poison(rt, &c);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, stride, n_tokens, &t);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &t, src, (size_t)n_tokens * stride * sizeof *src);
    if (st == CLF_OK)
        st = clf_kv_write(rt, &c, 1, (clf_rows){&t, kcol, stride}, (clf_rows){&t, vcol, stride}, n_tokens, pos0);
    const size_t one = c.bytes / 2;
    if (st == CLF_OK && (!(kh = malloc(one)) || !(vh = malloc(one))))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c.k, CL_TRUE, 0, one, kh, 0, NULL, NULL), "clEnqueueReadBuffer");
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c.v, CL_TRUE, 0, one, vh, 0, NULL, NULL), "clEnqueueReadBuffer");
    if (st == CLF_OK) {
        size_t wrong = 0, total = 0;
        for (int layer = 0; layer < 2; layer++)
            for (int h = 0; h < n_kv_head; h++)
                for (int p = 0; p < c.n_slots; p++) /* a lone cache's identity table: position p in slot p */
                    for (int d = 0; d < head_dim; d++, total++) {
                        const size_t idx = (((size_t)layer * n_kv_head + h) * c.n_slots + p) * head_dim + d;
                        const int written = layer == 1 && p >= pos0 && p < pos0 + n_tokens;
                        const float *row = src + (size_t)(written ? p - pos0 : 0) * stride + h * head_dim + d;
                        wrong += !kv_elem_ok(type, kh, idx, written, row[kcol]);
                        wrong += !kv_elem_ok(type, vh, idx, written, row[vcol]);
                    }
        res->err = (double)wrong / (double)(2 * total);
        res->tol = 0;
        snprintf(res->detail, sizeof res->detail, "%s %d tokens at %d, %d KV heads x %d, ctx %d",
                 type == CLF_F16 ? "f16" : "f32", n_tokens, pos0, n_kv_head, head_dim, n_ctx);
    }
    free(src);
    free(kh);
    free(vh);
    clf_tensor_free(&t);
    clf_kv_cache_free(&c);
    return st;
}

/* ---- decode rows over a paged pool ---------------------------------------------- */

clf_status clf_check_attention_rows(clf_runtime *rt, uint64_t seed, clf_type kv_type, int rope, int variant,
                                    int sinks, clf_check_result *res) {
    /* 3 sequences in a pool of 12 blocks of 32, tables shuffled over it; 4 rows,
     * two of them one sequence's consecutive positions (a speculative step) */
    enum { N_SEQ = 3, N_TBL = 4, N_BLOCKS = 12, N = 4, NH = 2, NKV = 1, HD = 32 };
    static const int seq[N] = {0, 1, 1, 2}, pos[N] = {40, 70, 71, 5};
    const int stride = (NH + 2 * NKV) * HD + 5, kcol = NH * HD, vcol = kcol + NKV * HD, n_pos = N_TBL * 32;
    const float scale = 1.0f / sqrtf((float)HD);
    const clf_attn_case cs = {.n_tokens = 1, .n_head = NH, .n_kv_head = NKV, .head_dim = HD, .kv_type = kv_type,
                              .rope = rope, .n_rot = HD - 6};
    memset(res, 0, sizeof *res);
    clf_kv_cache pool;
    clf_attn_rows rows = {0};
    clf_tensor qkv = {0}, dq = {0}, out = {0}, out_q = {0}, out_q_ref = {0}, tsk = {0};
    float hsk[NH];
    const size_t seq_floats = (size_t)n_pos * stride, n_out = (size_t)N * NH * HD;
    const int64_t qf = CLF_XQ_FLOATS(NH * HD);
    float *host = malloc(N_SEQ * seq_floats * sizeof *host), *drows = malloc((size_t)N * stride * sizeof *drows);
    float *got = malloc(n_out * sizeof *got), *xq = malloc((size_t)N * qf * sizeof *xq);
    float *xq_ref = malloc((size_t)N * qf * sizeof *xq_ref);
    double *ref = malloc(n_out * sizeof *ref), maxabs = 0;
    clf_status st = host && drows && got && xq && xq_ref && ref ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    uint64_t s = clf_rng_init(seed, 0xA79);
    for (size_t i = 0; host && i < N_SEQ * seq_floats; i++) host[i] = clf_rng_uniform(&s, -1, 1);
    for (int h = 0; h < NH; h++) hsk[h] = clf_rng_uniform(&s, -3.0f, 5.0f);
    if (st == CLF_OK && sinks) st = clf_tensor_alloc(rt, CLF_F32, NH, 1, &tsk);
    if (st == CLF_OK && sinks) st = clf_tensor_upload(rt, &tsk, hsk, sizeof hsk);
    memset(&pool, 0, sizeof pool);
    if (st == CLF_OK) st = clf_kv_pool_create(rt, kv_type, 2, NKV, HD, N_BLOCKS, 32, N_SEQ, N_TBL, 0, &pool);
    if (st == CLF_OK) {
        pool.variant = (clf_attn_variant)variant;
        pool.n_split = 3; /* the reduction, whatever the keys */
        st = cache_poison(rt, &pool);
    }
    int32_t perm[N_BLOCKS]; /* N_SEQ * N_TBL */
    _Static_assert(N_BLOCKS == N_SEQ * N_TBL, "perm is the tables");
    for (int i = 0; i < N_BLOCKS; i++) perm[i] = i;
    for (int i = N_BLOCKS - 1; i > 0; i--) { /* Fisher-Yates */
        const int j = (int)(clf_rng_next(&s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    /* the N_SEQ tables (perm in N_TBL pieces) in one write of the whole buffer rather than
     * clf_kv_table_upload's one a sequence: a host write to part of a buffer makes
     * Oclgrind 21.10's uninitialised-value plugin forget the rest of it */
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueWriteBuffer(rt->queue, pool.tbl, CL_TRUE, 0, sizeof perm, perm, 0, NULL, NULL),
                          "writing the block tables");
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, stride, (int64_t)N_SEQ * n_pos, &qkv);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &qkv, host, N_SEQ * seq_floats * sizeof *host);
    /* each sequence's keys before its first row, written through its view */
    for (int i = 0; st == CLF_OK && i < N; i++) {
        if (i && seq[i] == seq[i - 1]) continue;
        clf_kv_cache view = clf_kv_cache_seq(&pool, seq[i]);
        clf_tensor pre = clf_tensor_rows(&qkv, seq[i] * n_pos, pos[i]);
        st = clf_kv_write(rt, &view, 1, (clf_rows){&pre, kcol, stride}, (clf_rows){&pre, vcol, stride}, pos[i], 0);
    }
    for (int i = 0; host && i < N; i++)
        memcpy(drows + (size_t)i * stride, host + seq[i] * seq_floats + (size_t)pos[i] * stride, stride * sizeof *drows);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, stride, N, &dq);
    if (st == CLF_OK) st = clf_tensor_upload(rt, &dq, drows, (size_t)N * stride * sizeof *drows);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, NH * HD, N, &out);
    if (st == CLF_OK) st = clf_tensor_fill(rt, &out, 0xff);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, qf, N, &out_q);
    if (st == CLF_OK) st = clf_tensor_alloc(rt, CLF_F32, qf, N, &out_q_ref);
    if (st == CLF_OK) st = clf_tensor_fill(rt, &out_q, 0xff);
    if (st == CLF_OK) st = clf_attn_rows_set(rt, &pool, &rows, N, seq, pos);
    const clf_rope_params rp = {.mode = rope == 2 ? CLF_ROPE_NEOX : CLF_ROPE_NORM, .n_rot = cs.n_rot, .base = 10000.0f,
        .freq_scale = 0.5f};
    if (st == CLF_OK)
        st = clf_attention_decode_rows_ex(rt, &pool, &rows, 1, (clf_rows){&dq, 0, stride},
                                          (clf_rows){&dq, kcol, stride}, (clf_rows){&dq, vcol, stride}, NH, scale,
                                          rope ? &rp : NULL, sinks ? &tsk : NULL, &out, &out_q);
    if (st == CLF_OK) st = clf_tensor_download(rt, &out, got, n_out * sizeof *got);
    if (st == CLF_OK) st = clf_quantize_x(rt, &out, &out_q_ref);
    if (st == CLF_OK) st = clf_tensor_download(rt, &out_q, xq, (size_t)N * qf * sizeof *xq);
    if (st == CLF_OK) st = clf_tensor_download(rt, &out_q_ref, xq_ref, (size_t)N * qf * sizeof *xq_ref);
    /* the reference: every decode row's Q and K rotated, then each row's attention over its sequence */
    for (int i = 0; st == CLF_OK && rope && i < N; i++)
        rope_ref_row(host + seq[i] * seq_floats + (size_t)pos[i] * stride, &cs, pos[i]);
    for (int i = 0; st == CLF_OK && i < N; i++) {
        clf_attn_case one = cs;
        one.pos0 = pos[i];
        const double m =
            attention_ref(host + seq[i] * seq_floats, stride, &one, scale, sinks ? hsk : NULL, ref + (size_t)i * NH * HD);
        if (m < 0) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        maxabs = fmax(maxabs, m);
    }
    if (st == CLF_OK) {
        res->err = memcmp(xq, xq_ref, (size_t)N * qf * sizeof *xq) ? INFINITY : clf_rel_err(got, ref, n_out);
        res->tol = kv_type == CLF_Q8_0 ? 5e-4 : kv_type == CLF_Q4_0 ? 3e-3 : TOL + (rope ? 2e-9 * n_pos : 0);
        snprintf(res->detail, sizeof res->detail, "%s %d rows of %d sequences, shuffled blocks, splits 3 %s%s%s",
                 clf_attention_plan(rt, &pool, pos[0] + 1).variant == CLF_ATTN_GPU ? "gpu" : "cpu", N, N_SEQ, clf_type_get(kv_type)->name,
                 rope == 2 ? " rope neox" : rope ? " rope norm" : "", sinks ? " sinks" : "");
    }
    clf_attn_rows_free(&rows);
    clf_kv_cache_free(&pool);
    clf_tensor_free(&qkv), clf_tensor_free(&dq), clf_tensor_free(&out), clf_tensor_free(&out_q);
    clf_tensor_free(&out_q_ref), clf_tensor_free(&tsk);
    free(host), free(drows), free(got), free(xq), free(xq_ref), free(ref);
    return st;
}

/* ---- selftest table ------------------------------------------------------------- */

static clf_status run(clf_runtime *rt, uint64_t seed, clf_check_result *res, clf_attn_case cs) {
    return clf_check_attention(rt, seed, &cs, res);
}

static clf_status chk_kv_write_f32(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return clf_check_kv_write(rt, seed, CLF_F32, 3, 64, 7, 5, res);
}
static clf_status chk_kv_write_f16(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return clf_check_kv_write(rt, seed, CLF_F16, 3, 64, 7, 5, res);
}
/* SmolLM2's head layout: 9 query heads over 3 KV heads of 64 */
static clf_status chk_prefill(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 129, .n_head = 9, .n_kv_head = 3, .head_dim = 64,
                                              .kv_type = CLF_F32});
}
static clf_status chk_prefill_chunked_f16(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 100, .pos0 = 37, .n_head = 9, .n_kv_head = 3,
                                              .head_dim = 64, .kv_type = CLF_F16, .chunk = 33});
}
static clf_status chk_prefill_gpu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 67, .pos0 = 10, .n_head = 8, .n_kv_head = 2,
                                              .head_dim = 128, .kv_type = CLF_F32, .variant = CLF_ATTN_GPU});
}
static clf_status chk_decode(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 1, .pos0 = 1000, .n_head = 9, .n_kv_head = 3,
                                              .head_dim = 64, .kv_type = CLF_F16});
}
static clf_status chk_decode_gpu(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 1, .pos0 = 300, .n_head = 9, .n_kv_head = 3,
                                              .head_dim = 64, .kv_type = CLF_F32, .variant = CLF_ATTN_GPU});
}
static clf_status chk_large_scores(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 64, .pos0 = 5, .n_head = 9, .n_kv_head = 3,
                                              .head_dim = 64, .kv_type = CLF_F32, .magnitude = 7.5f});
}
/* Gemma 3 270M's local layers: 4 query heads on 1 KV head of 256, a window
 * (shortened) over a ring of slots, prefilled in chunks, then decoded */
static clf_status chk_window_prefill(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 150, .pos0 = 30, .n_head = 4, .n_kv_head = 1,
                                              .head_dim = 256, .kv_type = CLF_F16, .chunk = 40, .window = 57,
                                              .n_slots = 96});
}
static clf_status chk_window_decode(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 1, .pos0 = 700, .n_head = 4, .n_kv_head = 1,
                                              .head_dim = 256, .kv_type = CLF_F16, .window = 300, .n_slots = 320});
}
static clf_status chk_naive(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    return run(rt, seed, res, (clf_attn_case){.n_tokens = 33, .pos0 = 4, .n_head = 9, .n_kv_head = 3,
                                              .head_dim = 64, .kv_type = CLF_F32, .naive = 1});
}

const clf_check clf_checks_attention[] = {
    {"kv_write_f32", chk_kv_write_f32},
    {"kv_write_f16", chk_kv_write_f16},
    {"attn_prefill", chk_prefill},
    {"attn_prefill_chunked_f16", chk_prefill_chunked_f16},
    {"attn_prefill_gpu_shape", chk_prefill_gpu},
    {"attn_decode_f16", chk_decode},
    {"attn_decode_gpu_shape", chk_decode_gpu},
    {"attn_large_scores", chk_large_scores},
    {"attn_window_prefill", chk_window_prefill},
    {"attn_window_decode", chk_window_decode},
    {"attn_naive", chk_naive},
    {NULL, NULL},
};

/* ---- the quick table (`selftest --quick`): every path at shapes a simulator
 * runs in seconds; the prefill's query rows (tokens × group heads) past two
 * 64-row tiles with a partial one, decodes split (the reduction), every
 * cache type, rings, fused RoPE and the batched rows. ---- */

#define Q_RUN(name, ...)                                                                \
    static clf_status name(clf_runtime *rt, uint64_t seed, clf_check_result *res) {     \
        return run(rt, seed, res, (clf_attn_case){__VA_ARGS__});                        \
    }
Q_RUN(q_prefill_f32, .n_tokens = 67, .pos0 = 5, .n_head = 2, .n_kv_head = 1, .head_dim = 16, .kv_type = CLF_F32)
Q_RUN(q_prefill_f16, .n_tokens = 45, .pos0 = 27, .n_head = 6, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F16,
      .chunk = 17)
Q_RUN(q_prefill_q8_0, .n_tokens = 40, .pos0 = 3, .n_head = 4, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_Q8_0)
Q_RUN(q_prefill_q4_0, .n_tokens = 35, .pos0 = 9, .n_head = 4, .n_kv_head = 2, .head_dim = 32, .kv_type = CLF_Q4_0)
Q_RUN(q_large_scores, .n_tokens = 33, .pos0 = 2, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F32,
      .magnitude = 7.5f)
Q_RUN(q_decode_f32, .n_tokens = 1, .pos0 = 100, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F32,
      .n_split = 3)
Q_RUN(q_decode_f16, .n_tokens = 1, .pos0 = 70, .n_head = 6, .n_kv_head = 3, .head_dim = 16, .kv_type = CLF_F16)
Q_RUN(q_decode_q8_0, .n_tokens = 1, .pos0 = 90, .n_head = 4, .n_kv_head = 2, .head_dim = 32, .kv_type = CLF_Q8_0,
      .n_split = 2)
Q_RUN(q_decode_q4_0, .n_tokens = 1, .pos0 = 50, .n_head = 2, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_Q4_0,
      .n_split = 3)
Q_RUN(q_window_prefill, .n_tokens = 50, .pos0 = 30, .n_head = 2, .n_kv_head = 1, .head_dim = 16, .kv_type = CLF_F16,
      .chunk = 20, .window = 25, .n_slots = 64)
Q_RUN(q_window_decode, .n_tokens = 1, .pos0 = 150, .n_head = 2, .n_kv_head = 1, .head_dim = 16, .kv_type = CLF_F32,
      .window = 40, .n_slots = 64, .n_split = 2)
/* decoded token by token through the fused write (and RoPE): chunks of 1 */
Q_RUN(q_fused_rope_norm, .n_tokens = 2, .pos0 = 40, .n_head = 2, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_F16,
      .chunk = 1, .fused = 1, .rope = 1, .n_rot = 26, .n_split = 2)
Q_RUN(q_fused_rope_neox, .n_tokens = 2, .pos0 = 33, .n_head = 2, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_Q8_0,
      .chunk = 1, .fused = 1, .rope = 2, .n_rot = 32)
Q_RUN(q_naive, .n_tokens = 9, .pos0 = 4, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F16, .naive = 1)
/* attention sinks (gpt-oss): a window's edge in chunked prefill and in a split decode through the fused write, naive */
Q_RUN(q_sinks_prefill, .n_tokens = 40, .pos0 = 20, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F16,
      .chunk = 13, .window = 17, .n_slots = 64, .sinks = 1)
Q_RUN(q_sinks_decode, .n_tokens = 2, .pos0 = 130, .n_head = 4, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_F32,
      .chunk = 1, .fused = 1, .rope = 2, .n_rot = 32, .window = 40, .n_slots = 64, .n_split = 3, .sinks = 1)
Q_RUN(q_fused_yarn, .n_tokens = 2, .pos0 = 300, .n_head = 2, .n_kv_head = 1, .head_dim = 32, .kv_type = CLF_F32,
      .chunk = 1, .fused = 1, .rope = 2, .n_rot = 32, .n_split = 2, .yarn = 32.0f)
Q_RUN(q_sinks_naive, .n_tokens = 9, .pos0 = 4, .n_head = 4, .n_kv_head = 2, .head_dim = 16, .kv_type = CLF_F32,
      .naive = 1, .window = 5, .sinks = 1)

static clf_status q_kv_write(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    clf_check_result r;
    CLF_TRY(clf_check_kv_write(rt, seed, CLF_F32, 2, 48, 5, 3, res));
    CLF_TRY(clf_check_kv_write(rt, seed + 1, CLF_F16, 3, 16, 7, 2, &r));
    if (!(r.err <= res->err)) *res = r;
    return CLF_OK;
}

static clf_status q_rows(clf_runtime *rt, uint64_t seed, clf_check_result *res) {
    static const struct { clf_type t; int rope, sinks; } cases[] = {
        {CLF_F32, 0, 0}, {CLF_F16, 1, 0}, {CLF_Q8_0, 2, 0}, {CLF_Q4_0, 1, 0}, {CLF_F32, 2, 1}};
    res->err = -1;
    for (int i = 0; i < 5; i++) {
        clf_check_result r;
        CLF_TRY(clf_check_attention_rows(rt, seed + (uint64_t)i, cases[i].t, cases[i].rope, CLF_ATTN_AUTO,
                                         cases[i].sinks, &r));
        if (!(r.err / r.tol <= res->err / (res->tol > 0 ? res->tol : 1))) *res = r;
    }
    return CLF_OK;
}

const clf_check clf_checks_attention_quick[] = {
    {"kv_write", q_kv_write},
    {"attn_prefill_f32", q_prefill_f32},
    {"attn_prefill_chunked_f16", q_prefill_f16},
    {"attn_prefill_q8_0", q_prefill_q8_0},
    {"attn_prefill_q4_0", q_prefill_q4_0},
    {"attn_large_scores", q_large_scores},
    {"attn_decode_f32", q_decode_f32},
    {"attn_decode_f16", q_decode_f16},
    {"attn_decode_q8_0", q_decode_q8_0},
    {"attn_decode_q4_0", q_decode_q4_0},
    {"attn_window_prefill", q_window_prefill},
    {"attn_window_decode", q_window_decode},
    {"attn_fused_rope_norm", q_fused_rope_norm},
    {"attn_fused_rope_neox", q_fused_rope_neox},
    {"attn_decode_rows", q_rows},
    {"attn_naive", q_naive},
    {"attn_sinks_prefill", q_sinks_prefill},
    {"attn_sinks_decode", q_sinks_decode},
    {"attn_sinks_naive", q_sinks_naive},
    {"attn_fused_yarn", q_fused_yarn},
    {NULL, NULL},
};

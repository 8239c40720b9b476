#include "ref_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* What the reference knows of each family, independently of models/. */
typedef struct {
    int n_layer, d, ff, nh, nkv, hd, nrot, vocab;
    int neox, bias, qk_norm, post_norms, embd_scale, gelu, window, swa_period;
    float base, swa_base, freq_scale, eps;
    float *freqs; /* rope_freqs.weight or NULL */
    int n_expert, n_used, ff_exp; /* experts (ffn_gate_inp present) */
} hp_t;

static uint32_t u32(const clf_gguf *g, const char *arch, const char *k, uint32_t def) {
    char key[128];
    uint32_t v = def;
    snprintf(key, sizeof key, "%s.%s", arch, k);
    if (clf_gguf_find(g, key)) clf_gguf_get_u32(g, key, &v);
    return v;
}

static float f32(const clf_gguf *g, const char *arch, const char *k, float def) {
    char key[128];
    float v = def;
    snprintf(key, sizeof key, "%s.%s", arch, k);
    if (clf_gguf_find(g, key)) clf_gguf_get_f32(g, key, &v);
    return v;
}

/* Dequantized copy of a tensor, or NULL if absent. */
static float *deq(const clf_gguf *g, const char *name) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, name);
    if (!t) return NULL;
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *x = malloc((size_t)n * sizeof *x);
    clf_dequantize(t->type, t->data, x, n);
    return x;
}

static float *deq_layer(const clf_gguf *g, int l, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", l, what);
    return deq(g, name);
}

/* out[r] = sum_c W[r, c] x[c] (+ b[r]) */
static void matvec(double *out, const float *W, const double *x, int rows, int cols, const float *b) {
    for (int r = 0; r < rows; r++) {
        double s = b ? b[r] : 0;
        for (int c = 0; c < cols; c++) s += (double)W[(size_t)r * cols + c] * x[c];
        out[r] = s;
    }
}

static void rmsnorm(double *out, const double *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

static void rope(double *v, int nheads, const hp_t *hp, int pos, int swa) {
    double base = swa ? hp->swa_base : hp->base, scale = swa ? 1.0 : hp->freq_scale;
    for (int h = 0; h < nheads; h++) {
        double *x = v + (size_t)h * hp->hd;
        for (int i = 0; i < hp->nrot / 2; i++) {
            double theta = pos * scale * pow(base, -2.0 * i / hp->nrot);
            if (hp->freqs) theta /= hp->freqs[i];
            double c = cos(theta), s = sin(theta);
            int a = hp->neox ? i : 2 * i, b = hp->neox ? i + hp->nrot / 2 : 2 * i + 1;
            double x0 = x[a], x1 = x[b];
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }
}

static double act(const hp_t *hp, double g) {
    if (hp->gelu) return 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    return g / (1.0 + exp(-g));
}

static int is_arch(const char *arch, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(arch, names[i])) return 1;
    return 0;
}

int ref_llama_forward(const clf_gguf *g, const int32_t *tokens, int n, double *logits) {
    clf_gguf_str archs;
    if (clf_gguf_get_str(g, "general.architecture", &archs) != CLF_OK || archs.len > 31) return -1;
    char arch[32] = {0};
    memcpy(arch, archs.ptr, archs.len);
    static const char *const neox[] = {"qwen2", "qwen3", "gemma3", "phi3", "qwen3moe"},
                             *const qk_norm[] = {"qwen3", "gemma3", "qwen3moe"};
    hp_t hp = {0};
    hp.n_layer = (int)u32(g, arch, "block_count", 0);
    hp.d = (int)u32(g, arch, "embedding_length", 0);
    hp.ff = (int)u32(g, arch, "feed_forward_length", 0);
    hp.nh = (int)u32(g, arch, "attention.head_count", 1);
    hp.nkv = (int)u32(g, arch, "attention.head_count_kv", (uint32_t)hp.nh);
    hp.hd = (int)u32(g, arch, "attention.key_length", (uint32_t)(hp.d / hp.nh));
    hp.nrot = (int)u32(g, arch, "rope.dimension_count", (uint32_t)hp.hd);
    hp.base = f32(g, arch, "rope.freq_base", 10000.0f);
    hp.eps = f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f);
    hp.freq_scale = 1.0f / f32(g, arch, "rope.scaling.factor", 1.0f);
    hp.neox = is_arch(arch, neox, 5);
    hp.bias = !strcmp(arch, "qwen2");
    hp.qk_norm = is_arch(arch, qk_norm, 3);
    hp.n_expert = (int)u32(g, arch, "expert_count", 0);
    hp.n_used = (int)u32(g, arch, "expert_used_count", 0);
    hp.ff_exp = !strcmp(arch, "qwen3moe") ? (int)u32(g, arch, "expert_feed_forward_length", 0) : hp.ff;
    /* Gemma 3: sqrt(d)-scaled embeddings, norms after attention and MLP,
     * GeGLU, and a sliding window with base 10000 on 5 layers of 6 */
    hp.post_norms = hp.embd_scale = hp.gelu = !strcmp(arch, "gemma3");
    if (!strcmp(arch, "gemma3")) {
        hp.window = (int)u32(g, arch, "attention.sliding_window", 0);
        hp.swa_period = 6;
        hp.swa_base = 10000.0f;
    }
    hp.freqs = deq(g, "rope_freqs.weight");
    const clf_gguf_tensor *et = clf_gguf_find_tensor(g, "token_embd.weight");
    if (!et) return -1;
    hp.vocab = (int)et->ne[1];
    int qd = hp.nh * hp.hd, kvd = hp.nkv * hp.hd, grp = hp.nh / hp.nkv;

    float *emb = deq(g, "token_embd.weight"), *onorm = deq(g, "output_norm.weight"), *out = deq(g, "output.weight");
    if (!out) out = emb;
    int wide = hp.d > qd ? hp.d : qd;
    double *x = calloc((size_t)hp.d, sizeof *x), *xn = calloc((size_t)hp.d, sizeof *xn);
    double *q = calloc((size_t)qd + 2 * kvd, sizeof *q), *att = calloc((size_t)qd, sizeof *att);
    double *tmp = calloc((size_t)(wide > hp.ff ? wide : hp.ff), sizeof *tmp);
    const int ffw = hp.ff > hp.ff_exp ? hp.ff : hp.ff_exp;
    double *hb = calloc((size_t)2 * ffw, sizeof *hb), *hb2 = calloc((size_t)ffw, sizeof *hb2);
    double *prob = calloc((size_t)hp.n_expert + 1, sizeof *prob);
    int *chosen = calloc((size_t)hp.n_used + 1, sizeof *chosen);
    double *dn = calloc((size_t)hp.d, sizeof *dn);
    double *kc = calloc((size_t)hp.n_layer * n * kvd, sizeof *kc), *vc = calloc((size_t)hp.n_layer * n * kvd, sizeof *vc);
    double *sc = calloc((size_t)n, sizeof *sc);

    for (int pos = 0; pos < n; pos++) {
        for (int i = 0; i < hp.d; i++) x[i] = emb[(size_t)tokens[pos] * hp.d + i] * (hp.embd_scale ? sqrt((double)hp.d) : 1.0);
        for (int l = 0; l < hp.n_layer; l++) {
            const int swa = hp.swa_period && (l + 1) % hp.swa_period != 0;
            float *an = deq_layer(g, l, "attn_norm.weight"), *fn = deq_layer(g, l, "ffn_norm.weight");
            float *wqkv = deq_layer(g, l, "attn_qkv.weight"), *wq = deq_layer(g, l, "attn_q.weight");
            float *wk = deq_layer(g, l, "attn_k.weight"), *wv = deq_layer(g, l, "attn_v.weight");
            float *wo = deq_layer(g, l, "attn_output.weight");
            float *wg = deq_layer(g, l, "ffn_gate.weight"), *wu = deq_layer(g, l, "ffn_up.weight");
            float *wd = deq_layer(g, l, "ffn_down.weight");
            float *bq = hp.bias ? deq_layer(g, l, "attn_q.bias") : NULL, *bk = hp.bias ? deq_layer(g, l, "attn_k.bias") : NULL;
            float *bv = hp.bias ? deq_layer(g, l, "attn_v.bias") : NULL;
            float *qn = hp.qk_norm ? deq_layer(g, l, "attn_q_norm.weight") : NULL;
            float *kn = hp.qk_norm ? deq_layer(g, l, "attn_k_norm.weight") : NULL;
            float *pan = hp.post_norms ? deq_layer(g, l, "post_attention_norm.weight") : NULL;
            float *pfn = hp.post_norms ? deq_layer(g, l, "post_ffw_norm.weight") : NULL;
            double *kr = kc + ((size_t)l * n + pos) * kvd, *vr = vc + ((size_t)l * n + pos) * kvd;
            rmsnorm(xn, x, an, hp.d, hp.eps);
            if (wqkv) { /* Phi-3: one projection, Q|K|V rows */
                matvec(q, wqkv, xn, qd + 2 * kvd, hp.d, NULL);
                memcpy(kr, q + qd, (size_t)kvd * sizeof *kr);
                memcpy(vr, q + qd + kvd, (size_t)kvd * sizeof *vr);
            } else {
                matvec(q, wq, xn, qd, hp.d, bq);
                matvec(kr, wk, xn, kvd, hp.d, bk);
                matvec(vr, wv, xn, kvd, hp.d, bv);
            }
            if (hp.qk_norm) {
                for (int h = 0; h < hp.nh; h++) rmsnorm(q + (size_t)h * hp.hd, q + (size_t)h * hp.hd, qn, hp.hd, hp.eps);
                for (int h = 0; h < hp.nkv; h++) rmsnorm(kr + (size_t)h * hp.hd, kr + (size_t)h * hp.hd, kn, hp.hd, hp.eps);
            }
            rope(q, hp.nh, &hp, pos, swa);
            rope(kr, hp.nkv, &hp, pos, swa);
            const int first = swa && pos >= hp.window ? pos - hp.window + 1 : 0;
            for (int h = 0; h < hp.nh; h++) {
                int kh = h / grp;
                double mx = -INFINITY, sum = 0;
                for (int t = first; t <= pos; t++) {
                    const double *kt = kc + ((size_t)l * n + t) * kvd + (size_t)kh * hp.hd;
                    double s = 0;
                    for (int i = 0; i < hp.hd; i++) s += q[h * hp.hd + i] * kt[i];
                    sc[t] = s / sqrt((double)hp.hd);
                    if (sc[t] > mx) mx = sc[t];
                }
                for (int t = first; t <= pos; t++) sum += (sc[t] = exp(sc[t] - mx));
                for (int i = 0; i < hp.hd; i++) {
                    double a = 0;
                    for (int t = first; t <= pos; t++) a += sc[t] * vc[((size_t)l * n + t) * kvd + (size_t)kh * hp.hd + i];
                    att[h * hp.hd + i] = a / sum;
                }
            }
            matvec(tmp, wo, att, hp.d, qd, NULL);
            if (pan) rmsnorm(tmp, tmp, pan, hp.d, hp.eps);
            for (int i = 0; i < hp.d; i++) x[i] += tmp[i];
            rmsnorm(xn, x, fn, hp.d, hp.eps);
            float *winp = hp.n_expert ? deq_layer(g, l, "ffn_gate_inp.weight") : NULL;
            if (winp) { /* experts: softmax, top-k (ties: the smaller id), renormalised, each expert's MLP */
                float *eg = deq_layer(g, l, "ffn_gate_exps.weight"), *eu = deq_layer(g, l, "ffn_up_exps.weight");
                float *ed = deq_layer(g, l, "ffn_down_exps.weight");
                const int E = hp.n_expert, fe = hp.ff_exp;
                matvec(prob, winp, xn, E, hp.d, NULL);
                double mx = -INFINITY, sum = 0, wsum = 0;
                for (int e = 0; e < E; e++) mx = prob[e] > mx ? prob[e] : mx;
                for (int e = 0; e < E; e++) sum += (prob[e] = exp(prob[e] - mx));
                for (int e = 0; e < E; e++) prob[e] /= sum;
                for (int j = 0; j < hp.n_used; j++) {
                    int best = -1;
                    for (int e = 0; e < E; e++) {
                        int taken = 0;
                        for (int i = 0; i < j; i++) taken |= chosen[i] == e;
                        if (!taken && (best < 0 || prob[e] > prob[best])) best = e;
                    }
                    chosen[j] = best;
                    wsum += prob[best];
                }
                for (int i = 0; i < hp.d; i++) tmp[i] = 0;
                for (int j = 0; j < hp.n_used; j++) {
                    const int e = chosen[j];
                    const double we = prob[e] / wsum;
                    matvec(hb, eg + (size_t)e * fe * hp.d, xn, fe, hp.d, NULL);
                    matvec(hb2, eu + (size_t)e * fe * hp.d, xn, fe, hp.d, NULL);
                    for (int i = 0; i < fe; i++) hb[i] = act(&hp, hb[i]) * hb2[i];
                    matvec(dn, ed + (size_t)e * hp.d * fe, hb, hp.d, fe, NULL);
                    for (int i = 0; i < hp.d; i++) tmp[i] += we * dn[i];
                }
                for (int i = 0; i < hp.d; i++) x[i] += tmp[i];
                free(eg), free(eu), free(ed), free(winp);
                float *all[] = {an, fn, wqkv, wq, wk, wv, wo, bq, bk, bv, qn, kn, pan, pfn};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
                continue;
            }
            if (wg) {
                matvec(hb, wg, xn, hp.ff, hp.d, NULL);
                matvec(hb2, wu, xn, hp.ff, hp.d, NULL);
            } else { /* Phi-3: ffn_up holds gate|up */
                matvec(hb, wu, xn, 2 * hp.ff, hp.d, NULL);
                memcpy(hb2, hb + hp.ff, (size_t)hp.ff * sizeof *hb2);
            }
            for (int i = 0; i < hp.ff; i++) hb[i] = act(&hp, hb[i]) * hb2[i];
            matvec(tmp, wd, hb, hp.d, hp.ff, NULL);
            if (pfn) rmsnorm(tmp, tmp, pfn, hp.d, hp.eps);
            for (int i = 0; i < hp.d; i++) x[i] += tmp[i];
            float *all[] = {an, fn, wqkv, wq, wk, wv, wo, wg, wu, wd, bq, bk, bv, qn, kn, pan, pfn};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
        }
        rmsnorm(xn, x, onorm, hp.d, hp.eps);
        matvec(logits + (size_t)pos * hp.vocab, out, xn, hp.vocab, hp.d, NULL);
    }
    if (out != emb) free(out);
    free(emb);
    free(onorm);
    free(hp.freqs);
    free(prob);
    free(chosen);
    free(dn);
    double *all[] = {x, xn, q, att, tmp, hb, hb2, kc, vc, sc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return 0;
}

/* ---- tiny random models -------------------------------------------------- */

static int add_tensor(clf_gguf_writer *w, const char *name, clf_type type, int64_t ne0, int64_t ne1, float scale,
                      float offset, uint64_t *s) {
    int64_t n = ne0 * ne1;
    if (!clf_row_bytes(type, ne0)) return -1; /* rows must be whole blocks of the type */
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = offset + scale * tu_normal(s);
    void *q = malloc(clf_row_bytes(type, ne0) * (size_t)ne1);
    clf_quantize(type, x, q, n);
    int64_t ne[2] = {ne0, ne1};
    clf_status st = clf_gguf_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, q);
    free(x);
    free(q);
    return st == CLF_OK ? 0 : -1;
}

/* A 3-D tensor [ne0, ne1, ne2] (experts stacked) of N(0, scale²) values. */
static int add_tensor3(clf_gguf_writer *w, const char *name, clf_type type, int64_t ne0, int64_t ne1, int64_t ne2,
                       float scale, uint64_t *s) {
    int64_t n = ne0 * ne1 * ne2;
    if (!clf_row_bytes(type, ne0)) return -1;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * tu_normal(s);
    void *q = malloc(clf_row_bytes(type, ne0) * (size_t)(ne1 * ne2));
    clf_quantize(type, x, q, n);
    int64_t ne[3] = {ne0, ne1, ne2};
    clf_status st = clf_gguf_add_tensor(w, name, type, 3, ne, q);
    free(x);
    free(q);
    return st == CLF_OK ? 0 : -1;
}

int tiny_model_write(const tiny_model *tm, uint64_t seed, const char *path) {
    uint64_t s = seed ? seed : 1;
    clf_gguf_writer *w;
    if (clf_gguf_writer_create(&w) != CLF_OK) return -1;
    const char *a = tm->arch;
    const int qd = tm->head_dim * tm->n_head, kvd = tm->head_dim * tm->n_head_kv, d = tm->n_embd ? tm->n_embd : qd;
    const int gemma = !strcmp(a, "gemma3"), phi = !strcmp(a, "phi3");
    const int qk_norm = gemma || !strcmp(a, "qwen3") || !strcmp(a, "qwen3moe");
    const int oss = !strcmp(a, "gpt-oss"); /* biases, sinks, YaRN, windows on even layers */
    int rc = 0;
    char key[128];
    clf_gguf_set_str(w, "general.architecture", a);
    clf_gguf_set_str(w, "general.name", "tiny random test model");
#define U32(k, v) (snprintf(key, sizeof key, "%s." k, a), clf_gguf_set_u32(w, key, (uint32_t)(v)))
#define F32(k, v) (snprintf(key, sizeof key, "%s." k, a), clf_gguf_set_f32(w, key, (v)))
    U32("block_count", tm->n_layer);
    U32("context_length", 4096);
    U32("embedding_length", d);
    const int qwen3moe = !strcmp(a, "qwen3moe"), n_ff_exp = tm->n_ff_exp ? tm->n_ff_exp : tm->n_ff;
    U32("feed_forward_length", tm->n_ff);
    if (tm->n_expert) {
        U32("expert_count", tm->n_expert);
        U32("expert_used_count", tm->n_expert_used);
        if (qwen3moe || oss) U32("expert_feed_forward_length", n_ff_exp);
    }
    U32("attention.head_count", tm->n_head);
    U32("attention.head_count_kv", tm->n_head_kv);
    U32("rope.dimension_count", tm->n_rot ? tm->n_rot : tm->head_dim);
    if (tm->n_embd) {
        U32("attention.key_length", tm->head_dim);
        U32("attention.value_length", tm->head_dim);
    }
    if (gemma || oss) U32("attention.sliding_window", tm->window);
    if (oss) { /* YaRN as gpt-oss states it, at a context whose ramp falls inside a tiny head's pairs */
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        clf_gguf_set_str(w, key, "yarn");
        F32("rope.scaling.factor", 8.0f);
        U32("rope.scaling.original_context_length", 256);
    }
    F32("rope.freq_base", gemma ? 1000000.0f : 10000.0f);
    F32("attention.layer_norm_rms_epsilon", gemma ? 1e-6f : 1e-5f);
    if (tm->rope_scale > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        clf_gguf_set_str(w, key, "linear");
        F32("rope.scaling.factor", tm->rope_scale);
    }
#undef U32
#undef F32
    float wscale = 1.0f / sqrtf((float)d);
    rc |= add_tensor(w, "token_embd.weight", tm->embd_q8_0 ? CLF_Q8_0 : tm->type, d, tm->n_vocab, gemma ? wscale : 1.0f,
                     0, &s);
    /* a small output norm keeps logits near 1 (a plausible, not peaked, softmax) */
    rc |= add_tensor(w, "output_norm.weight", CLF_F32, d, 1, 0.01f, 0.1f, &s);
    const clf_type mix = tm->mix ? tm->mix : tm->type;
    if (!tm->tied) rc |= add_tensor(w, "output.weight", mix, d, tm->n_vocab, wscale, 0, &s);
    if (tm->rope_freqs) { /* Llama 3.1's factors run from 1 (high frequencies) to 8 (low) */
        int half = (tm->n_rot ? tm->n_rot : tm->head_dim) / 2;
        float *ff = malloc((size_t)half * sizeof *ff);
        for (int i = 0; i < half; i++) ff[i] = 1.0f + 7.0f * (float)i / (float)(half > 1 ? half - 1 : 1);
        rc |= clf_gguf_add_tensor(w, "rope_freqs.weight", CLF_F32, 1, (int64_t[]){half}, ff) != CLF_OK;
        free(ff);
    }
    for (int l = 0; l < tm->n_layer && !rc; l++) {
        char n[96];
#define T(what, type, ne0, ne1, sc, off) \
    (snprintf(n, sizeof n, "blk.%d.%s", l, what), add_tensor(w, n, type, ne0, ne1, sc, off, &s))
#define T3(what, type, ne0, ne1, ne2, sc) \
    (snprintf(n, sizeof n, "blk.%d.%s", l, what), add_tensor3(w, n, type, ne0, ne1, ne2, sc, &s))
        rc |= T("attn_norm.weight", CLF_F32, d, 1, 0.1f, 1.0f);
        rc |= T(oss ? "post_attention_norm.weight" : "ffn_norm.weight", CLF_F32, d, 1, 0.1f, 1.0f);
        if (phi) {
            rc |= T("attn_qkv.weight", tm->type, d, qd + 2 * kvd, wscale * 2, 0);
        } else {
            rc |= T("attn_q.weight", tm->type, d, qd, wscale * 2, 0);
            rc |= T("attn_k.weight", tm->type, d, kvd, wscale * 2, 0);
            rc |= T("attn_v.weight", mix, d, kvd, wscale, 0);
        }
        rc |= T("attn_output.weight", tm->type, qd, d, 1.0f / sqrtf((float)qd), 0);
        if (tm->n_expert) { /* the router, a little sharper than the other matrices, and the experts stacked */
            const int fe = qwen3moe || oss ? n_ff_exp : tm->n_ff;
            rc |= T("ffn_gate_inp.weight", CLF_F32, d, tm->n_expert, 2 * wscale, 0);
            rc |= T3("ffn_gate_exps.weight", tm->type, d, fe, tm->n_expert, wscale);
            rc |= T3("ffn_up_exps.weight", mix, d, fe, tm->n_expert, wscale);
            rc |= T3("ffn_down_exps.weight", mix, fe, d, tm->n_expert, 1.0f / sqrtf((float)fe));
        } else if (phi) {
            rc |= T("ffn_up.weight", tm->type, d, 2 * tm->n_ff, wscale, 0);
        } else {
            rc |= T("ffn_gate.weight", tm->type, d, tm->n_ff, wscale, 0);
            rc |= T("ffn_up.weight", mix, d, tm->n_ff, wscale, 0);
        }
        if (!tm->n_expert) rc |= T("ffn_down.weight", mix, tm->n_ff, d, 1.0f / sqrtf((float)tm->n_ff), 0);
        if (oss) { /* gpt-oss: sinks near the scores' scale, and every bias nonzero */
            const int fe = n_ff_exp;
            rc |= T("attn_sinks.weight", CLF_F32, tm->n_head, 1, 1.0f, 0);
            rc |= T("attn_output.bias", CLF_F32, d, 1, 0.5f, 0);
            rc |= T("ffn_gate_inp.bias", CLF_F32, tm->n_expert, 1, 0.5f, 0);
            rc |= T("ffn_gate_exps.bias", CLF_F32, fe, tm->n_expert, 0.5f, 0);
            rc |= T("ffn_up_exps.bias", CLF_F32, fe, tm->n_expert, 0.5f, 0);
            rc |= T("ffn_down_exps.bias", CLF_F32, d, tm->n_expert, 0.5f, 0);
        }
        if (strcmp(a, "qwen2") == 0 || oss) {
            rc |= T("attn_q.bias", CLF_F32, qd, 1, 0.5f, 0);
            rc |= T("attn_k.bias", CLF_F32, kvd, 1, 0.5f, 0);
            rc |= T("attn_v.bias", CLF_F32, kvd, 1, 0.5f, 0);
        }
        if (qk_norm) { /* normed Q and K in the usual spread of scores */
            rc |= T("attn_q_norm.weight", CLF_F32, tm->head_dim, 1, 0.2f, 1.0f);
            rc |= T("attn_k_norm.weight", CLF_F32, tm->head_dim, 1, 0.2f, 1.0f);
        }
        if (gemma) {
            rc |= T("post_attention_norm.weight", CLF_F32, d, 1, 0.1f, 1.0f);
            rc |= T("post_ffw_norm.weight", CLF_F32, d, 1, 0.1f, 1.0f);
        }
#undef T
#undef T3
    }
    if (!rc && clf_gguf_write(w, path) != CLF_OK) rc = -1;
    clf_gguf_writer_free(w);
    return rc;
}

/* LoRA adapters: loading llama.cpp's GGUF adapters against a base model,
 * choosing them per sequence, and their products in the forward pass
 * (lora.h).
 *
 * A batch's rows of different sequences may use different adapters. The
 * pass is cut into runs of consecutive rows whose sequences use the same
 * adapters at the same scales (a decode row is one sequence's; a prompt's
 * rows are consecutive), and each run gets, per adapter and adapted
 * product, s' · B·(A·x) added into the base's output, a run's rows
 * computed as they are alone, so a mixed batch gives each request exactly
 * what it gets alone:
 * - decode rows in one launch (clf_lora_rows, cl/lora.cl: A·x into local
 *   memory, the scale, then B·t into the output), from copies of A
 *   (row-major) and B (panels of 16 outputs) kept beside the product
 *   weights (which may be re-laid for the CPU's GEMVs): decode is
 *   launch-bound and the pairs are small, so one launch reading them
 *   costs no more than the two GEMVs (and a scale launch) it replaces;
 * - prompt rows through the products (A·x into a scratch, the scale where
 *   s' ≠ 1, B·t accumulated): the GEMMs are faster over many rows.
 * Decode rows go by their adapters, not their place: the rows of
 * sequences using the same adapters at the same scales make one run
 * wherever they sit in the batch (the server's streams alternate
 * adapters), launched once per adapter over a list of their row indices
 * (uploaded once a pass); prompt rows make runs of consecutive rows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"
#include "lora.h"

/* The device rank: a multiple of this (zero rows of A, zero columns of B:
 * the products' sums gain exact zeros), so that the product kernels' vector
 * loads see whole vectors (ranks 8 and 16 tested on both variants). */
#define CLF_LORA_RANK_ALIGN 8
/* Bounds on a file's values before anything is allocated from them. */
#define CLF_LORA_RANK_MAX 4096

/* ---- loading --------------------------------------------------------------- */

/* Where tensor `what` of a layer goes: its slot, part, first output column,
 * and shape (out × in); 0 when the name is no adaptable weight. */
static int target(const clf_llama_hparams *hp, const char *what, clf_lora_slot *slot, int *part, int64_t *col0,
                  int64_t *out, int64_t *in) {
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim, kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t e = hp->n_embd, ff = hp->n_ff;
    struct {
        const char *name;
        clf_lora_slot slot;
        int part, fused_qkv, fused_gu; /* -1: either; 0/1: only without/with the fused tensor */
        int64_t col0, out, in;
    } const T[] = {
        {"attn_q", CLF_LORA_QKV, 0, 0, -1, 0, q_dim, e},
        {"attn_k", CLF_LORA_QKV, 1, 0, -1, q_dim, kv_dim, e},
        {"attn_v", CLF_LORA_QKV, 2, 0, -1, q_dim + kv_dim, kv_dim, e},
        {"attn_qkv", CLF_LORA_QKV, 0, 1, -1, 0, q_dim + 2 * kv_dim, e},
        {"attn_output", CLF_LORA_WO, 0, -1, -1, 0, e, q_dim},
        {"ffn_gate", CLF_LORA_GU, 0, -1, 0, 0, ff, e},
        {"ffn_up", CLF_LORA_GU, 1, -1, 0, ff, ff, e},
        {"ffn_up", CLF_LORA_GU, 0, -1, 1, 0, 2 * ff, e}, /* Phi-3: gate|up stored as one ffn_up */
        {"ffn_down", CLF_LORA_DOWN, 0, -1, -1, 0, e, ff},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        if (strcmp(T[i].name, what)) continue;
        if (T[i].fused_qkv >= 0 && T[i].fused_qkv != hp->fused_qkv) continue;
        if (T[i].fused_gu >= 0 && T[i].fused_gu != hp->fused_gate_up) continue;
        *slot = T[i].slot, *part = T[i].part, *col0 = T[i].col0, *out = T[i].out, *in = T[i].in;
        return 1;
    }
    return 0;
}

/* A string key equal to want. */
static int key_is(const clf_gguf *g, const char *key, const char *want) {
    clf_gguf_str s;
    return clf_gguf_get_str(g, key, &s) == CLF_OK && s.len == strlen(want) && !memcmp(s.ptr, want, s.len);
}

/* A pair as the file has it, checked, waiting to be packed with its slot's others. */
typedef struct pending {
    const clf_gguf_tensor *a, *b;
    int64_t col0, out, in;
} pending;

/* n floats of type t (F32 or F16) at src into dst. */
static void to_f32(clf_type t, const void *src, float *dst, int64_t n) {
    if (t == CLF_F32) memcpy(dst, src, (size_t)n * sizeof *dst);
    else clf_type_get(t)->to_float(src, dst, n); /* F16: blocks of one */
}

/* The pair of base tensor `base` (its name without .lora_a/.lora_b), checked, into its place in pend. */
static clf_status check_pair(clf_lora *a, pending (*pend)[CLF_LORA_SLOTS][CLF_LORA_PARTS], const char *base,
                             const clf_gguf_tensor *ta, const clf_gguf_tensor *tb) {
    const clf_llama_hparams *hp = &a->m->hp;
    int l, used = 0;
    char what[64];
    /* blk.<l>.<what>.weight, nothing else */
    if (sscanf(base, "blk.%d.%63[a-z_].weight%n", &l, what, &used) != 2 || base[used] != 0 || l < 0)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': not a layer's weight that clinfer can adapt", base);
    if (l >= hp->n_layer)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': the base model has %d layers (another base model?)", base,
                        hp->n_layer);
    clf_lora_slot slot;
    int part;
    int64_t col0, out, in;
    if (!target(hp, what, &slot, &part, &col0, &out, &in))
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': the base model (%s) has no such weight that clinfer "
                                        "can adapt (attn_q/k/v/qkv, attn_output, ffn_gate/up/down)", base, hp->arch);
    if (hp->n_expert && (slot == CLF_LORA_GU || slot == CLF_LORA_DOWN))
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': the base's FFN is a mixture of experts", base);
    /* A ne [in, r], B ne [r, out], 2-D, F32 or F16 */
    for (int i = 0; i < 2; i++) {
        const clf_gguf_tensor *t = i ? tb : ta;
        if (t->type != CLF_F32 && t->type != CLF_F16)
            return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s.lora_%c' is %s: F32 or F16 only", base, i ? 'b' : 'a',
                            clf_type_get(t->type) ? clf_type_get(t->type)->name : "unknown");
        if (t->ne[2] != 1 || t->ne[3] != 1)
            return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s.lora_%c' is not 2-D", base, i ? 'b' : 'a');
    }
    const int64_t r = ta->ne[1];
    if (ta->ne[0] != in || tb->ne[1] != out)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s' has shape A [%lld, %lld], B [%lld, %lld]; the base's "
                                        "weight is [%lld, %lld] (ne): another base model?",
                        base, (long long)ta->ne[0], (long long)ta->ne[1], (long long)tb->ne[0], (long long)tb->ne[1],
                        (long long)in, (long long)out);
    if (tb->ne[0] != r)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': lora_a's rank %lld is not lora_b's %lld (lora_a not "
                                        "transposed?)", base, (long long)r, (long long)tb->ne[0]);
    if (r < 1 || r > CLF_LORA_RANK_MAX)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': rank %lld outside 1 .. %d", base, (long long)r,
                        CLF_LORA_RANK_MAX);
    /* one rank per adapter: alpha / r is the adapter's factor (llama.cpp takes each pair's own r; converted
     * adapters have one) */
    if (a->rank && r != a->rank)
        return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s': rank %lld where the others have %d (one rank per "
                                        "adapter)", base, (long long)r, a->rank);
    a->rank = (int)r;
    a->rank_dev = (int)((r + CLF_LORA_RANK_ALIGN - 1) / CLF_LORA_RANK_ALIGN * CLF_LORA_RANK_ALIGN);
    pending *pd = &pend[l][slot][part];
    if (pd->a) return clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s' appears twice", base);
    *pd = (pending){ta, tb, col0, out, in};
    a->n_pairs++;
    return CLF_OK;
}

/* A slot's pending parts packed into one pair (clf_lora_ab) on the device. */
static clf_status pack_slot(clf_lora *a, const pending *parts, clf_lora_ab *ab) {
    const int64_t r = a->rank, rd = a->rank_dev;
    int np = 0;
    int64_t c0 = INT64_MAX, c1 = 0, in = 0;
    for (int p = 0; p < CLF_LORA_PARTS; p++)
        if (parts[p].a) {
            np++;
            in = parts[p].in;
            if (parts[p].col0 < c0) c0 = parts[p].col0;
            if (parts[p].col0 + parts[p].out > c1) c1 = parts[p].col0 + parts[p].out;
        }
    if (!np) return CLF_OK;
    const int64_t w = np * rd, n_out = c1 - c0;
    float *ha = calloc((size_t)(w * in), sizeof *ha), *hb = calloc((size_t)(n_out * w), sizeof *hb);
    float *row = malloc((size_t)(r > in ? r : in) * sizeof *row);
    clf_status st = ha && hb && row ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int p = 0, k = 0; st == CLF_OK && p < CLF_LORA_PARTS; p++) {
        const pending *pd = &parts[p];
        if (!pd->a) continue;
        const size_t ea = clf_type_get(pd->a->type)->block_bytes, eb = clf_type_get(pd->b->type)->block_bytes;
        /* A's r rows of `in` into rows k·rd ..; B's `out` rows of r into rows col0 - c0 .., columns k·rd .. */
        for (int64_t i = 0; i < r; i++)
            to_f32(pd->a->type, (const unsigned char *)pd->a->data + (size_t)(i * in) * ea, ha + (k * rd + i) * in, in);
        for (int64_t o = 0; o < pd->out; o++) {
            to_f32(pd->b->type, (const unsigned char *)pd->b->data + (size_t)(o * r) * eb, row, r);
            memcpy(hb + (pd->col0 - c0 + o) * w + k * rd, row, (size_t)r * sizeof *row);
        }
        ab->part_out[k][0] = (int)(pd->col0 - c0), ab->part_out[k][1] = (int)(pd->col0 - c0 + pd->out);
        k++;
    }
    ab->n_part = np;
    /* the adapter's power-of-two factor into B (exact), the rest left to the pass's scale */
    for (int64_t i = 0; st == CLF_OK && a->fold != 1 && i < n_out * w; i++) hb[i] *= a->fold;
    /* F16 files stay F16 on the device (half the bytes a decode reads); values exact */
    int f16 = 1;
    for (int p = 0; p < CLF_LORA_PARTS; p++)
        if (parts[p].a && (parts[p].a->type != CLF_F16 || parts[p].b->type != CLF_F16)) f16 = 0;
    uint16_t *h16a = NULL, *h16b = NULL;
    if (st == CLF_OK && f16) {
        h16a = malloc((size_t)(w * in) * sizeof *h16a);
        h16b = malloc((size_t)(n_out * w) * sizeof *h16b);
        if (!h16a || !h16b) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        else {
            clf_type_get(CLF_F16)->from_float(ha, h16a, w * in);
            clf_type_get(CLF_F16)->from_float(hb, h16b, n_out * w);
        }
    }
    const clf_type t = f16 ? CLF_F16 : CLF_F32;
    void *da = f16 ? (void *)h16a : ha, *db = f16 ? (void *)h16b : hb;
    if (st == CLF_OK) st = clf_weight_upload(a->m->rt, t, w, in, da, &ab->a);
    if (st == CLF_OK) st = clf_weight_upload(a->m->rt, t, n_out, w, db, &ab->b);
    /* the decode kernel's A (row-major) and B in panels of 16 outputs (clf_lora_rows; the weights' own buffers
     * may be re-laid: CPU panels of 32); none past its widest t */
    if (st == CLF_OK && w <= CLF_LORA_ROWS_MAX_WIDTH) {
        const size_t es = f16 ? 2 : 4;
        const int64_t n_pad = (n_out + 15) / 16 * 16; /* outputs rounded up to whole panels: zeros past n_out */
        unsigned char *bp = calloc((size_t)(n_pad * w), es);
        const unsigned char *src = db;
        if (!bp) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        for (int64_t o = 0; st == CLF_OK && o < n_out; o++)
            for (int64_t j = 0; j < w; j++)
                memcpy(bp + (size_t)((o / 16 * w + j) * 16 + o % 16) * es, src + (size_t)(o * w + j) * es, es);
        if (st == CLF_OK) st = clf_tensor_alloc(a->m->rt, t, in, w, &ab->a_rows);
        if (st == CLF_OK) st = clf_tensor_upload(a->m->rt, &ab->a_rows, da, (size_t)(w * in) * es);
        if (st == CLF_OK) st = clf_tensor_alloc(a->m->rt, t, n_pad, w, &ab->bp_rows);
        if (st == CLF_OK) st = clf_tensor_upload(a->m->rt, &ab->bp_rows, bp, (size_t)(n_pad * w) * es);
        if (st == CLF_OK) a->device_bytes += (size_t)(w * in + n_pad * w) * es;
        free(bp);
    }
    free(h16a);
    free(h16b);
    free(ha);
    free(hb);
    free(row);
    if (st != CLF_OK) return st;
    ab->col0 = c0;
    ab->width = (int)w;
    a->device_bytes += ab->a.bytes + ab->b.bytes;
    return CLF_OK;
}

/* The pairs named in the file, each found once, then packed by slot. */
static clf_status load_all(clf_lora *a, const clf_gguf *g) {
    const int64_t nt = clf_gguf_n_tensors(g);
    const int n_layer = a->m->hp.n_layer;
    char name[128], other[136];
    pending (*pend)[CLF_LORA_SLOTS][CLF_LORA_PARTS] = calloc((size_t)n_layer, sizeof *pend);
    if (!pend) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_status st = CLF_OK;
    for (int64_t i = 0; st == CLF_OK && i < nt; i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        if (t->name.len >= sizeof name) {
            st = clf_fail(CLF_ERR_FORMAT, "LoRA tensor name of %llu bytes", (unsigned long long)t->name.len);
            break;
        }
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        const size_t n = t->name.len;
        /* norms: ignored, as llama.cpp does */
        if (n >= 12 && !strcmp(name + n - 12, "_norm.weight")) continue;
        if (n >= 7 && !strcmp(name + n - 7, ".lora_b")) {
            name[n - 7] = 0;
            snprintf(other, sizeof other, "%s.lora_a", name);
            if (!clf_gguf_find_tensor(g, other))
                st = clf_fail(CLF_ERR_FORMAT, "LoRA tensor pair for '%s' is missing lora_a", name);
            continue; /* checked with its lora_a */
        }
        if (n < 7 || strcmp(name + n - 7, ".lora_a")) {
            st = clf_fail(CLF_ERR_FORMAT, "LoRA tensor '%s' has an unexpected suffix", name);
            break;
        }
        name[n - 7] = 0;
        snprintf(other, sizeof other, "%s.lora_b", name);
        const clf_gguf_tensor *tb = clf_gguf_find_tensor(g, other);
        st = tb ? check_pair(a, pend, name, t, tb)
                : clf_fail(CLF_ERR_FORMAT, "LoRA tensor pair for '%s' is missing lora_b", name);
    }
    if (st == CLF_OK && !a->n_pairs) st = clf_fail(CLF_ERR_FORMAT, "the LoRA adapter has no tensors");
    /* alpha / r folded into B where it is a power of two from 1 to 256 (exact in F16 and F32 for B's values,
     * overflow aside: checked), else applied with the user's scale */
    int e2;
    const float f = clf_lora_factor(a, 1.0f);
    a->fold = st == CLF_OK && frexpf(f, &e2) == 0.5f && f >= 1 && f <= 256 ? f : 1.0f;
    for (int l = 0; st == CLF_OK && a->fold != 1 && l < n_layer; l++)
        for (int s = 0; s < CLF_LORA_SLOTS; s++)
            for (int p = 0; p < CLF_LORA_PARTS; p++) {
                const pending *pd = &pend[l][s][p];
                if (!pd->b) continue;
                for (int64_t i = 0; pd->b->type == CLF_F16 && i < pd->b->ne[0] * pd->b->ne[1]; i++) {
                    float v;
                    to_f32(CLF_F16, (const unsigned char *)pd->b->data + 2 * i, &v, 1);
                    if (fabsf(v * a->fold) > 65504.0f) a->fold = 1.0f; /* would overflow F16: not folded */
                }
            }
    for (int l = 0; st == CLF_OK && l < n_layer; l++)
        for (int s = 0; st == CLF_OK && s < CLF_LORA_SLOTS; s++) st = pack_slot(a, pend[l][s], &a->ab[l][s]);
    free(pend);
    return st;
}

clf_status clf_lora_load(const clf_llama *m, const clf_gguf *g, clf_lora **out) {
    *out = NULL;
    const clf_llama_hparams *hp = &m->hp;
    if (m->l0 != 0 || m->l1 != hp->n_layer)
        return clf_fail(CLF_ERR_ARG, "LoRA adapters need the whole model on one device (not a split)");
    if (!key_is(g, "general.type", "adapter"))
        return clf_fail(CLF_ERR_FORMAT, "not a LoRA adapter: general.type is not \"adapter\"");
    if (!key_is(g, "adapter.type", "lora"))
        return clf_fail(CLF_ERR_FORMAT, "not a LoRA adapter: adapter.type is not \"lora\"");
    if (!key_is(g, "general.architecture", hp->arch))
        return clf_fail(CLF_ERR_FORMAT, "the LoRA adapter's general.architecture is not the model's (%s)", hp->arch);
    float alpha = 0;
    if (clf_gguf_find(g, "adapter.lora.alpha")) CLF_TRY(clf_gguf_get_f32(g, "adapter.lora.alpha", &alpha));
    if (!isfinite(alpha)) return clf_fail(CLF_ERR_FORMAT, "adapter.lora.alpha is not finite");
    clf_lora *a = calloc(1, sizeof *a);
    if (!a) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    a->m = m;
    a->alpha = alpha;
    a->ab = calloc((size_t)hp->n_layer, sizeof *a->ab);
    if (!a->ab) {
        free(a);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    clf_gguf_guard_begin(g); /* the tensors are read from the mapping */
    clf_status st = load_all(a, g), changed = clf_gguf_guard_end(g);
    if (changed != CLF_OK) st = changed;
    if (st != CLF_OK) {
        clf_lora_free(a);
        return st;
    }
    *out = a;
    return CLF_OK;
}

void clf_lora_free(clf_lora *a) {
    if (!a) return;
    for (int l = 0; a->ab && l < a->m->hp.n_layer; l++)
        for (int s = 0; s < CLF_LORA_SLOTS; s++) {
            clf_lora_ab *ab = &a->ab[l][s];
            clf_tensor_free(&ab->a_rows), clf_tensor_free(&ab->bp_rows);
            clf_weight_free(&ab->a), clf_weight_free(&ab->b);
        }
    free(a->ab);
    free(a);
}

float clf_lora_factor(const clf_lora *a, float scale) {
    return a->alpha != 0 && a->rank ? scale * a->alpha / (float)a->rank : scale;
}

/* ---- per sequence ------------------------------------------------------------- */

/* A run of rows using the same adapters: consecutive rows [r0, r0 + n), or
 * (dec, r0 -1) the n decode rows listed at rows[i0 ..] of the context
 * (not consecutive); dec: they are decode rows (each as alone). */
typedef struct lora_run {
    int r0, n, dec, seq, i0;
} lora_run;

struct clf_lora_ctx {
    int n_seq;
    clf_lora_use (*use)[CLF_LORA_PER_SEQ]; /* [n_seq] */
    int *n_use;                            /* [n_seq] */
    clf_tensor t;                          /* F32 [n_batch × t_rank]: A·x of a run */
    int t_rank;
    lora_run *runs; /* [n_batch]: this pass's runs with adapters */
    int n_runs;
    /* the decode runs' rows, grouped by run: on the host (int32 [n_batch]), on the device (uploaded by the
     * plan where some run's rows are not consecutive, without waiting: rows_ev, waited for before the host's
     * copy is written again) */
    int32_t *rows;
    clf_tensor rows_dev;
    cl_event rows_ev;
    int *run_of; /* [n_batch]: scratch, a decode segment's run */
    int touches[CLF_LORA_SLOTS]; /* this pass: a run's adapter adapts the slot in some layer */
};

void clf_lora_ctx_free(struct clf_lora_ctx *lc) {
    if (!lc) return;
    if (lc->rows_ev) clWaitForEvents(1, &lc->rows_ev), clReleaseEvent(lc->rows_ev); /* rows read until then */
    clf_tensor_free(&lc->t);
    clf_tensor_free(&lc->rows_dev);
    free(lc->rows);
    free(lc->run_of);
    free(lc->use);
    free(lc->n_use);
    free(lc->runs);
    free(lc);
}

clf_status clf_llama_ctx_set_lora(clf_llama_ctx *c, int seq, const clf_lora_use *use, int n) {
    if (seq < 0 || seq >= c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d outside 0 .. %d", seq, c->n_seq - 1);
    if (n < 0 || n > CLF_LORA_PER_SEQ)
        return clf_fail(CLF_ERR_ARG, "%d LoRA adapters for one sequence (at most %d)", n, CLF_LORA_PER_SEQ);
    for (int i = 0; i < n; i++) {
        if (!use[i].lora || use[i].lora->m != c->m)
            return clf_fail(CLF_ERR_ARG, "LoRA adapter %d was not loaded for this context's model", i);
        if (!isfinite(use[i].scale)) return clf_fail(CLF_ERR_ARG, "LoRA adapter %d's scale is not finite", i);
    }
    struct clf_lora_ctx *lc = c->lora;
    if (!lc) {
        if (n == 0) return CLF_OK; /* nothing to forget */
        lc = calloc(1, sizeof *lc);
        if (!lc) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        lc->n_seq = c->n_seq;
        lc->use = calloc((size_t)c->n_seq, sizeof *lc->use);
        lc->n_use = calloc((size_t)c->n_seq, sizeof *lc->n_use);
        lc->runs = calloc((size_t)c->n_batch, sizeof *lc->runs);
        lc->rows = calloc((size_t)c->n_batch, sizeof *lc->rows);
        lc->run_of = calloc((size_t)c->n_batch, sizeof *lc->run_of);
        if (!lc->use || !lc->n_use || !lc->runs || !lc->rows || !lc->run_of) {
            clf_lora_ctx_free(lc);
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        /* 4-byte elements: the row indices' int32 */
        const clf_status st = clf_tensor_alloc(c->m->rt, CLF_F32, c->n_batch, 1, &lc->rows_dev);
        if (st != CLF_OK) {
            clf_lora_ctx_free(lc);
            return st;
        }
        c->lora = lc;
    }
    /* the scratch as wide as the widest adapter's stacked ranks */
    int rank = 0;
    for (int i = 0; i < n; i++)
        if (CLF_LORA_PARTS * use[i].lora->rank_dev > rank) rank = CLF_LORA_PARTS * use[i].lora->rank_dev;
    if (rank > lc->t_rank) {
        clf_tensor t;
        CLF_TRY(clf_tensor_alloc(c->m->rt, CLF_F32, rank, c->n_batch, &t));
        clf_tensor_free(&lc->t);
        lc->t = t;
        lc->t_rank = rank;
    }
    /* a scale of 0 is no adapter: the row stays the base's, bit for bit */
    int k = 0;
    for (int i = 0; i < n; i++)
        if (use[i].scale != 0) lc->use[seq][k++] = use[i];
    lc->n_use[seq] = k;
    return CLF_OK;
}

/* ---- the forward pass ------------------------------------------------------------ */

static int same_use(const struct clf_lora_ctx *lc, int s1, int s2) {
    if (lc->n_use[s1] != lc->n_use[s2]) return 0;
    for (int i = 0; i < lc->n_use[s1]; i++)
        if (lc->use[s1][i].lora != lc->use[s2][i].lora || lc->use[s1][i].scale != lc->use[s2][i].scale) return 0;
    return 1;
}

clf_status clf_lora_plan(clf_llama_ctx *c, const segment *segs, int n_seg, int n1) {
    struct clf_lora_ctx *lc = c->lora;
    if (!lc) return CLF_OK;
    lc->n_runs = 0;
    memset(lc->touches, 0, sizeof lc->touches);
    /* the decode segments (a row each): each joins the run of the first before it with the same adapters,
     * wherever it sits */
    for (int s = 0; s < n1; s++) {
        const int q = segs[s].seq;
        lc->run_of[s] = -1;
        if (q < 0 || q >= lc->n_seq || !lc->n_use[q]) continue;
        int r = 0;
        while (r < lc->n_runs && !same_use(lc, lc->runs[r].seq, q)) r++;
        if (r == lc->n_runs) {
            if (lc->n_runs == c->n_batch) return clf_fail(CLF_ERR_ARG, "more LoRA runs than rows");
            lc->runs[lc->n_runs++] = (lora_run){.r0 = -1, .n = 0, .dec = 1, .seq = q};
        }
        lc->run_of[s] = r;
        lc->runs[r].n += segs[s].n;
    }
    /* their rows, run after run, into the host's list (once the last pass's upload of it is done) */
    if (lc->rows_ev) {
        const cl_int err = clWaitForEvents(1, &lc->rows_ev);
        clReleaseEvent(lc->rows_ev);
        lc->rows_ev = NULL;
        CLF_TRY(clf_cl_check(err, "clWaitForEvents (LoRA rows)"));
    }
    int n_rows = 0, listed = 0;
    for (int r = 0; r < lc->n_runs; r++) lc->runs[r].i0 = n_rows, n_rows += lc->runs[r].n, lc->runs[r].n = 0;
    for (int s = 0; s < n1; s++)
        if (lc->run_of[s] >= 0) {
            lora_run *run = &lc->runs[lc->run_of[s]];
            for (int k = 0; k < segs[s].n; k++) lc->rows[run->i0 + run->n++] = segs[s].row0 + k;
        }
    /* a run of consecutive rows takes them as a range (no list), the others the list on the device */
    for (int r = 0; r < lc->n_runs; r++) {
        lora_run *run = &lc->runs[r];
        int k = 1;
        while (k < run->n && lc->rows[run->i0 + k] == lc->rows[run->i0] + k) k++;
        if (k == run->n) run->r0 = lc->rows[run->i0];
        else listed = 1;
    }
    if (listed)
        CLF_TRY(clf_cl_check(clEnqueueWriteBuffer(c->m->rt->queue, lc->rows_dev.mem, CL_FALSE, lc->rows_dev.offset,
                                                  (size_t)n_rows * sizeof *lc->rows, lc->rows, 0, NULL, &lc->rows_ev),
                             "clEnqueueWriteBuffer (LoRA rows)"));
    /* the prompts: runs of consecutive rows */
    const int n_dec = lc->n_runs;
    for (int s = n1; s < n_seg; s++) {
        const int q = segs[s].seq;
        if (q < 0 || q >= lc->n_seq || !lc->n_use[q]) continue;
        lora_run *prev = lc->n_runs > n_dec ? &lc->runs[lc->n_runs - 1] : NULL;
        /* the segment joins the run before it where the rows follow on, with the same adapters */
        if (prev && prev->r0 + prev->n == segs[s].row0 && same_use(lc, prev->seq, q)) {
            prev->n += segs[s].n;
            continue;
        }
        if (lc->n_runs == c->n_batch) return clf_fail(CLF_ERR_ARG, "more LoRA runs than rows");
        lc->runs[lc->n_runs++] = (lora_run){.r0 = segs[s].row0, .n = segs[s].n, .dec = 0, .seq = q};
    }
    if (lc->n_runs)
        for (int sl = 0; sl < CLF_LORA_SLOTS; sl++) lc->touches[sl] = 1; /* per layer: clf_lora_touches */
    return CLF_OK;
}

int clf_lora_touches(const clf_llama_ctx *c, int l, clf_lora_slot slot) {
    const struct clf_lora_ctx *lc = c->lora;
    if (!lc || !lc->n_runs || !lc->touches[slot]) return 0;
    for (int r = 0; r < lc->n_runs; r++) {
        const int q = lc->runs[r].seq;
        for (int i = 0; i < lc->n_use[q]; i++)
            if (lc->use[q][i].lora->ab[l][slot].a.mem) return 1;
    }
    return 0;
}

/* Y (+)= X · Wᵀ into columns from col0: each row as alone (dec) or as one product. */
static clf_status mm(clf_runtime *rt, const clf_weight *w, const clf_tensor *x, clf_tensor *y, int64_t col0, int acc,
                     int dec) {
    return dec ? clf_matmul_rowwise(rt, w, x, y, col0, acc) : clf_matmul_cols(rt, w, x, y, col0, acc);
}

/* y[:, col0 ..] += B · (s' · A x) as two products (and a scale), x and y's rows each as alone (dec) or not. */
static clf_status two_products(clf_runtime *rt, struct clf_lora_ctx *lc, const clf_lora_ab *ab, float s,
                               const clf_tensor *x, clf_tensor *y, int dec) {
    /* t [n × width]: the scratch's first rows, as wide as this slot's stacked ranks */
    clf_tensor t = lc->t;
    t.ne[0] = ab->width;
    t.ne[1] = clf_tensor_nrows(x);
    CLF_TRY(mm(rt, &ab->a, x, &t, 0, 0, dec));
    if (s != 1.0f) CLF_TRY(clf_scale(rt, &t, s, &t)); /* scale 1 (alpha = r, or folded): no launch */
    return mm(rt, &ab->b, &t, y, ab->col0, 1, dec);
}

clf_status clf_lora_add(clf_llama_ctx *c, int l, clf_lora_slot slot, const clf_tensor *in, clf_tensor *out) {
    struct clf_lora_ctx *lc = c->lora;
    if (!lc || !lc->n_runs || !lc->touches[slot]) return CLF_OK;
    clf_runtime *rt = c->m->rt;
    for (int r = 0; r < lc->n_runs; r++) {
        const lora_run *run = &lc->runs[r];
        /* a range of rows, or (decode rows apart) all of them, the run's listed */
        const int listed = run->r0 < 0;
        const clf_tensor x = listed ? *in : clf_tensor_rows(in, run->r0, run->n);
        clf_tensor y = listed ? *out : clf_tensor_rows(out, run->r0, run->n);
        for (int i = 0; i < lc->n_use[run->seq]; i++) {
            const clf_lora *a = lc->use[run->seq][i].lora;
            const float s = clf_lora_factor(a, lc->use[run->seq][i].scale) / a->fold; /* B holds the fold */
            const clf_lora_ab *ab = &a->ab[l][slot];
            if (!ab->a.mem) continue;
            /* decode rows: y[:, col0 ..] += B · (s' · A x) in one launch, each row as alone (cl/lora.cl) */
            if (run->dec && ab->a_rows.mem) {
                CLF_TRY(clf_lora_rows(rt, ab->a.type, ab->a_rows.mem, ab->bp_rows.mem, ab->width, (int)ab->b.rows,
                                      ab->n_part, &ab->part_out[0][0], &x, &y, ab->col0, s,
                                      listed ? lc->rows_dev.mem : NULL, run->i0, run->n));
                continue;
            }
            /* wider pairs and prompts: two products, listed rows one at a time */
            if (!listed) {
                CLF_TRY(two_products(rt, lc, ab, s, &x, &y, run->dec));
                continue;
            }
            for (int k = 0; k < run->n; k++) {
                const clf_tensor xk = clf_tensor_rows(in, lc->rows[run->i0 + k], 1);
                clf_tensor yk = clf_tensor_rows(out, lc->rows[run->i0 + k], 1);
                CLF_TRY(two_products(rt, lc, ab, s, &xk, &yk, 1));
            }
        }
    }
    return CLF_OK;
}

#include "split.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "estimate.h"
#include "family.h"

static int name_is(const char *name, size_t len, const char *want) {
    return len == strlen(want) && !memcmp(name, want, len);
}

/* The N of "blk.N.", or -1. */
static int block_of(const char *name, size_t len) {
    if (len < 6 || memcmp(name, "blk.", 4)) return -1;
    int l = 0;
    size_t i = 4;
    for (; i < len && name[i] >= '0' && name[i] <= '9' && l < (1 << 24); i++) l = l * 10 + (name[i] - '0');
    return i > 4 && i < len && name[i] == '.' ? l : -1;
}

int clf_split_tensor_on_stage(const char *name, size_t len, int l0, int l1, int n_layer) {
    int b = block_of(name, len);
    if (b >= 0) return b >= l0 && b < l1;
    if (name_is(name, len, "token_embd.weight")) return l0 == 0;
    if (name_is(name, len, "output_norm.weight") || name_is(name, len, "output.weight")) return l1 == n_layer;
    return 1;
}

size_t clf_split_range_bytes(const clf_gguf *g, int l0, int l1, int n_layer, int *n_tensors) {
    size_t total = 0;
    int count = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        if (!clf_split_tensor_on_stage(t->name.ptr, t->name.len, l0, l1, n_layer)) continue;
        total += t->bytes;
        count++;
    }
    const clf_gguf_tensor *emb = clf_gguf_find_tensor(g, "token_embd.weight");
    if (l1 == n_layer && emb && !clf_gguf_find_tensor(g, "output.weight")) { /* tied: the head is a copy */
        total += emb->bytes;
        count++;
    }
    if (n_tensors) *n_tensors = count;
    return total;
}

clf_status clf_split_model_from_gguf(const clf_gguf *g, int64_t n_ctx, int64_t n_batch, int n_seq, int kv_elem_bytes,
                                     clf_split_model *sm) {
    clf_model_shape s;
    CLF_TRY(clf_model_shape_from_gguf(g, &s));
    int64_t max = (int64_t)(sizeof sm->layer_bytes / sizeof sm->layer_bytes[0]);
    if (s.n_layer < 1 || s.n_layer > max)
        return clf_fail(CLF_ERR_FORMAT, "%lld layers: a split plans 1 to %lld", (long long)s.n_layer, (long long)max);
    memset(sm, 0, sizeof *sm);
    sm->n_layer = (int)s.n_layer;
    sm->n_embd = s.n_embd;
    sm->n_vocab = s.n_vocab;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        int b = block_of(t->name.ptr, t->name.len);
        if (b >= sm->n_layer) continue; /* not a layer clinfer runs */
        if (b >= 0) sm->layer_bytes[b] += (double)t->bytes;
        else if (name_is(t->name.ptr, t->name.len, "token_embd.weight")) {
            sm->first_bytes += (double)t->bytes;
            if (s.tied) sm->last_bytes += (double)t->bytes;
        } else if (name_is(t->name.ptr, t->name.len, "output_norm.weight") ||
                   name_is(t->name.ptr, t->name.len, "output.weight"))
            sm->last_bytes += (double)t->bytes;
        else sm->common_bytes += (double)t->bytes;
    }
    /* each layer's cache: a paged cache's blocks of every position, or of a sliding-window layer's window
     * (clf_kv_seq_blocks, as models/llama_ctx.c sizes its pools) */
    const clf_family *fam = NULL;
    if (s.n_swa_layers) CLF_TRY(clf_family_of(g, &fam));
    double kv_pos = 2.0 * (double)(s.n_head_kv * s.head_dim) * kv_elem_bytes * n_seq;
    const int fits = n_ctx <= INT_MAX && n_batch <= INT_MAX;
    const double all = fits ? (double)clf_kv_seq_blocks(0, (int)n_batch, (int)n_ctx, CLF_KV_BLOCK) * CLF_KV_BLOCK
                            : (double)n_ctx;
    const double window = s.n_swa_layers && fits
                              ? (double)clf_kv_seq_blocks((int)s.n_swa, (int)n_batch, (int)n_ctx, CLF_KV_BLOCK) * CLF_KV_BLOCK
                              : all;
    for (int l = 0; l < sm->n_layer; l++)
        sm->layer_kv[l] = kv_pos * (fam && clf_family_layer_swa(fam, l) ? window : all);
    sm->scratch_bytes = clf_scratch_bytes(&s, n_batch) - 4.0 * (double)s.n_vocab; /* the logits row: the last's */
    sm->logits_bytes = 4.0 * (double)s.n_vocab * (n_seq < n_batch ? n_seq : n_batch);
    return CLF_OK;
}

clf_status clf_split_parse_ratio(const char *text, double *ratio, int max, int *n) {
    *n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        size_t item = strcspn(p, ",");
        if (end == p || (size_t)(end - p) != item || errno || !isfinite(v) || !(v > 0))
            return clf_fail(CLF_ERR_ARG, "split ratio item '%.*s' is not a positive number", (int)item, p);
        if (*n == max) return clf_fail(CLF_ERR_ARG, "split ratio has more than %d items", max);
        ratio[(*n)++] = v;
        if (!*end) return CLF_OK;
        p = end + 1;
    }
}

static double mib(double b) { return b / 1048576.0; }

clf_status clf_split_plan_make(const clf_split_model *sm, int n, const double *ratio, const double *device_bytes,
                               clf_split_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int max = sm->n_layer < CLF_SPLIT_MAX ? sm->n_layer : CLF_SPLIT_MAX;
    if (n < 1 || n > max)
        return clf_fail(CLF_ERR_ARG, "%d stages for %d layers: 1 to %d are possible", n, sm->n_layer, max);
    const double *w = ratio ? ratio : device_bytes;
    if (!w) return clf_fail(CLF_ERR_ARG, "a split needs a ratio or the devices' memory");
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0) || !isfinite(w[i]))
            return clf_fail(CLF_ERR_ARG, "stage %d's share %g is not a positive number", i, w[i]);
        sum += w[i];
    }
    plan->n = n;
    plan->hop_bytes_per_token = 4.0 * (double)sm->n_embd;
    /* boundary i after the layers of stages < i in proportion; every stage
     * keeps a layer and leaves one for each stage after it */
    double cum = 0;
    int l0 = 0;
    for (int i = 0; i < n; i++) {
        cum += w[i];
        int l1 = i == n - 1 ? sm->n_layer : (int)lround(cum / sum * sm->n_layer);
        if (l1 < l0 + 1) l1 = l0 + 1;
        if (l1 > sm->n_layer - (n - 1 - i)) l1 = sm->n_layer - (n - 1 - i);
        clf_split_stage *st = &plan->st[i];
        st->l0 = l0;
        st->l1 = l1;
        st->weight_bytes = sm->common_bytes + (l0 == 0 ? sm->first_bytes : 0) + (l1 == sm->n_layer ? sm->last_bytes : 0);
        for (int l = l0; l < l1; l++) {
            st->weight_bytes += sm->layer_bytes[l];
            st->kv_bytes += sm->layer_kv[l];
        }
        st->scratch_bytes = sm->scratch_bytes + (l1 == sm->n_layer ? sm->logits_bytes : 0);
        st->total_bytes = st->weight_bytes + st->kv_bytes + st->scratch_bytes;
        st->device_bytes = device_bytes ? device_bytes[i] : 0;
        l0 = l1;
    }
    for (int i = 0; device_bytes && i < n; i++) {
        const clf_split_stage *st = &plan->st[i];
        if (st->total_bytes > st->device_bytes)
            return clf_fail(CLF_ERR_MEMORY,
                            "stage %d (layers %d-%d) needs %.1f MiB (weights %.1f, KV %.1f, scratch %.1f) but its "
                            "device has %.1f MiB",
                            i, st->l0, st->l1 - 1, mib(st->total_bytes), mib(st->weight_bytes), mib(st->kv_bytes),
                            mib(st->scratch_bytes), mib(st->device_bytes));
    }
    return CLF_OK;
}

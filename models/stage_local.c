/* The link between two stages of one process: the next stage is a model on
 * another device (its own runtime, context and queue); a pass is a call to
 * clf_llama_stage_pass on its context. */
#include <stdlib.h>

#include "llama.h"

static clf_status local_ctx_create(void *next, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                   clf_stage_link **out) {
    clf_stage_link *l = calloc(1, sizeof *l);
    if (!l) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_llama_ctx *c;
    clf_status st = clf_llama_ctx_create_seqs(next, n_ctx, n_batch, n_seq, kv_type, &c);
    if (st != CLF_OK) {
        free(l);
        return st;
    }
    l->ops = &clf_stage_local_ops;
    l->impl = c;
    *out = l;
    return CLF_OK;
}

static clf_status local_pass(clf_stage_link *l, const clf_stage_pass *p, const float *x, float *logits) {
    return clf_llama_stage_pass(l->impl, p, x, logits);
}

static void local_seq_rewind(clf_stage_link *l, int seq, int pos) { clf_llama_seq_rewind(l->impl, seq, pos); }

static void local_free(clf_stage_link *l) {
    clf_llama_ctx_free(l->impl);
    free(l);
}

const clf_stage_ops clf_stage_local_ops = {local_ctx_create, local_pass, local_seq_rewind, local_free};

clf_status clf_stage_local_load(clf_runtime *const *rts, int n, const clf_gguf *g, const int *l0, const int *l1,
                                clf_llama **models) {
    for (int i = 0; i < n; i++) models[i] = NULL;
    clf_status st = CLF_OK;
    for (int i = 0; st == CLF_OK && i < n; i++) st = clf_llama_load_range(rts[i], g, l0[i], l1[i], &models[i]);
    if (st != CLF_OK) {
        clf_stage_local_free(models, n);
        return st;
    }
    for (int i = 0; i + 1 < n; i++) clf_llama_set_next(models[i], &clf_stage_local_ops, models[i + 1]);
    return CLF_OK;
}

void clf_stage_local_free(clf_llama **models, int n) {
    for (int i = 0; i < n; i++) {
        clf_llama_free(models[i]);
        models[i] = NULL;
    }
}

#include "engine.h"

#include <stdlib.h>

struct srv_engine {
    int n_slots, n_vocab;
    clf_llama_ctx *ctx; /* a sequence per slot */
    clf_llama_seq_batch *batch;
    float *logits; /* [n_slots × n_vocab] */
};

clf_status srv_engine_create(const clf_llama *m, int n_slots, int n_ctx, clf_type kv, srv_engine **out) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    e->n_slots = n_slots;
    e->n_vocab = m->hp.n_vocab;
    e->batch = calloc((size_t)n_slots, sizeof *e->batch);
    e->logits = malloc((size_t)n_slots * (size_t)e->n_vocab * sizeof *e->logits);
    clf_status st = e->batch && e->logits ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_llama_ctx_create_seqs(m, n_ctx, 0, n_slots, kv, &e->ctx);
    if (st != CLF_OK) {
        srv_engine_free(e);
        return clf_fail_ctx(st, "%d slots (--parallel): ", n_slots);
    }
    *out = e;
    return CLF_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    clf_llama_ctx_free(e->ctx);
    free(e->batch);
    free(e->logits);
    free(e);
}

int srv_engine_n_ctx(const srv_engine *e) { return e->ctx->n_ctx; }
int srv_engine_slot_len(const srv_engine *e, int slot) { return clf_llama_seq_len(e->ctx, slot); }
void srv_engine_slot_rewind(srv_engine *e, int slot, int pos) { clf_llama_seq_rewind(e->ctx, slot, pos); }

clf_status srv_engine_step(srv_engine *e, srv_entry *entries, int n) {
    for (int i = 0; i < n; i++) {
        srv_entry *en = &entries[i];
        float *lg = e->logits + (size_t)en->slot * (size_t)e->n_vocab;
        e->batch[i] = (clf_llama_seq_batch){en->slot, en->tokens, en->n, en->want_logits ? lg : NULL};
        en->logits = NULL;
    }
    CLF_TRY(clf_llama_eval_seqs(e->ctx, e->batch, n));
    for (int i = 0; i < n; i++) entries[i].logits = e->batch[i].logits;
    return CLF_OK;
}

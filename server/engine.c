#include "engine.h"

#include <stdlib.h>

struct srv_engine {
    int n_slots, n_vocab;
    clf_llama_ctx **ctx;
    float *logits; /* [n_slots × n_vocab] */
};

clf_status srv_engine_create(const clf_llama *m, int n_slots, int n_ctx, clf_type kv, srv_engine **out) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    e->n_slots = n_slots;
    e->n_vocab = m->hp.n_vocab;
    e->ctx = calloc((size_t)n_slots, sizeof *e->ctx);
    e->logits = malloc((size_t)n_slots * (size_t)e->n_vocab * sizeof *e->logits);
    clf_status st = e->ctx && e->logits ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; st == CLF_OK && i < n_slots; i++) st = clf_llama_ctx_create(m, n_ctx, 0, kv, &e->ctx[i]);
    if (st != CLF_OK) {
        srv_engine_free(e);
        return clf_fail_ctx(st, "%d slots (--parallel): ", n_slots);
    }
    *out = e;
    return CLF_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    for (int i = 0; e->ctx && i < e->n_slots; i++) clf_llama_ctx_free(e->ctx[i]);
    free(e->ctx);
    free(e->logits);
    free(e);
}

int srv_engine_n_ctx(const srv_engine *e) { return e->ctx[0]->n_ctx; }
int srv_engine_slot_len(const srv_engine *e, int slot) { return e->ctx[slot]->n_past; }
void srv_engine_slot_rewind(srv_engine *e, int slot, int pos) { clf_llama_rewind(e->ctx[slot], pos); }

clf_status srv_engine_step(srv_engine *e, srv_entry *entries, int n) {
    for (int i = 0; i < n; i++) {
        srv_entry *en = &entries[i];
        float *lg = e->logits + (size_t)en->slot * (size_t)e->n_vocab;
        CLF_TRY(clf_llama_eval(e->ctx[en->slot], en->tokens, en->n, 0, lg));
        en->logits = en->want_logits ? lg : NULL;
    }
    return CLF_OK;
}

/* The public API's embeddings (include/clinfer.h): clf_llama_embed's
 * pooled hidden states, L2-normalised. */
#include <math.h>
#include <stdatomic.h>

#include "api.h"

clinfer_embed_params clinfer_embed_default_params(void) {
    return (clinfer_embed_params){.size = sizeof(clinfer_embed_params), .pooling = CLINFER_POOLING_DEFAULT,
                                  .normalize = 1, .seq = 0};
}

clinfer_pooling clinfer_model_pooling(const clinfer_model *m) {
    int p = m && m->llama ? m->llama->hp.pooling : -1;
    /* none, rank and the unknown: mean (a vector per text is what is asked) */
    return p == CLF_POOL_MEAN || p == CLF_POOL_CLS || p == CLF_POOL_LAST ? (clinfer_pooling)p : CLINFER_POOLING_MEAN;
}

clinfer_status clinfer_embed(clinfer_session *s, const int32_t *tokens, int n, const clinfer_embed_params *params,
                             float *out) {
    API_NOT_NULL(s);
    API_NOT_NULL(out);
    clinfer_embed_params p = clinfer_embed_default_params();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_embed_params"));
    if (p.pooling == CLINFER_POOLING_DEFAULT) p.pooling = clinfer_model_pooling(s->m);
    if (p.pooling < CLINFER_POOLING_NONE || p.pooling > CLINFER_POOLING_LAST)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "pooling %d is not a clinfer_pooling", (int)p.pooling);
    if (p.seq < 0 || p.seq >= s->c->n_seq)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "sequence %d of %d", p.seq, s->c->n_seq);
    if (n <= 0 || !tokens) return (clinfer_status)clf_fail(CLF_ERR_ARG, "nothing to embed (%d tokens)", n);
    if (p.seq == 0) s->has_logits = 0; /* sequence 0 is emptied */
    api_acquire(s);
    clf_status st = clf_llama_embed(s->c, p.seq, tokens, n, (clf_pooling)p.pooling, out);
    api_release(s);
    if (st == CLF_ERR_INTERRUPTED) atomic_store(&s->cancel, 0); /* a cancel stops the call it reaches */
    if (st != CLF_OK) return (clinfer_status)st;
    const int d = s->m->info.n_embd, rows = p.pooling == CLINFER_POOLING_NONE ? n : 1;
    for (size_t i = 0; i < (size_t)rows * d; i++)
        if (!isfinite(out[i]))
            return (clinfer_status)clf_fail(CLF_ERR_FORMAT, "the model's hidden states are not finite (a corrupt model)");
    for (int r = 0; p.normalize && r < rows; r++) {
        float *v = out + (size_t)r * d;
        double ss = 0;
        for (int k = 0; k < d; k++) ss += (double)v[k] * v[k];
        if (ss > 0)
            for (int k = 0; k < d; k++) v[k] = (float)(v[k] / sqrt(ss));
    }
    return CLINFER_OK;
}

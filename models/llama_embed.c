/* Embeddings: a text's hidden states after the output norm (the rows the
 * head would read, as llama.cpp's t_embd), pooled. The tokens run through
 * the ordinary forward pass in chunks of n_batch on one sequence; the
 * pass's CLF_FWD_HIDDEN mode stops before the head, so decoding is
 * untouched. */
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"

clf_status clf_llama_embed(clf_llama_ctx *c, int seq, const int32_t *tokens, int n, clf_pooling pooling, float *out) {
    const clf_llama_hparams *hp = &c->m->hp;
    clf_runtime *rt = c->m->rt;
    const int d = hp->n_embd;
    if (c->next || c->m->l0 > 0 || c->m->l1 < hp->n_layer)
        return clf_fail(CLF_ERR_ARG, "embeddings of a model split across devices or ranks are not supported");
    if (seq < 0 || seq >= c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d is outside the context's %d", seq, c->n_seq);
    if (n <= 0 || !tokens || !out) return clf_fail(CLF_ERR_ARG, "no tokens to embed");
    if (pooling < CLF_POOL_NONE || pooling > CLF_POOL_LAST) return clf_fail(CLF_ERR_ARG, "pooling %d is unknown", pooling);
    if (n > c->n_ctx)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens to embed do not fit the context of %d", n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", tokens[i], i, hp->n_vocab);
    clf_llama_seq_rewind(c, seq, 0);
    CLF_TRY(clf_llama_seq_room(c, &seq, &n, 1));
    /* a chunk's rows come back to the host; the mean is summed in double */
    float *rows = malloc((size_t)c->n_batch * d * sizeof *rows);
    double *sum = pooling == CLF_POOL_MEAN ? calloc((size_t)d, sizeof *sum) : NULL;
    clf_status st = rows && (sum || pooling != CLF_POOL_MEAN) ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int done = 0; st == CLF_OK && done < n;) {
        if (clf_runtime_aborted(rt)) {
            st = clf_fail(CLF_ERR_INTERRUPTED, "embedding stopped on request after %d of %d tokens", done, n);
            break;
        }
        const int chunk = n - done < c->n_batch ? n - done : c->n_batch;
        segment sg = {seq, 0, chunk, done};
        memcpy(c->host_ids, tokens + done, (size_t)chunk * sizeof *tokens);
        st = clf_llama_forward(c, c->host_ids, NULL, chunk, &sg, 1, CLF_FWD_HIDDEN, NULL, 0, NULL, NULL);
        if (st == CLF_OK)
            st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->xn.mem, CL_TRUE, c->xn.offset,
                                                  (size_t)chunk * d * sizeof *rows, rows, 0, NULL, NULL),
                              "reading hidden states");
        if (st != CLF_OK) break;
        *seq_past(c, seq) += chunk;
        switch (pooling) {
        case CLF_POOL_NONE: memcpy(out + (size_t)done * d, rows, (size_t)chunk * d * sizeof *rows); break;
        case CLF_POOL_MEAN:
            for (int r = 0; r < chunk; r++)
                for (int k = 0; k < d; k++) sum[k] += rows[(size_t)r * d + k];
            break;
        case CLF_POOL_CLS:
            if (done == 0) memcpy(out, rows, (size_t)d * sizeof *rows);
            break;
        case CLF_POOL_LAST:
            if (done + chunk == n) memcpy(out, rows + (size_t)(chunk - 1) * d, (size_t)d * sizeof *rows);
            break;
        }
        done += chunk;
    }
    if (st == CLF_OK && pooling == CLF_POOL_MEAN)
        for (int k = 0; k < d; k++) out[k] = (float)(sum[k] / n);
    if (st != CLF_OK) clFinish(rt->queue);
    clf_llama_seq_rewind(c, seq, 0); /* its blocks back to the pool */
    free(rows);
    free(sum);
    return st;
}

#include "perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -log softmax(logits)[target], in double. */
static double nll(const float *logits, int n_vocab, int target) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) - ((double)logits[target] - mx);
}

clf_status clf_perplexity(clf_llama_ctx *c, const int32_t *tokens, int n_tokens, int n_ctx, int32_t bos,
                          void (*progress)(const clf_ppl_progress *p, void *user), void *user, double *ppl,
                          int *n_scored) {
    int n_vocab = c->m->hp.n_vocab, n_chunks = n_ctx > 1 ? n_tokens / n_ctx : 0, first = n_ctx / 2;
    if (n_chunks == 0)
        return clf_fail(CLF_ERR_ARG, "%d tokens are fewer than one chunk of %d (--ctx)", n_tokens, n_ctx);
    if (n_ctx > c->n_ctx) return clf_fail(CLF_ERR_CONTEXT, "chunk of %d tokens exceeds the context (%d)", n_ctx, c->n_ctx);
    float *logits = malloc((size_t)n_ctx * n_vocab * sizeof *logits);
    int32_t *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!logits || !chunk) {
        free(logits);
        free(chunk);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory for %d x %d logits", n_ctx, n_vocab);
    }
    double sum = 0;
    int count = 0;
    clf_status st = CLF_OK;
    for (int k = 0; k < n_chunks && st == CLF_OK; k++) {
        memcpy(chunk, tokens + (size_t)k * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        clf_llama_rewind(c, 0);
        st = clf_llama_eval(c, chunk, n_ctx, 1, logits);
        if (st != CLF_OK) break;
        /* logits at j predict token j + 1, which is the original text's */
        for (int j = first; j < n_ctx - 1; j++, count++)
            sum += nll(logits + (size_t)j * n_vocab, n_vocab, tokens[(size_t)k * n_ctx + j + 1]);
        if (progress) {
            clf_ppl_progress p = {k + 1, n_chunks, exp(sum / count)};
            progress(&p, user);
        }
    }
    free(logits);
    free(chunk);
    if (st == CLF_OK) {
        *ppl = exp(sum / count);
        if (n_scored) *n_scored = count;
    }
    return st;
}

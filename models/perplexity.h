/* Perplexity as llama.cpp's `llama-perplexity` computes it: the tokens are
 * cut into non-overlapping chunks of n_ctx, each evaluated from an empty
 * cache (its first token replaced by BOS when the model adds one), and only
 * the second half of each chunk is scored, so every scored token has at
 * least n_ctx/2 tokens of context. */
#ifndef CLF_PERPLEXITY_H
#define CLF_PERPLEXITY_H

#include "llama.h"

typedef struct clf_ppl_progress {
    int chunk, n_chunks;
    double ppl; /* over the chunks so far */
} clf_ppl_progress;

/* c->n_ctx must be >= n_ctx. bos: the id put first in each chunk, or -1.
 * progress (may be NULL) is called after each chunk. Fewer than n_ctx
 * tokens is CLF_ERR_ARG. */
clf_status clf_perplexity(clf_llama_ctx *c, const int32_t *tokens, int n_tokens, int n_ctx, int32_t bos,
                          void (*progress)(const clf_ppl_progress *p, void *user), void *user, double *ppl,
                          int *n_scored);

#endif

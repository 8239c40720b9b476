/* The public API (include/clinfer.h): log-probabilities of raw logits, as
 * OpenAI's logprobs report them (log-softmax at temperature 1, before any
 * sampler stage). The sum of exponentials is taken after subtracting the
 * largest logit and accumulated in double, so a 262k vocabulary of large
 * logits neither overflows nor loses the small terms; the n best come from
 * a heap of n (a pass over the logits, not a sort of the vocabulary). */
#include <math.h>
#include <stdlib.h>

#include "api.h"

typedef struct best {
    float v;
    int32_t id;
} best;

/* The larger logit, then the smaller id (the sampler's order on ties). */
static int better(const best *a, const best *b) { return a->v > b->v || (a->v == b->v && a->id < b->id); }

/* Offers x to the heap h[0..*m) of at most k, whose root is the worst kept. */
static void offer(best *h, int *m, int k, best x) {
    int j;
    if (*m < k) { /* sift up */
        for (j = (*m)++; j > 0 && better(&h[(j - 1) / 2], &x); j = (j - 1) / 2) h[j] = h[(j - 1) / 2];
    } else if (better(&x, &h[0])) { /* replace the root, sift down */
        for (j = 0;;) {
            int c = 2 * j + 1;
            if (c >= *m) break;
            if (c + 1 < *m && better(&h[c], &h[c + 1])) c++;
            if (!better(&x, &h[c])) break;
            h[j] = h[c];
            j = c;
        }
    } else {
        return;
    }
    h[j] = x;
}

static int by_better(const void *a, const void *b) { return better(a, b) ? -1 : better(b, a) ? 1 : 0; }

clinfer_status clinfer_logprobs(const float *logits, int n_vocab, int32_t token, float *logprob, int n_top,
                                int32_t *top_ids, float *top_lp) {
    API_NOT_NULL(logits);
    API_NOT_NULL(logprob);
    if (n_vocab <= 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "logprobs over %d logits", n_vocab);
    if (token < 0 || token >= n_vocab)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "logprob of token %d: the vocabulary has %d", token, n_vocab);
    if (n_top < 0 || n_top > n_vocab)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "%d top logprobs of a vocabulary of %d", n_top, n_vocab);
    if (n_top > 0 && (!top_ids || !top_lp))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "%d top logprobs asked without top_ids and top_lp", n_top);
    float max = -INFINITY;
    for (int i = 0; i < n_vocab; i++) {
        if (isnan(logits[i])) return (clinfer_status)clf_fail(CLF_ERR_ARG, "logit %d of %d is NaN", i, n_vocab);
        if (logits[i] > max) max = logits[i];
    }
    if (max == INFINITY) return (clinfer_status)clf_fail(CLF_ERR_ARG, "a logit is +inf: no distribution");
    if (max == -INFINITY) return (clinfer_status)clf_fail(CLF_ERR_ARG, "every logit is -inf: no distribution");
    best *h = NULL;
    if (n_top > 0 && !(h = malloc((size_t)n_top * sizeof *h)))
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    double sum = 0;
    int m = 0;
    for (int i = 0; i < n_vocab; i++) {
        sum += exp((double)logits[i] - max); /* -inf gives 0 */
        if (n_top) offer(h, &m, n_top, (best){logits[i], i});
    }
    const double log_sum = log(sum); /* sum >= 1: the largest term is exp(0) */
    *logprob = (float)(((double)logits[token] - max) - log_sum);
    if (m > 1) qsort(h, (size_t)m, sizeof *h, by_better); /* h is NULL when n_top is 0 */
    for (int i = 0; i < m; i++) {
        top_ids[i] = h[i].id;
        top_lp[i] = (float)(((double)h[i].v - max) - log_sum);
    }
    free(h);
    return CLINFER_OK;
}

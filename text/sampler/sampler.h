/* Picking the next token from logits: greedy, or temperature sampling after
 * top-k, top-p and min-p filtering, with a repetition penalty over the last
 * tokens and a seeded RNG (the same seed and inputs give the same tokens).
 *
 * The order and the semantics are llama.cpp's default chain:
 *   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
 * top-p and min-p see the distribution at temperature 1 (after top-k);
 * temperature <= 0 is greedy: the argmax after the penalty. */
#ifndef CLF_SAMPLER_H
#define CLF_SAMPLER_H

#include <stdint.h>

#include "status.h"

typedef struct clf_sampler_params {
    float temperature;    /* <= 0: greedy */
    int top_k;            /* keep the k highest logits; <= 0: off */
    float top_p;          /* keep the fewest tokens whose probability reaches top_p; >= 1: off */
    float min_p;          /* drop tokens less likely than min_p x the most likely; <= 0: off */
    float repeat_penalty; /* a logit of a token seen in the history: / penalty if > 0, x penalty if <= 0; 1: off */
    int repeat_last_n;    /* how many accepted tokens the penalty looks back over */
    uint64_t seed;
} clf_sampler_params;

typedef struct clf_sampler clf_sampler;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * penalty 1.0 (off) over the last 64 tokens, seed 0. */
clf_sampler_params clf_sampler_defaults(void);

/* CLF_ERR_ARG for a parameter out of range (NaN, negative penalty, ...). */
clf_status clf_sampler_create(const clf_sampler_params *p, int n_vocab, clf_sampler **out);
void clf_sampler_free(clf_sampler *s);

/* The next token for `logits` (n_vocab of them, left unchanged; NaN counts
 * as -inf). Does not record the token: call clf_sampler_accept for that.
 * -1 with a message when n_vocab is not the sampler's. */
int32_t clf_sampler_sample(clf_sampler *s, const float *logits, int n_vocab);
/* The vocabulary size the sampler was made for. */
int clf_sampler_n_vocab(const clf_sampler *s);

/* How many of the best logits clf_sampler_sample_top needs with these
 * settings, at most k_max: 1 for greedy, top_k for sampling, 0 when it
 * needs them all (a repetition penalty, top-k off or above k_max or the
 * vocabulary). */
int clf_sampler_top_k(const clf_sampler *s, int k_max);

/* clf_sampler_sample given only the k best logits, best first (the larger
 * logit, then the smaller id), k = clf_sampler_top_k: the same token as
 * from all of them. -1 with a message for another k or an id out of range. */
int32_t clf_sampler_sample_top(clf_sampler *s, const float *vals, const int32_t *ids, int k);

/* The distribution clf_sampler_sample draws from for `logits`: the kept
 * candidates' ids (*ids) and weights (*w, summing to *z; p(id) = w / z),
 * m of them (returned; -1 with a message when n_vocab is not the
 * sampler's). Greedy: the one token clf_sampler_sample answers, weight 1.
 * The arrays are the sampler's, valid until its next call; no draw is
 * made (speculative sampling draws with clf_sampler_uniform). */
int clf_sampler_dist(clf_sampler *s, const float *logits, int n_vocab, const int32_t **ids, const float **w,
                     double *z);
/* The next number in [0, 1) of the sampler's random stream. */
double clf_sampler_uniform(clf_sampler *s);

/* Speculative sampling's rule for a draft token x proposed with certainty
 * (a point mass q: prompt lookup, a greedy draft model), over p = the
 * distribution (ids, w, n, z) of clf_sampler_dist: x with probability
 * p(x) (u1 < p(x)), else a draw by u2 from p with x removed and
 * renormalised: max(0, p - q) normalised. Either way the token has law p
 * exactly. u1, u2 uniform in [0, 1). */
int32_t clf_spec_pick(const int32_t *ids, const float *w, int n, double z, int32_t x, double u1, double u2);

/* The rule's refusal for a draft drawn from a law q (q: [n_vocab]
 * probabilities, 0 outside its support): a token drawn by u from
 * max(0, p - q) normalised, p = (ids, w, n, z) of clf_sampler_dist; -1
 * when that is empty (p <= q everywhere: no refusal can happen). The
 * acceptance before it: x taken when u1 q(x) < p(x). */
int32_t clf_spec_residual(const int32_t *ids, const float *w, int n, double z, const float *q, double u);
/* The parameters the sampler was made with. */
const clf_sampler_params *clf_sampler_get_params(const clf_sampler *s);

/* Appends a token (prompt or generated) to the penalty's history;
 * CLF_ERR_ARG for an id outside [0, n_vocab), the sampler unchanged. */
clf_status clf_sampler_accept(clf_sampler *s, int32_t id);

/* Forgets the history and restarts the RNG from the seed. */
void clf_sampler_reset(clf_sampler *s);

#endif

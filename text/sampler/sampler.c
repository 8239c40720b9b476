/* Token sampling (see sampler.h for the chain and its semantics). The
 * filters work on a candidate list that is only partly ordered: top-k keeps
 * the k best with a small heap, top-p sorts the distribution band by band
 * only as far as the nucleus reaches, min-p is a threshold on logits; so a
 * 50k vocabulary costs a few passes, not a sort. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct clf_sampler {
    clf_sampler_params p;
    int n_vocab;
    cand *c, *tmp;  /* candidates, scratch */
    float *w;       /* the kept candidates' weights at the temperature */
    int32_t *ids;   /* clf_sampler_dist's: the kept candidates' ids, in w's order */
    int32_t *hist;  /* ring buffer of the last repeat_last_n accepted tokens */
    int n_hist, hist_pos;
    uint32_t *seen; /* seen[id] == stamp: penalized in this call already */
    uint32_t stamp;
    uint64_t rng;
};

clf_sampler_params clf_sampler_defaults(void) {
    return (clf_sampler_params){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0};
}

clf_status clf_sampler_create(const clf_sampler_params *p, int n_vocab, clf_sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return clf_fail(CLF_ERR_ARG, "sampler: vocabulary of %d tokens", n_vocab);
    if (isnan(p->temperature) || isinf(p->temperature))
        return clf_fail(CLF_ERR_ARG, "sampler: temperature %g is not a number", p->temperature);
    if (!(p->top_p >= 0)) return clf_fail(CLF_ERR_ARG, "sampler: top-p %g is not in [0, 1]", p->top_p);
    if (!(p->min_p <= 1) || isnan(p->min_p)) return clf_fail(CLF_ERR_ARG, "sampler: min-p %g is not in [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0) || isinf(p->repeat_penalty))
        return clf_fail(CLF_ERR_ARG, "sampler: repetition penalty %g is not positive", p->repeat_penalty);
    if (p->repeat_last_n < 0) return clf_fail(CLF_ERR_ARG, "sampler: repeat-last-n %d is negative", p->repeat_last_n);
    clf_sampler *s = calloc(1, sizeof *s);
    if (!s) return clf_fail(CLF_ERR_MEMORY, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->tmp = malloc((size_t)n_vocab * sizeof *s->tmp);
    s->w = malloc((size_t)n_vocab * sizeof *s->w);
    s->ids = malloc((size_t)n_vocab * sizeof *s->ids);
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    s->hist = malloc((size_t)(p->repeat_last_n ? p->repeat_last_n : 1) * sizeof *s->hist);
    if (!s->c || !s->tmp || !s->w || !s->ids || !s->seen || !s->hist) {
        clf_sampler_free(s);
        return clf_fail(CLF_ERR_MEMORY, "sampler: out of memory for %d candidates", n_vocab);
    }
    clf_sampler_reset(s);
    *out = s;
    return CLF_OK;
}

void clf_sampler_free(clf_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->tmp);
    free(s->w);
    free(s->ids);
    free(s->seen);
    free(s->hist);
    free(s);
}

void clf_sampler_reset(clf_sampler *s) {
    s->n_hist = s->hist_pos = 0;
    s->rng = s->p.seed;
}

clf_status clf_sampler_accept(clf_sampler *s, int32_t id) {
    if (id < 0 || id >= s->n_vocab) /* refused before anything changes */
        return clf_fail(CLF_ERR_ARG, "sampler: token %d is not in the vocabulary of %d", (int)id, s->n_vocab);
    if (!s->p.repeat_last_n) return CLF_OK;
    s->hist[s->hist_pos] = id;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
    if (s->n_hist < s->p.repeat_last_n) s->n_hist++;
    return CLF_OK;
}

/* splitmix64: any seed, 0 included, starts a good stream. */
static double uniform01(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-53;
}

/* Higher logit first; equal logits by id, so every order is reproducible. */
static int better(const cand *a, const cand *b) { return a->logit > b->logit || (a->logit == b->logit && a->id < b->id); }

static int cmp_better(const void *a, const void *b) { return better(a, b) ? -1 : better(b, a) ? 1 : 0; }

/* Each distinct token of the history once, whatever its count (llama.cpp). */
static void apply_penalty(clf_sampler *s) {
    float pen = s->p.repeat_penalty;
    if (pen == 1.0f || !s->n_hist) return;
    if (++s->stamp == 0) { /* wrapped: clear the marks */
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    for (int i = 0; i < s->n_hist; i++) {
        int32_t id = s->hist[i];
        if (id < 0 || id >= s->n_vocab || s->seen[id] == s->stamp) continue;
        s->seen[id] = s->stamp;
        float *l = &s->c[id].logit; /* candidates are still indexed by id here */
        *l = *l <= 0 ? *l * pen : *l / pen;
    }
}

/* Keeps the k best of c[0..n) in c[0..k) (unordered), via a heap whose root
 * is the worst kept. */
static int top_k(clf_sampler *s, int n, int k) {
    cand *h = s->tmp;
    int m = 0;
    for (int i = 0; i < n; i++) {
        cand x = s->c[i];
        int j;
        if (m < k) { /* sift up */
            for (j = m++; j > 0 && better(&h[(j - 1) / 2], &x); j = (j - 1) / 2) h[j] = h[(j - 1) / 2];
        } else if (better(&x, &h[0])) { /* replace the root, sift down */
            for (j = 0;;) {
                int c = 2 * j + 1;
                if (c >= m) break;
                if (c + 1 < m && better(&h[c], &h[c + 1])) c++;
                if (!better(&x, &h[c])) break;
                h[j] = h[c];
                j = c;
            }
        } else {
            continue;
        }
        h[j] = x;
    }
    /* best first: the order the draw walks, whether the k came from here
     * or from the device (clf_sampler_sample_top) */
    qsort(h, (size_t)m, sizeof *h, cmp_better);
    memcpy(s->c, h, (size_t)m * sizeof *h);
    return m;
}

/* Moves the candidates of c[from..n) with logit >= floor to c[from..);
 * returns the end of that run. */
static int partition_at(cand *c, int from, int n, float floor) {
    int k = from;
    for (int i = from; i < n; i++)
        if (c[i].logit >= floor) {
            cand t = c[k];
            c[k++] = c[i];
            c[i] = t;
        }
    return k;
}

/* The fewest best tokens whose softmax (over c[0..n)) reaches p, at least 1.
 * Sorted in bands of logits (within 1, 1.5, 2.25, ... nats of the max), each
 * band only once the ones above it fall short of p: the result is that of a
 * full sort, at the cost of sorting just the nucleus and its last band. */
static int top_p(clf_sampler *s, int n, float max, float p) {
    cand *c = s->c;
    double z = 0, cum = 0;
    for (int i = 0; i < n; i++) z += expf(c[i].logit - max);
    int done = 0;
    for (float band = 1; done < n; band *= 1.5f) {
        int end = band > 128 ? n : partition_at(c, done, n, max - band);
        qsort(c + done, (size_t)(end - done), sizeof *c, cmp_better);
        for (int i = done; i < end; i++) {
            cum += expf(c[i].logit - max) / z;
            if (cum >= p) return i + 1;
        }
        done = end;
    }
    return n;
}

static int32_t draw(clf_sampler *s, int n);

int32_t clf_sampler_sample(clf_sampler *s, const float *logits, int n_vocab) {
    if (n_vocab <= 0 || n_vocab > s->n_vocab) {
        clf_fail(CLF_ERR_ARG, "sampler: %d logits for a sampler of %d", n_vocab, s->n_vocab);
        return -1;
    }
    for (int i = 0; i < n_vocab; i++) s->c[i] = (cand){isnan(logits[i]) ? -INFINITY : logits[i], i};
    apply_penalty(s);
    return draw(s, n_vocab);
}

int clf_sampler_n_vocab(const clf_sampler *s) { return s->n_vocab; }

int clf_sampler_top_k(const clf_sampler *s, int k_max) {
    if (s->p.repeat_penalty != 1.0f) return 0; /* any logit of the history may move */
    if (s->p.temperature <= 0) return 1;
    return s->p.top_k > 0 && s->p.top_k <= k_max && s->p.top_k < s->n_vocab ? s->p.top_k : 0;
}

int32_t clf_sampler_sample_top(clf_sampler *s, const float *vals, const int32_t *ids, int k) {
    if (k != clf_sampler_top_k(s, k)) {
        clf_fail(CLF_ERR_ARG, "sampler: %d best logits where these settings need %d", k, clf_sampler_top_k(s, k));
        return -1;
    }
    for (int i = 0; i < k; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab) {
            clf_fail(CLF_ERR_ARG, "sampler: token %d is not in the vocabulary of %d", (int)ids[i], s->n_vocab);
            return -1;
        }
        s->c[i] = (cand){isnan(vals[i]) ? -INFINITY : vals[i], ids[i]};
    }
    return draw(s, k);
}

/* The chain after the penalty, over the candidates c[0..n): all the
 * vocabulary in id order, or the best k best first. Leaves the kept
 * candidates in c[0..m) with their weights in w[0..m) (sum *z) and returns
 * m; greedy (or nothing to weigh: *fixed set): the best alone, weight 1. */
static int chain(clf_sampler *s, int n, double *z, int *fixed) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (better(&s->c[i], &s->c[best])) best = i;
    float max = s->c[best].logit;
    *fixed = s->p.temperature <= 0 || isinf(max);
    if (*fixed) { /* greedy, or nothing to weigh */
        s->c[0] = s->c[best];
        s->w[0] = 1;
        *z = 1;
        return 1;
    }

    if (s->p.top_k > 0 && s->p.top_k < n) n = top_k(s, n, s->p.top_k);
    if (s->p.top_p < 1) n = top_p(s, n, max, s->p.top_p);
    if (s->p.min_p > 0) { /* p >= min_p * p_max  <=>  logit >= max + log(min_p) */
        float floor = max + logf(s->p.min_p);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (s->c[i].logit >= floor) s->c[m++] = s->c[i];
        n = m; /* the max itself always passes */
    }

    float inv_t = 1.0f / s->p.temperature, *w = s->w;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += w[i] = expf((s->c[i].logit - max) * inv_t);
    *z = sum;
    return n;
}

static int32_t draw(clf_sampler *s, int n) {
    double z;
    int fixed;
    const int m = chain(s, n, &z, &fixed);
    if (fixed) return s->c[0].id; /* greedy, or nothing to weigh: the best, no draw */
    double u = uniform01(&s->rng) * z, cum = 0;
    for (int i = 0; i < m; i++) {
        cum += s->w[i];
        if (u < cum) return s->c[i].id;
    }
    return s->c[m - 1].id; /* u within rounding of z */
}

int clf_sampler_dist(clf_sampler *s, const float *logits, int n_vocab, const int32_t **ids, const float **w,
                     double *z) {
    if (n_vocab <= 0 || n_vocab > s->n_vocab) {
        clf_fail(CLF_ERR_ARG, "sampler: %d logits for a sampler of %d", n_vocab, s->n_vocab);
        return -1;
    }
    for (int i = 0; i < n_vocab; i++) s->c[i] = (cand){isnan(logits[i]) ? -INFINITY : logits[i], i};
    apply_penalty(s);
    int fixed;
    const int m = chain(s, n_vocab, z, &fixed);
    for (int i = 0; i < m; i++) s->ids[i] = s->c[i].id;
    *ids = s->ids;
    *w = s->w;
    return m;
}

double clf_sampler_uniform(clf_sampler *s) { return uniform01(&s->rng); }

int32_t clf_spec_pick(const int32_t *ids, const float *w, int n, double z, int32_t x, double u1, double u2) {
    /* x's weight: 0 when the chain dropped it (p(x) = 0, always refused) */
    double wx = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] == x) wx = w[i];
    if (u1 * z < wx) return x; /* accepted with probability p(x) */
    /* refused: a draw from p without x, renormalised (its weights, z - wx
     * in all; x had p < 1 here, so some weight is left) */
    double u = u2 * (z - wx), cum = 0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        if (ids[i] == x) continue;
        cum += w[i];
        last = ids[i];
        if (u < cum) return ids[i];
    }
    return last >= 0 ? last : x; /* u within rounding of the sum; x alone (p(x) rounded below 1): x */
}

int32_t clf_spec_residual(const int32_t *ids, const float *w, int n, double z, const float *q, double u) {
    double r = 0;
    for (int i = 0; i < n; i++) {
        double d = w[i] / z - q[ids[i]];
        if (d > 0) r += d;
    }
    if (!(r > 0)) return -1;
    double at = u * r, cum = 0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        double d = w[i] / z - q[ids[i]];
        if (d <= 0) continue;
        cum += d;
        last = ids[i];
        if (at < cum) return ids[i];
    }
    return last; /* u within rounding of r */
}

const clf_sampler_params *clf_sampler_get_params(const clf_sampler *s) { return &s->p; }

/* The public API (include/clinfer.h): the sampler chain. Stages a program
 * adds (a grammar, a logit bias) run first, on a copy of the logits; then
 * the library's fixed chain (text/sampler/sampler.c: penalty, top-k, top-p,
 * min-p, temperature, draw). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

clinfer_sampler_params clinfer_sampler_default_params(void) {
    clf_sampler_params d = clf_sampler_defaults();
    return (clinfer_sampler_params){.size = sizeof(clinfer_sampler_params),
                                    .temperature = d.temperature,
                                    .top_k = d.top_k,
                                    .top_p = d.top_p,
                                    .min_p = d.min_p,
                                    .repeat_penalty = d.repeat_penalty,
                                    .repeat_last_n = d.repeat_last_n,
                                    .seed = d.seed};
}

clinfer_status clinfer_sampler_create(const clinfer_model *m, const clinfer_sampler_params *params,
                                      clinfer_sampler **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_sampler_params p = clinfer_sampler_default_params();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_sampler_params"));
    clf_sampler_params sp = {.temperature = p.temperature,
                             .top_k = p.top_k,
                             .top_p = p.top_p,
                             .min_p = p.min_p,
                             .repeat_penalty = p.repeat_penalty,
                             .repeat_last_n = p.repeat_last_n,
                             .seed = p.seed};
    clinfer_sampler *smp = calloc(1, sizeof *smp);
    if (!smp) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    smp->n_vocab = m->info.n_vocab;
    smp->greedy = p.temperature <= 0;
    /* the candidates asked of the device under a grammar beyond the
     * chain's own need (api_sampler_top_k): 32 by default, enough for a
     * structured reply's common positions (the model's best allowed token
     * is nearly always among its best 33), few enough for the device's
     * selection and the host's lookups; 0 forces the whole row (tests
     * compare both paths) */
    const char *env = getenv("CLINFER_GRAMMAR_TOP_K");
    smp->top_spare = env && *env ? atoi(env) : API_GRAMMAR_TOP_K;
    if (smp->top_spare < 0) smp->top_spare = 0;
    /* the device applies the grammar's mask before its selection unless
     * told not to (tests compare it with the id lookups' path) */
    env = getenv("CLINFER_GRAMMAR_DEVICE_MASK");
    smp->device_mask = !(env && *env && atoi(env) == 0);
    clf_status st = clf_sampler_create(&sp, m->info.n_vocab, &smp->s);
    if (st != CLF_OK) {
        free(smp);
        return (clinfer_status)st;
    }
    *out = smp;
    return CLINFER_OK;
}

void clinfer_sampler_free(clinfer_sampler *smp) {
    if (!smp) return;
    for (int i = 0; i < smp->n_stages; i++)
        if (smp->stages[i].free) smp->stages[i].free(smp->stages[i].user_data);
    free(smp->stages);
    free(smp->scratch);
    free(smp->mask_bits);
    clf_sampler_free(smp->s);
    free(smp);
}

clinfer_status clinfer_sampler_add_stage(clinfer_sampler *smp, const clinfer_sampler_stage *stage) {
    API_NOT_NULL(smp);
    API_NOT_NULL(stage);
    clinfer_sampler_stage st = {.size = sizeof st};
    API_TRY(api_read_params(&st, sizeof st, stage, "clinfer_sampler_stage"));
    if (!st.apply) return (clinfer_status)clf_fail(CLF_ERR_ARG, "sampler stage '%s' has no apply", st.name ? st.name : "");
    clinfer_sampler_stage *grown = realloc(smp->stages, (size_t)(smp->n_stages + 1) * sizeof *grown);
    if (!grown) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    smp->stages = grown;
    if (!smp->scratch && !(smp->scratch = malloc((size_t)smp->n_vocab * sizeof *smp->scratch)))
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    smp->stages[smp->n_stages++] = st;
    return CLINFER_OK;
}

/* The logit bias: a stage like any other program's. */
typedef struct logit_bias {
    int32_t token;
    float bias;
} logit_bias;

static clinfer_status bias_apply(void *ud, float *logits, int n_vocab) {
    const logit_bias *b = ud;
    if (b->token < n_vocab) logits[b->token] += b->bias;
    return CLINFER_OK;
}

clinfer_status clinfer_sampler_add_logit_bias(clinfer_sampler *smp, int32_t token, float bias) {
    API_NOT_NULL(smp);
    if (token < 0 || token >= smp->n_vocab)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "logit bias for token %d: the vocabulary has %d", token,
                                        smp->n_vocab);
    if (isnan(bias) || bias == INFINITY) return (clinfer_status)clf_fail(CLF_ERR_ARG, "logit bias %g", bias);
    logit_bias *b = malloc(sizeof *b);
    if (!b) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    *b = (logit_bias){token, bias};
    clinfer_sampler_stage st = {.size = sizeof st, .name = "logit bias", .apply = bias_apply, .free = free, .user_data = b};
    clinfer_status s = clinfer_sampler_add_stage(smp, &st);
    if (s != CLINFER_OK) free(b);
    return s;
}

/* The sampler reads a NaN logit as -inf (a masked token) and, with nothing
 * above -inf, answers token 0: a caller's logits with a NaN or without a
 * token to draw are refused instead, as the CLI refuses a model's. */
static clf_status check_logits(const float *logits, int n) {
    int any = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i])) return clf_fail(CLF_ERR_ARG, "logit %d of %d is NaN", i, n);
        any |= logits[i] > -INFINITY;
    }
    return any || n <= 0 ? CLF_OK : clf_fail(CLF_ERR_ARG, "every logit is -inf: no token to sample");
}

/* The added stages over a copy of the logits (*logits then points to it). */
static clf_status run_stages(clinfer_sampler *smp, const float **logits, int n_vocab) {
    if (!smp->n_stages || n_vocab != smp->n_vocab) return CLF_OK;
    memcpy(smp->scratch, *logits, (size_t)n_vocab * sizeof **logits);
    /* the last error is never cleared: emptied here, a stage that fails
     * without a message of its own is told from one that set one (not
     * an older failure's message); the caller's is back after success */
    char saved[2048];
    snprintf(saved, sizeof saved, "%s", clf_last_error());
    clf_fail(CLF_OK, "%s", "");
    for (int i = 0; i < smp->n_stages; i++) {
        clinfer_status st = smp->stages[i].apply(smp->stages[i].user_data, smp->scratch, n_vocab);
        if (st != CLINFER_OK) {
            if (!clf_last_error()[0])
                clf_fail((clf_status)st, "sampler stage '%s' failed", smp->stages[i].name ? smp->stages[i].name : "");
            return (clf_status)st;
        }
    }
    clf_fail(CLF_OK, "%s", saved);
    *logits = smp->scratch;
    if (check_logits(*logits, n_vocab) != CLF_OK) return clf_fail_ctx(CLF_ERR_ARG, "after the sampler's stages: ");
    return CLF_OK;
}

/* The added stages, then the fixed chain. */
static clf_status sample(clinfer_sampler *smp, const float *logits, int n_vocab, int32_t *token) {
    CLF_TRY(run_stages(smp, &logits, n_vocab));
    int32_t id = clf_sampler_sample(smp->s, logits, n_vocab);
    if (id < 0) return CLF_ERR_ARG; /* n_vocab not the model's; the message is set */
    *token = id;
    return CLF_OK;
}

clf_status api_sample_draft(clinfer_sampler *smp, const float *logits, int n_vocab, int32_t draft, const float *q,
                            int32_t *token) {
    if (n_vocab <= smp->n_vocab) CLF_TRY(check_logits(logits, n_vocab)); /* else refused below */
    /* greedy: p is a point mass at the plain token, so the rule answers it;
     * the plain path keeps it bit for bit (and draws nothing) */
    if (smp->greedy || draft < 0) return sample(smp, logits, n_vocab, token);
    CLF_TRY(run_stages(smp, &logits, n_vocab));
    const int32_t *ids;
    const float *w;
    double z;
    int m = clf_sampler_dist(smp->s, logits, n_vocab, &ids, &w, &z);
    if (m < 0) return CLF_ERR_ARG; /* the message is set */
    /* two draws per token, the second only after a refusal: the stream is
     * not plain sampling's (one draw per token), the law of each token is */
    double u1 = clf_sampler_uniform(smp->s), u2 = 0;
    if (q && draft < n_vocab) { /* a draft drawn from q: taken with probability min(1, p(x) / q(x)) */
        double px = 0;
        for (int i = 0; i < m; i++)
            if (ids[i] == draft) px = w[i] / z;
        int32_t id = draft;
        if (!(u1 * q[draft] < px)) { /* refused: from max(0, p - q) normalised */
            id = clf_spec_residual(ids, w, m, z, q, clf_sampler_uniform(smp->s));
            if (id < 0) id = draft; /* p <= q everywhere: only rounding refuses */
        }
        *token = id;
        return CLF_OK;
    }
    int32_t id = clf_spec_pick(ids, w, m, z, draft, u1, 0);
    if (id != draft) { /* refused: the residual's draw, with a fresh number */
        u2 = clf_sampler_uniform(smp->s);
        id = clf_spec_pick(ids, w, m, z, draft, 1, u2);
    }
    *token = id;
    return CLF_OK;
}

clinfer_status clinfer_sampler_sample(clinfer_sampler *smp, const float *logits, int n_vocab, int32_t *token) {
    API_NOT_NULL(smp);
    API_NOT_NULL(logits);
    API_NOT_NULL(token);
    if (n_vocab <= smp->n_vocab) API_TRY(check_logits(logits, n_vocab)); /* else refused below */
    return (clinfer_status)sample(smp, logits, n_vocab, token);
}

int clinfer_sampler_top_k(const clinfer_sampler *smp, int k_max) {
    return smp && !smp->n_stages ? clf_sampler_top_k(smp->s, k_max) : 0;
}

clinfer_status clinfer_sampler_sample_top(clinfer_sampler *smp, const float *vals, const int32_t *ids, int k,
                                          int32_t *token) {
    API_NOT_NULL(smp);
    API_NOT_NULL(vals);
    API_NOT_NULL(ids);
    API_NOT_NULL(token);
    if (smp->n_stages) return (clinfer_status)clf_fail(CLF_ERR_ARG, "a sampler with added stages needs every logit");
    int32_t id = clf_sampler_sample_top(smp->s, vals, ids, k);
    if (id < 0) return CLINFER_ERR_ARG; /* the message is set */
    *token = id;
    return CLINFER_OK;
}

/* Under a grammar (its stage the only one): the chain needs `need` best
 * (1 greedy, top_k sampling; 0 where it needs every logit: top-p, min-p
 * or temperature without top_k, a penalty: their distribution is the whole
 * allowed row's, which k best cannot bound, so those read the row). The k
 * best candidates are the row's first k in the device's order (larger
 * logit, then smaller id: the chain's), so when `need` of them survive the
 * mask they are the masked row's `need` best: the chain then sees the very
 * candidates, in the same order, that it would choose from the whole
 * masked row, and draws the same token with the same draws. */
int api_sampler_top_k(const clinfer_sampler *smp, int k_max) {
    if (!smp) return 0;
    if (!smp->n_stages) return clf_sampler_top_k(smp->s, k_max);
    if (smp->n_stages != 1 || !smp->grammar || smp->stages[0].user_data != (void *)smp->grammar || !smp->top_spare)
        return 0; /* a program's stage may raise any logit: every one is needed */
    int need = clf_sampler_top_k(smp->s, k_max);
    if (!need) return 0;
    /* the spare ones are what the mask may take away: a sampled top_k of
     * 40 asks for 64 (the most the device selects), greedy for 33 */
    int k = need + smp->top_spare;
    return k < k_max ? k : k_max;
}

int api_sampler_mask_k(const clinfer_sampler *smp, int k_max) {
    if (!smp || !smp->device_mask || !api_sampler_top_k(smp, k_max) || !smp->n_stages) return 0;
    return clf_sampler_top_k(smp->s, k_max); /* the chain's need: api_sampler_top_k was not 0 */
}

clf_status api_sampler_sample_top(clinfer_sampler *smp, float *vals, int32_t *ids, int k, int32_t *token) {
    *token = -1;
    if (!smp->n_stages) {
        CLF_TRY((clf_status)clinfer_sampler_sample_top(smp, vals, ids, k, token));
        return CLF_OK;
    }
    const int need = clf_sampler_top_k(smp->s, k);
    const int m = need ? api_grammar_filter(smp, vals, ids, k, need) : -1;
    /* the token's path is decided here, and counted once: the k best, or
     * the whole row the caller reads next (its draw is not counted again) */
    if (m < need) { /* too few survive (or a refusal): the whole row answers */
        smp->n_fallback++;
        return CLF_OK;
    }
    int32_t id = clf_sampler_sample_top(smp->s, vals, ids, need); /* the survivors' best `need` */
    if (id < 0) return CLF_ERR_ARG; /* the message is set */
    smp->n_top++;
    *token = id;
    return CLF_OK;
}

clf_status api_sampler_sample_masked(clinfer_sampler *smp, const float *vals, const int32_t *ids, int k,
                                     int32_t *token) {
    *token = -1;
    const int need = clf_sampler_top_k(smp->s, k);
    if (!need) return clf_fail(CLF_ERR_ARG, "the sampler needs every logit here");
    api_grammar_arm(smp); /* as stage_apply: this is a draw */
    int32_t id = clf_sampler_sample_top(smp->s, vals, ids, need); /* the masked row's best `need` */
    if (id < 0) return CLF_ERR_ARG; /* the message is set */
    smp->n_top++, smp->n_masked++;
    *token = id;
    return CLF_OK;
}

void api_sampler_top_stats(const clinfer_sampler *smp, long *from_top, long *fallbacks) {
    *from_top = smp ? smp->n_top : 0;
    *fallbacks = smp ? smp->n_fallback : 0;
}

long api_sampler_masked_count(const clinfer_sampler *smp) { return smp ? smp->n_masked : 0; }

clinfer_status clinfer_sampler_accept(clinfer_sampler *smp, int32_t token) {
    API_NOT_NULL(smp);
    /* checked before any stage sees it: a grammar's state stays as it was */
    API_TRY(clf_sampler_accept(smp->s, token));
    for (int i = 0; i < smp->n_stages; i++)
        if (smp->stages[i].accept) smp->stages[i].accept(smp->stages[i].user_data, token);
    return CLINFER_OK;
}

void clinfer_sampler_reset(clinfer_sampler *smp) {
    if (!smp) return;
    clf_sampler_reset(smp->s);
    for (int i = 0; i < smp->n_stages; i++)
        if (smp->stages[i].reset) smp->stages[i].reset(smp->stages[i].user_data);
}

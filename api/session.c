/* The public API (include/clinfer.h): sessions (a context on a model),
 * evaluation, samplers, and the streaming generation loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "sampler.h"

/* ---- sessions --------------------------------------------------------------- */

clinfer_session_params clinfer_session_default_params(void) {
    return (clinfer_session_params){.size = sizeof(clinfer_session_params), .kv_type = CLINFER_KV_F32};
}

clinfer_status clinfer_session_create(clinfer_model *m, const clinfer_session_params *params,
                                      clinfer_session **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_session_params p = clinfer_session_default_params();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_session_params"));
    if (!m->llama) return (clinfer_status)clf_fail(CLF_ERR_ARG, "the model was loaded vocab_only: it has no sessions");
    if (p.n_ctx < 0 || p.n_batch < 0)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "n_ctx (%d) and n_batch (%d) must be >= 0", p.n_ctx, p.n_batch);
    if (p.kv_type != CLINFER_KV_F32 && p.kv_type != CLINFER_KV_F16)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "kv_type %d is not CLINFER_KV_F32 or CLINFER_KV_F16", (int)p.kv_type);
    clinfer_session *s = calloc(1, sizeof *s);
    if (!s) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    s->m = m;
    atomic_init(&s->cancel, 0);
    pthread_mutex_lock(&m->device_lock);
    clf_status st = clf_llama_ctx_create(m->llama, p.n_ctx, p.n_batch, p.kv_type == CLINFER_KV_F16 ? CLF_F16 : CLF_F32,
                                         &s->c);
    pthread_mutex_unlock(&m->device_lock);
    if (st == CLF_OK && !(s->logits = malloc((size_t)m->info.n_vocab * sizeof *s->logits)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st != CLF_OK) {
        clinfer_session_free(s);
        return (clinfer_status)st;
    }
    *out = s;
    return CLINFER_OK;
}

void clinfer_session_free(clinfer_session *s) {
    if (!s) return;
    pthread_mutex_lock(&s->m->device_lock);
    clf_llama_ctx_free(s->c);
    pthread_mutex_unlock(&s->m->device_lock);
    free(s->logits);
    free(s);
}

int clinfer_session_n_ctx(const clinfer_session *s) { return s ? s->c->n_ctx : 0; }
int clinfer_session_n_past(const clinfer_session *s) { return s ? s->c->n_past : 0; }

clinfer_status clinfer_session_rewind(clinfer_session *s, int pos) {
    API_NOT_NULL(s);
    if (pos < 0 || pos > s->c->n_past)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "cannot rewind to %d: the session holds %d tokens", pos,
                                        s->c->n_past);
    clf_llama_rewind(s->c, pos);
    s->has_logits = 0;
    return CLINFER_OK;
}

/* One evaluation, its turn on the device taken. */
static clf_status eval(clinfer_session *s, const int32_t *tokens, int n, int all_logits, float *logits) {
    if (n <= 0 || !tokens) return clf_fail(CLF_ERR_ARG, "nothing to evaluate (%d tokens)", n);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            return clf_fail(CLF_ERR_ARG, "token %d at %d is not in the vocabulary (%d tokens)", tokens[i], i,
                            s->m->info.n_vocab);
    pthread_mutex_lock(&s->m->device_lock);
    clf_status st = clf_llama_eval(s->c, tokens, n, all_logits, logits);
    pthread_mutex_unlock(&s->m->device_lock);
    if (st != CLF_OK) return st;
    if (logits != s->logits) /* the last row is the session's too */
        memcpy(s->logits, logits + (size_t)(n - 1) * s->m->info.n_vocab, (size_t)s->m->info.n_vocab * sizeof *logits);
    s->has_logits = 1;
    return CLF_OK;
}

clinfer_status clinfer_eval(clinfer_session *s, const int32_t *tokens, int n) {
    API_NOT_NULL(s);
    return (clinfer_status)eval(s, tokens, n, 0, s->logits);
}

clinfer_status clinfer_eval_all(clinfer_session *s, const int32_t *tokens, int n, float *logits) {
    API_NOT_NULL(s);
    API_NOT_NULL(logits);
    return (clinfer_status)eval(s, tokens, n, 1, logits);
}

const float *clinfer_session_logits(const clinfer_session *s) { return s && s->has_logits ? s->logits : NULL; }

void clinfer_session_cancel(clinfer_session *s) {
    if (s) atomic_store(&s->cancel, 1);
}

/* ---- samplers: the library's clf_sampler behind the public name -------------- */

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
    clf_sampler *smp;
    API_TRY(clf_sampler_create(&sp, m->info.n_vocab, &smp));
    *out = (clinfer_sampler *)smp;
    return CLINFER_OK;
}

void clinfer_sampler_free(clinfer_sampler *smp) { clf_sampler_free((clf_sampler *)smp); }

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

clinfer_status clinfer_sampler_sample(clinfer_sampler *smp, const float *logits, int n_vocab, int32_t *token) {
    API_NOT_NULL(smp);
    API_NOT_NULL(logits);
    API_NOT_NULL(token);
    if (n_vocab <= clf_sampler_n_vocab((clf_sampler *)smp)) API_TRY(check_logits(logits, n_vocab)); /* else refused below */
    int32_t id = clf_sampler_sample((clf_sampler *)smp, logits, n_vocab);
    if (id < 0) return CLINFER_ERR_ARG; /* n_vocab not the model's; the message is set */
    *token = id;
    return CLINFER_OK;
}

void clinfer_sampler_accept(clinfer_sampler *smp, int32_t token) {
    if (smp) clf_sampler_accept((clf_sampler *)smp, token);
}

void clinfer_sampler_reset(clinfer_sampler *smp) {
    if (smp) clf_sampler_reset((clf_sampler *)smp);
}

/* ---- generation ------------------------------------------------------------- */

clinfer_generate_params clinfer_generate_default_params(void) {
    return (clinfer_generate_params){.size = sizeof(clinfer_generate_params), .max_tokens = 256};
}

/* The loop after the prompt: sample, stream, evaluate the token, repeat. */
static clf_status generate(clinfer_session *s, clf_sampler *smp, const clinfer_generate_params *p,
                           clinfer_generate_result *r) {
    const clf_tokenizer *tok = s->m->tok;
    clf_detok d;
    clf_detok_init(&d, tok, p->special ? CLF_DETOK_SPECIAL : 0);
    size_t cap = clf_tokenizer_max_piece(tok);
    char *buf = malloc(cap);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_status st = CLF_OK;
    for (int i = 0; i < p->max_tokens; i++) {
        if (atomic_load(&s->cancel)) {
            st = clf_fail(CLF_ERR_INTERRUPTED, "generation cancelled");
            break;
        }
        for (int k = 0; k < s->m->info.n_vocab && st == CLF_OK; k++)
            if (!isfinite(s->logits[k])) /* corrupt weights: the CLI's message */
                st = clf_fail(CLF_ERR_FORMAT, "the model produced non-finite logits (NaN/Inf) at token %d",
                              s->c->n_past);
        if (st != CLF_OK) break;
        int32_t id = clf_sampler_sample(smp, s->logits, s->m->info.n_vocab);
        if (id < 0) { /* a sampler made for a smaller vocabulary; the message is set */
            st = CLF_ERR_ARG;
            break;
        }
        r->last = id;
        r->n_generated++;
        if (clf_token_is_eog(tok, id)) {
            r->stop = CLINFER_STOP_EOG;
            break;
        }
        size_t n;
        if ((st = clf_detok_push(&d, id, buf, cap, &n)) != CLF_OK) break;
        clf_sampler_accept(smp, id);
        if (p->on_token && p->on_token(p->user_data, id, buf, n)) {
            r->stop = CLINFER_STOP_CALLBACK;
            break;
        }
        if (i + 1 == p->max_tokens) {
            r->stop = CLINFER_STOP_MAX_TOKENS;
            break; /* the last token need not be evaluated */
        }
        if (s->c->n_past >= s->c->n_ctx) {
            st = clf_fail(CLF_ERR_CONTEXT, "the context (%d tokens) is full", s->c->n_ctx);
            break;
        }
        if ((st = eval(s, &id, 1, 0, s->logits)) != CLF_OK) break;
    }
    size_t n = clf_detok_flush(&d, buf, cap);
    if (n && p->on_token) p->on_token(p->user_data, -1, buf, n);
    free(buf);
    return st;
}

clinfer_status clinfer_generate(clinfer_session *s, const int32_t *prompt, int n_prompt,
                                const clinfer_generate_params *params, clinfer_generate_result *result) {
    API_NOT_NULL(s);
    clinfer_generate_params p = clinfer_generate_default_params();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_generate_params"));
    clinfer_generate_result r = {.size = sizeof r, .last = -1};
    API_TRY(result ? api_write_info(result, &r, sizeof r, "clinfer_generate_result") : CLF_OK); /* size set? */
    clf_status st = CLF_OK;
    if (p.max_tokens <= 0) st = clf_fail(CLF_ERR_ARG, "max_tokens is %d: it must be > 0", p.max_tokens);
    else if (n_prompt < 0 || (n_prompt > 0 && !prompt)) st = clf_fail(CLF_ERR_ARG, "clinfer_generate: no prompt");
    else if (n_prompt == 0 && !s->has_logits)
        st = clf_fail(CLF_ERR_ARG, "an empty prompt needs a session that has evaluated tokens");
    clf_sampler *greedy = NULL;
    clf_sampler *smp = (clf_sampler *)p.sampler;
    if (st == CLF_OK && !smp) {
        clf_sampler_params gp = clf_sampler_defaults();
        gp.temperature = 0;
        st = clf_sampler_create(&gp, s->m->info.n_vocab, &greedy);
        smp = greedy;
    }
    double t0 = clf_now_s();
    if (st == CLF_OK && n_prompt > 0 && (st = eval(s, prompt, n_prompt, 0, s->logits)) == CLF_OK) {
        r.n_prompt = n_prompt;
        for (int i = 0; i < n_prompt; i++) clf_sampler_accept(smp, prompt[i]);
    }
    /* TODO(harden-core): clf_llama_set_abort, once on main, lets a cancel
     * stop a long prompt between its chunks too. */
    r.prompt_seconds = clf_now_s() - t0;
    t0 = clf_now_s();
    if (st == CLF_OK) st = generate(s, smp, &p, &r);
    r.generate_seconds = clf_now_s() - t0;
    atomic_store(&s->cancel, 0); /* a request is for one generation */
    clf_sampler_free(greedy);
    if (result) api_write_info(result, &r, sizeof r, "clinfer_generate_result");
    return (clinfer_status)st;
}

/* The public API (include/clinfer.h): the streaming detokenizer and the one
 * generation loop. clinfer_generate drives it for one sequence (`clinfer
 * run`, `chat`, programs); a server drives its body, clinfer_next_token,
 * and its speculative step, the drafter's (api/lookup.c), for many
 * sequences at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* ---- the streaming detokenizer ------------------------------------------- */

clinfer_status clinfer_detokenizer_create(const clinfer_model *m, int special, clinfer_detokenizer **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_detokenizer *d = calloc(1, sizeof *d);
    size_t cap = clf_tokenizer_max_piece(m->tok);
    if (!d || !(d->buf = malloc(cap))) {
        free(d);
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    d->cap = cap;
    clf_detok_init(&d->d, m->tok, special ? CLF_DETOK_SPECIAL : 0);
    *out = d;
    return CLINFER_OK;
}

void clinfer_detokenizer_free(clinfer_detokenizer *d) {
    if (!d) return;
    free(d->buf);
    free(d);
}

clinfer_status clinfer_detokenizer_push(clinfer_detokenizer *d, int32_t token, const char **piece, size_t *len) {
    API_NOT_NULL(d);
    API_NOT_NULL(piece);
    API_NOT_NULL(len);
    *piece = d->buf;
    *len = 0;
    return (clinfer_status)clf_detok_push(&d->d, token, d->buf, d->cap, len);
}

void clinfer_detokenizer_flush(clinfer_detokenizer *d, const char **piece, size_t *len) {
    if (!d) return;
    *piece = d->buf;
    *len = clf_detok_flush(&d->d, d->buf, d->cap);
    clf_detok_init(&d->d, d->d.t, d->d.flags);
}

/* ---- one token ------------------------------------------------------------ */

/* The k best of a row on the host, best first (the larger logit, then the
 * smaller id: the device's order and the chain's); 0 for a non-finite
 * logit (the whole row's path says so). */
static int host_top(const float *row, int n, int k, float *vals, int32_t *ids) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        float x = row[i];
        if (!isfinite(x)) return 0;
        if (m == k && !(x > vals[k - 1])) continue; /* ids rise: a tie loses */
        int j = m < k ? m++ : k - 1;
        for (; j > 0 && x > vals[j - 1]; j--) vals[j] = vals[j - 1], ids[j] = ids[j - 1];
        vals[j] = x;
        ids[j] = i;
    }
    return m == k;
}

/* The same over the row masked by the grammar's bits (a refused logit as
 * -inf, so the -inf ones follow by id: the masked row's k best, as the
 * device's masked selection gives them); 0 for a non-finite logit,
 * refused or not (the whole row's path says so). */
static int host_top_masked(const float *row, int n, int k, const uint32_t *bits, float *vals, int32_t *ids) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isfinite(row[i])) return 0;
    for (int i = 0; i < n; i++) {
        if (m == k && !bits[i >> 5] && !(i & 31)) { /* a word all refused: -inf, later ids, they lose */
            i += 31;
            continue;
        }
        const float x = bits[i >> 5] >> (i & 31) & 1 ? row[i] : -INFINITY;
        if (m == k && !(x > vals[k - 1])) continue; /* ids rise: a tie loses */
        int j = m < k ? m++ : k - 1;
        for (; j > 0 && x > vals[j - 1]; j--) vals[j] = vals[j - 1], ids[j] = ids[j - 1];
        vals[j] = x;
        ids[j] = i;
    }
    return m == k;
}

clf_status api_next_token(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits, int n_vocab,
                          float *top_vals, int32_t *top_ids, int top_k, int top_masked, int32_t draft, const float *q,
                          clinfer_session *row_of, clinfer_next *out) {
    *out = (clinfer_next){.token = -1, .piece = d->buf};
    if (clinfer_sampler_grammar_state(smp) == CLINFER_GRAMMAR_DONE) { /* nothing may follow: the end, drawn or not */
        out->eog = 1;
        return CLF_OK;
    }
    int32_t id = -1;
    float hv[CLINFER_TOP_K_MAX];
    int32_t hi[CLINFER_TOP_K_MAX];
    /* a whole row on the host under a grammar (a server's slot, clinfer_next_token): the k best of
     * the row masked by the grammar's bits, as the device's masked selection; else (the device's
     * mask off) its k best masked by lookups, the whole row where too few survive */
    int hk = 0, mk = 0;
    if (top_k <= 0 && draft < 0 && smp->n_stages && n_vocab == smp->n_vocab) {
        mk = api_sampler_mask_k(smp, CLINFER_TOP_K_MAX);
        hk = mk ? 0 : api_sampler_top_k(smp, CLINFER_TOP_K_MAX);
    }
    if (mk > 0 && api_grammar_device_mask(smp) && host_top_masked(logits, n_vocab, mk, smp->mask_bits, hv, hi))
        CLF_TRY(api_sampler_sample_masked(smp, hv, hi, mk, &id));
    if (hk > 0 && host_top(logits, n_vocab, hk, hv, hi)) CLF_TRY(api_sampler_sample_top(smp, hv, hi, hk, &id));
    if (top_k > 0 && top_masked && api_grammar_mask_current(smp)) /* the k best of the row the device masked */
        CLF_TRY(api_sampler_sample_masked(smp, top_vals, top_ids, top_k, &id));
    else if (top_k > 0 && top_masked) { /* masked for a state the grammar has left since (a prompt's
                                         * tokens moved an armed grammar): the whole row answers */
        if (!row_of) return clf_fail(CLF_ERR_ARG, "the sampler needs every logit here");
        smp->n_fallback++;
        CLF_TRY(api_session_top_row(row_of));
        logits = row_of->logits;
    } else if (top_k > 0) { /* the k best; under a grammar too few may survive: then the whole row, read back */
        CLF_TRY(api_sampler_sample_top(smp, top_vals, top_ids, top_k, &id));
        if (id < 0 && !row_of) return clf_fail(CLF_ERR_ARG, "the sampler needs every logit here");
        if (id < 0) CLF_TRY(api_session_top_row(row_of));
        logits = row_of ? row_of->logits : logits;
    }
    if (id < 0) {
        /* corrupt weights can make every logit NaN: sampling would pick
         * token 0 or stop at once, printing nothing; say so instead */
        for (int k = 0; k < n_vocab; k++)
            if (!isfinite(logits[k])) return clf_fail(CLF_ERR_FORMAT, "the model produced non-finite logits (NaN/Inf)");
        /* a draft's row: the acceptance rule (greedy: the same id) */
        CLF_TRY(draft >= 0 ? api_sample_draft(smp, logits, n_vocab, draft, q, &id)
                           : (clf_status)clinfer_sampler_sample(smp, logits, n_vocab, &id));
    }
    out->token = id;
    if ((out->eog = clf_token_is_eog(d->d.t, id))) return CLF_OK;
    CLF_TRY(clf_detok_push(&d->d, id, d->buf, d->cap, &out->len));
    CLF_TRY((clf_status)clinfer_sampler_accept(smp, id));
    return CLF_OK;
}

clinfer_status clinfer_next_token(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits, int n_vocab,
                                  clinfer_next *out) {
    API_NOT_NULL(smp);
    API_NOT_NULL(d);
    API_NOT_NULL(logits);
    API_NOT_NULL(out);
    return (clinfer_status)api_next_token(smp, d, logits, n_vocab, NULL, NULL, 0, 0, -1, NULL, NULL, out);
}

clinfer_status clinfer_next_token_draft(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits, int n_vocab,
                                        int32_t draft, clinfer_next *out) {
    API_NOT_NULL(smp);
    API_NOT_NULL(d);
    API_NOT_NULL(logits);
    API_NOT_NULL(out);
    return (clinfer_status)api_next_token(smp, d, logits, n_vocab, NULL, NULL, 0, 0, draft < 0 ? -1 : draft, NULL, NULL,
                                          out);
}

clinfer_status clinfer_next_token_draft_q(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits,
                                          int n_vocab, int32_t draft, const float *q, clinfer_next *out) {
    API_NOT_NULL(smp);
    API_NOT_NULL(d);
    API_NOT_NULL(logits);
    API_NOT_NULL(out);
    return (clinfer_status)api_next_token(smp, d, logits, n_vocab, NULL, NULL, 0, 0, draft < 0 ? -1 : draft,
                                          draft < 0 ? NULL : q, NULL, out);
}

/* ---- the loop ------------------------------------------------------------- */

clinfer_generate_params clinfer_generate_default_params(void) {
    return (clinfer_generate_params){.size = sizeof(clinfer_generate_params), .max_tokens = 256};
}

/* What the sampler needs next from an evaluation: the k best logits where
 * they are all it takes (on one device k values cross instead of the
 * vocabulary), else every logit. */
typedef struct gen_eval {
    int top_k;
    int masked; /* the device applied the grammar's mask before choosing them */
    float vals[CLINFER_TOP_K_MAX];
    int32_t ids[CLINFER_TOP_K_MAX];
} gen_eval;

static clf_status eval_for(clinfer_session *s, gen_eval *ev, clinfer_sampler *smp, const int32_t *tokens, int n) {
    /* under a grammar the device masks the row itself where it can (its
     * row on the device, not a split's), and the chain's need is all it
     * returns; else the k best with spares for the lookups to take away */
    const int mk = s->c->next ? 0 : api_sampler_mask_k(smp, CLINFER_TOP_K_MAX);
    ev->top_k = mk ? mk : api_sampler_top_k(smp, CLINFER_TOP_K_MAX); /* under a grammar too */
    ev->masked = 0;
    int bad = 0;
    clf_status st = mk ? api_session_eval_top_masked(s, tokens, n, mk, ev->vals, ev->ids, &bad, smp, &ev->masked)
                    : ev->top_k ? (clf_status)clinfer_eval_top(s, tokens, n, ev->top_k, ev->vals, ev->ids, &bad)
                                : (clf_status)clinfer_eval(s, tokens, n);
    if (st == CLF_OK && bad)
        st = clf_fail(CLF_ERR_FORMAT, "the model produced non-finite logits (NaN/Inf) at token %d", s->c->n_past);
    return st;
}

/* Speculation (draft_max > 0, or a drafter): the pending token and its
 * draft go to the model as one batch with every row's logits; the loop
 * then samples from row after row while each sampled token is the draft's
 * next (already evaluated), and rewinds the rest. Greedy, the tokens are
 * the plain loop's: each is sampled from the logits of the same tokens
 * before it. Sampled, a row followed by a draft token samples by the
 * acceptance rule (api_sample_draft), which gives each token plain
 * sampling's law. The step itself (the draft's size, what is accepted,
 * what is kept) is the drafter's (api/lookup.c, api/draft_model.c), shared
 * with the server. */
typedef struct gen_spec {
    int draft_max;   /* 0: off */
    int32_t *hist;   /* the prompt, then each token sampled: what the drafter searches */
    int n_hist;
    const int32_t *batch; /* [n_rows]: the pending token, then its draft (the drafter's rows) */
    int8_t *want;    /* [1 + draft_max]: logits on every row */
    int n_rows;      /* the verify batch's rows being read (0: none) */
    int row;         /* the row the next token is sampled from */
    int base;        /* sequence 0's length before the batch */
    clinfer_drafter *drafter; /* the drafts and their length */
    int own;                  /* the drafter is the call's (a prompt lookup), not the caller's */
} gen_spec;

/* The drafter's history starts with this call's prompt; a batch holds at
 * most one forward pass (n_batch rows), which a sliding window's ring can
 * always rewind. */
static clf_status spec_alloc(gen_spec *sp, const clinfer_session *s, const int32_t *prompt, int n_prompt,
                             const clinfer_generate_params *p, const clinfer_sampler *smp) {
    int cap = p->draft_max > 0 || !s->drafter ? p->draft_max : api_drafter_max(s->drafter);
    if (cap > p->max_tokens) cap = p->max_tokens;
    if (cap > s->c->n_batch - 1) cap = s->c->n_batch - 1;
    if (cap <= 0) return CLF_OK;
    sp->hist = malloc(((size_t)n_prompt + (size_t)p->max_tokens) * sizeof *sp->hist);
    sp->want = malloc((size_t)(cap + 1));
    if (!sp->hist || !sp->want) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (n_prompt) memcpy(sp->hist, prompt, (size_t)n_prompt * sizeof *prompt);
    memset(sp->want, 1, (size_t)(cap + 1));
    sp->n_hist = n_prompt;
    sp->draft_max = cap;
    if (s->drafter) {
        sp->drafter = s->drafter;
        /* a draft model's session: the text starts after what the target held */
        if (api_drafter_model(sp->drafter)) api_model_draft_begin(api_drafter_model(sp->drafter), s->c->n_past);
    } else {
        sp->own = 1;
        CLF_TRY((clf_status)clinfer_drafter_create(cap, &sp->drafter));
    }
    clinfer_drafter_set_sampler(sp->drafter, smp); /* drafts under its grammar; unset at the end */
    return CLF_OK;
}

/* Done reading the batch: sequence 0 keeps the pending token and the draft
 * tokens accepted (rows 0..row), with row's logits as the session's, as if
 * they had been evaluated one by one. */
static void spec_settle(clinfer_session *s, gen_spec *sp) {
    if (!sp->n_rows) return;
    const int keep = clinfer_drafter_settle(sp->drafter, sp->row);
    const float *lg = clinfer_batch_logits(s, keep - 1);
    memcpy(s->logits, lg, (size_t)s->m->info.n_vocab * sizeof *lg);
    clinfer_seq_rewind(s, 0, sp->base + keep); /* within the sequence: cannot fail */
    s->has_logits = 1;
    sp->n_rows = 0;
}

/* Evaluates the pending token `tok` (the history's last), with a draft
 * when the drafter has one and it fits: `left` tokens are still to be
 * sampled after tok, and the context's room. */
static clf_status eval_next(clinfer_session *s, gen_eval *ev, clinfer_sampler *smp, gen_spec *sp, int32_t tok,
                            int left, clinfer_generate_result *r) {
    const int room = s->c->n_ctx - s->c->n_past - 1;
    int rows = sp->drafter ? clinfer_drafter_propose(sp->drafter, sp->hist, sp->n_hist, sp->draft_max, left, room,
                                                     &sp->batch)
                           : 0;
    if (rows <= 1) return eval_for(s, ev, smp, &tok, 1);
    sp->base = s->c->n_past;
    clinfer_batch b = {.n_tokens = rows, .token = sp->batch, .logits = sp->want};
    clf_status st = (clf_status)clinfer_decode(s, &b);
    if (st != CLF_OK) {
        clinfer_seq_rewind(s, 0, sp->base); /* no part of the batch stays */
        return st;
    }
    r->n_drafted += rows - 1;
    sp->n_rows = rows;
    sp->row = 0;
    return CLF_OK;
}

/* After the prompt: sample, stream, evaluate the token, repeat. */
static clf_status generate(clinfer_session *s, gen_eval *ev, gen_spec *sp, clinfer_sampler *smp,
                           clinfer_detokenizer *d, const clinfer_generate_params *p, clinfer_generate_result *r) {
    clf_status st = CLF_OK;
    const int n_vocab = s->m->info.n_vocab;
    for (int i = 0; i < p->max_tokens; i++) {
        if (atomic_load(&s->cancel)) {
            st = clf_fail(CLF_ERR_INTERRUPTED, "generation cancelled");
            break;
        }
        clinfer_next nx;
        if (sp->n_rows) /* a verify batch's row: every logit, and the draft's next token if any */
            st = api_next_token(smp, d, clinfer_batch_logits(s, sp->row), n_vocab, NULL, NULL, 0, 0,
                                sp->row + 1 < sp->n_rows ? sp->batch[sp->row + 1] : -1,
                                api_drafter_q(sp->drafter, sp->row), NULL, &nx);
        else
            st = api_next_token(smp, d, s->logits, n_vocab, ev->vals, ev->ids, ev->top_k, ev->masked, -1, NULL, s, &nx);
        if (st == CLF_ERR_FORMAT) /* say where */
            st = clf_fail(st, "the model produced non-finite logits (NaN/Inf) at token %d",
                          sp->n_rows ? sp->base + sp->row + 1 : s->c->n_past);
        if (st != CLF_OK && clinfer_sampler_grammar_state(smp) == CLINFER_GRAMMAR_LIMIT) {
            /* the grammar's nesting bound: an end like max_tokens', not a failure (the message stays) */
            st = CLF_OK;
            r->stop = CLINFER_STOP_MAX_TOKENS;
            break;
        }
        if (st != CLF_OK) break;
        if (nx.token < 0) { /* a grammar's end, no token drawn (a vocabulary without an end token) */
            r->stop = CLINFER_STOP_EOG;
            break;
        }
        r->last = nx.token;
        r->n_generated++;
        if (sp->draft_max) sp->hist[sp->n_hist++] = nx.token;
        if (nx.eog) {
            r->stop = CLINFER_STOP_EOG;
            break;
        }
        if (p->on_token && p->on_token(p->user_data, nx.token, nx.piece, nx.len)) {
            r->stop = CLINFER_STOP_CALLBACK;
            break;
        }
        if (i + 1 == p->max_tokens) {
            r->stop = CLINFER_STOP_MAX_TOKENS;
            break; /* the last token need not be evaluated */
        }
        if (sp->n_rows) {
            if (clinfer_drafter_accept(sp->drafter, sp->row, nx.token)) { /* evaluated already */
                sp->row++;
                r->n_accepted++;
                r->n_eval++;
                continue;
            }
            spec_settle(s, sp);
        }
        if (s->c->n_past >= s->c->n_ctx) {
            st = clf_fail(CLF_ERR_CONTEXT, "the context (%d tokens) is full", s->c->n_ctx);
            break;
        }
        if ((st = eval_next(s, ev, smp, sp, nx.token, p->max_tokens - i - 1, r)) != CLF_OK) {
            if (st == CLF_ERR_INTERRUPTED) st = clf_fail(st, "generation cancelled"); /* before the token's evaluation */
            break;
        }
        r->n_eval++;
    }
    spec_settle(s, sp);
    const char *piece;
    size_t n;
    clinfer_detokenizer_flush(d, &piece, &n);
    if (n && p->on_token) p->on_token(p->user_data, -1, piece, n);
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
    else if (p.draft_max < 0) st = clf_fail(CLF_ERR_ARG, "draft_max is %d: it must be >= 0 (0: off)", p.draft_max);
    else if (n_prompt < 0 || (n_prompt > 0 && !prompt)) st = clf_fail(CLF_ERR_ARG, "clinfer_generate: no prompt");
    else if (n_prompt == 0 && !s->has_logits)
        st = clf_fail(CLF_ERR_ARG, "an empty prompt needs a session that has evaluated tokens");
    clinfer_sampler *greedy = NULL, *smp = p.sampler;
    clinfer_detokenizer *d = NULL;
    if (st == CLF_OK && !smp) {
        clinfer_sampler_params gp = clinfer_sampler_default_params();
        gp.temperature = 0;
        st = (clf_status)clinfer_sampler_create(s->m, &gp, &greedy);
        smp = greedy;
    }
    if (st == CLF_OK) st = (clf_status)clinfer_detokenizer_create(s->m, p.special, &d);
    gen_spec sp = {0};
    /* greedy or sampled, with stages (a grammar) or not: each row's token
     * is sampled from its logits after the tokens before it, as plainly */
    if (st == CLF_OK && (p.draft_max > 0 || s->drafter)) st = spec_alloc(&sp, s, prompt, n_prompt, &p, smp);
    gen_eval ev = {0}; /* top_k 0: an empty prompt samples from the session's logits */
    double build0 = clinfer_model_build_seconds(s->m), t0 = clf_now_s();
    int n_past0 = s->c->n_past;
    if (st == CLF_OK && n_prompt > 0) {
        st = eval_for(s, &ev, smp, prompt, n_prompt);
        if (st != CLF_OK) clf_llama_rewind(s->c, n_past0); /* no half-read prompt stays in the session */
        else r.n_prompt = n_prompt;
        for (int i = 0; st == CLF_OK && i < n_prompt; i++) clinfer_sampler_accept(smp, prompt[i]);
    }
    /* kernels built on the way (a first run) are not the prompt's speed */
    double build1 = clinfer_model_build_seconds(s->m), t1 = clf_now_s();
    r.prompt_seconds = t1 - t0 - (build1 - build0);
    if (st == CLF_OK) st = generate(s, &ev, &sp, smp, d, &p, &r);
    double build2 = clinfer_model_build_seconds(s->m);
    r.generate_seconds = clf_now_s() - t1 - (build2 - build1);
    r.build_seconds = build2 - build0;
    atomic_store(&s->cancel, 0); /* a request is for one generation */
    clinfer_sampler_free(greedy);
    clinfer_detokenizer_free(d);
    if (api_drafter_model(sp.drafter)) api_model_draft_end(api_drafter_model(sp.drafter), sp.hist, sp.n_hist);
    free(sp.hist);
    free(sp.want);
    clinfer_drafter_set_sampler(sp.drafter, NULL);
    if (sp.own) clinfer_drafter_free(sp.drafter);
    if (result) api_write_info(result, &r, sizeof r, "clinfer_generate_result");
    return (clinfer_status)st;
}

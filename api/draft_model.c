/* Speculative decoding with a draft model (include/clinfer.h,
 * clinfer_drafter_create_model): a smaller model of the target's
 * vocabulary continues the text greedily, token by token in its own
 * session, and the target verifies the draft in one batch (api/generate.c,
 * the server's scheduler) as it verifies a prompt lookup's. The draft
 * session is kept in step with the verified text by comparing what it
 * holds with the text it is asked to continue: the common prefix stays,
 * the rest is rewound (rejected drafts, a stop string, a rewound target)
 * and the text's new tokens are evaluated. Each draft token costs one
 * one-token pass of the draft model; its draft stops early where the draft
 * model is unsure (p_min) and is cut to nothing below draft_min (greedy
 * drafts only: a sampled draft is kept whatever its length, see
 * api_model_draft_run). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

struct api_model_draft {
    clinfer_session *s;  /* the draft model's session (the caller's) */
    int n_vocab;         /* the ids a draft may use: both models' */
    int n_logits;        /* the draft model's logits per row */
    int32_t *held;       /* [n_ctx]: the tokens the draft session holds, in order */
    int n_held;
    int32_t *known;      /* [n_ctx]: the target's sequence as far as known (the texts given), held's superset */
    int n_known;
    int off;             /* the position in the draft session of the text's first token */
    int draft_min;       /* a shorter draft is none */
    float p_min;         /* stop drafting below this probability of the draft model's best token */
    float *lg;           /* [n_logits]: a row's logits, masked */
    /* sampled drafts (the target's sampler not greedy): drawn from the
     * draft model's own distribution under the target's sampler settings,
     * whose law q the verification needs (the rule min(1, p/q)) */
    clf_sampler *qs;     /* the draft's sampler (its own random stream), or NULL */
    int n_tv;            /* the target's vocabulary: q's rows */
    int max;             /* the longest draft: q's row count */
    float *q;            /* [max][n_tv]: each draft token's law */
    int q_on;            /* the last draft was sampled (q holds its laws) */
    int in_generate;     /* within clinfer_generate, which verifies by q (a program's own step: drafts as certain) */
    const float *cur;    /* the logits of the last token fed (the session's, or a batch row's) */
};

/* Token ids below this are not compared (llama.cpp's
 * SPEC_VOCAB_CHECK_START_TOKEN_ID: conversions differ in the first control
 * tokens' texts), nor is a size difference above 128 accepted
 * (SPEC_VOCAB_MAX_SIZE_DIFFERENCE): common_speculative_are_compatible. */
enum { CHECK_FROM = 5, MAX_SIZE_DIFFERENCE = 128 };

clinfer_status clinfer_model_vocab_compatible(const clinfer_model *target, const clinfer_model *draft) {
    API_NOT_NULL(target);
    API_NOT_NULL(draft);
    const clf_tokenizer *a = target->tok, *b = draft->tok;
    if (strcmp(clf_tokenizer_model(a), clf_tokenizer_model(b)))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the draft model's tokenizer is '%s', the target's '%s'",
                                        clf_tokenizer_model(b), clf_tokenizer_model(a));
    if (clf_tokenizer_add_bos(a) != clf_tokenizer_add_bos(b) ||
        (clf_tokenizer_add_bos(a) && clf_tokenizer_bos(a) != clf_tokenizer_bos(b)))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the draft model's BOS token differs from the target's "
                                        "(added: %d, %d; id %d, %d)", clf_tokenizer_add_bos(b),
                                        clf_tokenizer_add_bos(a), (int)clf_tokenizer_bos(b), (int)clf_tokenizer_bos(a));
    if (clf_tokenizer_eos(a) != clf_tokenizer_eos(b))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the draft model's EOS token is %d, the target's %d",
                                        (int)clf_tokenizer_eos(b), (int)clf_tokenizer_eos(a));
    const int na = clf_tokenizer_n_vocab(a), nb = clf_tokenizer_n_vocab(b);
    if (abs(na - nb) > MAX_SIZE_DIFFERENCE)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the draft model's vocabulary has %d tokens, the target's %d: "
                                        "not the same vocabulary", nb, na);
    for (int i = CHECK_FROM; i < (na < nb ? na : nb); i++) {
        const char *ta = clf_token_text(a, i), *tb = clf_token_text(b, i);
        if (ta && tb && !strcmp(ta, tb)) continue;
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the draft model's vocabulary differs from the target's: token "
                                        "%d is '%.40s' in the draft, '%.40s' in the target", i, tb ? tb : "",
                                        ta ? ta : "");
    }
    return CLINFER_OK;
}

clinfer_status clinfer_drafter_create_model(const clinfer_model *target, clinfer_session *draft,
                                            const clinfer_draft_model_params *params, clinfer_drafter **out) {
    API_NOT_NULL(target);
    API_NOT_NULL(draft);
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_draft_model_params p = clinfer_draft_model_default_params();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_draft_model_params"));
    if (p.draft_max <= 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "draft_max is %d: it must be > 0", p.draft_max);
    if (p.draft_min < 0 || p.draft_min > p.draft_max)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "draft_min is %d: it must be in 0..draft_max (%d)", p.draft_min,
                                        p.draft_max);
    if (!(p.p_min >= 0 && p.p_min <= 1))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "p_min %g is not in [0, 1]", p.p_min);
    API_TRY((clf_status)clinfer_model_vocab_compatible(target, draft->m));
    api_model_draft *md = calloc(1, sizeof *md);
    if (!md) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    md->s = draft;
    md->n_logits = draft->m->info.n_vocab;
    md->n_vocab = md->n_logits < target->info.n_vocab ? md->n_logits : target->info.n_vocab;
    md->draft_min = p.draft_min;
    md->p_min = p.p_min;
    md->held = malloc((size_t)draft->c->n_ctx * sizeof *md->held);
    md->known = malloc((size_t)draft->c->n_ctx * sizeof *md->known);
    md->lg = malloc((size_t)md->n_logits * sizeof *md->lg);
    md->n_tv = target->info.n_vocab;
    md->max = p.draft_max;
    clinfer_status st = CLINFER_OK;
    if (!md->held || !md->known || !md->lg) st = (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    /* whatever the session held before is unknown: it starts empty */
    if (st == CLINFER_OK) st = clinfer_session_rewind(draft, 0);
    if (st == CLINFER_OK) st = clinfer_drafter_create(p.draft_max, out);
    if (st != CLINFER_OK) {
        api_model_draft_free(md);
        return st;
    }
    api_drafter_attach(*out, md);
    return CLINFER_OK;
}

/* The public grammar walk (include/clinfer.h) is the drafter's own
 * (api/grammar.c's api_grammar_walk), under the public name. */
clinfer_status clinfer_grammar_walk_begin(const clinfer_sampler *smp, clinfer_grammar_walk **out) {
    API_NOT_NULL(out);
    api_grammar_walk *w = NULL;
    const clf_status st = api_grammar_walk_begin(smp, &w);
    *out = (clinfer_grammar_walk *)w;
    return (clinfer_status)st;
}

clinfer_status clinfer_grammar_walk_mask(clinfer_grammar_walk *w, float *logits, int n_vocab) {
    API_NOT_NULL(w);
    API_NOT_NULL(logits);
    return (clinfer_status)api_grammar_walk_mask((api_grammar_walk *)w, logits, n_vocab);
}

int clinfer_grammar_walk_advance(clinfer_grammar_walk *w, int32_t token) {
    return w ? api_grammar_walk_advance((api_grammar_walk *)w, token) : 0;
}

void clinfer_grammar_walk_free(clinfer_grammar_walk *w) { api_grammar_walk_free((api_grammar_walk *)w); }

clinfer_draft_model_params clinfer_draft_model_default_params(void) {
    return (clinfer_draft_model_params){.size = sizeof(clinfer_draft_model_params), .draft_max = 16};
}

void api_model_draft_free(api_model_draft *md) {
    if (!md) return;
    free(md->held);
    free(md->known);
    free(md->lg);
    free(md->q);
    clf_sampler_free(md->qs);
    free(md);
}

const float *api_model_draft_q(const api_model_draft *md, int j) {
    return md->q_on && j >= 0 && j < md->max ? md->q + (size_t)j * (size_t)md->n_tv : NULL;
}

int api_model_draft_min(const api_model_draft *md) { return md->draft_min; }

/* The draft's sampler for the target's settings (temperature, top-k,
 * top-p, min-p; no penalty: any law q keeps the rule exact), made again
 * when they change; without one (greedy drafts) where memory is short. */
static void sampled_setup(api_model_draft *md, const clinfer_sampler *smp) {
    md->q_on = 0;
    if (!smp || smp->greedy || !md->in_generate) return;
    clf_sampler_params want = *clf_sampler_get_params(smp->s);
    want.repeat_penalty = 1;
    if (md->qs) {
        const clf_sampler_params *h = clf_sampler_get_params(md->qs);
        if (h->temperature != want.temperature || h->top_k != want.top_k || h->top_p != want.top_p ||
            h->min_p != want.min_p) {
            clf_sampler_free(md->qs);
            md->qs = NULL;
        }
    }
    want.seed ^= 0x5eedd4a7f7ull; /* a stream of its own (any independent one would do) */
    if (!md->qs && clf_sampler_create(&want, md->n_vocab, &md->qs) != CLF_OK) return;
    if (!md->q && !(md->q = malloc((size_t)md->max * (size_t)md->n_tv * sizeof *md->q))) return;
    md->q_on = 1;
}

/* A token drawn from the draft's law for md->lg, the law kept as row j of q. */
static int32_t sampled_token(api_model_draft *md, int j) {
    const int32_t *ids;
    const float *w;
    double z;
    const int m = clf_sampler_dist(md->qs, md->lg, md->n_vocab, &ids, &w, &z);
    if (m <= 0 || !(z > 0)) return -1;
    float *row = md->q + (size_t)j * (size_t)md->n_tv;
    memset(row, 0, (size_t)md->n_tv * sizeof *row);
    for (int i = 0; i < m; i++) row[ids[i]] = (float)(w[i] / z);
    double u = clf_sampler_uniform(md->qs) * z, cum = 0;
    for (int i = 0; i < m; i++) {
        cum += w[i];
        if (u < cum) return ids[i];
    }
    return ids[m - 1]; /* u within rounding of z */
}

void api_model_draft_begin(api_model_draft *md, int pos0) {
    /* the target's first pos0 tokens are known when the earlier texts
     * reached as far (the drafter followed the earlier generations: a
     * chat's turns); else the draft starts over from the text (positions
     * differ from the target's: only the drafts' quality depends on them,
     * never the tokens) */
    md->off = md->n_known >= pos0 ? pos0 : 0;
    md->n_known = md->off;
    md->in_generate = 1;
}

void api_model_draft_end(api_model_draft *md, const int32_t *text, int n) {
    /* the generation's whole text: the next one's start is known */
    md->in_generate = 0;
    md->q_on = 0;
    if (n <= 0 || md->off + n > md->s->c->n_ctx) return;
    memcpy(md->known + md->off, text, (size_t)n * sizeof *text);
    md->n_known = md->off + n;
}

/* Evaluates tokens into the draft session, recording them; md->cur: the
 * last one's logits. as_rows: the two tokens after a verification (the
 * last draft token taken, the target's own) as a batch with every row's
 * logits, whose rows are single-token evaluations bit for bit, as the
 * target's verified rows and the draft's own tokens are: a draft model
 * that is the target's file then drafts the target's very tokens. Else
 * one pass, as the target's prompt. */
static clf_status feed(api_model_draft *md, const int32_t *t, int n, int as_rows) {
    static const int8_t all[2] = {1, 1};
    clf_status st;
    if (as_rows && n == 2) {
        clinfer_batch b = {.n_tokens = n, .token = t, .logits = all};
        st = (clf_status)clinfer_decode(md->s, &b);
        if (st == CLF_OK) md->cur = clinfer_batch_logits(md->s, n - 1);
    } else {
        st = (clf_status)clinfer_eval(md->s, t, n);
        if (st == CLF_OK) md->cur = clinfer_session_logits(md->s);
    }
    if (st != CLF_OK || !md->cur) { /* what it holds now */
        md->n_held = md->s->c->n_past < md->n_held ? md->s->c->n_past : md->n_held;
        return st != CLF_OK ? st : clf_fail(CLF_ERR_ARG, "the draft session gave no logits");
    }
    memcpy(md->held + md->n_held, t, (size_t)n * sizeof *t);
    md->n_held += n;
    return CLF_OK;
}

int api_model_draft_run(api_model_draft *md, const clinfer_sampler *smp, const int32_t *text, int n, int k,
                        int32_t *draft) {
    const int n_ctx = md->s->c->n_ctx;
    if (md->off > md->n_known) md->off = 0; /* not known so far: start over */
    if (md->off + n > n_ctx) { /* the text outgrew the draft's context: from the start, if it fits */
        if (n + 1 > n_ctx) return 0;
        md->off = 0;
    }
    /* the whole text: what is known before it, then it */
    memcpy(md->known + md->off, text, (size_t)n * sizeof *text);
    md->n_known = md->off + n;
    const int32_t *full = md->known;
    const int nf = md->n_known;
    /* keep the common prefix, but re-evaluate the text's last token at
     * least: its logits give the first draft token */
    int c = 0;
    while (c < md->n_held && c < nf - 1 && md->held[c] == full[c]) c++;
    if (k > n_ctx - nf) k = n_ctx - nf; /* each draft token but the last is evaluated */
    if (k <= 0) return 0;
    if (clinfer_session_rewind(md->s, c) != CLINFER_OK) return 0;
    md->n_held = c;
    /* new tokens as the target evaluated them: after a verification the
     * last draft token taken and the target's own (rows of single-token
     * evaluations); more (a prompt): its tokens in one pass, then the
     * pending token (the verify batch's row 0) alone. The tail of an
     * earlier generation (before this text: the target evaluated those
     * tokens one at a time, as verified rows or a chat's last token) goes
     * one at a time too (a few: more, as after a failed feed, go with the
     * new ones in one pass), then the new ones. */
    while (nf - c > 2 && c < md->off && md->off - c <= 4)
        if (feed(md, full + c++, 1, 0) != CLF_OK) return 0;
    const int n_new = nf - c;
    if (n_new > 2) {
        if (feed(md, full + c, n_new - 1, 0) != CLF_OK || feed(md, full + nf - 1, 1, 0) != CLF_OK) return 0;
    } else if (feed(md, full + c, n_new, 1) != CLF_OK) {
        return 0;
    }

    api_grammar_walk *w = NULL;
    if (api_grammar_walk_begin(smp, &w) != CLF_OK) return 0;
    sampled_setup(md, smp);
    if (k > md->max) k = md->max;
    int nd = 0;
    while (nd < k) {
        /* the draft model's best token among the target's ids (and the
         * grammar's, when there is one), or one drawn from its law */
        memcpy(md->lg, md->cur, (size_t)md->n_logits * sizeof *md->lg);
        if (w && api_grammar_walk_mask(w, md->lg, md->n_logits) != CLF_OK) break;
        int best = 0;
        for (int i = 1; i < md->n_vocab; i++)
            if (md->lg[i] > md->lg[best]) best = i;
        if (!(md->lg[best] > -INFINITY)) break; /* nothing allowed, or NaN */
        if (md->p_min > 0) { /* unsure: the draft ends here (llama.cpp's --draft-p-min) */
            double z = 0;
            for (int i = 0; i < md->n_vocab; i++) z += exp((double)md->lg[i] - md->lg[best]);
            if (1 / z < md->p_min) break;
        }
        if (md->q_on && (best = sampled_token(md, nd)) < 0) break; /* sampled: drawn, its law kept */
        if (w && !api_grammar_walk_advance(w, best)) break;
        draft[nd++] = best;
        if (clf_token_is_eog(md->s->m->tok, best)) break; /* nothing follows an end */
        if (nd < k && feed(md, draft + nd - 1, 1, 0) != CLF_OK) break;
    }
    api_grammar_walk_free(w);
    /* sampled drafts are proposed whatever their length: dropping a short one (its length depends on
     * the tokens drawn, through p_min and an end token) would keep drafts by their tokens, whose law
     * is then no longer q, and the rule's tokens no longer the target's law */
    return nd >= md->draft_min || md->q_on ? nd : 0;
}

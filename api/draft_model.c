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
 * drafts only: a sampled draft is kept whatever its length,
 * clinfer_draft_proposed). A draft token's pass after the first keeps only
 * the k best logits where they decide it (clinfer_eval_top: no row read
 * back nor scanned on the host): a greedy draft's best, a sampled draft's
 * law under a top-k sampler (clinfer_draft_draw over the k best is the
 * whole row's law); a grammar, p_min or a sampler without top-k take the
 * whole row. */
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
    clf_sampler *qs;     /* the draft's random stream (its sampler's), or NULL */
    clinfer_sampler_params qp; /* the law's settings: the target's temperature, top-k, top-p, min-p */
    int n_tv;            /* the target's vocabulary: q's rows */
    int max;             /* the longest draft: q's row count */
    float *q;            /* [max][n_tv]: each draft token's law, dense (0 but on its support) */
    int32_t *q_id;       /* [max][n_tv]: row j's support, q_n[j] ids (zeroed again before the row is written) */
    int *q_n;            /* [max] */
    int32_t *cid;        /* [n_logits]: clinfer_draft_draw's scratch */
    float *cl;           /* [n_logits] */
    int q_on;            /* the last draft was sampled (q holds its laws) */
    /* the k best logits of the last token fed where only they are needed
     * (n_top > 0: md->cur is NULL then), best first */
    int n_top;
    float top_v[CLINFER_TOP_K_MAX];
    int32_t top_i[CLINFER_TOP_K_MAX];
    int top_bad;         /* a logit of that row is not finite */
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
    md->cid = malloc((size_t)md->n_logits * sizeof *md->cid);
    md->cl = malloc((size_t)md->n_logits * sizeof *md->cl);
    md->n_tv = target->info.n_vocab;
    md->max = p.draft_max;
    clinfer_status st = CLINFER_OK;
    if (!md->held || !md->known || !md->lg || !md->cid || !md->cl) st = (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
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
    free(md->cid);
    free(md->cl);
    free(md->q);
    free(md->q_id);
    free(md->q_n);
    clf_sampler_free(md->qs);
    free(md);
}

const float *api_model_draft_q(const api_model_draft *md, int j) {
    return md->q_on && j >= 0 && j < md->max ? md->q + (size_t)j * (size_t)md->n_tv : NULL;
}

int api_model_draft_min(const api_model_draft *md) { return md->draft_min; }

static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* A candidate and its place in the given order (ties: the earlier first). */
typedef struct ranked {
    float l;
    int32_t id;
    int at;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    return x->l != y->l ? (x->l < y->l) - (x->l > y->l) : (x->at > y->at) - (x->at < y->at);
}

/* The k best of cl/cid's m candidates, best first, ties in the given
 * order: one sort, O(m log m), where insertion would be O(m · k) (a
 * request's top_k may be the vocabulary's size). 0 without memory. */
static int keep_best(float *cl, int32_t *cid, int m, int k) {
    ranked *r = malloc((size_t)m * sizeof *r);
    if (!r) return 0;
    for (int i = 0; i < m; i++) r[i] = (ranked){cl[i], cid[i], i};
    qsort(r, (size_t)m, sizeof *r, cmp_ranked);
    const int kept = m < k ? m : k;
    for (int i = 0; i < kept; i++) cl[i] = r[i].l, cid[i] = r[i].id;
    free(r);
    return kept;
}

int32_t clinfer_draft_draw(const clinfer_sampler_params *p, const float *lg, const int32_t *ids, int n, double u,
                           int32_t *cid, float *cl, int *n_law) {
    if (n_law) *n_law = 0;
    clinfer_sampler_params ps = clinfer_sampler_default_params(); /* the fields the caller's struct has (size) */
    if (!p || api_read_params(&ps, sizeof ps, p, "clinfer_sampler_params") != CLF_OK) return -1;
    p = &ps;
    if (!lg || !cid || !cl || !n_law || n <= 0 || !(p->temperature > 0)) return -1;
    /* the candidates, best first where the settings cut by rank: (logit,
     * id) pairs in cl / cid; the k best by insertion (ties: the earlier,
     * so the smaller id of a row, the device's order of its k best), or
     * past 64 of them all taken and sorted once (keep_best) */
    const int k = p->top_k > 0 && p->top_k < n ? p->top_k : n, wide = k < n && k > 64;
    int m = 0, sorted = 1;
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        const float x = lg[i];
        const int32_t id = ids ? ids[i] : i;
        if (!(x > -INFINITY)) continue; /* refused, or NaN */
        if (x > max) max = x;
        if (k == n || wide) { /* no top-k (or a wide one, cut below): every candidate, in the given order */
            if (m && x > cl[m - 1]) sorted = 0;
            cl[m] = x, cid[m++] = id;
            continue;
        }
        if (m == k && !(x > cl[k - 1])) continue;
        int j = m < k ? m++ : k - 1;
        for (; j > 0 && x > cl[j - 1]; j--) cl[j] = cl[j - 1], cid[j] = cid[j - 1];
        cl[j] = x, cid[j] = id;
    }
    if (m == 0) return -1;
    if (wide) {
        if (!(m = keep_best(cl, cid, m, k))) return -1;
        sorted = 1;
    }
    if (p->top_p < 1) { /* the fewest best whose softmax reaches top_p (sorted by logit first where not yet) */
        if (!sorted) { /* pairs sorted together: logits with their ids */
            typedef struct { float l; int32_t id; } pair;
            pair *pr = malloc((size_t)m * sizeof *pr);
            if (!pr) return -1;
            for (int i = 0; i < m; i++) pr[i] = (pair){cl[i], cid[i]};
            qsort(pr, (size_t)m, sizeof *pr, cmp_desc); /* by l, the first member */
            for (int i = 0; i < m; i++) cl[i] = pr[i].l, cid[i] = pr[i].id;
            free(pr);
        }
        double z = 0, cum = 0;
        for (int i = 0; i < m; i++) z += exp((double)cl[i] - max);
        for (int i = 0; i < m; i++)
            if ((cum += exp((double)cl[i] - max) / z) >= p->top_p) {
                m = i + 1;
                break;
            }
    }
    if (p->min_p > 0) { /* p >= min_p · p_max */
        const float floor = max + logf(p->min_p);
        int r = 0;
        for (int i = 0; i < m; i++)
            if (cl[i] >= floor) cl[r] = cl[i], cid[r++] = cid[i];
        m = r;
    }
    /* the weights at the temperature; the draw; then the weights as chances */
    double z = 0;
    for (int i = 0; i < m; i++) z += cl[i] = expf((cl[i] - max) / p->temperature);
    if (!(z > 0)) return -1;
    const double uz = u * z;
    double cum = 0;
    int32_t tok = cid[m - 1]; /* u within rounding of z */
    for (int i = 0; i < m; i++)
        if (uz < (cum += cl[i])) {
            tok = cid[i];
            break;
        }
    for (int i = 0; i < m; i++) cl[i] = (float)(cl[i] / z);
    *n_law = m;
    return tok;
}

int clinfer_draft_proposed(int n, int draft_min, int sampled) { return n >= draft_min || sampled ? n : 0; }

/* The draft's random stream and law settings for the target's sampler
 * (temperature, top-k, top-p, min-p; no penalty), the stream made again
 * when they change; greedy drafts where memory is short. */
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
    if (!md->q) { /* zeroed once; each row's support is zeroed again before the row is written */
        md->q = calloc((size_t)md->max * (size_t)md->n_tv, sizeof *md->q);
        md->q_id = malloc((size_t)md->max * (size_t)md->n_tv * sizeof *md->q_id);
        md->q_n = calloc((size_t)md->max, sizeof *md->q_n);
        if (!md->q || !md->q_id || !md->q_n) {
            free(md->q), free(md->q_id), free(md->q_n);
            md->q = NULL, md->q_id = NULL, md->q_n = NULL;
            return;
        }
    }
    md->qp = (clinfer_sampler_params){.size = sizeof md->qp, .temperature = want.temperature, .top_k = want.top_k,
                                      .top_p = want.top_p, .min_p = want.min_p, .repeat_penalty = 1};
    md->q_on = 1;
}

/* A token drawn from the draft's law for the logits lg (n of them; ids:
 * their tokens, NULL: 0..n-1), the law kept as row j of q. */
static int32_t sampled_token(api_model_draft *md, int j, const float *lg, const int32_t *ids, int n) {
    float *row = md->q + (size_t)j * (size_t)md->n_tv;
    int32_t *sup = md->q_id + (size_t)j * (size_t)md->n_tv;
    for (int i = 0; i < md->q_n[j]; i++) row[sup[i]] = 0; /* the row's last law forgotten */
    md->q_n[j] = 0;
    int m = 0;
    const int32_t tok = clinfer_draft_draw(&md->qp, lg, ids, n, clf_sampler_uniform(md->qs), md->cid, md->cl, &m);
    for (int i = 0; i < m; i++) row[md->cid[i]] = md->cl[i], sup[i] = md->cid[i];
    md->q_n[j] = m;
    return tok;
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
 * last draft token taken, the target's own) as two decode steps (the head
 * over the last alone: the first's logits are not needed), whose rows are
 * single-token evaluations bit for bit, as the
 * target's verified rows and the draft's own tokens are: a draft model
 * that is the target's file then drafts the target's very tokens. Else
 * one pass, as the target's prompt. top > 0: the last one's k best only
 * (md->top_v / top_i; a draft token's pass, which clinfer_eval's single
 * token pass is too, bit for bit), md->cur NULL. */
static clf_status feed(api_model_draft *md, const int32_t *t, int n, int as_rows, int top) {
    clf_status st;
    md->n_top = 0;
    if (top > 0) { /* the k best alone (the caller's choice: they decide the next draft token) */
        st = (clf_status)clinfer_eval_top(md->s, t, n, top, md->top_v, md->top_i, &md->top_bad);
        md->cur = NULL;
        if (st == CLF_OK) {
            md->n_top = top;
            memcpy(md->held + md->n_held, t, (size_t)n * sizeof *t);
            md->n_held += n;
            return CLF_OK;
        }
    } else if (as_rows && n == 2) {
        st = api_session_eval_rows_last(md->s, t, n);
        if (st == CLF_OK) md->cur = clinfer_session_logits(md->s);
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
        if (feed(md, full + c++, 1, 0, 0) != CLF_OK) return 0;
    const int n_new = nf - c;
    if (n_new > 2) {
        if (feed(md, full + c, n_new - 1, 0, 0) != CLF_OK || feed(md, full + nf - 1, 1, 0, 0) != CLF_OK) return 0;
    } else if (feed(md, full + c, n_new, 1, 0) != CLF_OK) {
        return 0;
    }

    api_grammar_walk *w = NULL;
    if (api_grammar_walk_begin(smp, &w) != CLF_OK) return 0;
    sampled_setup(md, smp);
    if (k > md->max) k = md->max;
    /* the k best decide the next token where no grammar, no p_min and the
     * draft model's ids all the target's: greedy its best, sampled under a
     * top-k within CLINFER_TOP_K_MAX those k (their law is the row's) */
    int top = 0;
    if (!w && !(md->p_min > 0) && md->n_logits <= md->n_vocab) {
        if (!md->q_on) top = 1;
        else if (md->qp.top_k > 0 && md->qp.top_k <= CLINFER_TOP_K_MAX && md->qp.top_k < md->n_logits)
            top = md->qp.top_k;
    }
    int nd = 0;
    while (nd < k) {
        int best = -1;
        if (md->n_top) { /* the device's k best */
            if (md->top_bad) break; /* NaN or Inf somewhere: no draft from it */
            best = md->q_on ? sampled_token(md, nd, md->top_v, md->top_i, md->n_top) : md->top_i[0];
            if (best < 0) break;
        } else {
            /* the draft model's best token among the target's ids (and the
             * grammar's, when there is one), or one drawn from its law */
            memcpy(md->lg, md->cur, (size_t)md->n_logits * sizeof *md->lg);
            if (w && api_grammar_walk_mask(w, md->lg, md->n_logits) != CLF_OK) break;
            best = 0;
            for (int i = 1; i < md->n_vocab; i++)
                if (md->lg[i] > md->lg[best]) best = i;
            if (!(md->lg[best] > -INFINITY)) break; /* nothing allowed, or NaN */
            if (md->p_min > 0) { /* unsure: the draft ends here (llama.cpp's --draft-p-min) */
                double z = 0;
                for (int i = 0; i < md->n_vocab; i++) z += exp((double)md->lg[i] - md->lg[best]);
                if (1 / z < md->p_min) break;
            }
            if (md->q_on && (best = sampled_token(md, nd, md->lg, NULL, md->n_vocab)) < 0)
                break; /* sampled: drawn, its law kept */
        }
        if (w && !api_grammar_walk_advance(w, best)) break;
        draft[nd++] = best;
        if (clf_token_is_eog(md->s->m->tok, best)) break; /* nothing follows an end */
        if (nd < k && feed(md, draft + nd - 1, 1, 0, top) != CLF_OK) break;
    }
    api_grammar_walk_free(w);
    /* sampled drafts are proposed whatever their length (the one rule, the server's too) */
    return clinfer_draft_proposed(nd, md->draft_min, md->q_on);
}

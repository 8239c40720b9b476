#include "draft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* A draft token's law: the tokens it could have been and their chances. */
typedef struct srv_draft_law {
    int32_t *id;
    float *p;
    int n, cap;
} srv_draft_law;

struct srv_draft {
    srv_engine *e;       /* the draft model's: a sequence per slot */
    const clinfer_model *m;
    int n_slots, n_ctx, n_batch;
    int n_vocab;         /* ids a draft may use: both models' */
    int max, min, max_streams;
    float p_min;
    int32_t **held;      /* [n_slots][n_ctx]: the tokens each draft sequence holds, in order */
    int *n_held;         /* [n_slots] */
    int *len;            /* [n_slots]: the slot's draft length now (adapts: srv_draft_settle) */
    /* srv_draft_run's scratch, a request each */
    srv_entry *en;       /* [n_slots] */
    int *at;             /* [n_slots]: the entry's request */
    int *pos;            /* [n_slots]: the text's tokens the draft sequence holds */
    int *on;             /* [n_slots]: still drafting */
    clinfer_grammar_walk **walk; /* [n_slots]: a request's grammar walk, or NULL */
    int n_tv, n_dv;      /* the target's and the draft model's vocabularies (logits per row) */
    float *lg;           /* [n_tv]: a row's logits, masked by a grammar */
    int *pause;          /* [n_slots]: steps the slot drafts nothing (after a sampled request's empty draft) */
    /* sampled requests' drafts: each token drawn from the draft model's law
     * q under the request's settings, q kept for the verification's rule
     * min(1, p/q) (srv_draft_q) */
    srv_draft_law *law;  /* [n_slots × max]: slot s's draft token j's law, sparse */
    int *n_law;          /* [n_slots]: the laws the slot's last draft kept (0: a greedy draft) */
    uint64_t *rng;       /* [n_slots]: each slot's random stream for its drafts */
    int *rng_set;        /* [n_slots]: seeded from its job's seed (srv_draft_reset clears it) */
    int32_t *cid;        /* [n_vocab]: a law's candidates, then its kept ids */
    float *cl;           /* [n_vocab]: their logits, then their weights */
    float *qd;           /* [n_tv]: srv_draft_q's dense row, zero but for qd_of's entries */
    const srv_draft_law *qd_of;
};

/* A sampled request whose draft came out empty (its next token too
 * uncertain) drafts nothing for this many steps: each try costs a draft
 * pass (its catch-up) even when nothing comes of it, and the tokens it
 * skips are caught up later in one pass. */
enum { PAUSE_AFTER_EMPTY = 3 };

clinfer_status srv_draft_create(const clinfer_model *target, clinfer_model *draft, int n_slots, int n_ctx,
                                clinfer_kv_type kv, const srv_draft_params *p, srv_draft **out) {
    *out = NULL;
    if (p->draft_max <= 0 || p->draft_min < 0 || p->draft_min > p->draft_max)
        return clinfer_fail(CLINFER_ERR_ARG, "--draft-min %d must be in 0..--draft-max (%d)", p->draft_min, p->draft_max);
    /* a draft of another vocabulary would propose other tokens' ids: refused here, named */
    clinfer_status st = clinfer_model_vocab_compatible(target, draft);
    if (st != CLINFER_OK) return st;
    srv_draft *d = calloc(1, sizeof *d);
    if (!d) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    d->m = draft;
    d->n_slots = n_slots;
    d->max = p->draft_max, d->min = p->draft_min, d->p_min = p->p_min, d->max_streams = p->max_streams;
    const int nt = clinfer_model_n_vocab(target), nd = clinfer_model_n_vocab(draft);
    d->n_vocab = nt < nd ? nt : nd;
    d->n_tv = nt, d->n_dv = nd;
    /* the whole context a slot: no --kv-memory share to run out of mid-draft */
    st = srv_engine_create(draft, n_slots, n_ctx, kv, 0, &d->e);
    if (st == CLINFER_OK) {
        d->n_ctx = srv_engine_n_ctx(d->e);
        d->n_batch = srv_engine_n_batch(d->e);
        d->held = calloc((size_t)n_slots, sizeof *d->held);
        d->n_held = calloc((size_t)n_slots, sizeof *d->n_held);
        d->len = calloc((size_t)n_slots, sizeof *d->len);
        d->en = calloc((size_t)n_slots, sizeof *d->en);
        d->at = calloc((size_t)n_slots, sizeof *d->at);
        d->pos = calloc((size_t)n_slots, sizeof *d->pos);
        d->on = calloc((size_t)n_slots, sizeof *d->on);
        d->pause = calloc((size_t)n_slots, sizeof *d->pause);
        d->walk = calloc((size_t)n_slots, sizeof *d->walk);
        d->lg = malloc((size_t)nt * sizeof *d->lg);
        d->law = calloc((size_t)n_slots * (size_t)d->max, sizeof *d->law);
        d->n_law = calloc((size_t)n_slots, sizeof *d->n_law);
        d->rng = calloc((size_t)n_slots, sizeof *d->rng);
        d->rng_set = calloc((size_t)n_slots, sizeof *d->rng_set);
        d->cid = malloc((size_t)d->n_vocab * sizeof *d->cid);
        d->cl = malloc((size_t)d->n_vocab * sizeof *d->cl);
        d->qd = calloc((size_t)nt, sizeof *d->qd);
        int ok = d->held && d->n_held && d->len && d->en && d->at && d->pos && d->on && d->pause && d->walk &&
                 d->lg && d->law && d->n_law && d->rng && d->rng_set && d->cid && d->cl && d->qd;
        for (int i = 0; ok && i < n_slots; i++) {
            ok = (d->held[i] = malloc((size_t)d->n_ctx * sizeof **d->held)) != NULL;
            d->len[i] = d->max;
        }
        if (!ok) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    if (st == CLINFER_OK) st = srv_engine_warm(d->e); /* its kernels built before "ready" */
    if (st != CLINFER_OK) {
        srv_draft_free(d);
        return st;
    }
    *out = d;
    return CLINFER_OK;
}

void srv_draft_free(srv_draft *d) {
    if (!d) return;
    for (int i = 0; d->held && i < d->n_slots; i++) free(d->held[i]);
    free(d->held);
    free(d->n_held);
    free(d->len);
    free(d->en);
    free(d->at);
    free(d->pos);
    free(d->on);
    free(d->pause);
    free(d->walk);
    free(d->lg);
    for (int i = 0; d->law && i < d->n_slots * d->max; i++) free(d->law[i].id), free(d->law[i].p);
    free(d->law);
    free(d->n_law);
    free(d->rng);
    free(d->rng_set);
    free(d->cid);
    free(d->cl);
    free(d->qd);
    srv_engine_free(d->e);
    free(d);
}

int srv_draft_max(const srv_draft *d) { return d ? d->max : 0; }

double srv_draft_bytes(const srv_draft *d) {
    double w = 0, kv = 0;
    if (d) srv_engine_bytes(d->e, &w, &kv);
    return w + kv;
}
int srv_draft_max_streams(const srv_draft *d) { return d->max_streams; }

void srv_draft_reset(srv_draft *d, int slot) {
    d->len[slot] = d->max;
    d->pause[slot] = 0;
    d->rng_set[slot] = 0; /* the new job's seed starts the slot's stream */
    d->n_law[slot] = 0;
}

const float *srv_draft_q(srv_draft *d, int slot, int j) {
    if (j < 0 || j >= d->n_law[slot]) return NULL;
    const srv_draft_law *l = &d->law[(size_t)slot * (size_t)d->max + (size_t)j];
    if (d->qd_of != l) {
        if (d->qd_of)
            for (int i = 0; i < d->qd_of->n; i++) d->qd[d->qd_of->id[i]] = 0;
        for (int i = 0; i < l->n; i++) d->qd[l->id[i]] = l->p[i];
        d->qd_of = l;
    }
    return d->qd;
}

void srv_draft_forget(srv_draft *d, int slot) {
    srv_engine_slot_rewind(d->e, slot, 0);
    d->n_held[slot] = 0;
}

int srv_draft_want(srv_draft *d, int slot, int max) {
    if (d->pause[slot] > 0) {
        d->pause[slot]--;
        return 0;
    }
    int k = d->len[slot];
    if (k < d->min) k = d->min; /* never below draft_min, or a miss would end drafting for good */
    return k < max ? k : max;
}

int srv_draft_settle(srv_draft *d, int slot, int drafted, int accepted) {
    /* as the prompt-lookup drafter's (api/lookup.c): doubled after a draft
     * taken whole, else what was taken and one more; a rejected row costs a
     * fraction of a step, a draft-model token a draft step */
    if (drafted > 0) {
        if (accepted >= drafted) d->len[slot] = 2 * d->len[slot] < d->max ? 2 * d->len[slot] : d->max;
        else d->len[slot] = accepted + 1;
    }
    return accepted + 1;
}

/* The slot's next random number in [0, 1) (splitmix64). */
static double uniform(uint64_t *st) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* The draft model's law for its logits lg under the request's settings
 * (clinfer_draft_draw: as the sampler's chain weighs the target's, no
 * penalty), into *l; a token drawn from it by the slot's stream, or -1 (no
 * finite logit, no memory). */
static int32_t draw_from_law(srv_draft *d, const float *lg, const clinfer_sampler_params *sp, uint64_t *rng,
                             srv_draft_law *l) {
    int n = 0;
    const int32_t tok = clinfer_draft_draw(sp, lg, NULL, d->n_vocab, uniform(rng), d->cid, d->cl, &n);
    if (tok < 0) return -1;
    if (n > l->cap) {
        int32_t *id = realloc(l->id, (size_t)n * sizeof *id);
        if (id) l->id = id;
        float *p = id ? realloc(l->p, (size_t)n * sizeof *p) : NULL;
        if (p) l->p = p;
        if (!id || !p) return -1;
        l->cap = n;
    }
    l->n = n;
    memcpy(l->id, d->cid, (size_t)n * sizeof *l->id);
    memcpy(l->p, d->cl, (size_t)n * sizeof *l->p);
    return tok;
}

/* The request's next draft token from the logits of its last token: for a
 * sampled request a draw from the draft model's law under its settings
 * (the law kept for the rule), else the draft model's best, among both
 * vocabularies' ids; none where it is unsure (p_min) or the draft is ended
 * (an end token: nothing follows it). */
static void pick(srv_draft *d, srv_draft_req *r, int *on, clinfer_grammar_walk *w, const float *lg) {
    if (w) { /* under a grammar: the row as the target's vocabulary, masked */
        const int n = d->n_dv < d->n_tv ? d->n_dv : d->n_tv;
        memcpy(d->lg, lg, (size_t)n * sizeof *lg);
        for (int i = n; i < d->n_tv; i++) d->lg[i] = -INFINITY;
        if (clinfer_grammar_walk_mask(w, d->lg, d->n_tv) != CLINFER_OK) {
            *on = 0;
            return;
        }
        lg = d->lg;
    }
    int best = 0;
    for (int i = 1; i < d->n_vocab; i++)
        if (lg[i] > lg[best]) best = i;
    if (!(lg[best] > -INFINITY)) { /* NaN or nothing */
        *on = 0;
        return;
    }
    if (d->p_min > 0) { /* llama.cpp's --draft-p-min: the draft ends where the draft model is unsure */
        double z = 0;
        for (int i = 0; i < d->n_vocab; i++) z += exp((double)lg[i] - lg[best]);
        if (1 / z < d->p_min) {
            *on = 0;
            return;
        }
    }
    int32_t tok = best;
    if (r->sp && r->sp->temperature > 0) { /* sampled: drawn from q, q kept as the slot's law nd */
        tok = draw_from_law(d, lg, r->sp, &d->rng[r->slot], &d->law[(size_t)r->slot * (size_t)d->max + (size_t)r->nd]);
        if (tok < 0) {
            *on = 0;
            return;
        }
        d->n_law[r->slot] = r->nd + 1;
    }
    if (w && !clinfer_grammar_walk_advance(w, tok)) {
        *on = 0;
        return;
    }
    r->out[r->nd++] = tok;
    if (r->nd >= r->k || clinfer_token_is_eog(d->m, tok)) *on = 0;
}

/* The step's entries evaluated into their sequences (recorded in held),
 * each request's next token picked from its entry's logits; a failed step
 * leaves every sequence as before it and ends those requests' drafts. */
static void step(srv_draft *d, srv_draft_req *reqs, int m) {
    if (srv_engine_step(d->e, d->en, m) != CLINFER_OK) {
        for (int k = 0; k < m; k++) {
            srv_engine_slot_rewind(d->e, d->en[k].slot, d->n_held[d->en[k].slot]);
            d->on[d->at[k]] = 0;
        }
        return;
    }
    for (int k = 0; k < m; k++) {
        const srv_entry *en = &d->en[k];
        const int i = d->at[k];
        memcpy(d->held[en->slot] + d->n_held[en->slot], en->tokens, (size_t)en->n * sizeof *en->tokens);
        d->n_held[en->slot] += en->n;
        if (en->logits) pick(d, &reqs[i], &d->on[i], d->walk[i], en->logits);
    }
}

void srv_draft_run(srv_draft *d, srv_draft_req *reqs, int n) {
    /* the laws are written again: the dense row forgets the last one's */
    if (d->qd_of)
        for (int i = 0; i < d->qd_of->n; i++) d->qd[d->qd_of->id[i]] = 0;
    d->qd_of = NULL;
    /* each sequence keeps what it shares with its text (the pending token
     * evaluated again at least: its logits give the first draft token) */
    for (int i = 0; i < n; i++) {
        srv_draft_req *r = &reqs[i];
        const int sl = r->slot;
        r->nd = 0;
        /* every draft token but the last is evaluated: n + k - 1 positions */
        if (r->k > d->n_ctx - r->n + 1) r->k = d->n_ctx - r->n + 1;
        d->on[i] = r->k > 0 && r->n > 0;
        d->n_law[sl] = 0;
        if (r->sp && r->sp->temperature > 0 && !d->rng_set[sl]) { /* the job's own stream: a seed repeats its drafts */
            d->rng[sl] = r->sp->seed ^ 0x5eedd4a7f7ull;
            d->rng_set[sl] = 1;
        }
        d->walk[i] = NULL;
        /* no memory for a walk: no draft (a draft outside the grammar would only be refused) */
        if (d->on[i] && clinfer_grammar_walk_begin(r->smp, &d->walk[i]) != CLINFER_OK) d->on[i] = 0;
        if (!d->on[i]) continue;
        int c = 0;
        while (c < d->n_held[sl] && c < r->n - 1 && d->held[sl][c] == r->text[c]) c++;
        srv_engine_slot_rewind(d->e, sl, c);
        if (srv_engine_slot_len(d->e, sl) != c) { /* a sliding window that could not go back: from the start */
            srv_engine_slot_rewind(d->e, sl, 0);
            c = 0;
        }
        d->n_held[sl] = c;
        d->pos[i] = c;
    }
    /* the catch-up: each text's new tokens, within one pass's rows a step
     * (a new prompt may take several; after a verification it is one or two
     * tokens a slot, all in one step) */
    for (;;) {
        int m = 0, budget = d->n_batch;
        for (int i = 0; i < n && budget > 0; i++) {
            srv_draft_req *r = &reqs[i];
            if (!d->on[i] || d->pos[i] >= r->n) continue;
            /* more than two new tokens (a prompt): all but the pending one
             * in one pass, then the pending one alone, as the target took them */
            const int rem = r->n - d->pos[i];
            int take = rem > 2 ? rem - 1 : rem;
            if (take > budget) take = budget;
            budget -= take;
            /* after a verification (one or two tokens: the last draft token
             * taken and the target's own) every row's logits, as the
             * target's verify rows: such rows are single-token evaluations
             * bit for bit, so a draft model that is the target's file drafts
             * the target's very tokens (api/draft_model.c's feed) */
            const int last = d->pos[i] + take == r->n;
            d->en[m] = (srv_entry){.slot = r->slot, .tokens = r->text + d->pos[i], .n = take,
                                   .want_logits = !last ? SRV_LOGITS_NONE : take <= 2 ? SRV_LOGITS_EVERY : SRV_LOGITS_LAST};
            d->pos[i] += take;
            d->at[m++] = i;
        }
        if (!m) break;
        step(d, reqs, m);
    }
    /* a step a draft position: every drafting slot's last draft token */
    for (;;) {
        int m = 0;
        for (int i = 0; i < n; i++) {
            srv_draft_req *r = &reqs[i];
            if (!d->on[i] || r->nd == 0) continue;
            d->en[m] = (srv_entry){.slot = r->slot, .tokens = r->out + r->nd - 1, .n = 1, .want_logits = SRV_LOGITS_LAST};
            d->at[m++] = i;
        }
        if (!m) break;
        step(d, reqs, m);
    }
    for (int i = 0; i < n; i++) {
        clinfer_grammar_walk_free(d->walk[i]);
        d->walk[i] = NULL;
        /* too short to be worth its rows, but a sampled draft whatever its length: the one rule
         * (clinfer_draft_proposed), clinfer_generate's drafter's too */
        const int sampled = reqs[i].sp && reqs[i].sp->temperature > 0;
        reqs[i].nd = clinfer_draft_proposed(reqs[i].nd, d->min, sampled);
        if (reqs[i].nd == 0 && sampled) d->pause[reqs[i].slot] = PAUSE_AFTER_EMPTY;
        if (reqs[i].nd < d->n_law[reqs[i].slot]) d->n_law[reqs[i].slot] = reqs[i].nd; /* laws of the draft kept only */
    }
}

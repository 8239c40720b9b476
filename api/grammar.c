/* The public API (include/clinfer.h): grammars, and a grammar as a
 * sampler's stage. The automaton and its masks are text/grammar/grammar*.c;
 * here: the vocabulary's trie (one per model), the reference counts, and
 * fail-closed sampling (an end-of-generation token only where the text is
 * a whole sentence). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "grammar.h"

struct clinfer_grammar {
    atomic_int refs; /* the caller's and each sampler's */
    clf_grammar *g;
    clf_grammar_masks *gm;
    const clf_tokenizer *tok;
    int n_vocab;
    gstate start;
    int32_t *eog; /* the vocabulary's end-of-generation tokens */
    int n_eog;
};

static void release(clinfer_grammar *G) {
    if (!G || atomic_fetch_sub(&G->refs, 1) != 1) return;
    clf_grammar_masks_free(G->gm);
    clf_grammar_free(G->g);
    clf_gstate_free(&G->start);
    free(G->eog);
    free(G);
}

void clinfer_grammar_free(clinfer_grammar *g) { release(g); }

clinfer_grammar *clinfer_grammar_retain(clinfer_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

/* The model's trie, built by its first grammar. */
static clf_status model_trie(clinfer_model *m, const clf_vocab_trie **out) {
    pthread_mutex_lock(&m->trie_lock);
    clf_status st = m->trie ? CLF_OK : clf_vocab_trie_build(m->tok, &m->trie);
    *out = m->trie;
    pthread_mutex_unlock(&m->trie_lock);
    return st;
}

clinfer_status clinfer_grammar_create(const clinfer_model *m, const char *gbnf, size_t len, const char *root,
                                      clinfer_grammar **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(gbnf);
    API_NOT_NULL(out);
    return (clinfer_status)api_grammar_create(m, gbnf, len, root, 0, out);
}

clf_status api_grammar_create(const clinfer_model *m, const char *gbnf, size_t len, const char *root, int preserve,
                              clinfer_grammar **out) {
    *out = NULL;
    clinfer_grammar *G = calloc(1, sizeof *G);
    if (!G) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    atomic_init(&G->refs, 1);
    G->tok = m->tok;
    G->n_vocab = m->info.n_vocab;
    const clf_vocab_trie *trie = NULL;
    float *probe = NULL;
    clf_status st = clf_grammar_compile(gbnf, len, root, &G->g);
    if (st == CLF_OK) st = model_trie((clinfer_model *)m, &trie); /* the trie is the model's cache, not its state */
    if (st == CLF_OK) st = clf_grammar_masks_create(G->g, trie, G->n_vocab, &G->gm);
    if (st == CLF_OK && preserve) st = clf_grammar_masks_preserve(G->gm, G->tok); /* before the probe below */
    if (st == CLF_OK) st = clf_gstate_start(G->g, &G->start);
    if (st == CLF_OK && !(G->eog = malloc(sizeof *G->eog * 64))) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int id = 0; st == CLF_OK && id < G->n_vocab && G->n_eog < 64; id++)
        if (clf_token_is_eog(G->tok, id)) G->eog[G->n_eog++] = id;
    /* the first token: a language no token can start is refused now */
    if (st == CLF_OK && !(probe = calloc((size_t)G->n_vocab, sizeof *probe)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    int n_allowed = 0;
    if (st == CLF_OK) st = clf_grammar_masks_apply(G->gm, &G->start, probe, &n_allowed);
    if (st == CLF_OK && !n_allowed && !G->start.accepting)
        st = clf_fail(CLF_ERR_ARG, "grammar: no token of the model's vocabulary can start a sentence of it%s",
                      G->start.n_stacks ? "" : " (its language is empty)");
    free(probe);
    if (st != CLF_OK) {
        release(G);
        return st;
    }
    *out = G;
    return CLF_OK;
}

/* ---- the sampler's stage ------------------------------------------------------ */

typedef struct api_grammar_stage {
    clinfer_grammar *G;
    gstate cur, next;
    int armed; /* from the first draw on: the tokens accepted before are the prompt's */
    int dead;  /* a token the grammar does not allow was accepted */
    int limited; /* nothing continues the text within the matcher's nesting bound */
    float saved[64]; /* the end tokens' logits while the mask runs */
    long steps;       /* changes of cur since creation (accepted tokens that moved it, resets) */
    long mask_steps;  /* steps when api_grammar_device_mask last made the device's bits, -1: never */
} api_grammar_stage;

static clinfer_status limit_error(void) {
    return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammar: the text reached the grammar's nesting bound (%d levels): "
                                    "no more tokens possible", GSTATE_MAX_DEPTH);
}

static clinfer_status stage_apply(void *ud, float *logits, int n_vocab) {
    api_grammar_stage *gs = ud;
    clinfer_grammar *G = gs->G;
    gs->armed = 1;
    if (gs->limited) return limit_error();
    if (gs->dead || (!gs->cur.n_stacks && !gs->cur.accepting))
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammar: a token outside the grammar was accepted");
    if (n_vocab != G->n_vocab)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammar: %d logits for a vocabulary of %d", n_vocab, G->n_vocab);
    for (int i = 0; i < G->n_eog; i++) gs->saved[i] = logits[G->eog[i]];
    int n_allowed = 0;
    API_TRY(clf_grammar_masks_apply(G->gm, &gs->cur, logits, &n_allowed));
    if (gs->cur.accepting) /* a whole sentence: it may end here */
        for (int i = 0; i < G->n_eog; i++) logits[G->eog[i]] = gs->saved[i];
    if (!n_allowed && !gs->cur.accepting) {
        if ((gs->limited = clf_gstate_at_limit(G->g, &gs->cur))) return limit_error();
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammar: no token of the vocabulary continues the text here");
    }
    return CLINFER_OK;
}

/* Whether id is an end token the grammar lets through (a whole sentence). */
static int eog_allowed(const api_grammar_stage *gs, int32_t id) {
    for (int e = 0; gs->cur.accepting && e < gs->G->n_eog; e++)
        if (id == gs->G->eog[e]) return 1;
    return 0;
}

int api_grammar_filter(clinfer_sampler *smp, float *vals, int32_t *ids, int k, int need) {
    api_grammar_stage *gs = smp->grammar;
    clinfer_grammar *G = gs->G;
    /* stage_apply's refusals are the whole row's to give, with its messages */
    if (gs->limited || gs->dead || (!gs->cur.n_stacks && !gs->cur.accepting)) return -1;
    gs->armed = 1; /* as stage_apply: this is a draw */
    uint8_t allowed[CLINFER_TOP_K_MAX];
    int32_t refused[2 * CLINFER_TOP_K_MAX];
    const int n_refused = need + G->n_eog < 2 * CLINFER_TOP_K_MAX ? need + G->n_eog : 2 * CLINFER_TOP_K_MAX;
    int n_allowed = 0;
    if (k > CLINFER_TOP_K_MAX || need > k ||
        clf_grammar_masks_filter(G->gm, &gs->cur, ids, k, allowed, &n_allowed, refused, n_refused) != CLF_OK)
        return -1;
    int m = 0;
    for (int i = 0; i < k; i++)
        if (allowed[i] || eog_allowed(gs, ids[i])) vals[m] = vals[i], ids[m++] = ids[i]; /* the order stays: best first */
    /* Fewer than need survive, but every token the masked row keeps is
     * among them (the mask allows n_allowed text tokens, and the end
     * tokens where the text may end): the row's `need` best are then the
     * m survivors and, at -inf, the smallest refused ids (the chain's
     * order: the larger logit, then the smaller id), so those pads make
     * the very candidates the whole row would give. */
    const int kept = n_allowed + (gs->cur.accepting ? G->n_eog : 0);
    if (m >= need || m == 0 || m != kept) return m;
    for (int j = 0; j < n_refused && m < need && refused[j] >= 0; j++)
        if (!eog_allowed(gs, refused[j])) vals[m] = -INFINITY, ids[m++] = refused[j];
    return m;
}

int api_grammar_device_mask(clinfer_sampler *smp) {
    api_grammar_stage *gs = smp->grammar;
    clinfer_grammar *G = gs->G;
    gs->mask_steps = -1;
    /* stage_apply's refusals are the whole row's to give, with its messages */
    if (gs->limited || gs->dead || (!gs->cur.n_stacks && !gs->cur.accepting)) return 0;
    if (!smp->mask_bits && !(smp->mask_bits = malloc((size_t)(G->n_vocab + 31) / 32 * sizeof *smp->mask_bits)))
        return 0;
    /* not armed here: the mask may be made before the prompt's tokens are
     * accepted (clinfer_generate evaluates the prompt first), and those
     * must not move an unarmed grammar; the draw arms it (api_grammar_arm) */
    int n_allowed = 0;
    if (clf_grammar_masks_bits(G->gm, &gs->cur, smp->mask_bits, &n_allowed) != CLF_OK) return 0;
    /* a whole sentence: it may end here (stage_apply keeps the end tokens' logits) */
    if (gs->cur.accepting)
        for (int i = 0; i < G->n_eog; i++) smp->mask_bits[G->eog[i] >> 5] |= 1u << (G->eog[i] & 31);
    /* nothing to draw: the whole row's stage says why (or the sampler's check) */
    if (n_allowed + (gs->cur.accepting ? G->n_eog : 0) == 0) return 0;
    gs->mask_steps = gs->steps;
    return 1;
}

int api_grammar_mask_current(const clinfer_sampler *smp) {
    const api_grammar_stage *gs = smp->grammar;
    return gs && gs->mask_steps >= 0 && gs->mask_steps == gs->steps && !gs->dead && !gs->limited;
}

void api_grammar_arm(clinfer_sampler *smp) {
    if (smp->grammar) smp->grammar->armed = 1;
}

static void stage_accept(void *ud, int32_t token) {
    api_grammar_stage *gs = ud;
    if (!gs->armed || gs->dead) return;
    if (clf_token_is_eog(gs->G->tok, token)) return;
    gs->steps++;
    if (!clf_grammar_masks_advance(gs->G->gm, gs->G->tok, token, &gs->cur, &gs->next)) gs->dead = 1;
}

static void stage_reset(void *ud) {
    api_grammar_stage *gs = ud;
    gs->armed = gs->dead = gs->limited = 0;
    gs->steps++;
    if (clf_gstate_copy(&gs->G->start, &gs->cur) != CLF_OK) gs->dead = 1;
}

static void stage_free(void *ud) {
    api_grammar_stage *gs = ud;
    release(gs->G);
    clf_gstate_free(&gs->cur);
    clf_gstate_free(&gs->next);
    free(gs);
}

clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *smp, clinfer_grammar *g) {
    API_NOT_NULL(smp);
    API_NOT_NULL(g);
    if (smp->grammar) return (clinfer_status)clf_fail(CLF_ERR_ARG, "the sampler has a grammar already");
    if (g->n_vocab != smp->n_vocab)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "the grammar is for a vocabulary of %d tokens, the sampler %d",
                                        g->n_vocab, smp->n_vocab);
    api_grammar_stage *gs = calloc(1, sizeof *gs);
    if (!gs) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    gs->G = g;
    gs->mask_steps = -1;
    atomic_fetch_add(&g->refs, 1);
    clinfer_status st = (clinfer_status)clf_gstate_copy(&g->start, &gs->cur);
    clinfer_sampler_stage stage = {.size = sizeof stage, .name = "grammar", .apply = stage_apply,
                                   .accept = stage_accept, .reset = stage_reset, .free = stage_free, .user_data = gs};
    if (st == CLINFER_OK) st = clinfer_sampler_add_stage(smp, &stage);
    if (st != CLINFER_OK) {
        stage_free(gs);
        return st;
    }
    smp->grammar = gs;
    return CLINFER_OK;
}

clinfer_grammar_state clinfer_sampler_grammar_state(const clinfer_sampler *smp) {
    const api_grammar_stage *gs = smp ? smp->grammar : NULL;
    if (!gs) return CLINFER_GRAMMAR_NONE;
    if (gs->limited) return CLINFER_GRAMMAR_LIMIT;
    if (!gs->cur.accepting) return CLINFER_GRAMMAR_OPEN;
    return gs->cur.n_stacks > 1 ? CLINFER_GRAMMAR_CAN_END : CLINFER_GRAMMAR_DONE;
}

void api_grammar_stats(const clinfer_sampler *smp, long *computed, long *hits, double *seconds) {
    *computed = *hits = 0;
    *seconds = 0;
    if (smp && smp->grammar) clf_grammar_masks_stats(smp->grammar->G->gm, computed, hits, seconds);
}

/* ---- speculative drafts under the grammar -------------------------------------- */

/* A copy of the sampler's grammar state walked over a draft: the draft's
 * tokens are never accepted by the sampler itself (only the tokens it
 * draws are), so its state stays the verified text's. */
struct api_grammar_walk {
    const api_grammar_stage *gs;
    gstate cur, next;
    int dead; /* a refused token was walked, or the state could not be copied */
};

clf_status api_grammar_walk_begin(const clinfer_sampler *smp, api_grammar_walk **out) {
    *out = NULL;
    const api_grammar_stage *gs = smp ? smp->grammar : NULL;
    if (!gs) return CLF_OK;
    api_grammar_walk *w = calloc(1, sizeof *w);
    if (!w) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    w->gs = gs;
    w->dead = gs->dead || gs->limited;
    if (!w->dead && clf_gstate_copy(&gs->cur, &w->cur) != CLF_OK) w->dead = 1;
    *out = w;
    return CLF_OK;
}

clf_status api_grammar_walk_mask(api_grammar_walk *w, float *logits, int n_vocab) {
    const clinfer_grammar *G = w->gs->G;
    if (w->dead || n_vocab != G->n_vocab) return clf_fail(CLF_ERR_ARG, "grammar: no draft here");
    float saved[64];
    for (int i = 0; i < G->n_eog; i++) saved[i] = logits[G->eog[i]];
    int n_allowed = 0;
    CLF_TRY(clf_grammar_masks_apply(G->gm, &w->cur, logits, &n_allowed));
    if (w->cur.accepting) /* a whole sentence: it may end here */
        for (int i = 0; i < G->n_eog; i++) logits[G->eog[i]] = saved[i];
    return CLF_OK;
}

/* The walk's state after token; 0 when the grammar refuses it (the walk
 * then ends: an end token ends it too, nothing follows one). */
int api_grammar_walk_advance(api_grammar_walk *w, int32_t token) {
    const clinfer_grammar *G = w->gs->G;
    if (w->dead) return 0;
    if (clf_token_is_eog(G->tok, token)) {
        w->dead = 1;
        return w->cur.accepting;
    }
    if (!clf_grammar_masks_advance(G->gm, G->tok, token, &w->cur, &w->next)) return w->dead = 1, 0;
    return 1;
}

void api_grammar_walk_free(api_grammar_walk *w) {
    if (!w) return;
    clf_gstate_free(&w->cur);
    clf_gstate_free(&w->next);
    free(w);
}

int api_grammar_draft_prefix(const clinfer_sampler *smp, const int32_t *draft, int n) {
    api_grammar_walk *w = NULL;
    if (api_grammar_walk_begin(smp, &w) != CLF_OK) return 0; /* no memory: no draft */
    if (!w) return n;
    int k = 0;
    while (k < n && api_grammar_walk_advance(w, draft[k])) k++;
    api_grammar_walk_free(w);
    return k;
}

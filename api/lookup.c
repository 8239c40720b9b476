/* Prompt lookup: the draft after the newest n-gram's last earlier
 * occurrence, the drafter that sizes the drafts, and the speculative step
 * it proposes and settles (include/clinfer.h): written once, for
 * clinfer_generate (api/generate.c) and the server's scheduler. A drafter
 * may instead draft with a second model (api/draft_model.c), and may
 * follow a sampler's grammar (its drafts cut where the grammar refuses). */
#include "lookup.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"

int clf_lookup_draft(const int32_t *tokens, int n, int ngram_min, int ngram_max, int draft_max, int32_t *draft) {
    if (ngram_min < 1) ngram_min = 1;
    for (int k = ngram_max < n - 1 ? ngram_max : n - 1; k >= ngram_min && draft_max > 0; k--) {
        const int32_t *key = tokens + n - k;
        /* newest first: recent text is the likelier to repeat */
        for (int j = n - k - 1; j >= 0; j--) {
            if (tokens[j] != key[0] || memcmp(tokens + j, key, (size_t)k * sizeof *key)) continue;
            /* what followed, copied as LZ77 copies a back-reference: past
             * the end it goes on with the draft itself, so a text that
             * repeats with period n - j - k drafts its next draft_max */
            for (int i = 0; i < draft_max; i++) {
                int from = j + k + i;
                draft[i] = from < n ? tokens[from] : draft[from - n];
            }
            return draft_max;
        }
    }
    return 0;
}

/* After a single drafted token missed, this many tokens go undrafted. */
enum { PAUSE_AFTER_MISS = 8 };

struct clinfer_drafter {
    int max, len, pause;
    int32_t *rows; /* [1 + max]: the proposed batch, the pending token then the draft */
    int n_rows;    /* rows of the step being verified (0: none) */
    const clinfer_sampler *smp; /* drafts follow its grammar (clinfer_drafter_set_sampler; NULL: none) */
    api_model_draft *md;        /* a draft model's drafter (api/draft_model.c; NULL: prompt lookup) */
};

clinfer_status clinfer_drafter_create(int draft_max, clinfer_drafter **out) {
    API_NOT_NULL(out);
    *out = NULL;
    if (draft_max <= 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "draft_max is %d: it must be > 0", draft_max);
    clinfer_drafter *d = malloc(sizeof *d);
    int32_t *rows = d ? malloc((size_t)(draft_max + 1) * sizeof *rows) : NULL;
    if (!rows) {
        free(d);
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    *d = (clinfer_drafter){draft_max, draft_max, 0, rows, 0, NULL, NULL};
    *out = d;
    return CLINFER_OK;
}

void clinfer_drafter_free(clinfer_drafter *d) {
    if (!d) return;
    api_model_draft_free(d->md);
    free(d->rows);
    free(d);
}

int clinfer_drafter_draft(clinfer_drafter *d, const int32_t *tokens, int n, int max, int32_t *draft) {
    if (!d || !tokens || !draft || n <= 0) return 0;
    if (d->pause > 0) {
        d->pause--;
        return 0;
    }
    const int k = max < d->len ? max : d->len;
    if (k <= 0) return 0;
    /* a draft model masks its drafts by the grammar as it drafts; a
     * lookup's draft is cut at the first token the grammar refuses */
    if (d->md) return api_model_draft_run(d->md, d->smp, tokens, n, k, draft);
    int nd = clf_lookup_draft(tokens, n, CLF_LOOKUP_NGRAM_MIN, CLF_LOOKUP_NGRAM_MAX, k, draft);
    return d->smp && nd ? api_grammar_draft_prefix(d->smp, draft, nd) : nd;
}

void clinfer_drafter_set_sampler(clinfer_drafter *d, const clinfer_sampler *smp) {
    if (d) d->smp = smp;
}

void api_drafter_attach(clinfer_drafter *d, api_model_draft *md) { d->md = md; }
api_model_draft *api_drafter_model(const clinfer_drafter *d) { return d ? d->md : NULL; }
int api_drafter_max(const clinfer_drafter *d) { return d ? d->max : 0; }

const float *api_drafter_q(const clinfer_drafter *d, int row) {
    return d && d->md && row >= 0 && row + 1 < d->n_rows ? api_model_draft_q(d->md, row) : NULL;
}

void clinfer_drafter_taken(clinfer_drafter *d, int drafted, int accepted) {
    if (!d || drafted <= 0) return;
    if (accepted >= drafted) d->len = 2 * d->len < d->max ? 2 * d->len : d->max;
    else d->len = accepted + 1;
    /* a lookup that missed its one token pauses; a draft model's next
     * guess is as good as its last one was bad */
    if (accepted == 0 && drafted == 1 && !d->md) d->pause = PAUSE_AFTER_MISS;
}

/* ---- the speculative step -------------------------------------------------- */

int clinfer_drafter_propose(clinfer_drafter *d, const int32_t *text, int n, int max, int left, int room,
                            const int32_t **rows) {
    if (!d || !text || !rows || n <= 0) return 0;
    /* the draft's bound: the caller's, then the tokens still to sample
     * (the last draft token's row gives one more), then the context */
    int cap = max < d->max ? max : d->max;
    if (cap > left - 1) cap = left - 1;
    if (cap > room) cap = room;
    /* no draft asked for: the drafter's pause is not spent on it */
    int nd = cap > 0 ? clinfer_drafter_draft(d, text, n, cap, d->rows + 1) : 0;
    d->rows[0] = text[n - 1];
    d->n_rows = 1 + nd;
    *rows = d->rows;
    return d->n_rows;
}

int clinfer_drafter_accept(const clinfer_drafter *d, int row, int32_t token) {
    return d && row >= 0 && row + 1 < d->n_rows && token == d->rows[row + 1];
}

int clinfer_drafter_settle(clinfer_drafter *d, int row) {
    if (!d || d->n_rows <= 0) return 0;
    if (row < 0) row = 0;
    if (row > d->n_rows - 1) row = d->n_rows - 1;
    clinfer_drafter_taken(d, d->n_rows - 1, row); /* no draft (one row): nothing to learn */
    d->n_rows = 0;
    return row + 1;
}

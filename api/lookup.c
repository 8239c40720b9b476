/* Prompt lookup: the draft after the newest n-gram's last earlier
 * occurrence, and the drafter that sizes the drafts (include/clinfer.h). */
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
};

clinfer_status clinfer_drafter_create(int draft_max, clinfer_drafter **out) {
    API_NOT_NULL(out);
    *out = NULL;
    if (draft_max <= 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "draft_max is %d: it must be > 0", draft_max);
    clinfer_drafter *d = malloc(sizeof *d);
    if (!d) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    *d = (clinfer_drafter){draft_max, draft_max, 0};
    *out = d;
    return CLINFER_OK;
}

void clinfer_drafter_free(clinfer_drafter *d) { free(d); }

int clinfer_drafter_draft(clinfer_drafter *d, const int32_t *tokens, int n, int max, int32_t *draft) {
    if (!d || !tokens || !draft || n <= 0) return 0;
    if (d->pause > 0) {
        d->pause--;
        return 0;
    }
    const int k = max < d->len ? max : d->len;
    return k > 0 ? clf_lookup_draft(tokens, n, CLF_LOOKUP_NGRAM_MIN, CLF_LOOKUP_NGRAM_MAX, k, draft) : 0;
}

void clinfer_drafter_taken(clinfer_drafter *d, int drafted, int accepted) {
    if (!d || drafted <= 0) return;
    if (accepted >= drafted) d->len = 2 * d->len < d->max ? 2 * d->len : d->max;
    else d->len = accepted + 1;
    if (accepted == 0 && drafted == 1) d->pause = PAUSE_AFTER_MISS;
}

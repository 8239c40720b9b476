/* Prompt lookup: the draft after the newest n-gram's last earlier occurrence. */
#include "lookup.h"

#include <string.h>

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

/* The drafter of speculative decoding by prompt lookup (no second model):
 * the text generated so far often repeats the prompt or itself (code being
 * edited, a quotation), so the tokens that followed the last earlier
 * occurrence of the newest n-gram are a cheap guess at what comes next.
 * clinfer_generate verifies the guess in one batch (api/generate.c). */
#ifndef CLF_LOOKUP_H
#define CLF_LOOKUP_H

#include <stdint.h>

/* The n-gram lengths tried, longest first. llama.cpp's lookup tries 1..4
 * (with n-gram frequency caches); the original prompt-lookup decoding, 3..1
 * over the context alone, which this is. */
enum { CLF_LOOKUP_NGRAM_MIN = 1, CLF_LOOKUP_NGRAM_MAX = 3 };

/* For k from ngram_max down to ngram_min: the most recent earlier
 * occurrence of the last k of tokens[0..n) (one that starts before n - k);
 * the first k with one wins, and the draft_max tokens that followed it go
 * to draft, where the text ends continued as it repeats (the occurrence at
 * j: token n + i is drafted as token j + k + i). Returns how many: 0 when
 * no n-gram occurred before, else draft_max. */
int clf_lookup_draft(const int32_t *tokens, int n, int ngram_min, int ngram_max, int draft_max, int32_t *draft);

#endif

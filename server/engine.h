/* The one place the server calls the model: n_slots sequences, each with
 * its own KV cache, advanced together one step at a time: a step is one
 * forward pass over every entry's tokens (clf_llama_eval_seqs), so the
 * weights are read once for all the slots. Only the scheduler's thread
 * calls these (the OpenCL queue is not shared). */
#ifndef SRV_ENGINE_H
#define SRV_ENGINE_H

#include <stdint.h>

#include "llama.h"

typedef struct srv_engine srv_engine;

/* n_ctx per slot (0: the model's own, capped as clf_llama_ctx_create does). */
clf_status srv_engine_create(const clf_llama *m, int n_slots, int n_ctx, clf_type kv, srv_engine **out);
void srv_engine_free(srv_engine *e);

int srv_engine_n_ctx(const srv_engine *e);
/* Tokens in a slot's cache, and forgetting them from position pos on. */
int srv_engine_slot_len(const srv_engine *e, int slot);
void srv_engine_slot_rewind(srv_engine *e, int slot, int pos);

typedef struct srv_entry {
    int slot;
    const int32_t *tokens; /* appended at the slot's current length */
    int n;
    int want_logits;
    const float *logits; /* out: the last token's [n_vocab] when asked (valid until the next step) */
} srv_entry;

/* Evaluates every entry (one per slot at most). A failure fails the step:
 * the caller rewinds the slots it advanced (their lengths are as before
 * the failed entry). */
clf_status srv_engine_step(srv_engine *e, srv_entry *entries, int n);

#endif

/* The one place the server calls the model: n_slots sequences of one
 * session (include/clinfer.h), each with its own KV cache, advanced
 * together one step at a time: a step is one clinfer_decode over every
 * entry's tokens, so the weights are read once for all the slots. Only the
 * scheduler's thread calls these. */
#ifndef SRV_ENGINE_H
#define SRV_ENGINE_H

#include <stdint.h>

#include "clinfer.h"

typedef struct srv_engine srv_engine;

/* n_ctx per slot (0: the model's own, capped as clinfer_session_create
 * does); kv_memory: the bytes of KV cache the slots share (0: every slot's
 * whole n_ctx; clinfer_kv_pool). */
clinfer_status srv_engine_create(clinfer_model *m, int n_slots, int n_ctx, clinfer_kv_type kv, size_t kv_memory,
                                 srv_engine **out);
void srv_engine_free(srv_engine *e);

int srv_engine_n_ctx(const srv_engine *e);
/* The most tokens one step evaluates in one pass. */
int srv_engine_n_batch(const srv_engine *e);
/* The shared KV cache's blocks: how many, how many free. */
void srv_engine_kv_pool(const srv_engine *e, clinfer_kv_pool *out);
/* The bytes its model's weights take on the device, and its KV pool's
 * (server/memory.h counts them). */
void srv_engine_bytes(const srv_engine *e, double *weights, double *kv);
/* Tokens in a slot's cache, and forgetting them from position pos on. */
int srv_engine_slot_len(const srv_engine *e, int slot);
void srv_engine_slot_rewind(srv_engine *e, int slot, int pos);
/* dst becomes the first n tokens of src, not evaluated again
 * (clinfer_seq_copy: CLINFER_ERR_ARG with dst unchanged where a
 * sliding-window ring no longer holds them; after another failure dst is
 * empty). */
clinfer_status srv_engine_slot_copy(srv_engine *e, int src, int dst, int n);
/* A slot's tokens and KV cache into a file and back
 * (clinfer_session_save_seq / clinfer_session_load_seq). */
clinfer_status srv_engine_slot_save(srv_engine *e, int slot, const int32_t *tokens, int n, const char *path,
                                    size_t *bytes);
clinfer_status srv_engine_slot_load(srv_engine *e, int slot, const char *path, int32_t *tokens, int cap, int *n,
                                    size_t *bytes);
/* The same in host memory (clinfer_session_save_seq_buf: *buf for clinfer_free). */
clinfer_status srv_engine_slot_save_buf(srv_engine *e, int slot, const int32_t *tokens, int n, void **buf,
                                        size_t *bytes);
clinfer_status srv_engine_slot_load_buf(srv_engine *e, int slot, const void *buf, size_t bytes, int32_t *tokens,
                                        int cap, int *n);
/* The slot's sequence uses the model's LoRA adapters i < n at scales[i]
 * (0: not at all) from its next step (clinfer_session_set_lora). */
clinfer_status srv_engine_slot_lora(srv_engine *e, int slot, const float *scales, int n);

/* Which of an entry's tokens give logits. */
typedef enum srv_logits {
    SRV_LOGITS_NONE,  /* none: a prompt's chunk before its last */
    SRV_LOGITS_LAST,  /* the last token's: a prompt's last chunk, a decode */
    SRV_LOGITS_EVERY, /* every token's: a speculative draft's verification (srv_engine_row_logits) */
} srv_logits;

typedef struct srv_entry {
    int slot;
    const int32_t *tokens; /* appended at the slot's current length */
    int n;
    srv_logits want_logits;
    const float *logits; /* out: the last token's [n_vocab] when asked (valid until the next step) */
    int row0;            /* out: the batch row of tokens[0] (srv_engine_row_logits) */
} srv_entry;

/* Row `row` of the last step's batch: its logits, where asked. */
const float *srv_engine_row_logits(const srv_engine *e, int row);

/* Evaluates every entry (one per slot at most). A failure fails the step:
 * the caller rewinds the slots it advanced (their lengths are as before
 * the failed entry). */
clinfer_status srv_engine_step(srv_engine *e, srv_entry *entries, int n);

/* Builds the kernels of a decode step before the server says it is ready
 * (a step of one slot, then of every slot, each forgotten after): no build,
 * nor its compiler's output, once requests are answered. */
clinfer_status srv_engine_warm(srv_engine *e);

#endif

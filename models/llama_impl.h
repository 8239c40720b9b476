/* What the files of models/llama_*.c share and nothing else sees:
 *   llama_hparams.c  hyperparameters from the GGUF metadata, tensor checks
 *   llama_load.c     the weights onto the device, fused projections
 *   llama_ctx.c      contexts: paged KV caches, scratch, sequences (blocks, length, rewind, copy)
 *   llama_forward.c  the forward pass over one batch of rows
 *   llama_batch.c    clf_llama_eval / eval_top / eval_seqs / eval_rows: chunks, multi-sequence passes, hops
 *   llama_stage.c    a pass arriving from another stage (stage.h)
 *   llama_embed.c    clf_llama_embed: pooled hidden states */
#ifndef CLF_LLAMA_IMPL_H
#define CLF_LLAMA_IMPL_H

#include "llama.h"

/* A forward pass's rows of one sequence (stage.h). */
typedef clf_stage_segment segment;

/* Sequence s's length: sequence 0's lives in the context's own field,
 * which the single-sequence API has always used. */
static inline int *seq_past(clf_llama_ctx *c, int s) { return s == 0 ? &c->n_past : &c->seqs[s].n_past; }

/* Before a pass: blocks for every segment's positions in both caches
 * (CLF_ERR_CONTEXT, nothing changed, when the pool is short), blocks that
 * left a sliding window given back, changed tables onto the device.
 * (llama_ctx.c) */
clf_status clf_llama_seq_reserve(clf_llama_ctx *c, const segment *segs, int n_seg);

/* Before the passes of an evaluation: whether the global layers' pool has
 * the blocks for n[i] tokens more of each sequence seq[i] (distinct), all
 * or nothing (CLF_ERR_CONTEXT, nothing changed); the sliding-window pool
 * holds every sequence's window. (llama_ctx.c) */
clf_status clf_llama_seq_room(const clf_llama_ctx *c, const int *seq, const int *n, int count);

/* Enqueues one pass over n ≤ n_batch tokens grouped in segments, the
 * single-token ones first (n1 rows), through the model's layers: from the
 * tokens' embeddings on the first stage, from x_in ([n × n_embd], copied
 * before it returns) on the others. On the last stage logits land in
 * c->logits: with all_logits every row's, else row i for the row want[i]
 * (i < n_want); on the others the activations are read into x_out, *x_ev
 * completing the read. all_logits CLF_FWD_HIDDEN: no logits, every row's
 * hidden state after the output norm left in c->xn (embeddings). Nothing
 * else waits. (llama_forward.c) */
enum { CLF_FWD_HIDDEN = 2 };
clf_status clf_llama_forward(clf_llama_ctx *c, const int32_t *tokens, const float *x_in, int n, const segment *segs,
                             int n_seg, int all_logits, const int *want, int n_want, float *x_out, cl_event *x_ev);

/* A pass's logits for every row (perplexity) need a chunk's worth of rows
 * on the last stage, allocated on first use. (llama_ctx.c) */
clf_status clf_llama_grow_logits(clf_llama_ctx *c);
/* A verification's n decode rows of one sequence need n rows of the int8
 * forms, grown on first use. (llama_ctx.c) */
clf_status clf_llama_grow_rows(clf_llama_ctx *c, int n);

/* Waits for a pass's activations (ev, released here) and hands them with
 * the pass to the next stage, which writes the logits rows. (llama_batch.c) */
clf_status clf_llama_hop(clf_llama_ctx *c, const clf_stage_pass *p, cl_event ev, const float *x, float *logits);

#endif

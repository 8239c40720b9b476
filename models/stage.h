/* A model split into stages: each stage holds a contiguous range of layers
 * [l0, l1) of the file (clf_llama_load_range), the first the embedding, the
 * last the output norm and head. A context on a stage that is not the last
 * owns a link to the next stage; forward() runs its layers, reads the
 * pass's activations to the host and hands them, with the pass's
 * description, to link->ops->pass, which returns the logits rows. So every
 * caller of clf_llama_eval / clf_llama_eval_seqs works unchanged over a
 * split model.
 *
 * Implementations of the link: another device in this process
 * (clf_stage_local_*, models/stage_local.c) and MPI ranks (mpi/).
 * A stage that receives a pass (the local link, an MPI rank > 0) runs
 * clf_llama_stage_pass on its own context. */
#ifndef CLF_STAGE_H
#define CLF_STAGE_H

#include "gguf.h"
#include "quant.h"
#include "runtime.h"
#include "status.h"

struct clf_llama;
struct clf_llama_ctx;

/* A pass's rows of one sequence: n rows from row0, at positions
 * pos .. pos + n - 1 of sequence seq (every stage's caches get them). */
typedef struct clf_stage_segment {
    int seq, row0, n, pos;
} clf_stage_segment;

/* One forward pass as it crosses a boundary. Rows are tokens in the order
 * of the segments (the single-token segments first). The logits asked for:
 * with all_logits every row's ([n × n_vocab]), else row want[i] into
 * logits row i ([n_want × n_vocab]); n_want may be 0 (a prompt chunk that
 * only fills the caches). */
typedef struct clf_stage_pass {
    int n;
    const clf_stage_segment *segs;
    int n_seg;
    int all_logits;
    const int *want;
    int n_want;
} clf_stage_pass;

/* Logits rows a pass returns. */
static inline int clf_stage_pass_rows(const clf_stage_pass *p) { return p->all_logits ? p->n : p->n_want; }

typedef struct clf_stage_link clf_stage_link;

/* What a stage asks of the rest of the pipeline. Each op covers every stage
 * after this one (a link forwards to its own next link). */
typedef struct clf_stage_ops {
    /* Creates the next stage's context, as clf_llama_ctx_create_seqs does
     * (the same arguments, resolved: n_ctx and n_batch > 0), and the link
     * to it. `next` is what clf_llama_set_next was given. */
    clf_status (*ctx_create)(void *next, int n_ctx, int n_batch, int n_seq, clf_type kv_type, clf_stage_link **out);
    /* x: [p->n × n_embd] F32 activations after this stage's layers; logits:
     * [clf_stage_pass_rows(p) × n_vocab] written on return (NULL when no
     * row is asked). Passes come in order, one at a time, this stage
     * already running the next one while pass() blocks (a prompt's next
     * micro-batch of n_batch / 4 rows from 128 on, clf_llama_eval_seqs'
     * next pass): that is the pipeline. The
     * remote stages advance their sequences only when the pass succeeds
     * (clf_llama_stage_pass does so); on a failure the caller rewinds. */
    clf_status (*pass)(clf_stage_link *l, const clf_stage_pass *p, const float *x, float *logits);
    /* Forgets sequence seq's tokens from pos on (clf_llama_seq_rewind). */
    void (*seq_rewind)(clf_stage_link *l, int seq, int pos);
    /* Frees the next stage's context and the link. */
    void (*free)(clf_stage_link *l);
} clf_stage_ops;

struct clf_stage_link {
    const clf_stage_ops *ops;
    void *impl;
};

/* Loads layers [l0, l1) of the file (0 <= l0 < l1 <= n_layer) with the
 * tensors the stage needs: token_embd on the first (l0 == 0), output_norm
 * and output on the last (l1 == n_layer; tied embeddings: token_embd as the
 * head). clf_llama_load is the range [0, n_layer); l1 = -1 means n_layer. */
clf_status clf_llama_load_range(clf_runtime *rt, const clf_gguf *g, int l0, int l1, struct clf_llama **out);

/* Makes m a stage that is not the last: contexts created on it from now on
 * create the next stage's context through ops->ctx_create(next, ...) and
 * hand their passes to it. next must outlive the model's contexts. */
void clf_llama_set_next(struct clf_llama *m, const clf_stage_ops *ops, void *next);

/* Runs one pass arriving at a stage other than the first: x_in [p->n ×
 * n_embd] from the previous stage. out: the logits rows
 * ([clf_stage_pass_rows(p) × n_vocab]) when this stage is the last or its
 * context has a link (the pass goes on through it), else the activations
 * after this stage's layers ([p->n × n_embd]) for the caller to hop on.
 * The segments' sequences advance to pos + n (every segment's pos must be
 * the sequence's length on this stage: CLF_ERR_ARG otherwise). */
clf_status clf_llama_stage_pass(struct clf_llama_ctx *c, const clf_stage_pass *p, const float *x_in, float *out);

/* The link to another stage in this process (its own device and queue):
 * `next` is the next stage's clf_llama. */
extern const clf_stage_ops clf_stage_local_ops;

/* Loads stage i's layers [l0[i], l1[i]) on rts[i] for i < n and chains the
 * stages with local links; models[0] is the model to evaluate with (its
 * contexts reach the others). On a failure nothing stays loaded. */
clf_status clf_stage_local_load(clf_runtime *const *rts, int n, const clf_gguf *g, const int *l0, const int *l1,
                                struct clf_llama **models);
/* Frees the n models (the contexts on models[0] first). */
void clf_stage_local_free(struct clf_llama **models, int n);

#endif

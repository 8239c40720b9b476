/* The server's draft model (serve --model-draft): a second, smaller model
 * of the target's vocabulary drafts for every slot, each slot with a
 * sequence of its own in the draft model's engine (engine.h), kept in step
 * with the slot's text by comparing the tokens it holds with the text it is
 * asked to continue (the common prefix stays, the rest is rewound and the
 * new tokens evaluated: accepts, rejected drafts, another prompt, a slot
 * copied, restored or taken from the RAM cache all come out of that one
 * comparison). Every slot's draft is made together: one draft-model step
 * catches every slot up (its new tokens), then one step per draft position
 * evaluates each still-drafting slot's last draft token, never one decode
 * per slot. A greedy request's draft is the draft model's best tokens; a
 * sampled request's tokens are drawn from the draft model's law q under the
 * request's settings, each q kept (srv_draft_q) for the scheduler's
 * verification by the rule min(1, p/q) (clinfer_next_token_draft_q), which
 * keeps the target's law exactly and takes most drafts where the models
 * agree (a greedy draft of a sampled request, a point mass, is taken with
 * probability p alone). Only the scheduler's thread calls these. */
#ifndef SRV_DRAFT_H
#define SRV_DRAFT_H

#include <stdint.h>

#include "clinfer.h"

typedef struct srv_draft srv_draft;

typedef struct srv_draft_params {
    int draft_max;  /* the longest draft (> 0) */
    int draft_min;  /* a shorter draft is none (0..draft_max) */
    float p_min;    /* a draft stops before a token the draft model gives less than this (0..1) */
    /* no drafts in a step that decodes more slots than this (0: no bound; vLLM's
     * speculative_disable_by_batch_size): each slot's draft costs draft passes and verify rows,
     * which a step already busy with other slots' tokens no longer gets for free */
    int max_streams;
} srv_draft_params;

/* n_slots sequences of n_ctx tokens on `draft` (the caller's model, which
 * must outlive it); CLINFER_ERR_ARG naming the difference when its
 * vocabulary is not target's (clinfer_model_vocab_compatible). Builds its
 * decode kernels before it returns. */
clinfer_status srv_draft_create(const clinfer_model *target, clinfer_model *draft, int n_slots, int n_ctx,
                                clinfer_kv_type kv, const srv_draft_params *p, srv_draft **out);
void srv_draft_free(srv_draft *d);
int srv_draft_max(const srv_draft *d);
/* The draft model's weights and its KV cache (every slot's sequence), in
 * bytes: what the server's memory check counts for it (memory.h); 0 for NULL. */
double srv_draft_bytes(const srv_draft *d);
/* srv_draft_params.max_streams */
int srv_draft_max_streams(const srv_draft *d);

/* A new job in the slot: its draft length starts at draft_max again. */
void srv_draft_reset(srv_draft *d, int slot);
/* The slot's draft sequence emptied (an erased slot: its memory back). */
void srv_draft_forget(srv_draft *d, int slot);
/* How long a draft the slot asks for now (its length adapts to what was
 * taken), at most max; 0: none (a pause after a sampled request's empty
 * draft, counted down here: one call a step). */
int srv_draft_want(srv_draft *d, int slot, int max);
/* Of the slot's last draft's `drafted` tokens, `accepted` were taken:
 * how many rows the slot keeps (accepted + 1: the pending token's and the
 * taken ones'). */
int srv_draft_settle(srv_draft *d, int slot, int drafted, int accepted);

/* One slot's draft: the text (the slot's tokens, then the pending one) in,
 * up to k tokens out. */
typedef struct srv_draft_req {
    int slot;
    const int32_t *text;
    int n;       /* text's tokens, the pending one last */
    int k;       /* the most tokens to draft (> 0) */
    /* the request's sampling (NULL, or temperature <= 0: greedy drafts); a
     * sampled draft's stream starts from its seed at the job's first draft */
    const clinfer_sampler_params *sp;
    int32_t *out; /* [k]: the draft */
    int nd;       /* out: its length (0: none) */
    int tag;      /* the caller's */
    /* the job's sampler, or NULL: where it holds a grammar the draft model's
     * logits are masked by it as the draft goes (clinfer_grammar_walk), so
     * drafts stay in its language; it is read, never changed */
    const clinfer_sampler *smp;
} srv_draft_req;

/* Drafts for every request together (one request a slot). A failed step
 * leaves the drafts made so far (a draft is only a guess); the draft
 * sequences stay consistent. */
void srv_draft_run(srv_draft *d, srv_draft_req *reqs, int n);

/* The law the slot's last draft's token j was drawn from (a sampled
 * request's), as q for clinfer_next_token_draft_q: the target's vocabulary
 * of probabilities, valid until the next call here or srv_draft_run; NULL
 * for a greedy draft (its tokens proposed with certainty) or past the
 * draft. */
const float *srv_draft_q(srv_draft *d, int slot, int j);

#endif

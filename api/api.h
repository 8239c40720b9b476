/* What the public API's handles hold (include/clinfer.h), shared by the
 * files of api/: model.c (load, placement, info), session.c (contexts,
 * sequences, evaluation, batches), sampler.c (the sampler chain),
 * generate.c (the detokenizer and the one generation loop), embed.c
 * (embeddings), mpi.c. */
#ifndef CLF_API_H
#define CLF_API_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat.h"
#include "clinfer.h"
#include "llama.h"
#include "place.h"
#include "sampler.h"
#include "tokenizer.h"

/* The internal status is the public one, value for value. */
_Static_assert(CLINFER_ERR_ARG == (int)CLF_ERR_ARG && CLINFER_ERR_IO == (int)CLF_ERR_IO &&
                   CLINFER_ERR_FORMAT == (int)CLF_ERR_FORMAT && CLINFER_ERR_DEVICE == (int)CLF_ERR_DEVICE &&
                   CLINFER_ERR_CL == (int)CLF_ERR_CL && CLINFER_ERR_MEMORY == (int)CLF_ERR_MEMORY &&
                   CLINFER_ERR_CONTEXT == (int)CLF_ERR_CONTEXT && CLINFER_ERR_INTERRUPTED == (int)CLF_ERR_INTERRUPTED,
               "clinfer_status and clf_status differ");
_Static_assert(CLINFER_TOP_K_MAX == CLF_TOPK_MAX, "CLINFER_TOP_K_MAX is not the device top-k's limit");

struct clinfer_model {
    clf_tokenizer *tok;
    clf_stages stages; /* the layers on their devices (none for vocab_only) */
    clf_runtime *rt;   /* stages.rt[0]: where evaluation starts */
    clf_llama *llama;  /* stages.m[0] */
    clinfer_model_info info;
    clinfer_load_options opt; /* the callbacks (the strings are not kept) */
    int noticed;                 /* the build notice went out */
    /* Sessions on several threads share the runtime: its queue, its kernel
     * cache and the kernels' arguments. Evaluations take turns; `current`
     * is the session evaluating (its cancel flag stops a prompt). */
    pthread_mutex_t device_lock;
    struct clinfer_session *current;
    /* The vocabulary as a byte trie for grammars' masks: built by the first
     * grammar, under trie_lock, then shared read-only. */
    struct clf_vocab_trie *trie;
    pthread_mutex_t trie_lock;
    /* clinfer_model_set_chat_template's text (malloc'd), run instead of the
     * file's tokenizer.chat_template; NULL: the file's */
    char *chat_template;
    /* The chat (chat.h) of chat_template, else of the file's template, its
     * parse kept (clf_chat_keep): made at load and by
     * clinfer_model_set_chat_template, copied for each rendering
     * (api_model_chat), only read while sessions render (several threads
     * at once). chat_st: CLF_OK, or what every chat call fails with (the
     * file's template the engine cannot parse and of no format known by
     * hand: the load itself goes on, a model runs without its chat),
     * chat_err its message (malloc'd; NULL if none). */
    clf_chat chat;
    clf_status chat_st;
    char *chat_err;
    uint64_t digest; /* the file's clf_gguf_header_digest and size: what a saved sequence state names */
    /* LoRA adapters (clinfer_lora_load, api/lora.c), freed with the model */
    struct clinfer_lora **loras;
    int n_loras;
};
/* Frees the model's adapters (clinfer_model_free, before the weights). */
void api_lora_free_all(clinfer_model *m);

/* The model's chat template: the one set, else the file's (chat.h), a
 * copy of m->chat for one rendering (its parse borrowed), or m->chat_st
 * with its message. */
clf_status api_model_chat(const clinfer_model *m, clf_chat *c);

struct clinfer_session {
    clinfer_model *m;
    clf_llama_ctx *c;
    float *logits; /* [n_vocab], sequence 0's last evaluated token's */
    int has_logits;
    atomic_int cancel; /* clinfer_session_cancel, from any thread */
    /* clinfer_decode: a row per sequence [n_seq × n_vocab], or a row per
     * batch row where a sequence is verified [n × n_vocab]; row_of[i]: where batch row i's is */
    float *batch_logits;
    size_t batch_cap; /* floats */
    int *row_of, row_cap, n_rows; /* n_rows: the last batch's (0 after a failure) */
    clf_llama_seq_batch *entries;
    clinfer_drafter *drafter; /* clinfer_session_set_drafter's, for clinfer_generate (not owned) */
};

struct clinfer_sampler {
    clf_sampler *s;
    int n_vocab;
    clinfer_sampler_stage *stages;
    int n_stages;
    float *scratch; /* [n_vocab]: the logits the stages change */
    int greedy;     /* temperature <= 0: a token depends on the logits and history alone, not on draws */
    struct api_grammar_stage *grammar; /* clinfer_sampler_set_grammar's stage (owned by stages[]), or NULL */
    int top_spare;          /* the spare candidates asked of the device under a grammar (0: never; api_sampler_top_k) */
    long n_top, n_fallback; /* tokens drawn under a grammar from the k best, and from the whole row after too few survived */
    /* the grammar's mask applied by the device's selection (issue 41):
     * on unless CLINFER_GRAMMAR_DEVICE_MASK=0 (then the k best are masked
     * by id lookups, api_grammar_filter); the words of the last mask
     * [(n_vocab + 31) / 32], allocated at first use; n_masked: tokens drawn
     * from the k best of a masked row: the device's, or the host's for a
     * row already read back (clinfer_next_token); counted in n_top too */
    int device_mask;
    uint32_t *mask_bits;
    long n_masked;
};

/* Copies the fields of a caller's parameter struct that both it and the
 * library know (`src->size` bytes, at most `size`) over the defaults in
 * `dst`; src NULL keeps the defaults. CLF_ERR_ARG when size is unset. */
clf_status api_read_params(void *dst, size_t size, const void *src, const char *what);

/* The library's type of a KV cache type; CLF_TYPE_COUNT for none. */
static inline clf_type api_kv_type(clinfer_kv_type t) {
    switch (t) {
    case CLINFER_KV_F32: return CLF_F32;
    case CLINFER_KV_F16: return CLF_F16;
    case CLINFER_KV_Q8_0: return CLF_Q8_0;
    case CLINFER_KV_Q4_0: return CLF_Q4_0;
    default: return (clf_type)CLF_TYPE_COUNT;
    }
}
/* Copies a filled struct to the caller's, as far as the caller's size goes,
 * keeping the caller's size. */
clf_status api_write_info(void *dst, const void *src, size_t size, const char *what);

/* An evaluation's turn on the device: the session is the model's current
 * one (its cancel flag and the model's abort callback stop a prompt
 * between chunks) until api_release. */
void api_acquire(clinfer_session *s);
void api_release(clinfer_session *s);

struct clinfer_detokenizer {
    clf_detok d;
    char *buf; /* clf_tokenizer_max_piece bytes: one push's text */
    size_t cap;
};

/* The one generation loop's body, shared by clinfer_generate and the
 * public clinfer_next_token: sample (from every logit, or from the k best
 * when top_k > 0: api_sampler_sample_top's, top_vals/top_ids changed,
 * or with top_masked the k best of the row the device masked with the
 * grammar's bits: api_sampler_sample_masked's;
 * where too few survive a grammar, row_of's row read back), end-of-
 * generation, detokenize, record. */
clf_status api_next_token(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits, int n_vocab,
                          float *top_vals, int32_t *top_ids, int top_k, int top_masked, int32_t draft, const float *q,
                          clinfer_session *row_of, clinfer_next *out);
/* The sampler's token for logits when a draft proposes `draft` (>= 0) as
 * the next (speculative sampling: the token has the law of
 * clinfer_sampler_sample's; greedy gives that very token), drawn from q
 * ([n_vocab] probabilities; NULL: proposed with certainty); draft < 0:
 * clinfer_sampler_sample. Not recorded (clinfer_sampler_accept). */
clf_status api_sample_draft(clinfer_sampler *smp, const float *logits, int n_vocab, int32_t draft, const float *q,
                            int32_t *token);
/* clinfer_grammar_create; preserve: the grammar reads the control tokens
 * its literals spell as text (clf_grammar_masks_preserve: a tool-call
 * format's markers). */
clf_status api_grammar_create(const clinfer_model *m, const char *gbnf, size_t len, const char *root, int preserve,
                              clinfer_grammar **out);
/* Speculative decoding's drafts under the sampler's grammar: how many of
 * draft[0..n) the grammar allows after the tokens accepted so far (n
 * without a grammar). */
int api_grammar_draft_prefix(const clinfer_sampler *smp, const int32_t *draft, int n);
/* A grammar's walk over a draft, state copied from the sampler's: masks a
 * draft model's logits (n_vocab, in place) and advances by its token. */
typedef struct api_grammar_walk api_grammar_walk;
clf_status api_grammar_walk_begin(const clinfer_sampler *smp, api_grammar_walk **out); /* *out NULL: no grammar */
clf_status api_grammar_walk_mask(api_grammar_walk *w, float *logits, int n_vocab);
int api_grammar_walk_advance(api_grammar_walk *w, int32_t token); /* 0: the grammar does not allow it */
void api_grammar_walk_free(api_grammar_walk *w);

/* A drafter's second model (api/draft_model.c): its session kept in step
 * with the text it is asked to continue. */
typedef struct api_model_draft api_model_draft;
/* Up to k tokens after text[0..n) from the draft model (masked by smp's
 * grammar when it has one): greedily, or in clinfer_generate under a
 * sampled smp drawn from the draft's law, kept for api_model_draft_q; how
 * many (0: none this time). */
int api_model_draft_run(api_model_draft *md, const clinfer_sampler *smp, const int32_t *text, int n, int k,
                        int32_t *draft);
/* text[0] of the next drafts is at position pos0 of the target's sequence
 * (clinfer_generate: the tokens the session held before its prompt, which
 * the draft session is assumed to hold too when it holds as many). */
void api_model_draft_begin(api_model_draft *md, int pos0);
/* The generation's whole text (from pos0 on: its prompt and every token
 * sampled), so that the next one knows what its session holds. */
void api_model_draft_end(api_model_draft *md, const int32_t *text, int n);
void api_model_draft_free(api_model_draft *md);
/* The drafter's side (api/lookup.c). */
void api_drafter_attach(clinfer_drafter *d, api_model_draft *md);
api_model_draft *api_drafter_model(const clinfer_drafter *d);
int api_drafter_max(const clinfer_drafter *d);
/* The law the draft token after batch row `row` was drawn from ([n_vocab]
 * probabilities), NULL when it was proposed with certainty. */
const float *api_drafter_q(const clinfer_drafter *d, int row);
const float *api_model_draft_q(const api_model_draft *md, int j);
/* The draft model's draft_min: the drafter never asks it for fewer. */
int api_model_draft_min(const api_model_draft *md);

/* Propagates a failing internal status as the public one. */
#define API_TRY(expr)                                                        \
    do {                                                                     \
        clf_status api_st_ = (expr);                                         \
        if (api_st_ != CLF_OK) return (clinfer_status)api_st_;               \
    } while (0)

#define API_NOT_NULL(p) \
    do { if (!(p)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "%s: %s is NULL", __func__, #p); } while (0)

/* CLF_OK when m holds weights on a device; else CLF_ERR_ARG saying that
 * `fn` needs them and m was loaded for its vocabulary only
 * (clinfer_model_params.vocab_only). Every call that needs the weights or a
 * device passes here: the sessions' creation, which every evaluation
 * (eval, decode, generate, perplexity, embed, top-k) goes through. */
clf_status api_need_weights(const clinfer_model *m, const char *fn);

/* The masks a sampler's grammar computed and found kept (the bench's mask
 * cost); zeros without a grammar. */
void api_grammar_stats(const clinfer_sampler *smp, long *computed, long *hits, double *seconds);
/* The device's k best under the sampler's grammar (issue 41): the
 * candidates vals/ids[0..k) (best first) its grammar allows, compacted in
 * place in their order; how many; -1 where only the whole row can answer
 * (the grammar's refusals, whose messages its stage gives). Where fewer
 * than need (<= k) survive but they are all the grammar allows, padded to
 * need as the masked row's need best would be (-inf, the smallest refused
 * ids). */
int api_grammar_filter(clinfer_sampler *smp, float *vals, int32_t *ids, int k, int need);
/* The k best logits a sampler asks of the device, at most k_max: its
 * chain's need (clinfer_sampler_top_k) when it has no stage; under a
 * grammar alone that need plus spares for the mask to take away
 * (CLINFER_GRAMMAR_TOP_K, default API_GRAMMAR_TOP_K; 0: off, every
 * logit), where the chain's need is not 0; else 0 (every logit). */
enum { API_GRAMMAR_TOP_K = 32 };
int api_sampler_top_k(const clinfer_sampler *smp, int k_max);
/* clinfer_sampler_sample_top from api_sampler_top_k's candidates (vals
 * and ids are changed: the grammar's survivors); *token -1 when too few
 * survive (the caller samples from the whole row: the same token). */
clf_status api_sampler_sample_top(clinfer_sampler *smp, float *vals, int32_t *ids, int k, int32_t *token);
/* How many tokens a sampler under a grammar drew from the device's k best
 * and how many fell back to the whole row, since its creation: each token
 * drawn under the grammar counts once, where its path is decided (an end
 * token drawn counts: it is a draw, though the caller streams no text). */
void api_sampler_top_stats(const clinfer_sampler *smp, long *from_top, long *fallbacks);
/* Of from_top, the tokens drawn from the k best of the row the device
 * masked with the grammar's bits (api_session_eval_top_masked). */
long api_sampler_masked_count(const clinfer_sampler *smp);
/* The k best the device is asked for under the sampler's grammar when it
 * applies the grammar's mask itself: the chain's need (the masked row's
 * need best are all it takes, no spares: nothing is taken away after);
 * 0 where the device's mask is not used (no grammar, a program's stage,
 * CLINFER_GRAMMAR_TOP_K=0 or CLINFER_GRAMMAR_DEVICE_MASK=0, or a chain
 * that needs every logit). */
int api_sampler_mask_k(const clinfer_sampler *smp, int k_max);
/* The grammar's mask for the next draw as the device's bits, into
 * smp->mask_bits (allocated here): 1 when they are there; 0 where the
 * whole row must answer (the grammar's refusals and their messages: a
 * dead or limited state, nothing allowed; no memory). Not a draw: the
 * grammar is not armed (api_sampler_sample_masked arms it). */
int api_grammar_device_mask(clinfer_sampler *smp);
/* Whether the bits api_grammar_device_mask made last are still the
 * grammar's for the next draw (no accepted token has moved its state
 * since, no reset). */
int api_grammar_mask_current(const clinfer_sampler *smp);
/* A draw under the grammar: the tokens accepted from now on move it (the
 * prompt's before the first draw do not), as stage_apply arms it. */
void api_grammar_arm(clinfer_sampler *smp);
/* The sampler's token from the k best of the row the device masked with
 * the grammar's bits (vals/ids best first: every allowed value before any
 * -inf): the chain's need best are those of the whole masked row. */
clf_status api_sampler_sample_masked(clinfer_sampler *smp, const float *vals, const int32_t *ids, int k,
                                     int32_t *token);
/* clinfer_eval_top with the sampler's grammar mask applied by the device:
 * the forward pass is queued, the host computes the mask while the device
 * runs it (outside the model's turn: another session may queue its work
 * meanwhile), the device's selection skips what the mask refuses
 * (clf_llama_eval_top_masked with the grammar's callback). *masked 1
 * when it did (vals/ids: the masked row's k best); 0 where the mask could
 * not be used (a split model, whose row arrives on the host; the grammar's
 * refusals): then vals/ids are the plain row's k best, as clinfer_eval_top. */
clf_status api_session_eval_top_masked(clinfer_session *s, const int32_t *tokens, int n, int k, float *vals,
                                       int32_t *ids, int *nonfinite, clinfer_sampler *smp, int *masked);
/* n tokens evaluated as n decode steps (clf_llama_eval_rows), the last
 * one's logits alone into s->logits (the session's logits): a draft model
 * catching up on a verified step (api/draft_model.c), whose rows must be
 * single-token evaluations but whose first rows' heads nobody reads. */
clf_status api_session_eval_rows_last(clinfer_session *s, const int32_t *tokens, int n);
/* The row clinfer_eval_top chose from, into s->logits (nothing evaluated since). */
clf_status api_session_top_row(clinfer_session *s);

#endif

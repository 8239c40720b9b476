/* What the public API's handles hold (include/clinfer.h), shared by
 * api/model.c and api/session.c. */
#ifndef CLF_API_H
#define CLF_API_H

#include <pthread.h>
#include <stdatomic.h>

#include "clinfer.h"
#include "llama.h"
#include "tokenizer.h"

/* The internal status is the public one, value for value. */
_Static_assert(CLINFER_ERR_ARG == (int)CLF_ERR_ARG && CLINFER_ERR_IO == (int)CLF_ERR_IO &&
                   CLINFER_ERR_FORMAT == (int)CLF_ERR_FORMAT && CLINFER_ERR_DEVICE == (int)CLF_ERR_DEVICE &&
                   CLINFER_ERR_CL == (int)CLF_ERR_CL && CLINFER_ERR_MEMORY == (int)CLF_ERR_MEMORY &&
                   CLINFER_ERR_CONTEXT == (int)CLF_ERR_CONTEXT && CLINFER_ERR_INTERRUPTED == (int)CLF_ERR_INTERRUPTED,
               "clinfer_status and clf_status differ");

struct clinfer_model {
    clf_tokenizer *tok;
    clf_runtime *rt; /* NULL for a vocab_only model */
    clf_llama *llama;
    clinfer_model_info info;
    /* Sessions on several threads share the runtime: its queue, its kernel
     * cache and the kernels' arguments. Evaluations take turns. */
    pthread_mutex_t device_lock;
};

struct clinfer_session {
    clinfer_model *m;
    clf_llama_ctx *c;
    float *logits; /* [n_vocab], the last evaluated token's */
    int has_logits;
    atomic_int cancel; /* clinfer_session_cancel, from any thread */
};

/* Copies the fields of a caller's parameter struct that both it and the
 * library know (`src->size` bytes, at most `size`) over the defaults in
 * `dst`; src NULL keeps the defaults. CLF_ERR_ARG when size is unset. */
clf_status api_read_params(void *dst, size_t size, const void *src, const char *what);
/* Copies a filled struct to the caller's, as far as the caller's size goes,
 * keeping the caller's size. */
clf_status api_write_info(void *dst, const void *src, size_t size, const char *what);

/* Propagates a failing internal status as the public one. */
#define API_TRY(expr)                                                        \
    do {                                                                     \
        clf_status api_st_ = (expr);                                         \
        if (api_st_ != CLF_OK) return (clinfer_status)api_st_;               \
    } while (0)

#define API_NOT_NULL(p) \
    do { if (!(p)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "%s: %s is NULL", __func__, #p); } while (0)

#endif

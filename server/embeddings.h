/* POST /v1/embeddings (OpenAI's shape), /tokenize and /detokenize
 * (llama-server's), and what embeddings run on: a session of their own on
 * the model, beside the scheduler's. The library lets sessions on
 * different threads share a model (their evaluations take turns on the
 * device), so an embedding runs on its HTTP thread between the scheduler's
 * steps without touching the slots' sequences; a mutex keeps it to one
 * request at a time, the session created on first use (its KV cache
 * holds one input of up to a slot's context). */
#ifndef SRV_EMBEDDINGS_H
#define SRV_EMBEDDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "api_openai.h"
#include "clinfer.h"

typedef struct srv_embedder srv_embedder;

/* n_ctx: the longest input (the slots' context); kv: its cache's type. */
clinfer_status srv_embedder_create(clinfer_model *m, int n_ctx, clinfer_kv_type kv, srv_embedder **out);
void srv_embedder_free(srv_embedder *e);

/* A /v1/embeddings body: each input a text or token ids. */
typedef struct srv_embed_req {
    char *model;       /* NULL when absent */
    int n;             /* inputs, >= 1 */
    char **text;       /* [n]: input i's text, or NULL where it came as token ids */
    size_t *text_len;  /* [n] */
    int32_t **ids;     /* [n]: input i's ids (n_ids[i] >= 1), or NULL */
    int *n_ids;
    int base64;        /* encoding_format "base64" */
    int dimensions;    /* 0: absent */
} srv_embed_req;

enum { SRV_MAX_INPUTS = 2048 }; /* OpenAI's limit on inputs per request */

/* 0, or -1 with *e set: input a string, an array of strings, an array of
 * token ids or an array of such arrays, none empty; encoding_format float
 * or base64. Free *r either way. No I/O (fuzzable). */
int srv_embed_parse(const char *body, size_t len, srv_embed_req *r, srv_api_error *e);
void srv_embed_req_free(srv_embed_req *r);

/* n floats as base64 of their little-endian bytes (OpenAI's
 * encoding_format "base64"), malloc'd NUL-terminated; NULL: no memory. */
char *srv_base64_floats(const float *v, size_t n);

#endif

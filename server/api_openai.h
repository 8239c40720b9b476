/* OpenAI's HTTP API as plain C: request bodies (JSON, checked with
 * jansson's json_unpack_ex) into a srv_api_req, and the JSON the server
 * answers with: completions, stream chunks, models, errors. No I/O here: the
 * libFuzzer harness (tests/fuzz/fuzz_request.c) drives srv_api_parse. */
#ifndef SRV_API_OPENAI_H
#define SRV_API_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include "clinfer.h"

enum { SRV_MAX_STOP = 4 }; /* OpenAI's limit on stop strings */
/* The most alternatives a token's logprobs list: chat's top_logprobs (0..20,
 * OpenAI's cap), and completions' logprobs (OpenAI caps it at 5; clinfer
 * takes up to the same 20). */
enum { SRV_MAX_TOP_LOGPROBS = 20 };
/* The most choices a request asks for (n); the server's slots bound it too. */
enum { SRV_MAX_N = 128 };

typedef enum srv_kind { SRV_CHAT, SRV_COMPLETION } srv_kind;

typedef struct srv_msg {
    const char *role; /* "system", "user" or "assistant" ("developer" reads as "system") */
    char *content;    /* malloc'd (text parts joined) */
} srv_msg;

typedef struct srv_api_req {
    srv_kind kind;
    char *model;          /* NULL when absent */
    srv_msg *msgs;        /* SRV_CHAT */
    int n_msgs;
    char *prompt;         /* SRV_COMPLETION: text, or NULL when given as token ids */
    int32_t *prompt_ids;  /* SRV_COMPLETION given as [ids] */
    int n_prompt_ids;
    int max_tokens;       /* 0: absent */
    int has_seed;
    clinfer_sampler_params sp; /* clinfer_sampler_default_params() where a field is absent */
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int stream, include_usage;
    int n;            /* choices (1 when absent) */
    int logprobs;     /* 1: each token's logprob (chat's logprobs: true; completions' logprobs: N) */
    int top_logprobs; /* with logprobs: the alternatives a token lists (chat's top_logprobs, completions' N) */
    int32_t *bias_ids; /* logit_bias: token ids (checked against the vocabulary by the caller) */
    float *bias;       /* their biases, -100..100 */
    int n_bias;
} srv_api_req;

/* An answer in OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. */
typedef struct srv_api_error {
    int http;          /* 400, 401, 404, 413, 500, 503 */
    const char *type;  /* "invalid_request_error", ... */
    const char *code;  /* "invalid_value", "model_not_found", ... or NULL */
    const char *param; /* the field concerned, or NULL */
    char message[512];
} srv_api_error;

void srv_api_error_set(srv_api_error *e, int http, const char *type, const char *code, const char *param,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The 400 for a bad field. */
void srv_api_bad(srv_api_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 0, or -1 with *e set (every field checked for its type and range; unknown
 * fields ignored, unsupported ones refused). Free *req either way. */
int srv_api_parse(const char *body, size_t len, srv_kind kind, srv_api_req *req, srv_api_error *e);
void srv_api_req_free(srv_api_req *req);

/* ---- answers: malloc'd NUL-terminated JSON (NULL: it cannot be made, ---
 * clinfer_last_error says why: out of memory, or a string that is not UTF-8) */

/* text[0, len) as valid UTF-8, NUL-terminated (*out_len bytes, if asked):
 * each invalid byte becomes U+FFFD. NULL: out of memory. */
char *srv_api_utf8(const char *text, size_t len, size_t *out_len);

char *srv_api_error_json(const srv_api_error *e);

typedef struct srv_api_usage {
    int prompt_tokens, completion_tokens, cached_tokens;
    double prompt_ms, gen_ms, queue_ms;
} srv_api_usage;

typedef struct srv_api_resp {
    srv_kind kind;
    const char *id, *model;
    long long created;
    const char *finish; /* "stop" or "length"; NULL in a stream's middle chunks */
} srv_api_resp;

/* A token as logprobs report it: its bytes (clinfer_token_piece) and its
 * log-probability (clinfer_logprobs). */
typedef struct srv_api_tok {
    const char *piece;
    size_t len;
    float logprob;
} srv_api_tok;

/* A generated token's logprobs: the token, where its text starts in its
 * choice's text (bytes: completions' text_offset), its alternatives best
 * first. */
typedef struct srv_api_logprob {
    srv_api_tok tok;
    size_t offset;
    int n_top;
    srv_api_tok top[SRV_MAX_TOP_LOGPROBS];
} srv_api_logprob;

/* One choice of an answer, or its part in a stream chunk. */
typedef struct srv_api_choice {
    int index;
    const char *text;
    size_t len;
    const char *finish; /* "stop", "length"; NULL in a stream's middle chunks */
    int logprobs;       /* 1: a logprobs object of lp[0, n_lp) (chat's or completions' shape); 0: null */
    const srv_api_logprob *lp;
    int n_lp;
} srv_api_choice;

/* A whole answer of n choices (stream: false). */
char *srv_api_choices_json(const srv_api_resp *r, const srv_api_choice *c, int n, const srv_api_usage *u);
/* A stream chunk of one choice; `role` for a chat choice's first. */
char *srv_api_choice_chunk_json(const srv_api_resp *r, int role, const srv_api_choice *c);

/* A whole answer (stream: false) of one choice without logprobs. The text
 * need not be valid UTF-8: bad bytes become U+FFFD. */
char *srv_api_completion_json(const srv_api_resp *r, const char *text, size_t len, const srv_api_usage *u);
/* One stream chunk: `role` (the chat's first chunk), text, finish reason;
 * with `u` the usage chunk (no choices, stream_options.include_usage). */
char *srv_api_chunk_json(const srv_api_resp *r, int role, const char *text, size_t len, const srv_api_usage *u);
char *srv_api_models_json(const char *model, long long created, int n_ctx);

#endif

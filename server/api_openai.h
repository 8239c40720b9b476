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
enum { SRV_MAX_LORA = 32 }; /* LoRA adapters a server loads at most (adapters.h) */

typedef enum srv_kind { SRV_CHAT, SRV_COMPLETION } srv_kind;

/* What the reply is held to: free text, any JSON object (response_format
 * json_object), a JSON Schema (response_format json_schema, or
 * llama-server's top-level json_schema) or a GBNF grammar (llama-server's
 * grammar). */
typedef enum srv_format { SRV_FORMAT_TEXT, SRV_FORMAT_JSON_OBJECT, SRV_FORMAT_JSON_SCHEMA, SRV_FORMAT_GRAMMAR } srv_format;

/* A call an assistant message made (strings malloc'd). */
typedef struct srv_tool_call {
    char *id, *name, *arguments;
} srv_tool_call;

typedef struct srv_msg {
    const char *role; /* "system", "user", "assistant" or "tool" ("developer" reads as "system") */
    char *content;    /* malloc'd (text parts joined) */
    srv_tool_call *calls; /* an assistant's tool_calls */
    int n_calls;
    char *tool_call_id;   /* a tool's */
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
    /* tools (SRV_CHAT): the array's JSON text, NULL when absent or empty */
    char *tools;
    clinfer_tool_choice tool_choice; /* auto where absent */
    char *tool_name;                 /* a named choice's function */
    int parallel_tool_calls;         /* 1 where absent */
    int n;            /* choices (1 when absent) */
    int logprobs;     /* 1: each token's logprob (chat's logprobs: true; completions' logprobs: N) */
    int top_logprobs; /* with logprobs: the alternatives a token lists (chat's top_logprobs, completions' N) */
    int32_t *bias_ids; /* logit_bias: token ids (checked against the vocabulary by the caller) */
    float *bias;       /* their biases, -100..100 */
    int n_bias;
    /* structured output: at most one of response_format (other than text),
     * json_schema and grammar, and not with tools offered */
    srv_format format;
    char *format_text;        /* JSON_SCHEMA: the schema's JSON text; GRAMMAR: the GBNF */
    const char *format_param; /* the field it came from ("response_format", "json_schema", "grammar") */
    /* reasoning (SRV_CHAT, server/reasoning.h): llama-server's
     * reasoning_format (an srv_reasoning_format: auto where absent), and
     * what srv_request_submit found in the rendered prompt: the syntax the
     * reply's reasoning takes (an srv_think_syntax; off under "none") and
     * whether the reply starts inside <think> */
    int reasoning_format;     /* -1: not given (the server's --reasoning-format) */
    int has_budget;           /* reasoning_budget given: */
    int reasoning_budget;     /* -1 unlimited, 0 no thinking (enable_thinking false for the template), N > 0 tokens */
    int think_syntax, think_open;
    char *template_kwargs; /* chat_template_kwargs: a JSON object's text (malloc'd), NULL when absent */
    /* LoRA (adapters.h): the "lora" field's pairs (has_lora: given), and the scale of each of the
     * model's adapters its jobs use (srv_lora_resolve) */
    int has_lora, n_lora_req, lora_id[SRV_MAX_LORA];
    float lora_scale[SRV_MAX_LORA];
    float lora[SRV_MAX_LORA];
    int n_lora;
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

/* A call in an answer. */
typedef struct srv_api_call {
    const char *id, *name, *arguments;
} srv_api_call;

typedef struct srv_api_resp {
    srv_kind kind;
    const char *id, *model;
    long long created;
    const char *finish; /* "stop" or "length"; NULL in a stream's middle chunks (one choice's answers) */
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
    const char *finish; /* "stop", "length" or "tool_calls"; NULL in a stream's middle chunks */
    int logprobs;       /* 1: a logprobs object of lp[0, n_lp) (chat's or completions' shape); 0: null */
    const srv_api_logprob *lp;
    int n_lp;
    const srv_api_call *calls; /* a chat choice's message.tool_calls (a whole answer); content null when empty */
    int n_calls;
    /* a chat choice's reasoning apart (message.reasoning_content, or a
     * chunk's delta.reasoning_content, then without content); none when 0 bytes */
    const char *reasoning;
    size_t reasoning_len;
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
/* A stream chunk of one tool call's delta in choice `choice`, as OpenAI
 * streams them: the first names call `index` (id, type, name) with the
 * arguments so far, the next ones carry more of its arguments (id and name
 * NULL). */
char *srv_api_tool_chunk_json(const srv_api_resp *r, int choice, int index, const char *id, const char *name,
                              const char *args, size_t args_len);
char *srv_api_models_json(const char *model, long long created, int n_ctx);

/* ---- the helpers, for the other endpoints' bodies (embeddings.c, tokenize.c) ---- */

typedef struct json_t json_t;
/* A field of the body: NULL when absent or null. */
json_t *srv_api_field(json_t *root, const char *key);
/* json_unpack_ex of one present field against fmt; -1 with a 400 naming it. */
int srv_api_unpack(json_t *v, const char *key, srv_api_error *e, const char *fmt, void *dst);
/* json_pack that says why it failed (clinfer_last_error); NULL then. */
json_t *srv_api_pack(const char *fmt, ...);
/* text[0, len) as a JSON string, invalid UTF-8 bytes as U+FFFD. */
json_t *srv_api_text_json(const char *text, size_t len);
/* The body of a request as a JSON object: NULL with a 400 (invalid JSON, not an object). */
json_t *srv_api_load(const char *body, size_t len, srv_api_error *e);
/* j as compact JSON text, malloc'd (j consumed; NULL: it cannot be made). */
char *srv_api_dump(json_t *j);

#endif

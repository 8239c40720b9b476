/* The answer side the item APIs share (the Responses API, Anthropic's
 * Messages API): one chat job, submitted by srv_request_submit like a
 * Chat Completions request, its reply parsed with the tools' format into
 * content and calls, and either answered whole or streamed as blocks: a
 * text block that grows, then each call's block (its name once whole, its
 * arguments as they grow). Each API says how a block's opening, deltas and
 * close read as its events, through srv_item_ops. */
#ifndef SRV_CHAT_ITEMS_H
#define SRV_CHAT_ITEMS_H

#include "buf.h"
#include "http.h"

/* A reply as the item APIs answer it. */
typedef struct srv_reply {
    const char *text; /* the content, text[0, len) (may be invalid UTF-8: writers use srv_api_text_json) */
    size_t len;
    const srv_api_call *calls; /* ids (ops->call_prefix, unique per reply), names, arguments (JSON object text) */
    int n_calls;
    srv_job_view v; /* finish, stop_hit, n_prompt, n_cached, n_gen */
    const char *reasoning; /* the reasoning apart (reasoning.h), reasoning[0, reasoning_len); 0 bytes: none */
    size_t reasoning_len;
} srv_reply;

/* An API's events: each appends to `out` and returns 0, or -1 when it
 * could not be made (out of memory: clinfer_last_error says so). */
typedef struct srv_item_ops {
    const char *call_prefix; /* a call id's ("call_", "toolu_") */
    int (*begin)(void *ctx, srv_buf *out, int n_prompt);
    /* the reasoning's block, before the text's (NULL: a stream leaves the reasoning out) */
    int (*reasoning_open)(void *ctx, srv_buf *out);
    int (*reasoning_delta)(void *ctx, srv_buf *out, const char *t, size_t n);
    int (*reasoning_close)(void *ctx, srv_buf *out, const char *text, size_t n); /* the block's whole text */
    int (*text_open)(void *ctx, srv_buf *out);
    int (*text_delta)(void *ctx, srv_buf *out, const char *t, size_t n);
    int (*text_close)(void *ctx, srv_buf *out, const char *text, size_t n); /* the block's whole text */
    int (*call_open)(void *ctx, srv_buf *out, int k, const char *id, const char *name);
    int (*call_delta)(void *ctx, srv_buf *out, int k, const char *args, size_t n);
    int (*call_close)(void *ctx, srv_buf *out, int k, const srv_api_call *call);
    int (*end)(void *ctx, srv_buf *out, const srv_reply *r);               /* the stream's last events */
    int (*fail)(void *ctx, srv_buf *out, const srv_api_error *e);          /* a stream that ends in error */
    char *(*whole)(void *ctx, const srv_reply *r);                         /* stream: false (malloc'd JSON) */
    enum MHD_Result (*send_error)(struct MHD_Connection *c, const srv_api_error *e);
    void (*free)(void *ctx);
} srv_item_ops;

/* Answers the one submitted job (srv_request_submit's; released here, its
 * busy count undone) whole or streamed; tools (consumed) parse its reply,
 * NULL for text; ctx (consumed by ops->free) is the API's. The reasoning
 * comes apart as think_syntax and think_open say (srv_api_req's, from srv_request_submit). */
enum MHD_Result srv_items_answer(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *job,
                                 clinfer_tools *tools, int stream, const srv_item_ops *ops, void *ctx,
                                 int think_syntax, int think_open);

/* Appends an SSE event "event: NAME\ndata: JSON\n\n" (json consumed; NULL: -1). */
int srv_sse(srv_buf *out, const char *name, char *json);

#endif

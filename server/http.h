/* The HTTP side of `clinfer serve` (libmicrohttpd): a thread per
 * connection, bounded headers, bodies, idle time and time to receive a
 * request, connections per client address, routing, the API key,
 * and the answers that are not completions (page, health, models, metrics;
 * embeddings and tokenize have files of their own).
 * It listens before the model is loaded (/health: 503) and serves the API
 * once srv_http_set_app gives it the loaded model. */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

#include "buf.h"
#include "clinfer.h"
#include "grammar_cache.h"
#include "scheduler.h"

enum {
    SRV_MAX_BODY = 1 << 20,     /* request bodies larger than this: 413 */
    SRV_DROP_BODY = 16 << 20,   /* ... read and dropped first up to this size, else the connection closed */
    SRV_HEADER_MEMORY = 32768,  /* per connection: the request line and headers must fit */
    SRV_IDLE_TIMEOUT_S = 60,    /* a connection that sends nothing for this long is closed */
    SRV_REQUEST_TIMEOUT_S = 30, /* default: a request's headers and body must arrive within this, else closed */
    SRV_MAX_CONNECTIONS = 256,
    SRV_MAX_PER_CLIENT = 32,    /* connections from one address; more are closed at once */
};

/* What the API needs once the model is loaded. */
typedef struct srv_app {
    srv_sched *sched;
    const clinfer_model *m;
    const char *model_id;    /* the name /v1/models and the answers give (--alias, else the file's name) */
    struct srv_embedder *embedder; /* /v1/embeddings' session (embeddings.h) */
    int n_ctx, n_slots;
    long long created;
    srv_gcache *grammars; /* structured output's compiled grammars */
    int reasoning_format; /* --reasoning-format: a request's default (an srv_reasoning_format; 0: auto) */
    int reasoning_off;    /* --reasoning-budget 0: requests think only where they ask to */
    int reasoning_budget; /* --reasoning-budget N > 0: a request's default budget in tokens of thought; 0: none */
    const char *slot_save_path; /* --slot-save-path: the folder of POST /slots/{id}'s files; NULL: no saving (slots.c) */
} srv_app;

typedef struct srv_http srv_http;

typedef struct srv_http_config {
    const char *host; /* an address or name to bind (127.0.0.1, ::1, 0.0.0.0) */
    int port;         /* 0: any free port (srv_http_port says which) */
    const char *api_key; /* NULL: no key asked */
    int request_timeout_s; /* 0: SRV_REQUEST_TIMEOUT_S */
    int max_per_client;    /* connections from one address; 0: SRV_MAX_PER_CLIENT */
} srv_http_config;

clinfer_status srv_http_start(const srv_http_config *cfg, srv_http **out);
int srv_http_port(const srv_http *h);
void srv_http_set_app(srv_http *h, srv_app *app);
/* --models-dir: the models behind the API, each loaded on use (router.h), instead of one app. */
struct srv_router;
void srv_http_set_router(srv_http *h, struct srv_router *r);
/* Stops accepting connections; those open are still served. */
void srv_http_quiesce(srv_http *h);
/* Waits up to timeout_s for the completions in flight to be answered. */
void srv_http_drain(srv_http *h, double timeout_s);
void srv_http_stop(srv_http *h);

/* ---- for the endpoints (completions.c) ------------------------------------ */

/* Sends body (malloc'd, consumed); NULL: a 500 whose message is
 * clinfer_last_error() (why the body could not be made). */
enum MHD_Result srv_http_send(struct MHD_Connection *c, unsigned status, const char *type, char *body);
enum MHD_Result srv_http_send_error(struct MHD_Connection *c, const srv_api_error *e);
/* Whether the client is gone: its connection hung up or failed (a request
 * then is cancelled); a half-close is not gone. */
int srv_http_peer_gone(struct MHD_Connection *c);
/* A streamed answer's reader (libmicrohttpd's content reader callback, the
 * chat items' and the completions' streams): the events of *out not yet
 * handed over (from *at) into buf, at most max bytes; when they have all
 * gone, the stream's end once *ended, else more(ctx) writes the next ones
 * (0; nonzero: the stream ends in error), as often as it writes none. */
ssize_t srv_http_stream_read(srv_buf *out, size_t *at, const int *ended, int (*more)(void *ctx), void *ctx,
                             char *buf, size_t max);
/* srv_http_peer_gone, and for a request not yet answered (nothing of its
 * answer sent): a client that sent the end of its data (POLLRDHUP) has
 * either only half-closed, waiting for its answer, or closed entirely, and
 * TCP tells the two apart only when something is written to it. So an
 * interim "HTTP/1.1 100 Continue" (which an HTTP/1.1 client must accept
 * and skip before the answer, RFC 9110 15.2) is written once (what a full
 * socket buffer held back, at the next call): a closed socket answers it
 * with a reset, which this sees as gone on a later call. Written on the
 * raw socket: plain HTTP only, never under TLS (MHD_USE_TLS). */
int srv_http_probe_gone(struct MHD_Connection *c);
/* A request's deadline for the work before its answer (its grammar's
 * compilation): --request-timeout from now, on srv_now_s()'s clock. */
double srv_http_deadline(const srv_http *h);
int srv_http_request_timeout(const srv_http *h);
/* Counts a completion in flight (srv_http_drain waits for them). */
void srv_http_busy(srv_http *h, int delta);

/* A parsed request (q, modified: max_tokens may be set) checked against the
 * model, its prompt rendered and tokenized, its tools' and format's grammar
 * got, its q->n jobs made and submitted (srv_http_busy counted): how many
 * (the caller answers them, releases them and uncounts busy), or 0 with *e
 * set (e->http 0: the client left). *tools: the tool format the reply is
 * parsed with (the caller's to free), NULL without tools or with
 * tool_choice none. Every endpoint that generates goes through this. */
int srv_request_submit(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_api_req *q, srv_job **jobs,
                       clinfer_tools **tools, srv_api_error *e);
/* q's reasoning settings with the server's defaults: reasoning_format, and
 * a budget of 0 as the template's enable_thinking false (where
 * chat_template_kwargs does not say). 0, or -1 with *e (out of memory). */
int srv_request_reasoning(const srv_app *app, srv_api_req *q, srv_api_error *e);
/* The tokens of q's prompt as srv_request_submit renders it: 0 with *n set, or -1 with *e. */
int srv_request_count(const srv_app *app, const srv_api_req *q, int *n, srv_api_error *e);
enum MHD_Result srv_completion(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_kind kind, const char *body,
                               size_t len);
/* POST /v1/embeddings (embeddings.c), /tokenize and /detokenize (tokenize.c). */
enum MHD_Result srv_embeddings(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_tokenize(srv_app *app, struct MHD_Connection *c, const char *body, size_t len, int detokenize);
/* POST /apply-template (apply_template.c): the prompt a chat request renders to. */
enum MHD_Result srv_apply_template(srv_app *app, struct MHD_Connection *c, const char *body, size_t len);

#endif

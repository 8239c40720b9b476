#include "http.h"
#include "adapters.h"
#include "buf.h"

#include <errno.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api_responses.h"
#include "metrics.h"
#include "router.h"
#include "slots.h"

/* server/page.html, embedded at build time (cmake/embed.cmake) */
typedef struct { const char *name; const unsigned char *data; size_t len; } srv_page_source;
extern const srv_page_source srv_page_sources[];
/* its libraries (cmake/embed_assets.cmake), served under /assets/NAME */
typedef struct { const char *name; const unsigned char *data; size_t len; } srv_asset_source;
extern const srv_asset_source srv_asset_sources[];

/* A connection's deadline to receive a request, headers and body:
 * libmicrohttpd's idle timeout restarts on every byte, so a client that
 * trickles bytes would hold a connection and its thread for ever. */
typedef struct watch {
    int fd;
    int http11, probe_sent; /* srv_http_probe_gone: the request's version; the bytes of its probe written */
    double deadline; /* 0 while its request is served */
    struct watch *prev, *next;
} watch;

struct srv_http {
    struct MHD_Daemon *d;
    const char *api_key;
    _Atomic(srv_app *) app; /* NULL while the model loads */
    _Atomic(srv_router *) router; /* --models-dir: the models, loaded on use (router.h); app then NULL */
    atomic_int busy;
    int port;
    /* the watchdog: shuts down the socket of a connection past its deadline
     * (libmicrohttpd then reads the end of it and closes the connection) */
    double request_timeout_s;
    pthread_mutex_t wmu;
    pthread_cond_t wake;
    watch *watched;
    pthread_t watchdog;
    int watchdog_started, stopping;
};

/* ---- answers -------------------------------------------------------------- */

/* body NULL: a fixed 500 (not even an error's JSON could be made). */
static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status, const char *type, char *body) {
    if (!body) {
        static const char OOM[] = "{\"error\":{\"message\":\"out of host memory\",\"type\":\"server_error\"}}";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(OOM), (void *)OOM, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_INTERNAL_SERVER_ERROR, r);
        MHD_destroy_response(r);
        return rc;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

enum MHD_Result srv_http_send(struct MHD_Connection *c, unsigned status, const char *type, char *body) {
    if (body) return send_body(c, status, type, body);
    srv_api_error e; /* the body could not be made: a 500 saying why */
    srv_api_error_set(&e, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, NULL, "%s", clinfer_last_error());
    return send_body(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json", srv_api_error_json(&e));
}

enum MHD_Result srv_http_send_error(struct MHD_Connection *c, const srv_api_error *e) {
    return srv_http_send(c, (unsigned)e->http, "application/json", srv_api_error_json(e));
}

static enum MHD_Result send_fail(struct MHD_Connection *c, int http, const char *type, const char *code,
                                 const char *msg) {
    srv_api_error e;
    srv_api_error_set(&e, http, type, code, NULL, "%s", msg);
    return srv_http_send_error(c, &e);
}

/* Only a hang-up or an error: the end of the client's data (POLLRDHUP) is
 * also what a client that half-closes after its request (shutdown(SHUT_WR),
 * nc -N) sends, and it waits for its answer. A client that closed entirely
 * is seen when a write to it fails. */
int srv_http_peer_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

ssize_t srv_http_stream_read(srv_buf *out, size_t *at, const int *ended, int (*more)(void *ctx), void *ctx,
                             char *buf, size_t max) {
    while (*at == out->n) { /* all handed over: the buffer starts again */
        *at = out->n = 0;
        if (*ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (more(ctx)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    const size_t n = out->n - *at < max ? out->n - *at : max;
    memcpy(buf, out->p + *at, n);
    *at += n;
    return (ssize_t)n;
}

/* The probe is written on the socket itself, past libmicrohttpd (which
 * has no call for an unasked-for 1xx), in plain text: under TLS
 * (MHD_USE_TLS) those bytes would break the session's records, so this must
 * not be used there (the daemon is plain HTTP; a TLS one would need its own
 * way to tell a closed client). */
int srv_http_probe_gone(struct MHD_Connection *c) {
    if (srv_http_peer_gone(c)) return 1;
    static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD),
                                   *si = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watch *w = si ? si->socket_context : NULL;
    /* HTTP/1.0 has no 1xx: such a client is seen at the answer */
    if (!ci || !w || !w->http11 || w->probe_sent == (int)sizeof CONTINUE - 1) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLRDHUP)) return 0; /* still open both ways */
    /* counted as written only when it was: a full socket buffer (EAGAIN)
     * or a short write leaves the rest for the next call, rather than an
     * interim answer cut short before the real one, or none at all */
    ssize_t n = send(ci->connect_fd, CONTINUE + w->probe_sent, sizeof CONTINUE - 1 - (size_t)w->probe_sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) w->probe_sent += (int)n;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void srv_http_busy(srv_http *h, int delta) { atomic_fetch_add(&h->busy, delta); }

double srv_http_deadline(const srv_http *h) { return srv_now_s() + h->request_timeout_s; }
int srv_http_request_timeout(const srv_http *h) { return (int)h->request_timeout_s; }

/* ---- the request deadline ------------------------------------------------ */

/* The connection's next request must arrive whole within the timeout (on),
 * or it is being served (off). */
static void arm(srv_http *h, struct MHD_Connection *c, int on) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    watch *w = ci ? ci->socket_context : NULL;
    if (!w) return;
    pthread_mutex_lock(&h->wmu);
    w->deadline = on ? srv_now_s() + h->request_timeout_s : 0;
    pthread_mutex_unlock(&h->wmu);
}

/* libmicrohttpd calls CLOSED before it closes the socket: under the lock,
 * the watchdog's fd is still this connection's. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    srv_http *h = cls;
    watch *w = *socket_ctx;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || !(w = calloc(1, sizeof *w))) return; /* unwatched: the idle timeout still holds */
        w->fd = ci->connect_fd;
        pthread_mutex_lock(&h->wmu);
        w->deadline = srv_now_s() + h->request_timeout_s;
        if ((w->next = h->watched)) w->next->prev = w;
        h->watched = w;
        pthread_mutex_unlock(&h->wmu);
        *socket_ctx = w;
    } else if (w) {
        pthread_mutex_lock(&h->wmu);
        if (w->prev) w->prev->next = w->next;
        else h->watched = w->next;
        if (w->next) w->next->prev = w->prev;
        pthread_mutex_unlock(&h->wmu);
        free(w);
        *socket_ctx = NULL;
    }
}

static void *watchdog(void *arg) {
    srv_http *h = arg;
    pthread_mutex_lock(&h->wmu);
    while (!h->stopping) {
        double t = srv_now_s(), next = t + 1;
        for (watch *w = h->watched; w; w = w->next) {
            if (!w->deadline) continue;
            if (w->deadline <= t) {
                shutdown(w->fd, SHUT_RDWR);
                w->deadline = 0;
            } else if (w->deadline < next) {
                next = w->deadline;
            }
        }
        struct timespec until = {(time_t)next, (long)((next - (time_t)next) * 1e9)};
        pthread_cond_timedwait(&h->wake, &h->wmu, &until);
    }
    pthread_mutex_unlock(&h->wmu);
    return NULL;
}

/* ---- routes --------------------------------------------------------------- */

typedef enum route {
    R_PAGE, R_ASSET, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_EMBEDDINGS, R_TOKENIZE, R_DETOKENIZE,
    R_RESPONSES, R_MESSAGES, R_COUNT_TOKENS, R_APPLY_TEMPLATE, R_RMODELS, R_RLOAD, R_RUNLOAD, R_SLOTS, R_SLOT, R_LORA,
    R_LORA_SET, R_NONE
} route;

static const struct {
    const char *path, *method;
    int public; /* served without the API key */
} ROUTES[] = {
    [R_PAGE] = {"/", "GET", 1},
    [R_ASSET] = {NULL, "GET", 1}, /* /assets/NAME: matched by asset_for */
    [R_HEALTH] = {"/health", "GET", 1},
    [R_METRICS] = {"/metrics", "GET", 0},
    [R_MODELS] = {"/v1/models", "GET", 0},
    [R_CHAT] = {"/v1/chat/completions", "POST", 0},
    [R_COMPLETIONS] = {"/v1/completions", "POST", 0},
    [R_EMBEDDINGS] = {"/v1/embeddings", "POST", 0},
    [R_TOKENIZE] = {"/tokenize", "POST", 0},
    [R_DETOKENIZE] = {"/detokenize", "POST", 0},
    [R_RESPONSES] = {"/v1/responses", "POST", 0},             /* api_responses.c */
    [R_MESSAGES] = {"/v1/messages", "POST", 0},               /* api_anthropic.c */
    [R_COUNT_TOKENS] = {"/v1/messages/count_tokens", "POST", 0},
    [R_APPLY_TEMPLATE] = {"/apply-template", "POST", 0},      /* apply_template.c */
    [R_RMODELS] = {"/models", "GET", 0},          /* llama-server's router mode's names (router.h) */
    [R_RLOAD] = {"/models/load", "POST", 0},
    [R_RUNLOAD] = {"/models/unload", "POST", 0},
    [R_SLOTS] = {"/slots", "GET", 0},   /* slots.c */
    [R_SLOT] = {"/slots/", "POST", 0},  /* /slots/{id}: a prefix (SLOT_PREFIX) */
    [R_LORA] = {"/lora-adapters", "GET", 0},     /* llama-server's (adapters.h) */
    [R_LORA_SET] = {"/lora-adapters", "POST", 0},
};
#define SLOT_PREFIX "/slots/"

/* Whether url is route i's path: the whole path, or /slots/{id}'s prefix. */
static int route_path(int i, const char *url) {
    if (i == R_SLOT) return !strncmp(url, SLOT_PREFIX, sizeof SLOT_PREFIX - 1);
    return !strcmp(url, ROUTES[i].path);
}

/* A route's error: Anthropic's shape on its endpoints, else OpenAI's. */
static enum MHD_Result route_error(struct MHD_Connection *c, route r, const srv_api_error *e) {
    return r == R_MESSAGES || r == R_COUNT_TOKENS ? srv_anthropic_error(c, e) : srv_http_send_error(c, e);
}

/* A request's state between the access handler's calls: its body so far,
 * or the error it gets once its body has been read (and dropped). */
typedef struct conn {
    route r;
    route path_r; /* the route of the request's path, whatever its method (R_NONE: none): its errors' shape */
    const srv_asset_source *asset;
    srv_buf body; /* the request's body so far */
    srv_app *app; /* under a router: the model the request named (serve_routed) */
    size_t dropped;
    int failed;
    srv_api_error err;
    char slot_id[16]; /* R_SLOT: the path's id (slots.c checks it) */
} conn;

static enum MHD_Result too_large(struct MHD_Connection *c, route r) {
    srv_api_error e;
    srv_api_error_set(&e, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", "request_too_large", NULL,
                      "the body is larger than %d bytes", SRV_MAX_BODY);
    return route_error(c, r, &e);
}

/* The key compared in time independent of where it differs; the scheme's
 * name in any case (RFC 7235). Anthropic's clients send it as x-api-key:
 * taken too, on every route. */
static int key_ok(const srv_http *h, struct MHD_Connection *c) {
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"), *given;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) given = auth + 7;
    else if (xkey) given = xkey;
    else return 0;
    while (*given == ' ') given++;
    size_t n = strlen(h->api_key), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(h->api_key[i] ^ given[i < m ? i : 0]);
    return diff == 0;
}

/* How the request says its body's length (RFC 9112 §6). */
typedef struct framing {
    const char *cl, *te;
    int n_cl, n_te, cl_differ;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        f->cl_differ |= f->n_cl++ && strcmp(value, f->cl);
        f->cl = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->n_te++;
        f->te = value;
    }
    return MHD_YES;
}

/* A length said twice differently, by both Content-Length and
 * Transfer-Encoding, or by a coding other than chunked: where the body ends
 * is ambiguous (a proxy in front may read it otherwise: request smuggling),
 * so RFC 9112 asks for a 400 and the connection closed. libmicrohttpd
 * reads only the first Content-Length, and it answers a malformed one
 * itself before this code sees the request. */
static int framing_ok(struct MHD_Connection *c, srv_api_error *e) {
    framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    const char *why = NULL;
    if (f.cl_differ) why = "Content-Length is given twice with different values";
    else if (f.n_cl && f.n_te) why = "Content-Length and Transfer-Encoding are both given";
    else if (f.n_te > 1 || (f.n_te && strcasecmp(f.te, "chunked"))) why = "Transfer-Encoding must be chunked alone";
    if (why) srv_api_error_set(e, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "bad_framing", NULL, "%s", why);
    return !why;
}

/* The embedded asset a URL names, or NULL. */
static const srv_asset_source *asset_for(const char *url) {
    static const char PREFIX[] = "/assets/";
    if (strncmp(url, PREFIX, sizeof PREFIX - 1)) return NULL;
    for (const srv_asset_source *a = srv_asset_sources; a->name; a++)
        if (!strcmp(url + sizeof PREFIX - 1, a->name)) return a;
    return NULL;
}

/* First call of a request: its framing, route, key and announced size. A wrong one
 * is answered once its body is read and dropped (a client still sending
 * would not see an answer sent before); one far over the size limit at
 * once, and the connection closed. */
static enum MHD_Result check_request(srv_http *h, struct MHD_Connection *c, const char *url, const char *method,
                                     conn *cn) {
    if (!framing_ok(c, &cn->err)) return srv_http_send_error(c, &cn->err);
    int path_known = 0;
    cn->r = cn->path_r = R_NONE;
    for (int i = 0; i < R_NONE; i++)
        if (ROUTES[i].path ? route_path(i, url) : !!(cn->asset = asset_for(url))) {
            path_known = 1;
            cn->path_r = (route)i;
            if (!strcmp(method, ROUTES[i].method) || (!strcmp(method, "HEAD") && !strcmp(ROUTES[i].method, "GET")))
                cn->r = (route)i;
            if (i == R_SLOT) snprintf(cn->slot_id, sizeof cn->slot_id, "%s", url + sizeof SLOT_PREFIX - 1);
        }
    cn->failed = 1;
    if (cn->r == R_NONE) {
        if (path_known)
            srv_api_error_set(&cn->err, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "method_not_allowed",
                              NULL, "%s is not allowed on this path", method);
        else
            srv_api_error_set(&cn->err, MHD_HTTP_NOT_FOUND, "invalid_request_error", "not_found", NULL,
                              "no such route: %s %.100s", method, url);
    } else if (h->api_key && !ROUTES[cn->r].public && !key_ok(h, c)) {
        srv_api_error_set(&cn->err, MHD_HTTP_UNAUTHORIZED, "authentication_error", "invalid_api_key", NULL,
                          "a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)");
    } else {
        cn->failed = 0;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > SRV_DROP_BODY) return too_large(c, cn->path_r);
    return MHD_YES;
}

static enum MHD_Result serve(srv_http *h, struct MHD_Connection *c, conn *cn) {
    srv_app *app = cn->app ? cn->app : atomic_load(&h->app);
    if (cn->r == R_PAGE) {
        const srv_page_source *p = &srv_page_sources[0];
        struct MHD_Response *r = MHD_create_response_from_buffer(p->len, (void *)p->data, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (cn->r == R_ASSET) {
        const srv_asset_source *a = cn->asset;
        size_t n = strlen(a->name);
        const char *type = n > 4 && !strcmp(a->name + n - 4, ".css") ? "text/css; charset=utf-8"
                                                                     : "text/javascript; charset=utf-8";
        struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=3600"); /* fixed for the binary's life */
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    if (cn->r == R_HEALTH) {
        char *b = strdup(app ? "{\"status\":\"ok\"}" : "{\"status\":\"loading model\"}");
        if (!b) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, app ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "application/json", b);
    }
    if (!app) return send_fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", "loading", "the model is loading");
    switch (cn->r) {
    case R_METRICS: {
        srv_stats st;
        srv_gcache_stats gs;
        srv_sched_stats(app->sched, &st);
        srv_gcache_stats_get(app->grammars, &gs);
        return srv_http_send(c, MHD_HTTP_OK, "text/plain; version=0.0.4", srv_metrics_text(&st, &gs, app->model_id));
    }
    case R_RLOAD:
    case R_RUNLOAD:
        return send_fail(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "not_supported",
                         "this server serves one model (-m): loading and unloading need --models-dir");
    case R_MODELS:
    case R_RMODELS:
        return srv_http_send(c, MHD_HTTP_OK, "application/json",
                             srv_api_models_json(app->model_id, app->created, app->n_ctx));
    case R_CHAT: return srv_completion(h, app, c, SRV_CHAT, cn->body.p, cn->body.n);
    case R_COMPLETIONS: return srv_completion(h, app, c, SRV_COMPLETION, cn->body.p, cn->body.n);
    case R_EMBEDDINGS: return srv_embeddings(h, app, c, cn->body.p, cn->body.n);
    case R_TOKENIZE: return srv_tokenize(app, c, cn->body.p, cn->body.n, 0);
    case R_DETOKENIZE: return srv_tokenize(app, c, cn->body.p, cn->body.n, 1);
    case R_RESPONSES: return srv_responses(h, app, c, cn->body.p, cn->body.n);
    case R_MESSAGES: return srv_messages(h, app, c, cn->body.p, cn->body.n);
    case R_COUNT_TOKENS: return srv_messages_count(app, c, cn->body.p, cn->body.n);
    case R_APPLY_TEMPLATE: return srv_apply_template(app, c, cn->body.p, cn->body.n);
    case R_SLOTS: return srv_slots_get(app, c);
    case R_SLOT: return srv_slots_post(app, c, cn->slot_id, cn->body.p, cn->body.n);
    case R_LORA: return srv_http_send(c, MHD_HTTP_OK, "application/json", srv_lora_list_json(app->m));
    case R_LORA_SET: {
        srv_api_error e;
        if (srv_lora_post(app->m, cn->body.p, cn->body.n, &e)) return srv_http_send_error(c, &e);
        return srv_http_send(c, MHD_HTTP_OK, "application/json", strdup("{\"success\":true}"));
    }
    default: return MHD_NO;
    }
}

/* Under a router (--models-dir): its own routes, and the request's model
 * (the body's "model"; absent: the first listed) acquired for serve() and
 * released after (a stream's jobs keep it loaded beyond: router.h). */
static enum MHD_Result serve_routed(srv_http *h, srv_router *rt, struct MHD_Connection *c, conn *cn) {
    srv_api_error e;
    /* a slot action without a body (erase) names its model as GET /slots does: ?model=NAME */
    switch (cn->r == R_SLOT && !cn->body.n ? R_SLOTS : cn->r) {
    case R_PAGE:
    case R_ASSET: return serve(h, c, cn);
    case R_HEALTH: return srv_http_send(c, MHD_HTTP_OK, "application/json", strdup("{\"status\":\"ok\"}"));
    case R_MODELS:
    case R_RMODELS: return srv_http_send(c, MHD_HTTP_OK, "application/json", srv_router_models_json(rt));
    case R_SLOTS:
    case R_METRICS: { /* ?model=NAME, else the model used last; none loaded: 503 */
        const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
        cn->app = name ? srv_router_acquire(rt, name, 0, &e) : srv_router_acquire_recent(rt);
        if (!cn->app && !name)
            srv_api_error_set(&e, MHD_HTTP_SERVICE_UNAVAILABLE, "server_error", "model_not_loaded", NULL,
                              "no model is loaded yet");
        break;
    }
    default: { /* a body naming its model (one that is not a JSON object: the 400 an endpoint gives it) */
        json_t *root = srv_api_load(cn->body.p, cn->body.n, &e);
        json_t *m = root ? srv_api_field(root, "model") : NULL;
        const char *name = NULL;
        if (m && srv_api_unpack(m, "model", &e, "s", &name)) {
            json_decref(root);
            return route_error(c, cn->path_r, &e);
        }
        if (!root) return route_error(c, cn->path_r, &e);
        if (cn->r == R_RLOAD || cn->r == R_RUNLOAD) {
            int rc = !name ? (srv_api_bad(&e, "model", "model: required"), -1)
                     : cn->r == R_RLOAD ? srv_router_load(rt, name, &e) : srv_router_unload(rt, name, &e);
            json_decref(root);
            return rc ? route_error(c, cn->path_r, &e)
                      : srv_http_send(c, MHD_HTTP_OK, "application/json", strdup("{\"success\":true}"));
        }
        cn->app = srv_router_acquire(rt, name, 1, &e);
        json_decref(root);
    }
    }
    if (!cn->app) return route_error(c, cn->path_r, &e);
    enum MHD_Result rc = serve(h, c, cn);
    srv_router_release(rt, cn->app);
    cn->app = NULL;
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **req_cls) {
    srv_http *h = cls;
    conn *cn = *req_cls;
    if (!cn) {
        if (!(cn = calloc(1, sizeof *cn))) return MHD_NO;
        *req_cls = cn;
        const union MHD_ConnectionInfo *si = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        watch *w = si ? si->socket_context : NULL;
        if (w) w->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1), w->probe_sent = 0;
        return check_request(h, c, url, method, cn);
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cn->failed || cn->dropped || cn->body.n + n > SRV_MAX_BODY) {
            cn->dropped += n;
            return cn->dropped > SRV_DROP_BODY ? MHD_NO : MHD_YES; /* too much to drop: closed */
        }
        if (srv_buf_add(&cn->body, upload, n)) return MHD_NO;
        return MHD_YES;
    }
    arm(h, c, 0); /* the request is whole: its answer may take long */
    if (cn->failed) return route_error(c, cn->path_r, &cn->err);
    if (cn->dropped) return too_large(c, cn->path_r);
    srv_router *rt = atomic_load(&h->router);
    return rt ? serve_routed(h, rt, c, cn) : serve(h, c, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode tc) {
    (void)tc;
    arm(cls, c, 1); /* for the next request on this connection */
    conn *cn = *req_cls;
    if (cn) srv_buf_free(&cn->body);
    free(cn);
    *req_cls = NULL;
}

/* ---- the daemon ----------------------------------------------------------- */

clinfer_status srv_http_start(const srv_http_config *cfg, srv_http **out) {
    *out = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) return clinfer_fail(CLINFER_ERR_ARG, "--host %s: %s", cfg->host, gai_strerror(gai));
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    h->api_key = cfg->api_key;
    h->request_timeout_s = cfg->request_timeout_s > 0 ? cfg->request_timeout_s : SRV_REQUEST_TIMEOUT_S;
    pthread_mutex_init(&h->wmu, NULL);
    srv_cond_init_monotonic(&h->wake);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    errno = 0;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_IDLE_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_HEADER_MEMORY,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)SRV_MAX_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            (unsigned)(cfg->max_per_client > 0 ? cfg->max_per_client : SRV_MAX_PER_CLIENT),
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                            h, MHD_OPTION_END);
    int err = errno;
    freeaddrinfo(ai);
    if (!h->d) {
        srv_http_stop(h);
        return clinfer_fail(CLINFER_ERR_IO, "cannot listen on %s port %d: %s", cfg->host, cfg->port,
                        err ? strerror(err) : "libmicrohttpd failed to start");
    }
    if ((err = pthread_create(&h->watchdog, NULL, watchdog, h))) {
        srv_http_stop(h);
        return clinfer_fail(CLINFER_ERR_MEMORY, "cannot start the server's watchdog thread: %s", strerror(err));
    }
    h->watchdog_started = 1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : cfg->port;
    *out = h;
    return CLINFER_OK;
}

int srv_http_port(const srv_http *h) { return h->port; }

void srv_http_set_app(srv_http *h, srv_app *app) { atomic_store(&h->app, app); }
void srv_http_set_router(srv_http *h, struct srv_router *r) { atomic_store(&h->router, r); }

void srv_http_quiesce(srv_http *h) {
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
}

void srv_http_drain(srv_http *h, double timeout_s) {
    for (double waited = 0; atomic_load(&h->busy) > 0 && waited < timeout_s; waited += 0.01)
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    if (h->d) MHD_stop_daemon(h->d); /* every connection closed: none watched */
    if (h->watchdog_started) {
        pthread_mutex_lock(&h->wmu);
        h->stopping = 1;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->wmu);
        pthread_join(h->watchdog, NULL);
    }
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->wmu);
    free(h);
}

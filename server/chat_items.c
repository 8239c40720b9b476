/* srv_items_answer: one chat job's reply as content and calls, answered
 * whole or streamed as an API's block events (chat_items.h). */
#include "chat_items.h"
#include "reasoning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum {
    WAIT_MS = 100,  /* how often a waiting request looks for its client */
    MAX_CALLS = 32, /* calls a reply is streamed with (the tools' grammar allows 16) */
};

int srv_sse(srv_buf *out, const char *name, char *json) {
    if (!json) return -1;
    int rc = srv_buf_printf(out, "event: %s\ndata: %s\n\n", name, json);
    free(json);
    return rc;
}

/* A reply's calls' ids: the prefix, a random base per reply, the call's index. */
static unsigned long long id_base(void) {
    unsigned long long b;
    if (getrandom(&b, sizeof b, 0) != sizeof b) b = (unsigned long long)time(NULL) * 2654435761u;
    return b;
}

typedef char call_id[48];

static void make_id(call_id id, const char *prefix, unsigned long long base, int k) {
    snprintf(id, sizeof(call_id), "%s%016llx%02x", prefix, base, (unsigned)k);
}

/* text[0, n) parsed (tools) into *rep (NULL without tools: all content); f_text: the splitter's. -1: out of memory. */
static int parse(const clinfer_tools *tools, int f_text, const char *text, size_t n, int final,
                 clinfer_tool_reply **rep) {
    *rep = NULL;
    return tools && srv_think_tools_parse(f_text, tools, text ? text : "", n, final, rep) != CLINFER_OK ? -1 : 0;
}

/* The reply of a whole text: r->calls point into rep and ids (MAX_CALLS). -1: out of memory. */
static int reply_of(const srv_item_ops *ops, const clinfer_tool_reply *rep, const char *text, size_t n,
                    unsigned long long base, call_id *ids, srv_api_call *calls, srv_reply *r) {
    r->text = text ? text : "";
    r->len = rep ? rep->content_len : n;
    r->n_calls = rep ? (rep->n_calls < MAX_CALLS ? rep->n_calls : MAX_CALLS) : 0;
    r->calls = calls;
    for (int k = 0; k < r->n_calls; k++) {
        make_id(ids[k], ops->call_prefix, base, k);
        calls[k] = (srv_api_call){ids[k], rep->calls[k].name, rep->calls[k].arguments ? rep->calls[k].arguments : "{}"};
    }
    return 0;
}

/* ---- stream: false -------------------------------------------------------- */

static enum MHD_Result answer_whole(srv_app *app, struct MHD_Connection *c, srv_job *job, const clinfer_tools *tools,
                                    const srv_item_ops *ops, void *ctx, int syntax, int open) {
    srv_buf text = {0}, reasoning = {0};
    srv_job_view v;
    int ok = 1;
    for (;;) { /* the text until the job ends, or the client leaves */
        char *piece;
        size_t n;
        srv_sched_wait(app->sched, job, text.n, WAIT_MS, &v, &piece, &n);
        if (n && srv_buf_add(&text, piece, n)) ok = 0;
        free(piece);
        if (!ok || v.state == SRV_DONE) break;
        if (srv_http_probe_gone(c)) {
            srv_buf_free(&text);
            return MHD_NO; /* nobody to answer */
        }
    }
    enum MHD_Result rc;
    if (ok && v.finish == SRV_FINISH_ERROR) {
        srv_api_error e;
        if (v.shutdown) srv_api_error_set(&e, 503, "server_error", "shutting_down", NULL, "%s", v.error);
        else srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", v.error);
        rc = ops->send_error(c, &e);
    } else {
        clinfer_tool_reply *rep = NULL;
        call_id ids[MAX_CALLS];
        srv_api_call calls[MAX_CALLS];
        srv_reply r = {.v = v};
        char *json = NULL;
        int f_text = 0; /* the splitter's */
        if (ok && syntax != SRV_THINK_OFF) { /* the reasoning apart: text becomes the answer */
            srv_think t;
            srv_buf content = {0};
            srv_think_init(&t, (srv_think_syntax)syntax, open);
            t.no_tools = !tools; /* Harmony: a recipient's message is a call only where tools were offered */
            ok = srv_think_feed(&t, text.p, text.n, 1, &reasoning, &content) == 0;
            f_text = t.f_text;
            srv_think_free(&t);
            srv_buf_free(&text);
            text = content;
        }
        r.reasoning = reasoning.p;
        r.reasoning_len = reasoning.n;
        if (ok && parse(tools, f_text, text.p, text.n, 1, &rep) == 0 &&
            reply_of(ops, rep, text.p, text.n, id_base(), ids, calls, &r) == 0)
            json = ops->whole(ctx, &r);
        else clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        if (json) {
            rc = srv_http_send(c, MHD_HTTP_OK, "application/json", json);
        } else { /* a 500 saying why, in the API's shape */
            srv_api_error e;
            srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            rc = ops->send_error(c, &e);
        }
        clinfer_tool_reply_free(rep);
    }
    srv_buf_free(&text);
    srv_buf_free(&reasoning);
    return rc;
}

/* ---- stream: true --------------------------------------------------------- */

typedef struct items_stream {
    srv_http *h;
    srv_app *app;
    struct MHD_Connection *c;
    srv_job *job;
    clinfer_tools *tools;
    const srv_item_ops *ops;
    void *ctx;
    srv_buf acc;          /* the reply's final text so far (with reasoning apart: the answer's) */
    size_t got;           /* the job's text bytes read */
    srv_think think;      /* the reasoning's splitter (SRV_THINK_OFF: none) */
    srv_buf reasoning;    /* the reasoning so far */
    int reasoning_state;  /* 0: no reasoning block yet, 1: open, 2: closed */
    size_t content_sent;  /* of the content, bytes sent */
    int text_state;       /* 0: no text block yet, 1: open, 2: closed */
    int calls_sent;       /* call blocks opened */
    int call_open;        /* the open call block, -1: none */
    srv_buf open_name;    /* the open call's name and the arguments sent of it: what closes it should a later */
    srv_buf open_args;    /* parse no longer hold it (its text taken back, or a count short of call_open) */
    size_t args_sent[MAX_CALLS];
    call_id ids[MAX_CALLS];
    unsigned long long base;
    int begun, ended;
    srv_buf out; /* events not yet handed to libmicrohttpd, from out_at */
    size_t out_at;
} items_stream;

static int close_reasoning(items_stream *s) {
    if (s->reasoning_state != 1) return 0;
    s->reasoning_state = 2;
    return s->ops->reasoning_close(s->ctx, &s->out, s->reasoning.p ? s->reasoning.p : "", s->reasoning.n);
}

/* New reasoning r[0, n): into its block (opened on the first), before any text */
static int reasoning_events(items_stream *s, const char *r, size_t n) {
    if (!n || !s->ops->reasoning_open || s->reasoning_state == 2) return srv_buf_add(&s->reasoning, r, n);
    int rc = s->reasoning_state == 0 ? s->ops->reasoning_open(s->ctx, &s->out) : 0;
    s->reasoning_state = 1;
    if (!rc) rc = s->ops->reasoning_delta(s->ctx, &s->out, r, n);
    return rc ? rc : srv_buf_add(&s->reasoning, r, n);
}

static int close_text(items_stream *s) {
    if (s->text_state != 1) return 0;
    s->text_state = 2;
    return s->ops->text_close(s->ctx, &s->out, s->acc.p ? s->acc.p : "", s->content_sent);
}

static int close_call(items_stream *s, const clinfer_tool_reply *rep) {
    if (s->call_open < 0) return 0;
    int k = s->call_open;
    s->call_open = -1;
    srv_api_call call = {s->ids[k], s->open_name.p ? s->open_name.p : "", s->open_args.p ? s->open_args.p : "{}"};
    if (rep && k < rep->n_calls) { /* bounded: a parse that holds fewer calls closes with what was sent */
        call.name = rep->calls[k].name;
        call.arguments = rep->calls[k].arguments ? rep->calls[k].arguments : "{}";
    }
    return s->ops->call_close(s->ctx, &s->out, k, &call);
}

/* The events the reply so far adds: content (until a call begins), then
 * each call's opening and its arguments' growth; `final` closes what is
 * open and ends the stream. */
static int advance(items_stream *s, int final, const srv_job_view *v) {
    const srv_item_ops *o = s->ops;
    clinfer_tool_reply *rep;
    if (parse(s->tools, s->think.f_text, s->acc.p, s->acc.n, final, &rep)) return -1;
    size_t content = rep ? rep->content_len : s->acc.n;
    int n_calls = rep ? (rep->n_calls < MAX_CALLS ? rep->n_calls : MAX_CALLS) : 0, rc = 0;
    if (final || content > s->content_sent || n_calls) rc = close_reasoning(s); /* the thought ends before the answer */
    if (!rc && content > s->content_sent && s->text_state < 2) { /* text after a call began is not streamed */
        if (s->text_state == 0) rc = o->text_open(s->ctx, &s->out);
        s->text_state = 1;
        if (!rc) rc = o->text_delta(s->ctx, &s->out, s->acc.p + s->content_sent, content - s->content_sent);
        s->content_sent = content;
    }
    for (int k = 0; !rc && k < n_calls; k++) {
        const char *args = rep->calls[k].arguments ? rep->calls[k].arguments : "";
        size_t n = strlen(args);
        if (k >= s->calls_sent) { /* a new call: what was open closes */
            rc = close_text(s);
            if (!rc && s->call_open >= 0) rc = close_call(s, rep);
            make_id(s->ids[k], o->call_prefix, s->base, k);
            if (!rc) rc = o->call_open(s->ctx, &s->out, k, s->ids[k], rep->calls[k].name);
            s->calls_sent = k + 1;
            s->call_open = k;
            s->args_sent[k] = 0;
            s->open_name.n = s->open_args.n = 0; /* emptied, their texts too */
            if (s->open_name.p) s->open_name.p[0] = 0;
            if (s->open_args.p) s->open_args.p[0] = 0;
            if (!rc) rc = srv_buf_add(&s->open_name, rep->calls[k].name, strlen(rep->calls[k].name));
        }
        if (!rc && n > s->args_sent[k] && k == s->call_open) {
            rc = o->call_delta(s->ctx, &s->out, k, args + s->args_sent[k], n - s->args_sent[k]);
            if (!rc) rc = srv_buf_add(&s->open_args, args + s->args_sent[k], n - s->args_sent[k]);
        }
        s->args_sent[k] = n;
    }
    if (!rc && final) {
        if (s->text_state == 0 && n_calls == 0) { /* an empty reply: one empty text block */
            rc = o->text_open(s->ctx, &s->out);
            s->text_state = 1;
        }
        if (!rc) rc = close_text(s);
        if (!rc) rc = close_call(s, rep);
        if (!rc) {
            call_id ids[MAX_CALLS];
            srv_api_call calls[MAX_CALLS];
            srv_reply r = {.v = *v, .reasoning = s->reasoning.p, .reasoning_len = s->reasoning.n};
            reply_of(o, rep, s->acc.p, s->acc.n, s->base, ids, calls, &r);
            rc = o->end(s->ctx, &s->out, &r);
        }
        s->ended = 1;
    }
    clinfer_tool_reply_free(rep);
    return rc;
}

/* An event that could not be made ends the stream with the API's error event. */
static int fail_stream(items_stream *s, const srv_api_error *e) {
    srv_api_error oom;
    if (!e) {
        srv_api_error_set(&oom, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        e = &oom;
    }
    s->ended = 1;
    return s->ops->fail(s->ctx, &s->out, e);
}

/* The next events: 0 when there are some (or the stream ended), -1 when it must end at once. */
static int next_events(items_stream *s) {
    if (!s->begun) {
        s->begun = 1;
        srv_job_view v;
        char *t;
        size_t n;
        srv_sched_wait(s->app->sched, s->job, 0, 0, &v, &t, &n); /* the prompt's size, for the first event */
        free(t);
        if (s->ops->begin(s->ctx, &s->out, v.n_prompt)) return fail_stream(s, NULL);
        return 0;
    }
    for (;;) {
        srv_job_view v;
        char *text;
        size_t n;
        srv_sched_wait(s->app->sched, s->job, s->got, WAIT_MS, &v, &text, &n);
        s->got += n;
        int rc = 0;
        if (s->think.syntax != SRV_THINK_OFF) { /* the reasoning to its block, the answer on as the text */
            srv_buf r = {0};
            size_t before = s->acc.n;
            rc = srv_think_feed(&s->think, text, n, v.state == SRV_DONE, &r, &s->acc);
            if (!rc) rc = reasoning_events(s, r.p, r.n);
            srv_buf_free(&r);
            n = s->acc.n - before; /* new text of the answer */
        } else if (n) {
            rc = srv_buf_add(&s->acc, text, n);
        }
        free(text);
        if (rc) return fail_stream(s, NULL);
        if (v.state == SRV_DONE && v.finish == SRV_FINISH_ERROR) {
            srv_api_error e;
            if (v.shutdown) srv_api_error_set(&e, 503, "server_error", "shutting_down", NULL, "%s", v.error);
            else srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", v.error);
            return fail_stream(s, &e);
        }
        if ((n || v.state == SRV_DONE) && advance(s, v.state == SRV_DONE, &v)) return fail_stream(s, NULL);
        if (s->out.n || s->ended) return 0;
        if (srv_http_peer_gone(s->c)) return -1;
    }
}

static int more_events(void *s) { return next_events(s); }

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    items_stream *s = cls;
    return srv_http_stream_read(&s->out, &s->out_at, &s->ended, more_events, s, buf, max);
}

/* libmicrohttpd is done with the stream: ended, or the client gone. */
static void free_stream(void *cls) {
    items_stream *s = cls;
    srv_sched_release(s->app->sched, s->job);
    srv_http_busy(s->h, -1);
    clinfer_tools_free(s->tools);
    s->ops->free(s->ctx);
    srv_buf_free(&s->acc);
    srv_buf_free(&s->out);
    srv_think_free(&s->think);
    srv_buf_free(&s->reasoning);
    srv_buf_free(&s->open_name);
    srv_buf_free(&s->open_args);
    free(s);
}

enum MHD_Result srv_items_answer(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *job,
                                 clinfer_tools *tools, int stream, const srv_item_ops *ops, void *ctx,
                                 int think_syntax, int think_open) {
    if (!stream) {
        enum MHD_Result rc = answer_whole(app, c, job, tools, ops, ctx, think_syntax, think_open);
        srv_sched_release(app->sched, job);
        srv_http_busy(h, -1);
        clinfer_tools_free(tools);
        ops->free(ctx);
        return rc;
    }
    items_stream *s = calloc(1, sizeof *s);
    struct MHD_Response *resp = NULL;
    if (s) {
        *s = (items_stream){.h = h, .app = app, .c = c, .job = job, .tools = tools, .ops = ops, .ctx = ctx,
                            .call_open = -1, .base = id_base()};
        srv_think_init(&s->think, (srv_think_syntax)think_syntax, think_open);
        s->think.no_tools = !tools;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, s, free_stream);
    }
    if (!resp) {
        free(s);
        srv_sched_release(app->sched, job);
        srv_http_busy(h, -1);
        clinfer_tools_free(tools);
        ops->free(ctx);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, 500, "application/json", NULL);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp); /* free_stream runs when libmicrohttpd lets go */
    return rc;
}

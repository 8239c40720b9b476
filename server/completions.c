/* POST /v1/chat/completions and /v1/completions: a request becomes a job
 * (the chat rendered in the model's own template, tokenized, checked
 * against the context), the job goes to the scheduler, and its text comes
 * back as one JSON answer or as server-sent events flushed per token. A
 * client that goes away cancels its job. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "http.h"

enum { WAIT_MS = 100 }; /* how often a waiting request looks for its client */

static unsigned long long next_id(void) {
    static atomic_ullong counter;
    return atomic_fetch_add(&counter, 1) + 1;
}

/* A chat's messages for clinfer_tools_chat_tokenize (which renders one
 * without tools as clinfer_chat_tokenize does). */
static clinfer_status chat_tokens(const srv_app *app, const srv_api_req *q, const clinfer_tools *tools, int32_t **ids,
                                  int *n) {
    size_t n_calls = 0;
    for (int i = 0; i < q->n_msgs; i++) n_calls += (size_t)q->msgs[i].n_calls;
    clinfer_tool_message *msgs = malloc((size_t)q->n_msgs * sizeof *msgs);
    clinfer_tool_call *calls = malloc((n_calls ? n_calls : 1) * sizeof *calls), *c = calls;
    clinfer_status st;
    if (!msgs || !calls) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    else {
        for (int i = 0; i < q->n_msgs; i++) {
            const srv_msg *m = &q->msgs[i];
            msgs[i] = (clinfer_tool_message){m->role, m->content, c, m->n_calls, m->tool_call_id};
            for (int k = 0; k < m->n_calls; k++)
                *c++ = (clinfer_tool_call){m->calls[k].id, m->calls[k].name, m->calls[k].arguments};
        }
        st = clinfer_tools_chat_tokenize(app->m, tools, msgs, q->n_msgs, 1, ids, n); /* messages are text */
    }
    free(msgs);
    free(calls);
    return st;
}

/* The prompt's tokens; -1 with a 400 when they cannot be made or do not fit. */
static int prompt_tokens(const srv_app *app, const srv_api_req *q, const clinfer_tools *tools, int32_t **ids, int *n,
                         srv_api_error *e) {
    clinfer_status st;
    *ids = NULL;
    *n = 0;
    if (q->kind == SRV_CHAT) {
        st = chat_tokens(app, q, tools, ids, n);
    } else if (q->prompt) {
        st = clinfer_tokenize(app->m, q->prompt, strlen(q->prompt), 1, 0, ids, n);
    } else {
        for (int i = 0; i < q->n_prompt_ids; i++)
            if (q->prompt_ids[i] >= clinfer_model_n_vocab(app->m)) {
                srv_api_bad(e, "prompt", "'prompt[%d]' is %d, not a token id (the vocabulary has %d)", i,
                            (int)q->prompt_ids[i], clinfer_model_n_vocab(app->m));
                return -1;
            }
        if (!(*ids = malloc((size_t)q->n_prompt_ids * sizeof **ids))) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        else {
            memcpy(*ids, q->prompt_ids, (size_t)q->n_prompt_ids * sizeof **ids);
            *n = q->n_prompt_ids;
            st = CLINFER_OK;
        }
    }
    if (st != CLINFER_OK) {
        if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        else srv_api_bad(e, q->kind == SRV_CHAT ? "messages" : "prompt", "%s", clinfer_last_error());
        return -1;
    }
    if (*n == 0) {
        srv_api_bad(e, q->kind == SRV_CHAT ? "messages" : "prompt", "the prompt is empty");
        return -1;
    }
    if (*n > app->n_ctx) {
        srv_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded",
                          q->kind == SRV_CHAT ? "messages" : "prompt",
                          "the prompt is %d tokens, longer than the context of %d tokens (--ctx)", *n, app->n_ctx);
        return -1;
    }
    return 0;
}

/* tools: the model's tool format (a 400 naming the chat format where it has
 * none) and, unless tool_choice is none, the reply's grammar. */
static int tool_setup(const srv_app *app, const srv_api_req *q, clinfer_tools **tools, clinfer_grammar **grammar,
                      srv_api_error *e) {
    *tools = NULL;
    *grammar = NULL;
    if (!q->tools) return 0;
    clinfer_status st = clinfer_tools_create(app->m, q->tools, strlen(q->tools), tools);
    if (st == CLINFER_OK)
        st = clinfer_tools_grammar(*tools, q->tool_choice, q->tool_name, q->parallel_tool_calls, grammar);
    if (st == CLINFER_OK) return 0;
    if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
    else srv_api_bad(e, *tools && q->tool_choice == CLINFER_TOOL_NAMED ? "tool_choice" : "tools", "%s",
                     clinfer_last_error());
    clinfer_tools_free(*tools);
    *tools = NULL;
    return -1;
}

/* A tool call's id: unique per call (the request's random base, the call's index). */
static void call_id(char *buf, size_t n, unsigned long long base, int i) {
    snprintf(buf, n, "call_%016llx%02x", base, (unsigned)i);
}

static unsigned long long call_base(void) {
    unsigned long long b;
    if (getrandom(&b, sizeof b, 0) != sizeof b) b = (unsigned long long)time(NULL) << 20 ^ next_id();
    return b;
}

static const char *finish_name(srv_finish f) {
    return f == SRV_FINISH_STOP ? "stop" : f == SRV_FINISH_LENGTH ? "length" : NULL;
}

static srv_api_usage usage_of(const srv_job_view *v) {
    return (srv_api_usage){v->n_prompt, v->n_gen, v->n_cached, v->prompt_ms, v->gen_ms, v->queue_ms};
}

/* The error a job that failed answers with. */
static void job_error(const srv_job_view *v, srv_api_error *e) {
    if (v->shutdown) srv_api_error_set(e, 503, "server_error", "shutting_down", NULL, "%s", v->error);
    else srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", v->error);
}

/* ---- stream: false -------------------------------------------------------- */

/* A whole answer's calls (tools: parse it; NULL: plain text). */
static char *whole_json(srv_api_resp *r, clinfer_tools *tools, const char *all, size_t have, const srv_api_usage *u) {
    clinfer_tool_reply *rep = NULL;
    if (!tools) return srv_api_completion_json(r, all, have, u);
    if (clinfer_tools_parse(tools, all ? all : "", have, 1, &rep) != CLINFER_OK) return NULL;
    srv_api_call *calls = calloc((size_t)rep->n_calls + 1, sizeof *calls);
    char (*ids)[40] = calloc((size_t)rep->n_calls + 1, sizeof *ids);
    char *json = NULL;
    if (!calls || !ids) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    else {
        unsigned long long base = call_base();
        for (int i = 0; i < rep->n_calls; i++) {
            call_id(ids[i], sizeof ids[i], base, i);
            calls[i] = (srv_api_call){ids[i], rep->calls[i].name, rep->calls[i].arguments};
        }
        r->calls = calls;
        r->n_calls = rep->n_calls;
        if (rep->n_calls && r->finish && !strcmp(r->finish, "stop")) r->finish = "tool_calls";
        json = srv_api_completion_json(r, all, rep->content_len, u);
        r->calls = NULL;
        r->n_calls = 0;
    }
    free(calls);
    free(ids);
    clinfer_tool_reply_free(rep);
    return json;
}

static enum MHD_Result answer_whole(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *j,
                                    srv_api_resp *r, clinfer_tools *tools) {
    char *all = NULL, *piece;
    size_t have = 0, n;
    srv_job_view v;
    for (;;) {
        srv_sched_wait(app->sched, j, have, WAIT_MS, &v, &piece, &n);
        if (n) {
            char *t = realloc(all, have + n);
            if (!t) {
                free(piece);
                break;
            }
            memcpy(t + have, piece, n);
            all = t;
            have += n;
        }
        free(piece);
        if (v.state == SRV_DONE || srv_http_peer_gone(c)) break;
    }
    srv_sched_release(app->sched, j);
    srv_http_busy(h, -1);
    if (v.state != SRV_DONE) { /* the client went away (or no memory): nobody to answer */
        free(all);
        clinfer_tools_free(tools);
        return MHD_NO;
    }
    enum MHD_Result rc;
    if (v.finish == SRV_FINISH_ERROR) {
        srv_api_error e;
        job_error(&v, &e);
        rc = srv_http_send_error(c, &e);
    } else {
        r->finish = finish_name(v.finish);
        srv_api_usage u = usage_of(&v);
        rc = srv_http_send(c, MHD_HTTP_OK, "application/json", whole_json(r, tools, all, have, &u));
    }
    free(all);
    clinfer_tools_free(tools);
    return rc;
}

/* ---- stream: true --------------------------------------------------------- */

typedef struct stream {
    srv_http *h;
    srv_app *app;
    struct MHD_Connection *c;
    srv_job *j;
    srv_api_resp r;
    char id[48];
    int include_usage, role_sent, ended;
    size_t have; /* text bytes sent */
    char *out;   /* events not yet handed to libmicrohttpd */
    size_t out_len, out_at;
    /* tools: the reply so far, parsed at each piece into content and calls */
    clinfer_tools *tools;
    char *acc;
    size_t acc_len, content_sent;
    int calls_sent;
    size_t args_sent[32]; /* per call (a reply holds at most 16) */
    unsigned long long call_base;
} stream;

/* Appends `data: JSON\n\n` (JSON consumed). */
static int event(stream *s, char *json) {
    if (!json) return -1;
    size_t n = strlen(json), need = s->out_len + n + sizeof "data: \n\n";
    char *o = realloc(s->out, need);
    if (!o) {
        free(json);
        return -1;
    }
    s->out = o;
    s->out_len += (size_t)sprintf(o + s->out_len, "data: %s\n\n", json);
    free(json);
    return 0;
}

/* The stream's end: [DONE]. */
static int end_stream(stream *s) {
    static const char DONE[] = "data: [DONE]\n\n";
    char *o = realloc(s->out, s->out_len + sizeof DONE);
    if (!o) return -1;
    s->out = o;
    memcpy(o + s->out_len, DONE, sizeof DONE - 1);
    s->out_len += sizeof DONE - 1;
    s->ended = 1;
    return 0;
}

/* A chunk that could not be made ends the stream with an error event
 * saying why (clinfer_last_error), then [DONE]. */
static int fail_stream(stream *s) {
    srv_api_error e;
    srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
    return event(s, srv_api_error_json(&e)) ? -1 : end_stream(s);
}

/* The events the reply so far adds: content that cannot begin a call,
 * each call's first delta (id, name) once its name is whole, then its
 * arguments as they grow. */
static int tool_events(stream *s, const char *text, size_t n, int final) {
    if (n) {
        char *a = realloc(s->acc, s->acc_len + n);
        if (!a) return -1;
        memcpy(a + s->acc_len, text, n);
        s->acc = a;
        s->acc_len += n;
    }
    clinfer_tool_reply *rep;
    if (clinfer_tools_parse(s->tools, s->acc ? s->acc : "", s->acc_len, final, &rep) != CLINFER_OK) return -1;
    int rc = 0;
    s->r.finish = NULL;
    if (rep->content_len > s->content_sent) {
        rc = event(s, srv_api_chunk_json(&s->r, 0, s->acc + s->content_sent, rep->content_len - s->content_sent, NULL));
        s->content_sent = rep->content_len;
    }
    for (int i = 0; !rc && i < rep->n_calls && i < 32; i++) {
        const char *args = rep->calls[i].arguments ? rep->calls[i].arguments : "";
        size_t k = strlen(args);
        if (i >= s->calls_sent) {
            char id[40];
            call_id(id, sizeof id, s->call_base, i);
            rc = event(s, srv_api_tool_chunk_json(&s->r, i, id, rep->calls[i].name, args, k));
            s->calls_sent = i + 1;
        } else if (k > s->args_sent[i]) {
            rc = event(s, srv_api_tool_chunk_json(&s->r, i, NULL, NULL, args + s->args_sent[i], k - s->args_sent[i]));
        }
        s->args_sent[i] = k;
    }
    clinfer_tool_reply_free(rep);
    return rc;
}

/* The next events: new text, or the end (finish reason, usage, [DONE]). 0
 * when there are some, -1 when the stream must end in error. */
static int next_events(stream *s) {
    for (;;) {
        srv_job_view v;
        char *text;
        size_t n;
        srv_sched_wait(s->app->sched, s->j, s->have, WAIT_MS, &v, &text, &n);
        int rc = 0;
        if (s->tools) {
            if (!s->role_sent) rc = event(s, srv_api_chunk_json(&s->r, 1, "", 0, NULL));
            s->role_sent = 1;
            if (!rc && n) rc = tool_events(s, text, n, 0);
            s->have += n;
        } else if (n || (!s->role_sent && s->r.kind == SRV_CHAT)) {
            s->r.finish = NULL;
            rc = event(s, srv_api_chunk_json(&s->r, !s->role_sent, text, n, NULL));
            s->role_sent = 1;
            s->have += n;
        }
        free(text);
        if (rc) return fail_stream(s);
        if (v.state == SRV_DONE) {
            if (v.finish == SRV_FINISH_ERROR) {
                srv_api_error e;
                job_error(&v, &e);
                rc = event(s, srv_api_error_json(&e));
            } else {
                if (s->tools) rc = tool_events(s, NULL, 0, 1);
                s->r.finish = finish_name(v.finish);
                if (s->calls_sent && v.finish == SRV_FINISH_STOP) s->r.finish = "tool_calls";
                if (!rc) rc = event(s, srv_api_chunk_json(&s->r, 0, "", 0, NULL));
                srv_api_usage u = usage_of(&v);
                if (!rc && s->include_usage) rc = event(s, srv_api_chunk_json(&s->r, 0, NULL, 0, &u));
            }
            return rc ? fail_stream(s) : end_stream(s);
        }
        if (s->out_len) return 0;
        if (srv_http_peer_gone(s->c)) return -1;
    }
}

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    if (s->out_at == s->out_len) {
        s->out_at = s->out_len = 0;
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (next_events(s)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->out_len - s->out_at < max ? s->out_len - s->out_at : max;
    memcpy(buf, s->out + s->out_at, n);
    s->out_at += n;
    return (ssize_t)n;
}

/* libmicrohttpd is done with the stream: ended, or the client gone. */
static void free_stream(void *cls) {
    stream *s = cls;
    srv_sched_release(s->app->sched, s->j);
    srv_http_busy(s->h, -1);
    clinfer_tools_free(s->tools);
    free(s->acc);
    free(s->out);
    free(s);
}

static enum MHD_Result answer_stream(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *j,
                                     const srv_api_resp *r, int include_usage, clinfer_tools *tools) {
    stream *s = calloc(1, sizeof *s);
    struct MHD_Response *resp = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, s, free_stream)
                                  : NULL;
    if (!resp) {
        free(s);
        clinfer_tools_free(tools);
        srv_sched_release(app->sched, j);
        srv_http_busy(h, -1);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, 500, "application/json", NULL);
    }
    *s = (stream){.h = h, .app = app, .c = c, .j = j, .r = *r, .include_usage = include_usage, .tools = tools,
                  .call_base = call_base()};
    snprintf(s->id, sizeof s->id, "%s", r->id);
    s->r.id = s->id;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp); /* free_stream runs when libmicrohttpd lets go */
    return rc;
}

/* ---- the endpoint --------------------------------------------------------- */

enum MHD_Result srv_completion(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_kind kind, const char *body,
                               size_t len) {
    srv_api_req q;
    srv_api_error e;
    int32_t *ids = NULL;
    int n = 0;
    srv_job *j = NULL;
    clinfer_tools *tools = NULL;
    clinfer_grammar *grammar = NULL;
    if (srv_api_parse(body ? body : "", len, kind, &q, &e) == 0) {
        if (q.model && strcmp(q.model, app->model_id) && !(app->model_alias && !strcmp(q.model, app->model_alias)))
            srv_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                              "the model '%.200s' does not exist (this server has '%.200s')", q.model, app->model_id);
        else if (tool_setup(app, &q, &tools, &grammar, &e) == 0 &&
                 prompt_tokens(app, &q, q.tool_choice == CLINFER_TOOL_NONE ? NULL : tools, &ids, &n, &e) == 0) {
            srv_job_params p = {.max_tokens = q.max_tokens, .sp = q.sp, .n_stop = q.n_stop, .grammar = grammar};
            if (!p.max_tokens && kind == SRV_COMPLETION) p.max_tokens = 16; /* OpenAI's default there */
            if (!q.has_seed && getrandom(&p.sp.seed, sizeof p.sp.seed, 0) != sizeof p.sp.seed)
                p.sp.seed = (uint64_t)time(NULL) ^ next_id();
            for (int i = 0; i < q.n_stop; i++) p.stop[i] = q.stop[i];
            if (srv_job_create(ids, n, &p, &j) != CLINFER_OK)
                srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            else grammar = NULL; /* the job's */
        }
    }
    free(ids);
    clinfer_grammar_free(grammar);
    int stream_it = q.stream, include_usage = q.include_usage;
    if (q.tool_choice == CLINFER_TOOL_NONE) { /* offered none: the reply is text */
        clinfer_tools_free(tools);
        tools = NULL;
    }
    srv_api_req_free(&q);
    if (!j) {
        clinfer_tools_free(tools);
        return srv_http_send_error(c, &e);
    }
    switch (srv_sched_submit(app->sched, j)) {
    case SRV_SUBMIT_FULL:
        clinfer_tools_free(tools);
        srv_sched_release(app->sched, j);
        srv_api_error_set(&e, 503, "server_error", "queue_full", NULL, "all %d slots are busy and the queue is full",
                          app->n_slots);
        return srv_http_send_error(c, &e);
    case SRV_SUBMIT_CLOSED:
        clinfer_tools_free(tools);
        srv_sched_release(app->sched, j);
        srv_api_error_set(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        return srv_http_send_error(c, &e);
    case SRV_SUBMIT_OK: break;
    }
    srv_http_busy(h, 1);
    char id[48];
    snprintf(id, sizeof id, "%s-%llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl", next_id());
    srv_api_resp r = {.kind = kind, .id = id, .model = app->model_id, .created = (long long)time(NULL)};
    return stream_it ? answer_stream(h, app, c, j, &r, include_usage, tools) : answer_whole(h, app, c, j, &r, tools);
}

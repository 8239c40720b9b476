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

/* The prompt's tokens; -1 with a 400 when they cannot be made or do not fit. */
static int prompt_tokens(const srv_app *app, const srv_api_req *q, int32_t **ids, int *n, srv_api_error *e) {
    clinfer_status st;
    *ids = NULL;
    *n = 0;
    if (q->kind == SRV_CHAT) {
        clinfer_chat_message *msgs = malloc((size_t)q->n_msgs * sizeof *msgs);
        if (!msgs) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        else {
            for (int i = 0; i < q->n_msgs; i++) msgs[i] = (clinfer_chat_message){q->msgs[i].role, q->msgs[i].content};
            st = clinfer_chat_tokenize(app->m, msgs, q->n_msgs, 1, ids, n); /* messages are text */
        }
        free(msgs);
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

static enum MHD_Result answer_whole(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *j,
                                    srv_api_resp *r) {
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
        rc = srv_http_send(c, MHD_HTTP_OK, "application/json", srv_api_completion_json(r, all, have, &u));
    }
    free(all);
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

/* The next events: new text, or the end (finish reason, usage, [DONE]). 0
 * when there are some, -1 when the stream must end in error. */
static int next_events(stream *s) {
    for (;;) {
        srv_job_view v;
        char *text;
        size_t n;
        srv_sched_wait(s->app->sched, s->j, s->have, WAIT_MS, &v, &text, &n);
        int rc = 0;
        if (n || (!s->role_sent && s->r.kind == SRV_CHAT)) {
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
                s->r.finish = finish_name(v.finish);
                rc = event(s, srv_api_chunk_json(&s->r, 0, "", 0, NULL));
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
    free(s->out);
    free(s);
}

static enum MHD_Result answer_stream(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job *j,
                                     const srv_api_resp *r, int include_usage) {
    stream *s = calloc(1, sizeof *s);
    struct MHD_Response *resp = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, s, free_stream)
                                  : NULL;
    if (!resp) {
        free(s);
        srv_sched_release(app->sched, j);
        srv_http_busy(h, -1);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, 500, "application/json", NULL);
    }
    *s = (stream){.h = h, .app = app, .c = c, .j = j, .r = *r, .include_usage = include_usage};
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
    /* any model id is answered by the loaded model (as llama-server does: clients name one regardless) */
    if (srv_api_parse(body ? body : "", len, kind, &q, &e) == 0) {
        if (prompt_tokens(app, &q, &ids, &n, &e) == 0) {
            srv_job_params p = {.max_tokens = q.max_tokens, .sp = q.sp, .n_stop = q.n_stop};
            if (!p.max_tokens && kind == SRV_COMPLETION) p.max_tokens = 16; /* OpenAI's default there */
            if (!q.has_seed && getrandom(&p.sp.seed, sizeof p.sp.seed, 0) != sizeof p.sp.seed)
                p.sp.seed = (uint64_t)time(NULL) ^ next_id();
            for (int i = 0; i < q.n_stop; i++) p.stop[i] = q.stop[i];
            if (srv_job_create(ids, n, &p, &j) != CLINFER_OK)
                srv_api_error_set(&e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        }
    }
    free(ids);
    int stream_it = q.stream, include_usage = q.include_usage;
    srv_api_req_free(&q);
    if (!j) return srv_http_send_error(c, &e);
    switch (srv_sched_submit(app->sched, j)) {
    case SRV_SUBMIT_FULL:
        srv_sched_release(app->sched, j);
        srv_api_error_set(&e, 503, "server_error", "queue_full", NULL, "all %d slots are busy and the queue is full",
                          app->n_slots);
        return srv_http_send_error(c, &e);
    case SRV_SUBMIT_CLOSED:
        srv_sched_release(app->sched, j);
        srv_api_error_set(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        return srv_http_send_error(c, &e);
    case SRV_SUBMIT_OK: break;
    }
    srv_http_busy(h, 1);
    char id[48];
    snprintf(id, sizeof id, "%s-%llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl", next_id());
    srv_api_resp r = {.kind = kind, .id = id, .model = app->model_id, .created = (long long)time(NULL)};
    return stream_it ? answer_stream(h, app, c, j, &r, include_usage) : answer_whole(h, app, c, j, &r);
}

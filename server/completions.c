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

#include <jansson.h>

#include "http.h"
#include "adapters.h"
#include "buf.h"
#include "reasoning.h"

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
        st = clinfer_tools_chat_tokenize_kw(app->m, tools, msgs, q->n_msgs, 1, q->template_kwargs, ids,
                                            n); /* messages are text */
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

/* How long a request waits for its grammar: until --request-timeout
 * from when its body was complete, or until its client leaves. */
typedef struct grammar_wait {
    srv_gcache_wait w;
    int timeout_s;
} grammar_wait;

static int client_gone(void *c) { return srv_http_probe_gone(c); }

/* A grammar from the server's cache, compiled there on its own thread
 * (never on this one: a hostile schema holds one core at most, and only
 * until this request's deadline here). 0, or -1 with *e set: a 400 naming
 * `param` for a source that does not compile (`prefix` before the
 * compiler's message) or whose compilation ran for half the timeout and
 * past the deadline, a 503 when others' compilations held it up (its own
 * began late or never), e->http 0 when the client left (nobody
 * to answer). */
static int get_grammar(const srv_app *app, const grammar_wait *gw, srv_gsource kind, const char *src, size_t len,
                       const char *param, const char *prefix, clinfer_grammar **grammar, srv_api_error *e) {
    clinfer_status st;
    switch (srv_gcache_get(app->grammars, kind, src, len, &gw->w, grammar, &st)) {
    case SRV_GCACHE_OK: return 0;
    case SRV_GCACHE_FAILED:
        if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        else srv_api_bad(e, param, "%s%s", prefix, clinfer_last_error());
        break;
    case SRV_GCACHE_TIMEOUT:
        srv_api_error_set(e, 400, "invalid_request_error", "grammar_timeout", param,
                          "%sits grammar did not compile within %d s (--request-timeout): too costly a structure",
                          prefix, gw->timeout_s);
        break;
    case SRV_GCACHE_BUSY:
        srv_api_error_set(e, 503, "server_error", "grammar_busy", param,
                          "%sother requests' grammars compiled before its own, which did not compile by this "
                          "request's deadline (%d s, --request-timeout)", prefix, gw->timeout_s);
        break;
    case SRV_GCACHE_GONE: e->http = 0; break;
    }
    return -1;
}

/* tools: the model's tool format (a 400 naming the chat format where it has
 * none) and, unless tool_choice is none, the reply's grammar. */
static int tool_setup(const srv_app *app, const srv_api_req *q, const grammar_wait *gw, clinfer_tools **tools,
                      clinfer_grammar **grammar, srv_api_error *e) {
    *tools = NULL;
    *grammar = NULL;
    if (!q->tools) return 0;
    clinfer_status st = clinfer_tools_create(app->m, q->tools, strlen(q->tools), tools);
    if (st != CLINFER_OK) {
        if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        else srv_api_bad(e, "tools", "%s", clinfer_last_error());
        return -1;
    }
    if (q->tool_choice == CLINFER_TOOL_NONE) return 0;
    size_t len;
    char *key = srv_gcache_tools_key(q->tools, q->tool_choice, q->tool_name, q->parallel_tool_calls, &len);
    int rc = key ? get_grammar(app, gw, SRV_GSRC_TOOLS, key, len,
                               q->tool_choice == CLINFER_TOOL_NAMED ? "tool_choice" : "tools", "", grammar, e)
                 : (srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory"), -1);
    free(key);
    if (rc == 0) return 0;
    clinfer_tools_free(*tools);
    *tools = NULL;
    return -1;
}

/* Structured output: the reply's grammar (*grammar a reference of the
 * caller's; NULL for text), from the server's cache, keyed by the schema
 * or the GBNF as given (a schema is converted to GBNF once). -1 with a
 * 400 naming the field: a keyword the converter cannot enforce (its
 * message names it), a malformed grammar (line:column), a language no
 * token can start; or as get_grammar says. */
static int format_setup(const srv_app *app, const srv_api_req *q, const grammar_wait *gw, clinfer_grammar **grammar,
                        srv_api_error *e) {
    static const char ANY_OBJECT[] = "{\"type\": \"object\"}";
    *grammar = NULL;
    if (q->format == SRV_FORMAT_TEXT) return 0;
    const char *text = q->format == SRV_FORMAT_JSON_OBJECT ? ANY_OBJECT : q->format_text;
    char prefix[40];
    snprintf(prefix, sizeof prefix, "'%s': ", q->format_param);
    return get_grammar(app, gw, q->format == SRV_FORMAT_GRAMMAR ? SRV_GSRC_GBNF : SRV_GSRC_SCHEMA, text, strlen(text),
                       q->format_param, prefix, grammar, e);
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

/* The usage of a request's choices: the prompt once (it is evaluated
 * once), the generated tokens of them all. */
static srv_api_usage usage_of(const srv_job_view *v, int n) {
    srv_api_usage u = {v[0].n_prompt, 0, v[0].n_cached, v[0].prompt_ms, 0, v[0].queue_ms};
    for (int i = 0; i < n; i++) {
        u.completion_tokens += v[i].n_gen;
        if (v[i].gen_ms > u.gen_ms) u.gen_ms = v[i].gen_ms;
    }
    return u;
}

/* Tokens' logprobs as the answer's JSON writer takes them: their bytes
 * from the vocabulary (*out malloc'd; NULL when n is 0). -1: out of memory. */
static int logprob_items(const srv_app *app, const srv_token_lp *t, int n, srv_api_logprob **out) {
    *out = NULL;
    if (n <= 0) return 0;
    if (!(*out = malloc((size_t)n * sizeof **out))) return -1;
    for (int i = 0; i < n; i++) {
        srv_api_logprob *o = &(*out)[i];
        o->tok.piece = clinfer_token_piece(app->m, t[i].token, &o->tok.len);
        o->tok.logprob = t[i].logprob;
        o->offset = t[i].start;
        o->n_top = t[i].n_top;
        for (int k = 0; k < t[i].n_top; k++) {
            o->top[k].piece = clinfer_token_piece(app->m, t[i].top_ids[k], &o->top[k].len);
            o->top[k].logprob = t[i].top_lp[k];
        }
    }
    return 0;
}

/* The error a job that failed answers with. */
static void job_error(const srv_job_view *v, srv_api_error *e) {
    if (v->shutdown) srv_api_error_set(e, 503, "server_error", "shutting_down", NULL, "%s", v->error);
    else srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", v->error);
}

/* ---- stream: false -------------------------------------------------------- */

static void release_jobs(srv_sched *s, srv_job **jobs, int n) {
    for (int i = 0; i < n; i++) srv_sched_release(s, jobs[i]);
}

/* Choice i's text and view, its logprobs when asked for: 0, or -1 when
 * the client went away or memory ran out. */
typedef struct whole {
    srv_buf text; /* the reply so far (with reasoning apart: the answer, once split) */
    srv_buf reasoning; /* the reasoning apart (think_split) */
    int f_text;        /* the splitter's f_text (functionary v3.2's "all\n" taken out: text first), for the tool parser */
    srv_job_view v;
    srv_api_logprob *lp;
    int n_lp;
} whole;

static int collect(srv_app *app, struct MHD_Connection *c, srv_job *j, int logprobs, whole *w) {
    char *piece;
    size_t n;
    for (;;) {
        srv_sched_wait(app->sched, j, w->text.n, WAIT_MS, &w->v, &piece, &n);
        if (n && srv_buf_add(&w->text, piece, n)) {
            free(piece);
            return -1;
        }
        free(piece);
        if (w->v.state == SRV_DONE) break;
        /* nothing of the answer is sent yet: a client that closed while its
         * job waits in the queue (or runs) is found out now, and its job
         * dropped, rather than when the whole answer is written */
        if (srv_http_probe_gone(c)) return -1;
    }
    if (!logprobs || w->v.finish == SRV_FINISH_ERROR) return 0;
    srv_token_lp *t;
    w->n_lp = srv_sched_logprobs(app->sched, j, 0, w->text.n, 1, &t);
    int rc = w->n_lp < 0 ? -1 : logprob_items(app, t, w->n_lp, &w->lp);
    free(t);
    return rc;
}

/* A choice of a whole answer with tools: its text parsed into content and
 * calls (ids unique to the choice's calls), finish_reason tool_calls where
 * it called one. -1: out of memory. */
typedef struct whole_calls {
    clinfer_tool_reply *rep;
    srv_api_call *calls;
    char (*ids)[40];
} whole_calls;

static int choice_calls(const clinfer_tools *tools, const whole *w, srv_api_choice *ch, whole_calls *wc) {
    if (srv_think_tools_parse(w->f_text, tools, w->text.p ? w->text.p : "", w->text.n, 1, &wc->rep) != CLINFER_OK)
        return -1;
    int k = wc->rep->n_calls;
    wc->calls = calloc((size_t)k + 1, sizeof *wc->calls);
    wc->ids = calloc((size_t)k + 1, sizeof *wc->ids);
    if (!wc->calls || !wc->ids) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory"), -1;
    unsigned long long base = call_base();
    for (int i = 0; i < k; i++) {
        call_id(wc->ids[i], sizeof wc->ids[i], base, i);
        wc->calls[i] = (srv_api_call){wc->ids[i], wc->rep->calls[i].name, wc->rep->calls[i].arguments};
    }
    ch->len = wc->rep->content_len;
    ch->calls = wc->calls;
    ch->n_calls = k;
    if (k && ch->finish && !strcmp(ch->finish, "stop")) ch->finish = "tool_calls";
    return 0;
}

/* A whole reply's reasoning apart: w->text becomes the answer, w->reasoning
 * the thought (syntax off: unchanged). -1: out of memory. */
static int think_split(whole *w, int syntax, int open) {
    if (syntax == SRV_THINK_OFF) return 0;
    srv_think t;
    srv_buf content = {0};
    srv_think_init(&t, (srv_think_syntax)syntax, open);
    int rc = srv_think_feed(&t, w->text.p, w->text.n, 1, &w->reasoning, &content);
    w->f_text = t.f_text;
    srv_think_free(&t);
    if (rc) return srv_buf_free(&content), clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory"), -1;
    srv_buf_free(&w->text);
    w->text = content;
    return 0;
}

static enum MHD_Result answer_whole(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job **jobs, int n,
                                    srv_api_resp *r, int logprobs, clinfer_tools *tools, int syntax, int open) {
    whole *w = calloc((size_t)n, sizeof *w);
    srv_api_choice *ch = calloc((size_t)n, sizeof *ch);
    srv_job_view *views = calloc((size_t)n, sizeof *views);
    whole_calls *wc = calloc((size_t)n, sizeof *wc);
    int ok = w && ch && views && wc, failed = -1;
    for (int i = 0; ok && i < n; i++) {
        ok = collect(app, c, jobs[i], logprobs, &w[i]) == 0 && think_split(&w[i], syntax, open) == 0;
        if (ok && failed < 0 && w[i].v.finish == SRV_FINISH_ERROR) failed = i;
    }
    release_jobs(app->sched, jobs, n);
    srv_http_busy(h, -1);
    enum MHD_Result rc = MHD_NO; /* the client went away (or no memory): nobody to answer */
    if (ok && failed >= 0) {
        srv_api_error e;
        job_error(&w[failed].v, &e);
        rc = srv_http_send_error(c, &e);
    } else if (ok) {
        for (int i = 0; i < n; i++) {
            ch[i] = (srv_api_choice){.index = i, .text = w[i].text.p, .len = w[i].text.n,
                                     .finish = finish_name(w[i].v.finish), .logprobs = logprobs, .lp = w[i].lp,
                                     .n_lp = w[i].n_lp, .reasoning = w[i].reasoning.p, .reasoning_len = w[i].reasoning.n};
            views[i] = w[i].v;
        }
        int parsed = 1;
        for (int i = 0; tools && parsed && i < n; i++) parsed = choice_calls(tools, &w[i], &ch[i], &wc[i]) == 0;
        srv_api_usage u = usage_of(views, n);
        rc = srv_http_send(c, MHD_HTTP_OK, "application/json", parsed ? srv_api_choices_json(r, ch, n, &u) : NULL);
    }
    for (int i = 0; w && i < n; i++) srv_buf_free(&w[i].text), srv_buf_free(&w[i].reasoning), free(w[i].lp);
    for (int i = 0; wc && i < n; i++) clinfer_tool_reply_free(wc[i].rep), free(wc[i].calls), free(wc[i].ids);
    free(wc);
    clinfer_tools_free(tools);
    free(w);
    free(ch);
    free(views);
    return rc;
}

/* ---- stream: true --------------------------------------------------------- */

/* A choice's reply so far under tools, parsed at each piece into content
 * and calls: what of them was sent. */
typedef struct tool_stream {
    srv_buf acc; /* the reply so far */
    size_t content_sent;
    int calls_sent;
    size_t args_sent[32]; /* per call (a reply holds at most 16) */
    unsigned long long call_base;
} tool_stream;

/* A stream's choices: chunks of each as its text becomes final, each
 * token's logprobs in the chunk that completes its text (text held back
 * while it may begin a stop string holds its tokens back too). */
typedef struct stream {
    srv_http *h;
    srv_app *app;
    struct MHD_Connection *c;
    srv_api_resp r;
    char id[48];
    int include_usage, logprobs, ended;
    int n, n_done;
    srv_job **jobs;
    size_t *have;     /* text bytes sent, a choice */
    int *n_lp;        /* tokens' logprobs sent */
    int *role_sent;
    int *done;
    srv_job_view *views; /* of the choices that ended */
    srv_buf out;   /* events not yet handed to libmicrohttpd, from out_at */
    size_t out_at;
    clinfer_tools *tools; /* NULL: plain text */
    tool_stream *ts;      /* with tools: a choice's */
    srv_think *think;     /* a choice's reasoning splitter (each SRV_THINK_OFF: none) */
} stream;

/* Appends `data: JSON\n\n` (JSON consumed). */
static int event(stream *s, char *json) {
    if (!json) return -1;
    int rc = srv_buf_printf(&s->out, "data: %s\n\n", json);
    free(json);
    return rc;
}

/* The stream's end: [DONE]. */
static int end_stream(stream *s) {
    static const char DONE[] = "data: [DONE]\n\n";
    if (srv_buf_add(&s->out, DONE, sizeof DONE - 1)) return -1;
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

/* The events choice i's reply so far adds under tools: content that
 * cannot begin a call, each call's first delta (id, name) once its name is
 * whole, then its arguments as they grow. The tokens' logprobs (content
 * and calls alike) go with the content chunk, or with a chunk of their own
 * (empty content) when there is none. */
static int tool_events(stream *s, int i, const char *text, size_t n, int final, const srv_api_logprob *lp, int n_lp) {
    tool_stream *t = &s->ts[i];
    if (n && srv_buf_add(&t->acc, text, n)) return -1;
    clinfer_tool_reply *rep;
    if (srv_think_tools_parse(s->think[i].f_text, s->tools, t->acc.p ? t->acc.p : "", t->acc.n, final, &rep) !=
        CLINFER_OK)
        return -1;
    int rc = 0;
    if (rep->content_len > t->content_sent || n_lp) {
        size_t k = rep->content_len > t->content_sent ? rep->content_len - t->content_sent : 0;
        srv_api_choice ch = {.index = i, .text = t->acc.p + t->content_sent, .len = k, .logprobs = s->logprobs,
                             .lp = lp, .n_lp = n_lp};
        rc = event(s, srv_api_choice_chunk_json(&s->r, 0, &ch));
        t->content_sent += k;
    }
    for (int c = 0; !rc && c < rep->n_calls && c < 32; c++) {
        const char *args = rep->calls[c].arguments ? rep->calls[c].arguments : "";
        size_t k = strlen(args);
        if (c >= t->calls_sent) {
            char id[40];
            call_id(id, sizeof id, t->call_base, c);
            rc = event(s, srv_api_tool_chunk_json(&s->r, i, c, id, rep->calls[c].name, args, k));
            t->calls_sent = c + 1;
        } else if (k > t->args_sent[c]) {
            rc = event(s, srv_api_tool_chunk_json(&s->r, i, c, NULL, NULL, args + t->args_sent[c], k - t->args_sent[c]));
        }
        t->args_sent[c] = k;
    }
    clinfer_tool_reply_free(rep);
    return rc;
}

/* Choice i's new text and logprobs as a chunk, and its end: 0, 1 when the
 * stream ended (a failed job), -1 when a chunk could not be made. */
static int choice_events(stream *s, int i) {
    srv_job_view v;
    char *text;
    size_t n;
    srv_sched_wait(s->app->sched, s->jobs[i], s->have[i], 0, &v, &text, &n);
    srv_token_lp *t = NULL;
    srv_api_logprob *lp = NULL;
    int n_lp = 0, rc = 0;
    /* the reasoning apart: its delta first as a chunk of its own, then the answer's text goes on as text */
    const size_t got = n;
    srv_buf rd = {0}, cd = {0};
    if (s->think[i].syntax != SRV_THINK_OFF) {
        rc = srv_think_feed(&s->think[i], text, n, v.state == SRV_DONE, &rd, &cd);
        if (!rc && rd.n) {
            srv_api_choice ch = {.index = i, .text = "", .reasoning = rd.p, .reasoning_len = rd.n};
            rc = event(s, srv_api_choice_chunk_json(&s->r, !s->role_sent[i], &ch));
            s->role_sent[i] = 1;
        }
        free(text);
        text = cd.p; /* the answer's part of the piece (cd's bytes, freed below) */
        n = cd.n;
        cd = (srv_buf){0};
    }
    if (!rc && s->logprobs) { /* the tokens whose text this chunk completes */
        n_lp = srv_sched_logprobs(s->app->sched, s->jobs[i], s->n_lp[i], s->have[i] + got, v.state == SRV_DONE, &t);
        rc = n_lp < 0 || logprob_items(s->app, t, n_lp, &lp) ? -1 : 0;
    }
    if (!rc && s->tools) { /* a chat: the role first, then what the reply parses into */
        srv_api_choice role = {.index = i, .text = ""};
        if (!s->role_sent[i]) rc = event(s, srv_api_choice_chunk_json(&s->r, 1, &role));
        s->role_sent[i] = 1;
        if (!rc && (n || n_lp)) rc = tool_events(s, i, text, n, 0, lp, n_lp);
        s->have[i] += got;
        s->n_lp[i] += n_lp;
    } else if (!rc && (n || n_lp || (!s->role_sent[i] && s->r.kind == SRV_CHAT))) {
        srv_api_choice ch = {.index = i, .text = text, .len = n, .logprobs = s->logprobs, .lp = lp, .n_lp = n_lp};
        rc = event(s, srv_api_choice_chunk_json(&s->r, !s->role_sent[i], &ch));
        s->role_sent[i] = 1;
        s->have[i] += got;
        s->n_lp[i] += n_lp;
    } else {
        s->have[i] += got; /* all of it reasoning, sent above */
    }
    free(text);
    srv_buf_free(&rd);
    free(t);
    free(lp);
    if (rc || v.state != SRV_DONE) return rc;
    s->done[i] = 1;
    s->n_done++;
    s->views[i] = v;
    if (v.finish == SRV_FINISH_ERROR) { /* one choice failed: the stream ends */
        srv_api_error e;
        job_error(&v, &e);
        return event(s, srv_api_error_json(&e)) || end_stream(s) ? -1 : 1;
    }
    srv_api_choice ch = {.index = i, .text = "", .finish = finish_name(v.finish), .logprobs = 0};
    if (s->tools) {
        if (tool_events(s, i, NULL, 0, 1, NULL, 0)) return -1;
        if (s->ts[i].calls_sent && v.finish == SRV_FINISH_STOP) ch.finish = "tool_calls";
    }
    return event(s, srv_api_choice_chunk_json(&s->r, 0, &ch));
}

/* The next events: new text, or the end (finish reasons, usage, [DONE]). 0
 * when there are some, -1 when the stream must end in error. */
static int next_events(stream *s) {
    for (;;) {
        srv_sched_wait_any(s->app->sched, s->jobs, s->n, s->have, s->done, WAIT_MS);
        for (int i = 0; i < s->n; i++) {
            if (s->done[i]) continue;
            int rc = choice_events(s, i);
            if (rc > 0) return 0;
            if (rc < 0) return fail_stream(s);
        }
        if (s->n_done == s->n) {
            srv_api_usage u = usage_of(s->views, s->n);
            if (s->include_usage && event(s, srv_api_chunk_json(&s->r, 0, NULL, 0, &u))) return fail_stream(s);
            return end_stream(s);
        }
        if (s->out.n) return 0;
        if (srv_http_peer_gone(s->c)) return -1;
    }
}

static int more_events(void *s) { return next_events(s); }

static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    return srv_http_stream_read(&s->out, &s->out_at, &s->ended, more_events, s, buf, max);
}

static void stream_free(stream *s) {
    if (!s) return;
    free(s->jobs);
    free(s->have);
    free(s->n_lp);
    free(s->role_sent);
    free(s->done);
    free(s->views);
    srv_buf_free(&s->out);
    for (int i = 0; s->ts && i < s->n; i++) srv_buf_free(&s->ts[i].acc);
    free(s->ts);
    for (int i = 0; s->think && i < s->n; i++) srv_think_free(&s->think[i]);
    free(s->think);
    clinfer_tools_free(s->tools);
    free(s);
}

/* libmicrohttpd is done with the stream: ended, or the client gone. */
static void free_stream(void *cls) {
    stream *s = cls;
    release_jobs(s->app->sched, s->jobs, s->n);
    srv_http_busy(s->h, -1);
    stream_free(s);
}

static enum MHD_Result answer_stream(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_job **jobs, int n,
                                     const srv_api_resp *r, int include_usage, int logprobs, clinfer_tools *tools,
                                     int syntax, int open) {
    stream *s = calloc(1, sizeof *s);
    if (s) {
        *s = (stream){.h = h, .app = app, .c = c, .r = *r, .include_usage = include_usage, .logprobs = logprobs, .n = n,
                      .tools = tools};
        tools = NULL; /* the stream's */
        if (s->tools && (s->ts = calloc((size_t)n, sizeof *s->ts)))
            for (int i = 0; i < n; i++) s->ts[i].call_base = call_base();
        s->jobs = malloc((size_t)n * sizeof *s->jobs);
        s->have = calloc((size_t)n, sizeof *s->have);
        s->n_lp = calloc((size_t)n, sizeof *s->n_lp);
        s->role_sent = calloc((size_t)n, sizeof *s->role_sent);
        s->done = calloc((size_t)n, sizeof *s->done);
        s->views = calloc((size_t)n, sizeof *s->views);
        if ((s->think = calloc((size_t)(n > 0 ? n : 1), sizeof *s->think)))
            for (int i = 0; i < n; i++) srv_think_init(&s->think[i], (srv_think_syntax)syntax, open);
    }
    struct MHD_Response *resp = s && s->jobs && s->have && s->n_lp && s->role_sent && s->done && s->views && s->think &&
                                        (!s->tools || s->ts)
                                    ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_stream, s, free_stream)
                                    : NULL;
    if (!resp) {
        stream_free(s);
        clinfer_tools_free(tools);
        release_jobs(app->sched, jobs, n);
        srv_http_busy(h, -1);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, 500, "application/json", NULL);
    }
    memcpy(s->jobs, jobs, (size_t)n * sizeof *jobs);
    snprintf(s->id, sizeof s->id, "%s", r->id);
    s->r.id = s->id;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp); /* free_stream runs when libmicrohttpd lets go */
    return rc;
}

/* ---- the endpoint --------------------------------------------------------- */

/* The fields checked against this server: n against its slots, logit_bias
 * against the vocabulary. -1 with a 400. */
static int check_request(const srv_app *app, const srv_api_req *q, srv_api_error *e) {
    if (q->n > app->n_slots) {
        srv_api_bad(e, "n", "'n' is %d, more than this server's %d slots (--parallel): a choice takes a slot", q->n,
                    app->n_slots);
        return -1;
    }
    const int n_vocab = clinfer_model_n_vocab(app->m);
    int banned = 0;
    for (int i = 0; i < q->n_bias; i++) {
        if (q->bias_ids[i] >= n_vocab) {
            srv_api_bad(e, "logit_bias", "'logit_bias' token %d is not in the vocabulary (%d tokens)",
                        (int)q->bias_ids[i], n_vocab);
            return -1;
        }
        banned += q->bias[i] <= -100;
    }
    /* every token banned: nothing could be sampled, and the job would fail
     * after its prompt was evaluated. Counted over distinct ids ("7" and
     * "07" are one token) only when the bans could cover the vocabulary. */
    if (banned >= n_vocab) {
        unsigned char *seen = calloc((size_t)n_vocab, 1);
        if (!seen) {
            srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
            return -1;
        }
        banned = 0;
        for (int i = 0; i < q->n_bias; i++)
            if (q->bias[i] <= -100 && !seen[q->bias_ids[i]]) seen[q->bias_ids[i]] = 1, banned++;
        free(seen);
        if (banned == n_vocab) {
            srv_api_bad(e, "logit_bias", "'logit_bias' bans every token of the vocabulary (%d): nothing could be "
                                         "sampled", n_vocab);
            return -1;
        }
    }
    return 0;
}

/* The KV cache holds what the request may take (its prompt, max_tokens
 * and the n choices' copies): else a 400 before any work, as OpenAI's
 * context_length_exceeded, rather than an answer cut short at the full
 * cache. Without max_tokens, the answer is bounded by what the cache
 * holds (q->max_tokens set) where that is less than the context. given:
 * the client's max_tokens, 0 when it gave none (q->max_tokens may hold
 * /v1/completions' default then): the refusal names max_tokens only when
 * the client gave it, else the prompt. */
static int check_kv(const srv_app *app, srv_api_req *q, int n_prompt, int given, srv_api_error *e) {
    int need, have;
    if (srv_sched_fits(app->sched, n_prompt, q->n, &q->max_tokens, &need, &have) == 0) return 0;
    const char *param = given ? "max_tokens" : q->kind == SRV_CHAT ? "messages" : "prompt";
    char asked[48] = "";
    if (given) snprintf(asked, sizeof asked, " and max_tokens %d", given);
    else if (q->max_tokens) snprintf(asked, sizeof asked, " and the default max_tokens %d", q->max_tokens);
    srv_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", param,
                      "the prompt of %d tokens%s, for %d choice%s, may take %d KV cache blocks, more than the whole "
                      "cache holds (%d blocks, --kv-memory)", n_prompt, asked, q->n, q->n > 1 ? "s" : "", need, have);
    return -1;
}

/* The request's n jobs under `grammar` (may be NULL; choice i's seed: seed + i when a seed is given,
 * else drawn): how many were made (n, or 0 with *e set). */
static int make_jobs(const srv_api_req *q, const int32_t *ids, int n_ids, clinfer_grammar *grammar, srv_job **jobs,
                     srv_api_error *e) {
    srv_job_params p = {.max_tokens = q->max_tokens, .sp = q->sp, .n_stop = q->n_stop, .logprobs = q->logprobs,
                        .top_logprobs = q->top_logprobs, .bias_ids = q->bias_ids, .bias = q->bias,
                        .n_bias = q->n_bias, .grammar = grammar, /* each job takes its own reference */
                        .think_open = q->think_syntax == SRV_THINK_TAGS && q->think_open,
                        /* Harmony's channels are control tokens, as are most tool formats' markers
                         * ([TOOL_CALLS], <|tool_call|>, DeepSeek's): written as text for the parsers */
                        .special = q->think_syntax == SRV_THINK_HARMONY ||
                                   (q->tools && q->tool_choice != CLINFER_TOOL_NONE),
                        /* N > 0 tokens of thought (0, the template's no thinking, and -1 need none) */
                        .reasoning_budget = q->reasoning_budget > 0 ? q->reasoning_budget : 0,
                        .think_syntax = q->think_syntax};
    for (int i = 0; i < q->n_stop; i++) p.stop[i] = q->stop[i];
    p.n_lora = q->n_lora; /* srv_lora_resolve's */
    memcpy(p.lora, q->lora, sizeof p.lora);
    for (int i = 0; i < q->n; i++) {
        p.sp.seed = q->sp.seed + (uint64_t)i;
        if (!q->has_seed && getrandom(&p.sp.seed, sizeof p.sp.seed, 0) != sizeof p.sp.seed)
            p.sp.seed = (uint64_t)time(NULL) ^ next_id();
        if (srv_job_create(ids, n_ids, &p, &jobs[i]) != CLINFER_OK) {
            srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            release_jobs(NULL, jobs, i);
            return 0;
        }
    }
    return q->n;
}

int srv_request_reasoning(const srv_app *app, srv_api_req *q, srv_api_error *e) {
    if (q->reasoning_format < 0) q->reasoning_format = app->reasoning_format;
    if (!q->has_budget && app->reasoning_budget > 0) q->reasoning_budget = app->reasoning_budget; /* --reasoning-budget N */
    if (q->kind != SRV_CHAT || !(q->has_budget ? q->reasoning_budget == 0 : app->reasoning_off)) return 0;
    /* no thinking: as llama-server, the template's enable_thinking false (Qwen3 closes an empty thought) */
    json_t *kw = q->template_kwargs ? json_loads(q->template_kwargs, 0, NULL) : json_object();
    char *text = NULL;
    if (kw && !json_object_get(kw, "enable_thinking") && !json_object_set_new(kw, "enable_thinking", json_false()))
        text = json_dumps(kw, JSON_COMPACT);
    int said = kw && json_object_get(kw, "enable_thinking") && !text; /* the request's own word stands */
    json_decref(kw);
    if (said) return 0;
    if (!text) {
        srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
        return -1;
    }
    free(q->template_kwargs);
    q->template_kwargs = text;
    return 0;
}

/* How the reply will mark its reasoning (q->think_syntax, q->think_open):
 * read off the rendered prompt's end, its last tokens with their control
 * tokens as text (a generation prompt that opens <think>, or Harmony's
 * "<|start|>assistant"). Off for a completion and under reasoning_format
 * none; a tail that cannot be read is taken as no prompt to go by. */
static int think_of(const srv_app *app, srv_api_req *q, const int32_t *ids, int n) {
    q->think_syntax = SRV_THINK_OFF;
    q->think_open = 0;
    if (q->kind != SRV_CHAT || q->reasoning_format == SRV_REASONING_NONE) return 0;
    enum { TAIL = 8 }; /* tokens: "<think>\n" and "<|start|>assistant" are at most a few */
    clinfer_detokenizer *d;
    srv_buf tail = {0};
    if (clinfer_detokenizer_create(app->m, 1, &d) == CLINFER_OK) {
        for (int i = n > TAIL ? n - TAIL : 0; i < n; i++) {
            const char *p;
            size_t k;
            if (clinfer_detokenizer_push(d, ids[i], &p, &k) == CLINFER_OK && k) srv_buf_add(&tail, p, k);
        }
        clinfer_detokenizer_free(d);
    }
    q->think_syntax = (int)srv_think_detect(tail.p ? tail.p : "", tail.n, &q->think_open);
    srv_buf_free(&tail);
    return 0;
}

int srv_request_submit(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_api_req *q, srv_job **jobs,
                       clinfer_tools **tools_out, srv_api_error *e) {
    int32_t *ids = NULL;
    int n = 0, n_jobs = 0;
    clinfer_tools *tools = NULL;
    clinfer_grammar *grammar = NULL;
    const grammar_wait gw = {{srv_http_deadline(h), client_gone, c, srv_http_request_timeout(h)},
                             srv_http_request_timeout(h)};
    *tools_out = NULL;
    const int max_given = q->max_tokens; /* 0: not given (a refusal names the prompt then) */
    if (!q->max_tokens && q->kind == SRV_COMPLETION) q->max_tokens = 16; /* OpenAI's default there */
    if (check_request(app, q, e) == 0 && srv_request_reasoning(app, q, e) == 0 &&
        tool_setup(app, q, &gw, &tools, &grammar, e) == 0 &&
        prompt_tokens(app, q, q->tool_choice == CLINFER_TOOL_NONE ? NULL : tools, &ids, &n, e) == 0 &&
        check_kv(app, q, n, max_given, e) == 0 && srv_lora_resolve(app->m, q, e) == 0 && think_of(app, q, ids, n) == 0 &&
        (grammar || format_setup(app, q, &gw, &grammar, e) == 0))
        n_jobs = make_jobs(q, ids, n, grammar, jobs, e);
    free(ids);
    clinfer_grammar_free(grammar); /* the jobs hold theirs */
    if (q->tool_choice == CLINFER_TOOL_NONE) { /* offered none: the reply is text */
        clinfer_tools_free(tools);
        tools = NULL;
    }
    if (!n_jobs) {
        clinfer_tools_free(tools);
        return 0;
    }
    switch (srv_sched_submit_group(app->sched, jobs, n_jobs)) {
    case SRV_SUBMIT_FULL:
        srv_api_error_set(e, 503, "server_error", "queue_full", NULL, "all %d slots are busy and the queue is full",
                          app->n_slots);
        break;
    case SRV_SUBMIT_CLOSED:
        srv_api_error_set(e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        break;
    case SRV_SUBMIT_OK:
        srv_http_busy(h, 1);
        *tools_out = tools;
        return n_jobs;
    }
    clinfer_tools_free(tools);
    release_jobs(app->sched, jobs, n_jobs);
    return 0;
}

int srv_request_count(const srv_app *app, const srv_api_req *q, int *n, srv_api_error *e) {
    clinfer_tools *tools = NULL;
    int32_t *ids = NULL;
    *n = 0;
    if (q->tools && q->tool_choice != CLINFER_TOOL_NONE) { /* the tools' text in the prompt, as a request renders it */
        clinfer_status st = clinfer_tools_create(app->m, q->tools, strlen(q->tools), &tools);
        if (st != CLINFER_OK) {
            if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            else srv_api_bad(e, "tools", "%s", clinfer_last_error());
            return -1;
        }
    }
    int rc = prompt_tokens(app, q, tools, &ids, n, e);
    free(ids);
    clinfer_tools_free(tools);
    return rc;
}

enum MHD_Result srv_completion(srv_http *h, srv_app *app, struct MHD_Connection *c, srv_kind kind, const char *body,
                               size_t len) {
    srv_api_req q;
    srv_api_error e;
    int n_jobs = 0;
    srv_job *jobs[SRV_MAX_N];
    clinfer_tools *tools = NULL;
    /* any model id is answered by the loaded model (as llama-server does: clients name one regardless) */
    if (srv_api_parse(body ? body : "", len, kind, &q, &e) == 0) n_jobs = srv_request_submit(h, app, c, &q, jobs, &tools, &e);
    int stream_it = q.stream, include_usage = q.include_usage, logprobs = q.logprobs;
    int syntax = q.think_syntax, open = q.think_open;
    srv_api_req_free(&q);
    if (!n_jobs) return e.http ? srv_http_send_error(c, &e) : MHD_NO; /* 0: the client left */
    char id[48];
    snprintf(id, sizeof id, "%s-%llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl", next_id());
    srv_api_resp r = {.kind = kind, .id = id, .model = app->model_id, .created = (long long)time(NULL)};
    return stream_it ? answer_stream(h, app, c, jobs, n_jobs, &r, include_usage, logprobs, tools, syntax, open)
                     : answer_whole(h, app, c, jobs, n_jobs, &r, logprobs, tools, syntax, open);
}

/* POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages
 * API over the chat path. A request is translated into the Chat
 * Completions body it means (system as the system message; text blocks as
 * content, tool_use blocks as an assistant's tool_calls, tool_result
 * blocks as tool messages; tools' input_schema as chat's parameters;
 * tool_choice any as required; stop_sequences as stop), which
 * srv_api_parse checks and srv_request_submit runs: the same prompt,
 * grammar and job as /v1/chat/completions, so a greedy answer is the
 * chat's. Errors are answered in Anthropic's shape. */
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api_responses.h"
#include "chat_items.h"

static json_t *get(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

static int set(json_t *o, const char *key, json_t *v) { return v ? json_object_set_new(o, key, v) : -1; }

static int oom(srv_api_error *e) {
    srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
    return -1;
}

/* ---- errors --------------------------------------------------------------- */

/* Anthropic's error type for an HTTP status. */
static const char *error_type(int http) {
    switch (http) {
    case 400: case 405: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
    }
}

char *srv_anthropic_error_json(const srv_api_error *e) {
    return srv_api_dump(srv_api_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type", error_type(e->http),
                                     "message", srv_api_text_json(e->message, strlen(e->message))));
}

enum MHD_Result srv_anthropic_error(struct MHD_Connection *c, const srv_api_error *e) {
    return srv_http_send(c, (unsigned)e->http, "application/json", srv_anthropic_error_json(e));
}

/* ---- the request ---------------------------------------------------------- */

/* The field an error names: system, else messages (where is a path in one). */
#define PARAM(where) (strncmp(where, "system", 6) ? "messages" : "system")

/* Text blocks ({"type": "text", "text"}) or a string joined into one
 * string (a new reference); another block is refused, naming it. */
static int blocks_text(json_t *c, const char *where, json_t **out, srv_api_error *e) {
    if (json_is_string(c)) return (*out = json_copy(c)) ? 0 : oom(e);
    if (!json_is_array(c)) {
        srv_api_bad(e, PARAM(where), "%s: must be a string or an array of text blocks", where);
        return -1;
    }
    srv_buf b = {0};
    size_t i;
    json_t *blk;
    json_array_foreach(c, i, blk) {
        const char *type = json_string_value(get(blk, "type"));
        json_t *t = get(blk, "text");
        if (!type || strcmp(type, "text") || !json_is_string(t)) {
            srv_api_bad(e, PARAM(where), "%s.%zu: %s blocks are not supported here (text blocks only)", where, i,
                        type ? type : "untyped");
            srv_buf_free(&b);
            return -1;
        }
        if (srv_buf_add(&b, json_string_value(t), json_string_length(t))) {
            srv_buf_free(&b);
            return oom(e);
        }
    }
    *out = json_stringn(b.p ? b.p : "", b.n);
    srv_buf_free(&b);
    return *out ? 0 : oom(e);
}

/* A tool_result marked is_error: its text says so ("Error: " first), chat's
 * tool messages having no such mark. -1: out of memory (*t unchanged). */
static int mark_error(json_t **t) {
    size_t n = json_string_length(*t);
    char *b = malloc(n + 8);
    if (!b) return -1;
    memcpy(b, "Error: ", 7);
    memcpy(b + 7, json_string_value(*t), n);
    json_t *m = json_stringn(b, n + 7);
    free(b);
    if (!m) return -1;
    json_decref(*t);
    *t = m;
    return 0;
}

/* A message as chat messages: a user's tool_result blocks become tool
 * messages (before its text), an assistant's tool_use blocks its
 * tool_calls; thinking blocks are dropped (no template here takes them
 * back); image, document and other blocks are refused, naming them. */
static int message_to_chat(json_t *m, size_t i, json_t *msgs, srv_api_error *e) {
    const char *role = json_string_value(get(m, "role"));
    json_t *content = get(m, "content");
    char where[64];
    snprintf(where, sizeof where, "messages.%zu.content", i);
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant"))) {
        srv_api_bad(e, "messages", "messages.%zu.role: must be user or assistant", i);
        return -1;
    }
    if (!content) {
        srv_api_bad(e, "messages", "messages.%zu.content: Field required", i);
        return -1;
    }
    const int assistant = !strcmp(role, "assistant");
    if (json_is_string(content))
        return json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", role, "content", content)) ? oom(e) : 0;
    if (!json_is_array(content)) {
        srv_api_bad(e, "messages", "%s: must be a string or an array of content blocks", where);
        return -1;
    }
    srv_buf text = {0};
    json_t *calls = json_array();
    size_t k;
    json_t *blk;
    int rc = calls ? 0 : oom(e), n_results = 0;
    json_array_foreach(content, k, blk) {
        if (rc) break;
        const char *type = json_string_value(get(blk, "type"));
        if (!type) type = "(none)";
        if (!strcmp(type, "text") && json_is_string(get(blk, "text"))) {
            json_t *t = get(blk, "text");
            if (srv_buf_add(&text, json_string_value(t), json_string_length(t))) rc = oom(e);
        } else if (!strcmp(type, "tool_use") && assistant) {
            const char *id = json_string_value(get(blk, "id")), *name = json_string_value(get(blk, "name"));
            json_t *input = get(blk, "input");
            char *args = input && json_is_object(input) ? json_dumps(input, JSON_COMPACT) : NULL;
            if (!id || !name || !args) {
                srv_api_bad(e, "messages", "%s.%zu: a tool_use block needs id, name and input (an object)", where, k);
                rc = -1;
            } else if (json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type",
                                                              "function", "function", "name", name, "arguments",
                                                              args))) {
                rc = oom(e);
            }
            free(args);
        } else if (!strcmp(type, "tool_result") && !assistant) {
            const char *id = json_string_value(get(blk, "tool_use_id"));
            json_t *c = get(blk, "content"), *t = NULL;
            char w[96];
            snprintf(w, sizeof w, "%s.%zu.content", where, k);
            if (!id) {
                srv_api_bad(e, "messages", "%s.%zu.tool_use_id: Field required", where, k);
                rc = -1;
            } else if (!c ? !(t = json_string("")) && oom(e) : blocks_text(c, w, &t, e)) {
                rc = -1;
            } else if (json_is_true(get(blk, "is_error")) && mark_error(&t)) {
                json_decref(t);
                rc = oom(e);
            } else if (json_array_append_new(msgs, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id,
                                                             "content", t))) {
                rc = oom(e);
            }
            n_results++;
        } else if (!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) {
            continue;
        } else {
            srv_api_bad(e, "messages", "%s.%zu: %s content blocks are not supported by this server%s", where, k, type,
                        !strcmp(type, "image") || !strcmp(type, "document") ? " (its models read text only)"
                        : !strcmp(type, "tool_use") || !strcmp(type, "tool_result")
                            ? (assistant ? " in an assistant message" : " in a user message")
                            : "");
            rc = -1;
        }
    }
    /* a user's text after its tool results; an assistant's text with its calls */
    if (!rc && (text.n || json_array_size(calls) || !n_results)) {
        json_t *msg = json_pack("{s:s, s:s%}", "role", role, "content", text.p ? text.p : "", text.n);
        if (!msg || (json_array_size(calls) && json_object_set(msg, "tool_calls", calls)) ||
            json_array_append_new(msgs, msg))
            rc = oom(e);
    }
    srv_buf_free(&text);
    json_decref(calls);
    return rc;
}

/* tools and tool_choice as chat's. */
static int tools_to_chat(json_t *root, json_t *chat, srv_api_error *e) {
    json_t *tools = get(root, "tools"), *choice = get(root, "tool_choice");
    if (tools) {
        json_t *out = json_array();
        if (!json_is_array(tools)) {
            json_decref(out);
            srv_api_bad(e, "tools", "tools: must be an array");
            return -1;
        }
        if (set(chat, "tools", out)) return oom(e);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *type = json_string_value(get(t, "type")), *name = json_string_value(get(t, "name"));
            json_t *schema = get(t, "input_schema"), *desc = get(t, "description");
            if (type && strcmp(type, "custom")) {
                srv_api_bad(e, "tools", "tools.%zu.type: '%.40s' tools are not supported by this server (client "
                                        "tools with input_schema only)", i, type);
                return -1;
            }
            if (!name || !json_is_object(schema)) {
                srv_api_bad(e, "tools", "tools.%zu: name (a string) and input_schema (an object) are required", i);
                return -1;
            }
            /* in chat's order (name, description, parameters): the tools' JSON is rendered into the prompt */
            json_t *f = json_pack("{s:s}", "name", name);
            if (!f || (desc && json_object_set(f, "description", desc)) || json_object_set(f, "parameters", schema))
                return json_decref(f), oom(e);
            if (!f || json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", f)))
                return oom(e);
        }
    }
    if (choice) {
        const char *type = json_string_value(get(choice, "type")), *name = json_string_value(get(choice, "name"));
        json_t *dp = get(choice, "disable_parallel_tool_use"), *c = NULL;
        if (!type) type = "";
        if (!strcmp(type, "auto")) c = json_string("auto");
        else if (!strcmp(type, "any")) c = json_string("required");
        else if (!strcmp(type, "none")) c = json_string("none");
        else if (!strcmp(type, "tool") && name)
            c = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
        else {
            srv_api_bad(e, "tool_choice", "tool_choice: type must be auto, any, none or tool (with a name)");
            return -1;
        }
        if (set(chat, "tool_choice", c)) return oom(e);
        if (dp && (!json_is_boolean(dp) || set(chat, "parallel_tool_calls", json_boolean(!json_is_true(dp))))) {
            srv_api_bad(e, "tool_choice", "tool_choice.disable_parallel_tool_use: must be a boolean");
            return -1;
        }
    }
    return 0;
}

/* Documented fields this server does not offer: a 400 naming the field. */
static int refuse_unsupported(json_t *root, srv_api_error *e) {
    static const char *const ALWAYS[] = {"container", "mcp_servers", "context_management", "diagnostics"};
    for (size_t i = 0; i < sizeof ALWAYS / sizeof *ALWAYS; i++)
        if (get(root, ALWAYS[i])) {
            srv_api_bad(e, ALWAYS[i], "%s: not supported by this server", ALWAYS[i]);
            return -1;
        }
    json_t *v = get(root, "thinking"), *st = get(root, "service_tier");
    const char *type = v ? json_string_value(get(v, "type")) : NULL;
    if (v && !(type && (!strcmp(type, "disabled") || !strcmp(type, "enabled")))) {
        srv_api_bad(e, "thinking", "thinking: its type must be \"enabled\" or \"disabled\"");
        return -1;
    }
    json_t *sp = get(root, "speed"), *oc = get(root, "output_config");
    if (sp && !(json_is_string(sp) && !strcmp(json_string_value(sp), "standard"))) {
        srv_api_bad(e, "speed", "speed: only \"standard\" is supported by this server");
        return -1;
    }
    if (oc && get(oc, "effort")) {
        srv_api_bad(e, "output_config", "output_config.effort: not supported by this server (its models answer "
                                        "without an effort budget)");
        return -1;
    }
    if (st && !(json_is_string(st) && (!strcmp(json_string_value(st), "auto") ||
                                       !strcmp(json_string_value(st), "standard_only")))) {
        srv_api_bad(e, "service_tier", "service_tier: must be auto or standard_only (this server has one tier)");
        return -1;
    }
    return 0;
}

/* The chat error's field under this API's name (its message keeps chat's words). */
static void rename_param(srv_api_error *e) {
    static const char *const MAP[][2] = {{"stop", "stop_sequences"}, {"response_format", "output_config"}};
    for (size_t i = 0; e->param && i < sizeof MAP / sizeof *MAP; i++)
        if (!strcmp(e->param, MAP[i][0])) e->param = MAP[i][1];
}

/* The body into q (a chat request); count: count_tokens' (no max_tokens, no sampling). 0, or -1 with *e. */
static int parse(const char *body, size_t len, int count, srv_api_req *q, srv_api_error *e) {
    memset(q, 0, sizeof *q);
    json_t *root = srv_api_load(body, len, e), *chat = json_object(), *msgs = json_array(), *v;
    int rc = -1;
    if (!root) goto out;
    if (!chat || !msgs) {
        oom(e);
        goto out;
    }
    if (refuse_unsupported(root, e)) goto out;
    json_t *model = get(root, "model"), *mt = get(root, "max_tokens"), *sys = get(root, "system");
    json_t *list = get(root, "messages");
    if (!json_is_string(model)) {
        srv_api_bad(e, "model", "model: Field required (a string)");
        goto out;
    }
    if (!count && !mt) {
        srv_api_bad(e, "max_tokens", "max_tokens: Field required");
        goto out;
    }
    if (!count && (!json_is_integer(mt) || json_integer_value(mt) < 1)) {
        srv_api_bad(e, "max_tokens", "max_tokens: must be an integer of at least 1");
        goto out;
    }
    if (sys) {
        json_t *t;
        if (blocks_text(sys, "system", &t, e)) goto out;
        if (json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "system", "content", t))) {
            oom(e);
            goto out;
        }
    }
    if (!json_is_array(list) || json_array_size(list) == 0) {
        srv_api_bad(e, "messages", "messages: Field required (a non-empty array)");
        goto out;
    }
    /* a last assistant message is Anthropic's prefill (the answer continues it): the chat templates here end
     * a turn after each message, so it cannot be honoured, and is refused rather than answered otherwise */
    const char *last = json_string_value(get(json_array_get(list, json_array_size(list) - 1), "role"));
    if (last && !strcmp(last, "assistant")) {
        srv_api_bad(e, "messages", "messages: a final assistant message (prefill) is not supported by this server");
        goto out;
    }
    size_t i;
    json_array_foreach(list, i, v) {
        if (!json_is_object(v)) {
            srv_api_bad(e, "messages", "messages.%zu: must be an object", i);
            goto out;
        }
        if (message_to_chat(v, i, msgs, e)) goto out;
    }
    if (set(chat, "messages", json_incref(msgs)) || set(chat, "model", json_incref(model)) ||
        (!count && json_object_set(chat, "max_tokens", mt))) {
        oom(e);
        goto out;
    }
    if (!count) {
        json_t *t = get(root, "temperature"), *ss = get(root, "stop_sequences");
        if (t && (!json_is_number(t) || json_number_value(t) < 0 || json_number_value(t) > 1)) {
            srv_api_bad(e, "temperature", "temperature: must be a number 0..1");
            goto out;
        }
        /* thinking: enabled is the template's enable_thinking with budget_tokens as reasoning_budget (the
         * thought's close forced after that many tokens), disabled llama-server's reasoning_budget 0;
         * chat_template_kwargs and reasoning_format as llama-server takes them */
        json_t *think = get(root, "thinking");
        const char *tt = think ? json_string_value(get(think, "type")) : NULL;
        if (tt && !strcmp(tt, "disabled") && set(chat, "reasoning_budget", json_integer(0))) {
            oom(e);
            goto out;
        }
        json_t *bt = think ? get(think, "budget_tokens") : NULL;
        json_int_t budget = json_is_integer(bt) ? json_integer_value(bt) : 0;
        if (budget > (1 << 24)) budget = 1 << 24; /* reasoning_budget's bound: more is unlimited in effect */
        if (tt && !strcmp(tt, "enabled") && budget > 0 && set(chat, "reasoning_budget", json_integer(budget))) {
            oom(e);
            goto out;
        }
        if (tt && !strcmp(tt, "enabled") && !get(root, "chat_template_kwargs") &&
            set(chat, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 1))) {
            oom(e);
            goto out;
        }
        static const char *const SAME[] = {"temperature", "top_p", "top_k", "stream", "chat_template_kwargs",
                                           "reasoning_format"};
        for (int k = 0; k < 6; k++)
            if ((v = get(root, SAME[k])) && json_object_set(chat, SAME[k], v)) {
                oom(e);
                goto out;
            }
        if (ss && !json_is_array(ss)) {
            srv_api_bad(e, "stop_sequences", "stop_sequences: must be an array of strings");
            goto out;
        }
        if (ss && json_array_size(ss) && json_object_set(chat, "stop", ss)) {
            oom(e);
            goto out;
        }
        json_t *meta = get(root, "metadata");
        if (meta && !json_is_object(meta)) {
            srv_api_bad(e, "metadata", "metadata: must be an object ({\"user_id\": ...})");
            goto out;
        }
    }
    if (tools_to_chat(root, chat, e)) goto out;
    /* output_config.format {"type": "json_schema", "schema"}: chat's response_format, enforced by the grammar */
    json_t *oc = get(root, "output_config"), *fmt = oc ? get(oc, "format") : NULL;
    if (oc && !json_is_object(oc)) {
        srv_api_bad(e, "output_config", "output_config: must be an object");
        goto out;
    }
    if (fmt) {
        const char *type = json_string_value(get(fmt, "type"));
        if (!type || strcmp(type, "json_schema") || !json_is_object(get(fmt, "schema"))) {
            srv_api_bad(e, "output_config", "output_config.format: must be {\"type\": \"json_schema\", \"schema\": "
                                            "{...}}");
            goto out;
        }
        if (set(chat, "response_format", json_pack("{s:s, s:{s:s, s:O}}", "type", "json_schema", "json_schema",
                                                   "name", "output", "schema", get(fmt, "schema")))) {
            oom(e);
            goto out;
        }
    }
    char *text = json_dumps(chat, JSON_COMPACT);
    if (!text) {
        oom(e);
        goto out;
    }
    rc = srv_api_parse(text, strlen(text), SRV_CHAT, q, e);
    free(text);
    if (rc) rename_param(e);
out:
    json_decref(root);
    json_decref(chat);
    json_decref(msgs);
    return rc;
}

/* ---- the answer ----------------------------------------------------------- */

typedef struct msg_ctx {
    char id[48];
    const char *model;
    char *stop[SRV_MAX_STOP]; /* the stop sequences, to name the one that ended the reply */
    int n_stop;
    int index; /* the content block being streamed */
} msg_ctx;

static void ctx_free(void *p) {
    msg_ctx *x = p;
    if (!x) return;
    for (int i = 0; i < x->n_stop; i++) free(x->stop[i]);
    free(x);
}

static const char *stop_reason(const srv_reply *r) {
    if (r->n_calls) return "tool_use";
    if (r->v.finish == SRV_FINISH_LENGTH) return "max_tokens";
    return r->v.stop_hit ? "stop_sequence" : "end_turn";
}

static const char *stop_sequence(const msg_ctx *x, const srv_reply *r) {
    return !r->n_calls && r->v.stop_hit > 0 && r->v.stop_hit <= x->n_stop ? x->stop[r->v.stop_hit - 1] : NULL;
}

/* Anthropic's usage: input_tokens are those evaluated, the prompt's tokens
 * reused from a slot's cache are cache_read_input_tokens (their sum is the
 * prompt's, count_tokens' figure). */
static json_t *usage_json(const srv_job_view *v) {
    return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", v->n_prompt - v->n_cached, "output_tokens", v->n_gen,
                     "cache_creation_input_tokens", 0, "cache_read_input_tokens", v->n_cached);
}

/* A call's input: its arguments' object ({} when they are not one). */
static json_t *call_input(const char *args) {
    json_t *in = json_loads(args, 0, NULL);
    if (!json_is_object(in)) json_decref(in), in = json_object();
    return in;
}

static char *whole(void *ctx, const srv_reply *r) {
    msg_ctx *x = ctx;
    json_t *content = json_array();
    if (content && r->reasoning_len) /* the model's reasoning as a thinking block first (no signature: nothing to verify) */
        json_array_append_new(content, srv_api_pack("{s:s, s:o, s:s}", "type", "thinking", "thinking",
                                                    srv_api_text_json(r->reasoning, r->reasoning_len), "signature", ""));
    if (content && (r->len || !r->n_calls))
        json_array_append_new(content, srv_api_pack("{s:s, s:o}", "type", "text", "text",
                                                    srv_api_text_json(r->text, r->len)));
    for (int k = 0; content && k < r->n_calls; k++)
        json_array_append_new(content, srv_api_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", r->calls[k].id,
                                                    "name", r->calls[k].name, "input",
                                                    call_input(r->calls[k].arguments)));
    if (!content) return NULL;
    return srv_api_dump(srv_api_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:s?, s:o}", "id", x->id, "type", "message",
                                     "role", "assistant", "model", x->model, "content", content, "stop_reason",
                                     stop_reason(r), "stop_sequence", stop_sequence(x, r), "usage",
                                     usage_json(&r->v)));
}

static int ev(srv_buf *out, const char *type, json_t *o) {
    if (!o || set(o, "type", json_string(type))) {
        json_decref(o);
        return -1;
    }
    return srv_sse(out, type, srv_api_dump(o));
}

static int begin(void *ctx, srv_buf *out, int n_prompt) {
    msg_ctx *x = ctx;
    return ev(out, "message_start",
              srv_api_pack("{s:{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:{s:i, s:i, s:i, s:i}}}", "message", "id",
                           x->id, "type", "message", "role", "assistant", "model", x->model, "content",
                           "stop_reason", "stop_sequence", "usage", "input_tokens", n_prompt, "output_tokens", 0,
                           "cache_creation_input_tokens", 0, "cache_read_input_tokens", 0));
}

static int text_open(void *ctx, srv_buf *out) {
    msg_ctx *x = ctx;
    return ev(out, "content_block_start", srv_api_pack("{s:i, s:{s:s, s:s}}", "index", x->index, "content_block",
                                                       "type", "text", "text", ""));
}

static int text_delta(void *ctx, srv_buf *out, const char *t, size_t n) {
    msg_ctx *x = ctx;
    return ev(out, "content_block_delta", srv_api_pack("{s:i, s:{s:s, s:o}}", "index", x->index, "delta", "type",
                                                       "text_delta", "text", srv_api_text_json(t, n)));
}

static int block_stop(void *ctx, srv_buf *out) {
    msg_ctx *x = ctx;
    return ev(out, "content_block_stop", srv_api_pack("{s:i}", "index", x->index++));
}

static int thinking_open(void *ctx, srv_buf *out) {
    msg_ctx *x = ctx;
    return ev(out, "content_block_start", srv_api_pack("{s:i, s:{s:s, s:s, s:s}}", "index", x->index, "content_block",
                                                       "type", "thinking", "thinking", "", "signature", ""));
}

static int thinking_delta(void *ctx, srv_buf *out, const char *t, size_t n) {
    msg_ctx *x = ctx;
    return ev(out, "content_block_delta", srv_api_pack("{s:i, s:{s:s, s:o}}", "index", x->index, "delta", "type",
                                                       "thinking_delta", "thinking", srv_api_text_json(t, n)));
}

static int text_close(void *ctx, srv_buf *out, const char *text, size_t n) {
    (void)text, (void)n;
    return block_stop(ctx, out);
}

static int call_open(void *ctx, srv_buf *out, int k, const char *id, const char *name) {
    (void)k;
    msg_ctx *x = ctx;
    return ev(out, "content_block_start", srv_api_pack("{s:i, s:{s:s, s:s, s:s, s:{}}}", "index", x->index,
                                                       "content_block", "type", "tool_use", "id", id, "name", name,
                                                       "input"));
}

static int call_delta(void *ctx, srv_buf *out, int k, const char *args, size_t n) {
    (void)k;
    msg_ctx *x = ctx;
    return ev(out, "content_block_delta", srv_api_pack("{s:i, s:{s:s, s:o}}", "index", x->index, "delta", "type",
                                                       "input_json_delta", "partial_json",
                                                       srv_api_text_json(args, n)));
}

static int call_close(void *ctx, srv_buf *out, int k, const srv_api_call *c) {
    (void)k, (void)c;
    return block_stop(ctx, out);
}

static int end(void *ctx, srv_buf *out, const srv_reply *r) {
    msg_ctx *x = ctx;
    return ev(out, "message_delta", srv_api_pack("{s:{s:s, s:s?}, s:o}", "delta", "stop_reason", stop_reason(r),
                                                 "stop_sequence", stop_sequence(x, r), "usage", usage_json(&r->v))) ||
           ev(out, "message_stop", json_object());
}

static int fail(void *ctx, srv_buf *out, const srv_api_error *e) {
    (void)ctx;
    return srv_sse(out, "error", srv_anthropic_error_json(e));
}

static const srv_item_ops OPS = {
    .call_prefix = "toolu_", .begin = begin, .reasoning_open = thinking_open, .reasoning_delta = thinking_delta,
    .reasoning_close = text_close, .text_open = text_open, .text_delta = text_delta,
    .text_close = text_close, .call_open = call_open, .call_delta = call_delta, .call_close = call_close,
    .end = end, .fail = fail, .whole = whole, .send_error = srv_anthropic_error, .free = ctx_free,
};

int srv_messages_parse(const char *body, size_t len, int count, srv_api_req *q, srv_api_error *e) {
    return parse(body, len, count, q, e);
}

enum MHD_Result srv_messages(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len) {
    srv_api_req q;
    srv_api_error e = {0};
    srv_job *jobs[1];
    clinfer_tools *tools = NULL;
    int n_jobs = 0;
    msg_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        srv_api_error_set(&e, 500, "api_error", NULL, NULL, "out of host memory");
        return srv_anthropic_error(c, &e);
    }
    if (parse(body ? body : "", len, 0, &q, &e) == 0) {
        for (int i = 0; i < q.n_stop; i++) /* copies: the stop_sequence an answer names */
            if ((x->stop[x->n_stop] = strdup(q.stop[i]))) x->n_stop++;
        if (x->n_stop < q.n_stop) srv_api_error_set(&e, 500, "api_error", NULL, NULL, "out of host memory");
        else n_jobs = srv_request_submit(h, app, c, &q, jobs, &tools, &e);
        rename_param(&e);
    }
    const int stream = q.stream, think_syntax = q.think_syntax, think_open = q.think_open;
    srv_api_req_free(&q);
    if (!n_jobs) {
        ctx_free(x);
        return e.http ? srv_anthropic_error(c, &e) : MHD_NO; /* 0: the client left */
    }
    static atomic_ullong counter;
    unsigned long long a;
    if (getrandom(&a, sizeof a, 0) != sizeof a) a = (unsigned long long)time(NULL) << 20 ^ atomic_fetch_add(&counter, 1);
    snprintf(x->id, sizeof x->id, "msg_%016llx%08llx", a, atomic_fetch_add(&counter, 1) & 0xffffffffu);
    x->model = app->model_id;
    return srv_items_answer(h, app, c, jobs[0], tools, stream, &OPS, x, think_syntax, think_open);
}

enum MHD_Result srv_messages_count(srv_app *app, struct MHD_Connection *c, const char *body, size_t len) {
    srv_api_req q;
    srv_api_error e = {0};
    int n = 0, rc = parse(body ? body : "", len, 1, &q, &e);
    if (rc == 0) rc = srv_request_count(app, &q, &n, &e);
    srv_api_req_free(&q);
    if (rc) return srv_anthropic_error(c, &e);
    return srv_http_send(c, MHD_HTTP_OK, "application/json", srv_api_dump(srv_api_pack("{s:i}", "input_tokens", n)));
}

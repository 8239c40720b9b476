/* POST /v1/responses: OpenAI's Responses API over the chat path. A request
 * is translated into the Chat Completions body it means (instructions as
 * the system message, input items as messages, flat function tools as
 * chat's, text.format as response_format, max_output_tokens as
 * max_tokens), which srv_api_parse checks and srv_request_submit runs: the
 * same prompt, grammar and job as /v1/chat/completions, so a greedy answer
 * is the chat's. The reply is answered as a response object, or streamed
 * as the API's typed events (chat_items.c drives them). Responses are kept
 * in memory (the last RESP_KEEP, RESP_KEEP_BYTES at most) for
 * previous_response_id. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "api_responses.h"
#include "chat_items.h"

enum {
    RESP_KEEP = 256,                /* responses kept for previous_response_id, the oldest dropped first */
    RESP_KEEP_BYTES = 32 << 20,     /* ... and their conversations' JSON at most this many bytes together */
    RESP_MAX_METADATA = 16,         /* metadata's keys, OpenAI's limit */
};

/* ---- the kept responses --------------------------------------------------- */

/* A response's whole conversation (its input items with those of the
 * responses before it, then its output items) as JSON text, by id. */
typedef struct kept {
    char id[48];
    char *items; /* a JSON array's text */
    size_t len;
} kept;

static struct {
    pthread_mutex_t mu;
    kept k[RESP_KEEP]; /* a ring: next is the oldest's slot */
    int next;
    size_t bytes;
} store = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Keeps a conversation (consumed) under id, dropping the oldest over the bounds. */
static void keep(const char *id, char *items) {
    size_t len = strlen(items);
    if (len > RESP_KEEP_BYTES) {
        free(items);
        return;
    }
    pthread_mutex_lock(&store.mu);
    for (int i = 0; store.bytes + len > RESP_KEEP_BYTES && i < RESP_KEEP; i++) { /* oldest first */
        kept *o = &store.k[(store.next + i) % RESP_KEEP];
        if (!o->items) continue;
        store.bytes -= o->len;
        free(o->items);
        *o = (kept){0};
    }
    kept *k = &store.k[store.next];
    if (k->items) store.bytes -= k->len, free(k->items);
    snprintf(k->id, sizeof k->id, "%s", id);
    k->items = items;
    k->len = len;
    store.bytes += len;
    store.next = (store.next + 1) % RESP_KEEP;
    pthread_mutex_unlock(&store.mu);
}

/* The conversation kept under id, parsed (a new reference), or NULL. */
static json_t *kept_items(const char *id) {
    json_t *items = NULL;
    pthread_mutex_lock(&store.mu);
    for (int i = 0; i < RESP_KEEP; i++)
        if (store.k[i].items && !strcmp(store.k[i].id, id)) {
            items = json_loadb(store.k[i].items, store.k[i].len, 0, NULL);
            break;
        }
    pthread_mutex_unlock(&store.mu);
    return items;
}

/* ---- the request ---------------------------------------------------------- */

static json_t *get(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

/* An object member, or -1 (out of memory) */
static int set(json_t *o, const char *key, json_t *v) { return v ? json_object_set_new(o, key, v) : -1; }

static int oom(srv_api_error *e) {
    srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
    return -1;
}

/* A message's or an output's content: a string, or an array of text parts
 * (input_text, output_text, text; a refusal's text) joined; others are
 * refused, naming the part. *out a new string. */
static int content_text(json_t *c, const char *where, json_t **out, srv_api_error *e) {
    if (!c) return (*out = json_string("")) ? 0 : oom(e);
    if (json_is_string(c)) return (*out = json_copy(c)) ? 0 : oom(e);
    if (!json_is_array(c)) {
        srv_api_bad(e, "input", "'%s' must be a string or an array of content parts", where);
        return -1;
    }
    srv_buf b = {0};
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        const char *type = json_string_value(get(part, "type"));
        const char *key = type && !strcmp(type, "refusal") ? "refusal" : "text";
        json_t *t = get(part, key);
        if (!type || (strcmp(type, "input_text") && strcmp(type, "output_text") && strcmp(type, "text") &&
                      strcmp(type, "refusal"))) {
            srv_api_bad(e, "input", "'%s[%zu]': content parts of type '%.40s' are not supported (text only: "
                                    "input_text, output_text; the models here read text)", where, i,
                        type ? type : "(none)");
            srv_buf_free(&b);
            return -1;
        }
        if (!json_is_string(t)) {
            srv_api_bad(e, "input", "'%s[%zu].%s' must be a string", where, i, key);
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

/* Input items as chat messages appended to msgs: messages; function_call
 * (an assistant's tool call, joined to the assistant message before it);
 * function_call_output (a tool message); reasoning items are dropped (the
 * chat templates here take no reasoning back). */
static int items_to_messages(json_t *items, json_t *msgs, srv_api_error *e) {
    size_t i;
    json_t *it;
    char where[64];
    json_array_foreach(items, i, it) {
        if (!json_is_object(it)) {
            srv_api_bad(e, "input", "'input[%zu]' must be an object (an input item)", i);
            return -1;
        }
        const char *type = json_string_value(get(it, "type"));
        if (!type) type = get(it, "role") ? "message" : "";
        if (!strcmp(type, "message")) {
            const char *role = json_string_value(get(it, "role"));
            if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                          strcmp(role, "developer"))) {
                srv_api_bad(e, "input", "'input[%zu].role' must be user, assistant, system or developer", i);
                return -1;
            }
            json_t *text;
            snprintf(where, sizeof where, "input[%zu].content", i);
            if (!get(it, "content")) {
                srv_api_bad(e, "input", "'%s' is required in a message", where);
                return -1;
            }
            if (content_text(get(it, "content"), where, &text, e)) return -1;
            json_t *m = json_object();
            if (!m || set(m, "role", json_string(role)) || set(m, "content", text) || json_array_append_new(msgs, m))
                return oom(e);
        } else if (!strcmp(type, "function_call")) {
            const char *call_id = json_string_value(get(it, "call_id")), *name = json_string_value(get(it, "name"));
            json_t *args = get(it, "arguments");
            if (!call_id || !name || (args && !json_is_string(args))) {
                srv_api_bad(e, "input", "'input[%zu]': a function_call needs call_id, name and arguments (strings)",
                            i);
                return -1;
            }
            json_t *last = json_array_get(msgs, json_array_size(msgs) - 1), *calls;
            if (!last || strcmp(json_string_value(json_object_get(last, "role")), "assistant")) {
                last = json_object();
                if (!last || set(last, "role", json_string("assistant")) || set(last, "content", json_string("")) ||
                    json_array_append_new(msgs, last))
                    return oom(e);
            }
            if (!(calls = json_object_get(last, "tool_calls")) &&
                set(last, "tool_calls", calls = json_array()))
                return oom(e);
            json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", call_id, "type", "function", "function",
                                     "name", name, "arguments", args ? json_string_value(args) : "{}");
            if (!call || json_array_append_new(calls, call)) return oom(e);
        } else if (!strcmp(type, "function_call_output")) {
            const char *call_id = json_string_value(get(it, "call_id"));
            json_t *text;
            snprintf(where, sizeof where, "input[%zu].output", i);
            if (!call_id) {
                srv_api_bad(e, "input", "'input[%zu].call_id' (a string) is required in a function_call_output", i);
                return -1;
            }
            if (content_text(get(it, "output"), where, &text, e)) return -1;
            json_t *m = json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", call_id, "content", text);
            if (!m || json_array_append_new(msgs, m)) return oom(e);
        } else if (strcmp(type, "reasoning")) {
            srv_api_bad(e, "input", "'input[%zu].type' '%.40s' is not supported (message, function_call, "
                                    "function_call_output)", i, type);
            return -1;
        }
    }
    return 0;
}

/* Documented fields this server does not offer: a 400 naming the field
 * when one is given (and not its value that means "off"). */
static int refuse_unsupported(json_t *root, srv_api_error *e) {
    static const char *const ALWAYS[] = {"conversation", "prompt", "reasoning", "max_tool_calls", "context_management"};
    for (size_t i = 0; i < sizeof ALWAYS / sizeof *ALWAYS; i++)
        if (get(root, ALWAYS[i])) {
            srv_api_bad(e, ALWAYS[i], "'%s' is not supported by this server%s", ALWAYS[i],
                        !strcmp(ALWAYS[i], "reasoning") ? " (its models answer without a reasoning budget)" : "");
            return -1;
        }
    json_t *v;
    if ((v = get(root, "background")) && !json_is_false(v)) {
        srv_api_bad(e, "background", "'background' is not supported: responses are answered while the client waits");
        return -1;
    }
    if ((v = get(root, "include")) && !(json_is_array(v) && json_array_size(v) == 0)) {
        srv_api_bad(e, "include", "'include' is not supported (no encrypted reasoning, logprobs or hosted tools' "
                                  "outputs to include)");
        return -1;
    }
    if ((v = get(root, "top_logprobs")) && !(json_is_integer(v) && json_integer_value(v) == 0)) {
        srv_api_bad(e, "top_logprobs", "'top_logprobs' is not supported on /v1/responses (use /v1/chat/completions)");
        return -1;
    }
    if ((v = get(root, "truncation")) && !(json_is_string(v) && !strcmp(json_string_value(v), "disabled"))) {
        srv_api_bad(e, "truncation", "'truncation' must be \"disabled\": a conversation longer than the context is "
                                     "refused, never cut");
        return -1;
    }
    if ((v = get(root, "service_tier")) &&
        !(json_is_string(v) && (!strcmp(json_string_value(v), "auto") || !strcmp(json_string_value(v), "default")))) {
        srv_api_bad(e, "service_tier", "'service_tier' must be auto or default: this server has one tier");
        return -1;
    }
    if ((v = get(root, "stream_options")) && !(json_is_object(v) && json_object_size(v) == 0) &&
        !(json_is_object(v) && json_object_size(v) == 1 && json_is_false(json_object_get(v, "include_obfuscation")))) {
        srv_api_bad(e, "stream_options", "'stream_options' is not supported (no obfuscation padding is sent)");
        return -1;
    }
    if ((v = get(root, "text")) && get(v, "verbosity")) {
        srv_api_bad(e, "text.verbosity", "'text.verbosity' is not supported");
        return -1;
    }
    return 0;
}

/* tools (function tools, flat) and tool_choice as chat's. */
static int tools_to_chat(json_t *root, json_t *chat, srv_api_error *e) {
    json_t *tools = get(root, "tools"), *choice = get(root, "tool_choice");
    if (tools) {
        if (!json_is_array(tools)) {
            srv_api_bad(e, "tools", "'tools' must be an array of function tools");
            return -1;
        }
        json_t *out = json_array();
        if (set(chat, "tools", out)) return oom(e);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            const char *type = json_string_value(get(t, "type")), *name = json_string_value(get(t, "name"));
            if (!type || strcmp(type, "function")) {
                srv_api_bad(e, "tools", "'tools[%zu].type' '%.40s' is not supported: only function tools (hosted "
                                        "tools such as web_search run on OpenAI's side)", i, type ? type : "(none)");
                return -1;
            }
            if (!name) {
                srv_api_bad(e, "tools", "'tools[%zu].name' (a string) is required", i);
                return -1;
            }
            json_t *f = json_pack("{s:s}", "name", name);
            static const char *const KEYS[] = {"description", "parameters", "strict"};
            for (int k = 0; f && k < 3; k++)
                if (get(t, KEYS[k]) && json_object_set(f, KEYS[k], get(t, KEYS[k]))) return oom(e);
            json_t *ct = f ? json_pack("{s:s, s:o}", "type", "function", "function", f) : NULL;
            if (!ct || json_array_append_new(out, ct)) return oom(e);
        }
    }
    if (choice) {
        const char *type = json_string_value(get(choice, "type")), *name = json_string_value(get(choice, "name"));
        if (json_is_string(choice)) {
            if (json_object_set(chat, "tool_choice", choice)) return oom(e);
        } else if (type && !strcmp(type, "function") && name) {
            if (set(chat, "tool_choice", json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name)))
                return oom(e);
        } else {
            srv_api_bad(e, "tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", "
                                          "\"name\"} (hosted tools and allowed_tools are not supported)");
            return -1;
        }
    }
    json_t *ptc = get(root, "parallel_tool_calls");
    if (ptc && json_object_set(chat, "parallel_tool_calls", ptc)) return oom(e);
    return 0;
}

/* text.format as chat's response_format. */
static int format_to_chat(json_t *root, json_t *chat, srv_api_error *e) {
    json_t *text = get(root, "text"), *f = text ? get(text, "format") : NULL;
    if (text && !json_is_object(text)) {
        srv_api_bad(e, "text", "'text' must be an object ({\"format\": ...})");
        return -1;
    }
    if (!f) return 0;
    const char *type = json_string_value(get(f, "type"));
    if (!type) {
        srv_api_bad(e, "text.format", "'text.format.type' (text, json_object or json_schema) is required");
        return -1;
    }
    json_t *rf = NULL;
    if (!strcmp(type, "text")) return 0;
    if (!strcmp(type, "json_object")) rf = json_pack("{s:s}", "type", "json_object");
    else if (!strcmp(type, "json_schema")) {
        json_t *spec = json_object();
        static const char *const KEYS[] = {"name", "schema", "strict", "description"};
        for (int k = 0; spec && k < 4; k++)
            if (get(f, KEYS[k]) && json_object_set(spec, KEYS[k], get(f, KEYS[k]))) return oom(e);
        rf = spec ? json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", spec) : NULL;
    } else {
        srv_api_bad(e, "text.format", "'text.format.type' '%.40s' is not text, json_object or json_schema", type);
        return -1;
    }
    return set(chat, "response_format", rf) ? oom(e) : 0;
}

/* The chat error's field under this API's name. */
static void rename_param(srv_api_error *e) {
    static const char *const MAP[][2] = {{"max_tokens", "max_output_tokens"}, {"messages", "input"},
                                         {"response_format", "text.format"}};
    for (size_t i = 0; e->param && i < sizeof MAP / sizeof *MAP; i++)
        if (!strcmp(e->param, MAP[i][0])) e->param = MAP[i][1];
}

/* What a response repeats of its request, and what it answers with. */
typedef struct resp_ctx {
    char id[48], msg_id[48];
    char fc_id[64]; /* the function_call item being streamed */
    long long created;
    const char *model;
    json_t *echo; /* the request's fields a response object repeats */
    json_t *conv; /* the conversation so far (kept items, then this input's), kept with the output when store */
    int store;
    int seq;          /* the next event's sequence_number */
    int out_index;    /* the output item being streamed */
    json_t *output;   /* the output items streamed so far */
} resp_ctx;

static void ctx_free(void *p) {
    resp_ctx *x = p;
    if (!x) return;
    json_decref(x->echo);
    json_decref(x->conv);
    json_decref(x->output);
    free(x);
}

static unsigned long long rnd(void) {
    unsigned long long b;
    if (getrandom(&b, sizeof b, 0) != sizeof b) {
        static atomic_ullong n;
        b = (unsigned long long)time(NULL) << 24 ^ atomic_fetch_add(&n, 1);
    }
    return b;
}

/* The request's body into q (a chat request) and x (what its response repeats). 0, or -1 with *e. */
static int parse(const char *body, size_t len, srv_api_req *q, resp_ctx *x, srv_api_error *e) {
    memset(q, 0, sizeof *q);
    json_t *root = srv_api_load(body, len, e), *chat = json_object(), *msgs = json_array(), *v;
    int rc = -1;
    if (!root) goto out;
    if (!chat || !msgs || !(x->echo = json_object()) || !(x->output = json_array())) {
        oom(e);
        goto out;
    }
    if (refuse_unsupported(root, e)) goto out;
    /* the conversation: the kept one of previous_response_id, then this input */
    json_t *prev = get(root, "previous_response_id"), *input = get(root, "input"), *instr = get(root, "instructions");
    if (prev && !json_is_string(prev)) {
        srv_api_bad(e, "previous_response_id", "'previous_response_id' must be a string");
        goto out;
    }
    if (prev && !(x->conv = kept_items(json_string_value(prev)))) {
        srv_api_error_set(e, 404, "invalid_request_error", "previous_response_not_found", "previous_response_id",
                          "Previous response with id '%.60s' not found: unknown, stored with store: false, or "
                          "expired (this server keeps its last %d responses, %d MiB at most, in memory until it "
                          "stops)", json_string_value(prev), RESP_KEEP, RESP_KEEP_BYTES >> 20);
        goto out;
    }
    if (!x->conv && !(x->conv = json_array())) {
        oom(e);
        goto out;
    }
    if (!input) {
        srv_api_bad(e, "input", "'input' is required");
        goto out;
    }
    if (json_is_string(input)) {
        if (json_array_append_new(x->conv, json_pack("{s:s, s:s, s:O}", "type", "message", "role", "user",
                                                     "content", input))) {
            oom(e);
            goto out;
        }
    } else if (json_is_array(input)) {
        if (json_array_extend(x->conv, input)) {
            oom(e);
            goto out;
        }
    } else {
        srv_api_bad(e, "input", "'input' must be a string or an array of input items");
        goto out;
    }
    if (instr && !json_is_string(instr)) {
        srv_api_bad(e, "instructions", "'instructions' must be a string");
        goto out;
    }
    if (instr && json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", instr))) {
        oom(e);
        goto out;
    }
    if (items_to_messages(x->conv, msgs, e)) goto out;
    if (json_array_size(msgs) == 0) {
        srv_api_bad(e, "input", "'input' holds no message");
        goto out;
    }
    if (set(chat, "messages", json_incref(msgs))) {
        oom(e);
        goto out;
    }
    /* the sampling fields as chat's (checked there) */
    static const char *const SAME[] = {"model", "temperature", "top_p", "stream", "chat_template_kwargs",
                                       "reasoning_format"}; /* the last two as llama-server takes them */
    for (int i = 0; i < 6; i++)
        if ((v = get(root, SAME[i])) && json_object_set(chat, SAME[i], v)) {
            oom(e);
            goto out;
        }
    if ((v = get(root, "max_output_tokens")) && json_object_set(chat, "max_tokens", v)) {
        oom(e);
        goto out;
    }
    if (tools_to_chat(root, chat, e) || format_to_chat(root, chat, e)) goto out;
    json_t *meta = get(root, "metadata"), *store_v = get(root, "store");
    if (meta && (!json_is_object(meta) || json_object_size(meta) > RESP_MAX_METADATA)) {
        srv_api_bad(e, "metadata", "'metadata' must be an object of at most %d string values", RESP_MAX_METADATA);
        goto out;
    }
    if (store_v && !json_is_boolean(store_v)) {
        srv_api_bad(e, "store", "'store' must be a boolean");
        goto out;
    }
    x->store = !store_v || json_is_true(store_v);
    /* the chat request: checked and parsed as /v1/chat/completions' */
    char *text = json_dumps(chat, JSON_COMPACT);
    if (!text) {
        oom(e);
        goto out;
    }
    rc = srv_api_parse(text, strlen(text), SRV_CHAT, q, e);
    free(text);
    if (rc) {
        rename_param(e);
        goto out;
    }
    /* what the response object repeats */
    json_t *tools_echo = get(root, "tools") ? json_incref(get(root, "tools")) : json_array();
    json_t *tc = get(root, "tool_choice") ? json_incref(get(root, "tool_choice")) : json_string("auto");
    json_t *txt = get(root, "text") ? json_incref(get(root, "text")) : json_pack("{s:{s:s}}", "format", "type", "text");
    if (set(x->echo, "instructions", instr ? json_incref(instr) : json_null()) ||
        set(x->echo, "max_output_tokens", (v = get(root, "max_output_tokens")) ? json_incref(v) : json_null()) ||
        set(x->echo, "metadata", meta ? json_incref(meta) : json_object()) ||
        set(x->echo, "parallel_tool_calls", json_boolean(q->parallel_tool_calls)) ||
        set(x->echo, "previous_response_id", prev ? json_incref(prev) : json_null()) ||
        set(x->echo, "store", json_boolean(x->store)) ||
        set(x->echo, "temperature", json_real(get(root, "temperature") ? q->sp.temperature : 1.0)) ||
        set(x->echo, "top_p", json_real(get(root, "top_p") ? q->sp.top_p : 1.0)) || set(x->echo, "text", txt) ||
        set(x->echo, "tool_choice", tc) || set(x->echo, "tools", tools_echo) ||
        set(x->echo, "truncation", json_string("disabled")) ||
        set(x->echo, "user", (v = get(root, "user")) ? json_incref(v) : json_null()) ||
        set(x->echo, "reasoning", json_pack("{s:n, s:n}", "effort", "summary"))) {
        oom(e);
        rc = -1;
    }
out:
    json_decref(root);
    json_decref(chat);
    json_decref(msgs);
    return rc;
}

/* ---- the answer ----------------------------------------------------------- */

static json_t *usage_json(const srv_job_view *v) {
    return json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", v->n_prompt, "input_tokens_details",
                     "cached_tokens", v->n_cached, "output_tokens", v->n_gen, "output_tokens_details",
                     "reasoning_tokens", 0, "total_tokens", v->n_prompt + v->n_gen);
}

static json_t *message_item(const resp_ctx *x, const char *status, const char *text, size_t len) {
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:o, s:[], s:[]}]}", "id", x->msg_id, "type", "message", "status",
                     status, "role", "assistant", "content", "type", "output_text", "text",
                     srv_api_text_json(text, len), "annotations", "logprobs");
}

/* A function_call item's id: its call id's, under fc_. */
static void fc_id(char *buf, size_t n, const char *call_id) {
    snprintf(buf, n, "fc_%s", call_id + (strncmp(call_id, "call_", 5) ? 0 : 5));
}

static json_t *call_item(const char *status, const char *call_id, const char *name, const char *args) {
    char id[64];
    fc_id(id, sizeof id, call_id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "type", "function_call", "status", status,
                     "call_id", call_id, "name", name, "arguments", args);
}

/* A reasoning item: the model's thought as its reasoning_text (no summary:
 * none is made), its id the message's with "rs_" for "msg_". */
static json_t *reasoning_item(const resp_ctx *x, const char *status, const char *text, size_t n) {
    char id[48];
    snprintf(id, sizeof id, "rs_%s", x->msg_id + 4);
    return json_pack("{s:s, s:s, s:s, s:[], s:[{s:s, s:o}]}", "id", id, "type", "reasoning", "status", status, "summary",
                     "content", "type", "reasoning_text", "text", srv_api_text_json(text, n));
}

/* The output items of a whole reply: its reasoning (where the model reasoned), its message (when it has
 * text, or calls nothing), then its calls. */
static json_t *output_of(const resp_ctx *x, const srv_reply *r) {
    json_t *out = json_array();
    if (out && r->reasoning_len &&
        json_array_append_new(out, reasoning_item(x, "completed", r->reasoning, r->reasoning_len)))
        return json_decref(out), NULL;
    if (out && (r->len || !r->n_calls) && json_array_append_new(out, message_item(x, "completed", r->text, r->len)))
        return json_decref(out), NULL;
    for (int k = 0; out && k < r->n_calls; k++)
        if (json_array_append_new(out, call_item("completed", r->calls[k].id, r->calls[k].name, r->calls[k].arguments)))
            return json_decref(out), NULL;
    return out;
}

/* A response object: status, output (consumed) and usage (consumed; NULL: null). */
static json_t *response_json(const resp_ctx *x, const char *status, json_t *output, json_t *usage,
                             const char *incomplete) {
    json_t *r = json_deep_copy(x->echo);
    if (!r || !output || set(r, "id", json_string(x->id)) || set(r, "object", json_string("response")) ||
        set(r, "created_at", json_integer(x->created)) || set(r, "status", json_string(status)) ||
        set(r, "error", json_null()) ||
        set(r, "incomplete_details", incomplete ? json_pack("{s:s}", "reason", incomplete) : json_null()) ||
        set(r, "model", json_string(x->model)) || set(r, "output", output) ||
        set(r, "usage", usage ? usage : json_null())) {
        json_decref(r);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    return r;
}

/* The finished response (kept when store): its JSON object. */
static json_t *finished(resp_ctx *x, const srv_reply *r) {
    const int cut = r->v.finish == SRV_FINISH_LENGTH;
    json_t *output = output_of(x, r);
    if (x->store && output) { /* the conversation with this output, for the next previous_response_id */
        json_t *all = json_copy(x->conv);
        char *text = all && !json_array_extend(all, output) ? json_dumps(all, JSON_COMPACT) : NULL;
        json_decref(all);
        if (text) keep(x->id, text);
    }
    return response_json(x, cut ? "incomplete" : "completed", output, usage_json(&r->v),
                         cut ? "max_output_tokens" : NULL);
}

static char *whole(void *ctx, const srv_reply *r) { return srv_api_dump(finished(ctx, r)); }

/* An event: its type and sequence_number added to o (consumed). */
static int ev(resp_ctx *x, srv_buf *out, const char *type, json_t *o) {
    if (!o || set(o, "type", json_string(type)) || set(o, "sequence_number", json_integer(x->seq++))) {
        json_decref(o);
        return -1;
    }
    return srv_sse(out, type, srv_api_dump(o));
}

static int begin(void *ctx, srv_buf *out, int n_prompt) {
    (void)n_prompt;
    resp_ctx *x = ctx;
    return ev(x, out, "response.created", json_pack("{s:o}", "response",
                                                    response_json(x, "in_progress", json_array(), NULL, NULL))) ||
           ev(x, out, "response.in_progress", json_pack("{s:o}", "response",
                                                        response_json(x, "in_progress", json_array(), NULL, NULL)));
}

static int text_open(void *ctx, srv_buf *out) {
    resp_ctx *x = ctx;
    return ev(x, out, "response.output_item.added",
              json_pack("{s:i, s:{s:s, s:s, s:s, s:s, s:[]}}", "output_index", x->out_index, "item", "id", x->msg_id,
                        "type", "message", "status", "in_progress", "role", "assistant", "content")) ||
           ev(x, out, "response.content_part.added",
              json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[], s:[]}}", "item_id", x->msg_id, "output_index",
                        x->out_index, "content_index", 0, "part", "type", "output_text", "text", "", "annotations",
                        "logprobs"));
}

static int text_delta(void *ctx, srv_buf *out, const char *t, size_t n) {
    resp_ctx *x = ctx;
    return ev(x, out, "response.output_text.delta",
              json_pack("{s:s, s:i, s:i, s:o, s:[]}", "item_id", x->msg_id, "output_index", x->out_index,
                        "content_index", 0, "delta", srv_api_text_json(t, n), "logprobs"));
}

static int reasoning_open(void *ctx, srv_buf *out) {
    resp_ctx *x = ctx;
    json_t *item = reasoning_item(x, "in_progress", "", 0);
    json_array_clear(json_object_get(item, "content"));
    return ev(x, out, "response.output_item.added", json_pack("{s:i, s:o}", "output_index", x->out_index, "item", item));
}

static int reasoning_delta(void *ctx, srv_buf *out, const char *t, size_t n) {
    resp_ctx *x = ctx;
    char id[48];
    snprintf(id, sizeof id, "rs_%s", x->msg_id + 4);
    return ev(x, out, "response.reasoning_text.delta",
              json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", x->out_index, "content_index", 0,
                        "delta", srv_api_text_json(t, n)));
}

static int reasoning_close(void *ctx, srv_buf *out, const char *text, size_t n) {
    resp_ctx *x = ctx;
    char id[48];
    snprintf(id, sizeof id, "rs_%s", x->msg_id + 4);
    json_t *item = reasoning_item(x, "completed", text, n);
    int rc = ev(x, out, "response.reasoning_text.done",
                json_pack("{s:s, s:i, s:i, s:o}", "item_id", id, "output_index", x->out_index, "content_index", 0,
                          "text", srv_api_text_json(text, n))) ||
             ev(x, out, "response.output_item.done", json_pack("{s:i, s:O}", "output_index", x->out_index, "item", item));
    json_decref(item);
    x->out_index++;
    return rc;
}

static int text_close(void *ctx, srv_buf *out, const char *text, size_t n) {
    resp_ctx *x = ctx;
    json_t *item = message_item(x, "completed", text, n);
    int rc = ev(x, out, "response.output_text.done",
                json_pack("{s:s, s:i, s:i, s:o, s:[]}", "item_id", x->msg_id, "output_index", x->out_index,
                          "content_index", 0, "text", srv_api_text_json(text, n), "logprobs")) ||
             ev(x, out, "response.content_part.done",
                json_pack("{s:s, s:i, s:i, s:O}", "item_id", x->msg_id, "output_index", x->out_index,
                          "content_index", 0, "part", json_array_get(json_object_get(item, "content"), 0))) ||
             ev(x, out, "response.output_item.done",
                json_pack("{s:i, s:O}", "output_index", x->out_index, "item", item));
    json_decref(item);
    x->out_index++;
    return rc;
}

static int call_open(void *ctx, srv_buf *out, int k, const char *id, const char *name) {
    (void)k;
    resp_ctx *x = ctx;
    fc_id(x->fc_id, sizeof x->fc_id, id);
    return ev(x, out, "response.output_item.added",
              json_pack("{s:i, s:o}", "output_index", x->out_index, "item", call_item("in_progress", id, name, "")));
}


static int call_delta(void *ctx, srv_buf *out, int k, const char *args, size_t n) {
    (void)k;
    resp_ctx *x = ctx;
    return ev(x, out, "response.function_call_arguments.delta",
              json_pack("{s:s, s:i, s:o}", "item_id", x->fc_id, "output_index", x->out_index, "delta",
                        srv_api_text_json(args, n)));
}

static int call_close(void *ctx, srv_buf *out, int k, const srv_api_call *c) {
    (void)k;
    resp_ctx *x = ctx;
    char id[64];
    fc_id(id, sizeof id, c->id);
    int rc = ev(x, out, "response.function_call_arguments.done",
                json_pack("{s:s, s:i, s:s, s:s}", "item_id", id, "output_index", x->out_index, "name", c->name,
                          "arguments", c->arguments)) ||
             ev(x, out, "response.output_item.done",
                json_pack("{s:i, s:o}", "output_index", x->out_index, "item",
                          call_item("completed", c->id, c->name, c->arguments)));
    x->out_index++;
    return rc;
}

static int end(void *ctx, srv_buf *out, const srv_reply *r) {
    resp_ctx *x = ctx;
    json_t *resp = finished(x, r);
    const char *type = r->v.finish == SRV_FINISH_LENGTH ? "response.incomplete" : "response.completed";
    return ev(x, out, type, resp ? json_pack("{s:o}", "response", resp) : NULL);
}

static int fail(void *ctx, srv_buf *out, const srv_api_error *e) {
    resp_ctx *x = ctx;
    return ev(x, out, "error", json_pack("{s:s?, s:s, s:s?, s:{s:s, s:s, s:s?, s:s?}}", "code", e->code, "message",
                                         e->message, "param", e->param, "error", "type", e->type, "message",
                                         e->message, "code", e->code, "param", e->param));
}

static const srv_item_ops OPS = {
    .call_prefix = "call_", .begin = begin, .reasoning_open = reasoning_open, .reasoning_delta = reasoning_delta,
    .reasoning_close = reasoning_close, .text_open = text_open, .text_delta = text_delta,
    .text_close = text_close, .call_open = call_open, .call_delta = call_delta, .call_close = call_close,
    .end = end, .fail = fail, .whole = whole, .send_error = srv_http_send_error, .free = ctx_free,
};

int srv_responses_parse(const char *body, size_t len, srv_api_req *q, srv_api_error *e) {
    resp_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        memset(q, 0, sizeof *q);
        return oom(e);
    }
    int rc = parse(body, len, q, x, e);
    if (rc) rename_param(e);
    ctx_free(x);
    return rc;
}

enum MHD_Result srv_responses(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len) {
    srv_api_req q;
    srv_api_error e = {0};
    srv_job *jobs[1];
    clinfer_tools *tools = NULL;
    int n_jobs = 0;
    resp_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, 500, "application/json", NULL);
    }
    if (parse(body ? body : "", len, &q, x, &e) == 0) n_jobs = srv_request_submit(h, app, c, &q, jobs, &tools, &e);
    if (!n_jobs) rename_param(&e);
    const int stream = q.stream, think_syntax = q.think_syntax, think_open = q.think_open;
    srv_api_req_free(&q);
    if (!n_jobs) {
        ctx_free(x);
        return e.http ? srv_http_send_error(c, &e) : MHD_NO; /* 0: the client left */
    }
    unsigned long long a = rnd(), b = rnd();
    snprintf(x->id, sizeof x->id, "resp_%016llx%016llx", a, b);
    snprintf(x->msg_id, sizeof x->msg_id, "msg_%016llx%016llx", b, a);
    x->created = (long long)time(NULL);
    x->model = app->model_id;
    return srv_items_answer(h, app, c, jobs[0], tools, stream, &OPS, x, think_syntax, think_open);
}

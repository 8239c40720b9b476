#include "api_openai.h"
#include "adapters.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reasoning.h"

void srv_api_error_set(srv_api_error *e, int http, const char *type, const char *code, const char *param,
                       const char *fmt, ...) {
    e->http = http;
    e->type = type;
    e->code = code;
    e->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

void srv_api_bad(srv_api_error *e, const char *param, const char *fmt, ...) {
    srv_api_error_set(e, 400, "invalid_request_error", "invalid_value", param, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* ---- requests ------------------------------------------------------------- */

/* A field of the body: NULL when absent or null (OpenAI's clients send null
 * for "not given"). */
static json_t *field(json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    return json_is_null(v) ? NULL : v;
}

/* json_unpack_ex of one present field against `fmt`; -1 with a 400 naming it. */
static int unpack(json_t *v, const char *key, srv_api_error *e, const char *fmt, void *dst) {
    json_error_t je;
    if (json_unpack_ex(v, &je, 0, fmt, dst) == 0) return 0;
    srv_api_bad(e, key, "'%s': %s", key, je.text);
    return -1;
}

/* A number field in [lo, hi]; *dst unchanged when absent. */
static int get_number(json_t *root, const char *key, double lo, double hi, float *dst, srv_api_error *e) {
    json_t *v = field(root, key);
    double d;
    if (!v) return 0;
    if (unpack(v, key, e, "F", &d)) return -1;
    if (!(d >= lo && d <= hi)) {
        srv_api_bad(e, key, "'%s' is %g, out of its range %g..%g", key, d, lo, hi);
        return -1;
    }
    *dst = (float)d;
    return 0;
}

/* An integer field in [lo, hi]; *present set when given. */
static int get_int(json_t *root, const char *key, json_int_t lo, json_int_t hi, json_int_t *dst, int *present,
                   srv_api_error *e) {
    json_t *v = field(root, key);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (unpack(v, key, e, "I", dst)) return -1;
    if (*dst < lo || *dst > hi) {
        srv_api_bad(e, key, "'%s' is %lld, out of its range %lld..%lld", key, (long long)*dst, (long long)lo,
                    (long long)hi);
        return -1;
    }
    return 0;
}

static int get_bool(json_t *root, const char *key, int *dst, srv_api_error *e) {
    json_t *v = field(root, key);
    return v ? unpack(v, key, e, "b", dst) : 0;
}

static char *dup_str(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int oom(srv_api_error *e) {
    srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
    return -1;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...}
 * parts (joined); null is empty (an assistant turn that called a tool). */
static int content_text(json_t *c, int i, char **out, srv_api_error *e) {
    char key[48];
    snprintf(key, sizeof key, "messages[%d].content", i);
    if (!c || json_is_null(c)) return (*out = dup_str("", 0)) ? 0 : oom(e);
    if (json_is_string(c)) return (*out = dup_str(json_string_value(c), json_string_length(c))) ? 0 : oom(e);
    if (!json_is_array(c)) {
        srv_api_bad(e, "messages", "'%s' must be a string or an array of text parts", key);
        return -1;
    }
    size_t n = 0, j;
    json_t *part;
    json_array_foreach(c, j, part) {
        const char *type, *text;
        json_error_t je;
        if (json_unpack_ex(part, &je, 0, "{s:s, s?s}", "type", &type, "text", &text)) {
            srv_api_bad(e, "messages", "'%s[%zu]': %s", key, j, je.text);
            return -1;
        }
        if (strcmp(type, "text") || !json_is_string(json_object_get(part, "text"))) {
            srv_api_bad(e, "messages", "'%s[%zu]': only text parts are supported (type '%s')", key, j, type);
            return -1;
        }
        n += json_string_length(json_object_get(part, "text"));
    }
    if (!(*out = malloc(n + 1))) return oom(e);
    n = 0;
    json_array_foreach(c, j, part) {
        json_t *t = json_object_get(part, "text");
        memcpy(*out + n, json_string_value(t), json_string_length(t));
        n += json_string_length(t);
    }
    (*out)[n] = 0;
    return 0;
}

/* ---- tool calls in requests ---- */

/* An assistant message's tool_calls, a tool message's tool_call_id. */
static int parse_msg_tools(json_t *m, size_t i, srv_msg *out, srv_api_error *e) {
    json_t *calls = field(m, "tool_calls"), *id = field(m, "tool_call_id");
    if (!strcmp(out->role, "tool")) {
        if (!json_is_string(id)) {
            srv_api_bad(e, "messages", "'messages[%zu].tool_call_id' (a string) is required in a tool message", i);
            return -1;
        }
        if (!(out->tool_call_id = dup_str(json_string_value(id), json_string_length(id)))) return oom(e);
    }
    if (!calls) return 0;
    if (strcmp(out->role, "assistant") || !json_is_array(calls) || json_array_size(calls) > 128) {
        srv_api_bad(e, "messages", "'messages[%zu].tool_calls': an array of at most 128 calls, in an assistant "
                                   "message", i);
        return -1;
    }
    if (json_array_size(calls) && !(out->calls = calloc(json_array_size(calls), sizeof *out->calls))) return oom(e);
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        const char *cid, *type = "function", *name;
        json_t *args = NULL;
        json_error_t je;
        if (json_unpack_ex(c, &je, 0, "{s:s, s?s, s:{s:s, s?o}}", "id", &cid, "type", &type, "function", "name",
                           &name, "arguments", &args) ||
            strcmp(type, "function") || (args && !json_is_string(args) && !json_is_object(args))) {
            srv_api_bad(e, "messages", "'messages[%zu].tool_calls[%zu]': not {\"id\", \"type\": \"function\", "
                                       "\"function\": {\"name\", \"arguments\": a JSON string}}%s%s", i, k,
                        je.text[0] ? ": " : "", je.text);
            return -1;
        }
        /* a call without arguments: some clients send "" (or blanks) for
         * it, read as {} (as an absent one) */
        int blank = args && json_is_string(args);
        for (size_t b = 0; blank && b < json_string_length(args); b++)
            blank = strchr(" \t\r\n", json_string_value(args)[b]) && json_string_value(args)[b];
        if (blank) args = NULL;
        /* the history goes back to the model as it is: arguments it cannot
         * read as a JSON object would be a malformed call in its prompt */
        if (args && json_is_string(args)) {
            json_t *parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, &je);
            int object = json_is_object(parsed);
            json_decref(parsed);
            if (!object) {
                srv_api_bad(e, "messages", "'messages[%zu].tool_calls[%zu].function.arguments' is not a JSON object's "
                                           "text%s%s", i, k, parsed ? "" : ": ", parsed ? "" : je.text);
                return -1;
            }
        }
        srv_tool_call *o = &out->calls[k];
        out->n_calls = (int)k + 1;
        o->id = dup_str(cid, strlen(cid));
        o->name = dup_str(name, strlen(name));
        o->arguments = !args ? dup_str("{}", 2)
                       : json_is_string(args) ? dup_str(json_string_value(args), json_string_length(args))
                                              : json_dumps(args, JSON_COMPACT);
        if (!o->id || !o->name || !o->arguments) return oom(e);
    }
    return 0;
}

/* A call's place in the history, for check_tool_ids's sort. */
typedef struct call_ref {
    const char *id;
    int msg, call;
} call_ref;

/* By id, then by place: a run of one id lists its calls in history order. */
static int call_ref_cmp(const void *pa, const void *pb) {
    const call_ref *a = pa, *b = pb;
    int c = strcmp(a->id, b->id);
    if (c) return c;
    if (a->msg != b->msg) return a->msg < b->msg ? -1 : 1;
    return (a->call > b->call) - (a->call < b->call);
}

/* A tool message answers a call of the assistant message before it (that
 * one, or after other tool messages), as OpenAI requires; a call's id is
 * unique in the history (a tool message answers one call, and two calls of
 * one id would make its answer ambiguous). The ids are compared sorted, not
 * pairwise: a body of 1 MiB holds some 30000 calls. */
static int check_tool_ids(const srv_api_req *r, srv_api_error *e) {
    size_t n = 0;
    for (int i = 0; i < r->n_msgs; i++) n += (size_t)r->msgs[i].n_calls;
    call_ref *refs = n ? malloc(n * sizeof *refs) : NULL;
    if (n && !refs) return oom(e);
    n = 0;
    for (int i = 0; i < r->n_msgs; i++)
        for (int k = 0; k < r->msgs[i].n_calls; k++) refs[n++] = (call_ref){r->msgs[i].calls[k].id, i, k};
    if (n > 1) qsort(refs, n, sizeof *refs, call_ref_cmp); /* qsort's array must not be NULL, even for none */
    /* of the calls whose id an earlier one has (each after the first of its
     * run), the first in the history is named, with the first of its id */
    const call_ref *dup = NULL, *first = NULL;
    for (size_t j = 1, start = 0; j < n; j++) {
        if (strcmp(refs[j].id, refs[start].id)) {
            start = j;
            continue;
        }
        if (j == start + 1 && (!dup || refs[j].msg < dup->msg || (refs[j].msg == dup->msg && refs[j].call < dup->call))) {
            dup = &refs[j];
            first = &refs[start];
        }
    }
    if (dup) {
        srv_api_bad(e, "messages", "'messages[%d].tool_calls[%d].id' '%.64s' is the id of an earlier call "
                                   "(messages[%d].tool_calls[%d]): ids must be unique", dup->msg, dup->call, dup->id,
                    first->msg, first->call);
        free(refs);
        return -1;
    }
    free(refs);
    for (int i = 0; i < r->n_msgs; i++) {
        if (strcmp(r->msgs[i].role, "tool")) continue;
        int a = i - 1, found = 0;
        while (a >= 0 && !strcmp(r->msgs[a].role, "tool")) a--;
        for (int k = 0; a >= 0 && k < r->msgs[a].n_calls; k++)
            found |= !strcmp(r->msgs[a].calls[k].id, r->msgs[i].tool_call_id);
        if (!found) {
            srv_api_bad(e, "messages", "'messages[%d].tool_call_id' '%.64s' answers no tool call of the assistant "
                                       "message before it", i, r->msgs[i].tool_call_id);
            return -1;
        }
    }
    return 0;
}

/* tools, tool_choice ("auto", "none", "required" or {"type": "function",
 * "function": {"name"}}), parallel_tool_calls: the chat API's. */
static int parse_tools(json_t *root, srv_kind kind, srv_api_req *r, srv_api_error *e) {
    json_t *tools = field(root, "tools"), *choice = field(root, "tool_choice");
    r->tool_choice = CLINFER_TOOL_AUTO;
    r->parallel_tool_calls = 1;
    if (get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls, e)) return -1;
    if (tools && (!json_is_array(tools) || (kind != SRV_CHAT && json_array_size(tools)))) {
        srv_api_bad(e, "tools", kind != SRV_CHAT ? "'tools' is for /v1/chat/completions"
                                                 : "'tools' must be an array of functions");
        return -1;
    }
    if (tools && json_array_size(tools) && !(r->tools = json_dumps(tools, JSON_COMPACT))) return oom(e);
    if (!choice) return 0;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        if (!strcmp(c, "auto")) r->tool_choice = CLINFER_TOOL_AUTO;
        else if (!strcmp(c, "none")) r->tool_choice = CLINFER_TOOL_NONE;
        else if (!strcmp(c, "required")) r->tool_choice = CLINFER_TOOL_REQUIRED;
        else {
            srv_api_bad(e, "tool_choice", "'tool_choice' '%.32s' is not auto, none, required or a function", c);
            return -1;
        }
    } else {
        const char *type, *name;
        json_error_t je;
        if (json_unpack_ex(choice, &je, 0, "{s:s, s:{s:s}}", "type", &type, "function", "name", &name) ||
            strcmp(type, "function")) {
            srv_api_bad(e, "tool_choice", "'tool_choice' is not auto, none, required or {\"type\": \"function\", "
                                          "\"function\": {\"name\": ...}}");
            return -1;
        }
        r->tool_choice = CLINFER_TOOL_NAMED;
        if (!(r->tool_name = dup_str(name, strlen(name)))) return oom(e);
    }
    if (!r->tools && (r->tool_choice == CLINFER_TOOL_REQUIRED || r->tool_choice == CLINFER_TOOL_NAMED)) {
        srv_api_bad(e, "tool_choice", "'tool_choice' asks for a call, and there are no 'tools'");
        return -1;
    }
    return 0;
}

static int parse_messages(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *msgs = field(root, "messages");
    if (!msgs) {
        srv_api_bad(e, "messages", "'messages' is required");
        return -1;
    }
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        srv_api_bad(e, "messages", "'messages' must be a non-empty array");
        return -1;
    }
    if (!(r->msgs = calloc(json_array_size(msgs), sizeof *r->msgs))) return oom(e);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role;
        json_t *content = NULL;
        json_error_t je;
        if (json_unpack_ex(m, &je, 0, "{s:s, s?o}", "role", &role, "content", &content)) {
            srv_api_bad(e, "messages", "'messages[%zu]': %s", i, je.text);
            return -1;
        }
        static const char *const ROLES[] = {"system", "user", "assistant", "tool"};
        if (!strcmp(role, "developer")) role = "system";
        const char *known = NULL;
        for (int k = 0; k < 4; k++)
            if (!strcmp(role, ROLES[k])) known = ROLES[k];
        if (!known) {
            srv_api_bad(e, "messages", "'messages[%zu].role' '%s' is not supported (system, user, assistant, tool)",
                        i, role);
            return -1;
        }
        r->msgs[i].role = known;
        r->n_msgs = (int)i + 1;
        if (content_text(content, (int)i, &r->msgs[i].content, e) || parse_msg_tools(m, i, &r->msgs[i], e)) return -1;
    }
    return check_tool_ids(r, e);
}

/* prompt: a string, an array of one string, or an array of token ids. */
static int parse_prompt(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *p = field(root, "prompt");
    if (!p) {
        srv_api_bad(e, "prompt", "'prompt' is required");
        return -1;
    }
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) return (r->prompt = dup_str(json_string_value(p), json_string_length(p))) ? 0 : oom(e);
    if (!json_is_array(p) || json_array_size(p) == 0) {
        srv_api_bad(e, "prompt", "'prompt' must be a string or a non-empty array of token ids (n = 1 only)");
        return -1;
    }
    if (!(r->prompt_ids = malloc(json_array_size(p) * sizeof *r->prompt_ids))) return oom(e);
    size_t i;
    json_t *v;
    json_array_foreach(p, i, v) {
        if (json_is_string(v)) {
            srv_api_bad(e, "prompt", "'prompt' holds several prompts: one a request (n = 1 only)");
            return -1;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            srv_api_bad(e, "prompt", "'prompt[%zu]' is not a token id", i);
            return -1;
        }
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
        r->n_prompt_ids = (int)i + 1;
    }
    return 0;
}

static int parse_stop(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *s = field(root, "stop");
    if (!s) return 0;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0) return 0;
        return (r->stop[r->n_stop++] = dup_str(json_string_value(s), json_string_length(s))) ? 0 : oom(e);
    }
    if (!json_is_array(s) || json_array_size(s) > SRV_MAX_STOP) {
        srv_api_bad(e, "stop", "'stop' must be a string or an array of at most %d strings", SRV_MAX_STOP);
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v)) {
            srv_api_bad(e, "stop", "'stop[%zu]' is not a string", i);
            return -1;
        }
        if (json_string_length(v) == 0) continue;
        if (!(r->stop[r->n_stop++] = dup_str(json_string_value(v), json_string_length(v)))) return oom(e);
    }
    return 0;
}

/* Fields clinfer does not implement: a clear 400 rather than ignoring them. */
static int refuse_unsupported(json_t *root, srv_api_error *e) {
    static const char *const PENALTIES[] = {"presence_penalty", "frequency_penalty"};
    for (int i = 0; i < 2; i++) {
        float x = 0;
        if (get_number(root, PENALTIES[i], -2, 2, &x, e)) return -1;
        if (x != 0) {
            srv_api_bad(e, PENALTIES[i], "'%s' is not supported (only 0)", PENALTIES[i]);
            return -1;
        }
    }
    static const char *const UNSUPPORTED[] = {"functions", "suffix"};
    for (int i = 0; i < 2; i++) {
        json_t *v = field(root, UNSUPPORTED[i]);
        if (v && !((json_is_array(v) || json_is_object(v)) && json_array_size(v) + json_object_size(v) == 0)) {
            srv_api_bad(e, UNSUPPORTED[i], "'%s' is not supported", UNSUPPORTED[i]);
            return -1;
        }
    }
    int flag = 0;
    if (get_bool(root, "echo", &flag, e)) return -1;
    if (flag) {
        srv_api_bad(e, "echo", "'echo' is not supported");
        return -1;
    }
    return 0;
}

/* n: how many choices (the server's slots bound it further). */
static int parse_n(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_int_t n = 1;
    if (get_int(root, "n", 1, SRV_MAX_N, &n, NULL, e)) return -1;
    r->n = (int)n;
    return 0;
}

/* Chat: logprobs (a bool) and top_logprobs (0..20, only with logprobs);
 * completions: logprobs (an integer 0..20, the alternatives listed; false
 * reads as absent). */
static int parse_logprobs(json_t *root, srv_kind kind, srv_api_req *r, srv_api_error *e) {
    json_t *lp = field(root, "logprobs");
    json_int_t top = 0;
    if (kind == SRV_CHAT) {
        int given;
        if (get_bool(root, "logprobs", &r->logprobs, e) ||
            get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, &given, e))
            return -1;
        if (given && !r->logprobs) {
            srv_api_bad(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
            return -1;
        }
    } else if (lp && !json_is_false(lp)) {
        if (!json_is_integer(lp)) {
            srv_api_bad(e, "logprobs", "'logprobs' must be an integer 0..%d (the alternatives each token lists)",
                        SRV_MAX_TOP_LOGPROBS);
            return -1;
        }
        if (get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, NULL, e)) return -1;
        r->logprobs = 1;
    }
    r->top_logprobs = (int)top;
    return 0;
}

/* logit_bias: {"token id": bias -100..100}; the ids' range against the
 * vocabulary is the caller's to check. */
static int parse_logit_bias(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *b = field(root, "logit_bias");
    if (!b) return 0;
    if (!json_is_object(b)) {
        srv_api_bad(e, "logit_bias", "'logit_bias' must be an object of token ids to biases");
        return -1;
    }
    size_t n = json_object_size(b);
    if (!n) return 0;
    if (!(r->bias_ids = malloc(n * sizeof *r->bias_ids)) || !(r->bias = malloc(n * sizeof *r->bias))) return oom(e);
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!(key[0] >= '0' && key[0] <= '9') || *end || id > INT32_MAX) {
            srv_api_bad(e, "logit_bias", "'logit_bias' key '%.40s' is not a token id", key);
            return -1;
        }
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100)) {
            srv_api_bad(e, "logit_bias", "'logit_bias[%.40s]' must be a number -100..100", key);
            return -1;
        }
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)json_number_value(v);
    }
    return 0;
}

/* One way of holding the reply to a structure: *param names the field
 * already given (a second is a 400 naming both). */
static int set_format(srv_api_req *r, srv_format f, const char *param, json_t *text_of, srv_api_error *e) {
    if (r->format != SRV_FORMAT_TEXT) {
        srv_api_bad(e, param, "'%s' and '%s' both constrain the reply: give one", r->format_param, param);
        return -1;
    }
    r->format = f;
    r->format_param = param;
    if (!text_of) return 0;
    r->format_text = json_is_string(text_of) ? dup_str(json_string_value(text_of), json_string_length(text_of))
                                             : json_dumps(text_of, JSON_COMPACT | JSON_ENCODE_ANY);
    return r->format_text ? 0 : oom(e);
}

/* response_format {"type": "text" | "json_object" | "json_schema",
 * "json_schema": {"name", "schema", "strict"}}, and llama-server's
 * json_schema (a schema object) and grammar (GBNF text; "" is none). The
 * schema is converted and the grammar compiled by the caller. */
static int parse_format(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *rf = field(root, "response_format"), *js = field(root, "json_schema"), *g = field(root, "grammar");
    if (rf) {
        const char *type;
        json_t *spec = NULL, *schema = NULL;
        json_error_t je;
        if (json_unpack_ex(rf, &je, 0, "{s:s, s?o, s?o}", "type", &type, "json_schema", &spec, "schema", &schema)) {
            srv_api_bad(e, "response_format", "'response_format': %s", je.text);
            return -1;
        }
        if (!strcmp(type, "json_object")) {
            /* llama-server's {"type": "json_object", "schema": {...}}: the
             * schema is enforced, not dropped (that would fail open) */
            if (schema && !json_is_null(schema)) {
                if (!json_is_object(schema) && !json_is_boolean(schema)) {
                    srv_api_bad(e, "response_format", "'response_format.schema' must be a JSON Schema (an object)");
                    return -1;
                }
                if (set_format(r, SRV_FORMAT_JSON_SCHEMA, "response_format", schema, e)) return -1;
            } else if (set_format(r, SRV_FORMAT_JSON_OBJECT, "response_format", NULL, e)) {
                return -1;
            }
        } else if (!strcmp(type, "json_schema")) {
            const char *name = NULL;
            int strict = 0;
            schema = NULL; /* json_schema.schema, not a json_object's */
            if (!spec || json_unpack_ex(spec, &je, 0, "{s?s, s?o, s?b}", "name", &name, "schema", &schema, "strict",
                                        &strict)) {
                srv_api_bad(e, "response_format", "'response_format.json_schema': %s",
                            spec ? je.text : "required with type json_schema ({\"name\", \"schema\", \"strict\"})");
                return -1;
            }
            if (!json_is_object(schema) && !json_is_boolean(schema)) {
                srv_api_bad(e, "response_format", "'response_format.json_schema.schema' must be a JSON Schema (an object)");
                return -1;
            }
            /* strict or not, the schema is enforced (a grammar holds the sampler to it) */
            if (set_format(r, SRV_FORMAT_JSON_SCHEMA, "response_format", schema, e)) return -1;
        } else if (strcmp(type, "text")) {
            srv_api_bad(e, "response_format", "'response_format.type' '%.32s' is not text, json_object or json_schema",
                        type);
            return -1;
        }
    }
    if (js) {
        if (!json_is_object(js) && !json_is_boolean(js)) {
            srv_api_bad(e, "json_schema", "'json_schema' must be a JSON Schema (an object)");
            return -1;
        }
        if (set_format(r, SRV_FORMAT_JSON_SCHEMA, "json_schema", js, e)) return -1;
    }
    if (g) {
        if (!json_is_string(g)) {
            srv_api_bad(e, "grammar", "'grammar' must be a string (GBNF)");
            return -1;
        }
        if (json_string_length(g) && set_format(r, SRV_FORMAT_GRAMMAR, "grammar", g, e)) return -1;
    }
    if (r->format != SRV_FORMAT_TEXT && r->tools && r->tool_choice != CLINFER_TOOL_NONE) {
        srv_api_bad(e, r->format_param, "'%s' and 'tools' both constrain the reply: give one (or tool_choice none)",
                    r->format_param);
        return -1;
    }
    return 0;
}

/* llama-server's reasoning_format: "auto" (the default), "none", "deepseek". */
static int parse_reasoning(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *v = field(root, "reasoning_format");
    const char *name;
    srv_reasoning_format f = SRV_REASONING_AUTO;
    if (v && unpack(v, "reasoning_format", e, "s", &name)) return -1;
    if (v && srv_reasoning_format_parse(name, &f)) {
        srv_api_bad(e, "reasoning_format", "'reasoning_format' is '%.64s', not one of auto, none, deepseek", name);
        return -1;
    }
    r->reasoning_format = v ? (int)f : -1;
    /* reasoning_budget: -1 unlimited, 0 no thinking (llama-server's), N > 0 tokens of
     * thought before its close is forced (vLLM's and SGLang's budget; reasoning.h's srv_budget) */
    json_int_t budget = -1;
    if (get_int(root, "reasoning_budget", -1, 1 << 24, &budget, &r->has_budget, e)) return -1;
    r->reasoning_budget = (int)budget;
    /* chat_template_kwargs: more variables for the template (llama-server's; {"enable_thinking": false}) */
    json_t *kw = field(root, "chat_template_kwargs");
    if (kw && !json_is_object(kw)) {
        srv_api_bad(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        return -1;
    }
    if (kw && json_object_size(kw) && !(r->template_kwargs = json_dumps(kw, JSON_COMPACT))) return oom(e);
    return 0;
}

static int parse_fields(json_t *root, srv_kind kind, srv_api_req *r, srv_api_error *e) {
    json_t *model = field(root, "model");
    if (model) {
        const char *s;
        if (unpack(model, "model", e, "s", &s)) return -1;
        if (!(r->model = dup_str(s, json_string_length(model)))) return oom(e);
    }
    if (kind == SRV_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e)) return -1;
    if (refuse_unsupported(root, e) || parse_tools(root, kind, r, e) || parse_n(root, r, e) ||
        parse_logprobs(root, kind, r, e) || parse_logit_bias(root, r, e) || parse_format(root, r, e) ||
        parse_reasoning(root, r, e))
        return -1;
    /* max_completion_tokens is the chat API's newer name of max_tokens */
    json_int_t mt = 0, seed = 0;
    int given;
    if (get_int(root, "max_tokens", 1, 1 << 24, &mt, &given, e)) return -1;
    if (!given && get_int(root, "max_completion_tokens", 1, 1 << 24, &mt, NULL, e)) return -1;
    r->max_tokens = (int)mt;
    r->sp = clinfer_sampler_default_params();
    if (get_number(root, "temperature", 0, 2, &r->sp.temperature, e) ||
        get_number(root, "top_p", 0, 1, &r->sp.top_p, e) || get_number(root, "min_p", 0, 1, &r->sp.min_p, e))
        return -1;
    json_int_t top_k = r->sp.top_k;
    if (get_int(root, "top_k", 0, 1 << 30, &top_k, NULL, e)) return -1;
    r->sp.top_k = (int)top_k;
    if (get_int(root, "seed", INT64_MIN, INT64_MAX, &seed, &r->has_seed, e)) return -1;
    r->sp.seed = (uint64_t)seed;
    if (parse_stop(root, r, e) || get_bool(root, "stream", &r->stream, e)) return -1;
    json_t *so = field(root, "stream_options");
    if (so) {
        json_error_t je;
        if (json_unpack_ex(so, &je, 0, "{s?b}", "include_usage", &r->include_usage)) {
            srv_api_bad(e, "stream_options", "'stream_options': %s", je.text);
            return -1;
        }
    }
    return 0;
}

json_t *srv_api_load(const char *body, size_t len, srv_api_error *e) {
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        srv_api_error_set(e, 400, "invalid_request_error", "invalid_json", NULL,
                          "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (json_is_object(root)) return root;
    srv_api_bad(e, NULL, "the body must be a JSON object");
    json_decref(root);
    return NULL;
}

int srv_api_parse(const char *body, size_t len, srv_kind kind, srv_api_req *r, srv_api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    json_t *root = srv_api_load(body, len, e);
    int rc = root ? parse_fields(root, kind, r, e) : -1;
    if (rc == 0) rc = srv_lora_parse(root, r, e); /* llama-server's "lora" (adapters.h) */
    json_decref(root);
    return rc;
}

void srv_api_req_free(srv_api_req *r) {
    free(r->template_kwargs);
    for (int i = 0; i < r->n_msgs; i++) {
        free(r->msgs[i].content);
        for (int k = 0; k < r->msgs[i].n_calls; k++) {
            free(r->msgs[i].calls[k].id);
            free(r->msgs[i].calls[k].name);
            free(r->msgs[i].calls[k].arguments);
        }
        free(r->msgs[i].calls);
        free(r->msgs[i].tool_call_id);
    }
    free(r->msgs);
    free(r->tools);
    free(r->tool_name);
    free(r->model);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->bias_ids);
    free(r->bias);
    free(r->format_text);
    memset(r, 0, sizeof *r);
}

/* ---- answers -------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t k;
    unsigned min;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] < 0xe0) k = 2, min = 0x80;
    else if (s[0] >= 0xe0 && s[0] < 0xf0) k = 3, min = 0x800;
    else if (s[0] >= 0xf0 && s[0] < 0xf5) k = 4, min = 0x10000;
    else return 0;
    if (k > n) return 0;
    unsigned cp = s[0] & (0x7f >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    return cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp < 0xe000) ? k : 0;
}

char *srv_api_utf8(const char *text, size_t len, size_t *out_len) {
    char *buf = malloc(len * 3 + 1);
    if (!buf) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_len((const unsigned char *)text + i, len - i);
        if (k) memcpy(buf + o, text + i, k), o += k, i += k;
        else memcpy(buf + o, "\xef\xbf\xbd", 3), o += 3, i++;
    }
    buf[o] = 0;
    if (out_len) *out_len = o;
    return buf;
}

/* A JSON string of text (jansson takes valid UTF-8 only; a model can emit
 * any bytes). */
static json_t *text_json(const char *text, size_t len) {
    size_t n;
    char *buf = srv_api_utf8(text, len, &n);
    json_t *s = buf ? json_stringn_nocheck(buf, n) : NULL;
    free(buf);
    return s;
}

/* json_pack that says why it failed (clinfer_last_error): a string that is not
 * UTF-8 is refused, not only memory. A part given as NULL failed before
 * and said why already. */
static json_t *vpack(const char *fmt, va_list ap) {
    json_error_t je;
    json_t *j = json_vpack_ex(&je, 0, fmt, ap);
    if (!j && strcmp(je.text, "NULL object")) clinfer_fail(CLINFER_ERR_FORMAT, "cannot encode the answer as JSON: %s", je.text);
    return j;
}

static json_t *pack(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *j = vpack(fmt, ap);
    va_end(ap);
    return j;
}

static char *dump(json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (j && !s) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    json_decref(j);
    return s;
}

/* The message may quote the request's bytes (jansson's parse errors do). */
char *srv_api_error_json(const srv_api_error *e) {
    return dump(pack("{s:{s:o, s:s, s:s?, s:s?}}", "error", "message", text_json(e->message, strlen(e->message)),
                     "type", e->type, "param", e->param, "code", e->code));
}

static json_t *usage_json(const srv_api_usage *u) {
    return pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", u->prompt_tokens, "completion_tokens",
                u->completion_tokens, "total_tokens", u->prompt_tokens + u->completion_tokens,
                "prompt_tokens_details", "cached_tokens", u->cached_tokens);
}

/* clinfer's timings, in llama.cpp's server's names. */
static json_t *timings_json(const srv_api_usage *u) {
    int np = u->prompt_tokens - u->cached_tokens, ng = u->completion_tokens;
    return pack("{s:i, s:i, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", u->cached_tokens, "prompt_n", np,
                "prompt_ms", u->prompt_ms, "prompt_per_second", u->prompt_ms > 0 ? np * 1e3 / u->prompt_ms : 0.0,
                "predicted_n", ng, "predicted_ms", u->gen_ms, "predicted_per_second",
                u->gen_ms > 0 ? ng * 1e3 / u->gen_ms : 0.0, "queue_ms", u->queue_ms);
}

static json_t *head(const srv_api_resp *r, int chunk) {
    const char *object = r->kind == SRV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                             : "text_completion";
    return pack("{s:s, s:s, s:I, s:s, s:s}", "id", r->id, "object", object, "created", (json_int_t)r->created,
                "model", r->model, "system_fingerprint", "clinfer");
}

/* A logprob as JSON: OpenAI's -9999 for a token the model rules out (JSON
 * has no -inf). */
static json_t *lp_real(float lp) { return json_real(lp > -9999.0f ? lp : -9999.0); }

/* A call's strings came from the model: made valid UTF-8. */
static json_t *call_json(const srv_api_call *c) {
    const char *args = c->arguments ? c->arguments : "";
    return pack("{s:s, s:s, s:{s:o, s:o}}", "id", c->id, "type", "function", "function", "name",
                text_json(c->name, strlen(c->name)), "arguments", text_json(args, strlen(args)));
}

static json_t *calls_json(const srv_api_choice *c) {
    json_t *a = json_array();
    for (int i = 0; a && i < c->n_calls; i++)
        if (json_array_append_new(a, call_json(&c->calls[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *bytes_json(const char *p, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((unsigned char)p[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *chat_tok_json(const srv_api_tok *t) {
    return pack("{s:o, s:o, s:o}", "token", text_json(t->piece, t->len), "logprob", lp_real(t->logprob), "bytes",
                bytes_json(t->piece, t->len));
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}], "refusal": null} */
static json_t *chat_logprobs_json(const srv_api_logprob *lp, int n) {
    json_t *content = json_array();
    for (int i = 0; content && i < n; i++) {
        json_t *e = chat_tok_json(&lp[i].tok), *top = json_array();
        for (int k = 0; top && k < lp[i].n_top; k++)
            if (json_array_append_new(top, chat_tok_json(&lp[i].top[k]))) json_decref(top), top = NULL;
        if (!e || !top) json_decref(e), json_decref(top), e = NULL;
        /* the _new calls take their value even when they fail */
        if (!e || json_object_set_new(e, "top_logprobs", top) || json_array_append_new(content, e)) {
            json_decref(content);
            return NULL;
        }
    }
    return pack("{s:o, s:n}", "content", content, "refusal");
}

/* completions (the legacy shape): {tokens, token_logprobs, top_logprobs:
 * [{token: logprob}], text_offset}; two alternatives of the same text keep
 * the likelier's logprob (an object's keys are unique). */
static json_t *completion_logprobs_json(const srv_api_logprob *lp, int n) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offsets = json_array();
    int ok = tokens && lps && tops && offsets;
    for (int i = 0; ok && i < n; i++) {
        json_t *top = json_object();
        ok = top != NULL;
        for (int k = lp[i].n_top - 1; ok && k >= 0; k--) { /* the likelier last: it wins a shared key */
            size_t len;
            char *key = srv_api_utf8(lp[i].top[k].piece, lp[i].top[k].len, &len);
            ok = key && !json_object_setn_new_nocheck(top, key, len, lp_real(lp[i].top[k].logprob));
            free(key);
        }
        if (!ok) json_decref(top);
        /* the _new calls take their value even when they fail */
        ok = ok && !json_array_append_new(tops, top) &&
             !json_array_append_new(tokens, text_json(lp[i].tok.piece, lp[i].tok.len)) &&
             !json_array_append_new(lps, lp_real(lp[i].tok.logprob)) &&
             !json_array_append_new(offsets, json_integer((json_int_t)lp[i].offset));
    }
    if (!ok) {
        json_decref(tokens), json_decref(lps), json_decref(tops), json_decref(offsets);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    return pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                "text_offset", offsets);
}

static json_t *logprobs_json(const srv_api_resp *r, const srv_api_choice *c) {
    if (!c->logprobs) return json_null();
    return r->kind == SRV_CHAT ? chat_logprobs_json(c->lp, c->n_lp) : completion_logprobs_json(c->lp, c->n_lp);
}

static json_t *choice_finish_json(const srv_api_choice *c) { return c->finish ? json_string(c->finish) : json_null(); }

static json_t *choice_json_text(const srv_api_resp *r, const srv_api_choice *c);

/* A chat choice with its reasoning apart: message.reasoning_content after content (llama-server's place). */
static json_t *choice_json(const srv_api_resp *r, const srv_api_choice *c) {
    json_t *j = choice_json_text(r, c);
    json_t *msg = j && r->kind == SRV_CHAT && c->reasoning_len ? json_object_get(j, "message") : NULL;
    if (msg && json_object_set_new(msg, "reasoning_content", text_json(c->reasoning, c->reasoning_len))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *choice_json_text(const srv_api_resp *r, const srv_api_choice *c) {
    if (r->kind == SRV_CHAT && c->n_calls)
        return pack("{s:i, s:{s:s, s:o, s:o}, s:o, s:o}", "index", c->index, "message", "role", "assistant",
                    "content", c->len ? text_json(c->text, c->len) : json_null(), "tool_calls", calls_json(c),
                    "logprobs", logprobs_json(r, c), "finish_reason", choice_finish_json(c));
    if (r->kind == SRV_CHAT)
        return pack("{s:i, s:{s:s, s:o}, s:o, s:o}", "index", c->index, "message", "role", "assistant", "content",
                    text_json(c->text, c->len), "logprobs", logprobs_json(r, c), "finish_reason",
                    choice_finish_json(c));
    return pack("{s:i, s:o, s:o, s:o}", "index", c->index, "text", text_json(c->text, c->len), "logprobs",
                logprobs_json(r, c), "finish_reason", choice_finish_json(c));
}

char *srv_api_choices_json(const srv_api_resp *r, const srv_api_choice *c, int n, const srv_api_usage *u) {
    json_t *j = head(r, 0), *choices = json_array();
    for (int i = 0; j && choices && i < n; i++)
        if (json_array_append_new(choices, choice_json(r, &c[i]))) json_decref(choices), choices = NULL;
    if (!j) json_decref(choices);
    if (!j || !choices || json_object_set_new(j, "choices", choices) ||
        json_object_set_new(j, "usage", usage_json(u)) || json_object_set_new(j, "timings", timings_json(u))) {
        json_decref(j);
        return NULL;
    }
    return dump(j);
}

char *srv_api_completion_json(const srv_api_resp *r, const char *text, size_t len, const srv_api_usage *u) {
    srv_api_choice c = {.text = text, .len = len, .finish = r->finish};
    return srv_api_choices_json(r, &c, 1, u);
}

char *srv_api_choice_chunk_json(const srv_api_resp *r, int role, const srv_api_choice *c) {
    json_t *j = head(r, 1), *choice;
    if (r->kind == SRV_CHAT) {
        json_t *delta = c->reasoning_len ? pack("{s:o}", "reasoning_content", text_json(c->reasoning, c->reasoning_len))
                        : c->finish && !c->len ? json_object()
                                               : pack("{s:o}", "content", text_json(c->text, c->len));
        if (role && delta) json_object_set_new(delta, "role", json_string("assistant"));
        choice = pack("{s:i, s:o, s:o, s:o}", "index", c->index, "delta", delta, "logprobs", logprobs_json(r, c),
                      "finish_reason", choice_finish_json(c));
    } else {
        choice = pack("{s:i, s:o, s:o, s:o}", "index", c->index, "text", text_json(c->text, c->len), "logprobs",
                      logprobs_json(r, c), "finish_reason", choice_finish_json(c));
    }
    if (!j) json_decref(choice); /* else the pack below takes it */
    if (!j || json_object_set_new(j, "choices", pack("[o]", choice))) {
        json_decref(j);
        return NULL;
    }
    return dump(j);
}

char *srv_api_tool_chunk_json(const srv_api_resp *r, int choice, int index, const char *id, const char *name,
                              const char *args, size_t args_len) {
    json_t *fn = name ? pack("{s:o, s:o}", "name", text_json(name, strlen(name)), "arguments", text_json(args, args_len))
                      : pack("{s:o}", "arguments", text_json(args, args_len));
    json_t *call = id ? pack("{s:i, s:s, s:s, s:o}", "index", index, "id", id, "type", "function", "function", fn)
                      : pack("{s:i, s:o}", "index", index, "function", fn);
    json_t *j = head(r, 1);
    json_t *choices = pack("[{s:i, s:{s:[o]}, s:n, s:n}]", "index", choice, "delta", "tool_calls", call, "logprobs",
                           "finish_reason");
    if (!j) json_decref(choices); /* else json_object_set_new takes it */
    if (!j || json_object_set_new(j, "choices", choices)) {
        json_decref(j);
        return NULL;
    }
    return dump(j);
}

char *srv_api_chunk_json(const srv_api_resp *r, int role, const char *text, size_t len, const srv_api_usage *u) {
    if (!u) {
        srv_api_choice c = {.text = text, .len = len, .finish = r->finish};
        return srv_api_choice_chunk_json(r, role, &c);
    }
    json_t *j = head(r, 1);
    if (!j || json_object_set_new(j, "choices", json_array()) || json_object_set_new(j, "usage", usage_json(u)) ||
        json_object_set_new(j, "timings", timings_json(u))) {
        json_decref(j);
        return NULL;
    }
    return dump(j);
}

char *srv_api_models_json(const char *model, long long created, int n_ctx) {
    return dump(pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:i}}]}", "object", "list", "data", "id", model, "object",
                     "model", "created", (json_int_t)created, "owned_by", "clinfer", "meta", "n_ctx", n_ctx));
}

/* ---- the helpers, exported ------------------------------------------------- */

json_t *srv_api_field(json_t *root, const char *key) { return field(root, key); }
int srv_api_unpack(json_t *v, const char *key, srv_api_error *e, const char *fmt, void *dst) {
    return unpack(v, key, e, fmt, dst);
}
json_t *srv_api_text_json(const char *text, size_t len) { return text_json(text, len); }
char *srv_api_dump(json_t *j) { return dump(j); }
json_t *srv_api_pack(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *j = vpack(fmt, ap);
    va_end(ap);
    return j;
}

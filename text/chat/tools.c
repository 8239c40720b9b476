#include "tools.h"
#include "buf.h"
#include "tools_impl.h"
#include "json_schema.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ChatML's call tags (Qwen2.5's template; SmolLM2's defines no format of
 * its own, and it was tuned on these). */
static const char OPEN[] = "<tool_call>", CLOSE[] = "</tool_call>";
enum { OPEN_LEN = sizeof OPEN - 1, CLOSE_LEN = sizeof CLOSE - 1 };

static int llama31(const clf_chat *c) { return c->format == CLF_CHAT_LLAMA3 && c->knowledge[0]; }

clf_tool_format clf_tools_format(const clf_chat *c) {
    clf_tool_format f = clf_tf_detect(c->jinja);
    if (f != CLF_TOOLS_NONE) return f;
    if (c->format == CLF_CHAT_CHATML) return CLF_TOOLS_HERMES;
    if (llama31(c)) return CLF_TOOLS_LLAMA3;
    return CLF_TOOLS_NONE;
}

const char *clf_tools_format_name(clf_tool_format f) {
    static const char *const NAMES[] = {"none", "Hermes (ChatML)", "Llama 3.1", "Mistral", "Mistral (ARGS)",
                                        "Harmony (gpt-oss)", "DeepSeek R1", "DeepSeek V3.1", "Granite", "Command R",
                                        "Command R7B", "Qwen3-Coder (XML)", "GLM 4.5+", "Kimi K2",
                                        "functionary v3.1", "functionary v3.2"};
    return (unsigned)f < sizeof NAMES / sizeof *NAMES ? NAMES[f] : "?";
}

clf_status clf_tools_supported(const clf_chat *c) {
    if (clf_tools_format(c) != CLF_TOOLS_NONE) return CLF_OK;
    return clf_fail(CLF_ERR_FORMAT, "the %s chat format%s has no tool-call syntax (tools work with ChatML/Hermes/Qwen, "
                                    "Llama 3.1+, Mistral, gpt-oss, DeepSeek R1/V3.1, Granite, Command R, Qwen3-Coder, "
                                    "GLM 4.5+, Kimi K2 and functionary v3.1/v3.2)",
                    clf_chat_format_name(c->format), c->format == CLF_CHAT_LLAMA3 ? " before Llama 3.1" : "");
}

/* ---- the tools ------------------------------------------------------------ */

struct clf_tools {
    clf_chat chat;
    json_t *arr;         /* the tools as given */
    int n;
    const char **names;  /* into arr */
    json_t **params;     /* each function's parameters (borrowed), or NULL */
};

/* OpenAI's rule for a function's name. */
static int good_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", s[i])) return 0;
    return 1;
}

static clf_status check_tool(clf_tools *t, int i, json_t *tool) {
    json_t *fn = json_object_get(tool, "function"), *type = json_object_get(tool, "type");
    if (!json_is_object(tool) || !json_is_string(type) || strcmp(json_string_value(type), "function"))
        return clf_fail(CLF_ERR_ARG, "tools[%d]: not {\"type\": \"function\", \"function\": {...}}", i);
    json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters"),
           *desc = json_object_get(fn, "description");
    if (!json_is_object(fn) || !json_is_string(name))
        return clf_fail(CLF_ERR_ARG, "tools[%d].function: an object with a \"name\" is required", i);
    if (!good_name(json_string_value(name)))
        return clf_fail(CLF_ERR_ARG, "tools[%d].function.name '%.64s' is not 1 to 64 of a-z, A-Z, 0-9, _ and -", i,
                        json_string_value(name));
    if (desc && !json_is_string(desc) && !json_is_null(desc))
        return clf_fail(CLF_ERR_ARG, "tools[%d].function.description is not a string", i);
    if (params && !json_is_object(params) && !json_is_null(params))
        return clf_fail(CLF_ERR_ARG, "tools[%d].function.parameters is not a JSON Schema object", i);
    /* a call's arguments are an object (OpenAI's, and every template's):
     * a schema of anything else would make the call's grammar a contradiction */
    json_t *ptype = json_is_object(params) ? json_object_get(params, "type") : NULL;
    if (ptype && !(json_is_string(ptype) && !strcmp(json_string_value(ptype), "object")))
        return clf_fail(CLF_ERR_ARG, "tools[%d].function.parameters is not the schema of an object (its type is not "
                                     "\"object\")", i);
    for (int k = 0; k < i; k++)
        if (!strcmp(t->names[k], json_string_value(name)))
            return clf_fail(CLF_ERR_ARG, "tools[%d]: a second function named '%s'", i, t->names[k]);
    t->names[i] = json_string_value(name);
    t->params[i] = json_is_object(params) ? params : NULL;
    return CLF_OK;
}

clf_status clf_tools_create(const clf_chat *c, const char *json, size_t len, clf_tools **out) {
    *out = NULL;
    CLF_TRY(clf_tools_supported(c));
    json_error_t je;
    json_t *arr = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!arr) return clf_fail(CLF_ERR_ARG, "tools: not JSON: %s", je.text);
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > 1024) {
        json_decref(arr);
        return clf_fail(CLF_ERR_ARG, "tools: an array of 1 to 1024 functions is required");
    }
    clf_tools *t = calloc(1, sizeof *t);
    int n = (int)json_array_size(arr);
    if (t) {
        t->names = calloc((size_t)n, sizeof *t->names);
        t->params = calloc((size_t)n, sizeof *t->params);
    }
    if (!t || !t->names || !t->params) {
        if (t) free(t->names), free(t->params);
        free(t);
        json_decref(arr);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    t->chat = *c;
    t->arr = arr;
    t->n = n;
    for (int i = 0; i < n; i++) {
        clf_status st = check_tool(t, i, json_array_get(arr, (size_t)i));
        if (st != CLF_OK) {
            clf_tools_free(t);
            return st;
        }
    }
    *out = t;
    return CLF_OK;
}

void clf_tools_free(clf_tools *t) {
    if (!t) return;
    json_decref(t->arr);
    free(t->names);
    free(t->params);
    free(t);
}

int clf_tools_count(const clf_tools *t) { return t ? t->n : 0; }
const char *clf_tools_name(const clf_tools *t, int i) { return t && i >= 0 && i < t->n ? t->names[i] : NULL; }

/* ---- rendering ------------------------------------------------------------ */

/* A text being built, with the spans that are plain text (the caller's:
 * messages, tools, calls) for clf_tokenize_plain; the first failure sticks. */
typedef struct text {
    clf_buf b;   /* the text (the core's buffer) */
    clf_span *sp;
    int n, cap;
    clf_status st;
} text;

static void put(text *t, const char *s, size_t n, int plain) {
    if (t->st != CLF_OK) return;
    size_t at = t->b.n; /* where s starts */
    if (clf_buf_add(&t->b, s, n) != CLF_OK) {
        t->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return;
    }
    if (plain && n) {
        if (t->n && t->sp[t->n - 1].off + t->sp[t->n - 1].len == at) {
            t->sp[t->n - 1].len += n;
        } else {
            if (t->n == t->cap) {
                int cap = t->cap ? 2 * t->cap : 16;
                clf_span *v = realloc(t->sp, (size_t)cap * sizeof *v);
                if (!v) {
                    t->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
                    return;
                }
                t->sp = v;
                t->cap = cap;
            }
            t->sp[t->n++] = (clf_span){at, n};
        }
    }
}

static void mark(text *t, const char *s) { put(t, s, strlen(s), 0); }  /* the template's text */
static void plain(text *t, const char *s) { put(t, s ? s : "", s ? strlen(s) : 0, 1); }

/* Jinja's trim, as Llama's template applies it to messages. */
static void plain_trimmed(text *t, const char *s) {
    static const char WS[] = " \t\n\r\v\f";
    if (!s) return;
    size_t n = strlen(s);
    while (n && strchr(WS, *s)) s++, n--;
    while (n && strchr(WS, s[n - 1])) n--;
    put(t, s, n, 1);
}

/* json as the templates' tojson writes it (Python's json.dumps: ", " and
 * ": ", keys in order, UTF-8 as it is); indent 4 for Llama's tools. */
static void put_json(text *t, json_t *j, size_t flags) {
    char *s = json_dumps(j, flags | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!s) {
        if (t->st == CLF_OK) t->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return;
    }
    plain(t, s);
    free(s);
}

/* A call's arguments: OpenAI sends the JSON as a string, the templates
 * write a dict through tojson: re-encoded so; text that is not JSON as it is. */
static void put_arguments(text *t, const char *args) {
    json_t *j = args ? json_loads(args, JSON_DECODE_ANY, NULL) : NULL;
    if (j) put_json(t, j, 0);
    else plain(t, args);
    json_decref(j);
}

static clf_status check_role(const clf_tool_msg *m, int i) {
    if (!m->role) return clf_fail(CLF_ERR_ARG, "message %d has no role", i);
    static const char *const ROLES[] = {"system", "user", "assistant", "tool"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(m->role, ROLES[k])) {
            if (m->n_calls && k != 2) return clf_fail(CLF_ERR_ARG, "message %d: only an assistant makes tool calls", i);
            for (int c = 0; c < m->n_calls; c++)
                if (!m->calls[c].name) return clf_fail(CLF_ERR_ARG, "message %d: tool call %d has no name", i, c);
            return CLF_OK;
        }
    return clf_fail(CLF_ERR_ARG, "the chat role '%.32s' is not system, user, assistant or tool", m->role);
}

static void chatml_tools_system(text *t, const clf_chat *c, const clf_tools *tools, const char *sys) {
    mark(t, "<|im_start|>system\n");
    if (sys) plain(t, sys);
    else if (c->default_system) put(t, c->default_system, c->default_system_len, 1);
    if (sys || c->default_system) mark(t, "\n\n");
    mark(t, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (int i = 0; i < tools->n; i++) {
        mark(t, "\n");
        put_json(t, json_array_get(tools->arr, (size_t)i), 0);
    }
    mark(t, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n");
}

/* Qwen2.5's template (SmolLM2's and Qwen3's agree where they overlap). */
static void render_chatml(text *t, const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n) {
    const char *sys = n > 0 && !strcmp(m[0].role, "system") ? (m[0].content ? m[0].content : "") : NULL;
    int i = sys != NULL;
    if (tools && tools->n) {
        chatml_tools_system(t, c, tools, sys);
    } else if (sys || c->default_system) {
        mark(t, "<|im_start|>system\n");
        if (sys) plain(t, sys);
        else put(t, c->default_system, c->default_system_len, 1);
        mark(t, "<|im_end|>\n");
    }
    for (; i < n; i++) {
        if (!strcmp(m[i].role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) mark(t, "<|im_start|>user");
            mark(t, "\n<tool_response>\n");
            plain(t, m[i].content);
            mark(t, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool")) mark(t, "<|im_end|>\n");
        } else if (m[i].n_calls) {
            mark(t, "<|im_start|>assistant");
            if (m[i].content && m[i].content[0]) {
                mark(t, "\n");
                plain(t, m[i].content);
            }
            for (int k = 0; k < m[i].n_calls; k++) {
                mark(t, "\n<tool_call>\n{\"name\": \"");
                plain(t, m[i].calls[k].name);
                mark(t, "\", \"arguments\": ");
                put_arguments(t, m[i].calls[k].arguments);
                mark(t, "}\n</tool_call>");
            }
            mark(t, "<|im_end|>\n");
        } else {
            mark(t, "<|im_start|>");
            mark(t, m[i].role);
            mark(t, "\n");
            plain(t, m[i].content);
            mark(t, "<|im_end|>\n");
        }
    }
}

/* Llama 3.1's template, its default tools_in_user_message. */
static void render_llama(text *t, const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n) {
    int i = n > 0 && !strcmp(m[0].role, "system");
    int with_tools = tools && tools->n;
    char dated[96];
    mark(t, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (with_tools) mark(t, "Environment: ipython\n");
    snprintf(dated, sizeof dated, "Cutting Knowledge Date: %s\nToday Date: %s\n\n", c->knowledge, c->date);
    mark(t, dated);
    if (i) plain_trimmed(t, m[0].content);
    mark(t, "<|eot_id|>");
    if (with_tools) {
        if (i >= n) {
            if (t->st == CLF_OK)
                t->st = clf_fail(CLF_ERR_ARG, "Llama 3.1's format puts the tools in the first user message: "
                                              "the conversation has none");
            return;
        }
        mark(t, "<|start_header_id|>user<|end_header_id|>\n\n"
                "Given the following functions, please respond with a JSON for a function call with its proper "
                "arguments that best answers the given prompt.\n\n"
                "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
                "its value}.Do not use variables.\n\n");
        for (int k = 0; k < tools->n; k++) {
            put_json(t, json_array_get(tools->arr, (size_t)k), JSON_INDENT(4));
            mark(t, "\n\n");
        }
        plain_trimmed(t, m[i].content);
        mark(t, "<|eot_id|>");
        i++;
    }
    for (; i < n; i++) {
        if (!strcmp(m[i].role, "tool")) {
            mark(t, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            /* the template's "content is iterable" holds for a string too:
             * tojson quotes it */
            json_t *j = json_string(m[i].content ? m[i].content : "");
            if (j) put_json(t, j, 0);
            else plain(t, m[i].content); /* not UTF-8: as it is */
            json_decref(j);
            mark(t, "<|eot_id|>");
        } else if (m[i].n_calls) {
            if (m[i].n_calls != 1) {
                if (t->st == CLF_OK)
                    t->st = clf_fail(CLF_ERR_ARG, "message %d: Llama 3.1's format has one tool call per assistant "
                                                  "message (this one has %d)", i, m[i].n_calls);
                return;
            }
            mark(t, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            plain(t, m[i].calls[0].name);
            mark(t, "\", \"parameters\": ");
            put_arguments(t, m[i].calls[0].arguments);
            mark(t, "}<|eot_id|>");
        } else {
            mark(t, "<|start_header_id|>");
            mark(t, m[i].role);
            mark(t, "<|end_header_id|>\n\n");
            plain_trimmed(t, m[i].content);
            mark(t, "<|eot_id|>");
        }
    }
}

/* Whether a conversation needs the tool formats (else chat.c renders it). */
static int uses_tools(const clf_tools *tools, const clf_tool_msg *m, int n) {
    if (tools && tools->n) return 1;
    for (int i = 0; i < n; i++)
        if (m[i].n_calls || (m[i].role && !strcmp(m[i].role, "tool"))) return 1;
    return 0;
}

static clf_status render(const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n, int reply_start,
                         text *t) {
    if (n < 0 || (n > 0 && !m)) return clf_fail(CLF_ERR_ARG, "no messages");
    for (int i = 0; i < n; i++) CLF_TRY(check_role(&m[i], i));
    CLF_TRY(clf_tools_supported(c));
    if (c->format == CLF_CHAT_CHATML) render_chatml(t, c, tools, m, n);
    else render_llama(t, c, tools, m, n);
    if (reply_start) mark(t, c->format == CLF_CHAT_CHATML ? "<|im_start|>assistant\n"
                                                          : "<|start_header_id|>assistant<|end_header_id|>\n\n");
    if (!t->b.p) put(t, "", 0, 0);
    return t->st;
}

/* Without tools, calls or results: the chat format's own rendering. */
static clf_status plain_messages(const clf_tool_msg *m, int n, clf_chat_msg **out) {
    if (!(*out = malloc((n > 0 ? (size_t)n : 1) * sizeof **out))) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) (*out)[i] = (clf_chat_msg){m[i].role, m[i].content ? m[i].content : ""};
    return CLF_OK;
}

/* ---- the model's own template --------------------------------------------
 * A template that writes tools itself (its text names them) renders the
 * conversation: the messages as OpenAI and Hugging Face write them (an
 * assistant's tool_calls with their arguments as JSON objects, a tool's
 * tool_call_id), the tools as given. One that does not (SmolLM2's) keeps
 * the format by hand above, which is what such a model was tuned on. */
static int template_writes_tools(const clf_chat *c) {
    return c->jinja && (strstr(c->jinja, "tools") || clf_tf_detect(c->jinja) != CLF_TOOLS_NONE);
}

/* A call id as Mistral's templates take it (9 letters and digits, else
 * they refuse the conversation): one such as it is, another (OpenAI's
 * "call_...", the server's own) mapped to 9 by its FNV-1a hash, so that a
 * call and the result that names it agree. out: 10 bytes. */
static const char *mistral_id(const char *id, char out[10]) {
    static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    size_t n = strlen(id), k = 0;
    while (k < n && strchr(ALNUM, id[k]) && id[k]) k++;
    if (n == 9 && k == 9) return id;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
    for (int i = 0; i < 9; i++, h /= 62) out[i] = ALNUM[h % 62];
    out[9] = 0;
    return out;
}

static clf_status jinja_conversation(const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n,
                                     int reply_start, int variant, char **buf, size_t *len) {
    int args_text = variant & 1, empty_content = variant & 2; /* jinja_render_calls' variants */
    clf_tool_format f = clf_tools_format(c);
    int nine = f == CLF_TOOLS_MISTRAL || f == CLF_TOOLS_MISTRAL_ARGS; /* ids of 9 characters */
    char idbuf[10];
    if (n < 0 || (n > 0 && !m)) return clf_fail(CLF_ERR_ARG, "no messages");
    for (int i = 0; i < n; i++) CLF_TRY(check_role(&m[i], i));
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        /* an assistant's calls without text: content null, as OpenAI sends it (DeepSeek R1's template writes
         * the calls only then) */
        json_t *o = m[i].content || !m[i].n_calls || empty_content
                        ? json_pack("{s:s, s:s}", "role", m[i].role, "content", m[i].content ? m[i].content : "")
                        : json_pack("{s:s, s:n}", "role", m[i].role, "content");
        if (!o) { /* not UTF-8 */
            json_decref(a);
            return clf_fail(CLF_ERR_ARG, "message %d is not UTF-8 text", i);
        }
        if (m[i].n_calls) {
            json_t *calls = json_array();
            for (int k = 0; k < m[i].n_calls; k++) {
                const clf_tool_call *tc = &m[i].calls[k];
                json_t *args = args_text ? json_string(tc->arguments ? tc->arguments : "{}")
                               : tc->arguments ? json_loads(tc->arguments, JSON_DECODE_ANY, NULL) : json_object();
                if (!args) args = json_string(tc->arguments); /* not JSON: the text as it is */
                json_t *fn = json_pack("{s:s, s:o}", "name", tc->name ? tc->name : "", "arguments", args ? args : json_null());
                const char *id = tc->id ? tc->id : "";
                if (nine) id = mistral_id(id, idbuf);
                json_t *call = json_pack("{s:s, s:s, s:o}", "id", id, "type", "function", "function",
                                         fn ? fn : json_null());
                json_array_append_new(calls, call ? call : json_null());
            }
            json_object_set_new(o, "tool_calls", calls);
        }
        if (m[i].tool_call_id)
            json_object_set_new(o, "tool_call_id",
                                json_string(nine ? mistral_id(m[i].tool_call_id, idbuf) : m[i].tool_call_id));
        json_array_append_new(a, o);
    }
    char *msgs = a ? json_dumps(a, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    char *tl = tools && tools->n ? json_dumps(tools->arr, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(a);
    clf_status st = msgs && (tl || !(tools && tools->n)) ? clf_chat_jinja_render(c, msgs, tl, reply_start, buf, len)
                                                          : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    free(msgs);
    free(tl);
    return st;
}

/* The conversation rendered as templates differ on calls (llama.cpp reads
 * the same off each template's behaviour): the calls' arguments as objects
 * (Hugging Face's templates) or as the JSON text OpenAI sends (DeepSeek
 * R1's template concatenates them to its text); a call's missing text as
 * null (R1's writes the calls only then) or "" (Devstral's indexes it):
 * the first variant the template renders. */
static clf_status jinja_render_calls(const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n,
                                     int reply_start, char **buf, size_t *len) {
    clf_status st = jinja_conversation(c, tools, m, n, reply_start, 0, buf, len);
    int calls = 0;
    for (int i = 0; i < n && m; i++) calls += m[i].n_calls;
    if (st == CLF_OK || !calls || st == CLF_ERR_MEMORY) return st;
    char *first = strdup(clf_last_error());
    clf_status st2 = st;
    for (int v = 1; v < 4 && st2 != CLF_OK && st2 != CLF_ERR_MEMORY; v++)
        st2 = jinja_conversation(c, tools, m, n, reply_start, v, buf, len);
    if (st2 != CLF_OK && first) clf_fail(st, "%s", first); /* the first failure's words */
    free(first);
    return st2 == CLF_OK ? CLF_OK : st;
}

clf_status clf_tools_render(const clf_chat *c, const clf_tools *tools, const clf_tool_msg *m, int n, int reply_start,
                            char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    if (template_writes_tools(c) && (n <= 0 || !m || uses_tools(tools, m, n))) {
        CLF_TRY(clf_tools_supported(c));
        return jinja_render_calls(c, tools, m, n, reply_start, buf, len);
    }
    if (n > 0 && m && !uses_tools(tools, m, n)) {
        clf_chat_msg *cm;
        for (int i = 0; i < n; i++) CLF_TRY(check_role(&m[i], i));
        CLF_TRY(plain_messages(m, n, &cm));
        clf_status st = clf_chat_render(c, cm, n, reply_start, buf, len);
        free(cm);
        return st;
    }
    text t = {0};
    clf_status st = render(c, tools, m, n, reply_start, &t);
    free(t.sp);
    if (st != CLF_OK) {
        clf_buf_free(&t.b);
        return st;
    }
    *buf = t.b.p;
    *len = t.b.n;
    return CLF_OK;
}

clf_status clf_tools_tokenize(const clf_chat *c, const clf_tools *tools, const clf_tokenizer *tok,
                              const clf_tool_msg *m, int n, int reply_start, int add_special, int32_t **ids,
                              int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (n > 0 && m && !uses_tools(tools, m, n)) {
        clf_chat_msg *cm;
        for (int i = 0; i < n; i++) CLF_TRY(check_role(&m[i], i));
        CLF_TRY(plain_messages(m, n, &cm));
        clf_status st = clf_chat_tokenize(c, tok, cm, n, reply_start, add_special, ids, n_ids);
        free(cm);
        return st;
    }
    if (template_writes_tools(c)) {
        /* the rendering, the messages' texts in it as text */
        char *text;
        size_t len;
        CLF_TRY(clf_tools_supported(c));
        CLF_TRY(jinja_render_calls(c, tools, m, n, reply_start, &text, &len));
        return clf_chat_tokenize_rendered(tok, text, len, n > 0 ? (const char *)&m[0].content : NULL, sizeof *m, n,
                                          add_special, ids, n_ids);
    }
    text t = {0};
    clf_status st = render(c, tools, m, n, reply_start, &t);
    if (st == CLF_OK) st = clf_tokenize_plain(tok, t.b.p, t.b.n, add_special, t.sp, t.n, ids, n_ids);
    clf_buf_free(&t.b);
    free(t.sp);
    return st;
}

/* ---- the grammar ---------------------------------------------------------- */

/* Moves a function's $defs / definitions up to the schema's root, where
 * its "#/$defs/..." references point once the parameters are nested. */
static clf_status hoist_defs(json_t *root, json_t *params, const char *fn) {
    static const char *const KEYS[] = {"$defs", "definitions"};
    for (int k = 0; k < 2; k++) {
        json_t *defs = json_object_get(params, KEYS[k]);
        if (!defs) continue;
        if (!json_is_object(defs)) return clf_fail(CLF_ERR_ARG, "function %s: parameters.%s is not an object", fn, KEYS[k]);
        json_t *to = json_object_get(root, KEYS[k]);
        if (!to) {
            if (json_object_set_new(root, KEYS[k], to = json_object()))
                return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        const char *key;
        json_t *v;
        json_object_foreach(defs, key, v) {
            json_t *have = json_object_get(to, key);
            if (have && !json_equal(have, v))
                return clf_fail(CLF_ERR_ARG, "function %s: parameters.%s.%s differs from another function's of that "
                                             "name (the calls share one schema)", fn, KEYS[k], key);
            if (!have && json_object_set(to, key, v)) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        json_object_del(params, KEYS[k]);
    }
    return CLF_OK;
}

static json_t *call_object(const clf_tools *t, int i, json_t *root, clf_status *st) {
    json_t *params = t->params[i] ? json_deep_copy(t->params[i])
                                  : json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                              "additionalProperties", 0);
    if (!params) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    if ((*st = hoist_defs(root, params, t->names[i])) != CLF_OK) {
        json_decref(params);
        return NULL;
    }
    clf_tool_format f = clf_tools_format(&t->chat);
    int cohere = f == CLF_TOOLS_COMMAND_R || f == CLF_TOOLS_COMMAND_R7B;
    const char *key = f == CLF_TOOLS_LLAMA3 || cohere ? "parameters" : "arguments";
    const char *nkey = cohere ? "tool_name" : "name";
    json_t *o = json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s], s:b}", "type", "object", "properties", nkey, "const",
                          t->names[i], key, params, "required", nkey, key, "additionalProperties", 0);
    if (!o) *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    return o;
}

clf_status clf_tools_call_schema(const clf_tools *t, clf_tool_choice choice, const char *name, char **schema) {
    *schema = NULL;
    if (!t) return clf_fail(CLF_ERR_ARG, "no tools");
    int only = -1;
    if (choice == CLF_TOOL_NAMED) {
        for (int i = 0; i < t->n; i++)
            if (name && !strcmp(t->names[i], name)) only = i;
        if (only < 0) return clf_fail(CLF_ERR_ARG, "tool_choice names '%.64s', which is not one of the tools", name ? name : "");
    }
    json_t *root = json_object(), *any = json_array();
    clf_status st = root && any ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; st == CLF_OK && i < t->n; i++) {
        if (only >= 0 && i != only) continue;
        json_t *o = call_object(t, i, root, &st);
        if (o && json_array_append_new(any, o)) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    if (st == CLF_OK) {
        /* one function: its object itself, else any of them (the names
         * differ, so the branches are disjoint) */
        json_t *one = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : NULL;
        if (one) {
            const char *key;
            json_t *v;
            json_object_foreach(root, key, v) json_object_set(one, key, v);
            json_decref(root);
            root = one;
        } else if (json_object_set(root, "anyOf", any)) {
            st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
    }
    if (st == CLF_OK && !(*schema = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    json_decref(any);
    json_decref(root);
    return st;
}

/* Whether gbnf defines a rule whose name starts with "tc-" (a line's start). */
static int defines_tc(const char *g) {
    for (const char *p = g; p; p = strchr(p, '\n')) {
        if (*p == '\n') p++;
        while (*p == ' ' || *p == '\t') p++;
        if (!strncmp(p, "tc-", 3)) return 1;
    }
    return 0;
}


/* Text that holds no "<tool_call>" (a partial one at its end allowed), as
 * the automaton that matches the tag: tc-aK, having matched its first K
 * bytes, goes on (K+1), back to 1 on "<", else back to the loop; tc-eK: the
 * same at the text's end. */
static void free_text_rules(text *t) {
    char line[160];
    mark(t, "tc-free ::= ( [^<] | \"<\" tc-a1 )* tc-end\n"
            "tc-end ::= \"\" | \"<\" tc-e1\n");
    for (int k = 1; k < OPEN_LEN - 1; k++) {
        snprintf(line, sizeof line, "tc-a%d ::= [^<%c] | \"%c\" tc-a%d | \"<\" tc-a1\n", k, OPEN[k], OPEN[k], k + 1);
        mark(t, line);
        snprintf(line, sizeof line, "tc-e%d ::= \"\" | \"%c\" tc-e%d | \"<\" tc-e1\n", k, OPEN[k], k + 1);
        mark(t, line);
    }
    snprintf(line, sizeof line, "tc-a%d ::= [^<%c] | \"<\" tc-a1\ntc-e%d ::= \"\" | \"<\" tc-e1\n", OPEN_LEN - 1,
             OPEN[OPEN_LEN - 1], OPEN_LEN - 1);
    mark(t, line);
}

clf_status clf_tools_wrap_grammar(const clf_tools *t, clf_tool_choice choice, int parallel, const char *call_gbnf,
                                  char **gbnf) {
    *gbnf = NULL;
    if (!t || !call_gbnf) return clf_fail(CLF_ERR_ARG, "no tools or no call grammar");
    if (choice == CLF_TOOL_NONE) return clf_fail(CLF_ERR_ARG, "tool_choice none has no grammar");
    if (defines_tc(call_gbnf)) return clf_fail(CLF_ERR_ARG, "the call grammar defines a tc- rule, the wrapper's prefix");
    clf_tool_format f = clf_tools_format(&t->chat);
    if (f != CLF_TOOLS_HERMES && f != CLF_TOOLS_LLAMA3) /* the call object's grammar within the format's markers */
        return clf_tf_grammar(f, choice, parallel, (const char *const *)t->names, t->params, t->n, -1, call_gbnf, gbnf);
    text g = {0};
    char line[160];
    if (f == CLF_TOOLS_HERMES) {
        mark(&g, choice == CLF_TOOL_AUTO ? "tc-root ::= tc-free tc-calls?\n" : "tc-root ::= tc-calls\n");
        /* the calls on lines of their own, as the template writes them */
        snprintf(line, sizeof line, "tc-calls ::= tc-call ( \"\\n\" tc-call ){0,%d}\n",
                 parallel ? MAX_PARALLEL - 1 : 0);
        mark(&g, line);
        mark(&g, "tc-call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n");
        if (choice == CLF_TOOL_AUTO) free_text_rules(&g);
    } else {
        mark(&g, choice == CLF_TOOL_AUTO ? "tc-root ::= root | tc-text\ntc-text ::= \"\" | [^{ \\t\\r\\n] .*\n"
                                         : "tc-root ::= root\n");
    }
    mark(&g, call_gbnf);
    if (g.st != CLF_OK) {
        clf_buf_free(&g.b);
        free(g.sp);
        return g.st;
    }
    free(g.sp);
    *gbnf = g.b.p;
    return CLF_OK;
}

clf_status clf_tools_grammar(const clf_tools *t, clf_tool_choice choice, const char *name, int parallel, char **gbnf) {
    *gbnf = NULL;
    if (!t) return clf_fail(CLF_ERR_ARG, "no tools");
    if (choice == CLF_TOOL_NONE) return clf_fail(CLF_ERR_ARG, "tool_choice none has no grammar");
    clf_tool_format f = clf_tools_format(&t->chat);
    if (f == CLF_TOOLS_MISTRAL_ARGS || f == CLF_TOOLS_HARMONY || f == CLF_TOOLS_DEEPSEEK_R1 ||
        f == CLF_TOOLS_DEEPSEEK_V3 || f == CLF_TOOLS_QWEN3_CODER || f == CLF_TOOLS_GLM || f == CLF_TOOLS_KIMI_K2 ||
        f == CLF_TOOLS_FUNCTIONARY || f == CLF_TOOLS_FUNCTIONARY_V32) {
        /* the name outside the arguments' JSON: a grammar per function */
        int only = -1;
        if (choice == CLF_TOOL_NAMED) {
            for (int i = 0; i < t->n; i++)
                if (name && !strcmp(t->names[i], name)) only = i;
            if (only < 0)
                return clf_fail(CLF_ERR_ARG, "tool_choice names '%.64s', which is not one of the tools", name ? name : "");
        }
        return clf_tf_grammar(f, choice, parallel, (const char *const *)t->names, t->params, t->n, only, NULL, gbnf);
    }
    char *schema = NULL, *call = NULL;
    clf_status st = clf_tools_call_schema(t, choice, name, &schema);
    if (st == CLF_OK) st = clf_json_schema_to_gbnf(schema, strlen(schema), &call);
    if (st == CLF_OK) st = clf_tools_wrap_grammar(t, choice, parallel, call, gbnf);
    free(schema);
    free(call);
    return st;
}

/* ---- parsing -------------------------------------------------------------- */

/* (the scanners: tools_impl.h) */

/* One call's JSON object from s[*i] (ChatML: then its closing tag), into c. */
static int parse_call(const char *s, size_t n, size_t *i, int chatml, clf_tool_parsed *c, clf_status *st) {
    int r;
    if ((r = expect(s, n, i, '{')) != DONE || (r = key(s, n, i, "name", NULL)) != DONE ||
        (r = expect(s, n, i, ':')) != DONE)
        return r;
    skip_ws(s, n, i);
    size_t at = *i;
    if ((r = string_end(s, n, i)) != DONE) return r;
    json_t *name = json_loadb(s + at, *i - at, JSON_DECODE_ANY, NULL);
    if (!json_is_string(name)) {
        json_decref(name);
        return BAD;
    }
    c->name = dup_n(json_string_value(name), json_string_length(name));
    json_decref(name);
    if (!c->name) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    if ((r = expect(s, n, i, ',')) != DONE || (r = key(s, n, i, "arguments", "parameters")) != DONE ||
        (r = expect(s, n, i, ':')) != DONE)
        return r;
    skip_ws(s, n, i);
    at = *i;
    r = value_end(s, n, i);
    if (r != BAD && !(c->arguments = dup_n(s + at, (r == DONE ? *i : n) - at))) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    if (r != DONE || (r = expect(s, n, i, '}')) != DONE) return r;
    if (chatml) {
        skip_ws(s, n, i);
        if ((r = literal(s, n, i, CLOSE, CLOSE_LEN)) != DONE) return r;
    }
    c->complete = 1;
    return DONE;
}

/* Where OPEN first occurs whole in s[0, n), else n. */
static size_t find_open(const char *s, size_t n) {
    for (size_t i = 0; i + OPEN_LEN <= n; i++)
        if (s[i] == '<' && !memcmp(s + i, OPEN, OPEN_LEN)) return i;
    return n;
}

static clf_status parse_calls(const clf_chat *c, const char *s, size_t n, size_t i, clf_tool_reply *r) {
    int chatml = clf_tools_format(c) == CLF_TOOLS_HERMES;
    clf_status st = CLF_OK;
    for (;;) {
        clf_tool_parsed *call = NULL;
        CLF_TRY(add_call(r, &call));
        int res = parse_call(s, n, &i, chatml, call, &st);
        if (st != CLF_OK) return st;
        if (!call->name) { /* nothing to report yet */
            free(call->arguments);
            r->n_calls--;
        }
        if (res != DONE || !chatml || r->n_calls >= MAX_PARALLEL) return CLF_OK;
        skip_ws(s, n, &i);
        if (literal(s, n, &i, OPEN, OPEN_LEN) != DONE) return CLF_OK; /* the end, or not yet another call */
    }
}

/* clf_tools_parse and clf_tools_parse_typed: sc the functions' schemas, or NULL. */
static clf_status parse_reply(const clf_chat *c, const clf_tf_schemas *sc, const char *s, size_t n, int final,
                              clf_tool_reply **out);

clf_status clf_tools_parse(const clf_chat *c, const char *s, size_t n, int final, clf_tool_reply **out) {
    return parse_reply(c, NULL, s, n, final, out);
}

clf_status clf_tools_parse_typed(const clf_tools *t, const char *s, size_t n, int final, clf_tool_reply **out) {
    *out = NULL;
    if (!t) return clf_fail(CLF_ERR_ARG, "no tools");
    clf_tf_schemas sc = {(const char *const *)t->names, t->params, t->n};
    return parse_reply(&t->chat, &sc, s, n, final, out);
}

static clf_status parse_reply(const clf_chat *c, const clf_tf_schemas *sc, const char *s, size_t n, int final,
                              clf_tool_reply **out) {
    *out = NULL;
    CLF_TRY(clf_tools_supported(c));
    clf_tool_reply *r = calloc(1, sizeof *r);
    if (!r) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_status st = CLF_OK;
    clf_tool_format f = clf_tools_format(c);
    if (f != CLF_TOOLS_HERMES && f != CLF_TOOLS_LLAMA3) {
        st = clf_tf_parse(f, sc, s, n, final, r);
    } else if (f == CLF_TOOLS_HERMES) {
        size_t at = find_open(s, n);
        if (at < n) {
            r->content_len = at;
            trim_end(s, &r->content_len);
            st = parse_calls(c, s, n, at + OPEN_LEN, r);
        } else if (final) {
            r->content_len = n;
        } else { /* hold back an end that may open a call, and the blank before it */
            size_t keep = n;
            for (size_t k = n > OPEN_LEN ? n - OPEN_LEN + 1 : 0; k < n; k++)
                if (!memcmp(s + k, OPEN, n - k)) {
                    keep = k;
                    break;
                }
            trim_end(s, &keep);
            r->content_len = keep;
        }
    } else {
        /* Llama 3.1: a reply that opens with a call's object, <|python_tag|>
         * first where the model writes it (its control token is text under
         * tools: the server writes them so for the other formats' markers) */
        static const char TAG[] = "<|python_tag|>";
        size_t i = 0, j;
        skip_ws(s, n, &i);
        j = i;
        const int tag = literal(s, n, &j, TAG, sizeof TAG - 1);
        if (tag == DONE) {
            i = j;
            skip_ws(s, n, &i);
        }
        if (tag == MORE && !final) r->content_len = 0; /* it may be the tag */
        else if (i < n && s[i] == '{') st = parse_calls(c, s, n, i, r);
        else r->content_len = i < n || final ? n : 0;
    }
    if (st != CLF_OK) {
        clf_tool_reply_free(r);
        return st;
    }
    *out = r;
    return CLF_OK;
}

void clf_tool_reply_free(clf_tool_reply *r) {
    if (!r) return;
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    free(r);
}

/* The tool-call formats beyond ChatML's and Llama's (tools.h lists them):
 * recognised from the template's text, a reply's calls parsed (whole or a
 * stream's text so far: content stops where a call may begin), and the
 * grammar that holds a reply to the format and the functions' schemas.
 * The syntaxes are those llama.cpp's common/chat.cpp parses; the code is
 * clinfer's own. */
#include <stdarg.h>
#include <stdio.h>

#include "buf.h"
#include "json_schema.h"
#include "tools_impl.h"

/* ---- the markers ------------------------------------------------------------ */

static const char M_MISTRAL[] = "[TOOL_CALLS]", M_ARGS[] = "[ARGS]", M_CALL_ID[] = "[CALL_ID]";
static const char M_GRANITE[] = "<|tool_call|>";
static const char M_ACTION[] = "Action:", M_START_ACTION[] = "<|START_ACTION|>";
static const char M_DS_CALLS[] = "<｜tool▁calls▁begin｜>", M_DS_CALL[] = "<｜tool▁call▁begin｜>",
                  M_DS_SEP[] = "<｜tool▁sep｜>", M_DS_END[] = "<｜tool▁call▁end｜>",
                  M_DS_CALLS_END[] = "<｜tool▁calls▁end｜>";
static const char M_TO[] = "to=functions.", M_START[] = "<|start|>", M_CHANNEL[] = "<|channel|>",
                  M_MESSAGE[] = "<|message|>", M_CALL[] = "<|call|>";
static const char M_TOOL_CALL[] = "<tool_call>", M_TOOL_CALL_END[] = "</tool_call>", M_FUNCTION[] = "<function=",
                  M_FUNCTION_END[] = "</function>", M_PARAM[] = "<parameter=", M_PARAM_END[] = "</parameter>",
                  M_ARG_KEY[] = "<arg_key>", M_ARG_KEY_END[] = "</arg_key>", M_ARG_VALUE[] = "<arg_value>",
                  M_ARG_VALUE_END[] = "</arg_value>";
static const char M_KIMI[] = "<|tool_calls_section_begin|>", M_KIMI_END[] = "<|tool_calls_section_end|>",
                  M_KIMI_CALL[] = "<|tool_call_begin|>", M_KIMI_ARGS[] = "<|tool_call_argument_begin|>",
                  M_KIMI_CALL_END[] = "<|tool_call_end|>";
static const char M_PYTHON[] = "<|python_tag|>";
static const char M_V32[] = ">>>";

#define LEN(lit) (sizeof lit - 1)

clf_tool_format clf_tf_detect(const char *j) {
    if (!j) return CLF_TOOLS_NONE;
    /* the XML formats first: their templates may hold other formats' words in their instructions. Qwen3-Coder's
     * (also Qwen3.5's, Nemotron Nano 3's) with its tags on lines of their own, as llama.cpp takes it */
    if (strstr(j, M_TOOL_CALL) && strstr(j, M_FUNCTION) && strstr(j, M_PARAM) &&
        !strstr(j, "'<tool_call><function=' ~ tool_call.name ~ '>'"))
        return CLF_TOOLS_QWEN3_CODER;
    if (strstr(j, M_TOOL_CALL) && strstr(j, M_ARG_KEY) && strstr(j, M_ARG_VALUE)) return CLF_TOOLS_GLM;
    if (strstr(j, M_KIMI) && strstr(j, M_KIMI_CALL)) return CLF_TOOLS_KIMI_K2;
    if (strstr(j, M_FUNCTION) && strstr(j, M_PYTHON)) return CLF_TOOLS_FUNCTIONARY;
    if (strstr(j, ">>>all")) return CLF_TOOLS_FUNCTIONARY_V32;
    /* Mistral Small 3.2 (and Devstral, Ministral 3) write [TOOL_CALLS]F[ARGS]; Nemo a JSON array */
    if (strstr(j, M_MISTRAL)) return strstr(j, M_ARGS) ? CLF_TOOLS_MISTRAL_ARGS : CLF_TOOLS_MISTRAL;
    if (strstr(j, M_CHANNEL) && strstr(j, "to=")) return CLF_TOOLS_HARMONY;
    if (strstr(j, "tool▁call▁begin")) return strstr(j, "```json") ? CLF_TOOLS_DEEPSEEK_R1 : CLF_TOOLS_DEEPSEEK_V3;
    if (strstr(j, M_GRANITE)) return CLF_TOOLS_GRANITE;
    if (strstr(j, M_START_ACTION)) return CLF_TOOLS_COMMAND_R7B; /* its instructions say "Action:" too */
    if (strstr(j, M_ACTION) && strstr(j, "tool_name")) return CLF_TOOLS_COMMAND_R;
    return CLF_TOOLS_NONE;
}

/* ---- parsing ------------------------------------------------------------------ */

/* Where lit first occurs in s[from, n), else n. */
static size_t find_at(const char *s, size_t n, size_t from, const char *lit) {
    size_t k = strlen(lit);
    for (size_t i = from; i + k <= n; i++)
        if (s[i] == lit[0] && !memcmp(s + i, lit, k)) return i;
    return n;
}

/* Where the last lit before `before` starts, else (size_t)-1. */
static size_t find_last(const char *s, size_t before, const char *lit) {
    size_t k = strlen(lit), at = (size_t)-1;
    for (size_t i = 0; i + k <= before; i++)
        if (s[i] == lit[0] && !memcmp(s + i, lit, k)) at = i;
    return at;
}

/* lit at s[*i] if it is there (DONE, past it); MORE where the text ends
 * inside it; DONE and not moved where something else follows. */
static int optional(const char *s, size_t n, size_t *i, const char *lit) {
    size_t j = *i;
    int r = literal(s, n, &j, lit, strlen(lit));
    if (r == MORE) return MORE;
    if (r == DONE) *i = j;
    return DONE;
}

/* A JSON string's value (s[at, end) its quoted text), malloc'd; NULL where
 * it is not one (*st set only when memory ran out). */
static char *string_value(const char *s, size_t at, size_t end, clf_status *st) {
    json_t *j = json_loadb(s + at, end - at, JSON_DECODE_ANY, NULL);
    char *v = json_is_string(j) ? dup_n(json_string_value(j), json_string_length(j)) : NULL;
    if (json_is_string(j) && !v) *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    json_decref(j);
    return v;
}

/* The arguments' text s[at, end) into c (a stream's: what there is so far). */
static int set_args(clf_tool_parsed *c, const char *s, size_t at, size_t end, clf_status *st) {
    free(c->arguments);
    if (!(c->arguments = dup_n(s + at, end - at))) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    return DONE;
}

/* The arguments' JSON value from s[*i] into c: DONE when it is whole. */
static int args_value(const char *s, size_t n, size_t *i, clf_tool_parsed *c, clf_status *st) {
    skip_ws(s, n, i);
    if (*i < n && s[*i] != '{') return BAD; /* arguments are an object */
    size_t at = *i;
    int r = value_end(s, n, i);
    if (r == BAD || set_args(c, s, at, r == DONE ? *i : n, st) == BAD) return BAD;
    return r;
}

/* A call as a JSON object {nkey: F, akey: {...}, other keys...} (any order)
 * from s[*i] into c. */
static int call_object(const char *s, size_t n, size_t *i, const char *nkey, const char *akey, clf_tool_parsed *c,
                       clf_status *st) {
    int r;
    if ((r = expect(s, n, i, '{')) != DONE) return r;
    skip_ws(s, n, i);
    if (*i < n && s[*i] == '}') return BAD; /* no name */
    for (;;) {
        skip_ws(s, n, i);
        size_t at = *i;
        if ((r = string_end(s, n, i)) != DONE) return r;
        char *k = string_value(s, at, *i, st);
        if (!k) return BAD;
        int is_name = !strcmp(k, nkey), is_args = !strcmp(k, akey);
        free(k);
        if ((r = expect(s, n, i, ':')) != DONE) return r;
        skip_ws(s, n, i);
        at = *i;
        if (is_args) {
            if ((r = args_value(s, n, i, c, st)) != DONE) return r;
        } else {
            if ((r = value_end(s, n, i)) != DONE) return r;
            if (is_name) {
                free(c->name);
                if (!(c->name = string_value(s, at, *i, st))) return BAD;
            }
        }
        skip_ws(s, n, i);
        if (*i >= n) return MORE;
        if (s[*i] == '}') break;
        if (s[*i] != ',') return BAD;
        (*i)++;
    }
    (*i)++;
    if (!c->name) return BAD;
    if (!c->arguments && set_args(c, "{}", 0, 2, st) == BAD) return BAD; /* no arguments: none */
    c->complete = 1;
    return DONE;
}

/* A JSON array of call objects from s[*i] into r. */
static int call_array(const char *s, size_t n, size_t *i, const char *nkey, const char *akey, clf_tool_reply *r,
                      clf_status *st) {
    int res;
    if ((res = expect(s, n, i, '[')) != DONE) return res;
    for (;;) {
        clf_tool_parsed *c = NULL;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if ((res = call_object(s, n, i, nkey, akey, c, st)) != DONE) return res;
        skip_ws(s, n, i);
        if (*i >= n) return MORE;
        if (s[*i] == ']') {
            (*i)++;
            return DONE;
        }
        if (s[*i] != ',') return BAD;
        (*i)++;
    }
}

/* c is one of a function name's characters (OpenAI's, and "."). */
static int name_char(char c) {
    return c && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", c);
}

/* s[at, end) as a call's name, where it is 1 to 64 name characters (a
 * name between two markers: Kimi K2's, DeepSeek V3.1's; any other bytes,
 * which the API's JSON may not even take, make no call). DONE, or BAD. */
static int delimited_name(const char *s, size_t at, size_t end, clf_tool_parsed *c, clf_status *st) {
    if (end <= at || end - at > 64) return BAD;
    for (size_t k = at; k < end; k++)
        if (!name_char(s[k])) return BAD;
    if (!(c->name = dup_n(s + at, end - at))) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    return DONE;
}

/* A function's name at s[*i], up to a byte of none of OpenAI's name
 * characters (stop: what must follow; MORE where the text ends first). */
static int bare_name(const char *s, size_t n, size_t *i, clf_tool_parsed *c, clf_status *st) {
    size_t at = *i;
    while (*i < n && *i - at <= 64 && name_char(s[*i])) (*i)++;
    if (*i - at > 64) return BAD;
    if (*i >= n) return MORE;
    if (*i == at) return BAD;
    if (!(c->name = dup_n(s + at, *i - at))) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    return DONE;
}

/* Mistral: after [TOOL_CALLS], a JSON array, or Small 3.2's F[CALL_ID]id?[ARGS]{...}, again after [TOOL_CALLS]. */
static int mistral_calls(const char *s, size_t n, size_t i, clf_tool_reply *r, clf_status *st) {
    skip_ws(s, n, &i);
    if (i >= n) return MORE;
    if (s[i] == '[') return call_array(s, n, &i, "name", "arguments", r, st);
    for (;;) {
        clf_tool_parsed *c = NULL;
        int res;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if ((res = bare_name(s, n, &i, c, st)) != DONE) return res;
        size_t j = i;
        if ((res = literal(s, n, &j, M_CALL_ID, LEN(M_CALL_ID))) == MORE) return MORE;
        if (res == DONE) { /* the call's id, as the template writes it: up to [ARGS] */
            for (i = j; i < n && s[i] != '['; i++)
                if (i - j > 64) return BAD;
            if (i >= n) return MORE;
        }
        if ((res = literal(s, n, &i, M_ARGS, LEN(M_ARGS))) != DONE) return res;
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        c->complete = 1;
        skip_ws(s, n, &i);
        if (r->n_calls >= MAX_PARALLEL || literal(s, n, &i, M_MISTRAL, LEN(M_MISTRAL)) != DONE) return DONE;
    }
}

/* DeepSeek: <｜tool▁call▁begin｜>X<｜tool▁sep｜>..., R1's X "function" then F,
 * "```json", the arguments, "```"; V3.1's X is F, the arguments follow. */
static int deepseek_calls(const char *s, size_t n, size_t i, clf_tool_reply *r, clf_status *st) {
    int res;
    if ((res = optional(s, n, &i, M_DS_CALLS)) != DONE) return res;
    for (;;) {
        skip_ws(s, n, &i);
        if ((res = literal(s, n, &i, M_DS_CALL, LEN(M_DS_CALL))) != DONE) return r->n_calls && res == BAD ? DONE : res;
        clf_tool_parsed *c = NULL;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        /* the separator within 128 bytes (a window of its own, so that more text never turns BAD into MORE) */
        size_t lim = n - i > 128 + LEN(M_DS_SEP) ? i + 128 + LEN(M_DS_SEP) : n;
        size_t sep = find_at(s, lim, i, M_DS_SEP);
        if (sep == lim) return lim < n ? BAD : MORE;
        size_t x = i;
        i = sep + LEN(M_DS_SEP);
        size_t j = i;
        skip_ws(s, n, &j);
        if (j >= n) return MORE;
        if (s[j] == '{') { /* V3.1: X is the name */
            while (x < sep && is_ws(s[x])) x++;
            size_t e = sep;
            while (e > x && is_ws(s[e - 1])) e--;
            if (delimited_name(s, x, e, c, st) != DONE) return BAD;
        } else { /* R1: the name, then its arguments in a fenced block */
            if ((res = bare_name(s, n, &i, c, st)) != DONE) return res;
            skip_ws(s, n, &i);
            if ((res = optional(s, n, &i, "```json")) != DONE) return res;
        }
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        skip_ws(s, n, &i);
        if ((res = optional(s, n, &i, "```")) != DONE) return res;
        skip_ws(s, n, &i);
        if ((res = literal(s, n, &i, M_DS_END, LEN(M_DS_END))) != DONE) return res;
        c->complete = 1;
        skip_ws(s, n, &i);
        j = i;
        if (literal(s, n, &j, M_DS_CALLS_END, LEN(M_DS_CALLS_END)) == DONE) return DONE;
    }
}

/* Command R: after "Action:", ```json, an array of {"tool_name", "parameters"}, ```. */
static int command_r_calls(const char *s, size_t n, size_t i, clf_tool_reply *r, clf_status *st) {
    int res;
    skip_ws(s, n, &i);
    if ((res = optional(s, n, &i, "```json")) != DONE) return res;
    skip_ws(s, n, &i);
    return call_array(s, n, &i, "tool_name", "parameters", r, st);
}

/* Harmony: a message whose header names a recipient "to=functions.F", its
 * body the arguments' JSON, then <|call|> (or the reply's end: the end
 * token is not written); from `at`, the recipient's "to=". */
static int harmony_calls(const char *s, size_t n, size_t at, clf_tool_reply *r, clf_status *st) {
    for (;;) {
        clf_tool_parsed *c = NULL;
        int res;
        size_t i = at + LEN(M_TO);
        if (r->n_calls >= MAX_PARALLEL) return DONE;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if ((res = bare_name(s, n, &i, c, st)) != DONE) return res;
        size_t lim = n - i > 256 + LEN(M_MESSAGE) ? i + 256 + LEN(M_MESSAGE) : n; /* the header within 256 bytes */
        size_t msg = find_at(s, lim, i, M_MESSAGE);
        if (msg == lim) return lim < n ? BAD : MORE;
        if (find_at(s, msg, i, "<|end|>") < msg || find_at(s, msg, i, M_CALL) < msg) return BAD;
        i = msg + LEN(M_MESSAGE);
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        c->complete = 1;
        skip_ws(s, n, &i);
        if ((res = optional(s, n, &i, M_CALL)) != DONE) return DONE;
        if ((at = find_at(s, n, i, M_TO)) == n) return DONE; /* later calls: each its own message */
    }
}

/* A raw parameter value typed (clf_tools_parse_typed): by its schema
 * (props: the function's "properties", may be NULL), else as JSON where
 * it parses, else the text. NULL when memory ran out or it is not UTF-8. */
/* Whether props (may be NULL) types parameter key a string alone: its
 * value is its raw text, never JSON. */
static int string_only(json_t *props, const char *key) {
    json_t *type = json_object_get(json_object_get(props, key), "type");
    int only = json_is_string(type) && !strcmp(json_string_value(type), "string");
    if (json_is_array(type)) { /* ["string", ...]: JSON first where it types the value otherwise, as llama.cpp */
        only = json_array_size(type) > 0;
        size_t k;
        json_t *e;
        json_array_foreach(type, k, e) only &= json_is_string(e) && !strcmp(json_string_value(e), "string");
    }
    return only;
}

/* Whether parameter s[0, k) (k <= 128) may be a JSON value: not a string alone by props. */
static int json_value(json_t *props, const char *s, size_t k) {
    char key[129];
    if (k >= sizeof key) return 1;
    memcpy(key, s, k);
    key[k] = 0;
    return !string_only(props, key);
}

static json_t *typed_value(json_t *props, const char *key, const char *v, size_t n) {
    json_t *type = json_object_get(json_object_get(props, key), "type");
    json_t *j = string_only(props, key) ? NULL : json_loadb(v, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    /* Qwen3-Coder's template writes a boolean as Python's str() does: True, False */
    if (!j && json_is_string(type) && !strcmp(json_string_value(type), "boolean"))
        j = n == 4 && !memcmp(v, "True", 4) ? json_true() : n == 5 && !memcmp(v, "False", 5) ? json_false() : NULL;
    return j ? j : json_stringn(v, n);
}

/* The object's text so far into c->arguments: whole, or (open) without its
 * closing brace, the arguments of a call not yet whole. */
static int set_object(clf_tool_parsed *c, json_t *o, int open, clf_status *st) {
    char *t = json_dumps(o, JSON_PRESERVE_ORDER);
    if (!t) {
        *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return BAD;
    }
    size_t k = strlen(t);
    if (open && k) t[--k] = 0;
    int r = set_args(c, t, 0, k, st);
    free(t);
    return r;
}

/* Up to a closing tag from s[*i]: the text before it in [*at, *end), *i past
 * the tag; MORE while it has not come. */
static int until(const char *s, size_t n, size_t *i, const char *tag, size_t *at, size_t *end) {
    size_t p = find_at(s, n, *i, tag);
    if (p == n) return MORE;
    *at = *i;
    *end = p;
    *i = p + strlen(tag);
    return DONE;
}

/* A parameter's value from s[*i] up to its closing tag: [*va, *ve), *i
 * past the tag. Where it may be JSON (json: its schema types it other
 * than a string alone) and opens an array, object or string, that JSON
 * value whole where the tag follows it (blanks between): the grammar
 * writes such a value by its schema, and a JSON string in it may hold the
 * tag. Else the text up to the first tag. MORE while the text may yet
 * decide (final: what there is decides). */
static int xml_value(const char *s, size_t n, size_t *i, const char *tag, int json, int final, size_t *va,
                     size_t *ve) {
    size_t j = *i;
    skip_ws(s, n, &j);
    if (json && j < n && (s[j] == '[' || s[j] == '{' || s[j] == '"')) {
        size_t e = j;
        int r = value_end(s, n, &e);
        if (r == MORE && !final) return MORE;
        if (r == DONE) {
            size_t k = e;
            skip_ws(s, n, &k);
            int t = literal(s, n, &k, tag, strlen(tag));
            if (t == MORE && !final) return MORE;
            if (t == DONE) {
                *va = j, *ve = e, *i = k;
                return DONE;
            }
        }
    }
    return until(s, n, i, tag, va, ve);
}

/* Qwen3-Coder's and GLM's XML calls from s[i] (past a <tool_call>):
 *   Qwen3-Coder: <function=F> (<parameter=P>\nV\n</parameter>)* </function> </tool_call>
 *   GLM:         F (<arg_key>P</arg_key> <arg_value>V</arg_value>)* </tool_call>
 * blanks between tags skipped; Qwen3-Coder's value loses one newline at
 * each end (the template's); another <tool_call> after a call opens the
 * next. */
static int xml_calls(clf_tool_format f, const clf_tf_schemas *sc, const char *s, size_t n, size_t i, int final,
                     clf_tool_reply *r, clf_status *st) {
    const int qwen = f == CLF_TOOLS_QWEN3_CODER;
    for (;;) {
        clf_tool_parsed *c = NULL;
        int res;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        skip_ws(s, n, &i);
        if (qwen && (res = literal(s, n, &i, M_FUNCTION, LEN(M_FUNCTION))) != DONE) return res;
        if ((res = bare_name(s, n, &i, c, st)) != DONE) return res;
        if (qwen && (res = literal(s, n, &i, ">", 1)) != DONE) return res;
        json_t *props = NULL; /* the function's properties, where the schemas are known */
        for (int k = 0; sc && k < sc->n; k++)
            if (!strcmp(sc->names[k], c->name)) props = json_object_get(sc->params[k], "properties");
        json_t *o = json_object();
        if (!o) {
            *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
            return BAD;
        }
        for (;;) { /* the parameters, up to the call's end */
            skip_ws(s, n, &i);
            size_t j = i;
            const char *end = qwen ? M_FUNCTION_END : M_TOOL_CALL_END;
            if ((res = literal(s, n, &j, end, strlen(end))) == DONE) {
                i = j;
                break;
            }
            size_t ka, ke, va, ve;
            if (res == MORE) goto partial;
            if (qwen) {
                if ((res = literal(s, n, &i, M_PARAM, LEN(M_PARAM))) != DONE) goto partial;
                size_t lim = n - i > 129 ? i + 129 : n; /* the name within 128 bytes, no tag in it */
                ka = i;
                while (i < lim && s[i] != '>' && s[i] != '<' && s[i] != '\n') i++;
                if (i == lim) {
                    res = lim < n ? BAD : MORE;
                    goto partial;
                }
                if (s[i] != '>' || i == ka) {
                    res = BAD;
                    goto partial;
                }
                ke = i++;
                if ((res = xml_value(s, n, &i, M_PARAM_END, json_value(props, s + ka, ke - ka), final, &va, &ve)) !=
                    DONE)
                    goto partial;
                if (ve > va && s[va] == '\n') va++;
                if (ve > va && s[ve - 1] == '\n') ve--;
            } else {
                if ((res = literal(s, n, &i, M_ARG_KEY, LEN(M_ARG_KEY))) != DONE) goto partial;
                if ((res = until(s, n, &i, M_ARG_KEY_END, &ka, &ke)) != DONE) goto partial;
                if (ke - ka > 128 || ke == ka) {
                    res = BAD;
                    goto partial;
                }
                skip_ws(s, n, &i);
                if ((res = literal(s, n, &i, M_ARG_VALUE, LEN(M_ARG_VALUE))) != DONE) goto partial;
                if ((res = xml_value(s, n, &i, M_ARG_VALUE_END, json_value(props, s + ka, ke - ka), final, &va,
                                     &ve)) != DONE)
                    goto partial;
            }
            char *key = dup_n(s + ka, ke - ka);
            json_t *v = key ? typed_value(props, key, s + va, ve - va) : NULL;
            if (!key || !v || json_object_set_new(o, key, v)) { /* (not UTF-8: not a call) */
                free(key);
                json_decref(o);
                if (!key) *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
                return BAD;
            }
            free(key);
        }
        if (qwen) {
            skip_ws(s, n, &i);
            if ((res = literal(s, n, &i, M_TOOL_CALL_END, LEN(M_TOOL_CALL_END))) != DONE) goto partial;
        }
        res = set_object(c, o, 0, st);
        json_decref(o);
        if (res == BAD) return BAD;
        c->complete = 1;
        skip_ws(s, n, &i);
        if (r->n_calls >= MAX_PARALLEL || literal(s, n, &i, M_TOOL_CALL, LEN(M_TOOL_CALL)) != DONE) return DONE;
        continue;
    partial: /* the call so far (a stream's, one cut short), or a malformed one */
        if (res != BAD && set_object(c, o, 1, st) == BAD) res = BAD;
        json_decref(o);
        return res;
    }
}

/* Kimi K2: after <|tool_calls_section_begin|>, calls <|tool_call_begin|>ID
 * <|tool_call_argument_begin|>{...}<|tool_call_end|>, ID "functions.F:I"
 * (F the name: the prefix and the index dropped), then the section's end. */
static int kimi_calls(const char *s, size_t n, size_t i, clf_tool_reply *r, clf_status *st) {
    for (;;) {
        int res;
        skip_ws(s, n, &i);
        size_t j = i;
        if (r->n_calls && (res = literal(s, n, &j, M_KIMI_END, LEN(M_KIMI_END))) != BAD) return DONE;
        if ((res = literal(s, n, &i, M_KIMI_CALL, LEN(M_KIMI_CALL))) != DONE) return res;
        clf_tool_parsed *c = NULL;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        size_t lim = n - i > 128 + LEN(M_KIMI_ARGS) ? i + 128 + LEN(M_KIMI_ARGS) : n; /* the id within 128 bytes */
        size_t a = find_at(s, lim, i, M_KIMI_ARGS);
        if (a == lim) return lim < n ? BAD : MORE;
        size_t x = i, e = a;
        while (x < e && is_ws(s[x])) x++;
        while (e > x && is_ws(s[e - 1])) e--;
        if (e - x >= 10 && !memcmp(s + x, "functions.", 10)) x += 10;
        for (size_t k = e; k > x; k--) /* ":I", the call's index */
            if (s[k - 1] == ':') {
                e = k - 1;
                break;
            }
        if (delimited_name(s, x, e, c, st) != DONE) return BAD;
        i = a + LEN(M_KIMI_ARGS);
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        skip_ws(s, n, &i);
        if ((res = literal(s, n, &i, M_KIMI_CALL_END, LEN(M_KIMI_CALL_END))) != DONE) return res;
        c->complete = 1;
    }
}

/* functionary v3.1: <function=F>{...}</function>, one after another; or
 * (at) <|python_tag|> and the rest of the reply, a call of "python": its
 * JSON object as the arguments, a JSON string or other text as {"code"}. */
static int functionary_calls(const char *s, size_t n, size_t at, int final, clf_tool_reply *r, clf_status *st) {
    size_t i = at;
    int res;
    if (literal(s, n, &i, M_PYTHON, LEN(M_PYTHON)) == DONE) {
        clf_tool_parsed *c = NULL;
        if (!final) return MORE; /* the code ends with the reply */
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if (!(c->name = strdup("python"))) {
            *st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
            return BAD;
        }
        size_t e = n;
        skip_ws(s, n, &i);
        trim_end(s, &e);
        if (e < i) e = i;
        json_t *j = json_loadb(s + i, e - i, JSON_DECODE_ANY, NULL), *o;
        if (json_is_object(j)) o = json_incref(j);
        else o = json_pack("{s:o}", "code", json_is_string(j) ? json_incref(j) : json_stringn(s + i, e - i));
        json_decref(j);
        res = o ? set_object(c, o, 0, st) : BAD;
        json_decref(o);
        if (res == BAD) return BAD; /* (not UTF-8: text) */
        c->complete = 1;
        return DONE;
    }
    for (;;) {
        clf_tool_parsed *c = NULL;
        if ((res = literal(s, n, &i, M_FUNCTION, LEN(M_FUNCTION))) != DONE) return res;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if ((res = bare_name(s, n, &i, c, st)) != DONE) return res;
        if ((res = literal(s, n, &i, ">", 1)) != DONE) return res;
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        skip_ws(s, n, &i);
        if ((res = literal(s, n, &i, M_FUNCTION_END, LEN(M_FUNCTION_END))) != DONE) return res;
        c->complete = 1;
        skip_ws(s, n, &i);
        size_t j = i;
        if (literal(s, n, &j, M_FUNCTION, LEN(M_FUNCTION)) != DONE) return DONE; /* the end, or not yet another */
    }
}

/* functionary v3.2's calls from s[i] (the reply's start, or past a
 * ">>>"): F\n{...}, then >>>F\n{...} for the next ones; F "all" is text,
 * not a call; with the schemas known, F must be one of the functions (a
 * reply's first line is otherwise text's). */
static int v32_calls(const clf_tf_schemas *sc, const char *s, size_t n, size_t i, int final, clf_tool_reply *r,
                     clf_status *st) {
    for (;;) {
        clf_tool_parsed *c = NULL;
        int res;
        if (r->n_calls >= MAX_PARALLEL) return BAD;
        if ((*st = add_call(r, &c)) != CLF_OK) return BAD;
        if ((res = bare_name(s, n, &i, c, st)) != DONE) /* (a final reply "Hi": text) */
            return res == MORE && final ? BAD : res;
        int known = !sc;
        for (int k = 0; sc && k < sc->n; k++) known |= !strcmp(sc->names[k], c->name);
        if (!known || !strcmp(c->name, "all")) return BAD;
        if ((res = literal(s, n, &i, "\n", 1)) != DONE) return res;
        skip_ws(s, n, &i);
        if (i >= n && final) return BAD; /* a line of one word: text */
        if ((res = args_value(s, n, &i, c, st)) != DONE) return res;
        c->complete = 1;
        skip_ws(s, n, &i);
        size_t j = i;
        if (literal(s, n, &j, M_V32, LEN(M_V32)) != DONE) return DONE; /* the end, or not yet another call */
        i = j;
    }
}

/* Where a Harmony call's header starts, its recipient at `to`: the last
 * <|start|> or <|channel|> before it with no message between, else `to`. */
static size_t harmony_header(const char *s, size_t to) {
    size_t m = find_last(s, to, M_MESSAGE), a = find_last(s, to, M_START), b = find_last(s, to, M_CHANNEL);
    size_t from = m == (size_t)-1 ? 0 : m + LEN(M_MESSAGE), h = to;
    if (a != (size_t)-1 && a >= from && a < h) h = a;
    if (b != (size_t)-1 && b >= from && b < h) h = b;
    return h;
}

/* The format's markers that open calls (the first is what its grammar writes). */
static int markers(clf_tool_format f, const char **m) {
    switch (f) {
    case CLF_TOOLS_MISTRAL:
    case CLF_TOOLS_MISTRAL_ARGS: m[0] = M_MISTRAL; return 1;
    case CLF_TOOLS_GRANITE: m[0] = M_GRANITE; return 1;
    case CLF_TOOLS_COMMAND_R: m[0] = M_ACTION; return 1;
    case CLF_TOOLS_COMMAND_R7B: m[0] = M_START_ACTION; return 1;
    case CLF_TOOLS_DEEPSEEK_R1:
    case CLF_TOOLS_DEEPSEEK_V3: m[0] = M_DS_CALLS, m[1] = M_DS_CALL; return 2; /* R1 distills may skip the outer one */
    case CLF_TOOLS_HARMONY: m[0] = M_TO; return 1;
    case CLF_TOOLS_QWEN3_CODER:
    case CLF_TOOLS_GLM: m[0] = M_TOOL_CALL; return 1;
    case CLF_TOOLS_KIMI_K2: m[0] = M_KIMI; return 1;
    case CLF_TOOLS_FUNCTIONARY: m[0] = M_FUNCTION, m[1] = M_PYTHON; return 2;
    case CLF_TOOLS_FUNCTIONARY_V32: m[0] = M_V32; return 1;
    default: return 0;
    }
}

/* The calls from the marker at s[at] (Harmony: the recipient's). */
static int calls_at(clf_tool_format f, const clf_tf_schemas *sc, const char *s, size_t n, size_t at, const char *m,
                    int final, clf_tool_reply *r, clf_status *st) {
    size_t i = at + strlen(m);
    switch (f) {
    case CLF_TOOLS_MISTRAL:
    case CLF_TOOLS_MISTRAL_ARGS: return mistral_calls(s, n, i, r, st);
    case CLF_TOOLS_GRANITE: skip_ws(s, n, &i); return call_array(s, n, &i, "name", "arguments", r, st);
    case CLF_TOOLS_COMMAND_R: return command_r_calls(s, n, i, r, st);
    case CLF_TOOLS_COMMAND_R7B: skip_ws(s, n, &i); return call_array(s, n, &i, "tool_name", "parameters", r, st);
    case CLF_TOOLS_DEEPSEEK_R1:
    case CLF_TOOLS_DEEPSEEK_V3: return deepseek_calls(s, n, at, r, st);
    case CLF_TOOLS_HARMONY: return harmony_calls(s, n, at, r, st);
    case CLF_TOOLS_QWEN3_CODER:
    case CLF_TOOLS_GLM: return xml_calls(f, sc, s, n, i, final, r, st);
    case CLF_TOOLS_KIMI_K2: return kimi_calls(s, n, i, r, st);
    case CLF_TOOLS_FUNCTIONARY: return functionary_calls(s, n, at, final, r, st);
    case CLF_TOOLS_FUNCTIONARY_V32: return v32_calls(sc, s, n, i, final, r, st);
    default: return BAD;
    }
}

/* The calls from the k-th on dropped (none left pointing at freed text). */
static void drop_calls(clf_tool_reply *r, int k) {
    for (int i = k; i < r->n_calls; i++) {
        free(r->calls[i].name), free(r->calls[i].arguments);
        r->calls[i] = (clf_tool_parsed){0};
    }
    if (k < r->n_calls) r->n_calls = k;
}

/* How much of s[0, n) a stream may give as content while no call has
 * begun: not an end that may begin a marker (Harmony: nor a header not yet
 * closed by its <|message|>, which may name a recipient), nor the blanks
 * before it. */
static size_t stream_content(clf_tool_format f, const char *s, size_t n) {
    const char *m[2];
    int k = markers(f, m);
    size_t keep = n;
    for (int j = 0; j < k; j++) {
        size_t len = strlen(m[j]);
        for (size_t p = n > len ? n - len + 1 : 0; p < n; p++)
            if (!memcmp(s + p, m[j], n - p)) {
                if (p < keep) keep = p;
                break;
            }
    }
    if (f == CLF_TOOLS_HARMONY) {
        static const char *const OPENS[] = {M_START, M_CHANNEL};
        size_t msg = find_last(s, n, M_MESSAGE);
        for (int j = 0; j < 2; j++) {
            size_t a = find_last(s, n, OPENS[j]);
            if (a != (size_t)-1 && (msg == (size_t)-1 || a > msg) && a < keep) keep = a;
            size_t len = strlen(OPENS[j]); /* a beginning of one at the end */
            for (size_t p = n > len ? n - len + 1 : 0; p < n; p++)
                if (!memcmp(s + p, OPENS[j], n - p)) {
                    if (p < keep) keep = p;
                    break;
                }
        }
    }
    trim_end(s, &keep);
    return keep;
}

clf_status clf_tf_parse(clf_tool_format f, const clf_tf_schemas *sc, const char *s, size_t n, int final,
                        clf_tool_reply *r) {
    const char *m[2];
    int k = markers(f, m);
    clf_status st = CLF_OK;
    size_t from = 0;
    for (;;) {
        /* the first marker from `from` */
        size_t at = n;
        const char *which = NULL;
        for (int j = 0; j < k; j++) {
            size_t p = find_at(s, n, from, m[j]);
            if (p < at) at = p, which = m[j];
        }
        if (f == CLF_TOOLS_FUNCTIONARY_V32 && from == 0) at = 0, which = ""; /* the prompt wrote the first ">>>" */
        if (!which) break;
        int res = calls_at(f, sc, s, n, at, which, final, r, &st);
        if (st != CLF_OK) return st;
        /* What a stream is told of calls stands (a client cannot take back a
         * call it was sent): whole calls stay, a malformed one after them
         * ends the calls; and a stream is told of a call once it is whole
         * (one not yet whole may still turn out text). Only the last call
         * may be unfinished. */
        int whole = 0;
        while (whole < r->n_calls && r->calls[whole].complete) whole++;
        const int ended = res == BAD && whole; /* the malformed call goes */
        if (ended) res = DONE;
        if (res != BAD) {
            /* content: what precedes the calls (Harmony: their first header) */
            r->content_len = f == CLF_TOOLS_HARMONY ? harmony_header(s, at) : at;
            trim_end(s, &r->content_len);
            if (!final || ended) drop_calls(r, whole);
            else if (r->n_calls && !r->calls[r->n_calls - 1].name) drop_calls(r, r->n_calls - 1); /* nothing to report of it */
            return CLF_OK;
        }
        drop_calls(r, 0); /* a marker that opens no well-formed call is text */
        from = at + 1;
    }
    r->content_len = final ? n : stream_content(f, s, n);
    return CLF_OK;
}

/* ---- the grammar ----------------------------------------------------------------- */

/* A grammar being written; the first failure sticks. */
typedef struct gtext {
    clf_buf b;
    clf_status st;
} gtext;

static void gput(gtext *g, const char *s) {
    if (g->st == CLF_OK && clf_buf_add(&g->b, s, strlen(s)) != CLF_OK) g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
}

static void gprintf(gtext *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gprintf(gtext *g, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof line) {
        if (g->st == CLF_OK) g->st = clf_fail(CLF_ERR_ARG, "a tool grammar's line is too long");
        return;
    }
    gput(g, line);
}

/* The UTF-8 characters of s, one at a time: its length at s (0 at the end). */
static size_t char_len(const char *s) {
    unsigned char c = (unsigned char)*s;
    size_t k = !c ? 0 : c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    for (size_t i = 1; i < k; i++)
        if (!s[i]) return i;
    return k;
}

/* One character as a GBNF literal's or class's text: ASCII punctuation
 * escaped (\xHH), other bytes as they are. */
static void gchar(char *out, const char *c, size_t k) {
    unsigned char b = (unsigned char)c[0];
    if (k == 1 && !((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')))
        snprintf(out, 8, "\\x%02X", b);
    else {
        memcpy(out, c, k);
        out[k] = 0;
    }
}

/* Text that holds no `marker` (a beginning of it at the text's end
 * allowed), as the automaton that matches it (rules named P-free, P the
 * prefix): P-aK, having matched its first K characters, goes on (K+1),
 * back to 1 on its first character, else to the loop; P-eK the same at the
 * end. Sound where the marker's first character occurs only first (every
 * format's marker: checked). x1 (GBNF class text, "" for none): characters
 * never after the first one either (a second marker's second character,
 * where both begin alike: functionary's "<|python_tag|>" beside "<function="). */
static void free_text(gtext *g, const char *marker, const char *P, const char *x1) {
    char ch[64][8];
    int k = 0;
    for (const char *p = marker; *p && k < 64;) {
        size_t l = char_len(p);
        gchar(ch[k++], p, l);
        p += l;
    }
    for (int j = 1; j < k; j++)
        if (!strcmp(ch[j], ch[0]) && g->st == CLF_OK) g->st = clf_fail(CLF_ERR_ARG, "a marker repeats its first character");
    gprintf(g, "%sfree ::= ( [^%s] | \"%s\" %sa1 )* %send\n%send ::= \"\" | \"%s\" %se1\n", P, ch[0], ch[0], P, P, P,
            ch[0], P);
    for (int j = 1; j < k - 1; j++) {
        gprintf(g, "%sa%d ::= [^%s%s%s] | \"%s\" %sa%d | \"%s\" %sa1\n", P, j, ch[0], ch[j], j == 1 ? x1 : "", ch[j], P,
                j + 1, ch[0], P);
        gprintf(g, "%se%d ::= \"\" | \"%s\" %se%d | \"%s\" %se1\n", P, j, ch[j], P, j + 1, ch[0], P);
    }
    gprintf(g, "%sa%d ::= [^%s%s%s] | \"%s\" %sa1\n%se%d ::= \"\" | \"%s\" %se1\n", P, k - 1, ch[0], ch[k - 1],
            k == 2 ? x1 : "", ch[0], P, P, k - 1, ch[0], P);
}

/* gbnf with each rule name prefixed (a converter's grammar beside others):
 * names outside strings, classes, repetition braces and comments. */
static void put_prefixed(gtext *g, const char *gbnf, const char *prefix) {
    const char *p = gbnf;
    char one[2] = {0, 0};
    while (*p && g->st == CLF_OK) {
        if (*p == '"' || *p == '[') { /* a literal or a class, escapes and all */
            char close = *p == '"' ? '"' : ']';
            const char *q = p + 1;
            while (*q && *q != close) q += q[0] == '\\' && q[1] ? 2 : 1;
            if (*q) q++;
            if (clf_buf_add(&g->b, p, (size_t)(q - p)) != CLF_OK) g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
            p = q;
        } else if (*p == '{' || *p == '#') { /* {m,n}; a comment to the line's end */
            const char *q = p + strcspn(p, *p == '{' ? "}" : "\n");
            if (*q) q++;
            if (clf_buf_add(&g->b, p, (size_t)(q - p)) != CLF_OK) g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
            p = q;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
            size_t k = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");
            gput(g, prefix);
            if (clf_buf_add(&g->b, p, k) != CLF_OK) g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
            p += k;
        } else {
            one[0] = *p++;
            gput(g, one);
        }
    }
    gput(g, "\n");
}

/* Function i's parameters' grammar, its rules prefixed "tc-fI-" (start
 * rule tc-fI-root). */
static void params_grammar(gtext *g, json_t *params, int i) {
    if (g->st != CLF_OK) return;
    char *schema = params ? json_dumps(params, JSON_COMPACT | JSON_PRESERVE_ORDER)
                          : strdup("{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}");
    char *gbnf = NULL, prefix[32];
    if (!schema) {
        g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return;
    }
    g->st = clf_json_schema_to_gbnf(schema, strlen(schema), &gbnf);
    if (g->st != CLF_OK) g->st = clf_fail_ctx(g->st, "tools[%d].function.parameters: ", i);
    snprintf(prefix, sizeof prefix, "tc-f%d-", i);
    if (g->st == CLF_OK) put_prefixed(g, gbnf, prefix);
    free(gbnf);
    free(schema);
}

/* s as a GBNF literal's text (quotes, backslashes and controls escaped). */
static void gliteral(gtext *g, const char *s) {
    char one[8];
    for (; *s && g->st == CLF_OK; s++) {
        unsigned char b = (unsigned char)*s;
        if (b == '"' || b == '\\' || b < 0x20 || b == 0x7F) snprintf(one, sizeof one, "\\x%02X", b);
        else one[0] = (char)b, one[1] = 0;
        gput(g, one);
    }
}

/* A parameter value's grammar, rule P-root (P: "tc-fI-vJ-"): a string's
 * raw text (one of its enum's strings, where it has one; else any text
 * without `close`, what ends a value), another type's JSON by its schema
 * (the function's $defs beside it, for its references). */
static void xml_value_grammar(gtext *g, json_t *params, json_t *ps, const char *close, const char *P) {
    json_t *type = json_object_get(ps, "type"), *en = json_object_get(ps, "enum");
    int string = json_is_string(type) && !strcmp(json_string_value(type), "string");
    if (json_is_array(type)) { /* a type of several with string among them: the string's text (llama.cpp's) */
        size_t k;
        json_t *e;
        json_array_foreach(type, k, e) string |= json_is_string(e) && !strcmp(json_string_value(e), "string");
    }
    if (!ps || !json_is_object(ps) || (!type && !en && !json_object_get(ps, "const") && !json_object_get(ps, "$ref") &&
                                       !json_object_get(ps, "anyOf") && !json_object_get(ps, "oneOf")))
        string = 1; /* no type said: any text */
    if (string) {
        int all = json_is_array(en) && json_array_size(en) > 0;
        size_t k;
        json_t *e;
        json_array_foreach(en, k, e) all &= json_is_string(e);
        if (all) {
            gprintf(g, "%sroot ::= ", P);
            json_array_foreach(en, k, e) {
                gput(g, k ? " | \"" : "\"");
                gliteral(g, json_string_value(e));
                gput(g, "\"");
            }
            gput(g, "\n");
        } else {
            gprintf(g, "%sroot ::= %sfree\n", P, P);
            free_text(g, close, P, "");
        }
        return;
    }
    json_t *copy = json_deep_copy(ps);
    static const char *const DEFS[] = {"$defs", "definitions"};
    for (int k = 0; copy && k < 2; k++)
        if (json_object_get(params, DEFS[k]) && !json_object_get(copy, DEFS[k]))
            json_object_set(copy, DEFS[k], json_object_get(params, DEFS[k]));
    char *schema = copy ? json_dumps(copy, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL, *gbnf = NULL;
    json_decref(copy);
    if (!schema) {
        if (g->st == CLF_OK) g->st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        return;
    }
    if (g->st == CLF_OK) g->st = clf_json_schema_to_gbnf(schema, strlen(schema), &gbnf);
    if (g->st == CLF_OK) put_prefixed(g, gbnf, P);
    free(gbnf);
    free(schema);
}

/* Function i's parameters as Qwen3-Coder's or GLM's XML, rule tc-fI-root:
 * the properties in the schema's order, each required one once, each
 * other at most once (the parser takes any order: the grammar holds the
 * model to one). */
static void xml_params_grammar(gtext *g, clf_tool_format f, json_t *params, int i) {
    json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    const int qwen = f == CLF_TOOLS_QWEN3_CODER;
    const char *key;
    json_t *ps;
    int j = 0;
    gprintf(g, "tc-f%d-root ::= \"\"", i);
    json_object_foreach(props, key, ps) {
        int required = 0;
        size_t k;
        json_t *e;
        json_array_foreach(req, k, e) required |= json_is_string(e) && !strcmp(json_string_value(e), key);
        gprintf(g, " tc-f%d-p%d%s", i, j++, required ? "" : "?");
        /* a name the parser reads back (xml_calls): 1 to 128 bytes, Qwen3-Coder's without what ends it there
         * ('>', '<', a newline), GLM's without its closing tag; another would make calls that parse otherwise */
        size_t kn = strlen(key);
        if ((!kn || kn > 128 || (qwen ? strpbrk(key, "<>\n") != NULL : strstr(key, M_ARG_KEY_END) != NULL)) &&
            g->st == CLF_OK)
            g->st = clf_fail(CLF_ERR_ARG, "the property name '%.64s' cannot be written in %s's tags", key,
                             clf_tools_format_name(f));
    }
    gput(g, "\n");
    j = 0;
    json_object_foreach(props, key, ps) {
        char P[48];
        snprintf(P, sizeof P, "tc-f%d-v%d-", i, j);
        gprintf(g, "tc-f%d-p%d ::= \"%s", i, j, qwen ? "<parameter=" : "<arg_key>");
        gliteral(g, key);
        gprintf(g, "%s\" %sroot \"%s\"\n", qwen ? ">\\n" : "</arg_key>\\n<arg_value>", P,
                qwen ? "\\n</parameter>\\n" : "</arg_value>\\n");
        /* (a string's raw text holds no closing tag: the parser ends it at the first; another
         * type's JSON it takes whole, a tag inside its strings and all: xml_value) */
        xml_value_grammar(g, params, ps, qwen ? M_PARAM_END : M_ARG_VALUE_END, P);
        j++;
    }
    if (g->st != CLF_OK) g->st = clf_fail_ctx(g->st, "tools[%d].function.parameters: ", i);
}

clf_status clf_tf_grammar(clf_tool_format f, clf_tool_choice choice, int parallel, const char *const *names,
                          json_t *const *params, int n, int only, const char *call_gbnf, char **gbnf) {
    *gbnf = NULL;
    if (f == CLF_TOOLS_HARMONY && choice == CLF_TOOL_AUTO) return CLF_OK; /* no grammar: see clf_tools_grammar */
    const char *m[2];
    if (!markers(f, m)) return clf_fail(CLF_ERR_FORMAT, "the %s tool format has no grammar here", clf_tools_format_name(f));
    int more = parallel && f != CLF_TOOLS_HARMONY ? MAX_PARALLEL - 1 : 0; /* Harmony: a call a message, one a reply */
    int object = f == CLF_TOOLS_MISTRAL || f == CLF_TOOLS_GRANITE || f == CLF_TOOLS_COMMAND_R ||
                 f == CLF_TOOLS_COMMAND_R7B;
    if (object && !call_gbnf) return clf_fail(CLF_ERR_ARG, "the %s tool format takes the call's grammar", clf_tools_format_name(f));
    if (!object && call_gbnf)
        return clf_fail(CLF_ERR_ARG, "the %s tool format writes the name outside the call's JSON: use clf_tools_grammar",
                        clf_tools_format_name(f));
    gtext g = {0};
    if (f == CLF_TOOLS_FUNCTIONARY_V32) /* after the prompt's ">>>": calls, or all\n and text, then ">>>" and calls */
        gput(&g, choice == CLF_TOOL_AUTO ? "tc-root ::= tc-calls | \"all\\n\" tc-free ( \">>>\" tc-calls )?\n"
                                         : "tc-root ::= tc-calls\n");
    else gput(&g, choice == CLF_TOOL_AUTO ? "tc-root ::= tc-free tc-calls?\n" : "tc-root ::= tc-calls\n");
    switch (f) {
    case CLF_TOOLS_MISTRAL: gprintf(&g, "tc-calls ::= \"[TOOL_CALLS][\" root ( \", \" root ){0,%d} \"]\"\n", more); break;
    case CLF_TOOLS_GRANITE: gprintf(&g, "tc-calls ::= \"<|tool_call|>[\" root ( \", \" root ){0,%d} \"]\"\n", more); break;
    case CLF_TOOLS_COMMAND_R:
        gprintf(&g, "tc-calls ::= \"Action:\\n```json\\n[\\n\" root ( \",\\n\" root ){0,%d} \"\\n]\\n```\"\n", more);
        break;
    case CLF_TOOLS_COMMAND_R7B:
        gprintf(&g, "tc-calls ::= \"<|START_ACTION|>[\" root ( \", \" root ){0,%d} \"]<|END_ACTION|>\"\n", more);
        break;
    case CLF_TOOLS_MISTRAL_ARGS:
        gprintf(&g, "tc-calls ::= tc-call{1,%d}\ntc-call ::= \"[TOOL_CALLS]\" tc-fn\n", more + 1);
        break;
    case CLF_TOOLS_HARMONY: gput(&g, "tc-calls ::= \"<|channel|>commentary to=functions.\" tc-fn\n"); break;
    case CLF_TOOLS_DEEPSEEK_R1:
        gprintf(&g, "tc-calls ::= \"%s\" tc-call ( \"\\n\" tc-call ){0,%d} \"%s\"\ntc-call ::= \"%sfunction%s\" tc-fn "
                    "\"\\n```%s\"\n", M_DS_CALLS, more, M_DS_CALLS_END, M_DS_CALL, M_DS_SEP, M_DS_END);
        break;
    case CLF_TOOLS_DEEPSEEK_V3:
        gprintf(&g, "tc-calls ::= \"%s\" tc-call tc-call{0,%d} \"%s\"\ntc-call ::= \"%s\" tc-fn \"%s\"\n", M_DS_CALLS,
                more, M_DS_CALLS_END, M_DS_CALL, M_DS_END);
        break;
    case CLF_TOOLS_QWEN3_CODER: /* the calls on lines of their own, as the template writes them */
        gprintf(&g, "tc-calls ::= tc-call ( \"\\n\" tc-call ){0,%d}\ntc-call ::= \"<tool_call>\\n<function=\" tc-fn "
                    "\"</function>\\n</tool_call>\"\n", more);
        break;
    case CLF_TOOLS_GLM:
        gprintf(&g, "tc-calls ::= tc-call ( \"\\n\" tc-call ){0,%d}\n"
                    "tc-call ::= \"<tool_call>\" tc-fn \"</tool_call>\"\n", more);
        break;
    case CLF_TOOLS_KIMI_K2: /* the call's index: the template counts the conversation's calls */
        gprintf(&g, "tc-calls ::= \"%s\" tc-call{1,%d} \"%s\"\ntc-call ::= \"%sfunctions.\" tc-fn \"%s\"\n", M_KIMI,
                more + 1, M_KIMI_END, M_KIMI_CALL, M_KIMI_CALL_END);
        break;
    case CLF_TOOLS_FUNCTIONARY:
        gprintf(&g, "tc-calls ::= tc-call{1,%d}\ntc-call ::= \"<function=\" tc-fn \"</function>\"\n", more + 1);
        break;
    case CLF_TOOLS_FUNCTIONARY_V32: gprintf(&g, "tc-calls ::= tc-fn ( \">>>\" tc-fn ){0,%d}\n", more); break;
    default: break;
    }
    if (!object) { /* each function: its name, what follows it, its parameters */
        static const char *const AFTER[] = {[CLF_TOOLS_MISTRAL_ARGS] = "[ARGS]",
                                            [CLF_TOOLS_HARMONY] = " <|constrain|>json<|message|>",
                                            [CLF_TOOLS_DEEPSEEK_R1] = "\\n```json\\n",
                                            [CLF_TOOLS_DEEPSEEK_V3] = M_DS_SEP,
                                            [CLF_TOOLS_QWEN3_CODER] = ">\\n",
                                            [CLF_TOOLS_GLM] = "\\n",
                                            [CLF_TOOLS_KIMI_K2] = ":\" [0-9]{1,3} \"<|tool_call_argument_begin|>",
                                            [CLF_TOOLS_FUNCTIONARY] = ">",
                                            [CLF_TOOLS_FUNCTIONARY_V32] = "\\n"};
        gput(&g, "tc-fn ::= ");
        for (int i = 0, first = 1; i < n; i++) {
            if (only >= 0 && i != only) continue;
            gprintf(&g, "%s\"%s%s\" tc-f%d-root", first ? "" : " | ", names[i], AFTER[f], i);
            first = 0;
        }
        gput(&g, "\n");
        for (int i = 0; i < n; i++) {
            if (only >= 0 && i != only) continue;
            if (f == CLF_TOOLS_QWEN3_CODER || f == CLF_TOOLS_GLM) xml_params_grammar(&g, f, params[i], i);
            else params_grammar(&g, params[i], i);
        }
    }
    if (choice == CLF_TOOL_AUTO && f == CLF_TOOLS_FUNCTIONARY_V32) /* text with no ">>>" (its first character repeats) */
        gput(&g, "tc-free ::= ( [^>] | \">\" [^>] | \">>\" [^>] )* ( \"\" | \">\" | \">>\" )\n");
    else if (choice == CLF_TOOL_AUTO) free_text(&g, m[0], "tc-", f == CLF_TOOLS_FUNCTIONARY ? "\\x7C" : "");
    if (object) gput(&g, call_gbnf);
    if (g.st != CLF_OK) {
        clf_buf_free(&g.b);
        return g.st;
    }
    *gbnf = g.b.p;
    return CLF_OK;
}

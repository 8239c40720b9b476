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

#define LEN(lit) (sizeof lit - 1)

clf_tool_format clf_tf_detect(const char *j) {
    if (!j) return CLF_TOOLS_NONE;
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

/* A function's name at s[*i], up to a byte of none of OpenAI's name
 * characters (stop: what must follow; MORE where the text ends first). */
static int bare_name(const char *s, size_t n, size_t *i, clf_tool_parsed *c, clf_status *st) {
    size_t at = *i;
    while (*i < n && *i - at <= 64 &&
           strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", s[*i]) && s[*i])
        (*i)++;
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
            if (e == x || !(c->name = dup_n(s + x, e - x))) return e == x ? BAD : (*st = clf_fail(CLF_ERR_MEMORY, "out of host memory"), BAD);
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
    default: return 0;
    }
}

/* The calls from the marker at s[at] (Harmony: the recipient's). */
static int calls_at(clf_tool_format f, const char *s, size_t n, size_t at, const char *m, clf_tool_reply *r,
                    clf_status *st) {
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

clf_status clf_tf_parse(clf_tool_format f, const char *s, size_t n, int final, clf_tool_reply *r) {
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
        if (!which) break;
        int res = calls_at(f, s, n, at, which, r, &st);
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
 * allowed), as the automaton that matches it: tc-aK, having matched its
 * first K characters, goes on (K+1), back to 1 on its first character,
 * else to the loop; tc-eK the same at the end. Sound where the marker's
 * first character occurs only first (every format's marker: checked). */
static void free_text(gtext *g, const char *marker) {
    char ch[64][8];
    int k = 0;
    for (const char *p = marker; *p && k < 64;) {
        size_t l = char_len(p);
        gchar(ch[k++], p, l);
        p += l;
    }
    for (int j = 1; j < k; j++)
        if (!strcmp(ch[j], ch[0]) && g->st == CLF_OK) g->st = clf_fail(CLF_ERR_ARG, "a marker repeats its first character");
    gprintf(g, "tc-free ::= ( [^%s] | \"%s\" tc-a1 )* tc-end\ntc-end ::= \"\" | \"%s\" tc-e1\n", ch[0], ch[0], ch[0]);
    for (int j = 1; j < k - 1; j++) {
        gprintf(g, "tc-a%d ::= [^%s%s] | \"%s\" tc-a%d | \"%s\" tc-a1\n", j, ch[0], ch[j], ch[j], j + 1, ch[0]);
        gprintf(g, "tc-e%d ::= \"\" | \"%s\" tc-e%d | \"%s\" tc-e1\n", j, ch[j], j + 1, ch[0]);
    }
    gprintf(g, "tc-a%d ::= [^%s%s] | \"%s\" tc-a1\ntc-e%d ::= \"\" | \"%s\" tc-e1\n", k - 1, ch[0], ch[k - 1], ch[0],
            k - 1, ch[0]);
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
    gput(&g, choice == CLF_TOOL_AUTO ? "tc-root ::= tc-free tc-calls?\n" : "tc-root ::= tc-calls\n");
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
    default: break;
    }
    if (!object) { /* each function: its name, what follows it, its parameters */
        static const char *const AFTER[] = {[CLF_TOOLS_MISTRAL_ARGS] = "[ARGS]",
                                            [CLF_TOOLS_HARMONY] = " <|constrain|>json<|message|>",
                                            [CLF_TOOLS_DEEPSEEK_R1] = "\\n```json\\n",
                                            [CLF_TOOLS_DEEPSEEK_V3] = M_DS_SEP};
        gput(&g, "tc-fn ::= ");
        for (int i = 0, first = 1; i < n; i++) {
            if (only >= 0 && i != only) continue;
            gprintf(&g, "%s\"%s%s\" tc-f%d-root", first ? "" : " | ", names[i], AFTER[f], i);
            first = 0;
        }
        gput(&g, "\n");
        for (int i = 0; i < n; i++)
            if (only < 0 || i == only) params_grammar(&g, params[i], i);
    }
    if (choice == CLF_TOOL_AUTO) free_text(&g, m[0]);
    if (object) gput(&g, call_gbnf);
    if (g.st != CLF_OK) {
        clf_buf_free(&g.b);
        return g.st;
    }
    *gbnf = g.b.p;
    return CLF_OK;
}

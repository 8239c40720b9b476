/* Tool calls' private parts, shared by tools.c (the tools, rendering,
 * ChatML's and Llama's calls) and tool_formats.c (the other formats):
 * the JSON scanners the reply parsers are built of, over a length-
 * delimited text s[0, n) (a stream's text so far: any scanner may run out
 * of text, MORE), and the other formats' parsers and grammars. */
#ifndef CLF_TOOLS_IMPL_H
#define CLF_TOOLS_IMPL_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tools.h"

enum { MAX_PARALLEL = 16 }; /* calls in one reply: a small model may otherwise call on until max_tokens */

/* The scanners' answers: done (past it), more (the text ran out first), bad. */
enum { BAD = -1, MORE = 0, DONE = 1 };

static inline int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline void skip_ws(const char *s, size_t n, size_t *i) {
    while (*i < n && is_ws(s[*i])) (*i)++;
}

static inline int expect(const char *s, size_t n, size_t *i, char c) {
    skip_ws(s, n, i);
    if (*i >= n) return MORE;
    if (s[*i] != c) return BAD;
    (*i)++;
    return DONE;
}

/* A JSON string at s[*i]. */
static inline int string_end(const char *s, size_t n, size_t *i) {
    if (*i >= n) return MORE;
    if (s[*i] != '"') return BAD;
    for (size_t k = *i + 1; k < n; k++) {
        if ((unsigned char)s[k] < 0x20) return BAD;
        if (s[k] == '\\') k++;
        else if (s[k] == '"') {
            *i = k + 1;
            return DONE;
        }
    }
    return MORE;
}

/* A JSON value at s[*i] (its nesting followed, not checked in detail: the
 * grammar checked it). */
static inline int value_end(const char *s, size_t n, size_t *i) {
    if (*i >= n) return MORE;
    if (s[*i] == '"') return string_end(s, n, i);
    if (s[*i] == '{' || s[*i] == '[') {
        int depth = 0;
        for (size_t k = *i; k < n; k++) {
            if (s[k] == '"') {
                size_t j = k;
                int r = string_end(s, n, &j);
                if (r != DONE) return r;
                k = j - 1;
            } else if (s[k] == '{' || s[k] == '[') {
                if (++depth > 512) return BAD;
            } else if (s[k] == '}' || s[k] == ']') {
                if (--depth == 0) {
                    *i = k + 1;
                    return DONE;
                }
            }
        }
        return MORE;
    }
    size_t k = *i;
    while (k < n && !strchr(",}] \t\n\r", s[k])) k++;
    if (k == *i) return BAD;
    if (k == n) return MORE; /* a number may go on */
    *i = k;
    return DONE;
}

/* A key string at s[*i] that must be one of two. */
static inline int key(const char *s, size_t n, size_t *i, const char *a, const char *b) {
    skip_ws(s, n, i);
    size_t at = *i;
    int r = string_end(s, n, i);
    if (r != DONE) return r;
    size_t k = *i - at - 2;
    if ((strlen(a) == k && !memcmp(s + at + 1, a, k)) || (b && strlen(b) == k && !memcmp(s + at + 1, b, k))) return DONE;
    return BAD;
}

/* n bytes of a length-delimited text (no NUL after them: not strndup's string) */
static inline char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Whether s[i, n) is a prefix of lit (MORE), lit itself (DONE, i past it) or neither. */
static inline int literal(const char *s, size_t n, size_t *i, const char *lit, size_t k) {
    size_t have = n - *i < k ? n - *i : k;
    if (memcmp(s + *i, lit, have)) return BAD;
    if (have < k) return MORE;
    *i += k;
    return DONE;
}

static inline void trim_end(const char *s, size_t *n) {
    while (*n && is_ws(s[*n - 1])) (*n)--;
}

static inline clf_status add_call(clf_tool_reply *r, clf_tool_parsed **c) {
    clf_tool_parsed *v = realloc(r->calls, (size_t)(r->n_calls + 1) * sizeof *v);
    if (!v) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    r->calls = v;
    *c = &v[r->n_calls++];
    **c = (clf_tool_parsed){0};
    return CLF_OK;
}

/* ---- the other formats (tool_formats.c) ------------------------------------ */

/* The format a template's text writes calls in, of those tool_formats.c
 * parses (CLF_TOOLS_NONE: none of them). */
clf_tool_format clf_tf_detect(const char *tmpl);
/* The functions' schemas a parse types raw parameter values by (XML formats). */
typedef struct clf_tf_schemas {
    const char *const *names;
    json_t *const *params; /* params[i] NULL: none */
    int n;
} clf_tf_schemas;

/* Parses s[0, n) in format f into r (empty): as clf_tools_parse says; sc
 * (may be NULL) types Qwen3-Coder's and GLM's values. */
clf_status clf_tf_parse(clf_tool_format f, const clf_tf_schemas *sc, const char *s, size_t n, int final,
                        clf_tool_reply *r);
/* The reply's grammar in format f: the functions' names and parameters
 * (params[i] NULL: any object), all n or only `only` (>= 0), parallel
 * calls or one; the JSON-object formats (Mistral's array, Granite,
 * Command R) take call_gbnf (the call object's grammar, start rule
 * root, from clf_tools_call_schema), the others convert each function's
 * parameters themselves. *gbnf NULL with CLF_OK: no grammar (Harmony under
 * auto: its text is its channels, which no grammar can write). */
clf_status clf_tf_grammar(clf_tool_format f, clf_tool_choice choice, int parallel, const char *const *names,
                          json_t *const *params, int n, int only, const char *call_gbnf, char **gbnf);

#endif

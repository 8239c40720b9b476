/* Tool calls: rendering against the models' own Jinja templates rendered by
 * jinja2 (tests/peer/record_tools.py -> tests/data/tool_templates.json:
 * SmolLM2 in Qwen2.5's format, Qwen2.5, Qwen3, Llama 3.1 and 3.2), the
 * formats without tools refused, and the reply parser on random calls
 * (names, arguments with escapes, nesting and UTF-8), whole and cut at
 * every byte as a stream sees it. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "chat.h"
#include "grammar.h"
#include "json_schema.h"
#include "testutil.h"
#include "tools.h"
#include "tool_stream.h"

/* ---- rendering ------------------------------------------------------------- */

static json_t *load_records(void) {
    json_error_t je;
    json_t *d = json_load_file("tests/data/tool_templates.json", 0, &je);
    if (!d) fail_msg("tests/data/tool_templates.json: %s (line %d)", je.text, je.line);
    assert_true(json_is_array(d) && json_array_size(d) >= 20);
    return d;
}

static const char *str_or_null(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A record's messages as the library's (calls in one array beside them). */
static int record_messages(json_t *msgs, clf_tool_msg **out, clf_tool_call **calls) {
    int n = (int)json_array_size(msgs), nc = 0;
    *out = calloc((size_t)n, sizeof **out);
    *calls = calloc(64, sizeof **calls);
    assert_non_null(*out);
    assert_non_null(*calls);
    for (int i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, (size_t)i), *tc = json_object_get(m, "tool_calls");
        clf_tool_msg *o = &(*out)[i];
        o->role = str_or_null(m, "role");
        o->content = str_or_null(m, "content");
        o->tool_call_id = str_or_null(m, "tool_call_id");
        o->calls = *calls + nc;
        for (size_t k = 0; k < json_array_size(tc); k++, nc++) {
            json_t *c = json_array_get(tc, k);
            (*calls)[nc] = (clf_tool_call){str_or_null(c, "id"), str_or_null(c, "name"), str_or_null(c, "arguments")};
            o->n_calls++;
        }
    }
    return n;
}

static void test_render_matches_templates(void **state) {
    (void)state;
    json_t *d = load_records();
    size_t r;
    json_t *rec;
    int checked = 0, refused = 0;
    json_array_foreach(d, r, rec) {
        const char *name = str_or_null(rec, "name"), *want = str_or_null(rec, "rendering"),
                   *tools_json = str_or_null(rec, "tools");
        clf_chat c;
        TU_OK(clf_chat_init(str_or_null(rec, "template"), &c));
        if (c.knowledge[0] && strstr(str_or_null(rec, "template"), "strftime_now")) {
            snprintf(c.date, sizeof c.date, "%s", str_or_null(rec, "date"));
            /* the template run: strftime_now at noon UTC that day */
            struct tm tm = {0};
            assert_non_null(strptime(c.date, "%d %b %Y", &tm));
            tm.tm_hour = 12;
            c.now = timegm(&tm);
        }
        TU_OK(clf_tools_supported(&c));
        clf_tools *t = NULL;
        if (tools_json) TU_OK(clf_tools_create(&c, tools_json, strlen(tools_json), &t));
        clf_tool_msg *m;
        clf_tool_call *calls;
        int n = record_messages(json_object_get(rec, "messages"), &m, &calls);
        char *buf = NULL;
        size_t len = 0;
        clf_status st = clf_tools_render(&c, t, m, n, 1, &buf, &len);
        if (!want) { /* the template raises: so must clinfer */
            if (st == CLF_OK) fail_msg("%s record %zu: rendered where the template raises:\n%s", name, r, buf);
            refused++;
        } else {
            if (st != CLF_OK) fail_msg("%s record %zu: %s", name, r, clf_last_error());
            if (strcmp(buf, want)) {
                size_t at = 0;
                while (buf[at] && buf[at] == want[at]) at++;
                size_t from = at > 80 ? at - 80 : 0;
                fail_msg("%s record %zu differs at byte %zu:\n--- clinfer\n%.160s\n--- template\n%.160s", name, r, at,
                         buf + from, want + from);
            }
            assert_int_equal(len, strlen(want));
            checked++;
        }
        free(buf);
        free(m);
        free(calls);
        clf_tools_free(t);
    }
    assert_true(checked >= 20 && refused >= 1);
    json_decref(d);
}

/* Formats with no tool syntax refuse tools, calls and results, naming the format. */
static void test_formats_without_tools(void **state) {
    (void)state;
    static const char *const TEMPLATES[] = {"<start_of_turn>", "<|user|><|end|>", "<|user|>",
                                            "<|start_header_id|>"}; /* Gemma, Phi-3, Zephyr, Llama 3.0 */
    static const char *const NAMES[] = {"Gemma", "Phi-3", "Zephyr", "Llama-3"};
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    for (int i = 0; i < 4; i++) {
        clf_chat c;
        TU_OK(clf_chat_init(TEMPLATES[i], &c));
        clf_tools *t = (clf_tools *)1;
        assert_int_equal(clf_tools_create(&c, tools, strlen(tools), &t), CLF_ERR_FORMAT);
        assert_null(t);
        assert_non_null(strstr(clf_last_error(), NAMES[i]));
        clf_tool_call call = {"call_1", "f", "{}"};
        clf_tool_msg m[2] = {{"user", "hi", NULL, 0, NULL}, {"assistant", NULL, &call, 1, NULL}};
        char *buf = NULL;
        size_t len;
        assert_int_equal(clf_tools_render(&c, NULL, m, 2, 1, &buf, &len), CLF_ERR_FORMAT);
        assert_null(buf);
        clf_tool_reply *rep;
        assert_int_equal(clf_tools_parse(&c, "x", 1, 1, &rep), CLF_ERR_FORMAT);
    }
}

static void test_bad_tools(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init(NULL, &c));
    static const char *const BAD[] = {
        "", "{}", "[]", "[1]", "[{\"type\":\"function\"}]", "[{\"type\":\"x\",\"function\":{\"name\":\"f\"}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":3}}]",
        "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        clf_tools *t = (clf_tools *)1;
        assert_int_equal(clf_tools_create(&c, BAD[i], strlen(BAD[i]), &t), CLF_ERR_ARG);
        assert_null(t);
    }
}

/* The call schema: one object per function (named: that one), its
 * parameters nested, $defs hoisted to the root. */
static void test_call_schema(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init(NULL, &c));
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"x\":{\"$ref\":\"#/$defs/X\"}},\"$defs\":{\"X\":{\"type\":\"integer\"}}}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"b\"}}]";
    clf_tools *t;
    TU_OK(clf_tools_create(&c, tools, strlen(tools), &t));
    char *s;
    TU_OK(clf_tools_call_schema(t, CLF_TOOL_REQUIRED, NULL, &s));
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "anyOf")), 2);
    assert_true(json_is_object(json_object_get(json_object_get(j, "$defs"), "X")));
    json_t *a = json_array_get(json_object_get(j, "anyOf"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(a, "properties"), "name"), "const")), "a");
    assert_null(json_object_get(json_object_get(json_object_get(a, "properties"), "arguments"), "$defs"));
    json_decref(j);
    free(s);
    TU_OK(clf_tools_call_schema(t, CLF_TOOL_NAMED, "b", &s));
    j = json_loads(s, 0, NULL);
    assert_null(json_object_get(j, "anyOf"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(j, "properties"), "name"), "const")), "b");
    json_decref(j);
    free(s);
    assert_int_equal(clf_tools_call_schema(t, CLF_TOOL_NAMED, "zz", &s), CLF_ERR_ARG);
    char *g;
    assert_int_equal(clf_tools_wrap_grammar(t, CLF_TOOL_REQUIRED, 1, "root ::= \"x\"\ntc-x ::= \"y\"\n", &g), CLF_ERR_ARG);
    clf_tools_free(t);
}

/* ---- parsing --------------------------------------------------------------- */

static void rnd_string(uint64_t *s, char *out, size_t cap) {
    static const char *const PIECES[] = {"a", "Z", "0", " ", "\\\"", "\\\\", "\\n", "\\u00e9", "é", "日本", "{", "}",
                                         "[", "]", ",", ":", "<tool_call>", "</tool_call>", "\\/", "'"};
    size_t n = 0, k = tu_next(s) % 12;
    out[n++] = '"';
    for (size_t i = 0; i < k; i++) {
        const char *p = PIECES[tu_next(s) % (sizeof PIECES / sizeof *PIECES)];
        if (n + strlen(p) + 2 >= cap) break;
        memcpy(out + n, p, strlen(p));
        n += strlen(p);
    }
    out[n++] = '"';
    out[n] = 0;
}

/* A random JSON value's text with random blanks, depth-bounded. */
static void rnd_value(uint64_t *s, int depth, char *out, size_t cap, int object) {
    char piece[256];
    size_t n = strlen(out);
    int kind = object ? 0 : (int)(tu_next(s) % (depth > 3 ? 4 : 6));
    const char *ws = tu_next(s) % 3 ? "" : (tu_next(s) % 2 ? " " : "\n  ");
    if (kind == 0 || kind == 5) { /* object / array */
        int obj = kind == 0, k = (int)(tu_next(s) % 4);
        snprintf(out + n, cap - n, "%s", obj ? "{" : "[");
        for (int i = 0; i < k && strlen(out) + 300 < cap; i++) {
            if (i) strcat(out, ",");
            strcat(out, ws);
            if (obj) {
                rnd_string(s, piece, 64);
                strcat(out, piece);
                strcat(out, ": ");
            }
            rnd_value(s, depth + 1, out, cap, 0);
        }
        strcat(out, ws);
        strcat(out, obj ? "}" : "]");
    } else if (kind == 1) {
        rnd_string(s, piece, sizeof piece);
        snprintf(out + n, cap - n, "%s", piece);
    } else if (kind == 2) {
        snprintf(out + n, cap - n, "%lld", (long long)(tu_next(s) % 200000) - 100000);
    } else if (kind == 3) {
        snprintf(out + n, cap - n, "%s", tu_next(s) % 2 ? "true" : "null");
    } else {
        snprintf(out + n, cap - n, "-%llu.%lluE+%d", (unsigned long long)(tu_next(s) % 100),
                 (unsigned long long)(tu_next(s) % 1000), (int)(tu_next(s) % 9));
    }
}

typedef struct want_call {
    char name[80];
    char args[4096];
} want_call;

static void rnd_name(uint64_t *s, char *out) {
    static const char CH[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    int k = 1 + (int)(tu_next(s) % 20);
    for (int i = 0; i < k; i++) out[i] = CH[tu_next(s) % (sizeof CH - 1)];
    out[k] = 0;
}

static void parse_round_trips(const char *tmpl, int chatml) {
    uint64_t s = tu_seed();
    clf_chat c;
    TU_OK(clf_chat_init(tmpl, &c));
    want_call *w = malloc(4 * sizeof *w);
    size_t cap = 20000;
    char *text = malloc(cap);
    assert_non_null(w);
    assert_non_null(text);
    for (int iter = 0; iter < 200; iter++) {
        int n = chatml ? (int)(tu_next(&s) % 4) : (int)(tu_next(&s) % 2);
        const char *content = chatml && tu_next(&s) % 2 ? "Sure, <tool_c  <let me> check.\n" : "";
        if (!chatml && n == 0) content = "Plain {text} reply.";
        snprintf(text, cap, "%s", content);
        for (int i = 0; i < n; i++) {
            rnd_name(&s, w[i].name);
            w[i].args[0] = 0;
            rnd_value(&s, 0, w[i].args, sizeof w[i].args, tu_next(&s) % 4 != 0);
            size_t at = strlen(text);
            if (chatml)
                snprintf(text + at, cap - at, "%s<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>",
                         i ? "\n" : "", w[i].name, w[i].args);
            else
                snprintf(text + at, cap - at, "{\"name\":\"%s\",  \"parameters\" :%s }", w[i].name, w[i].args);
        }
        size_t len = strlen(text);
        clf_tool_reply *r;
        TU_OK(clf_tools_parse(&c, text, len, 1, &r));
        assert_int_equal(r->n_calls, n);
        size_t want_content = strlen(content);
        if (n) while (want_content && strchr(" \n", content[want_content - 1])) want_content--;
        assert_int_equal(r->content_len, want_content);
        for (int i = 0; i < n; i++) {
            assert_string_equal(r->calls[i].name, w[i].name);
            assert_string_equal(r->calls[i].arguments, w[i].args);
            assert_true(r->calls[i].complete);
        }
        if (iter < 40) tu_check_tool_stream(&c, text, len, r);
        clf_tool_reply_free(r);
    }
    free(text);
    free(w);
}

static void test_parse_chatml(void **state) {
    (void)state;
    parse_round_trips(NULL, 1);
}

static void test_parse_llama(void **state) {
    (void)state;
    parse_round_trips("<|start_header_id|>Cutting Knowledge Date: December 2023\n", 0);
}

/* Llama 3.1's call after its <|python_tag|> (a control token the server
 * writes as text under tools), whole and streamed; the tag alone is no call. */
static void test_parse_llama_python_tag(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init("<|start_header_id|>Cutting Knowledge Date: December 2023\n", &c));
    const char *text = "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}";
    clf_tool_reply *r;
    TU_OK(clf_tools_parse(&c, text, strlen(text), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_string_equal(r->calls[0].name, "f");
    assert_string_equal(r->calls[0].arguments, "{\"a\": 1}");
    assert_int_equal(r->content_len, 0);
    tu_check_tool_stream(&c, text, strlen(text), r);
    clf_tool_reply_free(r);
    const char *plain = "<|python_tag|>brave_search.call(query=\"x\")";
    TU_OK(clf_tools_parse(&c, plain, strlen(plain), 1, &r));
    assert_int_equal(r->n_calls, 0);
    assert_int_equal(r->content_len, strlen(plain));
    clf_tool_reply_free(r);
}

/* A call cut short (max_tokens) is reported incomplete; an escaped name is
 * decoded; bytes of every value never crash the parser. */
static void test_parse_odd(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init(NULL, &c));
    clf_tool_reply *r;
    const char *cut = "<tool_call>\n{\"name\": \"f\\u0041\", \"arguments\": {\"a\": [1, 2";
    TU_OK(clf_tools_parse(&c, cut, strlen(cut), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_string_equal(r->calls[0].name, "fA");
    assert_string_equal(r->calls[0].arguments, "{\"a\": [1, 2");
    assert_false(r->calls[0].complete);
    assert_int_equal(r->content_len, 0);
    clf_tool_reply_free(r);
    uint64_t s = tu_seed();
    char buf[64];
    for (int i = 0; i < 20000; i++) {
        size_t n = tu_next(&s) % sizeof buf;
        for (size_t k = 0; k < n; k++) buf[k] = "<tool_call>{}[]\":, \n\\ax"[tu_next(&s) % 24];
        if (n > 11 && tu_next(&s) % 2) memcpy(buf, "<tool_call>", 11);
        TU_OK(clf_tools_parse(&c, buf, n, (int)(tu_next(&s) % 2), &r));
        assert_true(r->content_len <= n);
        clf_tool_reply_free(r);
    }
}


/* ---- the grammar's wrapper -------------------------------------------------- */

static const char CALL_GBNF[] = "root ::= \"{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": {}}\"\n";
static const char CALL_TEXT[] = "{\"name\": \"f\", \"arguments\": {}}";

static clf_grammar *wrapped(const clf_tools *t, clf_tool_choice choice, int parallel) {
    char *g;
    TU_OK(clf_tools_wrap_grammar(t, choice, parallel, CALL_GBNF, &g));
    clf_grammar *out;
    TU_OK(clf_grammar_compile(g, strlen(g), "tc-root", &out));
    free(g);
    return out;
}

static int accepts(const clf_grammar *g, const char *s) { return clf_grammar_accepts(g, s, strlen(s)); }

static void calls_text(char *buf, size_t cap, const char *before, int n) {
    snprintf(buf, cap, "%s", before);
    for (int i = 0; i < n; i++) {
        size_t at = strlen(buf);
        snprintf(buf + at, cap - at, "%s<tool_call>\n%s\n</tool_call>", i ? "\n" : "", CALL_TEXT);
    }
}

/* ChatML's auto: text holding no "<tool_call>" (by the automaton's rules,
 * checked against strstr on random texts of the tag's pieces), then calls. */
static void test_grammar_chatml(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init(NULL, &c));
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    clf_tools *t;
    TU_OK(clf_tools_create(&c, tools, strlen(tools), &t));
    clf_grammar *aut = wrapped(t, CLF_TOOL_AUTO, 1), *req = wrapped(t, CLF_TOOL_REQUIRED, 1),
                *one = wrapped(t, CLF_TOOL_NAMED, 0);
    static const char *const PIECES[] = {"<", "tool_call>", "<tool", "_call", ">", "t", "x", "\n", "é", "<tool_call",
                                         "l_c", "<<", "o"};
    uint64_t s = tu_seed();
    char free_text[256], buf[1024];
    int with_tag = 0;
    for (int iter = 0; iter < 3000; iter++) {
        free_text[0] = 0;
        for (int k = (int)(tu_next(&s) % 10); k > 0; k--)
            strcat(free_text, PIECES[tu_next(&s) % (sizeof PIECES / sizeof *PIECES)]);
        int clean = !strstr(free_text, "<tool_call>");
        with_tag += !clean;
        if (accepts(aut, free_text) != clean) fail_msg("auto, text '%s': accepted %d", free_text, !clean);
        int n = (int)(tu_next(&s) % 3);
        calls_text(buf, sizeof buf, free_text, n);
        if (n && accepts(aut, buf) != clean) fail_msg("auto, '%s': accepted %d", buf, !clean);
        assert_int_equal(accepts(req, buf), n > 0 && !free_text[0]);
        assert_int_equal(accepts(one, buf), n == 1 && !free_text[0]);
    }
    assert_true(with_tag > 100);
    calls_text(buf, sizeof buf, "", 16);
    assert_true(accepts(req, buf));
    calls_text(buf, sizeof buf, "", 17); /* MAX_PARALLEL */
    assert_false(accepts(req, buf));
    assert_false(accepts(req, "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"));
    clf_grammar_free(aut);
    clf_grammar_free(req);
    clf_grammar_free(one);
    clf_tools_free(t);
}

static void test_grammar_llama(void **state) {
    (void)state;
    clf_chat c;
    TU_OK(clf_chat_init("<|start_header_id|>Cutting Knowledge Date: December 2023\n", &c));
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    clf_tools *t;
    TU_OK(clf_tools_create(&c, tools, strlen(tools), &t));
    clf_grammar *aut = wrapped(t, CLF_TOOL_AUTO, 1), *req = wrapped(t, CLF_TOOL_REQUIRED, 1);
    static const struct { const char *text; int aut, req; } CASES[] = {
        {"", 1, 0}, {"Hello {x}", 1, 0}, {"{x}", 0, 0}, {" hi", 0, 0}, {"\n{", 0, 0},
        {"{\"name\": \"f\", \"arguments\": {}}", 1, 1}, {"{\"name\": \"f\", \"arguments\": {}}{", 0, 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        if (accepts(aut, CASES[i].text) != CASES[i].aut) fail_msg("auto '%s'", CASES[i].text);
        if (accepts(req, CASES[i].text) != CASES[i].req) fail_msg("required '%s'", CASES[i].text);
    }
    clf_grammar_free(aut);
    clf_grammar_free(req);
    clf_tools_free(t);
}

/* The whole chain: the call schema through the JSON Schema converter, the
 * wrapper, the engine: valid calls of each function accepted, a wrong
 * name, a bad argument or a missing one refused (validity by hand). */
static void test_grammar_real_schema(void **state) {
    (void)state;
    static const char *const TMPL[] = {NULL, "<|start_header_id|>Cutting Knowledge Date: December 2023\n"};
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},"
                        "\"required\":[\"city\"],\"additionalProperties\":false}}},"
                        "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";
    for (int f = 0; f < 2; f++) {
        clf_chat c;
        TU_OK(clf_chat_init(TMPL[f], &c));
        const char *key = f ? "parameters" : "arguments";
        clf_tools *t;
        TU_OK(clf_tools_create(&c, tools, strlen(tools), &t));
        char *schema, *call, *g;
        TU_OK(clf_tools_call_schema(t, CLF_TOOL_REQUIRED, NULL, &schema));
        TU_OK(clf_json_schema_to_gbnf(schema, strlen(schema), &call));
        TU_OK(clf_tools_wrap_grammar(t, CLF_TOOL_REQUIRED, 1, call, &g));
        clf_grammar *gr;
        TU_OK(clf_grammar_compile(g, strlen(g), "tc-root", &gr));
        static const struct { const char *args, *name; int ok; } CASES[] = {
            {"{\"city\": \"Oslo\"}", "get_weather", 1}, {"{\"city\": \"a\\\"b\", \"days\": 3}", "get_weather", 1},
            {"{}", "now", 1}, {"{\"days\": 3}", "get_weather", 0}, {"{\"city\": 3}", "get_weather", 0},
            {"{\"city\": \"x\", \"zz\": 1}", "get_weather", 0}, {"{}", "get_time", 0}, {"{\"a\": 1}", "now", 0},
        };
        for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
            char text[256];
            snprintf(text, sizeof text, f ? "{\"name\": \"%s\", \"%s\": %s}" : "<tool_call>\n{\"name\": \"%s\", \"%s\": %s}\n</tool_call>",
                     CASES[i].name, key, CASES[i].args);
            if (accepts(gr, text) != CASES[i].ok) fail_msg("%s: '%s' accepted %d", f ? "Llama" : "ChatML", text, !CASES[i].ok);
            if (CASES[i].ok) { /* and the parser reads back what the grammar let through */
                clf_tool_reply *r;
                TU_OK(clf_tools_parse(&c, text, strlen(text), 1, &r));
                assert_int_equal(r->n_calls, 1);
                assert_string_equal(r->calls[0].name, CASES[i].name);
                assert_string_equal(r->calls[0].arguments, CASES[i].args);
                clf_tool_reply_free(r);
            }
        }
        clf_grammar_free(gr);
        free(schema);
        free(call);
        free(g);
        clf_tools_free(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_matches_templates),
        cmocka_unit_test(test_formats_without_tools),
        cmocka_unit_test(test_bad_tools),
        cmocka_unit_test(test_call_schema),
        cmocka_unit_test(test_parse_chatml),
        cmocka_unit_test(test_parse_llama),
        cmocka_unit_test(test_parse_llama_python_tag),
        cmocka_unit_test(test_parse_odd),
        cmocka_unit_test(test_grammar_chatml),
        cmocka_unit_test(test_grammar_llama),
        cmocka_unit_test(test_grammar_real_schema),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* JSON Schema -> GBNF (text/grammar/json_schema.c) through the grammar engine:
 * - every case of tests/data/json_schema_cases.json (its verdicts checked
 *   against Python's jsonschema by tests/json_schema_cases.py): valid
 *   instances accepted in two spellings, invalid ones and the spellings
 *   outside the grammar rejected, refused schemas failing with their
 *   keyword and pointer;
 * - integer ranges on fresh random bounds against integer comparison;
 * - fresh random strings as enum values and as escaped patterns, against
 *   string equality on jansson's spelling;
 * - the schema suite (tests/data/schemas/) converts and compiles;
 * - the public wrapper. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <jansson.h>

#include "clinfer.h"
#include "grammar.h"
#include "json_schema.h"
#include "testutil.h"

static clf_grammar *convert(const char *schema, size_t len) {
    char *gbnf = NULL;
    TU_OK(clf_json_schema_to_gbnf(schema, len, &gbnf));
    clf_grammar *g = NULL;
    clf_status st = clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g);
    if (st != CLF_OK) fail_msg("the grammar of %.*s does not compile: %s\n%s", (int)len, schema, clf_last_error(), gbnf);
    free(gbnf);
    return g;
}
static clf_grammar *convert_json(json_t *schema) {
    char *text = json_dumps(schema, JSON_ENCODE_ANY | JSON_COMPACT);
    clf_grammar *g = convert(text, strlen(text));
    free(text);
    return g;
}
static int accepts(const clf_grammar *g, const char *text) { return clf_grammar_accepts(g, text, strlen(text)); }

static void expect(const clf_grammar *g, const char *name, const char *text, int want) {
    if (accepts(g, text) != want) fail_msg("%s: the grammar %s %s", name, want ? "rejects" : "accepts", text);
}

static const char *src_dir(void) {
    const char *d = getenv("CLINFER_SOURCE_DIR");
    return d ? d : ".";
}

/* ---- the data file's cases ---------------------------------------------- */

static void test_cases(void **state) {
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/json_schema_cases.json", src_dir());
    json_error_t err;
    json_t *cases = json_load_file(path, 0, &err);
    if (!cases) fail_msg("%s: %s", path, err.text);
    size_t i;
    json_t *c;
    int n_texts = 0, n_errors = 0;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        char *schema = json_dumps(json_object_get(c, "schema"), JSON_ENCODE_ANY | JSON_COMPACT);
        json_t *want_err = json_object_get(c, "error");
        if (want_err) {
            char *gbnf = NULL;
            clf_status st = clf_json_schema_to_gbnf(schema, strlen(schema), &gbnf);
            if (st != CLF_ERR_ARG) fail_msg("%s: converted (%s), expected an error naming %s", name,
                                            clf_status_name(st), json_string_value(want_err));
            assert_null(gbnf);
            tu_expect_in(clf_last_error(), json_string_value(want_err));
            free(schema);
            n_errors++;
            continue;
        }
        clf_grammar *g = convert(schema, strlen(schema));
        static const char *const lists[] = {"valid", "invalid", "outside"};
        for (int l = 0; l < 3; l++) {
            size_t j;
            json_t *inst;
            json_array_foreach(json_object_get(c, lists[l]), j, inst) {
                if (l == 2) { /* texts that validate, in a spelling the grammar leaves out */
                    expect(g, name, json_string_value(inst), 0);
                    n_texts++;
                    continue;
                }
                json_t *raw = json_object_get(inst, "$text");
                if (json_is_object(inst) && json_object_size(inst) == 1 && raw) {
                    expect(g, name, json_string_value(raw), l == 0);
                    n_texts++;
                    continue;
                }
                for (int sp = 0; sp < 2; sp++) {
                    /* 15 digits: the data file's decimals as written (0.999999, not
                     * 0.99999899999999997, outside a bounded number's spelling) */
                    char *t = json_dumps(inst, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15) |
                                                   (sp ? JSON_INDENT(2) : JSON_COMPACT));
                    expect(g, name, t, l == 0);
                    free(t);
                    n_texts++;
                }
            }
        }
        clf_grammar_free(g);
        free(schema);
    }
    printf("%zu cases: %d texts, %d refusals\n", json_array_size(cases), n_texts, n_errors);
    assert_true(n_texts > 300 && n_errors > 10);
    json_decref(cases);
}

/* ---- integer ranges ------------------------------------------------------ */

static long long rand_bound(uint64_t *rng) {
    static const long long scale[] = {1, 10, 100, 1000, 100000, 10000000000ll};
    long long s = scale[tu_next(rng) % 6];
    return (long long)(tu_next(rng) % (uint64_t)(2 * s + 1)) - s;
}

static void test_integer_ranges(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    for (int round = 0; round < 60; round++) {
        long long lo = rand_bound(&rng), hi = rand_bound(&rng);
        if (lo > hi) {
            long long t = lo;
            lo = hi;
            hi = t;
        }
        int has_lo = tu_next(&rng) % 4 != 0, has_hi = tu_next(&rng) % 4 != 0 || !has_lo;
        int ex_lo = tu_next(&rng) % 3 == 0, ex_hi = tu_next(&rng) % 3 == 0;
        if (has_lo && has_hi && hi - lo < 2 * (ex_lo + ex_hi)) continue; /* an empty range: refused (below) */
        char schema[256];
        int n = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
        if (has_lo) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"%s\":%lld", ex_lo ? "exclusiveMinimum" : "minimum", lo);
        if (has_hi) n += snprintf(schema + n, sizeof schema - (size_t)n, ",\"%s\":%lld", ex_hi ? "exclusiveMaximum" : "maximum", hi);
        snprintf(schema + n, sizeof schema - (size_t)n, "}");
        clf_grammar *g = convert(schema, strlen(schema));
        long long min = has_lo ? lo + ex_lo : -9999999999999999ll, max = has_hi ? hi - ex_hi : 9999999999999999ll;
        /* around each bound, at 0, and far away */
        long long probes[96];
        int np = 0;
        for (int d = -12; d <= 12; d++) {
            probes[np++] = lo + d;
            probes[np++] = hi + d;
            probes[np++] = d;
        }
        for (int k = 0; k < 21; k++) probes[np++] = rand_bound(&rng) * (long long)(1 + tu_next(&rng) % 1000);
        for (int k = 0; k < np; k++) {
            char text[64];
            long long v = probes[k];
            int want = v >= min && v <= max;
            snprintf(text, sizeof text, "%lld", v);
            if (accepts(g, text) != want) fail_msg("%s: %s %s", schema, text, want ? "rejected" : "accepted");
            snprintf(text, sizeof text, "%lld.0", v);
            if (accepts(g, text) != want) fail_msg("%s: %s %s", schema, text, want ? "rejected" : "accepted");
            snprintf(text, sizeof text, "0%lld", v < 0 ? -v : v);
            if (accepts(g, text)) fail_msg("%s: a leading zero accepted: %s", schema, text);
        }
        expect(g, schema, "-0", 0 >= min && 0 <= max);
        expect(g, schema, "1e1", 0);
        clf_grammar_free(g);
    }
    char *gbnf = NULL;
    const char *none = "{\"type\":\"integer\",\"minimum\":3,\"exclusiveMaximum\":3}";
    assert_int_equal(clf_json_schema_to_gbnf(none, strlen(none), &gbnf), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "admits no value");
}

/* ---- random strings: enum values and literal patterns ---------------------- */

static const char *const PIECES[] = {"a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f", "\x7f", "é",
                                     "中", "😀", ".", "*", "+", "?", "(", ")", "[", "]", "{", "}", "|", "^", "$", "-"};
#define N_PIECES (sizeof PIECES / sizeof PIECES[0])

static void random_text(uint64_t *rng, char *out, size_t cap, int max_pieces) {
    size_t n = 0;
    int k = (int)(tu_next(rng) % (uint64_t)(max_pieces + 1));
    out[0] = 0;
    for (int i = 0; i < k; i++) {
        const char *p = PIECES[tu_next(rng) % N_PIECES];
        if (n + strlen(p) + 1 >= cap) break;
        strcpy(out + n, p);
        n += strlen(p);
    }
}

static void test_random_strings(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    for (int round = 0; round < 40; round++) {
        /* an enum of strings: each accepted as jansson spells it, a changed one rejected */
        json_t *vals = json_array();
        char text[128];
        for (int i = 0; i < 4; i++) {
            random_text(&rng, text, sizeof text, 6);
            json_array_append_new(vals, json_string(text));
        }
        json_t *schema = json_pack("{s:o}", "enum", json_incref(vals));
        clf_grammar *g = convert_json(schema);
        size_t i;
        json_t *v;
        json_array_foreach(vals, i, v) {
            char *t = json_dumps(v, JSON_ENCODE_ANY);
            expect(g, "enum", t, 1);
            free(t);
            char changed[160];
            snprintf(changed, sizeof changed, "%sq", json_string_value(v));
            int member = 0;
            size_t j;
            json_t *w;
            json_array_foreach(vals, j, w) member |= strcmp(json_string_value(w), changed) == 0;
            json_t *cj = json_string(changed);
            t = json_dumps(cj, JSON_ENCODE_ANY);
            expect(g, "enum", t, member);
            free(t);
            json_decref(cj);
        }
        clf_grammar_free(g);
        json_decref(schema);
        json_decref(vals); /* the reference json_incref gave the schema's */
        /* a pattern of escaped literals, anchored: exactly that string */
        random_text(&rng, text, sizeof text, 8);
        char pat[512];
        size_t n = 0;
        pat[n++] = '^';
        for (const char *p = text; *p; p++) {
            if (strchr(".*+?()[]{}|^$\\-/", *p) && *p != '-' && *p != '/') pat[n++] = '\\';
            if (*p == '\n' || *p == '\t' || *p == 1 || *p == 0x1f) {
                n += (size_t)snprintf(pat + n, sizeof pat - n, "\\x%02x", (unsigned char)*p);
                continue;
            }
            pat[n++] = *p;
        }
        pat[n++] = '$';
        pat[n] = 0;
        schema = json_pack("{s:s,s:s}", "type", "string", "pattern", pat);
        g = convert_json(schema);
        json_t *sj = json_string(text);
        char *t = json_dumps(sj, JSON_ENCODE_ANY);
        expect(g, pat, t, 1);
        free(t);
        json_decref(sj);
        char longer[160];
        snprintf(longer, sizeof longer, "%sa", text);
        sj = json_string(longer);
        t = json_dumps(sj, JSON_ENCODE_ANY);
        expect(g, pat, t, 0);
        free(t);
        json_decref(sj);
        clf_grammar_free(g);
        json_decref(schema);
    }
}

/* ---- the suite of realistic schemas -------------------------------------- */

static void test_suite(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/data/schemas", src_dir());
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_error_t err;
        json_t *s = json_load_file(path, 0, &err);
        if (!s) fail_msg("%s: %s", path, err.text);
        clf_grammar *g = convert_json(s);
        expect(g, e->d_name, "", 0);
        clf_grammar_free(g);
        json_decref(s);
        n++;
    }
    closedir(d);
    printf("%d schemas convert and compile\n", n);
    assert_true(n >= 50);
}

/* ---- hostile input and the public API ------------------------------------ */

static void test_errors(void **state) {
    (void)state;
    static const struct {
        const char *schema, *msg;
    } bad[] = {
        {"", "not JSON"},
        {"[1]", "must be an object or a boolean"},
        {"{\"type\":\"strin\"}", "not a JSON Schema type"},
        {"{\"type\":\"string\",\"pattern\":\"(a\"}", "unclosed ("},
        {"{\"type\":\"string\",\"pattern\":\"a)\"}", "unmatched )"},
        {"{\"type\":\"string\",\"pattern\":\"[z-a]\"}", "before its start"},
        {"{\"type\":\"string\",\"pattern\":\"(a?)*\"}", "empty string"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "^ only at the start"},
        {"{\"type\":\"string\",\"pattern\":\"a$b\"}", "$ only at the end"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", "anchors are not supported"},
        {"{\"type\":\"string\",\"minLength\":-1}", "non-negative integer"},
        {"{\"type\":\"array\",\"maxItems\":100000}", "at most 4096"},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":3}", "only one of"},
        {"{\"enum\":[1],\"minimum\":0}", "beside \"enum\""},
        {"{\"type\":\"array\",\"items\":[{}]}", "prefixItems"},
        {"{\"properties\":{\"a\":{\"minimum\":\"x\"}}}", "#/properties/a"},
        {"{\"$ref\":\"#foo\"}", "anchors are not supported"},
        {"false", "admits no value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *gbnf = (char *)1;
        clf_status st = clf_json_schema_to_gbnf(bad[i].schema, strlen(bad[i].schema), &gbnf);
        if (st != CLF_ERR_ARG) fail_msg("%s: %s, expected an error naming %s", bad[i].schema, clf_status_name(st), bad[i].msg);
        assert_null(gbnf);
        tu_expect_in(clf_last_error(), bad[i].msg);
    }
    /* deep nesting: an error, not a crash */
    static char deep[40000];
    size_t n = 0;
    for (int i = 0; i < 2000; i++) n += (size_t)sprintf(deep + n, "{\"items\":");
    n += (size_t)sprintf(deep + n, "{}");
    for (int i = 0; i < 2000; i++) deep[n++] = '}';
    char *gbnf = NULL;
    assert_int_equal(clf_json_schema_to_gbnf(deep, n, &gbnf), CLF_ERR_ARG);
}

static void test_public_api(void **state) {
    (void)state;
    char *gbnf = NULL;
    const char *s = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}";
    assert_int_equal(clinfer_json_schema_to_gbnf(s, strlen(s), &gbnf), CLINFER_OK);
    tu_expect_in(gbnf, "root ::=");
    clf_grammar *g = NULL;
    TU_OK(clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g));
    expect(g, "api", "{\"ok\": true}", 1);
    expect(g, "api", "{}", 0);
    clf_grammar_free(g);
    clinfer_free(gbnf);
    assert_int_equal(clinfer_json_schema_to_gbnf(NULL, 0, &gbnf), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_json_schema_to_gbnf(s, strlen(s), NULL), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_json_schema_to_gbnf("{\"not\":{}}", 10, &gbnf), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "\"not\"");
}

/* ---- hostile schemas: bounded, linear, and clear ------------------------------ */

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static void expect_refused(json_t *schema, const char *msg) {
    char *text = json_dumps(schema, JSON_ENCODE_ANY | JSON_COMPACT), *gbnf = NULL;
    double t0 = cpu_s();
    clf_status st = clf_json_schema_to_gbnf(text, strlen(text), &gbnf);
    double dt = cpu_s() - t0;
    if (st != CLF_ERR_ARG) fail_msg("%.200s: %s, expected an error naming %s", text, clf_status_name(st), msg);
    tu_expect_in(clf_last_error(), msg);
    if (dt > 2.0) fail_msg("%.200s: refused after %.2f s of CPU", text, dt);
    assert_null(gbnf);
    free(text);
    json_decref(schema);
}

static json_t *object_of(json_t *props, int addl) {
    json_t *s = json_pack("{s:s, s:o}", "type", "object", "properties", props);
    if (!addl) json_object_set_new(s, "additionalProperties", json_false());
    return s;
}

/* Property names: one of 40,000 characters recursed once per character
 * (a crash), one of 5,000 cost 30 s; beside additional properties they
 * are bounded now (1024 bytes), and without them a long name is a plain
 * literal. */
static void test_long_names(void **state) {
    (void)state;
    char *name = malloc(40001);
    assert_non_null(name);
    memset(name, 'x', 40000);
    name[40000] = 0;
    for (int len = 40000; len >= 5000; len -= 35000) {
        name[len] = 0;
        json_t *p = json_object();
        json_object_set_new(p, name, json_pack("{s:s}", "type", "string"));
        expect_refused(object_of(p, 1), "a property name of");
        tu_expect_in(clf_last_error(), "at most 1024 beside additional properties");
    }
    json_t *p = json_object();
    json_object_set_new(p, name, json_pack("{s:s}", "type", "integer"));
    json_t *s = object_of(p, 0);
    clf_grammar *g = convert_json(s);
    json_decref(s);
    char *text = malloc(5000 + 32);
    snprintf(text, 5000 + 32, "{\"%s\": 7}", name);
    expect(g, "long name", text, 1);
    text[3] = 'y';
    expect(g, "long name", text, 0);
    clf_grammar_free(g);
    free(text);
    free(name);
    /* 4,000 names of one (non-ASCII) letter each: 4,000 ways at the first character */
    p = json_object();
    for (int i = 0; i < 4000; i++) {
        char k[8];
        uint32_t cp = 0x4e00 + (uint32_t)i;
        k[0] = (char)(0xe0 | cp >> 12), k[1] = (char)(0x80 | (cp >> 6 & 63)), k[2] = (char)(0x80 | (cp & 63)), k[3] = 0;
        json_object_set_new(p, k, json_pack("{s:s}", "type", "string"));
    }
    expect_refused(object_of(p, 1), "more than 2048 property names differ at character 0");
}

/* 2,000 properties took 3-6 s (names compared with every name, per trie
 * node); linear now: a generous 2 s of CPU for what takes milliseconds. */
static void test_many_properties(void **state) {
    (void)state;
    json_t *p = json_object();
    for (int i = 0; i < 2000; i++) {
        char k[32];
        snprintf(k, sizeof k, "prop_%d", i);
        json_object_set_new(p, k, json_pack("{s:s}", "type", "string"));
    }
    json_t *s = object_of(p, 1);
    json_object_set_new(s, "required", json_pack("[ss]", "prop_0", "prop_1000"));
    char *text = json_dumps(s, JSON_COMPACT), *gbnf = NULL;
    double t0 = cpu_s();
    TU_OK(clf_json_schema_to_gbnf(text, strlen(text), &gbnf));
    double dt = cpu_s() - t0;
    printf("a schema of 2,000 properties: converted in %.3f s\n", dt);
    assert_true(dt < 2.0);
    clf_grammar *g = NULL;
    TU_OK(clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g));
    expect(g, "2000", "{\"prop_0\": \"a\", \"prop_5\": \"b\", \"prop_1000\": \"c\", \"zz\": 1}", 1);
    expect(g, "2000", "{\"prop_0\": \"a\", \"prop_1000\": 2}", 0);
    expect(g, "2000", "{\"prop_5\": \"b\", \"prop_1000\": \"c\"}", 0);
    clf_grammar_free(g);
    free(gbnf);
    free(text);
    json_decref(s);
}

/* Enums and const-only anyOf of thousands of values were refused while
 * matching (more than 2048 ways at once); they are tries now. */
static void test_wide_enums(void **state) {
    (void)state;
    json_t *strs = json_array(), *ints = json_array(), *consts = json_array();
    for (int i = 0; i < 5000; i++) {
        char v[32];
        snprintf(v, sizeof v, "value-%d", i);
        json_array_append_new(strs, json_string(v));
        json_array_append_new(ints, json_integer(i * 7 - 100));
        json_array_append_new(consts, json_pack("{s:s}", "const", v));
    }
    json_t *s = json_pack("{s:o}", "enum", strs);
    clf_grammar *g = convert_json(s);
    expect(g, "enum", "\"value-0\"", 1);
    expect(g, "enum", "\"value-4999\"", 1);
    expect(g, "enum", "\"value-5000\"", 0);
    expect(g, "enum", "\"value-\"", 0);
    expect(g, "enum", "\"value-49\"", 1);
    clf_grammar_free(g);
    json_decref(s);
    s = json_pack("{s:o}", "enum", ints);
    g = convert_json(s);
    expect(g, "int enum", "-100", 1);
    expect(g, "int enum", "34893", 1); /* 4999 * 7 - 100 */
    expect(g, "int enum", "34893.0", 1);
    expect(g, "int enum", "34894", 0);
    expect(g, "int enum", "-99", 0);
    clf_grammar_free(g);
    json_decref(s);
    s = json_pack("{s:o}", "anyOf", consts);
    g = convert_json(s);
    expect(g, "anyOf", "\"value-123\"", 1);
    expect(g, "anyOf", "\"value-12a\"", 0);
    clf_grammar_free(g);
    json_decref(s);
    /* branches that are no value lists: the real bound, named */
    json_t *objs = json_array();
    for (int i = 0; i < 3000; i++) json_array_append_new(objs, json_pack("{s:s, s:i}", "type", "integer", "minimum", i));
    expect_refused(json_pack("{s:o}", "anyOf", objs), "\"anyOf\" of 3000 branches: at most 2048");
}

/* The text and the nesting of patterns: bounded and named. */
static void test_schema_bounds(void **state) {
    (void)state;
    size_t big = (1u << 20) + 16;
    char *s = malloc(big);
    assert_non_null(s);
    memset(s, ' ', big);
    memcpy(s, "{}", 2);
    char *gbnf = NULL;
    assert_int_equal(clf_json_schema_to_gbnf(s, big, &gbnf), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "(the bound on a schema's text)");
    free(s);
    char pat[4096];
    size_t n = 0;
    for (int i = 0; i < 1000; i++) pat[n++] = '(';
    pat[n++] = 'a';
    for (int i = 0; i < 1000; i++) pat[n++] = ')';
    pat[n] = 0;
    expect_refused(json_pack("{s:s, s:s}", "type", "string", "pattern", pat), "groups nested deeper than 64");
    /* 1,100 optional prefixItems nested 1,100 groups deep, past the grammar
     * parser's bound: a rule each now */
    json_t *items = json_array();
    for (int i = 0; i < 1100; i++) json_array_append_new(items, json_pack("{s:s}", "type", i % 2 ? "integer" : "boolean"));
    json_t *arr = json_pack("{s:s, s:o, s:b}", "type", "array", "prefixItems", items, "items", 0);
    clf_grammar *g = convert_json(arr);
    expect(g, "prefixItems", "[true, 1, false]", 1);
    expect(g, "prefixItems", "[]", 1);
    expect(g, "prefixItems", "[1]", 0);
    clf_grammar_free(g);
    json_decref(arr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),         cmocka_unit_test(test_integer_ranges), cmocka_unit_test(test_random_strings),
        cmocka_unit_test(test_suite),         cmocka_unit_test(test_errors),         cmocka_unit_test(test_public_api),
        cmocka_unit_test(test_long_names),    cmocka_unit_test(test_many_properties), cmocka_unit_test(test_wide_enums),
        cmocka_unit_test(test_schema_bounds),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

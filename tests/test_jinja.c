/* The Jinja engine (text/chat/jinja*.c) against jinja2: every template of
 * the conformance corpus (tests/data/templates/NAME.jinja, llama.cpp's
 * models/templates) over every conversation of
 * tests/data/templates/expected.json (tests/peer/record_templates.py, Debian's
 * python3-jinja2 in Hugging Face's environment) renders byte-identical, or
 * fails where jinja2 failed: with the very message where the template's own
 * raise_exception failed it, else with jinja2's message within the engine's
 * ("'dict object' has no attribute 'x'"). Reports per template. Then the bounds an
 * untrusted template meets, a few of jinja2's semantics by hand, and the
 * corpus's parses rendered by 8 threads at once as by one. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <jansson.h>

#include "jinja.h"

#define DIR "tests/data/templates/"

/* Templates known not to match yet, each with its reason: printed, never
 * skipped silently (the test fails on any other mismatch). */
static const char *const KNOWN[][2] = {
    {NULL, NULL},
};

static const char *known_reason(const char *name) {
    for (int i = 0; KNOWN[i][0]; i++)
        if (!strcmp(KNOWN[i][0], name)) return KNOWN[i][1];
    return NULL;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    assert_non_null(b);
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* the first byte where two texts differ, shown with some context */
static void show_diff(const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    printf("      at byte %zu\n      want: \"%.80s\"\n      got:  \"%.80s\"\n", i, want + from, got + from);
}

static void test_corpus(void **state) {
    (void)state;
    json_error_t err;
    json_t *rec = json_load_file(DIR "expected.json", 0, &err);
    if (!rec) fail_msg("cannot read " DIR "expected.json: %s", err.text);
    time_t now = (time_t)json_integer_value(json_object_get(rec, "now"));
    json_t *convs = json_object_get(rec, "conversations"), *templates = json_object_get(rec, "templates");
    assert_true(json_array_size(templates) >= 70);
    size_t nconv = json_array_size(convs);
    char **ctx = calloc(nconv, sizeof *ctx);
    for (size_t i = 0; i < nconv; i++)
        ctx[i] = json_dumps(json_object_get(json_array_get(convs, i), "context"), JSON_PRESERVE_ORDER | JSON_COMPACT);
    int identical = 0, bad = 0, known = 0;
    size_t ti;
    json_t *t;
    json_array_foreach(templates, ti, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        char path[512];
        snprintf(path, sizeof path, DIR "%s", name);
        size_t n;
        char *text = slurp(path, &n);
        clf_jinja_template *tp = NULL;
        clf_status pst = clf_jinja_parse(text, n, NULL, &tp);
        char parse_err[512] = "";
        if (pst != CLF_OK) snprintf(parse_err, sizeof parse_err, "%s", clf_last_error());
        json_t *results = json_object_get(t, "results");
        int ok = 0, total = (int)json_array_size(results);
        char first_fail[1024] = "";
        for (int k = 0; k < total; k++) {
            json_t *r = json_array_get(results, (size_t)k);
            const char *conv = json_string_value(json_object_get(r, "conv"));
            const char *want = json_string_value(json_object_get(r, "output"));
            const char *want_err = json_string_value(json_object_get(r, "error"));
            int want_raise = json_is_true(json_object_get(r, "raise"));
            char *out = NULL;
            clf_status st = pst;
            if (tp) st = clf_jinja_render(tp, ctx[k], now, &out, NULL);
            const char *msg = tp ? clf_last_error() : parse_err;
            int pass;
            if (want) pass = st == CLF_OK && !strcmp(out, want);
            else if (want_raise) pass = st != CLF_OK && clf_jinja_last_was_raise() && !strcmp(msg, want_err);
            else { /* jinja2's own error ("TypeError: MESSAGE"): its message, within the engine's */
                const char *m = strstr(want_err, ": ");
                pass = st != CLF_OK && !clf_jinja_last_was_raise() && strstr(msg, m ? m + 2 : want_err);
            }
            if (pass) {
                ok++;
            } else if (!first_fail[0]) {
                snprintf(first_fail, sizeof first_fail, "%s: %s", conv,
                         want ? (st == CLF_OK ? "output differs" : msg) : (st == CLF_OK ? "rendered where jinja2 failed" : msg));
                printf("    %s %s\n", name, first_fail);
                if (want && st == CLF_OK) show_diff(want, out);
                if (!want) printf("      jinja2: %s\n", want_err);
            }
            free(out);
        }
        const char *reason = known_reason(name);
        if (ok == total) {
            identical++;
            printf("jinja: %-55s %2d/%d identical\n", name, ok, total);
            if (reason) printf("jinja: %s passes: take it off KNOWN\n", name), bad++;
        } else if (reason) {
            known++;
            printf("jinja: %-55s %2d/%d KNOWN FAILURE: %s\n", name, ok, total, reason);
        } else {
            bad++;
            printf("jinja: %-55s %2d/%d FAIL (first: %s)\n", name, ok, total, first_fail);
        }
        clf_jinja_free(tp);
        free(text);
    }
    printf("jinja: %d of %zu templates byte-identical to jinja2 over %zu conversations; %d known failures, %d "
           "unexpected\n",
           identical, json_array_size(templates), nconv, known, bad);
    for (size_t i = 0; i < nconv; i++) free(ctx[i]);
    free(ctx);
    json_decref(rec);
    assert_int_equal(bad, 0);
}

/* renders text with context; returns the status, *out (malloc'd) on success */
static clf_status render(const char *text, const char *context, const clf_jinja_limits *lim, char **out) {
    clf_jinja_template *t;
    *out = NULL;
    clf_status st = clf_jinja_parse(text, strlen(text), lim, &t);
    if (st != CLF_OK) return st;
    st = clf_jinja_render(t, context, 1741343400, out, NULL);
    clf_jinja_free(t);
    return st;
}

static void expect_out(const char *text, const char *context, const char *want) {
    char *out;
    clf_status st = render(text, context, NULL, &out);
    if (st != CLF_OK) fail_msg("%s: %s", text, clf_last_error());
    if (strcmp(out, want)) fail_msg("%s: want \"%s\", got \"%s\"", text, want, out);
    free(out);
}

static void expect_fail(const char *text, const clf_jinja_limits *lim, const char *word) {
    char *out;
    clf_status st = render(text, "{}", lim, &out);
    if (st == CLF_OK) fail_msg("%.80s: rendered \"%.60s\" where it must fail", text, out);
    if (!strstr(clf_last_error(), word)) fail_msg("%.80s: the message \"%s\" does not name %s", text, clf_last_error(), word);
}

/* Semantics checked against jinja2 by hand (the corpus covers the rest). */
static void test_semantics(void **state) {
    (void)state;
    expect_out("{% set x = 1 %}{% for i in [1,2,3] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}", "{}",
               "111,111,111,1");
    expect_out("{% set y = 5 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 6 %}{{ m() }}", "{}", "6");
    expect_out("{{ [1, \"a'\", {\"k\": none, \"t\": true}, 1.0, 1e20, 0.1] }}{{ 7 / 2 }}{{ 7 // 2 }}{{ -7 // 2 }}", "{}",
               "[1, \"a'\", {'k': None, 't': True}, 1.0, 1e+20, 0.1]3.53-4");
    expect_out("{% if true %}\n  x\n  {% endif %}\n", "{}", "  x\n");
    expect_out("{{ 'abc'[::-1] }}{{ [1,2,3][1:] }}{{ 'a,b,,c'.split(',') }}{{ ' x '.strip() ~ '|' }}", "{}",
               "cba[2, 3]['a', 'b', '', 'c']x|");
    expect_out("{{ {'b': 1, 'a': [1, 2.5, 'é']} | tojson }}|{{ {'a': {}} | tojson(indent=2) }}", "{}",
               "{\"b\": 1, \"a\": [1, 2.5, \"é\"]}|{\n  \"a\": {}\n}");
    expect_out("{% set ns = namespace(n=0) %}{% for m in messages if m.role == 'user' %}{% set ns.n = ns.n + 1 %}"
               "{{ loop.index }}/{{ loop.length }}{% endfor %}{{ ns.n }}",
               "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"bot\"}, {\"role\": \"user\"}]}", "1/22/22");
    expect_out("{% for x in [] %}a{% else %}empty{% endfor %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}"
               "{{ i }}{% endfor %}",
               "{}", "empty012");
    expect_out("{{ 'x' if undefined_thing is defined else 'y' }}{{ none }}{{ missing }}{{ 'a' ~ 1 ~ none }}", "{}",
               "yNonea1None");
    expect_out("{% macro f(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ f('A') }}{{ f('A', b='C') }}", "{}", "ABAC");
    expect_out("{%- set s %}  in  {% endset -%}[{{ s }}]", "{}", "[  in  ]");
    expect_out("a\n{% raw %}\n  {{ x }}{% if %}\n{% endraw %}\nb {%- raw -%}  c  {%- endraw %}", "{}",
               "a\n\n  {{ x }}{% if %}\nbc");
    expect_out("{{ 'Hello World' | lower | replace('o', '0') }}{{ [3,1,2] | sort | join(',') }}", "{}", "hell0 w0rld1,2,3");
    /* ~ binds tighter than +; comparisons chain; Markup escapes what is added to it */
    expect_out("{{ '<' ~ 'a'|safe + '<b>' }}{{ 'x'|safe + '\"q\"' }}{{ 5 > 3 > 1 }}{{ 1 < 2 == true }}{{ 1 is sameas 1 }}", "{}",
               "<a<b>x&#34;q&#34;TrueFalseTrue");
    expect_out("{{ [{'a': 1}, {'b': 3}] | selectattr('a', 'defined') | map(attribute='a') | list }}"
               "{{ none | selectattr('x') | list }}{{ 'a' in undefined_y }}{{ {'b': 1, 'a': 2} | dictsort }}",
               "{}", "[1][]False[('a', 2), ('b', 1)]");
}

/* Every bound fails cleanly, naming itself: no crash, no hang. */
static void test_bounds(void **state) {
    (void)state;
    clf_jinja_limits lim;
    clf_jinja_default_limits(&lim);
    /* nesting: 10k parentheses or ifs */
    char *deep = malloc(40000);
    strcpy(deep, "{{ ");
    for (int i = 0; i < 10000; i++) deep[3 + i] = '(', deep[10004 + i] = ')';
    deep[10003] = '1';
    strcpy(deep + 20004, " }}");
    expect_fail(deep, NULL, "nesting");
    deep[0] = 0;
    for (int i = 0; i < 2000; i++) memcpy(deep + (size_t)i * 12, "{% if 1 %}xx", 12);
    deep[2000 * 12] = 0;
    expect_fail(deep, NULL, "nesting");
    free(deep);
    /* iterations, steps, recursion, output, memory */
    expect_fail("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, "iterations");
    expect_fail("{% set l = range(100000) %}{% for i in range(1000) %}{% if -1 in l %}{% endif %}{% endfor %}", NULL,
                "steps");
    expect_fail("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "macro calls");
    expect_fail("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", NULL, "output");
    expect_fail("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                "{% endfor %}",
                NULL, "bound");
    /* values nested inside themselves, or a hundred thousand deep */
    expect_fail("{% set ns = namespace(a=1) %}{% set ns.x = ns %}{{ ns }}", NULL, "nested");
    expect_fail("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}"
                "{{ ns.l < [ns.l] }}",
                NULL, "nested");
    clf_jinja_default_limits(&lim);
    lim.max_memory = 1 << 20;
    expect_fail("{% for i in range(100000) %}{% set x = [i, i, i] %}{% endfor %}", &lim, "max_memory");
    lim.max_template = 10;
    expect_fail("{{ 'a long template' }}", &lim, "max_template");
    /* a step that scans a long string counts its bytes: s|length or s[-1]
     * of a MB in a loop was one step each, minutes within the step bound */
    clf_jinja_default_limits(&lim);
    lim.max_steps = 2000000;
    expect_fail("{% set s = 'a' * 1000000 %}{% for i in range(20000) %}{% if s | length %}{% endif %}{% endfor %}", &lim,
                "steps");
    expect_fail("{% set s = 'a' * 1000000 %}{% for i in range(20000) %}{% if s[-1] %}{% endif %}{% endfor %}", &lim,
                "steps");
    expect_fail("{% set s = 'a' * 1000000 %}{% for i in range(20000) %}{% if 'b' in s %}{% endif %}{% endfor %}", &lim,
                "steps");
    /* a syntax error names its line; raise_exception is its message alone */
    expect_fail("\n\n{% if %}", NULL, "line 3");
    expect_fail("{{ raise_exception('no way') }}", NULL, "no way");
    assert_true(clf_jinja_last_was_raise());
    assert_string_equal(clf_last_error(), "no way");
    expect_fail("{% for %}", NULL, "line 1");
    expect_fail("{{ x.y }}", NULL, "undefined");
    expect_fail("{{ 'a' + 1 }}", NULL, "concatenate");
    /* integers at long long's ends: range counts without overflow (its
     * items fit where hi - lo does not), and what Python's wider ints would
     * hold fails rather than wrapping */
    expect_out("{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | list }}", "{}",
               "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]");
    expect_out("{{ range(10, 0, -3) | list }}{{ range(2, 9, 3) | list }}{{ range(3, 3) | list }}", "{}",
               "[10, 7, 4, 1][2, 5, 8][]");
    expect_fail("{{ range(-9223372036854775807, 9223372036854775807) | length }}", NULL, "MAX_RANGE");
    expect_fail("{{ -(-9223372036854775807 - 1) }}", NULL, "overflow");
    expect_fail("{{ (-9223372036854775807 - 1) | abs }}", NULL, "overflow");
    expect_fail("{{ 1e300 | int }}", NULL, "overflow");
    expect_fail("{{ '%d' % 1e300 }}", NULL, "overflow");
    expect_out("{{ 2.7 | int }}{{ '-3.9' | int }}{{ '%d' % 2.5 }}{{ -(3) }}", "{}", "2-32-3");
    /* + - * ** past 64 bits fail where they wrapped to a wrong number (jinja2: 2**64 is 18446744073709551616) */
    expect_fail("{{ 9223372036854775807 + 1 }}", NULL, "overflow");
    expect_fail("{{ -9223372036854775807 - 2 }}", NULL, "overflow");
    expect_fail("{{ 4294967296 * 4294967296 }}", NULL, "overflow");
    expect_fail("{{ 2 ** 64 }}", NULL, "overflow");
    expect_out("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ (-1) ** 1000001 }} {{ 1 ** 99999999999 }} {{ 0 ** 0 }} {{ 0 ** 5 }}", "{}",
               "4611686018427387904 -9223372036854775808 -1 1 1 0");
    expect_out("{{ 9223372036854775806 + 1 }} {{ 3037000499 * 3037000499 }}", "{}", "9223372036854775807 9223372030926249001");
}

/* Searching a string is linear: a needle that partly matches a long run
 * ("aaa...ab" in "aaa...a") took seconds per operation, each one step, so
 * a template ran for hours within its step bound. */
static void test_search_linear(void **state) {
    (void)state;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_out("{% set h = 'a' * 400000 %}{% set n = 'a' * 200000 ~ 'b' %}{{ n in h }} {{ n is in h }} {{ h.count(n) }} "
               "{{ h.find(n) }} {{ h.replace(n, 'x') | length }} {{ h.split(n) | length }} {{ h.rsplit(n) | length }} "
               "{{ h.rsplit('b' ~ 'a' * 200000) | length }}",
               "{}", "False False 0 -1 400000 1 1 1");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (s > 3.0) fail_msg("eight searches of 400 kB took %.1f s (quadratic)", s); /* linear: milliseconds */
    /* a string's slice is linear too (each item's offset was found from the string's start) */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect_out("{% set n = 'a' * 300000 ~ '\u00e9' %}{{ n[1:] | length }} {{ n[::-1] | length }}", "{}", "300000 300001");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s2 = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (s2 > 3.0) fail_msg("two slices of 300 kB took %.1f s (quadratic)", s2);
    expect_out("{{ 'h\u00e9llo w\u00f6rld'[::-1] }}|{{ 'h\u00e9llo'[::2] }}|{{ 'h\u00e9llo'[-3:-1] }}|{{ 'abc'[5:] }}", "{}",
               "dlr\u00f6w oll\u00e9h|hlo|ll|");
    /* the searches' results as Python's (rsplit from the right, non-overlapping) */
    expect_out("{{ 'aaa'.rsplit('aa') }}{{ 'a,b,,c'.rsplit(',', 1) }}{{ ',a,'.rsplit(',') }}{{ 'aaa'.split('aa') }}"
               "{{ 'a,b,,c'.split(',', 2) }}{{ 'aaaa'.replace('aa', 'b') }}{{ 'abcabc'.replace('b', 'XY', 1) }}"
               "{{ 'aaaa'.count('aa') }}{{ 'h\u00e9llo'.find('llo') }}{{ '\u00e9a\u00e9'.rsplit('a') }}",
               "{}", "['a', '']['a,b,', 'c']['', 'a', '']['', 'a']['a', 'b', ',c']bbaXYcabc22['\u00e9', '\u00e9']");
}

/* ---- one parse rendered by several threads at once -------------------- */

/* what one rendering gave: status, output or message, and whether raised */
typedef struct one_render {
    clf_status st;
    char *text; /* the output, or the message (malloc'd) */
    int raised;
} one_render;

static one_render render_once(const clf_jinja_template *t, const char *ctx, time_t now) {
    one_render r = {0};
    char *out = NULL;
    r.st = clf_jinja_render(t, ctx, now, &out, NULL);
    r.raised = r.st != CLF_OK && clf_jinja_last_was_raise();
    r.text = r.st == CLF_OK ? out : strdup(clf_last_error());
    return r;
}

enum { N_THREADS = 8 };
typedef struct thread_job {
    clf_jinja_template **tp; /* the corpus, each parsed once (NULL: it did not parse) */
    int nt, nconv;
    char **ctx;
    time_t now;
    one_render *alone; /* [template * nconv + conv]: the renders of one thread */
    int id;
    long renders, mismatches; /* this thread's */
    char first[256];          /* its first mismatch */
} thread_job;

/* Every (template, conversation) pair once, in an order of this thread's
 * own (a start and a stride coprime with the count): at any moment the
 * threads render different conversations, mostly of different templates,
 * and every template is rendered by all of them. No cmocka assertion off
 * the main thread: mismatches are counted. */
static void *thread_renders(void *arg) {
    thread_job *j = arg;
    long total = (long)j->nt * j->nconv, stride = 1;
    static const long STRIDES[] = {1, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    enum { NS = sizeof STRIDES / sizeof STRIDES[0] };
    for (int i = 0; i < NS; i++) { /* the first stride from this thread's own that is coprime with total */
        long x = STRIDES[(i + j->id) % NS], y = total;
        while (y) {
            long r = x % y;
            x = y, y = r;
        }
        if (x == 1) {
            stride = STRIDES[(i + j->id) % NS];
            break;
        }
    }
    for (long k = 0, at = (long)j->id * total / N_THREADS; k < total; k++, at = (at + stride) % total) {
        int ti = (int)(at / j->nconv), ci = (int)(at % j->nconv);
        if (!j->tp[ti]) continue;
        one_render r = render_once(j->tp[ti], j->ctx[ci], j->now);
        const one_render *w = &j->alone[at];
        j->renders++;
        if (r.st != w->st || r.raised != w->raised || strcmp(r.text, w->text)) {
            if (!j->mismatches++)
                snprintf(j->first, sizeof j->first, "template %d, conversation %d: status %d/%d, \"%.60s\"", ti, ci,
                         (int)r.st, (int)w->st, r.text);
        }
        free(r.text);
    }
    return NULL;
}

/* The corpus parsed once, each template's conversations rendered on one
 * thread, then by 8 threads at once from the same parses, each in its own
 * order: every output, status, message and raise_exception verdict the
 * same (the engine keeps a rendering's state apart; the tree is only
 * read). */
static void test_threads(void **state) {
    (void)state;
    json_error_t err;
    json_t *rec = json_load_file(DIR "expected.json", 0, &err);
    if (!rec) fail_msg("cannot read " DIR "expected.json: %s", err.text);
    time_t now = (time_t)json_integer_value(json_object_get(rec, "now"));
    json_t *convs = json_object_get(rec, "conversations"), *templates = json_object_get(rec, "templates");
    int nconv = (int)json_array_size(convs), nt = (int)json_array_size(templates), parsed = 0;
    assert_true(nt >= 70 && nconv >= 10);
    char **ctx = calloc((size_t)nconv, sizeof *ctx);
    clf_jinja_template **tp = calloc((size_t)nt, sizeof *tp);
    one_render *alone = calloc((size_t)nt * (size_t)nconv, sizeof *alone);
    assert_true(ctx && tp && alone);
    for (int i = 0; i < nconv; i++)
        ctx[i] = json_dumps(json_object_get(json_array_get(convs, (size_t)i), "context"),
                            JSON_PRESERVE_ORDER | JSON_COMPACT);
    for (int ti = 0; ti < nt; ti++) {
        char path[512];
        json_t *name = json_object_get(json_array_get(templates, (size_t)ti), "name");
        snprintf(path, sizeof path, DIR "%s", json_string_value(name));
        size_t n;
        char *text = slurp(path, &n);
        if (clf_jinja_parse(text, n, NULL, &tp[ti]) == CLF_OK) parsed++;
        free(text);
        for (int ci = 0; tp[ti] && ci < nconv; ci++) alone[ti * nconv + ci] = render_once(tp[ti], ctx[ci], now);
    }
    assert_int_equal(parsed, nt); /* the corpus parses whole (test_corpus says more) */
    thread_job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (thread_job){.tp = tp, .nt = nt, .nconv = nconv, .ctx = ctx, .now = now, .alone = alone, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, thread_renders, &jobs[i]), 0);
    }
    long renders = 0, mismatches = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        renders += jobs[i].renders;
        mismatches += jobs[i].mismatches;
        if (jobs[i].mismatches)
            printf("jinja threads: thread %d: %ld mismatches, first: %s\n", i, jobs[i].mismatches, jobs[i].first);
    }
    printf("jinja threads: %d templates parsed once, %ld renderings on %d threads at once, %ld differ from one "
           "thread's\n",
           nt, renders, N_THREADS, mismatches);
    assert_int_equal(renders, (long)N_THREADS * nt * nconv);
    assert_int_equal(mismatches, 0);
    for (int i = 0; i < nt * nconv; i++) free(alone[i].text);
    for (int i = 0; i < nt; i++) clf_jinja_free(tp[i]);
    for (int i = 0; i < nconv; i++) free(ctx[i]);
    free(alone), free(tp), free(ctx);
    json_decref(rec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_search_linear),
        cmocka_unit_test(test_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Constrained generation through the public API (include/clinfer.h
 * "grammars"): what a grammar-held sampler generates at high temperature
 * is checked by an independent recogniser (jansson for JSON, a hand-written
 * one for a pattern), fail closed (an end only at a whole sentence), a
 * grammar that leaves nothing to follow ends a model without an end token,
 * and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "clinfer.h"
#include "testutil.h"

static char tiny_path[256]; /* no end-of-generation token */
static clinfer_model *tiny, *big;

static int setup(void **state) {
    (void)state;
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) return -1;
    snprintf(tiny_path, sizeof tiny_path, "/tmp/clinfer-test-constrained-%d.gguf", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --no-eog", tool, tiny_path);
    if (system(cmd) != 0) return -1;
    return clinfer_model_load(tiny_path, NULL, NULL, &tiny) == CLINFER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    clinfer_model_free(big);
    clinfer_model_free(tiny);
    unlink(tiny_path);
    return 0;
}

static clinfer_model *default_model(void) {
    char path[1024];
    if (!big && (clinfer_model_path(NULL, path, sizeof path) != CLINFER_OK || access(path, R_OK) != 0))
        TU_SKIP("the default model is not in the cache (make model)");
    if (!big) ASSERT_OK(clinfer_model_load(path, NULL, NULL, &big));
    return big;
}

typedef struct text {
    char buf[8192];
    size_t n;
} text;

static int collect(void *ud, int32_t token, const char *piece, size_t len) {
    (void)token;
    text *t = ud;
    if (t->n + len < sizeof t->buf) memcpy(t->buf + t->n, piece, len), t->n += len;
    return 0;
}

/* One generation of up to max tokens at temperature temp under g. */
static clinfer_generate_result run(clinfer_model *m, clinfer_grammar *g, const char *prompt, float temp, uint64_t seed,
                                   int max, text *out, clinfer_grammar_state *state) {
    clinfer_session *s = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 512;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = temp;
    p.top_k = 0; /* every allowed token may come: the mask is what holds the text */
    p.top_p = 1;
    p.min_p = 0;
    p.seed = seed;
    clinfer_sampler *smp = NULL;
    ASSERT_OK(clinfer_sampler_create(m, &p, &smp));
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    int32_t *ids = NULL;
    int n = 0;
    ASSERT_OK(clinfer_tokenize(m, prompt, strlen(prompt), 1, 0, &ids, &n));
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.sampler = smp;
    gp.max_tokens = max;
    gp.on_token = collect;
    gp.user_data = out;
    out->n = 0;
    clinfer_generate_result r = {.size = sizeof r};
    ASSERT_OK(clinfer_generate(s, ids, n, &gp, &r));
    *state = clinfer_sampler_grammar_state(smp);
    clinfer_free(ids);
    clinfer_sampler_free(smp);
    clinfer_session_free(s);
    return r;
}

static int is_code(const char *s, size_t n) { /* "id-" [a-f0-9]{4} ("-" [A-Z]{1,3})? */
    if (n < 7 || memcmp(s, "id-", 3)) return 0;
    for (int i = 3; i < 7; i++)
        if (!((s[i] >= 'a' && s[i] <= 'f') || (s[i] >= '0' && s[i] <= '9'))) return 0;
    if (n == 7) return 1;
    if (s[7] != '-' || n < 9 || n > 11) return 0;
    for (size_t i = 8; i < n; i++)
        if (s[i] < 'A' || s[i] > 'Z') return 0;
    return 1;
}

/* A model without an end token: the grammar's end ends the run (nothing
 * may follow), every text in the language, at temperature 2. */
static void test_pattern_ends_tiny(void **state) {
    (void)state;
    clinfer_grammar *g = NULL;
    const char *gbnf = "root ::= \"id-\" [a-f0-9]{4} (\"-\" [A-Z]{1,3})?\n";
    ASSERT_OK(clinfer_grammar_create(tiny, gbnf, strlen(gbnf), NULL, &g));
    uint64_t seed = tu_seed();
    int ended = 0;
    for (int k = 0; k < 12; k++) {
        text t;
        clinfer_grammar_state gs;
        clinfer_generate_result r = run(tiny, g, "hello", 2.0f, seed + (uint64_t)k, 64, &t, &gs);
        if (!is_code(t.buf, t.n)) fail_msg("'%.*s' is not in the language", (int)t.n, t.buf);
        assert_int_equal(r.stop, CLINFER_STOP_EOG); /* the grammar's end, the model has none */
        assert_true(gs == CLINFER_GRAMMAR_DONE || gs == CLINFER_GRAMMAR_CAN_END);
        ended += gs == CLINFER_GRAMMAR_DONE;
    }
    assert_true(ended > 0);
    clinfer_grammar_free(g);
}

static const char *OBJECT_GBNF =
    "root   ::= \"{\" ws pair (\",\" ws pair){0,3} \"}\"\n"
    "pair   ::= string \":\" ws value ws\n"
    "value  ::= string | number | \"true\" | \"false\" | \"null\" | \"[\" ws (value ws (\",\" ws value ws){0,3})? \"]\"\n"
    "string ::= \"\\\"\" ([^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt])* \"\\\"\"\n"
    "number ::= \"-\"? ([0-9] | [1-9] [0-9]{1,5}) (\".\" [0-9]{1,4})?\n"
    "ws     ::= [ \\n]?\n";

/* The default model at temperature 1.5: a reply that ended is JSON
 * (jansson), one cut by max_tokens is not marked ended. */
static void test_json_fail_closed(void **state) {
    (void)state;
    clinfer_model *m = default_model();
    clinfer_grammar *g = NULL;
    ASSERT_OK(clinfer_grammar_create(m, OBJECT_GBNF, strlen(OBJECT_GBNF), NULL, &g));
    uint64_t seed = tu_seed();
    int whole = 0;
    for (int k = 0; k < 6; k++) {
        text t;
        clinfer_grammar_state gs;
        clinfer_generate_result r = run(m, g, "A JSON object:", 1.5f, seed + (uint64_t)k, 96, &t, &gs);
        json_error_t e;
        json_t *j = json_loadb(t.buf, t.n, 0, &e);
        if (r.stop == CLINFER_STOP_EOG) {
            if (!j || !json_is_object(j)) fail_msg("ended, yet not a JSON object (%s): '%.*s'", e.text, (int)t.n, t.buf);
            assert_true(gs != CLINFER_GRAMMAR_OPEN);
            whole++;
        } else {
            assert_int_equal(r.stop, CLINFER_STOP_MAX_TOKENS);
            /* cut mid-structure, or on its last token: whole only where the grammar may end */
            assert_true(!j || gs != CLINFER_GRAMMAR_OPEN);
        }
        json_decref(j);
    }
    printf("%d of 6 replies ended whole\n", whole);
    clinfer_grammar_free(g);
}

/* A schema through the converter: every reply that ended has the
 * required fields with their types. */
static void test_schema(void **state) {
    (void)state;
    clinfer_model *m = default_model();
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                         "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99},\"ok\":{\"type\":\"boolean\"}},"
                         "\"required\":[\"name\",\"n\"],\"additionalProperties\":false}";
    char *gbnf = NULL;
    ASSERT_OK(clinfer_json_schema_to_gbnf(schema, strlen(schema), &gbnf));
    clinfer_grammar *g = NULL;
    ASSERT_OK(clinfer_grammar_create(m, gbnf, strlen(gbnf), NULL, &g));
    clinfer_free(gbnf);
    uint64_t seed = tu_seed();
    for (int k = 0; k < 4; k++) {
        text t;
        clinfer_grammar_state gs;
        clinfer_generate_result r = run(m, g, "A person:", 1.0f, seed + (uint64_t)k, 128, &t, &gs);
        json_error_t e;
        json_t *j = json_loadb(t.buf, t.n, 0, &e);
        if (r.stop != CLINFER_STOP_EOG) {
            assert_int_equal(r.stop, CLINFER_STOP_MAX_TOKENS);
            if (!j) continue; /* cut mid-object */
            /* a cut on the object's last token leaves it whole (seen: the
             * 128th token closed it): only where the grammar may end, and
             * then it holds what the schema asks, as below */
            assert_true(gs != CLINFER_GRAMMAR_OPEN);
        }
        if (!j) fail_msg("not JSON (%s): '%.*s'", e.text, (int)t.n, t.buf);
        json_t *name = json_object_get(j, "name"), *n = json_object_get(j, "n");
        /* JSON Schema's integer is a number without a fraction: 50.0 is one */
        double x = json_number_value(n);
        size_t chars = 0; /* maxLength counts characters, not bytes */
        for (const char *q = json_is_string(name) ? json_string_value(name) : ""; *q; q++) chars += ((unsigned char)*q & 0xC0) != 0x80;
        if (!json_is_string(name) || chars > 12 || !json_is_number(n) || x != (double)(long)x ||
            x < 1 || x > 99)
            fail_msg("'%.*s' does not validate", (int)t.n, t.buf);
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) assert_true(!strcmp(key, "name") || !strcmp(key, "n") || !strcmp(key, "ok"));
        json_decref(j);
    }
    clinfer_grammar_free(g);
}

static void test_refusals(void **state) {
    (void)state;
    clinfer_grammar *g = NULL;
    const char *empty = "root ::= [^\\x00-\\U0010FFFF]\n", *bad = "root ::= \"a\" |\n  ) \n";
    assert_int_equal(clinfer_grammar_create(tiny, empty, strlen(empty), NULL, &g), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "no token");
    assert_int_equal(clinfer_grammar_create(tiny, bad, strlen(bad), NULL, &g), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "line 2");
    assert_null(g);
    char *gbnf = NULL;
    const char *schema = "{\"type\":\"number\",\"multipleOf\":7}";
    assert_int_equal(clinfer_json_schema_to_gbnf(schema, strlen(schema), &gbnf), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "multipleOf");
    const char *ok = "root ::= \"x\"+\n";
    ASSERT_OK(clinfer_grammar_create(tiny, ok, strlen(ok), NULL, &g));
    clinfer_sampler *smp = NULL;
    clinfer_sampler_params p = clinfer_sampler_default_params();
    ASSERT_OK(clinfer_sampler_create(tiny, &p, &smp));
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_NONE);
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    assert_int_equal(clinfer_sampler_set_grammar(smp, g), CLINFER_ERR_ARG); /* one grammar a sampler */
    clinfer_grammar_free(g); /* the sampler keeps it */
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_OPEN);
    clinfer_sampler_free(smp);
    /* another model's vocabulary */
    clinfer_model *m = default_model();
    ASSERT_OK(clinfer_grammar_create(m, ok, strlen(ok), NULL, &g));
    ASSERT_OK(clinfer_sampler_create(tiny, &p, &smp));
    assert_int_equal(clinfer_sampler_set_grammar(smp, g), CLINFER_ERR_ARG);
    clinfer_sampler_free(smp);
    clinfer_grammar_free(g);
}

/* One request must not break a sampler: a token outside the vocabulary is
 * refused and the grammar goes on as before; grammars past the bounds are
 * refused when created; a text that reaches the matcher's nesting bound
 * (recursion: only the text knows how deep) ends the generation as
 * max_tokens would, with the state saying why, not with an error. */
static void test_hostile(void **state) {
    (void)state;
    clinfer_model_info info = {.size = sizeof info};
    ASSERT_OK(clinfer_model_get_info(tiny, &info));
    const int nv = info.n_vocab;
    clinfer_grammar *g = NULL;
    char *deep = malloc(5000);
    size_t n = (size_t)sprintf(deep, "root ::= ");
    for (int i = 0; i < 2000; i++) deep[n++] = '(';
    n += (size_t)sprintf(deep + n, "\"a\"");
    for (int i = 0; i < 2000; i++) deep[n++] = ')';
    assert_int_equal(clinfer_grammar_create(tiny, deep, n, NULL, &g), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "nested deeper than 1024 (the bound on nesting)");
    free(deep);
    const char *surrogate = "root ::= \"\\ud800\"\n";
    assert_int_equal(clinfer_grammar_create(tiny, surrogate, strlen(surrogate), NULL, &g), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "a surrogate");

    int32_t *ids = NULL, x, open;
    int k = 0;
    ASSERT_OK(clinfer_tokenize(tiny, "x", 1, 0, 0, &ids, &k));
    assert_int_equal(k, 1);
    x = ids[0];
    clinfer_free(ids);
    ASSERT_OK(clinfer_tokenize(tiny, "(", 1, 0, 0, &ids, &k));
    assert_int_equal(k, 1);
    open = ids[0];
    clinfer_free(ids);
    const char *xs = "root ::= \"x\"+\n";
    ASSERT_OK(clinfer_grammar_create(tiny, xs, strlen(xs), NULL, &g));
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = 0;
    clinfer_sampler *smp = NULL;
    ASSERT_OK(clinfer_sampler_create(tiny, &p, &smp));
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    clinfer_grammar_free(g);
    float *lg = calloc((size_t)nv, sizeof *lg);
    int32_t t;
    ASSERT_OK(clinfer_sampler_sample(smp, lg, nv, &t)); /* armed: accepted tokens are the grammar's text */
    assert_int_equal(t, x);
    assert_int_equal(clinfer_sampler_accept(smp, nv), CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "is not in the vocabulary");
    assert_int_equal(clinfer_sampler_accept(smp, -1), CLINFER_ERR_ARG);
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_OPEN);
    ASSERT_OK(clinfer_sampler_accept(smp, x));
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_CAN_END);
    ASSERT_OK(clinfer_sampler_sample(smp, lg, nv, &t)); /* the grammar still steps */
    clinfer_sampler_free(smp);

    /* "(" nests a level each; the way out ("(" d1 ")": 40 levels more) fits
     * until the text is about 470 deep, "(" alone until 511: then nothing */
    char gb[4096];
    n = (size_t)sprintf(gb, "root ::= \"(\" root \")\" | \"(\" d0 \")\"\n");
    for (int i = 0; i < 40; i++) n += (size_t)sprintf(gb + n, "d%d ::= d%d \"a\"\n", i, i + 1);
    n += (size_t)sprintf(gb + n, "d40 ::= \"b\"\n");
    ASSERT_OK(clinfer_grammar_create(tiny, gb, n, NULL, &g));
    ASSERT_OK(clinfer_sampler_create(tiny, &p, &smp));
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    lg[open] = 10; /* greedy: "(" while it is allowed */
    int i = 0;
    clinfer_status st = CLINFER_OK;
    for (; i < 1000 && (st = clinfer_sampler_sample(smp, lg, nv, &t)) == CLINFER_OK; i++) {
        assert_int_equal(t, open);
        ASSERT_OK(clinfer_sampler_accept(smp, t));
    }
    assert_int_equal(st, CLINFER_ERR_ARG);
    tu_expect_in(clinfer_last_error(), "nesting bound (512 levels): no more tokens possible");
    assert_int_equal(i, 511);
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_LIMIT);
    clinfer_sampler_reset(smp); /* a new text: the limit is gone */
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_OPEN);
    clinfer_sampler_free(smp);

    /* clinfer_generate: the same end, as max_tokens */
    clinfer_session *s = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 1024;
    ASSERT_OK(clinfer_session_create(tiny, &sp, &s));
    ASSERT_OK(clinfer_sampler_create(tiny, &p, &smp));
    ASSERT_OK(clinfer_sampler_add_logit_bias(smp, open, 100));
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    ASSERT_OK(clinfer_tokenize(tiny, "hello", 5, 1, 0, &ids, &k));
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.sampler = smp;
    gp.max_tokens = 900;
    clinfer_generate_result r = {.size = sizeof r};
    ASSERT_OK(clinfer_generate(s, ids, k, &gp, &r));
    assert_int_equal(r.stop, CLINFER_STOP_MAX_TOKENS);
    assert_int_equal(r.n_generated, 511);
    assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_LIMIT);
    clinfer_free(ids);
    clinfer_sampler_free(smp);
    clinfer_session_free(s);
    clinfer_grammar_free(g);
    free(lg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_ends_tiny),
        cmocka_unit_test(test_json_fail_closed),
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_hostile),
    };
    return TU_RUN_GROUP(tests, setup, teardown);
}

/* Constrained generation from the device's k best (issue 41 item 5;
 * api/sampler.c api_sampler_top_k / api_sampler_mask_k, api/grammar.c
 * api_grammar_filter / api_grammar_device_mask, cl/select.cl's mask): on
 * both kernel variants (cpu, gpu), clinfer_generate under a JSON schema's
 * grammar and a GBNF gives token for token what the whole-row path gives
 * (CLINFER_GRAMMAR_TOP_K=0), greedy and sampled with the same seed, both
 * with the device masking the row before its selection (the default) and
 * with the k best masked by id lookups (CLINFER_GRAMMAR_DEVICE_MASK=0); a
 * grammar that admits only tokens far outside the k best is served by the
 * device's masked selection (no fallback) and, by lookups, falls back to
 * the whole row, the text the grammar's either way; clinfer_next_token
 * (the server's door: the row on the host, its k best chosen there,
 * masked by the grammar's bits or by lookups) the same; every drawn token
 * (an end token included) is counted exactly once. Gemma 3's 262,144
 * tokens too, where the model is in the cache. Two turns on one sampler:
 * a mask made before the second prompt moved the grammar is not used (the
 * whole row answers that draw). Sessions on three threads, two under a
 * grammar: the tokens each gives alone. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "api.h"
#include "clinfer.h"
#include "testutil.h"

enum { MAX_TOKENS = 16 };

static const char *SCHEMA = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":16},"
                            "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                            "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
static const char *GBNF = "root ::= \"The answer is \" [A-Za-z ]{1,40} \".\"";
/* tokens no model ranks among its 32 best after the prompt: the fallback */
static const char *RARE = "root ::= \"QXJ7 zebra\"";

typedef struct run_out {
    int32_t tok[MAX_TOKENS + 1];
    int n;
    char text[1024];
    size_t len;
    long from_top, fallbacks, masked;
    int drawn; /* tokens the sampler drew: the streamed ones and an end token */
} run_out;

static int collect(void *ud, int32_t token, const char *piece, size_t len) {
    run_out *o = ud;
    if (token >= 0 && o->n < MAX_TOKENS + 1) o->tok[o->n++] = token;
    if (o->len + len < sizeof o->text) memcpy(o->text + o->len, piece, len), o->len += len;
    return 0;
}

static clinfer_model *load(const char *name, const char *variant) {
    char path[1024];
    if (clinfer_model_path(name, path, sizeof path) != CLINFER_OK || access(path, R_OK) != 0)
        TU_SKIP("%s is not in the cache (make model; sh tests/fetch_model.sh)", name ? name : "the default model");
    if (variant) setenv("CLINFER_MATMUL_VARIANT", variant, 1);
    if (variant) setenv("CLINFER_ATTN_VARIANT", variant, 1);
    clinfer_model *m = NULL;
    ASSERT_OK(clinfer_model_load(path, NULL, NULL, &m));
    unsetenv("CLINFER_MATMUL_VARIANT");
    unsetenv("CLINFER_ATTN_VARIANT");
    return m;
}

/* The paths a constrained token may take. */
typedef enum { P_MASK, P_LOOKUP, P_ROW } path;

/* The environment a sampler reads at its creation for path p. */
static void path_env(path p) {
    if (p == P_ROW) setenv("CLINFER_GRAMMAR_TOP_K", "0", 1);
    else unsetenv("CLINFER_GRAMMAR_TOP_K");
    if (p == P_LOOKUP) setenv("CLINFER_GRAMMAR_DEVICE_MASK", "0", 1);
    else unsetenv("CLINFER_GRAMMAR_DEVICE_MASK");
}

static void stats(const clinfer_sampler *smp, run_out *o) {
    api_sampler_top_stats(smp, &o->from_top, &o->fallbacks);
    o->masked = api_sampler_masked_count(smp);
}

/* One generation from the test's prompt with smp (its grammar set), into o
 * (no assertion: it may run on a thread of its own). */
static clinfer_status generate_with(clinfer_model *m, clinfer_sampler *smp, run_out *o) {
    clinfer_session *s = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 256;
    clinfer_status st = clinfer_session_create(m, &sp, &s);
    const char *prompt = "Describe a person as JSON. The capital of France is";
    int32_t *ids = NULL;
    int n = 0;
    if (st == CLINFER_OK) st = clinfer_tokenize(m, prompt, strlen(prompt), 1, 0, &ids, &n);
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.sampler = smp;
    gp.max_tokens = MAX_TOKENS;
    gp.on_token = collect;
    gp.user_data = o;
    clinfer_generate_result r = {.size = sizeof r};
    if (st == CLINFER_OK) st = clinfer_generate(s, ids, n, &gp, &r);
    o->drawn = r.n_generated; /* an end token drawn counts, though it is not streamed */
    stats(smp, o);
    o->text[o->len] = 0;
    if (st == CLINFER_OK && !(o->drawn == o->n || (o->drawn == o->n + 1 && r.stop == CLINFER_STOP_EOG)))
        st = (clinfer_status)clf_fail(CLF_ERR_ARG, "%d tokens drawn, %d streamed", o->drawn, o->n);
    clinfer_free(ids);
    clinfer_session_free(s);
    return st;
}

/* The sampler of path p (greedy at temp 0; else top_k 40 with seed), with
 * g set where there is one. */
static clinfer_sampler *sampler(clinfer_model *m, clinfer_grammar *g, path pth, float temp, uint64_t seed) {
    path_env(pth);
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = temp;
    p.top_k = 40;
    p.seed = seed;
    clinfer_sampler *smp = NULL;
    ASSERT_OK(clinfer_sampler_create(m, &p, &smp)); /* reads the path's environment */
    path_env(P_MASK);
    if (g) ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    return smp;
}

/* One generation under g by path p. temp 0: greedy; else top_k 40 with
 * seed. */
static void run(clinfer_model *m, clinfer_grammar *g, path pth, float temp, uint64_t seed, run_out *o) {
    memset(o, 0, sizeof *o);
    clinfer_sampler *smp = sampler(m, g, pth, temp, seed);
    ASSERT_OK(generate_with(m, smp, o));
    clinfer_sampler_free(smp);
}

/* The server's door: rows on the host, one clinfer_next_token each
 * (greedy, the whole row or, by default, its k best chosen on the host). */
static void run_next(clinfer_model *m, clinfer_grammar *g, path pth, run_out *o) {
    memset(o, 0, sizeof *o);
    path_env(pth);
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = 0;
    clinfer_sampler *smp = NULL;
    ASSERT_OK(clinfer_sampler_create(m, &p, &smp));
    path_env(P_MASK);
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    clinfer_session *s = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 256;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    clinfer_detokenizer *d = NULL;
    ASSERT_OK(clinfer_detokenizer_create(m, 0, &d));
    const char *prompt = "Describe a person as JSON.";
    int32_t *ids = NULL;
    int n = 0;
    ASSERT_OK(clinfer_tokenize(m, prompt, strlen(prompt), 1, 0, &ids, &n));
    ASSERT_OK(clinfer_eval(s, ids, n));
    for (int i = 0; i < n; i++) ASSERT_OK(clinfer_sampler_accept(smp, ids[i]));
    clinfer_model_info info = {.size = sizeof info};
    ASSERT_OK(clinfer_model_get_info(m, &info));
    for (int i = 0; i < MAX_TOKENS; i++) {
        clinfer_next nx;
        ASSERT_OK(clinfer_next_token(smp, d, clinfer_session_logits(s), info.n_vocab, &nx));
        o->drawn += nx.token >= 0;
        if (nx.eog) break;
        collect(o, nx.token, nx.piece, nx.len);
        ASSERT_OK(clinfer_eval(s, &nx.token, 1));
    }
    stats(smp, o);
    o->text[o->len] = 0;
    clinfer_free(ids);
    clinfer_detokenizer_free(d);
    clinfer_session_free(s);
    clinfer_sampler_free(smp);
}

static clinfer_grammar *grammar(clinfer_model *m, const char *gbnf, int schema) {
    char *text = NULL;
    if (schema) ASSERT_OK(clinfer_json_schema_to_gbnf(gbnf, strlen(gbnf), &text));
    const char *t = schema ? text : gbnf;
    clinfer_grammar *g = NULL;
    ASSERT_OK(clinfer_grammar_create(m, t, strlen(t), NULL, &g));
    clinfer_free(text);
    return g;
}

/* The device-masked path (and, with look, the lookups' path) against the
 * whole row: the same tokens; each drawn token counted once, on its path;
 * the whole row's run never asks for the k best, the masked one never
 * falls back. */
static void same(clinfer_model *m, clinfer_grammar *g, float temp, uint64_t seed, const char *what, run_out *top,
                 run_out *look) {
    run_out row;
    run(m, g, P_MASK, temp, seed, top);
    if (look) run(m, g, P_LOOKUP, temp, seed, look);
    run(m, g, P_ROW, temp, seed, &row);
    assert_int_equal(row.from_top + row.fallbacks + row.masked, 0);
    const run_out *o[2] = {top, look};
    for (int i = 0; i < 2; i++)
        if (o[i] && (o[i]->n != row.n || memcmp(o[i]->tok, row.tok, (size_t)row.n * sizeof *row.tok)))
            fail_msg("%s: the %s gave '%s' (%d tokens), the whole row '%s' (%d)", what,
                     i ? "k best by lookups" : "device's masked k best", o[i]->text, o[i]->n, row.text, row.n);
    assert_true(top->n > 0);
    assert_int_equal(top->drawn, row.drawn);
    /* every draw took one path, counted once */
    assert_int_equal(top->from_top, top->drawn);
    assert_int_equal(top->masked, top->drawn);
    assert_int_equal(top->fallbacks, 0);
    if (look) {
        assert_int_equal(look->from_top + look->fallbacks, look->drawn);
        assert_int_equal(look->masked, 0);
    }
    printf("%s: %d tokens (%d drawn), masked on the device %ld; by lookups %ld from the k best, %ld fallbacks: %s\n",
           what, top->n, top->drawn, top->masked, look ? look->from_top : -1, look ? look->fallbacks : -1, top->text);
}

/* The model's checks: schema greedy and sampled, the rare grammar (the
 * old path's fallback), the server's door; full: the GBNF and the id
 * lookups' path too (on one kernel variant: the path is the host's). */
static void checks(clinfer_model *m, int full) {
    clinfer_grammar *js = grammar(m, SCHEMA, 1), *gb = grammar(m, GBNF, 0), *rare = grammar(m, RARE, 0);
    run_out a, b, c, e, la, lb, le;
    same(m, js, 0, 0, "schema greedy", &a, full ? &la : NULL);
    same(m, js, 0.8f, tu_seed(), "schema sampled", &c, NULL);
    if (full) {
        same(m, gb, 0, 0, "gbnf greedy", &b, &lb);
        /* the lookups' k best serve tokens too: a JSON string's letters, the GBNF's words */
        assert_true(la.from_top > 0 && lb.from_top > 0);
    }
    /* nothing the grammar allows is among the k best: from the device's masked
     * selection no fallback; by lookups the whole row; the text the grammar's */
    same(m, rare, 0, 0, "rare greedy", &e, full ? &le : NULL);
    assert_string_equal(e.text, "QXJ7 zebra");
    if (full) assert_true(le.fallbacks >= 1);
    /* the server's door: the k best of a row on the host, masked by bits (or by lookups) */
    run_out h, l, w;
    run_next(m, js, P_MASK, &h);
    if (full) run_next(m, js, P_LOOKUP, &l);
    run_next(m, js, P_ROW, &w);
    if (h.n != w.n || memcmp(h.tok, w.tok, (size_t)w.n * sizeof *w.tok) ||
        (full && (l.n != w.n || memcmp(l.tok, w.tok, (size_t)w.n * sizeof *w.tok))))
        fail_msg("clinfer_next_token: masked '%s', lookups '%s', the whole row '%s'", h.text, full ? l.text : "-",
                 w.text);
    assert_true(h.n > 0);
    assert_int_equal(h.from_top, h.drawn);
    assert_int_equal(h.masked, h.drawn);
    assert_int_equal(h.fallbacks, 0);
    if (full) {
        assert_true(l.from_top > 0);
        assert_int_equal(l.from_top + l.fallbacks, l.drawn);
    }
    assert_int_equal(w.from_top + w.fallbacks + w.masked, 0);
    printf("next_token greedy: %d tokens, masked %ld: %s\n", h.n, h.masked, h.text);
    clinfer_grammar_free(js);
    clinfer_grammar_free(gb);
    clinfer_grammar_free(rare);
}

/* Two turns on one sampler (greedy) by path p: the second prompt's tokens,
 * accepted after its evaluation, move the grammar armed by the first
 * turn's draws, so the mask the device applied to that evaluation is of a
 * state the grammar has left: its first draw must come from the whole row
 * (api_next_token's stale-mask fallback), the later ones masked again. */
static void run_turns(clinfer_model *m, clinfer_grammar *g, path pth, run_out *o) {
    memset(o, 0, sizeof *o);
    path_env(pth);
    clinfer_sampler_params p = clinfer_sampler_default_params();
    p.temperature = 0;
    clinfer_sampler *smp = NULL;
    ASSERT_OK(clinfer_sampler_create(m, &p, &smp));
    path_env(P_MASK);
    ASSERT_OK(clinfer_sampler_set_grammar(smp, g));
    clinfer_session *s = NULL;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 256;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    const char *turns[2] = {"Write three words in lower case:", " and then some more."};
    for (int t = 0; t < 2; t++) {
        int32_t *ids = NULL;
        int n = 0;
        ASSERT_OK(clinfer_tokenize(m, turns[t], strlen(turns[t]), !t, 0, &ids, &n));
        clinfer_generate_params gp = clinfer_generate_default_params();
        gp.sampler = smp;
        gp.max_tokens = 4;
        gp.on_token = collect;
        gp.user_data = o;
        clinfer_generate_result r = {.size = sizeof r};
        ASSERT_OK(clinfer_generate(s, ids, n, &gp, &r));
        o->drawn += r.n_generated;
        clinfer_free(ids);
    }
    stats(smp, o);
    o->text[o->len] = 0;
    clinfer_session_free(s);
    clinfer_sampler_free(smp);
}

/* The stale mask: the same tokens as the whole row's path, one fallback
 * (the second turn's first draw), every other draw masked on the device. */
static void test_stale_mask(void **state) {
    (void)state;
    clinfer_model *m = load(NULL, NULL);
    clinfer_grammar *g = grammar(m, "root ::= [a-z ]{1,200} \".\" [A-Z ]{1,200}", 0);
    run_out k, w;
    run_turns(m, g, P_MASK, &k);
    run_turns(m, g, P_ROW, &w);
    printf("two turns: %d tokens (%d drawn), masked %ld, fallbacks %ld: '%s'\n", k.n, k.drawn, k.masked, k.fallbacks,
           k.text);
    if (k.n != w.n || memcmp(k.tok, w.tok, (size_t)w.n * sizeof *w.tok))
        fail_msg("two turns: masked '%s', the whole row '%s'", k.text, w.text);
    assert_int_equal(k.fallbacks, 1);
    assert_int_equal(k.masked, k.drawn - 1);
    assert_int_equal(k.from_top, k.masked);
    assert_int_equal(w.from_top + w.fallbacks + w.masked, 0);
    clinfer_grammar_free(g);
    clinfer_model_free(m);
}

/* Sessions on several threads (api/session.c gives the model's turn away
 * while the host makes a grammar's mask): two under the schema's grammar,
 * masked on the device, and one unconstrained (its plain k best) beside
 * them, each the tokens it gives alone, every constrained draw masked. */
typedef struct worker {
    clinfer_model *m;
    clinfer_sampler *smp;
    run_out o;
    clinfer_status st;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    w->st = generate_with(w->m, w->smp, &w->o);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    clinfer_model *m = load(NULL, NULL);
    clinfer_grammar *g = grammar(m, SCHEMA, 1);
    enum { N = 3 };
    worker alone[N], ws[N];
    memset(alone, 0, sizeof alone);
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < N; i++) { /* samplers made here: they read the environment */
        clinfer_grammar *gi = i < 2 ? g : NULL;
        alone[i] = (worker){.m = m, .smp = sampler(m, gi, P_MASK, 0, 0)};
        ws[i] = (worker){.m = m, .smp = sampler(m, gi, P_MASK, 0, 0)};
        work(&alone[i]);
        ASSERT_OK(alone[i].st);
    }
    pthread_t th[N];
    for (int i = 0; i < N; i++) assert_int_equal(pthread_create(&th[i], NULL, work, &ws[i]), 0);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        ASSERT_OK(ws[i].st);
        if (ws[i].o.n != alone[i].o.n || memcmp(ws[i].o.tok, alone[i].o.tok, (size_t)alone[i].o.n * sizeof(int32_t)))
            fail_msg("thread %d: '%s', alone '%s'", i, ws[i].o.text, alone[i].o.text);
        assert_true(ws[i].o.n > 0);
        assert_int_equal(ws[i].o.masked, i < 2 ? ws[i].o.drawn : 0);
        clinfer_sampler_free(alone[i].smp);
        clinfer_sampler_free(ws[i].smp);
    }
    printf("threads: %s | %s\n", ws[0].o.text, ws[2].o.text);
    clinfer_grammar_free(g);
    clinfer_model_free(m);
}

static void variant(const char *v) {
    clinfer_model *m = load(NULL, v);
    checks(m, !strcmp(v, "cpu"));
    clinfer_model_free(m);
}

/* A large vocabulary (262,144): the mask's 8,192 words, the selection's
 * 64 slices; the default kernels. */
static void test_gemma(void **state) {
    (void)state;
    clinfer_model *m = load("gemma3-270m", NULL);
    checks(m, 0);
    clinfer_model_free(m);
}

static void test_cpu(void **state) {
    (void)state;
    variant("cpu");
}

static void test_gpu(void **state) {
    (void)state;
    variant("gpu");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_gpu),
        cmocka_unit_test(test_gemma),
        cmocka_unit_test(test_stale_mask),
        cmocka_unit_test(test_threads),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

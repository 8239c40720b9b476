/* Preserved tokens (text/grammar/grammar_vocab.c clf_grammar_masks_preserve,
 * api/grammar.c): a control token whose bytes a grammar's literal spells
 * (a tool-call format's marker: Mistral's [TOOL_CALLS], gpt-oss's
 * <|channel|>) may be drawn as itself where the literal reads it, and
 * nowhere else (not inside a JSON string, whose class holds its bytes
 * too); a grammar made without them still refuses every control token.
 * On llama.cpp's Phi-3 vocabulary file (tests/data/vocab, run from the
 * repository root): <|placeholder1|> is a control token, not an end one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api.h"
#include "gguf.h"
#include "grammar_impl.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

static const char PHI3[] = "tests/data/vocab/ggml-vocab-phi-3.gguf";
static const char MARK[] = "<|placeholder1|>";

/* The marker, then a JSON object whose string may hold any text: the
 * marker's bytes included. */
static const char GBNF[] = "root ::= \"<|placeholder1|>{\\\"a\\\": \\\"\" [^\"]* \"\\\"}\"\n";

typedef struct fixture {
    clf_gguf *gg;
    clf_tokenizer *t;
    clf_vocab_trie *trie;
    int n;
    int32_t mark, lt; /* the marker's control token; the text token "<" */
} fixture;

static void fixture_load(fixture *f) {
    memset(f, 0, sizeof *f);
    TU_OK(clf_gguf_open(PHI3, &f->gg));
    TU_OK(clf_tokenizer_load(f->gg, &f->t));
    TU_OK(clf_vocab_trie_build(f->t, &f->trie));
    f->n = clf_tokenizer_n_vocab(f->t);
    f->mark = f->lt = -1;
    for (int id = 0; id < f->n; id++) {
        size_t len = 0;
        const char *p = clf_token_piece(f->t, id, &len);
        if (len == strlen(MARK) && !memcmp(p, MARK, len)) f->mark = id;
        if (len == 1 && p[0] == '<' && clf_grammar_token_is_text(f->t, id, &p, &len)) f->lt = id;
    }
    assert_true(f->mark >= 0 && f->lt >= 0);
    assert_int_equal(clf_token_type(f->t, f->mark), CLF_TOKEN_CONTROL);
    assert_false(clf_token_is_eog(f->t, f->mark));
}

static void fixture_free(fixture *f) {
    clf_vocab_trie_free(f->trie);
    clf_tokenizer_free(f->t);
    clf_gguf_close(f->gg);
}

/* Whether state s's mask allows token id (the row all zeros before). */
static int allows(clf_grammar_masks *gm, const gstate *s, float *row, int n, int32_t id) {
    int n_allowed = 0;
    memset(row, 0, (size_t)n * sizeof *row);
    TU_OK(clf_grammar_masks_apply(gm, s, row, &n_allowed));
    assert_true(n_allowed > 0);
    return row[id] == 0.0f;
}

/* The state after text[0, n) from s, byte by byte (the whole automaton). */
static void read_text(const clf_grammar *g, gstate *s, const char *text) {
    gstate tmp = {0};
    for (const char *p = text; *p; p++) {
        TU_OK(clf_gstate_advance(g, s, (unsigned char)*p, &tmp));
        assert_true(tmp.n_stacks > 0);
        gstate t = *s;
        *s = tmp;
        tmp = t;
    }
    clf_gstate_free(&tmp);
}

/* The masks and the accept path, with and without preserved tokens. */
static void test_masks(void **state) {
    (void)state;
    fixture f;
    fixture_load(&f);
    float *row = malloc((size_t)f.n * sizeof *row);
    clf_grammar *g = NULL;
    clf_grammar_masks *plain = NULL, *pres = NULL;
    TU_OK(clf_grammar_compile(GBNF, strlen(GBNF), NULL, &g));
    TU_OK(clf_grammar_masks_create(g, f.trie, f.n, &plain));
    TU_OK(clf_grammar_masks_create(g, f.trie, f.n, &pres));
    TU_OK(clf_grammar_masks_preserve(pres, f.t));
    assert_int_equal(clf_grammar_masks_n_preserved(plain), 0);
    assert_int_equal(clf_grammar_masks_n_preserved(pres), 1); /* the marker alone: no other control token is spelt */
    gstate s = {0}, tmp = {0}, x = {0};
    TU_OK(clf_gstate_start(g, &s));

    /* at the start: the marker as itself under the preserving masks only;
     * "<" (the marker spelt in text pieces) under both */
    assert_false(allows(plain, &s, row, f.n, f.mark));
    assert_true(allows(pres, &s, row, f.n, f.mark));
    assert_true(allows(plain, &s, row, f.n, f.lt));
    assert_true(allows(pres, &s, row, f.n, f.lt));
    TU_OK(clf_gstate_copy(&s, &x));
    assert_false(clf_grammar_masks_advance(plain, f.t, f.mark, &x, &tmp));
    /* accepting it advances past the whole marker: '{' next, '<' not */
    TU_OK(clf_gstate_copy(&s, &x));
    assert_true(clf_grammar_masks_advance(pres, f.t, f.mark, &x, &tmp));
    assert_true(x.n_stacks > 0 && !x.accepting);
    assert_true(gset_has(x.tops, '{') && !gset_has(x.tops, '<'));
    assert_false(allows(pres, &x, row, f.n, f.mark)); /* not twice */
    assert_false(allows(pres, &x, row, f.n, f.lt));
    read_text(g, &x, "{\"a\": \"hi\"}");
    assert_true(x.accepting);

    /* inside the JSON string: the class [^"] takes the marker's bytes as
     * text ("<" allowed), but the marker itself is not a literal there */
    TU_OK(clf_gstate_copy(&s, &x));
    read_text(g, &x, "<|placeholder1|>{\"a\": \"");
    assert_true(allows(pres, &x, row, f.n, f.lt));
    assert_false(allows(pres, &x, row, f.n, f.mark));
    gstate y = {0};
    assert_false(clf_grammar_masks_advance(pres, f.t, f.mark, &x, &y));
    /* any other control token stays refused, preserving or not */
    TU_OK(clf_gstate_start(g, &x));
    for (int id = 0; id < f.n; id++)
        if (id != f.mark && clf_token_type(f.t, id) == CLF_TOKEN_CONTROL) {
            assert_false(allows(pres, &s, row, f.n, id));
            assert_false(clf_grammar_masks_advance(pres, f.t, id, &x, &y));
            TU_OK(clf_gstate_start(g, &x));
            break; /* one is enough: the mask is per token id */
        }

    clf_gstate_free(&s);
    clf_gstate_free(&tmp);
    clf_gstate_free(&x);
    clf_gstate_free(&y);
    clf_grammar_masks_free(plain);
    clf_grammar_masks_free(pres);
    clf_grammar_free(g);
    free(row);
    fixture_free(&f);
}

/* A marker in a literal next to a class that also reads its bytes: after
 * the marker token only the literal's path is left. */
static void test_literal_path(void **state) {
    (void)state;
    fixture f;
    fixture_load(&f);
    static const char gb[] = "root ::= \"<|placeholder1|>x\" | [<|>a-z0-9]+ \"y\"\n";
    clf_grammar *g = NULL;
    clf_grammar_masks *gm = NULL;
    TU_OK(clf_grammar_compile(gb, strlen(gb), NULL, &g));
    TU_OK(clf_grammar_masks_create(g, f.trie, f.n, &gm));
    TU_OK(clf_grammar_masks_preserve(gm, f.t));
    gstate s = {0}, tmp = {0};
    TU_OK(clf_gstate_start(g, &s));
    assert_true(clf_grammar_masks_advance(gm, f.t, f.mark, &s, &tmp));
    assert_true(gset_has(s.tops, 'x') && !gset_has(s.tops, 'y') && !gset_has(s.tops, 'a'));
    /* the text token "<" keeps both paths */
    TU_OK(clf_gstate_start(g, &s));
    assert_true(clf_grammar_masks_advance(gm, f.t, f.lt, &s, &tmp));
    assert_true(gset_has(s.tops, '|') && gset_has(s.tops, 'a'));
    clf_gstate_free(&s);
    clf_gstate_free(&tmp);
    clf_grammar_masks_free(gm);
    clf_grammar_free(g);
    /* preserved only where one literal run holds the whole marker: not
     * across two alternatives, nor around a class; a one-byte class is a
     * literal's character */
    static const struct { const char *gbnf; int n; } cases[] = {
        {"root ::= \"<|placeholder1\" | \"|>\"\n", 0},
        {"root ::= \"<|placeholder\" [0-9] \"|>\"\n", 0},
        {"root ::= \"<|placeholder\" [1] \"|>\" | \"<|\"\n", 1},
        {"root ::= \"a\" | \"b<|placeholder1|><|placeholder1|>\"\n", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TU_OK(clf_grammar_compile(cases[i].gbnf, strlen(cases[i].gbnf), NULL, &g));
        TU_OK(clf_grammar_masks_create(g, f.trie, f.n, &gm));
        TU_OK(clf_grammar_masks_preserve(gm, f.t));
        int got = clf_grammar_masks_n_preserved(gm);
        if (got != cases[i].n) fail_msg("%s: %d preserved, want %d", cases[i].gbnf, got, cases[i].n);
        clf_grammar_masks_free(gm);
        clf_grammar_free(g);
    }
    fixture_free(&f);
}

/* Through a sampler (api/grammar.c's stage): the marker drawn and
 * accepted under a preserving grammar, masked under clinfer_grammar_create's. */
static void test_sampler(void **state) {
    (void)state;
    fixture f;
    fixture_load(&f);
    clinfer_model_params p = clinfer_model_default_params();
    p.vocab_only = 1;
    clinfer_model *v = NULL;
    TU_OK((clf_status)clinfer_model_load(PHI3, "no-device-needed", &p, &v));
    int n = clinfer_model_n_vocab(v);
    assert_int_equal(n, f.n);
    float *logits = calloc((size_t)n, sizeof *logits);
    logits[f.mark] = 10; /* the marker first, "<" second */
    logits[f.lt] = 5;
    clinfer_sampler_params sp = clinfer_sampler_default_params();
    sp.temperature = 0;
    for (int preserve = 0; preserve < 2; preserve++) {
        clinfer_grammar *G = NULL;
        clinfer_sampler *smp = NULL;
        TU_OK(api_grammar_create(v, GBNF, strlen(GBNF), NULL, preserve, &G));
        TU_OK((clf_status)clinfer_sampler_create(v, &sp, &smp));
        TU_OK((clf_status)clinfer_sampler_set_grammar(smp, G));
        clinfer_grammar_free(G);
        int32_t tok = -1;
        TU_OK((clf_status)clinfer_sampler_sample(smp, logits, n, &tok));
        assert_int_equal(tok, preserve ? f.mark : f.lt);
        TU_OK((clf_status)clinfer_sampler_accept(smp, tok));
        assert_int_equal(clinfer_sampler_grammar_state(smp), CLINFER_GRAMMAR_OPEN);
        if (preserve) { /* past the marker: "{" must follow, the marker again is masked */
            TU_OK((clf_status)clinfer_sampler_sample(smp, logits, n, &tok));
            size_t len = 0;
            const char *piece = clf_token_piece(f.t, tok, &len);
            assert_true(tok != f.mark && len > 0 && piece[0] == '{');
        }
        clinfer_sampler_free(smp);
    }
    free(logits);
    clinfer_model_free(v);
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_literal_path),
        cmocka_unit_test(test_sampler),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

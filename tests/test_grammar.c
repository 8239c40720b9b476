/* GBNF grammars (text/grammar/grammar*.c): the parser's errors, whole-text
 * acceptance against independent checkers (jansson for JSON, hand-written
 * recognisers for identifiers and arithmetic) on fresh random texts, and
 * the token masks against a brute-force walk of every token on states
 * reached by random walks over a real vocabulary. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <jansson.h>

#include "gguf.h"
#include "grammar_impl.h"
#include "model_path.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

static clf_grammar *compile(const char *text) {
    clf_grammar *g = NULL;
    TU_OK(clf_grammar_compile(text, strlen(text), NULL, &g));
    return g;
}

static void expect_error(const char *text, const char *msg) {
    clf_grammar *g = NULL;
    clf_status st = clf_grammar_compile(text, strlen(text), NULL, &g);
    if (st != CLF_ERR_ARG) fail_msg("'%s' compiled (%s)", text, clf_status_name(st));
    tu_expect_in(clf_last_error(), msg);
    assert_null(g);
}

static void test_errors(void **state) {
    (void)state;
    expect_error("root ::= foo", "rule 'foo' is used but not defined");
    expect_error("root ::= \"abc", "unterminated literal");
    expect_error("root ::= [a-", "unterminated character class");
    expect_error("root ::= (\"a\"", "missing ')'");
    expect_error("root ::= *", "a repetition with nothing before it");
    expect_error("root ::= root \"a\" | \"b\"", "left-recursive");
    expect_error("root ::= x \"a\" | \"b\"\nx ::= (\"\")* root", "left-recursive");
    expect_error("root ::= \"a\" root", "admits no text");
    expect_error("start ::= \"a\"", "no rule 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
    expect_error("root ::= \"\\q\"", "line 1, column 11");
    expect_error("root ::= \"a\"{3,2}", "n < m");
    expect_error("root ::= <[42]>", "token references");
    expect_error("", "no rules");
}

/* ---- acceptance against independent recognisers ----------------------------- */

static int is_ident(const char *s, size_t n) { /* [a-zA-Z_][a-zA-Z0-9_]{0,7} */
    if (n < 1 || n > 8) return 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

/* expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*;
 * factor := digits | '(' expr ')' */
typedef struct rd {
    const char *s;
    size_t n, i;
} rd;
static int rd_expr(rd *r);
static int rd_factor(rd *r) {
    if (r->i < r->n && r->s[r->i] == '(') {
        r->i++;
        if (!rd_expr(r) || r->i >= r->n || r->s[r->i] != ')') return 0;
        r->i++;
        return 1;
    }
    size_t k = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    return r->i > k;
}
static int rd_term(rd *r) {
    if (!rd_factor(r)) return 0;
    while (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '/')) {
        r->i++;
        if (!rd_factor(r)) return 0;
    }
    return 1;
}
static int rd_expr(rd *r) {
    if (!rd_term(r)) return 0;
    while (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) {
        r->i++;
        if (!rd_term(r)) return 0;
    }
    return 1;
}
static int is_arith(const char *s, size_t n) {
    rd r = {s, n, 0};
    return rd_expr(&r) && r.i == n;
}

/* JSON (RFC 8259) as llama.cpp's grammars/json.gbnf writes it, with the
 * whitespace jansson takes (it reads any amount; json.gbnf bounds it). */
static const char *JSON_GBNF =
    "root   ::= ws value ws\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
    "array  ::= \"[\" ws ( value ws (\",\" ws value ws )* )? \"]\"\n"
    "string ::= \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\"\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]*)) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "ws ::= [ \\t\\n\\r]*\n";

static int is_json(const char *s, size_t n) {
    json_error_t e;
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);
    if (j) {
        json_decref(j);
        return 1;
    }
    /* a number beyond a double is JSON, but not for jansson: no verdict */
    return strstr(e.text, "overflow") ? -1 : 0;
}

/* Random texts from an alphabet, and mutations of texts in the language. */
static void random_text(uint64_t *rng, const char *alphabet, char *out, size_t *n, size_t max) {
    size_t len = tu_next(rng) % (max + 1), k = strlen(alphabet);
    for (size_t i = 0; i < len; i++) out[i] = alphabet[tu_next(rng) % k];
    *n = len;
}

static void mutate(uint64_t *rng, const char *alphabet, char *s, size_t *n, size_t cap) {
    size_t k = strlen(alphabet);
    switch (tu_next(rng) % 3) {
    case 0:
        if (*n) s[tu_next(rng) % *n] = alphabet[tu_next(rng) % k];
        break;
    case 1:
        if (*n) {
            size_t at = tu_next(rng) % *n;
            memmove(s + at, s + at + 1, *n - at - 1);
            (*n)--;
        }
        break;
    default:
        if (*n + 1 < cap) {
            size_t at = tu_next(rng) % (*n + 1);
            memmove(s + at + 1, s + at, *n - at);
            s[at] = alphabet[tu_next(rng) % k];
            (*n)++;
        }
    }
}

/* 1: in the language, 0: not, -1: the recogniser cannot tell (skipped) */
typedef int (*recogniser)(const char *s, size_t n);

/* Agreement on n random texts and on mutations of the valid ones given. */
static void agree(const char *gbnf, recogniser ref, const char *alphabet, size_t max_len, const char *const *valid,
                  int n_valid) {
    clf_grammar *g = compile(gbnf);
    uint64_t rng = tu_seed();
    char buf[512];
    size_t n;
    int in_lang = 0;
    for (int t = 0; t < 3000; t++) {
        random_text(&rng, alphabet, buf, &n, max_len);
        int want = ref(buf, n), got = clf_grammar_accepts(g, buf, n);
        if (want < 0) continue;
        in_lang += want;
        if (want != got) fail_msg("'%.*s': the grammar says %d, the reference %d", (int)n, buf, got, want);
    }
    for (int v = 0; v < n_valid; v++) {
        n = strlen(valid[v]);
        memcpy(buf, valid[v], n);
        if (ref(buf, n) != 1 || !clf_grammar_accepts(g, buf, n)) fail_msg("'%s' should be in the language", valid[v]);
        for (int t = 0; t < 300; t++) {
            mutate(&rng, alphabet, buf, &n, sizeof buf);
            int want = ref(buf, n), got = clf_grammar_accepts(g, buf, n);
            if (want < 0) continue;
            in_lang += want;
            if (want != got) fail_msg("'%.*s': the grammar says %d, the reference %d", (int)n, buf, got, want);
        }
    }
    assert_true(in_lang > 0); /* the random texts did reach the language */
    clf_grammar_free(g);
}

static void test_identifiers(void **state) {
    (void)state;
    static const char *const valid[] = {"x", "_a9", "Hello_W1"};
    agree("root ::= [a-zA-Z_] [a-zA-Z0-9_]{0,7}\n", is_ident, "aZ_09-", 10, valid, 3);
}

static void test_arithmetic(void **state) {
    (void)state;
    static const char *const valid[] = {"1+2*3", "(4-5)/6", "((7))", "12*(3+4)-5/6"};
    agree("root ::= expr\n"
          "expr ::= term ((\"+\" | \"-\") term)*\n"
          "term ::= factor ((\"*\" | \"/\") factor)*\n"
          "factor ::= [0-9]+ | \"(\" expr \")\"   # recursion in the middle\n",
          is_arith, "0123+-*/()", 12, valid, 4);
}

static void test_json(void **state) {
    (void)state;
    static const char *const valid[] = {
        "{\"a\": [1, -2.5e3, true, null], \"b\": {\"c\": \"x\\u00e9\\n\"}}",
        "[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", 0, {}]",
        " 12.5 ",
        "{\"k\":\"\\\"\"}",
    };
    agree(JSON_GBNF, is_json, "{}[]\",:0123456789.-eE tfnrulasx\\\xc3\xa9", 24, valid, 4);
}

/* A class lowered to UTF-8: every code point of a sample in or out, each as
 * its encoding, surrogates never. */
static void test_utf8_classes(void **state) {
    (void)state;
    clf_grammar *g = compile("root ::= [^a\\u00e9-\\u0800\\U0001F600]\n");
    uint64_t rng = tu_seed();
    for (int t = 0; t < 20000; t++) {
        uint32_t c = t < 300 ? (uint32_t)t * 13 : (uint32_t)(tu_next(&rng) % 0x110000);
        unsigned char u[4];
        int n = c < 0x80 ? (u[0] = (unsigned char)c, 1)
              : c < 0x800 ? (u[0] = 0xC0 | c >> 6, u[1] = 0x80 | (c & 63), 2)
              : c < 0x10000 ? (u[0] = 0xE0 | c >> 12, u[1] = 0x80 | (c >> 6 & 63), u[2] = 0x80 | (c & 63), 3)
              : (u[0] = 0xF0 | c >> 18, u[1] = 0x80 | (c >> 12 & 63), u[2] = 0x80 | (c >> 6 & 63), u[3] = 0x80 | (c & 63), 4);
        int want = c != 'a' && !(c >= 0xE9 && c <= 0x800) && c != 0x1F600 && !(c >= 0xD800 && c <= 0xDFFF);
        if (clf_grammar_accepts(g, (const char *)u, (size_t)n) != want) fail_msg("U+%04X: expected %d", c, want);
        if (n > 1 && clf_grammar_accepts(g, (const char *)u, (size_t)n - 1)) fail_msg("U+%04X cut short accepted", c);
    }
    assert_false(clf_grammar_accepts(g, "\xc0\x80", 2)); /* an overlong encoding is no character */
    clf_grammar_free(g);
}

static void test_repetitions(void **state) {
    (void)state;
    clf_grammar *g = compile("root ::= \"ab\"{2,3} \"c\"? (\"x\" | \"y\")+ \"z\"{2} \"w\"{1,}\n");
    static const char *const yes[] = {"ababxzzw", "abababcyxyzzww"}, *const no[] = {"abxzzw", "abababababxzzw",
                                                                                  "ababzzw", "ababxzw", "ababxzz"};
    for (int i = 0; i < 2; i++) assert_true(clf_grammar_accepts(g, yes[i], strlen(yes[i])));
    for (int i = 0; i < 5; i++) assert_false(clf_grammar_accepts(g, no[i], strlen(no[i])));
    clf_grammar_free(g);
}

/* ---- masks against brute force ------------------------------------------------ */

/* Whether the automaton takes every byte of the token from s. */
static int brute_allows(const clf_grammar *g, const gstate *s, const char *p, size_t n) {
    gstate a = {0}, b = {0};
    TU_OK(clf_gstate_copy(s, &a));
    int ok = 1;
    for (size_t i = 0; ok && i < n; i++) {
        TU_OK(clf_gstate_advance(g, &a, (unsigned char)p[i], &b));
        ok = b.n_stacks > 0;
        gstate t = a;
        a = b;
        b = t;
    }
    clf_gstate_free(&a);
    clf_gstate_free(&b);
    return ok;
}

/* Random walks from the start over allowed tokens, each ended at a whole
 * sentence: at every state, the mask against the bytes of every token. */
static void masks_on(const char *model, const char *gbnf, const char *root, int steps) {
    char path[4096];
    if (clf_model_path(model, path, sizeof path) != CLF_OK) TU_SKIP("%s", clf_last_error());
    clf_gguf *gg = NULL;
    clf_tokenizer *t = NULL;
    TU_OK(clf_gguf_open(path, &gg));
    TU_OK(clf_tokenizer_load(gg, &t));
    int nv = clf_tokenizer_n_vocab(t);
    clf_vocab_trie *v = NULL;
    clf_grammar_masks *gm = NULL;
    clf_grammar *g = NULL;
    TU_OK(clf_grammar_compile(gbnf, strlen(gbnf), root, &g));
    TU_OK(clf_vocab_trie_build(t, &v));
    TU_OK(clf_grammar_masks_create(g, v, nv, &gm));
    gstate s = {0}, n = {0};
    TU_OK(clf_gstate_start(g, &s));
    float *logits = malloc((size_t)nv * sizeof *logits);
    int *allowed = malloc((size_t)nv * sizeof *allowed);
    uint64_t rng = tu_seed();
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < nv; i++) logits[i] = 0;
        int n_allowed = 0, n_ref = 0, k = 0;
        TU_OK(clf_grammar_masks_apply(gm, &s, logits, &n_allowed));
        for (int i = 0; i < nv; i++) {
            size_t len;
            const char *p;
            int want = clf_grammar_token_is_text(t, i, &p, &len) && brute_allows(g, &s, p, len);
            if (want != (logits[i] == 0))
                fail_msg("step %d, token %d '%.*s': the mask says %d, the bytes %d", step, i, (int)len, p,
                         logits[i] == 0, want);
            n_ref += want;
            if (want) allowed[k++] = i;
        }
        assert_int_equal(n_allowed, n_ref);
        if (!k || s.accepting) { /* a sentence: walk again */
            TU_OK(clf_gstate_start(g, &s));
            continue;
        }
        /* on along a random allowed token, every other step a short one
         * (most tokens are words, and in a string a word keeps the state) */
        int32_t id = allowed[tu_next(&rng) % (uint64_t)k];
        for (int tries = 0; step % 2 && tries < 500; tries++) {
            size_t l;
            clf_token_piece(t, id, &l);
            if (l <= 2) break;
            id = allowed[tu_next(&rng) % (uint64_t)k];
        }
        size_t len;
        const char *p = clf_token_piece(t, id, &len);
        if (getenv("GRAMMAR_TRACE")) printf("[%.*s]", (int)len, p);
        for (size_t i = 0; i < len; i++) {
            TU_OK(clf_gstate_advance(g, &s, (unsigned char)p[i], &n));
            assert_true(n.n_stacks > 0);
            gstate tmp = s;
            s = n;
            n = tmp;
        }
    }
    long computed, hits;
    double sec;
    clf_grammar_masks_stats(gm, &computed, &hits, &sec);
    printf("masks: %ld computed (%.2f ms each), %ld found kept\n", computed, computed ? 1e3 * sec / (double)computed : 0.0,
           hits);
    free(logits);
    free(allowed);
    clf_gstate_free(&s);
    clf_gstate_free(&n);
    clf_grammar_masks_free(gm);
    clf_vocab_trie_free(v);
    clf_grammar_free(g);
    clf_tokenizer_free(t);
    clf_gguf_close(gg);
}

static void test_masks_json(void **state) {
    (void)state;
    masks_on(NULL, JSON_GBNF, "object", 40);
}

static void test_masks_gemma(void **state) {
    (void)state;
    masks_on("gemma3-270m", "root ::= \"{\\\"name\\\": \\\"\" [^\"\\n]{1,12} \"\\\", \\\"n\\\": \" [0-9]{1,3} \"}\"\n", NULL, 16);
}

/* ---- hostile grammars: every bound an error naming it, never a crash -------- */

/* A growing text for the generated grammars below. */
typedef struct gtext {
    char *s;
    size_t n, cap;
} gtext;
static void gt_add(gtext *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (t->s && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        t->cap = (t->cap + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
}

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Nesting: 100,000 groups (a stack overflow in the recursive parser before
 * the bound: this test crashing is that bug) are refused; 1,000 are fine. */
static void test_deep_nesting(void **state) {
    (void)state;
    for (int depth = 1000; depth <= 100000; depth += 99000) {
        gtext t = {0};
        gt_add(&t, "root ::= ");
        for (int i = 0; i < depth; i++) gt_add(&t, "(");
        gt_add(&t, "\"a\"");
        for (int i = 0; i < depth; i++) gt_add(&t, ")");
        clf_grammar *g = NULL;
        clf_status st = clf_grammar_compile(t.s, t.n, NULL, &g);
        if (depth == 1000) {
            if (st != CLF_OK) fail_msg("1000 groups: %s", clf_last_error());
            assert_true(clf_grammar_accepts(g, "a", 1));
            clf_grammar_free(g);
        } else {
            assert_int_equal(st, CLF_ERR_ARG);
            tu_expect_in(clf_last_error(), "groups nested deeper than 1024 (the bound on nesting)");
        }
        free(t.s);
    }
}

/* A surrogate is no character: an escape of one (or a code point past
 * U+10FFFF) is refused, in literals and classes, as is its raw UTF-8. */
static void test_surrogates(void **state) {
    (void)state;
    expect_error("root ::= \"\\ud800\"", "a surrogate");
    expect_error("root ::= \"\\uDFFF\"", "a surrogate");
    expect_error("root ::= \"\\U0000D800\"", "a surrogate");
    expect_error("root ::= [\\ud800-\\udbff]", "a surrogate");
    expect_error("root ::= [a-\\udfff]", "a surrogate");
    expect_error("root ::= \"\\U00110000\"", "beyond U+10FFFF");
    expect_error("root ::= \"\xed\xa0\x80\"", "invalid UTF-8");     /* U+D800 spelled in UTF-8 */
    expect_error("root ::= \"\xc0\xaf\"", "invalid UTF-8");         /* an overlong '/' */
    clf_grammar *g = compile("root ::= \"\\ud7ff\\ue000\\U0010FFFF\"");
    assert_true(clf_grammar_accepts(g, "\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf", 10));
    clf_grammar_free(g);
}

/* Nesting the matcher's stack (GSTATE_MAX_DEPTH) cannot hold: refused when
 * compiling where no recursion is involved; with recursion, met while
 * matching, the paths past it are dropped (overflow set), not an error. */
static void test_stack_depth(void **state) {
    (void)state;
    gtext t = {0};
    gt_add(&t, "root ::= r0\n");
    for (int i = 0; i < 600; i++) gt_add(&t, "r%d ::= r%d \"x\"\n", i, i + 1);
    gt_add(&t, "r600 ::= \"y\"\n");
    clf_grammar *g = NULL;
    assert_int_equal(clf_grammar_compile(t.s, t.n, NULL, &g), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "rules nest 601 deep, more than the 512 levels");
    free(t.s);
    /* 500 levels fit */
    t = (gtext){0};
    gt_add(&t, "root ::= r0\n");
    for (int i = 0; i < 500; i++) gt_add(&t, "r%d ::= r%d \"x\"\n", i, i + 1);
    gt_add(&t, "r500 ::= \"y\"\n");
    TU_OK(clf_grammar_compile(t.s, t.n, NULL, &g));
    clf_grammar_free(g);
    free(t.s);
    /* recursion: ( nests a level a time */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    char text[2 * 600 + 1];
    for (int k = 400; k <= 600; k += 200) {
        size_t n = 0;
        for (int i = 0; i < k; i++) text[n++] = '(';
        text[n++] = 'x';
        for (int i = 0; i < k; i++) text[n++] = ')';
        assert_int_equal(clf_grammar_accepts(g, text, n), k == 400);
    }
    gstate a = {0}, b = {0};
    TU_OK(clf_gstate_start(g, &a));
    int i = 0, dropped = 0;
    for (; i < 600; i++) {
        TU_OK(clf_gstate_advance(g, &a, '(', &b)); /* never an error */
        if (!b.n_stacks) {
            dropped = b.overflow;
            break;
        }
        gstate x = a;
        a = b;
        b = x;
    }
    assert_true(dropped);
    assert_int_equal(i, GSTATE_MAX_DEPTH - 1);
    TU_OK(clf_gstate_advance(g, &a, 'x', &b)); /* what fits still reads */
    assert_int_not_equal(b.n_stacks, 0);
    clf_gstate_free(&a);
    clf_gstate_free(&b);
    clf_grammar_free(g);
}

/* Sizes and work: the text, the elements, a step's expansion, each bounded
 * and named; a chain of 200,000 rules (a call per rule in the recursive
 * checks, a scan of every name per name) compiles and matches in linear
 * time (a generous 2 s of CPU: it takes milliseconds; the quadratic scans
 * took minutes, the recursion overflowed the stack). */
static void test_size_bounds(void **state) {
    (void)state;
    size_t big = (8u << 20) + 1;
    char *s = malloc(big);
    assert_non_null(s);
    memset(s, '#', big);
    clf_grammar *g = NULL;
    assert_int_equal(clf_grammar_compile(s, big, NULL, &g), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "(the bound on a grammar's text)");
    free(s);
    gtext r = {0}; /* 5 x 100 bytes x 10,000: 5 million elements */
    gt_add(&r, "root ::=");
    for (int k = 0; k < 5; k++) gt_add(&r, " \"%0100d\"{10000}", k);
    expect_error(r.s, "more than 4194304 elements (the bound on a grammar's size)");
    free(r.s);

    gtext t = {0};
    gt_add(&t, "root ::= r0\n");
    for (int i = 0; i < 200000; i++) gt_add(&t, "r%d ::= r%d\n", i, i + 1);
    gt_add(&t, "r200000 ::= \"a\"\n");
    double t0 = cpu_s();
    TU_OK(clf_grammar_compile(t.s, t.n, NULL, &g));
    assert_true(clf_grammar_accepts(g, "a", 1));
    assert_false(clf_grammar_accepts(g, "b", 1));
    double dt = cpu_s() - t0;
    printf("a chain of 200,000 rules: compiled and matched in %.3f s\n", dt);
    assert_true(dt < 2.0);
    clf_grammar_free(g);
    free(t.s);

    /* 600,000 empty rules before a byte: one step, more than a million expansions */
    t = (gtext){0};
    gt_add(&t, "root ::= ");
    for (int i = 0; i < 600000; i++) gt_add(&t, "n ");
    gt_add(&t, "\"x\"\nn ::= \"\"\n");
    TU_OK(clf_grammar_compile(t.s, t.n, NULL, &g));
    gstate a = {0};
    assert_int_equal(clf_gstate_start(g, &a), CLF_ERR_ARG);
    tu_expect_in(clf_last_error(), "expansion steps (the bound on a step's work)");
    clf_gstate_free(&a);
    clf_grammar_free(g);
    free(t.s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),      cmocka_unit_test(test_identifiers), cmocka_unit_test(test_arithmetic),
        cmocka_unit_test(test_json),        cmocka_unit_test(test_utf8_classes), cmocka_unit_test(test_repetitions),
        cmocka_unit_test(test_masks_json),  cmocka_unit_test(test_masks_gemma),
        cmocka_unit_test(test_deep_nesting), cmocka_unit_test(test_surrogates), cmocka_unit_test(test_stack_depth),
        cmocka_unit_test(test_size_bounds),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* The token masks (text/grammar/grammar_vocab.c: a trie walked over a
 * lazily built DFA with byte classes, masks kept per state, applied a word
 * at a time) against an independent reference, on fresh random grammars
 * and JSON Schemas each run (seeded by tu_seed: the seed is printed) and
 * random walks, over both test vocabularies (SmolLM2's 49,152 tokens and
 * Gemma 3's 262,144).
 *
 * The reference shares nothing with the masks but the automaton's step
 * (clf_gstate_advance, which test_grammar checks against whole texts): the
 * text tokens sorted by their bytes, each one's state reached from the
 * previous token's states along their common prefix (a prefix the grammar
 * refuses skips every token that starts with it). Every logit is checked:
 * an allowed token's left as it was (the row holds random values), a
 * refused one's -inf, and the count the mask reports. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gguf.h"
#include "grammar.h"
#include "json_schema.h"
#include "model_path.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

/* ---- the reference ------------------------------------------------------------ */

typedef struct vocab {
    clf_gguf *gg;
    clf_tokenizer *t;
    clf_vocab_trie *trie;
    int n;
    int32_t *ids; /* the text tokens, sorted by their bytes */
    int n_ids;
    const char **piece;
    size_t *len;
    size_t max_len;
} vocab;

static const vocab *g_sort;
static int cmp_tok(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    size_t la = g_sort->len[a], lb = g_sort->len[b], n = la < lb ? la : lb;
    int c = memcmp(g_sort->piece[a], g_sort->piece[b], n);
    return c ? c : (la > lb) - (la < lb);
}

static void vocab_load(const char *model, vocab *v) {
    char path[4096];
    memset(v, 0, sizeof *v);
    if (clf_model_path(model, path, sizeof path) != CLF_OK) TU_SKIP("%s", clf_last_error());
    TU_OK(clf_gguf_open(path, &v->gg));
    TU_OK(clf_tokenizer_load(v->gg, &v->t));
    TU_OK(clf_vocab_trie_build(v->t, &v->trie));
    v->n = clf_tokenizer_n_vocab(v->t);
    v->ids = malloc((size_t)v->n * sizeof *v->ids);
    v->piece = calloc((size_t)v->n, sizeof *v->piece);
    v->len = calloc((size_t)v->n, sizeof *v->len);
    for (int i = 0; i < v->n; i++)
        if (clf_grammar_token_is_text(v->t, i, &v->piece[i], &v->len[i])) {
            v->ids[v->n_ids++] = i;
            if (v->len[i] > v->max_len) v->max_len = v->len[i];
        }
    g_sort = v;
    qsort(v->ids, (size_t)v->n_ids, sizeof *v->ids, cmp_tok);
}

static void vocab_free(vocab *v) {
    clf_vocab_trie_free(v->trie);
    clf_tokenizer_free(v->t);
    clf_gguf_close(v->gg);
    free(v->ids);
    free(v->piece);
    free(v->len);
}

/* ok[i] = 1 where state s takes every byte of token i (0 elsewhere, the
 * non-text tokens included); returns how many. */
static int reference(const vocab *v, const clf_grammar *g, const gstate *s, uint8_t *ok) {
    memset(ok, 0, (size_t)v->n);
    gstate *at = calloc(v->max_len + 1, sizeof *at); /* at[d]: the state after the previous token's first d bytes */
    TU_OK(clf_gstate_copy(s, &at[0]));
    const char *prev = "";
    size_t prev_len = 0, valid = 0; /* at[0, valid] hold prev's prefixes' states (at[valid] may be dead) */
    int count = 0;
    for (int k = 0; k < v->n_ids; k++) {
        int32_t id = v->ids[k];
        const char *p = v->piece[id];
        size_t n = v->len[id], lcp = 0;
        while (lcp < n && lcp < prev_len && p[lcp] == prev[lcp]) lcp++;
        size_t d = lcp < valid ? lcp : valid;
        int dead = !at[d].n_stacks;
        while (!dead && d < n) {
            if (clf_gstate_advance(g, &at[d], (unsigned char)p[d], &at[d + 1]) != CLF_OK) {
                count = -1; /* too ambiguous a grammar: the caller draws another */
                goto out;
            }
            dead = !at[++d].n_stacks;
        }
        valid = d;
        prev = p;
        prev_len = n;
        if (!dead && d == n) {
            ok[id] = 1;
            count++;
        }
    }
out:
    for (size_t i = 0; i <= v->max_len; i++) clf_gstate_free(&at[i]);
    free(at);
    return count;
}

/* ---- random grammars ---------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) {
    va_list a;
    for (;;) {
        va_start(a, fmt);
        int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, a);
        va_end(a);
        if (b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
}

static unsigned pick(uint64_t *r, unsigned n) { return (unsigned)(tu_next(r) % n); }

/* pieces of text tokens are made of: words, spaces, JSON's punctuation, digits, UTF-8 */
static const char *const LITS[] = {"a", "the", " ", "e", "t", "in", "\\\"", "{", "}", ",", ":", "0", "12",
                                   "\\n", "é", "ü", "€", "ab", " the", "-", "."};
static const char *const CLASSES[] = {"[a-z]", "[0-9]", "[^\\\"\\\\]", "[ \\t\\n]", "[a-fA-F0-9]", "[é-ü]",
                                      "[^a-z]", "[\\u0100-\\uFFFF]", ".", "[^\\x00-\\x7F]", "[,:{}]"};

static void expr(sbuf *b, uint64_t *r, int rule, int n_rules, int depth);

static void atom(sbuf *b, uint64_t *r, int rule, int n_rules, int depth) {
    unsigned c = pick(r, depth > 2 ? 2 : 4);
    if (c == 0) put(b, "\"%s\" ", LITS[pick(r, sizeof LITS / sizeof *LITS)]);
    else if (c == 1) put(b, "%s ", CLASSES[pick(r, sizeof CLASSES / sizeof *CLASSES)]);
    else if (c == 2 && rule + 1 < n_rules) put(b, "r%d ", rule + 1 + (int)pick(r, (unsigned)(n_rules - rule - 1)));
    else {
        put(b, "( ");
        expr(b, r, rule, n_rules, depth + 1);
        put(b, ") ");
    }
    /* long bounded repetitions too: their far positions share the short tokens' masks */
    static const char *const POST[] = {"", "", "", "?", "*", "+", "{2}", "{1,3}", "{0,5}", "{2,}", "{0,40}", "{3,100}"};
    const char *post = POST[pick(r, sizeof POST / sizeof *POST)];
    if (*post) {
        b->n--; /* the postfix right after its atom */
        put(b, "%s ", post);
    }
}

static void expr(sbuf *b, uint64_t *r, int rule, int n_rules, int depth) {
    int alts = 1 + (int)pick(r, 3);
    for (int a = 0; a < alts; a++) {
        if (a) put(b, "| ");
        int n = 1 + (int)pick(r, 4);
        for (int i = 0; i < n; i++) atom(b, r, rule, n_rules, depth);
    }
}

/* A random GBNF: rules r0 (the root) .. rN, each referring only to later
 * ones, sometimes to itself at the end of an alternative (right
 * recursion); NULL-terminated text the caller frees. */
static char *random_gbnf(uint64_t *r) {
    sbuf b = {0};
    int n_rules = 1 + (int)pick(r, 5);
    for (int i = 0; i < n_rules; i++) {
        put(&b, "%s ::= ", i ? "" : "root");
        if (i) {
            b.n -= 5;
            put(&b, "r%d ::= ", i);
        }
        expr(&b, r, i, n_rules, 0);
        if (pick(r, 4) == 0) put(&b, "| \"x\" r%d ", i); /* right recursion */
        put(&b, "\n");
    }
    if (n_rules > 0) { /* root is r0 */
        char *t = malloc(b.n + 32);
        snprintf(t, b.n + 32, "r0 ::= root\n%s", b.p);
        free(b.p);
        return t;
    }
    return b.p;
}

/* A random JSON Schema of the converter's common keywords: strings with
 * bounds, enums, integers with bounds, numbers, booleans, arrays. */
static char *random_schema(uint64_t *r) {
    sbuf b = {0};
    put(&b, "{\"type\": \"object\", \"properties\": {");
    int n = 1 + (int)pick(r, 4);
    for (int i = 0; i < n; i++) {
        put(&b, "%s\"p%d\": ", i ? ", " : "", i);
        switch (pick(r, 6)) {
        case 0: put(&b, "{\"type\": \"string\", \"maxLength\": %u}", 1 + pick(r, 100)); break;
        case 1: put(&b, "{\"type\": \"string\", \"minLength\": %u}", pick(r, 4)); break;
        case 2: put(&b, "{\"enum\": [\"red\", \"green\", \"the blue\", %u]}", pick(r, 100)); break;
        case 3: put(&b, "{\"type\": \"integer\", \"minimum\": %d, \"maximum\": %d}", -(int)pick(r, 50), 1 + (int)pick(r, 2000)); break;
        case 4: put(&b, "{\"type\": \"boolean\"}"); break;
        default: put(&b, "{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"maxItems\": %u}", 1 + pick(r, 3));
        }
    }
    put(&b, "}, \"required\": [\"p0\"], \"additionalProperties\": false}");
    char *gbnf = NULL;
    TU_OK(clf_json_schema_to_gbnf(b.p, b.n, &gbnf));
    free(b.p);
    return gbnf;
}

/* ---- the check ---------------------------------------------------------------- */

/* `steps` masks along random walks from g's start: each against the
 * reference. Returns the masks checked, -1 when the grammar is too
 * ambiguous for the matcher's bounds (CLF_ERR_ARG from a step: a random
 * grammar such as ("a"*)* can be; the caller draws another). */
static int check_walks(const vocab *v, const clf_grammar *g, uint64_t *r, int steps) {
    clf_grammar_masks *gm = NULL;
    TU_OK(clf_grammar_masks_create(g, v->trie, v->n, &gm));
    float *row = malloc((size_t)v->n * sizeof *row), *logits = malloc((size_t)v->n * sizeof *logits);
    uint8_t *ok = malloc((size_t)v->n);
    int32_t *allowed = malloc((size_t)v->n * sizeof *allowed);
    for (int i = 0; i < v->n; i++) row[i] = tu_uniform(r, -10.f, 10.f);
    gstate s = {0}, nx = {0};
    int checked = clf_gstate_start(g, &s) == CLF_OK ? 0 : -1; /* ambiguous from the start */
    for (int step = 0; checked >= 0 && step < steps; step++) {
        memcpy(logits, row, (size_t)v->n * sizeof *logits);
        int n_allowed = -1;
        clf_status st = clf_grammar_masks_apply(gm, &s, logits, &n_allowed);
        int want = reference(v, g, &s, ok), k = 0;
        if (st == CLF_ERR_ARG && strstr(clf_last_error(), "ambiguous")) {
            checked = -1;
            break;
        }
        TU_OK(st);
        if (want < 0) { /* the reference met the bound where the masks did not: a walk refused elsewhere */
            checked = -1;
            break;
        }
        for (int i = 0; i < v->n; i++) {
            if (ok[i] ? logits[i] != row[i] : logits[i] != -INFINITY) {
                size_t len;
                const char *p = clf_token_piece(v->t, i, &len);
                fail_msg("step %d, token %d '%.*s': the mask says %d (logit %g), the reference %d", step, i,
                         (int)len, p ? p : "", logits[i] == row[i], (double)logits[i], ok[i]);
            }
            if (ok[i]) allowed[k++] = i;
        }
        assert_int_equal(n_allowed, want);
        checked++;
        if (!k || (s.accepting && pick(r, 3) == 0)) { /* a sentence (or none goes on): again */
            TU_OK(clf_gstate_start(g, &s)); /* it started once */
            continue;
        }
        /* on along a random allowed token, every other step a short one */
        int32_t id = allowed[pick(r, (unsigned)k)];
        for (int tries = 0; step % 2 && tries < 200 && v->len[id] > 2; tries++) id = allowed[pick(r, (unsigned)k)];
        for (size_t i = 0; i < v->len[id]; i++) {
            TU_OK(clf_gstate_advance(g, &s, (unsigned char)v->piece[id][i], &nx)); /* the reference stepped it */
            assert_true(nx.n_stacks > 0);
            gstate t = s;
            s = nx;
            nx = t;
        }
    }
    clf_gstate_free(&s);
    clf_gstate_free(&nx);
    free(row);
    free(logits);
    free(ok);
    free(allowed);
    clf_grammar_masks_free(gm);
    return checked;
}

/* n_grammars random GBNF grammars and n_schemas random schemas, `steps`
 * masks each, over the model's vocabulary. */
static void random_masks(const char *model, int n_grammars, int n_schemas, int steps) {
    vocab v;
    vocab_load(model, &v);
    uint64_t seed = tu_seed(), r = seed;
    int grammars = 0, masks = 0, refused = 0;
    for (int tries = 0; grammars < n_grammars && tries < 50 * n_grammars; tries++) {
        char *gbnf = random_gbnf(&r);
        clf_grammar *g = NULL;
        /* a random grammar may be refused (left recursion through a
         * nullable rule, an empty language): another is drawn */
        if (clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g) == CLF_OK) {
            if (getenv("GRAMMAR_TRACE")) printf("%s\n", gbnf);
            int n = check_walks(&v, g, &r, steps);
            if (n >= 0) masks += n, grammars++;
            else refused++;
            clf_grammar_free(g);
        }
        free(gbnf);
    }
    assert_int_equal(grammars, n_grammars);
    for (int i = 0; i < n_schemas; i++) {
        char *gbnf = random_schema(&r);
        clf_grammar *g = NULL;
        TU_OK(clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g));
        int n = check_walks(&v, g, &r, steps);
        assert_true(n > 0); /* a schema's grammar is never too ambiguous */
        masks += n;
        clf_grammar_free(g);
        free(gbnf);
    }
    printf("%s: %d grammars (%d more too ambiguous), %d schemas, %d masks checked (seed %llu)\n",
           model ? model : "default", grammars, refused, n_schemas, masks, (unsigned long long)seed);
    vocab_free(&v);
}

static void test_random_smollm2(void **state) {
    (void)state;
    random_masks(NULL, 6, 4, 12);
}

static void test_random_gemma(void **state) {
    (void)state;
    random_masks("gemma3-270m", 3, 2, 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_smollm2),
        cmocka_unit_test(test_random_gemma),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* What a grammar's token mask costs, per token, over a model's vocabulary
 * (bench/RESULTS.md, issue 41 item 5):
 *
 *   mask_bench MODEL SCHEMA.json|GRAMMAR.gbnf [TOKENS [SEED]]
 *   mask_bench MODEL SCHEMA.json|GRAMMAR.gbnf --reply REPLY.json [ROUNDS]
 *
 * MODEL: a path or a cache name (clf_model_path). Compiles the schema (a
 * .gbnf file as it is), timing the schema -> GBNF -> compiled grammar step
 * (median of 21, in this process: no process start), builds the
 * vocabulary's trie, then walks TOKENS tokens (default 2000) of seeded
 * random replies: at each step the mask is applied to a row of logits
 * (timed alone: clf_grammar_masks_apply), then a token the mask allows is
 * taken, uniformly at random (a reply that reaches a whole sentence ends
 * there one time in four, and a new one starts). Prints the median, p90,
 * mean and max µs a token, and how many masks were computed / found kept.
 * One line of JSON last.
 *
 * --reply: the masks along a reply's own tokens instead (the model's
 * tokenization of REPLY, a text the grammar accepts: what a model writes),
 * ROUNDS times (default 5): the first round with no mask kept yet (a
 * grammar's first reply), then again with the masks of the rounds before
 * (a grammar the server keeps); each round's median, p90 and mean. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "gguf.h"
#include "grammar.h"
#include "json_schema.h"
#include "model_path.h"
#include "tokenizer.h"
#include "vocab.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[len] = 0;
    *n = len;
    return buf;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* schema (or GBNF) text -> compiled grammar */
static clf_status compile(const char *text, size_t n, int is_gbnf, clf_grammar **g) {
    if (is_gbnf) return clf_grammar_compile(text, n, NULL, g);
    char *gbnf = NULL;
    CLF_TRY(clf_json_schema_to_gbnf(text, n, &gbnf));
    clf_status st = clf_grammar_compile(gbnf, strlen(gbnf), NULL, g);
    free(gbnf);
    return st;
}

#define CHECK(x)                                                                                                   \
    do {                                                                                                           \
        if ((x) != CLF_OK) {                                                                                       \
            fprintf(stderr, "mask_bench: %s: %s\n", #x, clf_last_error());                                        \
            return 1;                                                                                              \
        }                                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mask_bench MODEL SCHEMA.json|GRAMMAR.gbnf [TOKENS [SEED]]\n");
        return 2;
    }
    int n_tokens = argc > 3 ? atoi(argv[3]) : 2000;
    uint64_t rng = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    size_t n;
    char *text = slurp(argv[2], &n);
    if (!text) {
        fprintf(stderr, "mask_bench: cannot read %s\n", argv[2]);
        return 1;
    }
    int is_gbnf = n >= 5 && strstr(argv[2], ".gbnf") != NULL;
    /* 1. compile: median of 21 */
    double ct[21];
    clf_grammar *g = NULL;
    for (int r = 0; r < 21; r++) {
        double t0 = clf_now_s();
        CHECK(compile(text, n, is_gbnf, &g));
        ct[r] = clf_now_s() - t0;
        if (r < 20) clf_grammar_free(g);
    }
    qsort(ct, 21, sizeof *ct, cmp_d);
    /* 2. the vocabulary and its trie */
    char path[4096];
    CHECK(clf_model_path(argv[1], path, sizeof path));
    clf_gguf *gg = NULL;
    clf_tokenizer *t = NULL;
    CHECK(clf_gguf_open(path, &gg));
    CHECK(clf_tokenizer_load(gg, &t));
    int nv = clf_tokenizer_n_vocab(t);
    clf_vocab_trie *v = NULL;
    double t0 = clf_now_s();
    CHECK(clf_vocab_trie_build(t, &v));
    double trie_s = clf_now_s() - t0;
    clf_grammar_masks *gm = NULL;
    t0 = clf_now_s();
    CHECK(clf_grammar_masks_create(g, v, nv, &gm));
    double create_s = clf_now_s() - t0;
    if (argc > 3 && !strcmp(argv[3], "--reply")) { /* 3'. along a reply's tokens */
        size_t rn;
        char *reply = argc > 4 ? slurp(argv[4], &rn) : NULL;
        if (!reply) {
            fprintf(stderr, "mask_bench: cannot read the reply\n");
            return 1;
        }
        while (rn && (reply[rn - 1] == '\n' || reply[rn - 1] == ' ')) rn--;
        int rounds = argc > 5 ? atoi(argv[5]) : 5, n_ids = 0;
        int32_t *ids = NULL;
        CHECK(clf_tokenize(t, reply, rn, 0, 0, &ids, &n_ids));
        float *row = malloc((size_t)nv * sizeof *row);
        double *us = malloc((size_t)n_ids * sizeof *us);
        gstate s = {0}, nx = {0};
        printf("vocabulary %d tokens (the longest %d bytes); compile %.2f ms (median of 21); trie %.1f ms\n", nv,
               clf_vocab_trie_depth(v), 1e3 * ct[10], 1e3 * trie_s);
        for (int r = 0; r < rounds; r++) {
            long c0, h0, c1, h1;
            double s0, s1;
            clf_grammar_masks_stats(gm, &c0, &h0, &s0);
            CHECK(clf_gstate_start(g, &s));
            double mean = 0;
            for (int k = 0; k < n_ids; k++) {
                for (int i = 0; i < nv; i++) row[i] = 0;
                int n_allowed = 0;
                t0 = clf_now_s();
                CHECK(clf_grammar_masks_apply(gm, &s, row, &n_allowed));
                us[k] = 1e6 * (clf_now_s() - t0);
                mean += us[k] / n_ids;
                if (row[ids[k]] != 0) {
                    fprintf(stderr, "mask_bench: the reply's token %d (#%d) is refused\n", ids[k], k);
                    return 1;
                }
                size_t len;
                const char *p = clf_token_piece(t, ids[k], &len);
                for (size_t i = 0; i < len; i++) {
                    CHECK(clf_gstate_advance(g, &s, (unsigned char)p[i], &nx));
                    gstate tmp = s;
                    s = nx;
                    nx = tmp;
                }
            }
            clf_grammar_masks_stats(gm, &c1, &h1, &s1);
            qsort(us, (size_t)n_ids, sizeof *us, cmp_d);
            printf("round %d (%s): %d tokens, mask median %.1f us, p90 %.1f, mean %.1f, max %.1f; %ld computed, "
                   "%ld found kept\n", r + 1, r ? "masks kept" : "cold", n_ids, us[n_ids / 2], us[(int)(0.9 * n_ids)],
                   mean, us[n_ids - 1], c1 - c0, h1 - h0);
            printf("{\"round\": %d, \"n_vocab\": %d, \"compile_ms\": %.3f, \"tokens\": %d, \"median_us\": %.2f, "
                   "\"p90_us\": %.2f, \"mean_us\": %.2f, \"computed\": %ld, \"hits\": %ld}\n",
                   r + 1, nv, 1e3 * ct[10], n_ids, us[n_ids / 2], us[(int)(0.9 * n_ids)], mean, c1 - c0, h1 - h0);
        }
        return 0; /* a tool: the process's end frees the rest */
    }
    /* 3. the walk */
    float *logits = malloc((size_t)nv * sizeof *logits);
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    double *us = malloc((size_t)n_tokens * sizeof *us);
    gstate s = {0}, nx = {0};
    CHECK(clf_gstate_start(g, &s));
    int replies = 1, done = 0;
    long bytes = 0;
    while (done < n_tokens) {
        for (int i = 0; i < nv; i++) logits[i] = 0;
        int n_allowed = 0;
        t0 = clf_now_s();
        CHECK(clf_grammar_masks_apply(gm, &s, logits, &n_allowed));
        us[done++] = 1e6 * (clf_now_s() - t0);
        int k = 0;
        for (int i = 0; i < nv; i++)
            if (logits[i] == 0 && !clf_token_is_eog(t, i)) allowed[k++] = i;
        if (!k || (s.accepting && rng_next(&rng) % 4 == 0)) {
            CHECK(clf_gstate_start(g, &s));
            replies++;
            continue;
        }
        size_t len;
        const char *p = clf_token_piece(t, allowed[rng_next(&rng) % (uint64_t)k], &len);
        for (size_t i = 0; i < len; i++) {
            CHECK(clf_gstate_advance(g, &s, (unsigned char)p[i], &nx));
            if (!nx.n_stacks) {
                fprintf(stderr, "mask_bench: the mask allowed a token the grammar refuses\n");
                return 1;
            }
            gstate tmp = s;
            s = nx;
            nx = tmp;
        }
        bytes += (long)len;
    }
    long computed, hits;
    double sec;
    clf_grammar_masks_stats(gm, &computed, &hits, &sec);
    double mean = 0;
    for (int i = 0; i < n_tokens; i++) mean += us[i] / n_tokens;
    qsort(us, (size_t)n_tokens, sizeof *us, cmp_d);
    double med = us[n_tokens / 2], p90 = us[(int)(0.9 * n_tokens)], mx = us[n_tokens - 1];
    printf("vocabulary %d tokens (the longest %d bytes); compile %.2f ms (median of 21); trie %.1f ms; masks' create %.3f ms\n", nv,
           clf_vocab_trie_depth(v), 1e3 * ct[10], 1e3 * trie_s, 1e3 * create_s);
    printf("%d tokens (%ld bytes, %d replies): mask median %.1f us, p90 %.1f, mean %.1f, max %.1f; "
           "%ld computed (%.1f us each), %ld found kept\n",
           n_tokens, bytes, replies, med, p90, mean, mx, computed, computed ? 1e6 * sec / (double)computed : 0.0,
           hits);
    printf("{\"n_vocab\": %d, \"compile_ms\": %.3f, \"trie_ms\": %.2f, \"tokens\": %d, \"median_us\": %.2f, "
           "\"p90_us\": %.2f, \"mean_us\": %.2f, \"max_us\": %.1f, \"computed\": %ld, \"hits\": %ld}\n",
           nv, 1e3 * ct[10], 1e3 * trie_s, n_tokens, med, p90, mean, mx, computed, hits);
    free(us);
    free(logits);
    free(allowed);
    free(text);
    clf_gstate_free(&s);
    clf_gstate_free(&nx);
    clf_grammar_masks_free(gm);
    clf_grammar_free(g);
    clf_vocab_trie_free(v);
    clf_tokenizer_free(t);
    clf_gguf_close(gg);
    return 0;
}

/* What a constrained token's sampling costs the host, from the device's k
 * best (api_sampler_sample_top under a grammar) against from the whole row
 * (the row read back, masked, sampled): greedy along N tokens of a
 * schema's reply, both measured at every step on the same logits (the
 * token taken is the k best's; the whole row's must be the same).
 *
 *     build/topk_bench MODEL SCHEMA.json [N] [PROMPT]
 *
 * Prints the medians (µs) of: the k best's sampling (mask lookups on the
 * candidates; a fallback's row read and whole-row sampling included), the
 * whole row's read back, its mask and sampling; and how many tokens fell
 * back. bench/RESULTS.md has the figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "tokenizer.h"

#include "bench_util.h" /* median, CHECK, bench_open_constrained */

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: topk_bench MODEL SCHEMA.json [N] [PROMPT]\n");
        return 2;
    }
    const int n = argc > 3 ? atoi(argv[3]) : 128;
    const char *prompt = argc > 4 ? argv[4] : "Describe a user as JSON.";
    clinfer_model *m = NULL;
    clinfer_sampler *smp = NULL;
    clinfer_session *s = NULL;
    int32_t *ids = NULL;
    int n_ids = 0;
    if (bench_open_constrained(argv[1], argv[2], prompt, &m, &smp, &s, &ids, &n_ids)) return 1;
    const int k = api_sampler_top_k(smp, CLINFER_TOP_K_MAX);
    double *t_top = calloc((size_t)n, sizeof *t_top), *t_read = calloc((size_t)n, sizeof *t_read),
           *t_row = calloc((size_t)n, sizeof *t_row), *t_sum = calloc((size_t)n, sizeof *t_sum);
    int steps = 0, fallbacks = 0;
    /* twice: the first pass computes the masks of the states met (kept by
     * the grammar), the second, measured, finds them kept on both paths */
    for (int pass = 0; pass < 2; pass++) {
        steps = fallbacks = 0;
        CHECK(clinfer_session_rewind(s, 0));
        clinfer_sampler_reset(smp);
        long top0 = 0, fb0 = 0;
        api_sampler_top_stats(smp, &top0, &fb0);
        const int32_t *toks = ids;
        int n_toks = n_ids;
        int32_t tok = -1;
        for (int i = 0; i < n; i++) {
            float vals[CLINFER_TOP_K_MAX];
            int32_t top[CLINFER_TOP_K_MAX];
            int bad = 0;
            CHECK(clinfer_eval_top(s, toks, n_toks, k, vals, top, &bad));
            if (i == 0)
                for (int j = 0; j < n_ids; j++) clinfer_sampler_accept(smp, ids[j]);
            if (clinfer_sampler_grammar_state(smp) == CLINFER_GRAMMAR_DONE) break;
            /* the k best: lookups on the candidates (a fallback: the row read and sampled whole) */
            double t0 = clf_now_s();
            int32_t a = -1, b = -1;
            CHECK(api_sampler_sample_top(smp, vals, top, k, &a));
            if (a < 0) {
                fallbacks++;
                CHECK(api_session_top_row(s));
                CHECK(clinfer_sampler_sample(smp, s->logits, m->info.n_vocab, &a));
            }
            double t1 = clf_now_s();
            /* the whole row, from the same evaluation: read back, masked, sampled */
            CHECK(api_session_top_row(s));
            double t2 = clf_now_s();
            CHECK(clinfer_sampler_sample(smp, s->logits, m->info.n_vocab, &b));
            double t3 = clf_now_s();
            if (a != b) {
                fprintf(stderr, "token %d: the k best gave %d, the whole row %d\n", i, a, b);
                return 1;
            }
            t_top[steps] = 1e6 * (t1 - t0), t_read[steps] = 1e6 * (t2 - t1), t_row[steps] = 1e6 * (t3 - t2);
            t_sum[steps] = 1e6 * (t3 - t1);
            steps++;
            if (clf_token_is_eog(m->tok, a)) break;
            CHECK(clinfer_sampler_accept(smp, a));
            tok = a;
            toks = &tok;
            n_toks = 1;
        }
    }
    printf("%s, %d tokens (k = %d), %d fell back to the whole row\n"
           "median µs a token: k best %.1f | whole row: read back %.1f + mask and sample %.1f = %.1f\n",
           argv[2], steps, k, fallbacks, median(t_top, steps), median(t_read, steps), median(t_row, steps),
           median(t_sum, steps));
    return 0;
}

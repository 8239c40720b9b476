/* What a constrained token's selection costs, the grammar's mask applied
 * by the device (issue 41 item 5) against free decoding's selection and
 * against the whole row the id lookups fell back to: greedy along N
 * tokens of a schema's reply, at every step on the same device row,
 * interleaved R times each:
 *   free  the k best of the row (clf_topk_read), what a free token costs;
 *   mask  the grammar's bits (api_grammar_device_mask) + the masked k best
 *         (clf_topk_read_masked): what a constrained token costs now;
 *   row   the row read back (api_session_top_row) + its grammar mask and
 *         the chain over it (clinfer_sampler_sample on a copy): what a
 *         token that fell back cost before.
 * The masked k best must give the whole row's greedy token at every step.
 *
 *     build/gmask_bench MODEL SCHEMA.json [N] [K] [R]
 *
 * Prints the medians (µs) over the steps of each step's fastest of R.
 * bench/RESULTS.md has the figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "tokenizer.h"

#include "bench_util.h" /* median, CHECK, bench_open_constrained */

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: gmask_bench MODEL SCHEMA.json [N] [K] [R]\n");
        return 2;
    }
    const int n = argc > 3 ? atoi(argv[3]) : 128, k = argc > 4 ? atoi(argv[4]) : 40;
    const int reps = argc > 5 ? atoi(argv[5]) : 5;
    const char *prompt = "Describe a user as JSON.";
    if (n < 1 || k < 1 || k > CLINFER_TOP_K_MAX || reps < 1) {
        fprintf(stderr, "gmask_bench: N >= 1, K in 1..%d, R >= 1\n", CLINFER_TOP_K_MAX);
        return 2;
    }
    clinfer_model *m = NULL;
    clinfer_sampler *smp = NULL;
    clinfer_session *s = NULL;
    int32_t *ids = NULL;
    int n_ids = 0;
    if (bench_open_constrained(argv[1], argv[2], prompt, &m, &smp, &s, &ids, &n_ids)) return 1;
    const int nv = m->info.n_vocab;
    float *row = malloc((size_t)nv * sizeof *row);
    double *t_free = calloc((size_t)n, sizeof *t_free), *t_mask = calloc((size_t)n, sizeof *t_mask),
           *t_row = calloc((size_t)n, sizeof *t_row);
    if (!row || !t_free || !t_mask || !t_row) return 1;
    int steps = 0;
    /* twice: the first pass computes the masks of the states met (kept by
     * the grammar), the second, measured, finds them kept */
    for (int pass = 0; pass < 2; pass++) {
        steps = 0;
        CHECK(clinfer_session_rewind(s, 0));
        clinfer_sampler_reset(smp);
        CHECK(clinfer_eval(s, ids, n_ids));
        for (int j = 0; j < n_ids; j++) clinfer_sampler_accept(smp, ids[j]);
        const clf_tensor dev_row = clf_tensor_rows(&s->c->logits, 0, 1);
        if (!s->c->topk.out_i) CHECK(clf_topk_create(m->rt, &s->c->topk));
        for (int i = 0; i < n; i++) {
            if (clinfer_sampler_grammar_state(smp) == CLINFER_GRAMMAR_DONE) break;
            float vals[CLINFER_TOP_K_MAX];
            int32_t top[CLINFER_TOP_K_MAX];
            int bad = 0;
            double best_f = INFINITY, best_m = INFINITY, best_r = INFINITY;
            int32_t b = -1;
            for (int r = 0; r < reps; r++) {
                double t0 = clf_now_s();
                CHECK(clf_topk_read(&s->c->topk, &dev_row, k, vals, top, &bad));
                double t1 = clf_now_s();
                if (!api_grammar_device_mask(smp)) {
                    fprintf(stderr, "token %d: no mask\n", i);
                    return 1;
                }
                CHECK(clf_topk_read_masked(&s->c->topk, &dev_row, k, smp->mask_bits, vals, top, &bad));
                double t2 = clf_now_s();
                CHECK(api_session_top_row(s));
                memcpy(row, s->logits, (size_t)nv * sizeof *row);
                CHECK(clinfer_sampler_sample(smp, row, nv, &b)); /* greedy: no draw, the state stays */
                double t3 = clf_now_s();
                if (t1 - t0 < best_f) best_f = t1 - t0;
                if (t2 - t1 < best_m) best_m = t2 - t1;
                if (t3 - t2 < best_r) best_r = t3 - t2;
            }
            if (top[0] != b) {
                fprintf(stderr, "token %d: the masked k best gave %d, the whole row %d\n", i, top[0], b);
                return 1;
            }
            t_free[steps] = 1e6 * best_f, t_mask[steps] = 1e6 * best_m, t_row[steps] = 1e6 * best_r;
            steps++;
            if (clf_token_is_eog(m->tok, b)) break;
            CHECK(clinfer_sampler_accept(smp, b));
            CHECK(clinfer_eval(s, &b, 1));
        }
    }
    printf("%s, %s: %d tokens, k = %d, fastest of %d\n"
           "median µs a token: free k best %.1f | grammar bits + masked k best %.1f"
           " | whole row read + masked + chain %.1f\n",
           argv[1], argv[2], steps, k, reps, median(t_free, steps), median(t_mask, steps), median(t_row, steps));
    return 0;
}

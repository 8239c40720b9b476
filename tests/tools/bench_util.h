/* What the constrained-sampling benches (topk_bench, gmask_bench) share:
 * the medians of their timings, a check that ends main on an error, and
 * their setup (the model, a greedy sampler under a JSON schema's grammar,
 * a session, the prompt's tokens). Static functions: each bench is one
 * file. Include after stdio.h, stdlib.h, string.h and clinfer.h. */
#ifndef CLF_BENCH_UTIL_H
#define CLF_BENCH_UTIL_H

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* x[0, n) sorted in place; its middle element (0 for none) */
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return n ? x[n / 2] : 0;
}

/* A clinfer call that must succeed: otherwise its error on stderr, and 1
 * returned (from main, or a setup function returning int). */
#define CHECK(expr)                                                                      \
    do {                                                                                 \
        int st_ = (int)(expr);                                                           \
        if (st_ != 0) {                                                                  \
            fprintf(stderr, "%s: %s\n", #expr, clinfer_last_error());                    \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

/* The model at `model`, a greedy sampler under the grammar of the JSON
 * schema in the file `schema`, a session of 1024 positions and the
 * prompt's tokens (BOS first): 0, or 1 with the error on stderr. The
 * grammar's texts stay allocated (a bench's whole run). */
static int bench_open_constrained(const char *model, const char *schema, const char *prompt, clinfer_model **m,
                                  clinfer_sampler **smp, clinfer_session **s, int32_t **ids, int *n_ids) {
    CHECK(clinfer_model_load(model, NULL, NULL, m));
    char *json = NULL, *gbnf = NULL;
    size_t len = 0;
    CHECK(clinfer_read_file(schema, &json, &len));
    CHECK(clinfer_json_schema_to_gbnf(json, len, &gbnf));
    clinfer_grammar *g = NULL;
    CHECK(clinfer_grammar_create(*m, gbnf, strlen(gbnf), NULL, &g));
    clinfer_sampler_params sp = clinfer_sampler_default_params();
    sp.temperature = 0;
    CHECK(clinfer_sampler_create(*m, &sp, smp));
    CHECK(clinfer_sampler_set_grammar(*smp, g));
    clinfer_session_params cp = clinfer_session_default_params();
    cp.n_ctx = 1024;
    CHECK(clinfer_session_create(*m, &cp, s));
    CHECK(clinfer_tokenize(*m, prompt, strlen(prompt), 1, 0, ids, n_ids));
    return 0;
}

#endif

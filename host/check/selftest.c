#include "selftest.h"

#include <math.h>

#include "check.h"

static const struct {
    const char *family;
    const clf_check *checks;
} tables[] = {
    {"ops", clf_checks_ops},
    {"matmul", clf_checks_matmul},
    {"attention", clf_checks_attention},
};

clf_status clf_selftest_run(clf_runtime *rt, uint64_t seed, FILE *out, int *n_failed) {
    int failed = 0, total = 0;
    fprintf(out, "%-25s %-64s %9s %9s  %s\n", "check", "detail", "error", "tolerance", "result");
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const clf_check *c = tables[t].checks; c->name; c++) {
            clf_check_result res = {.err = INFINITY, .tol = 0, .detail = ""};
            clf_status st = c->fn(rt, seed, &res);
            total++;
            if (st != CLF_OK) {
                failed++;
                fprintf(out, "%-25s could not run: %s: %s  FAIL\n", c->name, clf_status_name(st), clf_last_error());
                /* leave the queue clean for the next check */
                clFinish(rt->queue);
                continue;
            }
            int pass = res.err <= res.tol; /* false for NaN */
            failed += !pass;
            fprintf(out, "%-25s %-64s %9.2e %9.2e  %s\n", c->name, res.detail, res.err, res.tol, pass ? "PASS" : "FAIL");
            fflush(out);
        }
    fprintf(out, "%d checks, %d failed\n", total, failed);
    *n_failed = failed;
    return CLF_OK;
}

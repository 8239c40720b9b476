#include "selftest.h"

#include <math.h>

#include "check.h"

#include <string.h>

static const struct {
    const char *family;
    const clf_check *checks, *quick;
} tables[] = {
    {"ops", clf_checks_ops, clf_checks_ops_quick},
    {"matmul", clf_checks_matmul, clf_checks_matmul_quick},
    {"attention", clf_checks_attention, clf_checks_attention_quick},
};

/* A comma-separated list of name prefixes; NULL or "" takes every check. */
static int selected(const char *only, const char *name) {
    if (!only || !*only) return 1;
    for (const char *p = only; *p;) {
        const size_t len = strcspn(p, ",");
        if (len && !strncmp(name, p, len)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

clf_status clf_selftest_run(clf_runtime *rt, uint64_t seed, int quick, const char *only, FILE *out, int *n_failed) {
    int failed = 0, total = 0;
    fprintf(out, "%-25s %-64s %9s %9s  %s\n", "check", "detail", "error", "tolerance", "result");
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const clf_check *c = quick ? tables[t].quick : tables[t].checks; c->name; c++) {
            if (!selected(only, c->name)) continue;
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
    if (!total) return clf_fail(CLF_ERR_ARG, "no check's name starts with one of '%s'", only);
    fprintf(out, "%d checks, %d failed\n", total, failed);
    *n_failed = failed;
    return CLF_OK;
}

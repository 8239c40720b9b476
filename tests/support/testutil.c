#include "testutil.h"

#include "check.h"

#include <errno.h> /* program_invocation_short_name */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

uint64_t tu_seed(void) {
    static uint64_t seed;
    if (!seed) {
        const char *env = getenv("CLINFER_SEED");
        seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
        if (!seed) seed = 1;
        fprintf(stderr, "[ seed ] CLINFER_SEED=%llu\n", (unsigned long long)seed);
    }
    return seed;
}

/* The library's generator (tools/check/check.c), so tests and selftest
 * draw data the same way. */
uint64_t tu_next(uint64_t *s) { return clf_rng_next(s); }

float tu_uniform(uint64_t *s, float lo, float hi) { return clf_rng_uniform(s, lo, hi); }

float tu_normal(uint64_t *s) {
    double u1 = ((tu_next(s) >> 11) + 1.0) * (1.0 / 9007199254740993.0), u2 = (tu_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void tu_fill_uniform(uint64_t *s, float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = tu_uniform(s, lo, hi);
}

double tu_rel_err(const float *a, const double *ref, size_t n) { return clf_rel_err(a, ref, n); }

double tu_rel_err_f(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY; /* as clf_rel_err */
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static clf_runtime *tu_rt;

clf_runtime *tu_runtime(void) {
    if (!tu_rt) {
        clf_status st = clf_runtime_create(NULL, &tu_rt);
        if (st != CLF_OK) fail_msg("no OpenCL runtime: %s", clf_last_error());
    }
    return tu_rt;
}

void tu_tune(const char *assignments) {
    static clf_tuning resolved;
    static const clf_runtime *saved_for;
    clf_runtime *rt = tu_runtime();
    if (saved_for != rt) {
        resolved = rt->tune;
        saved_for = rt;
    }
    rt->tune = resolved;
    if (assignments && clf_tuning_override(&rt->dev, &rt->tune, assignments) != CLF_OK)
        fail_msg("tuning '%s': %s", assignments, clf_last_error());
}

void tu_runtime_free(void) {
    clf_runtime_free(tu_rt);
    tu_rt = NULL;
}

char *tu_capture(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t r; (r = fread(buf + n, 1, cap - 1 - n, p)) > 0;) n += r;
    buf[n] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

void tu_expect_in(const char *out, const char *s) {
    if (!strstr(out, s)) fail_msg("'%s' not in the output:\n%s", s, out);
}

void tu_skip_log(int capability, const char *func, const char *reason) {
    const char *log = getenv("CLINFER_SKIP_LOG");
    if (!log || !*log) return;
    FILE *f = fopen(log, "a"); /* O_APPEND: lines of tests running side by side do not interleave */
    if (!f) return;
    char line[1024];
    const char *test = getenv("CLINFER_TEST_NAME"); /* ctest's entry: the program, or one of its parts */
    int n = snprintf(line, sizeof line, "%s:%s\t%s\t", test ? test : program_invocation_short_name, func,
                     capability ? "capability" : "missing");
    for (const char *r = reason; *r && n < (int)sizeof line - 2; r++) line[n++] = *r == '\n' || *r == '\t' ? ' ' : *r;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, f);
    fclose(f);
}

void tu_skip(int capability, const char *func, const char *fmt, ...) {
    char reason[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    const char *ci = getenv("CI");
    if (!capability && ci && !strcmp(ci, "true")) /* make test installs and fetches all the rest */
        fail_msg("skipped under CI=true, where it must run: %s", reason);
    printf("[  SKIPPED ] %s (%s)\n", reason, capability ? "this machine lacks it" : "missing");
    fflush(stdout);
    tu_skip_log(capability, func, reason);
    skip();
    abort(); /* skip() longjmps out of the test */
}

/* Is `name` one of the comma-separated words of `list`? */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (end != NULL);
    }
    return 0;
}

int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                 CMFixtureFunction teardown) {
    const char *sel = getenv("CLINFER_TESTS");
    if (!sel || !*sel) return _cmocka_run_group_tests(group, tests, n, setup, teardown);
    int except = sel[0] == '!';
    const char *list = sel + except;
    /* every listed name must be a test of this program */
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = 0;
        for (size_t i = 0; i < n && !found; i++) found = strlen(tests[i].name) == len && !strncmp(tests[i].name, p, len);
        if (!found) {
            fprintf(stderr, "CLINFER_TESTS=%s: %.*s is not a test of %s\n", sel, (int)len, p, program_invocation_short_name);
            return 1;
        }
        p += len + (end != NULL);
    }
    struct CMUnitTest *pick = malloc((n ? n : 1) * sizeof *pick);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (listed(list, tests[i].name) != except) pick[k++] = tests[i];
    if (!k) {
        fprintf(stderr, "CLINFER_TESTS=%s leaves no test of %s to run\n", sel, program_invocation_short_name);
        free(pick);
        return 1;
    }
    printf("[ CLINFER_TESTS ] %zu of %s's %zu tests (%s)\n", k, program_invocation_short_name, n, sel);
    int rc = _cmocka_run_group_tests(group, pick, k, setup, teardown);
    free(pick);
    return rc;
}

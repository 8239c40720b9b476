/* Test helpers: seeded random data, relative error, a shared runtime. */
#ifndef CLF_TESTUTIL_H
#define CLF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* The library's xorshift64* (clf_rng_*, host/check/check.h); seeds come from
 * the clock (printed) unless CLINFER_SEED is set, so every run uses fresh
 * data and a failure can be replayed. */
uint64_t tu_seed(void);
uint64_t tu_next(uint64_t *s);
float tu_uniform(uint64_t *s, float lo, float hi);
float tu_normal(uint64_t *s);
void tu_fill_uniform(uint64_t *s, float *x, size_t n, float lo, float hi);

/* ||a - ref|| / ||ref|| (NaN or Inf anywhere -> +inf): clf_rel_err. */
double tu_rel_err(const float *a, const double *ref, size_t n);
double tu_rel_err_f(const float *a, const float *ref, size_t n);

/* One runtime per test program on the default (or CLINFER_DEVICE) device;
 * fails the test with the library's message when none can be made. */
clf_runtime *tu_runtime(void);
void tu_runtime_free(void);
/* Overrides tu_runtime()'s tuning ("matmul=gpu ops=cpu"); NULL restores
 * what the device resolved. Fails the test on a bad assignment. */
void tu_tune(const char *assignments);

/* Skips the test (cmocka's skip) with one line saying why: a capability,
 * model or tool this machine lacks. The one way tests skip. */
#define TU_SKIP(...)                                                                          \
    do {                                                                                      \
        printf("[  SKIPPED ] ");                                                              \
        printf(__VA_ARGS__);                                                                  \
        printf("\n");                                                                         \
        skip();                                                                               \
    } while (0)

/* Asserts st == CLF_OK, printing clf_last_error() otherwise. */
#define TU_OK(expr)                                                                           \
    do {                                                                                      \
        clf_status tu_st_ = (expr);                                                           \
        if (tu_st_ != CLF_OK) fail_msg("%s -> %s: %s", #expr, clf_status_name(tu_st_), clf_last_error()); \
    } while (0)

/* A shell command's stdout (up to 64 KiB, NUL-ended; free it) and its exit
 * status in *status (-1: killed). */
char *tu_capture(const char *cmd, int *status);
/* Fails the test, showing `out`, unless it contains s. */
void tu_expect_in(const char *out, const char *s);

#endif

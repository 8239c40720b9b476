/* Test helpers: seeded random data, relative error, a shared runtime. */
#ifndef CLF_TESTUTIL_H
#define CLF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

/* The library's xorshift64* (clf_rng_*, tools/check/check.h); seeds come from
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

/* Skipping, the one way tests do it. Every skip prints one line and is
 * appended to $CLINFER_SKIP_LOG (ctest sets it: build/skips.log), which
 * `make test` lists at its end (tests/report.py):
 *  TU_SKIP_CAP: this machine lacks a capability the test needs (a device
 *    feature such as a second int8 width), which no install step brings;
 *  TU_SKIP: anything else (a model not fetched, a tool not installed).
 *    Under CI=true it fails the test instead (and the report fails the
 *    run on any such line): what `make test` installs and fetches must be
 *    there. */
#define TU_SKIP_CAP(...) tu_skip(1, __func__, __VA_ARGS__)
#define TU_SKIP(...) tu_skip(0, __func__, __VA_ARGS__)
void tu_skip(int capability, const char *func, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));
/* Appends "TEST<TAB>capability|missing<TAB>REASON" to $CLINFER_SKIP_LOG
 * (no-op without it): for a partial skip inside a test that goes on. */
void tu_skip_log(int capability, const char *func, const char *reason);

/* cmocka_run_group_tests over the tests $CLINFER_TESTS names: a
 * comma-separated list of test function names to run, or, after a leading
 * '!', to leave out; all of them when it is unset. ctest runs a long
 * program in parts this way (CMakeLists.txt, CLF_TEST_PARTS), so the parts
 * run side by side. A name that matches no test, or a part that runs
 * none, fails: a renamed test cannot drop out of every part. */
struct CMUnitTest;
typedef int (*CMFixtureFunction)(void **state);
int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                 CMFixtureFunction teardown);
#define TU_RUN_GROUP(tests, setup, teardown) tu_run_group(#tests, tests, sizeof tests / sizeof tests[0], setup, teardown)

/* Asserts st == CLF_OK, printing clf_last_error() otherwise. */
#define TU_OK(expr)                                                                           \
    do {                                                                                      \
        clf_status tu_st_ = (expr);                                                           \
        if (tu_st_ != CLF_OK) fail_msg("%s -> %s: %s", #expr, clf_status_name(tu_st_), clf_last_error()); \
    } while (0)

/* The public API's (include/clinfer.h) forms of TU_OK, for a test that
 * includes it: expr returns CLINFER_OK (else the status and message fail
 * the test); expr fails with `status` and a message containing `text`. */
#define ASSERT_OK(expr)                                                                                         \
    do {                                                                                                       \
        clinfer_status st_ = (expr);                                                                           \
        if (st_ != CLINFER_OK) fail_msg("%s -> %s: %s", #expr, clinfer_status_name(st_), clinfer_last_error()); \
    } while (0)
#define ASSERT_FAILS(expr, status, text)                                                 \
    do {                                                                                \
        assert_int_equal((expr), (status));                                             \
        if (!strstr(clinfer_last_error(), (text)))                                      \
            fail_msg("%s: message '%s' lacks '%s'", #expr, clinfer_last_error(), text); \
    } while (0)

/* A shell command's stdout (up to 64 KiB, NUL-ended; free it) and its exit
 * status in *status (-1: killed). */
char *tu_capture(const char *cmd, int *status);
/* Fails the test, showing `out`, unless it contains s. */
void tu_expect_in(const char *out, const char *s);

#endif

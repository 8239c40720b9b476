/* `clinfer selftest` as a user runs it: every check passes on this device,
 * a subtly wrong kernel is reported as a failure with a non-zero exit, and
 * a bad device selector is a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "testutil.h"

/* Runs `clinfer <args>` with `env` prepended; returns the exit status and
 * the output (stdout and stderr) in out. */
static int run_clinfer(const char *env, const char *args, char *out, size_t cap) {
    const char *bin = getenv("CLINFER_BIN");
    if (!bin) fail_msg("CLINFER_BIN is not set (run through ctest)");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", env, bin, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle)) n++;
    return n;
}

static char out[1 << 16];

static void test_every_check_passes(void **state) {
    (void)state;
    char args[64];
    snprintf(args, sizeof args, "selftest --seed %llu", (unsigned long long)(tu_seed() & 0x7fffffff));
    int rc = run_clinfer("", args, out, sizeof out);
    if (rc != 0 || !strstr(out, " 0 failed")) fail_msg("exit %d:\n%s", rc, out);
    assert_true(count(out, "PASS") >= 10);
    assert_int_equal(count(out, "FAIL"), 0);
}

/* RMSNorm dividing by n + 1 instead of n: off by ~1e-3 at n = 576, the kind
 * of slip a miscompile makes, invisible to the eye, caught by the checks. */
static void test_wrong_kernel_fails(void **state) {
    (void)state;
    const char *src = getenv("CLINFER_SOURCE_DIR");
    if (!src) fail_msg("CLINFER_SOURCE_DIR is not set (run through ctest)");
    char dir[] = "/tmp/clinfer-selftest-XXXXXX", cmd[1024], env[256];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "cp '%s'/cl/*.cl %s && sed -i 's|rsqrt(ss / (float)n + eps)|rsqrt(ss / (float)(n + 1) + eps)|' %s/norm.cl"
             " && grep -q '(float)(n + 1)' %s/norm.cl",
             src, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(env, sizeof env, "CLINFER_KERNEL_DIR=%s", dir);
    int rc = run_clinfer(env, "selftest --seed 1", out, sizeof out);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    if (rc != 1) fail_msg("exit %d, want 1:\n%s", rc, out);
    const char *line = strstr(out, "\nrmsnorm ");
    assert_non_null(line);
    const char *eol = strchr(line + 1, '\n');
    assert_non_null(eol);
    assert_true(strstr(line, "FAIL") && strstr(line, "FAIL") < eol);
    /* the plain and the per-head (QK-norm) RMSNorm share the kernel: both
     * fail, and nothing else does */
    line = strstr(out, "\nrmsnorm_heads ");
    assert_non_null(line);
    eol = strchr(line + 1, '\n');
    assert_true(strstr(line, "FAIL") && strstr(line, "FAIL") < eol);
    assert_non_null(strstr(out, " 2 failed"));
}

static void test_unknown_device(void **state) {
    (void)state;
    int rc = run_clinfer("", "selftest --device no-such-device", out, sizeof out);
    assert_int_equal(rc, 5); /* CLF_ERR_DEVICE */
    assert_non_null(strstr(out, "no-such-device"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_check_passes),
        cmocka_unit_test(test_wrong_kernel_fails),
        cmocka_unit_test(test_unknown_device),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

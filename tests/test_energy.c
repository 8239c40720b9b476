/* tools/bench/energy.c on fake powercap trees (CLINFER_POWERCAP_DIR): only the
 * package domains are read (not their sub-zones, not the MMIO copy), their
 * joules summed with each counter's wrap undone, and a host without
 * counters, or with unreadable ones, is stated, not failed. Counter values
 * and increments are fresh random numbers each run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "energy.h"
#include "testutil.h"

static char root[64];

static void put(const char *rel, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')); s++) { /* the folders on the way */
        *s = 0;
        mkdir(p, 0755);
        *s = '/';
    }
    FILE *f = fopen(p, "w");
    if (!f) fail_msg("cannot write %s", p);
    fputs(text, f);
    fclose(f);
}

static void put_uj(const char *domain, const char *file, double v) {
    char rel[128], text[64];
    snprintf(rel, sizeof rel, "%s/%s", domain, file);
    snprintf(text, sizeof text, "%.0f\n", v);
    put(rel, text);
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/clinfer-powercap-XXXXXX");
    if (!mkdtemp(root)) return -1;
    setenv("CLINFER_POWERCAP_DIR", root, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* A random counter value below max, in whole microjoules. */
static double below(uint64_t *s, double max) { return (double)(tu_next(s) % (uint64_t)max); }

static void test_packages_summed_and_wrapped(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    const double max0 = 262143328850.0, max1 = 65532610987.0; /* as real packages report */
    double a0 = below(&s, max0), a1 = below(&s, max1);
    put_uj("intel-rapl:0", "energy_uj", a0);
    put_uj("intel-rapl:0", "max_energy_range_uj", max0);
    put("intel-rapl:0/name", "package-0\n");
    put_uj("intel-rapl:1", "energy_uj", a1);
    put_uj("intel-rapl:1", "max_energy_range_uj", max1); /* no name file: the folder's */
    /* included in the packages, or the same package again: never counted */
    put_uj("intel-rapl:0/intel-rapl:0:0", "energy_uj", 5);
    put_uj("intel-rapl:0:0", "energy_uj", 7);
    put_uj("intel-rapl-mmio:0", "energy_uj", 11);
    put_uj("intel-rapl:2x", "energy_uj", 13);
    clf_energy e;
    clf_energy_open(&e);
    assert_int_equal(e.n, 2);
    assert_string_equal(e.name[0], "package-0");
    assert_string_equal(e.name[1], "intel-rapl:1");
    char names[64];
    clf_energy_names(&e, names, sizeof names);
    assert_string_equal(names, "package-0, intel-rapl:1");
    assert_true(clf_energy_read(&e).ok);

    /* package 1 just below its wrap, then both move on: package 1 past it */
    double d0 = 1 + (double)(tu_next(&s) % 100000000), d1 = 1 + (double)(tu_next(&s) % 100000000);
    a1 = max1 - 1 - (double)(tu_next(&s) % (uint64_t)d1);
    put_uj("intel-rapl:1", "energy_uj", a1);
    clf_energy_mark m0 = clf_energy_read(&e);
    assert_true(m0.ok);
    double b1 = fmod(a1 + d1, max1);
    assert_true(b1 < a1); /* it does wrap */
    put_uj("intel-rapl:0", "energy_uj", fmod(a0 + d0, max0));
    put_uj("intel-rapl:1", "energy_uj", b1);
    clf_energy_mark m1 = clf_energy_read(&e);
    assert_true(m1.ok);
    double want = (d0 + d1) * 1e-6, got = clf_energy_joules(&e, &m0, &m1);
    if (fabs(got - want) > 1e-9 * want) fail_msg("joules %.9f, want %.9f", got, want);
}

static void test_wrap_without_range(void **state) {
    (void)state;
    put_uj("intel-rapl:0", "energy_uj", 5000);
    clf_energy e;
    clf_energy_open(&e);
    assert_int_equal(e.n, 1);
    clf_energy_mark m0 = clf_energy_read(&e);
    put_uj("intel-rapl:0", "energy_uj", 4000); /* went back: a wrap with no range known */
    clf_energy_mark m1 = clf_energy_read(&e);
    assert_true(clf_energy_joules(&e, &m0, &m1) < 0);
    put_uj("intel-rapl:0", "energy_uj", 9000);
    m1 = clf_energy_read(&e);
    assert_true(fabs(clf_energy_joules(&e, &m0, &m1) - 0.004) < 1e-12);
    /* a domain gone between two readings: no figure */
    char p[128];
    snprintf(p, sizeof p, "%s/intel-rapl:0/energy_uj", root);
    unlink(p);
    m1 = clf_energy_read(&e);
    assert_false(m1.ok);
    assert_true(clf_energy_joules(&e, &m0, &m1) < 0);
}

static void test_unavailable_stated(void **state) {
    (void)state;
    clf_energy e;
    /* an empty tree (a VM's) */
    clf_energy_open(&e);
    assert_int_equal(e.n, 0);
    tu_expect_in(e.why, "no RAPL package domain");
    tu_expect_in(e.why, root);
    clf_energy_mark m = clf_energy_read(&e);
    assert_false(m.ok);
    assert_true(clf_energy_joules(&e, &m, &m) < 0);
    /* a counter that is not a number */
    put("intel-rapl:0/energy_uj", "n/a\n");
    clf_energy_open(&e);
    assert_int_equal(e.n, 0);
    tu_expect_in(e.why, "intel-rapl:0/energy_uj is not readable");
    /* no powercap folder at all */
    char gone[96];
    snprintf(gone, sizeof gone, "%s/none", root);
    setenv("CLINFER_POWERCAP_DIR", gone, 1);
    clf_energy_open(&e);
    setenv("CLINFER_POWERCAP_DIR", root, 1);
    assert_int_equal(e.n, 0);
    tu_expect_in(e.why, gone);
    tu_expect_in(e.why, "no energy counters");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_packages_summed_and_wrapped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrap_without_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unavailable_stated, setup, teardown),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* The server's start-up memory check (server/memory.c): the bound on a
 * draft model's kept laws (srv_mem_draft_laws) and where srv_mem_check
 * counts it (the host's memory; the device's only on a CPU, whose memory is
 * the host's), named in the refusal. No model, no device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "memory.h"

static void test_draft_laws_bound(void **state) {
    (void)state;
    /* 4 slots × 16 positions × 49152 shared ids × (int32 + float), and the scratch rows */
    const double want = 4.0 * 16 * 49152 * 8 + 2.0 * 49152 * 4 + 49152.0 * 8;
    assert_true(srv_mem_draft_laws(4, 16, 49152, 49152) == want);
    /* the shared ids: the smaller vocabulary; the dense rows: the target's */
    assert_true(srv_mem_draft_laws(2, 4, 1000, 800) == 2.0 * 4 * 800 * 8 + 2.0 * 1000 * 4 + 800.0 * 8);
    assert_true(srv_mem_draft_laws(0, 16, 1000, 1000) == 0);
    assert_true(srv_mem_draft_laws(4, 0, 1000, 1000) == 0);
    /* 32 slots drafting 16 from a 152k vocabulary: past half a GiB */
    assert_true(srv_mem_draft_laws(32, 16, 151936, 151936) > 512.0 * 1048576.0);
}

static void test_draft_laws_checked(void **state) {
    (void)state;
    const double mib = 1048576.0;
    srv_mem b = {.weights = 100 * mib, .kv = 10 * mib, .draft = 20 * mib, .draft_laws = 300 * mib};
    /* a GPU: the laws are host memory, not the device's */
    assert_int_equal(srv_mem_check(&b, 200 * mib, 0, 1000 * mib), CLINFER_OK);
    assert_int_equal(srv_mem_check(&b, 200 * mib, 0, 250 * mib), CLINFER_ERR_MEMORY);
    const char *e = clinfer_last_error();
    if (!strstr(e, "does not fit the host's memory") || !strstr(e, "draft laws (-md, sampled drafts) 300.0 MiB") ||
        strstr(e, "lower --cache-ram"))
        fail_msg("%s", e);
    /* a CPU: everything against the host, the laws with the rest */
    assert_int_equal(srv_mem_check(&b, 0, 1, 429 * mib), CLINFER_ERR_MEMORY);
    e = clinfer_last_error();
    if (!strstr(e, "weights 100.0 MiB") || !strstr(e, "draft laws") || !strstr(e, "= 430.0 MiB")) fail_msg("%s", e);
    assert_int_equal(srv_mem_check(&b, 0, 1, 431 * mib), CLINFER_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draft_laws_bound),
        cmocka_unit_test(test_draft_laws_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

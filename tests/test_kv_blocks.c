/* The paged KV cache's block bookkeeping against a reference model: the
 * fuzz harness's programs (tests/fuzz/fuzz_kv_blocks.c, which aborts on a
 * violated property), here on fresh random programs each run, and the
 * allocator's own refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fuzz/fuzz_kv_blocks.c"
#include "testutil.h"

static void test_random_programs(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    uint8_t prog[3 * 400];
    for (int run = 0; run < 300; run++) {
        for (size_t i = 0; i < sizeof prog; i++) prog[i] = (uint8_t)tu_next(&s);
        LLVMFuzzerTestOneInput(prog, sizeof prog);
    }
}

/* A pool short of blocks refuses a write whole; a shared block is copied
 * with the slots before the write, then given back by both. */
static void test_refusal_and_copy_on_write(void **state) {
    (void)state;
    clf_kv_blocks b;
    TU_OK(clf_kv_blocks_init(&b, 3, 2, 4));
    TU_OK(clf_kv_blocks_write(&b, 0, 0, 1, 0, NULL, NULL));
    assert_int_equal(b.n_free, 1);
    assert_int_equal(clf_kv_blocks_write(&b, 1, 0, 1, 0, NULL, NULL), CLF_ERR_CONTEXT);
    assert_int_equal(b.n_free, 1);
    assert_false(clf_kv_blocks_mapped(&b, 1, 0));
    clf_kv_blocks_share(&b, 0, 1, 2);
    assert_int_equal(b.ref[b.tbl[0]], 2);
    assert_int_equal(clf_kv_blocks_need(&b, 1, 1, 1), 1); /* shared: a write copies it */
    TU_OK(clf_kv_blocks_write(&b, 1, 1, 1, 3, NULL, NULL));
    assert_int_equal(b.n_free, 0);
    assert_int_not_equal(b.tbl[1], b.tbl[4 + 1]);
    clf_kv_blocks_drop_from(&b, 0, 0);
    clf_kv_blocks_drop_from(&b, 1, 0);
    assert_int_equal(b.n_free, 3);
    assert_int_equal(clf_kv_blocks_write(&b, 2, 0, 0, 0, NULL, NULL), CLF_ERR_ARG);
    clf_kv_blocks_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_programs),
        cmocka_unit_test(test_refusal_and_copy_on_write),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

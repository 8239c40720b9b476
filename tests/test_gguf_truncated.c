/* A model file that shrinks after clf_gguf_open (re-downloaded in place):
 * reads of its mapping past the new end raise SIGBUS, which used to kill
 * clinfer (exit 135). The loaders read through the file's guard
 * (clf_gguf_guard_begin/end) and fail with a format error naming the file;
 * the SIGBUS action is the caller's again afterwards. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fuzz/fuzz_vocab.h"
#include "llama.h"
#include "ref_llama.h"
#include "testutil.h"
#include "tokenizer.h"
#include "vocab.h"

static const tiny_model TM = {.arch = "llama", .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                              .n_vocab = 97, .type = CLF_Q8_0};

static void sigbus_action(struct sigaction *sa) { assert_int_equal(sigaction(SIGBUS, NULL, sa), 0); }

/* The load failed for the file's change, and left SIGBUS as it found it. */
static void expect_changed(clf_status st, const char *path, const struct sigaction *before) {
    if (st != CLF_ERR_FORMAT) fail_msg("expected a format error, got '%s': %s", clf_status_name(st), clf_last_error());
    assert_non_null(strstr(clf_last_error(), path));
    assert_non_null(strstr(clf_last_error(), "the file changed while it was read"));
    printf("  %s\n", clf_last_error());
    struct sigaction after;
    sigbus_action(&after);
    assert_ptr_equal((void *)after.sa_sigaction, (void *)before->sa_sigaction);
}

static void load_after_truncate(off_t keep_from_end, off_t keep) {
    clf_runtime *rt = tu_runtime();
    char path[] = "/tmp/clinfer-shrink-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&TM, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    struct sigaction before;
    sigbus_action(&before);
    off_t size = (off_t)clf_gguf_size(g);
    assert_int_equal(truncate(path, keep_from_end ? size - keep_from_end : keep), 0);
    clf_llama *m = NULL;
    expect_changed(clf_llama_load(rt, g, &m), path, &before);
    assert_null(m);
    clf_gguf_close(g);
    unlink(path);
}

/* Cut right after the metadata: every weight read faults. */
static void test_weights_fault(void **state) {
    (void)state;
    char path[] = "/tmp/clinfer-shrink-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(tiny_model_write(&TM, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    off_t data = (off_t)clf_gguf_data_offset(g);
    clf_gguf_close(g);
    unlink(path);
    load_after_truncate(0, data);
}

/* One byte less: the read of the last page sees zeros without a fault, the
 * size tells. */
static void test_one_byte_short(void **state) {
    (void)state;
    load_after_truncate(1, 0);
}

/* Emptied: the tokenizer's strings fault as well. */
static void test_vocabulary_fault(void **state) {
    (void)state;
    char path[] = "/tmp/clinfer-shrink-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    TU_OK(fz_vocab_write(path, 0));
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_tokenizer *t;
    TU_OK(clf_tokenizer_load(g, &t)); /* the untouched file loads */
    clf_tokenizer_free(t);
    struct sigaction before;
    sigbus_action(&before);
    assert_int_equal(truncate(path, 0), 0);
    t = NULL;
    expect_changed(clf_tokenizer_load(g, &t), path, &before);
    assert_null(t);
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_fault),
        cmocka_unit_test(test_one_byte_short),
        cmocka_unit_test(test_vocabulary_fault),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

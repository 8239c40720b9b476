/* Replays the fuzzers' findings (tests/fuzz/regressions/) through the very
 * code of the harnesses, compiled here into the ordinary suite (and the
 * sanitizer build): gguf-* go to fuzz_gguf, tokenizer-* to fuzz_tokenizer,
 * json_schema-* to fuzz_json_schema.
 * A harness abort()s on a violated property, so a regression that returns
 * fails this program; the file being replayed is printed first. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* The harnesses' entry points under names of their own. */
#define LLVMFuzzerTestOneInput fuzz_gguf_one
#include "fuzz/fuzz_gguf.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_tokenizer_one
#define LLVMFuzzerInitialize fuzz_tokenizer_init
#include "fuzz/fuzz_tokenizer.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_json_schema_one
#include "fuzz/fuzz_json_schema.c"
#undef LLVMFuzzerTestOneInput

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Feeds every regressions/<prefix>* file to `one`; returns how many. */
static int replay(const char *prefix, int (*one)(const uint8_t *, size_t)) {
    const char *src = getenv("CLINFER_SOURCE_DIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions", src && *src ? src : ".");
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    char *names[4096];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 4096;)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len = 0;
        uint8_t *buf = fz_read_file(path, &len);
        if (!buf) fail_msg("cannot read %s", path);
        /* exact size, so that ASan sees a read past the end */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        free(buf);
        printf("  %s (%zu bytes)\n", names[i], len);
        fflush(stdout);
        one(exact, len);
        free(exact);
        free(names[i]);
    }
    return n;
}

static void test_gguf(void **state) {
    (void)state;
    int n = replay("gguf-", fuzz_gguf_one);
    printf("  %d GGUF regressions replayed\n", n);
    assert_true(n >= 1);
}

static void test_tokenizer(void **state) {
    (void)state;
    assert_int_equal(fuzz_tokenizer_init(NULL, NULL), 0);
    int n = replay("tokenizer-", fuzz_tokenizer_one);
    printf("  %d tokenizer regressions replayed\n", n);
    assert_true(n >= 1);
}

/* (a leak shows under the sanitizer build's LeakSanitizer, at exit) */
static void test_json_schema(void **state) {
    (void)state;
    int n = replay("json_schema-", fuzz_json_schema_one);
    printf("  %d JSON Schema regressions replayed\n", n);
    assert_true(n >= 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_json_schema),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < 2; i++) clf_tokenizer_free(ft_vocab[i]);
    return rc;
}

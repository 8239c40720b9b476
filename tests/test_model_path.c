/* The model catalogue (models/catalogue.tsv, embedded) and what -m names:
 * a file that exists, a catalogue name in the cache, the default, or an
 * error that says how to fetch or lists the catalogue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "catalogue.h"
#include "model_path.h"
#include "testutil.h"

/* Every data row of the .tsv is one entry, in order; the first is the default. */
static void test_catalogue_rows(void **state) {
    (void)state;
    FILE *f = fopen("models/catalogue.tsv", "r");
    if (!f) fail_msg("cannot read models/catalogue.tsv (tests run from the repository root)");
    char line[1024];
    int rows = 0;
    clf_catalogue_entry e;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        assert_true(clf_catalogue_at(rows, &e));
        assert_int_equal(strncmp(line, e.name, strlen(e.name)), 0);
        assert_int_equal(line[strlen(e.name)], '\t');
        assert_int_equal(strlen(e.sha256), 64);
        assert_true(e.size > 0);
        rows++;
    }
    fclose(f);
    assert_false(clf_catalogue_at(rows, &e));
    assert_true(rows >= 2);

    assert_true(clf_catalogue_at(0, &e));
    assert_string_equal(e.name, "smollm2-135m");
    assert_string_equal(e.file, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_true(clf_catalogue_find("gemma3-270m", &e));
    assert_string_equal(e.file, "gemma-3-270m-q4_k_m.gguf");
    assert_int_equal(e.size, 253113024);
    assert_string_equal(e.sha256, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818");
    assert_false(clf_catalogue_find("gemma3", &e));
    char names[256];
    clf_catalogue_names(names, sizeof names);
    assert_non_null(strstr(names, "smollm2-135m, gemma3-270m"));
}

static char dir[256];

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static void test_resolution(void **state) {
    (void)state;
    char cwd[1024], path[1024], want[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clf_model_path_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    setenv("CLINFER_MODEL_DIR", dir, 1);
    unsetenv("CLINFER_MODEL");

    /* nothing fetched: the default and a name say how to fetch them */
    assert_int_equal(clf_model_path(NULL, path, sizeof path), CLF_ERR_IO);
    assert_non_null(strstr(clf_last_error(), "no -m given and the default model"));
    assert_non_null(strstr(clf_last_error(), "SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert_int_equal(clf_model_path("gemma3-270m", path, sizeof path), CLF_ERR_IO);
    assert_non_null(strstr(clf_last_error(), "make model MODEL=gemma3-270m"));

    /* a catalogue name is its file in the cache, from -m or $CLINFER_MODEL */
    snprintf(want, sizeof want, "%s/gemma-3-270m-q4_k_m.gguf", dir);
    touch(want);
    TU_OK(clf_model_path("gemma3-270m", path, sizeof path));
    assert_string_equal(path, want);
    setenv("CLINFER_MODEL", "gemma3-270m", 1);
    TU_OK(clf_model_path(NULL, path, sizeof path));
    assert_string_equal(path, want);
    unsetenv("CLINFER_MODEL");
    snprintf(want, sizeof want, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
    touch(want);
    TU_OK(clf_model_path(NULL, path, sizeof path));
    assert_string_equal(path, want);

    /* an unknown bare name lists the catalogue; a path is left to the open */
    assert_int_equal(clf_model_path("gemma-3", path, sizeof path), CLF_ERR_IO);
    assert_non_null(strstr(clf_last_error(), "'gemma-3'"));
    assert_non_null(strstr(clf_last_error(), "smollm2-135m, gemma3-270m"));
    TU_OK(clf_model_path("no-such.gguf", path, sizeof path));
    assert_string_equal(path, "no-such.gguf");
    TU_OK(clf_model_path("/no/such/model", path, sizeof path));
    assert_string_equal(path, "/no/such/model");

    /* a file that exists wins over the catalogue name it spells */
    assert_int_equal(chdir(dir), 0);
    touch("gemma3-270m");
    TU_OK(clf_model_path("gemma3-270m", path, sizeof path));
    assert_string_equal(path, "gemma3-270m");
    assert_int_equal(chdir(cwd), 0);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("CLINFER_MODEL_DIR");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue_rows),
        cmocka_unit_test(test_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

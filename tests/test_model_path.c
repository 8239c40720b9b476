/* The model catalogue (models/catalogue.tsv, embedded) and what -m names:
 * a file that exists, a catalogue name in the cache, the default, or an
 * error that says how to fetch or lists the catalogue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
        /* the fields, split here independently: name file packages version size sha256 assemble instruct */
        line[strcspn(line, "\r\n")] = 0;
        char *f[9] = {0};
        int nf = 0;
        for (char *p = line; nf < 9; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) { nf++; break; }
            *tab = 0, p = tab + 1;
        }
        assert_int_equal(nf, 8);
        assert_string_equal(e.name, f[0]);
        assert_string_equal(e.file, f[1]);
        assert_string_equal(e.packages, f[2]);
        assert_string_equal(e.version, f[3]);
        assert_int_equal(e.size, strtoull(f[4], NULL, 10));
        assert_string_equal(e.sha256, f[5]);
        assert_int_equal(e.concat, !strcmp(f[6], "concat"));
        assert_int_equal(e.instruct, !strcmp(f[7], "yes"));
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
    assert_true(e.concat);
    assert_false(e.instruct); /* Gemma 3 270M: the base model */
    assert_true(clf_catalogue_find("smollm2-135m", &e));
    assert_true(e.instruct);
    assert_false(e.concat);
    assert_false(clf_catalogue_find("gemma3", &e));
    char names[256];
    clf_catalogue_names(names, sizeof names);
    assert_non_null(strstr(names, "smollm2-135m, gemma3-270m"));
}

/* $CLINFER_CATALOGUE replaces the embedded catalogue; malformed rows (a
 * field missing, a bad hash, an unknown assembly or instruct word) are
 * skipped; an unreadable file is an empty catalogue. */
static void test_catalogue_override(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/clf_catalogue_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char hash[65];
    for (int i = 0; i < 64; i++) hash[i] = "0123456789abcdef"[rand() % 16];
    hash[64] = 0;
    unsigned long long size = 1 + (unsigned long long)rand();
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\n\nshort\tx.gguf\tp\t1\t5\t%s\twheel\n", hash);        /* 7 fields */
    fprintf(f, "badhash\tx.gguf\tp\t1\t5\t%.63s\twheel\tyes\n", hash);             /* 63 hex digits */
    fprintf(f, "badasm\tx.gguf\tp\t1\t5\t%s\tzip\tyes\n", hash);
    fprintf(f, "badword\tx.gguf\tp\t1\t5\t%s\twheel\tmaybe\n", hash);
    fprintf(f, "mine\tmine.gguf\tpkg-a,pkg-b\t2.5\t%llu\t%s\tconcat\tno\n", size, hash);
    fclose(f);
    setenv("CLINFER_CATALOGUE", path, 1);
    clf_catalogue_entry e;
    assert_true(clf_catalogue_at(0, &e));
    assert_string_equal(e.name, "mine");
    assert_string_equal(e.packages, "pkg-a,pkg-b");
    assert_string_equal(e.version, "2.5");
    assert_int_equal(e.size, size);
    assert_string_equal(e.sha256, hash);
    assert_true(e.concat);
    assert_false(e.instruct);
    assert_false(clf_catalogue_at(1, &e));
    assert_false(clf_catalogue_find("smollm2-135m", &e));
    unlink(path);
    assert_false(clf_catalogue_at(0, &e));
    unsetenv("CLINFER_CATALOGUE");
    assert_true(clf_catalogue_find("smollm2-135m", &e));
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
    assert_non_null(strstr(clf_last_error(), "clinfer pull"));
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
    srand((unsigned)time(NULL));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue_rows),
        cmocka_unit_test(test_catalogue_override),
        cmocka_unit_test(test_resolution),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

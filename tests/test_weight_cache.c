/* The packed-weights cache (models/weight_cache.h) and the load's memory,
 * through the public API on a generated model of ~110 MB (tiny_gguf:
 * Q4_0, 1024 wide, 8 layers, FFN 8192), on the test device (PoCL's CPU,
 * where the cache is used):
 *  - a cold load (the entry built), a warm one (mapped) and one in memory
 *    (no_mmap) give bit-identical logits;
 *  - a damaged, truncated, stale or foreign entry is rebuilt, saying why,
 *    and gives the same logits;
 *  - a folder that cannot be written, or a disk without room (RLIMIT_FSIZE),
 *    falls back to memory with one notice;
 *  - two processes loading at once both succeed and share one entry;
 *  - a device too small refuses the model or the context asked for with the
 *    numbers, before anything is allocated, and shortens the default context;
 *  - peak memory (VmHWM, reset before each load) stays within the file's
 *    size + the KV cache + 10% in all three ways of loading. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <dirent.h>

#include <cmocka.h>

#include "clinfer.h"
#include "testutil.h"

#define N_CTX 64

static char model_path[512], work[256];
static long model_bytes;
static float *ref_logits; /* a load in memory (no_mmap): what every other load must give */
static int n_vocab;
static char notices[8192]; /* the last load's notices, one per line */

static void on_notice(void *ud, const char *line) {
    (void)ud;
    size_t n = strlen(notices);
    snprintf(notices + n, sizeof notices - n, "%s\n", line);
}

/* Loads the model with the cache in `folder` (NULL: as the environment
 * says; "" no_mmap), evaluates a fixed prompt and returns its last logits
 * (malloc'd); the notices in `notices`. */
static int with_mlock; /* load_eval's loads lock their weights (--mlock) */

static float *load_eval(const char *folder) {
    if (folder && *folder) setenv("CLINFER_WEIGHT_CACHE", folder, 1);
    notices[0] = 0;
    clinfer_load_options o = clinfer_load_default_options();
    o.notice = on_notice;
    o.no_mmap = folder && !*folder;
    o.mlock = with_mlock;
    clinfer_model *m;
    clinfer_status st = clinfer_model_load_with(model_path, NULL, NULL, &o, &m);
    if (st != CLINFER_OK) fail_msg("load: %s", clinfer_last_error());
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = N_CTX;
    clinfer_session *s;
    assert_int_equal(clinfer_session_create(m, &sp, &s), CLINFER_OK);
    const int32_t prompt[] = {1, 17, 42, 99, 7, 3, 250, 11};
    assert_int_equal(clinfer_eval(s, prompt, 8), CLINFER_OK);
    n_vocab = clinfer_model_n_vocab(m);
    float *l = malloc((size_t)n_vocab * sizeof *l);
    assert_non_null(l);
    memcpy(l, clinfer_session_logits(s), (size_t)n_vocab * sizeof *l);
    clinfer_session_free(s);
    clinfer_model_free(m);
    return l;
}

static void expect_ref(float *l) {
    assert_memory_equal(l, ref_logits, (size_t)n_vocab * sizeof *l);
    free(l);
}

/* The one .pack file of `folder` into path; the count of .pack and of
 * leftover .tmp files. */
static int entries(const char *folder, char *path, size_t n, int *tmps) {
    DIR *d = opendir(folder);
    int packs = 0;
    *tmps = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".pack")) {
            packs++;
            snprintf(path, n, "%s/%s", folder, e->d_name);
        }
        if (strstr(e->d_name, ".tmp")) (*tmps)++;
    }
    closedir(d);
    return packs;
}

static void fresh_folder(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "%s/%s", work, name);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state) {
    (void)state;
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) return -1;
    snprintf(work, sizeof work, "/tmp/clinfer-test-wcache-%d", (int)getpid());
    snprintf(model_path, sizeof model_path, "%s/model.gguf", work);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && '%s' model '%s' Q4_0 --embd 1024 --head-dim 64 --ff 8192 --layers 8",
             work, tool, model_path);
    if (system(cmd) != 0) return -1;
    struct stat sb;
    if (stat(model_path, &sb) != 0) return -1;
    model_bytes = (long)sb.st_size;
    ref_logits = load_eval(""); /* in memory */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    free(ref_logits);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    return system(cmd) == 0 ? 0 : -1;
}

/* Cold (built), warm (mapped) and in memory: the same bits. */
static void test_cold_warm_identical(void **state) {
    (void)state;
    char dir[300], pack[600];
    int tmps;
    fresh_folder(dir, sizeof dir, "cw");
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "packing the weights once into");
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 1);
    assert_int_equal(tmps, 0);
    struct stat sb;
    assert_int_equal(stat(pack, &sb), 0);
    assert_true(sb.st_size >= model_bytes * 9 / 10); /* every weight is in it */
    expect_ref(load_eval(dir));
    assert_string_equal(notices, ""); /* warm: nothing to say */
    /* --mlock, mapped and in memory: the same bits; a refusal (ulimit -l) is a notice, never a failure */
    with_mlock = 1;
    expect_ref(load_eval(dir));
    expect_ref(load_eval(""));
    with_mlock = 0;
}

/* Damage of each kind is noticed, said and repaired. */
static void test_rebuilt(void **state) {
    (void)state;
    char dir[300], pack[600];
    int tmps;
    fresh_folder(dir, sizeof dir, "rb");
    free(load_eval(dir));
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 1);
    struct stat sb;
    assert_int_equal(stat(pack, &sb), 0);

    /* a byte flipped in the data */
    int fd = open(pack, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    const off_t at = sb.st_size / 2;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "damaged");
    expect_ref(load_eval(dir));
    assert_string_equal(notices, ""); /* repaired */

    /* cut short, beside what a killed build left */
    assert_int_equal(truncate(pack, sb.st_size / 3), 0);
    char left[700];
    snprintf(left, sizeof left, "%s.999999.tmp", pack);
    FILE *lf = fopen(left, "w");
    assert_non_null(lf);
    fclose(lf);
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "truncated");
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 1);
    assert_int_equal(tmps, 0); /* the leftover is gone */

    /* another file's header */
    fd = open(pack, O_RDWR);
    assert_int_equal(pwrite(fd, "GGUF", 4, 0), 4);
    close(fd);
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "foreign");

    /* the model file changed since (its modification time) */
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    assert_int_equal(utimes(model_path, tv), 0);
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "stale");
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 1);
    assert_int_equal(tmps, 0);
}

/* A folder that cannot be made or written: in memory, said once. */
static void test_unwritable(void **state) {
    (void)state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/model.gguf/weights", work); /* under a regular file: ENOTDIR */
    expect_ref(load_eval(dir));
    tu_expect_in(notices, "packing the weights in memory");
    tu_expect_in(notices, "not writable");
    if (geteuid() != 0) { /* a read-only folder (root writes anywhere) */
        char ro[300];
        fresh_folder(ro, sizeof ro, "ro");
        assert_int_equal(chmod(ro, 0555), 0);
        expect_ref(load_eval(ro));
        tu_expect_in(notices, "packing the weights in memory");
    }
}

/* A disk without room (the file size limit: fallocate fails with EFBIG and
 * raises SIGXFSZ, which the library takes back): `clinfer run` packs in
 * memory, says so, and writes the same text as with the cache. */
static void test_no_room(void **state) {
    (void)state;
    char dir[300], cmd[2048];
    int status;
    fresh_folder(dir, sizeof dir, "full");
    free(load_eval(dir)); /* the kernels are built: the limited run writes no kernel cache */
    const char *bin = getenv("CLINFER_BIN");
    assert_non_null(bin);
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p 'hello there' -n 6 --temp 0 -c %d 2>/dev/null", bin, model_path,
             N_CTX);
    char *want = tu_capture(cmd, &status);
    assert_int_equal(status, 0);
    fresh_folder(dir, sizeof dir, "full2");
    snprintf(cmd, sizeof cmd,
             "ulimit -f 2048; CLINFER_WEIGHT_CACHE='%s' '%s' run -m '%s' -p 'hello there' -n 6 --temp 0 "
             "-c %d 2>'%s/full.err'",
             dir, bin, model_path, N_CTX, work);
    char *got = tu_capture(cmd, &status);
    assert_int_equal(status, 0);
    assert_string_equal(got, want);
    snprintf(cmd, sizeof cmd, "cat '%s/full.err'", work);
    char *err = tu_capture(cmd, &status);
    tu_expect_in(err, "packing the weights in memory");
    tu_expect_in(err, "no room");
    char pack[600];
    int tmps;
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 0);
    assert_int_equal(tmps, 0); /* the half-made entry is gone */
    free(want);
    free(got);
    free(err);
}

/* Two processes load the same model into an empty folder at once: both
 * succeed with the same text, one builds the entry, the other uses it. */
static void test_two_processes(void **state) {
    (void)state;
    char dir[300], cmd[2048];
    fresh_folder(dir, sizeof dir, "two");
    const char *bin = getenv("CLINFER_BIN");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for i in 1 2; do CLINFER_WEIGHT_CACHE='%s' '%s' run -m '%s' -p 'hello there' -n 6 --temp 0 "
             "-c %d >out$i 2>err$i & done; wait %%1 && wait %%2 || echo FAILED; cmp out1 out2 && cat err1 err2",
             work, dir, bin, model_path, N_CTX);
    int status;
    char *out = tu_capture(cmd, &status);
    assert_int_equal(status, 0);
    assert_null(strstr(out, "FAILED"));
    const char *first = strstr(out, "packing the weights once");
    assert_non_null(first);
    assert_null(strstr(first + 1, "packing the weights once")); /* one of them built it */
    char pack[600];
    int tmps;
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 1);
    assert_int_equal(tmps, 0);
    free(out);
}

/* A device too small (CLINFER_GLOBAL_MEM_MB lowers what clinfer believes
 * it offers): the weights alone are refused before anything is allocated,
 * with the numbers; a context asked for that does not fit is refused with
 * the largest that does; without one, the session gets the largest. */
static void test_fit(void **state) {
    (void)state;
    char dir[300];
    fresh_folder(dir, sizeof dir, "fit");
    setenv("CLINFER_WEIGHT_CACHE", dir, 1);
    const double file_mb = model_bytes / 1048576.0;
    char mb[32];
    clinfer_model *m = (clinfer_model *)&m;
    clinfer_load_options o = clinfer_load_default_options();
    o.notice = on_notice;

    snprintf(mb, sizeof mb, "%.0f", file_mb * 0.8);
    setenv("CLINFER_GLOBAL_MEM_MB", mb, 1);
    notices[0] = 0;
    assert_int_equal(clinfer_model_load_with(model_path, NULL, NULL, &o, &m), CLINFER_ERR_MEMORY);
    assert_null(m);
    tu_expect_in(clinfer_last_error(), "the model does not fit");
    tu_expect_in(clinfer_last_error(), "weights");
    tu_expect_in(clinfer_last_error(), "MiB it can hold now");
    char pack[600];
    int tmps;
    assert_int_equal(entries(dir, pack, sizeof pack, &tmps), 0); /* refused before anything was made */

    /* room for the weights and a short context: -c 4096 refused, the default shortened */
    snprintf(mb, sizeof mb, "%.0f", file_mb + 64);
    setenv("CLINFER_GLOBAL_MEM_MB", mb, 1);
    o.plan_n_ctx = 4096;
    assert_int_equal(clinfer_model_load_with(model_path, NULL, NULL, &o, &m), CLINFER_ERR_MEMORY);
    tu_expect_in(clinfer_last_error(), "a context of 4096 positions does not fit");
    tu_expect_in(clinfer_last_error(), "KV cache");
    tu_expect_in(clinfer_last_error(), "the largest that fits is");
    o.plan_n_ctx = 0;
    notices[0] = 0;
    assert_int_equal(clinfer_model_load_with(model_path, NULL, NULL, &o, &m), CLINFER_OK);
    tu_expect_in(notices, "the largest that fits");
    clinfer_session *s;
    assert_int_equal(clinfer_session_create(m, NULL, &s), CLINFER_OK);
    const int n_ctx = clinfer_session_n_ctx(s);
    print_message("the default context on %s MiB: %d positions\n", mb, n_ctx);
    assert_true(n_ctx >= 256 && n_ctx < 4096);
    clinfer_session_free(s);
    clinfer_model_free(m);
    unsetenv("CLINFER_GLOBAL_MEM_MB");
}

/* VmHWM and VmRSS in bytes. */
static void memory(long *hwm, long *rss) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *hwm = *rss = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmHWM:", 6)) *hwm = atol(line + 6) * 1024;
        if (!strncmp(line, "VmRSS:", 6)) *rss = atol(line + 6) * 1024;
    }
    if (f) fclose(f);
}

/* Resets VmHWM to the current RSS (Linux 4.0 on); 0 when it cannot. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* One way of loading measured in a process of its own (this program run
 * as `--peak MODE MODEL WARMUP`, so no earlier load's freed buffers are
 * reused under the figure): the runtime, the compiler and the kernels made
 * resident first by a load of the small WARMUP model of the same type,
 * then the peak reset and MODEL loaded (MODE cold: into an empty cache
 * folder, warm: from the entry, memory: no_mmap) and evaluated. Exit 0
 * when the growth of the peak is at most the file + the KV cache + 10%. */
static int peak_child(const char *mode, const char *model, const char *warmup) {
    snprintf(model_path, sizeof model_path, "%s", warmup);
    free(load_eval(!strcmp(mode, "memory") ? "" : NULL));
    snprintf(model_path, sizeof model_path, "%s", model);
    struct stat sb;
    if (stat(model, &sb) != 0) return 2;
    const long file = (long)sb.st_size;
    const long kv = 2L * 8 * N_CTX * 1024 * 4; /* K and V, 8 layers, F32 rows of at most 1024 */
    long hwm, base;
    memory(&hwm, &base);
    if (!reset_peak()) {
        printf("cannot reset the peak\n");
        return 3;
    }
    free(load_eval(!strcmp(mode, "memory") ? "" : NULL));
    long peak, now;
    memory(&peak, &now);
    const long grew = peak - base, bound = file + kv + file / 10;
    printf("peak memory %s: %.1f MiB over the %.1f MiB before (file %.1f MiB, bound %.1f MiB)\n", mode,
           grew / 1048576.0, base / 1048576.0, file / 1048576.0, bound / 1048576.0);
    return grew <= bound ? 0 : 1;
}

/* Peak memory cold, warm and in memory, each in its own process. */
static void test_peak_memory(void **state) {
    (void)state;
    char dir[300], warmup[600], cmd[3000];
    int status;
    snprintf(warmup, sizeof warmup, "%s/warmup.gguf", work);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' Q4_0", getenv("CLINFER_TINY_GGUF"), warmup);
    assert_int_equal(system(cmd), 0);
    fresh_folder(dir, sizeof dir, "peak");
    const char *modes[] = {"cold", "warm", "memory"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "CLINFER_WEIGHT_CACHE='%s' /proc/%d/exe --peak %s '%s' '%s'", dir, (int)getpid(),
                 modes[i], model_path, warmup);
        char *out = tu_capture(cmd, &status);
        print_message("%s", out);
        if (status == 3) TU_SKIP_CAP("/proc/self/clear_refs cannot reset the peak (Linux < 4.0)");
        assert_int_equal(status, 0);
        free(out);
    }
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--peak")) return peak_child(argv[2], argv[3], argv[4]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cold_warm_identical), cmocka_unit_test(test_rebuilt),
        cmocka_unit_test(test_unwritable),          cmocka_unit_test(test_no_room),
        cmocka_unit_test(test_two_processes),       cmocka_unit_test(test_fit),
        cmocka_unit_test(test_peak_memory),
    };
    return TU_RUN_GROUP(tests, setup, teardown);
}

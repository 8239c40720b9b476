/* Runtime: device selection, program build, build errors, binary cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime.h"
#include "tensor.h"
#include "testutil.h"

static void test_select_by_index_and_name(void **state) {
    (void)state;
    clf_device *devs;
    int n, idx = -1;
    TU_OK(clf_devices_list(&devs, &n));
    assert_true(n > 0);
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", devs[n - 1].platform_index, devs[n - 1].device_index);
    TU_OK(clf_device_select(devs, n, sel, &idx));
    assert_int_equal(idx, n - 1);
    /* a case-flipped substring of the device name */
    char sub[8] = {0};
    for (int i = 0; i < 4 && devs[0].name[i]; i++) {
        char c = devs[0].name[i];
        sub[i] = (c >= 'a' && c <= 'z') ? (char)(c - 32) : (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    idx = -1;
    TU_OK(clf_device_select(devs, n, sub, &idx));
    assert_true(idx >= 0 && strncasecmp(devs[idx].name, sub, strlen(sub)) == 0);
    free(devs);
}

static void test_bad_selector_lists_devices(void **state) {
    (void)state;
    clf_device *devs;
    int n, idx;
    TU_OK(clf_devices_list(&devs, &n));
    assert_int_equal(clf_device_select(devs, n, "no-such-device-xyz", &idx), CLF_ERR_DEVICE);
    assert_non_null(strstr(clf_last_error(), "no-such-device-xyz"));
    assert_non_null(strstr(clf_last_error(), devs[0].name));
    assert_int_equal(clf_device_select(devs, n, "99:99", &idx), CLF_ERR_DEVICE);
    clf_runtime *rt = NULL;
    assert_int_equal(clf_runtime_create("no-such-device-xyz", &rt), CLF_ERR_DEVICE);
    assert_null(rt);
    free(devs);
}

static const char *SAXPY =
    "__kernel void saxpy(__global float *y, __global const float *x, const float a, const int n) {\n"
    "  int i = get_global_id(0); if (i < n) y[i] = a * x[i] + y[i]; }\n";

static void run_saxpy(clf_runtime *rt, cl_program prog) {
    uint64_t s = tu_seed() + 17;
    enum { N = 1001 };
    float x[N], y[N], out[N];
    tu_fill_uniform(&s, x, N, -1, 1);
    tu_fill_uniform(&s, y, N, -1, 1);
    float a = tu_uniform(&s, -2, 2);
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "saxpy", &err);
    assert_int_equal(err, CL_SUCCESS);
    clf_tensor tx, ty;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, N, 1, &tx));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, N, 1, &ty));
    TU_OK(clf_tensor_upload(rt, &tx, x, sizeof x));
    TU_OK(clf_tensor_upload(rt, &ty, y, sizeof y));
    int n = N;
    clSetKernelArg(k, 0, sizeof(cl_mem), &ty.mem);
    clSetKernelArg(k, 1, sizeof(cl_mem), &tx.mem);
    clSetKernelArg(k, 2, sizeof a, &a);
    clSetKernelArg(k, 3, sizeof n, &n);
    size_t g = 1024;
    TU_OK(clf_cl_check(clEnqueueNDRangeKernel(rt->queue, k, 1, NULL, &g, NULL, 0, NULL, NULL), "enqueue"));
    TU_OK(clf_tensor_download(rt, &ty, out, sizeof out));
    for (int i = 0; i < N; i++) assert_float_equal(out[i], a * x[i] + y[i], 1e-5);
    clReleaseKernel(k);
    clf_tensor_free(&tx);
    clf_tensor_free(&ty);
}

static void test_tiny_kernel_computes(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    cl_program prog;
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), "-DUNUSED=1", &prog));
    run_saxpy(rt, prog);
    clReleaseProgram(prog);
}

static void test_build_error_has_log(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    const char *bad = "__kernel void broken(__global float *y) { y[0] = undeclared_thing + ; }\n";
    cl_program prog = NULL;
    assert_int_equal(clf_program_build(rt, bad, strlen(bad), "", &prog), CLF_ERR_CL);
    assert_null(prog);
    assert_non_null(strstr(clf_last_error(), "build log"));
    assert_non_null(strstr(clf_last_error(), "undeclared_thing"));
}

static void count_call(void *ud) { ++*(int *)ud; }

/* The cache as the device's platform keeps it (on PoCL: a marker per
 * program, PoCL caching the build): a program missing from it is announced
 * once (on_build), found the second time, and its build time counted. */
static void test_kernel_cache(void **state) {
    (void)state;
    char dir[] = "/tmp/clinfer-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("CLINFER_CACHE_DIR", dir, 1);
    clf_runtime *rt;
    TU_OK(clf_runtime_create(NULL, &rt));
    int announced = 0;
    clf_runtime_on_build(rt, count_call, &announced);
    char opts[64];
    snprintf(opts, sizeof opts, "-DNONCE=%llu", (unsigned long long)tu_seed());
    cl_program p;
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 0);
    assert_int_equal(announced, 1);
    assert_true(rt->build_s > 0);
    clReleaseProgram(p);
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 1);
    assert_int_equal(announced, 1);
    run_saxpy(rt, p);
    clReleaseProgram(p);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/*.%s >/dev/null 2>&1", dir, rt->tune.binaries ? "bin" : "built");
    assert_int_equal(system(cmd), 0);
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The capability probe (host/cl/probe.c): PoCL's CPU device reports clang
 * and the host's cpuid bits; the answer is kept in the cache as caps-*.txt
 * and read back the same; a damaged file is probed again, not believed. */
static void test_capability_probe(void **state) {
    (void)state;
    char dir[] = "/tmp/clinfer-caps-XXXXXX", cmd[256];
    assert_non_null(mkdtemp(dir));
    setenv("CLINFER_CACHE_DIR", dir, 1);
    clf_runtime *rt;
    TU_OK(clf_runtime_create(NULL, &rt));
    const unsigned probed = rt->dev.caps;
    char names[512];
    clf_caps_text(probed, names, sizeof names);
    print_message("  %s: %s\n", rt->dev.name, names);
    const int pocl_cpu = (rt->dev.type & CL_DEVICE_TYPE_CPU) && strstr(rt->dev.platform_name, "Portable");
    if (pocl_cpu) {
        assert_true(probed & CLF_CAP_CLANG);
        assert_int_equal(probed & ~((1u << CLF_CAP_HOST_FIRST_BIT) - 1), clf_host_caps());
    }
    if (probed & CLF_CAP_AVX512BW) assert_true(probed & CLF_CAP_AVX2); /* what the compiler defines together */
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "test $(ls %s/caps-*.txt | wc -l) = 1", dir);
    assert_int_equal(system(cmd), 0);
    TU_OK(clf_runtime_create(NULL, &rt)); /* from the file */
    assert_int_equal(rt->dev.caps, probed);
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "for f in %s/caps-*.txt; do printf '# x\\nclang x86\\n' > $f; done", dir);
    assert_int_equal(system(cmd), 0);
    TU_OK(clf_runtime_create(NULL, &rt)); /* the file is what counts, not a new probe */
    assert_int_equal(rt->dev.caps, CLF_CAP_CLANG | CLF_CAP_X86 | (pocl_cpu ? clf_host_caps() : 0));
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "for f in %s/caps-*.txt; do printf '# x\\nnot-a-capability\\n' > $f; done", dir);
    assert_int_equal(system(cmd), 0);
    TU_OK(clf_runtime_create(NULL, &rt));
    assert_int_equal(rt->dev.caps, probed);
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    unsetenv("CLINFER_CACHE_DIR");
}

/* Program binaries in the cache (the mode of every platform but PoCL, forced
 * here so that it is tested on PoCL too): hits, and corrupt or truncated
 * files rebuilt. */
static void test_binary_cache(void **state) {
    (void)state;
    char dir[] = "/tmp/clinfer-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("CLINFER_CACHE_DIR", dir, 1);
    clf_runtime *rt;
    TU_OK(clf_runtime_create(NULL, &rt));
    rt->tune.binaries = 1;
    /* a unique option so the first build cannot be a hit */
    char opts[64];
    snprintf(opts, sizeof opts, "-DNONCE=%llu", (unsigned long long)tu_seed());
    cl_program p;
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 0);
    clReleaseProgram(p);
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 1);
    run_saxpy(rt, p);
    clReleaseProgram(p);
    /* corrupt every cache file: the build must notice, rebuild and work */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "for f in %s/*.bin; do printf 'garbage' | dd of=$f bs=1 seek=40 conv=notrunc 2>/dev/null; done", dir);
    assert_int_equal(system(cmd), 0);
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 0);
    run_saxpy(rt, p);
    clReleaseProgram(p);
    /* truncated file */
    snprintf(cmd, sizeof cmd, "for f in %s/*.bin; do truncate -s 10 $f; done", dir);
    assert_int_equal(system(cmd), 0);
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), opts, &p));
    assert_int_equal(rt->last_build_cached, 0);
    run_saxpy(rt, p);
    clReleaseProgram(p);
    clf_runtime_free(rt);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_unwritable_cache_dir(void **state) {
    (void)state;
    setenv("CLINFER_CACHE_DIR", "/proc/clinfer-cannot-exist", 1);
    clf_runtime *rt;
    TU_OK(clf_runtime_create(NULL, &rt));
    assert_string_equal(rt->cache_dir, "");
    cl_program p;
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), "", &p));
    run_saxpy(rt, p);
    clReleaseProgram(p);
    clf_runtime_free(rt);
}

static void test_embedded_kernel_lookup(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    cl_kernel k1, k2;
    TU_OK(clf_kernel_get(rt, "elementwise", "", "add_f32", &k1));
    TU_OK(clf_kernel_get(rt, "elementwise", "", "add_f32", &k2));
    assert_ptr_equal(k1, k2);
    assert_int_equal(clf_kernel_get(rt, "no_such_family", "", "x", &k1), CLF_ERR_ARG);
    assert_int_equal(clf_kernel_get(rt, "elementwise", "", "no_such_kernel", &k1), CLF_ERR_CL);
    assert_non_null(strstr(clf_last_error(), "CL_INVALID_KERNEL_NAME"));
}

static int always(void *ud) {
    (void)ud;
    return 1;
}

/* The abort hook stops a first run between program builds; what is built
 * is still served. */
static void test_abort_before_build(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    cl_kernel k;
    TU_OK(clf_kernel_get(rt, "elementwise", "", "add_f32", &k));
    clf_runtime_set_abort(rt, always, NULL);
    assert_int_equal(clf_kernel_get(rt, "elementwise", "-DCLF_UNBUILT=1", "add_f32", &k), CLF_ERR_INTERRUPTED);
    assert_string_equal(clf_last_error(), "stopped on request before building kernels 'elementwise'");
    TU_OK(clf_kernel_get(rt, "elementwise", "", "add_f32", &k));
    clf_runtime_set_abort(rt, NULL, NULL);
}

/* Every launch through clf_launch is counted (`clinfer bench` divides the
 * count by the tokens generated); one the device refuses is not. */
static void test_launch_counter(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    cl_program prog;
    TU_OK(clf_program_build(rt, SAXPY, strlen(SAXPY), "", &prog));
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "saxpy", &err);
    assert_int_equal(err, CL_SUCCESS);
    clf_tensor ty;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 64, 1, &ty));
    float a = 1;
    int n = 64;
    const clf_arg args[] = {CLF_ARG(ty.mem), CLF_ARG(ty.mem), CLF_ARG(a), CLF_ARG(n)};
    TU_OK(clf_set_args(k, args, CLF_NARGS(args)));
    uint64_t before = rt->launches;
    size_t g = 64, big = (size_t)1 << 30; /* a group past any device's limit */
    for (int i = 0; i < 3; i++) TU_OK(clf_launch(rt, k, 1, &g, NULL));
    assert_int_equal(clf_launch(rt, k, 1, &big, &big), CLF_ERR_CL);
    TU_OK(clf_finish(rt));
    assert_int_equal(rt->launches - before, 3);
    clf_tensor_free(&ty);
    clReleaseKernel(k);
    clReleaseProgram(prog);
}

static void test_error_names(void **state) {
    (void)state;
    assert_string_equal(clf_cl_error_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
    assert_int_equal(clf_cl_check(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer"), CLF_ERR_MEMORY);
    assert_non_null(strstr(clf_last_error(), "clCreateBuffer"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_by_index_and_name), cmocka_unit_test(test_bad_selector_lists_devices),
        cmocka_unit_test(test_tiny_kernel_computes),     cmocka_unit_test(test_build_error_has_log),
        cmocka_unit_test(test_embedded_kernel_lookup),   cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_binary_cache),             cmocka_unit_test(test_unwritable_cache_dir),
        cmocka_unit_test(test_kernel_cache),             cmocka_unit_test(test_abort_before_build),
        cmocka_unit_test(test_launch_counter),           cmocka_unit_test(test_capability_probe),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

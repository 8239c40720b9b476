/* The device-tuning table (host/cl/tuning.c): which row each kind of device
 * gets, the environment's overrides and their errors, and the tune file
 * `clinfer tune` writes. Devices here are descriptions, not OpenCL objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "runtime.h"
#include "tuning.h"

static clf_device device(cl_device_type type, const char *platform, const char *name) {
    clf_device d;
    memset(&d, 0, sizeof d);
    d.type = type;
    snprintf(d.platform_name, sizeof d.platform_name, "%s", platform);
    snprintf(d.vendor, sizeof d.vendor, "%s", platform);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.driver, sizeof d.driver, "1.0");
    snprintf(d.platform_version, sizeof d.platform_version, "OpenCL 3.0 test");
    return d;
}

static void clear_env(void) {
    unsetenv("CLINFER_MATMUL_VARIANT");
    unsetenv("CLINFER_ATTN_VARIANT");
    unsetenv("CLINFER_OPS_VARIANT");
    unsetenv("CLINFER_TUNE");
}

static clf_tuning resolve(const clf_device *d) {
    clf_tuning t;
    if (clf_tuning_resolve(d, "", &t) != CLF_OK) fail_msg("resolve: %s", clf_last_error());
    return t;
}

/* Each level of the table: the type's default, the platform's, the device's. */
static void test_rows(void **state) {
    (void)state;
    clear_env();
    const clf_device pocl_avx512 = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-znver4-AMD EPYC");
    const clf_device pocl_avx2 = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-haswell-Intel Xeon");
    const clf_device intel_cpu = device(CL_DEVICE_TYPE_CPU, "Intel(R) OpenCL", "Intel(R) Xeon(R) Gold");
    const clf_device nvidia = device(CL_DEVICE_TYPE_GPU, "NVIDIA CUDA", "NVIDIA H200");
    const clf_device fpga = device(CL_DEVICE_TYPE_ACCELERATOR, "Vendor X", "card");

    clf_tuning t = resolve(&pocl_avx512);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU);
    assert_int_equal(t.int8_gemv, 1);
    assert_int_equal(t.attn, CLF_SHAPE_CPU);
    assert_string_equal(t.row, "cpu/pocl/avx512");
    t = resolve(&pocl_avx2);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU);
    assert_int_equal(t.int8_gemv, 0);
    assert_string_equal(t.row, "cpu/pocl/*");
    t = resolve(&intel_cpu);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU_PORTABLE);
    assert_int_equal(t.ops, CLF_SHAPE_CPU);
    t = resolve(&nvidia);
    assert_int_equal(t.matmul, CLF_MATMUL_GPU);
    assert_int_equal(t.attn, CLF_SHAPE_GPU);
    assert_int_equal(t.ops, CLF_SHAPE_GPU);
    assert_int_equal(t.attn_split_keys, 64);
    assert_int_equal(t.int8_gemv, 1); /* the gpu variant's int8 GEMVs, */
    assert_int_equal(t.int8_gemm, 0); /* not the cpu family's GEMM */
    assert_string_equal(t.row, "gpu/*/*");
    assert_int_equal(clf_tuning_override(&nvidia, &t, "int8_gemv=0"), CLF_OK); /* float GEMVs on a GPU */
    assert_int_equal(t.int8_gemv, 0);
    t = resolve(&fpga);
    assert_int_equal(t.matmul, CLF_MATMUL_GPU);
    assert_int_equal(t.tuned, 0);
}

static void expect_arg_error(const clf_device *d, const char *needle) {
    clf_tuning t;
    assert_int_equal(clf_tuning_resolve(d, "", &t), CLF_ERR_ARG);
    if (!strstr(clf_last_error(), needle)) fail_msg("message '%s' lacks '%s'", clf_last_error(), needle);
}

/* One policy for every override: documented values or a clear error. */
static void test_env_overrides(void **state) {
    (void)state;
    clear_env();
    const clf_device pocl = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-znver4");
    const clf_device intel_cpu = device(CL_DEVICE_TYPE_CPU, "Intel(R) OpenCL", "Xeon");
    setenv("CLINFER_MATMUL_VARIANT", "gpu", 1);
    setenv("CLINFER_ATTN_VARIANT", "GPU", 1);
    setenv("CLINFER_OPS_VARIANT", "auto", 1);
    clf_tuning t = resolve(&pocl);
    assert_int_equal(t.matmul, CLF_MATMUL_GPU);
    assert_int_equal(t.int8_gemv, 1); /* the gpu family has int8 GEMVs too (integer dot products) */
    assert_int_equal(t.int8_gemm, 0); /* but the int8 GEMM and VNNI are the cpu family's */
    assert_int_equal(t.int8_vnni, 0);
    assert_int_equal(t.attn, CLF_SHAPE_GPU);
    assert_int_equal(t.ops, CLF_SHAPE_CPU);
    assert_non_null(strstr(t.overrides, "matmul=gpu"));
    setenv("CLINFER_MATMUL_VARIANT", "cpu", 1); /* needs clang's __fp16: portable off PoCL */
    assert_int_equal(resolve(&intel_cpu).matmul, CLF_MATMUL_CPU_PORTABLE);
    clear_env();

    setenv("CLINFER_MATMUL_VARIANT", "fpga", 1);
    expect_arg_error(&pocl, "CLINFER_MATMUL_VARIANT must be cpu, cpu-portable, gpu or auto, not 'fpga'");
    clear_env();
    setenv("CLINFER_ATTN_VARIANT", "fpga", 1);
    expect_arg_error(&pocl, "CLINFER_ATTN_VARIANT");
    clear_env();
    setenv("CLINFER_OPS_VARIANT", "cpux", 1);
    expect_arg_error(&pocl, "CLINFER_OPS_VARIANT");
    clear_env();

    setenv("CLINFER_TUNE", "gemm_tm=12  attn_split_keys=128", 1);
    t = resolve(&pocl);
    assert_int_equal(t.gemm_tm, 12);
    assert_int_equal(t.attn_split_keys, 128);
    setenv("CLINFER_TUNE", "gemm_tm=99", 1);
    expect_arg_error(&pocl, "gemm_tm must be a whole number from 2 to 16, not '99'");
    setenv("CLINFER_TUNE", "nosuch=1", 1);
    expect_arg_error(&pocl, "no tuning parameter 'nosuch'");
    setenv("CLINFER_TUNE", "gemm_tm", 1);
    expect_arg_error(&pocl, "expected name=value");
    setenv("CLINFER_TUNE", "matmul=cpu-portable", 1);
    assert_int_equal(resolve(&pocl).matmul, CLF_MATMUL_CPU_PORTABLE);
    clear_env();
}

/* int8_vnni is a capability: kept only for PoCL's CPU device (the host
 * CPU) where that CPU reports avx512vnni, whatever a row or override asks;
 * CLINFER_TUNE can turn it off. The int8 GEMM (int8_gemm) and VNNI go with
 * the int8 products. */
static void test_int8_capabilities(void **state) {
    (void)state;
    clear_env();
    const clf_device pocl = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-znver4-AMD EPYC");
    const clf_device pocl_avx2 = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-haswell-Intel Xeon");
    const clf_device pocl_gpu = device(CL_DEVICE_TYPE_GPU, "Portable Computing Language", "avx512 remote");
    clf_tuning t = resolve(&pocl);
    assert_int_equal(t.int8_vnni, clf_host_has_vnni());
    assert_int_equal(t.int8_gemm, 2);
    t = resolve(&pocl_avx2); /* no int8 products: neither */
    assert_int_equal(t.int8_vnni, 0);
    assert_int_equal(t.int8_gemm, 0);
    assert_int_equal(clf_tuning_override(&pocl_avx2, &t, "int8_gemv=1 int8_vnni=1 int8_gemm=8"), CLF_OK);
    assert_int_equal(t.int8_vnni, clf_host_has_vnni());
    assert_int_equal(t.int8_gemm, 8);
    t = resolve(&pocl_gpu);
    assert_int_equal(clf_tuning_override(&pocl_gpu, &t, "matmul=cpu int8_gemv=1 int8_vnni=1"), CLF_OK);
    assert_int_equal(t.int8_vnni, 0); /* not the host CPU */
    setenv("CLINFER_TUNE", "int8_vnni=0", 1);
    t = resolve(&pocl);
    assert_int_equal(t.int8_vnni, 0);
    assert_int_equal(t.int8_gemv, 1);
    setenv("CLINFER_TUNE", "int8_gemm=0", 1);
    assert_int_equal(resolve(&pocl).int8_gemm, 0);
    setenv("CLINFER_TUNE", "int8_vnni=2", 1);
    expect_arg_error(&pocl, "int8_vnni must be a whole number from 0 to 1, not '2'");
    clear_env();
}

/* clf_tuning_format writes what clf_tuning_apply reads, for every parameter. */
static void test_format_round_trip(void **state) {
    (void)state;
    clear_env();
    const clf_device nvidia = device(CL_DEVICE_TYPE_GPU, "NVIDIA CUDA", "NVIDIA H200");
    clf_tuning a = resolve(&nvidia), b;
    memset(&b, 0, sizeof b);
    char text[1024];
    clf_tuning_format(&a, text, sizeof text);
    assert_int_equal(clf_tuning_apply(&b, text, "test"), CLF_OK);
    for (int i = 0; clf_tuning_param_name(i); i++) {
        char va[32], vb[32];
        clf_tuning_value_text(&a, i, va, sizeof va);
        clf_tuning_value_text(&b, i, vb, sizeof vb);
        assert_string_equal(va, vb);
        assert_non_null(clf_tuning_param_help(i));
    }
}

/* The tune file: saved values come back for the same device and driver
 * only; the environment still wins; a damaged file is a format error. */
static void test_tune_file(void **state) {
    (void)state;
    clear_env();
    char dir[] = "/tmp/clinfer-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    clf_device d = device(CL_DEVICE_TYPE_CPU, "Portable Computing Language", "cpu-znver4");
    clf_tuning t = resolve(&d);
    assert_int_equal(clf_tuning_override(&d, &t, "int8_ppw=2 gemm_mg=8"), CLF_OK);
    assert_int_equal(clf_tuning_save(&d, dir, &t), CLF_OK);
    clf_tuning u;
    assert_int_equal(clf_tuning_resolve(&d, dir, &u), CLF_OK);
    assert_int_equal(u.tuned, 1);
    assert_int_equal(u.int8_ppw, 2);
    assert_int_equal(u.gemm_mg, 8);
    setenv("CLINFER_TUNE", "gemm_mg=4", 1);
    assert_int_equal(clf_tuning_resolve(&d, dir, &u), CLF_OK);
    assert_int_equal(u.gemm_mg, 4);
    clear_env();
    clf_device other = d;
    snprintf(other.driver, sizeof other.driver, "2.0"); /* a new driver: measure again */
    assert_int_equal(clf_tuning_resolve(&other, dir, &u), CLF_OK);
    assert_int_equal(u.tuned, 0);
    assert_int_equal(u.int8_ppw, 4);

    char path[1100];
    clf_tuning_path(&d, dir, path, sizeof path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("int8_ppw=banana\n", f);
    fclose(f);
    assert_int_equal(clf_tuning_resolve(&d, dir, &u), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "tune file"));
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_env_overrides),
        cmocka_unit_test(test_int8_capabilities),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_tune_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

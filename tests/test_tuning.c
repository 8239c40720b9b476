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

/* PoCL's probe on an AVX-512 host with VNNI (Zen 4: the compiler targets
 * skylake-avx512, cpuid adds VNNI), on an AVX2 host (Zen 2), and on an AVX2
 * host with AVX-VNNI (Alder Lake): what host/cl/probe.c would set. */
#define CAPS_AVX2 (CLF_CAP_CLANG | CLF_CAP_X86 | CLF_CAP_AVX2 | CLF_CAP_FMA | CLF_CAP_HOST_AVX2)
#define CAPS_AVX512 (CAPS_AVX2 | CLF_CAP_AVX512BW | CLF_CAP_AVX512VL | CLF_CAP_HOST_AVX512BW | \
                     CLF_CAP_HOST_AVX512VL | CLF_CAP_HOST_AVX512VNNI)
#define CAPS_AVXVNNI (CAPS_AVX2 | CLF_CAP_HOST_AVXVNNI)

static clf_device device_caps(cl_device_type type, const char *platform, const char *name, unsigned caps) {
    clf_device d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.caps = caps;
    snprintf(d.platform_name, sizeof d.platform_name, "%s", platform);
    snprintf(d.vendor, sizeof d.vendor, "%s", platform);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.driver, sizeof d.driver, "1.0");
    snprintf(d.platform_version, sizeof d.platform_version, "OpenCL 3.0 test");
    return d;
}
/* PoCL's CPU devices probe as the host they name; other drivers' as none. */
static clf_device device(cl_device_type type, const char *platform, const char *name) {
    const int pocl_cpu = type == CL_DEVICE_TYPE_CPU && strstr(platform, "Portable");
    return device_caps(type, platform, name, !pocl_cpu ? 0 : strstr(name, "haswell") ? CAPS_AVX2 : CAPS_AVX512);
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
    assert_int_equal(t.int8_width, CLF_INT8_512);
    assert_int_equal(t.attn, CLF_SHAPE_CPU);
    assert_string_equal(t.row, "cpu/pocl/*");
    t = resolve(&pocl_avx2);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU);
    assert_int_equal(t.int8_gemv, 1);
    assert_int_equal(t.int8_width, CLF_INT8_256);
    assert_string_equal(t.row, "cpu/*/*/int8-256"); /* the last row applied: its width's */
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

/* The int8 kernels follow the probed capabilities, never the device's
 * name: the widest width the compiler targets, at most int8_width; none
 * without AVX2 or off x86 (the portable float kernels); vpdpbusd in the
 * form the CPU has (EVEX with AVX512-VNNI, at 256 bits only with VL; VEX
 * with AVX-VNNI), 0 without one, whatever a row or override asks. The int8
 * GEMM (int8_gemm) and VNNI go with the int8 products. */
static void test_int8_capabilities(void **state) {
    (void)state;
    clear_env();
    const char *pocl_name = "Portable Computing Language";
    /* the name says avx512; the probe is what counts */
    const clf_device avx512 = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-avx2-named", CAPS_AVX512);
    const clf_device avx2 = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-skylake-avx512-named", CAPS_AVX2);
    const clf_device avxvnni = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-alderlake", CAPS_AVXVNNI);
    const clf_device arm = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-neoverse", CLF_CAP_CLANG | CLF_CAP_NEON);
    const clf_device no_clang = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-x", CAPS_AVX512 & ~CLF_CAP_CLANG);
    const clf_device pocl_gpu = device_caps(CL_DEVICE_TYPE_GPU, pocl_name, "avx512 remote", 0);

    clf_tuning t = resolve(&avx512);
    assert_int_equal(t.int8_width, CLF_INT8_512);
    assert_int_equal(t.int8_vnni, 1);
    assert_int_equal(t.int8_gemm, 2);
    t = resolve(&avx2);
    assert_int_equal(t.int8_gemv, 1);
    assert_int_equal(t.int8_width, CLF_INT8_256);
    assert_int_equal(t.int8_vnni, 0); /* no vpdpbusd on this CPU */
    assert_int_equal(t.int8_gemm, 2);
    t = resolve(&avxvnni);
    assert_int_equal(t.int8_width, CLF_INT8_256);
    assert_int_equal(t.int8_vnni, 2);
    assert_int_equal(clf_tuning_override(&avxvnni, &t, "int8_width=512"), CLF_OK);
    assert_int_equal(t.int8_width, CLF_INT8_256); /* at most what it targets */
    t = resolve(&arm);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU);
    assert_int_equal(t.int8_gemv, 0);
    assert_int_equal(t.int8_width, CLF_INT8_AUTO);
    assert_int_equal(t.int8_vnni + t.int8_gemm, 0);
    t = resolve(&no_clang);
    assert_int_equal(t.matmul, CLF_MATMUL_CPU_PORTABLE);
    assert_int_equal(t.int8_gemv, 0);

    /* the AVX2 kernels on an AVX-512 CPU: EVEX vpdpbusd on ymm (VL) */
    setenv("CLINFER_TUNE", "int8_width=256", 1);
    t = resolve(&avx512);
    assert_int_equal(t.int8_width, CLF_INT8_256);
    assert_int_equal(t.int8_vnni, 1);
    assert_int_equal(clf_tuning_override(&avx512, &t, "int8_vnni=2"), CLF_OK);
    assert_int_equal(t.int8_vnni, 1); /* no AVX-VNNI on it: the form it has */
    const clf_device no_vl = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-x",
                                         CAPS_AVX512 & ~(CLF_CAP_AVX512VL | CLF_CAP_HOST_AVX512VL));
    assert_int_equal(resolve(&no_vl).int8_vnni, 0);
    clear_env();

    t = resolve(&pocl_gpu);
    assert_int_equal(clf_tuning_override(&pocl_gpu, &t, "matmul=cpu int8_gemv=1 int8_vnni=1"), CLF_OK);
    assert_int_equal(t.int8_gemv, 0); /* nothing probed: no x86 kernels */
    assert_int_equal(t.int8_vnni, 0);
    setenv("CLINFER_TUNE", "int8_vnni=0", 1);
    t = resolve(&avx512);
    assert_int_equal(t.int8_vnni, 0);
    assert_int_equal(t.int8_gemv, 1);
    setenv("CLINFER_TUNE", "int8_gemm=0", 1);
    assert_int_equal(resolve(&avx512).int8_gemm, 0);
    setenv("CLINFER_TUNE", "int8_vnni=3", 1);
    expect_arg_error(&avx512, "int8_vnni must be a whole number from 0 to 2, not '3'");
    setenv("CLINFER_TUNE", "int8_width=128", 1);
    expect_arg_error(&avx512, "int8_width must be one of auto, 256, 512, not '128'");
    clear_env();
}

/* Rows keyed by int8 width apply once the capabilities fix the width: an
 * AVX2 device and an AVX-512 one forced to 256 bits get the same values,
 * the 512-bit device its own; the environment still has the last word. */
static void test_width_rows(void **state) {
    (void)state;
    clear_env();
    const char *pocl_name = "Portable Computing Language";
    const clf_device avx2 = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-a", CAPS_AVX2);
    const clf_device avx512 = device_caps(CL_DEVICE_TYPE_CPU, pocl_name, "cpu-b", CAPS_AVX512);
    const clf_tuning t2 = resolve(&avx2), t5 = resolve(&avx512);
    assert_non_null(strstr(t2.row, "int8-256"));
    assert_null(strstr(t5.row, "int8-256"));
    setenv("CLINFER_TUNE", "int8_width=256", 1);
    clf_tuning f = resolve(&avx512);
    assert_string_equal(f.row, t2.row);
    assert_int_equal(f.int8_ppw, t2.int8_ppw);
    assert_int_equal(f.int8_tm, t2.int8_tm);
    setenv("CLINFER_TUNE", "int8_width=256 int8_ppw=7 int8_tm=5", 1);
    f = resolve(&avx512);
    assert_int_equal(f.int8_ppw, 7);
    assert_int_equal(f.int8_tm, 5);
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
        cmocka_unit_test(test_int8_capabilities), cmocka_unit_test(test_width_rows),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_tune_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

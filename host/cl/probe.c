/* The device's capabilities (CLF_CAP_*, runtime.h): what its compiler
 * targets, from cl/probe.cl run once, and for PoCL's CPU device what the
 * host CPU executes, from cpuid (the kernels' inline asm needs only the
 * CPU, not the compiler's target).
 *
 * The probe's answer is kept in the kernel cache as caps-<key>.txt, key =
 * FNV-1a over the probe's source, the device name, driver and platform
 * version (as the kernel binaries'): one comment line, then the compiler's
 * capability names separated by spaces. A missing or unreadable file means
 * probing again; the file is written to a temporary name and renamed. */
#include "runtime_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"

static const char *const CAP_NAMES[CLF_CAP_COUNT] = {
    [CLF_CAP_CLANG_BIT] = "clang",        [CLF_CAP_X86_BIT] = "x86",
    [CLF_CAP_AVX2_BIT] = "avx2",          [CLF_CAP_AVX512BW_BIT] = "avx512bw",
    [CLF_CAP_AVX512VL_BIT] = "avx512vl",  [CLF_CAP_AVX512VNNI_BIT] = "avx512vnni",
    [CLF_CAP_AVXVNNI_BIT] = "avxvnni",    [CLF_CAP_FMA_BIT] = "fma",
    [CLF_CAP_NEON_BIT] = "neon",          [CLF_CAP_DOTPROD_BIT] = "dotprod",
    [CLF_CAP_HOST_AVX2_BIT] = "host-avx2", [CLF_CAP_HOST_AVX512BW_BIT] = "host-avx512bw",
    [CLF_CAP_HOST_AVX512VL_BIT] = "host-avx512vl", [CLF_CAP_HOST_AVX512VNNI_BIT] = "host-avx512vnni",
    [CLF_CAP_HOST_AVXVNNI_BIT] = "host-avxvnni",
};

const char *clf_cap_name(int bit) { return bit >= 0 && bit < CLF_CAP_COUNT ? CAP_NAMES[bit] : NULL; }

void clf_caps_text(unsigned caps, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int b = 0; b < CLF_CAP_COUNT && used < n; b++)
        if (caps >> b & 1) used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? " " : "", CAP_NAMES[b]);
}

/* gcc and clang on x86 ask cpuid; 0 elsewhere. */
unsigned clf_host_caps(void) {
    unsigned c = 0;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) c |= CLF_CAP_HOST_AVX2;
    if (__builtin_cpu_supports("avx512bw")) c |= CLF_CAP_HOST_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) c |= CLF_CAP_HOST_AVX512VL;
    if (__builtin_cpu_supports("avx512vnni")) c |= CLF_CAP_HOST_AVX512VNNI;
    /* AVX-VNNI: cpuid leaf 7 subleaf 1, eax bit 4 (clang 14's
     * __builtin_cpu_supports has no name for it); ymm state as for AVX2 */
    unsigned a, b, cx, dx;
    if ((c & CLF_CAP_HOST_AVX2) && __get_cpuid_count(7, 1, &a, &b, &cx, &dx) && (a >> 4 & 1)) c |= CLF_CAP_HOST_AVXVNNI;
#endif
    return c;
}

static uint64_t probe_key(const clf_device *d, const char *src, size_t len) {
    uint64_t k = clf_fnv1a(CLF_FNV1A_SEED, src, len);
    k = clf_fnv1a_str(k, d->name);
    k = clf_fnv1a_str(k, d->driver);
    return clf_fnv1a_str(k, d->platform_version);
}

static int caps_read(const char *path, unsigned *caps) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[512];
    int ok = 0;
    *caps = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        ok = 1;
        for (char *save = NULL, *w = strtok_r(line, " \n", &save); w && ok; w = strtok_r(NULL, " \n", &save)) {
            int b = 0;
            while (b < CLF_CAP_COUNT && strcmp(CAP_NAMES[b], w)) b++;
            if (b == CLF_CAP_COUNT || b >= CLF_CAP_HOST_FIRST_BIT) ok = 0; /* a name this build does not write */
            else *caps |= 1u << b;
        }
        break;
    }
    fclose(f);
    return ok;
}

static void caps_write(const char *path, const clf_device *d, unsigned caps) {
    char tmp[1200], names[512];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    clf_caps_text(caps, names, sizeof names);
    int ok = fprintf(f, "# clinfer probe: %s, driver %s, %s\n%s\n", d->name, d->driver, d->platform_version, names) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* Runs probe_caps on the device: 1 and its bits, or 0 when it cannot (a
 * device that cannot build this cannot build the kernels either, and says
 * so there; no bits only keeps every x86 path off). */
static int probe_run(clf_runtime *rt, unsigned *caps) {
    cl_kernel k;
    *caps = 0;
    if (clf_kernel_get(rt, "probe", "", "probe_caps", &k) != CLF_OK) return 0;
    cl_int err;
    cl_mem out = clCreateBuffer(rt->ctx, CL_MEM_WRITE_ONLY, sizeof(cl_uint), NULL, &err);
    if (err != CL_SUCCESS) return 0;
    cl_uint bits = 0;
    const size_t one = 1;
    const int ok = clSetKernelArg(k, 0, sizeof out, &out) == CL_SUCCESS &&
                   clEnqueueNDRangeKernel(rt->queue, k, 1, NULL, &one, &one, 0, NULL, NULL) == CL_SUCCESS &&
                   clEnqueueReadBuffer(rt->queue, out, CL_TRUE, 0, sizeof bits, &bits, 0, NULL, NULL) == CL_SUCCESS;
    clReleaseMemObject(out);
    if (ok) *caps = bits & ((1u << CLF_CAP_HOST_FIRST_BIT) - 1);
    return ok;
}

void clf_device_probe(clf_runtime *rt) {
    clf_device *d = &rt->dev;
    char *src = NULL, path[1100] = "";
    size_t len = 0;
    unsigned caps = 0;
    int found = 0;
    if (clf_kernel_source("probe", &src, &len) == CLF_OK && rt->cache_dir[0]) {
        snprintf(path, sizeof path, "%s/caps-%016llx.txt", rt->cache_dir, (unsigned long long)probe_key(d, src, len));
        found = caps_read(path, &caps);
    }
    free(src);
    if (!found && probe_run(rt, &caps) && path[0]) caps_write(path, d, caps);
    /* PoCL's CPU device is the host CPU: what it executes, for inline asm */
    if ((d->type & CL_DEVICE_TYPE_CPU) && strstr(d->platform_name, "Portable Computing Language"))
        caps |= clf_host_caps();
    d->caps = caps;
}

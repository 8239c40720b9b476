/* Program builds from the embedded kernel sources through the binary cache
 * (or, where the tuning says so, the driver's own), and the kernel cache. */
#include "runtime_impl.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"

/* ---- program build and binary cache ------------------------------------ */

#define CACHE_MAGIC 0x42464c43u /* "CLFB" */

/* Cache file: magic u32, key u64, size u64, checksum u64, binary. */
static unsigned char *cache_read(const char *path, uint64_t key, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint32_t magic;
    uint64_t k, size, sum;
    unsigned char *bin = NULL;
    if (fread(&magic, 4, 1, f) == 1 && fread(&k, 8, 1, f) == 1 && fread(&size, 8, 1, f) == 1 &&
        fread(&sum, 8, 1, f) == 1 && magic == CACHE_MAGIC && k == key && size > 0 && size < (1ull << 30)) {
        bin = malloc(size);
        if (bin && (fread(bin, 1, size, f) != size || clf_fnv1a(CLF_FNV1A_SEED, bin, size) != sum)) {
            free(bin);
            bin = NULL;
        }
        *len = size;
    }
    fclose(f);
    return bin;
}

static void cache_write(const char *path, uint64_t key, const unsigned char *bin, size_t len) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    uint32_t magic = CACHE_MAGIC;
    uint64_t size = len, sum = clf_fnv1a(CLF_FNV1A_SEED, bin, len);
    int ok = fwrite(&magic, 4, 1, f) == 1 && fwrite(&key, 8, 1, f) == 1 && fwrite(&size, 8, 1, f) == 1 &&
             fwrite(&sum, 8, 1, f) == 1 && fwrite(bin, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static clf_status build_log_error(clf_runtime *rt, cl_program prog, cl_int err) {
    size_t n = 0;
    clGetProgramBuildInfo(prog, rt->dev.id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *log = malloc(n + 1);
    if (log) {
        log[0] = 0;
        clGetProgramBuildInfo(prog, rt->dev.id, CL_PROGRAM_BUILD_LOG, n, log, NULL);
        log[n] = 0;
    }
    clf_status st = clf_fail(CLF_ERR_CL, "clBuildProgram failed: %s; build log:\n%s", clf_cl_error_name(err),
                             log ? log : "(unavailable)");
    free(log);
    return st;
}

void clf_runtime_on_build(clf_runtime *rt, void (*fn)(void *ud), void *ud) {
    rt->on_build = fn;
    rt->on_build_ud = ud;
}

void clf_runtime_on_notice(clf_runtime *rt, void (*fn)(void *ud, const char *line), void *ud) {
    rt->notice_fn = fn;
    rt->notice_ud = ud;
}

void clf_runtime_notice(const clf_runtime *rt, const char *fmt, ...) {
    if (!rt->notice_fn) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rt->notice_fn(rt->notice_ud, line);
}

/* PoCL: an empty file per program built; its presence is the cache hit. */
static int marker_present(const char *path) { return access(path, F_OK) == 0; }

static void marker_write(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
}

static clf_status program_build(clf_runtime *rt, const char *src, size_t len, const char *options,
                                cl_program *out) {
    char opts[2048];
    /* -w: on an AVX2 target clang counts a "changes the ABI" warning for every
     * inline function of 512-bit vectors (all inlined, so none applies) and
     * PoCL prints each count on stderr, inside the text being generated; a
     * failed build still has its log. CLINFER_KERNEL_WARNINGS=1 keeps them
     * for whoever edits the kernels (a key of its own: rebuilt once). */
    const char *warn = getenv("CLINFER_KERNEL_WARNINGS");
    snprintf(opts, sizeof opts, "-cl-std=CL1.2%s %s", warn && !strcmp(warn, "1") ? "" : " -w", options ? options : "");
    uint64_t key = clf_fnv1a(CLF_FNV1A_SEED, src, len);
    key = clf_fnv1a_str(key, opts);
    key = clf_fnv1a_str(key, rt->dev.name);
    key = clf_fnv1a_str(key, rt->dev.driver);
    key = clf_fnv1a_str(key, rt->dev.platform_version);
    char path[1100] = "";
    cl_int err;
    rt->last_build_cached = 0;
    *out = NULL;
    if (rt->cache_dir[0] && !rt->tune.binaries) {
        /* the marker stands for PoCL's cache where it is now */
        const char *pocl = getenv("POCL_CACHE_DIR");
        uint64_t mkey = clf_fnv1a_str(key, pocl ? pocl : "");
        snprintf(path, sizeof path, "%s/%016llx.built", rt->cache_dir, (unsigned long long)mkey);
        rt->last_build_cached = marker_present(path);
    } else if (rt->cache_dir[0]) {
        snprintf(path, sizeof path, "%s/%016llx.bin", rt->cache_dir, (unsigned long long)key);
        size_t blen = 0;
        unsigned char *bin = cache_read(path, key, &blen);
        if (bin) {
            const unsigned char *bins[1] = {bin};
            cl_int bst;
            cl_program p = clCreateProgramWithBinary(rt->ctx, 1, &rt->dev.id, &blen, bins, &bst, &err);
            free(bin);
            if (err == CL_SUCCESS && bst == CL_SUCCESS && clBuildProgram(p, 1, &rt->dev.id, opts, NULL, NULL) == CL_SUCCESS) {
                rt->last_build_cached = 1;
                *out = p;
                return CLF_OK;
            }
            if (p) clReleaseProgram(p); /* stale or corrupt: fall through and rebuild */
        }
    }
    if (!rt->last_build_cached && rt->on_build) rt->on_build(rt->on_build_ud);
    cl_program p = clCreateProgramWithSource(rt->ctx, 1, &src, &len, &err);
    CLF_TRY(clf_cl_check(err, "clCreateProgramWithSource"));
    err = clBuildProgram(p, 1, &rt->dev.id, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        clf_status st = build_log_error(rt, p, err);
        clReleaseProgram(p);
        return st;
    }
    if (path[0] && !rt->tune.binaries) {
        if (!rt->last_build_cached) marker_write(path);
    } else if (path[0]) {
        size_t blen = 0;
        if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) == CL_SUCCESS && blen) {
            unsigned char *bin = malloc(blen);
            if (bin && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
                cache_write(path, key, bin, blen);
            free(bin);
        }
    }
    *out = p;
    return CLF_OK;
}

clf_status clf_program_build(clf_runtime *rt, const char *src, size_t len, const char *options,
                             cl_program *out) {
    double t0 = clf_now_s();
    clf_status st = program_build(rt, src, len, options, out);
    rt->build_s += clf_now_s() - t0;
    return st;
}

static const clf_cl_source *embedded(const char *family) {
    for (int i = 0; i < clf_cl_nsources; i++)
        if (strcmp(clf_cl_sources[i].name, family) == 0) return &clf_cl_sources[i];
    return NULL;
}

static clf_status read_part(const char *family, char **buf, size_t *len) {
    const char *dir = getenv("CLINFER_KERNEL_DIR");
    if (dir && *dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.cl", dir, family);
        FILE *f = fopen(path, "rb");
        if (!f) return clf_fail(CLF_ERR_IO, "cannot open kernel source %s (CLINFER_KERNEL_DIR)", path);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *grown = n >= 0 ? realloc(*buf, *len + (size_t)n + 1) : NULL;
        if (!grown || fread(grown + *len, 1, (size_t)n, f) != (size_t)n) {
            fclose(f);
            if (grown) *buf = grown;
            return clf_fail(CLF_ERR_IO, "cannot read kernel source %s", path);
        }
        fclose(f);
        *buf = grown;
        *len += (size_t)n;
        (*buf)[*len] = 0;
        return CLF_OK;
    }
    const clf_cl_source *s = embedded(family);
    if (!s) return clf_fail(CLF_ERR_ARG, "no kernel family '%s' in this build", family);
    char *grown = realloc(*buf, *len + s->len + 1);
    if (!grown) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    memcpy(grown + *len, s->data, s->len);
    *buf = grown;
    *len += s->len;
    (*buf)[*len] = 0;
    return CLF_OK;
}

clf_status clf_kernel_source(const char *family, char **src, size_t *len) {
    *src = NULL;
    *len = 0;
    /* the type table (cl/types.cl), then what every family shares */
    clf_status st = strcmp(family, "types") ? read_part("types", src, len) : CLF_OK;
    if (st == CLF_OK && strcmp(family, "types") && strcmp(family, "common")) st = read_part("common", src, len);
    if (st == CLF_OK) st = read_part(family, src, len);
    if (st != CLF_OK) {
        free(*src);
        *src = NULL;
    }
    return st;
}

clf_status clf_kernel_get(clf_runtime *rt, const char *family, const char *options, const char *kernel_name,
                          cl_kernel *out) {
    if (!options) options = "";
    uint64_t pkey = clf_fnv1a_str(clf_fnv1a_str(0xcbf29ce484222325ull, family), options);
    uint64_t kkey = clf_fnv1a_str(pkey, kernel_name);
    for (int i = 0; i < rt->nkernels; i++)
        if (rt->kernels[i].key == kkey && strcmp(rt->kernels[i].name, kernel_name) == 0) {
            *out = rt->kernels[i].kernel;
            return CLF_OK;
        }
    cl_program prog = NULL;
    int cold = 0;
    for (int i = 0; i < rt->nprograms; i++)
        if (rt->programs[i].key == pkey) prog = rt->programs[i].program, cold = rt->programs[i].cold;
    if (!prog) {
        /* a first run builds for seconds: the abort hook may stop it between programs */
        if (clf_runtime_aborted(rt)) return clf_fail(CLF_ERR_INTERRUPTED, "stopped on request before building kernels '%s'", family);
        char *src;
        size_t len;
        CLF_TRY(clf_kernel_source(family, &src, &len));
        clf_status st = clf_program_build(rt, src, len, options, &prog);
        free(src);
        if (st != CLF_OK) return clf_fail_ctx(st, "building kernels '%s' [%s]: ", family, options);
        clf_program_entry *grown = realloc(rt->programs, (size_t)(rt->nprograms + 1) * sizeof *grown);
        if (!grown) {
            clReleaseProgram(prog);
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        rt->programs = grown;
        cold = !rt->last_build_cached;
        rt->programs[rt->nprograms++] = (clf_program_entry){pkey, prog, cold};
    }
    cl_int err;
    cl_kernel k = clCreateKernel(prog, kernel_name, &err);
    if (err != CL_SUCCESS) {
        clf_cl_check(err, "clCreateKernel");
        return clf_fail_ctx(CLF_ERR_CL, "kernel %s in '%s': ", kernel_name, family);
    }
    clf_kernel_entry *grown = realloc(rt->kernels, (size_t)(rt->nkernels + 1) * sizeof *grown);
    char *name = strdup(kernel_name);
    if (!grown || !name) {
        if (grown) rt->kernels = grown;
        free(name);
        clReleaseKernel(k);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    rt->kernels = grown;
    rt->kernels[rt->nkernels++] = (clf_kernel_entry){kkey, name, k, cold};
    rt->cold_kernels += cold;
    *out = k;
    return CLF_OK;
}

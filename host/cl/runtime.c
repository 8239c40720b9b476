#include "runtime.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Generated at build time from the cl/ folder (cmake/embed.cmake). */
typedef struct { const char *name; const unsigned char *data; size_t len; } clf_cl_source;
extern const clf_cl_source clf_cl_sources[];
extern const int clf_cl_nsources;

struct clf_program_entry { uint64_t key; cl_program program; };
struct clf_kernel_entry { uint64_t key; char *name; cl_kernel kernel; };

const char *clf_cl_error_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

clf_status clf_cl_check(cl_int err, const char *what) {
    if (err == CL_SUCCESS) return CLF_OK;
    clf_status st = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
                     err == CL_INVALID_BUFFER_SIZE)
                        ? CLF_ERR_MEMORY
                        : CLF_ERR_CL;
    return clf_fail(st, "%s failed: %s (%d)", what, clf_cl_error_name(err), err);
}

clf_status clf_buffer_create(clf_runtime *rt, cl_mem_flags flags, size_t bytes, void *host,
                             cl_mem *out) {
    cl_int err;
    *out = NULL;
    if (bytes > rt->dev.max_alloc)
        return clf_fail(CLF_ERR_MEMORY, "buffer of %zu bytes exceeds the device's max allocation (%llu bytes)",
                        bytes, (unsigned long long)rt->dev.max_alloc);
    *out = clCreateBuffer(rt->ctx, flags, bytes ? bytes : 1, host, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return clf_fail_ctx(clf_cl_check(err, "clCreateBuffer"), "allocating %zu bytes: ", bytes);
    }
    return CLF_OK;
}

/* ---- devices ---------------------------------------------------------- */

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t n) {
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[n - 1] = 0;
}

static void fill_device(clf_device *o, int pi, int di, cl_platform_id p, cl_device_id d) {
    memset(o, 0, sizeof *o);
    o->platform_index = pi;
    o->device_index = di;
    o->platform = p;
    o->id = d;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof o->platform_name, o->platform_name, NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof o->platform_version, o->platform_version, NULL);
    o->platform_name[sizeof o->platform_name - 1] = o->platform_version[sizeof o->platform_version - 1] = 0;
    dev_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
    dev_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
    dev_str(d, CL_DRIVER_VERSION, o->driver, sizeof o->driver);
    dev_str(d, CL_DEVICE_VERSION, o->version, sizeof o->version);
    dev_str(d, CL_DEVICE_OPENCL_C_VERSION, o->c_version, sizeof o->c_version);
    cl_uint u = 0;
    cl_ulong ul = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof o->type, &o->type, NULL);
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL) == CL_SUCCESS) o->compute_units = u;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u, NULL) == CL_SUCCESS) o->clock_mhz = u;
    if (clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->global_mem = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->max_alloc = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->local_mem = ul;
    /* Testing aid: CLINFER_MAX_ALLOC_MB and CLINFER_GLOBAL_MEM_MB (MiB,
     * fractions allowed) lower what clinfer believes the device offers, so
     * that the "model too large for the device" paths can be tested with a
     * tiny model on any device. They never raise a limit. */
    const char *lim[2] = {getenv("CLINFER_MAX_ALLOC_MB"), getenv("CLINFER_GLOBAL_MEM_MB")};
    uint64_t *field[2] = {&o->max_alloc, &o->global_mem};
    for (int i = 0; i < 2; i++) {
        if (!lim[i] || !*lim[i]) continue;
        char *end;
        double mb = strtod(lim[i], &end);
        if (!*end && mb >= 0 && mb * 1048576.0 < (double)*field[i]) *field[i] = (uint64_t)(mb * 1048576.0);
    }
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof o->max_work_group, &o->max_work_group, NULL);
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n) {
        char *ext = malloc(n + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS) {
            ext[n] = 0;
            o->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
            o->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
        }
        free(ext);
    }
}

clf_status clf_devices_list(clf_device **devs, int *n) {
    *devs = NULL;
    *n = 0;
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0))
        return clf_fail(CLF_ERR_DEVICE, "no OpenCL platform found (is an ICD such as pocl-opencl-icd installed? "
                                        "OCL_ICD_VENDORS=%s)",
                        getenv("OCL_ICD_VENDORS") ? getenv("OCL_ICD_VENDORS") : "unset");
    CLF_TRY(clf_cl_check(err, "clGetPlatformIDs"));
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    err = clGetPlatformIDs(np, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        return clf_cl_check(err, "clGetPlatformIDs");
    }
    clf_device *out = NULL;
    int count = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        clf_device *grown = realloc(out, (size_t)(count + (int)nd) * sizeof *out);
        if (!ids || !grown) {
            free(ids);
            free(grown ? grown : out);
            free(plats);
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        out = grown;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS)
            for (cl_uint d = 0; d < nd; d++) fill_device(&out[count++], (int)p, (int)d, plats[p], ids[d]);
        free(ids);
    }
    free(plats);
    *devs = out;
    *n = count;
    return CLF_OK;
}

const char *clf_device_type_name(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return "GPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    if (t & CL_DEVICE_TYPE_CPU) return "CPU";
    return "other";
}

int clf_device_default(const clf_device *devs, int n) {
    static const cl_device_type order[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n; i++)
            if (devs[i].type & order[k]) return i;
    return 0;
}

static int contains_nocase(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < nl && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == nl) return 1;
    }
    return nl == 0;
}

clf_status clf_device_select(const clf_device *devs, int n, const char *sel, int *index) {
    if (!sel || !*sel) sel = getenv("CLINFER_DEVICE");
    if (n <= 0) return clf_fail(CLF_ERR_DEVICE, "no OpenCL device found");
    if (!sel || !*sel) {
        *index = clf_device_default(devs, n);
        return CLF_OK;
    }
    int p, d, used = 0;
    if (sscanf(sel, "%d:%d%n", &p, &d, &used) == 2 && sel[used] == 0) {
        for (int i = 0; i < n; i++)
            if (devs[i].platform_index == p && devs[i].device_index == d) {
                *index = i;
                return CLF_OK;
            }
    } else {
        for (int i = 0; i < n; i++)
            if (contains_nocase(devs[i].name, sel) || contains_nocase(devs[i].platform_name, sel)) {
                *index = i;
                return CLF_OK;
            }
    }
    char list[1536] = "";
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof list - 1; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d:%d %s (%s)", i ? "; " : "",
                                devs[i].platform_index, devs[i].device_index, devs[i].name,
                                devs[i].platform_name);
    return clf_fail(CLF_ERR_DEVICE, "no OpenCL device matches '%s'; available: %s", sel, list);
}

/* ---- runtime ---------------------------------------------------------- */

static void cache_dir_init(clf_runtime *rt) {
    const char *env = getenv("CLINFER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    rt->cache_dir[0] = 0;
    if (env) snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s", env); /* "" turns the cache off */
    else if (xdg && *xdg) snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s/clinfer", xdg);
    else if (home && *home) snprintf(rt->cache_dir, sizeof rt->cache_dir, "%s/.cache/clinfer", home);
    if (!rt->cache_dir[0]) return;
    /* mkdir -p */
    char path[sizeof rt->cache_dir];
    snprintf(path, sizeof path, "%s", rt->cache_dir);
    for (char *s = path + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) break;
            *s = c;
            if (!c) break;
        }
    }
    if (access(rt->cache_dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "clinfer: warning: kernel cache dir %s is not writable; caching off\n", rt->cache_dir);
        rt->cache_dir[0] = 0;
    }
}

clf_status clf_runtime_create(const char *selector, clf_runtime **out) {
    *out = NULL;
    clf_device *devs;
    int n, idx;
    CLF_TRY(clf_devices_list(&devs, &n));
    clf_status st = clf_device_select(devs, n, selector, &idx);
    if (st != CLF_OK) {
        free(devs);
        return st;
    }
    clf_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) {
        free(devs);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    rt->dev = devs[idx];
    free(devs);
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)rt->dev.platform, 0};
    rt->ctx = clCreateContext(props, 1, &rt->dev.id, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        free(rt);
        return clf_cl_check(err, "clCreateContext");
    }
    rt->queue = clCreateCommandQueue(rt->ctx, rt->dev.id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        clReleaseContext(rt->ctx);
        free(rt);
        return clf_cl_check(err, "clCreateCommandQueue");
    }
    cache_dir_init(rt);
    st = clf_tuning_resolve(&rt->dev, rt->cache_dir, &rt->tune);
    if (st != CLF_OK) {
        clf_runtime_free(rt);
        return st;
    }
    *out = rt;
    return CLF_OK;
}

void clf_runtime_free(clf_runtime *rt) {
    if (!rt) return;
    if (rt->profile) {
        clf_profile_entry *e;
        int n;
        clf_profile_stop(rt, &e, &n);
        free(e);
    }
    if (rt->queue) clFinish(rt->queue);
    for (int i = 0; i < rt->nkernels; i++) {
        clReleaseKernel(rt->kernels[i].kernel);
        free(rt->kernels[i].name);
    }
    for (int i = 0; i < rt->nprograms; i++) clReleaseProgram(rt->programs[i].program);
    free(rt->kernels);
    free(rt->programs);
    if (rt->queue) clReleaseCommandQueue(rt->queue);
    if (rt->ctx) clReleaseContext(rt->ctx);
    free(rt);
}

clf_status clf_finish(clf_runtime *rt) { return clf_cl_check(clFinish(rt->queue), "clFinish"); }

double clf_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- program build and binary cache ------------------------------------ */

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t fnv1a_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }

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
        if (bin && (fread(bin, 1, size, f) != size || fnv1a(0xcbf29ce484222325ull, bin, size) != sum)) {
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
    uint64_t size = len, sum = fnv1a(0xcbf29ce484222325ull, bin, len);
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

clf_status clf_program_build(clf_runtime *rt, const char *src, size_t len, const char *options,
                             cl_program *out) {
    char opts[2048];
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s", options ? options : "");
    uint64_t key = fnv1a(0xcbf29ce484222325ull, src, len);
    key = fnv1a_str(key, opts);
    key = fnv1a_str(key, rt->dev.name);
    key = fnv1a_str(key, rt->dev.driver);
    key = fnv1a_str(key, rt->dev.platform_version);
    char path[1100] = "";
    cl_int err;
    rt->last_build_cached = 0;
    *out = NULL;
    if (rt->cache_dir[0]) {
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
    cl_program p = clCreateProgramWithSource(rt->ctx, 1, &src, &len, &err);
    CLF_TRY(clf_cl_check(err, "clCreateProgramWithSource"));
    err = clBuildProgram(p, 1, &rt->dev.id, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        clf_status st = build_log_error(rt, p, err);
        clReleaseProgram(p);
        return st;
    }
    if (path[0]) {
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
    clf_status st = strcmp(family, "common") ? read_part("common", src, len) : CLF_OK;
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
    uint64_t pkey = fnv1a_str(fnv1a_str(0xcbf29ce484222325ull, family), options);
    uint64_t kkey = fnv1a_str(pkey, kernel_name);
    for (int i = 0; i < rt->nkernels; i++)
        if (rt->kernels[i].key == kkey && strcmp(rt->kernels[i].name, kernel_name) == 0) {
            *out = rt->kernels[i].kernel;
            return CLF_OK;
        }
    cl_program prog = NULL;
    for (int i = 0; i < rt->nprograms; i++)
        if (rt->programs[i].key == pkey) prog = rt->programs[i].program;
    if (!prog) {
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
        rt->programs[rt->nprograms++] = (clf_program_entry){pkey, prog};
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
    rt->kernels[rt->nkernels++] = (clf_kernel_entry){kkey, name, k};
    *out = k;
    return CLF_OK;
}

/* ---- launches and profiling ---------------------------------------------- */

clf_status clf_set_args(cl_kernel k, const clf_arg *args, int n) {
    for (int i = 0; i < n; i++) {
        cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS) {
            char name[64] = "?";
            clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
            name[sizeof name - 1] = 0;
            clf_cl_check(err, "clSetKernelArg");
            return clf_fail_ctx(CLF_ERR_CL, "kernel %s, argument %d: ", name, i);
        }
    }
    return CLF_OK;
}

typedef struct clf_profile {
    struct { cl_kernel k; cl_event ev; } *ev;
    int n, cap;
} clf_profile;

clf_status clf_launch(clf_runtime *rt, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local) {
    clf_profile *p = rt->profile;
    cl_event ev = NULL;
    cl_int err = clEnqueueNDRangeKernel(rt->queue, k, dims, NULL, global, local, 0, NULL, p ? &ev : NULL);
    if (err != CL_SUCCESS) {
        char name[64] = "?";
        clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        name[sizeof name - 1] = 0;
        /* CL_OUT_OF_RESOURCES here is a kernel's registers or local memory,
         * or a fault: an OpenCL error (6), not the model's size (7) */
        return clf_fail_ctx(clf_cl_check(err, "clEnqueueNDRangeKernel"), "kernel %s: ", name);
    }
    if (p) {
        if (p->n == p->cap) {
            int cap = p->cap ? 2 * p->cap : 1024;
            void *grown = realloc(p->ev, (size_t)cap * sizeof *p->ev);
            if (!grown) {
                clReleaseEvent(ev);
                return clf_fail(CLF_ERR_MEMORY, "out of host memory");
            }
            p->ev = grown;
            p->cap = cap;
        }
        p->ev[p->n].k = k;
        p->ev[p->n++].ev = ev;
    }
    return CLF_OK;
}

clf_status clf_profile_start(clf_runtime *rt) {
    if (rt->profile) return CLF_OK;
    rt->profile = calloc(1, sizeof *rt->profile);
    return rt->profile ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
}

static int by_ms_desc(const void *a, const void *b) {
    double x = ((const clf_profile_entry *)a)->ms, y = ((const clf_profile_entry *)b)->ms;
    return (x < y) - (x > y);
}

clf_status clf_profile_stop(clf_runtime *rt, clf_profile_entry **entries, int *n) {
    *entries = NULL;
    *n = 0;
    clf_profile *p = rt->profile;
    if (!p) return CLF_OK;
    rt->profile = NULL;
    clf_status st = clf_finish(rt);
    clf_profile_entry *out = calloc((size_t)(p->n ? p->n : 1), sizeof *out);
    int m = 0;
    for (int i = 0; i < p->n; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (st == CLF_OK && out) {
            char name[64] = "?";
            clGetKernelInfo(p->ev[i].k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
            name[sizeof name - 1] = 0;
            clGetEventProfilingInfo(p->ev[i].ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
            clGetEventProfilingInfo(p->ev[i].ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
            int j = 0;
            while (j < m && strcmp(out[j].name, name)) j++;
            if (j == m) snprintf(out[m++].name, sizeof out->name, "%s", name);
            out[j].launches++;
            out[j].ms += (t1 > t0 ? t1 - t0 : 0) * 1e-6;
        }
        clReleaseEvent(p->ev[i].ev);
    }
    free(p->ev);
    free(p);
    if (!out) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st != CLF_OK) {
        free(out);
        return st;
    }
    qsort(out, (size_t)m, sizeof *out, by_ms_desc);
    *entries = out;
    *n = m;
    return CLF_OK;
}

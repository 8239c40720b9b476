/* The OpenCL runtime: platforms and devices, selection, context and queue,
 * program builds from the embedded kernel sources with an on-disk binary
 * cache, a kernel cache, and CL error names. */
#ifndef CLF_RUNTIME_H
#define CLF_RUNTIME_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h" /* clf_now_s, for the runtime's users */
#include "status.h"
#include "tuning.h"

typedef struct clf_device {
    int platform_index, device_index; /* the "P:D" of `clinfer devices` */
    cl_platform_id platform;
    cl_device_id id;
    char platform_name[128], platform_version[128];
    char name[128], vendor[128], driver[64], version[128], c_version[64];
    cl_device_type type;
    unsigned compute_units, clock_mhz;
    uint64_t global_mem, max_alloc, local_mem;
    size_t max_work_group;
    int fp16, fp64; /* cl_khr_fp16 / cl_khr_fp64 */
    unsigned caps;  /* CLF_CAP_* (host/cl/probe.c), set when a runtime is created; 0 before */
} clf_device;

/* What a device can run, probed (host/cl/probe.c): what its compiler
 * targets (cl/probe.cl's predefined macros), then, for PoCL's CPU device,
 * what the host CPU executes (cpuid: inline asm needs only that). The
 * tuning's capability rules read these; its table rows never name a CPU. */
enum {
    CLF_CAP_CLANG_BIT,      /* clang: __fp16 vectors */
    CLF_CAP_X86_BIT,
    CLF_CAP_AVX2_BIT,       /* 256-bit integer builtins */
    CLF_CAP_AVX512BW_BIT,   /* 512-bit integer builtins (with AVX512F) */
    CLF_CAP_AVX512VL_BIT,
    CLF_CAP_AVX512VNNI_BIT,
    CLF_CAP_AVXVNNI_BIT,
    CLF_CAP_FMA_BIT,
    CLF_CAP_NEON_BIT,
    CLF_CAP_DOTPROD_BIT,
    CLF_CAP_HOST_FIRST_BIT, /* the host CPU's, by cpuid, from here */
    CLF_CAP_HOST_AVX2_BIT = CLF_CAP_HOST_FIRST_BIT,
    CLF_CAP_HOST_AVX512BW_BIT,
    CLF_CAP_HOST_AVX512VL_BIT,
    CLF_CAP_HOST_AVX512VNNI_BIT,
    CLF_CAP_HOST_AVXVNNI_BIT,
    CLF_CAP_COUNT
};
#define CLF_CAP(name) (1u << CLF_CAP_##name##_BIT)
#define CLF_CAP_CLANG CLF_CAP(CLANG)
#define CLF_CAP_X86 CLF_CAP(X86)
#define CLF_CAP_AVX2 CLF_CAP(AVX2)
#define CLF_CAP_AVX512BW CLF_CAP(AVX512BW)
#define CLF_CAP_AVX512VL CLF_CAP(AVX512VL)
#define CLF_CAP_AVX512VNNI CLF_CAP(AVX512VNNI)
#define CLF_CAP_AVXVNNI CLF_CAP(AVXVNNI)
#define CLF_CAP_FMA CLF_CAP(FMA)
#define CLF_CAP_NEON CLF_CAP(NEON)
#define CLF_CAP_DOTPROD CLF_CAP(DOTPROD)
#define CLF_CAP_HOST_AVX2 CLF_CAP(HOST_AVX2)
#define CLF_CAP_HOST_AVX512BW CLF_CAP(HOST_AVX512BW)
#define CLF_CAP_HOST_AVX512VL CLF_CAP(HOST_AVX512VL)
#define CLF_CAP_HOST_AVX512VNNI CLF_CAP(HOST_AVX512VNNI)
#define CLF_CAP_HOST_AVXVNNI CLF_CAP(HOST_AVXVNNI)
/* A capability's name ("avx2", "host-avx512vnni"; NULL past the last) and a
 * set's names separated by spaces. */
const char *clf_cap_name(int bit);
void clf_caps_text(unsigned caps, char *buf, size_t n);
/* The host CPU's CLF_CAP_HOST_* bits (cpuid; 0 off x86). */
unsigned clf_host_caps(void);

/* All devices of all platforms. *devs is malloc'd (free() it); n may be 0
 * with CLF_OK when a platform has no devices, CLF_ERR_DEVICE when there is
 * no platform at all. */
clf_status clf_devices_list(clf_device **devs, int *n);
/* The default: first GPU, else first accelerator, else first CPU, else 0. */
int clf_device_default(const clf_device *devs, int n);
/* sel: "P:D", or a case-insensitive substring of platform or device name;
 * NULL or "" means $CLINFER_DEVICE, then the default. An unmatched selector
 * is CLF_ERR_DEVICE with a message listing every device. */
clf_status clf_device_select(const clf_device *devs, int n, const char *sel, int *index);
const char *clf_device_type_name(cl_device_type t);

typedef struct clf_kernel_entry clf_kernel_entry;
typedef struct clf_program_entry clf_program_entry;

/* Another GEMM for products of n > 1 rows, in F32, enqueued on `queue`:
 * Y[:, y_off ..] (ldy floats a row) = (accumulate: +=) X · Wᵀ, X [n × K]
 * from float x_off, W [rows × K] row-major. host/compute/matmul.c hands it
 * the weights as F32; tools/clblast/ gives CLBlast's, for comparisons. */
typedef clf_status (*clf_gemm_f32_fn)(cl_command_queue *queue, size_t n, size_t rows, size_t K, cl_mem X,
                                      size_t x_off, cl_mem W, cl_mem Y, size_t y_off, size_t ldy, int accumulate);

typedef struct clf_runtime {
    clf_device dev;
    cl_context ctx;
    cl_command_queue queue; /* in order, profiling enabled */
    char cache_dir[1024];   /* "" when the kernel cache is off */
    clf_program_entry *programs;
    int nprograms;
    clf_kernel_entry *kernels;
    int nkernels;
    int last_build_cached; /* 1 if the most recent program build hit the cache */
    clf_tuning tune;       /* what this device runs (tuning.h), resolved at creation */
    /* Seconds spent building programs and, for those compiled from source
     * (not in the cache), waiting for their kernels' first launch, where
     * PoCL compiles them: what a first run spends on kernels rather than
     * tokens. */
    double build_s;
    int cold_kernels; /* kernels of programs compiled from source not launched yet */
    void (*on_build)(void *); /* see clf_runtime_on_build */
    void *on_build_ud;
    clf_gemm_f32_fn gemm_f32;    /* products of n > 1 rows through another GEMM (clf_matmul_set_gemm); NULL: ours */
    struct clf_profile *profile; /* non-NULL while kernel times are recorded */
    uint64_t launches;           /* kernels enqueued through clf_launch (launches per token) */
    /* While set, clf_launch hands each kernel to record(record_ud, ...)
     * instead of the queue: tools/bench/bench_launches.c records a token's
     * launches into a command buffer (cl_khr_command_buffer) this way. */
    cl_int (*record)(void *ud, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local);
    void *record_ud;
    int (*abort_fn)(void *);     /* see clf_runtime_set_abort */
    void *abort_ud;
    int (*progress_fn)(void *, int, int); /* see clf_runtime_on_progress */
    void *progress_ud;
    void (*notice_fn)(void *, const char *); /* see clf_runtime_on_notice */
    void *notice_ud;
    /* How a model's weights are held (models/weight_cache.h), set before
     * its load: weights_in_memory 1 packs them into process memory, never
     * into the packed-weights cache (--no-mmap); weights_mlock 1 locks them
     * in RAM (--mlock). */
    int weights_in_memory, weights_mlock;
    int weights_mlock_failed; /* the refusal was said */
} clf_runtime;

clf_status clf_runtime_create(const char *selector, clf_runtime **out);
void clf_runtime_free(clf_runtime *rt);

/* Long operations on this runtime (uploading a model's weights, evaluating
 * tokens in chunks, building kernels) call fn(ud) between steps and stop with
 * CLF_ERR_INTERRUPTED when it returns nonzero, like llama.cpp's
 * abort_callback: the caller decides what stops (a Ctrl-C flag); the
 * library knows nothing of signals. fn NULL: never stop. */
void clf_runtime_set_abort(clf_runtime *rt, int (*fn)(void *ud), void *ud);
/* Whether the hook asks to stop now (the caller fails with
 * CLF_ERR_INTERRUPTED, saying where). */
int clf_runtime_aborted(const clf_runtime *rt);

/* fn(ud, line) receives the one-line notices of long or unusual steps
 * (the packed-weights cache built, rebuilt or unusable); the library prints
 * nothing. clf_runtime_notice formats one (nothing without a hook). */
void clf_runtime_on_notice(clf_runtime *rt, void (*fn)(void *ud, const char *line), void *ud);
void clf_runtime_notice(const clf_runtime *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* fn(ud) is called before a program is compiled because the cache does not
 * have it (a first run on this device, or the cache off): it then takes
 * seconds, which a caller may want to announce (the library prints nothing). */
void clf_runtime_on_build(clf_runtime *rt, void (*fn)(void *ud), void *ud);

/* fn(ud, done, total) after each of a load's `total` steps (tensors
 * uploaded); nonzero stops the load with CLF_ERR_INTERRUPTED. */
void clf_runtime_on_progress(clf_runtime *rt, int (*fn)(void *ud, int done, int total), void *ud);

/* Builds a program from source with "-cl-std=CL1.2" and `options`, through
 * the kernel cache. A compile error is CLF_ERR_CL carrying the build log. */
clf_status clf_program_build(clf_runtime *rt, const char *src, size_t len,
                             const char *options, cl_program *out);

/* A kernel from the embedded family `family` ("matmul_cpu" for cl/matmul_cpu.cl,
 * prefixed by cl/common.cl) built with `options`; programs and kernels are
 * cached in rt, so repeated calls cost a lookup. Do not release it. */
clf_status clf_kernel_get(clf_runtime *rt, const char *family, const char *options,
                          const char *kernel_name, cl_kernel *out);

/* Source text of a kernel family: cl/types.cl + cl/common.cl + cl/<family>.cl, embedded at
 * build time or read from $CLINFER_KERNEL_DIR. *src is malloc'd. */
clf_status clf_kernel_source(const char *family, char **src, size_t *len);

clf_status clf_finish(clf_runtime *rt);

/* Kernel arguments as a table: {CLF_ARG(buf), CLF_ARG(n), ...}. */
typedef struct clf_arg {
    size_t size;
    const void *value;
} clf_arg;
#define CLF_ARG(v) {sizeof(v), &(v)}
#define CLF_NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))
/* Sets arguments 0 .. n-1; an error names the kernel and the argument. */
clf_status clf_set_args(cl_kernel k, const clf_arg *args, int n);

/* Enqueues a kernel (local may be NULL). Every launcher goes through here so
 * that each one is counted (rt->launches) and, while profiling is on, its
 * device time is recorded under the kernel's name. */
clf_status clf_launch(clf_runtime *rt, cl_kernel k, cl_uint dims, const size_t *global, const size_t *local);

/* Kernel time per kernel name, summed over the launches since profile_start. */
typedef struct clf_profile_entry {
    char name[64];
    int launches;
    double ms;
} clf_profile_entry;
clf_status clf_profile_start(clf_runtime *rt);
/* Waits for the queue, then stops recording; *entries (malloc'd, sorted by
 * time, descending) and *n describe what ran. */
clf_status clf_profile_stop(clf_runtime *rt, clf_profile_entry **entries, int *n);

const char *clf_cl_error_name(cl_int err);
/* CLF_OK, or CLF_ERR_CL with "<what>: <CL_ERROR_NAME>" (CLF_ERR_MEMORY for
 * the out-of-memory codes). */
clf_status clf_cl_check(cl_int err, const char *what);
#define CLF_CL_TRY(call) CLF_TRY(clf_cl_check((call), #call))

/* Build a cl_mem; errors name the size. */
clf_status clf_buffer_create(clf_runtime *rt, cl_mem_flags flags, size_t bytes,
                             void *host, cl_mem *out);

#endif

/* The runtime: context and queue on one device, the kernel cache folder
 * (and PoCL's), the abort hook, the clock. */
#include "runtime_impl.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- runtime ---------------------------------------------------------- */

/* mkdir -p; whether `dir` is then a folder we can write in. */
static int make_writable_dir(const char *dir) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return 0;
    for (char *s = path + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST) break;
            *s = c;
            if (!c) break;
        }
    }
    struct stat sb;
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && access(dir, W_OK | X_OK) == 0;
}

/* The kernel cache folder: $CLINFER_CACHE_DIR ("" turns it off), else
 * $XDG_CACHE_HOME/clinfer, else ~/.cache/clinfer; "" when off. */
static void cache_dir_path(char *dir, size_t n) {
    const char *env = getenv("CLINFER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    dir[0] = 0;
    if (env) snprintf(dir, n, "%s", env);
    else if (xdg && *xdg) snprintf(dir, n, "%s/clinfer", xdg);
    else if (home && *home) snprintf(dir, n, "%s/.cache/clinfer", home);
}

/* PoCL compiles into its own cache ($POCL_CACHE_DIR, else
 * $XDG_CACHE_HOME/pocl or ~/.cache/pocl) and offers no device at all when it
 * cannot create that folder. So before the platform is first touched,
 * unless the user chose a folder, PoCL's cache goes beside ours
 * (<cache>/pocl) when that is writable, else (unwritable, or our cache off)
 * into a private temporary folder removed at exit. */
static char pocl_tmp[1100]; /* that folder, "" if none */

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    remove(path);
    return 0;
}

static void remove_pocl_tmp(void) {
    if (pocl_tmp[0]) nftw(pocl_tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void clf_pocl_cache_init(void) {
    const char *user = getenv("POCL_CACHE_DIR");
    if (user && *user) return;
    char dir[1024], pocl[1100];
    cache_dir_path(dir, sizeof dir);
    snprintf(pocl, sizeof pocl, "%s/pocl", dir);
    if (dir[0] && make_writable_dir(pocl)) {
        setenv("POCL_CACHE_DIR", pocl, 1);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(pocl_tmp, sizeof pocl_tmp, "%s/clinfer-pocl-XXXXXX", tmp && *tmp && strlen(tmp) < 1024 ? tmp : "/tmp");
    if (!mkdtemp(pocl_tmp)) {
        snprintf(pocl_tmp, sizeof pocl_tmp, "/tmp/clinfer-pocl-XXXXXX");
        if (!mkdtemp(pocl_tmp)) {
            pocl_tmp[0] = 0;
            return; /* PoCL tries its default */
        }
    }
    setenv("POCL_CACHE_DIR", pocl_tmp, 1);
    atexit(remove_pocl_tmp);
}

static void cache_dir_init(clf_runtime *rt) {
    cache_dir_path(rt->cache_dir, sizeof rt->cache_dir);
    if (rt->cache_dir[0] && !make_writable_dir(rt->cache_dir)) {
        fprintf(stderr, "clinfer: warning: kernel cache dir %s is not writable; caching off%s\n", rt->cache_dir,
                pocl_tmp[0] ? " (PoCL compiles in a temporary folder, removed at exit)" : "");
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
    /* twice: the probe's build reads the tuning (binaries), the capability
     * rules then read the probe */
    st = clf_tuning_resolve(&rt->dev, rt->cache_dir, &rt->tune);
    if (st == CLF_OK) {
        clf_device_probe(rt);
        st = clf_tuning_resolve(&rt->dev, rt->cache_dir, &rt->tune);
    }
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

void clf_runtime_set_abort(clf_runtime *rt, int (*fn)(void *ud), void *ud) {
    rt->abort_fn = fn;
    rt->abort_ud = ud;
}

int clf_runtime_aborted(const clf_runtime *rt) { return rt->abort_fn && rt->abort_fn(rt->abort_ud); }

void clf_runtime_on_progress(clf_runtime *rt, int (*fn)(void *ud, int done, int total), void *ud) {
    rt->progress_fn = fn;
    rt->progress_ud = ud;
}

clf_status clf_finish(clf_runtime *rt) { return clf_cl_check(clFinish(rt->queue), "clFinish"); }


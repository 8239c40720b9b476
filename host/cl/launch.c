/* Kernel arguments, launches, and per-kernel profiling. */
#include "runtime_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* the first launch of a kernel just compiled from source: PoCL compiles
     * it now, in its own thread; the wait is counted as build time */
    clf_kernel_entry *cold = NULL;
    for (int i = 0; rt->cold_kernels && !cold && i < rt->nkernels; i++)
        if (rt->kernels[i].kernel == k && rt->kernels[i].cold) cold = &rt->kernels[i];
    double t0 = 0;
    if (cold) {
        clFinish(rt->queue); /* what was queued before is not build time */
        t0 = clf_now_s();
        cold->cold = 0;
        rt->cold_kernels--;
    }
    cl_int err = rt->record ? rt->record(rt->record_ud, k, dims, global, local)
                            : clEnqueueNDRangeKernel(rt->queue, k, dims, NULL, global, local, 0, NULL, p ? &ev : NULL);
    if (cold && err == CL_SUCCESS) {
        clFinish(rt->queue);
        rt->build_s += clf_now_s() - t0;
    }
    if (err != CL_SUCCESS) {
        char name[64] = "?";
        clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        name[sizeof name - 1] = 0;
        /* CL_OUT_OF_RESOURCES here is a kernel's registers or local memory,
         * or a fault: an OpenCL error (6), not the model's size (7) */
        return clf_fail_ctx(clf_cl_check(err, "clEnqueueNDRangeKernel"), "kernel %s: ", name);
    }
    rt->launches++;
    if (p && ev) { /* (a recorded kernel has no event) */
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

#include "roof.h"

#include <stdio.h>
#include <stdlib.h>

#define TRIALS 5
#define COPY_VECS 4               /* vectors per work-item, as cl/roof.cl's default */
#define COPY_MAX (256u << 20)     /* bytes copied: well past any cache */
#define MIN_RUN_MS 20.0           /* FMA runs are grown to at least this */
#define FMA_CHAINS 16             /* independent chains per work-item in cl/roof.cl */

double clf_bench_now_us(void) { return clf_now_s() * 1e6; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double clf_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

clf_status clf_bench_event_ms(cl_event ev, double *ms) {
    cl_ulong t0, t1;
    CLF_CL_TRY(clWaitForEvents(1, &ev));
    CLF_CL_TRY(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL));
    CLF_CL_TRY(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
    *ms = (double)(t1 - t0) * 1e-6;
    return CLF_OK;
}

clf_status clf_bench_batched_us(clf_runtime *rt, clf_bench_launch fn, void *ctx, int reps, int trials, double *us) {
    double t[32];
    if (reps < 1 || trials < 1 || trials > 32) return clf_fail(CLF_ERR_ARG, "bench: %d reps x %d trials", reps, trials);
    for (int k = -1; k < trials; k++) {
        CLF_TRY(clf_finish(rt));
        double t0 = clf_bench_now_us();
        for (int i = 0; i < reps; i++) CLF_TRY(fn(rt, ctx));
        CLF_TRY(clf_finish(rt));
        if (k >= 0) t[k] = (clf_bench_now_us() - t0) / reps;
    }
    *us = clf_bench_median(t, trials);
    return CLF_OK;
}

/* One profiled run of a kernel; its device time in ms. */
static clf_status run_ms(clf_runtime *rt, cl_kernel k, size_t global, const size_t *local, double *ms) {
    cl_event ev;
    CLF_CL_TRY(clEnqueueNDRangeKernel(rt->queue, k, 1, NULL, &global, local, 0, NULL, &ev));
    clf_status st = clf_bench_event_ms(ev, ms);
    clReleaseEvent(ev);
    return st;
}

static clf_status measure_copy(clf_runtime *rt, clf_roofs *r) {
    uint64_t bytes = COPY_MAX;
    if (bytes > rt->dev.max_alloc) bytes = rt->dev.max_alloc;
    if (bytes > rt->dev.global_mem / 4) bytes = rt->dev.global_mem / 4;
    int width = rt->dev.type & CL_DEVICE_TYPE_CPU ? 16 : 4; /* floats per vector: see cl/roof.cl */
    size_t per_item = (size_t)width * sizeof(float) * COPY_VECS;
    bytes -= bytes % (per_item * 1024); /* whole work-items, a round global size */
    if (bytes == 0) return clf_fail(CLF_ERR_MEMORY, "copy roof: the device has too little memory");
    cl_mem src = NULL, dst = NULL;
    clf_status st = clf_buffer_create(rt, CL_MEM_READ_ONLY, bytes, NULL, &src);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_WRITE_ONLY, bytes, NULL, &dst);
    cl_kernel k;
    char opts[32];
    snprintf(opts, sizeof opts, "-DCLF_COPY_WIDTH=%d", width);
    if (st == CLF_OK) st = clf_kernel_get(rt, "roof", opts, "roof_copy", &k);
    if (st == CLF_OK) {
        const float pattern = 1.5f;
        st = clf_cl_check(clEnqueueFillBuffer(rt->queue, src, &pattern, sizeof pattern, 0, bytes, 0, NULL, NULL),
                          "clEnqueueFillBuffer");
    }
    if (st == CLF_OK) st = clf_cl_check(clSetKernelArg(k, 0, sizeof src, &src), "clSetKernelArg(roof_copy)");
    if (st == CLF_OK) st = clf_cl_check(clSetKernelArg(k, 1, sizeof dst, &dst), "clSetKernelArg(roof_copy)");
    double ms[TRIALS];
    size_t global = bytes / per_item;
    if (st == CLF_OK) st = run_ms(rt, k, global, NULL, &ms[0]); /* warm-up: first touch of the pages */
    for (int i = 0; i < TRIALS && st == CLF_OK; i++) st = run_ms(rt, k, global, NULL, &ms[i]);
    if (st == CLF_OK) {
        r->copy_bytes = bytes;
        r->copy_width = width;
        r->copy_gbs = 2.0 * bytes / (clf_bench_median(ms, TRIALS) * 1e-3) * 1e-9;
    }
    if (src) clReleaseMemObject(src);
    if (dst) clReleaseMemObject(dst);
    return st;
}

/* GFLOP/s of the FMA kernel at vector width `width`. */
static clf_status measure_fma(clf_runtime *rt, int width, double *gflops) {
    char opts[32];
    snprintf(opts, sizeof opts, "-DCLF_FMA_WIDTH=%d", width);
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "roof", opts, "roof_fma", &k));
    /* A CPU work-item is a whole SIMD thread, one per group; PoCL spreads
     * groups over its threads only when there are many (16 groups ran on
     * one core here, 256 on both). A GPU wants many full groups per
     * compute unit. */
    int cpu = (rt->dev.type & CL_DEVICE_TYPE_CPU) != 0;
    size_t local = cpu ? 1 : (rt->dev.max_work_group < 256 ? rt->dev.max_work_group : 256);
    size_t global = (size_t)(rt->dev.compute_units ? rt->dev.compute_units : 1) * (cpu ? 128 : 8 * local);
    cl_mem out;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_WRITE_ONLY, global * sizeof(float), NULL, &out));
    float a = 0.999f, b = 0.001f;
    clf_status st = CLF_OK;
    cl_int iters = 64;
    double ms[TRIALS];
    if ((st = clf_cl_check(clSetKernelArg(k, 0, sizeof out, &out), "clSetKernelArg(roof_fma)")) != CLF_OK ||
        (st = clf_cl_check(clSetKernelArg(k, 1, sizeof a, &a), "clSetKernelArg(roof_fma)")) != CLF_OK ||
        (st = clf_cl_check(clSetKernelArg(k, 2, sizeof b, &b), "clSetKernelArg(roof_fma)")) != CLF_OK)
        goto out;
    for (;;) { /* grow the run until it is long enough to time */
        if ((st = clf_cl_check(clSetKernelArg(k, 3, sizeof iters, &iters), "clSetKernelArg(roof_fma)")) != CLF_OK ||
            (st = run_ms(rt, k, global, &local, &ms[0])) != CLF_OK)
            goto out;
        if (ms[0] >= MIN_RUN_MS || iters >= (1 << 24)) break;
        iters *= ms[0] > MIN_RUN_MS / 64 ? 2 : 16;
    }
    for (int i = 0; i < TRIALS; i++)
        if ((st = run_ms(rt, k, global, &local, &ms[i])) != CLF_OK) goto out;
    double flops = (double)global * iters * FMA_CHAINS * 2 * width;
    *gflops = flops / (clf_bench_median(ms, TRIALS) * 1e-3) * 1e-9;
out:
    clReleaseMemObject(out);
    return st;
}

static clf_status measure_launch(clf_runtime *rt, clf_roofs *r) {
    enum { BATCH = 200, SYNC = 50 };
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "roof", "", "roof_empty", &k));
    cl_mem none = NULL;
    CLF_CL_TRY(clSetKernelArg(k, 0, sizeof none, &none));
    size_t one = 1;
    double t[TRIALS], s[SYNC];
    for (int trial = -1; trial < TRIALS; trial++) {
        CLF_TRY(clf_finish(rt));
        double t0 = clf_bench_now_us();
        for (int i = 0; i < BATCH; i++) CLF_CL_TRY(clEnqueueNDRangeKernel(rt->queue, k, 1, NULL, &one, &one, 0, NULL, NULL));
        CLF_TRY(clf_finish(rt));
        if (trial >= 0) t[trial] = (clf_bench_now_us() - t0) / BATCH;
    }
    for (int i = 0; i < SYNC; i++) {
        double t0 = clf_bench_now_us();
        CLF_CL_TRY(clEnqueueNDRangeKernel(rt->queue, k, 1, NULL, &one, &one, 0, NULL, NULL));
        CLF_TRY(clf_finish(rt));
        s[i] = clf_bench_now_us() - t0;
    }
    r->launch_us = clf_bench_median(t, TRIALS);
    r->launch_sync_us = clf_bench_median(s, SYNC);
    return CLF_OK;
}

clf_status clf_roofs_measure_copy(clf_runtime *rt, double *gbs) {
    clf_roofs r;
    CLF_TRY(measure_copy(rt, &r));
    *gbs = r.copy_gbs;
    return CLF_OK;
}

static clf_status named(clf_status st, const char *what) { return st == CLF_OK ? st : clf_fail_ctx(st, "%s: ", what); }

clf_status clf_roofs_measure(clf_runtime *rt, clf_roofs *r) {
    *r = (clf_roofs){0};
    CLF_TRY(named(measure_copy(rt, r), "copy roof"));
    const int widths[2] = {8, 16};
    for (int i = 0; i < 2; i++) {
        double g = 0;
        CLF_TRY(named(measure_fma(rt, widths[i], &g), "FMA roof"));
        if (g > r->fma_gflops) {
            r->fma_gflops = g;
            r->fma_width = widths[i];
        }
    }
    return named(measure_launch(rt, r), "launch cost");
}

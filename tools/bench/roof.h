/* Device roofs for `clinfer bench kernels`: the measured memory bandwidth
 * and FMA throughput that every kernel figure is set against, the cost of
 * a launch, and the timing helpers the benches share. */
#ifndef CLF_ROOF_H
#define CLF_ROOF_H

#include "runtime.h"

typedef struct clf_roofs {
    double copy_gbs;       /* copy kernel, (bytes read + written) / s, median */
    size_t copy_bytes;     /* bytes of the buffer copied */
    int copy_width;        /* floats per load and store (16 on a CPU, 4 on others) */
    double fma_gflops;     /* FMA kernel at its best vector width, median */
    int fma_width;         /* that width (8 or 16 floats) */
    double launch_us;      /* an empty kernel, many enqueued then one clFinish */
    double launch_sync_us; /* an empty kernel, clFinish after each */
} clf_roofs;

/* Takes a few seconds: builds the roof kernels, sizes each run to a few
 * tens of milliseconds and reports medians of several runs. */
clf_status clf_roofs_measure(clf_runtime *rt, clf_roofs *r);
/* The copy roof alone, again (a fraction of a second): *gbs. */
clf_status clf_roofs_measure_copy(clf_runtime *rt, double *gbs);

/* Monotonic wall clock in microseconds. */
double clf_bench_now_us(void);
/* Median of v[0..n) (sorts v). */
double clf_bench_median(double *v, int n);
/* Device time of a completed command of a profiling queue, in ms. */
clf_status clf_bench_event_ms(cl_event ev, double *ms);

/* Time per launch, in µs, of `reps` launches enqueued back to back and
 * ended by one clFinish: what an op costs inside a token's batch of work,
 * launch overhead included. Median over `trials`, after one untimed batch
 * (kernel builds, first-launch compiles). */
typedef clf_status (*clf_bench_launch)(clf_runtime *rt, void *ctx);
clf_status clf_bench_batched_us(clf_runtime *rt, clf_bench_launch fn, void *ctx, int reps, int trials, double *us);

#endif

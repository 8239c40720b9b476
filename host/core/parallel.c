/* clf_parallel_for: plain pthreads, a static split (the ranges cost the
 * same per item: rows of one weight, pages of one file). */
#include "parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

int clf_host_threads(void) {
    const char *env = getenv("CLINFER_HOST_THREADS");
    if (env && *env) {
        long v = strtol(env, NULL, 10);
        if (v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

typedef struct job {
    void (*fn)(void *, int64_t, int64_t);
    void *ud;
    int64_t i0, i1;
} job;

static void *run(void *arg) {
    job *j = arg;
    j->fn(j->ud, j->i0, j->i1);
    return NULL;
}

void clf_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ud, int64_t i0, int64_t i1), void *ud) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t t = clf_host_threads();
    if (t > n / grain) t = n / grain;
    if (t <= 1) {
        fn(ud, 0, n);
        return;
    }
    job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int64_t i = 0; i < t; i++) jobs[i] = (job){fn, ud, n * i / t, n * (i + 1) / t};
    for (int64_t i = 1; i < t; i++) started[i] = pthread_create(&tid[i], NULL, run, &jobs[i]) == 0;
    run(&jobs[0]);
    for (int64_t i = 1; i < t; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        else run(&jobs[i]); /* no thread: the caller does it */
    }
}

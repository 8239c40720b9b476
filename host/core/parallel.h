/* Host work split over the machine's cores: the load's weight re-layout
 * and checksums (models/packed_cache.c), which are memory-bound loops over
 * independent ranges. */
#ifndef CLF_PARALLEL_H
#define CLF_PARALLEL_H

#include <stdint.h>

/* The cores this process may run on (its CPU affinity), at least 1;
 * CLINFER_HOST_THREADS overrides it (1: everything on the calling thread). */
int clf_host_threads(void);

/* fn(ud, i0, i1) over [0, n) cut into contiguous ranges, one per thread
 * (at most clf_host_threads(), each at least `grain` items), the calling
 * thread taking the first; returns when all are done. A thread that
 * cannot be started leaves its range to the caller, so every item is
 * done exactly once whatever the system allows. */
void clf_parallel_for(int64_t n, int64_t grain, void (*fn)(void *ud, int64_t i0, int64_t i1), void *ud);

#endif

/* Energy the host says it used, for `clinfer bench`: the CPU packages'
 * RAPL counters through Linux's powercap interface
 * (/sys/class/powercap/intel-rapl:N/energy_uj, also on AMD Zen), read
 * before and after a timed run. Only the package domains (intel-rapl:N,
 * not their core/uncore/dram sub-zones intel-rapl:N:M, which they
 * include, nor intel-rapl-mmio:N, the same package again), summed; each
 * counter wraps at its max_energy_range_uj. A package counts everything
 * running on it, not only the benchmark: on a shared machine the figure is
 * an upper bound. Where there is none (a VM, a non-x86 host, counters
 * readable by root only since Linux 5.10), `why` says so and nothing
 * fails. CLINFER_POWERCAP_DIR replaces /sys/class/powercap (the tests'
 * fake tree). */
#ifndef CLF_BENCH_ENERGY_H
#define CLF_BENCH_ENERGY_H

enum { CLF_ENERGY_MAX_DOMAINS = 16 };

typedef struct clf_energy {
    int n;                                /* package domains read; 0: unavailable */
    char path[CLF_ENERGY_MAX_DOMAINS][512]; /* each domain's energy_uj */
    char name[CLF_ENERGY_MAX_DOMAINS][32];  /* its `name` ("package-0") */
    double max_uj[CLF_ENERGY_MAX_DOMAINS];  /* where its counter wraps (0: unknown) */
    char why[600];                         /* n == 0: why there is no figure */
} clf_energy;

/* A reading of every domain, microjoules. */
typedef struct clf_energy_mark {
    double uj[CLF_ENERGY_MAX_DOMAINS];
    int ok; /* every domain read */
} clf_energy_mark;

/* Finds the package domains and reads each once. */
void clf_energy_open(clf_energy *e);
clf_energy_mark clf_energy_read(const clf_energy *e);
/* Joules between two readings, each counter's wrap undone (one wrap at
 * most: hours at a package's power); < 0 when a reading failed. */
double clf_energy_joules(const clf_energy *e, const clf_energy_mark *before, const clf_energy_mark *after);
/* The domains' names, comma-separated ("package-0, package-1"). */
void clf_energy_names(const clf_energy *e, char *buf, int n);

#endif

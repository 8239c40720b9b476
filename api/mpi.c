/* The public API (include/clinfer.h): one model across the ranks of an
 * MPI job, over mpi/clf_mpi.h (Open MPI; without it mpi/mpi_none.c makes
 * clinfer_mpi_begin fail with one clear message). */
#include <stdio.h>

#include "api.h"
#include "clf_mpi.h"

int clinfer_mpi_launched(void) { return clf_mpi_launched(); }

clinfer_status clinfer_mpi_begin(int *argc, char ***argv, int with_mpi, int (*abort)(void), int *rank, int *alone) {
    API_NOT_NULL(argc);
    API_NOT_NULL(argv);
    API_NOT_NULL(rank);
    API_NOT_NULL(alone);
    int size;
    *alone = 0;
    clf_mpi_set_abort(abort);
    clf_status st = clf_mpi_launched() > 1 ? clf_mpi_agree(argc, argv, with_mpi, rank, &size, alone)
                                           : clf_mpi_start(argc, argv, rank, &size);
    if (st == CLF_OK && *rank > 0) clf_mpi_set_abort(NULL); /* a worker ends with the job */
    return (clinfer_status)st;
}

int clinfer_mpi_worker(void) { return clf_mpi_worker(); }
clinfer_status clinfer_mpi_flush(void) { return (clinfer_status)clf_mpi_flush(); }
int clinfer_mpi_end(int status) { return clf_mpi_end(status); }
void clinfer_mpi_on_broken(void (*fn)(void)) { clf_mpi_on_broken(fn); }

/* A pass of one row is a decoding step, of several a prompt's chunk. */
void clinfer_mpi_report(char *buf, size_t n) {
    if (!buf || !n) return;
    buf[0] = 0;
    clf_mpi_stats s;
    clf_mpi_get_stats(&s);
    const clf_mpi_hops *h = &s.one;
    size_t used = 0;
    if (h->passes)
        used += (size_t)snprintf(buf, n,
                                 "mpi: %d ranks, %ld passes of 1 row: per pass %d hops down of %.1f KiB and 1 back of "
                                 "%.1f KiB, stages on ranks 1..%d %.3f ms, messaging %.3f ms (%.3f ms per hop)\n",
                                 s.ranks, h->passes, s.ranks - 1, h->bytes_down / h->passes / 1024,
                                 h->bytes_back / h->passes / 1024, s.ranks - 1, h->remote_s / h->passes * 1e3,
                                 h->messaging_s / h->passes * 1e3, h->messaging_s / h->passes / s.ranks * 1e3);
    h = &s.many;
    if (h->passes && used < n)
        snprintf(buf + used, n - used,
                 "mpi: %d ranks, %ld passes of %.0f rows: per pass %d hops down of %.1f KiB; %ld answered (logits "
                 "wanted), rank 0 waited %.3f ms for each\n",
                 s.ranks, h->passes, (double)h->rows / h->passes, s.ranks - 1, h->bytes_down / h->passes / 1024,
                 h->answered, h->answered ? h->wait_s / h->answered * 1e3 : 0);
}

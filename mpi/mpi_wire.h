/* Sending and receiving mpi_proto.h's messages: what rank 0's link and the
 * workers share. */
#ifndef CLF_MPI_WIRE_H
#define CLF_MPI_WIRE_H

#include <mpi.h>
#include <stddef.h>

#include "mpi_proto.h"
#include "stage.h"

/* A message buffer that grows to the largest message seen. */
typedef struct clf_mpi_buf {
    char *p;
    size_t cap, len;
} clf_mpi_buf;

clf_status clf_mpi_buf_reserve(clf_mpi_buf *b, size_t n);
void clf_mpi_buf_free(clf_mpi_buf *b);
static inline clf_mpi_msg *clf_mpi_head(const clf_mpi_buf *b) { return (clf_mpi_msg *)b->p; }

/* Waits for the next message from `src` (or MPI_ANY_SOURCE) with `tag`
 * into b (b->len its size). Polls, sleeping between probes once the first
 * few come back empty: a blocking receive spins a core, and on a small host
 * the ranks waiting for their turn would take it from the one computing.
 * A rank that dies ends the job through Open MPI's runtime, waiters
 * included. */
clf_status clf_mpi_recv(clf_mpi_buf *b, int src, int tag);
/* Waits for a nonblocking operation (MPI_Ibcast, MPI_Igather) as
 * clf_mpi_recv waits, giving up after timeout_s seconds (0: never) with
 * CLF_ERR_IO naming `what`. Both stop with CLF_ERR_INTERRUPTED when the
 * hook of clf_mpi_set_abort says so. */
clf_status clf_mpi_wait(MPI_Request *r, double timeout_s, const char *what);
clf_status clf_mpi_send(const void *p, size_t n, int dst, int tag);
/* A header-only message. */
clf_status clf_mpi_send_op(int op, int ctx, const int32_t a[4], int dst);

/* A PASS message for `p` with room for the activations: returns where they
 * go ([p->n × n_embd] floats). */
clf_status clf_mpi_pass_pack(clf_mpi_buf *b, int ctx, const clf_stage_pass *p, int n_embd, float **x);
/* Reads a received PASS: p points into b (segments, wanted rows), *x at the
 * activations. CLF_ERR_FORMAT when the sizes do not add up. */
clf_status clf_mpi_pass_unpack(const clf_mpi_buf *b, int n_embd, clf_stage_pass *p, const float **x);

/* Sends rank 0 this rank's failure of request `op`: st and "rank R:
 * <clf_last_error()>". */
void clf_mpi_reply_error(clf_status st, int rank, int op, int ctx);

#endif

#include "mpi_wire.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The segments travel as int32 quadruples and are read in place. */
_Static_assert(sizeof(clf_stage_segment) == CLF_MPI_SEG_INTS * sizeof(int32_t), "clf_stage_segment layout");
_Static_assert(sizeof(int) == sizeof(int32_t), "int is 32 bits");

/* Empty probes before the waiter starts sleeping, and how long it sleeps:
 * a decode step here takes milliseconds, so 50 us of lateness is noise. */
enum { SPIN_PROBES = 1000, SLEEP_NS = 50000 };

clf_status clf_mpi_buf_reserve(clf_mpi_buf *b, size_t n) {
    if (n <= b->cap) return CLF_OK;
    char *p = realloc(b->p, n);
    if (!p) return clf_fail(CLF_ERR_MEMORY, "out of host memory (an MPI message of %zu bytes)", n);
    b->p = p, b->cap = n;
    return CLF_OK;
}

void clf_mpi_buf_free(clf_mpi_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int (*abort_fn)(void);

void clf_mpi_set_abort(int (*fn)(void)) { abort_fn = fn; }

/* Between two empty probes: spin, then sleep; whether to stop waiting. */
static clf_status idle(long spins) {
    if (spins > SPIN_PROBES) nanosleep(&(struct timespec){0, SLEEP_NS}, NULL);
    if (abort_fn && abort_fn()) return clf_fail(CLF_ERR_INTERRUPTED, "stopped while waiting for another rank");
    return CLF_OK;
}

clf_status clf_mpi_wait(MPI_Request *r, double timeout_s, const char *what) {
    int done = 0;
    double t0 = clf_now_s();
    for (long spins = 0; MPI_Test(r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done; spins++) {
        CLF_TRY(idle(spins));
        if (timeout_s > 0 && clf_now_s() - t0 > timeout_s)
            return clf_fail(CLF_ERR_IO, "%s: no answer within %.0f s", what, timeout_s);
    }
    return CLF_OK;
}

clf_status clf_mpi_recv(clf_mpi_buf *b, int src, int tag) {
    MPI_Status s;
    int flag = 0;
    for (long spins = 0; MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &s) == MPI_SUCCESS && !flag; spins++)
        CLF_TRY(idle(spins));
    int n = 0;
    MPI_Get_count(&s, MPI_BYTE, &n);
    if (n < (int)sizeof(clf_mpi_msg))
        return clf_fail(CLF_ERR_FORMAT, "an MPI message of %d bytes from rank %d (a header is %zu)", n, s.MPI_SOURCE,
                        sizeof(clf_mpi_msg));
    CLF_TRY(clf_mpi_buf_reserve(b, (size_t)n));
    MPI_Recv(b->p, n, MPI_BYTE, s.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    b->len = (size_t)n;
    return CLF_OK;
}

clf_status clf_mpi_send(const void *p, size_t n, int dst, int tag) {
    if (n > INT_MAX)
        return clf_fail(CLF_ERR_ARG, "an MPI message of %zu bytes is over MPI's 2 GiB count (a smaller batch)", n);
    int rc = MPI_Send(p, (int)n, MPI_BYTE, dst, tag, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CLF_OK : clf_fail(CLF_ERR_IO, "MPI_Send to rank %d failed (%d)", dst, rc);
}

clf_status clf_mpi_send_op(int op, int ctx, const int32_t a[4], int dst) {
    clf_mpi_msg m = {.op = op, .ctx = ctx};
    MPI_Comm_rank(MPI_COMM_WORLD, &m.rank);
    if (a) memcpy(m.a, a, sizeof m.a);
    return clf_mpi_send(&m, sizeof m, dst, CLF_MPI_TAG_PIPE);
}

static size_t pass_bytes(int n, int n_seg, int n_want, int n_embd) {
    return sizeof(clf_mpi_msg) + ((size_t)n_seg * CLF_MPI_SEG_INTS + (size_t)n_want) * sizeof(int32_t) +
           (size_t)n * (size_t)n_embd * sizeof(float);
}

clf_status clf_mpi_pass_pack(clf_mpi_buf *b, int ctx, const clf_stage_pass *p, int n_embd, float **x) {
    int n_want = p->all_logits ? 0 : p->n_want;
    size_t n = pass_bytes(p->n, p->n_seg, n_want, n_embd);
    CLF_TRY(clf_mpi_buf_reserve(b, n));
    clf_mpi_msg *m = clf_mpi_head(b);
    *m = (clf_mpi_msg){.op = CLF_MPI_PASS, .ctx = ctx, .a = {p->n, p->n_seg, p->all_logits, n_want}};
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    char *q = b->p + sizeof *m;
    memcpy(q, p->segs, (size_t)p->n_seg * sizeof *p->segs);
    q += (size_t)p->n_seg * sizeof *p->segs;
    if (n_want) memcpy(q, p->want, (size_t)n_want * sizeof *p->want);
    *x = (float *)(q + (size_t)n_want * sizeof *p->want);
    b->len = n;
    return CLF_OK;
}

clf_status clf_mpi_pass_unpack(const clf_mpi_buf *b, int n_embd, clf_stage_pass *p, const float **x) {
    const clf_mpi_msg *m = clf_mpi_head(b);
    int n = m->a[0], n_seg = m->a[1], n_want = m->a[3];
    if (n < 1 || n_seg < 1 || n_want < 0 || n_seg > n || n_want > n ||
        b->len != pass_bytes(n, n_seg, n_want, n_embd))
        return clf_fail(CLF_ERR_FORMAT, "a pass message of %zu bytes from rank %d does not match its header", b->len,
                        m->rank);
    const char *q = b->p + sizeof *m;
    *p = (clf_stage_pass){.n = n, .segs = (const clf_stage_segment *)q, .n_seg = n_seg, .all_logits = m->a[2] != 0,
                          .want = (const int *)(q + (size_t)n_seg * sizeof(clf_stage_segment)), .n_want = n_want};
    *x = (const float *)(q + (size_t)n_seg * sizeof(clf_stage_segment) + (size_t)n_want * sizeof(int32_t));
    return CLF_OK;
}

void clf_mpi_reply_error(clf_status st, int rank, int op, int ctx) {
    struct {
        clf_mpi_msg m;
        char text[1024];
    } r = {.m = {.op = CLF_MPI_REPLY, .ctx = ctx, .status = st, .rank = rank, .a = {op}}};
    int len = snprintf(r.text, sizeof r.text, "rank %d: %s", rank, clf_last_error());
    if (len >= (int)sizeof r.text) len = sizeof r.text - 1;
    clf_mpi_send(&r, sizeof r.m + (size_t)len + 1, 0, CLF_MPI_TAG_REPLY);
}

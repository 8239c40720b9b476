/* The messages between clinfer's MPI ranks, stated once.
 *
 * Rank 0 holds stage 0 and does all I/O; rank r > 0 holds stage r. Every
 * request travels down the pipeline on TAG_PIPE (0 -> 1 -> ... -> N-1), in
 * order (MPI does not reorder messages of one sender, tag and
 * communicator), so a context is created on every rank before its first
 * pass. Answers go straight to rank 0 on TAG_REPLY: from the last rank (the
 * logits rows, or OK), or from the rank where a request failed (its status
 * and message; that rank does not forward the request).
 *
 * A pass that wants no logits (a prompt's micro-batch but the last) gets no
 * answer: rank 0 goes on to the next while the ranks below work, so a
 * prompt's micro-batches fill the pipeline. A failed pass is answered by the
 * rank where it failed, which then drops every later pass (they would not
 * continue their sequences): rank 0 reads that answer at its next wait and
 * takes the pipeline as stopped, as the job then ends.
 *
 * A message is one MPI_BYTE buffer: a clf_mpi_msg header, then its payload
 * (below, per op). All ranks run the same build on the same kind of host
 * (little-endian, the same struct layout). */
#ifndef CLF_MPI_PROTO_H
#define CLF_MPI_PROTO_H

#include <stdint.h>

enum { CLF_MPI_TAG_PIPE = 1, CLF_MPI_TAG_REPLY = 2 };

typedef enum clf_mpi_op {
    CLF_MPI_CTX_CREATE = 1, /* a: n_ctx, n_batch, n_seq, kv_type. Last rank answers OK. */
    CLF_MPI_PASS = 2,       /* a: n, n_seg, all_logits, n_want; payload below. Last rank answers the logits. */
    CLF_MPI_SEQ_REWIND = 3, /* a: seq, pos. No answer. */
    CLF_MPI_CTX_FREE = 4,   /* No answer. */
    CLF_MPI_STOP = 5,       /* the job ends: forward it, then MPI_Finalize. No answer. */
    CLF_MPI_REPLY = 6,      /* status, a[0] the op answered; payload: logits rows (OK after a pass) or the
                               error message (text). */
    CLF_MPI_SYNC = 7,       /* Last rank answers OK: every pass before it is through. */
} clf_mpi_op;

typedef struct clf_mpi_msg {
    int32_t op;     /* clf_mpi_op */
    int32_t ctx;    /* the context's id, chosen by rank 0 */
    int32_t status; /* REPLY: a clf_status */
    int32_t rank;   /* the sender */
    int32_t a[4];   /* the op's arguments (above) */
    double busy_s;  /* PASS, REPLY: seconds the ranks so far spent in their stages (clf_mpi_stats) */
} clf_mpi_msg;

/* PASS payload, in this order: n_seg segments as 4 int32 each (seq, row0,
 * n, pos: clf_stage_segment), n_want int32 rows, then n × n_embd float
 * activations (the output of the previous stage's layers). */
enum { CLF_MPI_SEG_INTS = 4 };

enum { CLF_MPI_MAX_RANKS = 64 };

/* Each rank's command, gathered on rank 0 before anything else
 * (clf_mpi_agree, MPI_Igather); rank 0 answers with one int32 (MPI_Ibcast):
 * go on, each alone (no rank has --mpi), or stop. */
typedef struct clf_mpi_hello {
    int32_t with_mpi;
    char command[32];
} clf_mpi_hello;
enum { CLF_MPI_GO = 0, CLF_MPI_ALONE = 1, CLF_MPI_STOP_JOB = 2 };

/* Sent by rank 0 with MPI_Ibcast before any stage loads. stop: rank 0 ended
 * before opening the model (--help, a usage error): the workers finalize. */
typedef struct clf_mpi_setup {
    int32_t stop;
    int32_t layers[CLF_MPI_MAX_RANKS][2]; /* the plan: rank r holds layers [l0, l1) */
    uint64_t file_bytes; /* the size of rank 0's file: a rank whose file differs refuses */
    uint64_t digest;     /* and its clf_gguf_header_digest: the same size is not the same file */
    char model[4096];    /* -m as given ("": the default); each rank resolves it (clf_model_path) */
    char device[256];    /* --device ("": each rank's own CLINFER_DEVICE or default) */
} clf_mpi_setup;

/* Each rank's load status, gathered on rank 0 after the setup (MPI_Igather). */
typedef struct clf_mpi_loaded {
    int32_t status;
    char message[500];
    char device[128]; /* the rank's device, for rank 0's banners */
} clf_mpi_loaded;

#endif

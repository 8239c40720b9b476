/* One model across the ranks of an MPI job: `mpirun -np N clinfer run|chat|
 * perplexity|bench|serve --mpi ...`. Rank 0 runs the command (tokenizer,
 * sampling, all I/O) on stage 0; ranks 1..N-1 run clf_mpi_worker, each
 * holding one later stage (its layers only, from its own mmap of the GGUF,
 * on its own device). Messages: mpi_proto.h.
 *
 * Built with Open MPI (CLINFER_MPI); without it, clf_mpi_start fails with
 * one clear message and everything else runs as usual. */
#ifndef CLF_MPI_H
#define CLF_MPI_H

#include "llama.h"

/* The size of the job that an MPI launcher (mpirun) started this process
 * in, from its environment; 0 when none did. */
int clf_mpi_launched(void);

/* Every clinfer a launcher starts in a job of several ranks joins this
 * first, whatever its command: it starts MPI (clf_mpi_start) and rank 0
 * gathers each rank's command (argv[1]) and whether it has --mpi, MPI_Init
 * included within $CLINFER_MPI_TIMEOUT seconds (default CLF_MPI_AGREE_S:
 * past it, rank 0 says so and the processes exit). CLF_OK: every rank runs rank 0's command with
 * --mpi, the job goes on (*rank, *size). *alone set: no rank has --mpi, MPI
 * is finalized and each runs its own command. A failure: rank 0's message
 * names the rank that differs (the other ranks' is ""): the job ends. */
enum { CLF_MPI_AGREE_S = 60 };
clf_status clf_mpi_agree(int *argc, char ***argv, int with_mpi, int *rank, int *size, int *alone);

/* What every wait of this process asks between its probes: nonzero stops
 * it with CLF_ERR_INTERRUPTED (rank 0's SIGTERM: Open MPI's runtime sends
 * it when another rank exited or was killed). */
void clf_mpi_set_abort(int (*fn)(void));

/* Starts MPI (MPI_Init_thread, funneled). *rank and *size: this process's
 * place in the job. Rank 0 must end with clf_mpi_end, ranks > 0 run
 * clf_mpi_worker. */
clf_status clf_mpi_start(int *argc, char ***argv, int *rank, int *size);

/* A rank > 0: waits for rank 0's setup, loads its stage, then serves the
 * pipeline's requests until rank 0 says stop. Never writes to stdout;
 * its failures go to rank 0. Returns the process's exit status. */
int clf_mpi_worker(void);

/* Rank 0: the layers of every rank. Broadcasts the setup (the model as -m
 * gave it, the device selector, the plan: layers equal by weight bytes, or
 * by `ratio` when given: n_ratio == job size), loads layers [0, l1) here,
 * gathers every rank's load status and makes the result stage 0 with an MPI
 * link to rank 1. A rank that failed: its status, the message naming the
 * rank ("rank 2: ..."). */
clf_status clf_mpi_load(clf_runtime *rt, const clf_gguf *g, const char *model, const char *device,
                        const double *ratio, int n_ratio, clf_llama **out);

/* What rank 0's link has carried since the job started: the passes, and
 * per pass the messages down (one per boundary) and back (the logits).
 * Kept apart for passes of one row and of several. Of the passes answered
 * (those that want logits; rank 0 waits for them): wait_s, the time rank 0
 * waited, and remote_s, the time the other ranks spent in their stages
 * (clf_llama_stage_pass, which includes each stage's upload of its input
 * and download of its output) on them; when every pass is answered (one
 * row: decoding), messaging_s = wait_s - remote_s is what the hops
 * themselves cost, MPI and waking up, over all hops. */
typedef struct clf_mpi_hops {
    long passes, rows, answered;
    double bytes_down, bytes_back; /* per boundary, summed over the passes */
    double wait_s, remote_s, messaging_s;
} clf_mpi_hops;
typedef struct clf_mpi_stats {
    int ranks;
    clf_mpi_hops one, many; /* passes of one row (decoding), of several (prompts) */
} clf_mpi_stats;
void clf_mpi_get_stats(clf_mpi_stats *s);

/* Rank 0, after clf_mpi_load: " + DEV1 + DEV2 ...", the devices of ranks
 * 1..N-1 ("" before, or alone), to follow rank 0's own in banners. */
const char *clf_mpi_devices(void);

/* Rank 0: fn is called (once, from the thread that evaluates) when a rank
 * reports a failed pass: the pipeline is broken for good, every later
 * request fails. A command that would go on (serve) ends on it. */
void clf_mpi_on_broken(void (*fn)(void));

/* Rank 0: waits until every pass sent is through the pipeline (passes
 * that want no logits are not waited for); a failure of one of them on a
 * rank, named. */
clf_status clf_mpi_flush(void);

/* Rank 0, once the command returned `status`: 0 stops the workers and
 * finalizes MPI; anything else ends the job with MPI_Abort(status) (a
 * worker may be blocked on a stage that failed). Returns status. */
int clf_mpi_end(int status);

#endif

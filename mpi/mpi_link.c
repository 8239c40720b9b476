/* Rank 0's side of an MPI job: starting and ending it, loading stage 0 after
 * telling every rank its layers, and the link (models/stage.h) that carries
 * a context's lifecycle and passes down the pipeline of ranks. */
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clf_mpi.h"
#include "mpi_wire.h"
#include "runtime.h"
#include "split.h"
#include "stage.h"

static struct {
    int started, rank, size;
    int setup_sent; /* the workers have the setup: a STOP must reach them down the pipeline */
    int next_id;    /* the last context id given out */
    clf_mpi_buf buf;
    clf_mpi_stats stats;
    long unanswered; /* passes sent without waiting since the last answer */
    /* a pass failed on a rank (mpi_proto.h): every later request fails so */
    clf_status broken;
    char broken_msg[1100];
    void (*on_broken)(void);
    char devices[CLF_SPLIT_MAX * 132]; /* " + " and each other rank's device */
} job;

clf_status clf_mpi_start(int *argc, char ***argv, int *rank, int *size) {
    /* Open MPI spins in its progress loop without yielding unless a host
     * is oversubscribed; a rank's OpenCL threads (a CPU device) and the
     * other ranks on the host need that core: measured on 2 cores, 2 ranks
     * spent 0.4-0.7 ms per hop spinning, 0.007 ms yielding. A user's own
     * setting wins. */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    /* serve runs the model on its scheduler thread: MPI is called from one
     * thread at a time, not always the main one */
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return clf_fail(CLF_ERR_IO, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return clf_fail(CLF_ERR_IO, "this MPI does not allow calls from more than one thread (MPI_THREAD_SERIALIZED)");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &job.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &job.size);
    job.started = 1;
    *rank = job.rank, *size = job.size;
    return CLF_OK;
}

int clf_mpi_launched(void) {
    const char *n = getenv("OMPI_COMM_WORLD_SIZE"); /* Open MPI */
    if (!n) n = getenv("PMI_SIZE");                 /* MPICH's Hydra */
    return n ? atoi(n) : 0;
}

/* The bound on the job's start: CLINFER_MPI_TIMEOUT seconds, or the default. */
static double agree_timeout(void) {
    const char *v = getenv("CLINFER_MPI_TIMEOUT");
    double t = v ? atof(v) : 0;
    return t > 0 && t < 1e6 ? t : CLF_MPI_AGREE_S;
}

/* MPI_Init waits for every process of the job to call it, forever when one
 * never does (it is not clinfer, or ended first): past the bound, rank 0
 * says so and every rank leaves. A signal handler: write and _exit only. */
static char init_msg[256]; /* rank 0's line, written before the alarm is set */
static void init_too_long(int sig) {
    (void)sig;
    if (init_msg[0]) (void)!write(STDERR_FILENO, init_msg, strlen(init_msg));
    _exit(CLF_ERR_IO);
}

clf_status clf_mpi_agree(int *argc, char ***argv, int with_mpi, int *rank, int *size, int *alone) {
    *alone = 0;
    const char *r0 = getenv("OMPI_COMM_WORLD_RANK");
    if (!r0) r0 = getenv("PMI_RANK");
    double timeout = agree_timeout();
    if (r0 && atoi(r0) == 0)
        snprintf(init_msg, sizeof init_msg, "clinfer: %s: the MPI job did not start: a rank did not join within %.0f s "
                 "(every rank runs clinfer ... --mpi; CLINFER_MPI_TIMEOUT)\n", clf_status_name(CLF_ERR_IO), timeout);
    struct sigaction sa = {.sa_handler = init_too_long}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    alarm((unsigned)ceil(timeout));
    clf_status st = clf_mpi_start(argc, argv, rank, size);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    CLF_TRY(st);
    clf_mpi_hello mine = {.with_mpi = with_mpi != 0}, *all = NULL;
    snprintf(mine.command, sizeof mine.command, "%s", *argc >= 2 ? (*argv)[1] : "");
    if (job.rank == 0 && !(all = calloc((size_t)job.size, sizeof *all))) MPI_Abort(MPI_COMM_WORLD, CLF_ERR_MEMORY);
    MPI_Request req;
    MPI_Igather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    st = clf_mpi_wait(&req, timeout, "waiting for every rank's command (each runs clinfer with --mpi)");
    int32_t verdict = CLF_MPI_GO;
    for (int r = 1; st == CLF_OK && job.rank == 0 && r < job.size; r++)
        if (all[r].with_mpi != all[0].with_mpi || strncmp(all[r].command, all[0].command, sizeof mine.command)) {
            st = clf_fail(CLF_ERR_ARG, "rank %d runs '%.31s' %s --mpi, rank 0 '%.31s' %s: every rank of the job runs "
                                       "the same command with --mpi", r, all[r].command,
                          all[r].with_mpi ? "with" : "without", all[0].command, all[0].with_mpi ? "with" : "without");
            verdict = CLF_MPI_STOP_JOB;
        }
    if (st == CLF_OK && job.rank == 0 && !all[0].with_mpi) verdict = CLF_MPI_ALONE; /* and so every rank */
    free(all);
    if (st == CLF_OK || verdict == CLF_MPI_STOP_JOB) {
        MPI_Ibcast(&verdict, 1, MPI_INT32_T, 0, MPI_COMM_WORLD, &req);
        clf_status sent = clf_mpi_wait(&req, timeout, "waiting for rank 0 to agree on the command");
        if (st == CLF_OK) st = sent;
        else if (sent != CLF_OK) return st; /* rank 0's line first; the job is aborted */
    }
    if (st != CLF_OK && verdict != CLF_MPI_STOP_JOB) return st; /* no answer: clf_mpi_end aborts the job */
    if (verdict != CLF_MPI_GO) { /* every rank knows: the job ends cleanly */
        MPI_Finalize();
        job.started = 0;
        if (verdict == CLF_MPI_STOP_JOB && job.rank > 0) st = clf_fail(CLF_ERR_ARG, "%s", ""); /* rank 0 says why */
        *alone = verdict == CLF_MPI_ALONE;
    }
    return st;
}

int clf_mpi_end(int status) {
    if (!job.started) return status;
    if (status != 0) {
        /* the command has printed its line; a worker may be waiting on a
         * stage that failed, or still loading: end them all */
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    if (!job.setup_sent) {
        clf_mpi_setup *su = calloc(1, sizeof *su);
        if (!su) MPI_Abort(MPI_COMM_WORLD, CLF_ERR_MEMORY);
        su->stop = 1;
        MPI_Request req; /* the workers' MPI_Ibcast (a blocking one would not match it) */
        MPI_Ibcast(su, sizeof *su, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        free(su);
    } else if (job.size > 1)
        clf_mpi_send_op(CLF_MPI_STOP, 0, NULL, 1);
    clf_mpi_buf_free(&job.buf);
    MPI_Finalize();
    job.started = 0;
    return status;
}

/* The next answer on TAG_REPLY: `bytes` of payload into dst, or the failure
 * a rank reported (its message names it). *hops: what the answer says of
 * the ranks' time and the bytes back. */
static clf_status wait_reply(void *dst, size_t bytes, clf_mpi_hops *hops) {
    CLF_TRY(clf_mpi_recv(&job.buf, MPI_ANY_SOURCE, CLF_MPI_TAG_REPLY));
    const clf_mpi_msg *h = clf_mpi_head(&job.buf);
    size_t got = job.buf.len - sizeof *h;
    job.unanswered = 0;
    if (h->status != CLF_OK) {
        clf_status st = clf_fail((clf_status)h->status, "%.*s", (int)got, job.buf.p + sizeof *h);
        if (h->a[0] == CLF_MPI_PASS) { /* that rank drops the passes after it */
            job.broken = st;
            snprintf(job.broken_msg, sizeof job.broken_msg, "%s", clf_last_error());
            if (job.on_broken) job.on_broken();
            clf_fail(st, "%s", job.broken_msg); /* the hook may have said something else */
        }
        return st;
    }
    if (got != bytes)
        return clf_fail(CLF_ERR_FORMAT, "rank %d answered %zu bytes, %zu expected", h->rank, got, bytes);
    if (bytes) memcpy(dst, job.buf.p + sizeof *h, bytes);
    hops->remote_s = h->busy_s, hops->bytes_back = (double)job.buf.len;
    return CLF_OK;
}

void clf_mpi_on_broken(void (*fn)(void)) { job.on_broken = fn; }

/* A failed pass stops the pipeline: said again by every later request. A
 * failure answered while no one waited (a pass that wanted no logits) is
 * read here, before the next request. */
static clf_status check_broken(void) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, CLF_MPI_TAG_REPLY, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (flag && !job.broken) wait_reply(NULL, 0, &(clf_mpi_hops){0});
    return job.broken ? clf_fail(job.broken, "%s", job.broken_msg) : CLF_OK;
}

clf_status clf_mpi_flush(void) {
    if (!job.started || job.rank != 0 || job.size == 1 || !job.setup_sent) return CLF_OK;
    CLF_TRY(check_broken());
    if (!job.unanswered) return CLF_OK;
    CLF_TRY(clf_mpi_send_op(CLF_MPI_SYNC, 0, NULL, 1));
    return wait_reply(NULL, 0, &(clf_mpi_hops){0});
}

static void add_hops(clf_mpi_hops *to, const clf_mpi_hops *h) {
    to->passes += h->passes, to->rows += h->rows, to->answered += h->answered;
    to->bytes_down += h->bytes_down, to->bytes_back += h->bytes_back;
    to->wait_s += h->wait_s, to->remote_s += h->remote_s;
    to->messaging_s = to->wait_s - to->remote_s;
}

const char *clf_mpi_devices(void) { return job.devices; }

void clf_mpi_get_stats(clf_mpi_stats *s) {
    *s = job.stats;
    s->ranks = job.size;
}

typedef struct mpi_link {
    clf_stage_link base;
    int id;
    int n_embd, n_vocab;
} mpi_link;

static const clf_stage_ops mpi_ops;

static clf_status link_ctx_create(void *next, int n_ctx, int n_batch, int n_seq, clf_type kv_type,
                                  clf_stage_link **out) {
    const clf_llama *m = next;
    mpi_link *l = calloc(1, sizeof *l);
    if (!l) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    *l = (mpi_link){{&mpi_ops, l}, ++job.next_id, m->hp.n_embd, m->hp.n_vocab};
    clf_status st = check_broken();
    if (st == CLF_OK) st = clf_mpi_send_op(CLF_MPI_CTX_CREATE, l->id, (int32_t[4]){n_ctx, n_batch, n_seq, kv_type}, 1);
    if (st == CLF_OK) st = wait_reply(NULL, 0, &(clf_mpi_hops){0});
    if (st != CLF_OK) {
        /* the ranks before the one that failed hold it: free it there */
        clf_mpi_send_op(CLF_MPI_CTX_FREE, l->id, NULL, 1);
        free(l);
        return st;
    }
    *out = &l->base;
    return CLF_OK;
}

static clf_status link_pass(clf_stage_link *base, const clf_stage_pass *p, const float *x, float *logits) {
    mpi_link *l = base->impl;
    float *dst;
    CLF_TRY(check_broken());
    CLF_TRY(clf_mpi_pass_pack(&job.buf, l->id, p, l->n_embd, &dst));
    memcpy(dst, x, (size_t)p->n * (size_t)l->n_embd * sizeof *x);
    double t0 = clf_now_s();
    clf_mpi_hops h = {.passes = 1, .rows = p->n, .bytes_down = (double)job.buf.len};
    CLF_TRY(clf_mpi_send(job.buf.p, job.buf.len, 1, CLF_MPI_TAG_PIPE));
    if (clf_stage_pass_rows(p)) { /* else no answer: on to the next while the ranks below work */
        CLF_TRY(wait_reply(logits, (size_t)clf_stage_pass_rows(p) * (size_t)l->n_vocab * sizeof *logits, &h));
        h.answered = 1, h.wait_s = clf_now_s() - t0;
    } else job.unanswered++;
    add_hops(p->n == 1 ? &job.stats.one : &job.stats.many, &h);
    return CLF_OK;
}

static void link_seq_rewind(clf_stage_link *base, int seq, int pos) {
    const mpi_link *l = base->impl;
    clf_mpi_send_op(CLF_MPI_SEQ_REWIND, l->id, (int32_t[4]){seq, pos}, 1);
}

static void link_free(clf_stage_link *base) {
    mpi_link *l = base->impl;
    clf_mpi_send_op(CLF_MPI_CTX_FREE, l->id, NULL, 1);
    free(l);
}

static const clf_stage_ops mpi_ops = {link_ctx_create, link_pass, link_seq_rewind, link_free};

/* Layer ranges for the job's ranks: equal weight bytes, or by ratio. Only
 * rank 0's device is known here; each rank checks its own as it loads. */
static clf_status make_plan(const clf_gguf *g, const double *ratio, int n_ratio, clf_mpi_setup *su) {
    if (job.size > CLF_SPLIT_MAX || job.size > CLF_MPI_MAX_RANKS)
        return clf_fail(CLF_ERR_ARG, "%d ranks: a model splits into %d stages at most", job.size, CLF_SPLIT_MAX);
    if (ratio && n_ratio != job.size)
        return clf_fail(CLF_ERR_ARG, "--split-ratio has %d parts for %d ranks", n_ratio, job.size);
    clf_split_model *sm = malloc(sizeof *sm);
    clf_split_plan *plan = malloc(sizeof *plan);
    double equal[CLF_SPLIT_MAX], room[CLF_SPLIT_MAX];
    for (int i = 0; i < job.size; i++) equal[i] = 1, room[i] = INFINITY;
    clf_status st = sm && plan ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_split_model_from_gguf(g, 1, 1, 1, 4, sm);
    if (st == CLF_OK) st = clf_split_plan_make(sm, job.size, ratio ? ratio : equal, room, plan);
    for (int i = 0; st == CLF_OK && i < job.size; i++)
        su->layers[i][0] = plan->st[i].l0, su->layers[i][1] = plan->st[i].l1;
    free(sm);
    free(plan);
    return st;
}

clf_status clf_mpi_load(clf_runtime *rt, const clf_gguf *g, const char *model, const char *device,
                        const double *ratio, int n_ratio, clf_llama **out) {
    if (!job.started || job.rank != 0) return clf_fail(CLF_ERR_ARG, "clf_mpi_load: rank 0 of a started job only");
    if (job.setup_sent) return clf_fail(CLF_ERR_ARG, "clf_mpi_load: one model per job");
    clf_mpi_setup *su = calloc(1, sizeof *su);
    clf_mpi_loaded *all = calloc((size_t)job.size, sizeof *all), mine = {0};
    if (!su || !all) {
        free(su), free(all);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    clf_status st = make_plan(g, ratio, n_ratio, su);
    if (st == CLF_OK && ((model && strlen(model) >= sizeof su->model) || (device && strlen(device) >= sizeof su->device)))
        st = clf_fail(CLF_ERR_ARG, "the model path or device selector is too long for the MPI setup");
    if (st != CLF_OK) {
        free(su), free(all);
        return st; /* the workers wait for the setup: clf_mpi_end aborts them */
    }
    snprintf(su->model, sizeof su->model, "%s", model ? model : "");
    snprintf(su->device, sizeof su->device, "%s", device ? device : "");
    su->file_bytes = clf_gguf_size(g);
    su->digest = clf_gguf_header_digest(g);
    /* nonblocking, so that a SIGTERM (a rank gone) stops the waits */
    MPI_Request req;
    MPI_Ibcast(su, sizeof *su, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    st = clf_mpi_wait(&req, 0, "sending the setup");
    job.setup_sent = 1;
    clf_llama *m = NULL;
    if (st == CLF_OK) st = clf_llama_load_range(rt, g, su->layers[0][0], su->layers[0][1], &m);
    free(su);
    /* every rank's load status, rank 0's included; the first failure wins */
    mine.status = st;
    if (st != CLF_ERR_INTERRUPTED) {
        MPI_Igather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        clf_status got = clf_mpi_wait(&req, 0, "waiting for the ranks to load");
        if (st == CLF_OK) st = got;
    }
    for (int r = 1; st == CLF_OK && r < job.size; r++)
        if (all[r].status != CLF_OK) st = clf_fail((clf_status)all[r].status, "%s", all[r].message);
    for (int r = 1; st == CLF_OK && r < job.size; r++) {
        size_t used = strlen(job.devices);
        snprintf(job.devices + used, sizeof job.devices - used, " + %s", all[r].device);
    }
    free(all);
    if (st != CLF_OK) {
        clf_llama_free(m);
        return st;
    }
    if (job.size > 1) clf_llama_set_next(m, &mpi_ops, m);
    *out = m;
    return CLF_OK;
}

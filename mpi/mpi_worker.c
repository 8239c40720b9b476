/* Ranks 1..N-1: one stage each, serving the requests that come down the
 * pipeline (mpi_proto.h) until rank 0 says stop. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clf_mpi.h"
#include "model_path.h"
#include "mpi_wire.h"
#include "runtime.h"
#include "stage.h"

typedef struct worker {
    int rank, size, last;
    clf_gguf *g;
    clf_runtime *rt;
    clf_llama *m;
    clf_llama_ctx **ctx; /* by the id rank 0 gave (0 unused) */
    int n_ctx;
    int failed; /* a pass failed here: later ones are dropped (mpi_proto.h) */
    long passes, fail_at; /* testing aid: CLINFER_MPI_FAIL_PASS=N fails this rank's N-th pass */
    clf_mpi_buf in, out;
} worker;

/* Opens the model as rank 0 named it and loads this rank's layers. */
static clf_status load(worker *w, const clf_mpi_setup *su, int l0, int l1) {
    char path[4096];
    CLF_TRY(clf_model_path(su->model[0] ? su->model : NULL, path, sizeof path));
    CLF_TRY(clf_gguf_open(path, &w->g));
    if (clf_gguf_size(w->g) != su->file_bytes)
        return clf_fail(CLF_ERR_FORMAT, "%s has %zu bytes, rank 0's model %llu: not the same file", path,
                        clf_gguf_size(w->g), (unsigned long long)su->file_bytes);
    if (clf_gguf_header_digest(w->g) != su->digest)
        return clf_fail(CLF_ERR_FORMAT, "%s has rank 0's size but other metadata or tensors: not the same file", path);
    CLF_TRY(clf_runtime_create(su->device[0] ? su->device : NULL, &w->rt));
    return clf_llama_load_range(w->rt, w->g, l0, l1, &w->m);
}

static clf_status ctx_create(worker *w, const clf_mpi_msg *h) {
    if (h->ctx <= 0 || h->ctx > (1 << 24))
        return clf_fail(CLF_ERR_FORMAT, "a context id %d from rank %d", h->ctx, h->rank);
    if (h->ctx >= w->n_ctx) {
        int n = h->ctx + 8;
        clf_llama_ctx **p = realloc(w->ctx, (size_t)n * sizeof *p);
        if (!p) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        memset(p + w->n_ctx, 0, (size_t)(n - w->n_ctx) * sizeof *p);
        w->ctx = p, w->n_ctx = n;
    }
    clf_llama_ctx_free(w->ctx[h->ctx]);
    w->ctx[h->ctx] = NULL;
    return clf_llama_ctx_create_seqs(w->m, h->a[0], h->a[1], h->a[2], (clf_type)h->a[3], &w->ctx[h->ctx]);
}

static clf_llama_ctx *find(const worker *w, int id) { return id > 0 && id < w->n_ctx ? w->ctx[id] : NULL; }

/* A pass: this stage's layers, then on to the next rank, or the logits
 * rows back to rank 0 from the last. */
static clf_status pass(worker *w, clf_llama_ctx *c) {
    int ctx = clf_mpi_head(&w->in)->ctx, n_embd = w->m->hp.n_embd;
    clf_stage_pass p;
    const float *x;
    CLF_TRY(clf_mpi_pass_unpack(&w->in, n_embd, &p, &x));
    if (++w->passes == w->fail_at)
        return clf_fail(CLF_ERR_CL, "pass %ld failed as CLINFER_MPI_FAIL_PASS asked (a testing aid)", w->passes);
    double busy = clf_mpi_head(&w->in)->busy_s, t0 = clf_now_s();
    if (!w->last) {
        float *y;
        CLF_TRY(clf_mpi_pass_pack(&w->out, ctx, &p, n_embd, &y));
        CLF_TRY(clf_llama_stage_pass(c, &p, x, y));
        clf_mpi_head(&w->out)->rank = w->rank;
        clf_mpi_head(&w->out)->busy_s = busy + clf_now_s() - t0;
        return clf_mpi_send(w->out.p, w->out.len, w->rank + 1, CLF_MPI_TAG_PIPE);
    }
    size_t n = sizeof(clf_mpi_msg) + (size_t)clf_stage_pass_rows(&p) * (size_t)w->m->hp.n_vocab * sizeof(float);
    CLF_TRY(clf_mpi_buf_reserve(&w->out, n));
    *clf_mpi_head(&w->out) = (clf_mpi_msg){.op = CLF_MPI_REPLY, .ctx = ctx, .rank = w->rank, .a = {CLF_MPI_PASS}};
    CLF_TRY(clf_llama_stage_pass(c, &p, x, (float *)(w->out.p + sizeof(clf_mpi_msg))));
    clf_mpi_head(&w->out)->busy_s = busy + clf_now_s() - t0;
    if (!clf_stage_pass_rows(&p)) return CLF_OK; /* no logits wanted: no answer */
    return clf_mpi_send(w->out.p, n, 0, CLF_MPI_TAG_REPLY);
}

/* Runs one request; forwards what the next ranks must see too. */
static clf_status serve(worker *w, clf_status loaded) {
    const clf_mpi_msg *h = clf_mpi_head(&w->in);
    clf_llama_ctx *c = find(w, h->ctx);
    int fwd = !w->last;
    clf_status st;
    switch (h->op) {
    case CLF_MPI_CTX_CREATE:
    case CLF_MPI_SYNC:
        if (h->op == CLF_MPI_CTX_CREATE) {
            if (loaded != CLF_OK) return loaded; /* rank 0 knows already; say it again */
            CLF_TRY(ctx_create(w, h));
        }
        if (w->last)
            return clf_mpi_send(&(clf_mpi_msg){.op = CLF_MPI_REPLY, .ctx = h->ctx, .rank = w->rank, .a = {h->op}},
                                sizeof(clf_mpi_msg), 0, CLF_MPI_TAG_REPLY);
        break;
    case CLF_MPI_PASS:
        if (w->failed) return CLF_OK; /* dropped: rank 0 has this rank's failure */
        if (!c) st = clf_fail(CLF_ERR_ARG, "a pass for context %d, which this rank does not hold", h->ctx);
        else st = pass(w, c);
        w->failed = st != CLF_OK;
        return st;
    case CLF_MPI_SEQ_REWIND:
        if (c) clf_llama_seq_rewind(c, h->a[0], h->a[1]);
        break;
    case CLF_MPI_CTX_FREE:
        clf_llama_ctx_free(c);
        if (c) w->ctx[h->ctx] = NULL;
        break;
    case CLF_MPI_STOP: break;
    default: return clf_fail(CLF_ERR_FORMAT, "an MPI message with op %d from rank %d", h->op, h->rank);
    }
    if (!fwd) return CLF_OK;
    clf_mpi_msg m = *h;
    m.rank = w->rank;
    return clf_mpi_send(&m, sizeof m, w->rank + 1, CLF_MPI_TAG_PIPE);
}

int clf_mpi_worker(void) {
    worker w = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    w.last = w.rank == w.size - 1;
    /* rank 0 does all the I/O: nothing of ours, PoCL's or LLVM's reaches stdout */
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO), close(null);
    clf_mpi_setup su;
    MPI_Request req; /* rank 0's side is nonblocking (clf_mpi_load): so is ours, to match */
    MPI_Ibcast(&su, sizeof su, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (clf_mpi_wait(&req, 0, "waiting for the setup") != CLF_OK) MPI_Abort(MPI_COMM_WORLD, CLF_ERR_INTERRUPTED);
    if (su.stop) {
        MPI_Finalize();
        return 0;
    }
    const char *fail_at = getenv("CLINFER_MPI_FAIL_PASS");
    w.fail_at = fail_at ? atol(fail_at) : 0;
    clf_status loaded = load(&w, &su, su.layers[w.rank][0], su.layers[w.rank][1]);
    clf_mpi_loaded ld = {.status = loaded};
    if (loaded != CLF_OK) snprintf(ld.message, sizeof ld.message, "rank %d: %s", w.rank, clf_last_error());
    if (w.rt) snprintf(ld.device, sizeof ld.device, "%s", w.rt->dev.name);
    MPI_Igather(&ld, sizeof ld, MPI_BYTE, NULL, 0, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    if (clf_mpi_wait(&req, 0, "sending the load status") != CLF_OK) MPI_Abort(MPI_COMM_WORLD, CLF_ERR_INTERRUPTED);
    for (;;) {
        clf_status st = clf_mpi_recv(&w.in, w.rank - 1, CLF_MPI_TAG_PIPE);
        if (st == CLF_OK) st = serve(&w, loaded);
        if (st != CLF_OK)
            clf_mpi_reply_error(st, w.rank, w.in.len ? clf_mpi_head(&w.in)->op : 0,
                                w.in.len ? clf_mpi_head(&w.in)->ctx : 0);
        if (st == CLF_OK && clf_mpi_head(&w.in)->op == CLF_MPI_STOP) break;
    }
    for (int i = 0; i < w.n_ctx; i++) clf_llama_ctx_free(w.ctx[i]);
    free(w.ctx);
    clf_mpi_buf_free(&w.in);
    clf_mpi_buf_free(&w.out);
    clf_llama_free(w.m);
    clf_runtime_free(w.rt);
    clf_gguf_close(w.g);
    MPI_Finalize();
    return 0;
}

/* mpi_logits: every logit a model gives for a fixed script of calls, as raw
 * floats, for tests/mpi.sh to compare a model split across MPI ranks with
 * the same model in one process (they must be identical: the same kernels
 * on the same values).
 *
 *   mpi_logits MODEL OUT          one process, clf_llama_load
 *   mpirun -np N mpi_logits MODEL OUT --mpi
 *
 * The script: a prompt with every row's logits (clf_llama_eval,
 * all_logits), 6 greedy decode steps, a rewind of 3 positions and 3 steps
 * again, 4 passes of clf_llama_eval_seqs over two sequences (a prompt on
 * sequence 1 beside decodes on sequence 0), then 200 more tokens on
 * sequence 0 with the last row's logits (over a split: micro-batches, all
 * but the last wanting no logits) and 2 decode steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clf_mpi.h"
#include "runtime.h"

enum { N_CTX = 320, N_BATCH = 256, N_PROMPT = 11, N_LONG = 200 };

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static clf_status script(clf_llama *m, FILE *out) {
    int nv = m->hp.n_vocab;
    clf_llama_ctx *c;
    CLF_TRY(clf_llama_ctx_create_seqs(m, N_CTX, N_BATCH, 2, CLF_F32, &c));
    float *lg = malloc((size_t)N_PROMPT * nv * sizeof *lg), *lg1 = malloc((size_t)nv * sizeof *lg1);
    int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)((i * 7919 + 13) % nv);
    clf_status st = lg && lg1 ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_llama_eval(c, prompt, N_PROMPT, 1, lg);
    if (st == CLF_OK) fwrite(lg, sizeof *lg, (size_t)N_PROMPT * nv, out);
    int32_t tok = st == CLF_OK ? argmax(lg + (size_t)(N_PROMPT - 1) * nv, nv) : 0;
    for (int i = 0; st == CLF_OK && i < 9; i++) {
        if (i == 6) clf_llama_rewind(c, c->n_past - 3);
        if ((st = clf_llama_eval(c, &tok, 1, 0, lg)) == CLF_OK) fwrite(lg, sizeof *lg, (size_t)nv, out);
        tok = argmax(lg, nv);
    }
    int32_t tok1 = prompt[3];
    for (int i = 0; st == CLF_OK && i < 4; i++) {
        clf_llama_seq_batch b[2] = {{.seq = 0, .tokens = &tok, .n = 1, .logits = lg}, {.seq = 1, .tokens = i == 0 ? prompt : &tok1, .n = i == 0 ? 5 : 1, .logits = lg1}};
        if ((st = clf_llama_eval_seqs(c, b, 2)) != CLF_OK) break;
        fwrite(lg, sizeof *lg, (size_t)nv, out);
        fwrite(lg1, sizeof *lg1, (size_t)nv, out);
        tok = argmax(lg, nv), tok1 = argmax(lg1, nv);
    }
    int32_t more[N_LONG];
    for (int i = 0; i < N_LONG; i++) more[i] = (int32_t)((i * 104729 + 7) % nv);
    if (st == CLF_OK && (st = clf_llama_eval(c, more, N_LONG, 0, lg)) == CLF_OK) fwrite(lg, sizeof *lg, (size_t)nv, out);
    for (int i = 0; st == CLF_OK && i < 2; i++) {
        tok = argmax(lg, nv);
        if ((st = clf_llama_eval(c, &tok, 1, 0, lg)) == CLF_OK) fwrite(lg, sizeof *lg, (size_t)nv, out);
    }
    free(lg);
    free(lg1);
    clf_llama_ctx_free(c);
    return st;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_logits MODEL OUT [--mpi]\n");
        return 2;
    }
    int mpi = argc > 3 && !strcmp(argv[3], "--mpi"), rank = 0, size = 1;
    clf_status st = mpi ? clf_mpi_start(&argc, &argv, &rank, &size) : CLF_OK;
    if (st == CLF_OK && rank > 0) return clf_mpi_worker();
    clf_gguf *g = NULL;
    clf_runtime *rt = NULL;
    clf_llama *m = NULL;
    FILE *out = NULL;
    if (st == CLF_OK) st = clf_gguf_open(argv[1], &g);
    if (st == CLF_OK) st = clf_runtime_create(NULL, &rt);
    if (st == CLF_OK) st = mpi ? clf_mpi_load(rt, g, argv[1], NULL, NULL, 0, &m) : clf_llama_load(rt, g, &m);
    if (st == CLF_OK && !(out = fopen(argv[2], "wb"))) st = clf_fail(CLF_ERR_IO, "cannot write %s", argv[2]);
    if (st == CLF_OK) st = script(m, out);
    if (out && fclose(out) && st == CLF_OK) st = clf_fail(CLF_ERR_IO, "cannot write %s", argv[2]);
    clf_llama_free(m);
    clf_runtime_free(rt);
    clf_gguf_close(g);
    if (st != CLF_OK) fprintf(stderr, "mpi_logits: %s: %s\n", clf_status_name(st), clf_last_error());
    return mpi ? clf_mpi_end((int)st) : (int)st;
}

/* Batched decoding of several sequences (clf_llama_eval_seqs): a mixed
 * batch — one sequence's prefill chunk beside single-token decodes at other
 * positions, split across passes — gives each sequence the logits it gets
 * when run alone, for the families whose attention differs (llama, qwen3's
 * QK-norm, gemma3's sliding window ring). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "llama.h"
#include "ref_llama.h"
#include "testutil.h"

/* The same tokens take the same products batched as alone: a decode token
 * batched is computed as the one-token GEMV computes it
 * (clf_matmul_rowwise: with int8 activations where the device's GEMVs have
 * them, so quantized weights agree exactly there), a chunk by the GEMM.
 * Where a one-token product is the float GEMV, batched it is the GEMM's
 * summation order: ~1e-7 relative (measured up to 1.0e-6). */
#define TOL 1e-5

enum { N_SEQ = 4, N_STEPS = 3 };

typedef struct {
    clf_llama *m;
    clf_gguf *g;
    char path[32];
} loaded;

static void load(const tiny_model *tm, loaded *l) {
    strcpy(l->path, "/tmp/clinfer-batch-XXXXXX");
    int fd = mkstemp(l->path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(tm, tu_seed() + (uint64_t)tm->type, l->path), 0);
    TU_OK(clf_gguf_open(l->path, &l->g));
    TU_OK(clf_llama_load(tu_runtime(), l->g, &l->m));
}

static void unload(loaded *l) {
    clf_llama_free(l->m);
    clf_gguf_close(l->g);
    unlink(l->path);
}

/* Sequence s: a history of hist[s] tokens (prefilled alone), then a first
 * batched step carrying first[s] tokens (sequence 2's is a prefill chunk),
 * then N_STEPS single-token decodes together; with n_batch 8 the first step
 * (7 + 3 rows) takes two passes. Returns the largest relative difference (a
 * norm over a sequence's logits). Sequence 3 wraps gemma3's ring. */
static double run_mixed(const tiny_model *tm, int n_batch) {
    static const int hist[N_SEQ] = {9, 5, 0, 30}, first[N_SEQ] = {1, 1, 7, 1};
    loaded l;
    load(tm, &l);
    const int V = tm->n_vocab, total = 30 + 7 + N_STEPS;
    int32_t toks[N_SEQ][48];
    uint64_t r = tu_seed() ^ 0x77;
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 0; i < total; i++) toks[s][i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *got = malloc((size_t)N_SEQ * (N_STEPS + 1) * V * sizeof *got);
    float *want = malloc((size_t)N_SEQ * (N_STEPS + 1) * V * sizeof *want);
    memset(got, 0xff, (size_t)N_SEQ * (N_STEPS + 1) * V * sizeof *got);

    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(l.m, 64, n_batch, N_SEQ, CLF_F32, &c));
    assert_int_equal(c->n_seq, N_SEQ);
    for (int s = 0; s < N_SEQ; s++) {
        if (!hist[s]) continue;
        clf_llama_seq_batch one = {.seq = s, .tokens = toks[s], .n = hist[s], .logits = NULL};
        TU_OK(clf_llama_eval_seqs(c, &one, 1));
    }
    for (int step = 0; step <= N_STEPS; step++) {
        clf_llama_seq_batch b[N_SEQ];
        for (int s = 0; s < N_SEQ; s++) {
            int at = clf_llama_seq_len(c, s), n = step ? 1 : first[s];
            /* sequences in a shuffled order: segments need not follow them */
            int k = (s + step) % N_SEQ;
            b[k] = (clf_llama_seq_batch){.seq = s, .tokens = toks[s] + at, .n = n, .logits = got + ((size_t)s * (N_STEPS + 1) + step) * V};
        }
        TU_OK(clf_llama_eval_seqs(c, b, N_SEQ));
    }
    for (int s = 0; s < N_SEQ; s++) assert_int_equal(clf_llama_seq_len(c, s), hist[s] + first[s] + N_STEPS);
    clf_llama_ctx_free(c);

    /* each sequence alone, through the single-sequence API */
    for (int s = 0; s < N_SEQ; s++) {
        TU_OK(clf_llama_ctx_create(l.m, 64, n_batch, CLF_F32, &c));
        float *w = want + (size_t)s * (N_STEPS + 1) * V;
        if (hist[s]) TU_OK(clf_llama_eval(c, toks[s], hist[s], 0, w));
        TU_OK(clf_llama_eval(c, toks[s] + hist[s], first[s], 0, w));
        for (int step = 1; step <= N_STEPS; step++) TU_OK(clf_llama_eval(c, toks[s] + c->n_past, 1, 0, w + (size_t)step * V));
        clf_llama_ctx_free(c);
    }
    double err = 0;
    for (int s = 0; s < N_SEQ; s++) {
        size_t off = (size_t)s * (N_STEPS + 1) * V;
        double e = tu_rel_err_f(got + off, want + off, (size_t)(N_STEPS + 1) * V);
        if (e > err) err = e;
    }
    free(got);
    free(want);
    unload(&l);
    return err;
}

static const tiny_model BASE = {.arch = "llama", .n_layer = 2, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                                .n_vocab = 97, .type = CLF_F32};

static void check(const tiny_model *tm, int n_batch) {
    double err = run_mixed(tm, n_batch);
    double tol = TOL;
    print_message("  %s %s batch=%d: max rel diff batched vs alone %.2e (tol %.0e)\n", tm->arch,
                  clf_type_get(tm->type)->name, n_batch, err, tol);
    assert_true(err <= tol);
}

static void test_llama(void **state) {
    (void)state;
    tiny_model tm = BASE;
    check(&tm, 8);  /* the first step split over two passes */
    check(&tm, 64); /* in one */
    tm.type = CLF_Q8_0;
    check(&tm, 64);
    tm.type = CLF_Q4_1;
    check(&tm, 8);
}

static void test_qwen3(void **state) {
    (void)state;
    tiny_model tm = BASE;
    tm.arch = "qwen3", tm.n_head = 4, tm.n_head_kv = 2, tm.n_embd = 96;
    check(&tm, 16);
}

/* sliding-window layers: each sequence's own ring (window 8, 32 slots) */
static void test_gemma3(void **state) {
    (void)state;
    tiny_model tm = BASE;
    tm.arch = "gemma3", tm.n_layer = 6, tm.n_head = 2, tm.n_embd = 96, tm.window = 8, tm.tied = 1;
    check(&tm, 8);
}

/* Sequence 1 (holding other tokens) becomes the first k tokens of
 * sequence 0's prompt of len (clf_llama_seq_copy) and goes on with its own 6-token chunk and 3
 * decodes; sequence 2 takes the same tokens from scratch. The same calls
 * on both, so the same kernels: only the prefix's rows came from chunks of
 * another length (the GEMM's rows are independent of their count, TOL
 * covers its summation order). Returns the largest relative difference of
 * their logits. */
static double run_copy(const tiny_model *tm, int n_batch, int len, int k) {
    enum { N_CONT = 6, N_DEC = 3 };
    loaded l;
    load(tm, &l);
    const int V = tm->n_vocab;
    int32_t prompt[48], cont[N_CONT + N_DEC];
    uint64_t r = tu_seed() ^ 0x5eed;
    for (int i = 0; i < len; i++) prompt[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    for (int i = 0; i < N_CONT + N_DEC; i++) cont[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *got = malloc((size_t)(1 + N_DEC) * V * sizeof *got), *want = malloc((size_t)(1 + N_DEC) * V * sizeof *want);
    memset(got, 0xff, (size_t)(1 + N_DEC) * V * sizeof *got);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(l.m, 64, n_batch, 3, CLF_F32, &c));
    clf_llama_seq_batch p[2] = {{.seq = 0, .tokens = prompt, .n = len, .logits = NULL}, {.seq = 1, .tokens = cont, .n = N_CONT + N_DEC, .logits = NULL}}; /* dst held others */
    TU_OK(clf_llama_eval_seqs(c, p, 2));
    TU_OK(clf_llama_seq_copy(c, 0, 1, k));
    assert_int_equal(clf_llama_seq_len(c, 0), len);
    assert_int_equal(clf_llama_seq_len(c, 1), k);
    clf_llama_seq_batch fresh = {.seq = 2, .tokens = prompt, .n = k, .logits = NULL};
    TU_OK(clf_llama_eval_seqs(c, &fresh, 1));
    for (int s = 1; s <= 2; s++) {
        float *out = s == 1 ? got : want;
        clf_llama_seq_batch b = {.seq = s, .tokens = cont, .n = N_CONT, .logits = out};
        TU_OK(clf_llama_eval_seqs(c, &b, 1));
        for (int i = 0; i < N_DEC; i++) {
            b = (clf_llama_seq_batch){.seq = s, .tokens = cont + N_CONT + i, .n = 1, .logits = out + (size_t)(1 + i) * V};
            TU_OK(clf_llama_eval_seqs(c, &b, 1));
        }
        assert_int_equal(clf_llama_seq_len(c, s), k + N_CONT + N_DEC);
    }
    double err = tu_rel_err_f(got, want, (size_t)(1 + N_DEC) * V);
    print_message("  %s %s batch=%d: %d of %d tokens copied, then the same tokens: max rel diff %.2e (tol %.0e)\n",
                  tm->arch, clf_type_get(tm->type)->name, n_batch, k, len, err, TOL);
    clf_llama_ctx_free(c);
    free(got);
    free(want);
    unload(&l);
    return err;
}

static void test_seq_copy(void **state) {
    (void)state;
    tiny_model tm = BASE;
    assert_true(run_copy(&tm, 8, 20, 13) <= TOL);
    assert_true(run_copy(&tm, 8, 20, 20) <= TOL); /* the whole sequence */
    tm.type = CLF_Q8_0;                           /* int8 decode GEMVs where the device has them */
    assert_true(run_copy(&tm, 16, 20, 9) <= TOL);
    /* gemma3's ring (window 8, 32 slots): not yet wrapped, then wrapped with the window before k still
     * in it (k = 36 of 44: keys 29-35 in slots 29-31 and 0-3) */
    tm = BASE;
    tm.arch = "gemma3", tm.n_layer = 6, tm.n_head = 2, tm.n_embd = 96, tm.window = 8, tm.tied = 1;
    assert_true(run_copy(&tm, 8, 20, 13) <= TOL);
    assert_true(run_copy(&tm, 8, 40, 20) <= TOL);
    assert_true(run_copy(&tm, 8, 44, 36) <= TOL);
}

/* A copy that cannot be made changes nothing: sequences or a length out of
 * range, a sliding window whose blocks before n were given back. */
static void test_seq_copy_bad(void **state) {
    (void)state;
    tiny_model tm = BASE;
    tm.arch = "gemma3", tm.n_layer = 6, tm.n_head = 2, tm.n_embd = 96, tm.window = 8, tm.tied = 1;
    loaded l;
    load(&tm, &l);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(l.m, 128, 8, 2, CLF_F32, &c));
    int32_t toks[100] = {0};
    clf_llama_seq_batch b[2] = {{.seq = 0, .tokens = toks, .n = 100, .logits = NULL}, {.seq = 1, .tokens = toks, .n = 3, .logits = NULL}};
    TU_OK(clf_llama_eval_seqs(c, b, 2));
    assert_int_equal(clf_llama_seq_copy(c, 0, 2, 5), CLF_ERR_ARG);
    assert_int_equal(clf_llama_seq_copy(c, -1, 1, 0), CLF_ERR_ARG);
    assert_int_equal(clf_llama_seq_copy(c, 1, 0, 4), CLF_ERR_ARG);
    assert_string_equal(clf_last_error(), "copying 4 tokens of sequence 1, which holds 3");
    /* the last pass began at 96: the sliding layers kept keys from 96 - 8 + 1 less a block of 32 on, so
     * block 0 (positions 0..31) went back: 14 needs keys 7..13, 40 needs 33..39 */
    assert_int_equal(clf_llama_seq_copy(c, 0, 1, 14), CLF_ERR_ARG);
    assert_int_equal(clf_llama_seq_len(c, 0), 100);
    assert_int_equal(clf_llama_seq_len(c, 1), 3);
    TU_OK(clf_llama_seq_copy(c, 0, 1, 40));
    assert_int_equal(clf_llama_seq_len(c, 1), 40);
    TU_OK(clf_llama_seq_copy(c, 0, 0, 60)); /* onto itself: shortens it */
    assert_int_equal(clf_llama_seq_len(c, 0), 60);
    TU_OK(clf_llama_seq_copy(c, 1, 0, 0)); /* n = 0 empties dst */
    assert_int_equal(clf_llama_seq_len(c, 0), 0);
    clf_llama_ctx_free(c);
    unload(&l);
}

/* A malformed batch changes nothing: a sequence twice, out of range, or
 * past its context. */
static void test_bad_batch(void **state) {
    (void)state;
    loaded l;
    load(&BASE, &l);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(l.m, 16, 8, 2, CLF_F32, &c));
    int32_t toks[20] = {0};
    clf_llama_seq_batch twice[2] = {{.seq = 1, .tokens = toks, .n = 1, .logits = NULL}, {.seq = 1, .tokens = toks, .n = 1, .logits = NULL}};
    assert_int_equal(clf_llama_eval_seqs(c, twice, 2), CLF_ERR_ARG);
    assert_string_equal(clf_last_error(), "sequence 1 appears twice in a batch");
    clf_llama_seq_batch out = {.seq = 2, .tokens = toks, .n = 1, .logits = NULL};
    assert_int_equal(clf_llama_eval_seqs(c, &out, 1), CLF_ERR_ARG);
    clf_llama_seq_batch big[2] = {{.seq = 0, .tokens = toks, .n = 3, .logits = NULL}, {.seq = 1, .tokens = toks, .n = 17, .logits = NULL}};
    assert_int_equal(clf_llama_eval_seqs(c, big, 2), CLF_ERR_CONTEXT);
    assert_int_equal(clf_llama_seq_len(c, 0), 0);
    assert_int_equal(clf_llama_seq_len(c, 1), 0);
    clf_llama_ctx_free(c);
    unload(&l);
}

/* An abort hook that lets *budget calls pass, then asks to stop. */
static int stop_after(void *ud) {
    int *budget = ud;
    return (*budget)-- <= 0;
}

/* The runtime's abort hook stops a batch before its first pass (nothing
 * changes) or between passes (the passes done stay counted). */
static void test_abort_hook(void **state) {
    (void)state;
    loaded l;
    load(&BASE, &l);
    clf_runtime *rt = tu_runtime();
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(l.m, 64, 8, 2, CLF_F32, &c));
    int32_t toks[12] = {0};
    clf_llama_seq_batch b[2] = {{.seq = 0, .tokens = toks, .n = 1, .logits = NULL}, {.seq = 1, .tokens = toks, .n = 12, .logits = NULL}}; /* 13 rows: two passes */
    /* once without the hook: the hook is also asked before each program
     * build, so a cold kernel cache would spend the budget there */
    TU_OK(clf_llama_eval_seqs(c, b, 2));
    clf_llama_seq_rewind(c, 0, 0);
    clf_llama_seq_rewind(c, 1, 0);
    int budget = 0;
    clf_runtime_set_abort(rt, stop_after, &budget);
    assert_int_equal(clf_llama_eval_seqs(c, b, 2), CLF_ERR_INTERRUPTED);
    assert_string_equal(clf_last_error(), "evaluation stopped on request after 0 of its passes");
    assert_int_equal(clf_llama_seq_len(c, 0) + clf_llama_seq_len(c, 1), 0);
    budget = 1;
    assert_int_equal(clf_llama_eval_seqs(c, b, 2), CLF_ERR_INTERRUPTED);
    assert_int_equal(clf_llama_seq_len(c, 0), 1); /* the first pass: the decode and 7 of the chunk */
    assert_int_equal(clf_llama_seq_len(c, 1), 7);
    clf_runtime_set_abort(rt, NULL, NULL);
    clf_llama_ctx_free(c);
    unload(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_seq_copy),
        cmocka_unit_test(test_seq_copy_bad),
        cmocka_unit_test(test_bad_batch),
        cmocka_unit_test(test_abort_hook),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

/* Perplexity (llama.cpp's chunking and scoring) of a tiny random model on
 * the device against the same computed from the C reference's logits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "perplexity.h"
#include "ref_llama.h"
#include "testutil.h"

/* Reference: the same chunks through ref_llama_forward, log-softmax in double. */
static double ref_ppl(const clf_gguf *g, const int32_t *toks, int n, int n_ctx, int32_t bos, int vocab) {
    int chunks = n / n_ctx;
    double sum = 0;
    int count = 0;
    double *logits = malloc((size_t)n_ctx * vocab * sizeof *logits);
    int32_t *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    for (int k = 0; k < chunks; k++) {
        for (int j = 0; j < n_ctx; j++) chunk[j] = toks[k * n_ctx + j];
        if (bos >= 0) chunk[0] = bos;
        assert_int_equal(ref_llama_forward(g, chunk, n_ctx, logits), 0);
        for (int j = n_ctx / 2; j < n_ctx - 1; j++) {
            const double *l = logits + (size_t)j * vocab;
            double mx = l[0], s = 0;
            for (int v = 1; v < vocab; v++) mx = l[v] > mx ? l[v] : mx;
            for (int v = 0; v < vocab; v++) s += exp(l[v] - mx);
            sum += log(s) - (l[toks[k * n_ctx + j + 1]] - mx);
            count++;
        }
    }
    free(logits);
    free(chunk);
    return exp(sum / count);
}

static void test_matches_reference(void **state) {
    (void)state;
    tiny_model tm = {.arch = "llama", .n_layer = 2, .n_head = 2, .n_head_kv = 1, .head_dim = 64, .n_ff = 96,
                     .n_vocab = 61, .type = CLF_Q8_0, .tied = 1};
    char path[] = "/tmp/clinfer-ppl-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    uint64_t s = tu_seed();
    assert_int_equal(tiny_model_write(&tm, s, path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_llama *m;
    clf_llama_ctx *c;
    /* the reference multiplies floats: so do the products here (prefill's
     * int8 GEMM, int8_gemm, moves this perplexity by ~0.1%) */
    tu_tune("int8_gemm=0");
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_llama_ctx_create(m, 32, 32, CLF_F32, &c));
    enum { N = 3 * 24 + 5, CTX = 24 }; /* three chunks, a remainder left out */
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(tu_next(&s) % (uint64_t)tm.n_vocab);
    for (int32_t bos = -1; bos <= 1; bos += 2) {
        double ppl = 0;
        int scored = 0;
        TU_OK(clf_perplexity(c, toks, N, CTX, bos, NULL, NULL, &ppl, &scored));
        double ref = ref_ppl(g, toks, N, CTX, bos, tm.n_vocab);
        print_message("  bos %d: perplexity %.6f, reference %.6f, %d scored\n", bos, ppl, ref, scored);
        assert_int_equal(scored, 3 * (CTX - 1 - CTX / 2));
        assert_true(fabs(ppl - ref) / ref < 1e-4);
        assert_true(ppl > 1.0);
    }
    double ppl;
    assert_int_equal(clf_perplexity(c, toks, CTX - 1, CTX, -1, NULL, NULL, &ppl, NULL), CLF_ERR_ARG);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_reference)};
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

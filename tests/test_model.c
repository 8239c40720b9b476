/* The forward pass on the device against the scalar C reference
 * (tests/support/ref_llama.c) on tiny random GGUF models of every weight
 * type and every family, each quirk switched on: one-shot prefill, chunked
 * prefill, and token-by-token decode. */
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

/* Relative error of device logits against the reference, per mode. The
 * reference uses the same dequantized weights in double precision, so what
 * remains is F32 accumulation (~1e-6), the F16 KV cache's rounding, and on
 * CPUs with byte multiply-adds the Q8_0 and Q4 GEMVs' int8 activations
 * (quantized per 32-block, as llama.cpp's Q8_0/Q8_1: 0.5-1e-2 at the logits
 * of these models, up to 2.5e-2 over 36 decode steps whose K/V all come
 * from int8 products; measured over many seeds). */
#define TOL_F32_CACHE 1e-4
#define TOL_F16_CACHE 2e-3
/* Q8_0 / Q4_0 caches round K and V to 8 / 4 bits a block of 32, which the
 * tiny models' random weights amplify: at most 1.3e-2 and 2.1e-1 over 16
 * seeds (tests/test_model.c test_quantized_cache), about twice that; the
 * kernels themselves are held to 5e-4 against the quantized reference
 * (tests/test_attention.c test_quantized_cache) */
#define TOL_Q8_CACHE 3e-2
#define TOL_Q4_CACHE 4e-1
#define TOL_INT8_ACT 5e-2

typedef struct {
    tiny_model tm;
    clf_type kv;
} model_case;

static double run_case(const model_case *mc, int n_prompt, int n_batch, int decode_from, uint64_t seed) {
    clf_runtime *rt = tu_runtime();
    char path[] = "/tmp/clinfer-tiny-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&mc->tm, seed, path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    int V = mc->tm.n_vocab;
    int32_t *toks = malloc((size_t)n_prompt * sizeof *toks);
    uint64_t s = seed ^ 0x5151;
    for (int i = 0; i < n_prompt; i++) toks[i] = (int32_t)(tu_next(&s) % (uint64_t)V);
    double *ref = malloc((size_t)n_prompt * V * sizeof *ref);
    assert_int_equal(ref_llama_forward(g, toks, n_prompt, ref), 0);

    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_llama_load(rt, g, &m));
    TU_OK(clf_llama_ctx_create(m, 256, n_batch, mc->kv, &c));
    float *out = malloc((size_t)n_prompt * V * sizeof *out);
    memset(out, 0xff, (size_t)n_prompt * V * sizeof *out);
    /* all logits for the first decode_from tokens, then one token at a time */
    TU_OK(clf_llama_eval(c, toks, decode_from, 1, out));
    for (int i = decode_from; i < n_prompt; i++) TU_OK(clf_llama_eval(c, toks + i, 1, 0, out + (size_t)i * V));
    assert_int_equal(c->n_past, n_prompt);
    double err = tu_rel_err(out, ref, (size_t)n_prompt * V);
    /* greedy choices must agree wherever the reference is not near a tie
     * (logits here are ~1; the int8 path moves them by up to ~0.03) */
    for (int i = 0; i < n_prompt; i++) {
        int a = 0, r = 0, r2 = -1;
        for (int j = 1; j < V; j++) {
            if (out[(size_t)i * V + j] > out[(size_t)i * V + a]) a = j;
            if (ref[(size_t)i * V + j] > ref[(size_t)i * V + r]) { r2 = r; r = j; }
            else if (r2 < 0 || ref[(size_t)i * V + j] > ref[(size_t)i * V + r2]) r2 = j;
        }
        if (ref[(size_t)i * V + r] - ref[(size_t)i * V + r2] > 0.1) assert_int_equal(a, r);
    }
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
    free(toks);
    free(ref);
    free(out);
    return err;
}

/* Whether this device's decode GEMVs of type t round x to int8: asked of
 * a one-block weight, so other devices and variants keep the tight bounds. */
static int int8_decode(clf_type t) {
    static const unsigned char zeros[sizeof(clf_block_q6_K)] = {0}; /* the largest block */
    clf_weight w;
    TU_OK(clf_weight_upload(tu_runtime(), t, 1, clf_type_get(t)->block, zeros, &w));
    const int q = clf_matmul_quantizes_x(tu_runtime(), &w, 1);
    clf_weight_free(&w);
    return q;
}

static void check(const model_case *mc, int n_prompt, int n_batch, int decode_from) {
    uint64_t seed = tu_seed() + (uint64_t)mc->tm.type * 131 + (uint64_t)n_prompt;
    double err = run_case(mc, n_prompt, n_batch, decode_from, seed);
    double tol = mc->kv == CLF_F16 ? TOL_F16_CACHE : mc->kv == CLF_Q8_0 ? TOL_Q8_CACHE
                 : mc->kv == CLF_Q4_0 ? TOL_Q4_CACHE : TOL_F32_CACHE;
    if ((mc->tm.type != CLF_F32 && mc->tm.type != CLF_F16 && int8_decode(mc->tm.type)) ||
        (mc->tm.mix && int8_decode(mc->tm.mix)))
        tol = tol > TOL_INT8_ACT ? tol : TOL_INT8_ACT;
    print_message("  %s %s%s%s layers=%d heads=%d/%d hd=%d embd=%d ff=%d vocab=%d kv=%s n=%d batch=%d decode_from=%d: rel err %.2e (tol %.0e)\n",
                  mc->tm.arch, clf_type_get(mc->tm.type)->name, mc->tm.mix ? "+" : "",
                  mc->tm.mix ? clf_type_get(mc->tm.mix)->name : "", mc->tm.n_layer, mc->tm.n_head, mc->tm.n_head_kv,
                  mc->tm.head_dim, mc->tm.n_embd, mc->tm.n_ff, mc->tm.n_vocab, clf_type_get(mc->kv)->name, n_prompt,
                  n_batch, decode_from, err, tol);
    assert_true(err <= tol);
}

static const tiny_model BASE = {.arch = "llama", .n_layer = 2, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                                .n_vocab = 97, .type = CLF_F32};

static void test_weight_types(void **state) {
    (void)state;
    for (int i = 0; i < CLF_NTYPES; i++) { /* every type of the table of blocks up to 32 (n_embd 192) */
        if (clf_type_get(clf_type_list[i])->block > 32) continue;
        model_case mc = {BASE, CLF_F32};
        mc.tm.type = clf_type_list[i];
        check(&mc, 13, 64, 9); /* prefill 9, decode 4 */
    }
}

/* K-quants need rows of whole 256-weight super-blocks: n_embd 256, n_ff 512. */
static const tiny_model K_BASE = {.arch = "llama", .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
                                  .n_ff = 512, .n_vocab = 97, .type = CLF_Q4_K};

static void test_k_quants(void **state) {
    (void)state;
    for (int i = 0; i < CLF_NTYPES; i++) { /* every type of the table of 256-weight blocks */
        if (clf_type_get(clf_type_list[i])->block != 256) continue;
        model_case mc = {K_BASE, CLF_F32};
        mc.tm.type = clf_type_list[i];
        check(&mc, 13, 64, 9);
    }
}

/* A Q4_K_M-like mix: Q|K Q4_K with V Q6_K, gate Q4_K with up Q6_K (each
 * group a product per type), down and the output head Q6_K; prefill
 * through the GEMM and (in chunks) the skinny paths, then decode. */
static void test_mixed_types_in_fused_groups(void **state) {
    (void)state;
    model_case mc = {K_BASE, CLF_F16};
    mc.tm.mix = CLF_Q6_K;
    check(&mc, 29, 64, 20);
    check(&mc, 29, 6, 29);
    mc.tm.type = CLF_Q5_0; /* Gemma 3's fallback for rows not of 256 beside Q8_0 */
    mc.tm.mix = CLF_Q8_0;
    check(&mc, 13, 64, 9);
}

static void test_chunked_prefill_and_f16_cache(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F16};
    mc.tm.type = CLF_Q8_0;
    mc.tm.n_head = 4;
    mc.tm.n_head_kv = 2;
    mc.tm.n_layer = 3;
    mc.tm.tied = 1;
    check(&mc, 37, 8, 37);  /* five chunks of at most 8 */
    check(&mc, 37, 64, 1);  /* one token, then 36 decode steps */
}

/* Quantized caches through the model: prompt chunks and decode steps, a
 * sliding window (Gemma 3) too, against the reference's logits. */
static void test_quantized_cache(void **state) {
    (void)state;
    static const clf_type kv[] = {CLF_Q8_0, CLF_Q4_0};
    for (int i = 0; i < 2; i++) {
        model_case mc = {BASE, kv[i]};
        check(&mc, 40, 16, 30);
        mc.tm.arch = "gemma3", mc.tm.n_layer = 6, mc.tm.n_head = 2, mc.tm.n_embd = 96, mc.tm.window = 8, mc.tm.tied = 1;
        check(&mc, 45, 8, 37);
    }
}

static void test_qwen2_bias_neox(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F32};
    mc.tm.arch = "qwen2";
    mc.tm.type = CLF_Q4_1;
    mc.tm.n_head = 2;
    mc.tm.n_head_kv = 2;
    mc.tm.head_dim = 128;
    check(&mc, 11, 64, 6);
}

/* Qwen3: QK-norm, NeoX, Q wider than the embedding (key_length), untied. */
static void test_qwen3(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F32};
    mc.tm.arch = "qwen3";
    mc.tm.type = CLF_Q8_0;
    mc.tm.n_head = 4;
    mc.tm.n_head_kv = 2;
    mc.tm.n_embd = 96;
    check(&mc, 15, 64, 9);
}

/* Llama 3.1 frequency factors (rope_freqs), and linear position scaling
 * with a partial rotation. */
static void test_llama3_rope(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F32};
    mc.tm.rope_freqs = 1;
    mc.tm.tied = 1;
    check(&mc, 13, 64, 7);
    mc.tm.rope_freqs = 0;
    mc.tm.rope_scale = 4.0f;
    mc.tm.n_rot = 48;
    check(&mc, 13, 64, 7);
}

/* Gemma 3: 6 layers (5 with a sliding window of 8, then a global one),
 * GeGLU, QK-norm, post-norms, scaled embeddings, Q (2 x 64) wider than the
 * embedding (96). 45 tokens in chunks of 8 through a ring of 32 slots that
 * wraps, then decode; one-shot; and heads of 256 as the real model has. */
static void test_gemma3(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F32};
    mc.tm.arch = "gemma3";
    mc.tm.n_layer = 6;
    mc.tm.n_head = 2;
    mc.tm.n_head_kv = 1;
    mc.tm.n_embd = 96;
    mc.tm.window = 8;
    mc.tm.tied = 1;
    check(&mc, 45, 8, 37);
    mc.kv = CLF_F16;
    mc.tm.type = CLF_Q8_0;
    check(&mc, 20, 64, 20);
    mc.tm.head_dim = 256;
    mc.tm.n_head = 4;
    mc.tm.n_embd = 128;
    mc.tm.window = 5;
    check(&mc, 12, 64, 8);
}

/* Rewinding a Gemma 3 context whose local layers' ring wrapped: back by at
 * most a batch keeps the window's keys (the logits match the reference
 * again), further forgets everything. */
static void test_rewind_ring(void **state) {
    (void)state;
    tiny_model tm = BASE;
    tm.arch = "gemma3", tm.n_layer = 6, tm.n_head = 2, tm.n_embd = 96, tm.window = 8, tm.tied = 1;
    char path[] = "/tmp/clinfer-tiny-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    enum { N = 120, V = 97 };
    int32_t toks[N];
    uint64_t s = tu_seed();
    for (int i = 0; i < N; i++) toks[i] = (int32_t)(tu_next(&s) % V);
    double *ref = malloc((size_t)N * V * sizeof *ref);
    assert_int_equal(ref_llama_forward(g, toks, N, ref), 0);
    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_llama_ctx_create(m, 256, 8, CLF_F32, &c));
    /* the window, a batch and a block of slack (47 rounded up to 64), and a block where they straddle */
    assert_int_equal(c->kv_swa.n_slots, 96);
    float logits[V];
    TU_OK(clf_llama_eval(c, toks, N, 0, logits));
    clf_llama_rewind(c, N - 8); /* one batch back: the window before it is held */
    assert_int_equal(c->n_past, N - 8);
    TU_OK(clf_llama_eval(c, toks + N - 8, 8, 0, logits));
    assert_true(tu_rel_err(logits, ref + (size_t)(N - 1) * V, V) < 1e-4);
    /* the last pass began at 112: keys from 112 - 8 + 1 - 32 = 73 on are held (blocks 2, 3); a rewind to
     * 100 needs 93..99, one to 50 needs 43..49 (block 1: given back) */
    clf_llama_rewind(c, 100);
    assert_int_equal(c->n_past, 100);
    TU_OK(clf_llama_eval(c, toks + 100, N - 100, 0, logits));
    assert_true(tu_rel_err(logits, ref + (size_t)(N - 1) * V, V) < 1e-4);
    clf_llama_rewind(c, 50);
    assert_int_equal(c->n_past, 0);
    TU_OK(clf_llama_eval(c, toks, N, 0, logits)); /* from the start: blocks given back are taken again */
    assert_true(tu_rel_err(logits, ref + (size_t)(N - 1) * V, V) < 1e-4);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
    free(ref);
}

/* Phi-3: attn_qkv and gate|up stored fused, a partial rotation, untied. */
static void test_phi3(void **state) {
    (void)state;
    model_case mc = {BASE, CLF_F32};
    mc.tm.arch = "phi3";
    mc.tm.type = CLF_Q4_0;
    mc.tm.n_head = 4;
    mc.tm.n_head_kv = 4;
    mc.tm.n_rot = 32;
    check(&mc, 11, 64, 6);
}

/* BASE with fresh weights written to path (a mkstemp template), opened. */
static clf_gguf *open_base(char *path) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&BASE, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    return g;
}

static void test_context_full_is_an_error(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    char path[] = "/tmp/clinfer-tiny-XXXXXX";
    clf_gguf *g = open_base(path);
    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_llama_load(rt, g, &m));
    TU_OK(clf_llama_ctx_create(m, 16, 16, CLF_F32, &c));
    int32_t toks[17] = {0};
    float *logits = malloc(97 * sizeof *logits);
    assert_int_equal(clf_llama_eval(c, toks, 17, 0, logits), CLF_ERR_CONTEXT);
    assert_int_equal(c->n_past, 0);
    TU_OK(clf_llama_eval(c, toks, 16, 0, logits));
    assert_int_equal(clf_llama_eval(c, toks, 1, 0, logits), CLF_ERR_CONTEXT);
    toks[0] = 97; /* outside the vocabulary */
    clf_llama_rewind(c, 0);
    assert_int_equal(clf_llama_eval(c, toks, 1, 0, logits), CLF_ERR_ARG);
    free(logits);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

/* clf_llama_eval_top: the k best of the logits clf_llama_eval gives for
 * the same tokens (another context of the same model), bit for bit, best
 * first, for a prompt and the decode steps after it. */
static void test_eval_top(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    char path[] = "/tmp/clinfer-tiny-XXXXXX";
    clf_gguf *g = open_base(path);
    clf_llama *m;
    clf_llama_ctx *c, *ct;
    TU_OK(clf_llama_load(rt, g, &m));
    TU_OK(clf_llama_ctx_create(m, 32, 16, CLF_F32, &c));
    TU_OK(clf_llama_ctx_create(m, 32, 16, CLF_F32, &ct));
    const int nv = m->hp.n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits), vals[CLF_TOPK_MAX];
    int32_t ids[CLF_TOPK_MAX], toks[8] = {5, 17, 3, 90, 44, 1, 60, 2};
    for (int step = 0; step < 4; step++) {
        const int n = step ? 1 : 5, k = step % 2 ? 1 : 40;
        const int32_t *t = toks + (step ? 4 + step : 0);
        int bad = -1;
        TU_OK(clf_llama_eval(c, t, n, 0, logits));
        TU_OK(clf_llama_eval_top(ct, t, n, k, vals, ids, &bad));
        assert_int_equal(bad, 0);
        for (int j = 0; j < k; j++) { /* the j-th best: nothing above it, ties by the smaller id */
            int above = 0;
            for (int i = 0; i < nv; i++) above += logits[i] > logits[ids[j]] || (logits[i] == logits[ids[j]] && i < ids[j]);
            assert_int_equal(above, j);
            assert_memory_equal(&vals[j], &logits[ids[j]], sizeof(float));
        }
    }
    assert_int_equal(clf_llama_eval_top(ct, toks, 1, CLF_TOPK_MAX + 1, vals, ids, &(int){0}), CLF_ERR_ARG);
    free(logits);
    clf_llama_ctx_free(c);
    clf_llama_ctx_free(ct);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

/* An abort hook that lets *budget calls pass, then asks to stop. */
static int stop_after(void *ud) {
    int *budget = ud;
    return (*budget)-- <= 0;
}

/* The runtime's abort hook (Ctrl-C in the CLI) stops a load between tensors
 * and an eval between chunks; the chunks done stay in the cache. */
static void test_abort_hook(void **state) {
    (void)state;
    clf_runtime *rt = tu_runtime();
    char path[] = "/tmp/clinfer-tiny-XXXXXX";
    clf_gguf *g = open_base(path);
    clf_llama *m = NULL;
    int budget = 3;
    clf_runtime_set_abort(rt, stop_after, &budget);
    assert_int_equal(clf_llama_load(rt, g, &m), CLF_ERR_INTERRUPTED);
    assert_null(m);
    assert_non_null(strstr(clf_last_error(), "loading stopped on request after 4 of "));
    clf_runtime_set_abort(rt, NULL, NULL);
    TU_OK(clf_llama_load(rt, g, &m));
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(m, 64, 8, CLF_F32, &c));
    int32_t toks[30] = {0};
    float *logits = malloc(97 * sizeof *logits);
    budget = 2; /* two chunks of 8 run, the third does not start */
    clf_runtime_set_abort(rt, stop_after, &budget);
    assert_int_equal(clf_llama_eval(c, toks, 30, 0, logits), CLF_ERR_INTERRUPTED);
    assert_string_equal(clf_last_error(), "evaluation stopped on request after 16 of 30 tokens");
    assert_int_equal(c->n_past, 16);
    clf_runtime_set_abort(rt, NULL, NULL);
    TU_OK(clf_llama_eval(c, toks + 16, 14, 0, logits)); /* and goes on from there */
    assert_int_equal(c->n_past, 30);
    free(logits);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_types),
        cmocka_unit_test(test_k_quants),
        cmocka_unit_test(test_mixed_types_in_fused_groups),
        cmocka_unit_test(test_chunked_prefill_and_f16_cache),
        cmocka_unit_test(test_quantized_cache),
        cmocka_unit_test(test_qwen2_bias_neox),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3_rope),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_rewind_ring),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_context_full_is_an_error),
        cmocka_unit_test(test_eval_top),
        cmocka_unit_test(test_abort_hook),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

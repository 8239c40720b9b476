/* The estimator against numbers computed by hand for a tiny model (the
 * arithmetic is in the comments), `clinfer info --json` on a tiny GGUF, the
 * default model's published parameter count, a vocabulary-only file's
 * report, and the estimate against the device memory clinfer really
 * allocates for the default model. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "estimate.h"
#include "llama.h"
#include "model_path.h"
#include "ref_llama.h"
#include "testutil.h"

/* 2 layers, n_embd 64, n_ff 96, 4 heads of 16, 2 KV heads, vocab 100:
 * q_dim 64, kv_dim 32. Types: embeddings Q8_0 (34/32 B), output F16,
 * attention Q4_1 (20/32), MLP Q4_0 (18/32), norms F32. */
static const clf_model_shape TINY = {
    .arch = "llama", .n_layer = 2, .n_embd = 64, .n_ff = 96, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
    .n_vocab = 100, .n_ctx_train = 256, .tied = 0, .qkv_bias = 0,
    .type_embd = CLF_Q8_0, .type_out = CLF_F16, .type_attn = CLF_Q4_1, .type_ffn = CLF_Q4_0, .type_norm = CLF_F32,
};

static void test_params_by_hand(void **state) {
    (void)state;
    clf_params p = clf_estimate_params(&TINY);
    assert_int_equal(p.count[CLF_GROUP_EMBD], 6400);    /* 100 * 64 */
    assert_int_equal(p.count[CLF_GROUP_ATTN], 24576);   /* 2 * (64*64 + 2*64*32 + 64*64) */
    assert_int_equal(p.count[CLF_GROUP_MLP], 36864);    /* 2 * 3 * 64 * 96 */
    assert_int_equal(p.count[CLF_GROUP_NORM], 320);     /* 2 * 2 * 64 + 64 */
    assert_int_equal(p.count[CLF_GROUP_OUTPUT], 6400);  /* untied */
    assert_int_equal(p.total, 74560);
    assert_int_equal(p.matmul, 67840);                  /* 24576 + 36864 + 6400 */
    assert_true(p.bytes[CLF_GROUP_EMBD] == 6800);       /* 6400 * 34/32 */
    assert_true(p.bytes[CLF_GROUP_ATTN] == 15360);      /* 24576 * 20/32 */
    assert_true(p.bytes[CLF_GROUP_MLP] == 20736);       /* 36864 * 18/32 */
    assert_true(p.bytes[CLF_GROUP_NORM] == 1280);
    assert_true(p.bytes[CLF_GROUP_OUTPUT] == 12800);    /* 6400 * 2 */
    assert_true(p.total_bytes == 56976);

    clf_model_shape tied = TINY, bias = TINY;
    tied.tied = 1;
    p = clf_estimate_params(&tied);
    assert_int_equal(p.count[CLF_GROUP_OUTPUT], 0);
    assert_int_equal(p.total, 68160);
    assert_int_equal(p.matmul, 67840); /* the output projection is still multiplied */
    bias.qkv_bias = 1;
    p = clf_estimate_params(&bias);
    assert_int_equal(p.count[CLF_GROUP_ATTN], 24576 + 256); /* + 2 * (64 + 2*32) */
    assert_true(p.bytes[CLF_GROUP_ATTN] == 15360 + 1024);  /* biases F32 */
}

static void test_flops_bytes_by_hand(void **state) {
    (void)state;
    /* 2 * 67840 + 4 * 2 * 64 * c */
    assert_true(clf_flops_token(&TINY, 1) == 136192);
    assert_true(clf_flops_token(&TINY, 10) == 140800);
    /* 2 * 61440 * 8 + 2 * 6400 + 4 * 2 * 64 * 8 * 9 / 2 = 983040 + 12800 + 18432 */
    assert_true(clf_flops_prefill(&TINY, 8) == 1014272);
    assert_true(clf_kv_bytes_per_token(&TINY, 4) == 512); /* 2 * 2 * 32 * 4 */
    assert_true(clf_kv_bytes_per_token(&TINY, 2) == 256);
    /* weights read: 15360 + 20736 + 1280 + 12800 + one Q8_0 row 68 = 50244;
     * KV: 512 * (10 + 1) */
    assert_true(clf_bytes_token(&TINY, 10, 4) == 50244 + 5632);
    /* 50244 + 7 more rows * 68 + 2 * 256 * 8 */
    assert_true(clf_bytes_prefill(&TINY, 8, 2) == 50244 + 476 + 4096);
    /* per token 2*64 + (64 + 64) + 64 + 3*96 = 608 floats + an id; one row of 100 logits */
    assert_true(clf_xq_bytes(&TINY) == 64 * (2 + 3 + 2)); /* x, hidden, attention out: 32-blocks of 64 bytes */
    assert_true(clf_scratch_bytes(&TINY, 8) == 8 * (608 * 4 + 4) + 100 * 4 + 64 * 7);
}

/* TINY as a Gemma-3-like family: QK-norm, post-norms, a sliding window of 4
 * on one layer of the two, and 8 Llama 3.1 frequency factors. */
static void test_family_by_hand(void **state) {
    (void)state;
    clf_model_shape s = TINY;
    s.qk_norm = s.post_norms = 1;
    s.n_swa = 4, s.n_swa_layers = 1;
    s.n_rope_freqs = 8;
    clf_params p = clf_estimate_params(&s);
    assert_int_equal(p.count[CLF_GROUP_NORM], 640); /* 2 * ((2 + 2) * 64 + 2 * 16) + 64 */
    assert_int_equal(p.count[CLF_GROUP_OTHER], 8);
    assert_true(p.bytes[CLF_GROUP_OTHER] == 32);
    /* keys attended A(10) = 10 (global layer) + min(10, 4) = 14: 2 * 67840 + 4 * 64 * 14 */
    assert_true(clf_flops_token(&s, 10) == 139264);
    /* sum over t = 1..8 of A(t) = 36 + (1 + 2 + 3 + 4 + 4 * 4) = 62: 983040 + 12800 + 4 * 64 * 62 */
    assert_true(clf_flops_prefill(&s, 8) == 1011712);
    /* blocks of 32: the global layer's 100 positions in 4 (128 slots); the sliding layer's window, a batch
     * of 8 and a block of slack, 43 in 2 blocks, and one where they straddle (96 slots); F16 K and V of
     * 32 dims are 128 bytes a slot */
    assert_true(clf_kv_cache_bytes(&s, 100, 8, 2) == 128.0 * (128 + 96));
    assert_true(clf_kv_cache_bytes(&s, 20, 8, 2) == 128.0 * (32 + 32)); /* no more than the context's block */
    assert_true(clf_kv_cache_bytes(&TINY, 100, 8, 2) == 128.0 * 256);
    /* weights read 15360 + 20736 + 640 * 4 + 12800 + 68 = 51524; K and V attended 256 * 14, the new token's 512 */
    assert_true(clf_bytes_token(&s, 10, 4) == 51524 + 3584 + 512);
}

static void test_training_and_roofline(void **state) {
    (void)state;
    clf_train_mem f = clf_train_mem_f32(74560), m = clf_train_mem_mixed(74560);
    assert_true(f.total == 16 * 74560.0 && f.weights == 4 * 74560.0 && f.moments == 8 * 74560.0 && f.master == 0);
    assert_true(m.total == 16 * 74560.0 && m.weights == 2 * 74560.0 && m.master == 4 * 74560.0);
    /* 2 layers * (10 * 64) * (34 + 5 * 4 * 10 / 64) = 1280 * 37.125 */
    assert_true(clf_train_activation_bytes(&TINY, 10, 1, 0) == 47520);
    assert_true(clf_train_activation_bytes(&TINY, 10, 1, 1) == 43520);

    clf_bound b = clf_roofline(1e9, 1e8, 1, (clf_roof){200, 10});
    assert_true(b.memory_bound);
    assert_true(fabs(b.intensity - 10) < 1e-12);
    assert_true(fabs(b.t_compute_s - 0.005) < 1e-12 && fabs(b.t_memory_s - 0.01) < 1e-12);
    assert_true(fabs(b.tokens_per_s - 100) < 1e-9);
    b = clf_roofline(1e9, 1e8, 512, (clf_roof){50, 100});
    assert_false(b.memory_bound);
    assert_true(fabs(b.tokens_per_s - 512 / 0.02) < 1e-6);
}

/* ---- the same through a file and the command ---------------------------------- */

static void add(clf_gguf_writer *w, const char *name, clf_type t, int64_t ne0, int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    size_t bytes = clf_row_bytes(t, ne0) * (size_t)ne1;
    void *data = calloc(1, bytes);
    TU_OK(clf_gguf_add_tensor_take(w, name, t, ne1 > 1 ? 2 : 1, ne, data));
}

static void write_tiny(const char *path) {
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    TU_OK(clf_gguf_set_str(w, "general.name", "tiny \"test\""));
    TU_OK(clf_gguf_set_u32(w, "llama.block_count", 2));
    TU_OK(clf_gguf_set_u32(w, "llama.embedding_length", 64));
    TU_OK(clf_gguf_set_u32(w, "llama.feed_forward_length", 96));
    TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count", 4));
    TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count_kv", 2));
    TU_OK(clf_gguf_set_u32(w, "llama.context_length", 256));
    add(w, "token_embd.weight", CLF_Q8_0, 64, 100);
    add(w, "output.weight", CLF_F16, 64, 100);
    add(w, "output_norm.weight", CLF_F32, 64, 1);
    for (int l = 0; l < 2; l++) {
        char n[64];
        static const char *const attn[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
        static const int64_t rows[] = {64, 32, 32, 64};
        for (int i = 0; i < 4; i++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", l, attn[i]);
            add(w, n, CLF_Q4_1, 64, rows[i]);
        }
        snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", l), add(w, n, CLF_Q4_0, 64, 96);
        snprintf(n, sizeof n, "blk.%d.ffn_up.weight", l), add(w, n, CLF_Q4_0, 64, 96);
        snprintf(n, sizeof n, "blk.%d.ffn_down.weight", l), add(w, n, CLF_Q4_0, 96, 64);
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", l), add(w, n, CLF_F32, 64, 1);
        snprintf(n, sizeof n, "blk.%d.ffn_norm.weight", l), add(w, n, CLF_F32, 64, 1);
    }
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
}

static void test_shape_and_command(void **state) {
    (void)state;
    char path[] = "/tmp/clinfer-info-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_tiny(path);
    clf_gguf *g;
    clf_model_shape s;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    assert_int_equal(s.head_dim, 16);
    assert_int_equal(s.n_vocab, 100);
    assert_int_equal(s.tied, 0);
    assert_int_equal(s.type_embd, CLF_Q8_0);
    assert_int_equal(s.type_out, CLF_F16);
    assert_int_equal(s.type_attn, CLF_Q4_1);
    assert_int_equal(s.type_ffn, CLF_Q4_0);
    clf_gguf_close(g);

    const char *bin = getenv("CLINFER_BIN");
    if (!bin) fail_msg("CLINFER_BIN is not set (run through ctest)");
    char cmd[1024];
    int st;
    snprintf(cmd, sizeof cmd, "%s info -m %s --ctx 10 --batch 8 --kv f16 --gflops 200 --gbs 10 --json", bin, path);
    char *out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "\"params_total\": 74560, \"params_matmul\": 67840");
    tu_expect_in(out, "\"weight_bytes_total\": 56976");
    tu_expect_in(out, "\"file_params\": {\"embeddings\": 6400, \"attention\": 24576, \"mlp\": 36864, \"norms\": 320, "
                   "\"output\": 6400, \"other\": 0}");
    tu_expect_in(out, "\"per_token_c1\": 136192, \"per_token_ctx\": 140800, \"prefill\": 1014272");
    /* the context's 10 positions take a block of 32 */
    tu_expect_in(out, "\"kv_per_token_f32\": 512, \"kv_per_token_f16\": 256, \"kv_ctx_f32\": 16384, \"kv_ctx_f16\": 8192");
    tu_expect_in(out, "\"activations\": 20336"); /* 8 * (608 * 4 + 4) + 100 * 4 + 64 * 7 (int8 forms) */
    tu_expect_in(out, "\"name\": \"tiny \\\"test\\\"\"");
    tu_expect_in(out, "\"roofline\": {\"source\": \"given\", \"gflops\": 200, \"gbs\": 10, \"decode_c1\": {\"bound\": \"memory\"");
    free(out);
    /* one valid JSON document */
    snprintf(cmd, sizeof cmd, "%s info -m %s --json | python3 -m json.tool >/dev/null", bin, path);
    assert_int_equal(system(cmd), 0);
    /* the text form: the file agrees with the estimate (no '*' mark) */
    snprintf(cmd, sizeof cmd, "%s info -m %s --ctx 10", bin, path);
    out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "2*P_mm + 4*n_layer*n_head*head_dim*c");
    tu_expect_in(out, "16 B/param");
    assert_null(strstr(out, "differs"));
    free(out);
    /* roofs measured on the test device */
    const char *dev = getenv("CLINFER_DEVICE");
    snprintf(cmd, sizeof cmd, "%s info -m %s --device '%s' --json 2>/dev/null", bin, path, dev ? dev : "0:0");
    out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "\"roofline\": {\"source\": \"measured on ");
    tu_expect_in(out, "\"prefill\": {\"bound\": ");
    free(out);
    /* usage and file errors */
    snprintf(cmd, sizeof cmd, "%s info -m %s --gflops 5 2>/dev/null", bin, path);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "%s info -m /nonexistent.gguf 2>/dev/null", bin);
    assert_int_equal(WEXITSTATUS(system(cmd)), 3);
    unlink(path);
}

/* `clinfer info` on llama.cpp's vocabulary-only GPT-2 file (no tensors):
 * what the vocabulary is, said as such, exit 0 (it used to fail on the
 * missing token_embd.weight); the counts are the file's (test_tokenizer.c
 * loads the same file). */
static void test_vocab_only(void **state) {
    (void)state;
    const char *bin = getenv("CLINFER_BIN"), *src = getenv("CLINFER_SOURCE_DIR");
    if (!bin || !src) fail_msg("CLINFER_BIN or CLINFER_SOURCE_DIR is not set (run through ctest)");
    char cmd[4096];
    int st;
    snprintf(cmd, sizeof cmd, "%s info -m %s/tests/data/vocab/ggml-vocab-gpt-2.gguf", bin, src);
    char *out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "a vocabulary only");
    tu_expect_in(out, "50257 tokens");
    tu_expect_in(out, "tokenizer       gpt2");
    tu_expect_in(out, "pre-tokenizer   gpt-2");
    tu_expect_in(out, "chat template   no");
    assert_null(strstr(out, "missing"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s info -m %s/tests/data/vocab/ggml-vocab-gpt-2.gguf --json", bin, src);
    out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "\"vocab_only\": true");
    tu_expect_in(out, "\"vocab\": {\"n_tokens\": 50257, \"model\": \"gpt2\", \"pre\": \"gpt-2\", \"chat_template\": false}");
    free(out);
    /* one valid JSON document; phi-3's vocabulary carries a chat template */
    snprintf(cmd, sizeof cmd, "%s info -m %s/tests/data/vocab/ggml-vocab-gpt-2.gguf --json | python3 -m json.tool >/dev/null",
             bin, src);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s info -m %s/tests/data/vocab/ggml-vocab-phi-3.gguf --json", bin, src);
    out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "\"n_tokens\": 32064, \"model\": \"llama\", \"pre\": \"default\", \"chat_template\": true");
    free(out);
}

/* ---- the default model ----------------------------------------------------------- */

static int default_model(char *path, size_t n) {
    if (clf_model_path(NULL, path, n) == CLF_OK) return 1;
    return 0;
}

static void test_default_model(void **state) {
    (void)state;
    char path[4096];
    if (!default_model(path, sizeof path)) TU_SKIP("%s", clf_last_error());
    clf_gguf *g;
    clf_model_shape s;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    clf_params p = clf_estimate_params(&s);
    assert_int_equal(p.total, 134515008); /* SmolLM2-135M's published count */
    double file = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) file += (double)clf_gguf_tensor_at(g, i)->bytes;
    assert_true(p.total_bytes == file);
    clf_gguf_close(g);
}

/* What the model and a context really allocate on the device, against the
 * estimate: weights as stored (plus the second copy of a tied embedding
 * that clinfer keeps as the output matrix), KV cache and activations. */
static void test_device_memory(void **state) {
    (void)state;
    char path[4096];
    if (!default_model(path, sizeof path)) TU_SKIP("%s", clf_last_error());
    clf_runtime *rt = tu_runtime();
    clf_gguf *g;
    clf_model_shape s;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    clf_llama *m;
    TU_OK(clf_llama_load(rt, g, &m));
    clf_llama_ctx *c;
    const int ctx = 1024, batch = 256;
    TU_OK(clf_llama_ctx_create(m, ctx, batch, CLF_F16, &c));
    clf_params p = clf_estimate_params(&s);
    double weights = clf_device_weight_bytes(&s);
    assert_true(weights == p.total_bytes + p.bytes[CLF_GROUP_EMBD]); /* tied */
    double kv = clf_kv_cache_bytes(&s, ctx, batch, 2), scratch = clf_scratch_bytes(&s, batch);
    printf("  weights: device %zu, estimate %.0f; context: device %zu, estimate %.0f (KV %.0f + activations %.0f)\n",
           m->device_bytes, weights, c->device_bytes, kv + scratch, kv, scratch);
    /* a device layout may pad or re-lay blocks one day: allow 2% */
    assert_true(fabs((double)m->device_bytes - weights) <= 0.02 * weights);
    assert_true(fabs((double)c->device_bytes - (kv + scratch)) <= 0.02 * (kv + scratch));
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
}

/* A tiny Gemma 3 (5 sliding layers of 6): its ring caches as allocated
 * against the estimate, exactly. */
static void test_device_memory_sliding(void **state) {
    (void)state;
    char path[] = "/tmp/clinfer-info-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    tiny_model tm = {.arch = "gemma3", .n_layer = 6, .n_head = 2, .n_head_kv = 1, .head_dim = 64, .n_ff = 128,
                     .n_vocab = 61, .type = CLF_Q8_0, .tied = 1, .n_embd = 96, .window = 40};
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    clf_gguf *g;
    clf_model_shape s;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_model_shape_from_gguf(g, &s));
    assert_int_equal(s.n_swa, 40);
    assert_int_equal(s.n_swa_layers, 5);
    clf_llama *m;
    clf_llama_ctx *c;
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_llama_ctx_create(m, 1024, 64, CLF_F16, &c));
    assert_int_equal(c->kv_swa.n_slots, 192); /* 40 - 1 + 64 + a block of 32, in 5 blocks and one more */
    double kv = clf_kv_cache_bytes(&s, 1024, 64, 2), scratch = clf_scratch_bytes(&s, 64);
    assert_true(kv == (double)(c->kv.bytes + c->kv_swa.bytes));
    /* the int8 forms exist where the device's GEMVs take int8 x: then as estimated */
    double xq = (double)(clf_tensor_bytes(&c->xq_e) + clf_tensor_bytes(&c->xq_f) + clf_tensor_bytes(&c->xq_a));
    if (c->xq_e.mem) assert_true(xq == clf_xq_bytes(&s));
    assert_true((double)c->device_bytes == kv + scratch - clf_xq_bytes(&s) + xq);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params_by_hand),    cmocka_unit_test(test_flops_bytes_by_hand),
        cmocka_unit_test(test_family_by_hand),    cmocka_unit_test(test_training_and_roofline),
        cmocka_unit_test(test_shape_and_command), cmocka_unit_test(test_vocab_only),
        cmocka_unit_test(test_default_model),     cmocka_unit_test(test_device_memory),
        cmocka_unit_test(test_device_memory_sliding),
    };
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

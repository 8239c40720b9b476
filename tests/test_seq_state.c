/* A sequence's state in a file (clinfer_session_save_seq / _load_seq,
 * api/seq_state.c, models/llama_state.c): a conversation generated, saved,
 * restored into a fresh session and continued gives the logits continuing
 * without the round trip gives (bit for bit on sequence 0; into another
 * sequence through clinfer_decode, the sequence beside it, whose blocks it
 * shared, continuing as alone), for a llama and a gemma3 whose sliding
 * window gave its first blocks back, on both kernel variants (cpu, gpu);
 * and the refusals: another model, another KV type, a short token buffer,
 * a length that is not the sequence's, truncated files at every section,
 * altered bytes anywhere (the checksum), hostile counts, not a file.
 * The tiny models come from tests/tools/tiny_gguf ($CLINFER_TINY_GGUF). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "clinfer.h"
#include "testutil.h"

enum { N_PROMPT = 90, N_GEN = 12, N_AFTER = 6, N_CTX = 256 };

static char llama_path[256], gemma_path[256], state_path[256], bad_path[256];

static int make(const char *path, const char *opts) {
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) {
        fprintf(stderr, "CLINFER_TINY_GGUF is not set (ctest sets it)\n");
        return -1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --no-eog %s", tool, path, opts);
    return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    const int pid = (int)getpid();
    snprintf(llama_path, sizeof llama_path, "/tmp/clinfer-seqstate-llama-%d.gguf", pid);
    snprintf(gemma_path, sizeof gemma_path, "/tmp/clinfer-seqstate-gemma-%d.gguf", pid);
    snprintf(state_path, sizeof state_path, "/tmp/clinfer-seqstate-%d.slot", pid);
    snprintf(bad_path, sizeof bad_path, "/tmp/clinfer-seqstate-bad-%d.slot", pid);
    if (make(llama_path, "") != 0) return -1;
    /* a window of 8: after 100 tokens its first block of 32 was given back */
    return make(gemma_path, "--arch gemma3 --window 8");
}

static int teardown(void **state) {
    (void)state;
    unlink(llama_path);
    unlink(gemma_path);
    unlink(state_path);
    unlink(bad_path);
    return 0;
}

static clinfer_model *load(const char *path, const char *variant) {
    setenv("CLINFER_MATMUL_VARIANT", variant, 1);
    setenv("CLINFER_ATTN_VARIANT", variant, 1);
    clinfer_model *m = NULL;
    ASSERT_OK(clinfer_model_load(path, NULL, NULL, &m));
    unsetenv("CLINFER_MATMUL_VARIANT");
    unsetenv("CLINFER_ATTN_VARIANT");
    return m;
}

static clinfer_session *session(clinfer_model *m, int n_seq, clinfer_kv_type kv) {
    clinfer_session_params p = clinfer_session_default_params();
    p.n_ctx = N_CTX;
    p.n_seq = n_seq;
    p.kv_type = kv;
    clinfer_session *s = NULL;
    ASSERT_OK(clinfer_session_create(m, &p, &s));
    return s;
}

static int32_t argmax(const float *x, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Greedy steps from the session's logits: each token evaluated, its
 * logits appended to out [n × n_vocab] (NULL: not kept), the tokens to
 * text. Returns the next token (sampled, not evaluated). */
static int32_t greedy(clinfer_session *s, int n_vocab, int n, int32_t *text, int *len, float *out) {
    int32_t t = argmax(clinfer_session_logits(s), n_vocab);
    for (int i = 0; i < n; i++) {
        ASSERT_OK(clinfer_eval(s, &t, 1));
        text[(*len)++] = t;
        if (out) memcpy(out + (size_t)i * n_vocab, clinfer_session_logits(s), (size_t)n_vocab * sizeof *out);
        t = argmax(clinfer_session_logits(s), n_vocab);
    }
    return t;
}

/* The round trip on one model and variant. */
static void round_trip(const char *path, const char *variant) {
    clinfer_model *m = load(path, variant);
    clinfer_model_info info = {.size = sizeof info};
    ASSERT_OK(clinfer_model_get_info(m, &info));
    const int nv = info.n_vocab;
    uint64_t rng = tu_seed();
    int32_t text[N_CTX];
    int len = 0;
    for (; len < N_PROMPT; len++) text[len] = (int32_t)(tu_next(&rng) % (uint64_t)nv);
    clinfer_session *a = session(m, 1, CLINFER_KV_F32);
    ASSERT_OK(clinfer_eval(a, text, len));
    int32_t next = greedy(a, nv, N_GEN, text, &len, NULL);
    assert_int_equal(clinfer_seq_len(a, 0), len);
    size_t bytes = 0;
    ASSERT_OK(clinfer_session_save_seq(a, 0, text, len, state_path, &bytes));
    assert_true(bytes > (size_t)len * sizeof(int32_t));

    /* without the round trip: the next token evaluated, then N_AFTER more */
    float *want = malloc((size_t)(N_AFTER + 1) * nv * sizeof *want);
    float *got = malloc((size_t)(N_AFTER + 1) * nv * sizeof *got);
    int32_t t1[N_CTX], t2[N_CTX];
    int l1 = 0, l2 = 0;
    ASSERT_OK(clinfer_eval(a, &next, 1));
    memcpy(want, clinfer_session_logits(a), (size_t)nv * sizeof *want);
    greedy(a, nv, N_AFTER, t1, &l1, want + nv);

    /* restored into a fresh session's sequence 0: the same bits */
    clinfer_session *b = session(m, 1, CLINFER_KV_F32);
    int32_t back[N_CTX];
    int n_back = 0;
    size_t read = 0;
    ASSERT_OK(clinfer_session_load_seq(b, 0, state_path, back, N_CTX, &n_back, &read));
    assert_int_equal(n_back, len);
    assert_int_equal(read, bytes);
    assert_memory_equal(back, text, (size_t)len * sizeof *text);
    assert_int_equal(clinfer_seq_len(b, 0), len);
    assert_int_equal(clinfer_session_n_past(b), len);
    ASSERT_OK(clinfer_eval(b, &next, 1));
    memcpy(got, clinfer_session_logits(b), (size_t)nv * sizeof *got);
    greedy(b, nv, N_AFTER, t2, &l2, got + nv);
    assert_memory_equal(t1, t2, (size_t)l1 * sizeof *t1);
    double worst = 0;
    for (size_t i = 0; i < (size_t)(N_AFTER + 1) * nv; i++) worst = fmax(worst, fabs((double)want[i] - got[i]));
    print_message("  %s %s: %d tokens, %zu bytes; restored vs continued: max |diff| %.3g\n",
                  strstr(path, "gemma") ? "gemma3" : "llama", variant, len, bytes, worst);
    assert_memory_equal(want, got, (size_t)(N_AFTER + 1) * nv * sizeof *want);

    /* into sequence 1 of a two-sequence session, beside a busy sequence 0
     * whose blocks it shared (a copied prefix: the load gives them back and
     * writes blocks of its own), continued through clinfer_decode */
    clinfer_session *c = session(m, 2, CLINFER_KV_F32);
    ASSERT_OK(clinfer_eval(c, text, 17));
    ASSERT_OK(clinfer_seq_copy(c, 0, 1, 17));
    ASSERT_OK(clinfer_session_load_seq(c, 1, state_path, back, N_CTX, &n_back, NULL));
    assert_int_equal(clinfer_seq_len(c, 1), len);
    assert_int_equal(clinfer_seq_len(c, 0), 17);
    /* sequence 0 untouched: its next token's logits as a session of its 17 alone gives them */
    clinfer_session *d = session(m, 1, CLINFER_KV_F32);
    ASSERT_OK(clinfer_eval(d, text, 17));
    ASSERT_OK(clinfer_eval(d, &text[17], 1));
    int32_t seq0 = 0;
    ASSERT_OK(clinfer_decode(c, &(clinfer_batch){.n_tokens = 1, .token = &text[17], .seq_id = &seq0}));
    double d0 = 0;
    for (int v = 0; v < nv; v++)
        d0 = fmax(d0, fabs((double)clinfer_batch_logits(c, 0)[v] - clinfer_session_logits(d)[v]));
    if (d0 > 1e-4) fail_msg("sequence 0 after a load into sequence 1: max |diff| %g", d0);
    clinfer_session_free(d);
    int32_t seq1 = 1, tok = next;
    for (int i = 0; i <= N_AFTER; i++) {
        clinfer_batch bt = {.n_tokens = 1, .token = &tok, .seq_id = &seq1};
        ASSERT_OK(clinfer_decode(c, &bt));
        const float *row = clinfer_batch_logits(c, 0);
        assert_non_null(row);
        double d = 0;
        for (int v = 0; v < nv; v++) d = fmax(d, fabs((double)row[v] - want[(size_t)i * nv + v]));
        if (d > 1e-4) fail_msg("sequence 1, step %d: max |diff| %g", i, d);
        tok = i < N_AFTER ? t1[i] : 0;
    }
    clinfer_session_free(c);
    clinfer_session_free(b);
    clinfer_session_free(a);
    clinfer_model_free(m);
    free(want);
    free(got);
}

static void test_round_trip_llama(void **state) {
    (void)state;
    round_trip(llama_path, "cpu");
    round_trip(llama_path, "gpu");
}

static void test_round_trip_gemma3_window(void **state) {
    (void)state;
    round_trip(gemma_path, "cpu");
    round_trip(gemma_path, "gpu");
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(*n);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static void spill(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Header offsets (api/seq_state.c's head). */
enum { OFF_N_TOKENS = 56, HEAD_BYTES = 64 };

static void test_refusals(void **state) {
    (void)state;
    clinfer_model *m = load(llama_path, "cpu");
    clinfer_model *g = load(gemma_path, "cpu");
    clinfer_session *s = session(m, 2, CLINFER_KV_F32);
    int32_t text[40], back[N_CTX];
    for (int i = 0; i < 40; i++) text[i] = (int32_t)(i * 7 % 50 + 1);
    ASSERT_OK(clinfer_eval(s, text, 40));
    ASSERT_FAILS(clinfer_session_save_seq(s, 0, text, 39, state_path, NULL), CLINFER_ERR_ARG, "holds 40 tokens");
    ASSERT_FAILS(clinfer_session_save_seq(s, 2, text, 40, state_path, NULL), CLINFER_ERR_ARG, "sequence 2");
    ASSERT_FAILS(clinfer_session_save_seq(s, 0, text, 40, "/proc/nope/x.slot", NULL), CLINFER_ERR_IO, "cannot create");
    ASSERT_OK(clinfer_session_save_seq(s, 0, text, 40, state_path, NULL));
    int n = 0;

    /* another model; another KV type; too little room; not a file */
    clinfer_session *gs = session(g, 1, CLINFER_KV_F32);
    ASSERT_FAILS(clinfer_session_load_seq(gs, 0, state_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT,
                 "saved from another model");
    clinfer_session *h = session(m, 1, CLINFER_KV_F16);
    ASSERT_FAILS(clinfer_session_load_seq(h, 0, state_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT,
                 "KV cache of type F32");
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, state_path, back, 39, &n, NULL), CLINFER_ERR_ARG, "room was given for 39");
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 32;
    clinfer_session *small = NULL;
    ASSERT_OK(clinfer_session_create(m, &sp, &small));
    ASSERT_FAILS(clinfer_session_load_seq(small, 0, state_path, back, N_CTX, &n, NULL), CLINFER_ERR_CONTEXT,
                 "sequences hold 32");
    clinfer_session_free(small);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, "/tmp", back, N_CTX, &n, NULL), CLINFER_ERR_IO, "not a regular file");
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, "/tmp/clinfer-no-such.slot", back, N_CTX, &n, NULL), CLINFER_ERR_IO,
                 "cannot open");
    /* a FIFO is refused without waiting for a writer (the server's step loop reads the file) */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s.fifo", state_path);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(60); /* a hang fails */
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, fifo, back, N_CTX, &n, NULL), CLINFER_ERR_IO, "not a regular file");
    alarm(0);
    unlink(fifo);

    size_t len;
    unsigned char *file = slurp(state_path, &len);
    /* in memory: the file's very bytes, read back alike, refused alike */
    void *mem = NULL;
    size_t mem_len = 0;
    ASSERT_OK(clinfer_session_save_seq_buf(s, 0, text, 40, &mem, &mem_len));
    assert_int_equal(mem_len, len);
    assert_memory_equal(mem, file, len);
    ASSERT_OK(clinfer_session_load_seq_buf(s, 1, mem, mem_len, back, N_CTX, &n));
    assert_int_equal(n, 40);
    assert_int_equal(clinfer_seq_len(s, 1), 40);
    ASSERT_FAILS(clinfer_session_load_seq_buf(s, 1, mem, mem_len - 1, back, N_CTX, &n), CLINFER_ERR_FORMAT,
                 "truncated");
    assert_int_equal(clinfer_seq_len(s, 1), 0);
    ASSERT_FAILS(clinfer_session_load_seq_buf(gs, 0, mem, mem_len, back, N_CTX, &n), CLINFER_ERR_FORMAT,
                 "another model");
    clinfer_free(mem);
    ASSERT_FAILS(clinfer_session_save_seq_buf(s, 0, text, 3, &mem, &mem_len), CLINFER_ERR_ARG, "holds 40");
    assert_null(mem);
    unsigned char *bad = malloc(len + 1);
    /* truncated at every section: the header, the tokens, the KV, the checksum */
    const size_t cuts[] = {0, 7, HEAD_BYTES - 1, HEAD_BYTES + 5, HEAD_BYTES + 160 + 2, HEAD_BYTES + 160 + 13, len / 2,
                           len - 9, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        spill(bad_path, file, cuts[i]);
        clinfer_status st = clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL);
        if (st != CLINFER_ERR_FORMAT) fail_msg("cut at %zu: %s (%s)", cuts[i], clinfer_status_name(st), clinfer_last_error());
        assert_int_equal(clinfer_seq_len(s, 1), 0);
    }
    /* a byte more */
    memcpy(bad, file, len);
    bad[len] = 0;
    spill(bad_path, bad, len + 1);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT, "after its end");
    /* hostile counts: tokens beyond the context, negative; a block count past the length */
    int32_t v = 1 << 30;
    memcpy(bad, file, len);
    memcpy(bad + OFF_N_TOKENS, &v, sizeof v);
    spill(bad_path, bad, len);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_CONTEXT, "holds 1073741824");
    v = -5;
    memcpy(bad + OFF_N_TOKENS, &v, sizeof v);
    spill(bad_path, bad, len);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT, "holds -5");
    memcpy(bad, file, len);
    uint32_t count = 0xffffffffu;
    memcpy(bad + HEAD_BYTES + 160, &count, sizeof count);
    spill(bad_path, bad, len);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT, "KV blocks");
    /* a token out of the vocabulary */
    memcpy(bad, file, len);
    v = 1 << 20;
    memcpy(bad + HEAD_BYTES + 4, &v, sizeof v);
    spill(bad_path, bad, len);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT,
                 "out of the vocabulary");
    /* altered bytes anywhere: refused (by a check or the checksum), never a crash */
    uint64_t rng = tu_seed();
    for (int k = 0; k < 40; k++) {
        memcpy(bad, file, len);
        const size_t at = (size_t)(tu_next(&rng) % len);
        bad[at] ^= (unsigned char)(1 + tu_next(&rng) % 255);
        spill(bad_path, bad, len);
        clinfer_status st = clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL);
        if (st == CLINFER_OK) fail_msg("a byte altered at %zu of %zu was accepted", at, len);
    }
    memcpy(bad, file, len);
    bad[len - 20] ^= 1; /* in the KV: the checksum alone sees it */
    spill(bad_path, bad, len);
    ASSERT_FAILS(clinfer_session_load_seq(s, 1, bad_path, back, N_CTX, &n, NULL), CLINFER_ERR_FORMAT, "checksum");
    assert_int_equal(clinfer_seq_len(s, 1), 0);
    /* sequence 0 lived through all of it, and the good file still loads */
    assert_int_equal(clinfer_seq_len(s, 0), 40);
    ASSERT_OK(clinfer_session_load_seq(s, 1, state_path, back, N_CTX, &n, NULL));
    assert_int_equal(n, 40);
    free(bad);
    free(file);
    clinfer_session_free(h);
    clinfer_session_free(gs);
    clinfer_session_free(s);
    clinfer_model_free(g);
    clinfer_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_llama),
        cmocka_unit_test(test_round_trip_gemma3_window),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* clinfer_embed: against llama.cpp's embeddings (tests/peer/record_embed.py:
 * llama-cpp-python, embedding=True, mean pooling, normalised) on SmolLM2
 * and Gemma 3 as shipped and on SmolLM2 converted to F32, from the texts
 * (tokenized as llama.cpp does); on a tiny random model, every pooling against
 * the per-token rows, the rows against the head (logits = W_out · row,
 * which is what "after the output norm" means), chunking, the session's
 * state after it, and the error paths. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "clinfer.h"
#include "gguf.h"
#include "testutil.h"

static int n_embd_of(const clinfer_model *m) {
    clinfer_model_info info = {.size = sizeof info};
    ASSERT_OK(clinfer_model_get_info(m, &info));
    return info.n_embd;
}

static clinfer_session *session(clinfer_model *m, int n_ctx, int n_batch, int n_seq) {
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = n_ctx, sp.n_batch = n_batch, sp.n_seq = n_seq;
    clinfer_session *s;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    return s;
}

static void embed(clinfer_session *s, const int32_t *t, int n, clinfer_pooling pool, int normalize, int seq, float *out) {
    clinfer_embed_params p = clinfer_embed_default_params();
    p.pooling = pool, p.normalize = normalize, p.seq = seq;
    ASSERT_OK(clinfer_embed(s, t, n, &p, out));
}

static double dot(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static double max_abs_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* ---- llama.cpp's embeddings ------------------------------------------------------ */

/* Tolerances, from what was measured (every case of each file; the long
 * text of 740 tokens runs here in two chunks of 512, in one pass in
 * llama.cpp). Both engines multiply the quantized weights with 8-bit
 * activations but each rounds its own, so the vectors differ more than
 * summation order would make them, most for the shortest texts (one or
 * two tokens: nothing averages the rounding out).
 *   SmolLM2 Q4_1:   cosine >= 0.99983, max |diff| 0.0144 (of unit vectors), norm within 1.65 %
 *   Gemma 3 Q4_K_M: cosine >= 0.99806, max |diff| 0.0161, norm within 0.66 %
 * bounds: 1 - cosine 3x the worst, max |diff| and the norm 2x. Different
 * texts are much further apart (the closest pair of the recorded ones:
 * cosine 0.909 and max |diff| 0.16 for SmolLM2, 0.625 and 0.19 for
 * Gemma 3), so a wrong row, token or pooling fails. */
typedef struct peer_file {
    const char *data, *model; /* model: a catalogue name, NULL for the default */
    double cos_min, max_abs, norm_rel;
    int f32; /* the model converted to F32 first (`clinfer quantize`), an F16 KV cache as llama.cpp's */
} peer_file;

static const peer_file SMOLLM2 = {"tests/data/peer_embed_smollm2.txt", NULL, 1 - 3 * 1.7e-4, 0.029, 0.033, 0};
static const peer_file GEMMA3 = {"tests/data/peer_embed_gemma3.txt", "gemma3-270m", 1 - 3 * 1.94e-3, 0.032, 0.0133, 0};
/* F32 weights: llama.cpp computes them with F32 activations too, so only
 * summation order (and each engine's F16 KV rounding) differs, and what
 * the quantized files leave is seen to be rounding: measured 1 - cosine
 * 6.1e-8, max |diff| 1.4e-4, norm within 0.027 %; bounds as above. */
static const peer_file SMOLLM2_F32 = {"tests/data/peer_embed_smollm2_f32.txt", NULL, 1 - 3 * 6.2e-8, 2.8e-4, 5.5e-4, 1};

static void run_peer(const peer_file *pf) {
    char path[4096], f32[64] = "";
    if (clinfer_model_path(pf->model, path, sizeof path) != CLINFER_OK || access(path, R_OK) != 0) {
        TU_SKIP("no %s (%s)", pf->model ? pf->model : "default model", path);
    }
    if (pf->f32) {
        const char *bin = getenv("CLINFER_BIN");
        char cmd[4400];
        if (!bin) fail_msg("CLINFER_BIN is not set (ctest sets it)");
        snprintf(f32, sizeof f32, "/tmp/clinfer-test-embed-f32-%d.gguf", (int)getpid());
        snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' F32 >/dev/null", bin, path, f32);
        assert_int_equal(system(cmd), 0);
        snprintf(path, sizeof path, "%s", f32);
    }
    clinfer_model *m;
    clinfer_status st = clinfer_model_load(path, NULL, NULL, &m);
    if (*f32) unlink(f32); /* mapped: the file lives on until the model is freed */
    if (st == CLINFER_ERR_FORMAT && strstr(clinfer_last_error(), "unsupported tensor type")) {
        TU_SKIP("%s: this build lacks the file's weight types", clinfer_last_error());
    }
    ASSERT_OK(st);
    assert_int_equal(clinfer_model_pooling(m), CLINFER_POOLING_MEAN); /* the files name none */
    const int d = n_embd_of(m);
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 1024; /* n_batch 512: the long text in two chunks */
    sp.kv_type = pf->f32 ? CLINFER_KV_F16 : CLINFER_KV_F32;
    clinfer_session *s;
    ASSERT_OK(clinfer_session_create(m, &sp, &s));
    FILE *f = fopen(pf->data, "r");
    if (!f) fail_msg("cannot open %s (run from the repo root)", pf->data);
    size_t cap = 1 << 20;
    char *line = malloc(cap);
    int32_t *ids = malloc(4096 * sizeof *ids);
    float *want = malloc((size_t)d * sizeof *want), *got = malloc((size_t)d * sizeof *got),
          *raw = malloc((size_t)d * sizeof *raw);
    double norm = 0, worst_cos = 1, worst_abs = 0, worst_norm = 0;
    int n = 0, cases = 0;
    char *text = malloc(cap);
    size_t text_len = 0;
    while (fgets(line, (int)cap, f)) {
        char *p = line + 2, *end;
        if (line[0] == 'X') {
            unsigned byte;
            for (text_len = 0; sscanf(p + 2 * text_len, "%2x", &byte) == 1; text_len++) text[text_len] = (char)byte;
        } else if (line[0] == 'T') {
            for (n = 0; n < 4096; n++) {
                long v = strtol(p, &end, 10);
                if (end == p) break;
                ids[n] = (int32_t)v, p = end;
            }
            /* the text as the CLI and the server tokenize it: llama.cpp's tokens */
            int32_t *mine;
            int n_mine;
            ASSERT_OK(clinfer_tokenize(m, text, text_len, 1, 0, &mine, &n_mine));
            assert_int_equal(n_mine, n);
            assert_memory_equal(mine, ids, (size_t)n * sizeof *ids);
            clinfer_free(mine);
        } else if (line[0] == 'N') {
            norm = strtod(p, NULL);
        } else if (line[0] == 'E') {
            for (int k = 0; k < d; k++, p = end) {
                want[k] = strtof(p, &end);
                if (end == p) fail_msg("%s: an E line of fewer than %d values", pf->data, d);
            }
            embed(s, ids, n, CLINFER_POOLING_DEFAULT, 1, 0, got);
            embed(s, ids, n, CLINFER_POOLING_MEAN, 0, 0, raw);
            double c = dot(got, want, d), a = max_abs_diff(got, want, d);
            double r = fabs(sqrt(dot(raw, raw, d)) / norm - 1);
            print_message("  %4d tokens: 1 - cosine %.2e  max |diff| %.2e  norm %.4f vs %.4f\n", n, 1 - c, a,
                          sqrt(dot(raw, raw, d)), norm);
            assert_true(fabs(sqrt(dot(got, got, d)) - 1) < 1e-5);
            worst_cos = fmin(worst_cos, c), worst_abs = fmax(worst_abs, a), worst_norm = fmax(worst_norm, r);
            cases++;
        }
    }
    fclose(f);
    print_message("  %s: worst 1 - cosine %.2e (bound %.2e), max |diff| %.2e (%.2e), norm %.2e (%.2e)\n", pf->data,
                  1 - worst_cos, 1 - pf->cos_min, worst_abs, pf->max_abs, worst_norm, pf->norm_rel);
    assert_true(cases >= 5);
    assert_true(worst_cos >= pf->cos_min);
    assert_true(worst_abs <= pf->max_abs);
    assert_true(worst_norm <= pf->norm_rel);
    free(line), free(text), free(ids), free(want), free(got), free(raw);
    clinfer_session_free(s);
    clinfer_model_free(m);
}

static void test_peer_smollm2(void **state) {
    (void)state;
    run_peer(&SMOLLM2);
}

static void test_peer_gemma3(void **state) {
    (void)state;
    run_peer(&GEMMA3);
}

static void test_peer_smollm2_f32(void **state) {
    (void)state;
    run_peer(&SMOLLM2_F32);
}

/* ---- a tiny random model ------------------------------------------------------------ */

static char tiny_path[256];
static clinfer_model *tiny;

static int setup(void **state) {
    (void)state;
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) {
        fprintf(stderr, "CLINFER_TINY_GGUF is not set (ctest sets it)\n");
        return -1;
    }
    snprintf(tiny_path, sizeof tiny_path, "/tmp/clinfer-test-embed-%d.gguf", (int)getpid());
    char cmd[1024];
    /* F32, tied: the head is token_embd, read back from the file below; an odd width of 48 */
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --layers 2 --embd 48 --seed %llu", tool, tiny_path,
             (unsigned long long)(tu_seed() % 100000));
    if (system(cmd) != 0) return -1;
    return clinfer_model_load(tiny_path, NULL, NULL, &tiny) == CLINFER_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    clinfer_model_free(tiny);
    unlink(tiny_path);
    return 0;
}

static void random_tokens(uint64_t *rng, int32_t *t, int n, int n_vocab) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)(tu_next(rng) % (uint64_t)n_vocab);
}

/* Each pooled vector is what the per-token rows make of it; normalising
 * is dividing by the norm; the session is left empty. */
static void test_poolings(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    const int d = n_embd_of(tiny), nv = clinfer_model_n_vocab(tiny), n = 23 + (int)(tu_next(&rng) % 17);
    int32_t t[64];
    random_tokens(&rng, t, n, nv);
    clinfer_session *s = session(tiny, 128, 0, 2);
    float *rows = malloc((size_t)n * d * sizeof *rows), *v = malloc((size_t)d * sizeof *v);
    double *mean = calloc((size_t)d, sizeof *mean);
    for (int k = 0; k < d; k++) rows[k] = NAN; /* an unwritten row fails */
    embed(s, t, n, CLINFER_POOLING_NONE, 0, 0, rows);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < d; k++) mean[k] += rows[(size_t)r * d + k] / n;
    float *mf = malloc((size_t)d * sizeof *mf);
    for (int k = 0; k < d; k++) mf[k] = (float)mean[k];
    embed(s, t, n, CLINFER_POOLING_MEAN, 0, 0, v);
    assert_true(max_abs_diff(v, mf, d) < 1e-5 * sqrt(dot(mf, mf, d)));
    embed(s, t, n, CLINFER_POOLING_CLS, 0, 0, v);
    assert_true(max_abs_diff(v, rows, d) == 0);
    embed(s, t, n, CLINFER_POOLING_LAST, 0, 0, v);
    assert_true(max_abs_diff(v, rows + (size_t)(n - 1) * d, d) == 0);
    /* normalised: the same direction, unit length, row by row for NONE */
    embed(s, t, n, CLINFER_POOLING_LAST, 1, 0, v);
    double nl = sqrt(dot(rows + (size_t)(n - 1) * d, rows + (size_t)(n - 1) * d, d));
    for (int k = 0; k < d; k++) assert_true(fabs(v[k] - rows[(size_t)(n - 1) * d + k] / nl) < 1e-6);
    float *unit = malloc((size_t)n * d * sizeof *unit);
    embed(s, t, n, CLINFER_POOLING_NONE, 1, 0, unit);
    for (int r = 0; r < n; r++) assert_true(fabs(dot(unit + (size_t)r * d, unit + (size_t)r * d, d) - 1) < 1e-5);
    /* the default is mean here (the tiny file names no pooling), normalised */
    assert_int_equal(clinfer_model_pooling(tiny), CLINFER_POOLING_MEAN);
    ASSERT_OK(clinfer_embed(s, t, n, NULL, v));
    double nm = sqrt(dot(mf, mf, d));
    for (int k = 0; k < d; k++) assert_true(fabs(v[k] - mf[k] / nm) < 1e-5);
    assert_int_equal(clinfer_seq_len(s, 0), 0);
    assert_null(clinfer_session_logits(s));
    free(rows), free(v), free(mean), free(mf), free(unit);
    clinfer_session_free(s);
}

/* The rows are the head's input: token_embd (tied, F32) times a row is that
 * token's logits as clinfer_eval_all computes them. */
static void test_rows_feed_the_head(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    const int d = n_embd_of(tiny), nv = clinfer_model_n_vocab(tiny), n = 9 + (int)(tu_next(&rng) % 9);
    int32_t t[32];
    random_tokens(&rng, t, n, nv);
    clf_gguf *g;
    TU_OK(clf_gguf_open(tiny_path, &g));
    const clf_gguf_tensor *w = clf_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(w);
    assert_int_equal(w->type, CLF_F32);
    assert_true(w->ne[0] == d && w->ne[1] == nv);
    clinfer_session *s = session(tiny, 64, 0, 1);
    float *rows = malloc((size_t)n * d * sizeof *rows), *logits = malloc((size_t)n * nv * sizeof *logits);
    embed(s, t, n, CLINFER_POOLING_NONE, 0, 0, rows);
    ASSERT_OK(clinfer_eval_all(s, t, n, logits));
    double worst = 0, scale = 0;
    for (int r = 0; r < n; r++)
        for (int v = 0; v < nv; v++) {
            const float *wv = (const float *)w->data + (size_t)v * d;
            double l = dot(wv, rows + (size_t)r * d, d);
            worst = fmax(worst, fabs(l - logits[(size_t)r * nv + v]));
            scale = fmax(scale, fabs(l));
        }
    print_message("  head from the rows vs the logits: max |diff| %.2g of max |logit| %.3g\n", worst, scale);
    assert_true(scale > 0);
    assert_true(worst <= 1e-4 * scale);
    clf_gguf_close(g);
    free(rows), free(logits);
    clinfer_session_free(s);
}

/* Chunks of an odd n_batch, another sequence, and what a session held
 * before: the same vector (causal attention over the same tokens). */
static void test_chunks_and_sequences(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    const int d = n_embd_of(tiny), nv = clinfer_model_n_vocab(tiny), n = 40 + (int)(tu_next(&rng) % 20);
    int32_t t[64], other[10];
    random_tokens(&rng, t, n, nv);
    random_tokens(&rng, other, 10, nv);
    float *a = malloc((size_t)d * sizeof *a), *b = malloc((size_t)d * sizeof *b);
    clinfer_session *s1 = session(tiny, 128, 0, 1), *s2 = session(tiny, 128, 7, 3);
    embed(s1, t, n, CLINFER_POOLING_MEAN, 1, 0, a);
    ASSERT_OK(clinfer_eval(s2, other, 10)); /* forgotten first */
    embed(s2, t, n, CLINFER_POOLING_MEAN, 1, 2, b);
    print_message("  n_batch 7 vs 128: max |diff| %.2g\n", max_abs_diff(a, b, d));
    assert_true(max_abs_diff(a, b, d) < 1e-4);
    assert_int_equal(clinfer_seq_len(s2, 2), 0);
    assert_int_equal(clinfer_seq_len(s2, 0), 10); /* another sequence is left alone */
    embed(s2, t, n, CLINFER_POOLING_MEAN, 1, 0, b);
    assert_true(max_abs_diff(a, b, d) < 1e-4);
    assert_int_equal(clinfer_seq_len(s2, 0), 0);
    /* a different text, a different vector */
    t[n / 2] = (t[n / 2] + 1) % nv;
    embed(s1, t, n, CLINFER_POOLING_MEAN, 1, 0, b);
    assert_true(max_abs_diff(a, b, d) > 1e-4);
    free(a), free(b);
    clinfer_session_free(s1);
    clinfer_session_free(s2);
}

static void test_errors(void **state) {
    (void)state;
    const int d = n_embd_of(tiny), nv = clinfer_model_n_vocab(tiny);
    clinfer_session *s = session(tiny, 16, 0, 1);
    int32_t t[17] = {0};
    float *v = malloc((size_t)17 * d * sizeof *v);
    clinfer_embed_params p = clinfer_embed_default_params();
    ASSERT_FAILS(clinfer_embed(NULL, t, 1, NULL, v), CLINFER_ERR_ARG, "s is NULL");
    ASSERT_FAILS(clinfer_embed(s, t, 1, NULL, NULL), CLINFER_ERR_ARG, "out is NULL");
    ASSERT_FAILS(clinfer_embed(s, t, 0, NULL, v), CLINFER_ERR_ARG, "nothing to embed");
    ASSERT_FAILS(clinfer_embed(s, t, 17, NULL, v), CLINFER_ERR_CONTEXT, "do not fit the context of 16");
    t[3] = nv;
    ASSERT_FAILS(clinfer_embed(s, t, 5, NULL, v), CLINFER_ERR_ARG, "outside the vocabulary");
    t[3] = -1;
    ASSERT_FAILS(clinfer_embed(s, t, 5, NULL, v), CLINFER_ERR_ARG, "outside the vocabulary");
    t[3] = 0;
    p.pooling = (clinfer_pooling)7;
    ASSERT_FAILS(clinfer_embed(s, t, 5, &p, v), CLINFER_ERR_ARG, "not a clinfer_pooling");
    p = clinfer_embed_default_params(), p.seq = 1;
    ASSERT_FAILS(clinfer_embed(s, t, 5, &p, v), CLINFER_ERR_ARG, "sequence 1 of 1");
    p = clinfer_embed_default_params(), p.size = 0;
    assert_int_equal(clinfer_embed(s, t, 5, &p, v), CLINFER_ERR_ARG);
    /* the whole context is fine */
    ASSERT_OK(clinfer_embed(s, t, 16, NULL, v));
    assert_int_equal(clinfer_model_pooling(NULL), CLINFER_POOLING_MEAN);
    free(v);
    clinfer_session_free(s);
}

/* A corrupt model (NaN in its output norm): an error, not NaN vectors. */
static void test_not_finite(void **state) {
    (void)state;
    char path[256], cmd[600];
    snprintf(path, sizeof path, "/tmp/clinfer-test-embed-nan-%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --nan", getenv("CLINFER_TINY_GGUF"), path);
    assert_int_equal(system(cmd), 0);
    clinfer_model *m;
    ASSERT_OK(clinfer_model_load(path, NULL, NULL, &m));
    clinfer_session *s = session(m, 32, 0, 1);
    int32_t t[5] = {1, 2, 3, 4, 5};
    float *v = malloc((size_t)n_embd_of(m) * sizeof *v);
    ASSERT_FAILS(clinfer_embed(s, t, 5, NULL, v), CLINFER_ERR_FORMAT, "not finite");
    free(v);
    clinfer_session_free(s);
    clinfer_model_free(m);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poolings),
        cmocka_unit_test(test_rows_feed_the_head),
        cmocka_unit_test(test_chunks_and_sequences),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_not_finite),
        cmocka_unit_test(test_peer_smollm2),
        cmocka_unit_test(test_peer_gemma3),
        cmocka_unit_test(test_peer_smollm2_f32),
    };
    return TU_RUN_GROUP(tests, setup, teardown);
}

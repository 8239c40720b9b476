/* clinfer against llama.cpp: logits and greedy continuations recorded by
 * tests/peer/record.py with llama-cpp-python, on the real default model
 * (SmolLM2-135M-Instruct) as shipped (Q4_1) and converted to F32 by
 * `clinfer quantize` (tests/data/peer_smollm2_{q4_1,f32}.txt), and on tiny
 * random models of every family written again here by tiny_gguf from the
 * arguments the data file records (tests/data/peer_tiny_*.txt), and on
 * Gemma 3 270M as fetched and converted to F32 (peer_gemma3_270m*.txt),
 * and on tiny models in every K-quant mix (tests/peer/record_kquant.py). */
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
#include "model_path.h"
#include "peer_kquant.h"
#include "testutil.h"

typedef struct {
    const char *data;  /* recorded by tests/peer/record.py */
    double tol_abs;    /* largest |clinfer - llama.cpp| over a step's top-20 */
    double tol_rms;    /* RMS of the differences over a step's top-20 */
    double tie;        /* a llama.cpp top-2 margin below this may flip */
    clf_type kv;       /* KV cache type (llama.cpp's default is F16) */
    int max_steps;     /* steps compared per case; 0: all recorded */
    const char *mix;   /* the data file's section "M <mix>" (tests/peer/record_kquant.py), or NULL: all of it */
} peer_variant;

/* Q4_1: llama.cpp multiplies Q4_1 weights with activations quantized to 8
 * bits (Q8_1), and so does clinfer on AVX-512 CPUs (the int8 GEMVs and,
 * for prompts, the int8 GEMM), but each rounds its own activations, which
 * differ slightly, so the two roundings add rather than cancel. Logits of
 * magnitude ~10-40 differ from llama.cpp's by up to ~1.1 and near-ties flip
 * (seen at margins <= 0.33). RMS over a step's top-20, worst step of each
 * case: float prompts 0.63, 0.45, 0.57, 0.52, 0.44; int8 prompts 0.42,
 * 0.35, 0.90, 0.38, 0.37 (greedy then agrees for 14, 33, 33, 8, 33 steps
 * where float prompts gave 5, 33, 0, 2, 33): bound 1.0. */
static const peer_variant Q4_1 = {"tests/data/peer_smollm2_q4_1.txt", 1.5, 1.0, 0.6, CLF_F32, 0, NULL};
/* F32: llama.cpp computes F32 weights with F32 activations too, and keeps
 * its KV cache in F16 as clinfer does here, so only summation order
 * differs: every greedy token must match, logits agree to a few hundredths
 * (measured: max 0.024, RMS 0.012). */
static const peer_variant F32 = {"tests/data/peer_smollm2_f32.txt", 0.06, 0.03, 0.0, CLF_F16, 0, NULL};

#define MAX_IDS 1024
typedef struct {
    int n_prompt, prompt[MAX_IDS];
    int n_steps, top_id[40][20];
    double top[40][20];
    int n_gen, gen[64];
} peer_case;

/* The tiny_gguf arguments of a tiny model's data file ("M" line), or "". */
static void model_args(const char *path, char *args, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (run from the repo root)", path);
    char line[512];
    args[0] = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] == 'M' && line[1] == ' ') {
            line[strcspn(line, "\n")] = 0;
            snprintf(args, n, "%s", line + 2);
        }
    fclose(f);
}

static int parse_ids(const char *s, int *out, int max) {
    int n = 0, used;
    while (n < max && sscanf(s, "%d%n", &out[n], &used) == 1) {
        s += used;
        n++;
    }
    return n;
}

static int load_cases(const char *path, const char *mix, peer_case *cases, int max) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (run from the repo root)", path);
    static char line[16384];
    char name[16];
    int n = -1, in = !mix;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == 'M') in = !mix || (sscanf(line, "M %15s", name) == 1 && !strcmp(name, mix));
        if (!in) continue;
        if (line[0] == 'P' && n + 1 < max) {
            peer_case *c = &cases[++n];
            memset(c, 0, sizeof *c);
            c->n_prompt = parse_ids(line + 2, c->prompt, MAX_IDS);
        } else if (line[0] == 'S' && n >= 0) {
            peer_case *c = &cases[n];
            int step, used;
            double norm;
            char *p = line + 2;
            if (sscanf(p, "%d %lf%n", &step, &norm, &used) != 2 || step >= 40) continue;
            p += used;
            for (int k = 0; k < 20; k++, p += used)
                if (sscanf(p, " %d:%lf%n", &c->top_id[step][k], &c->top[step][k], &used) != 2) break;
            c->n_steps = step + 1;
        } else if (line[0] == 'G' && n >= 0) {
            cases[n].n_gen = parse_ids(line + 2, cases[n].gen, 64);
        }
    }
    fclose(f);
    return n + 1;
}

static int argmax(const float *x, int n) {
    int a = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[a]) a = i;
    return a;
}

/* Compares our logits with the peer's top-20 at one step. */
static void compare_step(const float *logits, const peer_case *pc, int step, double *worst_abs, double *worst_rms) {
    double ss = 0, mx = 0;
    for (int k = 0; k < 20; k++) {
        double d = logits[pc->top_id[step][k]] - pc->top[step][k];
        ss += d * d;
        if (fabs(d) > mx) mx = fabs(d);
    }
    if (mx > *worst_abs) *worst_abs = mx;
    if (sqrt(ss / 20) > *worst_rms) *worst_rms = sqrt(ss / 20);
}

static void check_variant(const peer_variant *pv, const char *path) {
    static peer_case cases[8];
    int nc = load_cases(pv->data, pv->mix, cases, 8);
    assert_true(nc >= 2);
    clf_runtime *rt = tu_runtime();
    clf_gguf *g;
    clf_llama *m;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_llama_load(rt, g, &m));
    clf_llama_ctx *c;
    /* chunks of 256: Gemma 3's 896-token prompt wraps its local layers' ring
     * (the window of 512 and a chunk: 768 slots) */
    TU_OK(clf_llama_ctx_create(m, 1024, 256, pv->kv, &c));
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    for (int ci = 0; ci < nc; ci++) {
        const peer_case *pc = &cases[ci];
        clf_llama_rewind(c, 0);
        TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, pc->n_prompt, 0, logits));
        double worst_abs = 0, worst_rms = 0;
        int same = 0, diverged = 0;
        /* teacher forcing on llama.cpp's greedy tokens: every step compared */
        const int n_steps = pv->max_steps > 0 && pv->max_steps < pc->n_steps ? pv->max_steps : pc->n_steps;
        for (int step = 0; step < n_steps; step++) {
            compare_step(logits, pc, step, &worst_abs, &worst_rms);
            int ours = argmax(logits, m->hp.n_vocab), theirs = pc->top_id[step][0];
            double margin = pc->top[step][0] - pc->top[step][1];
            if (getenv("PEER_DEBUG"))
                print_message("    step %d: max |diff| so far %.3f; argmax %d (%.3f), llama.cpp %d (%.3f, margin %.3f)\n", step,
                              worst_abs, ours, logits[ours], theirs, pc->top[step][0], margin);
            if (ours != theirs) {
                if (margin >= pv->tie)
                    fail_msg("case %d step %d: argmax %d, llama.cpp %d (margin %.3f)", ci, step, ours, theirs, margin);
                diverged = 1;
            }
            if (!diverged) same++;
            if (step == pc->n_gen) break;
            TU_OK(clf_llama_eval(c, &pc->gen[step], 1, 0, logits));
        }
        print_message("  case %d: prompt %d tokens, greedy identical for %d of %d steps%s, top-20 logits max |diff| %.3g, RMS %.3g\n",
                      ci, pc->n_prompt, same, n_steps, diverged ? " (then near-ties only)" : "", worst_abs, worst_rms);
        assert_true(worst_abs <= pv->tol_abs);
        assert_true(worst_rms <= pv->tol_rms);
    }
    free(logits);
    clf_llama_ctx_free(c);
    clf_llama_free(m);
    clf_gguf_close(g);
}

/* Converts `path` to F32 with `clinfer quantize` and checks that file. */
static void check_f32_conversion(const peer_variant *pv, const char *path) {
    char out[] = "/tmp/clinfer-f32-XXXXXX", f32[64], cmd[3200];
    const char *bin = getenv("CLINFER_BIN");
    if (!bin) fail_msg("CLINFER_BIN is not set (ctest sets it)");
    assert_non_null(mkdtemp(out));
    snprintf(f32, sizeof f32, "%s/f32.gguf", out);
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s' '%s' F32 >/dev/null", bin, path, f32);
    assert_int_equal(system(cmd), 0);
    check_variant(pv, f32);
    unlink(f32);
    rmdir(out);
}

static void test_q4_1_as_shipped(void **state) {
    (void)state;
    char path[1024];
    if (clf_model_path(NULL, path, sizeof path) != CLF_OK) fail_msg("%s", clf_last_error());
    check_variant(&Q4_1, path);
}

static void test_f32_conversion(void **state) {
    (void)state;
    char path[1024];
    if (clf_model_path(NULL, path, sizeof path) != CLF_OK) fail_msg("%s", clf_last_error());
    check_f32_conversion(&F32, path);
}

/* Gemma 3 270M Q4_K_M as fetched: weights in Q5_0, Q8_0, Q4_K and Q6_K,
 * whose products llama.cpp takes with 8-bit activations (Q8_0/Q8_K) and
 * clinfer with F32 ones in prefill and int8 ones in decode; the last prompt
 * (896 tokens) is longer than the 512-token sliding window. Measured over
 * the 5 x 33 steps, on logits of ~15-30: max |diff| 1.73, RMS over a
 * step's top-20 at most 0.98; greedy flips only at llama.cpp top-2 margins
 * < 0.6 (two cases). Bounds: ~1.7x and 2x those. The F32 conversion below
 * is the strict check of the forward pass. */
static const peer_variant GEMMA3 = {"tests/data/peer_gemma3_270m.txt", 3.0, 2.0, 0.6, CLF_F16, 0, NULL};
/* Its F32 conversion (recorded on gguf-py's dequantization, which clinfer
 * quantize's matches bit for bit): llama.cpp differs by summation order,
 * its F16 rounding of Q and probabilities, and its GELU table (measured
 * over the 5 x 33 steps: max 0.078, RMS 0.039 on logits of ~15-30; every
 * greedy token the same). A gigabyte a token: the first 12 steps of each
 * case keep the test short, the long prompt's included. */
static const peer_variant GEMMA3_F32 = {"tests/data/peer_gemma3_270m_f32.txt", 0.15, 0.08, 0.05, CLF_F16, 12, NULL};

/* The cached Gemma 3 file, or a skip saying why there is none to run. */
static void gemma3_path(char *path, size_t n) {
    if (clf_model_path("gemma3-270m", path, n) != CLF_OK) {
        TU_SKIP("%s (run `make model MODEL=gemma3-270m`)", clf_last_error());
    }
    clf_gguf *g;
    clf_status st = clf_gguf_open(path, &g);
    if (st == CLF_ERR_FORMAT && strstr(clf_last_error(), "unsupported tensor type")) {
        TU_SKIP("%s: this build's GGUF reader lacks the file's weight types", clf_last_error());
    }
    TU_OK(st);
    clf_gguf_close(g);
}

static void test_gemma3_270m(void **state) {
    (void)state;
    char path[1024];
    gemma3_path(path, sizeof path);
    check_variant(&GEMMA3, path);
}

static void test_gemma3_270m_f32(void **state) {
    (void)state;
    char path[1024];
    gemma3_path(path, sizeof path);
    check_f32_conversion(&GEMMA3_F32, path);
}

/* Tiny random models, F32 weights and an F32 KV cache on both sides: only
 * summation order differs (measured: max 5.6e-6, RMS 3.4e-6 on logits of
 * ~0.1-1; with llama.cpp's default F16 cache, which also rounds Q and the
 * probabilities to F16 in its products, up to 1.2e-3). gemma3 differs more
 * by llama.cpp's CPU GELU, a table indexed by the F16-rounded input (max
 * 1.6e-4, RMS 7.9e-5): clinfer computes the tanh form in float, as
 * llama.cpp's GPU backends do. Margins below 4x the tolerance count as ties. */
static const peer_variant TINY[] = {
    {"tests/data/peer_tiny_llama3.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_qwen2.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_qwen3.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_gemma3.txt", 4e-4, 2e-4, 1.6e-3, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_phi3.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
};

/* Each tiny model of `pv` written again by tiny_gguf and checked, on the
 * default kernel variant and on each of `tunes` (NULL: the default only). */
static void check_tiny(const peer_variant *pv, size_t n, const char *const *tunes, int n_tunes) {
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) fail_msg("CLINFER_TINY_GGUF is not set (ctest sets it)");
    for (size_t i = 0; i < n; i++) {
        char args[512], dir[] = "/tmp/clinfer-peer-XXXXXX", path[64], cmd[1200];
        model_args(pv[i].data, args, sizeof args);
        assert_true(args[0] != 0);
        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/tiny.gguf", dir);
        snprintf(cmd, sizeof cmd, "'%s' model '%s' %s", tool, path, args);
        assert_int_equal(system(cmd), 0);
        for (int t = 0; t < (tunes ? n_tunes : 1); t++) {
            tu_tune(tunes ? tunes[t] : NULL);
            print_message("  %s (tiny_gguf model %s), %s variant\n", pv[i].data, args, clf_matmul_variant(tu_runtime()));
            check_variant(&pv[i], path);
        }
        tu_tune(NULL);
        unlink(path);
        rmdir(dir);
    }
}

static void test_tiny_families(void **state) {
    (void)state;
    check_tiny(TINY, sizeof TINY / sizeof TINY[0], NULL, 0);
}

/* Mixtures of experts (8 experts; qwen3moe 3 used, Mixtral 2, gpt-oss 4;
 * expert widths 24 and 40, no multiple of 32), on both kernel variants: as
 * the dense tiny families, only summation order differs (the router's
 * probabilities included: no choice of expert flips on these prompts).
 * gpt-oss (4 layers, the even ones sliding through a window of 8 that the
 * 20-token prompts outgrow): its attention sinks, every bias, YaRN and
 * softmax-weight routing. */
static const peer_variant TINY_MOE[] = {
    {"tests/data/peer_tiny_qwen3moe.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_mixtral.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
    {"tests/data/peer_tiny_gptoss.txt", 2e-5, 1e-5, 8e-5, CLF_F32, 0, NULL},
};

static void test_tiny_moe(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=gpu"};
    check_tiny(TINY_MOE, sizeof TINY_MOE / sizeof TINY_MOE[0], tunes, 2);
}

/* Every K-quant mix and fallback type of tests/data/peer_kquant.txt: the
 * tiny model rebuilt and quantized by clinfer (the bytes llama.cpp's
 * quantizer wrote, hash-checked), its logits against llama.cpp's, on the
 * default variant and on the GGUF-layout one. llama.cpp rounds the
 * activations to 8 bits in these products (Q8_K, Q8_0, Q8_1; BF16 for
 * BF16), so its logits (top-20 ~0.2-0.3, norm ~1.7 over 281) are off by
 * that: measured max |diff| 0.022 and RMS 0.008 over all mixes, both
 * variants (the gpu variant's F32 activations as far off as the cpu one's
 * int8 decode: the difference is llama.cpp's), greedy flips at top-2
 * margins up to 0.007. */
static const peer_variant KQUANT = {PEER_KQUANT_DATA, 0.04, 0.015, 0.03, CLF_F16, 0, NULL};

static void test_kquant_mixes(void **state) {
    (void)state;
    char mixes[16][16], dir[] = "/tmp/clinfer-kq-XXXXXX", path[256];
    const int n = peer_kquant_mixes(mixes, 16);
    assert_true(n >= 9);
    assert_non_null(mkdtemp(dir));
    static const char *variants[] = {NULL, "matmul=gpu"};
    for (int i = 0; i < n; i++) {
        peer_kquant_model(dir, mixes[i], path, sizeof path);
        peer_variant pv = KQUANT;
        pv.mix = mixes[i];
        for (int v = 0; v < 2; v++) {
            tu_tune(variants[v]);
            print_message(" %s, %s variant\n", mixes[i], clf_matmul_variant(tu_runtime()));
            check_variant(&pv, path);
        }
        unlink(path);
    }
    tu_tune(NULL);
    char src[300];
    snprintf(src, sizeof src, "%s/kq-src.gguf", dir);
    unlink(src);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_q4_1_as_shipped), cmocka_unit_test(test_f32_conversion),
                                       cmocka_unit_test(test_tiny_families), cmocka_unit_test(test_tiny_moe),
                                       cmocka_unit_test(test_gemma3_270m),
                                       cmocka_unit_test(test_gemma3_270m_f32), cmocka_unit_test(test_kquant_mixes)};
    int rc = TU_RUN_GROUP(tests, NULL, NULL);
    tu_runtime_free();
    return rc;
}

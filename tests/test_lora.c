/* LoRA adapters (models/lora.h) on the tiny Llama of tests/data/peer_lora_tiny.txt
 * (written again by tiny_gguf from its "M" line), with the adapters
 * tests/data/lora_tiny_{a,b}.gguf (tests/peer/record_lora.py):
 * - logits against llama.cpp's with the same adapters and scales, teacher
 *   forced on its greedy tokens, on the default kernel variant and the gpu one;
 * - scale 0 gives the base's logits bit for bit;
 * - a batch of sequences with different adapters (and one without) gives
 *   each what it gets alone;
 * - files that are no adapter for this base are refused with a reason, and
 *   damaged copies of an adapter are refused or load, never crash;
 * - the decode rows' one-launch kernel (clf_lora_rows) on odd shapes. */
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
#include "llama.h"
#include "lora.h"
#include "testutil.h"

#define DATA "tests/data/peer_lora_tiny.txt"
/* every family's recording (tests/peer/record_lora.py): DATA's Llama, Phi-3's fused attn_qkv and gate|up,
 * Gemma 3's post-norms; the bound on the top-20 logits' difference of each's F32 adapters, F16 ones */
static const struct {
    const char *data;
    double tol32, tol16;
} FAMILIES[] = {{DATA, 5e-5, 2e-3}, {"tests/data/peer_lora_phi3.txt", 5e-5, 2e-3},
                {"tests/data/peer_lora_gemma3.txt", 4e-4, 4e-3}};
#define MAX_CFG 4
#define MAX_CASE 2
#define TOPN 20

typedef struct {
    int n_prompt, prompt[64];
    int n_steps, top_id[24][TOPN];
    double top[24][TOPN];
    int n_gen, gen[24];
} lcase;

typedef struct {
    char name[4][8];
    float scale[4];
    int n;
    lcase cases[MAX_CASE];
    int n_cases;
} lcfg;

static char model_args[256];
static lcfg cfgs[MAX_CFG];
static int n_cfg;
static char ad_name[2][8], ad_path[2][128]; /* the data file's adapters ("A" lines) */
static int n_ad;
static char dir[] = "/tmp/clinfer-lora-XXXXXX";
static char base_path[128];

static int parse_ids(const char *s, int *out, int max) {
    int n = 0, used;
    while (n < max && sscanf(s, "%d%n", &out[n], &used) == 1) s += used, n++;
    return n;
}

/* A data file: M (model arguments), A (an adapter), C (a configuration), then P/S/G per case. */
static void load_data(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (run from the repo root)", path);
    static char line[8192];
    n_cfg = n_ad = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        lcfg *c = n_cfg ? &cfgs[n_cfg - 1] : NULL;
        if (line[0] == 'M') snprintf(model_args, sizeof model_args, "%.255s", line + 2);
        else if (line[0] == 'A' && n_ad < 2)
            assert_int_equal(sscanf(line + 2, "%7s %127s", ad_name[n_ad], ad_path[n_ad]), 2), n_ad++;
        else if (line[0] == 'C' && n_cfg < MAX_CFG) {
            c = &cfgs[n_cfg++];
            memset(c, 0, sizeof *c);
            for (char *tok = strtok(line + 2, ","); tok && c->n < 4; tok = strtok(NULL, ",")) {
                assert_int_equal(sscanf(tok, "%7[^:]:%f", c->name[c->n], &c->scale[c->n]), 2);
                c->n++;
            }
        } else if (line[0] == 'P' && c && c->n_cases < MAX_CASE) {
            lcase *k = &c->cases[c->n_cases++];
            memset(k, 0, sizeof *k);
            k->n_prompt = parse_ids(line + 2, k->prompt, 64);
        } else if (line[0] == 'S' && c && c->n_cases) {
            lcase *k = &c->cases[c->n_cases - 1];
            int step, used;
            double norm;
            char *p = line + 2;
            if (sscanf(p, "%d %lf%n", &step, &norm, &used) != 2 || step >= 24) continue;
            p += used;
            for (int j = 0; j < TOPN; j++, p += used)
                if (sscanf(p, " %d:%lf%n", &k->top_id[step][j], &k->top[step][j], &used) != 2) break;
            k->n_steps = step + 1;
        } else if (line[0] == 'G' && c && c->n_cases) {
            lcase *k = &c->cases[c->n_cases - 1];
            k->n_gen = parse_ids(line + 2, k->gen, 24);
        }
    }
    fclose(f);
    assert_true(n_cfg >= 1 && n_ad >= 1);
}

/* A tiny model written by tiny_gguf with `args` into dir/name. */
static void write_model(const char *name, const char *args, char *path, size_t n) {
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) fail_msg("CLINFER_TINY_GGUF is not set (ctest sets it)");
    char cmd[1024];
    snprintf(path, n, "%s/%s", dir, name);
    snprintf(cmd, sizeof cmd, "'%s' model '%s' %s", tool, path, args);
    assert_int_equal(system(cmd), 0);
}

/* The base of data file `path`, its adapters and configurations. */
static void use_data(const char *path) {
    load_data(path);
    write_model("base.gguf", model_args, base_path, sizeof base_path);
}

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(dir)) return -1;
    use_data(DATA);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The base and both adapters on the runtime as tuned now. */
typedef struct {
    clf_gguf *g, *ga[2];
    clf_llama *m;
    clf_lora *a[2];
} fixture;

static void open_all(fixture *fx) {
    TU_OK(clf_gguf_open(base_path, &fx->g));
    TU_OK(clf_llama_load(tu_runtime(), fx->g, &fx->m));
    memset(fx->ga, 0, sizeof fx->ga);
    memset(fx->a, 0, sizeof fx->a);
    for (int i = 0; i < n_ad; i++) {
        TU_OK(clf_gguf_open(ad_path[i], &fx->ga[i]));
        TU_OK(clf_lora_load(fx->m, fx->ga[i], &fx->a[i]));
    }
}

static void close_all(fixture *fx) {
    for (int i = 0; i < 2; i++) {
        clf_lora_free(fx->a[i]);
        clf_gguf_close(fx->ga[i]);
    }
    clf_llama_free(fx->m);
    clf_gguf_close(fx->g);
}

/* A configuration's adapters as a sequence uses them. */
static int cfg_use(const fixture *fx, const lcfg *c, clf_lora_use *use) {
    for (int i = 0; i < c->n; i++) {
        int k = 0;
        while (k < n_ad && strcmp(ad_name[k], c->name[i])) k++;
        assert_true(k < n_ad);
        use[i] = (clf_lora_use){fx->a[k], c->scale[i]};
    }
    return c->n;
}

static int argmax(const float *x, int n) {
    int a = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[a]) a = i;
    return a;
}

/* Each configuration against llama.cpp. Both engines run F32 weights and
 * an F32 KV cache; the adapters' products differ by summation order and,
 * for the F16 adapter b, by llama.cpp rounding the activations to F16 for
 * its F16 weights (clinfer reads F16 weights against float activations). */
static void check_peer(double tol32, double tol16) {
    fixture fx;
    open_all(&fx);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(fx.m, 256, 64, CLF_F32, &c));
    const int nv = fx.m->hp.n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    for (int k = 0; k < n_cfg; k++) {
        clf_lora_use use[4];
        const int n_use = cfg_use(&fx, &cfgs[k], use);
        int f16 = 0;
        for (int i = 0; i < n_use; i++) f16 |= use[i].lora->ab[0][CLF_LORA_WO].a.type == CLF_F16 ||
                                               use[i].lora->ab[0][CLF_LORA_DOWN].a.type == CLF_F16;
        const double tol = f16 ? tol16 : tol32;
        TU_OK(clf_llama_ctx_set_lora(c, 0, use, n_use));
        double worst = 0;
        for (int ci = 0; ci < cfgs[k].n_cases; ci++) {
            const lcase *pc = &cfgs[k].cases[ci];
            clf_llama_rewind(c, 0);
            TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, pc->n_prompt, 0, logits));
            for (int step = 0; step < pc->n_steps; step++) {
                for (int j = 0; j < TOPN; j++) {
                    double d = fabs(logits[pc->top_id[step][j]] - pc->top[step][j]);
                    if (d > worst) worst = d;
                }
                const double margin = pc->top[step][0] - pc->top[step][1];
                if (argmax(logits, nv) != pc->top_id[step][0] && margin > 4 * tol)
                    fail_msg("config %d case %d step %d: argmax %d, llama.cpp %d (margin %.5f)", k, ci, step,
                             argmax(logits, nv), pc->top_id[step][0], margin);
                if (step == pc->n_gen) break;
                TU_OK(clf_llama_eval(c, &pc->gen[step], 1, 0, logits));
            }
        }
        print_message("  config %d (%d adapters): top-20 logits max |diff| %.3g (bound %.3g)\n", k, cfgs[k].n, worst,
                      tol);
        assert_true(worst <= tol);
    }
    free(logits);
    clf_llama_ctx_free(c);
    close_all(&fx);
}

static void test_peer(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=gpu ops=gpu"}; /* ops=gpu: cl/lora.cl in groups of 64 */
    for (size_t d = 0; d < sizeof FAMILIES / sizeof FAMILIES[0]; d++) {
        use_data(FAMILIES[d].data);
        for (int t = 0; t < 2; t++) {
            tu_tune(tunes[t]);
            print_message(" %s (tiny_gguf model %s), %s variant\n", FAMILIES[d].data, model_args,
                          clf_matmul_variant(tu_runtime()));
            check_peer(FAMILIES[d].tol32, FAMILIES[d].tol16);
        }
    }
    tu_tune(NULL);
    use_data(DATA); /* the other tests' */
}

/* The adapters change the logits, and at scale 0 they are the base's, bit for bit. */
static void test_scale_zero(void **state) {
    (void)state;
    fixture fx;
    open_all(&fx);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(fx.m, 256, 64, CLF_F32, &c));
    const int nv = fx.m->hp.n_vocab;
    float *base = malloc((size_t)nv * sizeof *base), *out = malloc((size_t)nv * sizeof *out);
    const lcase *pc = &cfgs[0].cases[0];
    TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, pc->n_prompt, 0, base));
    clf_lora_use use[2] = {{fx.a[0], 0.0f}, {fx.a[1], 0.0f}};
    TU_OK(clf_llama_ctx_set_lora(c, 0, use, 2));
    clf_llama_rewind(c, 0);
    TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, pc->n_prompt, 0, out));
    assert_memory_equal(base, out, (size_t)nv * sizeof *out);
    use[0].scale = 1.0f;
    TU_OK(clf_llama_ctx_set_lora(c, 0, use, 1));
    clf_llama_rewind(c, 0);
    TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, pc->n_prompt, 0, out));
    double d = 0;
    for (int i = 0; i < nv; i++) d = fmax(d, fabs(out[i] - base[i]));
    print_message("  adapter a at scale 1 moves the logits by up to %.3g\n", d);
    assert_true(d > 0.01);
    free(base);
    free(out);
    clf_llama_ctx_free(c);
    close_all(&fx);
}

/* Four sequences in one batch (alt 0: adapter a; b at 0.5; none; a and b
 * mixed; alt 1: a, b, a, b, the decode rows of one adapter apart, as the
 * server's streams are: one launch over listed rows): prompts then decode
 * steps together, against each sequence alone. The decode rows are
 * computed as alone (cl/lora.cl, clf_matmul_rowwise): bit for bit; the
 * prompts' rows go through products over all of them: to rounding. */
static void check_mixed(int alt) {
    fixture fx;
    open_all(&fx);
    enum { NS = 4, STEPS = 6 };
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(fx.m, 128, 128, NS, CLF_F32, &c));
    const int nv = fx.m->hp.n_vocab;
    const clf_lora_use uses[2][NS][2] = {
        {{{fx.a[0], 1.0f}}, {{fx.a[1], 0.5f}}, {{0}}, {{fx.a[0], 0.75f}, {fx.a[1], -1.25f}}},
        {{{fx.a[0], 1.0f}}, {{fx.a[1], 0.5f}}, {{fx.a[0], 1.0f}}, {{fx.a[1], 0.5f}}}};
    const int n_uses[2][NS] = {{1, 1, 0, 2}, {1, 1, 1, 1}};
    const int *n_use = n_uses[alt];
    float *batch = malloc((size_t)NS * (STEPS + 1) * nv * sizeof *batch);
    float *alone = malloc((size_t)(STEPS + 1) * nv * sizeof *alone);
    const lcase *pc[NS] = {&cfgs[0].cases[0], &cfgs[0].cases[1], &cfgs[1].cases[0], &cfgs[1].cases[1]};
    for (int s = 0; s < NS; s++) TU_OK(clf_llama_ctx_set_lora(c, s, uses[alt][s], n_use[s]));
    /* together: the prompts in one batch, then STEPS decode steps of llama.cpp's greedy tokens */
    for (int step = 0; step <= STEPS; step++) {
        clf_llama_seq_batch b[NS];
        for (int s = 0; s < NS; s++)
            b[s] = (clf_llama_seq_batch){.seq = s,
                                         .tokens = step ? (const int32_t *)&pc[s]->gen[step - 1]
                                                        : (const int32_t *)pc[s]->prompt,
                                         .n = step ? 1 : pc[s]->n_prompt,
                                         .logits = batch + ((size_t)s * (STEPS + 1) + step) * nv};
        TU_OK(clf_llama_eval_seqs(c, b, NS));
    }
    /* alone: each sequence from empty, the others idle */
    double worst_prompt = 0;
    for (int s = 0; s < NS; s++) {
        clf_llama_seq_rewind(c, s, 0);
        for (int step = 0; step <= STEPS; step++) {
            clf_llama_seq_batch b = {.seq = s,
                                     .tokens = step ? (const int32_t *)&pc[s]->gen[step - 1]
                                                    : (const int32_t *)pc[s]->prompt,
                                     .n = step ? 1 : pc[s]->n_prompt,
                                     .logits = alone + (size_t)step * nv};
            TU_OK(clf_llama_eval_seqs(c, &b, 1));
        }
        const float *tog = batch + (size_t)s * (STEPS + 1) * nv;
        for (int i = 0; i < nv; i++) worst_prompt = fmax(worst_prompt, fabs(tog[i] - alone[i]));
        for (int step = 1; step <= STEPS; step++) {
            double d = 0;
            for (int i = 0; i < nv; i++) d = fmax(d, fabs(tog[(size_t)step * nv + i] - alone[(size_t)step * nv + i]));
            if (d > 0) fail_msg("sequence %d step %d: batched and alone differ by %.3g", s, step, d);
        }
    }
    print_message("  prompts' logits batched vs alone: max |diff| %.3g; decode steps: equal\n", worst_prompt);
    assert_true(worst_prompt <= 1e-5);
    free(batch);
    free(alone);
    clf_llama_ctx_free(c);
    close_all(&fx);
}

static void test_mixed_batch(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=gpu ops=gpu"}; /* ops=gpu: cl/lora.cl in groups of 64 */
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        print_message(" %s variant\n", clf_matmul_variant(tu_runtime()));
        check_mixed(0);
        check_mixed(1);
    }
    tu_tune(NULL);
}

/* The tiny Llama in Q8_0, whose decode rows take int8 activations on the
 * cpu variant and whose gated unit is one fused GEMV there (which an
 * adapter on gate or up splits in two): each sequence of a mixed batch as
 * alone, and every configuration's logits, prompt then decode steps of
 * llama.cpp's tokens, against the same model dequantized to F32 by
 * `clinfer quantize` with the same adapters (the adapters' products do not
 * depend on the base's type; llama.cpp is not the reference here: its CPU
 * build crashes applying an adapter to a Q8_0 base on AMX machines).
 * The decode GEMVs round activations to int8 on both variants here, which
 * an adapter's larger activations make show more: measured max |diff| over
 * every step 0.025 (cpu), 0.0128 (gpu); a wrong adapter path moves the
 * logits by ~0.4 (test_scale_zero). */
static void test_quantized(void **state) {
    (void)state;
    char args[300], deq[128], cmd[600];
    assert_true(!strncmp(model_args, "F32 ", 4));
    snprintf(args, sizeof args, "Q8_0 %s", model_args + 4);
    write_model("base.gguf", args, base_path, sizeof base_path);
    const char *bin = getenv("CLINFER_BIN");
    if (!bin) fail_msg("CLINFER_BIN is not set (ctest sets it)");
    snprintf(deq, sizeof deq, "%s/deq.gguf", dir);
    snprintf(cmd, sizeof cmd, "'%s' quantize --allow-requantize '%s' '%s' F32 >/dev/null 2>&1", bin, base_path, deq);
    assert_int_equal(system(cmd), 0);
    static const char *const tunes[] = {NULL, "matmul=gpu ops=gpu"}; /* ops=gpu: cl/lora.cl in groups of 64 */
    static const double tol[] = {0.06, 0.04};
    for (int t = 0; t < 2; t++) {
        tu_tune(tunes[t]);
        print_message(" Q8_0, %s variant\n", clf_matmul_variant(tu_runtime()));
        check_mixed(0);
        check_mixed(1);
        /* the same steps on the Q8_0 model and its F32 form */
        fixture fx[2];
        char q8[128];
        snprintf(q8, sizeof q8, "%s", base_path);
        open_all(&fx[0]);
        snprintf(base_path, sizeof base_path, "%s", deq);
        open_all(&fx[1]);
        snprintf(base_path, sizeof base_path, "%s", q8);
        const int nv = fx[0].m->hp.n_vocab;
        float *lg[2] = {malloc((size_t)nv * sizeof(float)), malloc((size_t)nv * sizeof(float))};
        clf_llama_ctx *c[2];
        for (int m = 0; m < 2; m++) TU_OK(clf_llama_ctx_create(fx[m].m, 256, 64, CLF_F32, &c[m]));
        double worst = 0;
        for (int k = 0; k < n_cfg; k++) {
            const lcase *pc = &cfgs[k].cases[0];
            for (int m = 0; m < 2; m++) {
                clf_lora_use use[4];
                TU_OK(clf_llama_ctx_set_lora(c[m], 0, use, cfg_use(&fx[m], &cfgs[k], use)));
                clf_llama_rewind(c[m], 0);
            }
            for (int step = 0; step <= pc->n_gen; step++) {
                for (int m = 0; m < 2; m++)
                    TU_OK(step ? clf_llama_eval(c[m], &pc->gen[step - 1], 1, 0, lg[m])
                               : clf_llama_eval(c[m], (const int32_t *)pc->prompt, pc->n_prompt, 0, lg[m]));
                for (int i = 0; i < nv; i++) worst = fmax(worst, fabs(lg[0][i] - lg[1][i]));
            }
        }
        print_message("  Q8_0 against its F32 form, every configuration: max |diff| %.3g (bound %.3g)\n", worst,
                      tol[t]);
        assert_true(worst <= tol[t]);
        for (int m = 0; m < 2; m++) {
            clf_llama_ctx_free(c[m]);
            free(lg[m]);
            close_all(&fx[m]);
        }
    }
    tu_tune(NULL);
    unlink(deq);
    use_data(DATA);
}

/* clf_lora_load of `adapter` against the model of tiny_gguf `args`: the error expected and its words. */
static void expect_refused(const char *args, const char *adapter, const char *words) {
    char path[128];
    write_model("other.gguf", args, path, sizeof path);
    clf_gguf *g, *ga;
    clf_llama *m;
    clf_lora *a = NULL;
    TU_OK(clf_gguf_open(path, &g));
    TU_OK(clf_llama_load(tu_runtime(), g, &m));
    TU_OK(clf_gguf_open(adapter, &ga));
    clf_status st = clf_lora_load(m, ga, &a);
    print_message("  %s on [%s]: %s\n", adapter, args, clf_last_error());
    assert_int_not_equal(st, CLF_OK);
    assert_null(a);
    assert_non_null(strstr(clf_last_error(), words));
    clf_gguf_close(ga);
    clf_llama_free(m);
    clf_gguf_close(g);
    unlink(path);
}

static void test_bad_files(void **state) {
    (void)state;
    /* another architecture, another width, fewer layers, a model rather than an adapter */
    expect_refused("F32 --arch qwen2 --layers 2 --seed 12", "tests/data/lora_tiny_a.gguf", "architecture");
    expect_refused("F32 --layers 2 --embd 64 --rope-freqs --untied --seed 11", "tests/data/lora_tiny_a.gguf",
                   "shape");
    expect_refused("F32 --layers 1 --rope-freqs --untied --seed 11", "tests/data/lora_tiny_a.gguf", "1 layers");
    expect_refused(model_args, base_path, "general.type");
    /* damaged copies: bytes flipped anywhere in the file, refused or loaded (then its products run), never a crash */
    FILE *f = fopen("tests/data/lora_tiny_b.gguf", "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16], bad[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 1000 && n < sizeof buf);
    fixture fx;
    open_all(&fx);
    uint64_t seed = tu_seed() ^ 0x10a4;
    int refused = 0;
    for (int it = 0; it < 200; it++) {
        memcpy(bad, buf, n);
        /* the header and tensor infos most of the time, the data the rest */
        const size_t span = it % 4 ? 1024 : n;
        for (int k = 0; k < 1 + (int)(tu_next(&seed) % 4); k++) bad[tu_next(&seed) % span] ^= (unsigned char)(1 + tu_next(&seed) % 255);
        clf_gguf *g;
        if (clf_gguf_open_memory(bad, n, &g) != CLF_OK) {
            refused++;
            continue;
        }
        clf_lora *a = NULL;
        if (clf_lora_load(fx.m, g, &a) != CLF_OK) refused++;
        assert_true(a == NULL || a->n_pairs > 0);
        clf_lora_free(a);
        clf_gguf_close(g);
    }
    print_message("  200 damaged copies: %d refused, the rest loaded\n", refused);
    assert_true(refused > 0);
    close_all(&fx);
}

/* The public API: adapters loaded on a model, a session of two sequences,
 * one with adapter a at llama.cpp's first configuration, one with none,
 * decoded in one batch: the first's logits are llama.cpp's, the second's
 * the base's (the internal context's, bit for bit); and the refusals. */
static void test_api(void **state) {
    (void)state;
    clinfer_model *m;
    assert_int_equal(clinfer_model_load(base_path, NULL, NULL, &m), CLINFER_OK);
    clinfer_lora *a, *bad = NULL;
    assert_int_equal(clinfer_lora_load(m, "tests/data/lora_tiny_a.gguf", &a), CLINFER_OK);
    assert_int_not_equal(clinfer_lora_load(m, base_path, &bad), CLINFER_OK);
    assert_null(bad);
    assert_non_null(strstr(clinfer_last_error(), "general.type"));
    assert_int_equal(clinfer_model_lora_count(m), 1);
    assert_ptr_equal(clinfer_model_lora(m, 0), a);
    assert_string_equal(clinfer_lora_path(a), "tests/data/lora_tiny_a.gguf");
    assert_true(clinfer_lora_scale(a) == 1.0f);
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 128;
    sp.n_seq = 2;
    clinfer_session *s;
    assert_int_equal(clinfer_session_create(m, &sp, &s), CLINFER_OK);
    const float scale = cfgs[0].scale[0];
    assert_int_equal(clinfer_session_set_lora(s, 0, &a, &scale, 1), CLINFER_OK);
    assert_int_not_equal(clinfer_session_set_lora(s, 2, &a, &scale, 1), CLINFER_OK);
    const lcase *pc = &cfgs[0].cases[0];
    const int n = pc->n_prompt;
    int32_t tok[128];
    int32_t pos[128], seq[128];
    for (int i = 0; i < 2 * n; i++) tok[i] = pc->prompt[i % n], pos[i] = i % n, seq[i] = i / n;
    /* logits NULL: each sequence's last token's */
    clinfer_batch b = {.n_tokens = 2 * n, .token = tok, .seq_id = seq, .pos = pos};
    assert_int_equal(clinfer_decode(s, &b), CLINFER_OK);
    const float *l0 = clinfer_batch_logits(s, n - 1), *l1 = clinfer_batch_logits(s, 2 * n - 1);
    assert_non_null(l0);
    assert_non_null(l1);
    double worst = 0;
    for (int j = 0; j < TOPN; j++) worst = fmax(worst, fabs(l0[pc->top_id[0][j]] - pc->top[0][j]));
    print_message("  sequence 0 (adapter a) against llama.cpp: max |diff| %.3g\n", worst);
    assert_true(worst <= 5e-5);
    /* the base's logits from the internal API, on the same device */
    fixture fx;
    open_all(&fx);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(fx.m, 128, 128, CLF_F32, &c));
    const int nv = fx.m->hp.n_vocab;
    float *base = malloc((size_t)nv * sizeof *base);
    TU_OK(clf_llama_eval(c, (const int32_t *)pc->prompt, n, 0, base));
    double d = 0;
    for (int i = 0; i < nv; i++) d = fmax(d, fabs(l1[i] - base[i]));
    print_message("  sequence 1 (none) against the base: max |diff| %.3g\n", d);
    assert_true(d <= 1e-5);
    free(base);
    clf_llama_ctx_free(c);
    close_all(&fx);
    clinfer_session_free(s);
    clinfer_model_free(m);
}

/* clf_lora_rows (cl/lora.cl) directly, on shapes the models do not reach:
 * rows of A and of the output that are no whole vectors (their tails), an
 * output split over several groups, F16 and F32, both work-group shapes:
 * against a host reference, and each row alone against the batch bit for bit. */
static void check_rows(clf_type type) {
    clf_runtime *rt = tu_runtime();
    enum { W = 24, IN = 37, NOUT = 301, NR = 3, YW = 320, COL0 = 7 };
    const float s = 0.75f;
    const int all[2] = {0, NOUT}; /* one part: B dense */
    const size_t es = type == CLF_F16 ? 2 : 4;
    float *a = malloc(W * IN * sizeof *a), *bt = malloc(W * NOUT * sizeof *bt), *x = malloc(NR * IN * sizeof *x);
    float *y0 = malloc(NR * YW * sizeof *y0), *y = malloc(NR * YW * sizeof *y), *y1 = malloc(YW * sizeof *y1);
    enum { NP = (NOUT + 15) / 16 * 16 }; /* B's outputs in whole panels of 16 (ops.h) */
    float *bp = calloc(W * NP, sizeof *bp);
    unsigned char *ad = malloc(W * IN * es), *bd = malloc(W * NP * es);
    /* values exact in F16 (small multiples of 1/64), so the reference sees what the device reads */
    for (int i = 0; i < W * IN; i++) a[i] = (float)((i * 37 % 29) - 14) / 64.0f;
    for (int i = 0; i < W * NOUT; i++) bt[i] = (float)((i * 53 % 31) - 15) / 64.0f; /* Bᵀ [W × NOUT] */
    for (int j = 0; j < W; j++)
        for (int o = 0; o < NOUT; o++) bp[(o / 16 * W + j) * 16 + o % 16] = bt[j * NOUT + o];
    for (int i = 0; i < NR * IN; i++) x[i] = (float)((i * 17 % 23) - 11) / 8.0f;
    for (int i = 0; i < NR * YW; i++) y0[i] = (float)(i % 13) - 6.0f;
    if (type == CLF_F16) {
        clf_type_get(CLF_F16)->from_float(a, ad, W * IN);
        clf_type_get(CLF_F16)->from_float(bp, bd, W * NP);
    } else {
        memcpy(ad, a, W * IN * es);
        memcpy(bd, bp, W * NP * es);
    }
    clf_tensor ta, tb, tx, ty;
    TU_OK(clf_tensor_alloc(rt, type, IN, W, &ta));
    TU_OK(clf_tensor_upload(rt, &ta, ad, W * IN * es));
    TU_OK(clf_tensor_alloc(rt, type, NP, W, &tb));
    TU_OK(clf_tensor_upload(rt, &tb, bd, W * NP * es));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, IN, NR, &tx));
    TU_OK(clf_tensor_upload(rt, &tx, x, NR * IN * sizeof *x));
    TU_OK(clf_tensor_alloc(rt, CLF_F32, YW, NR, &ty));
    TU_OK(clf_tensor_upload(rt, &ty, y0, NR * YW * sizeof *y0));
    TU_OK(clf_lora_rows(rt, type, ta.mem, tb.mem, W, NOUT, 1, all, &tx, &ty, COL0, s, NULL, 0, 0));
    TU_OK(clf_tensor_download(rt, &ty, y, NR * YW * sizeof *y));
    double worst = 0;
    for (int r = 0; r < NR; r++) {
        double t[W];
        for (int j = 0; j < W; j++) {
            t[j] = 0;
            for (int k = 0; k < IN; k++) t[j] += (double)a[j * IN + k] * x[r * IN + k];
            t[j] *= s;
        }
        for (int i = 0; i < YW; i++) {
            double want = y0[r * YW + i];
            if (i >= COL0 && i < COL0 + NOUT)
                for (int j = 0; j < W; j++) want += (double)bt[j * NOUT + i - COL0] * t[j];
            worst = fmax(worst, fabs(want - y[r * YW + i]) / (1.0 + fabs(want)));
        }
    }
    print_message("  %s: against the host, max relative |diff| %.3g\n", type == CLF_F16 ? "F16" : "F32", worst);
    assert_true(worst <= 1e-5);
    /* row 1 alone, into a fresh output: the batch's row bit for bit */
    clf_tensor x1 = clf_tensor_rows(&tx, 1, 1), ty1;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, YW, 1, &ty1));
    TU_OK(clf_tensor_upload(rt, &ty1, y0 + YW, YW * sizeof *y0));
    TU_OK(clf_lora_rows(rt, type, ta.mem, tb.mem, W, NOUT, 1, all, &x1, &ty1, COL0, s, NULL, 0, 0));
    TU_OK(clf_tensor_download(rt, &ty1, y1, YW * sizeof *y1));
    assert_memory_equal(y1, y + YW, YW * sizeof *y1);
    /* rows 2 and 0 by index (from the list's second entry), into a fresh output: the batch's rows bit for
     * bit, row 1 untouched */
    const int32_t idx[3] = {1, 2, 0};
    float *y2 = malloc(NR * YW * sizeof *y2);
    clf_tensor ti;
    TU_OK(clf_tensor_alloc(rt, CLF_F32, 3, 1, &ti));
    TU_OK(clf_tensor_upload(rt, &ti, idx, sizeof idx));
    TU_OK(clf_tensor_upload(rt, &ty, y0, NR * YW * sizeof *y0));
    TU_OK(clf_lora_rows(rt, type, ta.mem, tb.mem, W, NOUT, 1, all, &tx, &ty, COL0, s, ti.mem, 1, 2));
    TU_OK(clf_tensor_download(rt, &ty, y2, NR * YW * sizeof *y2));
    assert_memory_equal(y2, y, YW * sizeof *y2);
    assert_memory_equal(y2 + YW, y0 + YW, YW * sizeof *y2);
    assert_memory_equal(y2 + 2 * YW, y + 2 * YW, YW * sizeof *y2);
    clf_tensor_free(&ti);
    free(y2);
    /* shapes it refuses */
    assert_int_equal(clf_lora_rows(rt, type, ta.mem, tb.mem, W, NOUT, 1, all, &tx, &ty, YW - NOUT + 1, s, NULL, 0, 0),
                     CLF_ERR_ARG);
    assert_int_equal(clf_lora_rows(rt, type, ta.mem, tb.mem, CLF_LORA_ROWS_MAX_WIDTH + 1, NOUT, 1, all, &tx, &ty, 0, s, NULL, 0, 0),
                     CLF_ERR_ARG);
    clf_tensor_free(&ta), clf_tensor_free(&tb), clf_tensor_free(&tx), clf_tensor_free(&ty), clf_tensor_free(&ty1);
    free(a), free(bt), free(bp), free(x), free(y0), free(y), free(y1), free(ad), free(bd);
}

static void test_rows_kernel(void **state) {
    (void)state;
    static const char *const tunes[] = {NULL, "matmul=cpu-portable", "matmul=gpu ops=gpu"};
    for (int t = 0; t < 3; t++) {
        tu_tune(tunes[t]);
        print_message(" %s variant, %s ops\n", clf_matmul_variant(tu_runtime()), t == 2 ? "gpu" : "default");
        check_rows(CLF_F16);
        check_rows(CLF_F32);
    }
    tu_tune(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_peer), cmocka_unit_test(test_scale_zero),
                                       cmocka_unit_test(test_mixed_batch), cmocka_unit_test(test_quantized),
                                       cmocka_unit_test(test_bad_files), cmocka_unit_test(test_rows_kernel),
                                       cmocka_unit_test(test_api)};
    int rc = TU_RUN_GROUP(tests, setup, teardown);
    tu_runtime_free();
    return rc;
}

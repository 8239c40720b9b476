/* clinfer tune: measures this device's candidate kernel variants and tile
 * sizes on a model's own shapes and keeps the winners in the cache folder,
 * where every later run on this device and driver reads them
 * (host/cl/tuning.h).
 *
 * Method: one pass of coordinate descent from the table's row. For each
 * parameter in turn, each candidate value runs against the current best in
 * interleaved rounds; a round times a decode step at position FILL (the
 * GEMVs, decode attention over FILL keys) and a prefill of PP tokens ending
 * at FILL (the GEMMs, tiled attention over a cache); the candidate wins when the median over rounds of
 * its per-round time ratio on the metric that parameter drives is below
 * 1 - MARGIN, so noise keeps the table's choice. A candidate whose kernels
 * do not build on the device (the int8 GEMVs without AVX-512BW) is skipped.
 * Kernel families (matmul=) change the weights' layout, so the candidate
 * holds a second copy of the model while it is compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "gguf.h"
#include "llama.h"
#include "model_path.h"
#include "options.h"
#include "runtime.h"
#include "tune.h"

static const char *USAGE = "clinfer tune [-m MODEL] [--device SEL] [--rounds N] [--dry-run]";

enum { FILL = 512, PP = 128, DECODE_STEPS = 8 };
#define MARGIN 0.03

/* What a parameter's time shows in: decode, prefill, or both (geometric mean). */
enum { TG, PPM, BOTH };

typedef struct candidate_set {
    const char *param;
    int metric;
    int family; /* -1: any; else only when matmul is this family */
    const char *values[6];
} candidate_set;

static const candidate_set sets[] = {
    {"matmul", BOTH, -1, {"cpu", "cpu-portable", "gpu"}},
    {"int8_gemv", TG, CLF_MATMUL_CPU, {"0", "1"}},
    {"int8_ppw", TG, CLF_MATMUL_CPU, {"1", "2", "4", "8"}},
    {"int8_ppw_q8", TG, CLF_MATMUL_CPU, {"1", "2", "4"}},
    {"int8_vnni", BOTH, CLF_MATMUL_CPU, {"0", "1"}},
    {"int8_gemm", PPM, CLF_MATMUL_CPU, {"0", "2", "16", "64"}},
    {"gemm_tm", PPM, CLF_MATMUL_CPU, {"4", "8", "12"}},
    {"gemm_mg", PPM, CLF_MATMUL_CPU, {"4", "8", "16", "32"}},
    {"gemm_tm", PPM, CLF_MATMUL_CPU_PORTABLE, {"4", "8", "12"}},
    {"gemm_mg", PPM, CLF_MATMUL_CPU_PORTABLE, {"4", "8", "16", "32"}},
    {"gpu_rpw", TG, CLF_MATMUL_GPU, {"1", "2", "4", "8", "16"}},
    {"gpu_skinny_max", PPM, CLF_MATMUL_GPU, {"4", "8", "16", "32"}},
    {"gpu_tile_max", PPM, CLF_MATMUL_GPU, {"32", "64", "128"}},
    {"attn", BOTH, -1, {"cpu", "gpu"}},
    {"attn_split_keys", TG, -1, {"64", "128", "256", "512"}},
    {"attn_split_cu", TG, -1, {"2", "4", "8", "16"}},
    {"ops", BOTH, -1, {"cpu", "gpu"}},
};

typedef struct instance {
    clf_llama *m;
    clf_llama_ctx *c;
} instance;

typedef struct tuner {
    clf_runtime *rt;
    const clf_gguf *g;
    int rounds;
    int32_t toks[FILL + DECODE_STEPS];
    float *logits;
    instance best;
    clf_tuning best_tune;
} tuner;

static void instance_free(instance *in) {
    clf_llama_ctx_free(in->c);
    clf_llama_free(in->m);
    memset(in, 0, sizeof *in);
}

/* The model uploaded under tuning t, its cache filled to FILL tokens. */
static clf_status instance_open(tuner *tu, const clf_tuning *t, instance *in) {
    memset(in, 0, sizeof *in);
    tu->rt->tune = *t;
    clf_status st = clf_llama_load(tu->rt, tu->g, &in->m);
    if (st == CLF_OK) st = clf_llama_ctx_create(in->m, FILL + 1, PP, CLF_F32, &in->c);
    if (st == CLF_OK) st = clf_llama_eval(in->c, tu->toks, FILL, 0, tu->logits);
    if (st != CLF_OK) instance_free(in);
    return st;
}

/* Seconds of one decode step at FILL and of one prefill of PP tokens. */
static clf_status measure(tuner *tu, instance *in, const clf_tuning *t, double *tg, double *pp) {
    tu->rt->tune = *t;
    double t0 = clf_now_s();
    for (int k = 0; k < DECODE_STEPS; k++) {
        clf_llama_rewind(in->c, FILL);
        CLF_TRY(clf_llama_eval(in->c, tu->toks + FILL + k, 1, 0, tu->logits));
    }
    *tg = (clf_now_s() - t0) / DECODE_STEPS;
    /* the last PP tokens of the fill again: the cache ends at FILL after it */
    clf_llama_rewind(in->c, FILL - PP);
    t0 = clf_now_s();
    CLF_TRY(clf_llama_eval(in->c, tu->toks + FILL - PP, PP, 0, tu->logits));
    *pp = clf_now_s() - t0;
    return CLF_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Interleaved rounds of best and candidate: median per-round ratios
 * (candidate / best) of decode and prefill time. */
static clf_status compare(tuner *tu, instance *cand_in, const clf_tuning *cand, double *r_tg, double *r_pp) {
    double rtg[32], rpp[32], a_tg, a_pp, b_tg, b_pp;
    /* warm-up: builds the candidate's kernels (a failure is the device's no) */
    CLF_TRY(measure(tu, cand_in, cand, &b_tg, &b_pp));
    CLF_TRY(measure(tu, &tu->best, &tu->best_tune, &a_tg, &a_pp));
    for (int r = 0; r < tu->rounds; r++) {
        CLF_TRY(measure(tu, &tu->best, &tu->best_tune, &a_tg, &a_pp));
        CLF_TRY(measure(tu, cand_in, cand, &b_tg, &b_pp));
        rtg[r] = b_tg / a_tg;
        rpp[r] = b_pp / a_pp;
    }
    *r_tg = median(rtg, tu->rounds);
    *r_pp = median(rpp, tu->rounds);
    return CLF_OK;
}

static double score(int metric, double r_tg, double r_pp) {
    return metric == TG ? r_tg : metric == PPM ? r_pp : sqrt(r_tg * r_pp);
}

/* Tries every value of one parameter against the current best. */
static clf_status tune_param(tuner *tu, const candidate_set *cs) {
    char cur[32];
    for (int i = 0; clf_tuning_param_name(i); i++)
        if (!strcmp(clf_tuning_param_name(i), cs->param)) clf_tuning_value_text(&tu->best_tune, i, cur, sizeof cur);
    for (int v = 0; v < 6 && cs->values[v]; v++) {
        if (!strcmp(cs->values[v], cur)) continue;
        char assign[64];
        snprintf(assign, sizeof assign, "%s=%s", cs->param, cs->values[v]);
        clf_tuning cand = tu->best_tune;
        CLF_TRY(clf_tuning_override(&tu->rt->dev, &cand, assign));
        if (!memcmp(&cand, &tu->best_tune, offsetof(clf_tuning, row))) continue; /* the device cannot: same as best */
        const int relayout = cand.matmul != tu->best_tune.matmul;
        instance other, *in = &tu->best;
        clf_status st = CLF_OK;
        if (relayout) {
            st = instance_open(tu, &cand, &other);
            in = &other;
        }
        double r_tg = 0, r_pp = 0;
        if (st == CLF_OK) st = compare(tu, in, &cand, &r_tg, &r_pp);
        if (st == CLF_ERR_CL) { /* does not build or run here: not a candidate */
            printf("  %-22s %-14s skipped: %.80s\n", assign, "", clf_last_error());
            if (relayout) instance_free(&other);
            tu->rt->tune = tu->best_tune;
            continue;
        }
        if (st != CLF_OK) {
            if (relayout) instance_free(&other);
            return st;
        }
        const double s = score(cs->metric, r_tg, r_pp);
        const int wins = s < 1.0 - MARGIN;
        printf("  %-22s tg x%.3f  pp x%.3f  %s\n", assign, 1.0 / r_tg, 1.0 / r_pp,
               wins ? "faster: kept" : "not faster");
        fflush(stdout);
        if (wins) {
            snprintf(cur, sizeof cur, "%s", cs->values[v]);
            tu->best_tune = cand;
            if (relayout) {
                instance_free(&tu->best);
                tu->best = other;
            }
        } else if (relayout) {
            instance_free(&other);
        }
        tu->rt->tune = tu->best_tune;
    }
    return CLF_OK;
}

static clf_status tune(const char *model, const char *device, int rounds, int dry_run) {
    char path[1024];
    CLF_TRY(clf_model_path(model, path, sizeof path));
    clf_gguf *g;
    CLF_TRY(clf_gguf_open(path, &g));
    tuner tu;
    memset(&tu, 0, sizeof tu);
    tu.g = g;
    tu.rounds = rounds;
    clf_status st = clf_runtime_create(device, &tu.rt);
    if (st != CLF_OK) {
        clf_gguf_close(g);
        return st;
    }
    clf_llama_hparams hp;
    st = clf_llama_hparams_read(g, &hp);
    if (st == CLF_OK && !(tu.logits = malloc((size_t)hp.n_vocab * sizeof *tu.logits)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    uint64_t s = clf_rng_init(1, 0); /* any tokens: only their shapes matter */
    for (int i = 0; st == CLF_OK && i < FILL + DECODE_STEPS; i++)
        tu.toks[i] = (int32_t)(clf_rng_next(&s) % (uint64_t)hp.n_vocab);
    const clf_tuning start = tu.rt->tune;
    tu.best_tune = start;
    char text[1024];
    if (st == CLF_OK) {
        clf_tuning_format(&start, text, sizeof text);
        printf("device %s (%s), table row %s%s\n  start: %s\n", tu.rt->dev.name, tu.rt->dev.driver, start.row,
               start.tuned ? ", previously tuned" : "", text);
        printf("model %s: decode at %d, prefill of %d; %d interleaved rounds, a win is > %.0f%% faster\n", path, FILL,
               PP, rounds, MARGIN * 100);
        fflush(stdout);
        st = instance_open(&tu, &start, &tu.best);
    }
    for (size_t i = 0; st == CLF_OK && i < sizeof sets / sizeof sets[0]; i++)
        if (sets[i].family < 0 || sets[i].family == tu.best_tune.matmul) st = tune_param(&tu, &sets[i]);
    if (st == CLF_OK) {
        clf_tuning_format(&tu.best_tune, text, sizeof text);
        printf("  result: %s\n", text);
        if (!dry_run) {
            st = clf_tuning_save(&tu.rt->dev, tu.rt->cache_dir, &tu.best_tune);
            clf_tuning_path(&tu.rt->dev, tu.rt->cache_dir, path, sizeof path);
            if (st == CLF_OK) printf("saved %s: later runs on this device and driver use it\n", path);
        }
    }
    instance_free(&tu.best);
    free(tu.logits);
    clf_runtime_free(tu.rt);
    clf_gguf_close(g);
    return st;
}

int clf_tune_main(int argc, char **argv) {
    const char *model = NULL, *device = NULL;
    int rounds = 5, dry_run = 0;
    const cli_option opts[] = {CLI_OPT_STR("-m", &model, .arg = "MODEL", .help = "a GGUF file or a catalogue name (default: the cache's default)"), CLI_OPT_STR("--device", &device, .arg = "SEL", .help = "the OpenCL device (P:D or a name's part)"),
                               CLI_OPT_INT("--rounds", &rounds, 1, 31, .help = "measurements per candidate"),
                               CLI_OPT_FLAG("--dry-run", &dry_run, .help = "measure and print, but do not save the winners"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    return cli_error(tune(model, device, rounds, dry_run));
}

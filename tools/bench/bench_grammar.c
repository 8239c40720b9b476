/* `clinfer bench --json-schema F` (or --grammar-file F): what a grammar
 * costs generation. The same sampled generation (temperature 1, the same
 * seeds) with and without the grammar, rounds interleaved, tg tokens/s of
 * each and the median of the per-round ratios; then where the grammar's
 * time goes: masks computed (a walk of the vocabulary's trie for a state
 * seen first) and found kept, the walk's ms each, and the cost per token. */
#include "bench_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "grammar_opts.h"
#include "options.h"
#include "roof.h"

static const char *USAGE =
    "clinfer bench --json-schema SCHEMA|FILE | --grammar-file FILE | --grammar GBNF [-m MODEL] [-n 128] [-r 5]\n"
    "              [-p PROMPT] [--device SEL] [--json]\n"
    "  tg of -n tokens sampled at temperature 1 with and without the grammar, -r rounds interleaved\n"
    "  (a reply the grammar ends early is followed by another until -n tokens)";

typedef struct run {
    double seconds;
    int tokens, replies, whole; /* whole: replies that ended at the grammar's end */
    long top, fallback;         /* tokens drawn from the device's k best under the grammar, and those that read the row */
} run;

/* n tokens from the prompt (again after each reply that ends), sampler
 * re-made each reply: a fresh grammar state, seeds seed, seed + 1, ... */
static clinfer_status generate(clinfer_session *s, const clinfer_model *m, clinfer_grammar *g, const int32_t *prompt,
                               int n_prompt, int n, uint64_t seed, run *r, long *computed, long *hits, double *walk_s) {
    *r = (run){0};
    clinfer_status st = CLINFER_OK;
    while (st == CLINFER_OK && r->tokens < n) {
        clinfer_sampler_params sp = clinfer_sampler_default_params();
        sp.temperature = 1.0f;
        sp.seed = seed + (uint64_t)r->replies;
        clinfer_sampler *smp = NULL;
        st = clinfer_sampler_create(m, &sp, &smp);
        if (st == CLINFER_OK && g) st = clinfer_sampler_set_grammar(smp, g);
        if (st == CLINFER_OK) st = clinfer_session_rewind(s, 0);
        clinfer_generate_params gp = clinfer_generate_default_params();
        gp.sampler = smp;
        gp.max_tokens = n - r->tokens;
        clinfer_generate_result res = {.size = sizeof res};
        if (st == CLINFER_OK) st = clinfer_generate(s, prompt, n_prompt, &gp, &res);
        if (st == CLINFER_OK) {
            r->seconds += res.generate_seconds;
            r->tokens += res.n_generated > 0 ? res.n_generated : 1;
            r->replies++;
            r->whole += res.stop == CLINFER_STOP_EOG;
        }
        if (g) api_grammar_stats(smp, computed, hits, walk_s);
        long top = 0, fallback = 0;
        api_sampler_top_stats(smp, &top, &fallback);
        r->top += top, r->fallback += fallback;
        clinfer_sampler_free(smp);
    }
    return st;
}

int clf_bench_grammar_main(int argc, char **argv) {
    const char *model = NULL, *device = NULL, *text = "Answer with one JSON object.";
    int n = 128, reps = 5, json = 0;
    cli_grammar_opts go = {0};
    const cli_option table[] = {CLI_OPT_STR("-m", &model, .arg = "MODEL", .help = "a GGUF file or a catalogue name (default: the cache's default)"),
                                CLI_OPT_STR("--device", &device, .arg = "SEL", .help = "the OpenCL device (P:D or a name's part)"),
                                CLI_OPT_INT("-n", &n, 1, 1 << 16, .help = "tokens sampled per round (default 128)"),
                                CLI_OPT_INT("-r", &reps, 1, 1000, .help = "rounds, interleaved (default 5)"),
                                CLI_OPT_TEXT("-p", &text, .help = "the prompt"),
                                CLI_OPT_FLAG("--json", &json, .help = "as JSON"),
                                CLI_GRAMMAR_OPTIONS(&go),
                                {0}};
    int rc = cli_parse(argc, argv, table, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clinfer_load_options lo = clinfer_load_default_options();
    clinfer_model *m = NULL;
    clinfer_session *s = NULL;
    clinfer_grammar *g = NULL;
    int32_t *prompt = NULL;
    int n_prompt = 0;
    double *ratio = calloc((size_t)reps, sizeof *ratio), *tg_free = calloc((size_t)reps, sizeof *tg_free),
           *tg_gram = calloc((size_t)reps, sizeof *tg_gram);
    clinfer_status st = ratio && tg_free && tg_gram ? CLINFER_OK : clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    char path[1024];
    if (st == CLINFER_OK) st = cli_model_fetch(model, 0, path, sizeof path); /* a catalogue name: fetched on first use */
    if (st == CLINFER_OK) st = clinfer_model_load_with(path, device, NULL, &lo, &m);
    clinfer_session_params spar = clinfer_session_default_params();
    if (st == CLINFER_OK) {
        clinfer_chat_message msg = {"user", text};
        st = clinfer_chat_tokenize(m, &msg, 1, 1, &prompt, &n_prompt);
    }
    spar.n_ctx = n_prompt + n + 8;
    if (st == CLINFER_OK) st = clinfer_session_create(m, &spar, &s);
    double t0 = clf_now_s();
    if (st == CLINFER_OK) st = cli_grammar_load(m, &go, &g);
    double compile_s = clf_now_s() - t0;
    if (st == CLINFER_OK && !g) st = clinfer_fail(CLINFER_ERR_ARG, "no grammar: --json-schema, --grammar-file or --grammar");
    long computed = 0, hits = 0;
    double walk_s = 0;
    run warm, a, b;
    int tokens_g = 0, replies_g = 0, whole_g = 0;
    long top_g = 0, fallback_g = 0;
    double sec_g = 0, sec_f = 0;
    /* a warm-up of each (kernel builds); the grammar's masks computed then
     * are counted below: the cost of a first request is part of the cost */
    if (st == CLINFER_OK) st = generate(s, m, NULL, prompt, n_prompt, 8, 1, &warm, &computed, &hits, &walk_s);
    for (int r = 0; st == CLINFER_OK && r < reps; r++) {
        uint64_t seed = 1000u * (uint64_t)r + 1;
        st = generate(s, m, NULL, prompt, n_prompt, n, seed, &a, &computed, &hits, &walk_s);
        if (st == CLINFER_OK) st = generate(s, m, g, prompt, n_prompt, n, seed, &b, &computed, &hits, &walk_s);
        if (st != CLINFER_OK) break;
        tg_free[r] = a.tokens / a.seconds;
        tg_gram[r] = b.tokens / b.seconds;
        ratio[r] = tg_gram[r] / tg_free[r];
        tokens_g += b.tokens, replies_g += b.replies, whole_g += b.whole;
        top_g += b.top, fallback_g += b.fallback;
        sec_g += b.seconds, sec_f += a.seconds * b.tokens / a.tokens;
        if (!json)
            fprintf(stderr, "round %d: tg %.1f t/s free, %.1f t/s under the grammar (%d replies, %d whole)\n", r + 1,
                    tg_free[r], tg_gram[r], b.replies, b.whole);
    }
    if (st == CLINFER_OK) {
        clinfer_model_info info = {.size = sizeof info};
        clinfer_model_get_info(m, &info);
        double per_token_ms = 1e3 * (sec_g - sec_f) / tokens_g, walk_ms = computed ? 1e3 * walk_s / computed : 0;
        double med_free = clf_bench_median(tg_free, reps), med_gram = clf_bench_median(tg_gram, reps),
               med_ratio = clf_bench_median(ratio, reps);
        if (json)
            printf("{\"model\": \"%s\", \"n_vocab\": %d, \"n\": %d, \"reps\": %d, \"tg_free\": %.3f, \"tg_grammar\": %.3f, "
                   "\"ratio\": %.4f, \"compile_ms\": %.3f, \"masks_computed\": %ld, \"masks_kept_hits\": %ld, "
                   "\"walk_ms\": %.3f, \"grammar_ms_per_token\": %.4f, \"replies\": %d, \"whole_replies\": %d, "
                   "\"from_top_k\": %ld, \"row_fallbacks\": %ld}\n",
                   info.name, info.n_vocab, n, reps, med_free, med_gram, med_ratio,
                   1e3 * compile_s, computed, hits, walk_ms, per_token_ms, replies_g, whole_g, top_g, fallback_g);
        else
            printf("%s (%d tokens): tg%d %.1f t/s free, %.1f t/s under the grammar: %.1f%% (median of %d rounds' "
                   "ratios)\n"
                   "grammar: compiled in %.1f ms; %ld masks computed (%.2f ms each: a trie walk), %ld found kept; "
                   "%.3f ms a token over free generation; %d of %d replies ended whole\n"
                   "the device's k best served %ld tokens under the grammar, the whole row %ld (too few allowed)\n",
                   info.name, info.n_vocab, n, med_free, med_gram, 100 * med_ratio, reps, 1e3 * compile_s, computed,
                   walk_ms, hits, per_token_ms, whole_g, replies_g, top_g, fallback_g);
    }
    clinfer_grammar_free(g);
    clinfer_free(prompt);
    clinfer_session_free(s);
    clinfer_model_free(m);
    free(ratio);
    free(tg_free);
    free(tg_gram);
    return cli_error(st);
}

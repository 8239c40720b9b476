/* Model, sampling and context options shared by `run`, `chat`,
 * `perplexity` and `serve`: entries for their cli_parse tables (options.h). */
#ifndef CLF_SAMPLING_OPTS_H
#define CLF_SAMPLING_OPTS_H

#include <limits.h>

#include "clinfer.h"
#include "options.h"
#include "session.h"

typedef struct cli_gen_opts {
    const char *model;
    cli_place place; /* --device, or --devices for a split */
    int n_ctx;
    clinfer_kv_type kv;
    clinfer_sampler_params sp;
} cli_gen_opts;

#define CLI_MODEL_USAGE "[-m MODEL] " CLI_PLACE_USAGE " [-t N] [--kv f32|f16|q8_0|q4_0]"
#define CLI_GEN_USAGE \
    CLI_MODEL_USAGE " [-c|--ctx N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] " \
                    "[--repeat-last-n N] [-s|--seed S]"

/* The model and where it runs (o: a cli_gen_opts *). */
#define CLI_MODEL_OPTIONS(o) \
    CLI_OPT_STR("-m", &(o)->model, .arg = "MODEL", \
                .help = "a GGUF file or a catalogue name (default: $CLINFER_MODEL, else the cache's default)"), \
    CLI_PLACE_OPTIONS(&(o)->place), \
    CLI_OPT_INT("--threads", &(o)->place.threads, 1, 4096, .alias = "-t", \
                .help = "CPU threads (PoCL's compute units; other drivers set their own)"), \
    CLI_OPT_KV("--kv", &(o)->kv, .help = "the KV cache's type: f32 (default), f16, q8_0 or q4_0")

/* CLI_MODEL_OPTIONS, the context size and the sampler's parameters. */
#define CLI_GEN_OPTIONS(o) \
    CLI_MODEL_OPTIONS(o), \
    CLI_OPT_INT("--ctx", &(o)->n_ctx, 1, 1 << 20, .alias = "-c", \
                .help = "context size in tokens (default: the model's, capped)"), \
    CLI_OPT_FLOAT("--temp", &(o)->sp.temperature, 0, INFINITY, .arg = "T", .help = "sampling temperature; 0: greedy"), \
    CLI_OPT_INT("--top-k", &(o)->sp.top_k, 0, 1 << 30, .arg = "K", .help = "keep the K likeliest tokens; 0: all"), \
    CLI_OPT_FLOAT("--top-p", &(o)->sp.top_p, 0, 1, .arg = "P", .help = "keep the likeliest tokens up to this probability mass"), \
    CLI_OPT_FLOAT("--min-p", &(o)->sp.min_p, 0, 1, .arg = "P", .help = "drop tokens below this fraction of the likeliest's"), \
    CLI_OPT_POSITIVE("--repeat-penalty", &(o)->sp.repeat_penalty, .arg = "R", .help = "divide recent tokens' logits by R; 1: off"), \
    CLI_OPT_INT("--repeat-last-n", &(o)->sp.repeat_last_n, 0, 1 << 20, \
                .help = "how many recent tokens the repeat penalty sees"), \
    CLI_OPT_U64("--seed", &(o)->sp.seed, 0, LLONG_MAX, .alias = "-s", .arg = "S", .help = "the sampler's random seed")

void cli_gen_opts_init(cli_gen_opts *o);

#endif

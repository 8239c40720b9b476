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

#define CLI_MODEL_USAGE "[-m MODEL] " CLI_PLACE_USAGE " [--kv f32|f16|q8_0|q4_0]"
#define CLI_GEN_USAGE \
    CLI_MODEL_USAGE " [--ctx N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] " \
                    "[--repeat-last-n N] [--seed S]"

/* The model and where it runs (o: a cli_gen_opts *). */
#define CLI_MODEL_OPTIONS(o) \
    CLI_OPT_STR("-m", &(o)->model), CLI_PLACE_OPTIONS(&(o)->place), CLI_OPT_KV("--kv", &(o)->kv)

/* CLI_MODEL_OPTIONS, the context size and the sampler's parameters. */
#define CLI_GEN_OPTIONS(o) \
    CLI_MODEL_OPTIONS(o), CLI_OPT_INT("--ctx", &(o)->n_ctx, 1, 1 << 20), \
    CLI_OPT_FLOAT("--temp", &(o)->sp.temperature, 0, INFINITY), \
    CLI_OPT_INT("--top-k", &(o)->sp.top_k, 0, 1 << 30), \
    CLI_OPT_FLOAT("--top-p", &(o)->sp.top_p, 0, 1), \
    CLI_OPT_FLOAT("--min-p", &(o)->sp.min_p, 0, 1), \
    CLI_OPT_POSITIVE("--repeat-penalty", &(o)->sp.repeat_penalty), \
    CLI_OPT_INT("--repeat-last-n", &(o)->sp.repeat_last_n, 0, 1 << 20), \
    CLI_OPT_U64("--seed", &(o)->sp.seed, 0, LLONG_MAX)

void cli_gen_opts_init(cli_gen_opts *o);

#endif

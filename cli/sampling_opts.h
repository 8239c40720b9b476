/* Sampling and context options shared by `run` and `chat`. */
#ifndef CLF_SAMPLING_OPTS_H
#define CLF_SAMPLING_OPTS_H

#include "quant.h"
#include "sampler.h"

typedef struct cli_gen_opts {
    const char *model, *device;
    int n_ctx;
    clf_type kv;
    clf_sampler_params sp;
} cli_gen_opts;

#define CLI_GEN_USAGE                                                                                     \
    "[-m MODEL] [--device SEL] [--ctx N] [--kv f32|f16] [--temp T] [--top-k K] [--top-p P] [--min-p P] " \
    "[--repeat-penalty R] [--repeat-last-n N] [--seed S]"

void cli_gen_opts_init(cli_gen_opts *o);
/* 1 if argv[*i] was one of the shared options (consumed), 0 if not one,
 * -1 after printing a usage error. */
int cli_gen_opt(cli_gen_opts *o, int argc, char **argv, int *i, const char *usage);

#endif

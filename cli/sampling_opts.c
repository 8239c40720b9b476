#include "sampling_opts.h"

#include <string.h>

#include "cli.h"

void cli_gen_opts_init(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv = CLF_F32;
    o->sp = clf_sampler_defaults();
}

int cli_gen_opt(cli_gen_opts *o, int argc, char **argv, int *i, const char *usage) {
    const char *v;
    long long x;
    double f;
    if (cli_opt(argc, argv, i, "-m", &v)) o->model = v;
    else if (cli_opt(argc, argv, i, "--device", &v)) o->device = v;
    else if (cli_opt(argc, argv, i, "--ctx", &v)) {
        if (cli_int(v, 1, 1 << 20, &x)) return cli_usage(usage, "bad --ctx '%s'", v), -1;
        o->n_ctx = (int)x;
    } else if (cli_opt(argc, argv, i, "--kv", &v)) {
        int t = clf_type_from_name(v);
        if (t != CLF_F32 && t != CLF_F16) return cli_usage(usage, "--kv must be f32 or f16"), -1;
        o->kv = (clf_type)t;
    } else if (cli_opt(argc, argv, i, "--temp", &v)) {
        if (cli_float(v, &f)) return cli_usage(usage, "bad --temp '%s'", v), -1;
        o->sp.temperature = (float)f;
    } else if (cli_opt(argc, argv, i, "--top-k", &v)) {
        if (cli_int(v, 0, 1 << 30, &x)) return cli_usage(usage, "bad --top-k '%s'", v), -1;
        o->sp.top_k = (int)x;
    } else if (cli_opt(argc, argv, i, "--top-p", &v)) {
        if (cli_float(v, &f)) return cli_usage(usage, "bad --top-p '%s'", v), -1;
        o->sp.top_p = (float)f;
    } else if (cli_opt(argc, argv, i, "--min-p", &v)) {
        if (cli_float(v, &f)) return cli_usage(usage, "bad --min-p '%s'", v), -1;
        o->sp.min_p = (float)f;
    } else if (cli_opt(argc, argv, i, "--repeat-penalty", &v)) {
        if (cli_float(v, &f)) return cli_usage(usage, "bad --repeat-penalty '%s'", v), -1;
        o->sp.repeat_penalty = (float)f;
    } else if (cli_opt(argc, argv, i, "--repeat-last-n", &v)) {
        if (cli_int(v, 0, 1 << 20, &x)) return cli_usage(usage, "bad --repeat-last-n '%s'", v), -1;
        o->sp.repeat_last_n = (int)x;
    } else if (cli_opt(argc, argv, i, "--seed", &v)) {
        if (cli_int(v, 0, (long long)(~0ull >> 1), &x)) return cli_usage(usage, "bad --seed '%s'", v), -1;
        o->sp.seed = (uint64_t)x;
    } else return 0;
    return 1;
}

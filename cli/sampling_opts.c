#include "sampling_opts.h"

#include <string.h>

void cli_gen_opts_init(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv = CLINFER_KV_F32;
    o->sp = clinfer_sampler_default_params();
}

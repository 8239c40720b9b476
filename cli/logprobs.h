/* `run --logprobs N`: each generated token's log-probability and its N
 * most likely alternatives (clinfer_logprobs of the raw logits, before the
 * sampler changes them), a JSON line a token:
 *   {"token": ID, "text": "PIECE", "logprob": LP, "top_logprobs": [{"token": ID, "text": "PIECE", "logprob": LP}, ...]}
 * The lines come from a sampler stage added first: its apply keeps the
 * logits it sees, and its accept (a token the sampler records after
 * drawing it from them) writes the line. */
#ifndef CLF_CLI_LOGPROBS_H
#define CLF_CLI_LOGPROBS_H

#include <stdio.h>

#include "clinfer.h"

enum { CLI_MAX_TOP_LOGPROBS = 20 };

/* Adds the stage to smp (which owns it from then on), writing to out. */
clinfer_status cli_logprobs_attach(const clinfer_model *m, clinfer_sampler *smp, int n_top, FILE *out);

#endif

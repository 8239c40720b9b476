/* What `run`, `chat`, `perplexity` and `serve` share: a model loaded where
 * the options say (one device, a split, MPI ranks) with a session on it,
 * through the public API, and the streaming of a generation to a file. */
#ifndef CLF_SESSION_H
#define CLF_SESSION_H

#include <stdio.h>

#include "clinfer.h"

/* --device, or a split over --devices (and --split, --split-ratio). */
typedef struct cli_place {
    const char *device, *devices, *split, *ratio;
    /* serve: the sequences and positions a split's plan sizes KV for */
    int n_seq, n_ctx;
} cli_place;

#define CLI_PLACE_USAGE "[--device SEL | --devices SEL,SEL,... [--split layers] [--split-ratio a,b,...]]"
#define CLI_PLACE_OPTIONS(p) \
    CLI_OPT_STR("--device", &(p)->device), CLI_OPT_STR("--devices", &(p)->devices), \
    CLI_OPT_STR("--split", &(p)->split), CLI_OPT_STR("--split-ratio", &(p)->ratio)

typedef struct cli_session {
    clinfer_model *m;
    clinfer_session *s; /* NULL when opened with n_ctx -1 */
    clinfer_model_info info;
    double warm_seconds, kernel_seconds; /* cli_session_warm's time, and the kernel builds within it */
} cli_session;

/* model: -m or NULL for the default; n_ctx 0 for the model's own (capped),
 * -1 for no session (`serve` makes its own). Installs the Ctrl-C handler
 * first: Ctrl-C while loading is CLINFER_ERR_INTERRUPTED, as in a prompt
 * (the model's abort callback). */
clinfer_status cli_session_open(const char *model, const cli_place *place, int n_ctx, clinfer_kv_type kv,
                                cli_session *s);
void cli_session_close(cli_session *s);

/* Builds the kernels each further token needs (a one-token pass, then the
 * session cleared) so that none is built, nor its compiler heard, once text
 * is printing: `run` and `chat` call it before the prompt. */
clinfer_status cli_session_warm(cli_session *s);

/* clinfer_generate streaming the text to `out` (a failed write stops it):
 * `prompt` after what the session holds, then up to max_gen tokens
 * (draft_max: its speculation by prompt lookup, 0 off); stops
 * at an end-of-generation token, at max_gen, at a full context or on
 * Ctrl-C (CLINFER_ERR_INTERRUPTED, with the signal's name). */
clinfer_status cli_generate(cli_session *s, clinfer_sampler *smp, const int32_t *prompt, int n_prompt, int max_gen,
                            int draft_max, FILE *out, clinfer_generate_result *r);

void cli_print_stats(const cli_session *s, const clinfer_generate_result *r);

#endif

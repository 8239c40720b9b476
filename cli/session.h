/* What `run`, `chat` and `perplexity` share: a model loaded on a device with
 * its tokenizer and one context, and the streaming generation loop. */
#ifndef CLF_SESSION_H
#define CLF_SESSION_H

#include <signal.h>
#include <stdio.h>

#include "llama.h"
#include "place.h"
#include "sampler.h"
#include "tokenizer.h"

typedef struct cli_session {
    clf_runtime *rt; /* the first stage's (the only one's without a split) */
    clf_gguf *g;
    clf_llama *m;     /* the first stage */
    cli_stages stages;
    clf_llama_ctx *c;
    clf_tokenizer *tok;
    float *logits; /* [n_vocab], the last evaluated token's */
    /* or only its top_k best (top_k > 0), when that is all the sampler needs */
    int top_k;
    float top_vals[CLF_TOPK_MAX];
    int32_t top_ids[CLF_TOPK_MAX];
    double load_s;
} cli_session;

/* model: -m or NULL for the default; place: --device or a split
 * (--devices); n_ctx 0 for the model's own (capped), -1 for no context
 * (`serve` makes one per slot).
 * Installs the Ctrl-C handler first: Ctrl-C while loading is
 * CLF_ERR_INTERRUPTED, as in a prompt (the runtime's abort hook). */
clf_status cli_session_open(const char *model, const cli_place *place, int n_ctx, clf_type kv, cli_session *s);
void cli_session_close(cli_session *s);

/* Set to the signal's number by SIGINT or SIGTERM (cli_catch_sigint installs
 * the handler for both and unblocks them); loading and a prompt stop between
 * steps, generation at the next token. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_sigint(void);
/* "Ctrl-C" or "SIGTERM", for the message of a stop. */
const char *cli_interrupt_name(void);

typedef struct cli_gen_stats {
    int n_prompt, n_gen;
    double prompt_s, gen_s; /* without build_s */
    double build_s;         /* building kernels on the way (a first run) */
    int32_t last; /* the last sampled token (-1 if none) */
    int stopped_eog;
} cli_gen_stats;

/* Evaluates `prompt` after what the context holds, then samples up to
 * max_gen tokens, streaming their text to `out` as it completes; stops at an
 * end-of-generation token, at max_gen, at a full context or on Ctrl-C
 * (CLF_ERR_INTERRUPTED). Sampled tokens are kept in the context except the
 * last one, which is reported in stats->last. A prompt that fails (Ctrl-C,
 * non-finite logits) leaves the context as it was and stats->n_prompt 0. */
clf_status cli_generate(cli_session *s, clf_sampler *smp, const int32_t *prompt, int n_prompt, int max_gen, FILE *out,
                        cli_gen_stats *stats);

void cli_print_stats(const cli_session *s, const cli_gen_stats *st);

#endif

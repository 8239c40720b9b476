/* clinfer run: one prompt in, generated text streamed to stdout (and only
 * the text); load time and speeds on stderr, and with --logprobs N each
 * token's logprobs as JSON lines there (cli/logprobs.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grammar_opts.h"
#include "logprobs.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer run -p PROMPT [-n N] [--chat] [--special] [--draft-max N] [--logprobs N] "
                           CLI_GRAMMAR_USAGE " " CLI_GEN_USAGE;

/* The prompt's tokens: raw text, or a user turn in the model's chat format. */
static clinfer_status prompt_tokens(const cli_session *s, const char *prompt, int chat, int special, int32_t **ids,
                                    int *n) {
    if (!chat) return clinfer_tokenize(s->m, prompt, strlen(prompt), 1, special, ids, n);
    clinfer_chat_message msg = {"user", prompt};
    return clinfer_chat_tokenize(s->m, &msg, 1, 1, ids, n); /* --special does not reach the message */
}

int cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    o.sp.temperature = 0; /* greedy unless asked: the same prompt gives the same text */
    const char *prompt = NULL;
    int n_gen = 256, chat = 0, special = 0, draft_max = 0, logprobs = -1;
    cli_grammar_opts go = {0};
    const cli_option opts[] = {CLI_GEN_OPTIONS(&o),
                               CLI_GRAMMAR_OPTIONS(&go),
                               CLI_OPT_TEXT("-p", &prompt),
                               CLI_OPT_INT("-n", &n_gen, 1, 1 << 24),
                               CLI_OPT_FLAG("--chat", &chat),
                               CLI_OPT_FLAG("--special", &special),
                               CLI_OPT_INT("--draft-max", &draft_max, 0, 1024),
                               CLI_OPT_INT("--logprobs", &logprobs, 0, CLI_MAX_TOP_LOGPROBS),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!prompt) return cli_usage(USAGE, "no prompt (-p)");
    if (draft_max && o.sp.temperature > 0) /* the library would ignore it: say so rather than run slower than asked */
        return cli_usage(USAGE, "--draft-max needs greedy sampling (--temp 0)");
    cli_session s;
    clinfer_status st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &s);
    if (st != CLINFER_OK) return cli_error(st);
    int32_t *ids = NULL;
    int n = 0;
    clinfer_sampler *smp = NULL;
    clinfer_grammar *grammar = NULL;
    clinfer_generate_result stats = {0};
    int n_ctx = clinfer_session_n_ctx(s.s);
    st = prompt_tokens(&s, prompt, chat, special, &ids, &n);
    if (st == CLINFER_OK && n == 0) st = clinfer_fail(CLINFER_ERR_ARG, "the prompt is empty");
    if (st == CLINFER_OK && n > n_ctx)
        st = clinfer_fail(CLINFER_ERR_CONTEXT, "the prompt (%d tokens) is longer than the context of %d tokens (--ctx)", n,
                      n_ctx);
    else if (st == CLINFER_OK && n + n_gen > n_ctx)
        st = clinfer_fail(CLINFER_ERR_CONTEXT, "the prompt (%d tokens) and -n %d do not fit the context of %d tokens (--ctx)", n,
                      n_gen, n_ctx);
    if (st == CLINFER_OK) st = clinfer_sampler_create(s.m, &o.sp, &smp);
    /* the logprobs' stage first: it keeps the raw logits, before the grammar's mask */
    if (st == CLINFER_OK && logprobs >= 0) st = cli_logprobs_attach(s.m, smp, logprobs, stderr);
    if (st == CLINFER_OK) st = cli_grammar_load(s.m, &go, &grammar);
    if (st == CLINFER_OK && grammar) st = clinfer_sampler_set_grammar(smp, grammar);
    if (st == CLINFER_OK) {
        st = cli_generate(&s, smp, ids, n, n_gen, draft_max, stdout, &stats);
        if (stats.n_generated > 0) printf("\n"); /* end the text's last line */
        if (grammar && st == CLINFER_OK && stats.stop != CLINFER_STOP_EOG) /* fail closed: say the text is cut */
            fprintf(stderr, "clinfer: the text stopped at -n %d before the grammar's end: it is not a whole sentence\n",
                    n_gen);
        /* speeds once the prompt ran (also on Ctrl-C), not after it failed */
        if (stats.n_prompt > 0) cli_print_stats(&s, &stats);
    }
    clinfer_sampler_free(smp);
    clinfer_grammar_free(grammar);
    clinfer_free(ids);
    cli_session_close(&s);
    return cli_error(st);
}

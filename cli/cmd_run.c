/* clinfer run: one prompt in, generated text streamed to stdout (and only
 * the text); load time and speeds on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer run -p PROMPT [-n N] [--chat] [--special] " CLI_GEN_USAGE;

/* The prompt's tokens: raw text, or a user turn in the model's chat format. */
static clf_status prompt_tokens(const cli_session *s, const char *prompt, int chat, int special, int32_t **ids,
                                int *n) {
    if (!chat) return clf_tokenize(s->tok, prompt, strlen(prompt), 1, special, ids, n);
    clf_chat c;
    CLF_TRY(clf_chat_init_model(s->tok, &c));
    clf_chat_msg msg = {"user", prompt};
    return clf_chat_tokenize(&c, s->tok, &msg, 1, 1, 1, ids, n); /* --special does not reach the message */
}

int cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    o.sp.temperature = 0; /* greedy unless asked: the same prompt gives the same text */
    const char *prompt = NULL;
    int n_gen = 256, chat = 0, special = 0;
    const cli_option opts[] = {CLI_GEN_OPTIONS(&o),
                               CLI_OPT_TEXT("-p", &prompt),
                               CLI_OPT_INT("-n", &n_gen, 1, 1 << 24),
                               CLI_OPT_FLAG("--chat", &chat),
                               CLI_OPT_FLAG("--special", &special),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!prompt) return cli_usage(USAGE, "no prompt (-p)");
    cli_session s;
    clf_status st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &s);
    if (st != CLF_OK) return cli_error(st);
    int32_t *ids = NULL;
    int n = 0;
    clf_sampler *smp = NULL;
    cli_gen_stats stats = {0};
    st = prompt_tokens(&s, prompt, chat, special, &ids, &n);
    if (st == CLF_OK && n == 0) st = clf_fail(CLF_ERR_ARG, "the prompt is empty");
    if (st == CLF_OK && n > s.c->n_ctx)
        st = clf_fail(CLF_ERR_CONTEXT, "the prompt (%d tokens) is longer than the context of %d tokens (--ctx)", n,
                      s.c->n_ctx);
    else if (st == CLF_OK && n + n_gen > s.c->n_ctx)
        st = clf_fail(CLF_ERR_CONTEXT, "the prompt (%d tokens) and -n %d do not fit the context of %d tokens (--ctx)", n,
                      n_gen, s.c->n_ctx);
    if (st == CLF_OK) st = clf_sampler_create(&o.sp, s.m->hp.n_vocab, &smp);
    if (st == CLF_OK) {
        st = cli_generate(&s, smp, ids, n, n_gen, stdout, &stats);
        if (stats.n_gen > 0) printf("\n"); /* end the text's last line */
        /* speeds once the prompt ran (also on Ctrl-C), not after it failed */
        if (stats.n_prompt > 0) cli_print_stats(&s, &stats);
    }
    clf_sampler_free(smp);
    free(ids);
    cli_session_close(&s);
    return cli_error(st);
}

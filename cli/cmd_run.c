/* clinfer run: one prompt in, generated text streamed to stdout (and only
 * the text); load time and speeds on stderr, and with --logprobs N each
 * token's logprobs as JSON lines there (cli/logprobs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grammar_opts.h"
#include "logprobs.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer run (-p PROMPT | -p - | -f FILE) [-n N] [--chat [--system TEXT] [--reasoning-format F] [--hide-reasoning] [--reasoning-budget N]] [--special] "
                           CLI_DRAFT_USAGE " [--logprobs N] " CLI_GRAMMAR_USAGE " " CLI_GEN_USAGE;

/* The prompt's tokens: raw text, or a user turn (after the system message,
 * if any) in the model's chat format. */
static clinfer_status prompt_tokens(const cli_session *s, const char *prompt, size_t len, int chat, const char *system,
                                    int special, int32_t **ids, int *n) {
    if (!chat) return clinfer_tokenize(s->m, prompt, len, 1, special, ids, n);
    if (memchr(prompt, 0, len)) return clinfer_fail(CLINFER_ERR_ARG, "the prompt holds a NUL byte");
    clinfer_chat_message msgs[2] = {{"system", system}, {"user", prompt}};
    /* --special does not reach the messages */
    return system ? clinfer_chat_tokenize(s->m, msgs, 2, 1, ids, n) : clinfer_chat_tokenize(s->m, msgs + 1, 1, 1, ids, n);
}

/* The prompt's text: -p TEXT, -p - (all of stdin) or -f FILE (*from_file:
 * free it with clinfer_free, else with free; NULL for -p TEXT). */
static clinfer_status prompt_text(const char *p, const char *file, const char **text, size_t *len, char **owned) {
    *owned = NULL;
    if (file) {
        CLI_TRY(clinfer_read_file(file, owned, len));
        *text = *owned;
        return CLINFER_OK;
    }
    if (strcmp(p, "-")) {
        *text = p;
        *len = strlen(p);
        return CLINFER_OK;
    }
    size_t cap = 0, n = 0, got = 1;
    char *buf = NULL;
    while (got) {
        if (n + 4096 > cap) {
            char *grown = realloc(buf, cap = 2 * cap + 4096);
            if (!grown) {
                free(buf);
                return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory reading the prompt");
            }
            buf = grown;
        }
        n += got = fread(buf + n, 1, cap - n - 1, stdin);
    }
    if (ferror(stdin)) {
        free(buf);
        return clinfer_fail(CLINFER_ERR_IO, "cannot read the prompt from stdin (-p -): %s", strerror(errno));
    }
    buf[n] = 0;
    *owned = buf;
    *text = buf;
    *len = n;
    return CLINFER_OK;
}

int cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    o.sp.temperature = 0; /* greedy unless asked: the same prompt gives the same text */
    const char *prompt = NULL, *file = NULL, *system = NULL;
    int n_gen = 256, chat = 0, special = 0, logprobs = -1, hide_reasoning = 0, reasoning_budget = -1;
    const char *reasoning_format = NULL;
    cli_draft_opts dr = {0};
    cli_grammar_opts go = {0};
    const cli_option opts[] = {
        CLI_GEN_OPTIONS(&o),
        CLI_GRAMMAR_OPTIONS(&go),
        CLI_OPT_TEXT("-p", &prompt, .alias = "--prompt", .arg = "PROMPT", .help = "the prompt; -: read it from stdin"),
        CLI_OPT_STR("-f", &file, .alias = "--file", .arg = "FILE", .help = "read the prompt from FILE"),
        CLI_OPT_INT("-n", &n_gen, 1, 1 << 24, .alias = "--n-predict", .help = "tokens to generate at most (default 256)"),
        CLI_OPT_FLAG("--chat", &chat, .help = "the prompt is a user message in the model's chat template"),
        CLI_OPT_TEXT("--system", &system, .help = "with --chat: a system message before it"),
        CLI_REASONING_OPTIONS(&reasoning_format, &hide_reasoning, &reasoning_budget),
        CLI_OPT_FLAG("--special", &special, .help = "parse control tokens such as <|im_start|> in the prompt"),
        CLI_DRAFT_OPTIONS(&dr),
        CLI_OPT_INT("--logprobs", &logprobs, 0, CLI_MAX_TOP_LOGPROBS,
                    .help = "each token's logprob and the N likeliest, as JSON lines on stderr"),
        {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!prompt == !file) return cli_usage(USAGE, prompt ? "-p and -f do not go together" : "no prompt (-p or -f)");
    if (system && !chat) return cli_usage(USAGE, "--system goes with --chat (a system message of the chat template)");
    cli_reasoning reasoning;
    if (cli_reasoning_mode(reasoning_format, hide_reasoning, &reasoning) != CLINFER_OK) return cli_usage(USAGE, "%s", clinfer_last_error());
    if (!chat) reasoning = CLI_REASONING_INLINE; /* a plain prompt's text is the text */
    if ((dr.min || dr.p_min > 0) && !dr.model) return cli_usage(USAGE, "--draft-min and --draft-p-min go with -md FILE");
    if (chat) cli_warn_base_chat(o.model);
    const char *text = NULL;
    size_t len = 0;
    char *owned = NULL;
    clinfer_status st = prompt_text(prompt, file, &text, &len, &owned);
    if (st != CLINFER_OK) return cli_error(st);
    cli_session s;
    st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &s);
    if (st == CLINFER_OK) st = cli_session_add_draft(&s, &dr, &o.place, o.kv);
    if (st != CLINFER_OK) {
        cli_session_close(&s);
        if (file) clinfer_free(owned);
        else free(owned);
        return cli_error(st);
    }
    int32_t *ids = NULL;
    int n = 0;
    clinfer_sampler *smp = NULL;
    clinfer_grammar *grammar = NULL;
    clinfer_generate_result stats = {0};
    int n_ctx = clinfer_session_n_ctx(s.s);
    st = prompt_tokens(&s, text, len, chat, system, special, &ids, &n);
    if (file) clinfer_free(owned);
    else free(owned);
    if (st == CLINFER_OK && n == 0) st = clinfer_fail(CLINFER_ERR_ARG, "the prompt is empty");
    if (st == CLINFER_OK && n > n_ctx)
        st = clinfer_fail(CLINFER_ERR_CONTEXT, "the prompt (%d tokens) is longer than the context of %d tokens (--ctx)", n,
                      n_ctx);
    else if (st == CLINFER_OK && n + n_gen > n_ctx)
        st = clinfer_fail(CLINFER_ERR_CONTEXT, "the prompt (%d tokens) and -n %d do not fit the context of %d tokens (--ctx)", n,
                      n_gen, n_ctx);
    if (st == CLINFER_OK) st = cli_session_warm(&s, n); /* no kernel built once text is printing */
    if (st == CLINFER_OK) st = clinfer_sampler_create(s.m, &o.sp, &smp);
    /* the logprobs' stage first: it keeps the raw logits, before the grammar's mask */
    if (st == CLINFER_OK && logprobs >= 0) st = cli_logprobs_attach(s.m, smp, logprobs, stderr);
    if (st == CLINFER_OK) st = cli_grammar_load(s.m, &go, &grammar);
    if (st == CLINFER_OK && grammar) st = clinfer_sampler_set_grammar(smp, grammar);
    if (st == CLINFER_OK) {
        st = cli_generate_reasoning(&s, smp, ids, n, n_gen, dr.max, reasoning, reasoning_budget, stdout, &stats);
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

/* clinfer chat: multi-turn chat on a terminal. The KV cache is kept across
 * turns, so each turn processes only its new tokens. On a terminal the
 * lines are edited and recalled with libedit (where the build found it);
 * with stdin not a terminal it is a filter: a line in, its answer out,
 * no banner nor prompt. The totals go to stderr at the end, as llama-cli's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CLINFER_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer chat [--system TEXT] [-n N] [--reasoning-format auto|none|deepseek] [--hide-reasoning] [--reasoning-budget N] "
                           CLI_DRAFT_USAGE " " CLI_GEN_USAGE;

typedef struct chat_state {
    cli_session s;
    clinfer_sampler *smp;
    const char *system;
    int first; /* no turn in the cache yet */
    int n_gen;
    cli_reasoning reasoning; /* a model's <think> shown apart, as written, or hidden */
    int reasoning_budget;    /* --reasoning-budget: tokens of thought before its close is forced; -1 none */
    cli_draft_opts dr; /* speculation: --draft-max, -md */
    /* every turn's, for the line at the end */
    int turns, n_prompt, n_generated;
    double prompt_s, generate_s, build_s;
} chat_state;

static const char *const HELP = "commands:\n"
                                "  /help          this list\n"
                                "  /reset         forget the conversation (the system message stays)\n"
                                "  /exit, /quit   leave (also Ctrl-D); Ctrl-C stops an answer\n"
                                "a line that starts with // is sent with one / less\n";

/* The totals, once at the end (stderr): llama-cli's prompt eval / eval. */
static void print_totals(const chat_state *cs) {
    fprintf(stderr, "clinfer chat: %d turns | prompt eval %d tokens in %.2f s (%.1f t/s) | eval %d tokens in %.2f s "
                    "(%.1f t/s)%s",
            cs->turns, cs->n_prompt, cs->prompt_s, cs->prompt_s > 0 ? cs->n_prompt / cs->prompt_s : 0, cs->n_generated,
            cs->generate_s, cs->generate_s > 0 ? cs->n_generated / cs->generate_s : 0, cs->build_s > 0 ? "" : "\n");
    if (cs->build_s > 0) fprintf(stderr, " | kernels %.2f s\n", cs->build_s);
}

/* One line of input without its newline (NULL at the end, or Ctrl-C at
 * the prompt): libedit on a terminal, its history growing, else getline. */
static char *read_line(int tty, char **buf, size_t *cap) {
#ifdef CLINFER_HAVE_LIBEDIT
    if (tty) {
        free(*buf);
        *buf = readline("> ");
        if (*buf && **buf) add_history(*buf);
        *cap = 0;
        return *buf;
    }
#endif
    if (tty) {
        fprintf(stderr, "> ");
        fflush(stderr);
    }
    if (getline(buf, cap, stdin) < 0) return NULL;
    (*buf)[strcspn(*buf, "\r\n")] = 0;
    return *buf;
}

/* The tokens of one user turn: the conversation's opening (system message)
 * on the first turn, else the end of the previous answer. What the user
 * types is text, control-token look-alikes included. */
static clinfer_status turn_tokens(chat_state *cs, const char *user, int32_t **ids, int *n) {
    if (cs->first) {
        clinfer_chat_message msgs[2] = {{"system", cs->system}, {"user", user}};
        return cs->system ? clinfer_chat_tokenize(cs->s.m, msgs, 2, 1, ids, n)
                          : clinfer_chat_tokenize(cs->s.m, msgs + 1, 1, 1, ids, n);
    }
    return clinfer_chat_tokenize_next(cs->s.m, "user", user, ids, n);
}

static clinfer_status one_turn(chat_state *cs, const char *user) {
    int32_t *ids = NULL;
    int n = 0;
    clinfer_status st = turn_tokens(cs, user, &ids, &n);
    if (st != CLINFER_OK) return st;
    int n_ctx = clinfer_session_n_ctx(cs->s.s), n_past = clinfer_session_n_past(cs->s.s);
    int room = n_ctx - n_past - n;
    if (room < 2) { /* a turn that cannot fit even an empty context is not a full context */
        clinfer_free(ids);
        if (n + 2 > n_ctx)
            return clinfer_fail(CLINFER_ERR_CONTEXT, "the message is %d tokens, longer than the context of %d tokens (--ctx)",
                            n, n_ctx);
        return clinfer_fail(CLINFER_ERR_CONTEXT, "the context is full (%d of %d tokens used): /reset to start over",
                        n_past, n_ctx);
    }
    clinfer_generate_result stats;
    st = cli_generate_reasoning(&cs->s, cs->smp, ids, n, cs->n_gen < room ? cs->n_gen : room - 1, cs->dr.max,
                                cs->reasoning, cs->reasoning_budget, stdout, &stats);
    clinfer_free(ids);
    if (stats.n_generated > 0 || stats.n_prompt > 0) cs->first = 0;
    cs->turns++;
    cs->n_prompt += stats.n_prompt;
    cs->n_generated += stats.n_generated;
    cs->prompt_s += stats.prompt_seconds;
    cs->generate_s += stats.generate_seconds;
    cs->build_s += stats.build_seconds;
    /* an answer cut short keeps its last token; the turn's end follows it */
    if (st == CLINFER_OK && stats.stop != CLINFER_STOP_EOG && stats.last >= 0)
        st = clinfer_eval(cs->s.s, &stats.last, 1);
    printf("\n");
    if (getenv("CLINFER_CHAT_STATS")) cli_print_stats(&cs->s, &stats);
    return st;
}

int cmd_chat(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    chat_state cs = {.first = 1, .n_gen = 512, .reasoning_budget = -1};
    const char *reasoning_format = NULL;
    int hide_reasoning = 0;
    const cli_option opts[] = {
        CLI_GEN_OPTIONS(&o),
        CLI_OPT_TEXT("--system", &cs.system, .help = "the system message that opens the conversation"),
        CLI_OPT_INT("-n", &cs.n_gen, 1, 1 << 24, .alias = "--n-predict", .help = "tokens an answer has at most (default 512)"),
        CLI_REASONING_OPTIONS(&reasoning_format, &hide_reasoning, &cs.reasoning_budget),
        CLI_DRAFT_OPTIONS(&cs.dr),
        {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (cli_reasoning_mode(reasoning_format, hide_reasoning, &cs.reasoning) != CLINFER_OK)
        return cli_usage(USAGE, "%s", clinfer_last_error());
    cli_warn_base_chat(o.model);
    clinfer_status st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &cs.s);
    if (st == CLINFER_OK) st = cli_session_add_draft(&cs.s, &cs.dr, &o.place, o.kv);
    if (st != CLINFER_OK) {
        cli_session_close(&cs.s);
        return cli_error(st);
    }
    st = cli_check_chat(cs.s.m);
    if (st == CLINFER_OK) st = cli_session_warm(&cs.s, 16); /* no kernel built inside an answer (a turn's template: 13+ tokens) */
    if (st == CLINFER_OK) st = clinfer_sampler_create(cs.s.m, &o.sp, &cs.smp);
    if (st != CLINFER_OK) {
        cli_session_close(&cs.s);
        return cli_error(st);
    }
    const int tty = isatty(0);
    if (tty)
        fprintf(stderr, "clinfer chat: %s on %s, %s template, context %d tokens. /help lists the commands, /exit "
                        "quits.\n",
                cs.s.info.arch, cs.s.info.devices, cs.s.info.chat_format, clinfer_session_n_ctx(cs.s.s));
#ifdef CLINFER_HAVE_LIBEDIT
    rl_outstream = stderr; /* the prompt and the echo are not the answers */
#endif
    cli_catch_sigint();
    char *line = NULL; /* a whole line, however long: one line is one turn */
    size_t line_cap = 0;
    for (;;) {
        cli_interrupted = 0;
        if (!read_line(tty, &line, &line_cap)) break; /* EOF or Ctrl-C at the prompt */
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
            fputs(HELP, stderr);
            continue;
        }
        if (!strcmp(line, "/reset")) {
            clinfer_session_rewind(cs.s.s, 0);
            clinfer_sampler_reset(cs.smp);
            cs.first = 1;
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (line[0] == '/' && line[1] != '/') { /* not for the model: a command mistyped */
            fprintf(stderr, "clinfer chat: unknown command '%s' (/help lists them; // sends a line starting with /)\n",
                    line);
            continue;
        }
        if (!line[0]) continue;
        st = one_turn(&cs, line + (line[0] == '/'));
        if (st == CLINFER_ERR_INTERRUPTED || st == CLINFER_ERR_CONTEXT) {
            fprintf(stderr, "clinfer: %s\n", clinfer_last_error());
            st = CLINFER_OK;
        } else if (st != CLINFER_OK) {
            break;
        }
    }
    free(line);
    if (cs.turns) print_totals(&cs);
    clinfer_sampler_free(cs.smp);
    cli_session_close(&cs.s);
    return cli_error(st);
}

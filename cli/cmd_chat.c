/* clinfer chat: multi-turn chat on a terminal. The KV cache is kept across
 * turns, so each turn processes only its new tokens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer chat [--system TEXT] [-n N] " CLI_GEN_USAGE;

typedef struct chat_state {
    cli_session s;
    clinfer_sampler *smp;
    const char *system;
    int first; /* no turn in the cache yet */
    int n_gen;
} chat_state;

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
    st = cli_generate(&cs->s, cs->smp, ids, n, cs->n_gen < room ? cs->n_gen : room - 1, 0, stdout,
                      &stats);
    clinfer_free(ids);
    if (stats.n_generated > 0 || stats.n_prompt > 0) cs->first = 0;
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
    chat_state cs = {.first = 1, .n_gen = 512};
    const cli_option opts[] = {
        CLI_GEN_OPTIONS(&o), CLI_OPT_TEXT("--system", &cs.system), CLI_OPT_INT("-n", &cs.n_gen, 1, 1 << 24), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clinfer_status st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &cs.s);
    if (st != CLINFER_OK) return cli_error(st);
    st = cli_check_chat(cs.s.m);
    if (st == CLINFER_OK) st = cli_session_warm(&cs.s); /* no kernel built inside an answer */
    if (st == CLINFER_OK) st = clinfer_sampler_create(cs.s.m, &o.sp, &cs.smp);
    if (st != CLINFER_OK) {
        cli_session_close(&cs.s);
        return cli_error(st);
    }
    fprintf(stderr, "clinfer chat: %s on %s, %s template, context %d tokens. /exit to quit, /reset to start over.\n",
            cs.s.info.arch, cs.s.info.devices, cs.s.info.chat_format, clinfer_session_n_ctx(cs.s.s));
    cli_catch_sigint();
    char *line = NULL; /* a whole line, however long: one line is one turn */
    size_t line_cap = 0;
    for (;;) {
        fprintf(stderr, "> ");
        fflush(stderr);
        cli_interrupted = 0;
        if (getline(&line, &line_cap, stdin) < 0) break; /* EOF or Ctrl-C at the prompt */
        line[strcspn(line, "\r\n")] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            clinfer_session_rewind(cs.s.s, 0);
            clinfer_sampler_reset(cs.smp);
            cs.first = 1;
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (!line[0]) continue;
        st = one_turn(&cs, line);
        if (st == CLINFER_ERR_INTERRUPTED || st == CLINFER_ERR_CONTEXT) {
            fprintf(stderr, "clinfer: %s\n", clinfer_last_error());
            st = CLINFER_OK;
        } else if (st != CLINFER_OK) {
            break;
        }
    }
    free(line);
    clinfer_sampler_free(cs.smp);
    cli_session_close(&cs.s);
    return cli_error(st);
}

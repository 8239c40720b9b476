/* clinfer chat: multi-turn chat on a terminal. The KV cache is kept across
 * turns, so each turn processes only its new tokens. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer chat [--system TEXT] [-n N] " CLI_GEN_USAGE;

typedef struct chat_state {
    cli_session s;
    clf_chat fmt;
    clf_sampler *smp;
    const char *system;
    int first; /* no turn in the cache yet */
    int n_gen;
} chat_state;

/* The tokens of one user turn: the conversation's opening (system message)
 * on the first turn, else the end of the previous answer. What the user
 * types is text, control-token look-alikes included. */
static clf_status turn_tokens(chat_state *cs, const char *user, int32_t **ids, int *n) {
    if (cs->first) {
        clf_chat_msg msgs[2] = {{"system", cs->system}, {"user", user}};
        return cs->system ? clf_chat_tokenize(&cs->fmt, cs->s.tok, msgs, 2, 1, 1, ids, n)
                          : clf_chat_tokenize(&cs->fmt, cs->s.tok, msgs + 1, 1, 1, 1, ids, n);
    }
    return clf_chat_tokenize_next(&cs->fmt, cs->s.tok, "user", user, ids, n);
}

static clf_status one_turn(chat_state *cs, const char *user) {
    int32_t *ids = NULL;
    int n = 0;
    clf_status st = turn_tokens(cs, user, &ids, &n);
    if (st != CLF_OK) return st;
    int room = cs->s.c->n_ctx - cs->s.c->n_past - n;
    if (room < 2) { /* a turn that cannot fit even an empty context is not a full context */
        free(ids);
        if (n + 2 > cs->s.c->n_ctx)
            return clf_fail(CLF_ERR_CONTEXT, "the message is %d tokens, longer than the context of %d tokens (--ctx)",
                            n, cs->s.c->n_ctx);
        return clf_fail(CLF_ERR_CONTEXT, "the context is full (%d of %d tokens used): /reset to start over",
                        cs->s.c->n_past, cs->s.c->n_ctx);
    }
    cli_gen_stats stats;
    st = cli_generate(&cs->s, cs->smp, ids, n, cs->n_gen < room ? cs->n_gen : room - 1, stdout, &stats);
    free(ids);
    if (stats.n_gen > 0 || stats.n_prompt > 0) cs->first = 0;
    /* an answer cut short keeps its last token; the turn's end follows it */
    if (st == CLF_OK && !stats.stopped_eog && stats.last >= 0)
        st = clf_llama_eval(cs->s.c, &stats.last, 1, 0, NULL);
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
    clf_status st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &cs.s);
    if (st != CLF_OK) return cli_error(st);
    st = clf_chat_init_model(cs.s.tok, &cs.fmt);
    if (st == CLF_OK) st = clf_sampler_create(&o.sp, cs.s.m->hp.n_vocab, &cs.smp);
    if (st != CLF_OK) {
        cli_session_close(&cs.s);
        return cli_error(st);
    }
    char devices[512];
    fprintf(stderr, "clinfer chat: %s on %s, %s template, context %d tokens. /exit to quit, /reset to start over.\n",
            cs.s.m->hp.arch, cli_stages_devices(&cs.s.stages, devices, sizeof devices),
            clf_chat_format_name(cs.fmt.format), cs.s.c->n_ctx);
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
            clf_llama_rewind(cs.s.c, 0);
            clf_sampler_reset(cs.smp);
            cs.first = 1;
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (!line[0]) continue;
        st = one_turn(&cs, line);
        if (st == CLF_ERR_INTERRUPTED || st == CLF_ERR_CONTEXT) {
            fprintf(stderr, "clinfer: %s\n", clf_last_error());
            st = CLF_OK;
        } else if (st != CLF_OK) {
            break;
        }
    }
    free(line);
    clf_sampler_free(cs.smp);
    cli_session_close(&cs.s);
    return cli_error(st);
}

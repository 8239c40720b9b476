#include "session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_path.h"
#include "place_mpi.h"

volatile sig_atomic_t cli_interrupted;

static void on_sigint(int sig) { cli_interrupted = sig; }

void cli_catch_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocked read returns */
    sigaction(SIGTERM, &sa, NULL);
    /* a parent may have blocked them; a Ctrl-C already pending arrives now */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* The runtime's abort hook: Ctrl-C stops a load or a prompt between steps. */
static int interrupted(void *ud) {
    (void)ud;
    return cli_interrupted;
}

/* Ctrl-C between the steps of opening a session, or inside one. Whatever
 * failed after a Ctrl-C failed for it: LLVM, compiling kernels inside PoCL,
 * deletes its temporary files on SIGINT, and the build then fails. */
static clf_status load_step(clf_status st) {
    if (st == CLF_ERR_INTERRUPTED || cli_interrupted)
        return clf_fail(CLF_ERR_INTERRUPTED, "loading stopped by %s", cli_interrupt_name());
    return st;
}

/* Kernels missing from the cache take seconds to build: say so, once. */
static void building_notice(void *ud) {
    static int shown;
    const clf_runtime *rt = ud;
    if (shown++) return;
    fprintf(stderr, "clinfer: building kernels for %s (%s)...\n", rt->dev.name,
            rt->cache_dir[0] ? "first run on this device; cached afterwards" : "the kernel cache is off");
}

const char *cli_interrupt_name(void) {
    if (cli_interrupted == SIGTERM && cli_mpi) /* from mpirun, most likely: say why it would send it */
        return "SIGTERM (under MPI: the job ends when another rank exits or is killed)";
    return cli_interrupted == SIGTERM ? "SIGTERM" : "Ctrl-C";
}

/* Before a stage's weights load: Ctrl-C stops it, a first build is announced. */
static void prepare(clf_runtime *rt) {
    clf_runtime_set_abort(rt, interrupted, NULL);
    clf_runtime_on_build(rt, building_notice, rt);
}

clf_status cli_session_open(const char *model, const cli_place *place, int n_ctx, clf_type kv, cli_session *s) {
    memset(s, 0, sizeof *s);
    cli_catch_sigint(); /* before loading, which Ctrl-C stops cleanly too */
    double t0 = clf_now_s();
    char path[1024];
    clf_status st = clf_model_path(model, path, sizeof path);
    if (st == CLF_OK) st = load_step(clf_gguf_open(path, &s->g));
    if (st == CLF_OK) st = load_step(clf_tokenizer_load(s->g, &s->tok));
    if (st == CLF_OK)
        st = load_step(cli_mpi ? cli_place_mpi_open(place, model, s->g, prepare, &s->stages)
                               : cli_stages_open(place, s->g, n_ctx, kv, prepare, &s->stages));
    if (st == CLF_OK) s->rt = s->stages.rt[0], s->m = s->stages.m[0];
    if (st == CLF_OK && n_ctx >= 0) st = load_step(clf_llama_ctx_create(s->m, n_ctx, 0, kv, &s->c));
    if (st == CLF_OK && clf_tokenizer_n_vocab(s->tok) != s->m->hp.n_vocab)
        st = clf_fail(CLF_ERR_FORMAT, "the tokenizer has %d tokens but the model %d", clf_tokenizer_n_vocab(s->tok),
                      s->m->hp.n_vocab);
    if (st == CLF_OK && !(s->logits = malloc((size_t)s->m->hp.n_vocab * sizeof *s->logits)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st != CLF_OK) {
        cli_session_close(s);
        return st;
    }
    s->load_s = clf_now_s() - t0;
    return CLF_OK;
}

void cli_session_close(cli_session *s) {
    free(s->logits);
    clf_llama_ctx_free(s->c); /* before the stages its links reach */
    cli_stages_close(&s->stages);
    clf_tokenizer_free(s->tok);
    clf_gguf_close(s->g);
    memset(s, 0, sizeof *s);
}

/* Streams text as it is generated; a failed write stops the generation. */
static clf_status emit(FILE *out, const char *text, size_t n) {
    if (fwrite(text, 1, n, out) == n && fflush(out) == 0) return CLF_OK;
    return clf_fail(CLF_ERR_IO, "cannot write the generated text: %s", strerror(errno));
}

/* Evaluates tokens for what the sampler needs next: the k best logits
 * where they are all it takes (on one device k values cross instead of the
 * vocabulary), else every logit. Corrupt weights can make every logit
 * NaN: sampling would then pick token 0 or stop at once, printing nothing;
 * say so instead. */
static clf_status eval_for(cli_session *s, const clf_sampler *smp, const int32_t *tokens, int n) {
    int bad = 0;
    s->top_k = clf_sampler_top_k(smp, CLF_TOPK_MAX);
    clf_status st = s->top_k ? clf_llama_eval_top(s->c, tokens, n, s->top_k, s->top_vals, s->top_ids, &bad)
                             : clf_llama_eval(s->c, tokens, n, 0, s->logits);
    for (int i = 0; st == CLF_OK && !s->top_k && i < s->m->hp.n_vocab; i++) bad |= !isfinite(s->logits[i]);
    if (st == CLF_OK && bad)
        st = clf_fail(CLF_ERR_FORMAT, "the model produced non-finite logits (NaN/Inf) at token %d", s->c->n_past);
    return st;
}

clf_status cli_generate(cli_session *s, clf_sampler *smp, const int32_t *prompt, int n_prompt, int max_gen, FILE *out,
                        cli_gen_stats *stats) {
    memset(stats, 0, sizeof *stats);
    stats->last = -1;
    double build0 = s->rt->build_s, t0 = clf_now_s();
    int n_past0 = s->c->n_past;
    clf_status st = eval_for(s, smp, prompt, n_prompt);
    if (st != CLF_OK) {
        clf_llama_rewind(s->c, n_past0); /* no half-read prompt stays in the context */
        if (st == CLF_ERR_INTERRUPTED || cli_interrupted) st = clf_fail(CLF_ERR_INTERRUPTED, "prompt processing stopped by %s", cli_interrupt_name());
        return st;
    }
    stats->n_prompt = n_prompt;
    for (int i = 0; i < n_prompt; i++) clf_sampler_accept(smp, prompt[i]);
    /* kernels built on the way (a first run) are not the prompt's speed */
    stats->build_s = s->rt->build_s - build0;
    stats->prompt_s = clf_now_s() - t0 - stats->build_s;
    build0 = s->rt->build_s;
    t0 = clf_now_s();
    clf_detok d;
    clf_detok_init(&d, s->tok, 0);
    size_t cap = clf_tokenizer_max_piece(s->tok);
    char *buf = malloc(cap);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < max_gen; i++) {
        if (cli_interrupted) {
            st = CLF_ERR_INTERRUPTED;
            break;
        }
        int32_t id = s->top_k ? clf_sampler_sample_top(smp, s->top_vals, s->top_ids, s->top_k)
                              : clf_sampler_sample(smp, s->logits, s->m->hp.n_vocab);
        stats->last = id;
        stats->n_gen++;
        if (clf_token_is_eog(s->tok, id)) {
            stats->stopped_eog = 1;
            break;
        }
        size_t n;
        if ((st = clf_detok_push(&d, id, buf, cap, &n)) != CLF_OK) break;
        if ((st = emit(out, buf, n)) != CLF_OK) break;
        clf_sampler_accept(smp, id);
        if (i + 1 == max_gen) break; /* the last token need not be evaluated */
        if (s->c->n_past >= s->c->n_ctx) {
            st = clf_fail(CLF_ERR_CONTEXT, "the context (%d tokens) is full", s->c->n_ctx);
            break;
        }
        if ((st = eval_for(s, smp, &id, 1)) != CLF_OK) break;
    }
    if (st != CLF_OK && cli_interrupted) /* whatever failed after a signal failed for it (load_step) */
        st = clf_fail(CLF_ERR_INTERRUPTED, "generation stopped by %s", cli_interrupt_name());
    size_t n = clf_detok_flush(&d, buf, cap);
    if (st == CLF_OK) st = emit(out, buf, n);
    free(buf);
    stats->gen_s = clf_now_s() - t0 - (s->rt->build_s - build0);
    stats->build_s += s->rt->build_s - build0;
    return st;
}

void cli_print_stats(const cli_session *s, const cli_gen_stats *st) {
    char kernels[48] = "", devices[512];
    if (st->build_s > 0) snprintf(kernels, sizeof kernels, " | kernels %.2f s", st->build_s);
    fprintf(stderr, "\nclinfer: %s | load %.2f s%s | prompt %d tokens, %.1f t/s | generated %d tokens, %.1f t/s\n",
            cli_stages_devices(&s->stages, devices, sizeof devices), s->load_s, kernels, st->n_prompt, st->prompt_s > 0 ? st->n_prompt / st->prompt_s : 0,
            st->n_gen, st->gen_s > 0 ? st->n_gen / st->gen_s : 0);
}

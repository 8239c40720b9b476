#include "session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "reasoning.h"

/* A load that takes a while reports: on a terminal a line redrawn a few
 * times a second; into a file or a pipe (a log) one plain line, no \r. */
typedef struct progress_line {
    double t0, shown;
    int tty;
    int open; /* a line without its newline */
} progress_line;

static int on_progress(void *ud, float f) {
    progress_line *p = ud;
    double t = cli_now_s();
    if (t - p->t0 < 1.0 || p->shown < 0) return 0;
    if (!p->tty) {
        fprintf(stderr, "clinfer: uploading weights...\n");
        p->shown = -1; /* once */
    } else if (t - p->shown >= 0.25 || f >= 1) {
        p->shown = t;
        fprintf(stderr, "\rclinfer: uploading weights %3.0f%%", f * 100);
        p->open = f < 1;
        if (f >= 1) fputc('\n', stderr);
    }
    return 0; /* Ctrl-C: the abort callback */
}

/* A notice of a step that takes a while ("building kernels ...", "packing
 * the weights once ...") ends in "..."; the others are said as they are. */
static void on_notice(void *ud, const char *line) {
    (void)ud;
    const int slow = !strncmp(line, "building", 8) || !strncmp(line, "packing the weights once", 24) ||
                     !strncmp(line, "waiting", 7);
    fprintf(stderr, "clinfer: %s%s\n", line, slow ? "..." : "");
}

/* Only --split layers exists; the library checks the rest of the options. */
static clinfer_status check_split(const cli_place *p) {
    if (!p->split) return CLINFER_OK;
    if (cli_mpi)
        return clinfer_fail(CLINFER_ERR_ARG, "--mpi holds one stage per rank: not with --devices or --split "
                                             "(--device picks each rank's)");
    if (!p->devices) return clinfer_fail(CLINFER_ERR_ARG, "--split needs --devices SEL,SEL,...");
    if (strcmp(p->split, "layers"))
        return clinfer_fail(CLINFER_ERR_ARG, "--split '%s': only 'layers' is supported (each device holds a range of "
                                             "layers)", p->split);
    return CLINFER_OK;
}

void cli_threads_begin(int n) {
    if (n <= 0) return;
    char v[16];
    snprintf(v, sizeof v, "%d", n);
    setenv("POCL_MAX_PTHREAD_COUNT", v, 1); /* PoCL up to 3 */
    setenv("POCL_CPU_MAX_CU_COUNT", v, 1);  /* PoCL 4 on */
}

void cli_threads_check(int n, const char *device) {
    int idx;
    clinfer_device_info d = {.size = sizeof d};
    if (n <= 0 || clinfer_device_select(device, &idx) != CLINFER_OK || clinfer_device_get(idx, &d) != CLINFER_OK) return;
    if (!strstr(d.platform, "Portable Computing Language"))
        fprintf(stderr, "clinfer: -t %d ignored: %s (%s) runs its own threads\n", n, d.name, d.platform);
}

/* --chat-template TEXT or --chat-template-file FILE (read whole) over the file's template. */
static clinfer_status set_chat_template(clinfer_model *m, const cli_place *place) {
    if (place->chat_template && place->chat_template_file)
        return clinfer_fail(CLINFER_ERR_ARG, "--chat-template and --chat-template-file: one or the other");
    if (place->chat_template) return clinfer_model_set_chat_template(m, place->chat_template);
    if (!place->chat_template_file) return CLINFER_OK;
    FILE *f = fopen(place->chat_template_file, "rb");
    if (!f) return clinfer_fail(CLINFER_ERR_IO, "--chat-template-file %s: %s", place->chat_template_file, strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    clinfer_status st = CLINFER_OK;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *p = realloc(text, cap = 2 * cap + 8192);
            if (!p) {
                st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
                break;
            }
            text = p;
        }
        size_t k = fread(text + n, 1, 4096, f);
        n += k;
        if (k < 4096) break;
    }
    if (st == CLINFER_OK && ferror(f))
        st = clinfer_fail(CLINFER_ERR_IO, "--chat-template-file %s: read error", place->chat_template_file);
    fclose(f);
    if (st == CLINFER_OK) {
        text[n] = 0;
        st = clinfer_model_set_chat_template(m, text);
    }
    free(text);
    return st;
}

/* --lora and --lora-scaled: each FILE (comma-separated, FILE:SCALE for the
 * scaled) loaded on s's model at its scale, and the session's sequence
 * given them all. */
static clinfer_status load_loras(cli_session *s, const cli_place *place) {
    for (int k = 0; k < 2; k++) {
        const cli_list *l = k ? &place->lora_scaled : &place->lora;
        for (int i = 0; i < l->n; i++) {
            char buf[4096];
            if (snprintf(buf, sizeof buf, "%s", l->v[i]) >= (int)sizeof buf)
                return clinfer_fail(CLINFER_ERR_ARG, "--lora: a value of more than %zu bytes", sizeof buf);
            for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                float scale = 1.0f;
                if (k) { /* FILE:SCALE, the scale after the last ':' */
                    char *colon = strrchr(item, ':'), *end;
                    if (!colon) return clinfer_fail(CLINFER_ERR_ARG, "--lora-scaled '%s': FILE:SCALE", item);
                    *colon = 0;
                    scale = strtof(colon + 1, &end);
                    if (end == colon + 1 || *end || !isfinite(scale))
                        return clinfer_fail(CLINFER_ERR_ARG, "--lora-scaled: '%s' is not a scale", colon + 1);
                }
                clinfer_lora *a;
                CLI_TRY(clinfer_lora_load(s->m, item, &a));
                CLI_TRY(clinfer_lora_set_scale(a, scale));
            }
        }
    }
    const int n = clinfer_model_lora_count(s->m);
    if (!n || !s->s) return CLINFER_OK;
    clinfer_lora *a[64];
    float sc[64];
    if (n > 64) return clinfer_fail(CLINFER_ERR_ARG, "%d LoRA adapters (at most 8 apply at once)", n);
    for (int i = 0; i < n; i++) a[i] = clinfer_model_lora(s->m, i), sc[i] = clinfer_lora_scale(a[i]);
    return clinfer_session_set_lora(s->s, 0, a, sc, n);
}

clinfer_status cli_session_open(const char *model, const cli_place *place, int n_ctx, clinfer_kv_type kv,
                                cli_session *s) {
    memset(s, 0, sizeof *s);
    s->lora_v[0] = place->lora.v, s->lora_v[1] = place->lora_scaled.v; /* read below, freed on close */
    cli_catch_sigint(); /* before loading, which Ctrl-C stops cleanly too */
    progress_line line = {.t0 = cli_now_s(), .tty = isatty(STDERR_FILENO)};
    clinfer_load_options mp = clinfer_load_default_options();
    mp.devices = place->devices;
    mp.split_ratio = place->ratio;
    mp.mpi = cli_mpi;
    mp.plan_n_ctx = place->n_ctx > 0 ? place->n_ctx : n_ctx > 0 ? n_ctx : 0;
    mp.plan_n_seq = place->n_seq;
    mp.plan_kv_type = kv;
    mp.no_mmap = place->no_mmap;
    mp.mlock = place->mlock;
    mp.progress = on_progress;
    mp.progress_user_data = &line;
    mp.abort = cli_abort_requested;
    mp.notice = on_notice;
    char path[4096]; /* a catalogue name fetched on first use */
    clinfer_status st = check_split(place);
    cli_threads_begin(place->threads);
    if (st == CLINFER_OK) st = cli_model_fetch(model, 0, path, sizeof path);
    if (st == CLINFER_OK) st = clinfer_model_load_with(path, place->device, NULL, &mp, &s->m);
    if (line.open) fputc('\n', stderr); /* a progress line cut short ends before the message */
    if (st == CLINFER_OK && !place->devices) cli_threads_check(place->threads, place->device);
    if (st == CLINFER_OK) st = set_chat_template(s->m, place);
    if (st == CLINFER_OK) {
        s->info.size = sizeof s->info;
        st = clinfer_model_get_info(s->m, &s->info);
    }
    if (st == CLINFER_OK && n_ctx >= 0) {
        clinfer_session_params sp = clinfer_session_default_params();
        sp.n_ctx = n_ctx;
        sp.kv_type = kv;
        st = clinfer_session_create(s->m, &sp, &s->s);
    }
    if (st == CLINFER_OK) st = load_loras(s, place);
    /* whatever failed after a Ctrl-C failed for it: LLVM, compiling kernels
     * inside PoCL, deletes its temporary files on SIGINT */
    if (st != CLINFER_OK && (st == CLINFER_ERR_INTERRUPTED || cli_interrupted))
        st = clinfer_fail(CLINFER_ERR_INTERRUPTED, "loading stopped by %s", cli_interrupt_name());
    if (st != CLINFER_OK) cli_session_close(s);
    return st;
}

clinfer_status cli_session_add_draft(cli_session *s, const cli_draft_opts *d, const cli_place *place,
                                     clinfer_kv_type kv) {
    if (!d->model) {
        if (d->min || d->p_min > 0) return clinfer_fail(CLINFER_ERR_ARG, "--draft-min and --draft-p-min go with -md FILE");
        return CLINFER_OK;
    }
    cli_session ds;
    cli_place dplace = *place; /* the LoRA adapters are the target's */
    dplace.lora = dplace.lora_scaled = (cli_list){0};
    clinfer_status st = cli_session_open(d->model, &dplace, clinfer_session_n_ctx(s->s), kv, &ds);
    char why[1024]; /* the message, copied: clinfer_fail writes where clinfer_last_error points */
    if (st != CLINFER_OK) {
        snprintf(why, sizeof why, "%s", clinfer_last_error());
        return clinfer_fail(st, "the draft model (-md %s): %s", d->model, why);
    }
    st = cli_session_warm(&ds, 16); /* its kernels too, before the text prints */
    clinfer_draft_model_params dp = clinfer_draft_model_default_params();
    if (d->max > 0) dp.draft_max = d->max;
    dp.draft_min = d->min;
    dp.p_min = d->p_min;
    if (dp.draft_min > dp.draft_max)
        st = clinfer_fail(CLINFER_ERR_ARG, "--draft-min %d is above --draft-max %d", dp.draft_min, dp.draft_max);
    if (st == CLINFER_OK) st = clinfer_drafter_create_model(s->m, ds.s, &dp, &s->drafter);
    if (st != CLINFER_OK) {
        snprintf(why, sizeof why, "%s", clinfer_last_error());
        st = clinfer_fail(st, "-md %s: %s", d->model, why);
        cli_session_close(&ds);
        return st;
    }
    s->draft_m = ds.m;
    s->draft_s = ds.s;
    clinfer_session_set_drafter(s->s, s->drafter); /* clinfer_generate's: -md's, not a prompt lookup */
    return CLINFER_OK;
}

void cli_session_close(cli_session *s) {
    free(s->lora_v[0]);
    free(s->lora_v[1]);
    clinfer_drafter_free(s->drafter);
    clinfer_session_free(s->draft_s);
    clinfer_model_free(s->draft_m);
    clinfer_session_free(s->s);
    clinfer_model_free(s->m);
    memset(s, 0, sizeof *s);
}

typedef struct stream {
    FILE *out;
    clinfer_status st;
    /* reasoning apart (cli_generate_reasoning): the splitter, or NULL */
    srv_think *think;
    int hide, tty;      /* reasoning not shown; out is a terminal (reasoning dim) */
    int in_dim, shown;  /* the dim attribute is on; reasoning was shown (a line before the answer) */
    /* --reasoning-budget (server/reasoning.h's srv_budget), or NULL; a close due stops the generation */
    srv_budget *budget;
    int close_due;       /* the close came due: first_close is its first token, taken */
    int32_t first_close;
    int max, n_tok;      /* the tokens the generation may take, has taken */
} stream;

static int put(stream *o, const char *p, size_t n) {
    if (n && fwrite(p, 1, n, o->out) != n) {
        o->st = clinfer_fail(CLINFER_ERR_IO, "cannot write the generated text: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* What the splitter decided: reasoning dim (on a terminal) or not at all
 * (hide), then the answer on a line of its own. */
static void show_split(stream *o, const srv_buf *r, const srv_buf *c) {
    if (r->n && !o->hide) {
        if (o->tty && !o->in_dim && put(o, "\033[2m", 4) == 0) o->in_dim = 1;
        put(o, r->p, r->n);
        o->shown = 1;
    }
    if (c->n) {
        if (o->in_dim && put(o, "\033[0m", 4) == 0) o->in_dim = 0;
        if (o->shown == 1 && put(o, "\n\n", 2) == 0) o->shown = 2; /* once, between the thought and the answer */
        put(o, c->p, c->n);
    }
}

static int write_piece(stream *o, const char *piece, size_t n, int final) {
    if (!o->think) return put(o, piece, n);
    srv_buf r = {0}, c = {0};
    if (srv_think_feed(o->think, piece, n, final, &r, &c)) o->st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    else show_split(o, &r, &c);
    if (final && o->in_dim && put(o, "\033[0m", 4) == 0) o->in_dim = 0;
    srv_buf_free(&r), srv_buf_free(&c);
    return o->st == CLINFER_OK ? 0 : -1;
}

/* Streams text as it is generated; a failed write or Ctrl-C stops it. */
static int emit(void *ud, int32_t token, const char *piece, size_t n) {
    (void)token;
    stream *o = ud;
    if (o->st != CLINFER_OK) return 1;
    if (n && write_piece(o, piece, n, 0) == 0 && fflush(o->out) != 0)
        o->st = clinfer_fail(CLINFER_ERR_IO, "cannot write the generated text: %s", strerror(errno));
    /* the budget spent: the generation stops here, the caller goes on after the close */
    if (o->budget && token >= 0 && o->st == CLINFER_OK) {
        o->n_tok++;
        if (srv_budget_push(o->budget, piece, n)) o->st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        /* forced where the close and one token after it fit (else the text ends inside the thought, as without) */
        else if (o->n_tok + o->budget->n_close < o->max && srv_budget_next(o->budget, &o->first_close))
            return o->close_due = 1;
    }
    return o->st != CLINFER_OK || cli_interrupted;
}

/* The close the budget forces after pre[0, n_pre) (the prompt, or the
 * token the stopped generation sampled and did not evaluate), all into
 * *ids (*n of them): its text shown (and pushed) as if the model had
 * written it. */
static clinfer_status budget_close(cli_session *s, stream *o, const int32_t *pre, int n_pre, int32_t **ids, int *n) {
    srv_budget *b = o->budget;
    *n = 0;
    if (!(*ids = malloc(((size_t)n_pre + (size_t)b->n_close) * sizeof **ids)))
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    if (n_pre) memcpy(*ids, pre, (size_t)n_pre * sizeof *pre);
    *n = n_pre;
    int32_t t = o->first_close; /* taken when the close came due; then the rest, in turn */
    do (*ids)[(*n)++] = t;
    while (srv_budget_next(b, &t));
    clinfer_detokenizer *d;
    clinfer_status st = clinfer_detokenizer_create(s->m, 0, &d);
    for (int i = n_pre; st == CLINFER_OK && i < *n; i++) {
        const char *piece;
        size_t k;
        st = clinfer_detokenizer_push(d, (*ids)[i], &piece, &k);
        if (st == CLINFER_OK && k && write_piece(o, piece, k, 0)) st = o->st;
        if (st == CLINFER_OK && srv_budget_push(b, piece, k))
            st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    clinfer_detokenizer_free(d);
    o->close_due = 0;
    return st;
}

clinfer_status cli_reasoning_mode(const char *format, int hide, cli_reasoning *out) {
    srv_reasoning_format f = SRV_REASONING_AUTO;
    if (format && srv_reasoning_format_parse(format, &f))
        return clinfer_fail(CLINFER_ERR_ARG, "--reasoning-format %s: not auto, none or deepseek", format);
    *out = hide ? CLI_REASONING_HIDE : f == SRV_REASONING_NONE ? CLI_REASONING_INLINE : CLI_REASONING_APART;
    return CLINFER_OK;
}

clinfer_status cli_generate(cli_session *s, clinfer_sampler *smp, const int32_t *prompt, int n_prompt, int max_gen,
                            int draft_max, FILE *out, clinfer_generate_result *r) {
    return cli_generate_reasoning(s, smp, prompt, n_prompt, max_gen, draft_max, CLI_REASONING_INLINE, -1, out, r);
}

/* The syntax the prompt's end calls for (server/reasoning.h's
 * srv_think_detect on its last tokens, control tokens as text). */
static srv_think_syntax prompt_syntax(const cli_session *s, const int32_t *prompt, int n, int *open) {
    enum { TAIL = 8 };
    clinfer_detokenizer *d;
    srv_buf tail = {0};
    if (clinfer_detokenizer_create(s->m, 1, &d) == CLINFER_OK) {
        for (int i = n > TAIL ? n - TAIL : 0; i < n; i++) {
            const char *p;
            size_t k;
            if (clinfer_detokenizer_push(d, prompt[i], &p, &k) == CLINFER_OK && k) srv_buf_add(&tail, p, k);
        }
        clinfer_detokenizer_free(d);
    }
    srv_think_syntax syn = srv_think_detect(tail.p ? tail.p : "", tail.n, open);
    srv_buf_free(&tail);
    return syn;
}

clinfer_status cli_generate_reasoning(cli_session *s, clinfer_sampler *smp, const int32_t *prompt, int n_prompt,
                                      int max_gen, int draft_max, cli_reasoning mode, int budget, FILE *out,
                                      clinfer_generate_result *r) {
    stream o = {out, CLINFER_OK, NULL, mode == CLI_REASONING_HIDE, isatty(fileno(out)), 0, 0, NULL, 0, 0, 0, 0};
    srv_think think;
    srv_budget bud;
    clinfer_status st = CLINFER_OK;
    int open = 0;
    /* Harmony's markers are control tokens, which the text here leaves out: shown as written, no budget */
    srv_think_syntax syn = mode != CLI_REASONING_INLINE || budget >= 0 ? prompt_syntax(s, prompt, n_prompt, &open)
                                                                         : SRV_THINK_OFF;
    if (mode != CLI_REASONING_INLINE && syn == SRV_THINK_TAGS) {
        srv_think_init(&think, syn, open);
        o.think = &think;
    }
    if (budget >= 0 && syn == SRV_THINK_TAGS) {
        if ((st = srv_budget_init(&bud, s->m, syn, open, budget)) != CLINFER_OK) {
            if (o.think) srv_think_free(&think);
            return st;
        }
        o.budget = &bud;
    }
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.draft_max = draft_max;
    gp.sampler = smp;
    gp.on_token = emit;
    gp.user_data = &o;
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    /* Under a budget the generation stops where the close comes due and
     * goes on from the close's tokens, evaluated as a prompt after the
     * token it stopped at (which the sampler records twice: penalties
     * aside, the same). The close's tokens count as generated. */
    const int32_t *p = prompt;
    int np = n_prompt, left = max_gen, n_forced = 0;
    int32_t *ids = NULL;
    if (o.budget && o.budget->n_close < left && srv_budget_next(o.budget, &o.first_close)) { /* budget 0: at once */
        st = budget_close(s, &o, prompt, n_prompt, &ids, &np);
        p = ids, n_forced = o.budget->n_close, left -= n_forced;
    }
    for (int part = 0; st == CLINFER_OK; part++) {
        clinfer_generate_result g = {.size = sizeof g};
        gp.max_tokens = o.max = left;
        o.n_tok = 0;
        st = clinfer_generate(s->s, p, np, &gp, &g);
        if (part == 0) { /* the call's prompt was the prompt (and a close forced at once) */
            *r = g;
            if (r->n_prompt) r->n_prompt -= n_forced, r->n_eval += n_forced; /* evaluated */
            r->n_generated += n_forced;
        } else { /* the call's prompt was the last token and the close: generation */
            r->stop = g.stop;
            r->last = g.last;
            r->n_generated += g.n_generated + n_forced;
            r->n_eval += g.n_prompt + g.n_eval;
            r->generate_seconds += g.prompt_seconds + g.generate_seconds;
            r->build_seconds += g.build_seconds;
            r->n_drafted += g.n_drafted;
            r->n_accepted += g.n_accepted;
        }
        if (st != CLINFER_OK || !o.close_due || o.st != CLINFER_OK) break;
        left -= g.n_generated;
        free(ids);
        st = budget_close(s, &o, &g.last, 1, &ids, &np);
        p = ids, n_forced = o.budget->n_close, left -= n_forced;
    }
    free(ids);
    if (o.budget) srv_budget_free(&bud);
    if (o.think) { /* what the splitter held: an unterminated thought, a half tag */
        if (o.st == CLINFER_OK) write_piece(&o, NULL, 0, 1);
        srv_think_free(&think);
        if (o.st == CLINFER_OK && fflush(out) != 0)
            o.st = clinfer_fail(CLINFER_ERR_IO, "cannot write the generated text: %s", strerror(errno));
    }
    if (o.st != CLINFER_OK) return o.st;
    if (cli_interrupted && (st != CLINFER_OK || r->stop == CLINFER_STOP_CALLBACK)) /* failed for it, or stopped by it */
        return clinfer_fail(CLINFER_ERR_INTERRUPTED, "%s stopped by %s",
                            r->n_prompt ? "generation" : "prompt processing", cli_interrupt_name());
    return st;
}

clinfer_status cli_session_warm(cli_session *s, int n_prompt) {
    if (!s->s) return CLINFER_OK;
    double b0 = clinfer_model_build_seconds(s->m), t0 = cli_now_s();
    /* a token's pass first (the device's top-k too), then the prompt's shape:
     * PoCL also readies each kernel on its first launch, outside the builds */
    int32_t toks[16] = {0}, id;
    float val;
    int bad = 0;
    int nb = n_prompt < 16 ? n_prompt : 16;
    if (nb > clinfer_session_n_ctx(s->s)) nb = clinfer_session_n_ctx(s->s);
    clinfer_status st = clinfer_eval_top(s->s, toks, 1, 1, &val, &id, &bad);
    if (st == CLINFER_OK) st = clinfer_session_rewind(s->s, 0);
    if (st == CLINFER_OK && nb > 1) st = clinfer_eval_top(s->s, toks, nb, 1, &val, &id, &bad);
    if (st == CLINFER_OK) st = clinfer_session_rewind(s->s, 0);
    s->warm_seconds = cli_now_s() - t0;
    s->kernel_seconds = clinfer_model_build_seconds(s->m) - b0;
    if (st != CLINFER_OK && cli_interrupted)
        st = clinfer_fail(CLINFER_ERR_INTERRUPTED, "loading stopped by %s", cli_interrupt_name());
    return st;
}

void cli_print_stats(const cli_session *s, const clinfer_generate_result *r) {
    char kernels[48] = "", drafts[64] = "", eval[96];
    /* built before the first token (the warm-up) or on the way: never inside a speed */
    double k = s->kernel_seconds + r->build_seconds;
    if (k > 0.005) snprintf(kernels, sizeof kernels, " | kernels %.2f s", k);
    if (r->n_drafted > 0)
        snprintf(drafts, sizeof drafts, " | drafted %d, accepted %d (%.0f%%)", r->n_drafted, r->n_accepted,
                 100.0 * r->n_accepted / r->n_drafted);
    if (r->n_eval > 0 && r->generate_seconds > 0)
        snprintf(eval, sizeof eval, "eval %d tokens, %.1f t/s", r->n_eval, r->n_eval / r->generate_seconds);
    else /* -n 1: the one token is the prompt pass's; nothing further was evaluated to time */
        snprintf(eval, sizeof eval, "eval none (%s)",
                 r->n_generated ? "the one token comes from the prompt's logits" : "no token generated");
    fprintf(stderr, "\nclinfer: %s | load %.2f s%s | prompt eval %d tokens, %.1f t/s | %s | generated %d tokens%s\n",
            s->info.devices, s->info.load_seconds, kernels, r->n_prompt,
            r->prompt_seconds > 0 ? r->n_prompt / r->prompt_seconds : 0, eval, r->n_generated, drafts);
}

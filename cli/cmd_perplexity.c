/* clinfer perplexity: llama.cpp's method (see models/perplexity.h) over a
 * text file, with a running value per chunk on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "file.h"
#include "perplexity.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer perplexity -f TEXT [--ctx 512] [--chunks N] " CLI_MODEL_USAGE;

static void on_chunk(const clf_ppl_progress *p, void *user) {
    double el = clf_now_s() - *(double *)user;
    fprintf(stderr, "\rclinfer: chunk %d/%d  ppl %.4f  (%.1f s, %.1f s/chunk)", p->chunk, p->n_chunks, p->ppl, el,
            el / p->chunk);
    if (p->chunk == p->n_chunks) fputc('\n', stderr);
}

/* The whole text file (a FIFO or a device is refused, not waited on). */
static clf_status read_file(const char *path, char **text, size_t *len) {
    int fd;
    CLF_TRY(clf_open_regular(path, &fd));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory reading %s", path);
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory reading %s", path);
    if (err) {
        free(buf);
        return clf_fail(CLF_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    }
    *text = buf;
    *len = n;
    return CLF_OK;
}

int cmd_perplexity(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *file = NULL;
    int chunks = 0, n_ctx = 512;
    const cli_option opts[] = {CLI_MODEL_OPTIONS(&o),
                               CLI_OPT_STR("-f", &file),
                               CLI_OPT_INT("--ctx", &n_ctx, 4, 1 << 20),
                               CLI_OPT_INT("--chunks", &chunks, 1, 1 << 30),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!file) return cli_usage(USAGE, "no text file (-f)");
    char *text = NULL;
    size_t len = 0;
    clf_status st = read_file(file, &text, &len);
    if (st != CLF_OK) return cli_error(st);
    cli_session s;
    o.n_ctx = n_ctx;
    st = cli_session_open(o.model, &o.place, n_ctx, o.kv, &s);
    if (st != CLF_OK) {
        free(text);
        return cli_error(st);
    }
    int32_t *ids = NULL;
    int n = 0, scored = 0;
    double ppl = 0;
    st = clf_tokenize(s.tok, text, len, 1, 0, &ids, &n);
    free(text);
    if (st == CLF_OK) {
        if (chunks && (long long)n > (long long)chunks * n_ctx) n = (int)((long long)chunks * n_ctx);
        fprintf(stderr, "clinfer: %s, %d tokens, %d chunks of %d\n", file, n, n / n_ctx, n_ctx);
        double t0 = clf_now_s();
        int32_t bos = clf_tokenizer_add_bos(s.tok) ? clf_tokenizer_bos(s.tok) : -1;
        st = clf_perplexity(s.c, ids, n, n_ctx, bos, on_chunk, &t0, &ppl, &scored);
    }
    if (st == CLF_OK) printf("perplexity %.4f over %d scored tokens (%d chunks of %d)\n", ppl, scored, n / n_ctx, n_ctx);
    free(ids);
    cli_session_close(&s);
    return cli_error(st);
}

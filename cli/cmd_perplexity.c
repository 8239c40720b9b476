/* clinfer perplexity: llama.cpp's method (see models/perplexity.h) over a
 * text file, with a running value per chunk on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perplexity.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer perplexity -f TEXT [--ctx 512] [--chunks N] [-m MODEL] [--device SEL] [--kv f32|f16]";

static void on_chunk(const clf_ppl_progress *p, void *user) {
    double el = clf_now_s() - *(double *)user;
    fprintf(stderr, "\rclinfer: chunk %d/%d  ppl %.4f  (%.1f s, %.1f s/chunk)", p->chunk, p->n_chunks, p->ppl, el,
            el / p->chunk);
    if (p->chunk == p->n_chunks) fputc('\n', stderr);
}

static clf_status read_file(const char *path, char **text, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return clf_fail(CLF_ERR_IO, "cannot open %s", path);
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
    int err = ferror(f);
    fclose(f);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory reading %s", path);
    if (err) {
        free(buf);
        return clf_fail(CLF_ERR_IO, "cannot read %s (a directory?)", path);
    }
    *text = buf;
    *len = n;
    return CLF_OK;
}

int cmd_perplexity(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *file = NULL;
    long long chunks = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_gen_opt(&o, argc, argv, &i, USAGE);
        if (r < 0) return CLF_ERR_ARG;
        if (r) continue;
        if (cli_opt(argc, argv, &i, "-f", &v)) file = v;
        else if (cli_opt(argc, argv, &i, "--chunks", &v)) {
            if (cli_int(v, 1, 1 << 30, &chunks)) return cli_usage(USAGE, "bad --chunks '%s'", v);
        } else if (cli_flag(argv, i, "--help")) {
            printf("usage: %s\n", USAGE);
            return 0;
        } else return cli_usage(USAGE, "unknown option '%s'", argv[i]);
    }
    if (!file) return cli_usage(USAGE, "no text file (-f)");
    int n_ctx = o.n_ctx ? o.n_ctx : 512;
    if (n_ctx < 4) return cli_usage(USAGE, "--ctx must be at least 4");
    char *text = NULL;
    size_t len = 0;
    clf_status st = read_file(file, &text, &len);
    if (st != CLF_OK) return cli_error(st);
    cli_session s;
    o.n_ctx = n_ctx;
    st = cli_session_open(o.model, o.device, n_ctx, o.kv, &s);
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
        if (chunks && (long long)n > chunks * n_ctx) n = (int)(chunks * n_ctx);
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

/* clinfer perplexity: llama.cpp's method (clinfer_perplexity) over a text
 * file, with a running value per chunk on stderr. */
#include <stdio.h>

#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer perplexity -f TEXT [-c|--ctx 512] [--chunks N] " CLI_MODEL_USAGE;

static int on_chunk(void *user, int chunk, int n_chunks, double ppl) {
    double el = cli_now_s() - *(double *)user;
    fprintf(stderr, "\rclinfer: chunk %d/%d  ppl %.4f  (%.1f s, %.1f s/chunk)", chunk, n_chunks, ppl, el, el / chunk);
    if (chunk == n_chunks) fputc('\n', stderr);
    return 0; /* Ctrl-C: the model's abort callback */
}

int cmd_perplexity(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *file = NULL;
    int chunks = 0, n_ctx = 512;
    const cli_option opts[] = {CLI_MODEL_OPTIONS(&o),
                               CLI_OPT_STR("-f", &file, .alias = "--file", .arg = "TEXT", .help = "the text file to score"),
                               CLI_OPT_INT("--ctx", &n_ctx, 4, 1 << 20, .alias = "-c",
                                           .help = "tokens per chunk (default 512); the second half of each is scored"),
                               CLI_OPT_INT("--chunks", &chunks, 1, 1 << 30, .help = "score only the first N chunks"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!file) return cli_usage(USAGE, "no text file (-f)");
    char *text = NULL;
    size_t len = 0;
    clinfer_status st = clinfer_read_file(file, &text, &len);
    if (st != CLINFER_OK) return cli_error(st);
    cli_session s;
    o.n_ctx = n_ctx;
    st = cli_session_open(o.model, &o.place, n_ctx, o.kv, &s);
    if (st != CLINFER_OK) {
        clinfer_free(text);
        return cli_error(st);
    }
    int32_t *ids = NULL;
    int n = 0, scored = 0;
    double ppl = 0;
    st = clinfer_tokenize(s.m, text, len, 1, 0, &ids, &n);
    clinfer_free(text);
    if (st == CLINFER_OK) {
        if (chunks && (long long)n > (long long)chunks * n_ctx) n = (int)((long long)chunks * n_ctx);
        fprintf(stderr, "clinfer: %s, %d tokens, %d chunks of %d\n", file, n, n / n_ctx, n_ctx);
        double t0 = cli_now_s();
        st = clinfer_perplexity(s.s, ids, n, n_ctx, on_chunk, &t0, &ppl, &scored);
    }
    if (st == CLINFER_OK) printf("perplexity %.4f over %d scored tokens (%d chunks of %d)\n", ppl, scored, n / n_ctx, n_ctx);
    clinfer_free(ids);
    cli_session_close(&s);
    return cli_error(st);
}

/* clinfer embed: each input's embedding (clinfer_embed) as a JSON array of
 * floats, one line per input in the order given (JSON Lines): the -p texts,
 * or every line of a file (-f). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE =
    "clinfer embed (-p TEXT [-p TEXT ...] | -f FILE) [--pooling mean|cls|last|none] [--no-normalize] [-c|--ctx N] "
    CLI_MODEL_USAGE "\n"
    "  a line per input on stdout: [x, x, ...], n_embd floats";

static const char *const POOLINGS[] = {"none", "mean", "cls", "last"}; /* clinfer_pooling's values */

static void print_vector(const float *v, int d) {
    putchar('[');
    for (int k = 0; k < d; k++) printf(k ? ", %.9g" : "%.9g", v[k]);
    putchar(']');
}

/* The file's lines as inputs (in place: the NULs end them); an empty line
 * is refused, a last newline ends the last line. */
static clinfer_status file_lines(char *text, size_t len, const char *file, cli_list *in) {
    int line = 1;
    for (char *p = text; p < text + len; line++) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p)), *end = nl ? nl : text + len;
        if (end > p && end[-1] == '\r') end[-1] = 0, end--;
        if (end == p) return clinfer_fail(CLINFER_ERR_ARG, "%s: line %d is empty (one input per line)", file, line);
        if (memchr(p, 0, (size_t)(end - p))) return clinfer_fail(CLINFER_ERR_ARG, "%s: line %d holds a NUL byte", file, line);
        const char **grown = realloc(in->v, (size_t)(in->n + 1) * sizeof *grown);
        if (!grown) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        in->v = grown;
        in->v[in->n++] = p;
        *end = 0;
        p = nl ? nl + 1 : text + len;
    }
    if (in->n == 0) return clinfer_fail(CLINFER_ERR_ARG, "%s has no inputs", file);
    return CLINFER_OK;
}

int cmd_embed(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    cli_list texts = {0};
    const char *file = NULL, *pooling = NULL;
    int no_normalize = 0;
    const cli_option opts[] = {CLI_MODEL_OPTIONS(&o),
                               CLI_OPT_LIST("-p", &texts, .help = "an input (repeatable)"),
                               CLI_OPT_STR("-f", &file, .alias = "--file", .arg = "FILE", .help = "one input per line of FILE"),
                               CLI_OPT_STR("--pooling", &pooling, .arg = "P",
                                           .help = "mean, cls, last (default: the model's, else mean) or none: every "
                                                   "token's, a line of arrays per input"),
                               CLI_OPT_FLAG("--no-normalize", &no_normalize,
                                            .help = "the vectors as pooled (default: L2-normalised)"),
                               CLI_OPT_INT("--ctx", &o.n_ctx, 1, 1 << 20, .alias = "-c", .help = "context size in tokens"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    clinfer_embed_params ep = clinfer_embed_default_params();
    ep.normalize = !no_normalize;
    if (rc < 0 && !texts.n == !file)
        rc = cli_usage(USAGE, texts.n ? "-p and -f do not go together" : "no input (-p TEXT or -f FILE)");
    if (rc < 0 && pooling) {
        int k = 0;
        while (k < 4 && strcmp(pooling, POOLINGS[k])) k++;
        if (k < 4) ep.pooling = (clinfer_pooling)k;
        else rc = cli_usage(USAGE, "--pooling '%s' is not mean, cls, last or none", pooling);
    }
    if (rc >= 0) {
        free(texts.v);
        return rc;
    }
    char *data = NULL;
    size_t len = 0;
    clinfer_status st = file ? clinfer_read_file(file, &data, &len) : CLINFER_OK;
    if (st == CLINFER_OK && file) st = file_lines(data, len, file, &texts);
    cli_session s = {0};
    if (st == CLINFER_OK) st = cli_session_open(o.model, &o.place, o.n_ctx, o.kv, &s);
    clinfer_model_info info = {.size = sizeof info};
    if (st == CLINFER_OK) st = clinfer_model_get_info(s.m, &info);
    const int n_ctx = s.s ? clinfer_session_n_ctx(s.s) : 0;
    float *v = NULL;
    /* one input at a time: its tokens, its vector, its line */
    for (int i = 0; st == CLINFER_OK && i < texts.n; i++) {
        int32_t *ids = NULL;
        int n = 0;
        st = clinfer_tokenize(s.m, texts.v[i], strlen(texts.v[i]), 1, 0, &ids, &n);
        if (st == CLINFER_OK && (n == 0 || !*texts.v[i])) st = clinfer_fail(CLINFER_ERR_ARG, "input %d is empty", i + 1);
        if (st == CLINFER_OK && n > n_ctx)
            st = clinfer_fail(CLINFER_ERR_CONTEXT, "input %d is %d tokens, longer than the context of %d (--ctx)", i + 1,
                              n, n_ctx);
        const int rows = ep.pooling == CLINFER_POOLING_NONE ? n : 1;
        float *grown = st == CLINFER_OK ? realloc(v, (size_t)rows * info.n_embd * sizeof *v) : NULL;
        if (st == CLINFER_OK && !grown) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        if (grown) v = grown;
        if (st == CLINFER_OK) st = clinfer_embed(s.s, ids, n, &ep, v);
        if (st == CLINFER_OK) {
            if (ep.pooling == CLINFER_POOLING_NONE) putchar('[');
            for (int r = 0; r < rows; r++) {
                if (r) printf(", ");
                print_vector(v + (size_t)r * info.n_embd, info.n_embd);
            }
            if (ep.pooling == CLINFER_POOLING_NONE) putchar(']');
            putchar('\n');
        }
        clinfer_free(ids);
    }
    free(v);
    free(texts.v);
    clinfer_free(data);
    cli_session_close(&s);
    return cli_error(st);
}

/* clinfer perplexity: llama.cpp's method (see models/perplexity.h) over a
 * text file, with a running value per chunk on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "sampling_opts.h"
#include "session.h"

static const char *USAGE = "clinfer perplexity -f TEXT [--ctx 512] [--chunks N] " CLI_MODEL_USAGE;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int on_chunk(void *user, int chunk, int n_chunks, double ppl) {
    double el = now_s() - *(double *)user;
    fprintf(stderr, "\rclinfer: chunk %d/%d  ppl %.4f  (%.1f s, %.1f s/chunk)", chunk, n_chunks, ppl, el, el / chunk);
    if (chunk == n_chunks) fputc('\n', stderr);
    return 0; /* Ctrl-C: the model's abort callback */
}

/* A regular file only: opening a FIFO for reading would wait for a writer. */
static clinfer_status open_regular(const char *path, int *fd_out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), flags;
    if (fd < 0) return clinfer_fail(CLINFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    clinfer_status st = CLINFER_OK;
    if (fstat(fd, &sb) != 0) st = clinfer_fail(CLINFER_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode)) st = clinfer_fail(CLINFER_ERR_IO, "'%s' is a directory, not a file", path);
    else if (!S_ISREG(sb.st_mode)) st = clinfer_fail(CLINFER_ERR_IO, "'%s' is not a regular file", path);
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        st = clinfer_fail(CLINFER_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (st != CLINFER_OK) close(fd);
    else *fd_out = fd;
    return st;
}

/* The whole text file (a FIFO or a device is refused, not waited on). */
static clinfer_status read_file(const char *path, char **text, size_t *len) {
    int fd = -1;
    CLI_TRY(open_regular(path, &fd));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory reading %s", path);
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
    if (!buf) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory reading %s", path);
    if (err) {
        free(buf);
        return clinfer_fail(CLINFER_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    }
    *text = buf;
    *len = n;
    return CLINFER_OK;
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
    clinfer_status st = read_file(file, &text, &len);
    if (st != CLINFER_OK) return cli_error(st);
    cli_session s;
    o.n_ctx = n_ctx;
    st = cli_session_open(o.model, &o.place, n_ctx, o.kv, &s);
    if (st != CLINFER_OK) {
        free(text);
        return cli_error(st);
    }
    int32_t *ids = NULL;
    int n = 0, scored = 0;
    double ppl = 0;
    st = clinfer_tokenize(s.m, text, len, 1, 0, &ids, &n);
    free(text);
    if (st == CLINFER_OK) {
        if (chunks && (long long)n > (long long)chunks * n_ctx) n = (int)((long long)chunks * n_ctx);
        fprintf(stderr, "clinfer: %s, %d tokens, %d chunks of %d\n", file, n, n / n_ctx, n_ctx);
        double t0 = now_s();
        st = clinfer_perplexity(s.s, ids, n, n_ctx, on_chunk, &t0, &ppl, &scored);
    }
    if (st == CLINFER_OK) printf("perplexity %.4f over %d scored tokens (%d chunks of %d)\n", ppl, scored, n / n_ctx, n_ctx);
    clinfer_free(ids);
    cli_session_close(&s);
    return cli_error(st);
}

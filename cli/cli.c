#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_error(clf_status st) {
    if (st == CLF_OK) return 0;
    fprintf(stderr, "clinfer: %s: %s\n", clf_status_name(st), clf_last_error());
    return (int)st;
}

int cli_close_stdout(int status) {
    errno = 0;
    int failed = ferror(stdout) | fflush(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !failed) failed = 1, err = errno;
    if (!failed || status != 0) return status; /* a failed command has said why already */
    return cli_error(clf_fail(CLF_ERR_IO, "cannot write to stdout: %s", err ? strerror(err) : "write error"));
}

int cli_usage(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "clinfer: %s: ", clf_status_name(CLF_ERR_ARG));
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s\n", usage);
    va_end(ap);
    return CLF_ERR_ARG;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] == 0 && *i + 1 < argc) {
        *val = argv[++*i];
        return 1;
    }
    return 0;
}

int cli_flag(char **argv, int i, const char *name) { return strcmp(argv[i], name) == 0; }

int cli_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

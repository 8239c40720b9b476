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

int cli_usage(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "clinfer: ");
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

int cli_float(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

enum { MAX_OPTS = 48, LONG_BASE = 256 }; /* getopt_long's value of long option i: LONG_BASE + i */

static int takes_value(const cli_option *o) { return o->kind != CLI_FLAG; }
static int is_long(const cli_option *o) { return o->name[1] == '-'; }

static void range_text(const cli_option *o, char *buf, size_t n) {
    if (o->kind != CLI_FLOAT) snprintf(buf, n, "%lld..%lld", o->lo, o->hi);
    else if (isinf(o->fhi)) snprintf(buf, n, "%s %g", o->open_lo ? ">" : ">=", o->flo);
    else snprintf(buf, n, "%g..%g", o->flo, o->fhi);
}

/* Stores an option's value: -1, or the usage error's status (printed). */
static int store(const cli_option *o, const char *v, const char *usage) {
    char range[64], *end;
    range_text(o, range, sizeof range);
    errno = 0;
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dst = 1; break;
    case CLI_STR:
        if (!*v) return cli_usage(usage, "%s must not be empty", o->name);
        *(const char **)o->dst = v;
        break;
    case CLI_TEXT: *(const char **)o->dst = v; break;
    case CLI_LIST: {
        cli_list *l = o->dst;
        const char **grown = realloc(l->v, (size_t)(l->n + 1) * sizeof *grown);
        if (!grown) return cli_error(clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory"));
        l->v = grown;
        l->v[l->n++] = v;
        break;
    }
    case CLI_KV: {
        static const char *const names[] = {"f32", "f16", "q8_0", "q4_0"}; /* clinfer_kv_type's order */
        int k = 0;
        while (k < 4 && strcasecmp(v, names[k])) k++;
        if (k == 4) return cli_usage(usage, "%s '%s' is not f32, f16, q8_0 or q4_0", o->name, v);
        *(clinfer_kv_type *)o->dst = (clinfer_kv_type)k;
        break;
    }
    case CLI_INT:
    case CLI_U64: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end) return cli_usage(usage, "%s '%s' is not an integer (%s)", o->name, v, range);
        if (errno || x < o->lo || x > o->hi) return cli_usage(usage, "%s %s is out of range (%s)", o->name, v, range);
        if (o->kind == CLI_INT) *(int *)o->dst = (int)x;
        else *(uint64_t *)o->dst = (uint64_t)x;
        break;
    }
    case CLI_FLOAT: {
        double x = strtod(v, &end);
        if (end == v || *end) return cli_usage(usage, "%s '%s' is not a number (%s)", o->name, v, range);
        if (errno || !isfinite(x) || x < o->flo || x > o->fhi || (o->open_lo && x == o->flo))
            return cli_usage(usage, "%s %s is out of range (%s)", o->name, v, range);
        *(float *)o->dst = (float)x;
        break;
    }
    }
    return -1;
}

/* The option getopt_long reported as `val` (a short letter or LONG_BASE + i). */
static const cli_option *find(const cli_option *opts, int n, int val) {
    if (val >= LONG_BASE && val < LONG_BASE + n) return &opts[val - LONG_BASE];
    for (int i = 0; i < n; i++)
        if (!is_long(&opts[i]) && opts[i].name[1] == val) return &opts[i];
    return NULL;
}

/* getopt_long's '?': an unknown or ambiguous option, or a value given to a flag. */
static int bad_option(const cli_option *opts, int n, const char *arg, const char *usage) {
    const cli_option *o = optopt ? find(opts, n, optopt) : NULL;
    if (o || optopt == 'h') return cli_usage(usage, "option '%s' takes no value", o ? o->name : "--help");
    if (optopt) return cli_usage(usage, "unknown option '-%c'", optopt);
    size_t len = strcspn(arg, "=");
    char cands[256] = "";
    int matches = 0;
    for (int i = 0; i < n; i++)
        if (is_long(&opts[i]) && !strncmp(opts[i].name, arg, len) && ++matches)
            snprintf(cands + strlen(cands), sizeof cands - strlen(cands), "%s%s", matches > 1 ? ", " : "",
                     opts[i].name);
    if (matches > 1) return cli_usage(usage, "ambiguous option '%.*s' (%s)", (int)len, arg, cands);
    return cli_usage(usage, "unknown option '%s'", arg);
}

int cli_parse(int argc, char **argv, const cli_option *opts, const char *usage, const char **pos, int max_pos,
              int *n_pos) {
    struct option longs[MAX_OPTS + 2];
    char shorts[2 * MAX_OPTS + 3] = ":h"; /* ':' first: a missing value is reported as such */
    int n = 0, nl = 0;
    size_t ns = 2;
    for (; opts[n].name; n++) {
        if (n == MAX_OPTS) return cli_usage(usage, "internal error: more than %d options", MAX_OPTS);
        int arg = takes_value(&opts[n]) ? required_argument : no_argument;
        if (is_long(&opts[n])) longs[nl++] = (struct option){opts[n].name + 2, arg, NULL, LONG_BASE + n};
        else {
            shorts[ns++] = opts[n].name[1];
            if (arg == required_argument) shorts[ns++] = ':';
        }
    }
    longs[nl++] = (struct option){"help", no_argument, NULL, 'h'};
    longs[nl] = (struct option){0};
    shorts[ns] = 0;
    if (n_pos) *n_pos = 0;
    opterr = 0; /* the messages are ours */
    optind = 0; /* 0, not 1: glibc starts over completely */
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: %s\n", usage);
            return 0;
        }
        if (c == ':') {
            const cli_option *o = find(opts, n, optopt);
            return cli_usage(usage, "option '%s' needs a value", o ? o->name : argv[optind - 1]);
        }
        if (c == '?') return bad_option(opts, n, argv[optind - 1], usage);
        const char *v = optarg;
        if (c < LONG_BASE && v && v == argv[optind - 1] + 2 && *v == '=') v++; /* -n=5, as before getopt */
        int rc = store(find(opts, n, c), v, usage);
        if (rc >= 0) return rc;
    }
    for (int i = optind; i < argc; i++) {
        if (!n_pos || *n_pos == max_pos)
            return max_pos ? cli_usage(usage, "too many arguments ('%s')", argv[i])
                           : cli_usage(usage, "unexpected argument '%s'", argv[i]);
        pos[(*n_pos)++] = argv[i];
    }
    return -1;
}

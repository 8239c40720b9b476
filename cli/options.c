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
static int numeric(const cli_option *o) { return o->kind == CLI_INT || o->kind == CLI_U64 || o->kind == CLI_FLOAT; }
/* The short letter an option answers to (its name's or its alias'), 0 for none. */
static int short_of(const cli_option *o) {
    if (!is_long(o)) return o->name[1];
    return o->alias && o->alias[1] != '-' && !o->alias[2] ? o->alias[1] : 0;
}

/* A single-dash alias of several letters (llama.cpp's -np): getopt would
 * read it as letters, so the word is renamed to its option's long name
 * before getopt sees it. */
static void rename_words(int argc, char **argv, const cli_option *opts, int n) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        for (int k = 0; k < n; k++)
            if (opts[k].alias && opts[k].alias[1] != '-' && opts[k].alias[2] && is_long(&opts[k]) &&
                !strcmp(argv[i], opts[k].alias))
                argv[i] = (char *)opts[k].name;
}

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
        if (short_of(&opts[i]) == val) return &opts[i];
    return NULL;
}

/* The long option `arg` (after its "--", up to any '=') names: exact, else
 * a unique abbreviation (as getopt_long takes them); NULL for none. */
static const cli_option *find_long(const cli_option *opts, int n, const char *arg) {
    size_t len = strcspn(arg, "=");
    const cli_option *hit = NULL;
    int hits = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            const char *nm = k ? opts[i].alias : opts[i].name;
            if (!nm || nm[1] != '-' || strncmp(nm + 2, arg, len)) continue;
            if (!nm[2 + len]) return &opts[i];
            if (hit != &opts[i]) hits++;
            hit = &opts[i];
        }
    return hits == 1 ? hit : NULL;
}

/* What llama.cpp users type that clinfer does otherwise: the hint. */
static const char *foreign_hint(const char *arg) {
    static const char *const gpu[] = {"-ngl", "--n-gpu-layers", "--gpu-layers", "-ngld", "--n-gpu-layers-draft"};
    size_t len = strcspn(arg, "=");
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++)
        if (strlen(gpu[i]) == len && !strncmp(arg, gpu[i], len))
            return ": clinfer runs every layer on the one OpenCL device it picks, --device SEL (`clinfer devices` "
                   "lists them; CLINFER_DEVICE)";
    return "";
}

/* Before getopt: a single-dash word that is not an option with its value
 * attached (-n5, -pHello) is one unknown option, named whole: getopt alone
 * reads -ngl 99 as -n gl, and -fa as -f a. A number's value must start
 * like a number. Values of options that take the next word are skipped.
 * Returns the argument at fault, or NULL. */
static const char *unknown_word(int argc, char **argv, const cli_option *opts, int n) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) break;
        if (a[0] != '-' || !a[1]) continue; /* an argument, or "-" */
        if (a[1] == '-') {
            const cli_option *o = find_long(opts, n, a + 2);
            if (!strchr(a, '=') && o && takes_value(o)) i++;
            continue;
        }
        const cli_option *o = a[1] == 'h' || a[1] == 'V' ? NULL : find(opts, n, (unsigned char)a[1]);
        if (!a[2]) {
            if (o && takes_value(o)) i++;
            continue;
        }
        if (a[2] == '=' && o) continue;
        if (!o || !takes_value(o) || (numeric(o) && !strchr("0123456789+-.", a[2]))) return a;
    }
    return NULL;
}

/* --help: the usage line, then every option of the table with its meaning. */
static void print_help(const cli_option *opts, int n, const char *usage) {
    printf("usage: %s\n\noptions:\n", usage);
    for (int i = 0; i < n; i++) {
        const cli_option *o = &opts[i];
        static const char *const by_kind[] = {"", "NAME", "TEXT", "N", "N", "X", "TYPE", "TEXT"};
        const char *arg = o->arg ? o->arg : by_kind[o->kind];
        char left[96];
        if (o->alias && o->alias[1] != '-') snprintf(left, sizeof left, "%s, %s%s%s", o->alias, o->name, *arg ? " " : "", arg);
        else if (o->alias) snprintf(left, sizeof left, "%s, %s%s%s", o->name, o->alias, *arg ? " " : "", arg);
        else snprintf(left, sizeof left, "%s%s%s", o->name, *arg ? " " : "", arg);
        printf("  %-24s %s\n", left, o->help ? o->help : "(undocumented)");
    }
    printf("  %-24s %s\n  %-24s %s\n", "-h, --help", "this help", "-V, --version", "the version of clinfer");
}

/* getopt_long's '?': an unknown or ambiguous option, or a value given to a flag. */
static int bad_option(const cli_option *opts, int n, const char *arg, const char *usage) {
    const cli_option *o = optopt ? find(opts, n, optopt) : NULL;
    if (o || optopt == 'h') return cli_usage(usage, "option '%s' takes no value", o ? o->name : "--help");
    if (optopt == 'V') return cli_usage(usage, "option '--version' takes no value");
    if (optopt) return cli_usage(usage, "unknown option '-%c'", optopt);
    size_t len = strcspn(arg, "=");
    char cands[256] = "";
    int matches = 0;
    for (int i = 0; i < n; i++)
        if (is_long(&opts[i]) && !strncmp(opts[i].name, arg, len) && ++matches)
            snprintf(cands + strlen(cands), sizeof cands - strlen(cands), "%s%s", matches > 1 ? ", " : "",
                     opts[i].name);
    if (matches > 1) return cli_usage(usage, "ambiguous option '%.*s' (%s)", (int)len, arg, cands);
    return cli_usage(usage, "unknown option '%.*s'%s", (int)len, arg, foreign_hint(arg));
}

int cli_parse(int argc, char **argv, const cli_option *opts, const char *usage, const char **pos, int max_pos,
              int *n_pos) {
    struct option longs[2 * MAX_OPTS + 3];
    char shorts[2 * MAX_OPTS + 4] = ":hV"; /* ':' first: a missing value is reported as such */
    int n = 0, nl = 0;
    size_t ns = 3;
    for (; opts[n].name; n++) {
        if (n == MAX_OPTS) return cli_usage(usage, "internal error: more than %d options", MAX_OPTS);
        int arg = takes_value(&opts[n]) ? required_argument : no_argument;
        if (is_long(&opts[n])) longs[nl++] = (struct option){opts[n].name + 2, arg, NULL, LONG_BASE + n};
        if (opts[n].alias && opts[n].alias[1] == '-')
            longs[nl++] = (struct option){opts[n].alias + 2, arg, NULL, LONG_BASE + n};
        if (short_of(&opts[n])) {
            shorts[ns++] = (char)short_of(&opts[n]);
            if (arg == required_argument) shorts[ns++] = ':';
        }
    }
    longs[nl++] = (struct option){"help", no_argument, NULL, 'h'};
    longs[nl++] = (struct option){"version", no_argument, NULL, 'V'};
    longs[nl] = (struct option){0};
    shorts[ns] = 0;
    if (n_pos) *n_pos = 0;
    rename_words(argc, argv, opts, n);
    const char *word = unknown_word(argc, argv, opts, n);
    if (word) return cli_usage(usage, "unknown option '%s'%s", word, foreign_hint(word));
    opterr = 0; /* the messages are ours */
    optind = 0; /* 0, not 1: glibc starts over completely */
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == 'h') {
            print_help(opts, n, usage);
            return 0;
        }
        if (c == 'V') {
            printf("clinfer %s\n", clinfer_version());
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

/* The one option parser of every command: glibc's getopt_long over a table
 * (so --opt=value, `--`, unique abbreviations and a missing value all work
 * the same way everywhere), with each number checked against its range. */
#ifndef CLF_CLI_OPTIONS_H
#define CLF_CLI_OPTIONS_H

#include <math.h>

typedef enum cli_kind {
    CLI_FLAG,  /* int, set to 1 */
    CLI_STR,   /* const char *: a name or a path, never empty */
    CLI_TEXT,  /* const char *: free text, may be empty */
    CLI_INT,   /* int in lo..hi */
    CLI_U64,   /* uint64_t in lo..hi (lo >= 0) */
    CLI_FLOAT, /* float in flo..fhi (fhi INFINITY: no upper bound), finite */
    CLI_KV,    /* clinfer_kv_type: f32 or f16 (the KV cache's types) */
    CLI_LIST,  /* cli_list: a repeatable option's values (free text), in order */
} cli_kind;

/* A repeatable option's values, pointing into argv; free(v) when done. */
typedef struct cli_list {
    const char **v;
    int n;
} cli_list;

typedef struct cli_option {
    const char *name; /* as the user writes it: "-n" (short) or "--ctx" (long) */
    cli_kind kind;
    void *dst;
    long long lo, hi;  /* CLI_INT, CLI_U64 */
    double flo, fhi;   /* CLI_FLOAT */
    int open_lo;       /* CLI_FLOAT: flo itself is out of range */
    const char *alias; /* another spelling: "-c" beside "--ctx", "--n-predict" beside "-n", "-np" (a word) beside "--parallel" */
    const char *arg;   /* the value's name in --help ("FILE"); else one by kind ("N", "X", "TEXT") */
    const char *help;  /* its meaning in one line, for --help (tests/cli_options.sh wants one everywhere) */
} cli_option;

/* Table entries, one per kind (an entry with no name ends a table: {0});
 * what follows the value's fields are more designated fields, such as
 * `.help = "context size", .alias = "-c"`. */
#define CLI_OPT_FLAG(nm, d, ...) {.name = (nm), .kind = CLI_FLAG, .dst = (d), __VA_ARGS__}
#define CLI_OPT_STR(nm, d, ...) {.name = (nm), .kind = CLI_STR, .dst = (d), __VA_ARGS__}
#define CLI_OPT_TEXT(nm, d, ...) {.name = (nm), .kind = CLI_TEXT, .dst = (d), __VA_ARGS__}
#define CLI_OPT_KV(nm, d, ...) {.name = (nm), .kind = CLI_KV, .dst = (d), __VA_ARGS__}
#define CLI_OPT_LIST(nm, d, ...) {.name = (nm), .kind = CLI_LIST, .dst = (d), __VA_ARGS__}
#define CLI_OPT_INT(nm, d, l, h, ...) {.name = (nm), .kind = CLI_INT, .dst = (d), .lo = (l), .hi = (h), __VA_ARGS__}
#define CLI_OPT_U64(nm, d, l, h, ...) {.name = (nm), .kind = CLI_U64, .dst = (d), .lo = (l), .hi = (h), __VA_ARGS__}
#define CLI_OPT_FLOAT(nm, d, l, h, ...) {.name = (nm), .kind = CLI_FLOAT, .dst = (d), .flo = (l), .fhi = (h), __VA_ARGS__}
/* A float > 0, no upper bound. */
#define CLI_OPT_POSITIVE(nm, d, ...) {.name = (nm), .kind = CLI_FLOAT, .dst = (d), .fhi = INFINITY, .open_lo = 1, __VA_ARGS__}

/* Parses argv[1..argc-1] against `opts` (ended by an entry with no name):
 * -n 5, -n5, -n=5, --ctx 64, --ctx=64, --co 64 (a unique abbreviation);
 * `--` ends the options; -h/--help prints `usage` and every option of the
 * table with its meaning to stdout, -V/--version the version. A single-dash
 * word that is no option (llama.cpp's -ngl) is an unknown option, not -n gl. Non-option
 * arguments go to pos (at most max_pos, counted in *n_pos; pos may be NULL
 * when max_pos is 0).
 * Returns -1 when the command should go on, else the exit status to return
 * now: 0 after --help or --version, CLINFER_ERR_ARG after a usage error (printed with the
 * usage line, `clinfer: usage error: <message>`). */
int cli_parse(int argc, char **argv, const cli_option *opts, const char *usage, const char **pos, int max_pos,
              int *n_pos);

#endif

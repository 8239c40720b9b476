/* Shared helpers of the `clinfer` subcommands (one file per command). */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "status.h"

/* Prints "clinfer: <message>" on stderr and returns the exit code of st. */
int cli_error(clf_status st);
/* Usage error: prints the message and the command's usage; returns 2. */
int cli_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Option parsing: returns 1 and sets *val if argv[*i] is `name` followed by
 * a value (advancing *i), or `name=value`. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
int cli_flag(char **argv, int i, const char *name);
/* Strict numeric parses; 0 on success. */
int cli_int(const char *s, long long lo, long long hi, long long *out);
int cli_float(const char *s, double *out);

/* Commands: each returns the process exit status. */
int cmd_devices(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);

#endif

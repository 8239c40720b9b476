/* Shared helpers of the `clinfer` subcommands (one file per command). */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "status.h"

/* Prints "clinfer: <message>" on stderr and returns the exit code of st. */
int cli_error(clf_status st);
/* A command's exit status once stdout is flushed and closed: a write that
 * failed on the way (a full disk, a closed stdout, EPIPE when SIGPIPE is
 * ignored) turns success into CLF_ERR_IO, reported in one line. */
int cli_close_stdout(int status);
/* Usage error: prints "clinfer: usage error: <message>" and the command's
 * usage line; returns CLF_ERR_ARG (2). */
int cli_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --mpi was given: this process is rank 0 of an MPI job (cli/main.c);
 * sessions load stage 0 with clf_mpi_load (mpi/clf_mpi.h). */
extern int cli_mpi;

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
int cmd_serve(int argc, char **argv);

#endif

/* Shared helpers of the `clinfer` subcommands (one file per command), on
 * the public API alone; cli/frontend.c's part is shared with tools/, the
 * commands that read the library's internals. */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include <signal.h>
#include <stdio.h>

#include "clinfer.h"

/* Propagates a failing status. */
#define CLI_TRY(expr)                                \
    do {                                             \
        clinfer_status cli_st_ = (expr);             \
        if (cli_st_ != CLINFER_OK) return cli_st_;   \
    } while (0)

/* Prints "clinfer: <message>" on stderr and returns the exit code of st. */
int cli_error(int st); /* st: a clinfer_status (or the library's own, value for value) */
/* A command's exit status once stdout is flushed and closed: a write that
 * failed on the way (a full disk, a closed stdout, EPIPE when SIGPIPE is
 * ignored) turns success into CLINFER_ERR_IO, reported in one line. */
int cli_close_stdout(int status);
/* Seconds on CLOCK_MONOTONIC, for speeds and progress lines. */
double cli_now_s(void);
/* Usage error: prints "clinfer: usage error: <message>" and the command's
 * usage line; returns CLINFER_ERR_ARG (2). */
int cli_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --mpi was given: this process is rank 0 of an MPI job (cli_mpi_start);
 * models load with clinfer_load_options.mpi. */
extern int cli_mpi;

/* Set to the signal's number by SIGINT or SIGTERM (cli_catch_sigint installs
 * the handler for both and unblocks them); loading and a prompt stop between
 * steps (the model's abort callback reads it), generation at the next token. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_sigint(void);
/* "Ctrl-C" or "SIGTERM", for the message of a stop. */
const char *cli_interrupt_name(void);
/* For clinfer_load_options.abort: nonzero once a signal came. */
int cli_abort_requested(void *ud);

/* A program's main around its command table (cli/frontend.c): the closed
 * standard streams held, --mpi taken out of argv and the MPI job joined
 * (ranks > 0 serve their stage and exit), the command run, stdout closed,
 * the job ended. */
typedef struct cli_command {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cli_command;
int cli_main(int argc, char **argv, const cli_command *cmds, int n_cmds, void (*usage)(FILE *f));

/* Whether clinfer knows the model's chat template (`chat`, `serve`):
 * CLINFER_ERR_FORMAT with the library's message when not. */
clinfer_status cli_check_chat(const clinfer_model *m);

/* Commands of `clinfer`: each returns the process exit status. */
int cmd_devices(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_pull(int argc, char **argv);
/* Commands of `clinfer-tools` (tools/, bench/): they read the library's
 * internals, so they are another program; `clinfer` hands them over
 * (cli/main.c). X(name, function, help), listed once for both programs. */
#define CLI_TOOLS(X) \
    X("info", cmd_info, "a model's parameters, FLOPs, memory and roofline, from the GGUF") \
    X("quantize", cmd_quantize, "convert a GGUF's weights to another type (Q4_K_M, Q8_0, ... as llama-quantize)") \
    X("bench", cmd_bench, "prompt and generation tokens/s (llama-bench style); bench kernels: every kernel vs roofs") \
    X("tune", cmd_tune, "measure kernel variants and tile sizes on this device; later runs use the winners") \
    X("selftest", cmd_selftest, "check every kernel against its C reference on a device")
int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_selftest(int argc, char **argv);

/* cli/model_fetch.c, shared with clinfer-tools (info, bench, quantize):
 * the file -m names (clinfer_model_path), a catalogue model the cache lacks
 * fetched first (verify: one there is hashed too), with a progress bar on
 * a terminal, plain lines otherwise; Ctrl-C stops it. */
clinfer_status cli_model_fetch(const char *model, int verify, char *path, size_t n);
/* One line on stderr when `model` is a catalogue model that is not
 * instruction-tuned (chat, run --chat, serve). */
void cli_warn_base_chat(const char *model);

#endif

/* clinfer: the command-line entry point; dispatches to cli/cmd_*.c. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clf_mpi.h"
#include "session.h"
#include "tune.h"

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } command;

static const command commands[] = {
    {"devices", cmd_devices, "list OpenCL platforms and devices"},
    {"info", cmd_info, "a model's parameters, FLOPs, memory and roofline, from the GGUF"},
    {"quantize", cmd_quantize, "convert a GGUF's weights to Q8_0, Q4_0, Q4_1, F16 or F32"},
    {"bench", cmd_bench, "prompt and generation tokens/s (llama-bench style); bench kernels: every kernel vs roofs"},
    {"tune", clf_tune_main, "measure kernel variants and tile sizes on this device; later runs use the winners"},
    {"selftest", cmd_selftest, "check every kernel against its C reference on a device"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "chat with a model on the terminal"},
    {"perplexity", cmd_perplexity, "perplexity of a model over a text file"},
#ifdef CLINFER_HAVE_SERVE
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server (chat, completions, streaming, a chat page)"},
#endif
};

static void usage(FILE *f) {
    fprintf(f, "usage: clinfer COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`clinfer COMMAND --help` for a command's options. Device: --device SEL or CLINFER_DEVICE.\n"
                "Several machines: mpirun -np N clinfer run|chat|perplexity|bench|serve --mpi ...\n");
}

/* A closed stdin, stdout or stderr gets /dev/null opened read-only in its
 * place: no file the command opens (a model, quantize's output) can land on
 * fd 1 or 2 and receive text, and writes there still fail (EBADF), so a
 * closed stdout is reported like any other write error. */
static void hold_std_fds(void) {
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDONLY) < 0) break;
}

int cli_mpi;

/* --mpi (spelled out, before any `--`) makes the process one rank of an MPI
 * job; it is taken out of argv here, before the command parses it, since
 * every rank but 0 never runs the command (a value that reads "--mpi" is
 * taken too: `-p=--mpi` passes it). Returns whether it was there. */
static int take_mpi_flag(int *argc, char **argv) {
    int found = 0, j = 1;
    for (int i = 1, opts = 1; i < *argc; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        if (opts && !strcmp(argv[i], "--mpi")) found = 1;
        else argv[j++] = argv[i];
    }
    *argc = j;
    argv[j] = NULL;
    return found;
}

static int interrupted_now(void) { return cli_interrupted != 0; }

/* Starts the MPI job: rank 0 goes on to the command, the others serve
 * their stage (mpi/mpi_worker.c). -1: go on; else the exit status. Under
 * a launcher's job of several ranks every clinfer joins, --mpi or not, so
 * that a rank running another command (or none with --mpi) ends the job
 * at once with rank 0's line instead of leaving rank 0 waiting; and rank 0
 * catches SIGTERM from the start: Open MPI's runtime sends it when another
 * rank exits or is killed, and rank 0's wait then ends with its line. */
static int start_mpi(int *argc, char ***argv, int mpi) {
    static const char *const with_mpi[] = {"run", "chat", "perplexity", "bench", "serve"};
    int ok = 0, rank, size, alone = 0;
    for (size_t i = 0; i < sizeof with_mpi / sizeof with_mpi[0]; i++) ok |= !strcmp((*argv)[1], with_mpi[i]);
    int launched = clf_mpi_launched() > 1;
    if (mpi && !ok && !launched)
        return cli_error(clf_fail(CLF_ERR_ARG, "--mpi works with run, chat, perplexity, bench and serve, not '%s'",
                                  (*argv)[1]));
    cli_catch_sigint();
    clf_mpi_set_abort(interrupted_now);
    clf_status st = launched ? clf_mpi_agree(argc, argv, mpi && ok, &rank, &size, &alone)
                             : clf_mpi_start(argc, argv, &rank, &size);
    if (st != CLF_OK) return clf_mpi_end(clf_last_error()[0] ? cli_error(st) : (int)st); /* "": rank 0 says it */
    if (alone) /* a job of independent runs, none with --mpi */
        return mpi ? cli_error(clf_fail(CLF_ERR_ARG, "--mpi works with run, chat, perplexity, bench and serve, "
                                                     "not '%s'", (*argv)[1]))
                   : -1;
    cli_mpi = 1;
    if (rank == 0) return -1;
    clf_mpi_set_abort(NULL); /* a worker ends with the job, as before */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    return clf_mpi_worker();
}

/* After a command under --mpi: what crossed the ranks, on stderr (a pass
 * of one row is a decoding step, of several a prompt's chunk). */
static void print_mpi_stats(void) {
    clf_mpi_stats s;
    clf_mpi_get_stats(&s);
    const clf_mpi_hops *h = &s.one;
    if (h->passes)
        fprintf(stderr,
                "clinfer: mpi: %d ranks, %ld passes of 1 row: per pass %d hops down of %.1f KiB and 1 back of %.1f "
                "KiB, stages on ranks 1..%d %.3f ms, messaging %.3f ms (%.3f ms per hop)\n",
                s.ranks, h->passes, s.ranks - 1, h->bytes_down / h->passes / 1024, h->bytes_back / h->passes / 1024,
                s.ranks - 1, h->remote_s / h->passes * 1e3, h->messaging_s / h->passes * 1e3,
                h->messaging_s / h->passes / s.ranks * 1e3);
    h = &s.many;
    if (h->passes)
        fprintf(stderr,
                "clinfer: mpi: %d ranks, %ld passes of %.0f rows: per pass %d hops down of %.1f KiB; %ld answered "
                "(logits wanted), rank 0 waited %.3f ms for each\n",
                s.ranks, h->passes, (double)h->rows / h->passes, s.ranks - 1, h->bytes_down / h->passes / 1024,
                h->answered, h->answered ? h->wait_s / h->answered * 1e3 : 0);
}

/* Rank 0 at the end of a command: every pass through the pipeline (a
 * failure on a rank is the command's), then the job ends. */
static int end_mpi(int status) {
    if (cli_mpi && status == 0) {
        status = cli_error(clf_mpi_flush());
        if (status == 0) print_mpi_stats();
    }
    return clf_mpi_end(status);
}

int main(int argc, char **argv) {
    hold_std_fds();
    int mpi = take_mpi_flag(&argc, argv);
    if ((mpi || clf_mpi_launched() > 1) && argc >= 2) {
        int rc = start_mpi(&argc, &argv, mpi);
        if (rc >= 0) return rc;
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : cli_close_stdout(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return end_mpi(cli_close_stdout(commands[i].fn(argc - 1, argv + 1)));
    fprintf(stderr, "clinfer: %s: unknown command '%s'\n", clf_status_name(CLF_ERR_ARG), argv[1]);
    usage(stderr);
    return 2;
}

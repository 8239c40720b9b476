/* What every program of the command line shares (`clinfer` and
 * `clinfer-tools`): signals, the standard streams, joining an MPI job and
 * the command dispatch. On the public API alone. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

volatile sig_atomic_t cli_interrupted;
int cli_mpi;

static void on_sigint(int sig) { cli_interrupted = sig; }

void cli_catch_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocked read returns */
    sigaction(SIGTERM, &sa, NULL);
    /* a parent may have blocked them; a Ctrl-C already pending arrives now */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int cli_abort_requested(void *ud) {
    (void)ud;
    return cli_interrupted != 0;
}

const char *cli_interrupt_name(void) {
    if (cli_interrupted == SIGTERM && cli_mpi) /* from mpirun, most likely: say why it would send it */
        return "SIGTERM (under MPI: the job ends when another rank exits or is killed)";
    return cli_interrupted == SIGTERM ? "SIGTERM" : "Ctrl-C";
}

/* A closed stdin, stdout or stderr gets /dev/null opened read-only in its
 * place: no file the command opens (a model, quantize's output) can land on
 * fd 1 or 2 and receive text, and writes there still fail (EBADF), so a
 * closed stdout is reported like any other write error. */
static void hold_std_fds(void) {
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDONLY) < 0) break;
}

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

static const char *const WITH_MPI = "run, chat, perplexity, bench and serve";

static int mpi_capable(const char *cmd) {
    static const char *const with_mpi[] = {"run", "chat", "perplexity", "bench", "serve"};
    for (size_t i = 0; i < sizeof with_mpi / sizeof with_mpi[0]; i++)
        if (!strcmp(cmd, with_mpi[i])) return 1;
    return 0;
}

/* Starts the MPI job: rank 0 goes on to the command, the others serve
 * their stage. -1: go on; else the exit status. Under a launcher's job of
 * several ranks every process joins, --mpi or not, so that a rank running
 * another command (or none with --mpi) ends the job at once with rank 0's
 * line instead of leaving rank 0 waiting; and rank 0 catches SIGTERM from
 * the start: Open MPI's runtime sends it when another rank exits or is
 * killed, and rank 0's wait then ends with its line. */
static int start_mpi(int *argc, char ***argv, int mpi) {
    int ok = mpi_capable((*argv)[1]), rank, alone;
    if (mpi && !ok && clinfer_mpi_launched() <= 1)
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "--mpi works with %s, not '%s'", WITH_MPI, (*argv)[1]));
    cli_catch_sigint();
    clinfer_status st = clinfer_mpi_begin(argc, argv, mpi && ok, interrupted_now, &rank, &alone);
    if (st != CLINFER_OK) return clinfer_mpi_end(clinfer_last_error()[0] ? cli_error(st) : (int)st); /* "": rank 0 says it */
    if (alone) /* a job of independent runs, none with --mpi */
        return mpi ? cli_error(clinfer_fail(CLINFER_ERR_ARG, "--mpi works with %s, not '%s'", WITH_MPI, (*argv)[1])) : -1;
    cli_mpi = 1;
    if (rank == 0) return -1;
    signal(SIGINT, SIG_DFL); /* a worker ends with the job */
    signal(SIGTERM, SIG_DFL);
    return clinfer_mpi_worker();
}

/* Rank 0 at the end of a command: every pass through the pipeline (a
 * failure on a rank is the command's), what crossed the ranks, then the
 * job ends. */
static int end_mpi(int status) {
    if (cli_mpi && status == 0) {
        status = cli_error(clinfer_mpi_flush());
        char report[1024];
        clinfer_mpi_report(report, sizeof report);
        for (char *line = report, *nl; status == 0 && *line; line = nl + 1) {
            if (!(nl = strchr(line, '\n'))) break;
            fprintf(stderr, "clinfer: %.*s\n", (int)(nl - line), line);
        }
    }
    return clinfer_mpi_end(status);
}

int cli_main(int argc, char **argv, const cli_command *cmds, int n_cmds, void (*usage)(FILE *f)) {
    hold_std_fds();
    int mpi = take_mpi_flag(&argc, argv);
    if ((mpi || clinfer_mpi_launched() > 1) && argc >= 2) {
        int rc = start_mpi(&argc, &argv, mpi);
        if (rc >= 0) return rc;
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : cli_close_stdout(0);
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("clinfer %s\n", clinfer_version());
        return cli_close_stdout(0);
    }
    for (int i = 0; i < n_cmds; i++)
        if (!strcmp(argv[1], cmds[i].name)) return end_mpi(cli_close_stdout(cmds[i].fn(argc - 1, argv + 1)));
    fprintf(stderr, "clinfer: %s: unknown command '%s'\n", clinfer_status_name(CLINFER_ERR_ARG), argv[1]);
    usage(stderr);
    return 2;
}

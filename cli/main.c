/* clinfer: the command-line entry point; dispatches to cli/cmd_*.c, and
 * hands the commands that read the library's internals (bench, tune,
 * selftest, info, quantize) to `clinfer-tools` beside it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const cli_command commands[] = {
    {"devices", cmd_devices, "list OpenCL platforms and devices"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "chat with a model on the terminal"},
    {"perplexity", cmd_perplexity, "perplexity of a model over a text file"},
    {"embed", cmd_embed, "embeddings of texts, as JSON (a line per input)"},
    {"pull", cmd_pull, "fetch a catalogue model into the cache (pull --list: the catalogue)"},
#ifdef CLINFER_HAVE_SERVE
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server (chat, completions, streaming, a chat page)"},
#endif
};

/* clinfer-tools' commands, as this program's usage lists them. */
#define TOOL_ENTRY(name, fn, help) {name, NULL, help},
static const cli_command tools[] = {CLI_TOOLS(TOOL_ENTRY)};

#define COUNT(a) (int)(sizeof a / sizeof a[0])

static void usage(FILE *f) {
    fprintf(f, "usage: clinfer COMMAND [options]\n\ncommands:\n");
    for (int i = 0; i < COUNT(commands); i++) fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    for (int i = 0; i < COUNT(tools); i++) fprintf(f, "  %-11s %s\n", tools[i].name, tools[i].help);
    fprintf(f, "\n`clinfer COMMAND --help` for a command's options. Device: --device SEL or CLINFER_DEVICE.\n"
               "Several machines: mpirun -np N clinfer run|chat|perplexity|bench|serve --mpi ...\n");
}

/* Runs clinfer-tools from this program's folder with the same arguments
 * (argv[0] stays "clinfer" for its messages). Returns only on failure. */
static int hand_over(char **argv) {
    char self[PATH_MAX], path[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return cli_error(clinfer_fail(CLINFER_ERR_IO, "cannot find this program's folder: %s", strerror(errno)));
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/clinfer-tools", self);
    execv(path, argv);
    return cli_error(clinfer_fail(CLINFER_ERR_IO, "`%s` needs %s: %s", argv[1], path, strerror(errno)));
}

int main(int argc, char **argv) {
    for (int i = 0; argc >= 2 && i < COUNT(tools); i++)
        if (!strcmp(argv[1], tools[i].name)) return hand_over(argv);
    return cli_main(argc, argv, commands, COUNT(commands), usage);
}

/* clinfer: the command-line entry point; dispatches to cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
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
};

static void usage(FILE *f) {
    fprintf(f, "usage: clinfer COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`clinfer COMMAND --help` for a command's options. Device: --device SEL or CLINFER_DEVICE.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "clinfer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

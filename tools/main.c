/* clinfer-tools: the commands that read the library's internals (kernels,
 * tuning, the file's cost model, the quantizers), a program apart from
 * `clinfer`, which hands them over. Built with the internal include
 * folders and the static library. */
#include <stdio.h>

#include "cli.h"
#include "tune.h"

static const cli_command commands[] = {
    {"info", cmd_info, "a model's parameters, FLOPs, memory and roofline, from the GGUF"},
    {"quantize", cmd_quantize, "convert a GGUF's weights to Q8_0, Q4_0, Q4_1, F16 or F32"},
    {"bench", cmd_bench, "prompt and generation tokens/s (llama-bench style); bench kernels: every kernel vs roofs"},
    {"tune", clf_tune_main, "measure kernel variants and tile sizes on this device; later runs use the winners"},
    {"selftest", cmd_selftest, "check every kernel against its C reference on a device"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: clinfer COMMAND [options]   (clinfer-tools: the commands below; `clinfer --help` for all)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    return cli_main(argc, argv, commands, (int)(sizeof commands / sizeof commands[0]), usage);
}

/* clinfer-tools: the commands that read the library's internals (kernels,
 * tuning, the file's cost model, the quantizers), a program apart from
 * `clinfer`, which hands them over. Built with the internal include
 * folders and the static library. */
#include <stdio.h>

#include "cli.h"
#include "tune.h"

int cmd_tune(int argc, char **argv) { return clf_tune_main(argc, argv); }

#define TOOL_ENTRY(name, fn, help) {name, fn, help},
static const cli_command commands[] = {CLI_TOOLS(TOOL_ENTRY)};

static void usage(FILE *f) {
    fprintf(f, "usage: clinfer COMMAND [options]   (clinfer-tools: the commands below; `clinfer --help` for all)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    return cli_main(argc, argv, commands, (int)(sizeof commands / sizeof commands[0]), usage);
}

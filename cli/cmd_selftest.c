/* clinfer selftest [--device SEL] [--seed S]: every kernel against its C
 * reference on the chosen device; exit 0 only when all pass. */
#include <stdio.h>
#include <time.h>

#include "cli.h"
#include "runtime.h"
#include "selftest.h"

static const char *USAGE = "clinfer selftest [--device SEL] [--seed S]";

int cmd_selftest(int argc, char **argv) {
    const char *sel = NULL, *seed_str = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_opt(argc, argv, &i, "--device", &sel)) {}
        else if (cli_opt(argc, argv, &i, "--seed", &seed_str)) {}
        else if (cli_flag(argv, i, "--help")) { printf("usage: %s\n", USAGE); return 0; }
        else return cli_usage(USAGE, "unknown option '%s'", argv[i]);
    }
    long long seed = (long long)(time(NULL) & 0x7fffffff);
    if (seed_str && cli_int(seed_str, 0, 0x7fffffffffffffffLL, &seed))
        return cli_usage(USAGE, "--seed wants a non-negative integer, got '%s'", seed_str);
    clf_runtime *rt;
    clf_status st = clf_runtime_create(sel, &rt);
    if (st != CLF_OK) return cli_error(st);
    printf("device %d:%d %s | %s (%s)\nseed %lld (replay: clinfer selftest --seed %lld)\n\n", rt->dev.platform_index,
           rt->dev.device_index, rt->dev.platform_name, rt->dev.name, rt->dev.driver, seed, seed);
    int failed = 0;
    st = clf_selftest_run(rt, (uint64_t)seed, stdout, &failed);
    clf_runtime_free(rt);
    if (st != CLF_OK) return cli_error(st);
    return failed ? 1 : 0;
}

/* clinfer devices [--json]: one row per OpenCL device, the default marked,
 * and the tuning the selected device runs with (host/cl/tuning.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "options.h"
#include "session.h"

static const char *USAGE = "clinfer devices [--json] [--device SEL] [-t N]";

/* The selected device's tuning: its table row, whether `clinfer tune`'s
 * values apply, the environment's overrides, every parameter. */
static clinfer_status print_tuning(const char *sel, int json) {
    clinfer_device_tuning t = {.size = sizeof t};
    CLI_TRY(clinfer_device_get_tuning(sel, &t));
    if (json) {
        printf(",\n \"capabilities\": [");
        int n = 0;
        for (char *c = strtok(t.capabilities, " "); c; c = strtok(NULL, " ")) printf("%s\"%s\"", n++ ? ", " : "", c);
        printf("],\n \"kernels\": ");
        cli_json_str(stdout, t.kernels);
        printf(",\n \"tuning\": {\"row\": ");
        cli_json_str(stdout, t.row);
        printf(", \"tuned\": %s, \"overrides\": ", t.tuned ? "true" : "false");
        cli_json_str(stdout, t.overrides);
        printf(", \"values\": {");
        n = 0;
        for (char *v = strtok(t.values, " "); v; v = strtok(NULL, " ")) {
            char *eq = strchr(v, '=');
            if (!eq) continue;
            *eq = 0;
            printf("%s\"%s\": ", n++ ? ", " : "", v);
            cli_json_str(stdout, eq + 1);
        }
        printf("}}");
    } else {
        printf("capabilities of the selected device (probed): %s\nkernels: %s\n",
               t.capabilities[0] ? t.capabilities : "none", t.kernels);
        printf("tuning of the selected device: table row %s%s%s%s\n  %s\n", t.row,
               t.tuned ? ", measured by clinfer tune" : "", t.overrides[0] ? ", environment: " : "", t.overrides,
               t.values);
    }
    return CLINFER_OK;
}

int cmd_devices(int argc, char **argv) {
    int json = 0;
    const char *sel = NULL;
    int threads = 0;
    const cli_option opts[] = {
        CLI_OPT_FLAG("--json", &json, .help = "as JSON"),
        CLI_OPT_STR("--device", &sel, .arg = "SEL", .help = "the device whose tuning is shown (P:D or a name's part)"),
        CLI_OPT_INT("--threads", &threads, 1, 4096, .alias = "-t",
                    .help = "PoCL's compute units, as run's -t sets them (other drivers: ignored)"),
        {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    cli_threads_begin(threads);
    int n, chosen;
    clinfer_status st = clinfer_device_count(&n);
    if (st == CLINFER_OK) st = clinfer_device_select(sel, &chosen);
    if (st != CLINFER_OK) return cli_error(st);
    cli_threads_check(threads, sel);
    if (json) printf("{\"devices\": [\n");
    for (int i = 0; i < n; i++) {
        clinfer_device_info d = {.size = sizeof d};
        if ((st = clinfer_device_get(i, &d)) != CLINFER_OK) return cli_error(st);
        if (json) {
            printf("  {\"index\": \"%s\", \"platform\": ", d.selector);
            cli_json_str(stdout, d.platform);
            printf(", \"name\": ");
            cli_json_str(stdout, d.name);
            printf(", \"type\": \"%s\", \"compute_units\": %u, \"clock_mhz\": %u, \"global_mem\": %llu, "
                   "\"max_alloc\": %llu, \"local_mem\": %llu, \"opencl_c\": ",
                   d.type, d.compute_units, d.clock_mhz, (unsigned long long)d.global_mem,
                   (unsigned long long)d.max_alloc, (unsigned long long)d.local_mem);
            cli_json_str(stdout, d.opencl_c);
            printf(", \"fp16\": %s, \"fp64\": %s, \"driver\": ", d.fp16 ? "true" : "false", d.fp64 ? "true" : "false");
            cli_json_str(stdout, d.driver);
            printf(", \"selected\": %s}%s\n", i == chosen ? "true" : "false", i + 1 < n ? "," : "");
        } else {
            printf("%s %s  %s | %s\n", i == chosen ? "*" : " ", d.selector, d.platform, d.name);
            printf("       type %s, %u compute units @ %u MHz, global %.2f GiB, max alloc %.2f GiB, local %llu KiB\n",
                   d.type, d.compute_units, d.clock_mhz, d.global_mem / 1073741824.0, d.max_alloc / 1073741824.0,
                   (unsigned long long)(d.local_mem / 1024));
            printf("       %s, fp16 %s, fp64 %s, driver %s\n", d.opencl_c, d.fp16 ? "yes" : "no", d.fp64 ? "yes" : "no",
                   d.driver);
        }
    }
    if (json) printf("]");
    else printf("(* = selected: --device SEL or CLINFER_DEVICE, else first GPU, accelerator, CPU)\n");
    st = print_tuning(sel, json);
    if (json) printf("}\n");
    return cli_error(st);
}

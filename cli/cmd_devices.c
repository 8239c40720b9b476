/* clinfer devices [--json]: one row per OpenCL device, the default marked,
 * and the tuning the selected device runs with (host/cl/tuning.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "json.h"
#include "options.h"
#include "runtime.h"

static const char *USAGE = "clinfer devices [--json] [--device SEL]";

/* The selected device's tuning: its table row, whether `clinfer tune`'s
 * values apply, the environment's overrides, every parameter. */
static clf_status print_tuning(const char *sel, int json) {
    clf_runtime *rt;
    CLF_TRY(clf_runtime_create(sel, &rt));
    const clf_tuning *t = &rt->tune;
    char caps[512], kernels[256];
    clf_caps_text(rt->dev.caps, caps, sizeof caps);
    clf_tuning_kernels(t, kernels, sizeof kernels);
    if (json) {
        printf(",\n \"capabilities\": [");
        for (int b = 0, n = 0; clf_cap_name(b); b++)
            if (rt->dev.caps >> b & 1) printf("%s\"%s\"", n++ ? ", " : "", clf_cap_name(b));
        printf("],\n \"kernels\": ");
        cli_json_str(stdout, kernels);
        printf(",\n \"tuning\": {\"row\": ");
        cli_json_str(stdout, t->row);
        printf(", \"tuned\": %s, \"overrides\": ", t->tuned ? "true" : "false");
        cli_json_str(stdout, t->overrides);
        printf(", \"values\": {");
        for (int i = 0; clf_tuning_param_name(i); i++) {
            char v[32];
            clf_tuning_value_text(t, i, v, sizeof v);
            printf("%s\"%s\": ", i ? ", " : "", clf_tuning_param_name(i));
            cli_json_str(stdout, v);
        }
        printf("}}");
    } else {
        char values[1024];
        clf_tuning_format(t, values, sizeof values);
        printf("capabilities of the selected device (probed): %s\nkernels: %s\n", caps[0] ? caps : "none", kernels);
        printf("tuning of the selected device: table row %s%s%s%s\n  %s\n", t->row,
               t->tuned ? ", measured by clinfer tune" : "", t->overrides[0] ? ", environment: " : "", t->overrides,
               values);
    }
    clf_runtime_free(rt);
    return CLF_OK;
}

int cmd_devices(int argc, char **argv) {
    int json = 0;
    const char *sel = NULL;
    const cli_option opts[] = {CLI_OPT_FLAG("--json", &json), CLI_OPT_STR("--device", &sel), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clf_device *devs;
    int n, chosen;
    clf_status st = clf_devices_list(&devs, &n);
    if (st == CLF_OK) st = clf_device_select(devs, n, sel, &chosen);
    if (st != CLF_OK) {
        free(devs);
        return cli_error(st);
    }
    if (json) printf("{\"devices\": [\n");
    for (int i = 0; i < n; i++) {
        const clf_device *d = &devs[i];
        if (json) {
            printf("  {\"index\": \"%d:%d\", \"platform\": ", d->platform_index, d->device_index);
            cli_json_str(stdout, d->platform_name);
            printf(", \"name\": ");
            cli_json_str(stdout, d->name);
            printf(", \"type\": \"%s\", \"compute_units\": %u, \"clock_mhz\": %u, \"global_mem\": %llu, "
                   "\"max_alloc\": %llu, \"local_mem\": %llu, \"opencl_c\": ",
                   clf_device_type_name(d->type), d->compute_units, d->clock_mhz,
                   (unsigned long long)d->global_mem, (unsigned long long)d->max_alloc,
                   (unsigned long long)d->local_mem);
            cli_json_str(stdout, d->c_version);
            printf(", \"fp16\": %s, \"fp64\": %s, \"driver\": ", d->fp16 ? "true" : "false", d->fp64 ? "true" : "false");
            cli_json_str(stdout, d->driver);
            printf(", \"selected\": %s}%s\n", i == chosen ? "true" : "false", i + 1 < n ? "," : "");
        } else {
            printf("%s %d:%d  %s | %s\n", i == chosen ? "*" : " ", d->platform_index, d->device_index,
                   d->platform_name, d->name);
            printf("       type %s, %u compute units @ %u MHz, global %.2f GiB, max alloc %.2f GiB, local %llu KiB\n",
                   clf_device_type_name(d->type), d->compute_units, d->clock_mhz, d->global_mem / 1073741824.0,
                   d->max_alloc / 1073741824.0, (unsigned long long)(d->local_mem / 1024));
            printf("       %s, fp16 %s, fp64 %s, driver %s\n", d->c_version, d->fp16 ? "yes" : "no",
                   d->fp64 ? "yes" : "no", d->driver);
        }
    }
    if (json) printf("]");
    else printf("(* = selected: --device SEL or CLINFER_DEVICE, else first GPU, accelerator, CPU)\n");
    free(devs);
    st = print_tuning(sel, json);
    if (json) printf("}\n");
    return cli_error(st);
}

/* clinfer bench: `kernels` times every kernel family against the device's
 * measured roofs; `launches` a token's launches plain against replayed from
 * a command buffer; without a subcommand (or with `model`) it runs the model
 * benchmark (prompt processing and generation, llama-bench style). */
#include <stdio.h>
#include <string.h>

#include "bench_attention.h"
#include "bench_grammar.h"
#include "bench_launches.h"
#include "bench_matmul.h"
#include "bench_ops.h"
#include "bench_model.h"
#include "cli.h"
#include "json.h"
#include "options.h"
#include "roof.h"
#include "runtime.h"

static const char *USAGE_KERNELS = "clinfer bench kernels [--device SEL] [--json]";

static void print_header(FILE *f, int json, const clf_device *d, const clf_roofs *r) {
    if (json) {
        fprintf(f, "{\n  \"device\": {\"index\": \"%d:%d\", \"platform\": ", d->platform_index, d->device_index);
        cli_json_str(f, d->platform_name);
        fprintf(f, ", \"name\": ");
        cli_json_str(f, d->name);
        fprintf(f, ", \"driver\": ");
        cli_json_str(f, d->driver);
        fprintf(f, ", \"type\": \"%s\", \"compute_units\": %u},\n", clf_device_type_name(d->type), d->compute_units);
        fprintf(f,
                "  \"roofs\": {\"copy_gbs\": %.3f, \"copy_bytes\": %zu, \"copy_width\": %d, \"fma_gflops\": %.3f, "
                "\"fma_width\": %d, \"launch_us\": %.3f, \"launch_sync_us\": %.3f}",
                r->copy_gbs, r->copy_bytes, r->copy_width, r->fma_gflops, r->fma_width, r->launch_us, r->launch_sync_us);
        return;
    }
    fprintf(f, "device %d:%d %s | %s (%s, %s, %u compute units)\n", d->platform_index, d->device_index,
            d->platform_name, d->name, d->driver, clf_device_type_name(d->type), d->compute_units);
    fprintf(f, "roofs: copy %.1f GB/s (read + write of %zu MiB, float%d), FMA %.1f GFLOP/s (float%d chains)\n",
            r->copy_gbs, r->copy_bytes >> 20, r->copy_width, r->fma_gflops, r->fma_width);
    fprintf(f, "launch: %.1f us per kernel enqueued in a batch, %.1f us with a clFinish after each\n", r->launch_us,
            r->launch_sync_us);
}

/* One family's section: a titled table, or a "key": value member. */
static void section(FILE *f, int json, const char *key, const char *title) {
    if (json) fprintf(f, ",\n  \"%s\": ", key);
    else fprintf(f, "\n== %s ==\n", title);
}

static int bench_kernels(int argc, char **argv) {
    int json = 0;
    const char *sel = NULL;
    const cli_option opts[] = {CLI_OPT_FLAG("--json", &json), CLI_OPT_STR("--device", &sel), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE_KERNELS, NULL, 0, NULL);
    if (rc >= 0) return rc;
    clf_runtime *rt;
    clf_status st = clf_runtime_create(sel, &rt);
    if (st != CLF_OK) return cli_error(st);
    clf_roofs roofs;
    FILE *out = stdout;
    st = clf_roofs_measure(rt, &roofs);
    if (st == CLF_OK) {
        print_header(out, json, &rt->dev, &roofs);
        section(out, json, "ops", "small ops: us per op inside a batch of launches, GB/s on minimum bytes");
        st = clf_bench_ops(rt, json, out, roofs.fma_gflops, roofs.copy_gbs);
    }
    if (st == CLF_OK) {
        section(out, json, "matmul", "matrix products");
        st = (clf_status)clf_bench_matmul(rt, json, out, roofs.fma_gflops, roofs.copy_gbs);
    }
    if (st == CLF_OK) {
        section(out, json, "attention", "attention");
        st = (clf_status)clf_bench_attention(rt, json, out, roofs.fma_gflops, roofs.copy_gbs);
    }
    if (st == CLF_OK && json) fprintf(out, "\n}\n");
    clf_runtime_free(rt);
    return cli_error(st);
}

int cmd_bench(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "kernels")) return bench_kernels(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "model")) return clf_bench_model_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "launches")) return clf_bench_launches_main(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) /* a grammar's cost: its own benchmark */
        if (!strncmp(argv[i], "--json-schema", 13) || !strncmp(argv[i], "--grammar", 9))
            return clf_bench_grammar_main(argc, argv);
    return clf_bench_model_main(argc, argv);
}

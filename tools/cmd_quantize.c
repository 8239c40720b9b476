/* clinfer quantize IN OUT TYPE: a new GGUF with the weight matrices
 * converted through F32 with the host reference quantizers, each to the
 * type llama.cpp's llama-quantize gives it for TYPE (tools/quantize/quant_mix.c);
 * vectors (norms, biases) stored F32; metadata copied with
 * general.file_type updated. The output appears only when complete
 * (tools/quantize/outfile.c): a failure, Ctrl-C or SIGTERM leaves nothing behind.
 * It is never the input, and an existing one is replaced only with --force.
 * IN may be a catalogue name, as -m takes it; weights already quantized are
 * requantized only with --allow-requantize (llama-quantize's flag): the
 * second rounding loses on top of the first, and a mix's fallbacks can make
 * the file larger and slower as well (the Q4_1 default to Q4_K_M). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gguf_write.h"
#include "options.h"
#include "outfile.h"
#include "quant.h"
#include "quant_mix.h"
#include "session.h"

static const char *USAGE = "clinfer quantize [--force] [--allow-requantize] IN OUT TYPE   (TYPE: Q4_K_M, Q8_0, ... as "
                           "llama-quantize)\n  IN: a GGUF file or a catalogue name, as for run";

static clf_status convert_tensor(clf_gguf_writer *w, const clf_gguf_tensor *t, const char *name, clf_type to) {
    if (t->type == to) return clf_gguf_add_tensor(w, name, to, t->n_dims, t->ne, t->data); /* no requantization */
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    size_t out_bytes = clf_row_bytes(to, t->ne[0]) * (size_t)(n / t->ne[0]);
    float *f = malloc((size_t)n * sizeof *f);
    void *q = to == CLF_F32 ? (void *)f : malloc(out_bytes);
    if (!f || !q) {
        if (q != f) free(q);
        free(f);
        return clf_fail(CLF_ERR_MEMORY, "out of memory converting '%s' (%" PRId64 " weights)", name, n);
    }
    clf_dequantize(t->type, t->data, f, n);
    if (q != f) {
        clf_quantize(to, f, q, n);
        free(f);
    }
    return clf_gguf_add_tensor_take(w, name, to, t->n_dims, t->ne, q);
}

/* Refuses an output that would lose data before any work: the input itself
 * (through any path or link), an existing file without --force, one that is
 * not writable even with it; never a device, a FIFO or a directory. */
static clf_status check_output(const char *in, const char *out, int force) {
    char *target;
    struct stat so, si;
    int exists;
    CLF_TRY(clf_output_target(out, &target, &so, &exists));
    clf_status st = CLF_OK;
    if (!exists) st = CLF_OK;
    else if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        st = clf_fail(CLF_ERR_IO, "'%s' is the input file: write the output to another file", out);
    else if (!force) st = clf_fail(CLF_ERR_IO, "'%s' exists (--force replaces it)", out);
    else if (access(target, W_OK) != 0) st = clf_fail(CLF_ERR_IO, "'%s' is not writable: %s", out, strerror(errno));
    free(target);
    return st;
}

/* The writer's stop request: Ctrl-C, or the input changed under its mapping
 * (its reads then see zeros: nothing may be written from them). */
static int stop_writing(void *g) { return cli_interrupted || clf_gguf_guard_check(g) != CLF_OK; }

/* One line on a terminal, rewritten in place; nothing when stderr is not one. */
static void progress(int64_t i, int64_t n, const char *name) {
    static int tty = -1;
    if (tty < 0) tty = isatty(2);
    if (!tty) return;
    if (i < n) fprintf(stderr, "\rclinfer: quantizing %" PRId64 "/%" PRId64 " %-48.48s", i + 1, n, name);
    else fprintf(stderr, "\r%-80s\r", "");
    fflush(stderr);
}

/* Refuses (CLF_ERR_ARG, one line) to quantize again weights that are
 * quantized already, unless allowed: tensors kept in their type are copied
 * and ones turned to F16/F32 only widened; neither counts. */
static clf_status check_requantize(const clf_gguf *g, const clf_type *types, int fallback, const clf_quant_mix *mix,
                                   const char *in, int allow) {
    int per_type[CLF_TYPE_COUNT] = {0}, n = 0, most = 0;
    double in_bytes = 0, out_bytes = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        in_bytes += (double)t->bytes;
        out_bytes += (double)(clf_row_bytes(types[i], t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
        if (t->type == types[i] || t->type >= CLF_TYPE_COUNT || clf_type_get(t->type)->block <= 1 ||
            clf_type_get(types[i])->block <= 1)
            continue;
        n++;
        if (++per_type[t->type] > per_type[most]) most = (int)t->type;
    }
    if (!n || allow) return CLF_OK;
    char falls[160] = "";
    int len = fallback ? snprintf(falls, sizeof falls, "; %d tensors would fall back to another type", fallback) : 0;
    if (out_bytes > in_bytes)
        snprintf(falls + len, sizeof falls - (size_t)len, "%s a larger file (weights %.1f -> %.1f MiB)",
                 fallback ? "," : ";", in_bytes / 1048576.0, out_bytes / 1048576.0);
    return clf_fail(CLF_ERR_ARG, "'%s' is already quantized (%d tensors, mostly %s): quantizing it again to %s rounds "
                                 "twice, worse than from an F16/F32 file%s (--allow-requantize does it anyway)",
                    in, n, clf_type_get((uint32_t)most)->name, mix->name, falls);
}

static clf_status quantize(const char *in, const char *out, const clf_quant_mix *mix, int force, int allow_requant) {
    clf_gguf *g;
    CLF_TRY(clf_gguf_open(in, &g));
    clf_gguf_guard_begin(g); /* weights are read from the mapping until the write ends */
    clf_status st = check_output(in, out, force);
    const int64_t n = clf_gguf_n_tensors(g);
    clf_type *types = st == CLF_OK ? malloc((size_t)(n ? n : 1) * sizeof *types) : NULL;
    int fallback = 0;
    if (st == CLF_OK) st = types ? clf_quant_mix_plan(mix, g, types, &fallback) : clf_fail(CLF_ERR_MEMORY, "out of memory");
    if (st == CLF_OK) st = check_requantize(g, types, fallback, mix, in, allow_requant);
    clf_gguf_writer *w = NULL;
    if (st == CLF_OK) st = clf_gguf_writer_create(&w);
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_kv(g); i++) st = clf_gguf_set_kv(w, clf_gguf_kv_at(g, i));
    if (st == CLF_OK) st = clf_gguf_set_u32(w, "general.file_type", mix->ftype);
    if (st == CLF_OK && clf_type_get(mix->base)->block > 1 && !clf_gguf_find(g, "general.quantization_version"))
        st = clf_gguf_set_u32(w, "general.quantization_version", 2); /* ggml's */
    int converted = 0, per_type[CLF_TYPE_COUNT] = {0};
    double in_bytes = 0, out_bytes = 0;
    for (int64_t i = 0; st == CLF_OK && i < n; i++) {
        if (cli_interrupted) {
            st = CLF_ERR_INTERRUPTED;
            break;
        }
        if ((st = clf_gguf_guard_check(g)) != CLF_OK) break;
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char *name = malloc((size_t)t->name.len + 1);
        if (!name) {
            st = clf_fail(CLF_ERR_MEMORY, "out of memory");
            break;
        }
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = 0;
        progress(i, n, name);
        clf_type to = types[i];
        converted += to != t->type;
        per_type[to]++;
        st = convert_tensor(w, t, name, to);
        in_bytes += (double)t->bytes;
        out_bytes += (double)(clf_row_bytes(to, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
        if (st != CLF_OK) clf_fail_ctx(st, "tensor '%s': ", name);
        free(name);
    }
    progress(n, n, "");
    if (st == CLF_OK) {
        clf_gguf_writer_set_abort(w, stop_writing, g);
        st = clf_gguf_write(w, out);
    }
    /* a write that completed read everything before its last check of the
     * guard (stop_writing): a change after it spoiled nothing; a failed
     * one is explained by the change */
    clf_status changed = clf_gguf_guard_end(g);
    if (changed != CLF_OK && st != CLF_OK) st = changed;
    else if (st == CLF_ERR_INTERRUPTED) clf_fail(st, "quantize stopped by %s; nothing written", cli_interrupt_name());
    if (st == CLF_OK) {
        char mixdesc[256] = "";
        for (int t = 0, len = 0; t < CLF_TYPE_COUNT && len < (int)sizeof mixdesc; t++)
            if (per_type[t])
                len += snprintf(mixdesc + len, sizeof mixdesc - (size_t)len, "%s%s %d", len ? ", " : "",
                                clf_type_get((uint32_t)t)->name, per_type[t]);
        fprintf(stderr, "clinfer: wrote %s: %" PRId64 " tensors (%s; %d converted%s), weights %.2f MiB -> %.2f MiB, %s\n",
                out, n, mixdesc, converted, fallback ? ", some in a fallback type: rows not whole blocks" : "",
                in_bytes / 1048576.0, out_bytes / 1048576.0, mix->name);
    }
    clf_gguf_writer_free(w);
    free(types);
    clf_gguf_close(g);
    return st;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int npos = 0, force = 0, allow_requant = 0;
    char names[512], usage[1024];
    snprintf(usage, sizeof usage, "%s\n  TYPE: %s", USAGE, clf_quant_mix_names(names, sizeof names));
    const cli_option opts[] = {
        CLI_OPT_FLAG("--force", &force,
                     .help = "replace an existing OUT (a link's target; never IN, a read-only file, a device, a FIFO "
                             "or a directory)"),
        CLI_OPT_FLAG("--allow-requantize", &allow_requant,
                     .help = "quantize weights that are quantized already (refused by default: they lose twice)"),
        {0}};
    int rc = cli_parse(argc, argv, opts, usage, pos, 3, &npos);
    if (rc >= 0) return rc;
    if (npos != 3) return cli_usage(usage, "expected IN OUT TYPE");
    const clf_quant_mix *mix = clf_quant_mix_find(pos[2]);
    if (!mix) return cli_usage(usage, "unknown type '%s'", pos[2]);
    char in[1024];
    clf_status st = (clf_status)cli_model_fetch(pos[0], 0, in, sizeof in); /* a catalogue name: fetched on first use */
    if (st != CLF_OK) return cli_error(st);
    cli_catch_sigint(); /* Ctrl-C and SIGTERM stop the conversion or the write cleanly */
    return cli_error(quantize(in, pos[1], mix, force, allow_requant));
}

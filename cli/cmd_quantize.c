/* clinfer quantize IN OUT TYPE: a new GGUF with the weight matrices
 * converted through F32 with the host reference quantizers, each to the
 * type llama.cpp's llama-quantize gives it for TYPE (models/quant_mix.c);
 * vectors (norms, biases) stored F32; metadata copied with
 * general.file_type updated; the output written to a temporary file and
 * renamed, so a failure leaves nothing behind. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gguf.h"
#include "quant.h"
#include "quant_mix.h"

static const char *USAGE = "clinfer quantize IN OUT TYPE   (TYPE: Q4_K_M, Q8_0, ... as llama-quantize; --help lists them)";

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

/* One line on a terminal, rewritten in place; nothing when stderr is not one. */
static void progress(int64_t i, int64_t n, const char *name) {
    static int tty = -1;
    if (tty < 0) tty = isatty(2);
    if (!tty) return;
    if (i < n) fprintf(stderr, "\rclinfer: quantizing %" PRId64 "/%" PRId64 " %-48.48s", i + 1, n, name);
    else fprintf(stderr, "\r%-80s\r", "");
    fflush(stderr);
}

static clf_status quantize(const char *in, const char *out, const clf_quant_mix *mix) {
    clf_gguf *g;
    CLF_TRY(clf_gguf_open(in, &g));
    const int64_t n = clf_gguf_n_tensors(g);
    clf_type *types = malloc((size_t)(n ? n : 1) * sizeof *types);
    int fallback = 0;
    clf_status st = types ? clf_quant_mix_plan(mix, g, types, &fallback) : clf_fail(CLF_ERR_MEMORY, "out of memory");
    clf_gguf_writer *w = NULL;
    if (st == CLF_OK) st = clf_gguf_writer_create(&w);
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_kv(g); i++) st = clf_gguf_set_kv(w, clf_gguf_kv_at(g, i));
    if (st == CLF_OK) st = clf_gguf_set_u32(w, "general.file_type", mix->ftype);
    if (st == CLF_OK && clf_type_get(mix->base)->block > 1 && !clf_gguf_find(g, "general.quantization_version"))
        st = clf_gguf_set_u32(w, "general.quantization_version", 2); /* ggml's */
    int converted = 0, per_type[CLF_TYPE_COUNT] = {0};
    double in_bytes = 0, out_bytes = 0;
    for (int64_t i = 0; st == CLF_OK && i < n; i++) {
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
    if (st == CLF_OK) st = clf_gguf_write(w, out);
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
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_flag(argv, i, "--help")) {
            char names[512];
            printf("usage: %s\n  TYPE: %s\n", USAGE, clf_quant_mix_names(names, sizeof names));
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage(USAGE, "unknown option '%s'", argv[i]);
        if (npos == 3) return cli_usage(USAGE, "too many arguments");
        pos[npos++] = argv[i];
    }
    if (npos != 3) return cli_usage(USAGE, "expected IN OUT TYPE");
    const clf_quant_mix *mix = clf_quant_mix_find(pos[2]);
    if (!mix) return cli_usage(USAGE, "unknown type '%s'", pos[2]);
    return cli_error(quantize(pos[0], pos[1], mix));
}

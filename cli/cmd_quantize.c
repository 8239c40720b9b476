/* clinfer quantize IN OUT TYPE: a new GGUF with every weight matrix (the
 * token embeddings included) converted to TYPE through F32 with the host
 * reference quantizers; vectors (norms, biases) stored F32; metadata copied
 * with general.file_type updated. The output appears only when complete
 * (host/core/outfile.c): a failure, Ctrl-C or SIGTERM leaves nothing behind. It
 * is never the input, and an existing one is replaced only with --force. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "gguf.h"
#include "options.h"
#include "outfile.h"
#include "quant.h"
#include "session.h"

static const char *USAGE = "clinfer quantize [--force] IN OUT TYPE   (TYPE: Q8_0, Q4_0, Q4_1, F16 or F32)\n"
                           "  --force: replace an existing OUT (a link's target; never IN, a read-only file,\n"
                           "           a device, a FIFO or a directory)";

/* llama.cpp's general.file_type numbers ("mostly TYPE"). */
static uint32_t ggml_ftype(clf_type t) {
    switch (t) {
    case CLF_F32: return 0;
    case CLF_F16: return 1;
    case CLF_Q4_0: return 2;
    case CLF_Q4_1: return 3;
    case CLF_Q8_0: return 7;
    }
    return 0;
}

static int is_quantized(clf_type t) { return clf_type_get(t)->block > 1; }

/* The type a tensor is stored in: matrices take the target type when their
 * rows are whole blocks of it (else F32, lossless); vectors stay F32. */
static clf_type out_type(const clf_gguf_tensor *t, clf_type target) {
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (t->n_dims < 2 || rows == 1) return CLF_F32;
    return t->ne[0] % clf_type_get(target)->block ? CLF_F32 : target;
}

static clf_status convert_tensor(clf_gguf_writer *w, const clf_gguf_tensor *t, const char *name, clf_type to) {
    if (t->type == to) return clf_gguf_add_tensor(w, name, to, t->n_dims, t->ne, t->data); /* no requantization */
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    size_t out_bytes = clf_row_bytes(to, t->ne[0]) * (size_t)(n / t->ne[0]);
    float *f = malloc((size_t)n * sizeof *f);
    void *q = to == CLF_F32 ? (void *)f : malloc(out_bytes);
    if (!f || !q) {
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

static int interrupted(void *ud) {
    (void)ud;
    return cli_interrupted != 0;
}

static clf_status quantize(const char *in, const char *out, clf_type target, int force) {
    clf_gguf *g;
    CLF_TRY(clf_gguf_open(in, &g));
    clf_status st = check_output(in, out, force);
    if (st != CLF_OK) {
        clf_gguf_close(g);
        return st;
    }
    clf_gguf_writer *w;
    st = clf_gguf_writer_create(&w);
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_kv(g); i++) st = clf_gguf_set_kv(w, clf_gguf_kv_at(g, i));
    if (st == CLF_OK) st = clf_gguf_set_u32(w, "general.file_type", ggml_ftype(target));
    if (st == CLF_OK && is_quantized(target) && !clf_gguf_find(g, "general.quantization_version"))
        st = clf_gguf_set_u32(w, "general.quantization_version", 2); /* ggml's, for Q4_0/Q4_1/Q8_0 */
    int converted = 0, fallback = 0;
    double in_bytes = 0, out_bytes = 0;
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_tensors(g); i++) {
        if (cli_interrupted) {
            st = CLF_ERR_INTERRUPTED;
            break;
        }
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char *name = malloc((size_t)t->name.len + 1);
        if (!name) {
            st = clf_fail(CLF_ERR_MEMORY, "out of memory");
            break;
        }
        memcpy(name, t->name.ptr, (size_t)t->name.len);
        name[t->name.len] = 0;
        clf_type to = out_type(t, target);
        if (to != target && t->n_dims >= 2 && t->ne[1] > 1) {
            fprintf(stderr, "clinfer: %s: rows of %" PRId64 " are not whole %s blocks, stored F32\n", name, t->ne[0],
                    clf_type_get(target)->name);
            fallback++;
        }
        converted += to != t->type;
        st = convert_tensor(w, t, name, to);
        in_bytes += (double)t->bytes;
        out_bytes += (double)(clf_row_bytes(to, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
        if (st != CLF_OK) clf_fail_ctx(st, "tensor '%s': ", name);
        free(name);
    }
    if (st == CLF_OK) {
        clf_gguf_writer_set_abort(w, interrupted, NULL);
        st = clf_gguf_write(w, out);
    }
    if (st == CLF_ERR_INTERRUPTED) clf_fail(st, "quantize stopped by %s; nothing written", cli_interrupt_name());
    if (st == CLF_OK)
        fprintf(stderr, "clinfer: wrote %s: %" PRId64 " tensors (%d converted%s), weights %.2f MiB -> %.2f MiB, %s\n", out,
                clf_gguf_n_tensors(g), converted, fallback ? ", some kept F32" : "", in_bytes / 1048576.0,
                out_bytes / 1048576.0, clf_type_get(target)->name);
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
    return st;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3];
    int npos = 0, force = 0;
    const cli_option opts[] = {CLI_OPT_FLAG("--force", &force), {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, pos, 3, &npos);
    if (rc >= 0) return rc;
    if (npos != 3) return cli_usage(USAGE, "expected IN OUT TYPE");
    int t = clf_type_from_name(pos[2]);
    if (t < 0) return cli_usage(USAGE, "unknown type '%s'", pos[2]);
    cli_catch_sigint(); /* Ctrl-C and SIGTERM stop the conversion or the write cleanly */
    return cli_error(quantize(pos[0], pos[1], (clf_type)t, force));
}

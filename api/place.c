#include "place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clf_mpi.h"
#include "estimate.h"

static clf_status check_options(const clf_place *p) {
    if (!p->devices) {
        if (p->split || p->ratio)
            return clf_fail(CLF_ERR_ARG, "%s needs --devices SEL,SEL,...", p->split ? "--split" : "--split-ratio");
        return CLF_OK;
    }
    if (p->device) return clf_fail(CLF_ERR_ARG, "--device and --devices exclude each other");
    if (p->split && strcmp(p->split, "layers"))
        return clf_fail(CLF_ERR_ARG, "--split '%s': only 'layers' is supported (each device holds a range of layers)",
                        p->split);
    return CLF_OK;
}

clf_status clf_place_plan(const clf_place *p, const clf_gguf *g, int64_t n_ctx, int64_t n_batch, int kv_bytes,
                          clf_place_split *out, int *planned) {
    memset(out, 0, sizeof *out);
    *planned = 0;
    CLF_TRY(check_options(p));
    /* the selectors */
    char list[1024];
    if (strlen(p->devices) >= sizeof list) return clf_fail(CLF_ERR_ARG, "--devices is too long");
    strcpy(list, p->devices);
    const char *sels[CLF_SPLIT_MAX];
    int n = 0;
    for (char *s = list, *end;; s = end + 1) {
        end = strchr(s, ',');
        if (end) *end = 0;
        if (!*s) return clf_fail(CLF_ERR_ARG, "--devices '%s' has an empty selector", p->devices);
        if (n == CLF_SPLIT_MAX) return clf_fail(CLF_ERR_ARG, "--devices: at most %d devices", CLF_SPLIT_MAX);
        sels[n++] = s;
        if (!end) break;
    }
    double ratio[CLF_SPLIT_MAX];
    int n_ratio = 0;
    if (p->ratio) {
        clf_status st = clf_split_parse_ratio(p->ratio, ratio, CLF_SPLIT_MAX, &n_ratio);
        if (st != CLF_OK) return clf_fail_ctx(st, "--split-ratio: ");
        if (n_ratio != n)
            return clf_fail(CLF_ERR_ARG, "--split-ratio has %d shares for %d devices", n_ratio, n);
    }
    /* the devices, and what each offers */
    clf_device *devs;
    int nd;
    CLF_TRY(clf_devices_list(&devs, &nd));
    double mem[CLF_SPLIT_MAX];
    clf_status st = CLF_OK;
    for (int i = 0; st == CLF_OK && i < n; i++) {
        int k;
        st = clf_device_select(devs, nd, sels[i], &k);
        if (st != CLF_OK) break;
        snprintf(out->sel[i], sizeof out->sel[i], "%d:%d", devs[k].platform_index, devs[k].device_index);
        snprintf(out->names[i], sizeof out->names[i], "%s", devs[k].name);
        mem[i] = (double)devs[k].global_mem;
    }
    free(devs);
    CLF_TRY(st);
    /* the plan, for the context a session makes */
    clf_model_shape shape;
    CLF_TRY(clf_model_shape_from_gguf(g, &shape));
    if (n_ctx <= 0) n_ctx = shape.n_ctx_train && shape.n_ctx_train < 4096 ? shape.n_ctx_train : 4096;
    if (n_batch <= 0 || n_batch > n_ctx) n_batch = n_ctx < 512 ? n_ctx : 512;
    out->n_ctx = n_ctx;
    out->n_batch = n_batch;
    clf_split_model *sm = malloc(sizeof *sm);
    if (!sm) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    st = clf_split_model_from_gguf(g, n_ctx, n_batch, p->n_seq > 0 ? p->n_seq : 1, kv_bytes, sm);
    if (st == CLF_OK) {
        st = clf_split_plan_make(sm, n, p->ratio ? ratio : NULL, mem, &out->plan);
        *planned = out->plan.n == n;
    }
    free(sm);
    return st;
}

void clf_place_print(FILE *f, const clf_place_split *s) {
    const clf_split_plan *p = &s->plan;
    fprintf(f, "split by layers over %d devices (context %lld, chunks of %lld):\n", p->n, (long long)s->n_ctx,
            (long long)s->n_batch);
    fprintf(f, "  %-5s %-7s %-10s %12s %12s %12s %12s %12s\n", "stage", "device", "layers", "weights MiB", "KV MiB",
            "scratch MiB", "total MiB", "device MiB");
    for (int i = 0; i < p->n; i++) {
        const clf_split_stage *st = &p->st[i];
        char layers[32];
        snprintf(layers, sizeof layers, "%d-%d", st->l0, st->l1 - 1);
        fprintf(f, "  %-5d %-7s %-10s %12.1f %12.1f %12.1f %12.1f %12.1f%s\n", i, s->sel[i], layers,
                st->weight_bytes / 1048576.0, st->kv_bytes / 1048576.0, st->scratch_bytes / 1048576.0,
                st->total_bytes / 1048576.0, st->device_bytes / 1048576.0,
                st->total_bytes > st->device_bytes ? "  does not fit" : "");
    }
    fprintf(f, "  crossing a boundary: %.0f bytes per token (n_embd F32 activations); boundaries: %d\n",
            p->hop_bytes_per_token, p->n - 1);
}

/* Under MPI: stage 0 here, on `device`; the others on ranks 1..N-1, each
 * on its own device (the same selector, or its own CLINFER_DEVICE); the
 * ratio shares the layers between ranks (default: equal weight bytes). */
static clf_status open_mpi(const clf_place *p, const clf_gguf *g, void (*prepare)(clf_runtime *rt, void *ud),
                           void *ud, clf_stages *out) {
    if (p->devices || p->split)
        return clf_fail(CLF_ERR_ARG, "--mpi holds one stage per rank: not with --devices or --split (--device "
                                     "picks each rank's)");
    double ratio[CLF_SPLIT_MAX];
    int n_ratio = 0;
    if (p->ratio) {
        clf_status st = clf_split_parse_ratio(p->ratio, ratio, CLF_SPLIT_MAX, &n_ratio);
        if (st != CLF_OK) return clf_fail_ctx(st, "--split-ratio: ");
    }
    CLF_TRY(clf_runtime_create(p->device, &out->rt[0]));
    out->n = 1;
    if (prepare) prepare(out->rt[0], ud);
    clf_status st = clf_mpi_load(out->rt[0], g, p->model, p->device, p->ratio ? ratio : NULL, n_ratio, &out->m[0]);
    if (st != CLF_OK) clf_stages_close(out);
    return st;
}

/* Bytes the system could give this process now: MemAvailable (free and
 * reclaimable); -1 where /proc/meminfo does not say. */
static double mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) kb = strtod(line + 13, NULL);
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024.0;
}

/* A context's bytes (KV, scratch) and the weights', from the file. */
static clf_status need(const clf_gguf *g, int n_ctx, int n_seq, clf_type kv, clf_split_model *sm, double *weights,
                       double *kv_bytes, double *scratch) {
    const int n_batch = n_ctx < 512 ? n_ctx : 512; /* the sessions' default batch */
    const int elem = kv == CLF_F32 ? 4 : kv == CLF_F16 ? 2 : 1; /* Q8_0 / Q4_0 planned at a byte: generous */
    CLF_TRY(clf_split_model_from_gguf(g, n_ctx, n_batch, n_seq, elem, sm));
    *weights = sm->first_bytes + sm->last_bytes + sm->common_bytes;
    *kv_bytes = 0;
    for (int l = 0; l < sm->n_layer; l++) *weights += sm->layer_bytes[l], *kv_bytes += sm->layer_kv[l];
    *scratch = sm->scratch_bytes + sm->logits_bytes;
    return CLF_OK;
}

clf_status clf_fit(const clf_runtime *rt, const clf_gguf *g, int n_ctx, int n_seq, clf_type kv, int *n_ctx_fit) {
    *n_ctx_fit = 0;
    clf_model_shape shape;
    CLF_TRY(clf_model_shape_from_gguf(g, &shape));
    const int dflt = shape.n_ctx_train > 0 && shape.n_ctx_train < 4096 ? (int)shape.n_ctx_train : 4096;
    const int asked = n_ctx > 0;
    if (!asked) n_ctx = dflt;
    double free_b = (double)rt->dev.global_mem;
    const double avail = rt->dev.type & CL_DEVICE_TYPE_CPU ? mem_available() : -1;
    if (avail >= 0 && avail < free_b) free_b = avail;
    clf_split_model *sm = malloc(sizeof *sm);
    if (!sm) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    double w, k, sc;
    clf_status st = need(g, n_ctx, n_seq, kv, sm, &w, &k, &sc);
    if (st == CLF_OK && w + k + sc <= free_b) {
        *n_ctx_fit = n_ctx;
        free(sm);
        return CLF_OK;
    }
    /* the largest context that fits, by halving then stepping up by 256 */
    int lo = 0;
    double wl, kl, sl;
    for (int c = 256; st == CLF_OK && c < n_ctx; c += c < 4096 ? 256 : c / 8) {
        if ((st = need(g, c, n_seq, kv, sm, &wl, &kl, &sl)) == CLF_OK && wl + kl + sl <= free_b) lo = c;
        else break;
    }
    free(sm);
    CLF_TRY(st);
    char a[32], b[32], c[32], d[32];
    if (lo == 0)
        return clf_fail(CLF_ERR_MEMORY, "the model does not fit %s: weights %s + KV cache of 256 positions and scratch "
                        "need more than the %s it can hold now (global memory %s)", rt->dev.name, clf_bytes_str(w, a, sizeof a),
                        clf_bytes_str(free_b, b, sizeof b), clf_bytes_str((double)rt->dev.global_mem, c, sizeof c));
    if (asked)
        return clf_fail(CLF_ERR_MEMORY, "a context of %d positions does not fit %s: weights %s + KV cache %s + scratch "
                        "%s > %s it can hold now; the largest that fits is %d (-c %d)", n_ctx, rt->dev.name,
                        clf_bytes_str(w, a, sizeof a), clf_bytes_str(k, b, sizeof b), clf_bytes_str(sc, c, sizeof c), clf_bytes_str(free_b, d, sizeof d), lo, lo);
    *n_ctx_fit = lo;
    clf_runtime_notice(rt, "a context of %d positions: the largest that fits %s (%s free) beside weights of %s", lo,
                       rt->dev.name, clf_bytes_str(free_b, b, sizeof b), clf_bytes_str(w, a, sizeof a));
    return CLF_OK;
}

clf_status clf_stages_open(const clf_place *p, const clf_gguf *g, int n_ctx, clf_type kv,
                           void (*prepare)(clf_runtime *rt, void *ud), void *ud, clf_stages *out) {
    memset(out, 0, sizeof *out);
    if (p->mpi) return open_mpi(p, g, prepare, ud, out);
    if (!p->devices) {
        CLF_TRY(check_options(p));
        out->n = 1;
        CLF_TRY(clf_runtime_create(p->device, &out->rt[0]));
        if (prepare) prepare(out->rt[0], ud);
        clf_status st = clf_fit(out->rt[0], g, p->n_ctx > 0 ? p->n_ctx : n_ctx, p->n_seq > 0 ? p->n_seq : 1, kv,
                                &out->n_ctx_fit);
        if (st == CLF_OK) st = clf_llama_load(out->rt[0], g, &out->m[0]);
        if (st != CLF_OK) clf_stages_close(out);
        return st;
    }
    clf_place_split *s = malloc(sizeof *s);
    if (!s) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    int planned;
    clf_status st = clf_place_plan(p, g, p->n_ctx > 0 ? p->n_ctx : n_ctx > 0 ? n_ctx : 0, 0, kv == CLF_F32 ? 4 : 2 /* a quantized cache planned as F16 */, s,
                                   &planned);
    int l0[CLF_SPLIT_MAX], l1[CLF_SPLIT_MAX];
    for (int i = 0; st == CLF_OK && i < s->plan.n; i++) {
        out->n = i + 1;
        st = clf_runtime_create(s->sel[i], &out->rt[i]);
        if (st == CLF_OK && prepare) prepare(out->rt[i], ud);
        l0[i] = s->plan.st[i].l0;
        l1[i] = s->plan.st[i].l1;
    }
    if (st == CLF_OK) st = clf_stage_local_load(out->rt, out->n, g, l0, l1, out->m);
    free(s);
    if (st != CLF_OK) clf_stages_close(out);
    return st;
}

const char *clf_stages_devices(const clf_stages *s, char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; i < s->n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", i ? " + " : "", s->rt[i]->dev.name);
    }
    snprintf(buf + strlen(buf), n - strlen(buf), "%s", clf_mpi_devices()); /* the other ranks' ("" without MPI) */
    return buf;
}

void clf_stages_close(clf_stages *s) {
    clf_stage_local_free(s->m, s->n);
    for (int i = 0; i < s->n; i++) clf_runtime_free(s->rt[i]);
    memset(s, 0, sizeof *s);
}

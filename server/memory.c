/* A server's memory against its device and host (memory.h). */
#include "memory.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double srv_host_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kib = -1;
    while (f && kib < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) kib = strtod(line + 13, NULL);
    if (f) fclose(f);
    if (kib >= 0) return kib * 1024.0;
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : -1;
}

clinfer_status srv_mem_device(const char *selector, double *global_mem, int *is_cpu) {
    int idx;
    clinfer_device_info d = {.size = sizeof d};
    clinfer_status st = clinfer_device_select(selector, &idx);
    if (st == CLINFER_OK) st = clinfer_device_get(idx, &d);
    if (st != CLINFER_OK) return st;
    *global_mem = (double)d.global_mem;
    *is_cpu = !strcmp(d.type, "CPU");
    return CLINFER_OK;
}

double srv_mem_draft_laws(int n_slots, int draft_max, int n_target, int n_draft) {
    if (n_slots <= 0 || draft_max <= 0) return 0;
    const double shared = n_target < n_draft ? n_target : n_draft; /* ids a draft may use */
    /* the laws: a slot's draft_max of them, each (int32 id, float chance) per candidate, at most every shared id */
    const double laws = (double)n_slots * draft_max * shared * (double)(sizeof(int32_t) + sizeof(float));
    /* the scratch rows: logits and the dense q row (the target's ids), candidates' ids and logits (the shared) */
    const double scratch = 2.0 * n_target * sizeof(float) + shared * (double)(sizeof(int32_t) + sizeof(float));
    return laws + scratch;
}

/* "1.5 GiB", "120.0 MiB" */
static const char *size_str(double b, char *out, size_t n) {
    if (b >= 1024.0 * 1048576.0) snprintf(out, n, "%.1f GiB", b / (1024.0 * 1048576.0));
    else snprintf(out, n, "%.1f MiB", b / 1048576.0);
    return out;
}

/* The parts of b chosen by `device` and `host` into out ("weights X + KV
 * Y + ..."; those of 0 bytes left out) and their sum. */
static double parts(const srv_mem *b, int device, int host, char *out, size_t n) {
    const struct { const char *name; double bytes; int dev; } p[] = {
        {"weights", b->weights, 1}, {"KV cache", b->kv, 1}, {"LoRA adapters", b->adapters, 1},
        {"draft model (-md, weights and KV)", b->draft, 1}, {"draft laws (-md, sampled drafts)", b->draft_laws, 0},
        {"--cache-ram", b->cache_ram, 0}};
    double sum = 0;
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        if (p[i].bytes <= 0 || !(p[i].dev ? device : host)) continue;
        char s[32];
        if (at < n) at += (size_t)snprintf(out + at, n - at, "%s%s %s", sum > 0 ? " + " : "", p[i].name,
                                           size_str(p[i].bytes, s, sizeof s));
        sum += p[i].bytes;
    }
    return sum;
}

clinfer_status srv_mem_check(const srv_mem *b, double global_mem, int is_cpu, double host_avail) {
    char what[512], a[32], c[32];
    /* the device: what the models hold there */
    const double dev = parts(b, 1, 0, what, sizeof what);
    if (global_mem > 0 && dev > global_mem)
        return clinfer_fail(CLINFER_ERR_MEMORY, "the server does not fit its device: %s = %s, more than its %s of "
                            "global memory", what, size_str(dev, a, sizeof a), size_str(global_mem, c, sizeof c));
    /* the host: --cache-ram, and on a CPU device everything (its memory is
     * the host's), against what the system could give before the load */
    const double host = parts(b, is_cpu, 1, what, sizeof what);
    if (host_avail > 0 && host > host_avail)
        return clinfer_fail(CLINFER_ERR_MEMORY, "the server does not fit the host's memory: %s = %s, more than the "
                            "%s it could give before the model loaded (MemAvailable)%s", what,
                            size_str(host, a, sizeof a), size_str(host_avail, c, sizeof c),
                            b->cache_ram > 0 ? ": lower --cache-ram" : "");
    return CLINFER_OK;
}

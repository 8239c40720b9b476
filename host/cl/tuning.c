/* The device-tuning table and its resolution (see tuning.h). */
#include "tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hash.h"
#include "runtime.h"

/* ---- the parameters: name, meaning, range (stated once) ----------------- */

static const char *const MATMUL_NAMES[] = {"cpu", "cpu-portable", "gpu", NULL};
static const char *const SHAPE_NAMES[] = {"cpu", "gpu", NULL};
static const char *const WIDTH_NAMES[] = {"auto", "256", "512", NULL};

typedef struct param {
    const char *name;
    size_t off;                /* offset of the int in clf_tuning */
    int lo, hi;                /* range, for numbers */
    const char *const *names;  /* value names, for choices (index = value) */
    const char *help;
} param;

#define P(field) #field, offsetof(clf_tuning, field)
static const param params[] = {
    {P(matmul), 0, 0, MATMUL_NAMES,
     "product kernels: cpu (weights re-laid in 32-row panels, register tiles in float16 vectors, clang's __fp16: "
     "PoCL), cpu-portable (the same in plain OpenCL C 1.2), gpu (GGUF layout, local-memory tiles)"},
    {P(int8_gemv), 0, 1, NULL,
     "decode GEMVs on int8 activations: byte multiply-adds on matmul=cpu (x86 AVX2 or AVX-512BW), integer dot "
     "products on matmul=gpu (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K); 0: float GEMVs"},
    {P(int8_width), 0, 0, WIDTH_NAMES,
     "matmul=cpu: vector width of the int8 kernels (the same sums bit for bit at either): auto, the widest the "
     "device's compiler targets (512 with AVX-512BW, 256 with AVX2), or at most 256 or 512"},
    {P(int8_ppw), 1, 16, NULL,
     "most panels (32 rows each) per work-item of the Q4 int8 GEMVs, which share one quantized x (fewer where "
     "that evens the work over the compute units)"},
    {P(int8_ppw_q8), 1, 16, NULL, "most panels per work-item of the Q8_0 int8 GEMV"},
    {P(int8_vnni), 0, 2, NULL,
     "the int8 products' byte dot products by vpdpbusd (inline asm), where the device is a CPU that has it: 1 "
     "AVX512-VNNI (EVEX; at 256 bits with AVX512-VL, else AVX-VNNI), 2 AVX-VNNI's VEX form; resolved to the form "
     "the CPU has, 0 without one"},
    {P(int8_gemm), 0, 65536, NULL,
     "products of at least this many tokens (prefill) on int8 activations: each block's codes unpacked once per "
     "token tile, every row bit for bit the int8 GEMV's; 0: the float GEMM (needs int8_gemv)"},
    {P(int8_tm), 2, 12, NULL,
     "most token rows of an int8 GEMM work-item's tile (fewer where the batch is smaller): its accumulators and a "
     "block's codes share the vector registers"},
    {P(gemm_tm), 2, 16, NULL, "cpu: token rows of a GEMM work-item's register tile above 12 tokens"},
    {P(gemm_mg), 1, 64, NULL, "cpu: token tiles a GEMM work-item takes in turn, reusing its weight panel from cache"},
    {P(gpu_rpw), 1, 64, NULL, "gpu: weight rows per GEMV work-group"},
    {P(gpu_skinny_max), 1, 64, NULL, "gpu: up to this many tokens take the GEMV-shaped kernel"},
    {P(gpu_tile_max), 32, 128, NULL, "gpu: largest square GEMM work-group tile (32, 64 or 128 tokens x rows)"},
    {P(attn), 0, 0, SHAPE_NAMES,
     "attention kernels: cpu (16 query rows as float16 lanes per work-item), gpu (64 rows per work-group, K/V tiles "
     "in local memory)"},
    {P(attn_split_keys), 16, 65536, NULL, "decode attention: fewest keys one split takes (bounds its fixed cost)"},
    {P(attn_split_cu), 1, 64, NULL, "decode attention: splits per compute unit the cache is cut into"},
    {P(ops), 0, 0, SHAPE_NAMES, "row reductions (RMSNorm, softmax): cpu (one work-item a row), gpu (64-256 lanes a row)"},
    {P(binaries), 0, 1, NULL,
     "1: keep program binaries in the kernel cache; 0: let the driver cache its own builds (asking PoCL for a "
     "binary makes it compile every kernel of the program)"},
};
#undef P
enum { NPARAMS = sizeof params / sizeof params[0] };

static int *field(clf_tuning *t, const param *p) { return (int *)((char *)t + p->off); }
static int value_of(const clf_tuning *t, const param *p) { return *(const int *)((const char *)t + p->off); }

/* ---- the table ------------------------------------------------------------
 * type: "cpu", "gpu", "accelerator" or "*"; platform: a substring of the
 * platform or vendor name, or "*"; device: substrings of the device name
 * separated by '|', or "*"; width: "*", or the int8 kernels' width ("256",
 * "512") for values that are that width's register budget, applied once
 * the device's capabilities have fixed the width (clf_tuning_resolve's
 * second pass). Rows go from the general to the specific; every row that
 * matches is applied in order, so each level starts from its default row.
 * `why` cites the measurement behind a row. */
typedef struct row {
    const char *type, *platform, *device, *width;
    const char *values;
    const char *why;
} row;

static const row table[] = {
    {"*", "*", "*", "*",
     "matmul=cpu-portable int8_gemv=0 int8_width=auto int8_ppw=4 int8_ppw_q8=1 int8_vnni=0 int8_gemm=0 int8_tm=8 gemm_tm=8 gemm_mg=16 gpu_rpw=4 gpu_skinny_max=16 "
     "gpu_tile_max=128 attn=cpu attn_split_keys=256 attn_split_cu=8 ops=cpu binaries=1",
     "CPU shapes: one SIMD work-item per row or panel; bench/RESULTS.md 'Tuning table'"},
    {"gpu", "*", "*", "*", "matmul=gpu int8_gemv=1 attn=gpu attn_split_keys=64 attn_split_cu=4 ops=gpu",
     "local-memory tiles and work-groups; H200 run, bench/results/h200/; int8 GEMVs: bench/RESULTS.md 'GPU "
     "GEMVs' (PoCL only so far)"},
    {"accelerator", "*", "*", "*", "matmul=gpu int8_gemv=1 attn=gpu attn_split_keys=64 attn_split_cu=4 ops=gpu",
     "as a GPU"},
    {"cpu", "Portable Computing Language", "*", "*", "matmul=cpu binaries=0 int8_gemv=1 int8_vnni=1 int8_gemm=2",
     "PoCL compiles with clang: __fp16 vectors convert in one instruction; it caches its own builds, and a "
     "first run without binaries is 3-4x shorter (bench/RESULTS.md 'First run'). The int8 products wherever the "
     "probe finds AVX2 or AVX-512BW (capabilities below): AVX-512BW Q4 GEMVs 1.7-1.9x, Q8_0 tg +4-10%; int8_vnni: "
     "bit for bit the pmaddubsw form, K-quant pp512 1.11-1.12x; int8_gemm=2: the int8 GEMM beats the float one "
     "from the smallest batch (pp4-pp16 1.2-2.3x, pp512 1.9-2.5x), and from 2 every product's rows are the GEMV's "
     "whatever the batch; bench/RESULTS.md 'Tuning table', 'int8 prefill GEMM and VNNI (issue 12)', 'AVX2 (issue 24)'"},
    /* the int8 kernels at 256 bits: 16 vector registers of half the width, so a 512-bit value is two */
    {"cpu", "*", "*", "256", "int8_ppw=1 int8_tm=4",
     "a work-item's accumulators are twice the registers of 512 bits' (AVX2 has 16 ymm, AVX-512 32 zmm): half the "
     "panels and tokens keep them in registers; bench/RESULTS.md 'AVX2 (issue 24)'"},
};

static int type_matches(const char *type, const clf_device *d) {
    if (!strcmp(type, "*")) return 1;
    if (!strcmp(type, "cpu")) return (d->type & CL_DEVICE_TYPE_CPU) != 0;
    if (!strcmp(type, "gpu")) return (d->type & CL_DEVICE_TYPE_GPU) != 0;
    return (d->type & CL_DEVICE_TYPE_ACCELERATOR) != 0;
}

/* Any '|'-separated alternative a case-insensitive substring of one of s[]. */
static int text_matches(const char *alts, const char *a, const char *b) {
    if (!strcmp(alts, "*")) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", alts);
    for (char *save = NULL, *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
        if (strcasestr(a, w) || (b && strcasestr(b, w))) return 1;
    return 0;
}

/* "cpu/pocl/avx512": a short name of a row for `devices --json`. */
static void row_name(const row *r, char *buf, size_t n) {
    const char *plat = !strcmp(r->platform, "*") ? "*" : strstr(r->platform, "Portable") ? "pocl" : r->platform;
    char dev[32];
    snprintf(dev, sizeof dev, "%s", r->device);
    char *bar = strchr(dev, '|');
    if (bar) *bar = 0;
    snprintf(buf, n, "%s/%s/%s%s%s", r->type, plat, dev, strcmp(r->width, "*") ? "/int8-" : "",
             strcmp(r->width, "*") ? r->width : "");
}

/* ---- assignments: "name=value ..." ----------------------------------------- */

static const param *find_param(const char *name, size_t len) {
    for (int i = 0; i < NPARAMS; i++)
        if (strlen(params[i].name) == len && !strncmp(params[i].name, name, len)) return &params[i];
    return NULL;
}

static clf_status bad_value(const param *p, const char *v, const char *origin) {
    if (p->names) {
        char list[96] = "";
        for (int i = 0; p->names[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", p->names[i]);
        return clf_fail(CLF_ERR_ARG, "%s: %s must be one of %s, not '%s'", origin, p->name, list, v);
    }
    return clf_fail(CLF_ERR_ARG, "%s: %s must be a whole number from %d to %d, not '%s'", origin, p->name, p->lo,
                    p->hi, v);
}

static clf_status set_value(clf_tuning *t, const param *p, const char *v, const char *origin) {
    if (p->names) {
        for (int i = 0; p->names[i]; i++)
            if (!strcasecmp(v, p->names[i])) {
                *field(t, p) = i;
                return CLF_OK;
            }
        return bad_value(p, v, origin);
    }
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < p->lo || x > p->hi) return bad_value(p, v, origin);
    *field(t, p) = (int)x;
    return CLF_OK;
}

clf_status clf_tuning_apply(clf_tuning *t, const char *assignments, const char *origin) {
    const char *s = assignments;
    while (*s) {
        s += strspn(s, " \t\n");
        if (!*s) break;
        size_t len = strcspn(s, " \t\n");
        const char *eq = memchr(s, '=', len);
        if (!eq) return clf_fail(CLF_ERR_ARG, "%s: expected name=value, not '%.*s'", origin, (int)len, s);
        const param *p = find_param(s, (size_t)(eq - s));
        if (!p) return clf_fail(CLF_ERR_ARG, "%s: no tuning parameter '%.*s'", origin, (int)(eq - s), s);
        char v[64];
        snprintf(v, sizeof v, "%.*s", (int)(len - (size_t)(eq - s) - 1), eq + 1);
        CLF_TRY(set_value(t, p, v, origin));
        s += len;
    }
    return CLF_OK;
}

void clf_tuning_value_text(const clf_tuning *t, int i, char *buf, size_t n) {
    const param *p = &params[i];
    if (p->names) snprintf(buf, n, "%s", p->names[value_of(t, p)]);
    else snprintf(buf, n, "%d", value_of(t, p));
}

void clf_tuning_format(const clf_tuning *t, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < NPARAMS && used < n; i++) {
        char v[32];
        clf_tuning_value_text(t, i, v, sizeof v);
        used += (size_t)snprintf(buf + used, n - used, "%s%s=%s", i ? " " : "", params[i].name, v);
    }
}

void clf_tuning_kernels(const clf_tuning *t, char *buf, size_t n) {
    static const char *const vnni[] = {"", " with vpdpbusd (AVX512-VNNI)", " with vpdpbusd (AVX-VNNI)"};
    const char *fam = MATMUL_NAMES[t->matmul];
    if (!t->int8_gemv) snprintf(buf, n, "%s products on float activations", fam);
    else if (t->matmul != CLF_MATMUL_CPU) snprintf(buf, n, "%s products, int8 decode GEMVs (integer dot products)", fam);
    else if (t->int8_gemm)
        snprintf(buf, n, "%s products, int8 at %s bits%s, the int8 GEMM from %d tokens", fam,
                 WIDTH_NAMES[t->int8_width], vnni[t->int8_vnni], t->int8_gemm);
    else snprintf(buf, n, "%s products, int8 decode GEMVs at %s bits%s", fam, WIDTH_NAMES[t->int8_width], vnni[t->int8_vnni]);
}

const char *clf_tuning_param_name(int i) { return i >= 0 && i < NPARAMS ? params[i].name : NULL; }
const char *clf_tuning_param_help(int i) { return i >= 0 && i < NPARAMS ? params[i].help : NULL; }

/* ---- resolution ------------------------------------------------------------ */

/* The rows that match d, with those of int8 width `width` (CLF_INT8_*;
 * auto: none of them). */
static clf_status table_values(const clf_device *d, int width, clf_tuning *t) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const row *r = &table[i];
        if (!type_matches(r->type, d) || !text_matches(r->platform, d->platform_name, d->vendor) ||
            !text_matches(r->device, d->name, NULL) ||
            (strcmp(r->width, "*") && (width == CLF_INT8_AUTO || strcmp(r->width, WIDTH_NAMES[width]))))
            continue;
        CLF_TRY(clf_tuning_apply(t, r->values, "tuning table"));
        row_name(r, t->row, sizeof t->row);
    }
    return CLF_OK;
}

/* What a device can run whatever a row or override says, from its probed
 * capabilities (host/cl/probe.c), never its name: the cpu family's __fp16
 * vectors need clang; the int8 products are part of that family (or the
 * gpu one's) and on it take the widest x86 width the compiler targets, at
 * most int8_width; their vpdpbusd is inline asm, so what allows it is the
 * CPU that runs it (cpuid, for PoCL's device) or the compiler's target. */
static void capabilities(const clf_device *d, clf_tuning *t) {
    const unsigned c = d->caps;
    if (t->matmul == CLF_MATMUL_CPU && !(c & CLF_CAP_CLANG)) t->matmul = CLF_MATMUL_CPU_PORTABLE;
    if (t->matmul == CLF_MATMUL_CPU_PORTABLE) t->int8_gemv = 0;
    if (t->matmul == CLF_MATMUL_CPU && t->int8_gemv) {
        const int x86 = (c & CLF_CAP_X86) != 0;
        if (x86 && (c & CLF_CAP_AVX512BW) && t->int8_width != CLF_INT8_256) t->int8_width = CLF_INT8_512;
        else if (x86 && (c & CLF_CAP_AVX2)) t->int8_width = CLF_INT8_256;
        else t->int8_gemv = 0;
    }
    if (!t->int8_gemv || t->matmul != CLF_MATMUL_CPU) t->int8_vnni = t->int8_gemm = t->int8_width = 0;
    const int evex = (c & (CLF_CAP_AVX512VNNI | CLF_CAP_HOST_AVX512VNNI)) != 0 &&
                     (t->int8_width == CLF_INT8_512 || (c & (CLF_CAP_AVX512VL | CLF_CAP_HOST_AVX512VL)) != 0);
    const int vex = t->int8_width == CLF_INT8_256 && (c & (CLF_CAP_AVXVNNI | CLF_CAP_HOST_AVXVNNI)) != 0;
    if (t->int8_vnni) t->int8_vnni = vex && (t->int8_vnni == 2 || !evex) ? 2 : evex ? 1 : 0;
}

clf_status clf_tuning_override(const clf_device *d, clf_tuning *t, const char *assignments) {
    CLF_TRY(clf_tuning_apply(t, assignments, "tuning override"));
    capabilities(d, t);
    return CLF_OK;
}

void clf_tuning_path(const clf_device *d, const char *cache_dir, char *buf, size_t n) {
    uint64_t key = clf_fnv1a_str(CLF_FNV1A_SEED, d->name);
    key = clf_fnv1a_str(key, d->driver);
    key = clf_fnv1a_str(key, d->platform_version);
    snprintf(buf, n, "%s/tune-%016llx.txt", cache_dir, (unsigned long long)key);
}

/* The tune file: comment lines (#) and one line of assignments. */
static clf_status read_tune_file(const char *path, clf_tuning *t, int *found) {
    *found = 0;
    FILE *f = fopen(path, "r");
    if (!f) return CLF_OK;
    char line[1024];
    clf_status st = CLF_OK;
    while (st == CLF_OK && fgets(line, sizeof line, f))
        if (line[0] != '#') st = clf_tuning_apply(t, line, path);
    fclose(f);
    if (st != CLF_OK) return clf_fail_ctx(CLF_ERR_FORMAT, "tune file (delete it or run clinfer tune again): ");
    *found = 1;
    return CLF_OK;
}

/* CLINFER_<X>_VARIANT=value|auto as "<param>=value". */
static clf_status env_variant(clf_tuning *t, const char *var, const char *param_name) {
    const char *e = getenv(var);
    if (!e || !*e || !strcasecmp(e, "auto")) return CLF_OK;
    const param *p = find_param(param_name, strlen(param_name));
    clf_status st = set_value(t, p, e, var);
    if (st != CLF_OK) return clf_fail(CLF_ERR_ARG, "%s must be %s or auto, not '%s'", var,
                                      p->names == MATMUL_NAMES ? "cpu, cpu-portable, gpu" : "cpu, gpu", e);
    snprintf(t->overrides + strlen(t->overrides), sizeof t->overrides - strlen(t->overrides), "%s%s=%s",
             t->overrides[0] ? " " : "", param_name, e);
    return CLF_OK;
}

static clf_status resolve_pass(const clf_device *d, const char *cache_dir, int width, clf_tuning *t) {
    CLF_TRY(table_values(d, width, t));
    if (cache_dir && *cache_dir) {
        char path[1100];
        clf_tuning_path(d, cache_dir, path, sizeof path);
        CLF_TRY(read_tune_file(path, t, &t->tuned));
    }
    CLF_TRY(env_variant(t, "CLINFER_MATMUL_VARIANT", "matmul"));
    CLF_TRY(env_variant(t, "CLINFER_ATTN_VARIANT", "attn"));
    CLF_TRY(env_variant(t, "CLINFER_OPS_VARIANT", "ops"));
    const char *e = getenv("CLINFER_TUNE");
    if (e && *e) {
        CLF_TRY(clf_tuning_apply(t, e, "CLINFER_TUNE"));
        snprintf(t->overrides + strlen(t->overrides), sizeof t->overrides - strlen(t->overrides), "%s%s",
                 t->overrides[0] ? " " : "", e);
    }
    capabilities(d, t);
    return CLF_OK;
}

/* Twice where there are int8 kernels: the width comes out of the
 * capabilities, then its rows apply under the tune file and environment. */
clf_status clf_tuning_resolve(const clf_device *d, const char *cache_dir, clf_tuning *t) {
    CLF_TRY(resolve_pass(d, cache_dir, CLF_INT8_AUTO, t));
    return t->int8_width == CLF_INT8_AUTO ? CLF_OK : resolve_pass(d, cache_dir, t->int8_width, t);
}

clf_status clf_tuning_save(const clf_device *d, const char *cache_dir, const clf_tuning *t) {
    if (!cache_dir || !*cache_dir)
        return clf_fail(CLF_ERR_IO, "the kernel cache is off (CLINFER_CACHE_DIR is empty): nowhere to keep tuning");
    clf_tuning base;
    CLF_TRY(table_values(d, t->int8_width, &base));
    char line[1024] = "";
    for (int i = 0; i < NPARAMS; i++) {
        if (value_of(t, &params[i]) == value_of(&base, &params[i])) continue;
        char v[32];
        clf_tuning_value_text(t, i, v, sizeof v);
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s=%s", line[0] ? " " : "", params[i].name, v);
    }
    char path[1100], tmp[1200];
    clf_tuning_path(d, cache_dir, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return clf_fail(CLF_ERR_IO, "cannot write %s", tmp);
    int ok = fprintf(f, "# clinfer tune: %s, driver %s, %s; table row %s\n%s\n", d->name, d->driver,
                     d->platform_version, base.row, line) > 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return clf_fail(CLF_ERR_IO, "cannot write %s", path);
    }
    return CLF_OK;
}

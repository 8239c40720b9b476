/* Matrix products: weight upload (re-laid for the device's kernel variant),
 * kernel choice by shape and device, and another GEMM for comparisons (clf_matmul_set_gemm).
 *
 * Kernel variants (the device's tuning picks one, host/cl/tuning.h;
 * CLINFER_MATMUL_VARIANT forces one, so tests run every variant on one
 * device):
 *  - cpu-portable: weights in panels of 32 rows (cl/matmul_cpu.cl), one big
 *    work-item per panel and token tile, wide explicit vectors, no local
 *    memory; OpenCL C 1.2 only;
 *  - cpu: the same on PoCL, with clang's __fp16 conversions and, where the
 *    tuning says int8_gemv (x86 CPUs with AVX2 or AVX-512BW, at int8_width),
 *    GEMVs on int8 x with integer multiply-adds (vpdpbusd where int8_vnni), and from
 *    int8_gemm tokens on GEMMs on int8 x, each token's row bit for bit the
 *    GEMV's;
 *  - gpu: weights in GGUF layout, local-memory tiles (cl/matmul_gpu.cl). */
#include "matmul.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "matmul_panels.h"
#include "ops.h"
#include "parallel.h"

/* A kernel family and its tunables on this device (from rt->tune). */
typedef struct mm_variant {
    const char *name;
    int panels;     /* 1: panel layout and cl/matmul_cpu.cl; 0: GGUF layout and cl/matmul_gpu.cl */
    int fp16_clang; /* cpu: convert halves with clang's __fp16 vectors */
    int x86_int8;   /* cpu: int8 x products on x86 integer builtins of this width (256, 512; 0: none) */
    int gpu_int8;   /* gpu: decode GEMVs on int8 x with integer dot products (gpu_int8()'s types) */
    int x86_vnni;   /* cpu: their byte dot products by vpdpbusd: 1 AVX512-VNNI, 2 AVX-VNNI (tuning's int8_vnni) */
    int int8_gemm;  /* cpu: fewest tokens that take the int8 GEMM (0: never) */
    int int8_ppw;   /* cpu: panels per work-item of the Q4 GEMVs (its quantized x is shared) */
    int int8_ppw_q8; /* cpu: the same for Q8_0, which reads twice the bytes */
    int int8_tm;    /* cpu: most token rows of an int8 GEMM tile */
    int gemm_tm;    /* cpu: token rows of a GEMM work-item tile */
    int gemm_mg;    /* cpu: token tiles a work-item takes in turn, reusing its weight panel from cache */
    /* gpu GEMM tiles (tokens x rows per work-group, per work-item), smallest
     * first; see gpu_tile */
    struct mm_tile { int bm, bn, rm, rn; } tiles[3];
    int tile_max;   /* gpu: largest tile bm the tuning allows */
    int rpw;        /* gpu: GEMV rows per work-group */
    int skinny_max; /* gpu: n up to this takes the GEMV-shaped kernel */
} mm_variant;

enum { VAR_COUNT = CLF_MATMUL_GPU + 1 };

/* What each family is, whatever the device (index: CLF_MATMUL_*). */
static const mm_variant families[VAR_COUNT] = {
    [CLF_MATMUL_CPU] = {.name = "cpu", .panels = 1, .fp16_clang = 1},
    [CLF_MATMUL_CPU_PORTABLE] = {.name = "cpu-portable", .panels = 1},
    [CLF_MATMUL_GPU] = {.name = "gpu", .tiles = {{32, 32, 2, 2}, {64, 64, 4, 4}, {128, 128, 8, 8}}},
};

/* Family `layout` with this device's tunables. */
static mm_variant variant_of(const clf_runtime *rt, int layout) {
    const clf_tuning *t = &rt->tune;
    mm_variant v = families[layout];
    v.x86_int8 = layout == CLF_MATMUL_CPU && t->int8_gemv ? (t->int8_width == CLF_INT8_512 ? 512 : 256) : 0;
    v.gpu_int8 = layout == CLF_MATMUL_GPU && t->int8_gemv;
    v.x86_vnni = v.x86_int8 ? t->int8_vnni : 0;
    v.int8_gemm = v.x86_int8 ? t->int8_gemm : 0;
    v.int8_ppw = t->int8_ppw;
    v.int8_ppw_q8 = t->int8_ppw_q8;
    v.int8_tm = t->int8_tm;
    v.gemm_tm = t->gemm_tm;
    v.gemm_mg = t->gemm_mg;
    v.tile_max = t->gpu_tile_max;
    v.rpw = t->gpu_rpw;
    v.skinny_max = t->gpu_skinny_max;
    return v;
}

/* CPU tile rows for n tokens. Measured on PoCL (Zen 4, 576 -> 3072): one
 * pass with the smallest tile that covers n beats several passes of a
 * smaller one (n = 12: TM 12 is 1.4x TM 8); 13-16 tokens take two passes of
 * 8, since a tile of 16 rows x 32 columns spills its accumulators. */
static int cpu_tm(const mm_variant *v, int64_t n) {
    static const int tms[] = {2, 4, 8, 12};
    for (size_t i = 0; i < sizeof tms / sizeof tms[0]; i++)
        if (n <= tms[i]) return tms[i];
    return v->gemm_tm;
}

/* The largest GEMM tile whose grid still gives every compute unit a
 * work-group (bigger tiles load less per FMA), else the smallest (the most
 * work-groups). On the H200, 128 x 128 tiles ran 1.37x faster than 64 x 64
 * at 512 x 576 -> 49152, and 64 x 64 tiles left small prefill grids at a
 * fixed ~50 us, behind CLBlast. */
/* A tile's local memory: Xs and Ws of cl/matmul_gpu.cl's GEMM, BK × (B + 1)
 * floats each. 128 × 128 takes 33024 bytes, past the 32 KiB many GPUs (and
 * Oclgrind) have: such a device takes the next smaller tile. */
static uint64_t tile_local_bytes(const struct mm_tile *t) { return 32u * (uint64_t)(t->bm + 1 + t->bn + 1) * 4u; }

static const struct mm_tile *gpu_tile(const clf_runtime *rt, const mm_variant *v, int64_t n, int64_t rows) {
    for (int i = 2; i > 0; i--) {
        const struct mm_tile *t = &v->tiles[i];
        if (t->bm > v->tile_max || (rt->dev.local_mem && tile_local_bytes(t) > rt->dev.local_mem)) continue;
        if ((n + t->bm - 1) / t->bm * ((rows + t->bn - 1) / t->bn) >= (int64_t)rt->dev.compute_units) return t;
    }
    return &v->tiles[0];
}

/* Panels per work-item of an int8 GEMV over `panels` panels and n tokens:
 * at most `most` (the table's, which shares one quantized x over more
 * rows), and among those the one whose busiest compute unit has the fewest
 * panels, the largest on ties. A work-group is one work-item and PoCL hands
 * them out whole: 18 panels at 4 a work-item are 5 work-items, 3 on one
 * core and 2 on the other (12 panels against 9 at 3 a work-item). */
static int balanced_ppw(int64_t panels, int64_t n, int most, unsigned cus) {
    int best = 1;
    int64_t best_load = -1;
    if (cus < 1) cus = 1;
    for (int p = 1; p <= most; p++) {
        const int64_t items = n * ((panels + p - 1) / p), load = (items + cus - 1) / cus * p;
        if (best_load < 0 || load <= best_load) best = p, best_load = load;
    }
    return best;
}

/* gpu: the types with an int8 GEMV in cl/matmul_gpu.cl (GPU_XQ in cl/types.cl) */
static int gpu_int8(clf_type t) {
    const clf_panel_fmt *f = clf_panel_fmt_get(t);
    return f && f->gpu_xq > 0;
}

static int uses_int8(const mm_variant *v, clf_type t, int64_t n) {
    if (!v->panels) return n == 1 && v->gpu_int8 && gpu_int8(t);
    const clf_panel_fmt *f = clf_panel_fmt_get(t);
    return n == 1 && f && f->int8 && v->x86_int8;
}

/* n > 1 tokens on the int8 GEMM (gemm_<type>_xq): every type with an int8
 * GEMV has one, and its rows equal the GEMV's, so it serves rowwise
 * products too. */
static int uses_int8_gemm(const mm_variant *v, clf_type t, int64_t n) {
    return n > 1 && v->int8_gemm > 0 && n >= v->int8_gemm && uses_int8(v, t, 1);
}

/* Its token tile: the float GEMM's (cpu_tm) up to int8_tm rows. At 512
 * bits, 256-row Llama pp512 under load, alternating: TM 8 0.97-1.07x TM 4
 * (Q4_K_M), 1.01-1.07x (Q6_K); 12 was slower (its accumulators and the 16
 * code vectors of a sub-block spill). */
static int int8_tm(const mm_variant *v, int64_t n) {
    const int tm = cpu_tm(v, n);
    return tm < v->int8_tm ? tm : v->int8_tm;
}

/* Validates a weight's shape and type for this device's layout. */
static clf_status check_weight(clf_type type, int64_t rows, int64_t cols) {
    if (!clf_panel_fmt_get(type))
        return clf_fail(CLF_ERR_FORMAT, "matmul: weight type %u is not supported", (unsigned)type);
    if (rows <= 0 || cols <= 0 || rows > INT_MAX || cols > INT_MAX || !clf_row_bytes(type, cols))
        return clf_fail(CLF_ERR_ARG, "matmul: bad %s weight %lld x %lld (columns must be a whole number of blocks)",
                        clf_type_get(type)->name, (long long)rows, (long long)cols);
    return CLF_OK;
}

clf_status clf_weight_layout(const clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, size_t *main_bytes,
                             size_t *aux_bytes) {
    *main_bytes = *aux_bytes = 0;
    CLF_TRY(check_weight(type, rows, cols));
    if (families[rt->tune.matmul].panels) clf_panels_size(clf_panel_fmt_get(type), rows, cols, main_bytes, aux_bytes);
    else *main_bytes = clf_row_bytes(type, cols) * (size_t)rows; /* GGUF layout as is */
    return CLF_OK;
}

int clf_weight_host_layout(const clf_runtime *rt) { return families[rt->tune.matmul].panels; }

/* The packing of one weight, cut by panels (or, in GGUF layout, by rows)
 * over the host's cores. */
typedef struct pack_job {
    const clf_panel_fmt *f; /* NULL: GGUF layout, rows copied */
    int64_t cols;
    size_t row_bytes;
    const clf_rows_src *src;
    unsigned char *main;
    uint16_t *aux;
} pack_job;

static void pack_some(void *ud, int64_t i0, int64_t i1) {
    const pack_job *j = ud;
    if (j->f) {
        clf_panels_pack_range(j->f, j->cols, j->src, i0, i1, j->main, j->aux);
        return;
    }
    for (int64_t r = i0; r < i1; r++)
        memcpy(j->main + (size_t)r * j->row_bytes, clf_rows_src_row(j->src, r, j->row_bytes), j->row_bytes);
}

clf_status clf_weight_pack(const clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *src, void *main_dst,
                           void *aux_dst) {
    const int64_t rows = clf_rows_src_total(src);
    CLF_TRY(check_weight(type, rows, cols));
    pack_job j = {families[rt->tune.matmul].panels ? clf_panel_fmt_get(type) : NULL, cols,
                  clf_row_bytes(type, cols), src, main_dst, aux_dst};
    /* ~1 MB of weights per piece at least: a thread start costs ~50 µs */
    const int64_t per = j.f ? 32 * (int64_t)j.row_bytes : (int64_t)j.row_bytes;
    clf_parallel_for(j.f ? clf_panels_of(rows) : rows, per > (1 << 20) ? 1 : (1 << 20) / per, pack_some, &j);
    return CLF_OK;
}

clf_status clf_weight_pack_parts(const clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *parts,
                                 int n_part, void *main_dst, void *aux_dst) {
    if (n_part == 1) return clf_weight_pack(rt, type, cols, parts, main_dst, aux_dst);
    size_t mb = 0, ab = 0;
    for (int i = 0; i < n_part; i++) {
        const int64_t rows = clf_rows_src_total(&parts[i]);
        if (rows != clf_rows_src_total(&parts[0]) || rows % 32)
            return clf_fail(CLF_ERR_ARG, "matmul: stacked parts of %lld and %lld rows (equal, whole panels)",
                            (long long)clf_rows_src_total(&parts[0]), (long long)rows);
        if (i == 0) CLF_TRY(clf_weight_layout(rt, type, rows, cols, &mb, &ab));
        CLF_TRY(clf_weight_pack(rt, type, cols, &parts[i], (unsigned char *)main_dst + (size_t)i * mb,
                                aux_dst ? (unsigned char *)aux_dst + (size_t)i * ab : NULL));
    }
    return CLF_OK;
}

clf_status clf_weight_wrap(clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, void *main_host,
                           void *aux_host, clf_weight *w) {
    memset(w, 0, sizeof *w);
    size_t mb, ab;
    CLF_TRY(clf_weight_layout(rt, type, rows, cols, &mb, &ab));
    *w = (clf_weight){type, rows, cols, NULL, NULL, rt->tune.matmul, mb + ab};
    clf_status st = clf_buffer_create(rt, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, mb, main_host, &w->mem);
    if (st == CLF_OK && ab) st = clf_buffer_create(rt, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, ab, aux_host, &w->aux);
    if (st != CLF_OK) clf_weight_free(w);
    return st;
}

/* A new read-only device buffer of `bytes` mapped for writing: in host
 * memory for the CPU kernels (ALLOC_HOST_PTR: the mapping is the buffer
 * itself), in device memory for the GPU ones (the mapping is the driver's
 * staging, which the unmap sends: an ALLOC_HOST_PTR buffer there may stay
 * in host memory, read over the bus by every kernel). */
static clf_status fill_buffer(clf_runtime *rt, size_t bytes, cl_mem *out, void **host) {
    const cl_mem_flags where = families[rt->tune.matmul].panels ? CL_MEM_ALLOC_HOST_PTR : 0;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_ONLY | where, bytes, NULL, out));
    cl_int err;
    *host = clEnqueueMapBuffer(rt->queue, *out, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, bytes, 0, NULL, NULL, &err);
    return clf_cl_check(err, "clEnqueueMapBuffer");
}

/* --mlock in memory: on a CPU device the mapping is the buffer's memory,
 * locked in place; a refusal (RLIMIT_MEMLOCK) is said once. */
static void lock(clf_runtime *rt, void *p, size_t n) {
    if (!p || !n || rt->weights_mlock_failed || mlock(p, n) == 0) return;
    rt->weights_mlock_failed = 1;
    clf_runtime_notice(rt, "--mlock: cannot lock the weights in memory: %s (see ulimit -l)", strerror(errno));
}

clf_status clf_weight_upload_rows(clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *src,
                                  clf_weight *w) {
    return clf_weight_upload_parts(rt, type, cols, src, 1, w);
}

clf_status clf_weight_upload_parts(clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *parts, int n_part,
                                   clf_weight *w) {
    memset(w, 0, sizeof *w);
    int64_t rows = 0;
    for (int p = 0; p < n_part; p++) {
        rows += clf_rows_src_total(&parts[p]);
        for (int i = 0; i < parts[p].n; i++)
            if (!parts[p].data[i]) return clf_fail(CLF_ERR_ARG, "matmul: a weight without data");
    }
    size_t mb, ab;
    CLF_TRY(clf_weight_layout(rt, type, rows, cols, &mb, &ab));
    *w = (clf_weight){type, rows, cols, NULL, NULL, rt->tune.matmul, mb + ab};
    void *mh = NULL, *ah = NULL;
    clf_status st = fill_buffer(rt, mb, &w->mem, &mh);
    if (st == CLF_OK && ab) st = fill_buffer(rt, ab, &w->aux, &ah);
    if (st == CLF_OK) st = clf_weight_pack_parts(rt, type, cols, parts, n_part, mh, ah);
    if (st == CLF_OK && rt->weights_mlock && families[rt->tune.matmul].panels) {
        lock(rt, mh, mb);
        lock(rt, ah, ab);
    }
    /* unmapped in any case (the buffers are released on failure) */
    if (mh) clf_cl_check(clEnqueueUnmapMemObject(rt->queue, w->mem, mh, 0, NULL, NULL), "clEnqueueUnmapMemObject");
    if (ah) clf_cl_check(clEnqueueUnmapMemObject(rt->queue, w->aux, ah, 0, NULL, NULL), "clEnqueueUnmapMemObject");
    if (st != CLF_OK) clf_weight_free(w);
    return st;
}

clf_status clf_weight_upload(clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, const void *data,
                             clf_weight *w) {
    memset(w, 0, sizeof *w);
    if (!data) return clf_fail(CLF_ERR_ARG, "matmul: a weight without data");
    const clf_rows_src src = {{data}, {rows}, 1};
    return clf_weight_upload_rows(rt, type, cols, &src, w);
}

void clf_weight_free(clf_weight *w) {
    if (w->mem) clReleaseMemObject(w->mem);
    if (w->aux) clReleaseMemObject(w->aux);
    memset(w, 0, sizeof *w);
}

const char *clf_matmul_variant(const clf_runtime *rt) { return families[rt->tune.matmul].name; }

int clf_matmul_quantizes_x(const clf_runtime *rt, const clf_weight *W, int64_t n) {
    if (W->layout < 0 || W->layout >= VAR_COUNT) return 0;
    const mm_variant v = variant_of(rt, W->layout);
    return uses_int8(&v, W->type, n) || uses_int8_gemm(&v, W->type, n);
}

void clf_matmul_set_gemm(clf_runtime *rt, clf_gemm_f32_fn gemm) { rt->gemm_f32 = gemm; }

/* ---- launching ---- */

/* A launch's kernel and its arguments in order, set by clf_set_args when
 * it is enqueued (the values must live until then: the caller's locals). */
typedef struct kargs {
    cl_kernel k;
    clf_arg v[16];
    int n;
} kargs;

static void arg(kargs *a, size_t size, const void *value) { a->v[a->n++] = (clf_arg){size, value}; }

const char *clf_matmul_kernel_name(clf_type t, int panels, clf_mm_form f, char *buf, size_t n) {
    static const char *const cpu[CLF_MM_FORMS] = {"gemv_%s",          "gemm_%s",          "gemv_%s_i8", "gemv_%s_xq",
                                                  "gemm_%s_xq",       "gemv_%s_swiglu_xq", "gemv_%s_geglu_xq",
                                                  "unpack_%s",        "gemv_%s_swiglu_oai_xq", "gemv_%s_rows"};
    static const char *const gpu[CLF_MM_FORMS] = {"gemv_%s", "gemm_%s", NULL, "gemv_%s_xq", NULL, NULL, NULL, "dequant_%s",
                                                  NULL, NULL};
    const clf_panel_fmt *pf = clf_panel_fmt_get(t);
    if (!pf || (int)f < 0 || f >= CLF_MM_FORMS) return NULL;
    int has;
    if (f == CLF_MM_GEMV || f == CLF_MM_GEMM)
        has = 1;
    else if (f == CLF_MM_TO_F32)
        has = panels || t != CLF_F32; /* the gpu reads an F32 weight as it is */
    else if (f == CLF_MM_GEMV_ROWS)
        has = panels && pf->family == CLF_CPU_FLT; /* the others' rows are the int8 GEMV's already */
    else if (panels)
        has = pf->int8; /* all the int8-x forms */
    else
        has = f == CLF_MM_GEMV_XQ && pf->gpu_xq > 0;
    if (!has) return NULL;
    snprintf(buf, n, (panels ? cpu : gpu)[f], clf_type_get(t)->suffix);
    return buf;
}

/* Type t's kernel of form f in the variant's family, built with `opts`
 * (its -D options); named as ggml names its own (gemv_q8_0_i8). */
static clf_status get_kernel(clf_runtime *rt, const mm_variant *v, const char *opts, clf_mm_form f, clf_type t,
                             cl_kernel *k) {
    char name[48];
    if (!clf_matmul_kernel_name(t, v->panels, f, name, sizeof name))
        return clf_fail(CLF_ERR_ARG, "matmul: %s has no %s kernel of form %d (cl/types.cl)", clf_type_get(t)->name,
                        v->name, (int)f);
    return clf_kernel_get(rt, v->panels ? "matmul_cpu" : "matmul_gpu", opts, name, k);
}

/* The cpu family's -D options for type t's kernels: its tunables, then
 * CLF_MM_<name> for every type, 1 for t alone (cl/matmul_cpu.cl's MM_IF:
 * a program per type, since PoCL loads and first compiles every kernel a
 * program holds). The options key every launch's kernel lookup, so the
 * per-type flags are written once, not per launch. */
enum { MM_OPTS = 512, MM_FLAGS = 320 };
static char mm_flags[CLF_TYPE_COUNT][MM_FLAGS]; /* by type id */
static pthread_once_t mm_flags_once = PTHREAD_ONCE_INIT;

static void mm_flags_init(void) {
    for (int t = 0; t < CLF_NTYPES; t++) {
        size_t at = 0;
        for (int i = 0; i < CLF_NTYPES && at < MM_FLAGS; i++)
            at += (size_t)snprintf(mm_flags[clf_type_list[t]] + at, MM_FLAGS - at, " -DCLF_MM_%s=%d",
                                   clf_type_get(clf_type_list[i])->suffix, i == t);
    }
}

static void cpu_options(const mm_variant *v, int tm, clf_type t, char *buf, size_t n) {
    const int int8 = v->x86_int8;
    pthread_once(&mm_flags_once, mm_flags_init);
    snprintf(buf, n, "-DTM=%d -DMG=%d -DCLF_FP16_CLANG=%d -DCLF_X86_INT8=%d -DCLF_X86_VNNI=%d -DPPW=%d -DPPW_Q8=%d%s", tm,
             v->gemm_mg, v->fp16_clang, int8, v->x86_vnni, int8 ? v->int8_ppw : 1, int8 ? v->int8_ppw_q8 : 1,
             mm_flags[t]);
}

static void gpu_options(const mm_variant *v, const struct mm_tile *t, int nt, char *buf, size_t n) {
    snprintf(buf, n, "-DBM=%d -DBN=%d -DRM=%d -DRN=%d -DRPW=%d -DNT=%d", t->bm, t->bn, t->rm, t->rn, v->rpw, nt);
}

static clf_status enqueue(clf_runtime *rt, kargs *a, const char *what, cl_uint dims, const size_t *global,
                          const size_t *local) {
    clf_status st = clf_set_args(a->k, a->v, a->n);
    if (st == CLF_OK) st = clf_launch(rt, a->k, dims, global, local);
    return st == CLF_OK ? st : clf_fail_ctx(st, "%s: ", what);
}

/* Tokens a work-item of gemv_<type>_rows takes (cl/matmul_cpu.cl ROWS_PW):
 * 8, so a verify step of up to 8 rows reads each panel from memory once
 * in one work-item, and more rows spread over more work-items. */
enum { ROWS_PW = 8 };

/* nt: the rows the kernel is chosen for (n, or more: clf_matmul_cols_tile). */
static clf_status matmul_cpu(clf_runtime *rt, const mm_variant *v, const clf_weight *W, cl_mem x, cl_ulong xoff,
                             const clf_tensor *XQ, cl_mem y, cl_ulong yoff, int n, int64_t nt, int ldy, int accumulate,
                             int rowwise) {
    const int gemm8 = uses_int8_gemm(v, W->type, nt) && XQ; /* matmul() gives it XQ */
    /* a float weight's rows each as its GEMV gives them (gemv_<type>_rows),
     * from the GEMV's program (its TM): no program of its own to build */
    const int rows_f = rowwise && n > 1 && clf_panel_fmt_get(W->type)->family == CLF_CPU_FLT;
    const int tm = nt == 1 || rows_f ? v->gemm_tm : gemm8 ? int8_tm(v, nt) : cpu_tm(v, nt), mg = v->gemm_mg;
    const int quant = W->aux != NULL, rows = (int)W->rows, K = (int)W->cols;
    const int int8 = !gemm8 && uses_int8(v, W->type, rowwise ? 1 : nt), xq = (int8 || gemm8) && XQ;
    mm_variant vb = *v; /* the int8 GEMV's panels per work-item, balanced over the compute units */
    const int q8 = clf_panel_fmt_get(W->type)->family == CLF_CPU_Q8; /* PPW_Q8: twice the bytes */
    if (int8) {
        int *ppw = q8 ? &vb.int8_ppw_q8 : &vb.int8_ppw;
        *ppw = balanced_ppw(clf_panels_of(rows), n, *ppw, rt->dev.compute_units);
    }
    v = &vb;
    if (xq) { /* x as its producer quantized it */
        x = XQ->mem;
        xoff = XQ->offset / 4;
    }
    char opts[MM_OPTS];
    cpu_options(v, tm, W->type, opts, sizeof opts);
    kargs a = {0};
    const clf_mm_form form = gemm8  ? CLF_MM_GEMM_XQ
                             : xq   ? CLF_MM_GEMV_XQ
                             : int8 ? CLF_MM_GEMV_I8
                             : rows_f ? CLF_MM_GEMV_ROWS
                                    : nt == 1 ? CLF_MM_GEMV : CLF_MM_GEMM;
    CLF_TRY(get_kernel(rt, v, opts, form, W->type, &a.k));
    arg(&a, sizeof(cl_mem), &W->mem);
    if (quant) arg(&a, sizeof(cl_mem), &W->aux);
    arg(&a, sizeof(cl_mem), &x);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof(cl_mem), &y);
    arg(&a, sizeof yoff, &yoff);
    if (int8) {
        arg(&a, sizeof ldy, &ldy);
    } else if (nt > 1) { /* the GEMMs */
        arg(&a, sizeof n, &n);
        arg(&a, sizeof ldy, &ldy);
    }
    arg(&a, sizeof rows, &rows);
    arg(&a, sizeof K, &K);
    arg(&a, sizeof accumulate, &accumulate);
    const size_t local[2] = {1, 1};
    if (int8) { /* tokens first: a panel group's tokens run back to back */
        const size_t ppw = q8 ? (size_t)v->int8_ppw_q8 : (size_t)v->int8_ppw;
        const size_t global[2] = {(size_t)n, ((size_t)clf_panels_of(rows) + ppw - 1) / ppw};
        return enqueue(rt, &a, "matmul (gemv)", 2, global, local);
    }
    if (rows_f) { /* a work-item per panel and ROWS_PW tokens */
        const size_t global[2] = {(size_t)clf_panels_of(rows), (size_t)((n + ROWS_PW - 1) / ROWS_PW)};
        return enqueue(rt, &a, "matmul (gemv rows)", 2, global, local);
    }
    const size_t global[2] = {(size_t)clf_panels_of(rows), (size_t)((n + tm * mg - 1) / (tm * mg))};
    return enqueue(rt, &a, nt == 1 ? "matmul (gemv)" : gemm8 ? "matmul (int8 gemm)" : "matmul (gemm)", nt == 1 ? 1 : 2,
                   global, local);
}

/* A device whose compiler refused the PTX build (then built without it,
 * once, rather than failing again at every GEMV). */
static _Atomic(cl_device_id) ptx_refused;

/* NVIDIA devices of compute capability 6.1 and up have dp4a (PTX inline
 * assembly in OpenCL C: cl/matmul_gpu.cl clf_dot4). */
static int gpu_dp4a(const clf_runtime *rt) {
    enum { CC_MAJOR_NV = 0x4000, CC_MINOR_NV = 0x4001 }; /* cl_nv_device_attribute_query */
    cl_uint major = 0, minor = 0;
    if (!(rt->dev.type & CL_DEVICE_TYPE_GPU) || !strstr(rt->dev.vendor, "NVIDIA") ||
        atomic_load(&ptx_refused) == rt->dev.id ||
        clGetDeviceInfo(rt->dev.id, CC_MAJOR_NV, sizeof major, &major, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(rt->dev.id, CC_MINOR_NV, sizeof minor, &minor, NULL) != CL_SUCCESS)
        return 0;
    return major * 10 + minor >= 61;
}

/* X's n rows of K quantized to int8 blocks (clf_quantize_x, as a producer
 * would) into a new scratch *xq, which the caller frees once the products
 * reading it are queued. */
static clf_status quantized_x(clf_runtime *rt, const clf_tensor *X, int64_t K, int64_t n, clf_tensor *xq) {
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(K), n, xq));
    const clf_status st = clf_quantize_x(rt, X, xq);
    if (st != CLF_OK) clf_tensor_free(xq);
    return st;
}

/* Lanes per weight row of the int8 GEMV: the most (up to 32) that still
 * gives every lane two 16-byte chunks of the row. */
static int gpu_xq_lanes(clf_type t, int K) {
    const int chunks = K / 32 * clf_panel_fmt_get(t)->gpu_xq;
    int lanes = 32;
    while (lanes > 4 && 2 * lanes > chunks) lanes /= 2;
    return lanes;
}

/* The int8 GEMV of each of n rows (cl/matmul_gpu.cl DEFINE_GEMV_XQ), from
 * XQ, or from x quantized here first as its producer would (the same
 * kernel, so bit for bit the same product). */
static clf_status gemv_xq_gpu(clf_runtime *rt, const mm_variant *v, const clf_weight *W, const clf_tensor *X,
                              const clf_tensor *XQ, cl_mem y, cl_ulong yoff, int n, int ldy, int accumulate) {
    const int rows = (int)W->rows, K = (int)W->cols, lanes = gpu_xq_lanes(W->type, K);
    const int group_rows = 32 * v->rpw / lanes;
    clf_tensor tmp = {0};
    if (!XQ) {
        CLF_TRY(quantized_x(rt, X, K, n, &tmp));
        XQ = &tmp;
    }
    char opts[256], base[128];
    gpu_options(v, &v->tiles[1], 1, base, sizeof base);
    kargs a = {0};
    clf_status st = CLF_ERR_CL;
    for (int ptx = gpu_dp4a(rt); ptx >= 0 && st != CLF_OK; ptx--) { /* a driver refusing the PTX: the portable form */
        snprintf(opts, sizeof opts, "%s -DLPR=%d -DCLF_DOT_PTX=%d", base, lanes, ptx);
        st = get_kernel(rt, v, opts, CLF_MM_GEMV_XQ, W->type, &a.k);
        if (st != CLF_OK && st != CLF_ERR_INTERRUPTED && ptx) atomic_store(&ptx_refused, rt->dev.id);
    }
    if (st == CLF_OK) {
        const cl_ulong xoff = XQ->offset / 4;
        arg(&a, sizeof(cl_mem), &W->mem);
        arg(&a, sizeof(cl_mem), &XQ->mem);
        arg(&a, sizeof xoff, &xoff);
        arg(&a, sizeof(cl_mem), &y);
        arg(&a, sizeof yoff, &yoff);
        arg(&a, sizeof ldy, &ldy);
        arg(&a, sizeof rows, &rows);
        arg(&a, sizeof K, &K);
        arg(&a, sizeof accumulate, &accumulate);
        const size_t groups = (size_t)((rows + group_rows - 1) / group_rows);
        const size_t global[3] = {(size_t)lanes, groups * (size_t)group_rows, (size_t)n},
                     local[3] = {(size_t)lanes, (size_t)group_rows, 1};
        st = enqueue(rt, &a, "matmul (int8 gemv)", 3, global, local);
    }
    clf_tensor_free(&tmp); /* released once the queued GEMV is done with it */
    return st;
}

static clf_status matmul_gpu(clf_runtime *rt, const mm_variant *v, const clf_weight *W, const clf_tensor *X,
                             const clf_tensor *XQ, cl_mem y, cl_ulong yoff, int n, int ldy, int accumulate,
                             int rowwise) {
    if (uses_int8(v, W->type, rowwise ? 1 : n)) return gemv_xq_gpu(rt, v, W, X, XQ, y, yoff, n, ldy, accumulate);
    const cl_mem x = X->mem;
    const cl_ulong xoff = X->offset / 4;
    const int skinny = n <= v->skinny_max, rows = (int)W->rows, K = (int)W->cols;
    const int nt = !skinny ? 1 : n == 1 ? 1 : n <= 4 ? 4 : v->skinny_max;
    /* GEMVs share one program per NT, whatever the shape */
    const struct mm_tile *t = skinny ? &v->tiles[1] : gpu_tile(rt, v, n, rows);
    char opts[128];
    gpu_options(v, t, nt, opts, sizeof opts);
    kargs a = {0};
    CLF_TRY(get_kernel(rt, v, opts, skinny ? CLF_MM_GEMV : CLF_MM_GEMM, W->type, &a.k));
    arg(&a, sizeof(cl_mem), &W->mem);
    arg(&a, sizeof(cl_mem), &x);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof(cl_mem), &y);
    arg(&a, sizeof yoff, &yoff);
    arg(&a, sizeof n, &n);
    arg(&a, sizeof ldy, &ldy);
    arg(&a, sizeof rows, &rows);
    arg(&a, sizeof K, &K);
    arg(&a, sizeof accumulate, &accumulate);
    if (skinny) {
        const size_t global[2] = {32, (size_t)(rows + v->rpw - 1) / (size_t)v->rpw * (size_t)v->rpw},
                     local[2] = {32, (size_t)v->rpw};
        return enqueue(rt, &a, "matmul (gemv)", 2, global, local);
    }
    const size_t tx = (size_t)(t->bn / t->rn), ty = (size_t)(t->bm / t->rm);
    const size_t global[2] = {(size_t)(rows + t->bn - 1) / (size_t)t->bn * tx, (size_t)(n + t->bm - 1) / (size_t)t->bm * ty},
                 local[2] = {tx, ty};
    return enqueue(rt, &a, "matmul (gemm)", 2, global, local);
}

/* W as row-major F32 [rows × cols] in *out: W's own buffer for F32 in GGUF
 * layout (*owned = 0), else a new scratch buffer filled by a kernel. */
static clf_status weight_as_f32(clf_runtime *rt, const mm_variant *v, const clf_weight *W, cl_mem *out, int *owned) {
    *owned = 0;
    if (!v->panels && W->type == CLF_F32) {
        *out = W->mem;
        return CLF_OK;
    }
    const size_t bytes = (size_t)W->rows * (size_t)W->cols * sizeof(float);
    if (rt->dev.max_alloc && bytes > rt->dev.max_alloc)
        return clf_fail(CLF_ERR_MEMORY, "matmul through another GEMM: F32 copy of a %lld x %lld weight (%zu MiB) exceeds the "
                        "device's largest allocation", (long long)W->rows, (long long)W->cols, bytes >> 20);
    const int rows = (int)W->rows, K = (int)W->cols;
    kargs a = {0};
    char opts[MM_OPTS];
    if (v->panels)
        cpu_options(v, v->gemm_tm, W->type, opts, sizeof opts);
    else
        gpu_options(v, &v->tiles[1], 1, opts, sizeof opts);
    CLF_TRY(get_kernel(rt, v, opts, CLF_MM_TO_F32, W->type, &a.k));
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, bytes, NULL, out));
    arg(&a, sizeof(cl_mem), &W->mem);
    if (W->aux) arg(&a, sizeof(cl_mem), &W->aux);
    arg(&a, sizeof(cl_mem), out);
    arg(&a, sizeof rows, &rows);
    arg(&a, sizeof K, &K);
    size_t global[2];
    if (v->panels) {
        global[0] = (size_t)clf_panels_of(rows);
        global[1] = (size_t)(K + 31) / 32;
    } else {
        global[0] = (size_t)(K + 7) / 8;
        global[1] = (size_t)rows;
    }
    clf_status st = enqueue(rt, &a, "matmul (dequantize for another GEMM)", 2, global, NULL);
    if (st != CLF_OK) {
        clReleaseMemObject(*out);
        return st;
    }
    *owned = 1;
    return CLF_OK;
}

/* Y = (or +=) X · Wᵀ through rt->gemm_f32, W as F32. */
static clf_status matmul_gemm_f32(clf_runtime *rt, const mm_variant *v, const clf_weight *W, const clf_tensor *X,
                                  clf_tensor *Y, size_t yoff, size_t ldy, size_t n, int accumulate) {
    cl_mem wf;
    int owned;
    CLF_TRY(weight_as_f32(rt, v, W, &wf, &owned));
    clf_status st = rt->gemm_f32(&rt->queue, n, (size_t)W->rows, (size_t)W->cols, X->mem, X->offset / 4, wf, Y->mem,
                                 yoff, ldy, accumulate);
    /* The scratch lives on until the queued GEMM that uses it completes. */
    if (owned) clReleaseMemObject(wf);
    return st;
}

/* Y[:, col0 .. col0 + W->rows) = (or +=) X · Wᵀ; rowwise: each row as a
 * one-row X computes it; the cpu kernel chosen for max(n, tile_n) rows. */
static clf_status matmul(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, const clf_tensor *XQ,
                         clf_tensor *Y, int64_t col0, int accumulate, int rowwise, int64_t tile_n) {
    if (!W || !W->mem || W->layout < 0 || W->layout >= VAR_COUNT)
        return clf_fail(CLF_ERR_ARG, "matmul: weight not uploaded");
    const int64_t n = clf_tensor_nrows(X);
    if (X->type != CLF_F32 || Y->type != CLF_F32 || X->ne[0] != W->cols || col0 < 0 || Y->ne[0] < col0 + W->rows ||
        Y->ne[0] > INT_MAX || clf_tensor_nrows(Y) != n || n <= 0 || n > INT_MAX || X->offset % 4 || Y->offset % 4)
        return clf_fail(CLF_ERR_ARG,
                        "matmul: shapes do not fit: W %lld x %lld, X %s %lld x %lld, Y %s %lld x %lld from column %lld "
                        "(F32, X = [n x cols], Y = [n x rows])",
                        (long long)W->rows, (long long)W->cols, clf_type_get(X->type) ? clf_type_get(X->type)->name : "?",
                        (long long)n, (long long)X->ne[0], clf_type_get(Y->type) ? clf_type_get(Y->type)->name : "?",
                        (long long)clf_tensor_nrows(Y), (long long)Y->ne[0], (long long)col0);
    if (XQ && (XQ->type != CLF_F32 || XQ->offset % 16 || W->cols % 32 || XQ->ne[0] != CLF_XQ_FLOATS(W->cols) ||
               clf_tensor_nrows(XQ) != n))
        return clf_fail(CLF_ERR_ARG, "matmul: quantized x %lld x %lld does not fit %lld rows of %lld (%lld floats each)",
                        (long long)clf_tensor_nrows(XQ), (long long)XQ->ne[0], (long long)n, (long long)W->cols,
                        (long long)CLF_XQ_FLOATS(W->cols));
    const mm_variant var = variant_of(rt, W->layout), *v = &var;
    int64_t nt = rowwise || tile_n < n ? n : tile_n; /* the rows the cpu kernel is chosen for */
    if (n == 1 && !uses_int8_gemm(v, W->type, nt)) nt = 1; /* a float GEMM's lone row would not be the GEMV's */
    const cl_ulong xoff = X->offset / 4, yoff = Y->offset / 4 + (cl_ulong)col0;
    const int ldy = (int)Y->ne[0];
    if (n > 1 && !rowwise && rt->gemm_f32)
        return matmul_gemm_f32(rt, v, W, X, Y, (size_t)yoff, (size_t)ldy, (size_t)n, accumulate);
    if (v->panels && !XQ && uses_int8_gemm(v, W->type, nt)) {
        /* the int8 GEMM reads x as int8 blocks: quantized into a scratch
         * (released at once: the queued kernels hold it) */
        clf_tensor xq;
        CLF_TRY(quantized_x(rt, X, W->cols, n, &xq));
        clf_status st = matmul_cpu(rt, v, W, X->mem, xoff, &xq, Y->mem, yoff, (int)n, nt, ldy, accumulate, rowwise);
        clf_tensor_free(&xq);
        return st;
    }
    return v->panels ? matmul_cpu(rt, v, W, X->mem, xoff, XQ, Y->mem, yoff, (int)n, nt, ldy, accumulate, rowwise)
                     : matmul_gpu(rt, v, W, X, XQ, Y->mem, yoff, (int)n, ldy, accumulate, rowwise);
}

clf_status clf_matmul(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int accumulate) {
    if (W && Y->ne[0] != W->rows)
        return clf_fail(CLF_ERR_ARG, "matmul: shapes do not fit: W %lld x %lld, Y %lld x %lld (Y = [n x rows])",
                        (long long)W->rows, (long long)W->cols, (long long)clf_tensor_nrows(Y), (long long)Y->ne[0]);
    return matmul(rt, W, X, NULL, Y, 0, accumulate, 0, 0);
}

clf_status clf_matmul_cols(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                           int accumulate) {
    return matmul(rt, W, X, NULL, Y, col0, accumulate, 0, 0);
}

clf_status clf_matmul_cols_tile(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                                int accumulate, int64_t tile_n) {
    return matmul(rt, W, X, NULL, Y, col0, accumulate, 0, tile_n);
}

clf_status clf_matmul_rowwise(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                              int accumulate) {
    return matmul(rt, W, X, NULL, Y, col0, accumulate, 1, 0);
}

int clf_matmul_fuses_glu(const clf_runtime *rt, const clf_weight *W) {
    if (!W->mem || W->layout < 0 || W->layout >= VAR_COUNT || W->rows % 64) return 0;
    const mm_variant v = variant_of(rt, W->layout);
    /* every type with an int8 GEMV has its gated-unit form (cl/matmul_cpu.cl:
     * DEFINE_INT8_GLU, DEFINE_KQ_GLU_X) */
    return v.panels && uses_int8(&v, W->type, 1);
}

clf_status clf_matmul_glu_xq(clf_runtime *rt, const clf_weight *W, clf_glu_act act, const clf_tensor *XQ,
                             clf_tensor *Y, const clf_tensor *YQ) {
    if (!clf_matmul_fuses_glu(rt, W))
        return clf_fail(CLF_ERR_ARG, "matmul: no gated-unit GEMV for this %s weight on this device",
                        clf_type_get(W->type) ? clf_type_get(W->type)->name : "?");
    const int64_t n = clf_tensor_nrows(XQ), ff = W->rows / 2;
    if (act != CLF_GLU_SILU && act != CLF_GLU_GELU_TANH && act != CLF_GLU_SWIGLU_OAI)
        return clf_fail(CLF_ERR_ARG, "matmul: unknown activation %d", (int)act);
    if (XQ->type != CLF_F32 || Y->type != CLF_F32 || YQ->type != CLF_F32 || XQ->ne[0] != CLF_XQ_FLOATS(W->cols) ||
        Y->ne[0] != ff || YQ->ne[0] != CLF_XQ_FLOATS(ff) || clf_tensor_nrows(Y) != n || clf_tensor_nrows(YQ) != n ||
        n <= 0 || n > INT_MAX || XQ->offset % 16 || Y->offset % 4 || YQ->offset % 16)
        return clf_fail(CLF_ERR_ARG, "matmul: gated unit of W %lld x %lld does not fit x %lld x %lld, y %lld x %lld, "
                        "its int8 form %lld x %lld", (long long)W->rows, (long long)W->cols, (long long)n,
                        (long long)XQ->ne[0], (long long)clf_tensor_nrows(Y), (long long)Y->ne[0],
                        (long long)clf_tensor_nrows(YQ), (long long)YQ->ne[0]);
    mm_variant var = variant_of(rt, W->layout), *v = &var;
    /* gate panels per work-item, balanced as the GEMV's: Q8_0 and Q4 take
     * PPW_Q8 / PPW (DEFINE_INT8_GLU), the rest (PPW + 1) / 2 (KQ_GLU_PPW) */
    const clf_cpu_family fam = clf_panel_fmt_get(W->type)->family;
    int ppw;
    if (fam == CLF_CPU_Q8)
        ppw = var.int8_ppw_q8 = balanced_ppw(ff / 32, n, var.int8_ppw_q8, rt->dev.compute_units);
    else if (fam == CLF_CPU_Q4)
        ppw = var.int8_ppw = balanced_ppw(ff / 32, n, var.int8_ppw, rt->dev.compute_units);
    else
        ppw = balanced_ppw(ff / 32, n, (var.int8_ppw + 1) / 2, rt->dev.compute_units), var.int8_ppw = 2 * ppw;
    char opts[MM_OPTS];
    cpu_options(v, v->gemm_tm, W->type, opts, sizeof opts);
    kargs a = {0};
    /* gpt-oss's unit is built apart (-DCLF_GLU_OAI=1: cl/matmul_cpu.cl), so other models' programs lack it */
    if (act == CLF_GLU_SWIGLU_OAI) snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " -DCLF_GLU_OAI=1");
    const clf_mm_form form = act == CLF_GLU_SILU        ? CLF_MM_SWIGLU_XQ
                             : act == CLF_GLU_GELU_TANH ? CLF_MM_GEGLU_XQ
                                                        : CLF_MM_SWIGLU_OAI_XQ;
    CLF_TRY(get_kernel(rt, v, opts, form, W->type, &a.k));
    const cl_ulong xoff = XQ->offset / 4, yoff = Y->offset / 4, yq_off = YQ->offset;
    const int ldy = (int)Y->ne[0], rows = (int)W->rows, K = (int)W->cols;
    arg(&a, sizeof(cl_mem), &W->mem);
    arg(&a, sizeof(cl_mem), &W->aux);
    arg(&a, sizeof(cl_mem), &XQ->mem);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof(cl_mem), &Y->mem);
    arg(&a, sizeof yoff, &yoff);
    arg(&a, sizeof ldy, &ldy);
    arg(&a, sizeof rows, &rows);
    arg(&a, sizeof K, &K);
    arg(&a, sizeof(cl_mem), &YQ->mem);
    arg(&a, sizeof yq_off, &yq_off);
    const size_t global[2] = {(size_t)n, ((size_t)(ff / 32) + (size_t)ppw - 1) / (size_t)ppw}, local[2] = {1, 1};
    return enqueue(rt, &a, "matmul (gated-unit gemv)", 2, global, local);
}

clf_status clf_matmul_rowwise_xq(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, const clf_tensor *XQ,
                                 clf_tensor *Y, int64_t col0, int accumulate) {
    return matmul(rt, W, X, XQ, Y, col0, accumulate, 1, 0);
}

/* ---- stacked experts: the indirect GEMVs (cl/matmul_cpu.cl, CLF_MOE_ID) ---- */

int clf_matmul_stacks(const clf_runtime *rt, clf_type type, int64_t part_rows, int64_t cols, int n_part) {
    if (n_part < 1 || part_rows % 32 || !clf_panel_fmt_get(type) ||
        check_weight(type, part_rows, cols) != CLF_OK)
        return 0;
    const mm_variant v = variant_of(rt, rt->tune.matmul);
    if (!uses_int8(&v, type, 1)) return 0;
    size_t mb, ab;
    clf_weight_layout(rt, type, part_rows, cols, &mb, &ab);
    /* a part's sub-buffers start on the device's base alignment */
    cl_uint bits = 0;
    if (clGetDeviceInfo(rt->dev.id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof bits, &bits, NULL) != CL_SUCCESS || bits < 8)
        return 0;
    const size_t align = bits / 8;
    if (mb % align || ab % align) return 0;
    const uint64_t most = rt->dev.max_alloc ? rt->dev.max_alloc : UINT64_MAX;
    return (uint64_t)mb * (uint64_t)n_part <= most && (uint64_t)ab * (uint64_t)n_part <= most;
}

/* One sub-buffer: bytes [i·part, (i + 1)·part) of mem. */
static clf_status sub_buffer(cl_mem mem, size_t part, int i, cl_mem *out) {
    const cl_buffer_region r = {(size_t)i * part, part};
    cl_int err;
    *out = clCreateSubBuffer(mem, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    return clf_cl_check(err, "clCreateSubBuffer");
}

clf_status clf_weight_part(const clf_weight *W, int n_part, int i, clf_weight *part) {
    memset(part, 0, sizeof *part);
    if (!W->mem || n_part < 1 || i < 0 || i >= n_part || W->rows % n_part || (W->rows / n_part) % 32 ||
        W->layout < 0 || W->layout >= VAR_COUNT)
        return clf_fail(CLF_ERR_ARG, "matmul: part %d of %d of a %lld-row weight", i, n_part, (long long)W->rows);
    const int64_t rows = W->rows / n_part;
    /* a part's main and aux bytes are its share of the stack's (whole panels, or GGUF rows) */
    size_t mb = clf_row_bytes(W->type, W->cols) * (size_t)rows, ab = 0;
    if (families[W->layout].panels) clf_panels_size(clf_panel_fmt_get(W->type), rows, W->cols, &mb, &ab);
    *part = (clf_weight){W->type, rows, W->cols, NULL, NULL, W->layout, mb + ab}; /* the bytes it reads (W holds them) */
    clf_status st = sub_buffer(W->mem, mb, i, &part->mem);
    if (st == CLF_OK && W->aux) st = sub_buffer(W->aux, ab, i, &part->aux);
    if (st != CLF_OK) clf_weight_free(part);
    return st;
}

/* The cpu family's options with the indirect kernels (and gpt-oss's unit where act is it). */
static clf_status id_kernel(clf_runtime *rt, const mm_variant *v, const clf_weight *W, const char *what,
                            clf_glu_act act, cl_kernel *k) {
    char opts[MM_OPTS], name[64];
    cpu_options(v, v->gemm_tm, W->type, opts, sizeof opts);
    snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " -DCLF_MOE_ID=1%s",
             act == CLF_GLU_SWIGLU_OAI ? " -DCLF_GLU_OAI=1" : "");
    snprintf(name, sizeof name, "gemv_%s_%s_id", clf_type_get(W->type)->suffix, what);
    return clf_kernel_get(rt, "matmul_cpu", opts, name, k);
}

/* Checks a stack W for the indirect GEMVs on this device. */
static clf_status id_check(const clf_runtime *rt, const clf_weight *W, int n_part, int64_t align_rows) {
    if (!W || !W->mem || W->layout != rt->tune.matmul || n_part < 1 || W->rows % n_part ||
        (W->rows / n_part) % align_rows || !families[W->layout].panels)
        return clf_fail(CLF_ERR_ARG, "matmul: no indirect GEMV for this stacked weight on this device");
    const mm_variant v = variant_of(rt, W->layout);
    if (!uses_int8(&v, W->type, 1))
        return clf_fail(CLF_ERR_ARG, "matmul: no indirect GEMV for this stacked weight on this device");
    return CLF_OK;
}

/* A bias table's offset in floats (B: F32 [n_part × width]), or none (B NULL: *has 0). */
static clf_status id_bias(const clf_tensor *B, int n_part, int64_t width, cl_ulong *off, int *has) {
    *off = 0, *has = B != NULL;
    if (!B) return CLF_OK;
    if (B->type != CLF_F32 || B->ne[0] != width || clf_tensor_nrows(B) < n_part || B->offset % 4)
        return clf_fail(CLF_ERR_ARG, "matmul: expert biases of %lld × %lld for %d experts of %lld",
                        (long long)clf_tensor_nrows(B), (long long)B->ne[0], n_part, (long long)width);
    *off = B->offset / 4;
    return CLF_OK;
}

clf_status clf_matmul_glu_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, clf_glu_act act, const clf_tensor *XQ,
                                const clf_tensor *ids, int k, const clf_tensor *B, clf_tensor *Y, const clf_tensor *YQ) {
    CLF_TRY(id_check(rt, W, n_part, 64));
    const int64_t rows = W->rows / n_part, ff = rows / 2, n = clf_tensor_nrows(XQ), slots = n * k;
    cl_ulong b_off;
    int has_b;
    CLF_TRY(id_bias(B, n_part, rows, &b_off, &has_b));
    const cl_mem b_mem = B ? B->mem : W->mem; /* none: any buffer, never read */
    if (act != CLF_GLU_SILU && act != CLF_GLU_GELU_TANH && act != CLF_GLU_SWIGLU_OAI)
        return clf_fail(CLF_ERR_ARG, "matmul: unknown activation %d", (int)act);
    if (k < 1 || n <= 0 || XQ->ne[0] != CLF_XQ_FLOATS(W->cols) || Y->ne[0] != ff || YQ->ne[0] != CLF_XQ_FLOATS(ff) ||
        clf_tensor_nrows(Y) != slots || clf_tensor_nrows(YQ) != slots || ids->ne[0] * clf_tensor_nrows(ids) < slots ||
        XQ->offset % 16 || YQ->offset % 16 || Y->offset % 4 || ids->offset % 4)
        return clf_fail(CLF_ERR_ARG, "matmul: indirect gated unit of %lld-row experts does not fit %lld rows × %d", (long long)rows,
                        (long long)n, k);
    mm_variant var = variant_of(rt, W->layout);
    /* gate panels per work-item, balanced as clf_matmul_glu_xq's over the slots */
    const clf_cpu_family fam = clf_panel_fmt_get(W->type)->family;
    if (fam == CLF_CPU_Q8)
        var.int8_ppw_q8 = balanced_ppw(ff / 32, slots, var.int8_ppw_q8, rt->dev.compute_units);
    else if (fam == CLF_CPU_Q4)
        var.int8_ppw = balanced_ppw(ff / 32, slots, var.int8_ppw, rt->dev.compute_units);
    else
        var.int8_ppw = 2 * balanced_ppw(ff / 32, slots, (var.int8_ppw + 1) / 2, rt->dev.compute_units);
    const int ppw = fam == CLF_CPU_Q8 ? var.int8_ppw_q8 : fam == CLF_CPU_Q4 ? var.int8_ppw : var.int8_ppw / 2;
    kargs a = {0};
    const char *unit = act == CLF_GLU_SILU ? "swiglu" : act == CLF_GLU_GELU_TANH ? "geglu" : "swiglu_oai";
    CLF_TRY(id_kernel(rt, &var, W, unit, act, &a.k));
    const cl_ulong xoff = XQ->offset / 4, id_off = ids->offset / 4, yoff = Y->offset / 4, yq_off = YQ->offset;
    const int kk = k, R = (int)rows, K = (int)W->cols;
    arg(&a, sizeof(cl_mem), &W->mem);
    arg(&a, sizeof(cl_mem), &W->aux);
    arg(&a, sizeof(cl_mem), &XQ->mem);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof(cl_mem), &ids->mem);
    arg(&a, sizeof id_off, &id_off);
    arg(&a, sizeof kk, &kk);
    arg(&a, sizeof(cl_mem), &Y->mem);
    arg(&a, sizeof yoff, &yoff);
    arg(&a, sizeof R, &R);
    arg(&a, sizeof K, &K);
    arg(&a, sizeof(cl_mem), &YQ->mem);
    arg(&a, sizeof yq_off, &yq_off);
    arg(&a, sizeof(cl_mem), &b_mem);
    arg(&a, sizeof b_off, &b_off);
    arg(&a, sizeof has_b, &has_b);
    const size_t global[2] = {(size_t)slots, ((size_t)(ff / 32) + (size_t)ppw - 1) / (size_t)ppw}, local[2] = {1, 1};
    return enqueue(rt, &a, "matmul (indirect gated-unit gemv)", 2, global, local);
}

clf_status clf_matmul_down_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, const clf_tensor *HQ,
                                 const clf_tensor *ids, const clf_tensor *w, int k, const clf_tensor *B, clf_tensor *X) {
    CLF_TRY(id_check(rt, W, n_part, 32));
    const int64_t rows = W->rows / n_part, n = clf_tensor_nrows(X), slots = n * k;
    cl_ulong b_off;
    int has_b;
    CLF_TRY(id_bias(B, n_part, rows, &b_off, &has_b));
    const cl_mem b_mem = B ? B->mem : W->mem; /* none: any buffer, never read */
    if (k < 1 || n <= 0 || X->type != CLF_F32 || X->ne[0] != rows || HQ->ne[0] != CLF_XQ_FLOATS(W->cols) ||
        clf_tensor_nrows(HQ) != slots || ids->ne[0] * clf_tensor_nrows(ids) < slots || w->ne[0] * clf_tensor_nrows(w) < slots || ids->offset != w->offset || HQ->offset % 16 || X->offset % 4 ||
        ids->offset % 4)
        return clf_fail(CLF_ERR_ARG, "matmul: indirect down product of %lld-row experts does not fit %lld rows × %d",
                        (long long)rows, (long long)n, k);
    mm_variant var = variant_of(rt, W->layout);
    const int q8 = clf_panel_fmt_get(W->type)->family == CLF_CPU_Q8;
    int *pp = q8 ? &var.int8_ppw_q8 : &var.int8_ppw;
    *pp = balanced_ppw(rows / 32, n, *pp, rt->dev.compute_units);
    const int ppw = *pp;
    kargs a = {0};
    CLF_TRY(id_kernel(rt, &var, W, "down", CLF_GLU_SILU, &a.k));
    const cl_ulong hoff = HQ->offset / 4, id_off = ids->offset / 4, xoff = X->offset / 4;
    const int kk = k, ldy = (int)X->ne[0], R = (int)rows, K = (int)W->cols;
    arg(&a, sizeof(cl_mem), &W->mem);
    arg(&a, sizeof(cl_mem), &W->aux);
    arg(&a, sizeof(cl_mem), &HQ->mem);
    arg(&a, sizeof hoff, &hoff);
    arg(&a, sizeof(cl_mem), &ids->mem);
    arg(&a, sizeof(cl_mem), &w->mem);
    arg(&a, sizeof id_off, &id_off);
    arg(&a, sizeof kk, &kk);
    arg(&a, sizeof(cl_mem), &X->mem);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof ldy, &ldy);
    arg(&a, sizeof R, &R);
    arg(&a, sizeof K, &K);
    arg(&a, sizeof(cl_mem), &b_mem);
    arg(&a, sizeof b_off, &b_off);
    arg(&a, sizeof has_b, &has_b);
    const size_t global[2] = {(size_t)n, ((size_t)(rows / 32) + (size_t)ppw - 1) / (size_t)ppw}, local[2] = {1, 1};
    return enqueue(rt, &a, "matmul (indirect down gemv)", 2, global, local);
}

clf_status clf_matmul_rows_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, const clf_tensor *XQ, int xdiv,
                                 const clf_tensor *ids, clf_tensor *Y) {
    if (!W || !W->mem || W->layout != rt->tune.matmul || families[W->layout].panels || n_part < 1 ||
        W->rows % n_part)
        return clf_fail(CLF_ERR_ARG, "matmul: no indirect gpu GEMV for this stacked weight on this device");
    const mm_variant var = variant_of(rt, W->layout), *v = &var;
    if (!uses_int8(v, W->type, 1)) return clf_fail(CLF_ERR_ARG, "matmul: no int8 gpu GEMV for this type here");
    const int rows = (int)(W->rows / n_part), K = (int)W->cols, slots = (int)clf_tensor_nrows(Y);
    if (xdiv < 1 || Y->ne[0] != rows || XQ->ne[0] != CLF_XQ_FLOATS(W->cols) || clf_tensor_nrows(XQ) * xdiv < slots ||
        ids->ne[0] * clf_tensor_nrows(ids) < slots || XQ->offset % 16 || Y->offset % 4 || ids->offset % 4 || slots < 1)
        return clf_fail(CLF_ERR_ARG, "matmul: indirect gpu GEMV of %d-row experts does not fit %d slots", rows, slots);
    const int lanes = gpu_xq_lanes(W->type, K), group_rows = 32 * v->rpw / lanes;
    char opts[256], base[128], name[48];
    gpu_options(v, &v->tiles[1], 1, base, sizeof base);
    snprintf(name, sizeof name, "gemv_%s_xq_id", clf_type_get(W->type)->suffix);
    kargs a = {0};
    clf_status st = CLF_ERR_CL;
    for (int ptx = gpu_dp4a(rt); ptx >= 0 && st != CLF_OK; ptx--) { /* as gemv_xq_gpu */
        snprintf(opts, sizeof opts, "%s -DLPR=%d -DCLF_DOT_PTX=%d", base, lanes, ptx);
        st = clf_kernel_get(rt, "matmul_gpu", opts, name, &a.k);
        if (st != CLF_OK && st != CLF_ERR_INTERRUPTED && ptx) atomic_store(&ptx_refused, rt->dev.id);
    }
    if (st != CLF_OK) return st;
    const cl_ulong xoff = XQ->offset / 4, id_off = ids->offset / 4, yoff = Y->offset / 4;
    const int ldy = (int)Y->ne[0];
    arg(&a, sizeof(cl_mem), &W->mem);
    arg(&a, sizeof(cl_mem), &XQ->mem);
    arg(&a, sizeof xoff, &xoff);
    arg(&a, sizeof xdiv, &xdiv);
    arg(&a, sizeof(cl_mem), &ids->mem);
    arg(&a, sizeof id_off, &id_off);
    arg(&a, sizeof(cl_mem), &Y->mem);
    arg(&a, sizeof yoff, &yoff);
    arg(&a, sizeof ldy, &ldy);
    arg(&a, sizeof rows, &rows);
    arg(&a, sizeof K, &K);
    const size_t groups = (size_t)((rows + group_rows - 1) / group_rows);
    const size_t global[3] = {(size_t)lanes, groups * (size_t)group_rows, (size_t)slots},
                 local[3] = {(size_t)lanes, (size_t)group_rows, 1};
    return enqueue(rt, &a, "matmul (indirect int8 gemv)", 3, global, local);
}

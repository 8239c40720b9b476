/* What each device runs: kernel variants, tile sizes, the int8-activation
 * path and the decode split, as data (CLBlast's database is the model).
 *
 * Resolved once when a runtime is created, each step on top of the last:
 *   1. the table in tuning.c: rows keyed device type -> platform/vendor ->
 *      device name, each level with a default row ("*"), every row that
 *      matches the device applied from the general to the specific;
 *   2. the values `clinfer tune` measured for this device and driver, read
 *      from the cache folder (tune-<key>.txt, key as the kernel binaries');
 *   3. the environment: CLINFER_MATMUL_VARIANT, CLINFER_ATTN_VARIANT,
 *      CLINFER_OPS_VARIANT (each its documented values, or "auto": no
 *      override) and CLINFER_TUNE ("name=value ..." for any parameter).
 *      A value outside a parameter's range is an error, never ignored.
 * Rows, the tune file and CLINFER_TUNE share one syntax: "name=value ...".
 * The parameters, their meanings and ranges are stated once, in tuning.c's
 * `params` table. */
#ifndef CLF_TUNING_H
#define CLF_TUNING_H

#include <stddef.h>

#include "status.h"

struct clf_device;

/* matmul: the products' kernel family (host/compute/matmul.c). */
enum { CLF_MATMUL_CPU, CLF_MATMUL_CPU_PORTABLE, CLF_MATMUL_GPU };
/* attn, ops: the shape of the attention and row-reduction kernels. */
enum { CLF_SHAPE_CPU, CLF_SHAPE_GPU };
/* int8_width: auto (the widest the device targets), at most 256, 512 bits. */
enum { CLF_INT8_AUTO, CLF_INT8_256, CLF_INT8_512 };

typedef struct clf_tuning {
    /* products */
    int matmul;          /* CLF_MATMUL_* */
    int int8_gemv;       /* 1: decode GEMVs on int8 activations (matmul=cpu on x86 AVX2/AVX-512BW, matmul=gpu) */
    int int8_width;      /* matmul=cpu: CLF_INT8_* the int8 kernels' vector width; resolved, never auto while int8_gemv */
    int int8_ppw;        /* panels per work-item of the Q4 int8 GEMVs */
    int int8_ppw_q8;     /* the same for Q8_0 */
    int int8_vnni;       /* the int8 byte dot products by vpdpbusd: 1 AVX512-VNNI (EVEX), 2 AVX-VNNI (VEX), 0 none */
    int int8_gemm;       /* fewest tokens a product takes on the int8 GEMM (prefill), 0: never (with int8_gemv) */
    int int8_tm;         /* cpu: most token rows of an int8 GEMM tile */
    int gemm_tm;         /* cpu: token rows of a GEMM work-item tile above 12 tokens */
    int gemm_mg;         /* cpu: token tiles a work-item takes in turn */
    int gpu_rpw;         /* gpu: GEMV rows per work-group */
    int gpu_skinny_max;  /* gpu: up to this many tokens take the GEMV-shaped kernel */
    int gpu_tile_max;    /* gpu: largest GEMM work-group tile (32, 64 or 128 square) */
    /* attention */
    int attn;            /* CLF_SHAPE_* */
    int attn_split_keys; /* decode: fewest keys a split takes (its fixed cost) */
    int attn_split_cu;   /* decode: splits (CPU work-items, GPU work-groups) per compute unit */
    /* row reductions (RMSNorm, softmax) */
    int ops;             /* CLF_SHAPE_* */
    /* program builds */
    /* 1: program binaries are cached in the kernel cache; 0 (PoCL): the
     * driver caches its own builds (in <kernel cache>/pocl) and the kernel
     * cache keeps an empty <key>.built per program, since asking PoCL for
     * binaries makes it compile every kernel of a program (10 of a first
     * run's 15 s) */
    int binaries;

    /* where the values came from, for `clinfer devices --json` */
    char row[96];        /* the most specific table row applied, e.g. "cpu/pocl/avx512" */
    int tuned;           /* 1: clinfer tune's file for this device was applied */
    char overrides[256]; /* the environment's assignments, "" if none */
} clf_tuning;

/* Table, then the tune file in cache_dir ("" for none), then the
 * environment. CLF_ERR_ARG (one line naming the variable and its values) on
 * a bad override; a damaged tune file is a format error naming it. */
clf_status clf_tuning_resolve(const struct clf_device *dev, const char *cache_dir, clf_tuning *t);

/* Applies "name=value ..." (origin names the source in errors). */
clf_status clf_tuning_apply(clf_tuning *t, const char *assignments, const char *origin);

/* Overrides on a resolved tuning (tests forcing a variant, `clinfer tune`
 * trying candidates): applies, then the device's capability rules, from its
 * probed caps (the cpu family needs clang, its int8 kernels x86 AVX2 or
 * AVX-512BW, vpdpbusd a CPU that has it). */
clf_status clf_tuning_override(const struct clf_device *dev, clf_tuning *t, const char *assignments);

/* Every parameter as "name=value ..." (the syntax clf_tuning_apply reads). */
void clf_tuning_format(const clf_tuning *t, char *buf, size_t n);

/* What the resolved values select, in words ("cpu products, int8 at 512
 * bits with vpdpbusd (AVX512-VNNI), the int8 GEMM from 2 tokens"). */
void clf_tuning_kernels(const clf_tuning *t, char *buf, size_t n);

/* Parameters by index, for `clinfer tune` and --json: name, meaning, and
 * the value's text ("gpu", "8"). NULL past the last. */
const char *clf_tuning_param_name(int i);
const char *clf_tuning_param_help(int i);
void clf_tuning_value_text(const clf_tuning *t, int i, char *buf, size_t n);

/* The tune file for a device: <cache_dir>/tune-<key>.txt, key from the
 * device name, driver and platform version. */
void clf_tuning_path(const struct clf_device *dev, const char *cache_dir, char *buf, size_t n);
/* Writes the tune file (the parameters that differ from the table's row),
 * atomically. */
clf_status clf_tuning_save(const struct clf_device *dev, const char *cache_dir, const clf_tuning *t);

#endif

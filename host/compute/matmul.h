/* Matrix products with weights in their file type (F32, F16, Q8_0, Q4_0,
 * Q4_1), dequantized inside the kernel: Y [n × rows] = X [n × cols] · Wᵀ,
 * W [rows × cols] as GGUF stores it. GEMV for n = 1, a small-M kernel for
 * skinny n, tiled register-blocked GEMM above; chosen by shape and device.
 * Launchers enqueue without waiting. */
#ifndef CLF_MATMUL_H
#define CLF_MATMUL_H

#include "ops.h"
#include "tensor.h"

/* A weight matrix on the device. The device copy may be re-laid (scales apart
 * from quants, panels) when that loads faster; only matmul.c knows how. */
typedef struct clf_weight {
    clf_type type;
    int64_t rows, cols; /* out_features, in_features */
    cl_mem mem;         /* primary storage */
    cl_mem aux;         /* optional second buffer (e.g. scales), may be NULL */
    int layout;         /* private to matmul.c */
    size_t bytes;       /* device bytes of mem + aux */
} clf_weight;

/* Where a weight's rows are: the row-concatenation of n ≤ 3 GGUF tensors
 * of one type and width (Q|K|V, gate|up fused as they load), data[i]
 * holding rows[i] rows. */
typedef struct clf_rows_src {
    const unsigned char *data[3];
    int64_t rows[3];
    int n;
} clf_rows_src;

/* Row r of the concatenation (rows of row_bytes); NULL past its end. */
const unsigned char *clf_rows_src_row(const clf_rows_src *src, int64_t r, size_t row_bytes);
int64_t clf_rows_src_total(const clf_rows_src *src);

/* Uploads `rows` rows of `cols` elements in GGUF layout (data holds
 * rows * clf_row_bytes(type, cols) bytes). cols must be a multiple of the
 * type's block size. */
clf_status clf_weight_upload(clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, const void *data,
                             clf_weight *w);

/* The same for the rows `src` gives, re-laid on the host's cores straight
 * into the new buffers' mapping (no staging copy; on a CPU device the
 * mapping is the device memory). */
clf_status clf_weight_upload_rows(clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *src,
                                  clf_weight *w);

/* A weight's bytes in this device's layout: main (codes or values) and
 * aux (scale records, 0 where the layout has none); checks type and shape
 * as clf_weight_upload does. */
clf_status clf_weight_layout(const clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, size_t *main_bytes,
                             size_t *aux_bytes);

/* 1 when this device's layout is re-laid on the host (the CPU kernels'
 * panels), 0 when the weights keep their GGUF layout (the GPU kernels). */
int clf_weight_host_layout(const clf_runtime *rt);

/* The layout of the rows `src` gives into host memory main_dst / aux_dst
 * (clf_weight_layout's bytes; every byte written), on the host's cores. */
clf_status clf_weight_pack(const clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *src, void *main_dst,
                           void *aux_dst);

/* The stack of n_part parts (each parts[i]'s rows, all of one count, whole
 * panels of 32 rows) as one weight, part i's bytes its share of the whole
 * from i · (a part's bytes): clf_weight_upload_rows and clf_weight_pack for
 * stacked experts (clf_weight_part cuts them out again). */
clf_status clf_weight_upload_parts(clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *parts, int n_part,
                                   clf_weight *w);
clf_status clf_weight_pack_parts(const clf_runtime *rt, clf_type type, int64_t cols, const clf_rows_src *parts,
                                 int n_part, void *main_dst, void *aux_dst);

/* A weight over host memory already in this device's layout (what
 * clf_weight_pack wrote, e.g. a mapped packed-weights cache): buffers that
 * use that memory in place (CL_MEM_USE_HOST_PTR: no copy on a CPU device).
 * The memory must outlive the weight. */
clf_status clf_weight_wrap(clf_runtime *rt, clf_type type, int64_t rows, int64_t cols, void *main_host,
                           void *aux_host, clf_weight *w);
void clf_weight_free(clf_weight *w);

/* Y = X · Wᵀ (accumulate = 0) or Y += X · Wᵀ (accumulate = 1: fuses a
 * residual add). X: F32 [n × cols] (ne[0] = cols), Y: F32 [n × rows].
 * X and Y are tensors whose rows are contiguous (row stride = ne[0]). */
clf_status clf_matmul(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int accumulate);

/* Y[:, col0 .. col0 + W->rows) = (or +=) X · Wᵀ: the same product written
 * into columns of a wider Y [n × ≥ col0 + rows], as one part of a fused
 * projection whose parts are weights of different types. */
clf_status clf_matmul_cols(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                           int accumulate);

/* clf_matmul_cols whose kernel is, on the cpu family, the one a product of
 * max(n, tile_n) rows takes: that many rows' token tile (TM), and one row
 * on the int8 GEMM rather than a GEMV (a float type's one row stays on its
 * GEMV, whose sums are ordered otherwise). The rows are the same as
 * clf_matmul_cols gives them, bit for bit (a row's sums do not depend on
 * the tile around it; test_moe's test_group_tile). For a
 * caller whose row counts vary from launch to launch (a MoE layer's expert
 * groups: 1 to n rows each, as the routing falls) the kernels stay those a
 * long prompt's products use, built and readied once (a warm-up of a few
 * tokens on one expert readies them), where clf_matmul_cols would take a
 * program per token-tile class (TM 2, 4, 8, each a build of the type's
 * whole family) and the one-row GEMVs, each compiled by PoCL on its first
 * launch: seconds inside a first prompt whose groups fall in a class not
 * seen before. The gpu family ignores tile_n (its tile is sized to n and
 * the rows it covers). */
#define CLF_MATMUL_TILE_LONG 65536 /* tile_n for a long prompt's kernels, whatever n */
clf_status clf_matmul_cols_tile(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                                int accumulate, int64_t tile_n);

/* The same (into columns from col0), each row computed as clf_matmul
 * computes a one-row X (where that quantizes x to int8, so does this), the
 * weights read once for all the rows: decode tokens of several sequences
 * batched give each the result it gets alone: bit for bit on the cpu
 * family (float weights through gemv_<type>_rows, which sums each row as
 * the GEMV does), to rounding on the gpu one. Elsewhere it is clf_matmul. */
clf_status clf_matmul_rowwise(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, clf_tensor *Y, int64_t col0,
                              int accumulate);

/* Floats a row of K activations takes quantized to int8 (cl/common.cl's
 * blocks: 32 x̂, the scale and the sums, 64 bytes per 32 elements). */
#define CLF_XQ_FLOATS(K) ((K) / 32 * 16)

/* clf_matmul_rowwise with X also given quantized, XQ [n × CLF_XQ_FLOATS(cols)]
 * (16-byte aligned) as the kernel that produced X wrote it (clf_rmsnorm_xq,
 * clf_glu_xq, clf_quantize_x): products that quantize x (clf_matmul_quantizes_x)
 * read XQ instead of quantizing X in every work-item, with the same result;
 * the others read X. */
clf_status clf_matmul_rowwise_xq(clf_runtime *rt, const clf_weight *W, const clf_tensor *X, const clf_tensor *XQ,
                                 clf_tensor *Y, int64_t col0, int accumulate);

/* 1 when clf_matmul_glu_xq takes the fused gate|up weight W on this device
 * (the int8 GEMVs of Q8_0/Q4_0/Q4_1, an even number of 32-row panels). */
int clf_matmul_fuses_glu(const clf_runtime *rt, const clf_weight *W);

/* The gated unit of n decode rows in one launch: Y [n × ff] = act(X · Wgᵀ) ⊙
 * (X · Wuᵀ) for W [2ff × cols] the gate's rows then the up's, X given only as
 * its int8 form XQ; Y also written as its int8 form YQ for the down product.
 * Each row as clf_matmul_rowwise_xq then clf_glu_xq give it. */
clf_status clf_matmul_glu_xq(clf_runtime *rt, const clf_weight *W, clf_glu_act act, const clf_tensor *XQ,
                             clf_tensor *Y, const clf_tensor *YQ);

/* ---- stacked experts (host/compute/moe.h) ----
 * A layer's n_part experts as one weight of n_part · part_rows rows (expert
 * e's rows from e · part_rows), each expert also a weight of its own over
 * the same memory (clf_weight_part), so one kernel can take any chosen
 * expert (the indirect GEMVs below) and every other product takes one as a
 * dense matrix. */

/* 1 when this device has the indirect GEMVs for `type` (the int8 GEMVs of
 * the cpu and gpu variants) and n_part parts of part_rows × cols cut a stack on whole
 * panels and on the device's sub-buffer alignment, within its largest
 * allocation; else a layer's experts load apart. */
int clf_matmul_stacks(const clf_runtime *rt, clf_type type, int64_t part_rows, int64_t cols, int n_part);

/* Part i of the n_part equal parts of the stack W: sub-buffers of W's
 * (its bytes are those a product reads, W's share: not more device
 * memory); freed with clf_weight_free before W. */
clf_status clf_weight_part(const clf_weight *W, int n_part, int i, clf_weight *part);

/* The gated units of n decode rows' chosen experts in one launch: slot
 * s = r·k + j of Y [n·k × ff] (and its int8 form YQ) is expert ids[s]'s
 * act(gate · x_r) ⊙ (up · x_r), W the stack of n_part fused gate|up
 * experts [2 ff rows each], x_r given as its int8 form XQ [n rows], ids
 * [n × k] int32 cells on the device. Each slot as clf_matmul_glu_xq gives
 * that expert's row. B: NULL, or F32 [n_part × 2 ff] (gpt-oss): row e
 * added to expert e's gate|up sums before the unit, as the per-expert path
 * adds them (clf_add_rows) to the unfused product's. */
clf_status clf_matmul_glu_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, clf_glu_act act, const clf_tensor *XQ,
                                const clf_tensor *ids, int k, const clf_tensor *B, clf_tensor *Y, const clf_tensor *YQ);

/* X [n × rows] += Σ_j w[r·k + j] · (down_{ids[r·k + j]} · h_{r·k + j} + b),
 * the sum in j's order: W the stack of n_part down experts, H the slots'
 * int8 hidden rows [n·k × CLF_XQ_FLOATS(cols)], ids and w [n × k]; b row
 * ids[r·k + j] of B (F32 [n_part × rows], gpt-oss), or none (B NULL). */
clf_status clf_matmul_down_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, const clf_tensor *HQ,
                                 const clf_tensor *ids, const clf_tensor *w, int k, const clf_tensor *B, clf_tensor *X);

/* The gpu variant's indirect int8 GEMV: Y [slots × rows] row t = expert
 * ids[t]'s rows of the stack W (n_part experts of rows each) times x row
 * t / xdiv of XQ, as gemv_<type>_xq gives it. */
clf_status clf_matmul_rows_id_xq(clf_runtime *rt, const clf_weight *W, int n_part, const clf_tensor *XQ, int xdiv,
                                 const clf_tensor *ids, clf_tensor *Y);

/* Products of n > 1 rows through another GEMM (clf_gemm_f32_fn, host/cl/
 * runtime.h), the weights dequantized to F32 first; NULL: clinfer's
 * kernels (the default). For `bench kernels`, `selftest` and the tests
 * (tools/clblast/clblast.h); the library itself never sets one. */
void clf_matmul_set_gemm(clf_runtime *rt, clf_gemm_f32_fn gemm);

/* The kernel variant that uploads on rt choose ("cpu", "cpu-portable",
 * "gpu"): rt->tune.matmul (the device's tuning, $CLINFER_MATMUL_VARIANT;
 * "cpu", which needs clang's __fp16, means "cpu-portable" off PoCL). */
const char *clf_matmul_variant(const clf_runtime *rt);

/* 1 when products of W over n tokens quantize X to int8 per block of 32 (a
 * faster integer dot, used for Q8_0/Q4 GEMVs on x86 CPUs with AVX-512BW under
 * PoCL): results then differ from float arithmetic by x's rounding, about
 * 0.4% relative, as in llama.cpp's CPU kernels. */
int clf_matmul_quantizes_x(const clf_runtime *rt, const clf_weight *W, int64_t n);

/* The product kernels, by form: one name pattern each, with %s for the
 * type's name (cl/types.cl says which types have which form). */
typedef enum clf_mm_form {
    CLF_MM_GEMV,        /* gemv_<type>: one token */
    CLF_MM_GEMM,        /* gemm_<type>: tokens */
    CLF_MM_GEMV_I8,     /* gemv_<type>_i8: cpu, x quantized in the kernel */
    CLF_MM_GEMV_XQ,     /* gemv_<type>_xq: x quantized by its producer (cpu; gpu where GPU_XQ) */
    CLF_MM_GEMM_XQ,     /* gemm_<type>_xq: cpu, the int8 GEMM */
    CLF_MM_SWIGLU_XQ,   /* gemv_<type>_swiglu_xq: cpu, gate|up with SwiGLU */
    CLF_MM_GEGLU_XQ,    /* gemv_<type>_geglu_xq: cpu, gate|up with GeGLU */
    CLF_MM_TO_F32,      /* unpack_<type> (cpu) or dequant_<type> (gpu, not F32): W as F32 for another GEMM (clf_matmul_set_gemm) */
    CLF_MM_SWIGLU_OAI_XQ, /* gemv_<type>_swiglu_oai_xq: cpu, gate|up with gpt-oss's clamped SwiGLU (-DCLF_GLU_OAI=1) */
    CLF_MM_GEMV_ROWS,   /* gemv_<type>_rows: cpu, float types, several tokens each as gemv_<type> (rowwise) */
    CLF_MM_FORMS
} clf_mm_form;

/* The name of type t's kernel of form f in the cpu (panels 1: cl/matmul_cpu.cl)
 * or gpu family, in buf; NULL when the type has no such kernel there. */
const char *clf_matmul_kernel_name(clf_type t, int panels, clf_mm_form f, char *buf, size_t n);

#endif

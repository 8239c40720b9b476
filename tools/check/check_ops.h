/* Checks of the small kernels (host/compute/ops.h) at a given shape, each against a
 * plain C reference in double on random data drawn from `seed`, outputs
 * poisoned first. The tests sweep shapes with these; clf_checks_ops[]
 * (tools/check/check.h) runs each over representative shapes for `selftest`. */
#ifndef CLF_CHECK_OPS_H
#define CLF_CHECK_OPS_H

#include "check.h"
#include "ops.h"

/* get_rows of n_ids random ids from a random [rows × ne0] table of `type`
 * (quantized on the host), and the whole-table dequantize; reference:
 * clf_dequantize. ne0 must be a whole number of the type's blocks. */
clf_status clf_check_get_rows(clf_runtime *rt, uint64_t seed, clf_type type, int ne0, int rows, int n_ids,
                              clf_check_result *res);

/* Every one of the 65536 F16 bit patterns through the F16 dequantize,
 * compared bit for bit with clf_f16_to_f32 (NaN only needs to stay NaN). */
clf_status clf_check_f16_bits(clf_runtime *rt, uint64_t seed, clf_check_result *res);

/* rows × n, y a separate (poisoned) tensor or x itself; with accumulate y
 * holds random values and the norm is added to them (in place: y = x + norm(x)). */
clf_status clf_check_rmsnorm(clf_runtime *rt, uint64_t seed, int rows, int n, int in_place, int accumulate,
                             clf_check_result *res);

/* Per-head RMSNorm in place on n_a + n_b heads of head_dim at col0 of
 * n_tokens rows of row_stride, the first n_a with one weight, the rest with
 * another; the whole buffer is compared, so elements outside the heads must
 * come back unchanged. */
clf_status clf_check_rmsnorm_heads(clf_runtime *rt, uint64_t seed, int n_tokens, int row_stride, int col0,
                                   int head_dim, int n_a, int n_b, clf_check_result *res);

typedef struct clf_rope_case {
    int n_tokens, row_stride, col0, n_heads, head_dim, n_rot, pos0;
    float base;
    clf_rope_mode mode;
    float freq_scale; /* 0 means 1 */
    int factors;      /* random frequency factors in [1, 40) (Llama 3.1's range) */
} clf_rope_case;

/* The whole [n_tokens × row_stride] buffer is compared, so elements outside
 * the rotated heads and dims must come back unchanged. */
clf_status clf_check_rope(clf_runtime *rt, uint64_t seed, const clf_rope_case *c, clf_check_result *res);
/* The same with YaRN (clf_rope_yarn: factor over an original context
 * n_ctx_orig, attn_factor 1, llama.cpp's betas; the case's freq_scale
 * unused) against llama.cpp's rope_yarn in double. */
clf_status clf_check_rope_yarn(clf_runtime *rt, uint64_t seed, const clf_rope_case *c, float factor, int n_ctx_orig,
                               clf_check_result *res);

/* The gated unit with either activation; gate values reach the saturated
 * ends of silu and GELU. */
clf_status clf_check_glu(clf_runtime *rt, uint64_t seed, clf_glu_act act, int rows, int ff, clf_check_result *res);

/* Activations quantized to int8 for the GEMVs (matmul.h): by clf_quantize_x
 * (CLF_XQ_QUANTIZE), clf_rmsnorm_xq or clf_glu_xq (SwiGLU) over rows × n,
 * the first xq_rows quantized. Each block's x̂, scale and sums against a C
 * quantization in float of the producer's own float output (which must be
 * unchanged: clf_rmsnorm / clf_glu's); n a multiple of 32. */
typedef enum clf_xq_producer { CLF_XQ_QUANTIZE = 0, CLF_XQ_RMSNORM = 1, CLF_XQ_SWIGLU = 2 } clf_xq_producer;
clf_status clf_check_xq(clf_runtime *rt, uint64_t seed, clf_xq_producer p, int rows, int xq_rows, int n,
                        clf_check_result *res);

/* y = a * s, y a separate tensor or a itself. */
clf_status clf_check_scale(clf_runtime *rt, uint64_t seed, int rows, int n, int in_place, clf_check_result *res);

/* alias: 0 y is its own tensor, 1 y is a, 2 y is b. */
clf_status clf_check_add(clf_runtime *rt, uint64_t seed, int rows, int n, int alias, clf_check_result *res);

/* x [rows × n] += b [n], in place. */
clf_status clf_check_add_rows(clf_runtime *rt, uint64_t seed, int rows, int n, clf_check_result *res);

/* Rows include large offsets (exp would overflow without the max),
 * CLF_NEG_BIG-masked entries and, from 3 rows on, a fully masked row. */
clf_status clf_check_softmax(clf_runtime *rt, uint64_t seed, int rows, int n, clf_check_result *res);

/* The k best of a row of n through clf_topk_read against a sort in C: ids
 * and values exactly, the non-finite flag; special: values on 16 levels
 * (ties, the smaller index first), a NaN (as -inf) and both infinities. */
clf_status clf_check_topk(clf_runtime *rt, uint64_t seed, int n, int k, int special, clf_check_result *res);

#endif

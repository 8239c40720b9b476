/* Checks of the matrix products (host/compute/matmul.h) at a given shape. The tests
 * sweep shapes, variants and backends with this; clf_checks_matmul[]
 * (tools/check/check.h) runs each path and type over representative shapes for
 * `selftest`. */
#ifndef CLF_CHECK_MATMUL_H
#define CLF_CHECK_MATMUL_H

#include "check.h"
#include "matmul.h"

/* Y [n × rows] (+)= X · Wᵀ for a random W of `type` (quantized on the host),
 * X and, with accumulate, the prior Y random in [-1, 1); Y poisoned first
 * otherwise. Reference: clf_dequantize, then products summed in double.
 * Uses the runtime's current backend and the variant clf_matmul_variant()
 * names. cols must be a whole number of the type's blocks. */
clf_status clf_check_matmul(clf_runtime *rt, uint64_t seed, clf_type type, int rows, int cols, int n,
                            int accumulate, clf_check_result *res);

/* The stated tolerance on ||Y - ref|| / ||ref||: float accumulation order
 * only, since the kernels dequantize exactly as the reference does
 * (clf_check_matmul widens it where the outputs cancel to well below
 * Σ|x·w| / √cols, whose rounding it then sees). Where
 * the product quantizes x to int8 (clf_matmul_quantizes_x), the check
 * derives it from the data instead: 4 standard deviations of the error that
 * x's rounding causes (about 0.5% on the real shapes). */
double clf_check_matmul_tol(clf_type type);

/* That data-derived tolerance for Y = X · Wᵀ (+ prior Y) with x rounded to
 * int8 per block: x [n × cols], wd the dequantized W [rows × cols], ref the
 * exact Y [n × rows]. */
double clf_check_matmul_int8_tol(clf_type type, const float *x, const float *wd, const double *ref, int rows,
                                 int cols, int n);

#endif

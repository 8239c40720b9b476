/* Matrix product benchmark for `clinfer bench kernels`. */
#ifndef CLF_BENCH_MATMUL_H
#define CLF_BENCH_MATMUL_H

#include <stdio.h>

#include "runtime.h"

/* Times the SmolLM2-135M decode GEMVs (576->576, 576->192, 576->1536,
 * 1536->576, 576->49152) for F32, F16, Q8_0, Q4_0, Q4_1, the same shapes as
 * 512-token prefill GEMMs, square 1024 and 2048 F32 GEMMs, and 4096->4096
 * GEMVs of every type with the 512-token GEMMs of BF16, Q5_0, Q5_1, IQ4_NL
 * and the K-quants: median device
 * time over repeats (event profiling), GFLOP/s, GB/s (minimum bytes: weights
 * as stored, X, Y) and percent of the roofline min(peak_gflops, intensity ·
 * peak_gbs) (omitted when a peak is <= 0). Beside each GEMM, the CLBlast
 * backend (wall time of dequantize + SGEMM + finish) and its ratio to ours;
 * on a CPU device, host OpenBLAS cblas_sgemm/sgemv on the F32 weights at the
 * same shape when built with it. A table, or with `json` one JSON array of
 * row objects. Returns CLF_OK (0) or a clf_status with the message set. */
int clf_bench_matmul(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs);

#endif

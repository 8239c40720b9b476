/* Attention benchmark for `clinfer bench kernels`. */
#ifndef CLF_BENCH_ATTENTION_H
#define CLF_BENCH_ATTENTION_H

#include <stdio.h>

#include "runtime.h"

/* SmolLM2-135M's head layout (9 query heads over 3 KV heads of 64).
 * Causal prefill of 128, 512, 2048 and 4096 tokens through the tiled kernel
 * and through the naive one (scores materialised), F32 cache: time per call
 * inside a batch, GFLOP/s on the causal FLOPs (the same count for both),
 * bytes moved to and from device memory as each algorithm does it and GB/s,
 * the naive score table's size, and the speed-up. Then one decode token
 * against 512, 2048 and 8192 cached tokens, F32 and F16 caches: time, splits,
 * GB/s and percent of peak_gbs. A table, or with `json` one JSON array of row
 * objects. Returns CLF_OK (0) or a clf_status with the message set. */
int clf_bench_attention(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs);

#endif

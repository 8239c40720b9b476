/* `clinfer bench kernels`: the small ops (RMSNorm, RoPE, SwiGLU, add,
 * softmax, embedding lookup) at SmolLM2 shapes, decode (1 token) and
 * prefill (512 tokens). */
#ifndef CLF_BENCH_OPS_H
#define CLF_BENCH_OPS_H

#include <stdio.h>

#include "runtime.h"

/* Prints one row per op and shape: µs per op inside a batch of launches,
 * GB/s on the op's minimum bytes and its percent of peak_gbs (these ops do
 * too little arithmetic for peak_gflops to matter). With json, writes one
 * JSON array of row objects and nothing else. */
clf_status clf_bench_ops(clf_runtime *rt, int json, FILE *out, double peak_gflops, double peak_gbs);

#endif

/* Kernels that measure a device's roofs (bench/roof.c): memory bandwidth,
 * FMA throughput and the cost of a launch. */

/* dst = src: CLF_COPY_VECS vectors of CLF_COPY_WIDTH floats per work-item,
 * consecutive work-items on consecutive vectors at each step. A CPU wants
 * the widest vector (float16: a work-item is a SIMD thread); a GPU wants
 * narrow per-lane loads that coalesce across the lanes (float4). */
#ifndef CLF_COPY_VECS
#define CLF_COPY_VECS 4
#endif
#ifndef CLF_COPY_WIDTH
#define CLF_COPY_WIDTH 16
#endif
#if CLF_COPY_WIDTH == 16
#define CLF_COPY_T float16
#else
#define CLF_COPY_T float4
#endif
__kernel void roof_copy(__global const CLF_COPY_T *src, __global CLF_COPY_T *dst) {
    size_t n = get_global_size(0), i = get_global_id(0);
    for (int k = 0; k < CLF_COPY_VECS; k++) dst[i + k * n] = src[i + k * n];
}

/* CLF_FMA_WIDTH (8 or 16) lanes in 16 independent chains: a CPU with two
 * FMA pipes of 4 cycles' latency needs at least 8 in flight. x = x a + b
 * with a < 1 stays bounded. A work-item does iters * 16 * 2 * CLF_FMA_WIDTH
 * FLOPs. */
#ifndef CLF_FMA_WIDTH
#define CLF_FMA_WIDTH 16
#endif
#if CLF_FMA_WIDTH == 16
#define CLF_FMA_T float16
#else
#define CLF_FMA_T float8
#endif
#define CLF_FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define CLF_FMA_INIT(i) CLF_FMA_T x##i = s + 0.05f * i;
#define CLF_FMA_STEP(i) x##i = fma(x##i, a, b);
#define CLF_FMA_SUM(i) t += x##i;

__kernel void roof_fma(__global float *out, const float a, const float b, const int iters) {
    float s = (float)get_global_id(0) * 1e-6f;
    CLF_FMA_CHAINS(CLF_FMA_INIT)
    for (int i = 0; i < iters; i++) {
        CLF_FMA_CHAINS(CLF_FMA_STEP)
    }
    /* one store of the sum of every lane of every chain keeps them all live */
    CLF_FMA_T t = 0.0f;
    CLF_FMA_CHAINS(CLF_FMA_SUM)
#if CLF_FMA_WIDTH == 16
    float8 u = t.lo + t.hi;
#else
    float8 u = t;
#endif
    out[get_global_id(0)] = dot(u.lo + u.hi, (float4)(1.0f));
}

__kernel void roof_empty(__global float *unused) { (void)unused; }

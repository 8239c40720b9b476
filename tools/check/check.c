/* Shared helpers of the kernel checks (tools/check/check.h). */
#include "check.h"

#include <math.h>
#include <stdlib.h>

uint64_t clf_rng_init(uint64_t seed, uint64_t stream) {
    /* splitmix64 of the pair, so nearby seeds and streams give unrelated data */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z ? z : 0x2545f4914f6cdd1dull; /* xorshift must not start at 0 */
}

uint64_t clf_rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

float clf_rng_uniform(uint64_t *s, float lo, float hi) {
    float u = (float)((clf_rng_next(s) >> 40) * (1.0 / 16777216.0));
    return lo + (hi - lo) * u;
}

clf_status clf_rng_fill_tensor(clf_runtime *rt, clf_tensor *t, uint64_t *s, float lo, float hi) {
    size_t n = clf_tensor_bytes(t) / sizeof(float);
    float *h = malloc(n * sizeof *h);
    if (!h) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (size_t i = 0; i < n; i++) h[i] = clf_rng_uniform(s, lo, hi);
    clf_status st = clf_tensor_upload(rt, t, h, n * sizeof *h);
    free(h);
    return st;
}

double clf_rel_err(const float *out, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) return INFINITY;
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

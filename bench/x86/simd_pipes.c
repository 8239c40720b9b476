/* Reciprocal throughput, in cycles, of the 512-bit integer and float
 * multiply-adds the int8 GEMMs issue (bench/RESULTS.md, "Integer
 * sub-block sums"): 8 independent destinations an iteration, so latency
 * does not bound it; the clock from a chain of dependent scalar adds (one
 * cycle each). x86 with AVX512-BW and AVX512-VNNI only, so not built by
 * CMake (which links bench/'s own .c files into the CLI):
 *
 *   gcc -O2 -mavx512bw -mavx512vnni bench/x86/simd_pipes.c -o simd_pipes && ./simd_pipes
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define OP8(op)                                                                                              \
    op " %[b], %[c], %[a0]\n\t" op " %[b], %[c], %[a1]\n\t" op " %[b], %[c], %[a2]\n\t" op " %[b], %[c], %[a3]\n\t" \
    op " %[b], %[c], %[a4]\n\t" op " %[b], %[c], %[a5]\n\t" op " %[b], %[c], %[a6]\n\t" op " %[b], %[c], %[a7]\n\t"
#define RUN(name, text)                                                                                    \
    do {                                                                                                   \
        const double t0 = now();                                                                           \
        for (long i = 0; i < N; i++)                                                                       \
            __asm__ volatile(text : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), \
                             [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7)                                   \
                             : [b] "v"(b), [c] "v"(c));                                                    \
        printf("%-28s %.2f cycles\n", name, (now() - t0) / (double)N / 8 / cycle);                        \
    } while (0)

int main(void) {
    long x = 0, N = 400000000;
    double t0 = now();
    for (long i = 0; i < N; i++) __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    const double cycle = (now() - t0) / (double)N / 4;
    printf("clock %.2f GHz (a dependent add a cycle)\n", 1e-9 / cycle);
    /* eight named registers: an array would go through memory each iteration */
    __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const __m512i b = _mm512_set1_epi32(3), c = _mm512_set1_epi32(5);
    N = 50000000;
    RUN("vpdpbusd", OP8("vpdpbusd"));
    RUN("vpmulld", OP8("vpmulld"));
    RUN("vpmaddubsw", OP8("vpmaddubsw"));
    RUN("vpmaddwd", OP8("vpmaddwd"));
    RUN("vfmadd231ps", OP8("vfmadd231ps"));
    RUN("vpaddd", OP8("vpaddd"));
    RUN("vpdpbusd + vfmadd231ps (a pair)", OP8("vpdpbusd") OP8("vfmadd231ps"));
    RUN("vpdpbusd + vpaddd (a pair)", OP8("vpdpbusd") OP8("vpaddd"));
    const __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                       _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
    return _mm512_reduce_add_epi32(s) == 42 && x == 0;
}

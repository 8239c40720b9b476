/* What the driver's compiler targets for this device, as the macros it
 * predefines (host/cl/probe.c reads the bits, CLF_CAP_* in runtime.h):
 * the x86 kernels' builtins compile only where their feature is on, so a
 * kernel is chosen by this, never by a device or CPU name. Bit i is
 * CLF_CAP_*_BIT's i, in that enum's order. One work-item. */
__kernel void probe_caps(__global uint *out) {
    uint c = 0;
#ifdef __clang__
    c |= 1u << 0; /* clang's __fp16 vectors (the cpu matmul family) */
#endif
#if defined(__x86_64__) || defined(__i386__)
    c |= 1u << 1;
#endif
#ifdef __AVX2__
    c |= 1u << 2;
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__)
    c |= 1u << 3;
#endif
#ifdef __AVX512VL__
    c |= 1u << 4;
#endif
#ifdef __AVX512VNNI__
    c |= 1u << 5;
#endif
#ifdef __AVXVNNI__
    c |= 1u << 6;
#endif
#ifdef __FMA__
    c |= 1u << 7;
#endif
#if defined(__ARM_NEON) || defined(__ARM_NEON__)
    c |= 1u << 8;
#endif
#ifdef __ARM_FEATURE_DOTPROD
    c |= 1u << 9;
#endif
    out[0] = c;
}

/* Prepended to every kernel family. OpenCL C 1.2, no extension required. */
#ifndef CLF_COMMON_CL
#define CLF_COMMON_CL
/* Large negative used instead of -INFINITY so masking survives any math
 * flags; exp(CLF_NEG_BIG - m) underflows to exactly 0. */
#define CLF_NEG_BIG (-1.0e30f)

/* The high half of a float16, element by element rather than .hi: Oclgrind
 * 21.10's uninitialised-value plugin compares a shufflevector's mask entries
 * with llvm::Value::UndefValueVal (11 with LLVM 14) instead of the undefined
 * mask value, so the element a swizzle takes from index 11 (.hi, .odd,
 * .s89ab, ...) reads as uninitialised there. Compilers make the same
 * shuffle of this; the builtin shuffle()/shuffle2() are not affected. */
#define CLF_HI8(v) ((float8)((v).s8, (v).s9, (v).sa, (v).sb, (v).sc, (v).sd, (v).se, (v).sf))

/* F16 bits to F32 for 16 values, in integer vector ops (cl/quant.cl,
 * cl/matmul_cpu.cl and cl/lora.cl where clang's __fp16 is not used): vload_half is a
 * long software routine on some CPU drivers. Subnormal halves are made as
 * the difference of two normal floats, so the result is exact even where
 * the device flushes float denormals to zero. */
inline float16 clf_half16_to_float16(ushort16 h) {
    uint16 u = convert_uint16(h);
    uint16 em = (u & 0x7fffu) << 13; /* exponent and mantissa, in float position */
    uint16 e = em & 0x0f800000u;
    uint16 sign = (u & 0x8000u) << 16;
    uint16 normal = em + 0x38000000u;                                         /* rebias 15 -> 127 */
    uint16 special = em | 0x7f800000u;                                        /* inf / nan */
    float16 sub = as_float16(em + 0x38800000u) - (float16)6.103515625e-05f;   /* man * 2^-24 */
    uint16 r = select(normal, special, e == (uint16)0x0f800000u);
    r = select(r, as_uint16(sub), e == (uint16)0u);
    return as_float16(r | sign);
}

/* The gated units' activations (cl/elementwise.cl's GLU kernels and the
 * GEMV that fuses gate|up with SwiGLU/GeGLU, cl/matmul_cpu.cl). */
/* silu(g) = g / (1 + exp(-g)); the exponent is clamped so a very negative
 * g gives 0 without relying on exp overflowing to infinity. */
inline float16 clf_silu16(float16 g) { return g / (1.0f + exp(fmin(-g, 80.0f))); }
inline float clf_silu(float g) { return g / (1.0f + exp(fmin(-g, 80.0f))); }

/* GELU, tanh approximation (GeGLU of Gemma; llama.cpp's ggml_gelu):
 * 0.5 g (1 + tanh(u)), u = sqrt(2/pi) g (1 + 0.044715 g^2), computed as
 * g / (1 + exp(-2u)), the same value without the cancellation of 1 + tanh
 * for negative g. g is clamped to +-10 inside u (the tanh is +-1 in float
 * there), so exp stays finite. */
#define CLF_GELU(T, g)                                                                                         \
    ((g) / (1.0f + exp(-1.5957691216057308f * clamp((g), (T)-10.0f, (T)10.0f) *                              \
                       (1.0f + 0.044715f * clamp((g), (T)-10.0f, (T)10.0f) * clamp((g), (T)-10.0f, (T)10.0f)))))
inline float16 clf_gelu16(float16 g) { return CLF_GELU(float16, g); }
inline float clf_gelu(float g) { return CLF_GELU(float, g); }

/* gpt-oss's clamped SwiGLU (llama.cpp's swiglu_oai, alpha and limit its
 * constants; the GGUF states neither): with x = min(g, limit),
 * h = x·sigmoid(alpha·x) · (clamp(u, -limit, limit) + 1). A gated unit of
 * its own, not act(g)·u: the up half is clamped and shifted too. The
 * exponent is clamped as silu's. */
#define CLF_OAI_ALPHA 1.702f
#define CLF_OAI_LIMIT 7.0f
#define CLF_SWIGLU_OAI(T, g, u)                                                                            \
    (fmin((g), (T)CLF_OAI_LIMIT) / (1.0f + exp(fmin(-CLF_OAI_ALPHA * fmin((g), (T)CLF_OAI_LIMIT), (T)80.0f))) * \
     (clamp((u), (T)-CLF_OAI_LIMIT, (T)CLF_OAI_LIMIT) + 1.0f))
inline float16 clf_swiglu_oai16(float16 g, float16 u) { return CLF_SWIGLU_OAI(float16, g, u); }
inline float clf_swiglu_oai(float g, float u) { return CLF_SWIGLU_OAI(float, g, u); }

/* sin(theta), its cos in *c. Oclgrind's uninitialized-value check aborts
 * any builtin that writes through a private pointer ("Work item needed to
 * access private memory!", its Uninitialized.cpp), so the suite's Oclgrind
 * runs build with -DCLF_NO_SINCOS: the two functions sincos stands for. */
#ifdef CLF_NO_SINCOS
#define CLF_SINCOS(theta, c) (*(c) = cos(theta), sin(theta))
#else
#define CLF_SINCOS(theta, c) sincos(theta, c)
#endif

/* RoPE's cos and sin of pairs i0 .. i0 + 7 at position pos (times the
 * linear scale), theta = pos * exp2(i * log2_scale) / ff[i] (cl/rope.cl; the
 * decode attention that rotates its own q and k, cl/attention.cl). */
inline float8 rope_angles(int i0, float pos, float log2_scale, __global const float *ff, float8 *c) {
    float8 i = (float8)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f) + (float)i0;
    float8 theta = pos * exp2(i * log2_scale);
    if (ff) theta /= vload8(0, ff + i0);
    return CLF_SINCOS(theta, c);
}

/* YaRN (llama.cpp's rope_yarn), yarn = (ext_factor, corr_lo, corr_hi,
 * mscale) from clf_rope_yarn (host/compute/ops.h), used where ext_factor
 * != 0 and pos unscaled: pair i's angle mixes the interpolated
 * freq_scale·theta and the extrapolated theta = pos·exp2(i·log2_scale)/ff[i]
 * by ramp(i)·ext_factor, ramp = 1 - clamp((i - lo) / max(0.001, hi - lo),
 * 0, 1) (the fast-turning pairs below lo keep theta), and cos and sin are
 * scaled by mscale. */
inline float8 rope_angles_yarn(int i0, float pos, float log2_scale, __global const float *ff, float freq_scale,
                               float4 yarn, float8 *c) {
    float8 i = (float8)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f) + (float)i0;
    float8 theta = pos * exp2(i * log2_scale);
    if (ff) theta /= vload8(0, ff + i0);
    const float8 mix = (1.0f - clamp((i - yarn.y) / fmax(0.001f, yarn.z - yarn.y), (float8)0.0f, (float8)1.0f)) * yarn.x;
    theta = freq_scale * theta * (1.0f - mix) + theta * mix;
    const float8 s = CLF_SINCOS(theta, c);
    *c *= yarn.w;
    return s * yarn.w;
}

/* One pair's sin (its cos in *c) as rope_angles / rope_angles_yarn give
 * it: pos scaled by freq_scale already unless YaRN (yarn.x != 0). */
inline float rope_angle1(int i, float pos, float log2_scale, __global const float *ff, float freq_scale, float4 yarn,
                         float *c) {
    float theta = pos * exp2((float)i * log2_scale);
    if (ff) theta /= ff[i];
    if (yarn.x == 0.0f) return CLF_SINCOS(theta, c);
    const float mix = (1.0f - clamp(((float)i - yarn.y) / fmax(0.001f, yarn.z - yarn.y), 0.0f, 1.0f)) * yarn.x;
    theta = freq_scale * theta * (1.0f - mix) + theta * mix;
    const float s = CLF_SINCOS(theta, c);
    *c *= yarn.w;
    return s * yarn.w;
}

/* An activation quantized to int8 for the integer-dot GEMVs (matmul.h,
 * CLF_XQ_FLOATS): per block of 32 elements, 64 bytes: the 32 x̂ = rint(x /
 * dx) as chars; floats dx = max|x| / 127, dx·Σx̂ of each half and of the
 * block; Σx̂ of each half as two shorts in one int (the K-quants' offsets
 * in one pmaddwd, Q8_0's in its GEMM), three zero ints. The kernel that
 * produces x writes it once; every work-item of the products that read it
 * would otherwise quantize x again. The sums are formed as the GEMVs formed
 * them inline, so results are bit-identical. */
#define CLF_XQ_BYTES 64
#define CLF_XQ_PAIR 12 /* the Σx̂ pair's index among a block's ints */
inline float clf_xq_hsum16(float16 v) {
    const float8 s8 = v.lo + CLF_HI8(v);
    const float4 s4 = s8.lo + s8.hi;
    return (s4.x + s4.y) + (s4.z + s4.w);
}
/* The block's scale dx and x̂ (as floats ra, rb: halves) of x = (xa, xb). */
#define CLF_XQ_QUANT(xa, xb, ra, rb, dx)                                                  \
    do {                                                                                  \
        const float16 am_ = fmax(fabs(xa), fabs(xb));                                     \
        const float8 am8_ = fmax(am_.lo, CLF_HI8(am_));                                   \
        const float4 am4_ = fmax(am8_.lo, am8_.hi);                                       \
        const float amax_ = fmax(fmax(am4_.x, am4_.y), fmax(am4_.z, am4_.w));             \
        const float inv_ = amax_ > 0.0f ? 127.0f / amax_ : 0.0f;                          \
        dx = amax_ / 127.0f;                                                              \
        ra = rint((xa) * inv_);                                                           \
        rb = rint((xb) * inv_);                                                           \
    } while (0)
/* Σx̂ of the halves (|Σ| ≤ 16·127) as shorts: the low one first. */
inline int clf_xq_pair(float sa, float sb) { return ((int)sa & 0xffff) | (int)sb << 16; }
inline void clf_xq_store32(float16 xa, float16 xb, __global uchar *dst) {
    float16 ra, rb;
    float dx;
    CLF_XQ_QUANT(xa, xb, ra, rb, dx);
    vstore16(convert_char16(ra), 0, (__global char *)dst);
    vstore16(convert_char16(rb), 1, (__global char *)dst);
    const float sa = clf_xq_hsum16(ra), sb = clf_xq_hsum16(rb);
    vstore4((float4)(dx, dx * sa, dx * sb, dx * clf_xq_hsum16(ra + rb)), 0, (__global float *)(dst + 32));
    vstore4((int4)(clf_xq_pair(sa, sb), 0, 0, 0), 0, (__global int *)dst + CLF_XQ_PAIR);
}
#endif

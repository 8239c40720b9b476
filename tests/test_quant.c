/* The host quantizers and F16 conversion (host/core/quant.c) against blocks and
 * bit patterns worked out by hand, an independent nearest-half search, and
 * the peers' (de)quantizations recorded by tests/peer/record_quants.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "quant.h"
#include "testutil.h"

static void fill_range(float *x, int from, int to, float v) {
    for (int j = from; j < to; j++) x[j] = v;
}

/* ---- Q8_0: d = amax / 127, q = round(x / d), halves away from zero ------ */

static void test_q8_0_exact_scale(void **state) {
    (void)state;
    float x[32] = {127, -127, 0.5f, -0.5f, 2.5f, 1.49f, -3.7f, 0};
    for (int j = 8; j < 32; j++) x[j] = (float)(j - 20);
    /* amax 127 -> d = 1 (0x3c00), q = roundf(x) */
    const int8_t want[32] = {127, -127, 1, -1, 3, 1, -4, 0, -12, -11, -10, -9, -8, -7, -6, -5,
                             -4,  -3,   -2, -1, 0, 1, 2,  3, 4,   5,   6,   7,  8,  9,  10, 11};
    clf_block_q8_0 b;
    clf_quantize(CLF_Q8_0, x, &b, 32);
    assert_int_equal(b.d, 0x3c00);
    assert_memory_equal(b.qs, want, 32);
    float y[32];
    clf_dequantize(CLF_Q8_0, &b, y, 32);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)want[j]);
}

static void test_q8_0_rounded_scale(void **state) {
    (void)state;
    /* amax 1 -> d = 1/127, stored as f16 0x2008 (2^-7 * (1 + 8/1024)); q is
     * taken from the float d, not the stored one: 127 x */
    float x[32] = {1.0f, -0.5f, 0.25f, -1.0f};
    fill_range(x, 4, 32, 0.125f);
    int8_t want[32] = {127, -64, 32, -127}; /* -63.5 rounds away from zero; 31.75 -> 32 */
    memset(want + 4, 16, 28);               /* 15.875 -> 16 */
    clf_block_q8_0 b;
    clf_quantize(CLF_Q8_0, x, &b, 32);
    assert_int_equal(b.d, 0x2008);
    assert_memory_equal(b.qs, want, 32);
    float y[32];
    clf_dequantize(CLF_Q8_0, &b, y, 32);
    assert_true(y[0] == 127 * 0.00787353515625f);
    assert_true(y[1] == -64 * 0.00787353515625f);
}

/* ---- Q4_0: d = (signed value of largest magnitude) / -8,
 *      q = (int)(x / d + 8.5) clamped to 15; byte j = q[j] | q[j + 16] << 4 */

static void test_q4_0_negative_max(void **state) {
    (void)state;
    float x[32] = {-8, 0, 0.49f, -0.5f, -7.6f};
    fill_range(x, 5, 16, 1);
    x[16] = 7, x[17] = 7.4f, x[18] = 0.5f, x[19] = -0.51f, x[20] = 3;
    fill_range(x, 21, 32, -2);
    /* d = -8 / -8 = 1. q: -8 -> 0, 7 -> 15 | 0 -> 8, 7.4 -> 15 (15.9) | 0.49 -> 8 (8.99), 0.5 -> 9 |
     * -0.5 -> 8, -0.51 -> 7 (7.99) | -7.6 -> 0 (0.9), 3 -> 11 | 1 -> 9, -2 -> 6 */
    const uint8_t want[16] = {0xf0, 0xf8, 0x98, 0x78, 0xb0, 0x69, 0x69, 0x69,
                              0x69, 0x69, 0x69, 0x69, 0x69, 0x69, 0x69, 0x69};
    clf_block_q4_0 b;
    clf_quantize(CLF_Q4_0, x, &b, 32);
    assert_int_equal(b.d, 0x3c00);
    assert_memory_equal(b.qs, want, 16);
    float y[32];
    clf_dequantize(CLF_Q4_0, &b, y, 32); /* w = d (q - 8) */
    const float lo[5] = {-8, 0, 0, 0, -8}, hi[5] = {7, 7, 1, -1, 3};
    for (int j = 0; j < 5; j++) {
        assert_true(y[j] == lo[j]);
        assert_true(y[j + 16] == hi[j]);
    }
    assert_true(y[15] == 1 && y[31] == -2);
}

static void test_q4_0_positive_max(void **state) {
    (void)state;
    float x[32] = {16, 1, 3};
    fill_range(x, 3, 16, 2);
    x[16] = -14, x[17] = -1, x[18] = -15;
    fill_range(x, 19, 32, -2);
    /* d = 16 / -8 = -2 (0xc000), 1/d = -0.5. q: 16 -> 0 (0.5), -14 -> 15 (15.5) | 1 -> 8, -1 -> 9 |
     * 3 -> 7, -15 -> 16 clamped to 15 | 2 -> 7 (7.5), -2 -> 9 (9.5) */
    const uint8_t want[16] = {0xf0, 0x98, 0xf7, 0x97, 0x97, 0x97, 0x97, 0x97,
                              0x97, 0x97, 0x97, 0x97, 0x97, 0x97, 0x97, 0x97};
    clf_block_q4_0 b;
    clf_quantize(CLF_Q4_0, x, &b, 32);
    assert_int_equal(b.d, 0xc000);
    assert_memory_equal(b.qs, want, 16);
    float y[32];
    clf_dequantize(CLF_Q4_0, &b, y, 32);
    assert_true(y[0] == 16 && y[16] == -14 && y[18] == -14 && y[3] == 2 && y[19] == -2);
}

/* ---- Q4_1: d = (max - min) / 15, m = min, q = (int)((x - min) / d + 0.5) */

static void test_q4_1(void **state) {
    (void)state;
    float x[32] = {-1, 0.4f, 6};
    fill_range(x, 3, 16, 2);
    x[16] = 14, x[17] = 0.5f, x[18] = 13.6f;
    fill_range(x, 19, 32, 3);
    /* d = 15 / 15 = 1, m = -1 (0xbc00). q: -1 -> 0, 14 -> 15 | 0.4 -> 1 (1.9), 0.5 -> 2 |
     * 6 -> 7 (7.5), 13.6 -> 15 (15.1) | 2 -> 3 (3.5), 3 -> 4 (4.5) */
    const uint8_t want[16] = {0xf0, 0x21, 0xf7, 0x43, 0x43, 0x43, 0x43, 0x43,
                              0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43};
    clf_block_q4_1 b;
    clf_quantize(CLF_Q4_1, x, &b, 32);
    assert_int_equal(b.d, 0x3c00);
    assert_int_equal(b.m, 0xbc00);
    assert_memory_equal(b.qs, want, 16);
    float y[32];
    clf_dequantize(CLF_Q4_1, &b, y, 32); /* w = d q + m */
    assert_true(y[0] == -1 && y[16] == 14 && y[1] == 0 && y[17] == 1 && y[2] == 6 && y[18] == 14);
}

static void test_zero_blocks(void **state) {
    (void)state;
    /* a zero block must not divide by zero: d = 0, and q the code of zero */
    float x[32] = {0}, y[32];
    clf_block_q8_0 b8;
    clf_block_q4_0 b40;
    clf_block_q4_1 b41;
    uint8_t q4_zero[16], zeros[32] = {0};
    memset(q4_zero, 0x88, sizeof q4_zero); /* q = 8 in both nibbles */
    clf_quantize(CLF_Q8_0, x, &b8, 32);
    assert_int_equal(b8.d, 0);
    assert_memory_equal(b8.qs, zeros, 32);
    clf_quantize(CLF_Q4_0, x, &b40, 32);
    assert_int_equal(b40.d, 0x8000); /* 0 / -8 = -0, as ggml writes it */
    assert_memory_equal(b40.qs, q4_zero, 16);
    clf_quantize(CLF_Q4_1, x, &b41, 32);
    assert_int_equal(b41.d, 0);
    assert_int_equal(b41.m, 0);
    assert_memory_equal(b41.qs, zeros, 16);
    clf_dequantize(CLF_Q4_1, &b41, y, 32);
    for (int j = 0; j < 32; j++) assert_true(y[j] == 0);
}

/* Random blocks: every element within half a step of the input (plus the
 * scale's own f16 rounding). */
static void test_round_trip_bounds(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static unsigned char buf[N * 2];
    const clf_type types[] = {CLF_Q8_0, CLF_Q4_0, CLF_Q4_1};
    for (int t = 0; t < 3; t++) {
        tu_fill_uniform(&s, x, N, -3, 5);
        clf_quantize(types[t], x, buf, N);
        clf_dequantize(types[t], buf, y, N);
        for (int b = 0; b < N / 32; b++) {
            float lo = x[32 * b], hi = x[32 * b];
            for (int j = 0; j < 32; j++) lo = fminf(lo, x[32 * b + j]), hi = fmaxf(hi, x[32 * b + j]);
            float amax = fmaxf(fabsf(lo), fabsf(hi));
            /* step: amax/127 (Q8_0), amax/8 (Q4_0, whose far end can also clamp by one step), range/15 (Q4_1) */
            float step = types[t] == CLF_Q8_0 ? amax / 127 : types[t] == CLF_Q4_0 ? amax / 8 : (hi - lo) / 15;
            float bound = (types[t] == CLF_Q4_0 ? 1.0f : 0.5f) * step + 2e-3f * amax;
            for (int j = 0; j < 32; j++)
                if (fabsf(y[32 * b + j] - x[32 * b + j]) > bound)
                    fail_msg("%s block %d elem %d: %g -> %g (bound %g)", clf_type_get(types[t])->name, b, j,
                             x[32 * b + j], y[32 * b + j], bound);
        }
    }
}

/* Relative RMS error of a round trip through each type, on Gaussian weights
 * and on heavy-tailed ones (a Student-t with 3 degrees of freedom, as in
 * trained matrices). The bounds are the largest errors measured over 30
 * seeds plus 8% (Gaussian) or 20% (t(3): its rare large weights vary the
 * error more). Q4_K's is below Q4_1's and below the 0.0785 of Q4_K
 * without its scale search; the ggml records in test_peer_records pin the
 * search itself bit for bit. */
static void test_round_trip_rms(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    enum { N = 256 * 64 };
    static float x[N], y[N];
    static unsigned char buf[N * 4];
    const struct { clf_type t; double gauss, heavy; } cases[] = {
        {CLF_BF16, 0.0019, 0.0022}, {CLF_Q8_0, 0.0059, 0.0130}, {CLF_Q6_K, 0.0197, 0.032}, {CLF_Q5_K, 0.0395, 0.058},
        {CLF_Q5_1, 0.0415, 0.061},  {CLF_Q5_0, 0.0467, 0.085},  {CLF_Q4_K, 0.0778, 0.115}, {CLF_IQ4_NL, 0.0835, 0.127},
        {CLF_Q4_1, 0.0851, 0.128},  {CLF_Q4_0, 0.0936, 0.158},  {CLF_Q3_K, 0.165, 0.24},   {CLF_Q2_K, 0.326, 0.44},
        {CLF_MXFP4, 0.125, 0.186}, /* E2M1 under a power-of-two scale, no search: 0.115 and 0.155 at most */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int heavy = 0; heavy < 2; heavy++) {
            for (int i = 0; i < N; i++) {
                float g = tu_normal(&s);
                if (heavy) { /* t(3) = normal / sqrt(chi2(3) / 3) */
                    float a = tu_normal(&s), b = tu_normal(&s), d = tu_normal(&s);
                    g /= sqrtf((a * a + b * b + d * d) / 3 + 1e-6f);
                }
                x[i] = 0.02f * g;
            }
            clf_quantize(cases[c].t, x, buf, N);
            clf_dequantize(cases[c].t, buf, y, N);
            double e2 = 0, x2 = 0;
            for (int i = 0; i < N; i++) e2 += (double)(y[i] - x[i]) * (y[i] - x[i]), x2 += (double)x[i] * x[i];
            double rel = sqrt(e2 / x2), bound = heavy ? cases[c].heavy : cases[c].gauss;
            printf("  %-6s %s relative RMS error %.4f (bound %.4f)\n", clf_type_get(cases[c].t)->name,
                   heavy ? "t(3)    " : "Gaussian", rel, bound);
            if (!(rel <= bound)) fail_msg("%s: relative RMS error %.4f above %.4f", clf_type_get(cases[c].t)->name, rel, bound);
        }
}

/* ---- F16 ------------------------------------------------------------------ */

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_f32_to_f16_edges(void **state) {
    (void)state;
    const struct { float f; uint16_t h; } cases[] = {
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {-0.0f, 0x8000},
        {65504.0f, 0x7bff},                /* largest half */
        {65519.99f, 0x7bff},               /* just below the midpoint to 65536 */
        {65520.0f, 0x7c00},                /* the midpoint: ties to even, which is infinity */
        {1e9f, 0x7c00},
        {-1e9f, 0xfc00},
        {0x1p-24f, 0x0001},                /* smallest subnormal */
        {0x1p-25f, 0x0000},                /* half of it: tie to even (zero) */
        {0x1.8p-24f, 0x0002},              /* 1.5 ulp: tie to even (2) */
        {0x1.000002p-25f, 0x0001},         /* just above the tie */
        {0x3ffp-24f, 0x03ff},              /* largest subnormal */
        {0x7ffp-25f, 0x0400},              /* 1023.5 ulp: tie to even lands on the smallest normal */
        {0x1p-14f, 0x0400},                /* smallest normal */
        {0x1.002p0f, 0x3c00},              /* 1 + 2^-11: tie, to even (down) */
        {0x1.006p0f, 0x3c02},              /* 1 + 3 * 2^-11: tie, to even (up) */
        {0x1.00201p0f, 0x3c01},            /* just above the tie */
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (clf_f32_to_f16(cases[i].f) != cases[i].h)
            fail_msg("f32_to_f16(%a) = 0x%04x, want 0x%04x", cases[i].f, clf_f32_to_f16(cases[i].f), cases[i].h);
    uint16_t nan = clf_f32_to_f16(NAN);
    assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0);
}

static void test_f16_to_f32_edges(void **state) {
    (void)state;
    assert_true(clf_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(clf_f16_to_f32(0x03ff) == 0x3ffp-24f);
    assert_true(clf_f16_to_f32(0x0400) == 0x1p-14f);
    assert_true(clf_f16_to_f32(0x3c01) == 1.0f + 0x1p-10f);
    assert_true(clf_f16_to_f32(0xfbff) == -65504.0f);
    assert_true(bits(clf_f16_to_f32(0x8000)) == 0x80000000u); /* -0 keeps its sign */
    assert_true(bits(clf_f16_to_f32(0x8001)) == bits(-0x1p-24f));
    assert_true(isinf(clf_f16_to_f32(0x7c00)) && clf_f16_to_f32(0x7c00) > 0);
    assert_true(isinf(clf_f16_to_f32(0xfc00)) && clf_f16_to_f32(0xfc00) < 0);
    assert_true(isnan(clf_f16_to_f32(0x7e00)) && isnan(clf_f16_to_f32(0x7c01)));
}

static void test_f16_round_trip_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = clf_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (clf_f32_to_f16(f) != h) fail_msg("0x%04x -> %a -> 0x%04x", h, f, clf_f32_to_f16(f));
    }
}

/* Independent reference: the nearest half by search over the ordered
 * positive halves (0x7c00 standing for 2^16, so the overflow midpoint goes
 * to infinity), ties to the even bit pattern. */
static uint16_t nearest_half(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    uint32_t lo = 0, hi = 0x7c00; /* invariant: value(lo) <= a < value(hi) */
    if (a >= 65536.0) return sign | 0x7c00;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if ((double)clf_f16_to_f32((uint16_t)mid) <= a) lo = mid;
        else hi = mid;
    }
    double vlo = clf_f16_to_f32((uint16_t)lo), vhi = hi == 0x7c00 ? 65536.0 : clf_f16_to_f32((uint16_t)hi);
    double dlo = a - vlo, dhi = vhi - a;
    uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint16_t)(sign | pick);
}

static void test_f32_to_f16_random(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    for (int i = 0; i < 200000; i++) {
        /* random sign and mantissa, exponents from below the subnormals to past the top */
        uint32_t u = (uint32_t)(tu_next(&s) & 0x807fffffu) | (uint32_t)(127 - 27 + tu_next(&s) % 45) << 23;
        float f;
        memcpy(&f, &u, sizeof f);
        uint16_t got = clf_f32_to_f16(f), want = nearest_half(f);
        if (got != want) fail_msg("f32_to_f16(%a) = 0x%04x, nearest half 0x%04x", f, got, want);
    }
}

/* ---- the peers' records (tests/data/quants.bin) ------------------------------- */

typedef struct { unsigned char *p; size_t n, off; } reader;

static const void *take(reader *r, size_t n) {
    if (n > r->n - r->off) fail_msg("tests/data/quants.bin: truncated at byte %zu", r->off);
    const void *p = r->p + r->off;
    r->off += n;
    return p;
}

static uint32_t take_u32(reader *r) {
    const unsigned char *b = take(r, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static reader load_records(void) {
    FILE *f = fopen("tests/data/quants.bin", "rb");
    if (!f) fail_msg("tests/data/quants.bin: cannot open (run from the source directory)");
    reader r = {malloc(1 << 20), 0, 0};
    assert_non_null(r.p);
    r.n = fread(r.p, 1, 1 << 20, f);
    fclose(f);
    return r;
}

/* Every record bit for bit: dequantized floats (compared as bits, so NaN
 * payloads and signed zeros count) and quantized bytes. */
static void test_peer_records(void **state) {
    (void)state;
    reader r = load_records();
    int seen_deq[CLF_TYPE_COUNT] = {0}, seen_qnt[CLF_TYPE_COUNT] = {0};
    while (r.off < r.n) {
        const char *kind = take(&r, 4);
        uint32_t type = take_u32(&r), n = take_u32(&r);
        const clf_type_info *ti = clf_type_get(type);
        if (!ti) fail_msg("record of unknown type %u", type);
        size_t bytes = clf_row_bytes((clf_type)type, n);
        assert_true(bytes > 0);
        float *f = malloc((size_t)n * sizeof *f);
        unsigned char *q = malloc(bytes);
        assert_true(f && q);
        if (!memcmp(kind, "DEQ", 4)) {
            const unsigned char *src = take(&r, bytes);
            const unsigned char *want = take(&r, (size_t)n * 4);
            clf_dequantize((clf_type)type, src, f, n);
            for (uint32_t i = 0; i < n; i++)
                if (memcmp(f + i, want + 4 * i, 4)) {
                    float w;
                    memcpy(&w, want + 4 * i, 4);
                    fail_msg("dequantize %s: element %u (block %u) = %a, the peer's %a", ti->name, i, i / ti->block,
                             f[i], w);
                }
            seen_deq[type]++;
        } else if (!memcmp(kind, "QNT", 4)) {
            memcpy(f, take(&r, (size_t)n * 4), (size_t)n * 4);
            const unsigned char *want = take(&r, bytes);
            clf_quantize((clf_type)type, f, q, n);
            for (size_t i = 0; i < bytes; i++)
                if (q[i] != want[i])
                    fail_msg("quantize %s: byte %zu of block %zu = 0x%02x, the peer's 0x%02x", ti->name,
                             i % (size_t)ti->block_bytes, i / (size_t)ti->block_bytes, q[i], want[i]);
            seen_qnt[type]++;
        } else {
            fail_msg("tests/data/quants.bin: bad record kind at byte %zu", r.off - 12);
        }
        free(f);
        free(q);
    }
    free(r.p);
    /* every type but F32/F16 (covered above) has its dequantization recorded */
    for (int t = 0; t < CLF_TYPE_COUNT; t++)
        if (clf_type_get((uint32_t)t) && t != CLF_F32 && t != CLF_F16 && !seen_deq[t])
            fail_msg("no dequantization record for %s", clf_type_get((uint32_t)t)->name);
    /* gguf.quants' quantizers, then llama.cpp's ggml for the rest */
    for (int i = 0; i < CLF_NTYPES; i++) /* every type of the table but F32/F16 (exact conversions) */
        if (clf_type_list[i] != CLF_F32 && clf_type_list[i] != CLF_F16 && !seen_qnt[clf_type_list[i]])
            fail_msg("no quantization record for %s", clf_type_get(clf_type_list[i])->name);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_exact_scale),  cmocka_unit_test(test_q8_0_rounded_scale),
        cmocka_unit_test(test_q4_0_negative_max), cmocka_unit_test(test_q4_0_positive_max),
        cmocka_unit_test(test_q4_1),              cmocka_unit_test(test_zero_blocks),
        cmocka_unit_test(test_round_trip_bounds), cmocka_unit_test(test_round_trip_rms),
        cmocka_unit_test(test_f32_to_f16_edges),
        cmocka_unit_test(test_f16_to_f32_edges),  cmocka_unit_test(test_f16_round_trip_all),
        cmocka_unit_test(test_f32_to_f16_random), cmocka_unit_test(test_peer_records),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

/* K-quants (256-weight super-blocks of 16- or 32-weight sub-blocks with
 * quantized scales) and IQ4_NL. The quantizers are ggml's reference ones
 * without an importance matrix (ggml-quants.c: quantize_row_q{2..6}_K_ref,
 * and quantize_iq4_nl as llama.cpp calls it), rewritten step for step in
 * the same float operations and order so the bytes come out the same: each
 * sub-block's scale (and min) is fitted by a search over candidate scales,
 * the scales are quantized against the super-block's f16 scale, and every
 * weight is then re-rounded against its sub-block's final scale. */
#include "quant_k.h"

#include <math.h>
#include <string.h>

#include "quant.h"

/* ---- dequantization ---------------------------------------------------------- */

void clf_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | (q[j - 4] >> 6) << 4);
        *m = (uint8_t)((q[j + 4] >> 4) | (q[j] >> 6) << 4);
    }
}

/* 2-bit code of weight j (0..255) in Q2_K/Q3_K's qs. */
static int q2_code(const uint8_t *qs, int j) { return qs[j / 128 * 32 + j % 32] >> (2 * (j % 128 / 32)) & 3; }

/* Q3_K's 6-bit scale of sub-block i (0..15), unsigned (s - 32 is signed). */
static int q3_scale(const uint8_t *scales, int i) {
    return (scales[i % 8] >> (4 * (i / 8)) & 0xf) | (scales[8 + i % 4] >> (2 * (i / 4)) & 3) << 4;
}

void clf_q2_k_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q2_K *x = src; nb--; x++, y += CLF_QK_K) {
        float d = clf_f16_to_f32(x->d), dmin = clf_f16_to_f32(x->dmin);
        for (int s = 0; s < 16; s++) {
            float dl = d * (x->scales[s] & 0xf), ml = dmin * (x->scales[s] >> 4);
            for (int j = 16 * s; j < 16 * s + 16; j++) y[j] = dl * q2_code(x->qs, j) - ml;
        }
    }
}

void clf_q3_k_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q3_K *x = src; nb--; x++, y += CLF_QK_K) {
        float d = clf_f16_to_f32(x->d);
        for (int s = 0; s < 16; s++) {
            float dl = d * (q3_scale(x->scales, s) - 32);
            for (int j = 16 * s; j < 16 * s + 16; j++)
                y[j] = dl * (q2_code(x->qs, j) - (x->hmask[j % 32] >> (j / 32) & 1 ? 0 : 4));
        }
    }
}

/* Q4_K/Q5_K: the low 4 bits of weight j (0..255). */
static int q4_code(const uint8_t *qs, int j) { return qs[j / 64 * 32 + j % 32] >> (4 * (j % 64 / 32)) & 0xf; }
static int q5_high(const uint8_t *qh, int j) { return qh[j % 32] >> (2 * (j / 64) + j % 64 / 32) & 1; }

void clf_q4_k_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q4_K *x = src; nb--; x++, y += CLF_QK_K) {
        float d = clf_f16_to_f32(x->d), dmin = clf_f16_to_f32(x->dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            clf_k4_scale_min(s, x->scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            for (int j = 32 * s; j < 32 * s + 32; j++) y[j] = d1 * q4_code(x->qs, j) - m1;
        }
    }
}

void clf_q5_k_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q5_K *x = src; nb--; x++, y += CLF_QK_K) {
        float d = clf_f16_to_f32(x->d), dmin = clf_f16_to_f32(x->dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            clf_k4_scale_min(s, x->scales, &sc, &m);
            float d1 = d * sc, m1 = dmin * m;
            for (int j = 32 * s; j < 32 * s + 32; j++) y[j] = d1 * (q4_code(x->qs, j) | q5_high(x->qh, j) << 4) - m1;
        }
    }
}

/* Q6_K's 6-bit code of weight j, unsigned (q - 32 is signed). */
static int q6_code(const clf_block_q6_K *x, int j) {
    int c = j / 128, k = j % 128 / 32, l = j % 32;
    int lo = x->ql[64 * c + l + 32 * (k % 2)] >> (4 * (k / 2)) & 0xf;
    return lo | (x->qh[32 * c + l] >> (2 * k) & 3) << 4;
}

void clf_q6_k_to_float(const void *src, float *y, int64_t nb) {
    for (const clf_block_q6_K *x = src; nb--; x++, y += CLF_QK_K) {
        float d = clf_f16_to_f32(x->d);
        for (int j = 0; j < CLF_QK_K; j++) y[j] = d * x->scales[j / 16] * (q6_code(x, j) - 32);
    }
}

/* ---- codes (the CPU panels' integer codes; clf_type_info.codes) ------------ */

void clf_q2_k_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q2_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++) c[k] = (uint8_t)q2_code(x->qs, k);
}

void clf_q3_k_codes(const unsigned char *blk, uint8_t *c) { /* the low bits, plus 4 where hmask's bit is set */
    const clf_block_q3_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++) c[k] = (uint8_t)(q2_code(x->qs, k) | (x->hmask[k % 32] >> (k / 32) & 1) << 2);
}

/* The loops below are q4_code / q5_high / q6_code unrolled by 32-weight
 * group (the panels' load re-lays every weight through them: written so,
 * they vectorize). */
void clf_q4_k_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q4_K *x = (const void *)blk;
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            c[64 * g + l] = x->qs[32 * g + l] & 0xf;
            c[64 * g + 32 + l] = x->qs[32 * g + l] >> 4;
        }
}

void clf_q5_k_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q5_K *x = (const void *)blk;
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            c[64 * g + l] = (uint8_t)((x->qs[32 * g + l] & 0xf) | (x->qh[l] >> (2 * g) & 1) << 4);
            c[64 * g + 32 + l] = (uint8_t)((x->qs[32 * g + l] >> 4) | (x->qh[l] >> (2 * g + 1) & 1) << 4);
        }
}

void clf_q6_k_codes(const unsigned char *blk, uint8_t *c) {
    const clf_block_q6_K *x = (const void *)blk;
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                c[128 * h + 32 * k + l] = (uint8_t)((x->ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2)) & 0xf) |
                                                    (x->qh[32 * h + l] >> (2 * k) & 3) << 4);
}

/* ---- shared pieces of the quantizers ------------------------------------------ */

#define GROUP_MAX_EPS 1e-15f /* ggml's threshold for an all-zero group */

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int clampi(int v, int lo, int hi) { return imax(lo, imin(hi, v)); }

/* Round to nearest, ties to even, for |f| < 2^22: adding 1.5 * 2^23 leaves
 * the rounded integer in the low mantissa bits (ggml's nearest_int). */
static int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Packs 2-bit codes as Q2_K/Q3_K store them. */
static void pack_q2(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < CLF_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Asymmetric fit of n weights to codes 0..nmax: w ~ scale * L - min_out,
 * minimizing the weighted error (absolute with use_mad, else squared).
 * Starts from the range (the min clamped to <= 0), then tries nstep + 1
 * code spacings (nmax + rmin + rdelta * is over the range), each solved by
 * weighted least squares for scale and min (ggml's make_qkx2_quants). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out, float rmin,
                           float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    uint8_t Laux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D <= 0) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            cur_error += w[i] * diff;
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *min_out = -min;
    return scale;
}

/* The signed value of largest magnitude (the first of equals) and its magnitude. */
static float signed_amax(const float *x, int n, float *amax_out) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    *amax_out = amax;
    return max;
}

/* Codes clamp(round(iscale x), -nmax, nmax-1) and their x^2-weighted
 * least-squares sums; L (when not NULL) gets each code plus `off`. */
static void sym_codes(int n, int nmax, float iscale, const float *x, int8_t *L, int off, float *sumlx_out,
                      float *suml2_out) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)(l + off);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

/* Symmetric fit to codes -nmax..nmax-1 weighted by x^2: the scale that puts
 * the largest weight on -nmax, then 18 nearby spacings, keeping the best by
 * the least-squares score sumlx^2 / suml2 (make_qx_quants, rmse_type 1).
 * L gets the codes plus nmax. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = signed_amax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx, suml2;
    sym_codes(n, nmax, iscale, x, L, nmax, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sym_codes(n, nmax, iscale, x, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric fit for Q3_K (make_q3_quants with do_rmse): codes from the
 * largest weight, then up to 5 passes moving single codes while the x^2
 * weighted least-squares score improves. L gets the codes plus nmax. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax, max = signed_amax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max, sumlx, suml2;
    sym_codes(n, nmax, iscale, x, L, 0, &sumlx, &suml2);
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i], slx = sumlx - w * x[i] * L[i];
            if (slx <= 0) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int new_l = clampi(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i]) continue;
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- Q2_K ---------------------------------------------------------------------- */

void clf_q2_k_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q2_K *y = dst; nb--; y++, x += CLF_QK_K) {
        uint8_t L[CLF_QK_K];
        float weights[16], mins[16], scales[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* the sub-block scales and mins as 4-bit multiples of d and dmin */
        memset(y->scales, 0, sizeof y->scales);
        y->d = clf_f32_to_f16(max_scale > 0 ? max_scale / 15.f : 0.f);
        y->dmin = clf_f32_to_f16(max_min > 0 ? max_min / 15.f : 0.f);
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y->scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
        }
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++) y->scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
        }
        for (int j = 0; j < 16; j++) {
            const float d = clf_f16_to_f32(y->d) * (y->scales[j] & 0xf);
            if (!d) continue;
            const float dm = clf_f16_to_f32(y->dmin) * (y->scales[j] >> 4);
            for (int i = 0; i < 16; i++) L[16 * j + i] = (uint8_t)clampi(nearest_int((x[16 * j + i] + dm) / d), 0, 3);
        }
        pack_q2(L, y->qs);
    }
}

/* ---- Q3_K ---------------------------------------------------------------------- */

void clf_q3_k_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q3_K *y = dst; nb--; y++, x += CLF_QK_K) {
        int8_t L[CLF_QK_K];
        float scales[16], max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) amax = fabsf(scales[j]), max_scale = scales[j];
        }
        memset(y->scales, 0, sizeof y->scales);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clampi((int8_t)nearest_int(iscale * scales[j]), -32, 31) + 32;
                y->scales[j % 8] |= (uint8_t)((l & 0xf) << (4 * (j / 8)));
                y->scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y->d = clf_f32_to_f16(1 / iscale);
        } else {
            y->d = clf_f32_to_f16(0.f);
        }
        for (int j = 0; j < 16; j++) {
            float d = clf_f16_to_f32(y->d) * (q3_scale(y->scales, j) - 32);
            if (!d) continue;
            for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
        }
        /* codes 4..7 set the high bit and store code - 4 */
        uint8_t low[CLF_QK_K];
        memset(y->hmask, 0, sizeof y->hmask);
        for (int j = 0; j < CLF_QK_K; j++) {
            int hi = L[j] > 3;
            if (hi) y->hmask[j % 32] |= (uint8_t)(1 << (j / 32));
            low[j] = (uint8_t)(L[j] - 4 * hi);
        }
        pack_q2(low, y->qs);
    }
}

/* ---- Q4_K and Q5_K ---------------------------------------------------------------- */

/* The fit of the 8 sub-blocks of 32 for Q4_K (nmax 15) and Q5_K (nmax 31):
 * weights |x| + rms(sub-block), 6-bit scales and mins against d and dmin,
 * then every weight re-rounded to 0..nmax. */
static void k4_fit(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out, uint16_t *dmin_out,
                   uint8_t scales_out[CLF_K_SCALE_SIZE], uint8_t L[CLF_QK_K]) {
    float weights[32], mins[8], scales[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *q = scales_out;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            q[j] = ls;
            q[j + 4] = lm;
        } else { /* low 4 bits in bytes 8..11, high 2 bits on top of bytes 0..7 */
            q[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            q[j - 4] |= (uint8_t)((ls >> 4) << 6);
            q[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = clf_f32_to_f16(max_scale / 63.f);
    *dmin_out = clf_f32_to_f16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        clf_k4_scale_min(j, q, &sc, &m);
        const float d = clf_f16_to_f32(*d_out) * sc;
        if (!d) continue;
        const float dm = clf_f16_to_f32(*dmin_out) * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clampi(nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

void clf_q4_k_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q4_K *y = dst; nb--; y++, x += CLF_QK_K) {
        uint8_t L[CLF_QK_K];
        memset(y->scales, 0, sizeof y->scales);
        k4_fit(x, 15, -1.f, 20, &y->d, &y->dmin, y->scales, L);
        for (int j = 0; j < CLF_QK_K; j += 64)
            for (int l = 0; l < 32; l++) y->qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void clf_q5_k_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q5_K *y = dst; nb--; y++, x += CLF_QK_K) {
        uint8_t L[CLF_QK_K];
        memset(y->scales, 0, sizeof y->scales);
        k4_fit(x, 31, -0.5f, 15, &y->d, &y->dmin, y->scales, L);
        memset(y->qh, 0, sizeof y->qh);
        for (int j = 0; j < CLF_QK_K; j++) {
            y->qh[j % 32] |= (uint8_t)((L[j] >> 4) << (2 * (j / 64) + j % 64 / 32));
            if (j % 64 < 32) y->qs[j / 64 * 32 + j % 32] = (uint8_t)((L[j] & 0xf) | (L[j + 32] & 0xf) << 4);
        }
    }
}

/* ---- Q6_K ---------------------------------------------------------------------- */

void clf_q6_k_from_float(const float *x, void *dst, int64_t nb) {
    for (clf_block_q6_K *y = dst; nb--; y++, x += CLF_QK_K) {
        int8_t L[CLF_QK_K];
        float scales[16], max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ib++) {
            scales[ib] = fit_scale_sym(16, 32, x + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) max_abs_scale = fabsf(scales[ib]), max_scale = scales[ib];
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, sizeof *y);
            continue;
        }
        float iscale = -128.f / max_scale;
        y->d = clf_f32_to_f16(1 / iscale);
        for (int ib = 0; ib < 16; ib++) y->scales[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < 16; j++) {
            float d = clf_f16_to_f32(y->d) * y->scales[j];
            if (!d) continue;
            for (int i = 0; i < 16; i++) L[16 * j + i] = (int8_t)(clampi(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
        }
        memset(y->qh, 0, sizeof y->qh);
        for (int j = 0; j < CLF_QK_K; j++) {
            int c = j / 128, k = j % 128 / 32, l = j % 32;
            uint8_t *lo = &y->ql[64 * c + l + 32 * (k % 2)];
            if (k < 2) *lo = (uint8_t)(L[j] & 0xf);
            else *lo |= (uint8_t)((L[j] & 0xf) << 4);
            y->qh[32 * c + l] |= (uint8_t)((L[j] >> 4) << (2 * k));
        }
    }
}

/* ---- IQ4_NL ---------------------------------------------------------------------- */

/* The codebook entry nearest to x, ties to the larger (as ggml's
 * best_index_int8: bisection, then the nearer of the two neighbours by
 * float distances). */
static int nearest_value(float x) {
    const int8_t *v = clf_iq4nl_values;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15; /* v[lo] <= x < v[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < v[mid]) hi = mid;
        else lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* llama.cpp's quantize_iq4_nl without an importance matrix: weights x^2, the
 * scale that maps the largest weight to -127 and 15 spacings around it, each
 * scored by weighted least squares; codes from the best scale. */
void clf_iq4_nl_from_float(const float *x, void *dst, int64_t nb) {
    const int ntry = 7;
    for (clf_block_iq4_nl *y = dst; nb--; y++, x += CLF_QK) {
        float amax, max = signed_amax(x, CLF_QK, &amax), d = 0;
        if (amax >= GROUP_MAX_EPS) {
            float id = 1 / (-max / clf_iq4nl_values[0]), sumqx = 0, sumq2 = 0;
            for (int j = 0; j < CLF_QK; j++) {
                float q = clf_iq4nl_values[nearest_value(id * x[j])], w = x[j] * x[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
            float best = d * sumqx;
            for (int itry = -ntry; itry <= ntry; itry++) {
                id = (itry + clf_iq4nl_values[0]) / max;
                sumqx = sumq2 = 0;
                for (int j = 0; j < CLF_QK; j++) {
                    float q = clf_iq4nl_values[nearest_value(id * x[j])], w = x[j] * x[j];
                    sumqx += w * q * x[j];
                    sumq2 += w * q * q;
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    d = sumqx / sumq2;
                    best = d * sumqx;
                }
            }
        }
        y->d = clf_f32_to_f16(d);
        float id = d ? 1 / d : 0;
        for (int j = 0; j < CLF_QK / 2; j++)
            y->qs[j] = (uint8_t)(nearest_value(id * x[j]) | nearest_value(id * x[j + 16]) << 4);
    }
}

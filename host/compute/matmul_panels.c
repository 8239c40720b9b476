/* Panel re-layout for the CPU kernel variants: every quantized type becomes
 * integer codes in bit planes plus per-row scale records (cl/matmul.cl has
 * the byte map), in the same bytes as the file's blocks (IQ4_NL's codes are
 * its grid indices, looked up in the kernels). */
#include "matmul_panels.h"

#include <stdlib.h>
#include <string.h>

static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* n little-endian dwords of `bytes` into dword planes of the record from
 * half `off` on (a dword plane is 64 halves: row j's low half at 2j). */
static void put_words(uint16_t *rec, int off, int j, const unsigned char *bytes, int n) {
    for (int w = 0; w < n; w++) {
        rec[off + 64 * w + 2 * j] = u16(bytes + 4 * w);
        rec[off + 64 * w + 2 * j + 1] = u16(bytes + 4 * w + 2);
    }
}

/* ---- codes ---- */

static void codes_q8_0(const unsigned char *blk, uint8_t *c) { memcpy(c, blk + 2, CLF_QK); }

static void nibbles(const unsigned char *qs, uint8_t *c) {
    for (int j = 0; j < CLF_QK / 2; j++) {
        c[j] = qs[j] & 15;
        c[j + 16] = qs[j] >> 4;
    }
}

static void codes_q4_0(const unsigned char *blk, uint8_t *c) { nibbles(blk + 2, c); }
static void codes_q4_1(const unsigned char *blk, uint8_t *c) { nibbles(blk + 4, c); }

static void fifth_bits(const unsigned char *qh, uint8_t *c) {
    for (int j = 0; j < CLF_QK; j++) c[j] |= (uint8_t)((qh[j / 8] >> (j % 8) & 1) << 4);
}

static void codes_q5_0(const unsigned char *blk, uint8_t *c) {
    nibbles(blk + 6, c);
    fifth_bits(blk + 2, c);
}

static void codes_q5_1(const unsigned char *blk, uint8_t *c) {
    nibbles(blk + 8, c);
    fifth_bits(blk + 4, c);
}

static void codes_q4_k(const unsigned char *blk, uint8_t *c) {
    const clf_block_q4_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++) c[k] = x->qs[32 * (k / 64) + k % 32] >> (4 * (k / 32 % 2)) & 15;
}

static void codes_q5_k(const unsigned char *blk, uint8_t *c) {
    const clf_block_q5_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++)
        c[k] = (uint8_t)((x->qs[32 * (k / 64) + k % 32] >> (4 * (k / 32 % 2)) & 15) | (x->qh[k % 32] >> (k / 32) & 1) << 4);
}

static void codes_q6_k(const unsigned char *blk, uint8_t *c) {
    const clf_block_q6_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++) {
        const int n = k / 128, q4 = k % 128 / 32, l = k % 32;
        c[k] = (uint8_t)((x->ql[64 * n + 32 * (q4 % 2) + l] >> (4 * (q4 / 2)) & 15) |
                         (x->qh[32 * n + l] >> (2 * q4) & 3) << 4);
    }
}

static void codes_q2_k(const unsigned char *blk, uint8_t *c) {
    const clf_block_q2_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++) c[k] = x->qs[32 * (k / 128) + k % 32] >> (2 * (k % 128 / 32)) & 3;
}

static void codes_q3_k(const unsigned char *blk, uint8_t *c) {
    const clf_block_q3_K *x = (const void *)blk;
    for (int k = 0; k < CLF_QK_K; k++)
        c[k] = (uint8_t)((x->qs[32 * (k / 128) + k % 32] >> (2 * (k % 128 / 32)) & 3) |
                         (x->hmask[k % 32] >> (k / 32) & 1) << 2);
}

/* ---- scale records ---- */

static void scales_d(const unsigned char *blk, uint16_t *rec, int j) { rec[j] = u16(blk); }

static void scales_dm(const unsigned char *blk, uint16_t *rec, int j) {
    rec[j] = u16(blk);
    rec[32 + j] = u16(blk + 2);
}

static void scales_k4(const unsigned char *blk, uint16_t *rec, int j) { /* Q4_K and Q5_K */
    const clf_block_q4_K *x = (const void *)blk;
    rec[j] = x->d;
    rec[32 + j] = x->dmin;
    put_words(rec, 64, j, x->scales, 3);
}

static void scales_q6_k(const unsigned char *blk, uint16_t *rec, int j) {
    const clf_block_q6_K *x = (const void *)blk;
    rec[j] = x->d;
    put_words(rec, 32, j, (const unsigned char *)x->scales, 4);
}

static void scales_q2_k(const unsigned char *blk, uint16_t *rec, int j) {
    const clf_block_q2_K *x = (const void *)blk;
    rec[j] = x->d;
    rec[32 + j] = x->dmin;
    put_words(rec, 64, j, x->scales, 4);
}

static void scales_q3_k(const unsigned char *blk, uint16_t *rec, int j) {
    const clf_block_q3_K *x = (const void *)blk;
    rec[j] = x->d;
    put_words(rec, 32, j, x->scales, 3);
}

/* The int8 column: where the x86 int8 GEMV measured faster than the float
 * one (bench/RESULTS.md). */
static const clf_panel_fmt fmts[] = {
    {CLF_F32, 0, 0, 1, 0, 0, NULL, NULL},
    {CLF_F16, 0, 0, 1, 0, 0, NULL, NULL},
    {CLF_BF16, 0, 0, 1, 0, 0, NULL, NULL},
    {CLF_Q8_0, 8, 0, 32, 32, 1, codes_q8_0, scales_d},
    {CLF_IQ4_NL, 4, 0, 32, 32, 1, codes_q4_0, scales_d},
    {CLF_Q4_0, 4, 0, 32, 32, 1, codes_q4_0, scales_d},
    {CLF_Q4_1, 4, 0, 32, 64, 1, codes_q4_1, scales_dm},
    {CLF_Q5_0, 4, 1, 32, 32, 1, codes_q5_0, scales_d},
    {CLF_Q5_1, 4, 1, 32, 64, 1, codes_q5_1, scales_dm},
    {CLF_Q4_K, 4, 0, 256, 256, 1, codes_q4_k, scales_k4},
    {CLF_Q5_K, 4, 1, 256, 256, 1, codes_q5_k, scales_k4},
    {CLF_Q6_K, 4, 2, 256, 288, 1, codes_q6_k, scales_q6_k},
    {CLF_Q2_K, 2, 0, 256, 320, 1, codes_q2_k, scales_q2_k},
    {CLF_Q3_K, 2, 1, 256, 224, 1, codes_q3_k, scales_q3_k},
};

const clf_panel_fmt *clf_panel_fmt_get(clf_type t) {
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
        if (fmts[i].type == t) return &fmts[i];
    return NULL;
}

/* The codes of one GGUF row into its panel slot j: code c of column k in
 * block b = k / 32 sets bits 8 (k % 4) + (k % 32 / 4 · B) % 8 of dword
 * (k % 32 / 4 · B) / 8 of its B-bit plane, the base plane's QB low bits at
 * dword 0 of the block, the QH high bits at dword QB. */
static void pack_row(const clf_panel_fmt *f, const unsigned char *src, int64_t cols, int j, uint32_t *q, uint16_t *s) {
    const int qw = f->qb + f->qh, bb = clf_type_get(f->type)->block_bytes;
    uint8_t c[CLF_QK_K];
    for (int64_t sb = 0; sb < cols / f->sbk; sb++) {
        const unsigned char *blk = src + sb * bb;
        f->codes(blk, c);
        f->scales(blk, s + sb * f->rec, j);
        for (int kk = 0; kk < f->sbk; kk++) {
            const int64_t b = (sb * f->sbk + kk) / 32;
            const int k = kk % 32, c4 = k / 4, bit = 8 * (k % 4);
            uint32_t *blkq = q + b * qw * 32;
            blkq[(c4 * f->qb / 8) * 32 + j] |= (uint32_t)(c[kk] & ((1u << f->qb) - 1)) << (bit + c4 * f->qb % 8);
            if (f->qh) blkq[(f->qb + c4 * f->qh / 8) * 32 + j] |= (uint32_t)(c[kk] >> f->qb) << (bit + c4 * f->qh % 8);
        }
    }
}

clf_status clf_panels_pack(const clf_panel_fmt *f, int64_t rows, int64_t cols, const void *data,
                           unsigned char **main_out, size_t *main_bytes, uint16_t **aux_out, size_t *aux_bytes) {
    const int64_t np = clf_panels_of(rows);
    const int quant = f->qb > 0;
    const size_t es = f->type == CLF_F32 ? 4 : 2, rb = clf_row_bytes(f->type, cols);
    const size_t pb = quant ? (size_t)cols * (size_t)(f->qb + f->qh) * 4 : (size_t)cols * 32 * es;
    const size_t rec_halves = quant ? (size_t)(cols / f->sbk) * (size_t)f->rec : 0;
    *main_bytes = pb * (size_t)np;
    *aux_bytes = rec_halves * (size_t)np * 2;
    unsigned char *q = calloc(1, *main_bytes);
    uint16_t *s = quant ? calloc(1, *aux_bytes) : NULL;
    if (!q || (quant && !s)) {
        free(q);
        free(s);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory re-laying a %lld x %lld weight", (long long)rows,
                        (long long)cols);
    }
    const unsigned char *src = data;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t p = r / 32;
        const int j = (int)(r % 32);
        if (quant) {
            pack_row(f, src + (size_t)r * rb, cols, j, (uint32_t *)(q + (size_t)p * pb), s + (size_t)p * rec_halves);
        } else {
            for (int64_t k = 0; k < cols; k++)
                memcpy(q + (size_t)p * pb + ((size_t)k * 32 + (size_t)j) * es, src + (size_t)r * rb + (size_t)k * es, es);
        }
    }
    *main_out = q;
    *aux_out = s;
    return CLF_OK;
}

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

/* Row j's scale record of one block: d, the min if any, the packed
 * sub-block scales (as the file has them), at the table's offsets. */
static void put_scales(const clf_panel_fmt *f, const unsigned char *blk, uint16_t *rec, int j) {
    rec[j] = u16(blk + f->d_at);
    if (f->m_at >= 0) rec[32 + j] = u16(blk + f->m_at);
    put_words(rec, f->m_at >= 0 ? 64 : 32, j, blk + f->s_at, f->sw);
}

#define FAMILY_FLT CLF_CPU_FLT
#define FAMILY_Q8 CLF_CPU_Q8
#define FAMILY_Q4 CLF_CPU_Q4
#define FAMILY_KQI CLF_CPU_KQI
#define FAMILY_KQF CLF_CPU_KQF
#define PANEL_FMT(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ)            \
    [ID] = {CLF_##NAME, QB, QH, QK, (QB) ? CLF_PANEL_REC(M_AT, SW) : 0, (QB) > 0, FAMILY_##CPU, GPU_XQ, D_AT, M_AT, \
            S_AT, SW},
static const clf_panel_fmt fmts[CLF_TYPE_COUNT] = {CLF_TYPES(PANEL_FMT, ~)};

const clf_panel_fmt *clf_panel_fmt_get(clf_type t) {
    return clf_type_get(t) ? &fmts[t] : NULL;
}

/* The codes of one GGUF row into its panel slot j: code c of column k in
 * block b = k / 32 sets bits 8 (k % 4) + (k % 32 / 4 · B) % 8 of dword
 * (k % 32 / 4 · B) / 8 of its B-bit plane, the base plane's QB low bits at
 * dword 0 of the block, the QH high bits at dword QB. */
static void pack_row(const clf_panel_fmt *f, const unsigned char *src, int64_t cols, int j, uint32_t *q, uint16_t *s) {
    const clf_type_info *ti = clf_type_get(f->type);
    const int qw = f->qb + f->qh, bb = ti->block_bytes;
    uint8_t c[CLF_QK_K];
    for (int64_t sb = 0; sb < cols / f->sbk; sb++) {
        const unsigned char *blk = src + sb * bb;
        ti->codes(blk, c);
        put_scales(f, blk, s + sb * f->rec, j);
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
    /* a float type's element bytes: its block of one (cl/types.cl's BYTES) */
    const size_t es = (size_t)clf_type_get(f->type)->block_bytes, rb = clf_row_bytes(f->type, cols);
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

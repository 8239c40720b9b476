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

/* Where a weight's rows are: the row-concatenation of up to three GGUF
 * tensors (Q|K|V, gate|up fused as they load), each rows[i] rows of the
 * same type and columns. */
const unsigned char *clf_rows_src_row(const clf_rows_src *src, int64_t r, size_t row_bytes) {
    for (int i = 0; i < src->n; i++) {
        if (r < src->rows[i]) return src->data[i] + (size_t)r * row_bytes;
        r -= src->rows[i];
    }
    return NULL;
}

int64_t clf_rows_src_total(const clf_rows_src *src) {
    int64_t n = 0;
    for (int i = 0; i < src->n; i++) n += src->rows[i];
    return n;
}

void clf_panels_size(const clf_panel_fmt *f, int64_t rows, int64_t cols, size_t *main_bytes, size_t *aux_bytes) {
    const int64_t np = clf_panels_of(rows);
    const int quant = f->qb > 0;
    const size_t es = (size_t)clf_type_get(f->type)->block_bytes; /* a float type's element: its block of one */
    const size_t pb = quant ? (size_t)cols * (size_t)(f->qb + f->qh) * 4 : (size_t)cols * 32 * es;
    *main_bytes = pb * (size_t)np;
    *aux_bytes = quant ? (size_t)(cols / f->sbk) * (size_t)f->rec * (size_t)np * 2 : 0;
}

/* One B-bit plane of 32 codes (one 32-column block of a row) into its
 * panel slot j: code c of column k sets bits 8 (k % 4) + (k / 4 · B) % 8
 * of dword (k / 4 · B) / 8 of the plane (cl/matmul_cpu.cl reads them so),
 * the code's bits from `from` up. So dword d gathers the 8 / B groups of
 * four columns from 8 d / B on, group m shifted by B m within each byte:
 * four codes per 32-bit operation. */
static inline void put_plane(uint32_t *plane, int j, const uint8_t *c, const int B, const int from) {
    const uint32_t mask = 0x01010101u * ((1u << B) - 1);
    for (int d = 0; d < B; d++) {
        uint32_t w = 0;
        for (int m = 0; m < 8 / B; m++) {
            uint32_t a;
            memcpy(&a, c + 4 * (d * (8 / B) + m), 4);
            w |= (a >> from & mask) << (B * m);
        }
        plane[d * 32 + j] = w;
    }
}

/* The base plane's QB low bits of each code at dword 0 of the block, the
 * high plane's QH bits at dword QB (from + B ≤ 8: no bits cross bytes). */
static inline void put_codes(uint32_t *blkq, int j, const uint8_t *c, const int qb, const int qh) {
    put_plane(blkq, j, c, qb, 0);
    if (qh) put_plane(blkq + qb * 32, j, c, qh, qb);
}

/* One row's blocks into slot j of its panel: codes q (qw = QB + QH dwords
 * per 32 columns and row) and scale records s. */
static inline void pack_row_q(const clf_panel_fmt *f, const unsigned char *src, int64_t cols, int j, uint32_t *q,
                              uint16_t *s, const int qb, const int qh) {
    const clf_type_info *ti = clf_type_get(f->type);
    const int bb = ti->block_bytes, sbk = f->sbk;
    uint8_t c[CLF_QK_K];
    for (int64_t sb = 0; sb < cols / sbk; sb++) {
        const unsigned char *blk = src + sb * bb;
        ti->codes(blk, c);
        put_scales(f, blk, s + sb * f->rec, j);
        for (int kk = 0; kk < sbk; kk += 32)
            put_codes(q + (sb * sbk + kk) / 32 * (qb + qh) * 32, j, c + kk, qb, qh);
    }
}

/* The instances: every (QB, QH) of cl/types.cl. */
static void pack_row(const clf_panel_fmt *f, const unsigned char *src, int64_t cols, int j, uint32_t *q, uint16_t *s) {
    switch (f->qb * 8 + f->qh) {
    case 4 * 8 + 0: pack_row_q(f, src, cols, j, q, s, 4, 0); break;
    case 4 * 8 + 1: pack_row_q(f, src, cols, j, q, s, 4, 1); break;
    case 4 * 8 + 2: pack_row_q(f, src, cols, j, q, s, 4, 2); break;
    case 8 * 8 + 0: pack_row_q(f, src, cols, j, q, s, 8, 0); break;
    case 2 * 8 + 0: pack_row_q(f, src, cols, j, q, s, 2, 0); break;
    case 2 * 8 + 1: pack_row_q(f, src, cols, j, q, s, 2, 1); break;
    default: pack_row_q(f, src, cols, j, q, s, f->qb, f->qh); break; /* a new type: correct, not unrolled */
    }
}

/* Row j of a float panel: element k of the row at (k · 32 + j) elements. */
static void pack_row_f(const unsigned char *src, int64_t cols, int j, unsigned char *q, size_t es) {
    if (es == 4) {
        uint32_t *d = (uint32_t *)q + j;
        for (int64_t k = 0; k < cols; k++) memcpy(d + k * 32, src + 4 * k, 4);
    } else if (es == 2) {
        uint16_t *d = (uint16_t *)q + j;
        for (int64_t k = 0; k < cols; k++) memcpy(d + k * 32, src + 2 * k, 2);
    } else {
        for (int64_t k = 0; k < cols; k++) memcpy(q + ((size_t)k * 32 + (size_t)j) * es, src + (size_t)k * es, es);
    }
}

void clf_panels_pack_range(const clf_panel_fmt *f, int64_t cols, const clf_rows_src *src, int64_t p0, int64_t p1,
                           unsigned char *main_dst, uint16_t *aux_dst) {
    const int quant = f->qb > 0;
    const size_t es = (size_t)clf_type_get(f->type)->block_bytes, rb = clf_row_bytes(f->type, cols);
    const size_t pb = quant ? (size_t)cols * (size_t)(f->qb + f->qh) * 4 : (size_t)cols * 32 * es;
    const size_t rec_halves = quant ? (size_t)(cols / f->sbk) * (size_t)f->rec : 0;
    const int64_t rows = clf_rows_src_total(src);
    for (int64_t p = p0; p < p1; p++) {
        unsigned char *q = main_dst + (size_t)p * pb;
        uint16_t *s = quant ? aux_dst + (size_t)p * rec_halves : NULL;
        if (32 * p + 32 > rows) { /* the last panel's missing rows are zeros */
            memset(q, 0, pb);
            if (s) memset(s, 0, rec_halves * 2);
        }
        for (int j = 0; j < 32 && 32 * p + j < rows; j++) {
            const unsigned char *row = clf_rows_src_row(src, 32 * p + j, rb);
            if (quant) pack_row(f, row, cols, j, (uint32_t *)q, s);
            else pack_row_f(row, cols, j, q, es);
        }
    }
}

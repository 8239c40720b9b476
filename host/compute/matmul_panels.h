/* The panel layout of the CPU kernel variants (cl/matmul.cl describes the
 * bytes): per weight type, the kernels that read it and the host re-layout
 * from GGUF rows. Private to matmul.c. */
#ifndef CLF_MATMUL_PANELS_H
#define CLF_MATMUL_PANELS_H

#include <stddef.h>
#include <stdint.h>

#include "matmul.h" /* clf_rows_src */
#include "quant.h"
#include "status.h"

/* A type's CPU kernel family (cl/types.cl's CPU column). */
typedef enum clf_cpu_family { CLF_CPU_FLT, CLF_CPU_Q8, CLF_CPU_Q4, CLF_CPU_KQI, CLF_CPU_KQF } clf_cpu_family;

/* A type's panel format, from its row of cl/types.cl. */
typedef struct clf_panel_fmt {
    clf_type type;
    int qb, qh;         /* bits of a code's base and high planes; 0, 0: F32/F16/BF16 values */
    int sbk;            /* columns per scale record (the block) */
    int rec;            /* halves per record of a panel (32 rows) */
    int int8;           /* 1: has the int8-x forms (gemv_<type>_i8, ...), which beat the float ones */
    clf_cpu_family family;
    int gpu_xq;         /* 16-byte chunks per 32 weights of its gpu int8 GEMV; 0: none */
    /* the record's fields: f16 d and min (-1: none) at these bytes of a
     * block, then sw packed dwords of sub-block scales from byte s_at */
    int d_at, m_at, s_at, sw;
} clf_panel_fmt;

/* NULL for a type the kernels do not read (not in the table). */
const clf_panel_fmt *clf_panel_fmt_get(clf_type t);

static inline int64_t clf_panels_of(int64_t rows) { return (rows + 31) / 32; }


/* Bytes of a rows × cols weight in panels: codes or values (main) and
 * scale records (aux; 0 for the float types). */
void clf_panels_size(const clf_panel_fmt *f, int64_t rows, int64_t cols, size_t *main_bytes, size_t *aux_bytes);

/* Re-lays panels [p0, p1) of the weight whose rows src gives into main_dst
 * and aux_dst (the whole weight's buffers, clf_panels_size's bytes): every
 * byte of those panels is written, so the buffers need no clearing, and
 * disjoint panel ranges may be packed by different threads at once. */
void clf_panels_pack_range(const clf_panel_fmt *f, int64_t cols, const clf_rows_src *src, int64_t p0, int64_t p1,
                           unsigned char *main_dst, uint16_t *aux_dst);

#endif

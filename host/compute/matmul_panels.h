/* The panel layout of the CPU kernel variants (cl/matmul.cl describes the
 * bytes): per weight type, the kernels that read it and the host re-layout
 * from GGUF rows. Private to matmul.c. */
#ifndef CLF_MATMUL_PANELS_H
#define CLF_MATMUL_PANELS_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "status.h"

typedef struct clf_panel_fmt {
    clf_type type;
    int qb, qh;         /* bits of a code's base and high planes; 0, 0: F32/F16/BF16 values */
    int sbk;            /* columns per scale record (super-block) */
    int rec;            /* halves per record of a panel (32 rows) */
    int int8;           /* 1: has an int8-x GEMV (gemv_<type>_i8) that beats the float one */
    /* the sbk codes of one GGUF (super-)block, and its scale fields into
     * row j of a record */
    void (*codes)(const unsigned char *blk, uint8_t *c);
    void (*scales)(const unsigned char *blk, uint16_t *rec, int j);
} clf_panel_fmt;

/* NULL for a type the kernels do not read. */
const clf_panel_fmt *clf_panel_fmt_get(clf_type t);

static inline int64_t clf_panels_of(int64_t rows) { return (rows + 31) / 32; }

/* Re-lays rows × cols GGUF data into new host buffers of panels: codes or
 * values in *main_out, scale records in *aux_out (NULL for float types). */
clf_status clf_panels_pack(const clf_panel_fmt *f, int64_t rows, int64_t cols, const void *data,
                           unsigned char **main_out, size_t *main_bytes, uint16_t **aux_out, size_t *aux_bytes);

#endif

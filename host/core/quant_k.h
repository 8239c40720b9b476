/* Every type's host conversions, n blocks at a time, declared from the
 * table (cl/types.cl): clf_<name>_to_float and clf_<name>_from_float, and
 * for the quantized types clf_<name>_codes (clf_type_info). The 32-weight
 * types' are in quant.c, the super-block K-quants' and IQ4_NL's quantizer
 * in quant_k.c; a type missing one fails to link. */
#ifndef CLF_QUANT_K_H
#define CLF_QUANT_K_H

#include <stdint.h>

#include "quant.h"

#define CLF_CONV_DECL_(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    void clf_##name##_to_float(const void *src, float *dst, int64_t nb);                                           \
    void clf_##name##_from_float(const float *src, void *dst, int64_t nb);                                         \
    void clf_##name##_codes(const unsigned char *blk, uint8_t *c);
CLF_TYPES(CLF_CONV_DECL_, ~)
#undef CLF_CONV_DECL_

#endif

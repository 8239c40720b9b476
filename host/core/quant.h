/* Tensor element types (GGML numbering, as stored in GGUF) and the host
 * reference (de)quantizers. One table drives every size computation. */
#ifndef CLF_QUANT_H
#define CLF_QUANT_H

#include <stddef.h>
#include <stdint.h>

typedef enum clf_type {
    CLF_F32 = 0,
    CLF_F16 = 1,
    CLF_Q4_0 = 2,
    CLF_Q4_1 = 3,
    CLF_Q8_0 = 8,
} clf_type;

#define CLF_QK 32 /* weights per block for Q8_0, Q4_0, Q4_1 */

typedef struct { uint16_t d; int8_t qs[CLF_QK]; } clf_block_q8_0;        /* 34 B */
typedef struct { uint16_t d; uint8_t qs[CLF_QK / 2]; } clf_block_q4_0;   /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[CLF_QK / 2]; } clf_block_q4_1;/* 20 B */

typedef struct clf_type_info {
    const char *name;
    int block;       /* elements per block */
    int block_bytes; /* bytes per block */
} clf_type_info;

/* NULL for a type clinfer cannot read (any GGML id it does not support). */
const clf_type_info *clf_type_get(uint32_t type);
/* Parses "Q8_0", "f16", ... (case-insensitive); -1 if unknown. */
int clf_type_from_name(const char *name);
/* Bytes of a row of n elements; 0 when n is not a whole number of blocks
 * or the size overflows. */
size_t clf_row_bytes(clf_type type, int64_t n);

float clf_f16_to_f32(uint16_t h);
uint16_t clf_f32_to_f16(float f); /* round to nearest even */

/* Reference conversions of n elements (n a multiple of the block size).
 * Quantizers follow ggml's reference rounding so files interoperate. */
void clf_dequantize(clf_type type, const void *src, float *dst, int64_t n);
void clf_quantize(clf_type type, const float *src, void *dst, int64_t n);

#endif

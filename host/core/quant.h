/* Tensor element types (GGML numbering, as stored in GGUF) and the host
 * reference (de)quantizers. The types, their ids and sizes come from the one
 * table, cl/types.cl. */
#ifndef CLF_QUANT_H
#define CLF_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "types.cl" /* the table: CLF_TYPES (cl/, the kernels: the layer below core) */

#define CLF_TYPE_ENUM_(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CLF_##NAME = ID,
typedef enum clf_type { CLF_TYPES(CLF_TYPE_ENUM_, ~) } clf_type;

/* One past the largest id in the table: the size of a union of char[id + 1]. */
#define CLF_TYPE_ID_SIZE_(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    char NAME[ID + 1];
#define CLF_TYPE_COUNT ((int)sizeof(union { CLF_TYPES(CLF_TYPE_ID_SIZE_, ~) }))

/* Every type of the table, in its order (what checks and tests iterate). */
#define CLF_TYPE_ONE_(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) +1
enum { CLF_NTYPES = 0 CLF_TYPES(CLF_TYPE_ONE_, ~) };
extern const clf_type clf_type_list[CLF_NTYPES];

#define CLF_QK 32    /* weights per block for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 */
#define CLF_QK_K 256 /* weights per super-block of the K-quants */
#define CLF_K_SCALE_SIZE 12

/* Block layouts exactly as ggml's (ggml-common.h); d, dmin, m are f16 bits.
 * Every weight is w = d * q (+ m) with q read as the comments say. */
typedef struct { uint16_t d; int8_t qs[CLF_QK]; } clf_block_q8_0;        /* 34 B */
typedef struct { uint16_t d; uint8_t qs[CLF_QK / 2]; } clf_block_q4_0;   /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[CLF_QK / 2]; } clf_block_q4_1;/* 20 B */
/* Q5_0/Q5_1: low nibbles as Q4_0/Q4_1 (weight j in byte j % 16, the high
 * nibble for j >= 16); bit j of the little-endian qh is weight j's fifth bit.
 * Q5_0: w = d (q - 16); Q5_1: w = d q + m. */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[CLF_QK / 2]; } clf_block_q5_0;    /* 22 B */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[CLF_QK / 2]; } clf_block_q5_1; /* 24 B */
/* IQ4_NL: nibbles laid out as Q4_0, w = d * clf_iq4nl_values[q]. */
typedef struct { uint16_t d; uint8_t qs[CLF_QK / 2]; } clf_block_iq4_nl; /* 18 B */
extern const int8_t clf_iq4nl_values[16];
/* MXFP4 (OCP microscaling): an E8M0 exponent byte e, then nibbles as Q4_0
 * indexing E2M1's values doubled (clf_mxfp4_values); w = value · 2^(e − 128)
 * (clf_e8m0_half: ggml's GGML_E8M0_TO_FP32_HALF, the half making up for the
 * doubling). Every e is a finite power of two, 2^-128 (a float subnormal)
 * to 2^127 (e = 255, which ggml's row validation refuses as NaN). */
typedef struct { uint8_t e; uint8_t qs[CLF_QK / 2]; } clf_block_mxfp4; /* 17 B */
extern const int8_t clf_mxfp4_values[16];
float clf_e8m0_half(uint8_t e);

/* Q2_K: 16 sub-blocks of 16; scales[i] = scale (low nibble) | min (high
 * nibble) of sub-block i, w = d * scale * q - dmin * min, q 2 bits. Within
 * each 128 weights, byte l of the 32 holds weights l, l+32, l+64, l+96 at
 * bits 0, 2, 4, 6. */
typedef struct {
    uint8_t scales[CLF_QK_K / 16];
    uint8_t qs[CLF_QK_K / 4];
    uint16_t d, dmin;
} clf_block_q2_K; /* 84 B */
/* Q3_K: 16 sub-blocks of 16; 6-bit signed scales (s - 32) packed in 12
 * bytes: s[i]'s low 4 bits are nibble i / 8 of scales[i % 8], its high 2
 * bits are bits 2 (i / 4) + {0, 1} of scales[8 + i % 4]; q = low 2 bits (laid
 * out as Q2_K) minus 4
 * unless bit (j / 32) of hmask[j % 32] is set; w = d * (s - 32) * q. */
typedef struct {
    uint8_t hmask[CLF_QK_K / 8];
    uint8_t qs[CLF_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} clf_block_q3_K; /* 110 B */
/* Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins in 12 bytes
 * (clf_k4_scale_min); within each 64 weights byte l of 32 holds weight l in
 * its low and weight l + 32 in its high nibble; Q5_K's fifth bit of weight j
 * is bit (2 (j / 64) + (j % 64) / 32) of qh[j % 32]; w = d sc q - dmin m. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[CLF_K_SCALE_SIZE];
    uint8_t qs[CLF_QK_K / 2];
} clf_block_q4_K; /* 144 B */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[CLF_K_SCALE_SIZE];
    uint8_t qh[CLF_QK_K / 8];
    uint8_t qs[CLF_QK_K / 2];
} clf_block_q5_K; /* 176 B */
/* Q6_K: 16 sub-blocks of 16 with int8 scales; within each 128 weights
 * (ql advancing 64, qh 32): weight l + 32 k (k = 0..3, l < 32) has low
 * nibble of ql[l + 32 (k % 2)] (high nibble for k >= 2) and high 2 bits
 * at bits 2k of qh[l]; w = d * scales[j / 16] * (q - 32). */
typedef struct {
    uint8_t ql[CLF_QK_K / 2];
    uint8_t qh[CLF_QK_K / 4];
    int8_t scales[CLF_QK_K / 16];
    uint16_t d;
} clf_block_q6_K; /* 210 B */

/* Scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
void clf_k4_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);

typedef struct clf_type_info {
    const char *name;
    const char *suffix; /* lower-case name, as in kernel names: "q4_k" */
    int block;          /* elements per block */
    int block_bytes;    /* bytes per block */
    /* n / block blocks from and to floats (host reference) */
    void (*to_float)(const void *src, float *dst, int64_t nblocks);
    void (*from_float)(const float *src, void *dst, int64_t nblocks);
    /* the unsigned code of each weight of one block, in weight order, as
     * the CPU panels store it (the table's QB + QH bits; NULL: floats) */
    void (*codes)(const unsigned char *blk, uint8_t *c);
} clf_type_info;

/* NULL for a type clinfer cannot read (any GGML id it does not support). */
const clf_type_info *clf_type_get(uint32_t type);
/* The names of the types in the table, ", "-separated, in id order (for
 * messages); truncated to fit n bytes. Returns buf. */
char *clf_type_names(char *buf, size_t n);
/* Parses "Q8_0", "f16", ... (case-insensitive); -1 if unknown. */
int clf_type_from_name(const char *name);
/* Bytes of a row of n elements; 0 when n is not a whole number of blocks
 * or the size overflows. */
size_t clf_row_bytes(clf_type type, int64_t n);

float clf_f16_to_f32(uint16_t h);
uint16_t clf_f32_to_f16(float f); /* round to nearest even */
float clf_bf16_to_f32(uint16_t h);
uint16_t clf_f32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* Reference conversions of n elements (n a multiple of the block size).
 * The quantizers give ggml's bytes, bit for bit: its reference quantizers
 * without an importance matrix, as llama-quantize uses them (for IQ4_NL,
 * quantize_iq4_nl's scale search; for MXFP4, quantize_row_mxfp4_ref);
 * tests/data/quants.bin holds the proof. */
void clf_dequantize(clf_type type, const void *src, float *dst, int64_t n);
void clf_quantize(clf_type type, const float *src, void *dst, int64_t n);

#endif

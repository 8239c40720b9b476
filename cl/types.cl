/* The weight types: one row each. Every list of types is derived from this
 * table, on the host and in the kernels; adding a type is a row here and
 * its decoding in four more files (docs/weight-types.md).
 *
 * Preprocessor lines only, so the file is C and OpenCL C 1.2 at once: the
 * host includes it (host/core/quant.h), and host/cl/program.c puts it in
 * front of every kernel family's source, ahead of cl/common.cl (it is
 * embedded with the other kernel sources; CLINFER_KERNEL_DIR reads it from
 * there as well). No variadic macros: OpenCL compilers need not take them.
 *
 * CLF_TYPES(X, U) expands X(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID,
 * OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) once per row, in id order; U is
 * passed through for X's own use (a macro for X to apply, or anything).
 *   NAME, name  CLF_<NAME> and its name in messages ("Q4_K"); name is the
 *               stem of every kernel of the type (gemv_q4_k, get_rows_q4_k)
 *   ID          GGML's type number, as GGUF stores it
 *   QK, BYTES   weights and bytes per block (F32/F16/BF16: 1 and its size)
 *   SUB         weights per scale (sub-block): 32 or 16 (floats: 1)
 *   QB, QH      bits of a weight's unsigned code in the CPU panels: its
 *               base and high bit planes (0, 0: float values;
 *               host/compute/matmul_panels.c)
 *   GRID        the code indexes a non-uniform grid of signed integers:
 *               1 IQ4_NL's (-127..113), 2 MXFP4's E2M1 values doubled
 *               (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12); 0 none
 *   OFF         where a block's M is a fixed multiple of its D, the code's
 *               offset: w = D (c - OFF); 0 otherwise
 *   D_AT, M_AT  byte offsets in the block of the f16 scale d and of the f16
 *               min (dmin or m; -1: none), copied to a CPU panel's record
 *               (MXFP4: its E8M0 exponent byte, with the first code byte
 *               above it in the record's half; kq_scales_mxfp4 decodes it)
 *   S_AT, SW    byte offset and dwords of the packed sub-block scales
 *               copied with them (0, 0: none)
 *   CPU         its CPU kernels (cl/matmul_cpu.cl): FLT float panels; Q8, Q4
 *               the 8- and 4-bit panel kernels; KQI, KQF the code-plane ones,
 *               sub-blocks summed in integers (w = d s (c - OFF)) or each in
 *               float (w = D c + M). Every type but FLT has the int8-x forms
 *               (gemv_<name>_i8, _xq, gemm_<name>_xq, the gated units)
 *   GPU_XQ      16-byte chunks per 32 weights of its gpu int8 GEMV
 *               (gemv_<name>_xq in cl/matmul_gpu.cl); 0: none
 * Every type has gemv_, gemm_ and unpack_ (CPU), gemv_, gemm_ and (but F32)
 * dequant_ (GPU), and get_rows_ (cl/quant.cl). Block layouts: host/core/quant.h. */
#ifndef CLF_TYPES_CL
#define CLF_TYPES_CL

/* clang-format off */
#define CLF_TYPES(X, U)                                                                      \
    /*  NAME    name   ID   QK BYTES SUB QB QH GRID OFF D_AT M_AT S_AT SW CPU GPU_XQ */      \
    X(U, F32,   f32,    0,   1,   4,  1, 0, 0, 0,  0,   0,  -1,   0, 0, FLT, 0)              \
    X(U, F16,   f16,    1,   1,   2,  1, 0, 0, 0,  0,   0,  -1,   0, 0, FLT, 0)              \
    X(U, Q4_0,  q4_0,   2,  32,  18, 32, 4, 0, 0,  8,   0,  -1,   0, 0, Q4,  1)              \
    X(U, Q4_1,  q4_1,   3,  32,  20, 32, 4, 0, 0,  0,   0,   2,   0, 0, Q4,  1)              \
    X(U, Q5_0,  q5_0,   6,  32,  22, 32, 4, 1, 0, 16,   0,  -1,   0, 0, KQI, 1)              \
    X(U, Q5_1,  q5_1,   7,  32,  24, 32, 4, 1, 0,  0,   0,   2,   0, 0, KQF, 0)              \
    X(U, Q8_0,  q8_0,   8,  32,  34, 32, 8, 0, 0,  0,   0,  -1,   0, 0, Q8,  2)              \
    X(U, Q2_K,  q2_k,  10, 256,  84, 16, 2, 0, 0,  0,  80,  82,   0, 4, KQF, 0)              \
    X(U, Q3_K,  q3_k,  11, 256, 110, 16, 2, 1, 0,  4, 108,  -1,  96, 3, KQI, 0)              \
    X(U, Q4_K,  q4_k,  12, 256, 144, 32, 4, 0, 0,  0,   0,   2,   4, 3, KQF, 1)              \
    X(U, Q5_K,  q5_k,  13, 256, 176, 32, 4, 1, 0,  0,   0,   2,   4, 3, KQF, 0)              \
    X(U, Q6_K,  q6_k,  14, 256, 210, 16, 4, 2, 0, 32, 208,  -1, 192, 4, KQI, 1)              \
    X(U, IQ4_NL, iq4_nl, 20, 32, 18, 32, 4, 0, 1,  0,   0,  -1,   0, 0, KQI, 0)              \
    X(U, BF16,  bf16,  30,   1,   2,  1, 0, 0, 0,  0,   0,  -1,   0, 0, FLT, 0)              \
    X(U, MXFP4, mxfp4, 39,  32,  17, 32, 4, 0, 2,  0,   0,  -1,   0, 0, KQF, 1)
/* clang-format on */

/* Halves per row-block of a CPU panel's scale record (32 rows): a plane of
 * 32 d, one of 32 mins if any, then the SW packed dwords' planes. */
#define CLF_PANEL_REC(M_AT, SW) (32 * (1 + ((M_AT) >= 0)) + 64 * (SW))

/* Per type, CLF_QK_<name> and CLF_BYTES_<name> (the block's weights and
 * bytes) and CLF_OFF_<name>, as constants for the kernels' block
 * arithmetic. */
#define CLF_TYPE_CONSTS_(U, NAME, name, ID, QK, BYTES, SUB, QB, QH, GRID, OFF, D_AT, M_AT, S_AT, SW, CPU, GPU_XQ) \
    CLF_QK_##name = QK, CLF_BYTES_##name = BYTES, CLF_OFF_##name = OFF,
enum clf_type_consts { CLF_TYPES(CLF_TYPE_CONSTS_, ~) };

/* MXFP4's E8M0 exponent byte e (an unsigned int) as the bits of the float
 * 2^(e − 128), ggml's GGML_E8M0_TO_FP32_HALF: e < 2 are the float
 * subnormals 2^-128 and 2^-127, e = 255 is 2^127 (finite). One formula for
 * the host (host/core/quant.c) and the kernels, which take as_float of it. */
#define CLF_E8M0_HALF_BITS(e) ((e) < 2u ? 0x00200000u << (e) : ((e) - 1u) << 23)

/* CLF_IF_QUANT_<CPU>(x): x for the quantized types (not FLT); and
 * CLF_IF_<GPU_XQ>(x), x where the type has the gpu int8 GEMV. */
#define CLF_IF_QUANT_FLT(x)
#define CLF_IF_QUANT_Q8(x) x
#define CLF_IF_QUANT_Q4(x) x
#define CLF_IF_QUANT_KQI(x) x
#define CLF_IF_QUANT_KQF(x) x
#define CLF_IF_0(x)
#define CLF_IF_1(x) x
#define CLF_IF_2(x) x

#endif

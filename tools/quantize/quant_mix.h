/* The targets of `clinfer quantize`: llama.cpp's file types (LLAMA_FTYPE_*)
 * and, for each, the type of every tensor as llama.cpp's llama-quantize
 * picks it without an importance matrix (llama_tensor_get_type in
 * src/llama-quant.cpp): the output head (or tied token embeddings) in Q6_K,
 * more bits for some layers' attn_v and ffn_down in the _M mixes, and the
 * fallbacks for rows that are not whole 256-weight super-blocks. */
#ifndef CLF_QUANT_MIX_H
#define CLF_QUANT_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct clf_quant_mix {
    const char *name; /* "Q4_K_M", as llama-quantize names it */
    uint32_t ftype;   /* general.file_type: LLAMA_FTYPE_MOSTLY_* */
    clf_type base;    /* the type of the bulk of the matrices */
} clf_quant_mix;

/* The mix named `name` (case-insensitive), NULL if none. */
const clf_quant_mix *clf_quant_mix_find(const char *name);
/* The mix a file's general.file_type names, NULL if none of the table's. */
const clf_quant_mix *clf_quant_mix_of_ftype(uint32_t ftype);
/* The mixes' names, ", "-separated (truncated to n bytes). Returns buf. */
char *clf_quant_mix_names(char *buf, size_t n);

/* types[i] = the type tensor i of g is stored in: the mix's choice for the
 * matrices llama.cpp quantizes; F32 for vectors (clinfer's loader reads
 * norms and biases as F32); other tensors keep their type. A row that not
 * even the fallback's blocks divide is stored F32 (lossless; llama.cpp
 * writes F16). *n_fallback (optional) counts the tensors stored in a
 * fallback type. Fails (CLF_ERR_MEMORY) only when out of memory. */
clf_status clf_quant_mix_plan(const clf_quant_mix *mix, const clf_gguf *g, clf_type *types, int *n_fallback);

#endif

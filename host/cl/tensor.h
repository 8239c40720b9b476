/* Device tensors: a cl_mem region with an element type and a shape.
 * ne[0] is the innermost (contiguous) dimension, as in ggml: a weight
 * matrix W [out × in] has ne[0] = in, ne[1] = out; activations X
 * [tokens × features] have ne[0] = features, ne[1] = tokens. */
#ifndef CLF_TENSOR_H
#define CLF_TENSOR_H

#include "quant.h"
#include "runtime.h"

typedef struct clf_tensor {
    cl_mem mem;
    size_t offset; /* bytes from the start of mem (views) */
    clf_type type;
    int64_t ne[4];
    int owns; /* releases mem on free (not a view) */
} clf_tensor;

/* Allocates an ne0 × ne1 tensor (ne1 = 1 for a vector). */
clf_status clf_tensor_alloc(clf_runtime *rt, clf_type type, int64_t ne0, int64_t ne1, clf_tensor *t);
/* A read-only tensor over host memory the caller keeps alive longer
 * (CL_MEM_USE_HOST_PTR: used in place on a CPU device). */
clf_status clf_tensor_wrap(clf_runtime *rt, clf_type type, int64_t ne0, int64_t ne1, void *host, clf_tensor *t);
void clf_tensor_free(clf_tensor *t);
size_t clf_tensor_bytes(const clf_tensor *t);
size_t clf_tensor_row_bytes(const clf_tensor *t);
/* Rows: ne[1] * ne[2] * ne[3]. */
int64_t clf_tensor_nrows(const clf_tensor *t);
/* Rows [row0, row0 + nrows) of t, sharing its memory. */
clf_tensor clf_tensor_rows(const clf_tensor *t, int64_t row0, int64_t nrows);

/* Blocking copies of the whole tensor (bytes must equal clf_tensor_bytes). */
clf_status clf_tensor_upload(clf_runtime *rt, clf_tensor *t, const void *host, size_t bytes);
clf_status clf_tensor_download(clf_runtime *rt, const clf_tensor *t, void *host, size_t bytes);
/* Fills every byte with `byte` (tests poison outputs with 0xff = NaN). */
clf_status clf_tensor_fill(clf_runtime *rt, clf_tensor *t, unsigned char byte);

#endif

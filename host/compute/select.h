/* The k best values of a device row (a token's logits) read to the host:
 * what a sampler that needs no more than the k best takes (top-k, greedy),
 * instead of the whole vocabulary (cl/select.cl). */
#ifndef CLF_SELECT_H
#define CLF_SELECT_H

#include "tensor.h"

/* The largest k (the kernels' private list). */
#define CLF_TOPK_MAX 64

/* Device scratch of the selection: the parts' lists and the result. */
typedef struct clf_topk {
    clf_runtime *rt;
    cl_mem part_v, part_i, bad, out_v, out_i;
} clf_topk;

clf_status clf_topk_create(clf_runtime *rt, clf_topk *t);
void clf_topk_free(clf_topk *t);

/* The k best of x's first row (F32, n = x->ne[0] values; 1 <= k <=
 * min(n, CLF_TOPK_MAX)): vals/ids best first, the larger value then the
 * smaller index (NaN as -inf); *nonfinite 1 when the row holds a NaN or an
 * infinity. Enqueues the selection after what is queued and waits for it. */
clf_status clf_topk_read(clf_topk *t, const clf_tensor *x, int k, float *vals, int32_t *ids, int *nonfinite);

#endif

/* The k best values of a device row (a token's logits) read to the host:
 * what a sampler that needs no more than the k best takes (top-k, greedy),
 * instead of the whole vocabulary (cl/select.cl). */
#ifndef CLF_SELECT_H
#define CLF_SELECT_H

#include "tensor.h"

/* The largest k (the kernels' private list). */
#define CLF_TOPK_MAX 64

/* Device scratch of the selection: the parts' lists and the result; the
 * mask's words (clf_topk_read_masked), grown on first use. */
typedef struct clf_topk {
    clf_runtime *rt;
    cl_mem part_v, part_i, bad, out_v, out_i;
    cl_mem mask;     /* [mask_words] uint32, or NULL */
    int mask_words;
} clf_topk;

clf_status clf_topk_create(clf_runtime *rt, clf_topk *t);
void clf_topk_free(clf_topk *t);

/* The k best of x's first row (F32, n = x->ne[0] values; 1 <= k <=
 * min(n, CLF_TOPK_MAX)): vals/ids best first, the larger value then the
 * smaller index (NaN as -inf); *nonfinite 1 when the row holds a NaN or an
 * infinity. Enqueues the selection after what is queued and waits for it. */
clf_status clf_topk_read(clf_topk *t, const clf_tensor *x, int k, float *vals, int32_t *ids, int *nonfinite);

/* The same over the row masked by `mask` (n bits, bit i%32 of word i/32: 1
 * where value i may be chosen; (n + 31) / 32 words; NULL: no mask): a
 * refused value counts as -inf, so the k best are those of the row with
 * its refused values set to -inf (the allowed by value, then the -inf by
 * index). *nonfinite still reads the row as it is. The words are uploaded
 * before the launches: they may be written while the device still runs
 * the work queued before (a forward pass), and are read before this
 * returns. */
clf_status clf_topk_read_masked(clf_topk *t, const clf_tensor *x, int k, const uint32_t *mask, float *vals,
                                int32_t *ids, int *nonfinite);

#endif

/* The k best of a device row (select.h): two launches of cl/select.cl and
 * one read of k values, k indices and a count. */
#include "select.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Slices the row is cut into: two per compute unit, at most 64, each at
 * least 1024 values. A slice's list costs ~k·(1 + ln(len/k)) insertions of
 * k/2 moves each, so fewer, longer slices cost less in all: on PoCL (2
 * threads) 64 slices of 768 took 460 us for k = 40 of 49152, 4 slices
 * about a tenth (bench kernels, "sample" rows). */
enum { TOPK_PARTS = 64, TOPK_SLICE = 1024 };

clf_status clf_topk_create(clf_runtime *rt, clf_topk *t) {
    memset(t, 0, sizeof *t);
    t->rt = rt;
    const size_t lists = (size_t)TOPK_PARTS * CLF_TOPK_MAX * 4;
    clf_status st = clf_buffer_create(rt, CL_MEM_READ_WRITE, lists, NULL, &t->part_v);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, lists, NULL, &t->part_i);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, TOPK_PARTS * 4, NULL, &t->bad);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, CLF_TOPK_MAX * 4, NULL, &t->out_v);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, (CLF_TOPK_MAX + 1) * 4, NULL, &t->out_i);
    if (st != CLF_OK) clf_topk_free(t);
    return st;
}

void clf_topk_free(clf_topk *t) {
    cl_mem *m[] = {&t->part_v, &t->part_i, &t->bad, &t->out_v, &t->out_i, &t->mask};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (*m[i]) clReleaseMemObject(*m[i]);
    memset(t, 0, sizeof *t);
}

clf_status clf_topk_read(clf_topk *t, const clf_tensor *x, int k, float *vals, int32_t *ids, int *nonfinite) {
    return clf_topk_read_masked(t, x, k, NULL, vals, ids, nonfinite);
}

clf_status clf_topk_read_masked(clf_topk *t, const clf_tensor *x, int k, const uint32_t *mask, float *vals,
                                int32_t *ids, int *nonfinite) {
    clf_runtime *rt = t->rt;
    if (!t->out_i) return clf_fail(CLF_ERR_ARG, "top-k: no scratch (clf_topk_create)");
    if (x->type != CLF_F32 || x->offset % 4 || x->ne[0] < 1 || x->ne[0] > INT_MAX)
        return clf_fail(CLF_ERR_ARG, "top-k: the row must be F32 with 1 to %d values", INT_MAX);
    const int n = (int)x->ne[0];
    if (k < 1 || k > CLF_TOPK_MAX || k > n)
        return clf_fail(CLF_ERR_ARG, "top-k: k = %d is not in 1 .. %d (a row of %d)", k, n < CLF_TOPK_MAX ? n : CLF_TOPK_MAX, n);
    int parts = n / TOPK_SLICE, most = 2 * (int)(rt->dev.compute_units ? rt->dev.compute_units : 1);
    if (most > TOPK_PARTS) most = TOPK_PARTS;
    parts = parts < 1 ? 1 : parts > most ? most : parts;
    const cl_ulong xoff = x->offset / 4;
    char opts[32];
    snprintf(opts, sizeof opts, "-DTOPK_MAX=%d", CLF_TOPK_MAX);
    cl_kernel kp, km;
    CLF_TRY(clf_kernel_get(rt, "select", opts, "topk_part", &kp));
    CLF_TRY(clf_kernel_get(rt, "select", opts, "topk_merge", &km));
    /* the mask's words to the device (grown to the row's), written without
     * waiting: the queue runs them before the launches, and the caller's
     * words outlive the blocking read below */
    const int words = (n + 31) / 32, masked = mask != NULL;
    if (masked && t->mask_words < words) {
        if (t->mask) clReleaseMemObject(t->mask);
        t->mask = NULL;
        t->mask_words = 0;
        CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_ONLY, (size_t)words * 4, NULL, &t->mask));
        t->mask_words = words;
    }
    if (masked)
        CLF_TRY(clf_cl_check(
            clEnqueueWriteBuffer(rt->queue, t->mask, CL_FALSE, 0, (size_t)words * 4, mask, 0, NULL, NULL),
            "writing the top-k mask"));
    cl_mem mask_mem = masked ? t->mask : t->bad; /* unmasked: a buffer never read */
    clf_arg ap[] = {CLF_ARG(x->mem), CLF_ARG(xoff), CLF_ARG(n), CLF_ARG(k), CLF_ARG(parts),
                    CLF_ARG(t->part_v), CLF_ARG(t->part_i), CLF_ARG(t->bad), CLF_ARG(mask_mem), CLF_ARG(masked)};
    clf_arg am[] = {CLF_ARG(t->part_v), CLF_ARG(t->part_i), CLF_ARG(t->bad), CLF_ARG(k), CLF_ARG(parts),
                    CLF_ARG(t->out_v), CLF_ARG(t->out_i)};
    const size_t gp = (size_t)parts, one = 1;
    clf_status st = clf_set_args(kp, ap, CLF_NARGS(ap));
    if (st == CLF_OK) st = clf_launch(rt, kp, 1, &gp, &one);
    if (st == CLF_OK) st = clf_set_args(km, am, CLF_NARGS(am));
    if (st == CLF_OK) st = clf_launch(rt, km, 1, &one, &one);
    int32_t out_i[CLF_TOPK_MAX + 1];
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, t->out_v, CL_FALSE, 0, (size_t)k * 4, vals, 0, NULL, NULL),
                          "reading the top-k values");
    if (st == CLF_OK)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, t->out_i, CL_TRUE, 0, (size_t)(k + 1) * 4, out_i, 0,
                                              NULL, NULL),
                          "reading the top-k indices");
    if (st != CLF_OK) { /* nothing queued may still read the caller's mask */
        clFinish(rt->queue);
        return st;
    }
    memcpy(ids, out_i, (size_t)k * sizeof *ids);
    *nonfinite = out_i[k] != 0;
    return CLF_OK;
}

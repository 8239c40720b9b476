#include "tensor.h"

#include <stdlib.h>
#include <string.h>

size_t clf_tensor_row_bytes(const clf_tensor *t) { return clf_row_bytes(t->type, t->ne[0]); }

int64_t clf_tensor_nrows(const clf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t clf_tensor_bytes(const clf_tensor *t) { return clf_tensor_row_bytes(t) * (size_t)clf_tensor_nrows(t); }

/* The shape's checks and fields; *bytes its size. */
static clf_status shape(clf_type type, int64_t ne0, int64_t ne1, clf_tensor *t, size_t *bytes) {
    memset(t, 0, sizeof *t);
    size_t row = clf_row_bytes(type, ne0);
    if (ne0 <= 0 || ne1 <= 0 || !row)
        return clf_fail(CLF_ERR_ARG, "bad tensor shape %lld x %lld for type %u", (long long)ne0,
                        (long long)ne1, (unsigned)type);
    if ((uint64_t)ne1 > SIZE_MAX / row) return clf_fail(CLF_ERR_MEMORY, "tensor size overflows");
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->owns = 1;
    *bytes = row * (size_t)ne1;
    return CLF_OK;
}

clf_status clf_tensor_alloc(clf_runtime *rt, clf_type type, int64_t ne0, int64_t ne1, clf_tensor *t) {
    size_t bytes = 0;
    CLF_TRY(shape(type, ne0, ne1, t, &bytes));
    return clf_buffer_create(rt, CL_MEM_READ_WRITE, bytes, NULL, &t->mem);
}

clf_status clf_tensor_wrap(clf_runtime *rt, clf_type type, int64_t ne0, int64_t ne1, void *host, clf_tensor *t) {
    size_t bytes = 0;
    CLF_TRY(shape(type, ne0, ne1, t, &bytes));
    return clf_buffer_create(rt, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes, host, &t->mem);
}

void clf_tensor_free(clf_tensor *t) {
    if (t->owns && t->mem) clReleaseMemObject(t->mem);
    memset(t, 0, sizeof *t);
}

clf_tensor clf_tensor_rows(const clf_tensor *t, int64_t row0, int64_t nrows) {
    clf_tensor v = *t;
    v.owns = 0;
    v.offset += (size_t)row0 * clf_tensor_row_bytes(t);
    v.ne[1] = nrows;
    v.ne[2] = v.ne[3] = 1;
    return v;
}

clf_status clf_tensor_upload(clf_runtime *rt, clf_tensor *t, const void *host, size_t bytes) {
    if (bytes != clf_tensor_bytes(t))
        return clf_fail(CLF_ERR_ARG, "upload of %zu bytes into a tensor of %zu", bytes, clf_tensor_bytes(t));
    return clf_cl_check(clEnqueueWriteBuffer(rt->queue, t->mem, CL_TRUE, t->offset, bytes, host, 0, NULL, NULL),
                        "clEnqueueWriteBuffer");
}

clf_status clf_tensor_download(clf_runtime *rt, const clf_tensor *t, void *host, size_t bytes) {
    if (bytes != clf_tensor_bytes(t))
        return clf_fail(CLF_ERR_ARG, "download of %zu bytes from a tensor of %zu", bytes, clf_tensor_bytes(t));
    return clf_cl_check(clEnqueueReadBuffer(rt->queue, t->mem, CL_TRUE, t->offset, bytes, host, 0, NULL, NULL),
                        "clEnqueueReadBuffer");
}

clf_status clf_tensor_fill(clf_runtime *rt, clf_tensor *t, unsigned char byte) {
    size_t n = clf_tensor_bytes(t);
    unsigned char *tmp = malloc(n ? n : 1);
    if (!tmp) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    memset(tmp, byte, n);
    clf_status st = clf_cl_check(
        clEnqueueWriteBuffer(rt->queue, t->mem, CL_TRUE, t->offset, n, tmp, 0, NULL, NULL), "clEnqueueWriteBuffer");
    free(tmp);
    return st;
}

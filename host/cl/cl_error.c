/* OpenCL error codes: their names, and the one mapping to clf_status. */
#include "runtime_impl.h"

#include <stdlib.h>
#include <string.h>



const char *clf_cl_error_name(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
    E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT)
    E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
    E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

clf_status clf_cl_check(cl_int err, const char *what) {
    if (err == CL_SUCCESS) return CLF_OK;
    clf_status st = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
                     err == CL_INVALID_BUFFER_SIZE)
                        ? CLF_ERR_MEMORY
                        : CLF_ERR_CL;
    return clf_fail(st, "%s failed: %s (%d)", what, clf_cl_error_name(err), err);
}

/* CLINFER_FILL_BUFFERS=1 (a testing aid tests/oclgrind.sh sets): every new
 * buffer without host data is written 0xff from the host, whole. Oclgrind
 * 21.10's uninitialised-value plugin never drops the shadow of a released
 * buffer: the next buffer at its address inherits it, and what kernels write
 * past the old one's size reads as uninitialised there; a host write of the
 * whole buffer starts its shadow afresh. Data nobody wrote then reads as
 * NaN / 0xff bytes, which the selftest's comparisons catch. */
static clf_status buffer_fill(clf_runtime *rt, cl_mem mem, size_t bytes) {
    unsigned char *ff = malloc(bytes);
    if (!ff) {
        clReleaseMemObject(mem);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    memset(ff, 0xff, bytes);
    const clf_status st = clf_cl_check(clEnqueueWriteBuffer(rt->queue, mem, CL_TRUE, 0, bytes, ff, 0, NULL, NULL),
                                       "clEnqueueWriteBuffer (CLINFER_FILL_BUFFERS)");
    free(ff);
    if (st != CLF_OK) clReleaseMemObject(mem);
    return st;
}

clf_status clf_buffer_create(clf_runtime *rt, cl_mem_flags flags, size_t bytes, void *host,
                             cl_mem *out) {
    cl_int err;
    *out = NULL;
    if (bytes > rt->dev.max_alloc)
        return clf_fail(CLF_ERR_MEMORY, "buffer of %zu bytes exceeds the device's max allocation (%llu bytes)",
                        bytes, (unsigned long long)rt->dev.max_alloc);
    *out = clCreateBuffer(rt->ctx, flags, bytes ? bytes : 1, host, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        return clf_fail_ctx(clf_cl_check(err, "clCreateBuffer"), "allocating %zu bytes: ", bytes);
    }
    const char *fill = getenv("CLINFER_FILL_BUFFERS");
    if (host || !fill || !*fill || !strcmp(fill, "0")) return CLF_OK;
    const clf_status st = buffer_fill(rt, *out, bytes ? bytes : 1);
    if (st != CLF_OK) *out = NULL; /* released */
    return st;
}

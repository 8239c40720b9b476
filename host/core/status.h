/* clinfer status codes and the last-error message.
 *
 * Every library function that can fail returns a clf_status and, on failure,
 * leaves a one-line human message (with the OpenCL call and error name where
 * one is involved) retrievable with clf_last_error(). Nothing in the library
 * exits or aborts. The CLI maps each status to a distinct exit code. */
#ifndef CLF_STATUS_H
#define CLF_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum clf_status {
    CLF_OK = 0,
    CLF_ERR_ARG = 2,         /* bad argument or usage */
    CLF_ERR_IO = 3,          /* file missing, unreadable, unwritable */
    CLF_ERR_FORMAT = 4,      /* malformed or unsupported GGUF / data */
    CLF_ERR_DEVICE = 5,      /* no OpenCL platform, or selector matches nothing */
    CLF_ERR_CL = 6,          /* an OpenCL call failed, or a kernel failed to build */
    CLF_ERR_MEMORY = 7,      /* model too large for the device, or out of memory */
    CLF_ERR_CONTEXT = 8,     /* prompt or generation longer than the context */
    CLF_ERR_INTERRUPTED = 9, /* stopped by the user (Ctrl-C) */
} clf_status;

/* Records a printf-style message as the last error and returns `st`. */
clf_status clf_fail(clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends context ("loading model: ") to the current message; returns st. */
clf_status clf_fail_ctx(clf_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same with a va_list (the public clinfer_fail, clinfer_fail_prefix). */
clf_status clf_vfail(clf_status st, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
clf_status clf_vfail_ctx(clf_status st, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* The last error message of this thread ("" if none). */
const char *clf_last_error(void);

/* A short name for a status ("format error"). */
const char *clf_status_name(clf_status st);

/* A size for a message, in buf: "1.50 GiB", "12.0 MiB", "36.0 KiB",
 * "100 bytes" (small limits stay readable). */
const char *clf_bytes_str(double bytes, char *buf, size_t n);

/* Propagate a failing status. */
#define CLF_TRY(expr)                                                          \
    do {                                                                       \
        clf_status clf_try_st_ = (expr);                                       \
        if (clf_try_st_ != CLF_OK) return clf_try_st_;                         \
    } while (0)

#endif

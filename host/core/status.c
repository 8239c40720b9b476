#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char clf_errbuf[2048];

clf_status clf_vfail(clf_status st, const char *fmt, va_list ap) {
    vsnprintf(clf_errbuf, sizeof clf_errbuf, fmt, ap);
    return st;
}

clf_status clf_fail(clf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    clf_vfail(st, fmt, ap);
    va_end(ap);
    return st;
}

clf_status clf_vfail_ctx(clf_status st, const char *fmt, va_list ap) {
    char prefix[512], old[sizeof clf_errbuf];
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    memcpy(old, clf_errbuf, sizeof old);
    size_t n = strlen(prefix);
    memcpy(clf_errbuf, prefix, n);
    size_t m = strnlen(old, sizeof clf_errbuf - 1 - n);
    memcpy(clf_errbuf + n, old, m);
    clf_errbuf[n + m] = 0;
    return st;
}

clf_status clf_fail_ctx(clf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    clf_vfail_ctx(st, fmt, ap);
    va_end(ap);
    return st;
}

const char *clf_last_error(void) { return clf_errbuf; }

const char *clf_status_name(clf_status st) {
    switch (st) {
    case CLF_OK: return "ok";
    case CLF_ERR_ARG: return "usage error";
    case CLF_ERR_IO: return "I/O error";
    case CLF_ERR_FORMAT: return "format error";
    case CLF_ERR_DEVICE: return "device error";
    case CLF_ERR_CL: return "OpenCL error";
    case CLF_ERR_MEMORY: return "out of memory";
    case CLF_ERR_CONTEXT: return "context full";
    case CLF_ERR_INTERRUPTED: return "interrupted";
    }
    return "error";
}

const char *clf_bytes_str(double b, char *buf, size_t n) {
    if (b >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
    else if (b >= 1024.0) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else snprintf(buf, n, "%.0f bytes", b);
    return buf;
}

/* A growable byte buffer (buf.h). */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for `more` bytes beyond n and the NUL; 0, or -1 (failed set). */
static int reserve(clf_buf *b, size_t more) {
    if (b->failed) return -1;
    if (more > (size_t)-1 / 2 - b->n || (b->max && b->n + more > b->max)) { /* past the bound */
        b->failed = 1;
        return -1;
    }
    size_t need = b->n + more + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

clf_status clf_buf_add(clf_buf *b, const void *p, size_t n) {
    if (reserve(b, n)) return CLF_ERR_MEMORY;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return CLF_OK;
}

clf_status clf_buf_reserve(clf_buf *b, size_t more) {
    if (reserve(b, more)) return CLF_ERR_MEMORY;
    b->p[b->n] = 0; /* a first reserve leaves a string too */
    return CLF_OK;
}

clf_status clf_buf_putc(clf_buf *b, char c) { return clf_buf_add(b, &c, 1); }

clf_status clf_buf_puts(clf_buf *b, const char *s) { return clf_buf_add(b, s, strlen(s)); }

clf_status clf_buf_vprintf(clf_buf *b, const char *fmt, va_list ap) {
    if (b->failed) return CLF_ERR_MEMORY;
    /* measure, make room, write in place */
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    if (n < 0) { /* an encoding error: nothing written, the buffer unharmed */
        return CLF_ERR_ARG;
    }
    if (reserve(b, (size_t)n)) return CLF_ERR_MEMORY;
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    b->n += (size_t)n;
    return CLF_OK;
}

clf_status clf_buf_printf(clf_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    clf_status st = clf_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return st;
}

char *clf_buf_take(clf_buf *b, size_t *n) {
    char *p = b->failed ? NULL : b->p ? b->p : calloc(1, 1);
    if (b->failed) free(b->p);
    if (n) *n = p ? b->n : 0;
    *b = (clf_buf){.max = b->max};
    return p;
}

void clf_buf_clear(clf_buf *b) {
    b->n = 0;
    b->failed = 0;
    if (b->p) b->p[0] = 0;
}

void clf_buf_free(clf_buf *b) {
    free(b->p);
    *b = (clf_buf){.max = b->max};
}

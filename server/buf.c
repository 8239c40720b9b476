/* The server's growable byte buffer (buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `more` bytes and the NUL: 0, or -1 (b unchanged). */
static int reserve(srv_buf *b, size_t more) {
    if (more > (size_t)-1 / 2 - b->n) return -1;
    size_t need = b->n + more + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int srv_buf_add(srv_buf *b, const void *p, size_t n) {
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int srv_buf_printf(srv_buf *b, const char *fmt, ...) {
    /* measure, make room, write in place */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
    return 0;
}

void srv_buf_free(srv_buf *b) {
    free(b->p);
    *b = (srv_buf){0};
}

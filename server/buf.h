/* The server's one growable byte buffer (a request's body, a reply's text,
 * a stream's events). The server sees only include/clinfer.h, not the
 * library's clf_buf: this is its copy, for every server file. Capacity
 * doubles; a NUL is kept after the bytes. Zero-initialised is empty. */
#ifndef SRV_BUF_H
#define SRV_BUF_H

#include <stddef.h>

typedef struct srv_buf {
    char *p;    /* the bytes, NUL-terminated at p[n] (NULL until the first append) */
    size_t n;   /* bytes held */
    size_t cap; /* bytes allocated */
} srv_buf;

/* Appends p[0, n): 0, or -1 when memory ran out (b unchanged). */
int srv_buf_add(srv_buf *b, const void *p, size_t n);

/* Appends printf text: 0, or -1 (memory, or a format error; b unchanged). */
int srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees the bytes; b is empty. */
void srv_buf_free(srv_buf *b);

#endif

/* A growable byte buffer, written once: append bytes, a character or
 * printf text; read it as a NUL-terminated string; take ownership of it.
 *
 * Zero-initialised ({0}) is an empty buffer without a bound. A bound
 * (b.max, bytes of content, 0 = none) is for callers whose input is
 * untrusted: an append past it fails like an allocation. A failure is
 * sticky: b.failed is set, later appends do nothing and return the same
 * status, so a writer of many appends checks once at the end. The buffer
 * leaves no error message (clf_last_error): its caller says what it was
 * writing. Capacity doubles from 64 bytes. */
#ifndef CLF_BUF_H
#define CLF_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "status.h"

typedef struct clf_buf {
    char *p;    /* the bytes, NUL-terminated at p[n] (NULL until the first append) */
    size_t n;   /* bytes held, the NUL not counted */
    size_t cap; /* bytes allocated at p */
    size_t max; /* bound on n in bytes (0: none) */
    int failed; /* an append ran out of memory or past max (sticky) */
} clf_buf;

/* Appends p[0, n). CLF_ERR_MEMORY when memory or the bound ran out (now or
 * before). */
clf_status clf_buf_add(clf_buf *b, const void *p, size_t n);
clf_status clf_buf_putc(clf_buf *b, char c);
clf_status clf_buf_puts(clf_buf *b, const char *s);
clf_status clf_buf_printf(clf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
clf_status clf_buf_vprintf(clf_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Makes room for `more` bytes beyond n (and the NUL) without adding any:
 * a reader may then write up to cap - n - 1 bytes at p + n, add them to n
 * and put the NUL at p[n]. The same failures as an append. */
clf_status clf_buf_reserve(clf_buf *b, size_t more);

/* The content as a string ("" while nothing is held). */
static inline const char *clf_buf_str(const clf_buf *b) { return b->p ? b->p : ""; }

/* Hands the bytes (NUL-terminated, free() them) to the caller, *n their
 * length when n is not NULL, and leaves b empty (its bound kept). NULL when
 * an append failed (the bytes are freed) or memory ran out. */
char *clf_buf_take(clf_buf *b, size_t *n);

/* Empties b, keeping its memory and bound and clearing a failure. */
void clf_buf_clear(clf_buf *b);

/* Frees the bytes; b is empty, its bound kept. */
void clf_buf_free(clf_buf *b);

#endif

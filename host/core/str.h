/* A run of bytes inside something else (a mapped file, another buffer):
 * not owned, not NUL-terminated. */
#ifndef CLF_STR_H
#define CLF_STR_H
#include <stdint.h>

typedef struct clf_str {
    const char *ptr;
    uint64_t len;
} clf_str;

#endif

/* FNV-1a, 64-bit: the one hash for cache keys, checksums and hash tables
 * (fast, no dependency, and stable across runs and machines, which cache
 * file names need). Chain calls: h = clf_fnv1a(h, ...), starting from
 * CLF_FNV1A_SEED. */
#ifndef CLF_HASH_H
#define CLF_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CLF_FNV1A_SEED 0xcbf29ce484222325ull

static inline uint64_t clf_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A string with its terminating NUL, so "ab"+"c" and "a"+"bc" differ. */
static inline uint64_t clf_fnv1a_str(uint64_t h, const char *s) { return clf_fnv1a(h, s, strlen(s) + 1); }

#endif

/* A hash map, written once: string or byte keys -> a 64-bit value.
 *
 * Open addressing with linear probing over a power-of-two table, FNV-1a
 * (hash.h) on the key's bytes; the load factor is kept at most 1/2 (the
 * table doubles before an insert would pass it), and a removal shifts the
 * probe run back, so there are no tombstones. Keys are copied. Zero-
 * initialised ({0}) is an empty map. The order of entries is the table's,
 * not insertion order: a caller that writes output does not iterate. */
#ifndef CLF_MAP_H
#define CLF_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "status.h"

typedef struct clf_map_entry {
    char *key;     /* a copy of the key's bytes, NUL-terminated (NULL: empty slot) */
    size_t len;    /* the key's length in bytes */
    uint64_t hash; /* FNV-1a of the key */
    int64_t val;
} clf_map_entry;

typedef struct clf_map {
    clf_map_entry *e; /* [cap] slots */
    size_t cap;       /* slots, a power of two (0 before the first insert) */
    size_t n;         /* keys held, at most cap / 2 */
} clf_map;

/* The value of key[0, len), or NULL when absent (valid until the next set
 * or remove). */
int64_t *clf_map_get(const clf_map *m, const void *key, size_t len);

/* Sets key[0, len)'s value, adding the key when new. CLF_ERR_MEMORY (with
 * no message: the caller says what it was doing) leaves m as it was. */
clf_status clf_map_set(clf_map *m, const void *key, size_t len, int64_t val);

/* Removes key[0, len): 1 when it was there, 0 when not. */
int clf_map_remove(clf_map *m, const void *key, size_t len);

/* Frees the table and the keys; m is empty. */
void clf_map_free(clf_map *m);

/* The same for NUL-terminated keys (the NUL not part of the key). */
static inline int64_t *clf_map_gets(const clf_map *m, const char *key) { return clf_map_get(m, key, strlen(key)); }
static inline clf_status clf_map_sets(clf_map *m, const char *key, int64_t val) {
    return clf_map_set(m, key, strlen(key), val);
}

#endif

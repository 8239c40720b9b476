/* A hash map (map.h): open addressing, linear probing, load factor <= 1/2. */
#include "map.h"

#include <stdlib.h>

#include "hash.h"

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const clf_map *m, const void *key, size_t len, uint64_t h) {
    size_t mask = m->cap - 1, i = (size_t)h & mask;
    while (m->e[i].key && !(m->e[i].hash == h && m->e[i].len == len && memcmp(m->e[i].key, key, len) == 0))
        i = (i + 1) & mask;
    return i;
}

int64_t *clf_map_get(const clf_map *m, const void *key, size_t len) {
    if (!m->n) return NULL;
    size_t i = find(m, key, len, clf_fnv1a(CLF_FNV1A_SEED, key, len));
    return m->e[i].key ? &m->e[i].val : NULL;
}

/* Moves every entry into a table of cap slots; -1 out of memory (m unchanged). */
static int rehash(clf_map *m, size_t cap) {
    clf_map_entry *e = calloc(cap, sizeof *e);
    if (!e) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->e[i].key) continue;
        size_t j = (size_t)m->e[i].hash & (cap - 1);
        while (e[j].key) j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e;
    m->cap = cap;
    return 0;
}

clf_status clf_map_set(clf_map *m, const void *key, size_t len, int64_t val) {
    uint64_t h = clf_fnv1a(CLF_FNV1A_SEED, key, len);
    if (m->cap) { /* an existing key: its value only */
        size_t i = find(m, key, len, h);
        if (m->e[i].key) {
            m->e[i].val = val;
            return CLF_OK;
        }
    }
    /* a new key: grow first so the table stays at most half full */
    if ((m->n + 1) * 2 > m->cap) {
        if (m->cap > (size_t)-1 / 2 / sizeof *m->e) return CLF_ERR_MEMORY;
        if (rehash(m, m->cap ? 2 * m->cap : 16)) return CLF_ERR_MEMORY;
    }
    char *k = malloc(len + 1);
    if (!k) return CLF_ERR_MEMORY;
    if (len) memcpy(k, key, len);
    k[len] = 0;
    size_t i = find(m, key, len, h);
    m->e[i] = (clf_map_entry){.key = k, .len = len, .hash = h, .val = val};
    m->n++;
    return CLF_OK;
}

int clf_map_remove(clf_map *m, const void *key, size_t len) {
    if (!m->n) return 0;
    size_t mask = m->cap - 1, i = find(m, key, len, clf_fnv1a(CLF_FNV1A_SEED, key, len));
    if (!m->e[i].key) return 0;
    free(m->e[i].key);
    m->e[i].key = NULL;
    m->n--;
    /* backward shift: each later entry of the run whose home is not in
     * (i, j] moves into the hole, so every probe run stays unbroken */
    for (size_t j = (i + 1) & mask; m->e[j].key; j = (j + 1) & mask) {
        size_t home = (size_t)m->e[j].hash & mask;
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        m->e[i] = m->e[j];
        m->e[j].key = NULL;
        i = j;
    }
    return 1;
}

void clf_map_free(clf_map *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->e[i].key);
    free(m->e);
    *m = (clf_map){0};
}

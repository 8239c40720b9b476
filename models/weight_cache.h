/* The packed-weights cache: on a device that reads host memory (the CPU
 * kernels' panels), a model's weights re-laid once into a file beside the
 * kernel cache, then mapped and used in place by every later load. A warm
 * load is a mapping and a checksum pass; the pages are the page cache's,
 * shared between processes and reclaimable, and no second copy of the
 * weights is ever made.
 *
 * Where: $CLINFER_WEIGHT_CACHE (a folder; "0": off), else weights/ in the
 * kernel cache's folder (off where that is). One entry per model file,
 * layer range and layout: <folder>/<hash>.pack, built under <hash>.lock
 * (flock: a second process waits and then maps the first one's entry)
 * into a temporary file renamed into place when complete.
 *
 * An entry is checked before use: its header names the model file by
 * identity (device, inode, size, modification time), the layout and every
 * weight's type, shape and bytes, and carries an XXH3 checksum per 4 MiB of
 * data and one of itself. A stale (the model changed), foreign (another
 * layout or model), truncated or damaged entry is rebuilt, with a notice
 * saying why. A folder that cannot hold it (read-only, full disk) leaves
 * the load packing in memory, with one notice. Models under 16 MiB of
 * weights are packed in memory (in milliseconds) and get no entry. */
#ifndef CLF_WEIGHT_CACHE_H
#define CLF_WEIGHT_CACHE_H

#include <stdint.h>

#include "gguf.h"
#include "runtime.h"

/* One weight of the entry, in load order. */
typedef struct clf_wc_weight {
    char name[64];     /* its (first) tensor's name */
    uint32_t type;     /* clf_type */
    uint32_t zero;     /* 0: the struct has no padding (entries are compared bytewise) */
    int64_t rows, cols;
    uint64_t bytes[2]; /* main and aux bytes in the device's layout (aux 0: none) */
    uint64_t off[2];   /* from the file's start, page-aligned: clf_wcache_open sets them */
} clf_wc_weight;

typedef struct clf_wcache clf_wcache;

/* The entry for the model file g's layers [l0, l1) in layout `layout` with
 * these n weights (w[i].off set here). *out NULL: no cache (off, or unusable;
 * a notice said why where it is not off by choice): pack in memory.
 * Otherwise clf_wcache_building says whether the caller packs each weight
 * into its slot and then calls clf_wcache_done, or uses the slots as they
 * are. Errors are only the load's (interrupted, out of memory). */
clf_status clf_wcache_open(clf_runtime *rt, const clf_gguf *g, const char *layout, int l0, int l1,
                           clf_wc_weight *w, int n, clf_wcache **out);

int clf_wcache_building(const clf_wcache *wc);

/* Weight i's main and aux bytes in the mapping (aux NULL where it has none). */
void clf_wcache_slot(const clf_wcache *wc, int i, void **main, void **aux);

/* After every slot is packed: checksums, the header, the entry renamed
 * into place, the mapping made read-only. A failure to write leaves the
 * weights usable (the mapping stays) and the entry unpublished. */
clf_status clf_wcache_done(clf_wcache *wc);

/* Drops weight i's pages from the process's memory (they stay in the page
 * cache): for one read a row at a time (the token embedding), whose rows
 * come back as they are looked up; the checks read every page. */
void clf_wcache_drop(clf_wcache *wc, int i);

/* Locks the mapping in memory (mlock: no paging out); CLF_ERR_MEMORY
 * saying why where the system refuses (RLIMIT_MEMLOCK). */
clf_status clf_wcache_lock(clf_wcache *wc);

/* Unmaps it (after the weights that use it are released); NULL is fine. */
void clf_wcache_close(clf_wcache *wc);

#endif

/* The packed-weights cache (weight_cache.h): the entry's file, its checks
 * and its build. The file:
 *
 *   header   magic "CLFPACK\n", version, the model file's identity, the
 *            layout, the layer range, n weights (clf_wc_weight each), the
 *            data's extent and chunk size, one XXH3-64 per chunk of data,
 *            and last the XXH3-64 of all the header before it
 *   data     from data_off (page-aligned): each weight's main then aux
 *            bytes, each page-aligned (zeros between)
 *
 * All integers little-endian as the host writes them (an entry is this
 * machine's: another byte order fails the magic's check and is rebuilt). */
#include "weight_cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "hash.h"
#include "parallel.h"

#define MAGIC "CLFPACK\n"
#define VERSION 1u
#define PAGE 4096u
#define CHUNK (4u << 20)     /* bytes per checksum: a thread's piece of the check */
#define MAX_WEIGHTS 65536    /* bounds what a header may claim */
#define MIN_BYTES (16u << 20) /* smaller weights are packed in memory at every load (tens of ms) */
#define MAX_CHUNKS (1u << 22) /* 16 TiB of data */

typedef struct head {
    char magic[8];
    uint32_t version, n_weights;
    clf_gguf_id model;
    char layout[64];
    int32_t l0, l1;
    uint64_t data_off, data_bytes, chunk, n_chunks;
} head;

struct clf_wcache {
    char path[1200], tmp[1220];
    int building, lock_fd;
    unsigned char *map;
    size_t size;
    head h;
    const clf_wc_weight *w;
};

/* ---- helpers ---------------------------------------------------------------- */

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t header_bytes(uint64_t n_weights, uint64_t n_chunks) {
    return sizeof(head) + n_weights * sizeof(clf_wc_weight) + (n_chunks + 1) * sizeof(uint64_t);
}

/* The folder: $CLINFER_WEIGHT_CACHE, else <kernel cache>/weights; "" off. */
static void folder(const clf_runtime *rt, char *dir, size_t n) {
    const char *env = getenv("CLINFER_WEIGHT_CACHE");
    if (env && *env) snprintf(dir, n, "%s", strcmp(env, "0") ? env : "");
    else if (rt->cache_dir[0]) snprintf(dir, n, "%s/weights", rt->cache_dir);
    else dir[0] = 0;
}

/* Checksums of the data's chunks, over the host's cores. */
typedef struct sum_job {
    const unsigned char *data;
    uint64_t bytes;
    uint64_t *sums;
} sum_job;

static void sum_some(void *ud, int64_t i0, int64_t i1) {
    const sum_job *j = ud;
    for (int64_t i = i0; i < i1; i++) {
        const uint64_t at = (uint64_t)i * CHUNK, n = j->bytes - at < CHUNK ? j->bytes - at : CHUNK;
        j->sums[i] = XXH3_64bits(j->data + at, n);
    }
}

static void checksum(const unsigned char *data, uint64_t bytes, uint64_t n_chunks, uint64_t *sums) {
    sum_job j = {data, bytes, sums};
    clf_parallel_for((int64_t)n_chunks, 1, sum_some, &j);
}

/* The header as it should be for these weights (offsets laid out here). */
static void plan(const clf_gguf_id *id, const char *layout, int l0, int l1, clf_wc_weight *w, int n, head *h) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    h->version = VERSION;
    h->n_weights = (uint32_t)n;
    h->model = *id;
    snprintf(h->layout, sizeof h->layout, "%s", layout);
    h->l0 = l0;
    h->l1 = l1;
    h->chunk = CHUNK;
    uint64_t data = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            w[i].off[k] = w[i].bytes[k] ? data : 0;
            data = align_up(data + w[i].bytes[k], PAGE);
        }
    h->data_bytes = data;
    h->n_chunks = (data + CHUNK - 1) / CHUNK;
    h->data_off = align_up(header_bytes((uint64_t)n, h->n_chunks), PAGE);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++)
            if (w[i].bytes[k]) w[i].off[k] += h->data_off;
}

/* ---- using an entry -------------------------------------------------------- */

/* The entry at wc->path checked against the expected header and weights
 * and mapped: CLF_OK, or an error saying what is wrong with it (*absent:
 * there is none). */
static clf_status map_entry(clf_wcache *wc, const head *want, const clf_wc_weight *w, int *absent) {
    int fd = open(wc->path, O_RDONLY | O_CLOEXEC);
    *absent = fd < 0 && errno == ENOENT;
    if (fd < 0) return clf_fail(CLF_ERR_IO, "unreadable (%s)", strerror(errno));
    struct stat sb;
    const size_t hb = header_bytes(want->n_weights, want->n_chunks);
    unsigned char *hdr = malloc(hb);
    clf_status st = CLF_OK;
    if (!hdr) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    else if (fstat(fd, &sb) != 0) st = clf_fail(CLF_ERR_IO, "cannot stat: %s", strerror(errno));
    else if ((uint64_t)sb.st_size < sizeof(head) || pread(fd, hdr, sizeof(head), 0) != (ssize_t)sizeof(head))
        st = clf_fail(CLF_ERR_FORMAT, "truncated (%lld bytes)", (long long)sb.st_size);
    head h;
    if (st == CLF_OK) {
        memcpy(&h, hdr, sizeof h);
        if (memcmp(h.magic, MAGIC, 8) || h.version != VERSION)
            st = clf_fail(CLF_ERR_FORMAT, "foreign (not a version %u entry of this machine)", VERSION);
        else if (memcmp(&h.model, &want->model, sizeof h.model))
            st = clf_fail(CLF_ERR_FORMAT, "stale (the model file changed since it was packed)");
        else if (memcmp(&h, want, sizeof h))
            st = clf_fail(CLF_ERR_FORMAT, "foreign (another layout, layer range or version of the weights)");
        else if ((uint64_t)sb.st_size != h.data_off + h.data_bytes)
            st = clf_fail(CLF_ERR_FORMAT, "truncated (%lld of %llu bytes)", (long long)sb.st_size,
                          (unsigned long long)(h.data_off + h.data_bytes));
        else if (pread(fd, hdr, hb, 0) != (ssize_t)hb)
            st = clf_fail(CLF_ERR_FORMAT, "truncated header");
    }
    if (st == CLF_OK) {
        uint64_t self;
        memcpy(&self, hdr + hb - sizeof self, sizeof self);
        if (XXH3_64bits(hdr, hb - sizeof self) != self) st = clf_fail(CLF_ERR_FORMAT, "damaged (its header's checksum)");
        else if (memcmp(hdr + sizeof h, w, h.n_weights * sizeof *w))
            st = clf_fail(CLF_ERR_FORMAT, "foreign (other weights)");
    }
    if (st == CLF_OK) {
        wc->size = (size_t)sb.st_size;
        wc->map = mmap(NULL, wc->size, PROT_READ, MAP_SHARED, fd, 0);
        if (wc->map == MAP_FAILED) {
            wc->map = NULL;
            st = clf_fail(CLF_ERR_IO, "cannot map: %s", strerror(errno));
        }
    }
    if (st == CLF_OK) { /* every chunk against its checksum: the pages come in as they are read */
        madvise(wc->map + h.data_off, h.data_bytes, MADV_WILLNEED);
        uint64_t *sums = malloc(h.n_chunks * sizeof *sums + 1);
        if (!sums) st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        else {
            checksum(wc->map + h.data_off, h.data_bytes, h.n_chunks, sums);
            for (uint64_t i = 0; i < h.n_chunks && st == CLF_OK; i++) {
                uint64_t want_sum;
                memcpy(&want_sum, hdr + sizeof h + h.n_weights * sizeof *w + i * sizeof want_sum, sizeof want_sum);
                if (sums[i] != want_sum)
                    st = clf_fail(CLF_ERR_FORMAT, "damaged (bytes %llu-%llu differ from their checksum)",
                                  (unsigned long long)(h.data_off + i * CHUNK),
                                  (unsigned long long)(h.data_off + (i + 1) * CHUNK - 1));
            }
            free(sums);
        }
        if (st != CLF_OK) {
            munmap(wc->map, wc->size);
            wc->map = NULL;
        }
    }
    free(hdr);
    close(fd);
    if (st == CLF_OK) wc->h = h;
    return st;
}

/* ---- building one ------------------------------------------------------------ */

/* Under the entry's lock, a temporary file of it is a build that died
 * (killed, power lost): removed. */
static void remove_leftovers(const clf_wcache *wc, const char *dir) {
    const char *base = strrchr(wc->path, '/') + 1;
    const size_t nb = strlen(base);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (n > nb + 5 && !strncmp(e->d_name, base, nb) && e->d_name[nb] == '.' && !strcmp(e->d_name + n - 4, ".tmp")) {
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d) closedir(d);
}

/* A temporary file of the entry's size, its space reserved (a full disk
 * fails here, not as a SIGBUS while packing), mapped for writing: the
 * weights are packed straight into it on every core. (Packing into a
 * buffer and pwrite() measured slower: an 8B model's first load 22 s
 * against 13 s, most of it the kernel's copy into the page cache.) */
static clf_status create_tmp(clf_wcache *wc, const head *h) {
    snprintf(wc->tmp, sizeof wc->tmp, "%s.%ld.tmp", wc->path, (long)getpid());
    int fd = open(wc->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return clf_fail(CLF_ERR_IO, "cannot create %s: %s", wc->tmp, strerror(errno));
    wc->size = (size_t)(h->data_off + h->data_bytes);
    /* a file size limit (RLIMIT_FSIZE) raises SIGXFSZ, which would end the
     * process: blocked for the call and, when raised, taken back, leaving
     * EFBIG, the cache's failure and not the load's */
    sigset_t xfsz, old;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, &old);
    int e = posix_fallocate(fd, 0, (off_t)wc->size);
    if (e == EFBIG) {
        const struct timespec now = {0, 0};
        sigtimedwait(&xfsz, NULL, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    clf_status st = CLF_OK;
    if (e) st = clf_fail(CLF_ERR_IO, "no room for %.1f MiB in %s: %s", wc->size / 1048576.0, wc->tmp, strerror(e));
    if (st == CLF_OK) {
        wc->map = mmap(NULL, wc->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (wc->map == MAP_FAILED) {
            wc->map = NULL;
            st = clf_fail(CLF_ERR_IO, "cannot map %s: %s", wc->tmp, strerror(errno));
        }
    }
    close(fd);
    if (st != CLF_OK) unlink(wc->tmp);
    return st;
}

clf_status clf_wcache_done(clf_wcache *wc) {
    if (!wc || !wc->building) return CLF_OK;
    const head *h = &wc->h;
    const size_t hb = header_bytes(h->n_weights, h->n_chunks);
    unsigned char *hdr = wc->map;
    memcpy(hdr, h, sizeof *h);
    memcpy(hdr + sizeof *h, wc->w, h->n_weights * sizeof *wc->w);
    checksum(wc->map + h->data_off, h->data_bytes, h->n_chunks, (uint64_t *)(void *)(hdr + sizeof *h + h->n_weights * sizeof *wc->w));
    const uint64_t self = XXH3_64bits(hdr, hb - sizeof self);
    memcpy(hdr + hb - sizeof self, &self, sizeof self);
    clf_status st = CLF_OK;
    if (rename(wc->tmp, wc->path) != 0) {
        st = clf_fail(CLF_ERR_IO, "cannot publish %s: %s", wc->path, strerror(errno));
        unlink(wc->tmp);
    }
    mprotect(wc->map, wc->size, PROT_READ);
    wc->building = 0;
    if (wc->lock_fd >= 0) close(wc->lock_fd); /* releases the flock */
    wc->lock_fd = -1;
    return st;
}

/* ---- opening ----------------------------------------------------------------- */

static void wc_free(clf_wcache *wc) {
    if (!wc) return;
    if (wc->map) munmap(wc->map, wc->size);
    if (wc->building) unlink(wc->tmp);
    if (wc->lock_fd >= 0) close(wc->lock_fd);
    free(wc);
}

clf_status clf_wcache_open(clf_runtime *rt, const clf_gguf *g, const char *layout, int l0, int l1,
                           clf_wc_weight *w, int n, clf_wcache **out) {
    *out = NULL;
    char dir[1100];
    folder(rt, dir, sizeof dir);
    clf_gguf_id id;
    const char *model;
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += w[i].bytes[0] + w[i].bytes[1];
    /* off; a model in memory (nothing to key it by); or one packed in
     * milliseconds, whose entry would only be one more file */
    if (!dir[0] || n <= 0 || n > MAX_WEIGHTS || bytes < MIN_BYTES || clf_gguf_identity(g, &id, &model) != CLF_OK)
        return CLF_OK;
    clf_wcache *wc = calloc(1, sizeof *wc);
    if (!wc) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    wc->lock_fd = -1;
    wc->w = w;
    head want;
    plan(&id, layout, l0, l1, w, n, &want);
    /* the entry's name: the model's path, layout and range (its identity is
     * checked inside, so a changed file replaces its entry) */
    char real[4096];
    uint64_t key = clf_fnv1a_str(CLF_FNV1A_SEED, realpath(model, real) ? real : model);
    key = clf_fnv1a_str(key, layout);
    key = clf_fnv1a(key, &want.l0, sizeof want.l0 * 2);
    snprintf(wc->path, sizeof wc->path, "%s/%016llx.pack", dir, (unsigned long long)key);

    int absent;
    clf_status st = map_entry(wc, &want, w, &absent);
    if (st == CLF_OK) goto ready;
    char why[300];
    snprintf(why, sizeof why, "%s", clf_last_error());
    /* build it, under the entry's lock; whoever held the lock before us may
     * have built it meanwhile */
    char lock[1220];
    snprintf(lock, sizeof lock, "%s.lock", wc->path);
    mkdir(dir, 0755); /* where it exists already, or cannot be made, the lock's open says */
    wc->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (wc->lock_fd < 0) {
        clf_runtime_notice(rt, "packing the weights in memory: the cache folder %s is not writable (%s)", dir,
                           strerror(errno));
        goto memory;
    }
    if (flock(wc->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        clf_runtime_notice(rt, "waiting for another process packing %s", wc->path);
        if (flock(wc->lock_fd, LOCK_EX) != 0) goto memory;
        int gone;
        st = map_entry(wc, &want, w, &gone);
        if (st == CLF_OK) {
            close(wc->lock_fd);
            wc->lock_fd = -1;
            goto ready;
        }
    }
    remove_leftovers(wc, dir);
    st = create_tmp(wc, &want);
    if (st != CLF_OK) {
        clf_runtime_notice(rt, "packing the weights in memory: %s", clf_last_error());
        goto memory;
    }
    if (absent)
        clf_runtime_notice(rt, "packing the weights once into %s (%.1f MiB; CLINFER_WEIGHT_CACHE=0: in memory)",
                           wc->path, wc->size / 1048576.0);
    else clf_runtime_notice(rt, "the packed weights %s are %s: packing them again", wc->path, why);
    wc->h = want;
    wc->building = 1;
ready:
    *out = wc;
    return CLF_OK;
memory:
    wc_free(wc);
    return CLF_OK;
}

int clf_wcache_building(const clf_wcache *wc) { return wc->building; }

void clf_wcache_slot(const clf_wcache *wc, int i, void **main, void **aux) {
    *main = wc->map + wc->w[i].off[0];
    *aux = wc->w[i].bytes[1] ? wc->map + wc->w[i].off[1] : NULL;
}

void clf_wcache_drop(clf_wcache *wc, int i) {
    for (int k = 0; k < 2; k++)
        if (wc->w[i].bytes[k]) /* page-aligned (plan): a hint, its failure costs memory only */
            madvise(wc->map + wc->w[i].off[k], align_up(wc->w[i].bytes[k], PAGE), MADV_DONTNEED);
}

clf_status clf_wcache_lock(clf_wcache *wc) {
    if (mlock(wc->map, wc->size) != 0)
        return clf_fail(CLF_ERR_MEMORY, "cannot lock %.1f MiB of weights in memory: %s (see ulimit -l)",
                        wc->size / 1048576.0, strerror(errno));
    return CLF_OK;
}

void clf_wcache_close(clf_wcache *wc) { wc_free(wc); }

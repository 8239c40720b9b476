/* GGUF reader (mmap'd, every count, length, offset and size validated
 * against the file before use). The writer, which only `quantize` and the
 * tests need, is tools/quantize/gguf_write.h. */
#ifndef CLF_GGUF_H
#define CLF_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"
#include "status.h"
#include "str.h"

typedef enum clf_gguf_vtype {
    CLF_GGUF_UINT8 = 0, CLF_GGUF_INT8 = 1, CLF_GGUF_UINT16 = 2, CLF_GGUF_INT16 = 3,
    CLF_GGUF_UINT32 = 4, CLF_GGUF_INT32 = 5, CLF_GGUF_FLOAT32 = 6, CLF_GGUF_BOOL = 7,
    CLF_GGUF_STRING = 8, CLF_GGUF_ARRAY = 9, CLF_GGUF_UINT64 = 10, CLF_GGUF_INT64 = 11,
    CLF_GGUF_FLOAT64 = 12,
} clf_gguf_vtype;

/* A string inside the file: not NUL-terminated. */
typedef clf_str clf_gguf_str;

typedef struct clf_gguf_kv {
    clf_gguf_str key;
    clf_gguf_vtype type;
    /* Scalars and strings: `data` points at the value in the file (strings:
     * use `str`). Arrays: arr_type, arr_n, and `data` at the first element;
     * string arrays also get `strs`, an index of arr_n strings. */
    const void *data;
    clf_gguf_str str;
    clf_gguf_vtype arr_type;
    uint64_t arr_n;
    const clf_gguf_str *strs;
    /* Bytes at `data` as stored: a scalar's size, a string's length, an
     * array's elements (with their length prefixes or nested headers). */
    uint64_t data_bytes;
} clf_gguf_kv;

typedef struct clf_gguf_tensor {
    clf_gguf_str name;
    uint32_t n_dims;
    int64_t ne[4]; /* unused dims are 1 */
    clf_type type;
    uint64_t offset; /* from the start of the data section */
    size_t bytes;
    const void *data; /* into the mapping */
} clf_gguf_tensor;

typedef struct clf_gguf clf_gguf;

/* Maps the file (clf_open_regular: a FIFO or a device is refused). */
clf_status clf_gguf_open(const char *path, clf_gguf **out);
/* Parses a buffer that the caller keeps alive (fuzzing, tests). */
clf_status clf_gguf_open_memory(const void *data, size_t size, clf_gguf **out);
void clf_gguf_close(clf_gguf *g);

/* A mapped file truncated or rewritten in place while it is read (a model
 * re-downloaded over itself) makes reads past its new end raise SIGBUS.
 * Between guard_begin and guard_end such reads see zeros instead (a SIGBUS
 * handler, installed for that span only, maps zero pages over the rest of
 * the mapping, in whichever thread read), and check and end report it:
 * CLF_ERR_FORMAT naming the file when a read faulted or the file's size is
 * no longer the size it had when opened. Loaders (weights, tokenizer) wrap
 * their reads in it and let its error replace their own. Pairs nest; one
 * file is guarded at a time (begin on a second file guards nothing, check
 * and end then compare sizes only); memory files are never guarded. */
void clf_gguf_guard_begin(const clf_gguf *g);
clf_status clf_gguf_guard_check(const clf_gguf *g);
clf_status clf_gguf_guard_end(const clf_gguf *g);

/* A mapped file's identity: what a cache of something derived from it
 * is keyed by (a replaced or rewritten file differs in one of them). */
typedef struct clf_gguf_id {
    uint64_t dev, ino, size;
    int64_t mtime_ns;
} clf_gguf_id;

/* The identity of the file as it is now, and its path as opened;
 * CLF_ERR_ARG for a memory GGUF (no file). */
clf_status clf_gguf_identity(const clf_gguf *g, clf_gguf_id *id, const char **path);

/* Drops bytes [p, p + n) of the mapping from the process's memory (the
 * whole pages inside): a tensor read once as it loads need not stay
 * resident beside its packed copy; a later read maps its pages again from
 * the page cache. Nothing for a memory GGUF. */
void clf_gguf_release(const clf_gguf *g, const void *p, size_t n);

uint32_t clf_gguf_version(const clf_gguf *g);
size_t clf_gguf_alignment(const clf_gguf *g);
size_t clf_gguf_size(const clf_gguf *g);        /* bytes of the file */
size_t clf_gguf_data_offset(const clf_gguf *g); /* start of the tensor data section */
/* FNV-1a of the bytes before the tensor data (the header, the metadata and
 * the tensor index): two files that differ there are not the same model
 * (MPI ranks compare it, not just the size). */
uint64_t clf_gguf_header_digest(const clf_gguf *g);
int64_t clf_gguf_n_kv(const clf_gguf *g);
const clf_gguf_kv *clf_gguf_kv_at(const clf_gguf *g, int64_t i);
const clf_gguf_kv *clf_gguf_find(const clf_gguf *g, const char *key); /* NULL if absent */
int64_t clf_gguf_n_tensors(const clf_gguf *g);
const clf_gguf_tensor *clf_gguf_tensor_at(const clf_gguf *g, int64_t i);
const clf_gguf_tensor *clf_gguf_find_tensor(const clf_gguf *g, const char *name);

/* Typed accessors: CLF_ERR_FORMAT naming the key when it is missing or of a
 * type that cannot hold the request (integers convert when in range). */
clf_status clf_gguf_get_u32(const clf_gguf *g, const char *key, uint32_t *out);
clf_status clf_gguf_get_i64(const clf_gguf *g, const char *key, int64_t *out);
clf_status clf_gguf_get_f32(const clf_gguf *g, const char *key, float *out);
clf_status clf_gguf_get_bool(const clf_gguf *g, const char *key, int *out);
clf_status clf_gguf_get_str(const clf_gguf *g, const char *key, clf_gguf_str *out);
/* Arrays: elem_type must match (for strings use get_strs). */
clf_status clf_gguf_get_arr(const clf_gguf *g, const char *key, clf_gguf_vtype elem_type,
                            const void **data, uint64_t *n);
clf_status clf_gguf_get_strs(const clf_gguf *g, const char *key, const clf_gguf_str **items, uint64_t *n);

/* "uint32", "string", ... ("unknown" out of range); element size in bytes
 * of a fixed-size type, 0 for string and array. */
const char *clf_gguf_vtype_name(clf_gguf_vtype t);
size_t clf_gguf_vtype_size(clf_gguf_vtype t);

#endif

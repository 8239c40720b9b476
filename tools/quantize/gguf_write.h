/* GGUF writer: a file built in memory, key by key and tensor by tensor,
 * written whole (for `quantize` and the tests; the library only reads). */
#ifndef CLF_GGUF_WRITE_H
#define CLF_GGUF_WRITE_H
#include "gguf.h"

typedef struct clf_gguf_writer clf_gguf_writer;

clf_status clf_gguf_writer_create(clf_gguf_writer **out);
void clf_gguf_writer_free(clf_gguf_writer *w);
clf_status clf_gguf_set_u32(clf_gguf_writer *w, const char *key, uint32_t v);
clf_status clf_gguf_set_f32(clf_gguf_writer *w, const char *key, float v);
clf_status clf_gguf_set_bool(clf_gguf_writer *w, const char *key, int v);
clf_status clf_gguf_set_str(clf_gguf_writer *w, const char *key, const char *v);
clf_status clf_gguf_set_arr(clf_gguf_writer *w, const char *key, clf_gguf_vtype elem_type, const void *data,
                            uint64_t n);
clf_status clf_gguf_set_strs(clf_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* Copies a key/value read from another file (any type, arrays included). */
clf_status clf_gguf_set_kv(clf_gguf_writer *w, const clf_gguf_kv *kv);
/* Adds a tensor; `data` (clf_row_bytes(type, ne[0]) * rows bytes) is copied. */
clf_status clf_gguf_add_tensor(clf_gguf_writer *w, const char *name, clf_type type, uint32_t n_dims,
                               const int64_t *ne, const void *data);
/* The same without the copy: the writer takes `data` (malloc'd) and frees
 * it, also on failure. For large conversions (quantize). */
clf_status clf_gguf_add_tensor_take(clf_gguf_writer *w, const char *name, clf_type type, uint32_t n_dims,
                                    const int64_t *ne, void *data);
/* A stop request (e.g. a flag set by a signal handler), checked before
 * each write: when fn(ud) returns non-zero, clf_gguf_write stops with
 * CLF_ERR_INTERRUPTED and leaves nothing. */
void clf_gguf_writer_set_abort(clf_gguf_writer *w, int (*fn)(void *), void *ud);
/* set_* of an existing key replaces its value in place (keeping the order).
 * Writes version 3 with general.alignment (default 32, or the value set)
 * through clf_outfile (tools/quantize/outfile.h): the file at `path` (a link's target;
 * never a device, FIFO or directory) appears or is replaced only when
 * complete, and a failure or a fatal signal leaves nothing behind. */
clf_status clf_gguf_write(clf_gguf_writer *w, const char *path);

#endif

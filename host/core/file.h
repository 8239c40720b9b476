/* Opening files the library reads (models, texts) without blocking on
 * what is not a file: a FIFO or a device would make open() or read() wait
 * forever. */
#ifndef CLF_FILE_H
#define CLF_FILE_H

#include <stddef.h>

#include "status.h"

/* Opens `path` read-only (close-on-exec) and refuses anything but a regular
 * file: CLF_ERR_IO "'path' is not a regular file" ("is a directory" for a
 * directory). The open does not block (O_NONBLOCK, cleared on success).
 * *fd_out is the descriptor, or -1 on failure. */
clf_status clf_open_regular(const char *path, int *fd_out);

/* A regular file's whole contents (clf_open_regular's rule) into a
 * malloc'd, NUL-terminated *data of *len bytes (without the NUL). */
clf_status clf_read_file(const char *path, char **data, size_t *len);

#endif

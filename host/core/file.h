/* Opening input files without surprises: a FIFO or a device named where a
 * file is expected is refused instead of blocking. */
#ifndef CLF_FILE_H
#define CLF_FILE_H

#include "status.h"

/* Opens `path` read-only (O_CLOEXEC) without blocking on a FIFO or a device:
 * anything but a regular file is CLF_ERR_IO ("'%s' is not a regular file",
 * or "... is a directory"). *fd_out is a blocking fd on success. */
clf_status clf_open_regular(const char *path, int *fd_out);

#endif

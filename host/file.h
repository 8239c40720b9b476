/* Opening files without surprises: a FIFO or a device named where a file
 * is expected is refused instead of blocking or being replaced. */
#ifndef CLF_FILE_H
#define CLF_FILE_H

#include <sys/stat.h>

#include "status.h"

/* Opens `path` read-only (O_CLOEXEC) without blocking on a FIFO or a device:
 * anything but a regular file is CLF_ERR_IO ("'%s' is not a regular file",
 * or "... is a directory"). *fd_out is a blocking fd on success. */
clf_status clf_open_regular(const char *path, int *fd_out);

/* Where a write to `path` lands: path itself, or a symbolic link's final
 * target (written through: the link stays). *target is malloc'd; *exists
 * says whether a file is there now, *st is its stat then. An existing
 * target must be a regular file (CLF_ERR_IO otherwise): a write never
 * replaces a device, a FIFO or a directory. */
clf_status clf_output_target(const char *path, char **target, struct stat *st, int *exists);

#endif

#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The message for an existing path that is not a regular file. */
static clf_status not_regular(const char *path, mode_t mode) {
    if (S_ISDIR(mode)) return clf_fail(CLF_ERR_IO, "'%s' is a directory", path);
    return clf_fail(CLF_ERR_IO, "'%s' is not a regular file", path);
}

clf_status clf_open_regular(const char *path, int *fd_out) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO without a writer (or a tty, a tape) returns at once */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return clf_fail(CLF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    clf_status st = CLF_OK;
    if (fstat(fd, &sb) != 0) st = clf_fail(CLF_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = not_regular(path, sb.st_mode);
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
        st = clf_fail(CLF_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (st != CLF_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return CLF_OK;
}

clf_status clf_output_target(const char *path, char **target, struct stat *st, int *exists) {
    *target = NULL;
    *exists = 0;
    memset(st, 0, sizeof *st);
    struct stat lst;
    if (lstat(path, &lst) != 0) {
        if (errno != ENOENT) return clf_fail(CLF_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        if (!(*target = strdup(path))) return clf_fail(CLF_ERR_MEMORY, "out of memory");
        return CLF_OK;
    }
    if (S_ISLNK(lst.st_mode)) {
        if (!(*target = realpath(path, NULL)))
            return clf_fail(CLF_ERR_IO, "cannot follow the link '%s': %s", path, strerror(errno));
        if (stat(*target, st) != 0) {
            clf_status s = clf_fail(CLF_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            free(*target);
            *target = NULL;
            return s;
        }
    } else {
        *st = lst;
        if (!(*target = strdup(path))) return clf_fail(CLF_ERR_MEMORY, "out of memory");
    }
    if (!S_ISREG(st->st_mode)) {
        free(*target);
        *target = NULL;
        return not_regular(path, st->st_mode);
    }
    *exists = 1;
    return CLF_OK;
}

#include "file.h"
#include "buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

clf_status clf_open_regular(const char *path, int *fd_out) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return clf_fail(CLF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    clf_status st = CLF_OK;
    int flags;
    if (fstat(fd, &sb) != 0) st = clf_fail(CLF_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode)) st = clf_fail(CLF_ERR_IO, "'%s' is a directory, not a file", path);
    else if (!S_ISREG(sb.st_mode)) st = clf_fail(CLF_ERR_IO, "'%s' is not a regular file", path);
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        st = clf_fail(CLF_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (st != CLF_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return CLF_OK;
}

clf_status clf_read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd;
    CLF_TRY(clf_open_regular(path, &fd));
    /* read into the buffer's spare room, at least 64 KiB of it each time */
    clf_buf b = {0};
    ssize_t got = 0;
    while (clf_buf_reserve(&b, 1 << 16) == CLF_OK && (got = read(fd, b.p + b.n, b.cap - b.n - 1)) > 0) {
        b.n += (size_t)got;
        b.p[b.n] = 0;
    }
    int err = got < 0 ? errno : 0;
    close(fd);
    if (b.failed) {
        clf_buf_free(&b);
        return clf_fail(CLF_ERR_MEMORY, "out of host memory reading '%s'", path);
    }
    if (err) {
        clf_buf_free(&b);
        return clf_fail(CLF_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    }
    *data = clf_buf_take(&b, len);
    return CLF_OK;
}

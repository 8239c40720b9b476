#include "file.h"

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
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    ssize_t got = 0;
    while (buf && (got = read(fd, buf + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    int err = got < 0 ? errno : 0;
    close(fd);
    if (!buf) return clf_fail(CLF_ERR_MEMORY, "out of host memory reading '%s'", path);
    if (err) {
        free(buf);
        return clf_fail(CLF_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return CLF_OK;
}

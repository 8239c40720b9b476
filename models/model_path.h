/* Which file -m names: a path, or a model of the catalogue (models/
 * catalogue.h) in the model cache, where `clinfer pull` (models/pull.c)
 * and models/fetch.sh put it. */
#ifndef CLF_MODEL_PATH_H
#define CLF_MODEL_PATH_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* `m` when given, else $CLINFER_MODEL, else the catalogue's default model.
 * A file that exists is used as it is; else a catalogue name is its file in
 * the cache ($CLINFER_MODEL_DIR, $XDG_CACHE_HOME/clinfer/models,
 * ~/.cache/clinfer/models), CLF_ERR_IO saying how to fetch it when absent;
 * a bare name (no '/', no .gguf) that is neither is CLF_ERR_IO listing the
 * catalogue; anything else is returned as the path (opening it reports it). */
clf_status clf_model_path(const char *m, char *buf, size_t n);

/* What clf_model_path names, with a catalogue model the cache lacks (or
 * holds at another size; or, with verify, with another SHA-256) fetched
 * first (clf_model_pull; progress as it documents). *fetched (may be
 * NULL): whether it was. */
typedef int (*clf_pull_progress)(void *ud, uint64_t done, uint64_t total);
clf_status clf_model_fetch(const char *m, int verify, clf_pull_progress progress, void *ud, char *buf, size_t n,
                           int *fetched);

#endif

/* Which file -m names: a path, or a model of the catalogue (models/
 * catalogue.h) in the model cache, where `clinfer pull` (pull/, outside
 * the library: clinfer_pull.h) and models/fetch.sh put it. No network here:
 * the library finds a model, it does not fetch one. */
#ifndef CLF_MODEL_PATH_H
#define CLF_MODEL_PATH_H

#include <stddef.h>

#include "status.h"

/* `m` when given, else $CLINFER_MODEL, else the catalogue's default model.
 * A file that exists is used as it is; else a catalogue name is its file in
 * the cache ($CLINFER_MODEL_DIR, $XDG_CACHE_HOME/clinfer/models,
 * ~/.cache/clinfer/models), CLF_ERR_IO saying how to fetch it when absent
 * (buf still holding that file: pull/fetch.c fetches it there);
 * a bare name (no '/', no .gguf) that is neither is CLF_ERR_IO listing the
 * catalogue; anything else is returned as the path (opening it reports it). */
clf_status clf_model_path(const char *m, char *buf, size_t n);

#endif

/* Where the default model lives (see models/fetch_default.sh). */
#ifndef CLF_MODEL_PATH_H
#define CLF_MODEL_PATH_H

#include <stddef.h>

#include "status.h"

#define CLF_DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

/* `m` when given, else $CLINFER_MODEL, else the default model in the cache
 * ($CLINFER_MODEL_DIR, $XDG_CACHE_HOME/clinfer/models, ~/.cache/clinfer/models).
 * A missing default is CLF_ERR_IO saying how to fetch it. */
clf_status clf_model_path(const char *m, char *buf, size_t n);

#endif

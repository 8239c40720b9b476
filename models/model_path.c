#include "model_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

clf_status clf_model_path(const char *m, char *buf, size_t n) {
    if (!m || !*m) m = getenv("CLINFER_MODEL");
    if (m && *m) {
        if ((size_t)snprintf(buf, n, "%s", m) >= n) return clf_fail(CLF_ERR_ARG, "model path too long: %.64s...", m);
        return CLF_OK;
    }
    const char *dir = getenv("CLINFER_MODEL_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(buf, n, "%s/%s", dir, CLF_DEFAULT_MODEL);
    else if (xdg && *xdg) snprintf(buf, n, "%s/clinfer/models/%s", xdg, CLF_DEFAULT_MODEL);
    else snprintf(buf, n, "%s/.cache/clinfer/models/%s", home ? home : ".", CLF_DEFAULT_MODEL);
    if (access(buf, R_OK) != 0)
        return clf_fail(CLF_ERR_IO, "no -m given and the default model %s is not there; fetch it with "
                                    "`make model` (models/fetch_default.sh)", buf);
    return CLF_OK;
}

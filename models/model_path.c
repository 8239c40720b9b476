#include "model_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalogue.h"

static int is_path(const char *m) {
    size_t n = strlen(m);
    return strchr(m, '/') || (n >= 5 && !strcmp(m + n - 5, ".gguf"));
}

static clf_status put(char *buf, size_t n, const char *what, const char *a, const char *b) {
    if ((size_t)snprintf(buf, n, "%s%s", a, b) >= n) return clf_fail(CLF_ERR_ARG, "%s too long: %.64s...", what, a);
    return CLF_OK;
}

/* The file m names into buf; *e and *given set when it is a catalogue
 * model (*found 1), whose file may be absent. */
static clf_status resolve(const char *m, char *buf, size_t n, clf_catalogue_entry *e, int *given, int *found) {
    if (!m || !*m) m = getenv("CLINFER_MODEL");
    *given = m && *m;
    *found = 0;
    if (*given && access(m, F_OK) == 0) return put(buf, n, "model path", m, ""); /* a file wins over a name */
    if (!*given) {
        if (!clf_catalogue_at(0, e)) return clf_fail(CLF_ERR_IO, "no -m given and the catalogue is empty");
    } else if (!clf_catalogue_find(m, e)) {
        if (is_path(m)) return put(buf, n, "model path", m, "");
        char names[512];
        clf_catalogue_names(names, sizeof names);
        return clf_fail(CLF_ERR_IO, "no model file or catalogue name '%s' (the catalogue: %s)", m, names);
    }
    *found = 1;
    const char *dir = getenv("CLINFER_MODEL_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char folder[1024];
    if (dir && *dir) snprintf(folder, sizeof folder, "%s/", dir);
    else if (xdg && *xdg) snprintf(folder, sizeof folder, "%s/clinfer/models/", xdg);
    else snprintf(folder, sizeof folder, "%s/.cache/clinfer/models/", home ? home : ".");
    return put(buf, n, "model cache folder", folder, e->file);
}

clf_status clf_model_path(const char *m, char *buf, size_t n) {
    clf_catalogue_entry e;
    int given, found;
    CLF_TRY(resolve(m, buf, n, &e, &given, &found));
    if (!found || access(buf, R_OK) == 0) return CLF_OK;
    if (!given)
        return clf_fail(CLF_ERR_IO, "no -m given and the default model %s is not there; fetch it with `clinfer pull` "
                                    "(or `make model`)", buf);
    return clf_fail(CLF_ERR_IO, "model %s is not in the cache (%s); fetch it with `clinfer pull %s` "
                                "(or `make model MODEL=%s`)", e.name, buf, e.name, e.name);
}

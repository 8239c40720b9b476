/* The public API's model catalogue and clinfer_model_pull
 * (include/clinfer.h), over models/catalogue.h and models/pull.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "catalogue.h"
#include "model_path.h"

static int copy_out(const clf_catalogue_entry *e, clinfer_catalogue_model *out) {
    if (!out || out->size < sizeof *out) return 0; /* .size unset */
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    snprintf(out->name, sizeof out->name, "%s", e->name);
    snprintf(out->file, sizeof out->file, "%s", e->file);
    out->bytes = e->size;
    snprintf(out->sha256, sizeof out->sha256, "%s", e->sha256);
    out->instruct = e->instruct;
    return 1;
}

int clinfer_catalogue_get(int i, clinfer_catalogue_model *out) {
    clf_catalogue_entry e;
    return i >= 0 && clf_catalogue_at(i, &e) && copy_out(&e, out);
}

int clinfer_catalogue_of(const char *path, clinfer_catalogue_model *out) {
    clf_catalogue_entry e;
    if (!path || !*path) path = getenv("CLINFER_MODEL");
    if (!path || !*path) return clf_catalogue_at(0, &e) && copy_out(&e, out);
    if (clf_catalogue_find(path, &e)) return copy_out(&e, out);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int i = 0; clf_catalogue_at(i, &e); i++)
        if (!strcmp(e.file, base)) return copy_out(&e, out);
    return 0;
}

clinfer_pull_options clinfer_pull_default_options(void) {
    return (clinfer_pull_options){.size = sizeof(clinfer_pull_options)};
}

clinfer_status clinfer_model_pull(const char *path, const clinfer_pull_options *options, char *buf, size_t n,
                                  int *fetched) {
    API_NOT_NULL(buf);
    if (n == 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "clinfer_model_pull: no room");
    clinfer_pull_options o = clinfer_pull_default_options();
    API_TRY(api_read_params(&o, sizeof o, options, "clinfer_pull_options"));
    return (clinfer_status)clf_model_fetch(path, o.verify, (clf_pull_progress)o.progress, o.progress_user_data, buf, n,
                                           fetched);
}

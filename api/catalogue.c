/* The public API's model catalogue (include/clinfer.h), over
 * models/catalogue.h: what `clinfer pull` (pull/, clinfer_pull.h, outside
 * the library) reads to fetch a model, and -m NAME to find one. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "catalogue.h"

/* *e into the caller's struct, as far as its size goes (api_write_info);
 * 0 for a size short of the first version's fields (through instruct). */
static int copy_out(const clf_catalogue_entry *e, clinfer_catalogue_model *out) {
    if (!out || out->size < offsetof(clinfer_catalogue_model, packages)) return 0; /* .size unset */
    clinfer_catalogue_model c = {.size = sizeof c};
    snprintf(c.name, sizeof c.name, "%s", e->name);
    snprintf(c.file, sizeof c.file, "%s", e->file);
    c.bytes = e->size;
    snprintf(c.sha256, sizeof c.sha256, "%s", e->sha256);
    c.instruct = e->instruct;
    snprintf(c.packages, sizeof c.packages, "%s", e->packages);
    snprintf(c.version, sizeof c.version, "%s", e->version);
    c.concat = e->concat;
    return api_write_info(out, &c, sizeof c, "clinfer_catalogue_model") == CLF_OK;
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

/* clinfer_pull.h's functions: which file a model name means (clinfer.h's
 * clinfer_model_path and catalogue), and whether the cache holds it whole;
 * pull_model (pull.c, or pull_none.c) fetches it when not. Built either
 * way, so that a model already in the cache is found without the network's
 * libraries. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clinfer_pull.h"
#include "pull.h"

clinfer_pull_options clinfer_pull_default_options(void) {
    return (clinfer_pull_options){.size = sizeof(clinfer_pull_options)};
}

/* The caller's options over the defaults, as far as its size goes (the
 * library's rule for size-versioned structs, clinfer.h). */
static clinfer_status read_options(clinfer_pull_options *o, const clinfer_pull_options *given) {
    if (!given) return CLINFER_OK;
    size_t n = given->size;
    if (n < sizeof(size_t))
        return clinfer_fail(CLINFER_ERR_ARG, "clinfer_pull_options.size is %zu: set it to sizeof(clinfer_pull_options)",
                            n);
    if (n > sizeof *o) n = sizeof *o;
    memcpy((char *)o + sizeof(size_t), (const char *)given + sizeof(size_t), n - sizeof(size_t));
    return CLINFER_OK;
}

/* Whether m (NULL or "": $CLINFER_MODEL, else the default) names a model
 * of the catalogue, into *c; as clinfer_model_path decides: a file that
 * exists wins over a name, and a name is a catalogue model's exact name
 * (clinfer_catalogue_of also takes a file's base name: not here, where
 * such a path is used as it is). */
static int catalogued(const char *m, clinfer_catalogue_model *c) {
    if (!m || !*m) m = getenv("CLINFER_MODEL");
    if (!m || !*m) return clinfer_catalogue_of(NULL, c); /* the default */
    if (access(m, F_OK) == 0) return 0;
    return clinfer_catalogue_of(m, c) && !strcmp(c->name, m);
}

clinfer_status clinfer_model_pull(const char *path, const clinfer_pull_options *options, char *buf, size_t n,
                                  int *fetched) {
    if (fetched) *fetched = 0;
    if (!buf) return clinfer_fail(CLINFER_ERR_ARG, "%s: buf is NULL", __func__);
    if (n == 0) return clinfer_fail(CLINFER_ERR_ARG, "clinfer_model_pull: no room");
    clinfer_pull_options o = clinfer_pull_default_options();
    PULL_TRY(read_options(&o, options));
    /* the file it names; a catalogue model the cache lacks is CLINFER_ERR_IO
     * with its path in buf (clinfer.h), which is what is fetched */
    clinfer_catalogue_model c = {.size = sizeof c};
    clinfer_status st = clinfer_model_path(path, buf, n);
    if (!catalogued(path, &c)) return st; /* a path, or an error naming the catalogue */
    if (st != CLINFER_OK && st != CLINFER_ERR_IO) return st;
    /* in the cache already: a size check costs nothing; a hash reads it all */
    struct stat sb;
    if (stat(buf, &sb) == 0 && (uint64_t)sb.st_size == c.bytes) {
        char hex[65];
        if (!o.verify) return CLINFER_OK;
        PULL_TRY(pull_file_sha256(buf, hex));
        if (!strcmp(hex, c.sha256)) return CLINFER_OK;
    }
    PULL_TRY(pull_model(&c, buf, o.progress, o.progress_user_data));
    if (fetched) *fetched = 1;
    return CLINFER_OK;
}

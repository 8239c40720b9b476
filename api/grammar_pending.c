/* TEMPORARY (branch i28-tools): the JSON Schema converter lands on main
 * (branch i28-schema); until merged, this fails clearly. Removed at the
 * merge. */
#include "api.h"

clinfer_status clinfer_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
    (void)schema, (void)len;
    *gbnf = NULL;
    return (clinfer_status)clf_fail(CLF_ERR_ARG, "JSON Schema grammars are not built yet");
}

/* The public API (include/clinfer.h): a JSON Schema as GBNF
 * (text/grammar/json_schema.c). */
#include "api.h"
#include "json_schema.h"

clinfer_status clinfer_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
    API_NOT_NULL(schema);
    API_NOT_NULL(gbnf);
    return (clinfer_status)clf_json_schema_to_gbnf(schema, len, gbnf);
}

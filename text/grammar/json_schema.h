/* JSON Schema -> GBNF (llama.cpp's grammar format, start rule `root`): the
 * grammar for clinfer_json_schema_to_gbnf and the server's response_format.
 *
 * The grammar admits the JSON texts that validate (JSON Schema 2020-12,
 * refs local), spelled the way a JSON writer spells them: object members
 * in the order the schema lists its properties (additional ones after),
 * whitespace between tokens bounded (`space` below), numbers of at most 20
 * integral and 20 fraction digits (a number bounded other than by a lone
 * 0: no exponent and at most 6 fraction digits), strings whose value a keyword constrains
 * (enum, const, pattern, format, a property name) in their plain spelling
 * (no \u escape for a character that needs none). docs/library.md lists
 * the keywords; one it cannot enforce is CLF_ERR_ARG naming the keyword and
 * its JSON pointer, as is a schema that no value satisfies. */
#ifndef CLF_JSON_SCHEMA_H
#define CLF_JSON_SCHEMA_H

#include <stddef.h>

#include "status.h"

/* schema[0, len): JSON text; *gbnf: malloc'd, NUL-terminated. */
clf_status clf_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf);

#endif

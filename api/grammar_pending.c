/* TEMPORARY (branch i28-tools): the grammar engine and the JSON Schema
 * converter land on main; until merged, these fail clearly. Removed at
 * the merge. */
#include "api.h"

clinfer_status clinfer_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
    (void)schema, (void)len;
    *gbnf = NULL;
    return (clinfer_status)clf_fail(CLF_ERR_ARG, "JSON Schema grammars are not built yet");
}
clinfer_status clinfer_grammar_create(const clinfer_model *m, const char *gbnf, size_t len, const char *root,
                                      clinfer_grammar **out) {
    (void)m, (void)gbnf, (void)len, (void)root;
    *out = NULL;
    return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammars are not built yet");
}
void clinfer_grammar_free(clinfer_grammar *g) { (void)g; }
clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *smp, clinfer_grammar *g) {
    (void)smp, (void)g;
    return (clinfer_status)clf_fail(CLF_ERR_ARG, "grammars are not built yet");
}

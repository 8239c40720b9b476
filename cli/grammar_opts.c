#include "grammar_opts.h"

#include <string.h>

clinfer_status cli_grammar_load(const clinfer_model *m, const cli_grammar_opts *o, clinfer_grammar **out) {
    *out = NULL;
    int given = !!o->gbnf + !!o->gbnf_file + !!o->json_schema;
    if (given > 1) return clinfer_fail(CLINFER_ERR_ARG, "--grammar, --grammar-file and --json-schema: give one");
    if (!given) return CLINFER_OK;
    char *text = NULL, *gbnf = NULL;
    size_t len = 0;
    clinfer_status st = CLINFER_OK;
    if (o->gbnf) {
        len = strlen(o->gbnf);
    } else if (o->gbnf_file) {
        st = clinfer_read_file(o->gbnf_file, &text, &len);
    } else {
        const char *s = o->json_schema;
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (*s == '{') st = clinfer_json_schema_to_gbnf(s, strlen(s), &gbnf);
        else if ((st = clinfer_read_file(o->json_schema, &text, &len)) == CLINFER_OK)
            st = clinfer_json_schema_to_gbnf(text, len, &gbnf);
        if (st != CLINFER_OK) st = clinfer_fail_prefix(st, "--json-schema: ");
        else len = strlen(gbnf);
    }
    if (st == CLINFER_OK) {
        const char *g = o->gbnf ? o->gbnf : gbnf ? gbnf : text;
        st = clinfer_grammar_create(m, g, len, NULL, out);
    }
    clinfer_free(text);
    clinfer_free(gbnf);
    return st;
}

/* A JSON Schema's grammar, for tests/json_schema_cases.py:
 *
 *   schema_gbnf SCHEMA.json            prints the GBNF (exit 0), or the
 *                                      converter's error (exit 2)
 *   schema_gbnf SCHEMA.json TEXTS      compiles it; TEXTS holds one JSON
 *                                      string a line, each an instance's
 *                                      text; prints 1 (accepted) or 0 a line
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json_schema.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *n = len;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: schema_gbnf SCHEMA.json [TEXTS]\n");
        return 1;
    }
    size_t n;
    char *schema = slurp(argv[1], &n), *gbnf = NULL;
    if (!schema) {
        fprintf(stderr, "schema_gbnf: cannot read %s\n", argv[1]);
        return 1;
    }
    clf_status st = clf_json_schema_to_gbnf(schema, n, &gbnf);
    free(schema);
    if (st != CLF_OK) {
        printf("ERROR: %s\n", clf_last_error());
        return 2;
    }
    if (argc < 3) {
        fputs(gbnf, stdout);
        free(gbnf);
        return 0;
    }
    clf_grammar *g = NULL;
    st = clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g);
    if (st != CLF_OK) {
        printf("COMPILE: %s\n", clf_last_error());
        fputs(gbnf, stderr);
        free(gbnf);
        return 3;
    }
    free(gbnf);
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        fprintf(stderr, "schema_gbnf: cannot read %s\n", argv[2]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        json_error_t err;
        json_t *t = json_loadb(line, (size_t)len, JSON_DECODE_ANY, &err);
        if (!json_is_string(t)) {
            fprintf(stderr, "schema_gbnf: a line that is no JSON string: %s\n", err.text);
            return 1;
        }
        printf("%d\n", clf_grammar_accepts(g, json_string_value(t), json_string_length(t)));
        json_decref(t);
    }
    free(line);
    fclose(f);
    clf_grammar_free(g);
    return 0;
}

/* libFuzzer harness for the JSON Schema converter (text/grammar/
 * json_schema.c): the input up to its first NUL byte is a schema's text,
 * the rest a text for its grammar. The converter returns a grammar or an
 * error with a message, never a crash, a leak or a hang; a grammar it
 * returns compiles (the converter refuses what admits no value rather than
 * handing the engine an empty language) and reads the text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_schema = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t n_text = nul ? size - n_schema - 1 : 0;
    char *gbnf = NULL;
    if (clf_json_schema_to_gbnf((const char *)data, n_schema, &gbnf) != CLF_OK) {
        if (gbnf || !clf_last_error()[0]) abort(); /* a refusal leaves nothing and says why */
        return 0;
    }
    clf_grammar *g = NULL;
    if (clf_grammar_compile(gbnf, strlen(gbnf), NULL, &g) != CLF_OK) {
        fprintf(stderr, "the converter's grammar does not compile: %s\n%s\n", clf_last_error(), gbnf);
        abort();
    }
    (void)clf_grammar_accepts(g, text, n_text);
    clf_grammar_free(g);
    free(gbnf);
    return 0;
}

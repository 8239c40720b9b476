/* libFuzzer harness for the GBNF parser and automaton (text/
 * grammar*.c): the input up to its first NUL byte is a grammar, the rest
 * a text. A grammar compiles or is refused with a message, never a crash,
 * a leak or a hang; a compiled one reads the text byte by byte, and its
 * verdict on the whole text agrees with the step-by-step states. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_gbnf = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t n_text = nul ? size - n_gbnf - 1 : 0;
    clf_grammar *g = NULL;
    if (clf_grammar_compile((const char *)data, n_gbnf, NULL, &g) != CLF_OK) {
        if (g || !clf_last_error()[0]) abort(); /* a refusal leaves nothing and says why */
        return 0;
    }
    gstate a = {0}, b = {0};
    int alive = clf_gstate_start(g, &a) == CLF_OK;
    for (size_t i = 0; alive && i < n_text; i++) {
        if (clf_gstate_advance(g, &a, (unsigned char)text[i], &b) != CLF_OK) {
            alive = -1; /* too ambiguous: a refusal, not a verdict */
            break;
        }
        if (b.n_stacks == 0) alive = 0;
        /* a byte outside the tops' union is never taken */
        if (!gset_has(a.tops, (unsigned char)text[i]) && b.n_stacks) abort();
        gstate t = a;
        a = b;
        b = t;
    }
    if (alive >= 0 && clf_grammar_accepts(g, text, n_text) != (alive == 1 && a.accepting)) abort();
    clf_gstate_free(&a);
    clf_gstate_free(&b);
    clf_grammar_free(g);
    return 0;
}

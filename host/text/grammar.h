/* GBNF grammars (llama.cpp's format) compiled into a pushdown automaton
 * over bytes, and the token masks it allows for a vocabulary.
 *
 * A grammar's rules become one flat array of elements; every character
 * class, UTF-8 included, is lowered to sequences of byte sets, so the
 * automaton reads bytes as tokens hold them. A state is a set of stacks;
 * a stack is the positions to return to, its top a byte-set element (an
 * empty stack: the sentence is complete). */
#ifndef CLF_GRAMMAR_H
#define CLF_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct clf_grammar clf_grammar;

/* Parses and checks gbnf[0, len) (root: the start rule, NULL "root"):
 * CLF_ERR_ARG with line:column for a syntax error, an undefined rule, left
 * recursion or an empty language. */
clf_status clf_grammar_compile(const char *gbnf, size_t len, const char *root, clf_grammar **out);
void clf_grammar_free(clf_grammar *g);

/* Whether text[0, n) is a whole sentence (1) of g's language, else 0: for
 * tests and checkers (it walks the automaton byte by byte). */
int clf_grammar_accepts(const clf_grammar *g, const char *text, size_t n);

#endif

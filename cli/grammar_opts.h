/* --grammar, --grammar-file and --json-schema (llama.cpp's names): the
 * grammar a command's sampler is held to. */
#ifndef CLF_GRAMMAR_OPTS_H
#define CLF_GRAMMAR_OPTS_H

#include "clinfer.h"

typedef struct cli_grammar_opts {
    const char *gbnf;        /* --grammar TEXT */
    const char *gbnf_file;   /* --grammar-file FILE */
    const char *json_schema; /* --json-schema SCHEMA|FILE: JSON text when it starts with '{', else a file */
} cli_grammar_opts;

#define CLI_GRAMMAR_USAGE "[--grammar GBNF | --grammar-file FILE | --json-schema SCHEMA|FILE]"
#define CLI_GRAMMAR_OPTIONS(o) \
    CLI_OPT_TEXT("--grammar", &(o)->gbnf), CLI_OPT_STR("--grammar-file", &(o)->gbnf_file), \
    CLI_OPT_STR("--json-schema", &(o)->json_schema)

/* The grammar asked for (*out NULL when none); more than one is a usage
 * error (CLINFER_ERR_ARG). */
clinfer_status cli_grammar_load(const clinfer_model *m, const cli_grammar_opts *o, clinfer_grammar **out);

#endif

/* A Jinja engine for chat templates: runs a GGUF's tokenizer.chat_template
 * as Python's jinja2 does in Hugging Face's apply_chat_template
 * (trim_blocks, lstrip_blocks, loop controls, the {% generation %} tag,
 * tojson as transformers overrides it, raise_exception, strftime_now), so
 * that the rendering is byte-identical to jinja2's. The language is the
 * part real templates use (tests/data/templates/ is the corpus).
 *
 * A template is untrusted input (it comes with a GGUF): its size, the
 * nesting of its statements and expressions, loop iterations, macro
 * recursion, the output's size, the memory a rendering allocates and its
 * total work steps are bounded; passing one is a CLF_ERR_FORMAT naming the
 * bound. Nothing crashes, nothing hangs. */
#ifndef CLF_JINJA_H
#define CLF_JINJA_H

#include <stddef.h>
#include <time.h>

#include "status.h"

typedef struct clf_jinja_limits {
    size_t max_template;   /* bytes of template text */
    int max_depth;         /* nesting of statements, expressions, calls */
    long max_iterations;   /* loop iterations in one rendering, all loops */
    int max_recursion;     /* nested macro calls */
    size_t max_output;     /* bytes of output, and of any one string */
    size_t max_memory;     /* bytes the rendering allocates, all told */
    long max_steps;        /* evaluation steps of one rendering */
} clf_jinja_limits;

/* The defaults: 1 MiB template, depth 200, 1e6 iterations, recursion 100,
 * 4 MiB output, 512 MiB memory (a loop iteration takes about 200 bytes),
 * 5e7 steps. */
void clf_jinja_default_limits(clf_jinja_limits *l);

typedef struct clf_jinja_template clf_jinja_template;

/* Parses a template (len bytes; need not be NUL-terminated). A syntax error
 * is CLF_ERR_FORMAT with the line (an unknown filter or test fails when it
 * runs). limits NULL: the defaults. */
clf_status clf_jinja_parse(const char *text, size_t len, const clf_jinja_limits *limits, clf_jinja_template **out);
void clf_jinja_free(clf_jinja_template *t);

/* Renders t (parsed once, rendered any number of times) with the variables of context_json (a JSON object: messages,
 * tools, add_generation_prompt, bos_token, ...; objects keep their order).
 * now: the time strftime_now formats (UTC), or 0 for the local time now.
 * *out is malloc'd, NUL-terminated, *out_len bytes. A template's
 * raise_exception("msg") is CLF_ERR_FORMAT with the message exactly
 * "msg" (clf_last_error()); other errors name what failed. t is only
 * read: a rendering's values, scopes, counters and output live in its own
 * arena (the tree's constants are scalars no rendering changes, and lists
 * and dicts cannot be changed in place), so several threads may render one
 * t at once. */
clf_status clf_jinja_render(const clf_jinja_template *t, const char *context_json, time_t now, char **out,
                            size_t *out_len);

/* Whether the last clf_jinja_render failure came from the template's own
 * raise_exception (its message is then clf_last_error() verbatim). */
int clf_jinja_last_was_raise(void);

#endif

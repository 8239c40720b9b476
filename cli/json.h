/* The one JSON string writer of the commands' --json outputs: quotes,
 * backslashes and control characters escaped; other bytes (UTF-8) as they
 * are. */
#ifndef CLF_CLI_JSON_H
#define CLF_CLI_JSON_H

#include <stddef.h>
#include <stdio.h>

/* `n` bytes of s (GGUF strings are not NUL-terminated) as a JSON string. */
void cli_json_strn(FILE *f, const char *s, size_t n);
void cli_json_str(FILE *f, const char *s);

#endif

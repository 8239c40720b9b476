#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_error(int st) {
    if (st == CLINFER_OK) return 0;
    fprintf(stderr, "clinfer: %s: %s\n", clinfer_status_name((clinfer_status)st), clinfer_last_error());
    return (int)st;
}

int cli_close_stdout(int status) {
    errno = 0;
    int failed = ferror(stdout) | fflush(stdout);
    int err = errno;
    if (fclose(stdout) != 0 && !failed) failed = 1, err = errno;
    if (!failed || status != 0) return status; /* a failed command has said why already */
    return cli_error(clinfer_fail(CLINFER_ERR_IO, "cannot write to stdout: %s", err ? strerror(err) : "write error"));
}

int cli_usage(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "clinfer: %s: ", clinfer_status_name(CLINFER_ERR_ARG));
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s\n", usage);
    va_end(ap);
    return CLINFER_ERR_ARG;
}

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

clinfer_status cli_check_chat(const clinfer_model *m) {
    /* one user message: the least a template renders (an empty conversation fails gpt-oss's, Granite's,
     * Command R's and Mistral Nemo's templates, as under jinja2: they read messages[0]) */
    char *text = NULL;
    size_t len;
    const clinfer_chat_message one = {"user", "Hello"};
    clinfer_status st = clinfer_chat_apply(m, &one, 1, 0, &text, &len);
    clinfer_free(text);
    if (st == CLINFER_OK || st == CLINFER_ERR_MEMORY) return st;
    /* a tool-use template (Command R+'s) renders only with tools: one offered, it serves tool requests */
    static const char TOOL[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"f\","
                               "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
    char *first = strdup(clinfer_last_error());
    clinfer_tools *t = NULL;
    const clinfer_tool_message tm = {"user", "Hello", NULL, 0, NULL};
    clinfer_status st2 = clinfer_tools_create(m, TOOL, sizeof TOOL - 1, &t);
    if (st2 == CLINFER_OK) st2 = clinfer_tools_chat_apply(m, t, &tm, 1, 0, &text, &len);
    clinfer_free(text);
    clinfer_tools_free(t);
    if (st2 != CLINFER_OK && first) clinfer_fail(st, "%s", first); /* the plain conversation's words */
    free(first);
    return st2 == CLINFER_OK ? CLINFER_OK : st;
}

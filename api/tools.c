/* The public API's tool calls (include/clinfer.h "tool calls") on
 * text/chat/tools.c, and their grammar on the JSON Schema converter and
 * the grammar engine. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "chat.h"
#include "tools.h"

struct clinfer_tools {
    const clinfer_model *m;
    clf_chat chat;
    clf_tools *t;
};

/* The parse results are the library's own structs, handed out as they are. */
_Static_assert(sizeof(clinfer_tool_parsed) == sizeof(clf_tool_parsed) &&
                   offsetof(clinfer_tool_parsed, arguments) == offsetof(clf_tool_parsed, arguments) &&
                   offsetof(clinfer_tool_parsed, complete) == offsetof(clf_tool_parsed, complete),
               "clinfer_tool_parsed mirrors clf_tool_parsed");
_Static_assert(sizeof(clinfer_tool_reply) == sizeof(clf_tool_reply) &&
                   offsetof(clinfer_tool_reply, n_calls) == offsetof(clf_tool_reply, n_calls) &&
                   offsetof(clinfer_tool_reply, calls) == offsetof(clf_tool_reply, calls),
               "clinfer_tool_reply mirrors clf_tool_reply");

clinfer_status clinfer_tools_create(const clinfer_model *m, const char *tools, size_t len, clinfer_tools **out) {
    API_NOT_NULL(out);
    *out = NULL;
    API_NOT_NULL(m);
    API_NOT_NULL(tools);
    clinfer_tools *t = calloc(1, sizeof *t);
    if (!t) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    t->m = m;
    clf_status st = api_model_chat(m, &t->chat);
    if (st == CLF_OK) st = clf_tools_create(&t->chat, tools, len, &t->t);
    if (st != CLF_OK) {
        free(t);
        return (clinfer_status)st;
    }
    *out = t;
    return CLINFER_OK;
}

void clinfer_tools_free(clinfer_tools *t) {
    if (!t) return;
    clf_tools_free(t->t);
    free(t);
}

/* The messages as the library's (*out and its calls: one allocation). */
static clf_status messages(const clinfer_tool_message *msgs, int n, clf_tool_msg **out) {
    *out = NULL;
    if (n < 0 || (n > 0 && !msgs)) return clf_fail(CLF_ERR_ARG, "no messages");
    size_t calls = 0;
    for (int i = 0; i < n; i++) {
        if (msgs[i].n_calls < 0 || (msgs[i].n_calls > 0 && !msgs[i].calls))
            return clf_fail(CLF_ERR_ARG, "message %d: n_calls %d without calls", i, msgs[i].n_calls);
        calls += (size_t)msgs[i].n_calls;
    }
    clf_tool_msg *m = malloc((size_t)(n ? n : 1) * sizeof *m + calls * sizeof(clf_tool_call));
    if (!m) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_tool_call *c = (clf_tool_call *)(m + (n ? n : 1));
    for (int i = 0; i < n; i++) {
        m[i] = (clf_tool_msg){msgs[i].role, msgs[i].content, c, msgs[i].n_calls, msgs[i].tool_call_id};
        for (int k = 0; k < msgs[i].n_calls; k++)
            *c++ = (clf_tool_call){msgs[i].calls[k].id, msgs[i].calls[k].name, msgs[i].calls[k].arguments};
    }
    *out = m;
    return CLF_OK;
}

clinfer_status clinfer_tools_chat_apply(const clinfer_model *m, const clinfer_tools *t,
                                        const clinfer_tool_message *msgs, int n, int add_assistant, char **text,
                                        size_t *len) {
    return clinfer_tools_chat_apply_kw(m, t, msgs, n, add_assistant, NULL, text, len);
}

clinfer_status clinfer_tools_chat_tokenize(const clinfer_model *m, const clinfer_tools *t,
                                           const clinfer_tool_message *msgs, int n, int add_assistant,
                                           int32_t **tokens, int *n_tokens) {
    return clinfer_tools_chat_tokenize_kw(m, t, msgs, n, add_assistant, NULL, tokens, n_tokens);
}

clinfer_status clinfer_tools_chat_apply_kw(const clinfer_model *m, const clinfer_tools *t,
                                           const clinfer_tool_message *msgs, int n, int add_assistant,
                                           const char *kwargs, char **text, size_t *len) {
    API_NOT_NULL(text);
    API_NOT_NULL(len);
    *text = NULL;
    *len = 0;
    API_NOT_NULL(m);
    clf_chat c;
    clf_tool_msg *cm;
    API_TRY(api_model_chat(m, &c));
    c.extra_json = kwargs; /* chat_template_kwargs, for this rendering */
    API_TRY(messages(msgs, n, &cm));
    clf_status st = clf_tools_render(&c, t ? t->t : NULL, cm, n, add_assistant, text, len);
    free(cm);
    return (clinfer_status)st;
}

clinfer_status clinfer_tools_chat_tokenize_kw(const clinfer_model *m, const clinfer_tools *t,
                                              const clinfer_tool_message *msgs, int n, int add_assistant,
                                              const char *kwargs, int32_t **tokens, int *n_tokens) {
    API_NOT_NULL(tokens);
    API_NOT_NULL(n_tokens);
    *tokens = NULL;
    *n_tokens = 0;
    API_NOT_NULL(m);
    clf_chat c;
    clf_tool_msg *cm;
    API_TRY(api_model_chat(m, &c));
    c.extra_json = kwargs; /* chat_template_kwargs, for this rendering */
    API_TRY(messages(msgs, n, &cm));
    clf_status st = clf_tools_tokenize(&c, t ? t->t : NULL, m->tok, cm, n, add_assistant, 1, tokens, n_tokens);
    free(cm);
    return (clinfer_status)st;
}

clinfer_status clinfer_tools_grammar(const clinfer_tools *t, clinfer_tool_choice choice, const char *name,
                                     int parallel, clinfer_grammar **out) {
    API_NOT_NULL(out);
    *out = NULL;
    API_NOT_NULL(t);
    if (choice < CLINFER_TOOL_AUTO || choice > CLINFER_TOOL_NAMED)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "clinfer_tools_grammar: tool choice %d is not one", (int)choice);
    if (choice == CLINFER_TOOL_NONE) return CLINFER_OK;
    char *gbnf = NULL; /* NULL: the format takes no grammar under this choice (Harmony under auto) */
    clinfer_status st = (clinfer_status)clf_tools_grammar(t->t, (clf_tool_choice)choice, name, parallel, &gbnf);
    /* the format's markers that are control tokens may be drawn as themselves */
    if (st == CLINFER_OK && gbnf) st = (clinfer_status)api_grammar_create(t->m, gbnf, strlen(gbnf), "tc-root", 1, out);
    free(gbnf);
    return st;
}

clinfer_status clinfer_tools_parse(const clinfer_tools *t, const char *text, size_t len, int final,
                                   clinfer_tool_reply **out) {
    API_NOT_NULL(out);
    *out = NULL;
    API_NOT_NULL(t);
    if (len) API_NOT_NULL(text);
    clf_tool_reply *r;
    API_TRY(clf_tools_parse_typed(t->t, len ? text : "", len, final, &r));
    *out = (clinfer_tool_reply *)r;
    return CLINFER_OK;
}

void clinfer_tool_reply_free(clinfer_tool_reply *r) { clf_tool_reply_free((clf_tool_reply *)r); }

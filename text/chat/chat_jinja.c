/* Chat templates run by the Jinja engine (jinja.h): the context
 * apply_chat_template gives a template (messages, tools, documents,
 * add_generation_prompt, bos_token, eos_token), llama.cpp's rule for a
 * leading BOS, the messages' texts found in the rendering (so that they are
 * tokenized as text), and what a template writes between turns, found by
 * rendering two conversations that differ by a turn. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chat.h"
#include "jinja.h"

clf_status clf_chat_jinja_render(const clf_chat *c, const char *messages_json, const char *tools_json,
                                 int add_generation_prompt, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    if (!c->jinja) return clf_fail(CLF_ERR_ARG, "the chat format has no template to run");
    json_error_t err;
    json_t *ctx = json_object(), *msgs = json_loads(messages_json, 0, &err);
    json_t *tools = tools_json ? json_loads(tools_json, 0, &err) : json_null();
    if (!ctx || !msgs || !tools) {
        json_decref(ctx), json_decref(msgs), json_decref(tools);
        return clf_fail(CLF_ERR_ARG, "chat template: the messages or tools are not JSON");
    }
    /* as transformers renders: messages, tools (None without), documents (None), add_generation_prompt, the special tokens */
    json_object_set_new(ctx, "messages", msgs);
    json_object_set_new(ctx, "tools", tools);
    json_object_set_new(ctx, "documents", json_null());
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));
    json_object_set_new(ctx, "bos_token", json_string(c->bos));
    json_object_set_new(ctx, "eos_token", json_string(c->eos));
    if (c->extra_json) { /* chat_template_kwargs: set after the standard keys, as llama.cpp's extra context is */
        json_t *extra = json_loads(c->extra_json, 0, &err);
        if (!json_is_object(extra)) {
            json_decref(extra), json_decref(ctx);
            return clf_fail(CLF_ERR_ARG, "chat template: its extra arguments are not a JSON object");
        }
        json_object_update(ctx, extra);
        json_decref(extra);
    }
    char *ctx_text = json_dumps(ctx, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(ctx);
    if (!ctx_text) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    /* the kept parse (shared, read-only: clf_jinja_render keeps its state
     * per rendering), else one for this rendering alone */
    clf_status st = CLF_OK;
    clf_jinja_template *own = NULL;
    const clf_jinja_template *t = c->parsed;
    if (!t && (st = clf_jinja_parse(c->jinja, strlen(c->jinja), NULL, &own)) == CLF_OK) t = own;
    if (st == CLF_OK) st = clf_jinja_render(t, ctx_text, c->now, buf, len);
    clf_jinja_free(own);
    free(ctx_text);
    if (st != CLF_OK) {
        /* the template's own raise_exception: the conversation is refused (a caller's error), in its words */
        if (clf_jinja_last_was_raise()) return clf_fail_ctx(CLF_ERR_ARG, "the chat template refuses the conversation: ");
        return st;
    }
    /* llama.cpp: the tokenizer adds BOS, so a template's own leading BOS goes */
    size_t nb = strlen(c->bos);
    if (c->strip_bos && nb && *len >= nb && !memcmp(*buf, c->bos, nb)) {
        memmove(*buf, *buf + nb, *len - nb + 1);
        *len -= nb;
    }
    return CLF_OK;
}

/* glibc's memmem (two-way: linear): a naive scan is quadratic where a
 * message of a request's body ("aaa...ab ") partly matches much of the
 * rendering, seconds of CPU for one 1 MiB body */
static const char *find(const char *hay, size_t n, const char *needle, size_t m) {
    if (!m || m > n) return NULL;
    return memmem(hay, n, needle, m);
}

clf_status clf_chat_find_spans(const char *text, size_t len, const char *const *texts, int n, clf_span **spans,
                               int *n_spans) {
    *spans = NULL;
    *n_spans = 0;
    if (n <= 0) return CLF_OK;
    clf_span *v = malloc((size_t)n * sizeof *v);
    if (!v) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    size_t pos = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const char *s = texts[i];
        if (!s) continue;
        size_t m = strlen(s);
        const char *at = find(text + pos, len - pos, s, m);
        if (!at) { /* templates trim: the text without its outer whitespace */
            while (m && strchr(" \t\n\r\v\f", s[0])) s++, m--;
            while (m && strchr(" \t\n\r\v\f", s[m - 1])) m--;
            at = find(text + pos, len - pos, s, m);
        }
        if (!at) continue;
        v[k++] = (clf_span){(size_t)(at - text), m};
        pos = (size_t)(at - text) + m;
    }
    *spans = v;
    *n_spans = k;
    return CLF_OK;
}

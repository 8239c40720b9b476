#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CHATML_SYS = "<|im_start|>system\n";

clf_status clf_chat_init(const char *tmpl, clf_chat *c) {
    memset(c, 0, sizeof *c);
    if (!tmpl || strstr(tmpl, "<|im_start|>")) {
        c->format = CLF_CHAT_CHATML;
        /* A literal system turn in the template is its default system message. */
        const char *s = tmpl ? strstr(tmpl, CHATML_SYS) : NULL;
        const char *e = s ? strstr(s, "<|im_end|>") : NULL;
        if (s && e) {
            c->default_system = s + strlen(CHATML_SYS);
            c->default_system_len = (size_t)(e - c->default_system);
        }
    } else if (strstr(tmpl, "<|start_header_id|>")) {
        c->format = CLF_CHAT_LLAMA3;
    } else if (strstr(tmpl, "<|user|>")) {
        c->format = CLF_CHAT_ZEPHYR;
    } else {
        return clf_fail(CLF_ERR_FORMAT, "the model's chat template is not one clinfer knows (ChatML, Llama-3, Zephyr)");
    }
    return CLF_OK;
}

const char *clf_chat_format_name(clf_chat_format f) {
    switch (f) {
    case CLF_CHAT_CHATML: return "ChatML";
    case CLF_CHAT_LLAMA3: return "Llama-3";
    case CLF_CHAT_ZEPHYR: return "Zephyr";
    }
    return "?";
}

static clf_status append(char **buf, size_t *len, const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c);
    char *grown = realloc(*buf, *len + n + 1);
    if (!grown) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    snprintf(grown + *len, n + 1, "%s%s%s", a, b, c);
    *buf = grown;
    *len += n;
    return CLF_OK;
}

clf_status clf_chat_append(const clf_chat *c, const char *role, const char *content, char **buf, size_t *len) {
    char head[64];
    switch (c->format) {
    case CLF_CHAT_CHATML:
        snprintf(head, sizeof head, "<|im_start|>%s\n", role);
        return append(buf, len, head, content, "<|im_end|>\n");
    case CLF_CHAT_LLAMA3:
        snprintf(head, sizeof head, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
        return append(buf, len, head, content, "<|eot_id|>");
    case CLF_CHAT_ZEPHYR:
        snprintf(head, sizeof head, "<|%s|>\n", role);
        return append(buf, len, head, content, "</s>\n");
    }
    return clf_fail(CLF_ERR_ARG, "bad chat format");
}

clf_status clf_chat_append_reply_start(const clf_chat *c, char **buf, size_t *len) {
    switch (c->format) {
    case CLF_CHAT_CHATML: return append(buf, len, "<|im_start|>assistant\n", "", "");
    case CLF_CHAT_LLAMA3: return append(buf, len, "<|start_header_id|>assistant<|end_header_id|>\n\n", "", "");
    case CLF_CHAT_ZEPHYR: return append(buf, len, "<|assistant|>\n", "", "");
    }
    return clf_fail(CLF_ERR_ARG, "bad chat format");
}

clf_status clf_chat_render(const clf_chat *c, const clf_chat_msg *msgs, int n, int reply_start, char **buf,
                           size_t *len) {
    *buf = NULL;
    *len = 0;
    clf_status st = CLF_OK;
    if (c->default_system && (n == 0 || strcmp(msgs[0].role, "system") != 0)) {
        char *sys = strndup(c->default_system, c->default_system_len);
        st = sys ? clf_chat_append(c, "system", sys, buf, len) : clf_fail(CLF_ERR_MEMORY, "out of host memory");
        free(sys);
    }
    for (int i = 0; st == CLF_OK && i < n; i++) st = clf_chat_append(c, msgs[i].role, msgs[i].content, buf, len);
    if (st == CLF_OK && reply_start) st = clf_chat_append_reply_start(c, buf, len);
    if (st == CLF_OK && !*buf) st = append(buf, len, "", "", "");
    if (st != CLF_OK) {
        free(*buf);
        *buf = NULL;
        *len = 0;
    }
    return st;
}

const char *clf_chat_turn_end(const clf_chat *c) {
    switch (c->format) {
    case CLF_CHAT_CHATML: return "<|im_end|>\n";
    case CLF_CHAT_LLAMA3: return "<|eot_id|>";
    case CLF_CHAT_ZEPHYR: return "</s>\n";
    }
    return "";
}

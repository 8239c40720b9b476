/* Chat templates: the turn format a model was tuned on, recognised from the
 * GGUF's tokenizer.chat_template (a Jinja text that clinfer does not run;
 * it knows the formats themselves). */
#ifndef CLF_CHAT_H
#define CLF_CHAT_H

#include <stddef.h>

#include "status.h"

typedef enum clf_chat_format {
    CLF_CHAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2) */
    CLF_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    CLF_CHAT_ZEPHYR, /* <|role|>\n...</s>\n (TinyLlama chat) */
} clf_chat_format;

typedef struct clf_chat {
    clf_chat_format format;
    /* The system message the template inserts when the conversation has
     * none (SmolLM2's "You are a helpful AI assistant named SmolLM..."), or
     * NULL. Points into the template, default_system_len bytes. */
    const char *default_system;
    size_t default_system_len;
} clf_chat;

/* Recognises the format; NULL template means ChatML. An unknown template is
 * CLF_ERR_FORMAT naming the formats clinfer knows. */
clf_status clf_chat_init(const char *tmpl, clf_chat *c);
const char *clf_chat_format_name(clf_chat_format f);

/* Appends one message (role "system", "user" or "assistant") to *buf
 * (malloc'd, grown, NUL-terminated; *len bytes). */
clf_status clf_chat_append(const clf_chat *c, const char *role, const char *content, char **buf, size_t *len);
/* Appends the header that starts the assistant's answer. */
clf_status clf_chat_append_reply_start(const clf_chat *c, char **buf, size_t *len);

#endif

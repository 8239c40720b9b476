/* Chat templates: the turn format a model was tuned on, recognised from the
 * GGUF's tokenizer.chat_template (a Jinja text that clinfer does not run;
 * it knows the formats themselves) or, without one, from the vocabulary's
 * special tokens. */
#ifndef CLF_CHAT_H
#define CLF_CHAT_H

#include <stddef.h>

#include "status.h"
#include "tokenizer.h"

typedef enum clf_chat_format {
    CLF_CHAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2/2.5/3) */
    CLF_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (texts trimmed) */
    CLF_CHAT_ZEPHYR, /* <|role|>\n...</s>\n (TinyLlama chat) */
    CLF_CHAT_GEMMA,  /* <start_of_turn>user\n...<end_of_turn>\n, the assistant is "model" (texts trimmed) */
    CLF_CHAT_PHI3,   /* <|role|>\n...<|end|>\n */
} clf_chat_format;

typedef struct clf_chat {
    clf_chat_format format;
    /* The system message the template inserts when the conversation has
     * none (SmolLM2's "You are a helpful AI assistant named SmolLM...",
     * Qwen2.5's "You are Qwen..."), or NULL. Points into the template,
     * default_system_len bytes. */
    const char *default_system;
    size_t default_system_len;
    /* Llama 3.1+: the conversation always opens with a system turn that
     * starts "Cutting Knowledge Date: <knowledge>\nToday Date: <date>\n\n"
     * (date: today where the template calls strftime_now, else its
     * date_string default). Empty knowledge: no such turn. */
    char knowledge[32], date[16];
} clf_chat;

/* Recognises the format; NULL template means ChatML. An unknown template is
 * CLF_ERR_FORMAT naming the formats clinfer knows. */
clf_status clf_chat_init(const char *tmpl, clf_chat *c);
/* The model's format: its tokenizer.chat_template, else its special tokens
 * (<start_of_turn>: Gemma, whose GGUFs carry no template), else ChatML. */
clf_status clf_chat_init_model(const clf_tokenizer *t, clf_chat *c);
const char *clf_chat_format_name(clf_chat_format f);

typedef struct clf_chat_msg {
    const char *role, *content;
} clf_chat_msg;

/* Renders a conversation as the template does: the default system message
 * first when the conversation has none, each message, then (reply_start)
 * the header of the assistant's answer. A leading system message goes where
 * the format puts it (Gemma: at the start of the first user turn). *buf is
 * malloc'd. */
clf_status clf_chat_render(const clf_chat *c, const clf_chat_msg *msgs, int n, int reply_start, char **buf,
                           size_t *len);

/* clf_chat_render's text as tokens (BOS first where add_special and the
 * model add one): the template's markers are control tokens, the messages'
 * texts are text, whatever they hold, so a message cannot close its turn
 * or open another ("<|im_end|>" typed by a user is not the token). */
clf_status clf_chat_tokenize(const clf_chat *c, const clf_tokenizer *t, const clf_chat_msg *msgs, int n,
                             int reply_start, int add_special, int32_t **ids, int *n_ids);
/* The same for a message after an answer in a conversation that keeps its
 * tokens (clinfer chat): the answer's turn end, the message, the header of
 * the next answer. */
clf_status clf_chat_tokenize_next(const clf_chat *c, const clf_tokenizer *t, const char *role, const char *content,
                                  int32_t **ids, int *n_ids);

/* The text that closes an assistant turn ("<|im_end|>\n" for ChatML): fed to
 * the model after an answer so that the next turn follows as in training. */
const char *clf_chat_turn_end(const clf_chat *c);

/* Appends one message (role "system", "user", "assistant" or "tool", as
 * clinfer_chat_message says; another is CLF_ERR_ARG) to *buf
 * (malloc'd, grown, NUL-terminated; *len bytes). Gemma has no system turn:
 * CLF_ERR_ARG (clf_chat_render places a system message). */
clf_status clf_chat_append(const clf_chat *c, const char *role, const char *content, char **buf, size_t *len);
/* Appends the header that starts the assistant's answer. */
clf_status clf_chat_append_reply_start(const clf_chat *c, char **buf, size_t *len);

#endif

/* Chat templates: a GGUF's tokenizer.chat_template, parsed by the Jinja
 * engine (jinja.h) once where kept (clf_chat_keep: a model's, at load) and
 * run for every rendering, as jinja2 runs it in Hugging Face's
 * apply_chat_template. The turn formats clinfer knows by hand (recognised
 * from the template's text, or without one from the vocabulary's special
 * tokens) remain for a file without a template, and for what a format
 * decides beyond the text: the tool-call syntax (tools.h). */
#ifndef CLF_CHAT_H
#define CLF_CHAT_H

#include <stddef.h>
#include <time.h>

#include "status.h"
#include "tokenizer.h"

typedef enum clf_chat_format {
    CLF_CHAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2/2.5/3) */
    CLF_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (texts trimmed) */
    CLF_CHAT_ZEPHYR, /* <|role|>\n...</s>\n (TinyLlama chat) */
    CLF_CHAT_GEMMA,  /* <start_of_turn>user\n...<end_of_turn>\n, the assistant is "model" (texts trimmed) */
    CLF_CHAT_PHI3,   /* <|role|>\n...<|end|>\n */
    CLF_CHAT_JINJA,  /* a template of none of these: rendered only by running it */
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
    int date_today; /* date is today's (strftime_now): clf_chat_copy dates each copy anew */
    /* The template itself, run for clf_chat_render, clf_chat_tokenize,
     * clf_chat_tokenize_next and clf_chat_turn_end when set (points into the
     * caller's text: the tokenizer's); NULL: the hand-written format. */
    const char *jinja;
    /* jinja parsed once (clf_chat_keep), run by every rendering of c and of
     * its copies; read-only while it renders (the engine keeps a
     * rendering's state apart), so renderings on several threads share it.
     * NULL: each rendering parses jinja again (clf_chat_init's chats). Owned
     * by the clf_chat clf_chat_keep filled (clf_chat_release); copies
     * borrow it and must not outlive that one. */
    const struct clf_jinja_template *parsed;
    char bos[64], eos[64]; /* bos_token, eos_token as the template sees them ("" unknown) */
    int strip_bos;         /* the tokenizer adds BOS: a leading bos_token is dropped, as llama.cpp does */
    time_t now;            /* the time strftime_now formats (UTC); 0: local time now */
    char turn_end_text[64]; /* CLF_CHAT_JINJA's turn end, found by rendering (clf_chat_turn_end) */
    /* More of the template's context for one rendering, a JSON object's
     * text (llama-server's chat_template_kwargs: {"enable_thinking":
     * false}), its keys set after the standard ones; NULL: none. The
     * caller's, per call (c is copied per rendering). */
    const char *extra_json;
} clf_chat;

/* Takes a template (kept by pointer: it must outlive c) and recognises its
 * format; NULL template means ChatML by hand. A template clinfer's Jinja
 * engine cannot parse is CLF_ERR_FORMAT with the engine's message; one of
 * no known format is CLF_CHAT_JINJA. */
clf_status clf_chat_init(const char *tmpl, clf_chat *c);
/* The model's template (clf_chat_init), with bos_token and eos_token from its
 * vocabulary; without one, its format from its special tokens
 * (<start_of_turn>: Gemma, whose GGUFs carry no template), else ChatML. */
clf_status clf_chat_init_model(const clf_tokenizer *t, clf_chat *c);
/* Overrides the template (--chat-template, --chat-template-file): as
 * clf_chat_init_model with tmpl for the file's. */
clf_status clf_chat_init_with(const clf_tokenizer *t, const char *tmpl, clf_chat *c);
/* clf_chat_init_with (tmpl non-NULL: an override) or clf_chat_init_model
 * (tmpl NULL: the file's), the template parsed once and kept in c->parsed
 * for every later rendering (a model's chat, made at load). Its failures
 * are theirs (an override the engine cannot parse: CLF_ERR_FORMAT with its
 * message; the file's falls back to the format it names by hand, if any).
 * t NULL with a tmpl: no vocabulary (bos_token and eos_token ""). Free
 * with clf_chat_release. */
clf_status clf_chat_keep(const clf_tokenizer *t, const char *tmpl, clf_chat *c);
/* Frees what clf_chat_keep kept (c->parsed); NULL or a chat without one:
 * nothing. No copy of c may render after. */
void clf_chat_release(clf_chat *c);
/* *c = *kept for one request (it borrows kept's parse; set its extra_json,
 * now, ...), today's date made anew where the template dates its system
 * turn with today (a server that runs past midnight). */
void clf_chat_copy(const clf_chat *kept, clf_chat *c);
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

/* Runs c's template (c->jinja) as apply_chat_template does: messages_json
 * (a JSON array of message objects as OpenAI and Hugging Face write them),
 * tools_json (a JSON array, or NULL: none), add_generation_prompt,
 * bos_token and eos_token (c's; a leading bos_token dropped where
 * c->strip_bos). *buf malloc'd. */
clf_status clf_chat_jinja_render(const clf_chat *c, const char *messages_json, const char *tools_json,
                                 int add_generation_prompt, char **buf, size_t *len);
/* Where texts[0..n) lie in text, searched in order, each after the last
 * found (a text absent as it is is looked for trimmed; one absent still is
 * not marked): the messages' texts in a rendering, to be tokenized as text
 * (clf_tokenize_plain). *spans malloc'd. */
clf_status clf_chat_find_spans(const char *text, size_t len, const char *const *texts, int n, clf_span **spans,
                               int *n_spans);

/* A rendering's tokens: text[0, len) (taken: freed here, whatever the
 * outcome), the messages' texts in it found (clf_chat_find_spans) and
 * tokenized as text, the rest with its control tokens; the texts are the
 * n strings at *(const char **)(first + i * stride) (a message array's
 * content fields, NULL ones skipped). BOS first where add_special. */
clf_status clf_chat_tokenize_rendered(const clf_tokenizer *t, char *text, size_t len, const char *first, size_t stride,
                                      int n, int add_special, int32_t **ids, int *n_ids);

/* The text that closes an assistant turn ("<|im_end|>\n" for ChatML): fed to
 * the model after an answer so that the next turn follows as in training.
 * (CLF_CHAT_JINJA: what the template writes after an answer, "" when that
 * cannot be told.) */
const char *clf_chat_turn_end(const clf_chat *c);

/* The hand-written formats, one turn at a time (CLF_CHAT_JINJA: CLF_ERR_ARG):
 * appends one message (role "system", "user", "assistant" or "tool", as
 * clinfer_chat_message says; another is CLF_ERR_ARG) to *buf
 * (malloc'd, grown, NUL-terminated; *len bytes). Gemma has no system turn:
 * CLF_ERR_ARG (clf_chat_render places a system message). */
clf_status clf_chat_append(const clf_chat *c, const char *role, const char *content, char **buf, size_t *len);
/* Appends the header that starts the assistant's answer. */
clf_status clf_chat_append_reply_start(const clf_chat *c, char **buf, size_t *len);

#endif

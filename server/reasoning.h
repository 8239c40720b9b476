/* A model's reasoning apart from its answer, as llama-server splits them
 * into reasoning_content and content: DeepSeek R1's, Qwen3's and QwQ's
 * <think>...</think> before the answer (also when the template opens
 * <think> in the generation prompt, so that the reply starts inside it),
 * and gpt-oss's Harmony channels (<|channel|>analysis<|message|>...<|end|>
 * is reasoning, final's message the answer; a message to a recipient, a
 * tool call, goes to the answer whole, header and all, for the tool parser). One splitter serves a whole
 * reply and a stream alike: text goes in as it comes (a tag may be split
 * across pieces), and what is decided comes out to the two buffers, so that
 * a stream's deltas concatenate to the whole answer's fields. Plain C on
 * srv_buf: the CLI uses it too (clinfer chat's dim reasoning). */
#ifndef SRV_REASONING_H
#define SRV_REASONING_H

#include <stddef.h>

#include "buf.h"

/* llama-server's reasoning_format: none (all in content, as the model wrote
 * it), deepseek (split), auto (the default: split, as deepseek). */
typedef enum srv_reasoning_format {
    SRV_REASONING_AUTO = 0,
    SRV_REASONING_NONE,
    SRV_REASONING_DEEPSEEK,
} srv_reasoning_format;

/* "auto", "none", "deepseek" (llama-server's "deepseek-legacy" reads as
 * deepseek): 0, or -1 for another name. */
int srv_reasoning_format_parse(const char *name, srv_reasoning_format *out);

/* How a model marks its reasoning. */
typedef enum srv_think_syntax {
    SRV_THINK_OFF = 0, /* none: all content */
    SRV_THINK_TAGS,    /* <think>...</think> at the start of the reply */
    SRV_THINK_HARMONY, /* gpt-oss: <|channel|>NAME<|message|>...<|end|> messages (control tokens as text) */
} srv_think_syntax;

/* The syntax a rendered prompt (its text, n bytes) calls for, and whether
 * the reply starts inside <think> (*open): a prompt that ends in "<think>"
 * (and blanks) opens it; one that ends in "<|start|>assistant" is Harmony;
 * any other reads tags (a reply that starts with "<think>" thinks; one that
 * does not is all content, so a model that never thinks is unaffected). */
srv_think_syntax srv_think_detect(const char *prompt, size_t n, int *open);

typedef struct srv_think {
    srv_think_syntax syntax;
    int state;          /* where the reply is (reasoning.c's states) */
    int started;        /* 0: no reasoning written yet (leading blanks dropped); 1: some; 2: a next Harmony analysis message due (a newline first) */
    srv_buf hold;       /* text not yet decided: what may begin a tag, blanks at the reasoning's end */
    size_t n_reasoning; /* reasoning bytes written so far */
} srv_think;

/* A splitter for one reply; open: the reply starts inside <think>. */
void srv_think_init(srv_think *t, srv_think_syntax syntax, int open);
/* Feeds text[0, n) of the reply; final: the reply ended (what is held is
 * decided: an unterminated thought is reasoning, a half tag is text).
 * Appends what is decided to *reasoning (blanks around it dropped) and
 * *content (the answer; blanks after </think> dropped). 0, or -1 when
 * memory ran out. */
int srv_think_feed(srv_think *t, const char *text, size_t n, int final, srv_buf *reasoning, srv_buf *content);
/* Whether the reply is inside its reasoning now (a grammar waits for its end). */
int srv_think_in_reasoning(const srv_think *t);
void srv_think_free(srv_think *t);

#endif

/* A model's reasoning apart from its answer, as llama-server splits them
 * into reasoning_content and content: DeepSeek R1's, Qwen3's and QwQ's
 * <think>...</think> before the answer (also when the template opens
 * <think> in the generation prompt, so that the reply starts inside it),
 * and gpt-oss's Harmony channels (<|channel|>analysis<|message|>...<|end|>
 * is reasoning, final's message the answer; a message to a function, a
 * tool call, goes to the answer whole, header and all, for the tool parser;
 * one to another recipient, or to a function with no tools offered, is
 * dropped, as llama.cpp drops "unsolicited" calls; functionary v3.2's
 * "all\n" recipient taken out). One splitter serves a whole
 * reply and a stream alike: text goes in as it comes (a tag may be split
 * across pieces), and what is decided comes out to the two buffers, so that
 * a stream's deltas concatenate to the whole answer's fields. Plain C on
 * srv_buf: the CLI uses it too (clinfer chat's dim reasoning). */
#ifndef SRV_REASONING_H
#define SRV_REASONING_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "clinfer.h"

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
    SRV_THINK_FUNCTIONARY, /* functionary v3.2 (the prompt ends in ">>>"): no reasoning; its text's recipient
                            * "all\n" (at the start, or after ">>>") taken out, for the answer and the tool parser */
} srv_think_syntax;

/* The syntax a rendered prompt (its text, n bytes) calls for, and whether
 * the reply starts inside <think> (*open): a prompt that ends in "<think>"
 * (and blanks) opens it; one that ends in "<|start|>assistant" is Harmony;
 * one that ends in ">>>" functionary v3.2's;
 * any other reads tags (a reply that starts with "<think>" thinks; one that
 * does not is all content, so a model that never thinks is unaffected). */
srv_think_syntax srv_think_detect(const char *prompt, size_t n, int *open);

typedef struct srv_think {
    srv_think_syntax syntax;
    int state;          /* where the reply is (reasoning.c's states) */
    int started;        /* 0: no reasoning written yet (leading blanks dropped); 1: some; 2: a next Harmony analysis message due (a newline first) */
    srv_buf hold;       /* text not yet decided: what may begin a tag, blanks at the reasoning's end */
    size_t n_reasoning; /* reasoning bytes written so far */
    int no_tools;       /* set by the caller after srv_think_init when the request offers no tools: a Harmony
                         * message to a recipient is then no call for a parser, and is dropped, header and all */
    int f_text;         /* functionary v3.2: 1 once the reply opened with "all\n" (taken out of the content): what
                         * follows is text, a call only after a ">>>" (srv_think_tools_parse tells the parser) */
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
/* clinfer_tools_parse on the answer's text[0, n) as a splitter gave it,
 * told what the splitter took out of the reply's start (f_text: its
 * f_text): functionary v3.2's "all\n" makes the text that follows content
 * (a first line "NAME\n{...}" is no call there; one after ">>>" is), as in
 * the reply the model wrote. f_text 0: clinfer_tools_parse as it is. */
clinfer_status srv_think_tools_parse(int f_text, const clinfer_tools *tools, const char *text, size_t n,
                                     int final, clinfer_tool_reply **out);

/* A reasoning budget in tokens (vLLM's and SGLang's thinking budget,
 * Anthropic's budget_tokens): once a reply has written `budget` tokens
 * inside its thought without closing it, the syntax's closing text
 * (srv_budget_close_text), tokenized, is injected as if the model had
 * written it, and the model answers after it. One state machine for the
 * server's slot loop and the CLI's: after each token (sampled or forced)
 * its text goes in (srv_budget_push), and before each token
 * srv_budget_next says whether it is forced, and which. A token counts as
 * thinking when the reply was inside its thought before and after its text
 * (the tokens of <think>, </think> and of Harmony's headers do not count).
 * The close is forced once a reply: a thought the model closes itself ends
 * the counting for tags; Harmony's analysis messages count together. */
typedef struct srv_budget {
    srv_think think;  /* the reply's splitter: where the thought is */
    srv_buf scratch_r, scratch_c; /* its output, dropped (reused, not freed, token to token) */
    int budget;       /* tokens of thinking before the close is forced (0: at once; < 0: never) */
    int n_thought;    /* tokens written inside the thought so far */
    int32_t *close;   /* [n_close] the closing text's tokens */
    int n_close;
    int at;           /* while forcing: the close tokens injected so far */
    int state;        /* counting, forcing, done (reasoning.c) */
} srv_budget;

/* What ends a thought early: "</think>\n\n" for tags; for Harmony the end
 * of the analysis message and the start of the final channel,
 * "<|end|><|start|>assistant<|channel|>final<|message|>"; NULL for off. */
const char *srv_budget_close_text(srv_think_syntax syntax);
/* A budget for one reply of `syntax` (open: it starts inside <think>), the
 * close tokens given (copied): 0, or -1 when memory ran out. */
int srv_budget_init_tokens(srv_budget *b, srv_think_syntax syntax, int open, int budget, const int32_t *close,
                           int n_close);
/* The same, the close text tokenized by m's tokenizer (control tokens
 * parsed: Qwen3's </think>, Harmony's markers are single tokens there). */
clinfer_status srv_budget_init(srv_budget *b, const clinfer_model *m, srv_think_syntax syntax, int open, int budget);
/* Before a token: 1 with *token when it is forced (the budget is spent and
 * the thought still open, or the close is under way), 0 when it is the
 * sampler's to draw. */
int srv_budget_next(srv_budget *b, int32_t *token);
/* Whether close tokens are still to come (a grammar waiting for the end of
 * the thought waits for them too). */
int srv_budget_forcing(const srv_budget *b);
/* After a token: its text (sampled or forced, control tokens as text for
 * Harmony). 0, or -1 when memory ran out. */
int srv_budget_push(srv_budget *b, const char *text, size_t n);
void srv_budget_free(srv_budget *b);

/* For a loop that samples with clinfer_next_token (the server's): the
 * next token forced by the budget as clinfer_next_token would give it, its
 * text from d, recorded in smp (penalties). 1 when it was forced, 0 when
 * the token is the sampler's to draw, -1 (clinfer_last_error) on failure. */
int srv_budget_take(srv_budget *b, clinfer_sampler *smp, clinfer_detokenizer *d, clinfer_next *out);

#endif

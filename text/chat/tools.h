/* Tool calls (OpenAI's `tools`) in each chat format's own syntax, as the
 * models' templates write them:
 * - ChatML (SmolLM2, Qwen2/2.5/3): Qwen2.5's format. The tools' JSON in a
 *   "# Tools ... <tools></tools>" block at the end of the system turn, a
 *   call as `<tool_call>\n{"name": F, "arguments": {...}}\n</tool_call>`
 *   after the assistant's text, results as `<tool_response>` blocks in one
 *   user turn per run of tool messages.
 * - Llama 3.1+ (the dated system turn): "Environment: ipython" in the
 *   system turn, the tools (JSON, indented) with the instructions at the
 *   start of the first user turn, a call as the whole assistant turn
 *   `{"name": F, "parameters": {...}}` (one a turn), results in
 *   "ipython" turns.
 * - The formats read off a template's text (tool_formats.c; the template
 *   renders the tools, calls and results itself), as llama.cpp's
 *   common/chat.cpp parses them: Mistral (`[TOOL_CALLS][{"name": F,
 *   "arguments": {...}}, ...]`; Mistral Small 3.2's `[TOOL_CALLS]F[ARGS]{...}`
 *   a call), gpt-oss's Harmony (`<|channel|>commentary to=functions.F
 *   <|constrain|>json<|message|>{...}<|call|>`, or the recipient before the
 *   channel), DeepSeek R1 (`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
 *   <｜tool▁sep｜>F\n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`)
 *   and V3.1 (`<｜tool▁call▁begin｜>F<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`),
 *   Granite (`<|tool_call|>[{"name": F, "arguments": {...}}]`) and
 *   Command R (`Action: ```json [{"tool_name": F, "parameters": {...}}] ````; Command R7B's in
 *   `<|START_ACTION|>[...]<|END_ACTION|>`), Qwen3-Coder's and GLM 4.5+'s XML
 *   (a parameter's value raw text, typed by its schema: see
 *   clf_tools_parse_typed), Kimi K2 (`<|tool_calls_section_begin|>
 *   <|tool_call_begin|>functions.F:0<|tool_call_argument_begin|>{...}
 *   <|tool_call_end|>...<|tool_calls_section_end|>`) and functionary v3.1
 *   (`<function=F>{...}</function>`, `<|python_tag|>` then code: a call of
 *   "python" with {"code": ...}) and v3.2 (the prompt ends in ">>>": the
 *   reply `F\n{...}` calls, `all\n` opens text; `>>>F\n{...}` the next
 *   calls. Its "all\n" stays in the content here: the server's splitter,
 *   server/reasoning.c, takes it out first).
 * Other formats (Llama 3.0, Gemma, Phi-3, Zephyr, a template of none of
 * these) have none: CLF_ERR_FORMAT naming the format.
 *
 * Also the grammar a reply is generated under (calls under the functions'
 * schemas) and the parser that turns a reply's text into content and
 * calls, for whole texts and for a stream's text so far. */
#ifndef CLF_TOOLS_H
#define CLF_TOOLS_H

#include <stddef.h>

#include "chat.h"
#include "status.h"

typedef struct clf_tools clf_tools;

/* The tool-call syntaxes. */
typedef enum clf_tool_format {
    CLF_TOOLS_NONE,        /* no tool syntax */
    CLF_TOOLS_HERMES,      /* ChatML's <tool_call> (Hermes, Qwen2.5/3, SmolLM2 by hand) */
    CLF_TOOLS_LLAMA3,      /* Llama 3.1+: the reply a JSON call */
    CLF_TOOLS_MISTRAL,     /* [TOOL_CALLS] then a JSON array of calls */
    CLF_TOOLS_MISTRAL_ARGS, /* [TOOL_CALLS]F[ARGS]{...} (Mistral Small 3.2, Devstral) */
    CLF_TOOLS_HARMONY,     /* gpt-oss */
    CLF_TOOLS_DEEPSEEK_R1, /* function<｜tool▁sep｜>F\n```json ... */
    CLF_TOOLS_DEEPSEEK_V3, /* F<｜tool▁sep｜>{...} (V3.1) */
    CLF_TOOLS_GRANITE,     /* <|tool_call|>[...] */
    CLF_TOOLS_COMMAND_R,   /* Action: ```json [...] ``` */
    CLF_TOOLS_COMMAND_R7B, /* <|START_ACTION|>[...]<|END_ACTION|> */
    CLF_TOOLS_QWEN3_CODER, /* <tool_call>\n<function=F>\n<parameter=P>\nV\n</parameter>\n...</function>\n</tool_call>
                            * (Qwen3-Coder, Qwen3.5, Nemotron Nano 3) */
    CLF_TOOLS_GLM,         /* <tool_call>F\n<arg_key>P</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
                            * (GLM 4.5+) */
    CLF_TOOLS_KIMI_K2,     /* <|tool_calls_section_begin|><|tool_call_begin|>functions.F:I
                            * <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|> */
    CLF_TOOLS_FUNCTIONARY, /* functionary v3.1: <function=F>{...}</function>, <|python_tag|>CODE */
    CLF_TOOLS_FUNCTIONARY_V32, /* functionary v3.2: after the prompt's ">>>", F\n{...} or all\nTEXT; >>>F\n{...} */
} clf_tool_format;

/* c's tool syntax: its template's text first (the formats tool_formats.c
 * knows), then its chat format's (ChatML, Llama 3.1+). */
clf_tool_format clf_tools_format(const clf_chat *c);
const char *clf_tools_format_name(clf_tool_format f);

/* Whether the format has a tool syntax; CLF_ERR_FORMAT naming it if not. */
clf_status clf_tools_supported(const clf_chat *c);

/* OpenAI's `tools` (JSON text: an array of {"type": "function", "function":
 * {"name", "description"?, "parameters"?, "strict"?}}) for format c
 * (copied). CLF_ERR_ARG for a malformed array, a bad or repeated name;
 * CLF_ERR_FORMAT for a format without tools. */
clf_status clf_tools_create(const clf_chat *c, const char *json, size_t len, clf_tools **out);
void clf_tools_free(clf_tools *t);
int clf_tools_count(const clf_tools *t);
const char *clf_tools_name(const clf_tools *t, int i);

typedef struct clf_tool_call {
    const char *id;        /* not rendered by either format */
    const char *name;
    const char *arguments; /* JSON text (OpenAI sends a string): rendered as the template's tojson writes it */
} clf_tool_call;

typedef struct clf_tool_msg {
    const char *role;    /* system, user, assistant, tool */
    const char *content; /* NULL: empty */
    const clf_tool_call *calls; /* an assistant's */
    int n_calls;
    const char *tool_call_id; /* a tool's (not rendered) */
} clf_tool_msg;

/* A conversation with tools (t may be NULL: none offered, yet the history
 * may hold calls and results) as text, and as tokens (the template's text
 * control tokens, the messages', tools' and calls' texts plain). */
clf_status clf_tools_render(const clf_chat *c, const clf_tools *t, const clf_tool_msg *msgs, int n, int reply_start,
                            char **buf, size_t *len);
clf_status clf_tools_tokenize(const clf_chat *c, const clf_tools *t, const clf_tokenizer *tok,
                              const clf_tool_msg *msgs, int n, int reply_start, int add_special, int32_t **ids,
                              int *n_ids);

typedef enum clf_tool_choice {
    CLF_TOOL_AUTO,     /* text, or calls; fail closed: see clf_tools_wrap_grammar */
    CLF_TOOL_NONE,     /* text: no grammar, no calls parsed */
    CLF_TOOL_REQUIRED, /* one call or more */
    CLF_TOOL_NAMED,    /* calls of one function */
} clf_tool_choice;

/* The JSON Schema of one call's JSON object, any of the functions (named:
 * that one only; CLF_ERR_ARG when there is no such function): {"name"
 * (Command R, R7B: "tool_name"): {"const": F}, "arguments" (Llama, Command R, R7B:
 * "parameters"): the function's parameters}, both required, in that order. *schema malloc'd. */
clf_status clf_tools_call_schema(const clf_tools *t, clf_tool_choice choice, const char *name, char **schema);
/* The reply's grammar: `call_gbnf` (that schema's GBNF, start rule `root`)
 * with rules prepended, all named tc-*, the start rule "tc-root":
 *   required/named: calls (ChatML: several when parallel, each in its
 *     tags, on lines of their own; Llama: one, the whole reply);
 *   auto: ChatML: text holding no "<tool_call>", then optionally calls;
 *     Llama: a call, or text that does not start with "{" (or blank).
 * So a reply never holds a malformed call: whatever opens a call is one.
 * *gbnf malloc'd. CLF_ERR_ARG when call_gbnf defines a tc- rule. */
clf_status clf_tools_wrap_grammar(const clf_tools *t, clf_tool_choice choice, int parallel, const char *call_gbnf,
                                  char **gbnf);

/* The reply's grammar whole (start rule "tc-root") under choice (not
 * none), each function's schema converted by the JSON Schema converter:
 * clf_tools_call_schema and clf_tools_wrap_grammar for the formats whose
 * call is a JSON object (Hermes, Llama, Mistral's array, Granite,
 * Command R), the parameters' grammars under each function's name for the
 * others. *gbnf NULL with CLF_OK: no grammar (Harmony under auto). */
clf_status clf_tools_grammar(const clf_tools *t, clf_tool_choice choice, const char *name, int parallel, char **gbnf);

/* A reply's text parsed: content and calls. */
typedef struct clf_tool_parsed {
    char *name;      /* NULL while its string is unfinished (a stream) */
    char *arguments; /* the arguments' JSON text as generated, so far */
    int complete;    /* the call's closing seen */
} clf_tool_parsed;

typedef struct clf_tool_reply {
    /* text[0, content_len) is the content: before the first call (its
     * trailing whitespace dropped); while streaming (final 0), only what
     * cannot begin a call, so a stream's content is always a prefix of the
     * final one */
    size_t content_len;
    int n_calls;
    clf_tool_parsed *calls;
} clf_tool_reply;

/* Parses text[0, len) in c's tool syntax. Calls begin at the first call
 * opening (ChatML's tag; Llama: a reply whose first non-blank is "{"; the
 * others' markers); ChatML, Llama: what follows a call that breaks off
 * malformed is dropped; the others (as llama.cpp): a marker that does not
 * open well-formed calls is text, the search goes on after it (a call cut
 * short by the reply's end is reported incomplete). *out
 * malloc'd (clf_tool_reply_free). Any bytes are safe. */
clf_status clf_tools_parse(const clf_chat *c, const char *text, size_t len, int final, clf_tool_reply **out);
/* The same with t's functions' schemas: Qwen3-Coder's and GLM's raw
 * parameter values typed by them (as llama.cpp: a parameter whose schema
 * types it a string alone stays the text; another is parsed as JSON, the
 * text where that fails). clf_tools_parse, without schemas, takes a value
 * that parses as JSON for that JSON, else the text. */
clf_status clf_tools_parse_typed(const clf_tools *t, const char *text, size_t len, int final, clf_tool_reply **out);
void clf_tool_reply_free(clf_tool_reply *r);

#endif

/* The tool formats read off a template (tools.h: Mistral, Mistral Small
 * 3.2's [ARGS], gpt-oss's Harmony, DeepSeek R1 and V3.1, Granite, Command
 * R, Qwen3-Coder's and GLM's XML, Kimi K2, functionary v3.1 and v3.2):
 * each recognised in its corpus template (tests/data/templates), which
 * renders a conversation with tools, a call and its result; replies as the
 * models write them parsed (one call, parallel calls, text first, a
 * malformed call as text), whole and cut at every byte as a stream sees
 * them, and random texts of the formats' pieces (a stream's content never
 * outgrows the final one, nor its calls the final ones); and each format's grammar: what a random walk through it writes
 * parses back into calls of the offered functions whose arguments hold
 * the schema's required fields. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "chat.h"
#include "grammar.h"
#include "testutil.h"
#include "tools.h"
#include "tool_stream.h"

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

typedef struct fmt_case {
    const char *file; /* under tests/data/templates */
    clf_tool_format format;
    int no_history; /* its template refuses a prior call under jinja2's sandbox (list.append: expected.json) */
} fmt_case;

static const fmt_case CASES[] = {
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", CLF_TOOLS_MISTRAL, 0},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", CLF_TOOLS_MISTRAL_ARGS, 0},
    {"unsloth-mistral-Devstral-Small-2507.jinja", CLF_TOOLS_MISTRAL_ARGS, 0},
    {"openai-gpt-oss-120b.jinja", CLF_TOOLS_HARMONY, 0},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", CLF_TOOLS_DEEPSEEK_R1, 0},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", CLF_TOOLS_DEEPSEEK_R1, 0},
    /* (llama-cpp-deepseek-r1.jinja, written for llama.cpp's minja, fails under jinja2 with tools: expected.json) */
    {"deepseek-ai-DeepSeek-V3.1.jinja", CLF_TOOLS_DEEPSEEK_V3, 0},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja", CLF_TOOLS_GRANITE, 0},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", CLF_TOOLS_COMMAND_R, 0},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", CLF_TOOLS_COMMAND_R7B, 0},
    {"Qwen3-Coder.jinja", CLF_TOOLS_QWEN3_CODER, 0},
    {"Qwen3.5-4B.jinja", CLF_TOOLS_QWEN3_CODER, 0},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", CLF_TOOLS_QWEN3_CODER, 0},
    {"GLM-4.6.jinja", CLF_TOOLS_GLM, 0},
    {"GLM-4.7-Flash.jinja", CLF_TOOLS_GLM, 0},
    {"Spark2.5.jinja", CLF_TOOLS_GLM, 0},
    {"inclusionai-ling-3.0-flash.jinja", CLF_TOOLS_GLM, 0},
    {"poolside-Laguna-XS.2.jinja", CLF_TOOLS_GLM, 0},
    {"poolside-Laguna-XS-2.1.jinja", CLF_TOOLS_GLM, 0},
    {"poolside-Laguna-S-2.1.jinja", CLF_TOOLS_GLM, 0},
    {"StepFun3.5-Flash.jinja", CLF_TOOLS_QWEN3_CODER, 0},
    {"Kimi-K2-Instruct.jinja", CLF_TOOLS_KIMI_K2, 1},
    {"Kimi-K2-Thinking.jinja", CLF_TOOLS_KIMI_K2, 1},
    {"moonshotai-Kimi-K2.jinja", CLF_TOOLS_KIMI_K2, 0},
    {"meetkai-functionary-medium-v3.1.jinja", CLF_TOOLS_FUNCTIONARY, 0},
    {"meetkai-functionary-medium-v3.2.jinja", CLF_TOOLS_FUNCTIONARY_V32, 0},
};
enum { N_CASES = sizeof CASES / sizeof *CASES };

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":"
    "\"A city\"},\"days\":{\"type\":\"integer\",\"description\":\"Days ahead\",\"minimum\":1,\"maximum\":7}},"
    "\"required\":[\"city\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"The time in a zone\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"type\":\"string\",\"description\":"
    "\"A zone\",\"enum\":[\"UTC\",\"CET\"]}},\"required\":[\"zone\"],\"additionalProperties\":false}}}]";

/* A chat on template file `file`, with bos/eos as its model has them. */
static char *chat_of(const char *file, clf_chat *c) {
    char path[256];
    snprintf(path, sizeof path, "tests/data/templates/%s", file);
    char *tmpl = read_text(path);
    TU_OK(clf_chat_init(tmpl, c));
    snprintf(c->bos, sizeof c->bos, "<s>");
    snprintf(c->eos, sizeof c->eos, "</s>");
    c->now = 1700000000;
    return tmpl;
}

/* ---- the prompt side ---------------------------------------------------------- */

/* Each format's template renders the tools, an assistant's call (with a
 * 9-character id: Mistral's rule) and the tool's result. */
static void test_templates_render_tools(void **state) {
    (void)state;
    for (int k = 0; k < N_CASES; k++) {
        clf_chat c;
        char *tmpl = chat_of(CASES[k].file, &c);
        if (clf_tools_format(&c) != CASES[k].format)
            fail_msg("%s: format %s, not %s", CASES[k].file, clf_tools_format_name(clf_tools_format(&c)),
                     clf_tools_format_name(CASES[k].format));
        clf_tools *t;
        TU_OK(clf_tools_create(&c, TOOLS, strlen(TOOLS), &t));
        clf_tool_call call = {"abc123XYZ", "get_weather", "{\"city\": \"Paris\"}"};
        clf_tool_msg m[5] = {{"user", "What is the weather in Paris?", NULL, 0, NULL},
                             {"assistant", NULL, &call, 1, NULL},
                             {"tool", "{\"temp_c\": 21}", NULL, 0, "abc123XYZ"},
                             {"assistant", "It is 21 C in Paris.", NULL, 0, NULL},
                             {"user", "Thanks, and tomorrow?", NULL, 0, NULL}};
        char *buf = NULL;
        size_t len;
        if (CASES[k].no_history) { /* the tools offered render; a prior call fails as jinja2's sandbox fails it */
            assert_int_not_equal(clf_tools_render(&c, t, m, 5, 1, &buf, &len), CLF_OK);
            assert_non_null(strstr(clf_last_error(), "append"));
            TU_OK(clf_tools_render(&c, t, m, 1, 1, &buf, &len));
            assert_non_null(strstr(buf, "get_weather"));
            assert_non_null(strstr(buf, "Paris"));
            free(buf);
            clf_tools_free(t);
            free(tmpl);
            continue;
        }
        clf_status st = clf_tools_render(&c, t, m, 5, 1, &buf, &len);
        if (st != CLF_OK) fail_msg("%s: %s", CASES[k].file, clf_last_error());
        if (!strstr(buf, "get_weather") || !strstr(buf, "Paris") || !strstr(buf, "temp_c") || !strstr(buf, "tomorrow"))
            fail_msg("%s: the rendering lacks the tools, call or result:\n%s", CASES[k].file, buf);
        free(buf);
        clf_tools_free(t);
        free(tmpl);
    }
}

/* Mistral's templates take 9-character ids only: another (OpenAI's
 * "call_...") is mapped, the same for the call and its result. */
static void test_mistral_ids(void **state) {
    (void)state;
    static const char *const FILES[] = {"Mistral-Small-3.2-24B-Instruct-2506.jinja",
                                        "mistralai-Mistral-Nemo-Instruct-2407.jinja"};
    for (int k = 0; k < 2; k++) {
        clf_chat c;
        char *tmpl = chat_of(FILES[k], &c);
        clf_tools *t;
        TU_OK(clf_tools_create(&c, TOOLS, strlen(TOOLS), &t));
        clf_tool_call call = {"call_0123456789abcdef", "get_weather", "{\"city\": \"Paris\"}"};
        clf_tool_msg m[3] = {{"user", "Weather?", NULL, 0, NULL},
                             {"assistant", NULL, &call, 1, NULL},
                             {"tool", "sunny", NULL, 0, "call_0123456789abcdef"}};
        char *buf = NULL;
        size_t len;
        TU_OK(clf_tools_render(&c, t, m, 3, 1, &buf, &len));
        assert_null(strstr(buf, "call_0123456789abcdef"));
        /* the mapped id twice: the call's and the result's */
        const char *at = strstr(buf, FILES[k][0] == 'M' ? "[CALL_ID]" : "\"id\": \"");
        assert_non_null(at);
        at += FILES[k][0] == 'M' ? 9 : 7;
        char id[10];
        memcpy(id, at, 9);
        id[9] = 0;
        const char *second = strstr(at + 9, id);
        if (!second) fail_msg("%s: the id %s once:\n%s", FILES[k], id, buf);
        free(buf);
        clf_tools_free(t);
        free(tmpl);
    }
}

/* A template without tool syntax is refused, naming its format. */
static void test_no_tool_syntax(void **state) {
    (void)state;
    clf_chat c;
    char *tmpl = chat_of("google-gemma-2-2b-it.jinja", &c);
    assert_int_equal(clf_tools_format(&c), CLF_TOOLS_NONE);
    clf_tools *t = NULL;
    assert_int_equal(clf_tools_create(&c, TOOLS, strlen(TOOLS), &t), CLF_ERR_FORMAT);
    assert_null(t);
    assert_non_null(strstr(clf_last_error(), "Gemma"));
    free(tmpl);
}

/* ---- parsing ------------------------------------------------------------------- */

typedef struct want {
    const char *name, *args; /* the calls */
} want;

/* text parses into `content` (its length) and the calls; as a stream too. */
static void expect_parse(const clf_chat *c, const char *text, size_t content_len, const want *w, int n) {
    clf_tool_reply *r;
    TU_OK(clf_tools_parse(c, text, strlen(text), 1, &r));
    if (r->content_len != content_len) fail_msg("'%s': content %zu, not %zu", text, r->content_len, content_len);
    if (r->n_calls != n) fail_msg("'%s': %d calls, not %d", text, r->n_calls, n);
    for (int i = 0; i < n; i++) {
        assert_string_equal(r->calls[i].name, w[i].name);
        assert_string_equal(r->calls[i].arguments, w[i].args);
        assert_true(r->calls[i].complete);
    }
    tu_check_tool_stream(c, text, strlen(text), r);
    clf_tool_reply_free(r);
}

static const want W1[] = {{"get_weather", "{\"city\": \"Paris\"}"}};
static const want W2[] = {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{\"zone\": \"UTC\"}"}};

/* A format's replies: [0] one call, [1] two, [2] text then one call (its
 * text's length), [3] a malformed call (all content). */
typedef struct replies {
    const char *file;
    const char *one, *two, *text_then, *bad;
    size_t text_len;
} replies;

static const replies REPLIES[] = {
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja",
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abc123XYZ\"}]",
     "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"arguments\": {\"zone\": "
     "\"UTC\"}, \"name\": \"get_time\"}]",
     "Let me check.\n[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
     "[TOOL_CALLS] get the weather [1, 2]", 13},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
     "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"zone\": \"UTC\"}",
     "Let me check. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "[TOOL_CALLS]get_weather {\"city\": 1}", 13},
    {"openai-gpt-oss-120b.jinja",
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
     "<|channel|>analysis<|message|>Two calls.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
     "json<|message|>{\"city\": \"Paris\"}<|call|><|start|>assistant<|channel|>commentary to=functions.get_time "
     "<|constrain|>json<|message|>{\"zone\": \"UTC\"}<|call|>",
     "Let me check.<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
     "{\"city\": \"Paris\"}",
     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>Paris please<|call|>", 13},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
     "\"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
     "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"zone\": "
     "\"UTC\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "Let me check.\n\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
     "<｜tool▁call▁end｜>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\nParis\n```"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", 13},
    {"deepseek-ai-DeepSeek-V3.1.jinja",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
     "<｜tool▁calls▁end｜>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
     "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>[\"Paris\"]<｜tool▁call▁end｜>", 13},
    {"ibm-granite-granite-3.3-2B-Instruct.jinja",
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
     "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_time\", "
     "\"arguments\": {\"zone\": \"UTC\"}}]",
     "Let me check.<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
     "<|tool_call|>{\"name\": \"get_weather\"}", 13},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja",
     "Action: ```json\n[\n    {\n        \"tool_name\": \"get_weather\",\n        \"parameters\": {\"city\": "
     "\"Paris\"}\n    }\n]\n```",
     "Action:\n```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, {\"tool_name\": "
     "\"get_time\", \"parameters\": {\"zone\": \"UTC\"}}]\n```",
     "Let me check.\nAction: ```json\n[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]```",
     "Action: I look it up.", 13},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
     "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": "
     "\"Paris\"}}\n]<|END_ACTION|>",
     "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}, "
     "{\"tool_call_id\": \"1\", \"tool_name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}]<|END_ACTION|>",
     "Let me check.<|START_ACTION|>[{\"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}]"
     "<|END_ACTION|>",
     "<|START_ACTION|>get_weather(Paris)<|END_ACTION|>", 13},
    {"Qwen3-Coder.jinja",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
     "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>",
     "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
     "</tool_call>",
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 13},
    {"GLM-4.6.jinja", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
     "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n"
     "<tool_call>get_time<arg_key>zone</arg_key><arg_value>UTC</arg_value></tool_call>",
     "Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>",
     "<tool_call>get_weather\n<arg_value>Paris</arg_value>\n</tool_call>", 13},
    {"Kimi-K2-Instruct.jinja",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": "
     "\"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": "
     "\"Paris\"}<|tool_call_end|>\n<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{\"zone\": "
     "\"UTC\"}<|tool_call_end|><|tool_calls_section_end|>",
     "Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:3<|tool_call_argument_begin|>"
     "{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>Paris"
     "<|tool_call_end|><|tool_calls_section_end|>", 13},
    {"meetkai-functionary-medium-v3.1.jinja", "<function=get_weather>{\"city\": \"Paris\"}</function>",
     "<function=get_weather>{\"city\": \"Paris\"}</function><function=get_time>{\"zone\": \"UTC\"}</function>",
     "Let me check.\n<function=get_weather>{\"city\": \"Paris\"}</function>", "<function=get_weather>Paris</function>",
     13},
    /* (v3.2's text as the server's splitter leaves it: the prompt's ">>>" before the reply, a text's "all\n" gone) */
    {"meetkai-functionary-medium-v3.2.jinja", "get_weather\n{\"city\": \"Paris\"}",
     "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"zone\": \"UTC\"}",
     "Let me check.>>>get_weather\n{\"city\": \"Paris\"}", "get_weather\n[\"Paris\"]", 13},
};
enum { N_REPLIES = sizeof REPLIES / sizeof *REPLIES };

static void test_parse_formats(void **state) {
    (void)state;
    for (int k = 0; k < N_REPLIES; k++) {
        const replies *p = &REPLIES[k];
        clf_chat c;
        char *tmpl = chat_of(p->file, &c);
        expect_parse(&c, p->one, 0, W1, 1);
        const char *h = strstr(p->two, "<|start|>"); /* Harmony: the analysis message is content (no splitter here) */
        expect_parse(&c, p->two, h ? (size_t)(h - p->two) : 0, W2, 2);
        expect_parse(&c, p->text_then, p->text_len, W1, 1);
        expect_parse(&c, p->bad, strlen(p->bad), NULL, 0);
        /* plain text, and text that only looks like a marker's start, stay content */
        static const char PLAIN[] = "The weather is fine. [TOOL <|tool Action <｜tool";
        expect_parse(&c, PLAIN, strlen(PLAIN), NULL, 0);
        free(tmpl);
    }
}

/* A call cut short (the reply's end: max_tokens) is reported incomplete,
 * its arguments so far. */
static void test_parse_cut_short(void **state) {
    (void)state;
    clf_chat c;
    char *tmpl = chat_of("Mistral-Small-3.2-24B-Instruct-2506.jinja", &c);
    const char *text = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Par";
    clf_tool_reply *r;
    TU_OK(clf_tools_parse(&c, text, strlen(text), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_string_equal(r->calls[0].name, "get_weather");
    assert_string_equal(r->calls[0].arguments, "{\"city\": \"Par");
    assert_false(r->calls[0].complete);
    assert_int_equal(r->content_len, 0);
    clf_tool_reply_free(r);
    free(tmpl);
}

/* Qwen3-Coder's and GLM's raw values typed by the schema (a string stays
 * text though it reads as JSON; the other types parsed; a value of no
 * known type JSON where it parses), and without the schemas as JSON where
 * it parses. */
static void test_parse_typed(void **state) {
    (void)state;
    static const char T[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
                            "\"object\",\"properties\":{\"zip\":{\"type\":\"string\"},\"n\":{\"type\":"
                            "\"integer\"},\"ok\":{\"type\":\"boolean\"},\"tags\":{\"type\":\"array\",\"items\":"
                            "{\"type\":\"string\"}},\"any\":{}}}}}]";
    static const char *const TEXT[] = {
        "Sure.\n<tool_call>\n<function=f>\n<parameter=zip>\n12345\n</parameter>\n<parameter=n>\n12\n</parameter>\n"
        "<parameter=ok>\nTrue\n</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=any>\nnot "
        "json\n</parameter>\n</function>\n</tool_call>",
        "Sure.\n<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>12345</arg_value>\n<arg_key>n</arg_key>\n<arg_value>12"
        "</arg_value>\n<arg_key>ok</arg_key>\n<arg_value>true</arg_value>\n<arg_key>tags</arg_key>\n<arg_value>[\"a\", "
        "\"b\"]</arg_value>\n<arg_key>any</arg_key>\n<arg_value>not json</arg_value>\n</tool_call>"};
    static const char *const FILES[] = {"Qwen3-Coder.jinja", "GLM-4.6.jinja"};
    for (int k = 0; k < 2; k++) {
        clf_chat c;
        char *tmpl = chat_of(FILES[k], &c);
        clf_tools *t;
        TU_OK(clf_tools_create(&c, T, strlen(T), &t));
        clf_tool_reply *r;
        TU_OK(clf_tools_parse_typed(t, TEXT[k], strlen(TEXT[k]), 1, &r));
        assert_int_equal(r->content_len, 5);
        assert_int_equal(r->n_calls, 1);
        assert_string_equal(r->calls[0].name, "f");
        json_t *got = json_loads(r->calls[0].arguments, 0, NULL),
               *want = json_loads("{\"zip\": \"12345\", \"n\": 12, \"ok\": true, \"tags\": [\"a\", \"b\"], "
                                  "\"any\": \"not json\"}", 0, NULL);
        if (!json_equal(got, want)) fail_msg("%s: %s", FILES[k], r->calls[0].arguments);
        json_decref(got);
        clf_tool_reply_free(r);
        TU_OK(clf_tools_parse(&c, TEXT[k], strlen(TEXT[k]), 1, &r)); /* no schemas: "12345" reads as a number */
        got = json_loads(r->calls[0].arguments, 0, NULL);
        assert_true(json_is_integer(json_object_get(got, "zip")));
        json_decref(got);
        json_decref(want);
        clf_tool_reply_free(r);
        clf_tools_free(t);
        free(tmpl);
    }
}

/* functionary v3.1's <|python_tag|>: the rest of the reply is a call of
 * python, its code (text, or the JSON string the template writes); a
 * stream holds it back until the reply ends. */
static void test_functionary_python(void **state) {
    (void)state;
    clf_chat c;
    char *tmpl = chat_of("meetkai-functionary-medium-v3.1.jinja", &c);
    static const char *const TEXT[] = {"Let me run it.<|python_tag|>print(1 + 1)", "<|python_tag|>\"print(2)\"",
                                       "<|python_tag|>{\"code\": \"print(3)\"}"};
    static const char *const ARGS[] = {"{\"code\": \"print(1 + 1)\"}", "{\"code\": \"print(2)\"}",
                                       "{\"code\": \"print(3)\"}"};
    for (int k = 0; k < 3; k++) {
        clf_tool_reply *r;
        TU_OK(clf_tools_parse(&c, TEXT[k], strlen(TEXT[k]), 1, &r));
        assert_int_equal(r->n_calls, 1);
        assert_string_equal(r->calls[0].name, "python");
        assert_string_equal(r->calls[0].arguments, ARGS[k]);
        assert_int_equal(r->content_len, k ? 0 : 14);
        tu_check_tool_stream(&c, TEXT[k], strlen(TEXT[k]), r);
        clf_tool_reply_free(r);
        TU_OK(clf_tools_parse(&c, TEXT[k], strlen(TEXT[k]), 0, &r));
        assert_int_equal(r->n_calls, 0);
        assert_int_equal(r->content_len, k ? 0 : 14);
        clf_tool_reply_free(r);
    }
    free(tmpl);
}

/* functionary v3.2's reply starts after the prompt's ">>>": a first line
 * of a function's name then its JSON is a call; a word alone, or (the
 * schemas known) a name of none of the functions, is text. */
static void test_functionary_v32(void **state) {
    (void)state;
    clf_chat c;
    char *tmpl = chat_of("meetkai-functionary-medium-v3.2.jinja", &c);
    clf_tools *t;
    TU_OK(clf_tools_create(&c, TOOLS, strlen(TOOLS), &t));
    static const char *const TEXT[] = {"Hi", "Hello\n", "Note\n{\"a\": 1}"};
    for (int k = 0; k < 3; k++) {
        clf_tool_reply *r;
        TU_OK(clf_tools_parse_typed(t, TEXT[k], strlen(TEXT[k]), 1, &r));
        assert_int_equal(r->n_calls, 0);
        assert_int_equal(r->content_len, strlen(TEXT[k]));
        clf_tool_reply_free(r);
    }
    clf_tool_reply *r; /* without the schemas, any name */
    TU_OK(clf_tools_parse(&c, TEXT[2], strlen(TEXT[2]), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_string_equal(r->calls[0].name, "Note");
    clf_tool_reply_free(r);
    const char *cut = "get_weather\n{\"city\": \"Par"; /* cut short by max_tokens: reported incomplete */
    TU_OK(clf_tools_parse_typed(t, cut, strlen(cut), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_false(r->calls[0].complete);
    assert_int_equal(r->content_len, 0);
    clf_tool_reply_free(r);
    clf_tools_free(t);
    free(tmpl);
}

/* Texts of the formats' pieces at random (markers, their halves, names,
 * JSON fragments, blanks): every parse returns, a stream's content is a
 * prefix of the final one, a complete call's arguments are what the
 * final parse says. */
static void test_parse_pieces(void **state) {
    (void)state;
    static const char *const PIECES[] = {
        "[TOOL_CALLS]", "[TOOL_", "[ARGS]", "[CALL_ID]", "<|tool_call|>", "<|tool", "Action:", "```json", "```",
        "<|START_ACTION|>", "<|END_ACTION|>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
        "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<｜tool", "function", "<|start|>assistant", "<|channel|>",
        "commentary", " to=functions.", "<|message|>", "<|call|>", "<|end|>", "get_weather", "get_time", "{", "}", "[",
        "]", "\"", "\"name\"", "\"arguments\"", "\"tool_name\"", "\"parameters\"", ":", ",", " ", "\n", "x", "é",
        "{\"city\": \"Paris\"}", "\\", "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
        "</parameter>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<|tool_calls_section_begin|>",
        "<|tool_call_begin|>", "functions.get_time:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
        "<|tool_calls_section_end|>", "<|python_tag|>", ">", "city", "Paris", ">>>", "all\n", ">>>all\n", "get_time\n"};
    enum { N_PIECES = sizeof PIECES / sizeof *PIECES };
    uint64_t s = tu_seed();
    char text[2048];
    for (int k = 0; k < N_REPLIES; k++) {
        clf_chat c;
        char *tmpl = chat_of(REPLIES[k].file, &c);
        for (int iter = 0; iter < 300; iter++) {
            text[0] = 0;
            for (int p = (int)(tu_next(&s) % 24); p > 0; p--)
                strncat(text, PIECES[tu_next(&s) % N_PIECES], sizeof text - strlen(text) - 1);
            size_t n = strlen(text);
            clf_tool_reply *whole, *r;
            TU_OK(clf_tools_parse(&c, text, n, 1, &whole));
            assert_true(whole->content_len <= n);
            for (size_t cut = 0; cut <= n; cut++) {
                TU_OK(clf_tools_parse(&c, text, cut, 0, &r));
                if (r->content_len > whole->content_len)
                    fail_msg("%s: '%s' cut at %zu: content %zu > %zu", REPLIES[k].file, text, cut, r->content_len,
                             whole->content_len);
                /* what a stream was told of calls stays: each call the final parse has, its name and arguments
                 * so far a prefix of the final ones */
                if (r->n_calls > whole->n_calls)
                    fail_msg("%s: '%s' cut at %zu: %d calls, the whole %d", REPLIES[k].file, text, cut, r->n_calls,
                             whole->n_calls);
                for (int i = 0; i < r->n_calls; i++) {
                    const clf_tool_parsed *p = &r->calls[i], *w = &whole->calls[i];
                    const char *pa = p->arguments ? p->arguments : "", *wa = w->arguments ? w->arguments : "";
                    if (!p->name || strcmp(p->name, w->name) || strncmp(pa, wa, strlen(pa)) ||
                        (p->complete && strcmp(pa, wa)))
                        fail_msg("%s: '%s' cut at %zu: call %d '%s' (%s) is not the whole's '%s' (%s)",
                                 REPLIES[k].file, text, cut, i, p->name ? p->name : "", pa, w->name, wa);
                }
                clf_tool_reply_free(r);
            }
            clf_tool_reply_free(whole);
        }
        free(tmpl);
    }
}

/* ---- the grammar ---------------------------------------------------------------- */

/* What ends the XML formats' free-text values: a walk writes one now and
 * then where it may (random bytes would hardly ever spell it). */
static const char *const CLOSERS[] = {"\n</parameter>\n", "</arg_value>\n"};

/* A random sentence of g (bytes among those a state allows, stopping at
 * an accepting state one time in 8, 4096 bytes at most); NULL when the
 * walk ran out of room. */
static char *walk(const clf_grammar *g, uint64_t *s) {
    const char *closing = NULL; /* a closer being written */
    size_t cap = 4097, n = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    gstate st = {0}, next = {0};
    TU_OK(clf_gstate_start(g, &st));
    while (n < cap - 1) {
        if (st.accepting && (st.n_stacks == 1 || tu_next(s) % 8 == 0)) break;
        unsigned bytes[256];
        int nb = 0;
        for (unsigned b = 1; b < 256; b++)
            if (st.tops[b / 64] >> (b % 64) & 1) bytes[nb++] = b;
        /* prefer ASCII, so that strings close and JSON ends; no escapes
         * (\u escapes of lone surrogates, which jansson refuses) where
         * another byte will do */
        int ascii = 0;
        for (int i = 0; i < nb; i++) ascii += bytes[i] < 128 && bytes[i] != '\\';
        if (nb == 0) break;
        unsigned b;
        do b = bytes[tu_next(s) % (unsigned)nb];
        while (ascii && (b == '\\' || (b >= 128 && tu_next(s) % 64)));
        if (!closing && nb > 64 && tu_next(s) % 16 == 0) closing = CLOSERS[tu_next(s) % 2];
        if (closing) { /* its next byte where allowed, else the closer is dropped */
            unsigned want = (unsigned char)*closing++;
            if (st.tops[want / 64] >> (want % 64) & 1) b = want;
            else closing = NULL;
            if (closing && !*closing) closing = NULL;
        }
        TU_OK(clf_gstate_advance(g, &st, b, &next));
        if (next.n_stacks == 0) fail_msg("byte %u in the tops is not allowed", b);
        out[n++] = (char)b;
        gstate tmp = st;
        st = next;
        next = tmp;
    }
    int ok = st.accepting;
    clf_gstate_free(&st);
    clf_gstate_free(&next);
    out[n] = 0;
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static clf_grammar *grammar_of(const clf_tools *t, clf_tool_choice choice, const char *name, int parallel) {
    char *gbnf;
    TU_OK(clf_tools_grammar(t, choice, name, parallel, &gbnf));
    if (!gbnf) return NULL;
    clf_grammar *g;
    if (clf_grammar_compile(gbnf, strlen(gbnf), "tc-root", &g) != CLF_OK) fail_msg("%s\n%s", clf_last_error(), gbnf);
    free(gbnf);
    return g;
}

/* Calls that parse and hold their function's required fields. */
static void check_calls(const clf_tools *t, const char *text, int min_calls, const char *only) {
    clf_tool_reply *r;
    TU_OK(clf_tools_parse_typed(t, text, strlen(text), 1, &r)); /* (the XML formats' values typed by the schemas) */
    if (r->n_calls < min_calls) fail_msg("'%s': %d calls", text, r->n_calls);
    for (int i = 0; i < r->n_calls; i++) {
        const clf_tool_parsed *p = &r->calls[i];
        assert_true(p->complete);
        json_t *a = json_loads(p->arguments, 0, NULL);
        if (!json_is_object(a)) fail_msg("'%s': arguments '%s'", text, p->arguments);
        if (only && strcmp(p->name, only)) fail_msg("'%s': call of %s", text, p->name);
        if (!strcmp(p->name, "get_weather")) {
            assert_true(json_is_string(json_object_get(a, "city")));
            json_t *d = json_object_get(a, "days");
            double v = json_number_value(d); /* 5.0 is an integer to JSON Schema */
            if (d && !(json_is_number(d) && v == (double)(long long)v && v >= 1 && v <= 7))
                fail_msg("'%s': days out of range", p->arguments);
        } else if (!strcmp(p->name, "get_time")) {
            const char *z = json_string_value(json_object_get(a, "zone"));
            assert_true(z && (!strcmp(z, "UTC") || !strcmp(z, "CET")));
        } else {
            fail_msg("'%s': a call of %s", text, p->name);
        }
        json_decref(a);
    }
    clf_tool_reply_free(r);
}

static void test_grammar_formats(void **state) {
    (void)state;
    uint64_t s = tu_seed();
    for (int k = 0; k < N_REPLIES; k++) {
        clf_chat c;
        char *tmpl = chat_of(REPLIES[k].file, &c);
        clf_tools *t;
        TU_OK(clf_tools_create(&c, TOOLS, strlen(TOOLS), &t));
        clf_grammar *req = grammar_of(t, CLF_TOOL_REQUIRED, NULL, 1), *named = grammar_of(t, CLF_TOOL_NAMED, "get_time", 0),
                    *aut = grammar_of(t, CLF_TOOL_AUTO, NULL, 1);
        /* the replies as the model writes them: one call (Harmony: its <|call|> is the end token, not written) */
        char one[1024];
        snprintf(one, sizeof one, "%s", REPLIES[k].one);
        char *end = strstr(one, "<|call|>");
        if (end) *end = 0;
        clf_tool_format f = clf_tools_format(&c); /* (the JSON-array formats' examples spell their JSON otherwise) */
        if (f != CLF_TOOLS_GRANITE && f != CLF_TOOLS_COMMAND_R && f != CLF_TOOLS_COMMAND_R7B && f != CLF_TOOLS_MISTRAL &&
            !clf_grammar_accepts(req, one, strlen(one)))
            fail_msg("%s: the grammar refuses '%s'", REPLIES[k].file, one);
        assert_false(clf_grammar_accepts(req, "Hello", 5));
        if (f == CLF_TOOLS_FUNCTIONARY) { /* auto's text holds neither marker: the python tag not spelt either */
            assert_true(clf_grammar_accepts(aut, "Hi <b> x", 8));
            assert_false(clf_grammar_accepts(aut, "Hi <|python_tag|>1", 18));
        }
        int walked = 0, walked_req = 0;
        for (int iter = 0; iter < 60; iter++) {
            clf_grammar *g = iter % 3 == 0 ? req : iter % 3 == 1 ? named : aut;
            if (!g) continue; /* Harmony under auto: no grammar */
            char *text = walk(g, &s);
            if (!text) continue;
            walked++;
            walked_req += g == req;
            check_calls(t, text, g == aut ? 0 : 1, g == named ? "get_time" : NULL);
            free(text);
        }
        if (walked < 20 || walked_req < 5)
            fail_msg("%s: %d walks ended (%d of the required grammar)", REPLIES[k].file, walked, walked_req);
        if (clf_tools_format(&c) == CLF_TOOLS_HARMONY) assert_null(aut);
        else assert_non_null(aut);
        clf_grammar_free(req);
        clf_grammar_free(named);
        clf_grammar_free(aut);
        clf_tools_free(t);
        free(tmpl);
    }
}

/* A name written between two markers (Kimi K2's call id, DeepSeek V3.1's
 * name before its separator) is a call's only where it is a function
 * name's characters: other bytes (blanks, quotes, bytes not UTF-8, which
 * the API's JSON refuses) leave the reply text, whole and streamed. */
static void test_delimited_names(void **state) {
    (void)state;
    static const struct { const char *file, *text; } CASES_ODD[] = {
        {"Kimi-K2-Instruct.jinja", "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.a \"b\xff:0"
                                   "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
        {"Kimi-K2-Instruct.jinja", "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.:0"
                                   "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
        {"deepseek-ai-DeepSeek-V3.1.jinja",
         "Hi<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a b\xff<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
    };
    for (size_t k = 0; k < sizeof CASES_ODD / sizeof *CASES_ODD; k++) {
        clf_chat c;
        char *tmpl = chat_of(CASES_ODD[k].file, &c);
        const char *text = CASES_ODD[k].text;
        clf_tool_reply *r;
        TU_OK(clf_tools_parse(&c, text, strlen(text), 1, &r));
        if (r->n_calls) fail_msg("%s: a call of '%s'", CASES_ODD[k].file, r->calls[0].name);
        assert_int_equal(r->content_len, strlen(text));
        tu_check_tool_stream(&c, text, strlen(text), r);
        clf_tool_reply_free(r);
        free(tmpl);
    }
    clf_chat c; /* the same with a name: a call */
    char *tmpl = chat_of("Kimi-K2-Instruct.jinja", &c);
    const char *good = "Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.get-time.v2:0"
                       "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>";
    clf_tool_reply *r;
    TU_OK(clf_tools_parse(&c, good, strlen(good), 1, &r));
    assert_int_equal(r->n_calls, 1);
    assert_string_equal(r->calls[0].name, "get-time.v2");
    clf_tool_reply_free(r);
    free(tmpl);
}

/* Qwen3-Coder's and GLM's values of another type than a string are JSON
 * by the schema's grammar, and a JSON string in one may hold the value's
 * closing tag: the call the grammar let through parses, whole and
 * streamed (a string parameter's raw text cannot hold it: its grammar). */
static void test_xml_tag_in_json(void **state) {
    (void)state;
    static const char T[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
                            "\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
                            "\"string\"}},\"s\":{\"type\":\"string\"}},\"required\":[\"tags\",\"s\"]}}}]";
    static const char *const FILES[] = {"Qwen3-Coder.jinja", "GLM-4.6.jinja"};
    static const char *const TEXT[] = {
        "<tool_call>\n<function=f>\n<parameter=tags>\n[\"a</parameter>b\", \"c\"]\n</parameter>\n<parameter=s>\n"
        "[\"x\"\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>f\n<arg_key>tags</arg_key>\n<arg_value>[\"a</arg_value>b\", \"c\"]</arg_value>\n<arg_key>s"
        "</arg_key>\n<arg_value>[\"x\"</arg_value>\n</tool_call>"};
    for (int k = 0; k < 2; k++) {
        clf_chat c;
        char *tmpl = chat_of(FILES[k], &c);
        clf_tools *t;
        TU_OK(clf_tools_create(&c, T, strlen(T), &t));
        clf_grammar *g = grammar_of(t, CLF_TOOL_REQUIRED, NULL, 0);
        if (!clf_grammar_accepts(g, TEXT[k], strlen(TEXT[k]))) fail_msg("%s: the grammar refuses it", FILES[k]);
        clf_tool_reply *r;
        TU_OK(clf_tools_parse_typed(t, TEXT[k], strlen(TEXT[k]), 1, &r));
        if (r->n_calls != 1) fail_msg("%s: %d calls, content %zu", FILES[k], r->n_calls, r->content_len);
        assert_true(r->calls[0].complete);
        json_t *got = json_loads(r->calls[0].arguments, 0, NULL),
               *want = json_loads("{\"tags\": [\"a</x>b\", \"c\"], \"s\": \"[\\\"x\\\"\"}", 0, NULL);
        json_array_set_new(json_object_get(want, "tags"), 0, json_string(k ? "a</arg_value>b" : "a</parameter>b"));
        if (!json_equal(got, want)) fail_msg("%s: %s", FILES[k], r->calls[0].arguments);
        json_decref(got);
        json_decref(want);
        tu_check_tool_stream(&c, TEXT[k], strlen(TEXT[k]), r); /* (untyped: the same call) */
        clf_tool_reply_free(r);
        clf_grammar_free(g);
        clf_tools_free(t);
        free(tmpl);
    }
}

/* A property name the XML formats' parser could not read back (Qwen3-Coder:
 * '>', '<' or a newline in it; either: empty, or GLM's closing tag in it)
 * has no grammar: refused, naming it, not calls that parse to another
 * name. */
static void test_xml_odd_property_names(void **state) {
    (void)state;
    static const char *const FILES[] = {"Qwen3-Coder.jinja", "Qwen3-Coder.jinja", "GLM-4.6.jinja", "GLM-4.6.jinja"};
    static const char *const NAMES[] = {"a>b", "", "x</arg_key>y", ""};
    for (int k = 0; k < 4; k++) {
        char tools[512];
        snprintf(tools, sizeof tools,
                 "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                 "\"properties\":{\"%s\":{\"type\":\"string\"}}}}}]",
                 NAMES[k]);
        clf_chat c;
        char *tmpl = chat_of(FILES[k], &c);
        clf_tools *t;
        TU_OK(clf_tools_create(&c, tools, strlen(tools), &t));
        char *gbnf = NULL;
        if (clf_tools_grammar(t, CLF_TOOL_REQUIRED, NULL, 0, &gbnf) != CLF_ERR_ARG)
            fail_msg("%s: property '%s': a grammar", FILES[k], NAMES[k]);
        assert_null(gbnf);
        assert_non_null(strstr(clf_last_error(), "property name"));
        clf_tools_free(t);
        free(tmpl);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates_render_tools), cmocka_unit_test(test_mistral_ids),
        cmocka_unit_test(test_no_tool_syntax),
        cmocka_unit_test(test_parse_formats),          cmocka_unit_test(test_parse_cut_short),
        cmocka_unit_test(test_parse_pieces),           cmocka_unit_test(test_grammar_formats),
        cmocka_unit_test(test_parse_typed),            cmocka_unit_test(test_functionary_python),
        cmocka_unit_test(test_functionary_v32),        cmocka_unit_test(test_delimited_names),
        cmocka_unit_test(test_xml_tag_in_json),        cmocka_unit_test(test_xml_odd_property_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/: the OpenAI request parser (fields, types, ranges, what is
 * refused), the answers' JSON (valid whatever bytes the model emits), stop
 * strings held back and cut, and the metrics text. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "api_openai.h"
#include "metrics.h"
#include "scheduler.h"

static int parse(const char *body, srv_kind kind, srv_api_req *r, srv_api_error *e) {
    return srv_api_parse(body, strlen(body), kind, r, e);
}

static void test_chat_fields(void **state) {
    (void)state;
    srv_api_req r;
    srv_api_error e;
    const char *body = "{\"model\": \"m\", \"messages\": [{\"role\": \"developer\", \"content\": \"be brief\"},"
                       " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\","
                       " \"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": null}], \"max_completion_tokens\": 7,"
                       " \"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 3, \"min_p\": 0.1, \"seed\": -1, \"stop\":"
                       " [\"x\", \"\", \"yz\"], \"stream\": true, \"stream_options\": {\"include_usage\": true},"
                       " \"presence_penalty\": 0, \"n\": 1, \"tools\": [], \"user\": \"ignored\", \"top_logprobs\": null}";
    assert_int_equal(parse(body, SRV_CHAT, &r, &e), 0);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_msgs, 3);
    assert_string_equal(r.msgs[0].role, "system");
    assert_string_equal(r.msgs[1].content, "ab");
    assert_string_equal(r.msgs[2].role, "assistant");
    assert_string_equal(r.msgs[2].content, "");
    assert_int_equal(r.max_tokens, 7);
    assert_float_equal(r.sp.temperature, 0.5, 1e-6);
    assert_float_equal(r.sp.top_p, 0.9, 1e-6);
    assert_int_equal(r.sp.top_k, 3);
    assert_float_equal(r.sp.min_p, 0.1, 1e-6);
    assert_true(r.has_seed);
    assert_true(r.sp.seed == UINT64_MAX);
    assert_int_equal(r.n_stop, 2); /* the empty one dropped */
    assert_string_equal(r.stop[1], "yz");
    assert_true(r.stream && r.include_usage);
    srv_api_req_free(&r);
}

static void test_defaults_and_completion_forms(void **state) {
    (void)state;
    srv_api_req r;
    srv_api_error e;
    assert_int_equal(parse("{\"prompt\": \"hi\", \"temperature\": null}", SRV_COMPLETION, &r, &e), 0);
    clinfer_sampler_params d = clinfer_sampler_default_params();
    assert_string_equal(r.prompt, "hi");
    assert_int_equal(r.max_tokens, 0);
    assert_false(r.has_seed || r.stream || r.model);
    assert_float_equal(r.sp.temperature, d.temperature, 0); /* null reads as absent */
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"prompt\": [\"one\"]}", SRV_COMPLETION, &r, &e), 0);
    assert_string_equal(r.prompt, "one");
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"prompt\": [5, 0, 7]}", SRV_COMPLETION, &r, &e), 0);
    assert_null(r.prompt);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 7);
    srv_api_req_free(&r);
}

/* n, logprobs, top_logprobs and logit_bias as given, and their absence. */
static void test_choice_fields(void **state) {
    (void)state;
    srv_api_req r;
    srv_api_error e;
    assert_int_equal(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"n\": 3, \"logprobs\": true,"
                           " \"top_logprobs\": 20, \"logit_bias\": {\"7\": -100, \"0012\": 2.5}}",
                           SRV_CHAT, &r, &e),
                     0);
    assert_int_equal(r.n, 3);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 20);
    assert_int_equal(r.n_bias, 2);
    for (int i = 0; i < 2; i++) { /* an object's order is jansson's */
        if (r.bias_ids[i] == 7) assert_float_equal(r.bias[i], -100, 0);
        else assert_true(r.bias_ids[i] == 12 && r.bias[i] == 2.5f);
    }
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}", SRV_CHAT, &r, &e), 0);
    assert_true(r.logprobs && r.top_logprobs == 0 && r.n == 1);
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": false,"
                           " \"top_logprobs\": null, \"logit_bias\": {}}", SRV_CHAT, &r, &e), 0);
    assert_false(r.logprobs || r.n_bias);
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"prompt\": \"x\", \"logprobs\": 0}", SRV_COMPLETION, &r, &e), 0);
    assert_true(r.logprobs && r.top_logprobs == 0); /* 0: the tokens' own, no alternatives */
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"prompt\": \"x\", \"logprobs\": 5}", SRV_COMPLETION, &r, &e), 0);
    assert_true(r.logprobs && r.top_logprobs == 5);
    srv_api_req_free(&r);
    assert_int_equal(parse("{\"prompt\": \"x\", \"logprobs\": false, \"n\": null}", SRV_COMPLETION, &r, &e), 0);
    assert_false(r.logprobs);
    assert_int_equal(r.n, 1);
    srv_api_req_free(&r);
}

/* Structured output's fields: which format, its text, the field it came
 * from; text and an empty grammar are none; tool_choice none leaves a
 * format free. */
static void test_format_fields(void **state) {
    (void)state;
    srv_api_req r;
    srv_api_error e;
    static const struct {
        srv_kind kind;
        const char *body;
        srv_format format;
        const char *text, *param;
    } OK[] = {
        {SRV_CHAT, "\"response_format\": {\"type\": \"text\"}", SRV_FORMAT_TEXT, NULL, NULL},
        {SRV_CHAT, "\"response_format\": {\"type\": \"json_object\"}", SRV_FORMAT_JSON_OBJECT, NULL, "response_format"},
        {SRV_CHAT, "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", \"strict\": true,"
                   " \"schema\": {\"type\": \"object\", \"properties\": {\"b\": {}, \"a\": {}}}}}",
         SRV_FORMAT_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"b\":{},\"a\":{}}}", "response_format"},
        {SRV_COMPLETION, "\"json_schema\": {\"type\": \"integer\"}", SRV_FORMAT_JSON_SCHEMA, "{\"type\":\"integer\"}",
         "json_schema"},
        {SRV_COMPLETION, "\"json_schema\": true", SRV_FORMAT_JSON_SCHEMA, "true", "json_schema"},
        {SRV_COMPLETION, "\"grammar\": \"root ::= [0-9]+\"", SRV_FORMAT_GRAMMAR, "root ::= [0-9]+", "grammar"},
        {SRV_COMPLETION, "\"grammar\": \"\", \"json_schema\": null", SRV_FORMAT_TEXT, NULL, NULL},
        {SRV_CHAT, "\"grammar\": \"root ::= \\\"x\\\"\", \"response_format\": {\"type\": \"text\"}", SRV_FORMAT_GRAMMAR,
         "root ::= \"x\"", "grammar"},
        {SRV_CHAT, "\"json_schema\": {}, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
                   " \"tool_choice\": \"none\"", SRV_FORMAT_JSON_SCHEMA, "{}", "json_schema"},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{%s, %s}",
                 OK[i].kind == SRV_CHAT ? "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]" : "\"prompt\": \"x\"",
                 OK[i].body);
        if (parse(body, OK[i].kind, &r, &e)) fail_msg("%s: %s", body, e.message);
        assert_int_equal(r.format, OK[i].format);
        if (OK[i].text) assert_string_equal(r.format_text, OK[i].text);
        else assert_null(r.format_text);
        if (OK[i].param) assert_string_equal(r.format_param, OK[i].param);
        srv_api_req_free(&r);
    }
}

/* Logprobs in OpenAI's two shapes: chat's content list (bytes as given, a
 * bad byte's token U+FFFD, -inf as -9999) and completions' legacy lists;
 * n choices with their indices. */
static void test_logprobs_json(void **state) {
    (void)state;
    srv_api_logprob lp[2] = {
        {.tok = {"He", 2, -0.25f}, .offset = 0, .n_top = 2, .top = {{"He", 2, -0.25f}, {"\xff", 1, -1.5f}}},
        {.tok = {"y", 1, -INFINITY}, .offset = 2, .n_top = 0},
    };
    srv_api_choice c[2] = {{.index = 0, .text = "Hey", .len = 3, .finish = "length", .logprobs = 1, .lp = lp, .n_lp = 2},
                           {.index = 1, .text = "no", .len = 2, .finish = "stop"}};
    srv_api_resp resp = {SRV_CHAT, "chatcmpl-1", "m", 1700000000, NULL};
    srv_api_usage u = {4, 5, 0, 0, 0, 0};
    char *s = srv_api_choices_json(&resp, c, 2, &u);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    json_t *choices = json_object_get(j, "choices");
    assert_int_equal(json_array_size(choices), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(choices, 1), "index")), 1);
    assert_true(json_is_null(json_object_get(json_array_get(choices, 1), "logprobs")));
    json_t *content = json_object_get(json_object_get(json_array_get(choices, 0), "logprobs"), "content");
    assert_int_equal(json_array_size(content), 2);
    const char *tok, *alt;
    double l0, l1, alt_lp;
    json_t *bytes, *alt_bytes, *top1;
    assert_int_equal(json_unpack_ex(json_array_get(content, 0), &je, 0, "{s:s, s:F, s:o, s:[o, {s:s, s:F, s:o}]}",
                                    "token", &tok, "logprob", &l0, "bytes", &bytes, "top_logprobs", &top1, "token",
                                    &alt, "logprob", &alt_lp, "bytes", &alt_bytes),
                     0);
    assert_string_equal(tok, "He");
    assert_float_equal(l0, -0.25, 1e-7);
    assert_int_equal(json_array_size(bytes), 2);
    assert_int_equal(json_integer_value(json_array_get(bytes, 1)), 'e');
    assert_string_equal(alt, "\xef\xbf\xbd");
    assert_int_equal(json_integer_value(json_array_get(alt_bytes, 0)), 0xff);
    assert_float_equal(alt_lp, -1.5, 1e-7);
    assert_int_equal(json_unpack(json_array_get(content, 1), "{s:F}", "logprob", &l1), 0);
    assert_float_equal(l1, -9999, 0);
    assert_int_equal(json_array_size(json_object_get(json_array_get(content, 1), "top_logprobs")), 0);
    json_decref(j);
    free(s);
    /* completions: one stream chunk of choice 1 */
    resp.kind = SRV_COMPLETION;
    c[0].index = 1;
    c[0].finish = NULL;
    s = srv_api_choice_chunk_json(&resp, 0, &c[0]);
    j = json_loads(s, 0, &je);
    assert_non_null(j);
    json_t *tokens, *lps, *tops, *offsets, *fr;
    int index;
    assert_int_equal(json_unpack_ex(j, &je, 0, "{s:[{s:i, s:{s:o, s:o, s:o, s:o}, s:o}]}", "choices", "index", &index,
                                    "logprobs", "tokens", &tokens, "token_logprobs", &lps, "top_logprobs", &tops,
                                    "text_offset", &offsets, "finish_reason", &fr),
                     0);
    assert_int_equal(index, 1);
    assert_true(json_is_null(fr));
    assert_string_equal(json_string_value(json_array_get(tokens, 1)), "y");
    assert_float_equal(json_real_value(json_array_get(lps, 0)), -0.25, 1e-7);
    assert_int_equal(json_integer_value(json_array_get(offsets, 1)), 2);
    assert_int_equal(json_object_size(json_array_get(tops, 0)), 2);
    assert_float_equal(json_real_value(json_object_get(json_array_get(tops, 0), "\xef\xbf\xbd")), -1.5, 1e-7);
    assert_int_equal(json_object_size(json_array_get(tops, 1)), 0);
    json_decref(j);
    free(s);
}

static void test_bad_requests(void **state) {
    (void)state;
    static const struct {
        srv_kind kind;
        const char *body, *param, *text;
    } BAD[] = {
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": \"warm\"}", "temperature",
         "'temperature': "},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_k\": 1e3}", "top_k", "'top_k'"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 16777217}", "max_tokens",
         "out of its range"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"seed\": true}", "seed", "'seed'"},
        {SRV_CHAT, "%s\"n\": 0}", "n", "out of its range 1..128"},
        {SRV_CHAT, "%s\"n\": 1.5}", "n", "'n'"},
        {SRV_CHAT, "%s\"logprobs\": 1}", "logprobs", "'logprobs'"},
        {SRV_CHAT, "%s\"logprobs\": true, \"top_logprobs\": 21}", "top_logprobs", "out of its range 0..20"},
        {SRV_CHAT, "%s\"logprobs\": true, \"top_logprobs\": -1}", "top_logprobs", "out of its range"},
        {SRV_CHAT, "%s\"top_logprobs\": 2}", "top_logprobs", "needs 'logprobs': true"},
        {SRV_CHAT, "%s\"logprobs\": false, \"top_logprobs\": 0}", "top_logprobs", "needs"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs", "an integer 0..20"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs", "out of its range 0..20"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": 2.0}", "logprobs", "an integer"},
        {SRV_CHAT, "%s\"logit_bias\": [1]}", "logit_bias", "an object"},
        {SRV_CHAT, "%s\"logit_bias\": {\"x\": 1}}", "logit_bias", "'x' is not a token id"},
        {SRV_CHAT, "%s\"logit_bias\": {\"-1\": 1}}", "logit_bias", "not a token id"},
        {SRV_CHAT, "%s\"logit_bias\": {\" 1\": 1}}", "logit_bias", "not a token id"},
        {SRV_CHAT, "%s\"logit_bias\": {\"12a\": 1}}", "logit_bias", "not a token id"},
        {SRV_CHAT, "%s\"logit_bias\": {\"99999999999\": 1}}", "logit_bias", "not a token id"},
        {SRV_CHAT, "%s\"logit_bias\": {\"5\": 100.5}}", "logit_bias", "-100..100"},
        {SRV_CHAT, "%s\"logit_bias\": {\"5\": \"1\"}}", "logit_bias", "-100..100"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": [1]}", "stop", "'stop[0]'"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"function\", \"content\": \"x\"}]}", "messages", "'function'"},
        {SRV_CHAT, "{\"messages\": [\"x\"]}", "messages", "messages[0]"},
        {SRV_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", "messages",
         "text parts"},
        {SRV_CHAT, "{\"messages\": {}}", "messages", "non-empty array"},
        {SRV_COMPLETION, "{\"prompt\": []}", "prompt", "'prompt'"},
        {SRV_COMPLETION, "{\"prompt\": [3000000000]}", "prompt", "not a token id"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"suffix\": \"y\"}", "suffix", "not supported"},
        /* structured output */
        {SRV_CHAT, "%s\"response_format\": \"json\"}", "response_format", "'response_format'"},
        {SRV_CHAT, "%s\"response_format\": {}}", "response_format", "'response_format'"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"yaml\"}}", "response_format", "'yaml' is not text"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_schema\"}}", "response_format", "required"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": 5}}}",
         "response_format", "'response_format.json_schema'"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"a\"}}}",
         "response_format", "must be a JSON Schema"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": [1]}}}",
         "response_format", "must be a JSON Schema"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": {},"
                   " \"strict\": 1}}}", "response_format", "'response_format.json_schema'"},
        {SRV_CHAT, "%s\"json_schema\": \"{}\"}", "json_schema", "must be a JSON Schema"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"grammar\": 1}", "grammar", "a string (GBNF)"},
        {SRV_COMPLETION, "{\"prompt\": \"x\", \"grammar\": \"root ::= [a]\", \"json_schema\": {}}", "grammar",
         "'json_schema' and 'grammar' both"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_object\"}, \"json_schema\": {}}", "json_schema",
         "'response_format' and 'json_schema' both"},
        {SRV_CHAT, "%s\"response_format\": {\"type\": \"json_object\"}, \"tools\": [{\"type\": \"function\","
                   " \"function\": {\"name\": \"f\"}}]}", "response_format", "'response_format' and 'tools' both"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        srv_api_req r;
        srv_api_error e;
        char body[512]; /* "%s": a chat request's messages */
        snprintf(body, sizeof body, BAD[i].body, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], ");
        assert_int_equal(parse(body, BAD[i].kind, &r, &e), -1);
        assert_int_equal(e.http, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_non_null(e.param);
        assert_string_equal(e.param, BAD[i].param);
        if (!strstr(e.message, BAD[i].text)) fail_msg("%s: '%s' lacks '%s'", body, e.message, BAD[i].text);
        srv_api_req_free(&r);
    }
    srv_api_req r;
    srv_api_error e;
    assert_int_equal(srv_api_parse("{\"prompt\": \"a\"", 14, SRV_COMPLETION, &r, &e), -1);
    assert_string_equal(e.code, "invalid_json");
    assert_int_equal(srv_api_parse("{\"prompt\": \"\xff\"}", 15, SRV_COMPLETION, &r, &e), -1); /* not UTF-8 */
    assert_string_equal(e.code, "invalid_json");
    assert_int_equal(parse("42", SRV_COMPLETION, &r, &e), -1);
    assert_null(e.param);
    /* jansson's message quotes the bad bytes; the error still serializes
     * (a fuzz_request finding: the answer was NULL, a 500) */
    const char bad[] = "{\"messages\": \"\\ud8\xcd\xa3\"}";
    assert_int_equal(srv_api_parse(bad, sizeof bad - 1, SRV_CHAT, &r, &e), -1);
    char *s = srv_api_error_json(&e);
    assert_non_null(s);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    json_decref(j);
    free(s);
}

/* The answer parses back as JSON, with bad bytes as U+FFFD. */
static void test_answers_are_valid_json(void **state) {
    (void)state;
    srv_api_resp resp = {.kind = SRV_CHAT, .id = "chatcmpl-1", .model = "m\"odel", .created = 1700000000, .finish = "stop"};
    srv_api_usage u = {10, 3, 4, 5.0, 6.0, 0.5};
    const char text[] = "ok \xe2\x82 \xff\xc3\xa9";
    char *s = srv_api_completion_json(&resp, text, sizeof text - 1, &u);
    assert_non_null(s);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    const char *content, *finish, *model;
    int total, cached;
    assert_int_equal(json_unpack(j, "{s:s, s:[{s:{s:s}, s:s}], s:{s:i, s:{s:i}}}", "model", &model, "choices",
                                 "message", "content", &content, "finish_reason", &finish, "usage", "total_tokens",
                                 &total, "prompt_tokens_details", "cached_tokens", &cached),
                     0);
    assert_string_equal(content, "ok \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xc3\xa9"); /* a U+FFFD a bad byte */
    assert_string_equal(finish, "stop");
    assert_string_equal(model, "m\"odel");
    assert_int_equal(total, 13);
    assert_int_equal(cached, 4);
    json_decref(j);
    free(s);
    resp.finish = NULL;
    s = srv_api_chunk_json(&resp, 1, "a", 1, NULL);
    j = json_loads(s, 0, &je);
    const char *role;
    json_t *fr;
    assert_int_equal(json_unpack(j, "{s:[{s:{s:s, s:s}, s:o}]}", "choices", "delta", "role", &role, "content", &content,
                                 "finish_reason", &fr),
                     0);
    assert_true(json_is_null(fr));
    json_decref(j);
    free(s);
    srv_api_error e;
    srv_api_error_set(&e, 503, "server_error", "queue_full", NULL, "busy");
    s = srv_api_error_json(&e);
    assert_string_equal(s, "{\"error\":{\"message\":\"busy\",\"type\":\"server_error\",\"param\":null,\"code\":\"queue_full\"}}");
    free(s);
}

/* A name that is not UTF-8 made valid once (U+FFFD a bad byte); an answer
 * that still carries one fails as what it is, not as out of memory. */
static void test_utf8_and_encoding_errors(void **state) {
    (void)state;
    size_t n;
    char *id = srv_api_utf8("m\xff\xc3.gguf", 8, &n);
    assert_string_equal(id, "m\xef\xbf\xbd\xef\xbf\xbd.gguf");
    assert_int_equal(n, strlen(id));
    free(id);
    clinfer_fail(CLINFER_OK, "%s", "");
    srv_api_resp resp = {.kind = SRV_COMPLETION, .id = "cmpl-1", .model = "m\xff", .created = 1700000000, .finish = "stop"};
    srv_api_usage u = {1, 1, 0, 0, 0, 0};
    assert_null(srv_api_completion_json(&resp, "a", 1, &u));
    assert_non_null(strstr(clinfer_last_error(), "JSON"));
    assert_non_null(strstr(clinfer_last_error(), "UTF-8"));
    clinfer_fail(CLINFER_OK, "%s", "");
    assert_null(srv_api_chunk_json(&resp, 0, "a", 1, NULL));
    assert_non_null(strstr(clinfer_last_error(), "UTF-8"));
    clinfer_fail(CLINFER_OK, "%s", "");
    assert_null(srv_api_models_json("m\xff", 1, 8));
    assert_non_null(strstr(clinfer_last_error(), "UTF-8"));
}

static void test_stop_scan(void **state) {
    (void)state;
    char *stop[] = {"</s>", "END", "xx"};
    int m;
    const char *t = "hello </s> world";
    assert_int_equal(srv_stop_scan(t, 0, strlen(t), stop, 3, &m), 6);
    assert_true(m);
    t = "hello </"; /* may begin a stop string: held back */
    assert_int_equal(srv_stop_scan(t, 0, strlen(t), stop, 3, &m), 6);
    assert_false(m);
    t = "hello EN";
    assert_int_equal(srv_stop_scan(t, 3, strlen(t), stop, 3, &m), 6);
    t = "abc";
    assert_int_equal(srv_stop_scan(t, 0, 3, stop, 3, &m), 3);
    assert_false(m);
    assert_int_equal(srv_stop_scan(t, 0, 3, stop, 0, &m), 3);
    /* the earliest whole match wins over an earlier partial one */
    char *stop2[] = {"abcd", "b"};
    assert_int_equal(srv_stop_scan("abx", 0, 3, stop2, 2, &m), 1);
    assert_int_equal(m, 2); /* 1 + the index of the string that matched */
    t = "a xx"; /* a match at the end */
    assert_int_equal(srv_stop_scan(t, 0, 4, stop, 3, &m), 2);
    assert_int_equal(m, 3);
}

/* xorshift64* as tests/support's (the server's tests link the public API
 * alone): the seed from the clock (printed) unless CLINFER_SEED is set. */
static uint64_t seed_from_env(void) {
    const char *env = getenv("CLINFER_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
    if (!seed) seed = 1;
    fprintf(stderr, "[ seed ] CLINFER_SEED=%llu\n", (unsigned long long)seed);
    return seed;
}

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Random texts from a small alphabet (so stop strings occur, whole and in
 * part) streamed in random pieces, scanned as the scheduler scans them
 * (from the final length on, after each piece), against a naive search of
 * the text so far: it ends at the first whole stop string's start (one
 * that a piece boundary splits included), no byte is final that a later
 * stop string cuts, and what is held back is exactly the longest end that
 * begins a stop string. */
/* The first whole stop string in text[0, len): its start, len if none. */
static size_t naive_stop(const char *text, size_t len, char *const *stop, int n_stop) {
    for (size_t p = 0; p < len; p++)
        for (int i = 0; i < n_stop; i++) {
            size_t k = strlen(stop[i]);
            if (p + k <= len && !memcmp(text + p, stop[i], k)) return p;
        }
    return len;
}

static void test_stop_scan_random(void **state) {
    (void)state;
    uint64_t rng = seed_from_env();
    int matches = 0, split = 0;
    for (int it = 0; it < 20000; it++) {
        char text[64], buf[8][6];
        char *stop[8];
        const int alphabet = 2 + (int)(next_rand(&rng) % 3), n = (int)(next_rand(&rng) % 64);
        const int n_stop = (int)(next_rand(&rng) % 5);
        for (int i = 0; i < n; i++) text[i] = (char)('a' + next_rand(&rng) % (uint64_t)alphabet);
        for (int i = 0; i < n_stop; i++) {
            int k = 1 + (int)(next_rand(&rng) % 5);
            for (int c = 0; c < k; c++) buf[i][c] = (char)('a' + next_rand(&rng) % (uint64_t)alphabet);
            buf[i][k] = 0;
            stop[i] = buf[i];
        }
        /* streamed: pieces of 0..4 bytes appended, each scan from the final length */
        size_t len = 0, fin = 0;
        int matched = 0;
        while (len < (size_t)n && !matched) {
            size_t piece = next_rand(&rng) % 5;
            if (piece > n - len) piece = n - len;
            len += piece;
            const size_t from = fin, want = naive_stop(text, len, stop, n_stop);
            fin = srv_stop_scan(text, from, len, stop, n_stop, &matched);
            /* nothing was final that a stop string cuts: the final text only grows */
            assert_true(fin >= from && fin <= len);
            assert_int_equal(matched != 0, want < len);
            if (matched) {
                /* 1 + the index of a stop string found there */
                assert_true(matched >= 1 && matched <= n_stop && !memcmp(text + fin, stop[matched - 1],
                                                                        strlen(stop[matched - 1])));
                assert_int_equal(fin, want);
                split += fin < len - piece; /* it began in an earlier piece */
                break;
            }
            /* held back: the longest end that is a proper prefix of a stop string */
            size_t hold = len;
            for (size_t p = from; p < len && hold == len; p++)
                for (int i = 0; i < n_stop; i++)
                    if (strlen(stop[i]) > len - p && !memcmp(text + p, stop[i], len - p)) hold = p;
            assert_int_equal(fin, hold);
        }
        matches += matched;
    }
    print_message("%d texts cut by a stop string, %d of them begun in an earlier piece\n", matches, split);
    assert_true(matches > 1000 && split > 100);
}

static void test_metrics_text(void **state) {
    (void)state;
    srv_stats st = {.n_slots = 8, .running = 3, .queued = 2, .prompt_tokens = 100, .gen_tokens = 42,
                    .gen_tps = 12.5, .occupancy = 0.375};
    char *s = srv_metrics_text(&st, NULL, "a\"b");
    assert_non_null(s);
    assert_non_null(strstr(s, "# TYPE clinfer_generated_tokens_total counter\nclinfer_generated_tokens_total{model=\"a\\\"b\"} 42\n"));
    assert_non_null(strstr(s, "clinfer_requests_queued{model=\"a\\\"b\"} 2\n"));
    assert_non_null(strstr(s, "clinfer_batch_occupancy{model=\"a\\\"b\"} 0.375\n"));
    assert_non_null(strstr(s, "clinfer_generated_tokens_per_second{model=\"a\\\"b\"} 12.5\n"));
    assert_non_null(strstr(s, "clinfer_prompt_cache_hit_ratio{model=\"a\\\"b\"} 0\n")); /* nothing admitted yet */
    free(s);
    st.cached_tokens = 30, st.admitted_tokens = 120; /* the ratio of the two counters */
    assert_non_null(s = srv_metrics_text(&st, NULL, "m"));
    assert_non_null(strstr(s, "# TYPE clinfer_prompt_tokens_admitted_total counter\nclinfer_prompt_tokens_admitted_total{model=\"m\"} 120\n"));
    assert_non_null(strstr(s, "# TYPE clinfer_prompt_cache_hit_ratio gauge\nclinfer_prompt_cache_hit_ratio{model=\"m\"} 0.25\n"));
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_fields),          cmocka_unit_test(test_defaults_and_completion_forms),
        cmocka_unit_test(test_bad_requests),         cmocka_unit_test(test_answers_are_valid_json),
        cmocka_unit_test(test_stop_scan),            cmocka_unit_test(test_stop_scan_random),
        cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_utf8_and_encoding_errors), cmocka_unit_test(test_choice_fields),
        cmocka_unit_test(test_logprobs_json),        cmocka_unit_test(test_format_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

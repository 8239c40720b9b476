/* The Responses API's and Anthropic's Messages API's requests as the chat
 * requests they become (server/api_responses.c, server/api_anthropic.c):
 * messages, tool calls and results, tools, tool_choice, format, sampling,
 * and the errors, naming each API's own field. No model: the parsers. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "api_openai.h"
#include "api_responses.h"

static void test_responses_items(void **state) {
    (void)state;
    srv_api_req q;
    srv_api_error e;
    const char *body =
        "{\"model\": \"m\", \"instructions\": \"Be brief.\", \"max_output_tokens\": 64, \"temperature\": 0.5,"
        " \"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"Weather \"},"
        "                                            {\"type\": \"input_text\", \"text\": \"in Paris?\"}]},"
        "  {\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", \"text\": \"Let me see.\"}]},"
        "  {\"type\": \"function_call\", \"call_id\": \"call_1\", \"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"},"
        "  {\"type\": \"function_call\", \"call_id\": \"call_2\", \"name\": \"get_time\", \"arguments\": \"{}\"},"
        "  {\"type\": \"function_call_output\", \"call_id\": \"call_1\", \"output\": \"21C\"},"
        "  {\"type\": \"function_call_output\", \"call_id\": \"call_2\", \"output\": \"noon\"},"
        "  {\"type\": \"reasoning\", \"summary\": []},"
        "  {\"role\": \"developer\", \"content\": \"Use celsius.\"}],"
        " \"tools\": [{\"type\": \"function\", \"name\": \"get_weather\", \"description\": \"d\","
        "              \"parameters\": {\"type\": \"object\"}},"
        "             {\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {\"type\": \"object\"}}],"
        " \"tool_choice\": {\"type\": \"function\", \"name\": \"get_time\"}, \"parallel_tool_calls\": false}";
    assert_int_equal(srv_responses_parse(body, strlen(body), &q, &e), 0);
    assert_int_equal(q.kind, SRV_CHAT);
    assert_int_equal(q.max_tokens, 64);
    assert_float_equal(q.sp.temperature, 0.5, 1e-6);
    /* system, user, assistant (its text and both calls), two tool messages, system (developer) */
    assert_int_equal(q.n_msgs, 6);
    assert_string_equal(q.msgs[0].role, "system");
    assert_string_equal(q.msgs[0].content, "Be brief.");
    assert_string_equal(q.msgs[1].content, "Weather in Paris?");
    assert_string_equal(q.msgs[2].role, "assistant");
    assert_string_equal(q.msgs[2].content, "Let me see.");
    assert_int_equal(q.msgs[2].n_calls, 2);
    assert_string_equal(q.msgs[2].calls[0].id, "call_1");
    assert_string_equal(q.msgs[2].calls[1].name, "get_time");
    assert_string_equal(q.msgs[3].role, "tool");
    assert_string_equal(q.msgs[3].tool_call_id, "call_1");
    assert_string_equal(q.msgs[4].content, "noon");
    assert_string_equal(q.msgs[5].role, "system");
    assert_int_equal(q.tool_choice, CLINFER_TOOL_NAMED);
    assert_string_equal(q.tool_name, "get_time");
    assert_int_equal(q.parallel_tool_calls, 0);
    /* chat's tools, name, description, parameters in that order (the prompt renders them) */
    assert_non_null(strstr(q.tools, "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"));
    srv_api_req_free(&q);

    const char *fmt = "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\","
                      " \"schema\": {\"type\": \"object\"}, \"strict\": true}}}";
    assert_int_equal(srv_responses_parse(fmt, strlen(fmt), &q, &e), 0);
    assert_int_equal(q.format, SRV_FORMAT_JSON_SCHEMA);
    assert_string_equal(q.msgs[0].content, "x");
    srv_api_req_free(&q);
}

/* A body refused with a 400 (or `status`) naming `param`. */
static void refused(int messages, const char *body, int status, const char *param) {
    srv_api_req q;
    srv_api_error e;
    int rc = messages ? srv_messages_parse(body, strlen(body), 0, &q, &e) : srv_responses_parse(body, strlen(body), &q, &e);
    if (rc != -1 || e.http != status || !e.param || strcmp(e.param, param))
        fail_msg("%s: rc %d, status %d, param %s (%s)", body, rc, e.http, e.param ? e.param : "(null)", e.message);
    srv_api_req_free(&q);
}

static void test_responses_errors(void **state) {
    (void)state;
    refused(0, "{\"input\": \"x\", \"previous_response_id\": \"resp_unknown\"}", 404, "previous_response_id");
    refused(0, "{\"input\": \"x\", \"max_output_tokens\": 0}", 400, "max_output_tokens");
    refused(0, "{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"yaml\"}}}", 400, "text.format");
    refused(0, "{\"input\": \"x\", \"reasoning\": {\"effort\": \"low\"}}", 400, "reasoning");
    refused(0, "{\"input\": \"x\", \"tools\": [{\"type\": \"file_search\"}]}", 400, "tools");
    refused(0, "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_file\", \"file_id\": \"f\"}]}]}", 400,
            "input");
    refused(0, "{\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\", \"output\": \"1\"}]}", 400,
            "input"); /* answers no call */
    refused(0, "{}", 400, "input");
}

static void test_messages_blocks(void **state) {
    (void)state;
    srv_api_req q;
    srv_api_error e;
    const char *body =
        "{\"model\": \"m\", \"max_tokens\": 32, \"system\": [{\"type\": \"text\", \"text\": \"Be brief.\"}],"
        " \"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
        "  {\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\", \"thinking\": \"t\", \"signature\": \"s\"},"
        "     {\"type\": \"text\", \"text\": \"Checking.\"},"
        "     {\"type\": \"tool_use\", \"id\": \"toolu_1\", \"name\": \"get_weather\", \"input\": {\"city\": \"Paris\"}}]},"
        "  {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"toolu_1\","
        "     \"content\": [{\"type\": \"text\", \"text\": \"21C\"}], \"is_error\": true},"
        "     {\"type\": \"text\", \"text\": \"Tomorrow?\"}]}],"
        " \"tools\": [{\"name\": \"get_weather\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"}}],"
        " \"tool_choice\": {\"type\": \"any\", \"disable_parallel_tool_use\": true},"
        " \"stop_sequences\": [\"END\", \"STOP\"], \"temperature\": 0.25, \"top_k\": 5}";
    assert_int_equal(srv_messages_parse(body, strlen(body), 0, &q, &e), 0);
    assert_int_equal(q.max_tokens, 32);
    assert_int_equal(q.n_msgs, 5); /* system, user, assistant (text and call), tool, user */
    assert_string_equal(q.msgs[0].content, "Be brief.");
    assert_string_equal(q.msgs[2].content, "Checking.");
    assert_int_equal(q.msgs[2].n_calls, 1);
    assert_string_equal(q.msgs[2].calls[0].arguments, "{\"city\":\"Paris\"}");
    assert_string_equal(q.msgs[3].role, "tool");
    assert_string_equal(q.msgs[3].content, "Error: 21C");
    assert_string_equal(q.msgs[4].content, "Tomorrow?");
    assert_int_equal(q.tool_choice, CLINFER_TOOL_REQUIRED);
    assert_int_equal(q.parallel_tool_calls, 0);
    assert_int_equal(q.n_stop, 2);
    assert_string_equal(q.stop[1], "STOP");
    assert_int_equal(q.sp.top_k, 5);
    assert_non_null(strstr(q.tools, "\"name\":\"get_weather\",\"description\":\"d\",\"parameters\":"));
    srv_api_req_free(&q);
    /* count_tokens: no max_tokens needed */
    const char *count = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}";
    assert_int_equal(srv_messages_parse(count, strlen(count), 1, &q, &e), 0);
    srv_api_req_free(&q);
    /* the error's JSON: Anthropic's shape */
    assert_int_equal(srv_messages_parse(count, strlen(count), 0, &q, &e), -1);
    char *j = srv_anthropic_error_json(&e);
    assert_string_equal(j, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                           "\"max_tokens: Field required\"}}");
    free(j);
    srv_api_req_free(&q);
}

static void test_messages_errors(void **state) {
    (void)state;
    const char *h = "{\"model\": \"m\", \"max_tokens\": 1, ";
    char b[512];
#define REFUSED(tail, param) (snprintf(b, sizeof b, "%s%s", h, tail), refused(1, b, 400, param))
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\": {}}]}]}", "messages");
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}",
            "messages"); /* prefill */
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"thinking\": {\"type\": \"sideways\"}}",
            "thinking");
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": 1.5}", "temperature");
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop_sequences\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}",
            "stop_sequences");
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"web_search_20250305\","
            " \"name\": \"w\"}]}", "tools");
    REFUSED("\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"system\": [{\"type\": \"image\"}]}", "system");
    REFUSED("\"messages\": []}", "messages");
#undef REFUSED
    refused(1, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", 400, "max_tokens");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_responses_items), cmocka_unit_test(test_responses_errors),
        cmocka_unit_test(test_messages_blocks), cmocka_unit_test(test_messages_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

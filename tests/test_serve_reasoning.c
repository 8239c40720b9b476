/* The reasoning splitter (server/reasoning.c) on recorded replies of each
 * syntax: <think> tags (DeepSeek R1 distills, Qwen3, QwQ; the thought
 * opened by the prompt or by the reply), gpt-oss's Harmony channels. Each
 * reply is split whole and fed in every cut into two pieces and one byte at
 * a time (a tag split across tokens), and the pieces must concatenate to
 * the whole split. No model, but for the functionary v3.2 tool parse
 * (test_functionary_tools): a vocabulary-only tiny model (tiny_gguf, ctest
 * sets CLINFER_TINY_GGUF) under the v3.2 template, for a clinfer_tools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "reasoning.h"

static int no_tools; /* the splitter's no_tools for the checks below */

/* The split of reply fed in pieces of `step` bytes (0: whole), the first
 * cut at `first` bytes when nonzero. */
static void split(srv_think_syntax syn, int open, const char *reply, size_t first, size_t step, srv_buf *r,
                  srv_buf *c) {
    srv_think t;
    srv_think_init(&t, syn, open);
    t.no_tools = no_tools;
    size_t n = strlen(reply), at = 0;
    *r = (srv_buf){0};
    *c = (srv_buf){0};
    assert_int_equal(srv_think_feed(&t, NULL, 0, 0, r, c), 0); /* a stream's first read may bring nothing */
    while (at < n) {
        size_t k = first && at == 0 ? first : step ? step : n - at;
        if (k > n - at) k = n - at;
        assert_int_equal(srv_think_feed(&t, reply + at, k, 0, r, c), 0);
        at += k;
    }
    assert_int_equal(srv_think_feed(&t, NULL, 0, 1, r, c), 0);
    srv_think_free(&t);
}

static const char *str(const srv_buf *b) { return b->p ? b->p : ""; }

/* reply splits into want_r and want_c whole, byte by byte and at every cut */
static void check(srv_think_syntax syn, int open, const char *reply, const char *want_r, const char *want_c) {
    srv_buf r, c;
    split(syn, open, reply, 0, 0, &r, &c);
    assert_string_equal(str(&r), want_r);
    assert_string_equal(str(&c), want_c);
    srv_buf_free(&r), srv_buf_free(&c);
    split(syn, open, reply, 0, 1, &r, &c);
    assert_string_equal(str(&r), want_r);
    assert_string_equal(str(&c), want_c);
    srv_buf_free(&r), srv_buf_free(&c);
    for (size_t cut = 1; cut < strlen(reply); cut++) {
        split(syn, open, reply, cut, 0, &r, &c);
        assert_string_equal(str(&r), want_r);
        assert_string_equal(str(&c), want_c);
        srv_buf_free(&r), srv_buf_free(&c);
    }
}

static void test_tags(void **state) {
    (void)state;
    /* Qwen3 / QwQ: the reply opens its thought */
    check(SRV_THINK_TAGS, 0, "<think>\nThe user greets me.\n</think>\n\nHello!", "The user greets me.", "Hello!");
    /* DeepSeek R1 distills: the template's generation prompt opens <think>, the reply starts inside it */
    check(SRV_THINK_TAGS, 1, "Okay, 2+2 is 4.\n</think>\n\nThe answer is 4.", "Okay, 2+2 is 4.", "The answer is 4.");
    /* a model that does not think: all content, a "<think>" later in it included */
    check(SRV_THINK_TAGS, 0, "Hi <think> there", "", "Hi <think> there");
    check(SRV_THINK_TAGS, 0, "<thin", "", "<thin");
    check(SRV_THINK_TAGS, 0, "  <b>bold</b>", "", "  <b>bold</b>");
    /* unterminated thinking (max_tokens ran out): all reasoning */
    check(SRV_THINK_TAGS, 0, "<think>Let me count: 1, 2, 3", "Let me count: 1, 2, 3", "");
    check(SRV_THINK_TAGS, 1, "still thinking </thi", "still thinking </thi", "");
    /* a "<" inside the thought that is no close */
    check(SRV_THINK_TAGS, 1, "a < b and </b> </think>yes", "a < b and </b>", "yes");
    /* an empty thought (Qwen3 with enable_thinking false writes one) */
    check(SRV_THINK_TAGS, 0, "<think>\n\n</think>\n\nJust the answer.", "", "Just the answer.");
    /* off: all as written */
    check(SRV_THINK_OFF, 0, "<think>x</think>y", "", "<think>x</think>y");
}

static void test_harmony(void **state) {
    (void)state;
    check(SRV_THINK_HARMONY, 0,
          "<|channel|>analysis<|message|>User asks 2+2. Simple.<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>",
          "User asks 2+2. Simple.", "4");
    /* two analysis messages, one line each; a final without its end (the stream stopped on <|return|>) */
    check(SRV_THINK_HARMONY, 0,
          "<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis<|message|>Second.<|end|>"
          "<|start|>assistant<|channel|>final<|message|>Done.",
          "First.\nSecond.", "Done.");
    /* unterminated analysis */
    check(SRV_THINK_HARMONY, 0, "<|channel|>analysis<|message|>Hmm, <|en", "Hmm, <|en", "");
    /* a reply with no header at all: plain content */
    check(SRV_THINK_HARMONY, 0, "Plain answer.", "", "Plain answer.");
    /* a tool call (a recipient in the header): header, arguments and <|call|> go to content, for the tool parser */
    check(SRV_THINK_HARMONY, 0,
          "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
          "Need weather.",
          "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
          "{\"city\":\"Paris\"}<|call|>");
    /* no tools offered: a recipient's message is no call, dropped header and all (llama.cpp's unsolicited call);
     * the answer after it stays */
    no_tools = 1;
    check(SRV_THINK_HARMONY, 0,
          "<|channel|>analysis<|message|>Search.<|end|><|start|>assistant<|channel|>commentary to=browser.search "
          "<|constrain|>json<|message|>{\"q\":\"x\"}<|call|><|start|>assistant<|channel|>final<|message|>Done.",
          "Search.", "Done.");
    /* tools offered or not, a built-in tool's recipient is no call: dropped */
    for (no_tools = 0; no_tools < 2; no_tools++)
        check(SRV_THINK_HARMONY, 0,
              "<|channel|>commentary to=browser.search <|constrain|>json<|message|>{\"q\":\"x\"}<|call|><|start|>"
              "assistant<|channel|>final<|message|>Done.",
              "", "Done.");
    no_tools = 1;
    /* a stray " to=assistant" is no recipient */
    check(SRV_THINK_HARMONY, 0, "<|channel|>commentary to=assistant<|message|>Hi.<|end|>", "", "Hi.");
    no_tools = 0;
    /* a header that never reaches its <|message|> (512 bytes held at most): flushed to content, the rest after */
    char longh[700];
    memset(longh, 'x', sizeof longh - 1);
    memcpy(longh, "<|channel|>", 11);
    longh[sizeof longh - 1] = 0;
    memcpy(longh + 600, "<|message|>", 11);
    check(SRV_THINK_HARMONY, 0, longh, "", longh);
}

/* functionary v3.2: no reasoning; "all\n" (the text's recipient) taken out at the start and after ">>>", calls
 * (another recipient) left for the tool parser */
static void test_functionary(void **state) {
    (void)state;
    check(SRV_THINK_FUNCTIONARY, 0, "all\nHello there.", "", "Hello there.");
    check(SRV_THINK_FUNCTIONARY, 0, "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{}", "",
          "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{}");
    check(SRV_THINK_FUNCTIONARY, 0, "all\nLet me check.>>>get_weather\n{}", "", "Let me check.>>>get_weather\n{}");
    check(SRV_THINK_FUNCTIONARY, 0, "all\nA, >>>all\nB>>al", "", "A, B>>al");
    check(SRV_THINK_FUNCTIONARY, 0, "al", "", "al");
    check(SRV_THINK_FUNCTIONARY, 0, "", "", "");
    assert_null(srv_budget_close_text(SRV_THINK_FUNCTIONARY));
}

/* What the parser makes of a functionary v3.2 reply fed through the splitter in pieces (first, step as split's):
 * the splitter's content parsed after each piece (a stream) and at the end, as the server does. Content and
 * calls as want_c and want_calls ("name args" each); a stream's content a prefix of the final one. */
static void parse_v32(const clinfer_tools *tools, const char *reply, size_t first, size_t step, const char *want_c,
                      const char *const *want_calls, int n_want) {
    srv_think t;
    srv_think_init(&t, SRV_THINK_FUNCTIONARY, 0);
    srv_buf r = {0}, c = {0};
    size_t n = strlen(reply), at = 0;
    for (int final = 0; final < 2; final++) {
        while (!final && at < n) {
            size_t k = first && at == 0 ? first : step ? step : n - at;
            if (k > n - at) k = n - at;
            assert_int_equal(srv_think_feed(&t, reply + at, k, 0, &r, &c), 0);
            at += k;
            clinfer_tool_reply *rep;
            assert_int_equal(srv_think_tools_parse(t.f_text, tools, str(&c), c.n, 0, &rep), CLINFER_OK);
            if (rep->content_len > strlen(want_c) || memcmp(str(&c), want_c, rep->content_len))
                fail_msg("'%s' cut at %zu: content '%.*s'", reply, at, (int)rep->content_len, str(&c));
            for (int i = 0; i < rep->n_calls; i++)
                if (i >= n_want || !rep->calls[i].name || strncmp(want_calls[i], rep->calls[i].name,
                                                                  strlen(rep->calls[i].name)))
                    fail_msg("'%s' cut at %zu: call %d '%s'", reply, at, i, rep->calls[i].name);
            clinfer_tool_reply_free(rep);
        }
        if (!final) continue;
        assert_int_equal(srv_think_feed(&t, NULL, 0, 1, &r, &c), 0);
        clinfer_tool_reply *rep;
        assert_int_equal(srv_think_tools_parse(t.f_text, tools, str(&c), c.n, 1, &rep), CLINFER_OK);
        if (rep->content_len != strlen(want_c) || memcmp(str(&c), want_c, rep->content_len))
            fail_msg("'%s': content '%.*s', not '%s'", reply, (int)rep->content_len, str(&c), want_c);
        assert_int_equal(rep->n_calls, n_want);
        for (int i = 0; i < n_want; i++) {
            char got[256];
            snprintf(got, sizeof got, "%s %s", rep->calls[i].name, rep->calls[i].arguments);
            assert_string_equal(got, want_calls[i]);
        }
        clinfer_tool_reply_free(rep);
    }
    assert_int_equal(r.n, 0);
    srv_think_free(&t);
    srv_buf_free(&r), srv_buf_free(&c);
}

/* parse_v32 whole, a byte at a time and at every cut */
static void check_v32(const clinfer_tools *tools, const char *reply, const char *want_c, const char *const *want_calls,
                      int n_want) {
    parse_v32(tools, reply, 0, 0, want_c, want_calls, n_want);
    parse_v32(tools, reply, 0, 1, want_c, want_calls, n_want);
    for (size_t cut = 1; cut < strlen(reply); cut++) parse_v32(tools, reply, cut, 0, want_c, want_calls, n_want);
}

/* functionary v3.2 through the splitter and the tool parser, as the server runs them: text after "all\n" is
 * content, a first line that names a function included (the grammar admits it under tool_choice auto); a call
 * opens the reply or follows ">>>" */
static void test_functionary_tools(void **state) {
    (void)state;
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) fail_msg("CLINFER_TINY_GGUF is not set (ctest sets it)");
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "/tmp/clinfer-test-reasoning-%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' model '%s' --no-eog", tool, path);
    assert_int_equal(system(cmd), 0);
    clinfer_model_params mp = clinfer_model_default_params();
    mp.vocab_only = 1;
    clinfer_model *m;
    const clinfer_status st = clinfer_model_load(path, NULL, &mp, &m);
    unlink(path); /* read: its file gone, whatever the load said */
    if (st != CLINFER_OK) fail_msg("%s", clinfer_last_error());
    FILE *f = fopen("tests/data/templates/meetkai-functionary-medium-v3.2.jinja", "rb");
    assert_non_null(f);
    static char tmpl[1 << 16];
    size_t k = fread(tmpl, 1, sizeof tmpl - 1, f);
    fclose(f);
    assert_true(k > 0 && k < sizeof tmpl - 1);
    tmpl[k] = 0;
    if (clinfer_model_set_chat_template(m, tmpl)) fail_msg("%s", clinfer_last_error());
    static const char TOOLS[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}, {\"type\": \"function\", "
        "\"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\"}}}]";
    clinfer_tools *tools;
    if (clinfer_tools_create(m, TOOLS, sizeof TOOLS - 1, &tools)) fail_msg("%s", clinfer_last_error());
    static const char *const WEATHER[] = {"get_weather {\"city\": \"Paris\"}", "get_time {}"};
    /* text that spells a call after "all\n": content, no call */
    check_v32(tools, "all\nget_weather\n{\"city\": \"Paris\"}", "get_weather\n{\"city\": \"Paris\"}", NULL, 0);
    check_v32(tools, "all\nHello there.", "Hello there.", NULL, 0);
    /* a call after the text's ">>>"; calls that open the reply */
    check_v32(tools, "all\nLet me check.>>>get_weather\n{\"city\": \"Paris\"}", "Let me check.", WEATHER, 1);
    check_v32(tools, "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{}", "", WEATHER, 2);
    clinfer_tools_free(tools);
    clinfer_model_free(m);
}

static void test_detect(void **state) {
    (void)state;
    int open;
    static const char QWEN3[] = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n";
    assert_int_equal(srv_think_detect(QWEN3, sizeof QWEN3 - 1, &open), SRV_THINK_TAGS);
    assert_int_equal(open, 1);
    static const char CHATML[] = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    assert_int_equal(srv_think_detect(CHATML, sizeof CHATML - 1, &open), SRV_THINK_TAGS);
    assert_int_equal(open, 0);
    static const char OSS[] = "<|start|>user<|message|>hi<|end|><|start|>assistant";
    assert_int_equal(srv_think_detect(OSS, sizeof OSS - 1, &open), SRV_THINK_HARMONY);
    assert_int_equal(open, 0);
    static const char V32[] = "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant"
                              "<|end_header_id|>\n\n>>>";
    assert_int_equal(srv_think_detect(V32, sizeof V32 - 1, &open), SRV_THINK_FUNCTIONARY);
    assert_int_equal(open, 0);
    srv_reasoning_format f;
    assert_int_equal(srv_reasoning_format_parse("none", &f), 0);
    assert_int_equal(f, SRV_REASONING_NONE);
    assert_int_equal(srv_reasoning_format_parse("deepseek", &f), 0);
    assert_int_equal(f, SRV_REASONING_DEEPSEEK);
    assert_int_equal(srv_reasoning_format_parse("auto", &f), 0);
    assert_int_equal(f, SRV_REASONING_AUTO);
    assert_int_equal(srv_reasoning_format_parse("other", &f), -1);
}

/* whether the splitter says it is inside the reasoning, and how much it wrote (the budget counts on it) */
static void test_in_reasoning(void **state) {
    (void)state;
    srv_think t;
    srv_buf r = {0}, c = {0};
    srv_think_init(&t, SRV_THINK_TAGS, 1);
    assert_true(srv_think_in_reasoning(&t));
    assert_int_equal(srv_think_feed(&t, "abc </th", 8, 0, &r, &c), 0);
    assert_true(srv_think_in_reasoning(&t));
    assert_string_equal(str(&r), "abc");
    assert_int_equal(srv_think_feed(&t, "ink> x", 6, 0, &r, &c), 0);
    assert_false(srv_think_in_reasoning(&t));
    assert_string_equal(str(&c), "x");
    srv_think_free(&t);
    srv_buf_free(&r), srv_buf_free(&c);
}

/* ---- the reasoning budget ---- */

/* A reply under a budget: the model's tokens (texts) in turn where the
 * budget does not force one; a forced token's text is close[id - 900].
 * The reply's text, and where the forced tokens came (their indexes in the
 * reply's tokens, -1 after the last). */
static void run_budget(srv_think_syntax syn, int open, int budget, const char *const *model, int n_model,
                       const char *const *close, int n_close, srv_buf *text, int *forced_at) {
    int32_t ids[8];
    for (int i = 0; i < n_close; i++) ids[i] = 900 + i;
    srv_budget b;
    assert_int_equal(srv_budget_init_tokens(&b, syn, open, budget, ids, n_close), 0);
    *text = (srv_buf){0};
    int k = 0, nf = 0;
    for (int pos = 0; k < n_model; pos++) {
        int32_t tok;
        const char *piece;
        if (srv_budget_next(&b, &tok)) {
            assert_in_range(tok, 900, 900 + n_close - 1);
            piece = close[tok - 900];
            forced_at[nf++] = pos;
        } else {
            assert_false(srv_budget_forcing(&b));
            piece = model[k++];
        }
        assert_int_equal(srv_buf_add(text, piece, strlen(piece)), 0);
        assert_int_equal(srv_budget_push(&b, piece, strlen(piece)), 0);
    }
    forced_at[nf] = -1;
    srv_budget_free(&b);
}

static const char *const TAGS_CLOSE[] = {"</think>", "\n\n"};
static const char *const HARMONY_CLOSE[] = {"<|end|>", "<|start|>", "assistant", "<|channel|>", "final", "<|message|>"};

/* reply's text under the budget is want, split into want_r and want_c, the close forced from token first on */
static void check_budget(srv_think_syntax syn, int open, int budget, const char *const *model, int n_model,
                         const char *want, const char *want_r, const char *want_c, int first) {
    const char *const *close = syn == SRV_THINK_HARMONY ? HARMONY_CLOSE : TAGS_CLOSE;
    const int n_close = syn == SRV_THINK_HARMONY ? 6 : 2;
    srv_buf text, r = {0}, c = {0};
    int at[16];
    run_budget(syn, open, budget, model, n_model, close, n_close, &text, at);
    assert_string_equal(str(&text), want);
    if (first < 0) {
        assert_int_equal(at[0], -1); /* nothing forced */
    } else {
        for (int i = 0; i < n_close; i++) assert_int_equal(at[i], first + i); /* the whole close, in a row, once */
        assert_int_equal(at[n_close], -1);
    }
    srv_think t;
    srv_think_init(&t, syn, open);
    assert_int_equal(srv_think_feed(&t, text.p, text.n, 1, &r, &c), 0);
    assert_string_equal(str(&r), want_r);
    assert_string_equal(str(&c), want_c);
    srv_think_free(&t);
    srv_buf_free(&r), srv_buf_free(&c), srv_buf_free(&text);
}

#define N(a) ((int)(sizeof(a) / sizeof *(a)))

static void test_budget(void **state) {
    (void)state;
    assert_string_equal(srv_budget_close_text(SRV_THINK_TAGS), "</think>\n\n");
    assert_string_equal(srv_budget_close_text(SRV_THINK_HARMONY), "<|end|><|start|>assistant<|channel|>final<|message|>");
    assert_null(srv_budget_close_text(SRV_THINK_OFF));
    /* the prompt opened <think>: 3 tokens of thought, then the close, then the model answers */
    static const char *const OPEN[] = {"a", " b", " c", " d", " e"};
    check_budget(SRV_THINK_TAGS, 1, 3, OPEN, N(OPEN), "a b c</think>\n\n d e", "a b c", "d e", 3);
    check_budget(SRV_THINK_TAGS, 1, 1, OPEN, N(OPEN), "a</think>\n\n b c d e", "a", "b c d e", 1);
    /* 0: closed before the first token (an empty thought) */
    check_budget(SRV_THINK_TAGS, 1, 0, OPEN, N(OPEN), "</think>\n\na b c d e", "", "a b c d e", 0);
    /* -1 (unlimited), and a budget the reply never reaches: unchanged */
    check_budget(SRV_THINK_TAGS, 1, -1, OPEN, N(OPEN), "a b c d e", "a b c d e", "", -1);
    check_budget(SRV_THINK_TAGS, 1, 5, OPEN, N(OPEN), "a b c d e", "a b c d e", "", -1);
    /* the reply opens the thought, its tag across tokens: the tag's tokens do not count */
    static const char *const SELF[] = {"<", "think", ">", "x", "y", "z"};
    check_budget(SRV_THINK_TAGS, 0, 2, SELF, N(SELF), "<think>xy</think>\n\nz", "xy", "z", 5);
    /* a model that closes the thought itself before the budget: nothing forced, later tokens not counted */
    static const char *const CLOSES[] = {"a", "</think>", "b", "c", "d", "e", "f"};
    check_budget(SRV_THINK_TAGS, 1, 3, CLOSES, N(CLOSES), "a</think>bcdef", "a", "bcdef", -1);
    /* a model that does not think: nothing to count */
    static const char *const PLAIN[] = {"Hello", " there", " friend"};
    check_budget(SRV_THINK_TAGS, 0, 1, PLAIN, N(PLAIN), "Hello there friend", "", "Hello there friend", -1);
    check_budget(SRV_THINK_OFF, 1, 1, OPEN, N(OPEN), "a b c d e", "", "a b c d e", -1);
    /* Harmony: the analysis message ended, the final channel opened; the header's tokens do not count */
    static const char *const OSS[] = {"<|channel|>", "analysis", "<|message|>", "Let", " me", " think", " more"};
    check_budget(SRV_THINK_HARMONY, 0, 2, OSS, N(OSS),
                 "<|channel|>analysis<|message|>Let me<|end|><|start|>assistant<|channel|>final<|message|> think more",
                 "Let me", " think more", 5);
    /* Harmony's analysis messages count together */
    static const char *const OSS2[] = {"<|channel|>", "analysis", "<|message|>", "A", "<|end|>", "<|start|>",
                                       "assistant", "<|channel|>", "analysis", "<|message|>", "B", "C", "D"};
    check_budget(SRV_THINK_HARMONY, 0, 2, OSS2, N(OSS2),
                 "<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B"
                 "<|end|><|start|>assistant<|channel|>final<|message|>CD",
                 "A\nB", "CD", 11);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_functionary),
        cmocka_unit_test(test_functionary_tools),
        cmocka_unit_test(test_in_reasoning),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The reasoning splitter (server/reasoning.c) on recorded replies of each
 * syntax: <think> tags (DeepSeek R1 distills, Qwen3, QwQ; the thought
 * opened by the prompt or by the reply), gpt-oss's Harmony channels. Each
 * reply is split whole and fed in every cut into two pieces and one byte at
 * a time (a tag split across tokens), and the pieces must concatenate to
 * the whole split. No model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reasoning.h"

/* The split of reply fed in pieces of `step` bytes (0: whole), the first
 * cut at `first` bytes when nonzero. */
static void split(srv_think_syntax syn, int open, const char *reply, size_t first, size_t step, srv_buf *r,
                  srv_buf *c) {
    srv_think t;
    srv_think_init(&t, syn, open);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_in_reasoning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Chat templates against the model's own Jinja template rendered by jinja2
 * (tests/peer/record_chat.py -> tests/data/chat_templates.txt). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "chat.h"
#include "gguf.h"
#include "model_path.h"
#include "testutil.h"

static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 'n' ? '\n' : *s;
        } else if (*s != '\n') {
            *o++ = *s;
        }
    }
    *o = 0;
}

static const char *LLAMA3_MARKER = "<|start_header_id|>{{ role }}<|end_header_id|>";

static void test_renders_like_jinja(void **state) {
    (void)state;
    char path[1024];
    if (clf_model_path(NULL, path, sizeof path) != CLF_OK) fail_msg("%s", clf_last_error());
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_gguf_str ts;
    TU_OK(clf_gguf_get_str(g, "tokenizer.chat_template", &ts));
    char *model_tmpl = strndup(ts.ptr, ts.len);
    FILE *f = fopen("tests/data/chat_templates.txt", "r");
    assert_non_null(f);
    static char line[4096], roles[8][16], contents[8][512];
    clf_chat_msg msgs[8];
    clf_chat chat;
    int n = 0, checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == 'T') {
            TU_OK(clf_chat_init(strncmp(line + 2, "model", 5) == 0 ? model_tmpl : LLAMA3_MARKER, &chat));
            assert_int_equal(chat.format, strncmp(line + 2, "model", 5) == 0 ? CLF_CHAT_CHATML : CLF_CHAT_LLAMA3);
            n = 0;
        } else if (line[0] == 'M' && n < 8) {
            char *sp = strchr(line + 2, ' ');
            *sp = 0;
            snprintf(roles[n], sizeof roles[n], "%s", line + 2);
            snprintf(contents[n], sizeof contents[n], "%s", sp + 1);
            unescape(contents[n]);
            msgs[n] = (clf_chat_msg){roles[n], contents[n]};
            n++;
        } else if (line[0] == 'R') {
            unescape(line + 2);
            char *buf;
            size_t len;
            TU_OK(clf_chat_render(&chat, msgs, n, 1, &buf, &len));
            assert_string_equal(buf, line + 2);
            assert_int_equal(len, strlen(line + 2));
            free(buf);
            checked++;
        }
    }
    fclose(f);
    assert_int_equal(checked, 4);
    free(model_tmpl);
    clf_gguf_close(g);
}

static void test_unknown_template_is_an_error(void **state) {
    (void)state;
    clf_chat c;
    assert_int_equal(clf_chat_init("{{ messages | tojson }}", &c), CLF_ERR_FORMAT);
    assert_non_null(strstr(clf_last_error(), "ChatML"));
    TU_OK(clf_chat_init(NULL, &c));
    assert_int_equal(c.format, CLF_CHAT_CHATML);
    assert_null(c.default_system);
    assert_string_equal(clf_chat_turn_end(&c), "<|im_end|>\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_renders_like_jinja),
        cmocka_unit_test(test_unknown_template_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

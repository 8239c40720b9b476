/* Shared by test_tools and test_tool_formats: the parse of every prefix of
 * a model's output agrees with the whole's (content no longer than the
 * whole's, names whole, arguments prefixes of the final ones, calls only
 * accrue, a call marked complete equal to the final one). Include after
 * cmocka.h, testutil.h and tools.h. */
#ifndef CLF_TEST_TOOL_STREAM_H
#define CLF_TEST_TOOL_STREAM_H

static void tu_check_tool_stream(const clf_chat *c, const char *text, size_t len, const clf_tool_reply *whole) {
    for (size_t cut = 0; cut <= len; cut++) {
        clf_tool_reply *r;
        TU_OK(clf_tools_parse(c, text, cut, 0, &r));
        if (r->content_len > whole->content_len)
            fail_msg("cut %zu of '%.*s': content %zu > %zu", cut, (int)len, text, r->content_len, whole->content_len);
        if (r->n_calls > whole->n_calls) fail_msg("cut %zu of '%.*s': %d calls", cut, (int)len, text, r->n_calls);
        for (int i = 0; i < r->n_calls; i++) {
            const clf_tool_parsed *p = &r->calls[i], *w = &whole->calls[i];
            assert_non_null(p->name);
            if (strcmp(p->name, w->name)) fail_msg("cut %zu of '%.*s': name '%s'", cut, (int)len, text, p->name);
            if (p->arguments) {
                size_t k = strlen(p->arguments);
                if (k > strlen(w->arguments) || memcmp(p->arguments, w->arguments, k))
                    fail_msg("cut %zu: arguments '%s' not a prefix of '%s'", cut, p->arguments, w->arguments);
            }
            if (p->complete) assert_string_equal(p->arguments, w->arguments);
        }
        clf_tool_reply_free(r);
    }
}

#endif

/* libFuzzer harness for the Jinja engine (text/chat/jinja*.c): the input up
 * to its first NUL byte is a chat template, the rest a JSON context (a
 * conversation with tools, tool calls and reasoning when there is none or
 * it is not JSON). A template renders or is refused with a message, never a
 * crash, a leak or a hang; under tight bounds, an output never passes its
 * bound. Seeds: the conformance corpus, tests/data/templates/ (run.sh). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

static const char DEFAULT_CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\", \"tool_calls\": [{\"id\": \"c1\","
    " \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": \"Bye\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\":"
    " {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}}}}], \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_tmpl = nul ? (size_t)(nul - data) : size;
    char *ctx = NULL;
    if (nul) { /* the context, NUL-terminated */
        size_t n = size - n_tmpl - 1;
        ctx = malloc(n + 1);
        if (!ctx) return 0;
        memcpy(ctx, nul + 1, n);
        ctx[n] = 0;
    }
    /* bounds small enough that every input runs in milliseconds */
    clf_jinja_limits lim;
    clf_jinja_default_limits(&lim);
    lim.max_iterations = 20000;
    lim.max_steps = 200000;
    lim.max_output = 1 << 16;
    lim.max_memory = 64u << 20;
    lim.max_recursion = 30;
    clf_jinja_template *t = NULL;
    if (clf_jinja_parse((const char *)data, n_tmpl, &lim, &t) != CLF_OK) {
        if (t || !clf_last_error()[0]) abort(); /* a refusal leaves nothing and says why */
        free(ctx);
        return 0;
    }
    char *out = NULL;
    size_t n_out = 0;
    clf_status st = clf_jinja_render(t, ctx && ctx[0] == '{' ? ctx : DEFAULT_CONTEXT, 1741343400, &out, &n_out);
    if (st != CLF_OK && st == CLF_ERR_FORMAT && ctx && ctx[0] == '{' && strstr(clf_last_error(), "not a JSON object"))
        st = clf_jinja_render(t, DEFAULT_CONTEXT, 1741343400, &out, &n_out);
    if (st == CLF_OK) {
        if (!out || n_out > lim.max_output || strlen(out) > n_out) abort();
    } else if (out || !clf_last_error()[0]) {
        abort();
    }
    free(out);
    clf_jinja_free(t);
    free(ctx);
    return 0;
}

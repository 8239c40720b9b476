/* POST /apply-template in llama-server's shape: a chat request's body
 * ({"messages": [...], "tools"?, "chat_template_kwargs"?, ...}, checked as
 * /v1/chat/completions checks it) -> {"prompt": TEXT}, the text the model's
 * chat template renders the conversation to, with the header of the answer
 * (add_generation_prompt), so that a user can see what the model is given.
 * The tools are in it as a chat request renders them (none under
 * tool_choice "none"). A leading BOS the tokenizer adds is not in the text,
 * as in the prompt's tokens. On the vocabulary alone: nothing reaches the
 * device. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static json_t *apply(const srv_app *app, srv_api_req *q, srv_api_error *e) {
    clinfer_tools *tools = NULL;
    if (srv_request_reasoning(app, q, e)) return NULL; /* a budget of 0: enable_thinking false */
    if (q->tools && q->tool_choice != CLINFER_TOOL_NONE &&
        clinfer_tools_create(app->m, q->tools, strlen(q->tools), &tools) != CLINFER_OK) {
        srv_api_bad(e, "tools", "%s", clinfer_last_error());
        return NULL;
    }
    size_t n_calls = 0;
    for (int i = 0; i < q->n_msgs; i++) n_calls += (size_t)q->msgs[i].n_calls;
    clinfer_tool_message *msgs = malloc((size_t)(q->n_msgs > 0 ? q->n_msgs : 1) * sizeof *msgs);
    clinfer_tool_call *calls = malloc((n_calls ? n_calls : 1) * sizeof *calls), *c = calls;
    json_t *j = NULL;
    if (!msgs || !calls) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    } else {
        for (int i = 0; i < q->n_msgs; i++) {
            const srv_msg *m = &q->msgs[i];
            msgs[i] = (clinfer_tool_message){m->role, m->content, c, m->n_calls, m->tool_call_id};
            for (int k = 0; k < m->n_calls; k++)
                *c++ = (clinfer_tool_call){m->calls[k].id, m->calls[k].name, m->calls[k].arguments};
        }
        char *text = NULL;
        size_t len = 0;
        clinfer_status st = clinfer_tools_chat_apply_kw(app->m, tools, msgs, q->n_msgs, 1, q->template_kwargs, &text, &len);
        if (st == CLINFER_OK) j = srv_api_pack("{s:o}", "prompt", srv_api_text_json(text, len));
        else if (st != CLINFER_ERR_MEMORY) srv_api_bad(e, "messages", "%s", clinfer_last_error());
        clinfer_free(text);
    }
    free(msgs);
    free(calls);
    clinfer_tools_free(tools);
    return j;
}

enum MHD_Result srv_apply_template(srv_app *app, struct MHD_Connection *c, const char *body, size_t len) {
    srv_api_req q;
    srv_api_error e = {0};
    json_t *j = srv_api_parse(body ? body : "", len, SRV_CHAT, &q, &e) == 0 ? apply(app, &q, &e) : NULL;
    srv_api_req_free(&q);
    if (j) return srv_http_send(c, 200, "application/json", srv_api_dump(j));
    if (e.http) return srv_http_send_error(c, &e);
    return srv_http_send(c, 500, "application/json", NULL); /* out of memory: clinfer_last_error says so */
}

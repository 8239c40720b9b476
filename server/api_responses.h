/* POST /v1/responses (api_responses.c) and POST /v1/messages,
 * /v1/messages/count_tokens (api_anthropic.c): the Responses API and
 * Anthropic's Messages API, translated into chat requests. */
#ifndef SRV_API_RESPONSES_H
#define SRV_API_RESPONSES_H

#include "http.h"

/* ---- the parsers, without a model (tests/fuzz/fuzz_request.c drives them) ---- */

/* A /v1/responses body as the chat request it means: 0, or -1 with *e (OpenAI's shape). Free *q either way. */
int srv_responses_parse(const char *body, size_t len, srv_api_req *q, srv_api_error *e);
/* A /v1/messages body (count: /v1/messages/count_tokens': no max_tokens
 * nor sampling) as the chat request it means: 0, or -1 with *e. Free *q either way. */
int srv_messages_parse(const char *body, size_t len, int count, srv_api_req *q, srv_api_error *e);
/* An error as Anthropic's JSON: {"type": "error", "error": {"type", "message"}} (malloc'd; NULL: out of memory). */
char *srv_anthropic_error_json(const srv_api_error *e);

enum MHD_Result srv_responses(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_messages(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_messages_count(srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
/* An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}. */
enum MHD_Result srv_anthropic_error(struct MHD_Connection *c, const srv_api_error *e);

#endif

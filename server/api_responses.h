/* POST /v1/responses (api_responses.c) and POST /v1/messages,
 * /v1/messages/count_tokens (api_anthropic.c): the Responses API and
 * Anthropic's Messages API, translated into chat requests. */
#ifndef SRV_API_RESPONSES_H
#define SRV_API_RESPONSES_H

#include "http.h"

enum MHD_Result srv_responses(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_messages(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
enum MHD_Result srv_messages_count(srv_app *app, struct MHD_Connection *c, const char *body, size_t len);
/* An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}. */
enum MHD_Result srv_anthropic_error(struct MHD_Connection *c, const srv_api_error *e);

#endif

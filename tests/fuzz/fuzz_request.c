/* libFuzzer harness for `clinfer serve`'s request parser (server/api_openai.c):
 * random bytes as the body of a chat and of a completion request.
 *
 * Byte 0 picks the endpoint; the rest is the body. For every input:
 *  - srv_api_parse accepts it or answers an error in OpenAI's shape (a
 *    4xx status, a type, a non-empty message) that serializes to JSON;
 *  - what it accepts holds its promises: at least one message for a chat,
 *    a prompt (text or ids) for a completion, at most SRV_MAX_STOP stop
 *    strings, none empty, sampling values in their ranges;
 *  - the answer JSON built from the parsed text (message or prompt as the
 *    generated text, any bytes) is valid JSON;
 *  - nothing leaks (srv_api_req_free).
 * Byte 0's second bit picks /v1/embeddings' parser instead (embeddings.c):
 * accepted, every input is a non-empty text or id list, at most
 * SRV_MAX_INPUTS of them; the base64 of the ids as floats is well formed.
 * Byte 0's third bit picks the item APIs' parsers (api_responses.c,
 * api_anthropic.c), which translate a body into a chat request: bit 0 off
 * /v1/responses, on /v1/messages (bit 3: its count_tokens). Refused, an
 * error of a 4xx status whose JSON (OpenAI's, or Anthropic's for
 * messages) is valid; accepted, the chat request holds chat's promises.
 * Seeds: tests/fuzz/seeds-request/. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"
#include "api_responses.h"
#include "embeddings.h"

static void check_json(char *s) {
    if (!s) abort();
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j) abort();
    json_decref(j);
    free(s);
}

static int embeddings_case(const char *body, size_t len) {
    srv_embed_req r;
    srv_api_error e;
    if (srv_embed_parse(body, len, &r, &e) != 0) {
        if (e.http < 400 || e.http > 599 || !e.type || !e.message[0]) abort();
        check_json(srv_api_error_json(&e));
        srv_embed_req_free(&r);
        return 0;
    }
    if (r.n < 1 || r.n > SRV_MAX_INPUTS || r.dimensions < 0) abort();
    for (int i = 0; i < r.n; i++) {
        if (!r.text[i] == !r.ids[i]) abort(); /* one or the other */
        if (r.text[i] ? r.text_len[i] == 0 : r.n_ids[i] < 1) abort();
        if (r.ids[i]) {
            float *v = malloc((size_t)r.n_ids[i] * sizeof *v);
            if (!v) abort();
            for (int k = 0; k < r.n_ids[i]; k++) v[k] = (float)r.ids[i][k];
            char *b = srv_base64_floats(v, (size_t)r.n_ids[i]);
            if (!b || strlen(b) != ((size_t)r.n_ids[i] * 4 + 2) / 3 * 4) abort();
            free(b), free(v);
        }
    }
    srv_embed_req_free(&r);
    return 0;
}

/* What a parsed chat request promises, whichever API it came from. */
static void check_chat(const srv_api_req *r) {
    if (r->kind != SRV_CHAT || r->n_msgs < 1 || r->n_stop > SRV_MAX_STOP || r->n != 1) abort();
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i][0]) abort();
    for (int i = 0; i < r->n_msgs; i++)
        if (!r->msgs[i].content || !r->msgs[i].role) abort();
    if (!(r->sp.temperature >= 0 && r->sp.temperature <= 2) || !(r->sp.top_p >= 0 && r->sp.top_p <= 1) ||
        r->sp.top_k < 0 || r->max_tokens < 0)
        abort();
}

static int items_case(uint8_t mode, const char *body, size_t len) {
    srv_api_req r;
    srv_api_error e;
    const int messages = mode & 1, count = !!(mode & 8);
    int rc = messages ? srv_messages_parse(body, len, count, &r, &e) : srv_responses_parse(body, len, &r, &e);
    if (rc != 0) {
        if (e.http < 400 || e.http > 599 || !e.type || !e.message[0]) abort();
        check_json(messages ? srv_anthropic_error_json(&e) : srv_api_error_json(&e));
    } else {
        check_chat(&r);
        if (messages && !count && r.max_tokens < 1) abort(); /* max_tokens is required there */
    }
    srv_api_req_free(&r);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 4) return items_case(data[0], (const char *)data + 1, size - 1);
    if (data[0] & 2) return embeddings_case((const char *)data + 1, size - 1);
    srv_kind kind = data[0] & 1 ? SRV_COMPLETION : SRV_CHAT;
    srv_api_req r;
    srv_api_error e;
    if (srv_api_parse((const char *)data + 1, size - 1, kind, &r, &e) != 0) {
        if (e.http < 400 || e.http > 599 || !e.type || !e.message[0]) abort();
        check_json(srv_api_error_json(&e));
        srv_api_req_free(&r);
        return 0;
    }
    if (kind == SRV_CHAT && r.n_msgs < 1) abort();
    if (kind == SRV_COMPLETION && !r.prompt && r.n_prompt_ids < 1) abort();
    if (r.n_stop > SRV_MAX_STOP) abort();
    for (int i = 0; i < r.n_stop; i++)
        if (!r.stop[i][0]) abort();
    if (!(r.sp.temperature >= 0 && r.sp.temperature <= 2) || !(r.sp.top_p >= 0 && r.sp.top_p <= 1) ||
        !(r.sp.min_p >= 0 && r.sp.min_p <= 1) || r.sp.top_k < 0 || r.max_tokens < 0)
        abort();
    const char *text = kind == SRV_CHAT ? r.msgs[r.n_msgs - 1].content : r.prompt ? r.prompt : "";
    srv_api_resp resp = {kind, "id", r.model ? r.model : "m", 0, "stop"};
    srv_api_usage u = {1, 2, 0, 1, 1, 0};
    check_json(srv_api_completion_json(&resp, text, strlen(text), &u));
    resp.finish = NULL;
    check_json(srv_api_chunk_json(&resp, 1, text, strlen(text), NULL));
    srv_api_req_free(&r);
    return 0;
}

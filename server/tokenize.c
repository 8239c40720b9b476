/* POST /tokenize and /detokenize in llama-server's shapes:
 *   {"content": TEXT, "add_special": false, "parse_special": true, "with_pieces": false}
 *     -> {"tokens": [id, ...]}, with_pieces: {"tokens": [{"id": id, "piece": PIECE}, ...]}
 *        (PIECE a string, or its bytes as an array of numbers where it is not valid UTF-8)
 *   {"tokens": [id, ...]} -> {"content": TEXT} (control tokens as their text)
 * On the model's vocabulary alone: nothing reaches the device. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static int get_flag(json_t *root, const char *key, int *dst, srv_api_error *e) {
    json_t *v = srv_api_field(root, key);
    return v ? srv_api_unpack(v, key, e, "b", dst) : 0;
}

/* A piece as llama-server gives it: its text where it is valid UTF-8, else its bytes. */
static json_t *piece_json(const char *p, size_t n) {
    size_t fixed;
    char *u = srv_api_utf8(p, n, &fixed);
    int valid = u && fixed == n && !memcmp(u, p, n);
    free(u);
    if (valid) return json_stringn(p, n);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer((unsigned char)p[i]))) json_decref(a), a = NULL;
    return a;
}

static json_t *tokenize(const srv_app *app, json_t *root, srv_api_error *e) {
    json_t *c = srv_api_field(root, "content");
    const char *text;
    int add_special = 0, parse_special = 1, with_pieces = 0;
    if (!c) {
        srv_api_bad(e, "content", "'content' is required");
        return NULL;
    }
    if (srv_api_unpack(c, "content", e, "s", &text) || get_flag(root, "add_special", &add_special, e) ||
        get_flag(root, "parse_special", &parse_special, e) || get_flag(root, "with_pieces", &with_pieces, e))
        return NULL;
    int32_t *ids = NULL;
    int n = 0;
    if (clinfer_tokenize(app->m, text, json_string_length(c), add_special, parse_special, &ids, &n) != CLINFER_OK) {
        srv_api_bad(e, "content", "%s", clinfer_last_error());
        return NULL;
    }
    json_t *tokens = json_array();
    for (int i = 0; tokens && i < n; i++) {
        json_t *t;
        if (with_pieces) {
            size_t len;
            const char *p = clinfer_token_piece(app->m, ids[i], &len);
            t = srv_api_pack("{s:i, s:o}", "id", (int)ids[i], "piece", piece_json(p, len));
        } else {
            t = json_integer(ids[i]);
        }
        if (!t || json_array_append_new(tokens, t)) json_decref(tokens), tokens = NULL;
    }
    if (!tokens) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    clinfer_free(ids);
    return tokens ? srv_api_pack("{s:o}", "tokens", tokens) : NULL;
}

static json_t *detokenize(const srv_app *app, json_t *root, srv_api_error *e) {
    json_t *t = srv_api_field(root, "tokens");
    if (!t || !json_is_array(t)) {
        srv_api_bad(e, "tokens", "'tokens' must be an array of token ids");
        return NULL;
    }
    int32_t *ids = malloc((json_array_size(t) + 1) * sizeof *ids);
    if (!ids) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return NULL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(t, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= clinfer_model_n_vocab(app->m)) {
            srv_api_bad(e, "tokens", "'tokens[%zu]' is not a token id (the vocabulary has %d)", i,
                        clinfer_model_n_vocab(app->m));
            free(ids);
            return NULL;
        }
        ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    clinfer_status st = clinfer_detokenize(app->m, ids, (int)json_array_size(t), 1, &text, &len);
    free(ids);
    json_t *j = st == CLINFER_OK ? srv_api_pack("{s:o}", "content", srv_api_text_json(text, len)) : NULL;
    clinfer_free(text);
    return j;
}

enum MHD_Result srv_tokenize(srv_app *app, struct MHD_Connection *c, const char *body, size_t len, int detok) {
    srv_api_error e = {0};
    json_t *root = srv_api_load(body ? body : "", len, &e);
    json_t *j = root ? (detok ? detokenize : tokenize)(app, root, &e) : NULL;
    json_decref(root);
    if (j) return srv_http_send(c, 200, "application/json", srv_api_dump(j));
    if (e.http) return srv_http_send_error(c, &e);
    return srv_http_send(c, 500, "application/json", NULL); /* out of memory: clinfer_last_error says so */
}

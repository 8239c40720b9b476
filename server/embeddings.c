/* POST /v1/embeddings: the inputs tokenized (BOS where the model adds it,
 * control-token text as text) and checked against the context, embedded
 * one after another on the embedder's session (clinfer_embed: the model's
 * pooling, else mean; normalised), answered in OpenAI's shape. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embeddings.h"
#include "http.h"

struct srv_embedder {
    clinfer_model *m;
    int n_ctx;
    clinfer_kv_type kv;
    pthread_mutex_t mu; /* one request at a time on the session */
    clinfer_session *s; /* created on first use */
};

clinfer_status srv_embedder_create(clinfer_model *m, int n_ctx, clinfer_kv_type kv, srv_embedder **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    (*out)->m = m, (*out)->n_ctx = n_ctx, (*out)->kv = kv;
    pthread_mutex_init(&(*out)->mu, NULL);
    return CLINFER_OK;
}

void srv_embedder_free(srv_embedder *e) {
    if (!e) return;
    clinfer_session_free(e->s);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- the request ------------------------------------------------------------ */

void srv_embed_req_free(srv_embed_req *r) {
    for (int i = 0; i < r->n; i++) {
        if (r->text) free(r->text[i]);
        if (r->ids) free(r->ids[i]);
    }
    free(r->text), free(r->text_len), free(r->ids), free(r->n_ids), free(r->model);
    memset(r, 0, sizeof *r);
}

static int oom(srv_api_error *e) {
    srv_api_error_set(e, 500, "server_error", NULL, NULL, "out of host memory");
    return -1;
}

/* Input i: a non-empty string or a non-empty array of token ids. */
static int one_input(json_t *v, int i, int listed, srv_embed_req *r, srv_api_error *e) {
    char where[32] = "input";
    if (listed) snprintf(where, sizeof where, "input[%d]", i);
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        if (n == 0) {
            srv_api_bad(e, "input", "'%s' is empty", where);
            return -1;
        }
        if (!(r->text[i] = malloc(n + 1))) return oom(e);
        memcpy(r->text[i], json_string_value(v), n + 1);
        r->text_len[i] = n;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) == 0) {
        srv_api_bad(e, "input", "'%s' must be a non-empty string or a non-empty array of token ids", where);
        return -1;
    }
    if (!(r->ids[i] = malloc(json_array_size(v) * sizeof *r->ids[i]))) return oom(e);
    size_t k;
    json_t *t;
    json_array_foreach(v, k, t) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            srv_api_bad(e, "input", "'%s[%zu]' is not a token id", where, k);
            return -1;
        }
        r->ids[i][k] = (int32_t)json_integer_value(t);
    }
    r->n_ids[i] = (int)json_array_size(v);
    return 0;
}

/* input: "text", ["text", ...], [id, ...] or [[id, ...], ...]. */
static int parse_input(json_t *root, srv_embed_req *r, srv_api_error *e) {
    json_t *in = srv_api_field(root, "input");
    if (!in) {
        srv_api_bad(e, "input", "'input' is required");
        return -1;
    }
    /* one input unless a list of strings or of arrays */
    int listed = json_is_array(in) && json_array_size(in) > 0 && !json_is_integer(json_array_get(in, 0));
    if (json_is_array(in) && json_array_size(in) == 0) {
        srv_api_bad(e, "input", "'input' is an empty list");
        return -1;
    }
    size_t n = listed ? json_array_size(in) : 1;
    if (n > SRV_MAX_INPUTS) {
        srv_api_bad(e, "input", "'input' holds %zu inputs, more than %d", n, SRV_MAX_INPUTS);
        return -1;
    }
    r->text = calloc(n, sizeof *r->text);
    r->text_len = calloc(n, sizeof *r->text_len);
    r->ids = calloc(n, sizeof *r->ids);
    r->n_ids = calloc(n, sizeof *r->n_ids);
    if (!r->text || !r->text_len || !r->ids || !r->n_ids) return oom(e);
    r->n = (int)n;
    for (size_t i = 0; i < n; i++)
        if (one_input(listed ? json_array_get(in, i) : in, (int)i, listed, r, e)) return -1;
    return 0;
}

static int parse_fields(json_t *root, srv_embed_req *r, srv_api_error *e) {
    json_t *v = srv_api_field(root, "model");
    const char *s;
    if (v) {
        if (srv_api_unpack(v, "model", e, "s", &s)) return -1;
        if (!(r->model = strdup(s))) return oom(e);
    }
    if (parse_input(root, r, e)) return -1;
    if ((v = srv_api_field(root, "encoding_format"))) {
        if (srv_api_unpack(v, "encoding_format", e, "s", &s)) return -1;
        if (strcmp(s, "float") && strcmp(s, "base64")) {
            srv_api_bad(e, "encoding_format", "'encoding_format' '%.64s' is not float or base64", s);
            return -1;
        }
        r->base64 = !strcmp(s, "base64");
    }
    if ((v = srv_api_field(root, "dimensions"))) {
        json_int_t d;
        if (srv_api_unpack(v, "dimensions", e, "I", &d)) return -1;
        if (d < 1 || d > 1 << 20) {
            srv_api_bad(e, "dimensions", "'dimensions' is %lld, out of its range 1..%d", (long long)d, 1 << 20);
            return -1;
        }
        r->dimensions = (int)d;
    }
    return 0;
}

int srv_embed_parse(const char *body, size_t len, srv_embed_req *r, srv_api_error *e) {
    memset(r, 0, sizeof *r);
    json_t *root = srv_api_load(body, len, e);
    int rc = root ? parse_fields(root, r, e) : -1;
    json_decref(root);
    return rc;
}

/* ---- the answer ------------------------------------------------------------- */

char *srv_base64_floats(const float *v, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t bytes = n * 4;
    unsigned char *raw = malloc(bytes + 2);
    char *out = malloc((bytes + 2) / 3 * 4 + 1), *o = out;
    if (!raw || !out) {
        free(raw), free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) { /* little-endian, whatever the host */
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        for (int k = 0; k < 4; k++) raw[4 * i + k] = (unsigned char)(bits >> (8 * k));
    }
    raw[bytes] = raw[bytes + 1] = 0;
    for (size_t i = 0; i < bytes; i += 3) {
        const unsigned char *b = raw + i;
        const size_t k = bytes - i < 3 ? bytes - i : 3;
        *o++ = A[b[0] >> 2];
        *o++ = A[(b[0] & 3) << 4 | b[1] >> 4];
        *o++ = k > 1 ? A[(b[1] & 15) << 2 | b[2] >> 6] : '=';
        *o++ = k > 2 ? A[b[2] & 63] : '=';
    }
    *o = 0;
    free(raw);
    return out;
}

/* One data item: the vector as floats or base64. */
static json_t *item(int index, const float *v, int d, int base64) {
    json_t *emb;
    if (base64) {
        char *b = srv_base64_floats(v, (size_t)d);
        emb = b ? json_string(b) : NULL;
        free(b);
    } else {
        emb = json_array();
        for (int k = 0; emb && k < d; k++)
            if (json_array_append_new(emb, json_real(v[k]))) json_decref(emb), emb = NULL;
    }
    if (!emb) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    return srv_api_pack("{s:s, s:i, s:o}", "object", "embedding", "index", index, "embedding", emb);
}

/* ---- the endpoint ----------------------------------------------------------- */

/* Input i's tokens (*owned: malloc'd by the tokenizer); -1 with a 400. */
static int input_tokens(const srv_app *app, const srv_embed_req *q, int i, int32_t **ids, int *n, int *owned,
                        srv_api_error *e) {
    *owned = 0;
    if (q->text[i]) {
        clinfer_status st = clinfer_tokenize(app->m, q->text[i], q->text_len[i], 1, 0, ids, n);
        if (st != CLINFER_OK) {
            if (st == CLINFER_ERR_MEMORY) srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            else srv_api_bad(e, "input", "input %d: %s", i, clinfer_last_error());
            return -1;
        }
        *owned = 1;
    } else {
        *ids = q->ids[i], *n = q->n_ids[i];
        for (int k = 0; k < *n; k++)
            if ((*ids)[k] >= clinfer_model_n_vocab(app->m)) {
                srv_api_bad(e, "input", "'input[%d][%d]' is %d, not a token id (the vocabulary has %d)", i, k,
                            (int)(*ids)[k], clinfer_model_n_vocab(app->m));
                return -1;
            }
    }
    if (*n == 0) {
        srv_api_bad(e, "input", "input %d has no tokens", i);
        return -1;
    }
    if (*n > app->n_ctx) {
        srv_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "input",
                          "input %d is %d tokens, longer than the context of %d tokens (--ctx)", i, *n, app->n_ctx);
        return -1;
    }
    return 0;
}

/* The session, created on first use (under the lock); -1 with a 500. */
static int ready(srv_embedder *em, srv_api_error *e) {
    if (em->s) return 0;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = em->n_ctx, sp.kv_type = em->kv;
    if (clinfer_session_create(em->m, &sp, &em->s) == CLINFER_OK) return 0;
    srv_api_error_set(e, 500, "server_error", NULL, NULL, "the embeddings' session: %s", clinfer_last_error());
    return -1;
}

/* Every input's vector into data, the tokens counted; -1 with *e set.
 * All inputs are tokenized and checked before any is evaluated. */
static int embed_all(srv_app *app, const srv_embed_req *q, int d, json_t *data, int *tokens, srv_api_error *e) {
    srv_embedder *em = app->embedder;
    int32_t **ids = calloc((size_t)q->n, sizeof *ids);
    int *n = calloc((size_t)q->n, sizeof *n), *owned = calloc((size_t)q->n, sizeof *owned);
    float *v = malloc((size_t)d * sizeof *v);
    int rc = ids && n && owned && v ? 0 : oom(e);
    for (int i = 0; rc == 0 && i < q->n; i++) {
        rc = input_tokens(app, q, i, &ids[i], &n[i], &owned[i], e);
        *tokens += n[i];
    }
    if (rc == 0) {
        pthread_mutex_lock(&em->mu);
        rc = ready(em, e);
        for (int i = 0; rc == 0 && i < q->n; i++) {
            clinfer_status st = clinfer_embed(em->s, ids[i], n[i], NULL, v);
            if (st == CLINFER_ERR_INTERRUPTED)
                srv_api_error_set(e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
            else if (st == CLINFER_ERR_ARG) /* what the library cannot do (a model split across devices) */
                srv_api_error_set(e, 501, "server_error", "not_implemented", NULL, "%s", clinfer_last_error());
            else if (st != CLINFER_OK)
                srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
            json_t *it = st == CLINFER_OK ? item(i, v, d, q->base64) : NULL;
            rc = st == CLINFER_OK && it && json_array_append_new(data, it) == 0 ? 0 : -1;
            if (st == CLINFER_OK && rc) /* the item could not be made */
                srv_api_error_set(e, 500, "server_error", NULL, NULL, "%s", clinfer_last_error());
        }
        pthread_mutex_unlock(&em->mu);
    }
    for (int i = 0; owned && i < q->n; i++)
        if (owned[i]) clinfer_free(ids[i]);
    free(ids), free(n), free(owned), free(v);
    return rc;
}

enum MHD_Result srv_embeddings(srv_http *h, srv_app *app, struct MHD_Connection *c, const char *body, size_t len) {
    srv_embed_req q;
    srv_api_error e;
    clinfer_model_info info = {.size = sizeof info};
    json_t *data = NULL;
    int tokens = 0, ok = 0;
    srv_http_busy(h, 1); /* a shutdown waits for it */
    if (srv_embed_parse(body ? body : "", len, &q, &e) == 0 && clinfer_model_get_info(app->m, &info) == CLINFER_OK) {
        /* any model id is answered by the loaded model (as llama-server does) */
        if (q.dimensions && q.dimensions != info.n_embd)
            srv_api_bad(&e, "dimensions", "'dimensions' must be the model's %d: its vectors are not shortened",
                        info.n_embd);
        else if (!(data = json_array()))
            oom(&e);
        else
            ok = embed_all(app, &q, info.n_embd, data, &tokens, &e) == 0;
    }
    srv_embed_req_free(&q);
    enum MHD_Result rc;
    if (!ok) {
        json_decref(data);
        rc = srv_http_send_error(c, &e);
    } else {
        json_t *j = srv_api_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data, "model",
                                 app->model_id, "usage", "prompt_tokens", tokens, "total_tokens", tokens);
        /* 9 significant digits: a float's exact value back */
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        if (j && !text) clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        json_decref(j);
        rc = srv_http_send(c, 200, "application/json", text);
    }
    srv_http_busy(h, -1);
    return rc;
}

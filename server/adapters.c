/* LoRA adapters in the server (adapters.h). */
#include "adapters.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

/* [{"id": N, "scale": X}, ...] into ids and scales (at most SRV_MAX_LORA entries). */
static int parse_list(json_t *arr, const char *param, int *ids, float *scales, int *n, srv_api_error *e) {
    if (!json_is_array(arr)) {
        srv_api_bad(e, param, "'%s' must be an array of objects with 'id' and 'scale'", param);
        return -1;
    }
    if (json_array_size(arr) > SRV_MAX_LORA) {
        srv_api_bad(e, param, "'%s' lists %zu adapters (at most %d)", param, json_array_size(arr), SRV_MAX_LORA);
        return -1;
    }
    size_t i;
    json_t *it;
    *n = 0;
    json_array_foreach(arr, i, it) {
        json_t *id = json_is_object(it) ? json_object_get(it, "id") : NULL;
        json_t *sc = json_is_object(it) ? json_object_get(it, "scale") : NULL;
        if (!json_is_integer(id) || (sc && !json_is_number(sc))) {
            srv_api_bad(e, param, "'%s'[%zu] must be an object with an integer 'id' and a number 'scale'", param, i);
            return -1;
        }
        const double s = sc ? json_number_value(sc) : 0.0; /* llama-server: a missing scale is 0 */
        if (json_integer_value(id) < 0 || json_integer_value(id) >= SRV_MAX_LORA || !isfinite(s) || fabs(s) > 1e6) {
            srv_api_bad(e, param, "'%s'[%zu]: id %lld or scale %g out of range", param, i,
                        (long long)json_integer_value(id), s);
            return -1;
        }
        ids[*n] = (int)json_integer_value(id);
        scales[(*n)++] = (float)s;
    }
    return 0;
}

int srv_lora_parse(json_t *root, srv_api_req *r, srv_api_error *e) {
    json_t *l = srv_api_field(root, "lora");
    if (!l) return 0;
    if (parse_list(l, "lora", r->lora_id, r->lora_scale, &r->n_lora_req, e)) return -1;
    r->has_lora = r->n_lora_req > 0; /* an empty list: the global scales, as llama-server */
    return 0;
}

/* The global scales are written by POST /lora-adapters on one HTTP thread
 * and read by every request's resolve and GET on others: one lock, so a
 * request takes the old scales or the new ones whole (each job then holds
 * its own copy). */
static pthread_mutex_t scales_mu = PTHREAD_MUTEX_INITIALIZER;

int srv_lora_resolve(const clinfer_model *m, srv_api_req *q, srv_api_error *e) {
    const int n = clinfer_model_lora_count(m);
    if (n > SRV_MAX_LORA) {
        srv_api_error_set(e, 500, "server_error", NULL, NULL, "more than %d LoRA adapters loaded", SRV_MAX_LORA);
        return -1;
    }
    q->n_lora = n;
    pthread_mutex_lock(&scales_mu);
    for (int i = 0; i < n; i++) q->lora[i] = q->has_lora ? 0.0f : clinfer_lora_scale(clinfer_model_lora(m, i));
    pthread_mutex_unlock(&scales_mu);
    for (int k = 0; q->has_lora && k < q->n_lora_req; k++) {
        if (q->lora_id[k] >= n) {
            srv_api_bad(e, "lora", "'lora': no adapter of id %d (%d loaded: GET /lora-adapters)", q->lora_id[k], n);
            return -1;
        }
        q->lora[q->lora_id[k]] = q->lora_scale[k];
    }
    int on = 0;
    for (int i = 0; i < n; i++) on += q->lora[i] != 0;
    if (on > 8) {
        srv_api_bad(e, "lora", "'lora': %d adapters at a nonzero scale (a request takes at most 8)", on);
        return -1;
    }
    return 0;
}

char *srv_lora_list_json(const clinfer_model *m) {
    json_t *arr = json_array();
    pthread_mutex_lock(&scales_mu);
    for (int i = 0; arr && i < clinfer_model_lora_count(m); i++) {
        const clinfer_lora *a = clinfer_model_lora(m, i);
        json_t *o = srv_api_pack("{s:i, s:s, s:f}", "id", i, "path", clinfer_lora_path(a), "scale",
                                 (double)clinfer_lora_scale(a));
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    pthread_mutex_unlock(&scales_mu);
    return arr ? srv_api_dump(arr) : NULL;
}

int srv_lora_post(const clinfer_model *m, const char *body, size_t len, srv_api_error *e) {
    json_error_t err;
    json_t *root = json_loadb(body, len, 0, &err);
    if (!root) {
        srv_api_bad(e, NULL, "the body is not JSON: %s", err.text);
        return -1;
    }
    int ids[SRV_MAX_LORA], n_req = 0;
    float scales[SRV_MAX_LORA];
    const int n = clinfer_model_lora_count(m);
    int rc = parse_list(root, "body", ids, scales, &n_req, e);
    json_decref(root);
    if (rc) return -1;
    for (int k = 0; k < n_req; k++)
        if (ids[k] >= n) {
            srv_api_bad(e, NULL, "no adapter of id %d (%d loaded)", ids[k], n);
            return -1;
        }
    /* those not listed go to 0, as llama-server's */
    pthread_mutex_lock(&scales_mu);
    for (int i = 0; i < n; i++) {
        float s = 0;
        for (int k = 0; k < n_req; k++)
            if (ids[k] == i) s = scales[k];
        clinfer_lora_set_scale(clinfer_model_lora(m, i), s);
    }
    pthread_mutex_unlock(&scales_mu);
    return 0;
}

double srv_lora_bytes(const clinfer_model *m) {
    double bytes = 0;
    struct stat sb;
    for (int i = 0; i < clinfer_model_lora_count(m); i++)
        if (stat(clinfer_lora_path(clinfer_model_lora(m, i)), &sb) == 0) bytes += (double)sb.st_size;
    return bytes;
}

/* The public API's LoRA adapters (include/clinfer.h): loaded on a model,
 * which owns them, and chosen per sequence of a session (models/lora.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "lora.h"

struct clinfer_lora {
    clf_lora *l;
    char *path;
    float scale; /* the default scale (clinfer_lora_scale) */
};

clinfer_status clinfer_lora_load(clinfer_model *m, const char *path, clinfer_lora **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(path);
    API_NOT_NULL(out);
    *out = NULL;
    API_TRY(api_need_weights(m, "clinfer_lora_load"));
    clinfer_lora *a = calloc(1, sizeof *a);
    clinfer_lora **grown = realloc(m->loras, (size_t)(m->n_loras + 1) * sizeof *grown);
    if (grown) m->loras = grown;
    if (!a || !grown || !(a->path = strdup(path))) {
        free(a);
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    }
    /* the file is read while it uploads, then closed: the adapter's weights live on the device */
    clf_gguf *g;
    clf_status st = clf_gguf_open(path, &g);
    if (st == CLF_OK) {
        pthread_mutex_lock(&m->device_lock); /* its uploads beside other sessions' passes */
        st = clf_lora_load(m->llama, g, &a->l);
        pthread_mutex_unlock(&m->device_lock);
        clf_gguf_close(g);
    }
    if (st != CLF_OK) {
        free(a->path);
        free(a);
        return (clinfer_status)clf_fail_ctx(st, "LoRA adapter %s: ", path);
    }
    a->scale = 1.0f;
    m->loras[m->n_loras++] = a;
    *out = a;
    return CLINFER_OK;
}

int clinfer_model_lora_count(const clinfer_model *m) { return m ? m->n_loras : 0; }

clinfer_lora *clinfer_model_lora(const clinfer_model *m, int i) {
    return m && i >= 0 && i < m->n_loras ? m->loras[i] : NULL;
}

const char *clinfer_lora_path(const clinfer_lora *a) { return a ? a->path : NULL; }

float clinfer_lora_scale(const clinfer_lora *a) { return a ? a->scale : 0.0f; }

clinfer_status clinfer_lora_set_scale(clinfer_lora *a, float scale) {
    API_NOT_NULL(a);
    if (!isfinite(scale)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "a LoRA scale must be finite");
    a->scale = scale;
    return CLINFER_OK;
}

clinfer_status clinfer_session_set_lora(clinfer_session *s, int seq, clinfer_lora *const *adapters,
                                        const float *scales, int n) {
    API_NOT_NULL(s);
    if (n < 0 || n > CLF_LORA_PER_SEQ)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "%d LoRA adapters for one sequence (0 to %d)", n,
                                        CLF_LORA_PER_SEQ);
    if (n && (!adapters || !scales)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "adapters or scales is NULL");
    clf_lora_use use[CLF_LORA_PER_SEQ];
    for (int i = 0; i < n; i++) {
        if (!adapters[i]) return (clinfer_status)clf_fail(CLF_ERR_ARG, "LoRA adapter %d is NULL", i);
        use[i] = (clf_lora_use){adapters[i]->l, scales[i]};
    }
    /* between passes: the plan of the next pass reads it */
    pthread_mutex_lock(&s->m->device_lock);
    clf_status st = clf_llama_ctx_set_lora(s->c, seq, use, n);
    pthread_mutex_unlock(&s->m->device_lock);
    return (clinfer_status)st;
}

void api_lora_free_all(clinfer_model *m) {
    for (int i = 0; i < m->n_loras; i++) {
        clf_lora_free(m->loras[i]->l);
        free(m->loras[i]->path);
        free(m->loras[i]);
    }
    free(m->loras);
    m->loras = NULL;
    m->n_loras = 0;
}

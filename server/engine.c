#include "engine.h"

#include <stdlib.h>
#include <string.h>

struct srv_engine {
    int n_slots, cap;
    clinfer_session *s; /* a sequence per slot */
    clinfer_model *m;   /* its model (the LoRA adapters) */
    clinfer_kv_type kv; /* its KV cache's type (srv_engine_bytes) */
    int32_t *token, *seq; /* a step's batch [cap] */
    int8_t *want;
};

clinfer_status srv_engine_create(clinfer_model *m, int n_slots, int n_ctx, clinfer_kv_type kv, size_t kv_memory,
                                 srv_engine **out) {
    *out = NULL;
    srv_engine *e = calloc(1, sizeof *e);
    if (!e) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    e->n_slots = n_slots;
    e->m = m;
    e->kv = kv;
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = n_ctx;
    sp.kv_type = kv;
    sp.n_seq = n_slots;
    clinfer_session_options so = {sizeof so, kv_memory};
    clinfer_status st = clinfer_session_create_with(m, &sp, &so, &e->s);
    if (st != CLINFER_OK) {
        srv_engine_free(e);
        return clinfer_fail_prefix(st, "%d slots (--parallel): ", n_slots);
    }
    *out = e;
    return CLINFER_OK;
}

void srv_engine_free(srv_engine *e) {
    if (!e) return;
    clinfer_session_free(e->s);
    free(e->token);
    free(e->seq);
    free(e->want);
    free(e);
}

int srv_engine_n_ctx(const srv_engine *e) { return clinfer_session_n_ctx(e->s); }
/* clinfer_session_create's default n_batch */
int srv_engine_n_batch(const srv_engine *e) { return srv_engine_n_ctx(e) < 512 ? srv_engine_n_ctx(e) : 512; }
void srv_engine_kv_pool(const srv_engine *e, clinfer_kv_pool *out) { clinfer_session_kv_pool(e->s, out); }

void srv_engine_bytes(const srv_engine *e, double *weights, double *kv) {
    clinfer_model_info i = {.size = sizeof i};
    clinfer_kv_pool pool;
    clinfer_model_get_info(e->m, &i);
    srv_engine_kv_pool(e, &pool);
    /* K and V of every layer's KV heads per position of the pool; head_dim:
     * Qwen3's and Gemma's are not n_embd / n_head; a quantized element
     * counted a byte (Q8_0's is 1.06, Q4_0's 0.56) */
    const double elem = e->kv == CLINFER_KV_F32 ? 4 : e->kv == CLINFER_KV_F16 ? 2 : 1;
    *weights = (double)i.device_bytes;
    *kv = (double)pool.n_blocks * pool.block * 2.0 * i.n_layer * i.n_head_kv * i.head_dim * elem;
}
const float *srv_engine_row_logits(const srv_engine *e, int row) { return clinfer_batch_logits(e->s, row); }
int srv_engine_slot_len(const srv_engine *e, int slot) { return clinfer_seq_len(e->s, slot); }
void srv_engine_slot_rewind(srv_engine *e, int slot, int pos) { clinfer_seq_rewind(e->s, slot, pos); }
clinfer_status srv_engine_slot_copy(srv_engine *e, int src, int dst, int n) {
    return clinfer_seq_copy(e->s, src, dst, n);
}
clinfer_status srv_engine_slot_save(srv_engine *e, int slot, const int32_t *tokens, int n, const char *path,
                                    size_t *bytes) {
    return clinfer_session_save_seq(e->s, slot, tokens, n, path, bytes);
}
clinfer_status srv_engine_slot_load(srv_engine *e, int slot, const char *path, int32_t *tokens, int cap, int *n,
                                    size_t *bytes) {
    return clinfer_session_load_seq(e->s, slot, path, tokens, cap, n, bytes);
}
clinfer_status srv_engine_slot_save_buf(srv_engine *e, int slot, const int32_t *tokens, int n, void **buf,
                                        size_t *bytes) {
    return clinfer_session_save_seq_buf(e->s, slot, tokens, n, buf, bytes);
}
clinfer_status srv_engine_slot_load_buf(srv_engine *e, int slot, const void *buf, size_t bytes, int32_t *tokens,
                                        int cap, int *n) {
    return clinfer_session_load_seq_buf(e->s, slot, buf, bytes, tokens, cap, n);
}

/* The step's batch arrays hold at least `need` rows. */
static int grow(srv_engine *e, int need) {
    if (need <= e->cap) return 1;
    int32_t *t = realloc(e->token, (size_t)need * sizeof *t);
    if (t) e->token = t;
    int32_t *q = t ? realloc(e->seq, (size_t)need * sizeof *q) : NULL;
    if (q) e->seq = q;
    int8_t *w = q ? realloc(e->want, (size_t)need) : NULL;
    if (w) e->want = w, e->cap = need;
    return w != NULL;
}

clinfer_status srv_engine_step(srv_engine *e, srv_entry *entries, int n) {
    int total = 0;
    for (int i = 0; i < n; i++) total += entries[i].n;
    if (!grow(e, total)) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    int at = 0;
    for (int i = 0; i < n; i++) {
        const srv_entry *en = &entries[i];
        memcpy(e->token + at, en->tokens, (size_t)en->n * sizeof *en->tokens);
        for (int k = 0; k < en->n; k++) e->seq[at + k] = en->slot, e->want[at + k] = en->want_logits == SRV_LOGITS_EVERY;
        entries[i].row0 = at;
        at += en->n;
        e->want[at - 1] = (int8_t)(en->want_logits != SRV_LOGITS_NONE);
        entries[i].logits = NULL;
    }
    clinfer_batch b = {.n_tokens = total, .token = e->token, .seq_id = e->seq, .logits = e->want};
    clinfer_status st = clinfer_decode(e->s, &b);
    if (st != CLINFER_OK) return st;
    at = 0;
    for (int i = 0; i < n; i++) {
        at += entries[i].n;
        if (entries[i].want_logits != SRV_LOGITS_NONE) entries[i].logits = clinfer_batch_logits(e->s, at - 1);
    }
    return CLINFER_OK;
}

clinfer_status srv_engine_warm(srv_engine *e) {
    clinfer_status st = CLINFER_OK;
    /* the shapes a server runs most: one slot's step, every slot's, and a
     * prompt's (16 tokens take the kernels of any longer one: cli_session_warm) */
    static const int32_t toks[16] = {0};
    const struct { int slots, tokens; } shapes[] = {{1, 1}, {e->n_slots, 1}, {1, 16}};
    for (size_t p = 0; p < sizeof shapes / sizeof shapes[0] && st == CLINFER_OK; p++) {
        const int n = shapes[p].slots;
        if (p == 1 && n == 1) continue;
        srv_entry *en = calloc((size_t)n, sizeof *en);
        if (!en) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        for (int i = 0; i < n; i++) en[i] = (srv_entry){.slot = i, .tokens = toks, .n = shapes[p].tokens, .want_logits = SRV_LOGITS_LAST};
        st = srv_engine_step(e, en, n);
        free(en);
        for (int i = 0; i < e->n_slots; i++) srv_engine_slot_rewind(e, i, 0);
        if (p && st == CLINFER_ERR_CONTEXT) st = CLINFER_OK; /* a KV pool too small for this shape */
    }
    return st;
}

clinfer_status srv_engine_slot_lora(srv_engine *e, int slot, const float *scales, int n) {
    clinfer_lora *a[64];
    float sc[64];
    int k = 0;
    for (int i = 0; i < n && k < 64; i++)
        if (scales[i] != 0) a[k] = clinfer_model_lora(e->m, i), sc[k++] = scales[i];
    return clinfer_session_set_lora(e->s, slot, a, sc, k);
}

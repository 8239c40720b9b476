/* The public API (include/clinfer.h): sessions (a context of one or more
 * sequences on a model), evaluation, batches, sequences, perplexity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "perplexity.h"

/* ---- sessions --------------------------------------------------------------- */

clinfer_session_params clinfer_session_default_params(void) {
    return (clinfer_session_params){.size = sizeof(clinfer_session_params), .kv_type = CLINFER_KV_F32};
}

clinfer_status clinfer_session_create(clinfer_model *m, const clinfer_session_params *params,
                                      clinfer_session **out) {
    return clinfer_session_create_with(m, params, NULL, out);
}

clinfer_status clinfer_session_create_with(clinfer_model *m, const clinfer_session_params *params,
                                           const clinfer_session_options *options, clinfer_session **out) {
    API_NOT_NULL(m);
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_session_params p = clinfer_session_default_params();
    clinfer_session_options o = {sizeof o, 0};
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_session_params"));
    API_TRY(api_read_params(&o, sizeof o, options, "clinfer_session_options"));
    API_TRY(api_need_weights(m, "clinfer_session_create"));
    if (p.n_ctx < 0 || p.n_batch < 0)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "n_ctx (%d) and n_batch (%d) must be >= 0", p.n_ctx, p.n_batch);
    if (api_kv_type(p.kv_type) == CLF_TYPE_COUNT)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "kv_type %d is not a clinfer_kv_type", (int)p.kv_type);
    if (p.n_seq < 0 || p.n_seq > 4096) return (clinfer_status)clf_fail(CLF_ERR_ARG, "n_seq %d: 1 to 4096", p.n_seq);
    clinfer_session *s = calloc(1, sizeof *s);
    if (!s) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    s->m = m;
    atomic_init(&s->cancel, 0);
    int n_seq = p.n_seq ? p.n_seq : 1;
    if (p.n_ctx == 0 && m->stages.n_ctx_fit > 0) p.n_ctx = m->stages.n_ctx_fit; /* the default, or less to fit */
    pthread_mutex_lock(&m->device_lock);
    clf_status st = clf_llama_ctx_create_pool(m->llama, p.n_ctx, p.n_batch, n_seq,
                                              api_kv_type(p.kv_type), o.kv_memory, &s->c);
    pthread_mutex_unlock(&m->device_lock);
    if (st == CLF_OK && !(s->entries = calloc((size_t)n_seq, sizeof *s->entries)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK && !(s->logits = malloc((size_t)m->info.n_vocab * sizeof *s->logits)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st != CLF_OK) {
        clinfer_session_free(s);
        return (clinfer_status)st;
    }
    *out = s;
    return CLINFER_OK;
}

void clinfer_session_free(clinfer_session *s) {
    if (!s) return;
    pthread_mutex_lock(&s->m->device_lock);
    clf_llama_ctx_free(s->c);
    pthread_mutex_unlock(&s->m->device_lock);
    free(s->logits);
    free(s->batch_logits);
    free(s->row_of);
    free(s->entries);
    free(s);
}

void api_acquire(clinfer_session *s) {
    pthread_mutex_lock(&s->m->device_lock);
    s->m->current = s;
}

void api_release(clinfer_session *s) {
    s->m->current = NULL;
    pthread_mutex_unlock(&s->m->device_lock);
}

int clinfer_session_n_ctx(const clinfer_session *s) { return s ? s->c->n_ctx : 0; }
int clinfer_session_n_past(const clinfer_session *s) { return s ? s->c->n_past : 0; }

void clinfer_session_set_drafter(clinfer_session *s, clinfer_drafter *d) {
    if (s) s->drafter = d;
}
int clinfer_session_n_seq(const clinfer_session *s) { return s ? s->c->n_seq : 0; }

void clinfer_session_kv_pool(const clinfer_session *s, clinfer_kv_pool *out) {
    if (!out) return;
    *out = (clinfer_kv_pool){0};
    if (!s) return;
    const clf_kv_cache *kv = s->c->kv.k ? &s->c->kv : &s->c->kv_swa;
    const clf_kv_blocks *b = s->c->kv.k ? &s->c->blk : &s->c->blk_swa;
    *out = (clinfer_kv_pool){kv->block, b->n_blocks, b->n_free};
}

size_t clinfer_session_kv_bytes(const clinfer_session *s) { return s ? s->c->kv.bytes + s->c->kv_swa.bytes : 0; }

clinfer_status clinfer_session_rewind(clinfer_session *s, int pos) {
    API_NOT_NULL(s);
    if (pos < 0 || pos > s->c->n_past)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "cannot rewind to %d: the session holds %d tokens", pos,
                                        s->c->n_past);
    clf_llama_rewind(s->c, pos);
    s->has_logits = 0;
    return CLINFER_OK;
}

static clf_status check_tokens(const clinfer_session *s, const int32_t *tokens, int n) {
    if (n <= 0 || !tokens) return clf_fail(CLF_ERR_ARG, "nothing to evaluate (%d tokens)", n);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            return clf_fail(CLF_ERR_ARG, "token %d at %d is not in the vocabulary (%d tokens)", tokens[i], i,
                            s->m->info.n_vocab);
    return CLF_OK;
}

/* A cancel stops the call it reaches, and only that one. */
static clf_status cancelled(clinfer_session *s, clf_status st) {
    if (st == CLF_ERR_INTERRUPTED) atomic_store(&s->cancel, 0);
    return st;
}

/* One evaluation, its turn on the device taken. */
static clf_status eval(clinfer_session *s, const int32_t *tokens, int n, int all_logits, float *logits) {
    CLF_TRY(check_tokens(s, tokens, n));
    s->has_logits = 0;
    api_acquire(s);
    clf_status st = clf_llama_eval(s->c, tokens, n, all_logits, logits);
    api_release(s);
    if (st != CLF_OK) return cancelled(s, st);
    if (logits != s->logits) /* the last row is the session's too */
        memcpy(s->logits, logits + (size_t)(n - 1) * s->m->info.n_vocab, (size_t)s->m->info.n_vocab * sizeof *logits);
    s->has_logits = 1;
    return CLF_OK;
}

clinfer_status clinfer_eval(clinfer_session *s, const int32_t *tokens, int n) {
    API_NOT_NULL(s);
    return (clinfer_status)eval(s, tokens, n, 0, s->logits);
}

clf_status api_session_eval_rows_last(clinfer_session *s, const int32_t *tokens, int n) {
    CLF_TRY(check_tokens(s, tokens, n));
    s->has_logits = 0;
    api_acquire(s);
    clf_status st = clf_llama_eval_rows(s->c, tokens, n, 1, s->logits);
    api_release(s);
    if (st != CLF_OK) return cancelled(s, st);
    s->has_logits = 1;
    return CLF_OK;
}

clinfer_status clinfer_eval_all(clinfer_session *s, const int32_t *tokens, int n, float *logits) {
    API_NOT_NULL(s);
    API_NOT_NULL(logits);
    return (clinfer_status)eval(s, tokens, n, 1, logits);
}

const float *clinfer_session_logits(const clinfer_session *s) { return s && s->has_logits ? s->logits : NULL; }

void clinfer_session_cancel(clinfer_session *s) {
    if (s) atomic_store(&s->cancel, 1);
}

/* The k best of the last token's logits, its turn on the device taken;
 * masked by mask_fn's words where it gives them (clf_llama_eval_top_masked). */
static clf_status eval_top(clinfer_session *s, const int32_t *tokens, int n, int k, clf_llama_mask_fn mask_fn,
                           void *user, float *vals, int32_t *ids, int *nonfinite, int *masked) {
    *masked = 0;
    if (k < 1 || k > CLINFER_TOP_K_MAX) return clf_fail(CLF_ERR_ARG, "top k %d: 1 to %d", k, CLINFER_TOP_K_MAX);
    CLF_TRY(check_tokens(s, tokens, n));
    s->has_logits = 0;
    api_acquire(s);
    clf_status st = clf_llama_eval_top_masked(s->c, tokens, n, k, mask_fn, user, vals, ids, nonfinite, masked);
    api_release(s);
    return cancelled(s, st);
}

clinfer_status clinfer_eval_top(clinfer_session *s, const int32_t *tokens, int n, int k, float *vals, int32_t *ids,
                                int *nonfinite) {
    API_NOT_NULL(s);
    API_NOT_NULL(vals);
    API_NOT_NULL(ids);
    API_NOT_NULL(nonfinite);
    return (clinfer_status)eval_top(s, tokens, n, k, NULL, NULL, vals, ids, nonfinite, &(int){0});
}

/* The grammar's mask for clf_llama_eval_top_masked: the sampler and its
 * session. */
typedef struct grammar_mask {
    clinfer_session *s;
    clinfer_sampler *smp;
} grammar_mask;

/* Made outside the model's turn: the forward pass is queued already (its
 * kernels' arguments taken, its inputs this context's own), the mask is
 * host work on the sampler and the vocabulary's shared read-only trie, so
 * another session may queue its work meanwhile and nothing races. That
 * session's passes then run before this row's selection on the one queue,
 * as they would have run before this pass had they come first. */
static const uint32_t *grammar_mask_bits(void *user) {
    grammar_mask *g = user;
    api_release(g->s);
    const int made = api_grammar_device_mask(g->smp);
    api_acquire(g->s);
    return made ? g->smp->mask_bits : NULL;
}

clf_status api_session_eval_top_masked(clinfer_session *s, const int32_t *tokens, int n, int k, float *vals,
                                       int32_t *ids, int *nonfinite, clinfer_sampler *smp, int *masked) {
    grammar_mask g = {s, smp};
    return eval_top(s, tokens, n, k, grammar_mask_bits, &g, vals, ids, nonfinite, masked);
}

clf_status api_session_top_row(clinfer_session *s) {
    api_acquire(s);
    clf_status st = clf_llama_top_row(s->c, s->logits);
    api_release(s);
    s->has_logits = st == CLF_OK;
    return st;
}

/* ---- batches and sequences --------------------------------------------------- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    void *q = realloc(*p, need * elem);
    if (!q) return 0;
    *p = q;
    *cap = need;
    return 1;
}

/* The batch grouped by sequence: an entry each (tokens in batch order,
 * into `tokens`), checked against the sequences before anything runs.
 * last[q]: the batch row of sequence q's last token (-1: none in it);
 * *all_rows: rows before a sequence's last want logits (a batch of one
 * sequence only). */
/* The batch as one entry per sequence (its rows' tokens gathered in
 * `tokens`, in order), each sequence's last row in last[]; at[i]: batch
 * row i's place in `tokens`. A sequence asking logits of a row before its
 * last is verified: every row's logits, each row computed as a decode step
 * (every_row); *all_rows: that, in a batch of sequence 0 alone. */
static clf_status plan_batch(clinfer_session *s, const clinfer_batch *b, int32_t *tokens, int *last, int *at,
                             int *n_entries, int *all_rows) {
    int n_seq = s->c->n_seq, n = b->n_tokens, used = 0;
    int *count = calloc((size_t)n_seq, sizeof *count), *verify = calloc((size_t)n_seq, sizeof *verify);
    clf_status st = count && verify ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int q = 0; q < n_seq; q++) last[q] = -1;
    if (st == CLF_OK) st = check_tokens(s, b->token, n);
    for (int i = 0; st == CLF_OK && i < n; i++) {
        int q = b->seq_id ? b->seq_id[i] : 0;
        if (q < 0 || q >= n_seq) st = clf_fail(CLF_ERR_ARG, "batch row %d: sequence %d of %d", i, q, n_seq);
        else if (b->pos && b->pos[i] != clf_llama_seq_len(s->c, q) + count[q])
            st = clf_fail(CLF_ERR_ARG, "batch row %d: position %d, but sequence %d's next is %d (rewind first)", i,
                          b->pos[i], q, clf_llama_seq_len(s->c, q) + count[q]);
        else used += !count[q]++, last[q] = i;
    }
    int any = 0;
    for (int i = 0; st == CLF_OK && b->logits && i < n; i++) {
        int q = b->seq_id ? b->seq_id[i] : 0;
        if (b->logits[i] && i != last[q]) verify[q] = any = 1;
    }
    *all_rows = any && used == 1 && last[0] >= 0;
    if (st == CLF_OK && any && !*all_rows && s->c->next)
        st = clf_fail(CLF_ERR_ARG, "logits of a row before a sequence's last, over a split: only in a batch of "
                      "sequence 0 alone");
    int off = 0, e = 0;
    for (int q = 0; st == CLF_OK && q < n_seq; q++) {
        if (!count[q]) continue;
        s->entries[e++] = (clf_llama_seq_batch){q, tokens + off, count[q], NULL, verify[q]};
        for (int i = 0; i < n; i++)
            if ((b->seq_id ? b->seq_id[i] : 0) == q) at[i] = off, tokens[off++] = b->token[i];
    }
    *n_entries = e;
    free(count);
    free(verify);
    return st;
}

clinfer_status clinfer_decode(clinfer_session *s, const clinfer_batch *b) {
    API_NOT_NULL(s);
    API_NOT_NULL(b);
    int n = b->n_tokens, n_vocab = s->m->info.n_vocab, n_seq = s->c->n_seq, n_entries = 0, all_rows = 0;
    s->n_rows = 0;
    s->has_logits = 0;
    if (n <= 0 || !b->token) return (clinfer_status)clf_fail(CLF_ERR_ARG, "an empty batch");
    size_t row_cap = (size_t)s->row_cap;
    int32_t *tokens = malloc((size_t)n * sizeof *tokens);
    int *last = malloc((size_t)n_seq * sizeof *last), *at = malloc((size_t)n * sizeof *at);
    clf_status st = tokens && last && at && grow((void **)&s->row_of, &row_cap, (size_t)n, sizeof(int))
                        ? CLF_OK
                        : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    s->row_cap = (int)row_cap;
    if (st == CLF_OK) st = plan_batch(s, b, tokens, last, at, &n_entries, &all_rows);
    /* the output rows: where a sequence is verified, a row per batch row in the entries' order (at[]); else a
     * row per sequence */
    int verify = 0;
    for (int e = 0; st == CLF_OK && e < n_entries; e++) verify |= s->entries[e].every_row;
    const size_t rows = verify ? (size_t)n : (size_t)n_seq;
    if (st == CLF_OK && !grow((void **)&s->batch_logits, &s->batch_cap, rows * (size_t)n_vocab, sizeof(float)))
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory for %zu rows of logits", rows);
    if (st == CLF_OK) {
        /* row_of[i]: the output row holding batch row i's logits (-1: none) */
        for (int i = 0; i < n; i++) s->row_of[i] = -1;
        for (int e = 0; e < n_entries; e++) {
            clf_llama_seq_batch *en = &s->entries[e];
            const int q = en->seq, first = (int)(en->tokens - tokens);
            for (int i = 0; i < n; i++) {
                if ((b->seq_id ? b->seq_id[i] : 0) != q) continue;
                const int wanted = b->logits ? b->logits[i] != 0 : i == last[q];
                if (wanted && (en->every_row || i == last[q])) s->row_of[i] = verify ? at[i] : q;
            }
            if (en->every_row || !b->logits || b->logits[last[q]])
                en->logits = s->batch_logits + (size_t)(en->every_row ? first : verify ? at[last[q]] : q) * n_vocab;
        }
        api_acquire(s);
        st = all_rows ? clf_llama_eval_rows(s->c, tokens, n, 0, s->batch_logits)
                      : clf_llama_eval_seqs(s->c, s->entries, n_entries);
        api_release(s);
        st = cancelled(s, st);
    }
    if (st == CLF_OK) {
        s->n_rows = n;
        const float *row0 = last[0] >= 0 ? clinfer_batch_logits(s, last[0]) : NULL;
        if (row0) { /* sequence 0's last row is the session's logits too */
            memcpy(s->logits, row0, (size_t)n_vocab * sizeof *s->logits);
            s->has_logits = 1;
        }
    }
    free(tokens);
    free(last);
    free(at);
    return (clinfer_status)st;
}

const float *clinfer_batch_logits(const clinfer_session *s, int i) {
    if (!s || i < 0 || i >= s->n_rows || s->row_of[i] < 0) return NULL;
    return s->batch_logits + (size_t)s->row_of[i] * s->m->info.n_vocab;
}

static clf_status check_seq(const clinfer_session *s, int seq) {
    if (seq < 0 || seq >= s->c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d of %d", seq, s->c->n_seq);
    return CLF_OK;
}

int clinfer_seq_len(const clinfer_session *s, int seq) {
    return s && seq >= 0 && seq < s->c->n_seq ? clf_llama_seq_len(s->c, seq) : 0;
}

clinfer_status clinfer_seq_rewind(clinfer_session *s, int seq, int pos) {
    API_NOT_NULL(s);
    API_TRY(check_seq(s, seq));
    int len = clf_llama_seq_len(s->c, seq);
    if (pos < 0 || pos > len)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "cannot rewind sequence %d to %d: it holds %d tokens", seq, pos,
                                        len);
    clf_llama_seq_rewind(s->c, seq, pos);
    if (seq == 0) s->has_logits = 0;
    return CLINFER_OK;
}

clinfer_status clinfer_seq_copy(clinfer_session *s, int src, int dst, int n) {
    API_NOT_NULL(s);
    API_TRY(check_seq(s, src));
    API_TRY(check_seq(s, dst));
    if (src == dst) return (clinfer_status)clf_fail(CLF_ERR_ARG, "copying sequence %d onto itself", src);
    pthread_mutex_lock(&s->m->device_lock);
    clf_status st = clf_llama_seq_copy(s->c, src, dst, n);
    pthread_mutex_unlock(&s->m->device_lock);
    if (st == CLF_OK && dst == 0) s->has_logits = 0;
    return (clinfer_status)st;
}

/* ---- perplexity --------------------------------------------------------------- */

typedef struct ppl_user {
    clinfer_session *s;
    int (*fn)(void *, int, int, double);
    void *ud;
    int stopped;
} ppl_user;

/* A progress callback that says stop cancels the next chunk. */
static void ppl_progress(const clf_ppl_progress *p, void *user) {
    ppl_user *u = user;
    if (u->fn && u->fn(u->ud, p->chunk, p->n_chunks, p->ppl)) {
        u->stopped = 1;
        atomic_store(&u->s->cancel, 1);
    }
}

clinfer_status clinfer_perplexity(clinfer_session *s, const int32_t *tokens, int n_tokens, int n_ctx,
                                  int (*progress)(void *, int, int, double), void *user_data, double *ppl,
                                  int *n_scored) {
    API_NOT_NULL(s);
    API_NOT_NULL(ppl);
    if (n_tokens < 0 || (n_tokens > 0 && !tokens)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "no tokens");
    if (n_tokens > 0) API_TRY(check_tokens(s, tokens, n_tokens));
    ppl_user u = {s, progress, user_data, 0};
    int32_t bos = clf_tokenizer_add_bos(s->m->tok) ? clf_tokenizer_bos(s->m->tok) : -1;
    s->has_logits = 0;
    api_acquire(s);
    clf_status st = clf_perplexity(s->c, tokens, n_tokens, n_ctx, bos, ppl_progress, &u, ppl, n_scored);
    api_release(s);
    if (st == CLF_OK && u.stopped) st = clf_fail(CLF_ERR_INTERRUPTED, "perplexity stopped on request");
    if (u.stopped && st == CLF_ERR_INTERRUPTED) atomic_store(&s->cancel, 0);
    return (clinfer_status)cancelled(s, st);
}

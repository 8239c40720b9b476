/* The evaluation calls: clf_llama_eval (a prompt in chunks of n_batch),
 * clf_llama_eval_top (its k best logits, masked or not), clf_llama_eval_seqs (several
 * sequences' rows in shared passes), and over a split the hops of their
 * passes to the next stage, pipelined. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llama_impl.h"

clf_status clf_llama_hop(clf_llama_ctx *c, const clf_stage_pass *p, cl_event ev, const float *x, float *logits) {
    clf_status st = clf_cl_check(clWaitForEvents(1, &ev), "reading activations for the next stage");
    clReleaseEvent(ev);
    if (st == CLF_OK) st = c->next->ops->pass(c->next, p, x, logits);
    return st;
}

/* A prompt chunk whose activations are on their way to the next stage. */
typedef struct pending_hop {
    segment seg;
    int want, all_logits;
    float *x, *logits;
    cl_event ev;
} pending_hop;

static clf_status hop_pending(clf_llama_ctx *c, pending_hop *h) {
    clf_stage_pass p = {h->seg.n, &h->seg, 1, h->all_logits, &h->want, h->logits && !h->all_logits};
    return clf_llama_hop(c, &p, h->ev, h->x, h->logits);
}

clf_status clf_llama_eval(clf_llama_ctx *c, const int32_t *tokens, int n, int all_logits, float *logits) {
    const clf_llama_hparams *hp = &c->m->hp;
    if (n <= 0) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate");
    if (all_logits && !logits) return clf_fail(CLF_ERR_ARG, "every token's logits asked for, nowhere to write them");
    if (n > c->n_ctx - c->n_past)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit: %d of the context's %d are used", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", tokens[i], i, hp->n_vocab);
    const int seq0 = 0;
    CLF_TRY(clf_llama_seq_room(c, &seq0, &n, 1));
    clf_runtime *rt = c->m->rt;
    /* one row of logits serves generation; every token's (perplexity) needs
     * a chunk's worth, allocated on first use */
    if (all_logits) CLF_TRY(clf_llama_grow_logits(c));
    /* Over a split the chunks pipeline: chunk k+1 is enqueued on this
     * stage before chunk k hops to the next (its own queue, its own
     * device), so the stages overlap. `hopped`: where every stage is. */
    pending_hop pend = {0};
    int pending = 0, hopped = c->n_past;
    clf_status st = CLF_OK;
    for (int done = 0, k = 0; done < n; k++) {
        /* between chunks the abort hook may stop a long prompt: once the
         * previous chunk has run (forward only enqueues), so that the stop
         * is prompt; the chunks done stay counted in n_past */
        if (done > 0 && rt->abort_fn && (st = clf_finish(rt)) != CLF_OK) break;
        if (clf_runtime_aborted(rt)) {
            if (pending && (st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
            pending = 0;
            if (st == CLF_OK)
                st = clf_fail(CLF_ERR_INTERRUPTED, "evaluation stopped on request after %d of %d tokens", done, n);
            break;
        }
        int step = c->next ? c->n_micro : c->n_batch;
        int chunk = n - done < step ? n - done : step, last = chunk - 1, final = done + chunk == n;
        segment seg = {0, 0, chunk, c->n_past};
        float *dst = all_logits ? logits + (size_t)done * hp->n_vocab : final ? logits : NULL;
        cl_event ev = NULL;
        st = clf_llama_forward(c, tokens + done, NULL, chunk, &seg, 1, all_logits, &last, final,
                               c->next ? c->hop_x[k & 1] : NULL, &ev);
        if (st == CLF_OK && !c->next && dst) {
            size_t bytes = (size_t)(all_logits ? chunk : 1) * (size_t)hp->n_vocab * sizeof(float);
            st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, CL_TRUE, c->logits.offset, bytes, dst, 0,
                                                  NULL, NULL),
                              "reading logits");
        }
        if (st == CLF_OK && pending) {
            pending = 0;
            if ((st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
        }
        if (st == CLF_OK && c->next) {
            pend = (pending_hop){seg, last, all_logits, c->hop_x[k & 1], dst, ev};
            pending = 1;
        } else if (ev) {
            clReleaseEvent(ev);
        }
        if (st != CLF_OK) break;
        c->n_past += chunk;
        done += chunk;
        if (!c->next) hopped = c->n_past;
    }
    if (st == CLF_OK && pending) {
        pending = 0;
        if ((st = hop_pending(c, &pend)) == CLF_OK) hopped = c->n_past;
    }
    if (st != CLF_OK) {
        clFinish(rt->queue);
        if (pending) clReleaseEvent(pend.ev);
        /* a chunk that did not reach every stage is forgotten */
        if (c->n_past > hopped) clf_llama_rewind(c, hopped);
    }
    return st;
}

/* The k best of a host row, as cl/select.cl chooses them. */
static void top_of_row(const float *row, int n, int k, float *vals, int32_t *ids, int *nonfinite) {
    int m = 0;
    *nonfinite = 0;
    for (int i = 0; i < n; i++) {
        float x = row[i];
        if (!isfinite(x)) {
            *nonfinite = 1;
            if (isnan(x)) x = -INFINITY;
        }
        if (m == k && !(x > vals[k - 1])) continue; /* ids rise: a tie loses */
        int j = m < k ? m++ : k - 1;
        for (; j > 0 && x > vals[j - 1]; j--) vals[j] = vals[j - 1], ids[j] = ids[j - 1];
        vals[j] = x;
        ids[j] = i;
    }
}

clf_status clf_llama_eval_top(clf_llama_ctx *c, const int32_t *tokens, int n, int k, float *vals, int32_t *ids,
                              int *nonfinite) {
    int masked = 0;
    return clf_llama_eval_top_masked(c, tokens, n, k, NULL, NULL, vals, ids, nonfinite, &masked);
}

clf_status clf_llama_eval_top_masked(clf_llama_ctx *c, const int32_t *tokens, int n, int k, clf_llama_mask_fn mask_fn,
                                     void *user, float *vals, int32_t *ids, int *nonfinite, int *masked) {
    const int n_vocab = c->m->hp.n_vocab;
    *masked = 0;
    if (k < 1 || k > CLF_TOPK_MAX || k > n_vocab)
        return clf_fail(CLF_ERR_ARG, "top-k: k = %d is not in 1 .. %d", k, n_vocab < CLF_TOPK_MAX ? n_vocab : CLF_TOPK_MAX);
    if (c->next) { /* the logits arrive on the host: chosen there, the mask not asked for */
        if (!c->top_logits && !(c->top_logits = malloc((size_t)n_vocab * sizeof *c->top_logits)))
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        CLF_TRY(clf_llama_eval(c, tokens, n, 0, c->top_logits));
        top_of_row(c->top_logits, n_vocab, k, vals, ids, nonfinite);
        return CLF_OK;
    }
    if (!c->topk.out_i) CLF_TRY(clf_topk_create(c->m->rt, &c->topk));
    /* the forward pass is only queued (the last token's logits stay on the
     * device, in row 0): the mask's words are made on the host meanwhile */
    CLF_TRY(clf_llama_eval(c, tokens, n, 0, NULL));
    const uint32_t *mask = mask_fn ? mask_fn(user) : NULL;
    /* then the selection, over the row masked where there are words */
    const clf_tensor row = clf_tensor_rows(&c->logits, 0, 1);
    clf_status st = clf_topk_read_masked(&c->topk, &row, k, mask, vals, ids, nonfinite);
    *masked = st == CLF_OK && mask != NULL;
    return st;
}

clf_status clf_llama_top_row(clf_llama_ctx *c, float *logits) {
    const size_t n_vocab = (size_t)c->m->hp.n_vocab;
    if (c->next) { /* over a split the row came to the host already */
        if (!c->top_logits) return clf_fail(CLF_ERR_ARG, "top-k: no row evaluated");
        memcpy(logits, c->top_logits, n_vocab * sizeof *logits);
        return CLF_OK;
    }
    const clf_tensor row = clf_tensor_rows(&c->logits, 0, 1); /* where clf_llama_eval_top left it */
    return clf_tensor_download(c->m->rt, &row, logits, n_vocab * sizeof *logits);
}

/* Checks a batch before anything runs: sequences in range and distinct,
 * tokens in the vocabulary, each entry within its sequence's room. */
static clf_status check_batch(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n) {
    const clf_llama_hparams *hp = &c->m->hp;
    for (int i = 0; i < n; i++) {
        if (b[i].seq < 0 || b[i].seq >= c->n_seq)
            return clf_fail(CLF_ERR_ARG, "sequence %d is outside the context's %d", b[i].seq, c->n_seq);
        for (int j = 0; j < i; j++)
            if (b[j].seq == b[i].seq) return clf_fail(CLF_ERR_ARG, "sequence %d appears twice in a batch", b[i].seq);
        if (b[i].n <= 0 || !b[i].tokens) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate for sequence %d", b[i].seq);
        int len = clf_llama_seq_len(c, b[i].seq);
        if (b[i].n > c->n_ctx - len)
            return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit sequence %d: %d of the context's %d are used", b[i].n,
                            b[i].seq, len, c->n_ctx);
        for (int t = 0; t < b[i].n; t++)
            if (b[i].tokens[t] < 0 || b[i].tokens[t] >= hp->n_vocab)
                return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", b[i].tokens[t], t,
                                hp->n_vocab);
    }
    /* the KV blocks of every pass, before the first */
    int *seq = malloc((size_t)n * 2 * sizeof *seq);
    if (!seq) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) seq[i] = b[i].seq, seq[n + i] = b[i].n;
    clf_status st = clf_llama_seq_room(c, seq, seq + n, n);
    free(seq);
    return st;
}

/* One pass of clf_llama_eval_seqs: its rows grouped in segments, the
 * logits rows it asks for and where they go; over a split, its
 * activations on their way (x, completed by ev). */
typedef struct seq_pass {
    int rows, n_seg, n_want;
    segment *segs;
    int *want;
    float **dst;
    float *x;
    cl_event ev;
} seq_pass;

/* Fills up to n_batch rows from the entries' remaining tokens (in order):
 * their ids into host_ids, positions from the sequences' lengths. */
static void fill_pass(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n, const int *done, seq_pass *p) {
    const size_t n_vocab = (size_t)c->m->hp.n_vocab;
    p->rows = p->n_seg = p->n_want = 0;
    /* the single tokens and the verified ones first, a row each (forward computes them as if alone), then the chunks */
    for (int i = 0, sweep = 0; sweep < 2 && p->rows < c->n_batch; i = i + 1 < n ? i + 1 : (sweep++, 0)) {
        int left = b[i].n - done[i], take = left < c->n_batch - p->rows ? left : c->n_batch - p->rows;
        if (take <= 0 || (left == 1 || b[i].every_row) != (sweep == 0)) continue;
        const int one_each = b[i].every_row, pos = clf_llama_seq_len(c, b[i].seq);
        for (int k = 0; k < (one_each ? take : 1); k++) {
            const int len = one_each ? 1 : take;
            p->segs[p->n_seg++] = (segment){b[i].seq, p->rows + k, len, pos + k};
            if (one_each && b[i].logits) {
                p->want[p->n_want] = p->rows + k;
                p->dst[p->n_want++] = b[i].logits + (size_t)(done[i] + k) * n_vocab;
            }
        }
        memcpy(c->host_ids + p->rows, b[i].tokens + done[i], (size_t)take * sizeof *c->host_ids);
        if (!one_each && take == left && b[i].logits) {
            p->want[p->n_want] = p->rows + take - 1;
            p->dst[p->n_want++] = b[i].logits;
        }
        p->rows += take;
    }
}

/* Counts a pass in its sequences and entries (by = 1), or takes it back
 * (by = -1: the sequences rewind to where the pass began). */
static void count_pass(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n, int *done, const seq_pass *p, int by) {
    for (int s = 0; s < p->n_seg; s++) {
        const segment *g = &p->segs[s];
        if (by > 0) *seq_past(c, g->seq) += g->n;
        else clf_llama_seq_rewind(c, g->seq, g->pos);
        for (int i = 0; i < n; i++)
            if (b[i].seq == g->seq) done[i] += by * g->n;
    }
}

/* One device, or the last stage: runs the pass, reads the logits of the
 * entries it finishes. */
static clf_status run_pass(clf_llama_ctx *c, const seq_pass *p) {
    clf_runtime *rt = c->m->rt;
    size_t row_bytes = (size_t)c->m->hp.n_vocab * sizeof(float);
    clf_status st = clf_llama_forward(c, c->host_ids, NULL, p->rows, p->segs, p->n_seg, 0, p->want, p->n_want, NULL, NULL);
    for (int i = 0; st == CLF_OK && i < p->n_want; i++)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, i == p->n_want - 1,
                                              c->logits.offset + i * row_bytes, row_bytes, p->dst[i], 0, NULL, NULL),
                          "reading logits");
    /* host_ids and the caller's buffers must outlive the pass */
    if (st == CLF_OK && p->n_want == 0) st = clf_finish(rt);
    if (st != CLF_OK) clFinish(rt->queue);
    return st;
}

/* Over a split: hands a pass enqueued here to the next stage (which runs
 * it while this one runs the next pass), the logits back to the entries. */
static clf_status hop_pass(clf_llama_ctx *c, seq_pass *p) {
    clf_stage_pass sp = {p->rows, p->segs, p->n_seg, 0, p->want, p->n_want};
    clf_status st = clf_llama_hop(c, &sp, p->ev, p->x, c->hop_logits);
    p->ev = NULL;
    size_t row_bytes = (size_t)c->m->hp.n_vocab * sizeof(float);
    for (int i = 0; st == CLF_OK && i < p->n_want; i++)
        memcpy(p->dst[i], c->hop_logits + (size_t)i * c->m->hp.n_vocab, row_bytes);
    return st;
}

clf_status clf_llama_eval_seqs(clf_llama_ctx *c, const clf_llama_seq_batch *b, int n) {
    CLF_TRY(check_batch(c, b, n));
    clf_runtime *rt = c->m->rt;
    int verify = 0; /* rows of entries that ask every row's logits: decode rows, a segment and a logits row each */
    for (int i = 0; i < n; i++) verify |= b[i].every_row && b[i].n > 1;
    if (verify && c->next) return clf_fail(CLF_ERR_ARG, "every row's logits of several sequences: not over a split");
    if (verify) {
        CLF_TRY(clf_llama_grow_logits(c));
        CLF_TRY(clf_llama_grow_rows(c, c->n_batch));
    }
    /* two passes' descriptions: over a split one is on its way while the next is filled */
    size_t m = (size_t)n + 1 + (verify ? (size_t)c->n_batch : 0);
    int *done = calloc(m, sizeof *done), *want = malloc(2 * m * sizeof *want);
    segment *segs = malloc(2 * m * sizeof *segs);
    float **dst = malloc(2 * m * sizeof *dst);
    clf_status st = done && want && segs && dst ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    seq_pass ps[2] = {{0}};
    for (int k = 0; st == CLF_OK && k < 2; k++)
        ps[k] = (seq_pass){0, 0, 0, segs + k * m, want + k * m, dst + k * m, c->hop_x[k], NULL};
    seq_pass *pending = NULL;
    for (int pass = 0; st == CLF_OK; pass++) {
        int left = 0;
        for (int i = 0; i < n; i++) left += b[i].n - done[i];
        if (!left) break;
        /* the abort hook may stop it before any pass (the server's step sees it so) */
        if (clf_runtime_aborted(rt)) {
            st = clf_fail(CLF_ERR_INTERRUPTED, "evaluation stopped on request after %d of its passes", pass);
            break;
        }
        seq_pass *p = &ps[pass & 1];
        fill_pass(c, b, n, done, p);
        if (!c->next) {
            if ((st = run_pass(c, p)) == CLF_OK) count_pass(c, b, n, done, p, 1);
            continue;
        }
        /* a split: this pass runs here while the previous one hops on */
        st = clf_llama_forward(c, c->host_ids, NULL, p->rows, p->segs, p->n_seg, 0, p->want, p->n_want, p->x, &p->ev);
        if (st != CLF_OK) break;
        count_pass(c, b, n, done, p, 1);
        if (pending && (st = hop_pass(c, pending)) != CLF_OK) {
            count_pass(c, b, n, done, p, -1);
            break;
        }
        pending = p;
    }
    if (st == CLF_OK && pending) st = hop_pass(c, pending);
    if (st != CLF_OK && c->next) {
        clFinish(rt->queue);
        if (pending) count_pass(c, b, n, done, pending, -1); /* it did not reach every stage */
    }
    for (int k = 0; k < 2; k++)
        if (ps[k].ev) clReleaseEvent(ps[k].ev);
    free(done);
    free(want);
    free(segs);
    free(dst);
    return st;
}

clf_status clf_llama_eval_rows(clf_llama_ctx *c, const int32_t *tokens, int n, int last_only, float *logits) {
    if (c->next) return clf_llama_eval(c, tokens, n, !last_only, logits);
    const clf_llama_hparams *hp = &c->m->hp;
    if (n <= 0 || !logits) return clf_fail(CLF_ERR_ARG, "no tokens to evaluate, or nowhere to write their logits");
    if (n > c->n_ctx - c->n_past)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens do not fit: %d of the context's %d are used", n, c->n_past, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return clf_fail(CLF_ERR_ARG, "token id %d at %d is outside the vocabulary (%d)", tokens[i], i, hp->n_vocab);
    const int seq0 = 0, step = n < c->n_batch ? n : c->n_batch;
    CLF_TRY(clf_llama_seq_room(c, &seq0, &n, 1));
    CLF_TRY(clf_llama_grow_logits(c));
    CLF_TRY(clf_llama_grow_rows(c, step));
    segment *segs = malloc((size_t)step * sizeof *segs);
    int *want = malloc((size_t)step * sizeof *want);
    clf_status st = segs && want ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    const size_t row_bytes = (size_t)hp->n_vocab * sizeof(float);
    for (int done = 0; st == CLF_OK && done < n;) {
        const int rows = n - done < step ? n - done : step;
        /* a one-token segment a row: the forward pass takes them all as decode rows; the head over
         * every row, or (last_only) the pass's last alone, read back only in the last pass */
        for (int i = 0; i < rows; i++) segs[i] = (segment){0, i, 1, c->n_past + i}, want[i] = i;
        const int n_want = last_only ? 1 : rows;
        if (last_only) want[0] = rows - 1;
        memcpy(c->host_ids, tokens + done, (size_t)rows * sizeof *tokens);
        st = clf_llama_forward(c, c->host_ids, NULL, rows, segs, rows, 0, want, n_want, NULL, NULL);
        if (st == CLF_OK && (!last_only || done + rows == n))
            st = clf_cl_check(clEnqueueReadBuffer(c->m->rt->queue, c->logits.mem, CL_TRUE, c->logits.offset,
                                                  (size_t)n_want * row_bytes,
                                                  logits + (last_only ? 0 : (size_t)done * hp->n_vocab), 0, NULL,
                                                  NULL),
                              "reading logits");
        if (st != CLF_OK) break;
        c->n_past += rows;
        done += rows;
    }
    if (st != CLF_OK) clFinish(c->m->rt->queue);
    free(segs);
    free(want);
    return st;
}

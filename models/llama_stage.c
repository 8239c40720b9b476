/* A stage of a split (stage.h) other than the first: a pass arriving with
 * the previous stage's activations. */
#include "llama_impl.h"

/* A pass arriving from another stage (another device, another rank): its
 * segments must tile its rows and continue their sequences here. */
static clf_status check_pass(const clf_llama_ctx *c, const clf_stage_pass *p) {
    if (c->m->l0 == 0) return clf_fail(CLF_ERR_ARG, "the first stage evaluates tokens, not activations");
    if (p->n < 1 || p->n > c->n_batch || p->n_seg < 1 || p->n_seg > p->n)
        return clf_fail(CLF_ERR_ARG, "a pass of %d rows in %d segments (1 to %d rows)", p->n, p->n_seg, c->n_batch);
    for (int s = 0, row = 0; s < p->n_seg; s++) {
        const segment *g = &p->segs[s];
        if (g->seq < 0 || g->seq >= c->n_seq || g->row0 != row || g->n < 1 || g->row0 + g->n > p->n)
            return clf_fail(CLF_ERR_ARG, "segment %d (sequence %d, rows %d+%d) does not fit the pass", s, g->seq,
                            g->row0, g->n);
        int len = clf_llama_seq_len(c, g->seq);
        if (g->pos != len || g->n > c->n_ctx - len)
            return clf_fail(CLF_ERR_ARG, "segment %d starts at %d of sequence %d, which holds %d of %d here", s, g->pos,
                            g->seq, len, c->n_ctx);
        row += g->n;
    }
    int cap = c->n_seq < c->n_batch ? c->n_seq : c->n_batch;
    if (!p->all_logits && (p->n_want < 0 || p->n_want > cap))
        return clf_fail(CLF_ERR_ARG, "%d logits rows asked (at most %d)", p->n_want, cap);
    for (int i = 0; !p->all_logits && i < p->n_want; i++)
        if (p->want[i] < 0 || p->want[i] >= p->n) return clf_fail(CLF_ERR_ARG, "logits of row %d asked", p->want[i]);
    return CLF_OK;
}

clf_status clf_llama_stage_pass(clf_llama_ctx *c, const clf_stage_pass *p, const float *x_in, float *out) {
    CLF_TRY(check_pass(c, p));
    const clf_llama *m = c->m;
    clf_runtime *rt = m->rt;
    int last = m->l1 == m->hp.n_layer, rows = clf_stage_pass_rows(p);
    if (p->all_logits) CLF_TRY(clf_llama_grow_logits(c));
    cl_event ev = NULL;
    clf_status st = clf_llama_forward(c, NULL, x_in, p->n, p->segs, p->n_seg, p->all_logits, p->want, p->n_want,
                            c->next ? c->hop_x[0] : out, &ev);
    if (st == CLF_OK && last && rows)
        st = clf_cl_check(clEnqueueReadBuffer(rt->queue, c->logits.mem, CL_TRUE, c->logits.offset,
                                              (size_t)rows * (size_t)m->hp.n_vocab * sizeof(float), out, 0, NULL, NULL),
                          "reading logits");
    else if (st == CLF_OK && last) st = clf_finish(rt);
    else if (st == CLF_OK && c->next) st = clf_llama_hop(c, p, ev, c->hop_x[0], out), ev = NULL;
    else if (st == CLF_OK) st = clf_cl_check(clWaitForEvents(1, &ev), "reading activations for the next stage");
    if (ev) clReleaseEvent(ev);
    if (st != CLF_OK) {
        clFinish(rt->queue);
        return st;
    }
    for (int s = 0; s < p->n_seg; s++) *seq_past(c, p->segs[s].seq) += p->segs[s].n;
    return CLF_OK;
}

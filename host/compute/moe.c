/* Mixture-of-experts FFN (host/compute/moe.h): the launchers of cl/moe.cl
 * and the layer's expert loop. */
#include "moe.h"

#include <stdlib.h>
#include <string.h>

#define MOE_LOCAL 64

static size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* A 4-byte tensor's offset in elements. */
static clf_status off4(const clf_tensor *t, const char *what, cl_ulong *off) {
    if (t->type != CLF_F32) return clf_fail(CLF_ERR_ARG, "moe: %s must be 4-byte cells", what);
    if (t->offset % 4) return clf_fail(CLF_ERR_ARG, "moe: %s: offset %zu is not a multiple of 4", what, t->offset);
    *off = t->offset / 4;
    return CLF_OK;
}

clf_status clf_moe_scratch_alloc(clf_runtime *rt, int n_rows, int n_expert, int n_used, int n_embd, int n_ff,
                                 clf_moe_scratch *s) {
    memset(s, 0, sizeof *s);
    s->n_rows = n_rows, s->n_expert = n_expert, s->n_used = n_used;
    const int64_t nk = (int64_t)n_rows * n_used;
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_expert, n_rows, &s->logits));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_used, n_rows, &s->sel_w));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_used, n_rows, &s->sel_id));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, nk, 1, &s->grp_row));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, nk, 1, &s->grp_w));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_embd, n_rows, &s->xg));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, 2 * (int64_t)n_ff, n_rows, &s->gu));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_ff, n_rows, &s->ff));
    CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_embd, n_rows, &s->yg));
    /* the indirect decode's slots: up to 64 decode rows (serve's streams), whole int8 blocks only */
    s->n_id = n_rows < 64 ? n_rows : 64;
    if (n_ff % 32 == 0) {
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_ff, (int64_t)s->n_id * n_used, &s->hid));
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, CLF_XQ_FLOATS(n_ff), (int64_t)s->n_id * n_used, &s->hidq));
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, 2 * (int64_t)n_ff, (int64_t)s->n_id * n_used, &s->gus));
        CLF_TRY(clf_tensor_alloc(rt, CLF_F32, n_embd, (int64_t)s->n_id * n_used, &s->ys));
    } else {
        s->n_id = 0;
    }
    s->h_id = malloc((size_t)nk * sizeof *s->h_id);
    s->h_row = malloc((size_t)nk * sizeof *s->h_row);
    s->h_w = malloc((size_t)nk * sizeof *s->h_w);
    s->h_gw = malloc((size_t)nk * sizeof *s->h_gw);
    s->h_cnt = malloc((size_t)(n_expert + 1) * sizeof *s->h_cnt);
    if (!s->h_id || !s->h_row || !s->h_w || !s->h_gw || !s->h_cnt) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    return CLF_OK;
}

void clf_moe_scratch_free(clf_moe_scratch *s) {
    clf_tensor *t[] = {&s->logits, &s->sel_w, &s->sel_id, &s->grp_row, &s->grp_w, &s->xg, &s->gu, &s->ff, &s->yg,
                    &s->hid, &s->hidq, &s->gus, &s->ys};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) clf_tensor_free(t[i]);
    free(s->h_id), free(s->h_row), free(s->h_w), free(s->h_gw), free(s->h_cnt);
    memset(s, 0, sizeof *s);
}

size_t clf_moe_scratch_bytes(const clf_moe_scratch *s) {
    const clf_tensor *t[] = {&s->logits, &s->sel_w, &s->sel_id, &s->grp_row, &s->grp_w, &s->xg, &s->gu, &s->ff, &s->yg,
                          &s->hid, &s->hidq, &s->gus, &s->ys};
    size_t b = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) b += t[i]->mem ? clf_tensor_bytes(t[i]) : 0;
    return b;
}

clf_status clf_moe_route(clf_runtime *rt, const clf_tensor *logits, int n_used, int norm_w, float w_scale,
                         clf_tensor *ids, clf_tensor *w) {
    return clf_moe_route_ex(rt, logits, n_used, 0, norm_w, w_scale, ids, w);
}

clf_status clf_moe_route_ex(clf_runtime *rt, const clf_tensor *logits, int n_used, int softmax_weight, int norm_w,
                            float w_scale, clf_tensor *ids, clf_tensor *w) {
    cl_ulong l_off = 0, o_off = 0, w_off = 0;
    CLF_TRY(off4(logits, "router logits", &l_off));
    CLF_TRY(off4(ids, "expert ids", &o_off));
    CLF_TRY(off4(w, "expert weights", &w_off));
    const cl_int n_expert = (cl_int)logits->ne[0], rows = (cl_int)clf_tensor_nrows(logits), k = n_used;
    if (n_used < 1 || n_used > n_expert || n_used > CLF_MOE_MAX_USED || n_expert > CLF_MOE_MAX_EXPERTS)
        return clf_fail(CLF_ERR_ARG, "moe_route: %d of %d experts", n_used, n_expert);
    if (ids->ne[0] != n_used || w->ne[0] != n_used || clf_tensor_nrows(ids) < rows || clf_tensor_nrows(w) < rows ||
        o_off != w_off)
        return clf_fail(CLF_ERR_ARG, "moe_route: outputs of %lld × %lld for %d rows of %d", (long long)ids->ne[0],
                        (long long)clf_tensor_nrows(ids), rows, n_used);
    if (rows == 0) return CLF_OK;
    cl_kernel kr;
    CLF_TRY(clf_kernel_get(rt, "moe", "", "moe_route_f32", &kr));
    cl_int nw = norm_w, smw = softmax_weight;
    clf_arg a[] = {CLF_ARG(logits->mem), CLF_ARG(l_off), CLF_ARG(n_expert), CLF_ARG(rows), CLF_ARG(k),
                   CLF_ARG(nw), CLF_ARG(w_scale), CLF_ARG(ids->mem), CLF_ARG(w->mem), CLF_ARG(o_off), CLF_ARG(smw)};
    CLF_TRY(clf_set_args(kr, a, CLF_NARGS(a)));
    size_t global[1] = {round_up((size_t)rows, 16)}, local[1] = {16};
    return clf_launch(rt, kr, 1, global, local);
}

clf_status clf_moe_gather(clf_runtime *rt, const clf_tensor *src, const clf_tensor *idx, clf_tensor *dst) {
    cl_ulong s_off, i_off, d_off;
    CLF_TRY(off4(src, "gather source", &s_off));
    CLF_TRY(off4(idx, "gather rows", &i_off));
    CLF_TRY(off4(dst, "gather target", &d_off));
    const int64_t rows = clf_tensor_nrows(dst);
    if (src->ne[0] != dst->ne[0] || idx->ne[0] * clf_tensor_nrows(idx) < rows)
        return clf_fail(CLF_ERR_ARG, "moe_gather: shapes");
    if (rows == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "moe", "", "moe_gather_f32", &k));
    cl_int n = (cl_int)src->ne[0];
    clf_arg a[] = {CLF_ARG(src->mem), CLF_ARG(s_off), CLF_ARG(idx->mem), CLF_ARG(i_off),
                   CLF_ARG(dst->mem), CLF_ARG(d_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)n, MOE_LOCAL), (size_t)rows}, local[2] = {MOE_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_moe_scatter_add(clf_runtime *rt, clf_tensor *x, const clf_tensor *src, const clf_tensor *idx,
                               const clf_tensor *w) {
    cl_ulong x_off = 0, s_off = 0, i_off = 0, w_off = 0;
    CLF_TRY(off4(x, "scatter target", &x_off));
    CLF_TRY(off4(src, "scatter source", &s_off));
    CLF_TRY(off4(idx, "scatter rows", &i_off));
    CLF_TRY(off4(w, "scatter weights", &w_off));
    const int64_t rows = clf_tensor_nrows(src);
    if (src->ne[0] != x->ne[0] || idx->ne[0] * clf_tensor_nrows(idx) < rows || i_off != w_off)
        return clf_fail(CLF_ERR_ARG, "moe_scatter_add: shapes");
    if (rows == 0) return CLF_OK;
    cl_kernel k;
    CLF_TRY(clf_kernel_get(rt, "moe", "", "moe_scatter_add_f32", &k));
    cl_int n = (cl_int)x->ne[0];
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(src->mem), CLF_ARG(s_off),
                   CLF_ARG(idx->mem), CLF_ARG(w->mem), CLF_ARG(i_off), CLF_ARG(n)};
    CLF_TRY(clf_set_args(k, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)n, MOE_LOCAL), (size_t)rows}, local[2] = {MOE_LOCAL, 1};
    return clf_launch(rt, k, 2, global, local);
}

/* y[i, :] += b[idx[i], :] for i < rows(y) (cl/moe.cl moe_add_id_f32): each
 * slot's row gets its expert's bias row (b [n_expert × width of y]). */
static clf_status moe_add_id(clf_runtime *rt, clf_tensor *y, const clf_tensor *b, const clf_tensor *idx) {
    cl_ulong y_off, b_off, i_off;
    CLF_TRY(off4(y, "biased rows", &y_off));
    CLF_TRY(off4(b, "expert biases", &b_off));
    CLF_TRY(off4(idx, "expert ids", &i_off));
    const int64_t rows = clf_tensor_nrows(y);
    if (b->ne[0] != y->ne[0] || idx->ne[0] * clf_tensor_nrows(idx) < rows) return clf_fail(CLF_ERR_ARG, "moe_add_id: shapes");
    if (rows == 0) return CLF_OK;
    cl_kernel kr;
    CLF_TRY(clf_kernel_get(rt, "moe", "", "moe_add_id_f32", &kr));
    cl_int n = (cl_int)y->ne[0];
    clf_arg a[] = {CLF_ARG(y->mem), CLF_ARG(y_off), CLF_ARG(b->mem), CLF_ARG(b_off), CLF_ARG(idx->mem), CLF_ARG(i_off),
                   CLF_ARG(n)};
    CLF_TRY(clf_set_args(kr, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)n, MOE_LOCAL), (size_t)rows}, local[2] = {MOE_LOCAL, 1};
    return clf_launch(rt, kr, 2, global, local);
}

/* x[r, :] += Σ_j w[r, j] · y[r·k + j, :] (cl/moe.cl moe_wsum_f32). */
static clf_status moe_wsum(clf_runtime *rt, clf_tensor *x, const clf_tensor *y, const clf_tensor *w, int k) {
    cl_ulong x_off, y_off, w_off;
    CLF_TRY(off4(x, "sum target", &x_off));
    CLF_TRY(off4(y, "expert rows", &y_off));
    CLF_TRY(off4(w, "expert weights", &w_off));
    const int64_t rows = clf_tensor_nrows(x);
    if (y->ne[0] != x->ne[0] || clf_tensor_nrows(y) != rows * k || w->ne[0] * clf_tensor_nrows(w) < rows * k)
        return clf_fail(CLF_ERR_ARG, "moe_wsum: shapes");
    cl_kernel kr;
    CLF_TRY(clf_kernel_get(rt, "moe", "", "moe_wsum_f32", &kr));
    cl_int n = (cl_int)x->ne[0], kk = k;
    clf_arg a[] = {CLF_ARG(x->mem), CLF_ARG(x_off), CLF_ARG(y->mem), CLF_ARG(y_off),
                   CLF_ARG(w->mem), CLF_ARG(w_off), CLF_ARG(kk), CLF_ARG(n)};
    CLF_TRY(clf_set_args(kr, a, CLF_NARGS(a)));
    size_t global[2] = {round_up((size_t)n, MOE_LOCAL), (size_t)rows}, local[2] = {MOE_LOCAL, 1};
    return clf_launch(rt, kr, 2, global, local);
}

/* out[:, col0 ..] = W · in, the first n1 rows as decode rows (each as alone).
 * The rest take a long prompt's kernels whatever their count
 * (clf_matmul_cols_tile): an expert's group is 1 to n rows as the routing
 * falls, and a kernel per row-count class would be built inside the first
 * prompt that reaches it (the warm-up's groups readied the long ones). */
static clf_status product_cols(clf_runtime *rt, const clf_weight *w, const clf_tensor *in, clf_tensor *out,
                               int64_t col0, int accumulate, int64_t n1) {
    const int64_t n = clf_tensor_nrows(in);
    if (n1 <= 0) return clf_matmul_cols_tile(rt, w, in, out, col0, accumulate, CLF_MATMUL_TILE_LONG);
    clf_tensor i1 = clf_tensor_rows(in, 0, n1), o1 = clf_tensor_rows(out, 0, n1);
    CLF_TRY(clf_matmul_rowwise(rt, w, &i1, &o1, col0, accumulate));
    if (n1 >= n) return CLF_OK;
    clf_tensor i2 = clf_tensor_rows(in, n1, n - n1), o2 = clf_tensor_rows(out, n1, n - n1);
    return clf_matmul_cols_tile(rt, w, &i2, &o2, col0, accumulate, CLF_MATMUL_TILE_LONG);
}

clf_status clf_moe_ffn(clf_runtime *rt, const clf_moe *moe, const clf_tensor *xn, const clf_tensor *xq, int n1,
                       const clf_tensor *ffq, clf_tensor *x, clf_moe_scratch *s) {
    const int n = (int)clf_tensor_nrows(xn), E = moe->n_expert, k = moe->n_used;
    if (n > s->n_rows || E != s->n_expert || k != s->n_used || 2 * (int64_t)moe->n_ff > s->gu.ne[0] ||
        xn->ne[0] != s->xg.ne[0] || x->ne[0] != xn->ne[0])
        return clf_fail(CLF_ERR_ARG, "moe: %d rows of %d experts (%d used) exceed the scratch's", n, E, k);
    if (n == 0) return CLF_OK;
    /* xn [n × n_embd] -> logits [n × E]: the router (decode rows as alone) */
    clf_tensor logits = clf_tensor_rows(&s->logits, 0, n);
    CLF_TRY(product_cols(rt, moe->router, xn, &logits, 0, 0, n1));
    if (moe->router_b) CLF_TRY(clf_add_rows(rt, &logits, moe->router_b)); /* + ffn_gate_inp.bias (gpt-oss) */
    /* logits -> ids, w [n × k]: softmax, top-k, weights (or top-k, softmax), on the device */
    clf_tensor ids = clf_tensor_rows(&s->sel_id, 0, n), w = clf_tensor_rows(&s->sel_w, 0, n);
    CLF_TRY(clf_moe_route_ex(rt, &logits, k, moe->softmax_weight, moe->norm_w, moe->w_scale, &ids, &w));
    /* decode rows only, experts stacked: xq -> hid, hidq [n·k slots] -> x += Σ w · down · hid, two launches
     * reading ids and w on the device (no wait); gpt-oss's biases go in as each slot's expert's rows */
    if (n1 == n && xq && n <= s->n_id && moe->gu_stack && moe->down_stack) {
        clf_tensor hid = clf_tensor_rows(&s->hid, 0, (int64_t)n * k), hidq = clf_tensor_rows(&s->hidq, 0, (int64_t)n * k);
        if (clf_matmul_fuses_glu(rt, &moe->experts[0].gu[0])) { /* cpu: two launches */
            CLF_TRY(clf_matmul_glu_id_xq(rt, moe->gu_stack, E, moe->act, xq, &ids, k, moe->b_gu, &hid, &hidq));
            return clf_matmul_down_id_xq(rt, moe->down_stack, E, &hidq, &ids, &w, k, moe->b_down, x);
        }
        /* gpu: xq -> gus [n·k × 2 n_ff] (+ biases) -> hid, hidq -> ys [n·k × n_embd] (+ biases) -> x += Σ_j w · ys */
        clf_tensor gus = clf_tensor_rows(&s->gus, 0, (int64_t)n * k), ys = clf_tensor_rows(&s->ys, 0, (int64_t)n * k);
        gus.ne[0] = 2 * (int64_t)moe->n_ff;
        CLF_TRY(clf_matmul_rows_id_xq(rt, moe->gu_stack, E, xq, k, &ids, &gus));
        if (moe->b_gu) CLF_TRY(moe_add_id(rt, &gus, moe->b_gu, &ids));
        CLF_TRY(clf_glu_xq(rt, moe->act, &gus, &hid, &hidq));
        CLF_TRY(clf_matmul_rows_id_xq(rt, moe->down_stack, E, &hidq, 1, &ids, &ys));
        if (moe->b_down) CLF_TRY(moe_add_id(rt, &ys, moe->b_down, &ids));
        return moe_wsum(rt, x, &ys, &w, k);
    }
    /* ids, w -> the host (a blocking read: the only wait of the layer) */
    const size_t nk = (size_t)n * (size_t)k;
    CLF_CL_TRY(clEnqueueReadBuffer(rt->queue, ids.mem, CL_FALSE, ids.offset, nk * 4, s->h_id, 0, NULL, NULL));
    CLF_CL_TRY(clEnqueueReadBuffer(rt->queue, w.mem, CL_TRUE, w.offset, nk * 4, s->h_w, 0, NULL, NULL));
    /* rows grouped by expert (a counting sort: within a group the rows ascend,
     * so a group's decode rows, rows < n1, come first) */
    memset(s->h_cnt, 0, (size_t)(E + 1) * sizeof *s->h_cnt);
    for (size_t i = 0; i < nk; i++) {
        if (s->h_id[i] < 0 || s->h_id[i] >= E) return clf_fail(CLF_ERR_CL, "moe: expert id %d of %d", s->h_id[i], E);
        s->h_cnt[s->h_id[i] + 1]++;
    }
    for (int e = 0; e < E; e++) s->h_cnt[e + 1] += s->h_cnt[e];
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++) {
            const int e = s->h_id[(size_t)r * k + j], at = s->h_cnt[e]++;
            s->h_row[at] = r;
            s->h_gw[at] = s->h_w[(size_t)r * k + j];
        }
    for (int e = E; e > 0; e--) s->h_cnt[e] = s->h_cnt[e - 1]; /* back to each group's start */
    s->h_cnt[0] = 0;
    /* the groups onto the device (blocking: the host arrays are the next layer's) */
    CLF_CL_TRY(clEnqueueWriteBuffer(rt->queue, s->grp_row.mem, CL_FALSE, s->grp_row.offset, nk * 4, s->h_row, 0, NULL,
                                    NULL));
    CLF_CL_TRY(clEnqueueWriteBuffer(rt->queue, s->grp_w.mem, CL_TRUE, s->grp_w.offset, nk * 4, s->h_gw, 0, NULL, NULL));
    const int64_t ff = moe->n_ff;
    for (int e = 0; e < E; e++) {
        const int g0 = s->h_cnt[e], cnt = s->h_cnt[e + 1] - g0;
        if (cnt == 0) continue;
        const clf_moe_expert *ex = &moe->experts[e];
        int64_t d1 = 0; /* the group's decode rows */
        while (d1 < cnt && s->h_row[g0 + d1] < n1) d1++;
        clf_tensor rows = clf_tensor_rows(&s->grp_row, 0, 1), gw = clf_tensor_rows(&s->grp_w, 0, 1);
        rows.ne[0] = gw.ne[0] = cnt, rows.offset += (size_t)g0 * 4, gw.offset += (size_t)g0 * 4;
        clf_tensor xg = clf_tensor_rows(&s->xg, 0, cnt), yg = clf_tensor_rows(&s->yg, 0, cnt);
        clf_tensor gu = clf_tensor_rows(&s->gu, 0, cnt), f = clf_tensor_rows(&s->ff, 0, cnt);
        gu.ne[0] = 2 * ff, f.ne[0] = ff; /* the scratch rows as this width (the scratch may be wider) */
        /* gpt-oss: expert e's biases, added after its products (gate|up before the unit, down before the
         * weighted sum); the fused gate|up GEMV has no bias, so they take the unfused path */
        clf_tensor bgu = {0}, bdn = {0};
        if (moe->b_gu) bgu = clf_tensor_rows(moe->b_gu, e, 1);
        if (moe->b_down) bdn = clf_tensor_rows(moe->b_down, e, 1);
        if (cnt == 1 && d1 == 1 && xq && ffq) {
            /* one decode row r: its int8 form xq[r] -> f (and its int8 form fq) -> yg -> x[r] += w · yg */
            const int r = s->h_row[g0];
            clf_tensor xr = clf_tensor_rows(xn, r, 1), xqr = clf_tensor_rows(xq, r, 1), fq = clf_tensor_rows(ffq, 0, 1);
            if (ex->n_gu == 1 && !moe->b_gu && clf_matmul_fuses_glu(rt, &ex->gu[0])) {
                CLF_TRY(clf_matmul_glu_xq(rt, &ex->gu[0], moe->act, &xqr, &f, &fq));
            } else {
                for (int p = 0; p < ex->n_gu; p++) CLF_TRY(clf_matmul_rowwise_xq(rt, &ex->gu[p], &xr, &xqr, &gu, p * ff, 0));
                if (moe->b_gu) CLF_TRY(clf_add_rows(rt, &gu, &bgu));
                CLF_TRY(clf_glu_xq(rt, moe->act, &gu, &f, &fq));
            }
            CLF_TRY(clf_matmul_rowwise_xq(rt, &ex->down, &f, &fq, &yg, 0, 0));
            if (moe->b_down) CLF_TRY(clf_add_rows(rt, &yg, &bdn));
            CLF_TRY(clf_moe_scatter_add(rt, x, &yg, &rows, &gw));
            continue;
        }
        /* xn -> xg [cnt × n_embd]: the group's rows */
        CLF_TRY(clf_moe_gather(rt, xn, &rows, &xg));
        /* xg -> gu [cnt × 2 n_ff] -> f [cnt × n_ff]: act(gate · xg) ⊙ (up · xg) (gpt-oss: + biases, its activation) */
        for (int p = 0; p < ex->n_gu; p++) CLF_TRY(product_cols(rt, &ex->gu[p], &xg, &gu, p * ff, 0, d1));
        if (moe->b_gu) CLF_TRY(clf_add_rows(rt, &gu, &bgu));
        CLF_TRY(clf_glu(rt, moe->act, &gu, &f));
        /* f -> yg [cnt × n_embd]: down · f (+ its bias); x[row] += w · yg */
        CLF_TRY(product_cols(rt, &ex->down, &f, &yg, 0, 0, d1));
        if (moe->b_down) CLF_TRY(clf_add_rows(rt, &yg, &bdn));
        CLF_TRY(clf_moe_scatter_add(rt, x, &yg, &rows, &gw));
    }
    return CLF_OK;
}

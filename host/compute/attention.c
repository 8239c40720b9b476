/* Launchers of cl/attention.cl: the KV cache, its write, tiled prefill,
 * split-K decode with its reduction, and the naive reference. Launchers
 * enqueue without waiting. */
#include "attention.h"

#include "matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOG2E 1.4426950408889634
#define ATTN_MAX_SPLIT 256
#define CPU_TILE_ROWS 16 /* ROWS in attn_prefill_cpu: the lanes of a float16 */
#define CPU_BLOCK_KEYS 16
/* A ring's slots wrap at a multiple of every key block and tile (16, 32). */
#define RING_ALIGN 32

struct clf_attn_scratch {
    cl_mem part_o, part_ml; /* [n_head][n_split][head_dim], [n_head][n_split][2] floats */
    size_t parts;           /* capacity in (head, split) pairs */
};

static size_t kv_elem_bytes(clf_type t) { return t == CLF_F16 ? 2 : 4; }

static int div_up(int a, int b) { return (a + b - 1) / b; }

/* ---- cache -------------------------------------------------------------- */

clf_status clf_kv_cache_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim,
                               int n_ctx, int window, clf_kv_cache *c) {
    memset(c, 0, sizeof *c);
    if (type != CLF_F32 && type != CLF_F16)
        return clf_fail(CLF_ERR_ARG, "KV cache type must be F32 or F16 (got type %u)", (unsigned)type);
    if (n_layer <= 0 || n_kv_head <= 0 || n_ctx <= 0 || window < 0)
        return clf_fail(CLF_ERR_ARG, "bad KV cache shape: %d layers, %d KV heads, context %d, window %d", n_layer,
                        n_kv_head, n_ctx, window);
    if (head_dim < 16 || head_dim > 256 || head_dim % 16)
        return clf_fail(CLF_ERR_ARG, "head_dim %d unsupported (a multiple of 16 up to 256)", head_dim);
    uint64_t elems = (uint64_t)n_layer * (uint64_t)n_kv_head * (uint64_t)n_ctx * (uint64_t)head_dim;
    if (elems > SIZE_MAX / 8) return clf_fail(CLF_ERR_MEMORY, "KV cache size overflows");
    size_t one = (size_t)elems * kv_elem_bytes(type);
    c->type = type;
    c->n_layer = n_layer;
    c->n_kv_head = n_kv_head;
    c->head_dim = head_dim;
    c->n_ctx = n_ctx;
    c->window = window;
    c->bytes = 2 * one;
    c->scratch = calloc(1, sizeof *c->scratch);
    clf_status st = c->scratch ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, one, NULL, &c->k);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, one, NULL, &c->v);
    if (st != CLF_OK) {
        clf_kv_cache_free(c);
        return clf_fail_ctx(st, "KV cache (%d layers x %d ctx, %.1f MiB): ", n_layer, n_ctx,
                            2.0 * (double)one / (1 << 20));
    }
    return CLF_OK;
}

void clf_kv_cache_free(clf_kv_cache *c) {
    if (c->k) clReleaseMemObject(c->k);
    if (c->v) clReleaseMemObject(c->v);
    if (c->scratch) {
        if (c->scratch->part_o) clReleaseMemObject(c->scratch->part_o);
        if (c->scratch->part_ml) clReleaseMemObject(c->scratch->part_ml);
        free(c->scratch);
    }
    memset(c, 0, sizeof *c);
}

int clf_kv_ring_slots(int window, int n_batch, int n_ctx) {
    const int64_t need = ((int64_t)window + n_batch - 1 + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
    return window <= 0 || need >= n_ctx ? n_ctx : (int)need;
}

/* ---- plan: variant, tiles, splits ----------------------------------------- */

static clf_attn_variant resolve_variant(const clf_runtime *rt, const clf_kv_cache *c) {
    if (c->variant != CLF_ATTN_AUTO) return c->variant;
    return rt->tune.attn == CLF_SHAPE_CPU ? CLF_ATTN_CPU : CLF_ATTN_GPU;
}

/* GPU prefill tiles: 64 rows per work-group (fewer if the device caps the
 * group size), and the largest key tile up to 32 whose K and V copies use at
 * most half of the local memory. */
static void gpu_tiles(const clf_runtime *rt, int head_dim, int *br, int *bc) {
    *br = 64;
    while ((size_t)*br > rt->dev.max_work_group && *br > 1) *br /= 2;
    *bc = 32;
    while (*bc > 4 && (uint64_t)*bc * (uint64_t)head_dim * 2 * sizeof(float) > rt->dev.local_mem / 2) *bc /= 2;
}

static void decode_split(const clf_runtime *rt, const clf_kv_cache *c, int n_kv,
                         int *n_split, int *chunk) {
    int ns;
    if (c->n_split > 0) {
        ns = c->n_split < ATTN_MAX_SPLIT ? c->n_split : ATTN_MAX_SPLIT;
    } else {
        /* enough work-items (CPU: 8 per compute unit, so uneven splits
         * balance) or work-groups (GPU: 4 per compute unit) to fill the
         * device, but no split so short that its fixed cost dominates:
         * 256 keys on a CPU, 64 on a GPU (the tuning's attn_split_cu and
         * attn_split_keys) */
        const int cu = rt->dev.compute_units ? (int)rt->dev.compute_units : 1;
        ns = div_up(cu * rt->tune.attn_split_cu, c->n_kv_head);
        const int by_len = div_up(n_kv, rt->tune.attn_split_keys);
        if (ns > by_len) ns = by_len;
        if (ns > ATTN_MAX_SPLIT) ns = ATTN_MAX_SPLIT;
        if (ns < 1) ns = 1;
    }
    *chunk = div_up(div_up(n_kv, ns), 16) * 16;
    /* a forced count may leave splits past the end (they weigh 0); the
     * automatic one does not */
    *n_split = c->n_split > 0 ? ns : div_up(n_kv, *chunk);
}

clf_attn_plan clf_attention_plan(const clf_runtime *rt, const clf_kv_cache *c, int n_kv) {
    clf_attn_plan p;
    memset(&p, 0, sizeof p);
    p.variant = resolve_variant(rt, c);
    int br = CPU_TILE_ROWS, bc;
    if (p.variant == CLF_ATTN_GPU) gpu_tiles(rt, c->head_dim, &br, &bc);
    p.prefill_rows = br;
    if (n_kv < 1) n_kv = 1;
    const int k0 = c->window && n_kv > c->window ? n_kv - c->window : 0;
    decode_split(rt, c, n_kv - k0 / 16 * 16, &p.n_split, &p.chunk);
    return p;
}

/* ---- kernels and arguments --------------------------------------------- */

/* gqa 0: the GQA-free program (write, prefill, naive); gqa > 0: the decode
 * program for that many query heads per KV head. */
static clf_status get_kernel(clf_runtime *rt, const clf_kv_cache *c, int gqa, const char *name, cl_kernel *k) {
    int br, bc;
    gpu_tiles(rt, c->head_dim, &br, &bc);
    char opts[160];
    int n = snprintf(opts, sizeof opts, "-DHD=%d -DKV_F16=%d -DATTN_BK=%d -DATTN_BR=%d -DATTN_BC=%d", c->head_dim,
                     c->type == CLF_F16, CPU_BLOCK_KEYS, br, bc);
    if (gqa > 0) snprintf(opts + n, sizeof opts - (size_t)n, " -DGQA=%d", gqa);
    return clf_kernel_get(rt, "attention", opts, name, k);
}


/* ---- argument checks ------------------------------------------------------- */

/* n_rows rows of `width` floats at column col0 of r.t, rows row_stride apart;
 * *off is the element offset of row 0. */
static clf_status rows_check(const char *what, clf_rows r, int n_rows, int width, cl_ulong *off) {
    if (!r.t || r.t->type != CLF_F32 || r.t->offset % sizeof(float))
        return clf_fail(CLF_ERR_ARG, "%s rows must be in an F32 tensor at a float-aligned offset", what);
    if (r.col0 < 0 || r.row_stride < r.col0 + width)
        return clf_fail(CLF_ERR_ARG, "%s rows: %d columns at column %d do not fit a row stride of %d", what,
                        width, r.col0, r.row_stride);
    uint64_t need = (uint64_t)(n_rows - 1) * (uint64_t)r.row_stride + (uint64_t)r.col0 + (uint64_t)width;
    uint64_t have = clf_tensor_bytes(r.t) / sizeof(float);
    if (need > have)
        return clf_fail(CLF_ERR_ARG, "%s rows: %d rows need %llu floats, the tensor has %llu", what, n_rows,
                        (unsigned long long)need, (unsigned long long)have);
    *off = r.t->offset / sizeof(float) + (cl_ulong)r.col0;
    return CLF_OK;
}

static clf_status span_check(const clf_kv_cache *c, int layer, int n_tokens, int pos0) {
    if (!c || !c->k) return clf_fail(CLF_ERR_ARG, "KV cache not created");
    if (layer < 0 || layer >= c->n_layer)
        return clf_fail(CLF_ERR_ARG, "layer %d out of range (cache has %d)", layer, c->n_layer);
    if (n_tokens <= 0 || pos0 < 0 || pos0 > INT32_MAX - n_tokens)
        return clf_fail(CLF_ERR_ARG, "bad token span: %d tokens at %d", n_tokens, pos0);
    if (pos0 <= c->n_ctx - n_tokens) return CLF_OK; /* no slot reused */
    if (!c->window)
        return clf_fail(CLF_ERR_CONTEXT, "positions %d..%d exceed the context of %d", pos0, pos0 + n_tokens - 1,
                        c->n_ctx);
    /* a ring: the chunk's keys and the window before it must all be in the slots */
    if (c->n_ctx % RING_ALIGN || n_tokens > c->n_ctx - c->window + 1)
        return clf_fail(CLF_ERR_CONTEXT, "%d tokens at %d with a window of %d do not fit a ring of %d slots", n_tokens,
                        pos0, c->window, c->n_ctx);
    return CLF_OK;
}

static cl_ulong layer_offset(const clf_kv_cache *c, int layer) {
    return (cl_ulong)layer * (cl_ulong)c->n_kv_head * (cl_ulong)c->n_ctx * (cl_ulong)c->head_dim;
}

/* ---- KV write ------------------------------------------------------------ */

clf_status clf_kv_write(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows k, clf_rows v, int n_tokens,
                        int pos0) {
    CLF_TRY(span_check(c, layer, n_tokens, pos0));
    const int width = c->n_kv_head * c->head_dim;
    cl_ulong k_off, v_off, kv_off = layer_offset(c, layer);
    CLF_TRY(rows_check("K", k, n_tokens, width, &k_off));
    CLF_TRY(rows_check("V", v, n_tokens, width, &v_off));
    cl_kernel kern;
    CLF_TRY(get_kernel(rt, c, 0, "kv_write", &kern));
    const clf_arg a[] = {CLF_ARG(k.t->mem), CLF_ARG(k_off), CLF_ARG(k.row_stride), CLF_ARG(v.t->mem), CLF_ARG(v_off), CLF_ARG(v.row_stride),
                      CLF_ARG(c->k),     CLF_ARG(c->v),  CLF_ARG(kv_off),      CLF_ARG(c->n_ctx), CLF_ARG(pos0)};
    CLF_TRY(clf_set_args(kern, a, CLF_NARGS(a)));
    const size_t global[2] = {(size_t)n_tokens, (size_t)c->n_kv_head};
    return clf_launch(rt, kern, 2, global, NULL);
}

/* ---- attention ------------------------------------------------------------ */

typedef struct {
    int gqa, k0, n_kv; /* the last query sees keys k0 .. n_kv - 1 */
    cl_ulong q_off, out_off, kv_off;
} attn_args;

static clf_status attn_check(const clf_kv_cache *c, int layer, clf_rows q, int n_head, int n_tokens, int pos0,
                             const clf_tensor *out, attn_args *a) {
    CLF_TRY(span_check(c, layer, n_tokens, pos0));
    if (n_head <= 0 || n_head % c->n_kv_head)
        return clf_fail(CLF_ERR_ARG, "%d query heads is not a multiple of the cache's %d KV heads", n_head,
                        c->n_kv_head);
    const int width = n_head * c->head_dim;
    CLF_TRY(rows_check("Q", q, n_tokens, width, &a->q_off));
    if (!out || out->type != CLF_F32 || out->offset % sizeof(float) ||
        clf_tensor_bytes(out) < (size_t)n_tokens * (size_t)width * sizeof(float))
        return clf_fail(CLF_ERR_ARG, "attention output must be an F32 tensor of at least %d x %d floats", n_tokens,
                        width);
    a->gqa = n_head / c->n_kv_head;
    a->n_kv = pos0 + n_tokens;
    a->k0 = c->window && a->n_kv > c->window ? a->n_kv - c->window : 0;
    a->out_off = out->offset / sizeof(float);
    a->kv_off = layer_offset(c, layer);
    return CLF_OK;
}

static clf_status scratch_reserve(clf_runtime *rt, clf_attn_scratch *s, int n_head, int head_dim, int n_split) {
    const size_t need = (size_t)n_head * (size_t)n_split;
    if (s->parts >= need) return CLF_OK;
    /* sized once for the most splits any call can use */
    const size_t cap = (size_t)n_head * ATTN_MAX_SPLIT;
    if (s->part_o) clReleaseMemObject(s->part_o);
    if (s->part_ml) clReleaseMemObject(s->part_ml);
    s->part_o = s->part_ml = NULL;
    s->parts = 0;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, cap * (size_t)head_dim * sizeof(float), NULL, &s->part_o));
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, cap * 2 * sizeof(float), NULL, &s->part_ml));
    s->parts = cap;
    return CLF_OK;
}

/* The decode launch(es): the split kernel, then the reduction unless the
 * CPU kernel, given one split, wrote the output itself; with k (and v) the
 * CPU kernel also writes the token's K and V rows into the cache. */
static clf_status decode(clf_runtime *rt, const clf_kv_cache *c, clf_attn_variant v, const attn_args *a,
                         cl_mem q, cl_mem out, int n_head, float qscale, const clf_rows *k, const clf_rows *vr,
                         cl_ulong k_off, cl_ulong v_off, const clf_rope_params *rope, const clf_tensor *out_q) {
    int n_split, chunk;
    decode_split(rt, c, a->n_kv - a->k0 / 16 * 16, &n_split, &chunk);
    clf_attn_scratch *s = c->scratch;
    CLF_TRY(scratch_reserve(rt, s, n_head, c->head_dim, n_split));

    const char *name = v == CLF_ATTN_GPU ? "attn_decode_gpu" : "attn_decode_cpu";
    cl_kernel kern;
    CLF_TRY(get_kernel(rt, c, a->gqa, name, &kern));
    const clf_arg da[] = {CLF_ARG(q),          CLF_ARG(a->q_off),   CLF_ARG(c->k),  CLF_ARG(c->v),    CLF_ARG(a->kv_off),
                          CLF_ARG(c->n_ctx),   CLF_ARG(s->part_o),  CLF_ARG(s->part_ml), CLF_ARG(a->k0), CLF_ARG(a->n_kv),
                          CLF_ARG(chunk),      CLF_ARG(qscale)};
    CLF_TRY(clf_set_args(kern, da, CLF_NARGS(da)));
    const size_t hd = (size_t)c->head_dim;
    if (v == CLF_ATTN_GPU) {
        const size_t global[2] = {(size_t)n_split * hd, (size_t)c->n_kv_head}, local[2] = {hd, 1};
        CLF_TRY(clf_launch(rt, kern, 2, global, local));
    } else {
        cl_mem ks = k ? k->t->mem : NULL, vs = k ? vr->t->mem : NULL, xq = out_q ? out_q->mem : NULL;
        const cl_ulong xq_off = out_q ? out_q->offset : 0;
        /* RoPE as clf_rope takes it: base^(-2i/n_rot) = exp2(i * log2_scale), the constant in double */
        const cl_int mode = rope ? (cl_int)rope->mode : -1, n_rot = rope ? rope->n_rot : 0;
        const float freq_scale = rope ? rope->freq_scale : 1.0f,
                    log2_scale = rope ? (float)(-2.0 * log2((double)rope->base) / rope->n_rot) : 0.0f;
        cl_mem ff = rope && rope->factors ? rope->factors->mem : NULL;
        const cl_ulong ff_off = rope && rope->factors ? rope->factors->offset / sizeof(float) : 0;
        const clf_arg fa[] = {CLF_ARG(ks),   CLF_ARG(k_off),      CLF_ARG(vs),         CLF_ARG(v_off),
                              CLF_ARG(out),  CLF_ARG(a->out_off), CLF_ARG(mode),       CLF_ARG(n_rot),
                              CLF_ARG(freq_scale), CLF_ARG(log2_scale), CLF_ARG(ff), CLF_ARG(ff_off),
                              CLF_ARG(xq), CLF_ARG(xq_off)};
        for (int i = 0; i < (int)CLF_NARGS(fa); i++)
            CLF_CL_TRY(clSetKernelArg(kern, (cl_uint)(CLF_NARGS(da) + i), fa[i].size, fa[i].value));
        const size_t global[2] = {(size_t)n_split, (size_t)c->n_kv_head}, local[2] = {1, 1};
        CLF_TRY(clf_launch(rt, kern, 2, global, local));
        if (n_split == 1) return CLF_OK;
    }

    const char *rname = v == CLF_ATTN_GPU ? "attn_decode_reduce_gpu" : "attn_decode_reduce";
    CLF_TRY(get_kernel(rt, c, a->gqa, rname, &kern));
    const clf_arg ra[] = {CLF_ARG(s->part_o), CLF_ARG(s->part_ml), CLF_ARG(n_split), CLF_ARG(out), CLF_ARG(a->out_off)};
    CLF_TRY(clf_set_args(kern, ra, CLF_NARGS(ra)));
    if (v != CLF_ATTN_GPU) {
        cl_mem xq = out_q ? out_q->mem : NULL;
        const cl_ulong xq_off = out_q ? out_q->offset : 0;
        CLF_CL_TRY(clSetKernelArg(kern, (cl_uint)CLF_NARGS(ra), sizeof xq, &xq));
        CLF_CL_TRY(clSetKernelArg(kern, (cl_uint)CLF_NARGS(ra) + 1, sizeof xq_off, &xq_off));
    }
    if (v == CLF_ATTN_GPU) {
        const size_t global[2] = {hd, (size_t)n_head}, local[2] = {hd, 1};
        return clf_launch(rt, kern, 2, global, local);
    }
    const size_t global = (size_t)n_head;
    return clf_launch(rt, kern, 1, &global, NULL);
}

static clf_status prefill(clf_runtime *rt, const clf_kv_cache *c, clf_attn_variant v, const attn_args *a,
                          clf_rows q, cl_mem out, int n_tokens, int pos0, float qscale) {
    const char *name = v == CLF_ATTN_GPU ? "attn_prefill_gpu" : "attn_prefill_cpu";
    cl_kernel k;
    CLF_TRY(get_kernel(rt, c, 0, name, &k));
    const clf_arg pa[] = {CLF_ARG(q.t->mem), CLF_ARG(a->q_off),   CLF_ARG(q.row_stride), CLF_ARG(c->k),    CLF_ARG(c->v),
                       CLF_ARG(a->kv_off), CLF_ARG(c->n_ctx), CLF_ARG(out),          CLF_ARG(a->out_off), CLF_ARG(n_tokens),
                       CLF_ARG(pos0),      CLF_ARG(a->gqa),   CLF_ARG(qscale),       CLF_ARG(c->window)};
    CLF_TRY(clf_set_args(k, pa, CLF_NARGS(pa)));
    const int n_rows = n_tokens * a->gqa;
    if (v == CLF_ATTN_GPU) {
        int br, bc;
        gpu_tiles(rt, c->head_dim, &br, &bc);
        const size_t global[2] = {(size_t)div_up(n_rows, br) * (size_t)br, (size_t)c->n_kv_head},
                     local[2] = {(size_t)br, 1};
        return clf_launch(rt, k, 2, global, local);
    }
    const size_t global[2] = {(size_t)div_up(n_rows, CPU_TILE_ROWS), (size_t)c->n_kv_head}, local[2] = {1, 1};
    return clf_launch(rt, k, 2, global, local);
}

clf_status clf_attention(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head, int n_tokens,
                         int pos0, float scale, clf_tensor *out) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, n_tokens, pos0, out, &a));
    const clf_attn_variant v = resolve_variant(rt, c);
    if (v == CLF_ATTN_GPU && (size_t)c->head_dim > rt->dev.max_work_group)
        return clf_fail(CLF_ERR_DEVICE, "head_dim %d exceeds the device's work-group size %zu", c->head_dim,
                        rt->dev.max_work_group);
    const float qscale = (float)(scale * LOG2E);
    if (n_tokens == 1) return decode(rt, c, v, &a, q.t->mem, out->mem, n_head, qscale, NULL, NULL, 0, 0, NULL, NULL);
    return prefill(rt, c, v, &a, q, out->mem, n_tokens, pos0, qscale);
}

clf_status clf_attention_decode(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                int n_head, int pos, float scale, const clf_rope_params *rope, clf_tensor *out,
                                const clf_tensor *out_q) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, 1, pos, out, &a));
    const int width = c->n_kv_head * c->head_dim;
    cl_ulong k_off, v_off;
    CLF_TRY(rows_check("K", k, 1, width, &k_off));
    CLF_TRY(rows_check("V", v, 1, width, &v_off));
    if (rope && (rope->n_rot < 2 || rope->n_rot % 2 || rope->n_rot > c->head_dim || !(rope->base > 1) ||
                 !(rope->freq_scale > 0) || (rope->mode != CLF_ROPE_NORM && rope->mode != CLF_ROPE_NEOX) ||
                 (rope->factors && (rope->factors->type != CLF_F32 || rope->factors->ne[0] != rope->n_rot / 2))))
        return clf_fail(CLF_ERR_ARG, "attention: bad RoPE (mode %d, n_rot %d of head_dim %d, base %g, scale %g)",
                        (int)rope->mode, rope->n_rot, c->head_dim, rope->base, rope->freq_scale);
    const int q_width = n_head * c->head_dim;
    if (out_q && (out_q->type != CLF_F32 || out_q->offset % 16 || c->head_dim % 32 ||
                  out_q->ne[0] != CLF_XQ_FLOATS(q_width) || clf_tensor_nrows(out_q) != 1 ||
                  out->ne[0] != q_width))
        return clf_fail(CLF_ERR_ARG, "attention: the output's int8 form %lld x %lld does not fit one row of %d "
                        "(heads of a multiple of 32)", (long long)clf_tensor_nrows(out_q), (long long)out_q->ne[0], q_width);
    const clf_attn_variant var = resolve_variant(rt, c);
    if (var != CLF_ATTN_CPU) { /* the GPU kernels keep their own launches: RoPE over Q and K, the write, attention */
        if (rope) {
            clf_tensor *qt = (clf_tensor *)q.t, *kt = (clf_tensor *)k.t;
            if (qt == kt && k.col0 == q.col0 + n_head * c->head_dim && k.row_stride == q.row_stride)
                CLF_TRY(clf_rope(rt, qt, 1, q.row_stride, q.col0, n_head + c->n_kv_head, c->head_dim, pos, rope));
            else {
                CLF_TRY(clf_rope(rt, qt, 1, q.row_stride, q.col0, n_head, c->head_dim, pos, rope));
                CLF_TRY(clf_rope(rt, kt, 1, k.row_stride, k.col0, c->n_kv_head, c->head_dim, pos, rope));
            }
        }
        CLF_TRY(clf_kv_write(rt, c, layer, k, v, 1, pos));
        CLF_TRY(clf_attention(rt, c, layer, q, n_head, 1, pos, scale, out));
        if (!out_q) return CLF_OK;
        clf_tensor o1 = clf_tensor_rows(out, 0, 1);
        return clf_quantize_x(rt, &o1, out_q);
    }
    return decode(rt, c, var, &a, q.t->mem, out->mem, n_head, (float)(scale * LOG2E), &k, &v, k_off, v_off, rope,
                  out_q);
}

clf_status clf_attention_naive(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                               int n_tokens, int pos0, float scale, clf_tensor *out) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, n_tokens, pos0, out, &a));
    const size_t rows = (size_t)n_head * (size_t)n_tokens;
    cl_mem S;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, rows * (size_t)a.n_kv * sizeof(float), NULL, &S));
    cl_kernel ks, km, kv;
    clf_status st = get_kernel(rt, c, 0, "attn_naive_scores", &ks);
    if (st == CLF_OK) st = get_kernel(rt, c, 0, "attn_naive_softmax", &km);
    if (st == CLF_OK) st = get_kernel(rt, c, 0, "attn_naive_pv", &kv);
    const clf_arg sa[] = {CLF_ARG(q.t->mem), CLF_ARG(a.q_off), CLF_ARG(q.row_stride), CLF_ARG(c->k), CLF_ARG(a.kv_off),
                       CLF_ARG(c->n_ctx), CLF_ARG(S),       CLF_ARG(pos0),         CLF_ARG(a.gqa), CLF_ARG(scale),
                       CLF_ARG(c->window)};
    const clf_arg ma[] = {CLF_ARG(S), CLF_ARG(a.n_kv)};
    const clf_arg va[] = {CLF_ARG(S),        CLF_ARG(a.n_kv),  CLF_ARG(c->v),     CLF_ARG(a.kv_off),
                       CLF_ARG(c->n_ctx), CLF_ARG(out->mem), CLF_ARG(a.out_off), CLF_ARG(a.gqa)};
    const size_t gs[3] = {(size_t)a.n_kv, (size_t)n_tokens, (size_t)n_head};
    const size_t gv[3] = {(size_t)c->head_dim / 16, (size_t)n_tokens, (size_t)n_head};
    if (st == CLF_OK) st = clf_set_args(ks, sa, CLF_NARGS(sa));
    if (st == CLF_OK) st = clf_launch(rt, ks, 3, gs, NULL);
    if (st == CLF_OK) st = clf_set_args(km, ma, CLF_NARGS(ma));
    if (st == CLF_OK) st = clf_launch(rt, km, 1, &rows, NULL);
    if (st == CLF_OK) st = clf_set_args(kv, va, CLF_NARGS(va));
    if (st == CLF_OK) st = clf_launch(rt, kv, 3, gv, NULL);
    clReleaseMemObject(S); /* freed once the queued kernels are done with it */
    return st;
}

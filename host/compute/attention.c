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
    cl_mem part_o, part_ml; /* [row][n_head][split_max][head_dim], [...][2] floats */
    size_t parts;           /* capacity in (row, head, split) triples */
    clf_attn_rows one;      /* the row of a single-token call */
};

/* A cache row of head_dim elements: its bytes, and its length in the
 * kernels' kv_t units (elements; bytes where quantized: cl/attention.cl KV_RS). */
static int kv_quantized(clf_type t) { return t == CLF_Q8_0 || t == CLF_Q4_0; }

/* The block sizes and bytes from the type table (cl/types.cl); F32's for a
 * type the cache does not take (cache_check refuses it). */
static size_t kv_row_bytes(clf_type t, int head_dim) {
    const clf_type_info *ti = t == CLF_F16 || kv_quantized(t) ? clf_type_get(t) : NULL;
    return ti ? (size_t)(head_dim / ti->block) * (size_t)ti->block_bytes : 4 * (size_t)head_dim;
}

static cl_ulong kv_row_units(const clf_kv_cache *c) {
    return kv_quantized(c->type) ? kv_row_bytes(c->type, c->head_dim) : (cl_ulong)c->head_dim;
}

size_t clf_kv_row_bytes(clf_type type, int head_dim) { return kv_row_bytes(type, head_dim); }

static int div_up(int a, int b) { return (a + b - 1) / b; }

/* A launch's work-group where the device is a CPU (PoCL), else NULL (the
 * driver's choice): PoCL compiles a kernel per work-group size, and left to
 * choose it derives one from the global size, so every new count of tokens
 * or rows (a prompt's length, a batch's width) would build the kernel again
 * (~0.2-0.5 s) inside the pass. The given one stays the same for any count. */
static const size_t *cpu_local(const clf_runtime *rt, const size_t *local) {
    return rt->dev.type & CL_DEVICE_TYPE_CPU ? local : NULL;
}

/* ---- cache ------------------------------------------------------------------ */

static clf_status cache_check(clf_type type, int n_layer, int n_kv_head, int head_dim, int n_ctx, int window) {
    if (type != CLF_F32 && type != CLF_F16 && !kv_quantized(type))
        return clf_fail(CLF_ERR_ARG, "KV cache type must be F32, F16, Q8_0 or Q4_0 (got type %u)", (unsigned)type);
    if (kv_quantized(type) && head_dim % 32)
        return clf_fail(CLF_ERR_ARG, "a quantized KV cache needs head_dim a multiple of 32 (it is %d)", head_dim);
    if (n_layer <= 0 || n_kv_head <= 0 || n_ctx <= 0 || window < 0)
        return clf_fail(CLF_ERR_ARG, "bad KV cache shape: %d layers, %d KV heads, context %d, window %d", n_layer,
                        n_kv_head, n_ctx, window);
    if (head_dim < 16 || head_dim > 256 || head_dim % 16)
        return clf_fail(CLF_ERR_ARG, "head_dim %d unsupported (a multiple of 16 up to 256)", head_dim);
    return CLF_OK;
}

clf_status clf_kv_pool_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim, int n_blocks,
                              int block, int n_seq, int n_tbl, int window, clf_kv_cache *c) {
    memset(c, 0, sizeof *c);
    CLF_TRY(cache_check(type, n_layer, n_kv_head, head_dim, 1, window));
    if (block < RING_ALIGN || block % RING_ALIGN || n_blocks <= 0 || n_seq <= 0 || n_tbl <= 0 ||
        (int64_t)n_blocks * block > INT32_MAX || (int64_t)n_tbl * block > INT32_MAX || (int64_t)n_seq * n_tbl > INT32_MAX)
        return clf_fail(CLF_ERR_ARG, "bad KV pool: %d blocks of %d tokens, %d sequences of %d blocks", n_blocks, block,
                        n_seq, n_tbl);
    uint64_t rows = (uint64_t)n_layer * (uint64_t)n_kv_head * (uint64_t)n_blocks * (uint64_t)block;
    if (rows * (uint64_t)head_dim > SIZE_MAX / 8) return clf_fail(CLF_ERR_MEMORY, "KV cache size overflows");
    size_t one = (size_t)rows * kv_row_bytes(type, head_dim);
    *c = (clf_kv_cache){.type = type, .n_layer = n_layer, .n_kv_head = n_kv_head, .head_dim = head_dim,
                        .n_ctx = n_tbl * block, .n_slots = n_blocks * block, .block = block, .window = window,
                        .n_seq = n_seq, .n_tbl = n_tbl, .bytes = 2 * one};
    c->scratch = calloc(1, sizeof *c->scratch);
    clf_status st = c->scratch ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, one, NULL, &c->k);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_WRITE, one, NULL, &c->v);
    if (st == CLF_OK) st = clf_buffer_create(rt, CL_MEM_READ_ONLY, (size_t)n_seq * n_tbl * sizeof(int32_t), NULL, &c->tbl);
    if (st == CLF_OK) {
        const cl_int zero = 0;
        st = clf_cl_check(clEnqueueFillBuffer(rt->queue, c->tbl, &zero, sizeof zero, 0,
                                              (size_t)n_seq * n_tbl * sizeof(int32_t), 0, NULL, NULL),
                          "clearing block tables");
    }
    if (st != CLF_OK) {
        clf_kv_cache_free(c);
        return clf_fail_ctx(st, "KV cache (%d layers x %d blocks of %d, %.1f MiB): ", n_layer, n_blocks, block,
                            2.0 * (double)one / (1 << 20));
    }
    return CLF_OK;
}

clf_status clf_kv_cache_create(clf_runtime *rt, clf_type type, int n_layer, int n_kv_head, int head_dim,
                               int n_ctx, int window, clf_kv_cache *c) {
    memset(c, 0, sizeof *c);
    CLF_TRY(cache_check(type, n_layer, n_kv_head, head_dim, n_ctx, window));
    const int n_blocks = div_up(n_ctx, RING_ALIGN);
    CLF_TRY(clf_kv_pool_create(rt, type, n_layer, n_kv_head, head_dim, n_blocks, RING_ALIGN, 1, n_blocks, window, c));
    c->n_ctx = n_ctx;
    int32_t *id = malloc((size_t)n_blocks * sizeof *id);
    clf_status st = id ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; id && i < n_blocks; i++) id[i] = i;
    if (st == CLF_OK) st = clf_kv_table_upload(rt, c, 0, id);
    free(id);
    if (st != CLF_OK) clf_kv_cache_free(c);
    return st;
}

void clf_kv_cache_free(clf_kv_cache *c) {
    if (c->k) clReleaseMemObject(c->k);
    if (c->v) clReleaseMemObject(c->v);
    if (c->tbl) clReleaseMemObject(c->tbl);
    if (c->scratch) {
        if (c->scratch->part_o) clReleaseMemObject(c->scratch->part_o);
        if (c->scratch->part_ml) clReleaseMemObject(c->scratch->part_ml);
        clf_attn_rows_free(&c->scratch->one);
        free(c->scratch);
    }
    memset(c, 0, sizeof *c);
}

clf_kv_cache clf_kv_cache_seq(const clf_kv_cache *pool, int seq) {
    clf_kv_cache v = *pool;
    v.seq = seq;
    return v;
}

clf_status clf_kv_table_upload(clf_runtime *rt, const clf_kv_cache *pool, int seq, const int32_t *tbl) {
    if (seq < 0 || seq >= pool->n_seq) return clf_fail(CLF_ERR_ARG, "block table of sequence %d of %d", seq, pool->n_seq);
    const size_t bytes = (size_t)pool->n_tbl * sizeof *tbl;
    /* blocking: the host's table changes again before the pass runs */
    return clf_cl_check(clEnqueueWriteBuffer(rt->queue, pool->tbl, CL_TRUE, (size_t)seq * bytes, bytes, tbl, 0, NULL,
                                             NULL),
                        "writing a block table");
}

clf_status clf_kv_block_copy(clf_runtime *rt, const clf_kv_cache *pool, int from, int to, int n) {
    if (from < 0 || to < 0 || from * (int64_t)pool->block >= pool->n_slots || to * (int64_t)pool->block >= pool->n_slots ||
        n < 0 || n > pool->block)
        return clf_fail(CLF_ERR_ARG, "copying %d slots of block %d to block %d of a pool of %d", n, from, to,
                        pool->n_slots / pool->block);
    if (n == 0 || from == to) return CLF_OK;
    /* one rectangle a buffer: n slots in each of n_layer × n_kv_head rows of the pool */
    const size_t slot = kv_row_bytes(pool->type, pool->head_dim), pitch = (size_t)pool->n_slots * slot;
    const size_t src[3] = {(size_t)from * pool->block * slot, 0, 0}, dst[3] = {(size_t)to * pool->block * slot, 0, 0};
    const size_t region[3] = {(size_t)n * slot, (size_t)pool->n_layer * pool->n_kv_head, 1};
    cl_mem b[2] = {pool->k, pool->v};
    for (int i = 0; i < 2; i++)
        CLF_CL_TRY(clEnqueueCopyBufferRect(rt->queue, b[i], b[i], src, dst, region, pitch, 0, pitch, 0, 0, NULL, NULL));
    return CLF_OK;
}

int clf_kv_seq_blocks(int window, int n_batch, int n_ctx, int block) {
    const int64_t all = ((int64_t)n_ctx + block - 1) / block;
    if (window <= 0) return (int)all;
    const int64_t span = ((int64_t)window - 1 + block + n_batch + block - 1) / block + 1;
    return (int)(span < all ? span : all);
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
    int n = snprintf(opts, sizeof opts, "-DHD=%d -DKV_F16=%d -DKV_Q=%d -DKV_BT=%d -DATTN_BK=%d -DATTN_BR=%d -DATTN_BC=%d",
                     c->head_dim, c->type == CLF_F16, c->type == CLF_Q8_0 ? 8 : c->type == CLF_Q4_0 ? 4 : 0, c->block,
                     CPU_BLOCK_KEYS, br, bc);
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
    return (cl_ulong)layer * (cl_ulong)c->n_kv_head * (cl_ulong)c->n_slots * kv_row_units(c);
}

/* A view's pool slots and block table, as every kernel takes them (n_slots, tbl, tbl_off, n_tbl). */
typedef struct tbl_args {
    cl_int n_slots, tbl_off, n_tbl;
} tbl_args;

static tbl_args tbl_of(const clf_kv_cache *c) { return (tbl_args){c->n_slots, c->seq * c->n_tbl, c->n_tbl}; }

#define TBL_ARGS(t, c) CLF_ARG((t).n_slots), CLF_ARG((c)->tbl), CLF_ARG((t).tbl_off), CLF_ARG((t).n_tbl)

/* Attention sinks as the kernels take them (cl/attention.cl CLF_SINK): the
 * buffer (NULL for none) and its offset in floats; one F32 logit a query
 * head. */
typedef struct sink_args {
    cl_mem mem;
    cl_ulong off;
} sink_args;

static clf_status sinks_check(const clf_tensor *sinks, int n_head, sink_args *a) {
    *a = (sink_args){NULL, 0};
    if (!sinks) return CLF_OK;
    if (sinks->type != CLF_F32 || sinks->offset % sizeof(float) || !sinks->mem ||
        clf_tensor_bytes(sinks) != (size_t)n_head * sizeof(float))
        return clf_fail(CLF_ERR_ARG, "attention sinks must be an F32 tensor of %d floats (one a query head)", n_head);
    *a = (sink_args){sinks->mem, sinks->offset / sizeof(float)};
    return CLF_OK;
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
    const tbl_args t = tbl_of(c);
    const clf_arg a[] = {CLF_ARG(k.t->mem), CLF_ARG(k_off),  CLF_ARG(k.row_stride), CLF_ARG(v.t->mem), CLF_ARG(v_off),
                         CLF_ARG(v.row_stride), CLF_ARG(c->k), CLF_ARG(c->v), CLF_ARG(kv_off), TBL_ARGS(t, c),
                         CLF_ARG(pos0)};
    CLF_TRY(clf_set_args(kern, a, CLF_NARGS(a)));
    const size_t global[2] = {(size_t)n_tokens, (size_t)c->n_kv_head}, local[2] = {1, (size_t)c->n_kv_head};
    return clf_launch(rt, kern, 2, global, cpu_local(rt, local));
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

/* Room for the partials of n_rows rows of split_max splits: grown to twice
 * what is asked (a step's rows and splits change as sequences grow). */
static clf_status scratch_reserve(clf_runtime *rt, clf_attn_scratch *s, int n_rows, int split_max, int n_head,
                                  int head_dim) {
    size_t need = (size_t)n_rows * (size_t)n_head * (size_t)split_max;
    if (s->parts >= need) return CLF_OK;
    need *= 2;
    if (s->part_o) clReleaseMemObject(s->part_o);
    if (s->part_ml) clReleaseMemObject(s->part_ml);
    s->part_o = s->part_ml = NULL;
    s->parts = 0;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, need * (size_t)head_dim * sizeof(float), NULL, &s->part_o));
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, need * 2 * sizeof(float), NULL, &s->part_ml));
    s->parts = need;
    return CLF_OK;
}

/* ---- decode rows ------------------------------------------------------------ */

enum { ROW_INTS = 5 }; /* cl/attention.cl ATTN_ROW_INTS */

void clf_attn_rows_free(clf_attn_rows *r) {
    if (r->info) clReleaseMemObject(r->info);
    free(r->host);
    memset(r, 0, sizeof *r);
}

clf_status clf_attn_rows_set(clf_runtime *rt, const clf_kv_cache *pool, clf_attn_rows *r, int n, const int *seq,
                             const int *pos) {
    if (n <= 0) return clf_fail(CLF_ERR_ARG, "no decode rows");
    if (n > r->cap) {
        clf_attn_rows_free(r);
        int *h = malloc((size_t)n * ROW_INTS * sizeof *h);
        if (!h) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        r->host = h;
        CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_ONLY, (size_t)n * ROW_INTS * sizeof(cl_int), NULL, &r->info));
        r->cap = n;
        r->n = 0;
    }
    int rows[ROW_INTS * 64], *w = n <= 64 ? rows : NULL, changed = n != r->n, split_max = 1;
    if (!w && !(w = malloc((size_t)n * ROW_INTS * sizeof *w))) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    clf_status st = CLF_OK;
    for (int i = 0; st == CLF_OK && i < n; i++) {
        const clf_kv_cache v = clf_kv_cache_seq(pool, seq[i]);
        if ((st = span_check(&v, 0, 1, pos[i])) != CLF_OK) break;
        for (int j = 0; j < i && st == CLF_OK; j++)
            if (seq[j] == seq[i] && pos[j] >= pos[i])
                st = clf_fail(CLF_ERR_ARG, "decode rows %d and %d of sequence %d are not in the order of their positions",
                              j, i, seq[i]);
        const int n_kv = pos[i] + 1, k0 = pool->window && n_kv > pool->window ? n_kv - pool->window : 0;
        int n_split, chunk;
        decode_split(rt, pool, n_kv - k0 / 16 * 16, &n_split, &chunk);
        const int row[ROW_INTS] = {n_kv, k0, chunk, n_split, seq[i] * pool->n_tbl};
        memcpy(w + i * ROW_INTS, row, sizeof row);
        if (n_split > split_max) split_max = n_split;
    }
    if (st == CLF_OK && (changed || memcmp(w, r->host, (size_t)n * ROW_INTS * sizeof *w))) {
        memcpy(r->host, w, (size_t)n * ROW_INTS * sizeof *w);
        /* blocking: the host's rows change again at the next step */
        st = clf_cl_check(clEnqueueWriteBuffer(rt->queue, r->info, CL_TRUE, 0, (size_t)n * ROW_INTS * sizeof *w, w, 0,
                                               NULL, NULL),
                          "writing decode rows");
    }
    if (w != rows) free(w);
    if (st != CLF_OK) {
        r->n = 0; /* uploaded rows unknown: the next set writes them */
        return st;
    }
    r->n = n;
    r->split_max = split_max;
    r->distinct = 1;
    for (int i = 1; i < n; i++)
        for (int j = 0; j < i; j++) r->distinct &= seq[j] != seq[i];
    return CLF_OK;
}

/* RoPE as clf_rope takes it: base^(-2i/n_rot) = exp2(i * log2_scale), the constant in double. */
typedef struct rope_args {
    cl_int mode, n_rot;
    float freq_scale, log2_scale;
    cl_mem ff;
    cl_ulong ff_off;
    cl_float4 yarn; /* clf_rope_yarn_arg */
} rope_args;

static rope_args rope_of(const clf_rope_params *rope) {
    if (!rope) return (rope_args){-1, 0, 1.0f, 0.0f, NULL, 0, clf_rope_yarn_arg(NULL)};
    return (rope_args){(cl_int)rope->mode, rope->n_rot, rope->freq_scale,
                       (float)(-2.0 * log2((double)rope->base) / rope->n_rot),
                       rope->factors ? rope->factors->mem : NULL,
                       rope->factors ? rope->factors->offset / sizeof(float) : 0, clf_rope_yarn_arg(rope)};
}

static clf_status rope_check(const clf_rope_params *rope, int head_dim) {
    if (rope && (rope->n_rot < 2 || rope->n_rot % 2 || rope->n_rot > head_dim || !(rope->base > 1) ||
                 !(rope->freq_scale > 0) || (rope->mode != CLF_ROPE_NORM && rope->mode != CLF_ROPE_NEOX) ||
                 (rope->factors && (rope->factors->type != CLF_F32 || rope->factors->ne[0] != rope->n_rot / 2)) ||
                 !clf_rope_yarn_valid(rope)))
        return clf_fail(CLF_ERR_ARG, "attention: bad RoPE (mode %d, n_rot %d of head_dim %d, base %g, scale %g)",
                        (int)rope->mode, rope->n_rot, head_dim, rope->base, rope->freq_scale);
    return CLF_OK;
}

clf_status clf_attention_decode_rows(clf_runtime *rt, const clf_kv_cache *pool, const clf_attn_rows *rows, int layer,
                                     clf_rows q, clf_rows k, clf_rows v, int n_head, float scale,
                                     const clf_rope_params *rope, clf_tensor *out, const clf_tensor *out_q) {
    return clf_attention_decode_rows_ex(rt, pool, rows, layer, q, k, v, n_head, scale, rope, NULL, out, out_q);
}

clf_status clf_attention_decode_rows_ex(clf_runtime *rt, const clf_kv_cache *pool, const clf_attn_rows *rows,
                                        int layer, clf_rows q, clf_rows k, clf_rows v, int n_head, float scale,
                                        const clf_rope_params *rope, const clf_tensor *sinks, clf_tensor *out,
                                        const clf_tensor *out_q) {
    const int n = rows->n, hd = pool->head_dim;
    if (!pool->k || n <= 0) return clf_fail(CLF_ERR_ARG, "decode rows: no cache or no rows set");
    if (layer < 0 || layer >= pool->n_layer)
        return clf_fail(CLF_ERR_ARG, "layer %d out of range (cache has %d)", layer, pool->n_layer);
    if (n_head <= 0 || n_head % pool->n_kv_head)
        return clf_fail(CLF_ERR_ARG, "%d query heads is not a multiple of the cache's %d KV heads", n_head,
                        pool->n_kv_head);
    const int q_width = n_head * hd, kv_width = pool->n_kv_head * hd;
    cl_ulong q_off, k_off = 0, v_off = 0;
    CLF_TRY(rows_check("Q", q, n, q_width, &q_off));
    if (k.t) {
        CLF_TRY(rows_check("K", k, n, kv_width, &k_off));
        CLF_TRY(rows_check("V", v, n, kv_width, &v_off));
        if (n > 1 && (k.row_stride != q.row_stride || v.row_stride != q.row_stride))
            return clf_fail(CLF_ERR_ARG, "decode rows: Q, K and V rows must share one stride");
    }
    CLF_TRY(rope_check(rope, hd));
    sink_args sk;
    CLF_TRY(sinks_check(sinks, n_head, &sk));
    if (!out || out->type != CLF_F32 || out->offset % sizeof(float) || out->ne[0] != q_width ||
        clf_tensor_nrows(out) < n)
        return clf_fail(CLF_ERR_ARG, "attention output must be an F32 tensor of %d rows of %d floats", n, q_width);
    if (out_q && (out_q->type != CLF_F32 || out_q->offset % 16 || hd % 32 || out_q->ne[0] != CLF_XQ_FLOATS(q_width) ||
                  clf_tensor_nrows(out_q) != n))
        return clf_fail(CLF_ERR_ARG, "attention: the output's int8 form %lld x %lld does not fit %d rows of %d "
                        "(heads of a multiple of 32)", (long long)clf_tensor_nrows(out_q), (long long)out_q->ne[0], n,
                        q_width);
    const clf_attn_variant var = resolve_variant(rt, pool);
    if (var == CLF_ATTN_GPU && (size_t)hd > rt->dev.max_work_group)
        return clf_fail(CLF_ERR_DEVICE, "head_dim %d exceeds the device's work-group size %zu", hd,
                        rt->dev.max_work_group);
    clf_attn_scratch *s = pool->scratch;
    CLF_TRY(scratch_reserve(rt, s, n, rows->split_max, n_head, hd));
    const int gqa = n_head / pool->n_kv_head;
    const cl_ulong kv_off = layer_offset(pool, layer), out_off = out->offset / sizeof(float);
    const float qscale = (float)(scale * LOG2E);
    const rope_args ra = rope_of(k.t ? rope : NULL);
    const cl_int stride = q.row_stride, n_slots = pool->n_slots, n_tbl = pool->n_tbl, split_max = rows->split_max;
    cl_kernel kern;
    /* RoPE of k (and the GPU shape's q) and the cache write for every row ahead of the attention: the GPU
     * shape's way, and the CPU shape's where a row reads the keys of another */
    const int prepare = k.t && (var == CLF_ATTN_GPU || !rows->distinct);
    if (prepare) {
        const cl_int n_q = var == CLF_ATTN_GPU ? n_head : 0;
        CLF_TRY(get_kernel(rt, pool, gqa, "attn_rows_prepare", &kern));
        const clf_arg pa[] = {CLF_ARG(q.t->mem),  CLF_ARG(q_off),   CLF_ARG(k.t->mem),   CLF_ARG(k_off),
                              CLF_ARG(v.t->mem),  CLF_ARG(v_off),   CLF_ARG(stride),     CLF_ARG(pool->k),
                              CLF_ARG(pool->v),   CLF_ARG(kv_off),  CLF_ARG(n_slots),    CLF_ARG(pool->tbl),
                              CLF_ARG(rows->info), CLF_ARG(n_tbl),  CLF_ARG(n_q),        CLF_ARG(ra.mode),
                              CLF_ARG(ra.n_rot),  CLF_ARG(ra.freq_scale), CLF_ARG(ra.log2_scale), CLF_ARG(ra.ff),
                              CLF_ARG(ra.ff_off), CLF_ARG(ra.yarn)};
        CLF_TRY(clf_set_args(kern, pa, CLF_NARGS(pa)));
        const size_t g[2] = {(size_t)(n_q + pool->n_kv_head), (size_t)n}, l[2] = {g[0], 1};
        CLF_TRY(clf_launch(rt, kern, 2, g, cpu_local(rt, l)));
    }
    if (var == CLF_ATTN_GPU) {
        CLF_TRY(get_kernel(rt, pool, gqa, "attn_decode_gpu", &kern));
        const clf_arg da[] = {CLF_ARG(q.t->mem),  CLF_ARG(q_off),    CLF_ARG(pool->k),    CLF_ARG(pool->v),
                              CLF_ARG(kv_off),    CLF_ARG(n_slots),  CLF_ARG(pool->tbl),  CLF_ARG(rows->info),
                              CLF_ARG(s->part_o), CLF_ARG(s->part_ml), CLF_ARG(split_max), CLF_ARG(n_tbl),
                              CLF_ARG(qscale),    CLF_ARG(stride),   CLF_ARG(sk.mem),     CLF_ARG(sk.off)};
        CLF_TRY(clf_set_args(kern, da, CLF_NARGS(da)));
        const size_t g[3] = {(size_t)split_max * hd, (size_t)pool->n_kv_head, (size_t)n}, l[3] = {(size_t)hd, 1, 1};
        CLF_TRY(clf_launch(rt, kern, 3, g, l));
        CLF_TRY(get_kernel(rt, pool, gqa, "attn_decode_reduce_gpu", &kern));
        const clf_arg ra2[] = {CLF_ARG(s->part_o), CLF_ARG(s->part_ml), CLF_ARG(rows->info), CLF_ARG(split_max),
                               CLF_ARG(out->mem),  CLF_ARG(out_off)};
        CLF_TRY(clf_set_args(kern, ra2, CLF_NARGS(ra2)));
        const size_t gr[3] = {(size_t)hd, (size_t)n_head, (size_t)n}, lr[3] = {(size_t)hd, 1, 1};
        CLF_TRY(clf_launch(rt, kern, 3, gr, lr));
        if (!out_q) return CLF_OK;
        clf_tensor on = clf_tensor_rows(out, 0, n);
        return clf_quantize_x(rt, &on, out_q);
    }
    /* the CPU shape: RoPE, the write (unless done above) and (one split) the output fused into the split
     * kernel; q is rotated there either way */
    cl_mem ks = k.t && !prepare ? k.t->mem : NULL, vs = k.t && !prepare ? v.t->mem : NULL;
    cl_mem xq = out_q ? out_q->mem : NULL;
    const cl_ulong xq_off = out_q ? out_q->offset : 0, xq_stride = (cl_ulong)CLF_XQ_FLOATS(q_width) * sizeof(float);
    CLF_TRY(get_kernel(rt, pool, gqa, "attn_decode_cpu", &kern));
    const clf_arg da[] = {CLF_ARG(q.t->mem),    CLF_ARG(q_off),     CLF_ARG(pool->k),      CLF_ARG(pool->v),
                          CLF_ARG(kv_off),      CLF_ARG(n_slots),   CLF_ARG(pool->tbl),    CLF_ARG(rows->info),
                          CLF_ARG(s->part_o),   CLF_ARG(s->part_ml), CLF_ARG(split_max),   CLF_ARG(n_tbl),
                          CLF_ARG(qscale),      CLF_ARG(ks),        CLF_ARG(k_off),        CLF_ARG(vs),
                          CLF_ARG(v_off),       CLF_ARG(stride),    CLF_ARG(out->mem),     CLF_ARG(out_off),
                          CLF_ARG(ra.mode),     CLF_ARG(ra.n_rot),  CLF_ARG(ra.freq_scale), CLF_ARG(ra.log2_scale),
                          CLF_ARG(ra.ff),       CLF_ARG(ra.ff_off), CLF_ARG(xq),           CLF_ARG(xq_off),
                          CLF_ARG(xq_stride),   CLF_ARG(sk.mem),    CLF_ARG(sk.off),       CLF_ARG(ra.yarn)};
    CLF_TRY(clf_set_args(kern, da, CLF_NARGS(da)));
    const size_t g[3] = {(size_t)split_max, (size_t)pool->n_kv_head, (size_t)n}, l[3] = {1, 1, 1};
    CLF_TRY(clf_launch(rt, kern, 3, g, l));
    if (split_max == 1) return CLF_OK; /* every row wrote its output */
    CLF_TRY(get_kernel(rt, pool, gqa, "attn_decode_reduce", &kern));
    const clf_arg rda[] = {CLF_ARG(s->part_o), CLF_ARG(s->part_ml), CLF_ARG(rows->info), CLF_ARG(split_max),
                           CLF_ARG(out->mem),  CLF_ARG(out_off),    CLF_ARG(xq),         CLF_ARG(xq_off),
                           CLF_ARG(xq_stride)};
    CLF_TRY(clf_set_args(kern, rda, CLF_NARGS(rda)));
    const size_t gr[2] = {(size_t)n_head, (size_t)n}, lr[2] = {(size_t)n_head, 1};
    return clf_launch(rt, kern, 2, gr, cpu_local(rt, lr));
}

/* One row of a view: its sequence and position in the scratch's row. */
static clf_status decode_one(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                             int n_head, int pos, float scale, const clf_rope_params *rope, const clf_tensor *sinks,
                             clf_tensor *out, const clf_tensor *out_q) {
    CLF_TRY(clf_attn_rows_set(rt, c, &c->scratch->one, 1, &c->seq, &pos));
    clf_tensor o1 = clf_tensor_rows(out, 0, 1);
    return clf_attention_decode_rows_ex(rt, c, &c->scratch->one, layer, q, k, v, n_head, scale, rope, sinks, &o1,
                                        out_q);
}

static clf_status prefill(clf_runtime *rt, const clf_kv_cache *c, clf_attn_variant v, const attn_args *a,
                          clf_rows q, cl_mem out, int n_tokens, int pos0, float qscale, sink_args sk) {
    const char *name = v == CLF_ATTN_GPU ? "attn_prefill_gpu" : "attn_prefill_cpu";
    cl_kernel k;
    CLF_TRY(get_kernel(rt, c, 0, name, &k));
    const tbl_args t = tbl_of(c);
    const clf_arg pa[] = {CLF_ARG(q.t->mem), CLF_ARG(a->q_off),   CLF_ARG(q.row_stride), CLF_ARG(c->k),    CLF_ARG(c->v),
                       CLF_ARG(a->kv_off), TBL_ARGS(t, c), CLF_ARG(out),          CLF_ARG(a->out_off), CLF_ARG(n_tokens),
                       CLF_ARG(pos0),      CLF_ARG(a->gqa),   CLF_ARG(qscale),       CLF_ARG(c->window),
                       CLF_ARG(sk.mem),    CLF_ARG(sk.off)};
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
    return clf_attention_ex(rt, c, layer, q, n_head, n_tokens, pos0, scale, NULL, out);
}

clf_status clf_attention_ex(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head, int n_tokens,
                            int pos0, float scale, const clf_tensor *sinks, clf_tensor *out) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, n_tokens, pos0, out, &a));
    sink_args sk;
    CLF_TRY(sinks_check(sinks, n_head, &sk));
    const clf_attn_variant v = resolve_variant(rt, c);
    if (v == CLF_ATTN_GPU && (size_t)c->head_dim > rt->dev.max_work_group)
        return clf_fail(CLF_ERR_DEVICE, "head_dim %d exceeds the device's work-group size %zu", c->head_dim,
                        rt->dev.max_work_group);
    if (n_tokens == 1)
        return decode_one(rt, c, layer, q, (clf_rows){0}, (clf_rows){0}, n_head, pos0, scale, NULL, sinks, out, NULL);
    return prefill(rt, c, v, &a, q, out->mem, n_tokens, pos0, (float)(scale * LOG2E), sk);
}

clf_status clf_attention_decode(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                int n_head, int pos, float scale, const clf_rope_params *rope, clf_tensor *out,
                                const clf_tensor *out_q) {
    return clf_attention_decode_ex(rt, c, layer, q, k, v, n_head, pos, scale, rope, NULL, out, out_q);
}

clf_status clf_attention_decode_ex(clf_runtime *rt, clf_kv_cache *c, int layer, clf_rows q, clf_rows k, clf_rows v,
                                   int n_head, int pos, float scale, const clf_rope_params *rope,
                                   const clf_tensor *sinks, clf_tensor *out, const clf_tensor *out_q) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, 1, pos, out, &a));
    return decode_one(rt, c, layer, q, k, v, n_head, pos, scale, rope, sinks, out, out_q);
}

clf_status clf_attention_naive(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                               int n_tokens, int pos0, float scale, clf_tensor *out) {
    return clf_attention_naive_ex(rt, c, layer, q, n_head, n_tokens, pos0, scale, NULL, out);
}

clf_status clf_attention_naive_ex(clf_runtime *rt, const clf_kv_cache *c, int layer, clf_rows q, int n_head,
                                  int n_tokens, int pos0, float scale, const clf_tensor *sinks, clf_tensor *out) {
    attn_args a;
    CLF_TRY(attn_check(c, layer, q, n_head, n_tokens, pos0, out, &a));
    sink_args sk;
    CLF_TRY(sinks_check(sinks, n_head, &sk));
    const cl_int nt = n_tokens;
    const size_t rows = (size_t)n_head * (size_t)n_tokens;
    cl_mem S;
    CLF_TRY(clf_buffer_create(rt, CL_MEM_READ_WRITE, rows * (size_t)a.n_kv * sizeof(float), NULL, &S));
    cl_kernel ks, km, kv;
    clf_status st = get_kernel(rt, c, 0, "attn_naive_scores", &ks);
    if (st == CLF_OK) st = get_kernel(rt, c, 0, "attn_naive_softmax", &km);
    if (st == CLF_OK) st = get_kernel(rt, c, 0, "attn_naive_pv", &kv);
    const tbl_args t = tbl_of(c);
    const clf_arg sa[] = {CLF_ARG(q.t->mem), CLF_ARG(a.q_off), CLF_ARG(q.row_stride), CLF_ARG(c->k), CLF_ARG(a.kv_off),
                       TBL_ARGS(t, c), CLF_ARG(S),       CLF_ARG(pos0),         CLF_ARG(a.gqa), CLF_ARG(scale),
                       CLF_ARG(c->window)};
    const clf_arg ma[] = {CLF_ARG(S), CLF_ARG(a.n_kv), CLF_ARG(sk.mem), CLF_ARG(sk.off), CLF_ARG(nt)};
    const clf_arg va[] = {CLF_ARG(S),        CLF_ARG(a.n_kv),  CLF_ARG(c->v),     CLF_ARG(a.kv_off),
                       TBL_ARGS(t, c), CLF_ARG(out->mem), CLF_ARG(a.out_off), CLF_ARG(a.gqa)};
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

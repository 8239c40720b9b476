/* Attention against a paged KV cache: K and V each [layer][kv_head][slot][HD]
 * over a pool of n_slots slots in blocks of KV_BT, and a sequence's block
 * table tbl [n_tbl]: position j lives in slot tbl[(j / KV_BT) % n_tbl] *
 * KV_BT + j % KV_BT. A table of n_tbl blocks covers positions below n_tbl *
 * KV_BT; the modulo makes a table a ring (the identity table of a cache
 * created alone, with a sliding window). Blocks are contiguous runs of
 * KV_BT slots, a multiple of every key block and tile below (16, 32), so a
 * kernel's run of keys never straddles two blocks.
 *
 * Built twice per head_dim and cache type: without GQA for the KV write,
 * prefill and naive kernels (which take the query heads per KV head as an
 * argument), and with -DGQA=<that ratio> for the decode kernels, whose
 * per-head registers need it at compile time. Other options: HD (head_dim,
 * a multiple of 16), KV_F16 (cache holds halves: vload_half/vstore_half,
 * core 1.2), KV_BT (tokens per block, a multiple of 32), ATTN_BK (keys per
 * block of the CPU prefill), ATTN_BR / ATTN_BC (rows per work-group / keys
 * per local tile of the GPU prefill).
 *
 * Scores are kept in the log2 domain: the host passes qscale =
 * scale * log2(e), so softmax uses exp2. Masked scores are CLF_NEG_BIG,
 * never an infinity, and every running maximum starts at CLF_NEG_BIG: a
 * masked score then contributes exp2(NEG_BIG - max) = 0 once a real score is
 * seen, and a fully masked row averages finite values instead of giving NaN.
 * Offsets are in elements; cache offsets are ulong (a cache may exceed 2^31
 * elements).
 *
 * Sliding window: with window > 0 a query at position p sees keys
 * p - window + 1 .. p only (Gemma 3's local layers); loops start at the
 * first block any row of the tile sees, and the mask drops the rest (a
 * paged sequence's blocks below the window may be given back: no kernel
 * reads them).
 *
 * Attention sinks (gpt-oss): sinks (NULL: none) holds a logit per query
 * head at sinks_off floats, in the scores' natural units (unscaled), that
 * joins each row's softmax denominator without a value: out = sum_j
 * e^(s_j) v_j / (sum_j e^(s_j) + e^(sink)), as llama.cpp's soft_max with
 * sinks. The online softmax starts from it instead of from nothing: m =
 * sink·log2(e), l = 1 (llama.cpp takes the max over the scores and the
 * sink the same way). A split-K decode gives it to its first split only,
 * which always holds keys, so the reduction counts it once. Without sinks
 * every kernel starts from m = NEG_BIG, l = 0 as before: results are
 * bit-identical. The window does not touch the sink: a query sees its
 * window's keys and the sink. */
#define CLF_SINK(sinks, sinks_off, h) ((sinks)[(sinks_off) + (h)] * M_LOG2E_F)

#if HD % 16 != 0
#error "HD must be a multiple of 16"
#endif
#define HV (HD / 16) /* float16 vectors per head row */

/* A cache row of HD elements, as kv_t units (KV_RS of them a row), read 16
 * or 1 at a time and written 32 (quantized: a block) or 16 at a time:
 *  KV_LD16(row, c)  elements c .. c+15 (c a multiple of 16) as a float16
 *  KV_LD1(row, d)   element d
 *  KV_STORE_ROW(dst, src)  the HD floats at src (global or private) into row dst
 * KV_Q 8: q8_0 blocks of 32 (a half scale d, 32 signed bytes: x = d q);
 * KV_Q 4: q4_0 blocks (a half d, 16 bytes of two nibbles: x = d (q - 8),
 * element i of the block low in byte i, element 16 + i high), as ggml's
 * quantizers make them; HD then a multiple of 32. KV_CONVERT: not floats
 * in place (the CPU prefill converts a block of keys first). */
#ifndef KV_Q
#define KV_Q 0
#endif
#if KV_Q
#if HD % 32 != 0
#error "a quantized cache needs HD a multiple of 32"
#endif
#define kv_t uchar
#define KV_QB (KV_Q == 8 ? 34 : 18) /* bytes a block of 32 */
#define KV_RS (HD / 32 * KV_QB)
#define KV_CONVERT 1
#define KV_BLK(row, e) ((row) + (e) / 32 * KV_QB)
#define KV_SCALE(blk) vload_half(0, (__global const half *)(blk))
#if KV_Q == 8
#define KV_LD16(row, c) (convert_float16(vload16(0, (__global const char *)KV_BLK(row, c) + 2 + (c) % 32)) * KV_SCALE(KV_BLK(row, c)))
#define KV_LD1(row, d) ((float)((__global const char *)KV_BLK(row, d))[2 + (d) % 32] * KV_SCALE(KV_BLK(row, d)))
#else
__attribute__((always_inline)) inline float16 kv_ld16_q4(__global const uchar *blk, const int hi) {
    const uchar16 b = vload16(0, blk + 2);
    return (convert_float16(hi ? b >> (uchar)4 : b & (uchar)15) - 8.0f) * KV_SCALE(blk);
}
#define KV_LD16(row, c) kv_ld16_q4(KV_BLK(row, c), (c) % 32 >= 16)
#define KV_LD1(row, d) (((float)(((d) % 32 >= 16) ? KV_BLK(row, d)[2 + (d) % 16] >> 4 : KV_BLK(row, d)[2 + (d) % 16] & 15) - 8.0f) * KV_SCALE(KV_BLK(row, d)))
#endif
/* Elements c .. c+31 (a, b) quantized into their block. */
__attribute__((always_inline)) inline void kv_st32(const float16 a, const float16 b, __global uchar *row, const int c) {
    __global uchar *blk = KV_BLK(row, c);
    const float16 fa = fabs(a), fb = fabs(b);
    float8 m8 = fmax(fmax(fa.lo, CLF_HI8(fa)), fmax(fb.lo, CLF_HI8(fb)));
    float4 m4 = fmax(m8.lo, m8.hi);
    float2 m2 = fmax(m4.lo, m4.hi);
    const float amax = fmax(m2.x, m2.y);
#if KV_Q == 8
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)blk);
    vstore16(convert_char16_sat_rte(a * id), 0, (__global char *)blk + 2);
    vstore16(convert_char16_sat_rte(b * id), 0, (__global char *)blk + 18);
#else
    /* the value of largest magnitude maps to -8 (its sign kept) */
    float8 x8 = fmax(fmax(a.lo, CLF_HI8(a)), fmax(b.lo, CLF_HI8(b)));
    float4 x4 = fmax(x8.lo, x8.hi);
    float2 x2 = fmax(x4.lo, x4.hi);
    const float mx = fmax(x2.x, x2.y) == amax ? amax : -amax;
    const float d = mx / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (__global half *)blk);
    /* min against an int16, not the scalar 15: Oclgrind 21.10's integer
     * min/max/clamp(vector, scalar) read the scalar as a vector (garbage) */
    const uchar16 qa = convert_uchar16(min(convert_int16_rtz(a * id + 8.5f), (int16)15));
    const uchar16 qb = convert_uchar16(min(convert_int16_rtz(b * id + 8.5f), (int16)15));
    vstore16(qa | (qb << (uchar)4), 0, blk + 2);
#endif
}
#define KV_STORE_ROW(dst, src) \
    for (int c_ = 0; c_ < HD; c_ += 32) kv_st32(vload16(0, (src) + c_), vload16(0, (src) + c_ + 16), (dst), c_)
#elif KV_F16
#define kv_t half
#define KV_RS HD
#define KV_CONVERT 1
#define KV_LD16(row, c) vload_half16(0, (row) + (c))
#define KV_LD1(row, d) vload_half(0, (row) + (d))
#define KV_STORE_ROW(dst, src) for (int c_ = 0; c_ < HD; c_ += 16) vstore_half16_rte(vload16(0, (src) + c_), 0, (dst) + c_)
#else
/* Cache rows start at multiples of 16 floats from a buffer start (aligned to
 * at least 128 bytes by OpenCL), so whole float16s load aligned; PoCL turns
 * an unaligned vload16 from global memory into pieces. */
#define kv_t float
#define KV_RS HD
#define KV_CONVERT 0
#define KV_LD16(row, c) (*(__global const float16 *)((row) + (c)))
#define KV_LD1(row, d) ((row)[d])
#define KV_STORE_ROW(dst, src) for (int c_ = 0; c_ < HD; c_ += 16) *(__global float16 *)((dst) + c_) = vload16(0, (src) + c_)
#endif

/* Small helpers must inline so their private arrays become registers. */
#define CLF_INLINE __attribute__((always_inline)) inline

#if KV_BT % 32 != 0
#error "KV_BT must be a multiple of 32"
#endif

/* Start of the cache rows of one KV head. */
#define KV_HEAD(base, kv_off, kvh, n_slots) ((base) + (kv_off) + (ulong)(kvh) * (ulong)(n_slots) * KV_RS)
/* Element offset of position j's row within a head, through the block
 * table tbl [n_tbl] in scope. */
#define KV_ROW(j) (((ulong)tbl[((j) / KV_BT) % n_tbl] * KV_BT + (ulong)((j) % KV_BT)) * KV_RS)
/* First key a query at position p sees. */
#define KV_FIRST(p, window) ((window) > 0 ? max((p) - (window) + 1, 0) : 0)

CLF_INLINE float clf_hmax16(float16 v) {
    float8 a = fmax(v.lo, CLF_HI8(v));
    float4 b = fmax(a.lo, a.hi);
    float2 c = fmax(b.lo, b.hi);
    return fmax(c.x, c.y);
}

CLF_INLINE float clf_hsum16(float16 v) {
    float8 a = v.lo + CLF_HI8(v);
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* r.sj = sum of the lanes of a[j]: four halving steps, each pairing two
 * vectors with swizzles (shuffles) and one add, instead of 16 horizontal sums. */
CLF_INLINE float16 clf_transpose_sum16(const float16 *a) {
    float16 b[8], c[4], e[2];
#pragma unroll
    for (int i = 0; i < 8; i++)
        b[i] = (float16)(a[2 * i].lo, a[2 * i + 1].lo) + (float16)(a[2 * i].hi, a[2 * i + 1].hi);
#pragma unroll
    for (int i = 0; i < 4; i++) /* lanes 4k..4k+3: partial sums of a[4i + k] */
        c[i] = (float16)(b[2 * i].s0123, b[2 * i].s89ab, b[2 * i + 1].s0123, b[2 * i + 1].s89ab) +
               (float16)(b[2 * i].s4567, b[2 * i].scdef, b[2 * i + 1].s4567, b[2 * i + 1].scdef);
#pragma unroll
    for (int i = 0; i < 2; i++) /* lanes 2k, 2k+1: partial sums of a[8i + k] */
        e[i] = (float16)(c[2 * i].s01, c[2 * i].s45, c[2 * i].s89, c[2 * i].scd, c[2 * i + 1].s01,
                         c[2 * i + 1].s45, c[2 * i + 1].s89, c[2 * i + 1].scd) +
               (float16)(c[2 * i].s23, c[2 * i].s67, c[2 * i].sab, c[2 * i].sef, c[2 * i + 1].s23,
                         c[2 * i + 1].s67, c[2 * i + 1].sab, c[2 * i + 1].sef);
    return (float16)(e[0].even, e[1].even) + (float16)(e[0].odd, e[1].odd);
}

#ifndef GQA

/* ---- KV write ------------------------------------------------------------ */

/* Row t of K and V (n_kv_head × HD at k_off / v_off, rows *_stride apart)
 * into cache position pos0 + t. Global size
 * (n_tokens, n_kv_head). */
__kernel void kv_write(__global const float *k, const ulong k_off, const int k_stride, __global const float *v,
                       const ulong v_off, const int v_stride, __global kv_t *kc, __global kv_t *vc,
                       const ulong kv_off, const int n_slots, __global const int *tbl_base, const int tbl_off, const int n_tbl, const int pos0) {
    __global const int *tbl = tbl_base + tbl_off;
    const int t = get_global_id(0), kvh = get_global_id(1);
    const ulong dst = KV_ROW(pos0 + t);
    __global const float *ks = k + k_off + (ulong)t * k_stride + kvh * HD;
    __global const float *vs = v + v_off + (ulong)t * v_stride + kvh * HD;
    __global kv_t *kd = KV_HEAD(kc, kv_off, kvh, n_slots) + dst;
    __global kv_t *vd = KV_HEAD(vc, kv_off, kvh, n_slots) + dst;
    KV_STORE_ROW(kd, ks);
    KV_STORE_ROW(vd, vs);
}

/* ---- prefill, CPU shape ----------------------------------------------------
 * One work-item owns 16 query rows of one KV head, a row being (token t,
 * query head g of the group), so the heads of a group share every K/V load.
 * The rows are the 16 lanes of a float16: the Q tile is held transposed
 * (qt[d] = dimension d of all 16 rows) and the output too, so both products
 * are broadcast-FMAs without horizontal sums: S[j] += qt[d] * K[j][d] and
 * O[d] += P[j] * V[j][d], over blocks of ATTN_BK keys.
 * Global size (ceil(n_tokens * gqa / 16), n_kv_head), local size 1. */

#define ROWS 16

#if KV_CONVERT
/* an F16 or quantized block is converted once into private floats (16 elements per instruction) */
#define KBLK_SPACE __private
#else
/* an F32 block is read in place */
#define KBLK_SPACE __global
#endif

/* One block: keys rows 0 .. ATTN_BK-1 of kblk/vblk (rows past `last` repeat
 * row `last`, in bounds; the mask drops them), online-softmax update of m, l
 * and the transposed output ot. `mask` applies each row's limits, lov <=
 * key kb + j <= limv (causal, and the window's start). Full blocks pass the
 * constant ATTN_BK - 1 as last. */
CLF_INLINE void clf_prefill_block(const float *qt, float16 *ot, float16 *m, float16 *l, KBLK_SPACE const float *kblk,
                                  KBLK_SPACE const float *vblk, const int last, const int kb, const int16 lov,
                                  const int16 limv, const bool mask) {
    float16 s[ATTN_BK];
#pragma unroll
    for (int j = 0; j < ATTN_BK; j++) s[j] = 0.0f;
    for (int d = 0; d < HD; d++) {
        const float16 qd = vload16(d, qt);
#pragma unroll
        for (int j = 0; j < ATTN_BK; j++) s[j] = fma(qd, (float16)kblk[min(j, last) * HD + d], s[j]);
    }
    if (mask) {
#pragma unroll
        for (int j = 0; j < ATTN_BK; j++)
            s[j] = select(s[j], (float16)CLF_NEG_BIG, ((int16)(kb + j) > limv) | ((int16)(kb + j) < lov));
    }
    float16 mx = *m;
#pragma unroll
    for (int j = 0; j < ATTN_BK; j++) mx = fmax(mx, s[j]);
    const float16 alpha = exp2(*m - mx);
    *m = mx;
    float16 sum = *l * alpha;
#pragma unroll
    for (int j = 0; j < ATTN_BK; j++) {
        s[j] = exp2(s[j] - mx);
        sum += s[j];
    }
    *l = sum;
    for (int d = 0; d < HD; d++) {
        float16 acc = ot[d] * alpha;
#pragma unroll
        for (int j = 0; j < ATTN_BK; j++) acc = fma(s[j], (float16)vblk[min(j, last) * HD + d], acc);
        ot[d] = acc;
    }
}

__kernel void attn_prefill_cpu(__global const float *q, const ulong q_off, const int q_stride,
                               __global const kv_t *kc, __global const kv_t *vc, const ulong kv_off,
                               const int n_slots, __global const int *tbl_base, const int tbl_off, const int n_tbl, __global float *out, const ulong out_off, const int n_tokens,
                               const int pos0, const int gqa, const float qscale, const int window,
                               __global const float *sinks, const ulong sinks_off) {
    __global const int *tbl = tbl_base + tbl_off;
    const int kvh = get_global_id(1), n_head = get_global_size(1) * gqa;
    const int n_rows = n_tokens * gqa, r0 = get_global_id(0) * ROWS;
    __global const kv_t *kh = KV_HEAD(kc, kv_off, kvh, n_slots);
    __global const kv_t *vh = KV_HEAD(vc, kv_off, kvh, n_slots);

    float16 qt16[HD]; /* qt16[d] = dimension d of the 16 rows; reused for the output */
    float *qt = (float *)qt16;
    int lim[ROWS], lo[ROWS]; /* first and last key row r may see */
    float sk[ROWS];          /* row r's sink (log2 domain), where there are sinks */
    for (int r = 0; r < ROWS; r++) {
        const int row = min(r0 + r, n_rows - 1), t = row / gqa; /* padding rows repeat the last */
        __global const float *qr = q + q_off + (ulong)t * q_stride + (kvh * gqa + row % gqa) * HD;
        for (int d = 0; d < HD; d++) qt[d * ROWS + r] = qr[d] * qscale;
        lim[r] = pos0 + t;
        lo[r] = KV_FIRST(pos0 + t, window);
        sk[r] = sinks ? CLF_SINK(sinks, sinks_off, kvh * gqa + row % gqa) : CLF_NEG_BIG;
    }
    const int16 limv = vload16(0, lim), lov = vload16(0, lo);
    const int t_last = min(r0 + ROWS - 1, n_rows - 1) / gqa;
    const int kend = pos0 + t_last + 1;                    /* keys any row sees: below kend */
    const int kfull = pos0 + r0 / gqa + 1;                 /* every row sees keys below kfull ... */
    const int klo = KV_FIRST(pos0 + t_last, window);       /* ... from klo on */
    const int kstart = KV_FIRST(pos0 + r0 / gqa, window) / ATTN_BK * ATTN_BK;

    float16 ot[HD];
    for (int d = 0; d < HD; d++) ot[d] = 0.0f;
    float16 m = CLF_NEG_BIG, l = 0.0f;
    if (sinks) { /* the sink is the softmax's first term: m = sink, l = 2^(sink - m) = 1 */
        m = vload16(0, sk);
        l = 1.0f;
    }
#if KV_CONVERT
    float16 kt[ATTN_BK * HV], vt[ATTN_BK * HV];
#endif
    for (int kb = kstart; kb < kend; kb += ATTN_BK) {
        const int last = min(ATTN_BK, kend - kb) - 1;
        const bool mask = kb + ATTN_BK > kfull || kb < klo;
        const ulong base = KV_ROW(kb);
#if KV_CONVERT
        for (int j = 0; j < ATTN_BK; j++) {
            const ulong row = base + (ulong)min(j, last) * KV_RS;
            for (int c = 0; c < HV; c++) {
                kt[j * HV + c] = KV_LD16(kh + row, 16 * c);
                vt[j * HV + c] = KV_LD16(vh + row, 16 * c);
            }
        }
        clf_prefill_block(qt, ot, &m, &l, (const float *)kt, (const float *)vt, ATTN_BK - 1, kb, lov, limv, mask);
#else
        __global const float *kblk = kh + base, *vblk = vh + base;
        if (last == ATTN_BK - 1) clf_prefill_block(qt, ot, &m, &l, kblk, vblk, ATTN_BK - 1, kb, lov, limv, mask);
        else clf_prefill_block(qt, ot, &m, &l, kblk, vblk, last, kb, lov, limv, mask);
#endif
    }

    const float16 inv = 1.0f / l;
    for (int d = 0; d < HD; d++) qt16[d] = ot[d] * inv;
    for (int r = 0; r < ROWS && r0 + r < n_rows; r++) {
        const int row = r0 + r, t = row / gqa;
        __global float *o = out + out_off + ((ulong)t * n_head + kvh * gqa + row % gqa) * HD;
        for (int d = 0; d < HD; d++) o[d] = qt[d * ROWS + r];
    }
}

/* ---- prefill, GPU shape ----------------------------------------------------
 * A work-group of ATTN_BR work-items owns ATTN_BR query rows (token, group
 * head) of one KV head, one row per work-item; tiles of ATTN_BC keys and
 * values are loaded cooperatively (coalesced) into local memory and read by
 * all rows. Global size (ceil(n_rows / BR) * BR, n_kv_head), local (BR, 1). */

__kernel __attribute__((reqd_work_group_size(ATTN_BR, 1, 1))) void
attn_prefill_gpu(__global const float *q, const ulong q_off, const int q_stride, __global const kv_t *kc,
                 __global const kv_t *vc, const ulong kv_off, const int n_slots, __global const int *tbl_base, const int tbl_off, const int n_tbl, __global float *out,
                 const ulong out_off, const int n_tokens, const int pos0, const int gqa, const float qscale,
                 const int window, __global const float *sinks, const ulong sinks_off) {
    __global const int *tbl = tbl_base + tbl_off;
    __local float kl[ATTN_BC * HD], vl[ATTN_BC * HD];
    const int lid = get_local_id(0), kvh = get_group_id(1), n_head = get_num_groups(1) * gqa;
    const int n_rows = n_tokens * gqa, r0 = get_group_id(0) * ATTN_BR, row = min(r0 + lid, n_rows - 1);
    const int t = row / gqa, h = kvh * gqa + row % gqa, lim = pos0 + t, lo = KV_FIRST(lim, window);
    const int kend = pos0 + min(r0 + ATTN_BR - 1, n_rows - 1) / gqa + 1;
    const int kstart = KV_FIRST(pos0 + r0 / gqa, window) / ATTN_BC * ATTN_BC;
    __global const kv_t *kh = KV_HEAD(kc, kv_off, kvh, n_slots);
    __global const kv_t *vh = KV_HEAD(vc, kv_off, kvh, n_slots);

    float qr[HD], o[HD], s[ATTN_BC];
    __global const float *qp = q + q_off + (ulong)t * q_stride + h * HD;
    for (int d = 0; d < HD; d++) {
        qr[d] = qp[d] * qscale;
        o[d] = 0.0f;
    }
    float m = CLF_NEG_BIG, l = 0.0f;
    if (sinks) { /* the sink is the softmax's first term */
        m = CLF_SINK(sinks, sinks_off, h);
        l = 1.0f;
    }
    for (int kb = kstart; kb < kend; kb += ATTN_BC) {
        const int n = min(ATTN_BC, kend - kb) * HD;
        const ulong base = KV_ROW(kb);
        for (int i = lid; i < ATTN_BC * HD; i += ATTN_BR) {
            kl[i] = i < n ? KV_LD1(kh + base + (ulong)(i / HD) * KV_RS, i % HD) : 0.0f;
            vl[i] = i < n ? KV_LD1(vh + base + (ulong)(i / HD) * KV_RS, i % HD) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float mx = m;
        for (int j = 0; j < ATTN_BC; j++) {
            float dot = 0.0f;
            for (int d = 0; d < HD; d++) dot = fma(qr[d], kl[j * HD + d], dot);
            s[j] = kb + j <= lim && kb + j >= lo ? dot : CLF_NEG_BIG;
            mx = fmax(mx, s[j]);
        }
        const float alpha = exp2(m - mx);
        m = mx;
        l *= alpha;
        for (int d = 0; d < HD; d++) o[d] *= alpha;
        for (int j = 0; j < ATTN_BC; j++) {
            const float p = exp2(s[j] - mx);
            l += p;
            for (int d = 0; d < HD; d++) o[d] = fma(p, vl[j * HD + d], o[d]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r0 + lid < n_rows) {
        __global float *op = out + out_off + ((ulong)t * n_head + h) * HD;
        const float inv = 1.0f / l;
        for (int d = 0; d < HD; d++) op[d] = o[d] * inv;
    }
}

/* ---- naive reference ---------------------------------------------------------
 * Materialises S [n_head][n_tokens][n_kv] in device memory: scores, a
 * three-pass row softmax, then S·V. Natural-exp domain, scale applied to the
 * scores; kept for tests and for the bench to show what tiling saves. */

/* Global size (n_kv, n_tokens, n_head). */
__kernel void attn_naive_scores(__global const float *q, const ulong q_off, const int q_stride,
                                __global const kv_t *kc, const ulong kv_off, const int n_slots, __global const int *tbl_base, const int tbl_off, const int n_tbl, __global float *S,
                                const int pos0, const int gqa, const float scale, const int window) {
    __global const int *tbl = tbl_base + tbl_off;
    const int j = get_global_id(0), t = get_global_id(1), h = get_global_id(2);
    const int n_kv = get_global_size(0), n_tokens = get_global_size(1);
    __global const float *qr = q + q_off + (ulong)t * q_stride + h * HD;
    __global const kv_t *kr = KV_HEAD(kc, kv_off, h / gqa, n_slots) + KV_ROW(j);
    float16 acc = 0.0f;
    for (int c = 0; c < HD; c += 16) acc = fma(vload16(0, qr + c), KV_LD16(kr, c), acc);
    const bool seen = j <= pos0 + t && j >= KV_FIRST(pos0 + t, window);
    S[((ulong)h * n_tokens + t) * n_kv + j] = seen ? clf_hsum16(acc) * scale : CLF_NEG_BIG;
}

/* In place on each row of n_kv scores (row h * n_tokens + t), the row's
 * sink in the max and the denominator where there are sinks (natural
 * units, as llama.cpp's soft_max). Global size n_head * n_tokens. */
__kernel void attn_naive_softmax(__global float *S, const int n_kv, __global const float *sinks,
                                 const ulong sinks_off, const int n_tokens) {
    __global float *p = S + (ulong)get_global_id(0) * n_kv;
    float mx = CLF_NEG_BIG, sum = 0.0f;
    for (int j = 0; j < n_kv; j++) mx = fmax(mx, p[j]);
    if (sinks) mx = fmax(mx, sinks[sinks_off + get_global_id(0) / n_tokens]);
    for (int j = 0; j < n_kv; j++) sum += exp(p[j] - mx);
    if (sinks) sum += exp(sinks[sinks_off + get_global_id(0) / n_tokens] - mx);
    const float inv = 1.0f / sum;
    for (int j = 0; j < n_kv; j++) p[j] = exp(p[j] - mx) * inv;
}

/* out[t][h][16c .. 16c+15] = sum_j P[h][t][j] V[j][...]. Global size
 * (HD / 16, n_tokens, n_head). */
__kernel void attn_naive_pv(__global const float *S, const int n_kv, __global const kv_t *vc, const ulong kv_off,
                            const int n_slots, __global const int *tbl_base, const int tbl_off, const int n_tbl, __global float *out, const ulong out_off, const int gqa) {
    __global const int *tbl = tbl_base + tbl_off;
    const int c = get_global_id(0) * 16, t = get_global_id(1), h = get_global_id(2);
    const int n_tokens = get_global_size(1), n_head = get_global_size(2);
    __global const float *p = S + ((ulong)h * n_tokens + t) * n_kv;
    __global const kv_t *vh = KV_HEAD(vc, kv_off, h / gqa, n_slots);
    float16 acc = 0.0f;
    for (int j = 0; j < n_kv; j++) acc = fma((float16)p[j], KV_LD16(vh + KV_ROW(j), c), acc);
    vstore16(acc, 0, out + out_off + ((ulong)t * n_head + h) * HD + c);
}

#else /* GQA */

/* ---- decode (flash-decoding), every sequence of a step in one launch -----
 * Each of n_rows query tokens (a sequence's next token) is described by
 * ATTN_ROW_INTS ints of `rows`: n_kv (its position + 1), k0 (the first key
 * it sees: > 0 in a sliding window), chunk, n_split and tbl_off (its
 * sequence's block table in tbl_base). Its keys k0 .. n_kv-1 are cut into
 * n_split splits of `chunk` keys from k0 rounded down to 16 (the keys
 * below k0 in the first block are masked), chosen for that row alone, so
 * a row's result does not depend on the others in the launch. Each split
 * writes its unnormalised output o, running max m (log2 domain) and sum l
 * to part_o [row][n_head][split_max][HD] and part_ml [...][2];
 * attn_decode_reduce combines a row's n_split. A split past a row's keys
 * leaves m = NEG_BIG, l = 0, o = 0, which the reduction weighs as 0. Row r's
 * q, k, v are at q_off, k_off, v_off + r * qkv_stride, its output at
 * out_off + r * n_head * HD. */
#define ATTN_ROW_INTS 5
#define ROW_INFO(r)                                                                                      \
    __global const int *ri = rows + (r) * ATTN_ROW_INTS;                                                 \
    const int n_kv = ri[0], k0 = ri[1], chunk = ri[2], n_split = ri[3];                                 \
    __global const int *tbl = tbl_base + ri[4]

/* One block of 16 keys for one query head: scores as 16 float16 partial dot
 * products folded into one float16, the online-softmax update, then P·V.
 * Rows past `last` repeat row `last` (in bounds) and are masked, as are
 * rows before `first`; full blocks pass the constants 0 and 15, which fold
 * the clamps and the mask away. */
CLF_INLINE void clf_decode_block(const float16 *qv, float16 *ov, float *m, float *l, __global const kv_t *kblk,
                                 __global const kv_t *vblk, const int first, const int last) {
    float16 a[16];
#pragma unroll
    for (int j = 0; j < 16; j++) {
        __global const kv_t *kr = kblk + min(j, last) * KV_RS;
        float16 acc = qv[0] * KV_LD16(kr, 0);
#pragma unroll
        for (int c = 1; c < HV; c++) acc = fma(qv[c], KV_LD16(kr, 16 * c), acc);
        a[j] = acc;
    }
    const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const float16 sc = select(clf_transpose_sum16(a), (float16)CLF_NEG_BIG, lane > last || lane < first);
    const float mx = fmax(*m, clf_hmax16(sc));
    const float alpha = exp2(*m - mx);
    const float16 p = exp2(sc - mx);
    *l = *l * alpha + clf_hsum16(p);
    *m = mx;
    float pp[16];
    vstore16(p, 0, pp);
#pragma unroll
    for (int c = 0; c < HV; c++) ov[c] *= alpha;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        __global const kv_t *vr = vblk + min(j, last) * KV_RS;
#pragma unroll
        for (int c = 0; c < HV; c++) ov[c] = fma((float16)pp[j], KV_LD16(vr, 16 * c), ov[c]);
    }
}

/* CPU shape: one work-item per (split, KV head, row) handles the GQA heads
 * of the group one after the other over the split's keys: K/V come from
 * memory once, the later heads find them in cache, and one head's q, o and
 * 16 partial dot products fit the vector registers. Fused where the host
 * asks (each a launch saved per layer): with ks non-NULL, the work-item
 * whose split holds the row's last key first writes that token's K and V
 * rows (ks, vs at its k_off, v_off + kvh·HD) into the cache slot, as
 * kv_write would (no other work-item reads that slot: the rows of a launch
 * belong to distinct sequences, and in a ring the slot held a key outside
 * the window); with one split, it writes the normalised output to out
 * itself, as attn_decode_reduce would, instead of the partials; with
 * rope_mode >= 0 (CLF_ROPE_NORM 0, NEOX 2) q and k arrive unrotated and it
 * applies the token's RoPE (n_rot, freq_scale, log2_scale, factors rff and
 * YaRN's yarn as cl/rope.cl takes them) to the q heads and the k row it
 * writes; sinks (or NULL) as above. xq
 * (non-NULL: HD a multiple of 32) takes the output's int8 form wherever
 * the output is written (here, or by attn_decode_reduce), a row every
 * xq_stride bytes.
 * Global size (split_max, n_kv_head, n_rows), local size 1. */
/* Head h's output o·inv also written as its int8 blocks (cl/common.cl) at
 * xq + xq_off bytes, for the Wo GEMV (xq non-NULL: HD a multiple of 32). */
inline void clf_decode_out_xq(const float16 *o, const float inv, const int h, __global uchar *xq, const ulong xq_off) {
#if HV % 2 == 0
    if (xq)
        for (int c = 0; c < HV; c += 2)
            clf_xq_store32(o[c] * inv, o[c + 1] * inv, xq + xq_off + ((ulong)h * (HD / 32) + c / 2) * CLF_XQ_BYTES);
#endif
}

/* A head of HD floats rotated in place as cl/rope.cl rotates it: pairs
 * (2i, 2i + 1), or (i, i + n_pairs) for NeoX, by the angles in c[], s[]. */
inline void clf_rope_head(float *x, const float *c, const float *s, int n_pairs, int neox) {
    for (int i = 0; i < n_pairs; i++) {
        const int ia = neox ? i : 2 * i, ib = neox ? i + n_pairs : 2 * i + 1;
        const float a = x[ia], b = x[ib];
        x[ia] = a * c[i] - b * s[i];
        x[ib] = a * s[i] + b * c[i];
    }
}

/* The angles of position p as cl/rope.cl computes them (YaRN where
 * yarn.x != 0: cl/common.cl rope_angles_yarn). */
inline void clf_rope_angles_row(float *rc, float *rs, const int n_pairs, const int p, const float freq_scale,
                                const float log2_scale, __global const float *ff, const float4 yarn) {
    const float pos = (float)p * (yarn.x != 0.0f ? 1.0f : freq_scale);
    int i = 0;
    for (; i + 8 <= n_pairs; i += 8) {
        float8 c8, s8;
        if (yarn.x != 0.0f) s8 = rope_angles_yarn(i, pos, log2_scale, ff, freq_scale, yarn, &c8);
        else s8 = rope_angles(i, pos, log2_scale, ff, &c8);
        vstore8(c8, 0, rc + i);
        vstore8(s8, 0, rs + i);
    }
    for (; i < n_pairs; i++) {
        float c;
        rs[i] = rope_angle1(i, pos, log2_scale, ff, freq_scale, yarn, &c);
        rc[i] = c;
    }
}

__kernel void attn_decode_cpu(__global const float *q, const ulong q_off, __global kv_t *kc,
                              __global kv_t *vc, const ulong kv_off, const int n_slots, __global const int *tbl_base,
                              __global const int *rows, __global float *part_o, __global float *part_ml,
                              const int split_max, const int n_tbl, const float qscale, __global const float *ks,
                              const ulong k_off, __global const float *vs, const ulong v_off, const int qkv_stride,
                              __global float *out, const ulong out_off, const int rope_mode, const int n_rot,
                              const float freq_scale, const float log2_scale, __global const float *rff,
                              const ulong rff_off, __global uchar *xq, const ulong xq_off, const ulong xq_stride,
                              __global const float *sinks, const ulong sinks_off, const float4 yarn) {
    const int sp = get_global_id(0), kvh = get_global_id(1), r = get_global_id(2), n_head = get_global_size(1) * GQA;
    ROW_INFO(r);
    if (sp >= n_split) return;
    const int j0 = k0 / 16 * 16 + sp * chunk, j1 = min(j0 + chunk, n_kv);
    __global const kv_t *kh = KV_HEAD(kc, kv_off, kvh, n_slots);
    __global const kv_t *vh = KV_HEAD(vc, kv_off, kvh, n_slots);
    __global const float *qr = q + q_off + (ulong)r * qkv_stride;
    __global float *orow = out ? out + out_off + (ulong)r * n_head * HD : out;
    const ulong xq_row = xq_off + (ulong)r * xq_stride;
    /* the token's RoPE angles (rope_mode >= 0: q and k arrive unrotated), as cl/rope.cl computes them */
    const int n_pairs = n_rot / 2, neox = rope_mode == 2;
    float rc[HD / 2], rs[HD / 2], hv[HD];
    if (rope_mode >= 0) clf_rope_angles_row(rc, rs, n_pairs, n_kv - 1, freq_scale, log2_scale, rff ? rff + rff_off : rff, yarn);
    if (ks && j0 < n_kv && j1 == n_kv) {
        __global const float *kr = ks + k_off + (ulong)r * qkv_stride + kvh * HD;
        __global const float *vr = vs + v_off + (ulong)r * qkv_stride + kvh * HD;
        __global kv_t *kd = KV_HEAD(kc, kv_off, kvh, n_slots) + KV_ROW(n_kv - 1);
        __global kv_t *vd = KV_HEAD(vc, kv_off, kvh, n_slots) + KV_ROW(n_kv - 1);
        for (int c = 0; c < HD; c += 16) vstore16(vload16(0, kr + c), 0, hv + c);
        if (rope_mode >= 0) clf_rope_head(hv, rc, rs, n_pairs, neox);
        KV_STORE_ROW(kd, hv);
        KV_STORE_ROW(vd, vr);
    }
    for (int g = 0; g < GQA; g++) {
        const int h = kvh * GQA + g;
        float16 qv[HV], ov[HV];
        if (rope_mode >= 0) {
#pragma unroll
            for (int c = 0; c < HV; c++) vstore16(vload16(c, qr + h * HD), c, hv);
            clf_rope_head(hv, rc, rs, n_pairs, neox);
        }
#pragma unroll
        for (int c = 0; c < HV; c++) {
            qv[c] = (rope_mode >= 0 ? vload16(c, hv) : vload16(c, qr + h * HD)) * qscale;
            ov[c] = 0.0f;
        }
        float m = CLF_NEG_BIG, l = 0.0f;
        if (sinks && sp == 0) { /* the sink, once: in the first split */
            m = CLF_SINK(sinks, sinks_off, h);
            l = 1.0f;
        }
        int kb = j0;
        if (kb < k0 && kb < j1) { /* the window starts inside this block */
            clf_decode_block(qv, ov, &m, &l, kh + KV_ROW(kb), vh + KV_ROW(kb), k0 - kb, min(15, j1 - kb - 1));
            kb += 16;
        }
        for (; kb + 16 <= j1; kb += 16) clf_decode_block(qv, ov, &m, &l, kh + KV_ROW(kb), vh + KV_ROW(kb), 0, 15);
        if (kb < j1) clf_decode_block(qv, ov, &m, &l, kh + KV_ROW(kb), vh + KV_ROW(kb), 0, j1 - kb - 1);
        if (n_split == 1 && orow) { /* the reduction of one split, as attn_decode_reduce computes it */
            const float inv = 1.0f / l;
#pragma unroll
            for (int c = 0; c < HV; c++) vstore16(ov[c] * inv, c, orow + (ulong)h * HD);
            clf_decode_out_xq(ov, inv, h, xq, xq_row);
            continue;
        }
        const ulong part = ((ulong)r * n_head + h) * split_max + sp;
#pragma unroll
        for (int c = 0; c < HV; c++) vstore16(ov[c], c, part_o + part * HD);
        part_ml[2 * part] = m;
        part_ml[2 * part + 1] = l;
    }
}

/* GPU shape: a work-group of HD work-items per (split, KV head, row). Per
 * tile of DEC_CK keys: K rows are copied to local memory with coalesced
 * reads (rows padded by one float against bank conflicts), work-item i <
 * DEC_CK scores key i for each group head, then every work-item takes the
 * tile's max and probabilities from local memory and accumulates output
 * dimension i (coalesced V reads). q arrives rotated and the row's K and V
 * written (attn_rows_prepare). Global size (split_max * HD, n_kv_head,
 * n_rows), local (HD, 1, 1). */
#define DEC_CK (HD < 32 ? HD : 32)

__kernel __attribute__((reqd_work_group_size(HD, 1, 1))) void
attn_decode_gpu(__global const float *q, const ulong q_off, __global const kv_t *kc, __global const kv_t *vc,
                const ulong kv_off, const int n_slots, __global const int *tbl_base, __global const int *rows,
                __global float *part_o, __global float *part_ml, const int split_max, const int n_tbl,
                const float qscale, const int qkv_stride, __global const float *sinks, const ulong sinks_off) {
    __local float ql[GQA * HD], sl[GQA * DEC_CK], kl[DEC_CK * (HD + 1)];
    const int lid = get_local_id(0), sp = get_group_id(0), kvh = get_group_id(1), r = get_group_id(2);
    const int n_head = get_num_groups(1) * GQA;
    ROW_INFO(r);
    if (sp >= n_split) return; /* the whole work-group: no barrier is left waiting */
    const int j0 = k0 / 16 * 16 + sp * chunk, j1 = min(j0 + chunk, n_kv);
    __global const kv_t *kh = KV_HEAD(kc, kv_off, kvh, n_slots);
    __global const kv_t *vh = KV_HEAD(vc, kv_off, kvh, n_slots);
    __global const float *qr = q + q_off + (ulong)r * qkv_stride;
    for (int g = 0; g < GQA; g++) ql[g * HD + lid] = qr[(kvh * GQA + g) * HD + lid] * qscale;
    float m[GQA], l[GQA], o[GQA];
    for (int g = 0; g < GQA; g++) {
        m[g] = CLF_NEG_BIG;
        l[g] = o[g] = 0.0f;
        if (sinks && sp == 0) { /* the sink, once: in the first split */
            m[g] = CLF_SINK(sinks, sinks_off, kvh * GQA + g);
            l[g] = 1.0f;
        }
    }
    for (int kb = j0; kb < j1; kb += DEC_CK) {
        const int nk = min(DEC_CK, j1 - kb);
        /* rows nk.. of a short last tile zero, not left as they were: scored, then masked */
        for (int i = 0; i < DEC_CK; i++) kl[i * (HD + 1) + lid] = i < nk ? KV_LD1(kh + KV_ROW(kb + i), lid) : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < DEC_CK)
            for (int g = 0; g < GQA; g++) {
                float dot = 0.0f;
                for (int d = 0; d < HD; d++) dot = fma(ql[g * HD + d], kl[lid * (HD + 1) + d], dot);
                sl[g * DEC_CK + lid] = lid < nk && kb + lid >= k0 ? dot : CLF_NEG_BIG;
            }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int g = 0; g < GQA; g++) {
            __local const float *sg = sl + g * DEC_CK;
            float mx = m[g], sum = 0.0f, acc = 0.0f;
            for (int j = 0; j < nk; j++) mx = fmax(mx, sg[j]);
            for (int j = 0; j < nk; j++) {
                const float p = exp2(sg[j] - mx);
                sum += p;
                acc = fma(p, KV_LD1(vh + KV_ROW(kb + j), lid), acc);
            }
            const float alpha = exp2(m[g] - mx);
            l[g] = l[g] * alpha + sum;
            o[g] = o[g] * alpha + acc;
            m[g] = mx;
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* kl and sl are rewritten by the next tile */
    }
    for (int g = 0; g < GQA; g++) {
        const ulong part = ((ulong)r * n_head + kvh * GQA + g) * split_max + sp;
        part_o[part * HD + lid] = o[g];
        if (lid == 0) {
            part_ml[2 * part] = m[g];
            part_ml[2 * part + 1] = l[g];
        }
    }
}

/* out[h] = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s, M = max_s m_s,
 * over row r's n_split splits (a row of one split was written by the CPU
 * decode kernel itself). CPU shape: one work-item per (head, row), float16
 * vectors. Global size (n_head, n_rows). */
__kernel void attn_decode_reduce(__global const float *part_o, __global const float *part_ml,
                                 __global const int *rows, const int split_max, __global float *out,
                                 const ulong out_off, __global uchar *xq, const ulong xq_off, const ulong xq_stride) {
    const int h = get_global_id(0), r = get_global_id(1), n_head = get_global_size(0);
    const int n_split = rows[r * ATTN_ROW_INTS + 3];
    if (n_split == 1) return;
    const ulong part = ((ulong)r * n_head + h) * split_max;
    __global const float *ml = part_ml + 2 * part;
    __global const float *po = part_o + part * HD;
    float mx = CLF_NEG_BIG, sum = 0.0f;
    for (int s = 0; s < n_split; s++) mx = fmax(mx, ml[2 * s]);
    float16 acc[HV];
    for (int c = 0; c < HV; c++) acc[c] = 0.0f;
    for (int s = 0; s < n_split; s++) {
        const float w = exp2(ml[2 * s] - mx);
        sum += w * ml[2 * s + 1];
        for (int c = 0; c < HV; c++) acc[c] = fma((float16)w, vload16(c, po + (ulong)s * HD), acc[c]);
    }
    const float inv = 1.0f / sum;
    __global float *orow = out + out_off + (ulong)r * n_head * HD;
    for (int c = 0; c < HV; c++) vstore16(acc[c] * inv, c, orow + (ulong)h * HD);
    clf_decode_out_xq(acc, inv, h, xq, xq_off + (ulong)r * xq_stride);
}

/* GPU shape: one work-item per output element, every row's splits.
 * Global size (HD, n_head, n_rows). */
__kernel void attn_decode_reduce_gpu(__global const float *part_o, __global const float *part_ml,
                                     __global const int *rows, const int split_max, __global float *out,
                                     const ulong out_off) {
    const int d = get_global_id(0), h = get_global_id(1), r = get_global_id(2), n_head = get_global_size(1);
    const int n_split = rows[r * ATTN_ROW_INTS + 3];
    const ulong part = ((ulong)r * n_head + h) * split_max;
    __global const float *ml = part_ml + 2 * part;
    __global const float *po = part_o + part * HD + d;
    float mx = CLF_NEG_BIG, sum = 0.0f, acc = 0.0f;
    for (int s = 0; s < n_split; s++) mx = fmax(mx, ml[2 * s]);
    for (int s = 0; s < n_split; s++) {
        const float w = exp2(ml[2 * s] - mx);
        sum += w * ml[2 * s + 1];
        acc = fma(w, po[(ulong)s * HD], acc);
    }
    out[out_off + ((ulong)r * n_head + h) * HD + d] = acc / sum;
}

/* Decode rows' RoPE and cache write ahead of the attention: RoPE of each
 * row's first n_q query heads in place (n_q = n_head: the GPU shape, whose
 * attn_decode_gpu takes q rotated; 0: the CPU shape, whose kernel rotates
 * q itself) and of its k row, written with its v row into the cache slot
 * of its position, as the CPU decode kernel's fused write does. The GPU
 * shape always, the CPU shape where rows share a sequence (a row then
 * reads the keys of the rows before it). Rows qkv_stride floats apart in
 * q, k and v. Work-item (h, r): h < n_q a q head, else KV head h - n_q.
 * rope_mode < 0: none. Global size (n_q + n_kv_head, n_rows). */
__kernel void attn_rows_prepare(__global float *q, const ulong q_off, __global const float *k, const ulong k_off,
                                __global const float *v, const ulong v_off, const int qkv_stride, __global kv_t *kc,
                                __global kv_t *vc, const ulong kv_off, const int n_slots,
                                __global const int *tbl_base, __global const int *rows, const int n_tbl,
                                const int n_q, const int rope_mode, const int n_rot, const float freq_scale,
                                const float log2_scale, __global const float *rff, const ulong rff_off,
                                const float4 yarn) {
    const int h = get_global_id(0), r = get_global_id(1), n_head = n_q;
    ROW_INFO(r);
    (void)k0, (void)chunk, (void)n_split;
    const int n_pairs = n_rot / 2, neox = rope_mode == 2;
    float rc[HD / 2], rs[HD / 2], hv[HD];
    if (rope_mode >= 0) clf_rope_angles_row(rc, rs, n_pairs, n_kv - 1, freq_scale, log2_scale, rff ? rff + rff_off : rff, yarn);
    const ulong row = (ulong)r * qkv_stride;
    if (h < n_head) {
        if (rope_mode < 0) return;
        __global float *p = q + q_off + row + h * HD;
        for (int c = 0; c < HD; c += 16) vstore16(vload16(0, p + c), 0, hv + c);
        clf_rope_head(hv, rc, rs, n_pairs, neox);
        for (int c = 0; c < HD; c += 16) vstore16(vload16(0, hv + c), 0, p + c);
        return;
    }
    const int kvh = h - n_head;
    __global const float *kr = k + k_off + row + kvh * HD, *vr = v + v_off + row + kvh * HD;
    for (int c = 0; c < HD; c += 16) vstore16(vload16(0, kr + c), 0, hv + c);
    if (rope_mode >= 0) clf_rope_head(hv, rc, rs, n_pairs, neox);
    __global kv_t *kd = KV_HEAD(kc, kv_off, kvh, n_slots) + KV_ROW(n_kv - 1);
    __global kv_t *vd = KV_HEAD(vc, kv_off, kvh, n_slots) + KV_ROW(n_kv - 1);
    KV_STORE_ROW(kd, hv);
    KV_STORE_ROW(vd, vr);
}

#endif

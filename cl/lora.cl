/* A LoRA adapter's product for decode rows in one launch (models/lora.c,
 * launched by clf_lora_rows in host/compute/ops.c): for each row r of x,
 *     t = s · (A x_r)                         (A [w × in], t in local memory)
 *     y_r[col0 + i] += Σ_j B[i][j] · t[j]     (B [n_out × w], i < n_out)
 * A row-major and B in panels, F16 (lora_rows_f16) or F32 (lora_rows_f32);
 * w at most CLF_LORA_T_MAX.
 * The adapters are small (rank 16 on Q and V of a 135M model: 36 KiB of A,
 * 60 KiB of B a layer), so one launch reading all of A and B costs less
 * than a second launch would: decode is launch-bound.
 *
 * A row's work-groups (dim 0: get_num_groups(0) of them, dim 1: rows)
 * each form all of t (A is the smaller read) and a share of y's outputs,
 * so that a row's A·x and B·t spread over the cores; get_local_size(0)
 * work-items share a group's t: 1 on a CPU (a SIMD thread, explicit
 * vectors), 64 on a GPU. Every sum runs in a fixed order that depends
 * neither on the rows beside it nor on the group and local sizes, so a
 * row's result is the same in any batch. */

/* Widest stacked rank (3 parts of rank 128): wider adapters take the
 * two-product path. The launcher passes host/compute/ops.h's
 * CLF_LORA_ROWS_MAX_WIDTH (the bound it checks) as this; 384 read alone. */
#ifndef CLF_LORA_T_MAX
#define CLF_LORA_T_MAX 384
#endif

/* CLF_LORA_FP16_CLANG: 1 converts F16 with clang's __fp16 vectors (the
 * CPU's conversion instructions: the "cpu" matmul variant, where the
 * compiler is clang), 0 with integer ops (exact either way). */
#ifndef CLF_LORA_FP16_CLANG
#define CLF_LORA_FP16_CLANG 0
#endif
#if CLF_LORA_FP16_CLANG
/* 2-byte aligned: rows start anywhere */
typedef __fp16 clf_lora_h16v __attribute__((ext_vector_type(16), aligned(2)));
#define LORA_LOAD16_f16(p, k) __builtin_convertvector(*(const __global clf_lora_h16v *)((p) + (k)), float16)
#else
/* cl/common.cl's exact integer conversion */
#define LORA_LOAD16_f16(p, k) clf_half16_to_float16(vload16(0, (p) + (k)))
#endif

/* 16 weights from p + k as floats, and one (the tails). */
#define LORA_LOAD1_f16(p, k) vload_half((k), (const __global half *)(p))
#define LORA_LOAD16_f32(p, k) vload16(0, (p) + (k))
#define LORA_LOAD1_f32(p, k) ((p)[k])

/* a [w × in] (A's rows); bp: B in panels of 16 outputs, panel v [w × 16]
 * holding B[16v + e][j] at j·16 + e (zeros past n_out), so that the second
 * step reads one contiguous stream, vectors of outputs times one t[j].
 * np parts (Q, K, V; gate, up; 1 elsewhere), part p's outputs pb.s(2p) ..
 * pb.s(2p+1), its columns p·w/np .. (p+1)·w/np: B is zero elsewhere, so a
 * panel reads only the columns of the parts it meets, none over outputs no
 * part adapts (the sums skip exact zeros).
 * x and y: F32 rows at x_off, y_off floats (y_off at column col0), rows
 * x_stride, y_stride floats apart. Global size (local · groups, rows);
 * idx0 ≥ 0: launch row i is x's and y's row rows[idx0 + i] (the rows of
 * one adapter, apart in the batch), else (-1, rows unused) row i. */
#define CLF_LORA_ROWS_KERNEL(sfx, T)                                                                          \
    __kernel void lora_rows_##sfx(__global const T *a, __global const T *bp, const int w, const int in,       \
                                  const int n_out, __global const float *x, const ulong x_off,                \
                                  const int x_stride, __global float *y, const ulong y_off, const int y_stride, \
                                  const float s, const int np, const int8 pb, __global const int *rows,       \
                                  const int idx0) {                                                           \
        __local float t[CLF_LORA_T_MAX];                                                                      \
        const int lid = get_local_id(0), nl = get_local_size(0);                                              \
        /* the row: the launch's row itself, or the one the index names */                                  \
        const size_t r = idx0 >= 0 ? (size_t)rows[idx0 + get_global_id(1)] : get_global_id(1);               \
        x += x_off + r * (size_t)x_stride;                                                                    \
        y += y_off + r * (size_t)y_stride;                                                                    \
        /* this group's vectors of 16 outputs: its share of them */                                          \
        const int nv = (n_out + 15) / 16, per = (nv + (int)get_num_groups(0) - 1) / (int)get_num_groups(0);   \
        const int v0 = (int)get_group_id(0) * per, v1 = min(nv, v0 + per);                                   \
        /* t[j] = s · A[j] · x, two rows of A a pass (x read once for both): 16 columns a step, then the   \
         * tail; each sum in the same order whichever work-item forms it */                                \
        for (int j = 2 * lid; j < w; j += 2 * nl) {                                                           \
            __global const T *aj = a + (size_t)j * in;                                                        \
            __global const T *ak = j + 1 < w ? aj + in : aj;                                                  \
            float16 acc = 0, acc2 = 0;                                                                        \
            int k = 0;                                                                                        \
            for (; k + 16 <= in; k += 16) {                                                                   \
                const float16 xv = vload16(0, x + k);                                                         \
                acc += LORA_LOAD16_##sfx(aj, k) * xv;                                                         \
                acc2 += LORA_LOAD16_##sfx(ak, k) * xv;                                                        \
            }                                                                                                 \
            float sum = clf_xq_hsum16(acc), sum2 = clf_xq_hsum16(acc2);                                       \
            for (; k < in; k++) {                                                                             \
                sum += LORA_LOAD1_##sfx(aj, k) * x[k];                                                        \
                sum2 += LORA_LOAD1_##sfx(ak, k) * x[k];                                                       \
            }                                                                                                 \
            t[j] = s * sum;                                                                                   \
            if (j + 1 < w) t[j + 1] = s * sum2;                                                               \
        }                                                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                         \
        /* y[16v .. 16v + 16] += Σ_j t[j] · B panel v's row j, j in order; a last partial vector's outputs   \
         * one at a time (the panel's padding is zeros) */                                                  \
        for (int v = v0 + lid; v < v1; v += nl) {                                                             \
            __global const T *bv = bp + (size_t)v * w * 16;                                                   \
            const int i = 16 * v;                                                                             \
            /* the panel's nonzero columns: those of the parts whose outputs it meets (none: nothing to add) */ \
            int j0 = w, j1 = 0;                                                                               \
            for (int p = 0; p < np; p++) {                                                                    \
                const int ps = p == 0 ? pb.s0 : p == 1 ? pb.s2 : pb.s4, pe = p == 0 ? pb.s1 : p == 1 ? pb.s3 : pb.s5; \
                if (ps < i + 16 && pe > i) j0 = min(j0, p * (w / np)), j1 = max(j1, (p + 1) * (w / np));        \
            }                                                                                                 \
            if (j0 >= j1) continue;                                                                           \
            float16 acc = 0;                                                                                  \
            for (int j = j0; j < j1; j++) acc += t[j] * LORA_LOAD16_##sfx(bv, 16 * j);                       \
            if (i + 16 <= n_out) {                                                                            \
                vstore16(vload16(0, y + i) + acc, 0, y + i);                                                  \
            } else {                                                                                          \
                float r16[16];                                                                                \
                vstore16(acc, 0, r16);                                                                        \
                for (int e = 0; e < n_out - i; e++) y[i + e] += r16[e];                                       \
            }                                                                                                 \
        }                                                                                                     \
    }
CLF_LORA_ROWS_KERNEL(f16, ushort)
CLF_LORA_ROWS_KERNEL(f32, float)

/* The small kernels of a transformer layer: dequantize, embedding lookup,
 * RMSNorm (whole rows or per head), RoPE, SwiGLU/GeGLU, residual add,
 * scale, softmax. X/Y tensors are F32 with
 * contiguous rows unless a row stride is given. Launchers enqueue without
 * waiting. */
#ifndef CLF_OPS_H
#define CLF_OPS_H

#include "tensor.h"

/* dst (F32, same shape) = dequantize(src) for any clf_type. */
clf_status clf_dequantize_dev(clf_runtime *rt, const clf_tensor *src, clf_tensor *dst);

/* out[i, :] = dequantize(table[ids[i], :]) for i < n; ids is a device
 * buffer of n int32 token ids (validated by the caller to be < rows). */
clf_status clf_get_rows(clf_runtime *rt, const clf_tensor *table, cl_mem ids, int n, clf_tensor *out);

/* y[i, :] = (or +=, with accumulate) x[i, :] / sqrt(mean(x[i, :]²) + eps) * w
 * for each row; y may be x. Accumulating is a residual add after a norm. */
clf_status clf_rmsnorm(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                       int accumulate);

/* clf_rmsnorm (no accumulation) that also writes its first rows quantized
 * to int8 for the GEMVs that read them (matmul.h, clf_matmul_rowwise_xq):
 * xq [r × CLF_XQ_FLOATS(n)] takes rows 0 .. r - 1 of y; n a multiple of 32. */
clf_status clf_rmsnorm_xq(clf_runtime *rt, const clf_tensor *x, const clf_tensor *w, float eps, clf_tensor *y,
                          const clf_tensor *xq);

/* The same per head, in place: n_tokens rows `row_stride` floats apart,
 * each holding heads of head_dim from column col0: the first n_a normed
 * with w_a [head_dim], the next n_b with w_b (QK-norm of Q and K inside a
 * fused QKV output, one launch; n_b 0 and w_b NULL for one weight). */
clf_status clf_rmsnorm_heads(clf_runtime *rt, clf_tensor *x, int n_tokens, int row_stride, int col0, int head_dim,
                             int n_a, const clf_tensor *w_a, int n_b, const clf_tensor *w_b, float eps);

typedef enum clf_rope_mode {
    CLF_ROPE_NORM = 0, /* Llama GGUF: rotates pairs (2i, 2i+1) */
    CLF_ROPE_NEOX = 2, /* NeoX / Qwen2: rotates (i, i + d/2) */
} clf_rope_mode;

typedef struct clf_rope_params {
    clf_rope_mode mode;
    int n_rot;                 /* dims rotated from the start of each head (even, <= head_dim) */
    float base;                /* theta_i = pos * freq_scale * base^(-2i / n_rot) / factors[i] */
    float freq_scale;          /* linear position interpolation; 1: none */
    const clf_tensor *factors; /* F32 [n_rot / 2] frequency divisors (Llama 3.1 rope_freqs), or NULL */
    /* YaRN (clf_rope_yarn sets these; all 0: none, as an initializer that
     * stops at `factors` leaves them): pair i turns by
     * theta_i·(freq_scale·(1 - mix_i) + mix_i), theta_i the unscaled angle
     * above, mix_i = ext_factor·(1 - clamp((i - corr_lo) / max(0.001,
     * corr_hi - corr_lo), 0, 1)), and cos and sin are scaled by mscale
     * (llama.cpp's rope_yarn). */
    float ext_factor;       /* 0: no YaRN */
    float corr_lo, corr_hi; /* the ramp's ends, in pairs (ggml_rope_yarn_corr_dims) */
    float mscale;           /* cos/sin factor: attn_factor · (1 + 0.1 ln(1 / freq_scale)) */
} clf_rope_params;

/* YaRN as llama.cpp applies it to a file whose rope.scaling.type is "yarn"
 * (gpt-oss): on p (mode, n_rot and base set), freq_scale = 1 / factor
 * (rope.scaling.factor), ext_factor 1, the correction dims from
 * n_ctx_orig (rope.scaling.original_context_length; llama.cpp takes the
 * training context where the key is absent), base, n_rot and beta_fast /
 * beta_slow (llama.cpp's defaults CLF_YARN_BETA_FAST / _SLOW: no loader
 * reads the file's yarn_beta_* keys), and mscale from attn_factor
 * (rope.scaling.attn_factor, 1 where absent) as llama_context sets
 * yarn_attn_factor (the file's yarn_log_multiplier, DeepSeek's, is not
 * taken). A factor out of range, a context < 1: CLF_ERR_ARG. */
#define CLF_YARN_BETA_FAST 32.0f
#define CLF_YARN_BETA_SLOW 1.0f
clf_status clf_rope_yarn(clf_rope_params *p, float factor, int n_ctx_orig, float attn_factor, float beta_fast,
                         float beta_slow);
/* 1 where p's YaRN values (if any: ext_factor != 0) are finite with mscale > 0: what
 * clf_rope and the fused decode RoPE both require (a NaN would reach the output). */
int clf_rope_yarn_valid(const clf_rope_params *p);
/* The kernels' YaRN argument (cl/common.cl rope_angles_yarn): (ext_factor,
 * corr_lo, corr_hi, mscale), or (0, 0, 0, 1) for none. */
cl_float4 clf_rope_yarn_arg(const clf_rope_params *p);

/* In place on x: n_tokens rows, each row holding n_heads heads of head_dim
 * at element offset `col0` from the row start, rows `row_stride` floats
 * apart (lets Q and K be rotated inside a fused QKV output). Token t has
 * position pos0 + t; dims past n_rot are left as they are. */
clf_status clf_rope(clf_runtime *rt, clf_tensor *x, int n_tokens, int row_stride, int col0, int n_heads,
                    int head_dim, int pos0, const clf_rope_params *p);

/* The gated unit's activation: SwiGLU (silu) or GeGLU (tanh-approximated
 * GELU), h = act(g)·u; or gpt-oss's clamped SwiGLU (llama.cpp's
 * swiglu_oai, alpha 1.702 and limit 7 its constants): with x = min(g, 7),
 * h = x·sigmoid(1.702 x) · (clamp(u, -7, 7) + 1). */
typedef enum clf_glu_act {
    CLF_GLU_SILU = 0,
    CLF_GLU_GELU_TANH = 1,
    CLF_GLU_SWIGLU_OAI = 2,
} clf_glu_act;

/* y[i, j] = unit(gu[i, j], gu[i, ff + j]) for a fused gate|up output
 * gu [n × 2ff]; y [n × ff]. */
clf_status clf_glu(clf_runtime *rt, clf_glu_act act, const clf_tensor *gu, clf_tensor *y);

/* clf_glu that also writes y's first rows quantized into xq (as
 * clf_rmsnorm_xq); ff a multiple of 32. */
clf_status clf_glu_xq(clf_runtime *rt, clf_glu_act act, const clf_tensor *gu, clf_tensor *y, const clf_tensor *xq);

/* xq [r × CLF_XQ_FLOATS(n)] = x's first r rows quantized (matmul.h), where
 * no producing kernel writes them; n a multiple of 32. */
clf_status clf_quantize_x(clf_runtime *rt, const clf_tensor *x, const clf_tensor *xq);

/* y = a * s, elementwise; y may be a (Gemma's embedding scale). */
clf_status clf_scale(clf_runtime *rt, const clf_tensor *a, float s, clf_tensor *y);

/* y = a + b, elementwise over equal shapes; y may alias a or b. */
clf_status clf_add(clf_runtime *rt, const clf_tensor *a, const clf_tensor *b, clf_tensor *y);

/* x[i, :] += b for every row i (Q/K/V biases); b is F32 [ne0 of x]. */
clf_status clf_add_rows(clf_runtime *rt, clf_tensor *x, const clf_tensor *b);

/* LoRA for decode rows in one launch (cl/lora.cl): for each row r of x
 * [n × in], y[r, col0 + i] += Σ_j B[i][j] · (s · A x_r)[j] for i < n_out;
 * a: A [w × in] row-major; bp: B in panels of 16 outputs, panel v [w ×
 * 16] holding B[16v + e][j] at j·16 + e, ceil(n_out / 16) panels, zeros
 * past n_out; both F16 or F32 (type); w at most CLF_LORA_ROWS_MAX_WIDTH.
 * B nonzero only in n_part (1 .. 3) blocks: part k's outputs bounds[2k] ..
 * bounds[2k + 1] by its columns k·w/n_part .. (k + 1)·w/n_part (the
 * stacked parts of lora.h). Each row's result is the same in any batch.
 * rows NULL: every row of x into the same row of y (as many); else the
 * n_rows rows whose indices (int32, each < x's and y's rows, which the
 * caller checks) stand at rows[idx0 ..]: one launch for the rows of one
 * adapter wherever they sit in the batch. */
#define CLF_LORA_ROWS_MAX_WIDTH 384
clf_status clf_lora_rows(clf_runtime *rt, clf_type type, cl_mem a, cl_mem bp, int w, int n_out, int n_part,
                         const int *bounds, const clf_tensor *x, clf_tensor *y, int64_t col0, float s, cl_mem rows,
                         int idx0, int n_rows);

/* Row-wise softmax in place. */
clf_status clf_softmax(clf_runtime *rt, clf_tensor *x);

#endif

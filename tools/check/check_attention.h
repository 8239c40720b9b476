/* Checks of host/compute/attention.h at a given shape, against a plain C reference
 * in double on random data drawn from `seed`, outputs and the cache poisoned
 * first. The tests sweep shapes with these; clf_checks_attention[]
 * (tools/check/check.h) runs representative shapes for `selftest`. */
#ifndef CLF_CHECK_ATTENTION_H
#define CLF_CHECK_ATTENTION_H

#include "attention.h"
#include "check.h"

typedef struct clf_attn_case {
    int n_tokens;                /* new tokens; 1 takes the decode path */
    int pos0;                    /* tokens cached before them (written by clf_kv_write first) */
    int n_head, n_kv_head, head_dim;
    clf_type kv_type;            /* CLF_F32, CLF_F16, CLF_Q8_0 or CLF_Q4_0 */
    clf_attn_variant variant;    /* CLF_ATTN_AUTO: the device's */
    int n_split;                 /* decode splits; 0: automatic */
    int chunk;                   /* > 0: prefill the new tokens in chunks of this many */
    int naive;                   /* through clf_attention_naive */
    float magnitude;             /* Q and K uniform in ±magnitude (scores grow as its square) */
    int window;                  /* > 0: sliding window of that many keys */
    int n_slots;                 /* > 0: cache slots (a ring when below the positions); 0: all positions + 3 */
    int fused;                   /* single tokens through clf_attention_decode (the cache write fused) */
    int rope, n_rot;             /* fused: RoPE applied there too (1 NORM, 2 NEOX pairs) to n_rot of each head */
    int sinks;                   /* attention sinks: a random logit a query head (clf_attention_ex and kin) */
    float yarn;                  /* fused RoPE: > 0, YaRN of this factor over an original context of 64 */
} clf_attn_case;

/* Q, K and V come from one fused QKV activation with an odd row stride (so
 * rows are not 16-float aligned); the cache has two layers and the check uses
 * the second. A cached prefix is written in chunks a ring can take. The reference sees K/V rounded to the cache type (F16, or
 * ggml's quantizers), so F16 is held to the F32 tolerance; a quantized
 * value may land a level off (the device's division, a fused RoPE in float
 * against double): 5e-4 for Q8_0, 3e-3 for Q4_0, where a wrong block would
 * be ~1e-1. res->detail also gives the largest
 * |score|. */
clf_status clf_check_attention(clf_runtime *rt, uint64_t seed, const clf_attn_case *cs, clf_check_result *res);

/* clf_kv_write of n_tokens rows at pos0 into the last of two layers:
 * written elements must equal the input (rounded to nearest-even halves for
 * F16) and every other cache element must keep its poison; err is the
 * fraction of wrong elements. */
clf_status clf_check_kv_write(clf_runtime *rt, uint64_t seed, clf_type type, int n_kv_head, int head_dim,
                              int n_tokens, int pos0, clf_check_result *res);

/* clf_attention_decode_rows over a paged pool: 4 rows of 3 sequences (two
 * rows one sequence's consecutive positions) whose block tables are shuffled
 * over the pool, each sequence's earlier keys written through its view, the
 * rows' own keys written by the call (rope: 1 NORM, 2 NEOX, on n_rot of each
 * head), 3 splits; every row against its sequence's attention in double,
 * the output's int8 form byte for byte clf_quantize_x's. variant:
 * clf_attn_variant (AUTO: the device's); sinks: with attention sinks. */
clf_status clf_check_attention_rows(clf_runtime *rt, uint64_t seed, clf_type kv_type, int rope, int variant,
                                    int sinks, clf_check_result *res);

#endif

/* The per-tensor types of `clinfer quantize`'s targets (tools/quantize/quant_mix.c)
 * against llama.cpp's rules worked out by hand for two model shapes: the
 * default model's (rows of 576: every K-quant matrix but ffn_down falls
 * back to a 32-weight-block type) and one whose rows are whole 256-weight
 * super-blocks. tests/peer/record_kquant.py compares whole files with
 * llama.cpp's own quantization (test_quantize replays its record). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf_write.h"
#include "quant_mix.h"
#include "testutil.h"

typedef struct shape {
    int n_layer, n_embd, n_ff, n_head, n_head_kv, tied;
} shape;

static const char *const LAYER_TENSORS[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

static int64_t ne0_of(const shape *s, const char *what) { return strcmp(what, "ffn_down") ? s->n_embd : s->n_ff; }

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A GGUF of the shape with 2-row matrices (the plan reads names and row
 * lengths only), tensors in alphabetical order (blk.10 before blk.2, as a
 * file need not follow the layers). */
static clf_gguf *model(const shape *s, const char *path) {
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    TU_OK(clf_gguf_set_u32(w, "llama.block_count", (uint32_t)s->n_layer));
    TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count", (uint32_t)s->n_head));
    TU_OK(clf_gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)s->n_head_kv));
    char *names[512];
    int n = 0;
    names[n++] = strdup("token_embd.weight");
    names[n++] = strdup("output_norm.weight");
    if (!s->tied) names[n++] = strdup("output.weight");
    for (int l = 0; l < s->n_layer; l++) {
        char b[64];
        for (size_t k = 0; k < sizeof LAYER_TENSORS / sizeof LAYER_TENSORS[0]; k++) {
            snprintf(b, sizeof b, "blk.%d.%s.weight", l, LAYER_TENSORS[k]);
            names[n++] = strdup(b);
        }
        snprintf(b, sizeof b, "blk.%d.attn_norm.weight", l);
        names[n++] = strdup(b);
    }
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    static float zeros[2 * 4096];
    for (int i = 0; i < n; i++) {
        const char *dot = strrchr(names[i], '.'), *what = names[i];
        char part[32] = "";
        if (!strncmp(names[i], "blk.", 4)) { /* blk.N.WHAT.weight */
            what = strchr(names[i] + 4, '.') + 1;
            snprintf(part, sizeof part, "%.*s", (int)(dot - what), what);
        }
        int64_t ne[2] = {s->n_embd, strstr(names[i], "norm") ? 1 : 2};
        if (part[0]) ne[0] = ne0_of(s, part);
        TU_OK(clf_gguf_add_tensor(w, names[i], CLF_F32, ne[1] > 1 ? 2 : 1, ne, zeros));
        free(names[i]);
    }
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    return g;
}

/* llama.cpp's use_more_bits, written out: layers with more bits in _M. */
static int more_bits_30(int i) {
    static const int l[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29};
    for (size_t k = 0; k < sizeof l / sizeof l[0]; k++)
        if (l[k] == i) return 1;
    return 0;
}
static int more_bits_8(int i) { return i == 0 || i == 3 || i == 6 || i == 7; }

typedef clf_type (*expect_fn)(const char *what, int layer);

/* Plans `mix` on g and checks every tensor against want(what, layer). */
static void check_plan(clf_gguf *g, const char *mix_name, expect_fn want, int want_fallback) {
    const clf_quant_mix *mix = clf_quant_mix_find(mix_name);
    assert_non_null(mix);
    int64_t n = clf_gguf_n_tensors(g);
    clf_type *types = calloc((size_t)n, sizeof *types);
    int fallback = -1;
    TU_OK(clf_quant_mix_plan(mix, g, types, &fallback));
    int counts[CLF_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < n; i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[96], what[96] = "";
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        int layer = -1;
        if (sscanf(name, "blk.%d.%95[a-z_]", &layer, what) != 2) snprintf(what, sizeof what, "%s", name);
        clf_type w = want(what, layer);
        if (types[i] != w)
            fail_msg("%s: %s is %s, llama.cpp's %s", mix_name, name, clf_type_get(types[i])->name, clf_type_get(w)->name);
        counts[types[i]]++;
    }
    printf("  %-7s", mix_name);
    for (int t = 0; t < CLF_TYPE_COUNT; t++)
        if (counts[t]) printf(" %s %d", clf_type_get((uint32_t)t)->name, counts[t]);
    printf(" (%d fallbacks)\n", fallback);
    assert_int_equal(fallback, want_fallback);
    free(types);
}

static int is_norm(const char *what) { return strstr(what, "norm") != NULL; }

/* ---- the default model's shape: 30 layers, rows of 576 and 1536, tied ---- */

static clf_type smol_q4_k_m(const char *what, int l) {
    if (is_norm(what)) return CLF_F32;
    if (!strcmp(what, "token_embd.weight")) return CLF_Q8_0; /* tied: the output head, rows not whole Q4_K blocks */
    if (!strcmp(what, "attn_v")) return more_bits_30(l) ? CLF_Q8_0 : CLF_Q5_0; /* Q6_K -> Q8_0, Q4_K -> Q5_0 */
    if (!strcmp(what, "ffn_down")) return more_bits_30(l) ? CLF_Q6_K : CLF_Q4_K; /* 1536 = 6 x 256 */
    return CLF_Q5_0;
}
static clf_type smol_q5_k_m(const char *what, int l) {
    if (is_norm(what)) return CLF_F32;
    if (!strcmp(what, "token_embd.weight")) return CLF_Q8_0;
    if (!strcmp(what, "attn_v")) return more_bits_30(l) ? CLF_Q8_0 : CLF_Q5_1;
    if (!strcmp(what, "ffn_down")) return more_bits_30(l) ? CLF_Q6_K : CLF_Q5_K;
    return CLF_Q5_1;
}
static clf_type smol_q4_0(const char *what, int l) {
    (void)l;
    if (is_norm(what)) return CLF_F32;
    if (!strcmp(what, "token_embd.weight")) return CLF_Q8_0; /* tied: the output head's Q6_K, falling back */
    return CLF_Q4_0;
}
static clf_type smol_q8_0(const char *what, int l) {
    (void)l;
    return is_norm(what) ? CLF_F32 : CLF_Q8_0;
}

static void test_default_shape(void **state) {
    (void)state;
    const shape s = {30, 576, 1536, 9, 3, 1};
    char path[] = "/tmp/clinfer-mix-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    clf_gguf *g = model(&s, path);
    /* every 576-column layer matrix falls back, ffn_down (1536) does not;
     * the head goes to Q8_0 by its own rule (rows not whole Q4_K blocks) */
    check_plan(g, "Q4_K_M", smol_q4_k_m, 30 * 6);
    check_plan(g, "q5_k_m", smol_q5_k_m, 30 * 6);
    check_plan(g, "Q4_0", smol_q4_0, 1); /* token_embd */
    check_plan(g, "Q8_0", smol_q8_0, 0);
    clf_gguf_close(g);
    unlink(path);
}

/* ---- rows of whole super-blocks: 8 layers, 256 / 512, GQA 4, untied ------- */

static clf_type sb_base(const char *what, clf_type base) {
    if (is_norm(what)) return CLF_F32;
    if (!strcmp(what, "output.weight")) return base == CLF_Q8_0 || clf_type_get(base)->block == 1 ? base : CLF_Q6_K;
    return base;
}
static clf_type sb_q4_k_m(const char *what, int l) {
    if ((!strcmp(what, "attn_v") || !strcmp(what, "ffn_down")) && more_bits_8(l)) return CLF_Q6_K;
    return sb_base(what, CLF_Q4_K);
}
static clf_type sb_q4_k_s(const char *what, int l) {
    if (!strcmp(what, "attn_v") && l < 4) return CLF_Q5_K;
    if (!strcmp(what, "ffn_down") && l < 1) return CLF_Q5_K;
    return sb_base(what, CLF_Q4_K);
}
static clf_type sb_q5_k_s(const char *what, int l) {
    (void)l;
    return sb_base(what, CLF_Q5_K);
}
static clf_type sb_q3_k_m(const char *what, int l) {
    if (!strcmp(what, "attn_v")) return l < 2 ? CLF_Q5_K : CLF_Q4_K;
    if (!strcmp(what, "ffn_down") || !strcmp(what, "attn_output")) return CLF_Q4_K; /* 8/16 = 0 layers at Q5_K */
    return sb_base(what, CLF_Q3_K);
}
static clf_type sb_q2_k(const char *what, int l) {
    (void)l;
    if (!strcmp(what, "attn_v")) return CLF_Q4_K; /* GQA 4 */
    if (!strcmp(what, "ffn_down") || !strcmp(what, "attn_output")) return CLF_Q3_K;
    return sb_base(what, CLF_Q2_K);
}
static clf_type sb_iq4_nl(const char *what, int l) {
    if (!strcmp(what, "attn_v") || (!strcmp(what, "ffn_down") && l < 1)) return CLF_Q5_K;
    return sb_base(what, CLF_IQ4_NL);
}
static clf_type sb_q6_k(const char *what, int l) {
    (void)l;
    return sb_base(what, CLF_Q6_K);
}
static clf_type sb_q5_1(const char *what, int l) {
    (void)l;
    return sb_base(what, CLF_Q5_1);
}
static clf_type sb_bf16(const char *what, int l) {
    (void)l;
    return sb_base(what, CLF_BF16);
}

static void test_superblock_shape(void **state) {
    (void)state;
    const shape s = {8, 256, 512, 8, 2, 0};
    char path[] = "/tmp/clinfer-mix-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    clf_gguf *g = model(&s, path);
    check_plan(g, "Q4_K_M", sb_q4_k_m, 0);
    check_plan(g, "Q4_K_S", sb_q4_k_s, 0);
    check_plan(g, "Q5_K_S", sb_q5_k_s, 0);
    check_plan(g, "Q3_K_M", sb_q3_k_m, 0);
    check_plan(g, "Q2_K", sb_q2_k, 0);
    check_plan(g, "IQ4_NL", sb_iq4_nl, 0);
    check_plan(g, "Q6_K", sb_q6_k, 0);
    check_plan(g, "Q5_1", sb_q5_1, 0);
    check_plan(g, "BF16", sb_bf16, 0);
    clf_gguf_close(g);
    unlink(path);
}

/* Rows no block divides stay F32; 2-D tensors llama.cpp never quantizes
 * keep their type; the names and numbers of the targets. */
static void test_edges(void **state) {
    (void)state;
    char path[] = "/tmp/clinfer-mix-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    static float x[40 * 3];
    static uint16_t h[32 * 2];
    TU_OK(clf_gguf_add_tensor(w, "blk.0.odd.weight", CLF_F32, 2, (int64_t[]){40, 3}, x));
    TU_OK(clf_gguf_add_tensor(w, "blk.0.ffn_gate_inp.weight", CLF_F16, 2, (int64_t[]){32, 2}, h));
    TU_OK(clf_gguf_add_tensor(w, "blk.0.attn_q.bias", CLF_F32, 2, (int64_t[]){32, 2}, x));
    TU_OK(clf_gguf_add_tensor(w, "blk.0.attn_q.weight", CLF_F16, 2, (int64_t[]){32, 2}, h));
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_type t[4];
    int fb;
    TU_OK(clf_quant_mix_plan(clf_quant_mix_find("Q4_K_M"), g, t, &fb));
    assert_int_equal(t[0], CLF_F32); /* 40 columns: neither Q4_K nor Q5_0 blocks */
    assert_int_equal(t[1], CLF_F16); /* a router: never quantized */
    assert_int_equal(t[2], CLF_F32); /* not a "weight" */
    assert_int_equal(t[3], CLF_Q5_0); /* 32 columns: Q4_K falls back */
    assert_int_equal(fb, 2);
    clf_gguf_close(g);
    unlink(path);

    const struct { const char *name; uint32_t ftype; clf_type base; } known[] = {
        {"F32", 0, CLF_F32},        {"F16", 1, CLF_F16},        {"Q4_0", 2, CLF_Q4_0},    {"Q4_1", 3, CLF_Q4_1},
        {"Q8_0", 7, CLF_Q8_0},      {"Q5_0", 8, CLF_Q5_0},      {"Q5_1", 9, CLF_Q5_1},    {"Q2_K", 10, CLF_Q2_K},
        {"Q3_K_S", 11, CLF_Q3_K},   {"Q3_K_M", 12, CLF_Q3_K},   {"Q3_K_L", 13, CLF_Q3_K}, {"Q4_K_S", 14, CLF_Q4_K},
        {"Q4_K_M", 15, CLF_Q4_K},   {"Q5_K_S", 16, CLF_Q5_K},   {"Q5_K_M", 17, CLF_Q5_K}, {"Q6_K", 18, CLF_Q6_K},
        {"IQ4_NL", 25, CLF_IQ4_NL}, {"BF16", 32, CLF_BF16},   {"MXFP4_MOE", 38, CLF_MXFP4},
    };
    char names[512];
    clf_quant_mix_names(names, sizeof names);
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const clf_quant_mix *m = clf_quant_mix_find(known[i].name);
        assert_non_null(m);
        assert_int_equal(m->ftype, known[i].ftype); /* LLAMA_FTYPE_MOSTLY_* */
        assert_int_equal(m->base, known[i].base);
        assert_non_null(strstr(names, known[i].name));
        assert_ptr_equal(clf_quant_mix_of_ftype(known[i].ftype), m); /* a file's type named as llama-bench does */
    }
    assert_null(clf_quant_mix_of_ftype(4)); /* LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16: no mix of ours */
    assert_null(clf_quant_mix_find("Q4_K"));
    assert_null(clf_quant_mix_find("IQ2_XS"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_shape),
        cmocka_unit_test(test_superblock_shape),
        cmocka_unit_test(test_edges),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

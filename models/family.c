/* The families and what sets each apart (models/family.h). Defaults are
 * Llama's: pairs (2i, 2i + 1) rotated, SwiGLU, no biases, no extra norms. */
#include "family.h"

#include <stdio.h>
#include <string.h>

static const clf_family families[] = {
    {.arch = "llama", .moe_optional = 1},
    {.arch = "mistral", .moe_optional = 1},
    {.arch = "qwen2", .rope = CLF_ROPE_NEOX, .qkv_bias = 1},
    {.arch = "qwen3", .rope = CLF_ROPE_NEOX, .qk_norm = 1},
    {.arch = "qwen3moe", .rope = CLF_ROPE_NEOX, .qk_norm = 1, .moe = 1},
    {.arch = "gemma3", .rope = CLF_ROPE_NEOX, .act = CLF_GLU_GELU_TANH, .qk_norm = 1, .post_norms = 1,
     .embd_scale = 1, .swa_period = 6, .swa_rope_base = 10000.0f, .q_scale_embd_n_layer = 62},
    {.arch = "phi3", .rope = CLF_ROPE_NEOX},
    /* gpt-oss (llama.cpp's openai-moe): even layers slide (pattern 2), their base the file's */
    {.arch = "gpt-oss", .rope = CLF_ROPE_NEOX, .act = CLF_GLU_SWIGLU_OAI, .qkv_bias = 1, .swa_period = 2,
     .moe = 1, .moe_raw_weights = 1, .moe_softmax_weight = 1, .moe_biases = 1, .attn_sinks = 1, .attn_out_bias = 1,
     .ffn_norm_post_attn = 1, .swa_rope_scaled = 1},
};

#define N_FAMILIES (sizeof families / sizeof families[0])

const clf_family *clf_family_find(const char *arch) {
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (!strcmp(arch, families[i].arch)) return &families[i];
    return NULL;
}

clf_status clf_family_of(const clf_gguf *g, const clf_family **f) {
    *f = NULL;
    clf_gguf_str arch;
    CLF_TRY(clf_gguf_get_str(g, "general.architecture", &arch));
    for (size_t i = 0; i < N_FAMILIES; i++)
        if (arch.len == strlen(families[i].arch) && !memcmp(arch.ptr, families[i].arch, arch.len)) {
            *f = &families[i];
            return CLF_OK;
        }
    char names[160] = "";
    for (size_t i = 0, n = 0; i < N_FAMILIES && n < sizeof names; i++)
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", families[i].arch);
    return clf_fail(CLF_ERR_FORMAT, "unsupported architecture '%.*s' (supported: %s)", arch.len > 64 ? 64 : (int)arch.len,
                    arch.ptr, names);
}

int clf_family_layer_swa(const clf_family *f, int l) { return f->swa_period > 0 && (l + 1) % f->swa_period != 0; }

/* GGUF's tokenizer.* keys -> clf_vocab_desc -> clf_tokenizer_create. */
#include "vocab.h"

#include <string.h>

/* An array key of at least n_min items of one type; NULL when absent,
 * *st an error when present with another shape. */
static const clf_gguf_kv *find_arr(const clf_gguf *g, const char *key, clf_gguf_vtype type, const char *type_name,
                                   uint64_t n_min, clf_status *st) {
    const clf_gguf_kv *kv = clf_gguf_find(g, key);
    *st = CLF_OK;
    if (!kv) return NULL;
    if (kv->type != CLF_GGUF_ARRAY || kv->arr_type != type || kv->arr_n < n_min) {
        *st = clf_fail(CLF_ERR_FORMAT, "tokenizer: %s is not an array of %llu %s", key, (unsigned long long)n_min,
                       type_name);
        return NULL;
    }
    return kv;
}

/* An optional token id: -1 when absent or not a u32. */
static int64_t get_id(const clf_gguf *g, const char *key) {
    uint32_t v;
    return clf_gguf_find(g, key) && clf_gguf_get_u32(g, key, &v) == CLF_OK ? (int64_t)v : -1;
}

/* An optional flag: -1 when absent or not a bool. */
static int get_flag(const clf_gguf *g, const char *key) {
    int v;
    return clf_gguf_find(g, key) && clf_gguf_get_bool(g, key, &v) == CLF_OK ? v : -1;
}

static clf_status read_desc(const clf_gguf *g, clf_vocab_desc *d) {
    CLF_TRY(clf_gguf_get_str(g, "tokenizer.ggml.model", &d->model));
    if (clf_gguf_find(g, "tokenizer.ggml.pre")) CLF_TRY(clf_gguf_get_str(g, "tokenizer.ggml.pre", &d->pre));
    CLF_TRY(clf_gguf_get_strs(g, "tokenizer.ggml.tokens", &d->tokens, &d->n_tokens));
    uint64_t n = d->n_tokens;
    clf_status st;
    const clf_gguf_kv *types = find_arr(g, "tokenizer.ggml.token_type", CLF_GGUF_INT32, "int32", n, &st);
    CLF_TRY(st);
    const clf_gguf_kv *scores = find_arr(g, "tokenizer.ggml.scores", CLF_GGUF_FLOAT32, "float32", n, &st);
    if (st != CLF_OK) scores = find_arr(g, "tokenizer.ggml.scores", CLF_GGUF_INT32, "float32", n, &st);
    CLF_TRY(st);
    d->types = types ? types->data : NULL;
    d->scores = scores ? scores->data : NULL;
    d->scores_int = scores && scores->arr_type == CLF_GGUF_INT32;
    if (d->model.len == 4 && !memcmp(d->model.ptr, "gpt2", 4))
        CLF_TRY(clf_gguf_get_strs(g, "tokenizer.ggml.merges", &d->merges, &d->n_merges));
    d->bos = get_id(g, "tokenizer.ggml.bos_token_id");
    d->eos = get_id(g, "tokenizer.ggml.eos_token_id");
    d->unk = get_id(g, "tokenizer.ggml.unknown_token_id");
    d->eot = get_id(g, "tokenizer.ggml.eot_token_id");
    d->eom = get_id(g, "tokenizer.ggml.eom_token_id");
    d->add_space_prefix = get_flag(g, "tokenizer.ggml.add_space_prefix");
    d->add_bos = get_flag(g, "tokenizer.ggml.add_bos_token");
    d->add_eos = get_flag(g, "tokenizer.ggml.add_eos_token");
    if (clf_gguf_find(g, "general.name") && clf_gguf_get_str(g, "general.name", &d->name) != CLF_OK)
        d->name = (clf_str){0};
    if (clf_gguf_find(g, "tokenizer.chat_template")) CLF_TRY(clf_gguf_get_str(g, "tokenizer.chat_template", &d->chat_template));
    return CLF_OK;
}

clf_status clf_tokenizer_load(const clf_gguf *g, clf_tokenizer **out) {
    *out = NULL;
    clf_vocab_desc d = {0};
    clf_gguf_guard_begin(g); /* the vocabulary is read from the mapping */
    clf_status st = read_desc(g, &d);
    if (st == CLF_OK) st = clf_tokenizer_create(&d, out);
    clf_status changed = clf_gguf_guard_end(g);
    if (changed != CLF_OK) {
        clf_tokenizer_free(*out);
        *out = NULL;
        return changed;
    }
    return st == CLF_OK ? CLF_OK : clf_fail_ctx(st, "loading the tokenizer: ");
}

/* The public API (include/clinfer.h): version, errors, devices, models
 * (loaded on their devices, split or across MPI ranks: api/place.c) and
 * their text functions (tokenizer, detokenizer, chat templates). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "grammar.h"
#include "chat.h"
#include "estimate.h"
#include "file.h"
#include "model_path.h"
#include "vocab.h"

const char *clinfer_version(void) { return CLINFER_VERSION; }
const char *clinfer_last_error(void) { return clf_last_error(); }
const char *clinfer_status_name(clinfer_status st) { return clf_status_name((clf_status)st); }
void clinfer_free(void *p) { free(p); }

clinfer_status clinfer_read_file(const char *path, char **data, size_t *len) {
    API_NOT_NULL(path);
    API_NOT_NULL(data);
    API_NOT_NULL(len);
    return (clinfer_status)clf_read_file(path, data, len);
}

clinfer_status clinfer_fail(clinfer_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    clf_vfail((clf_status)st, fmt, ap);
    va_end(ap);
    return st;
}

clinfer_status clinfer_fail_prefix(clinfer_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    clf_vfail_ctx((clf_status)st, fmt, ap);
    va_end(ap);
    return st;
}

/* Copies what follows `size` from src to dst, as far as `n` (one side's
 * size field) and the struct's size go. */
static clf_status copy_sized(void *dst, const void *src, size_t n, size_t size, const char *what) {
    if (n < sizeof(size_t))
        return clf_fail(CLF_ERR_ARG, "%s.size is %zu: set it to sizeof(%s)", what, n, what);
    if (n > size) n = size;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), n - sizeof(size_t));
    return CLF_OK;
}

clf_status api_read_params(void *dst, size_t size, const void *src, const char *what) {
    return src ? copy_sized(dst, src, *(const size_t *)src, size, what) : CLF_OK;
}

clf_status api_write_info(void *dst, const void *src, size_t size, const char *what) {
    return copy_sized(dst, src, *(const size_t *)dst, size, what);
}

/* ---- devices ---------------------------------------------------------------- */

clinfer_status clinfer_device_count(int *n) {
    API_NOT_NULL(n);
    clf_device *devs = NULL;
    clf_status st = clf_devices_list(&devs, n);
    free(devs);
    return (clinfer_status)st;
}

clinfer_status clinfer_device_get(int index, clinfer_device_info *info) {
    API_NOT_NULL(info);
    clf_device *devs = NULL;
    int n;
    API_TRY(clf_devices_list(&devs, &n));
    clf_status st = CLF_OK;
    if (index < 0 || index >= n) st = clf_fail(CLF_ERR_ARG, "no device %d: there are %d", index, n);
    if (st == CLF_OK) {
        const clf_device *d = &devs[index];
        clinfer_device_info out = {.size = sizeof out,
                                   .compute_units = d->compute_units,
                                   .global_mem = d->global_mem,
                                   .max_alloc = d->max_alloc,
                                   .is_default = index == clf_device_default(devs, n)};
        snprintf(out.selector, sizeof out.selector, "%d:%d", d->platform_index, d->device_index);
        snprintf(out.platform, sizeof out.platform, "%s", d->platform_name);
        snprintf(out.name, sizeof out.name, "%s", d->name);
        snprintf(out.type, sizeof out.type, "%s", clf_device_type_name(d->type));
        out.clock_mhz = d->clock_mhz;
        out.local_mem = d->local_mem;
        snprintf(out.opencl_c, sizeof out.opencl_c, "%s", d->c_version);
        snprintf(out.driver, sizeof out.driver, "%s", d->driver);
        out.fp16 = d->fp16;
        out.fp64 = d->fp64;
        st = api_write_info(info, &out, sizeof out, "clinfer_device_info");
    }
    free(devs);
    return (clinfer_status)st;
}

clinfer_status clinfer_device_select(const char *selector, int *index) {
    API_NOT_NULL(index);
    clf_device *devs = NULL;
    int n;
    API_TRY(clf_devices_list(&devs, &n));
    clf_status st = clf_device_select(devs, n, selector, index);
    free(devs);
    return (clinfer_status)st;
}

clinfer_status clinfer_device_get_tuning(const char *selector, clinfer_device_tuning *out) {
    API_NOT_NULL(out);
    clf_runtime *rt;
    API_TRY(clf_runtime_create(selector, &rt));
    const clf_tuning *t = &rt->tune;
    clinfer_device_tuning r = {.size = sizeof r, .tuned = t->tuned};
    clf_caps_text(rt->dev.caps, r.capabilities, sizeof r.capabilities);
    clf_tuning_kernels(t, r.kernels, sizeof r.kernels);
    snprintf(r.row, sizeof r.row, "%s", t->row);
    snprintf(r.overrides, sizeof r.overrides, "%s", t->overrides);
    clf_tuning_format(t, r.values, sizeof r.values);
    clf_runtime_free(rt);
    return (clinfer_status)api_write_info(out, &r, sizeof r, "clinfer_device_tuning");
}

/* ---- models ----------------------------------------------------------------- */

clinfer_model_params clinfer_model_default_params(void) {
    return (clinfer_model_params){.size = sizeof(clinfer_model_params)};
}

clinfer_load_options clinfer_load_default_options(void) {
    return (clinfer_load_options){.size = sizeof(clinfer_load_options), .plan_kv_type = CLINFER_KV_F32};
}

/* m->chat anew from m->chat_template or the file's template (the parse
 * kept), and info's chat_format ("" where it fails: m->chat_st). */
static void model_chat(clinfer_model *m) {
    clf_chat_release(&m->chat);
    free(m->chat_err);
    m->chat_err = NULL;
    m->chat_st = clf_chat_keep(m->tok, m->chat_template, &m->chat);
    if (m->chat_st != CLF_OK) m->chat_err = strdup(clf_last_error());
    snprintf(m->info.chat_format, sizeof m->info.chat_format, "%s",
             m->chat_st == CLF_OK ? clf_chat_format_name(m->chat.format) : "");
}

/* What clinfer_model_get_info reports, read once at load from the file. */
static clf_status read_info(const clf_gguf *g, int vocab_only, clinfer_model *m) {
    clf_model_shape sh;
    clf_status st = clf_model_shape_from_gguf(g, &sh);
    if (st != CLF_OK && !vocab_only) return st;
    clinfer_model_info *in = &m->info;
    in->size = sizeof *in;
    if (st != CLF_OK) {
        /* a vocabulary-only file (llama.cpp's ggml-vocab-*.gguf) has no
         * weights to give a shape: the name, the vocabulary and the
         * template are all its info */
        clf_gguf_str arch;
        memset(&sh, 0, sizeof sh);
        if (clf_gguf_get_str(g, "general.architecture", &arch) == CLF_OK && arch.len < sizeof sh.arch)
            memcpy(sh.arch, arch.ptr, (size_t)arch.len);
        sh.n_vocab = clf_tokenizer_n_vocab(m->tok);
    }
    snprintf(in->arch, sizeof in->arch, "%s", sh.arch);
    const clf_gguf_kv *name = clf_gguf_find(g, "general.name");
    if (name && name->type == CLF_GGUF_STRING)
        snprintf(in->name, sizeof in->name, "%.*s", (int)(name->str.len < 127 ? name->str.len : 127), name->str.ptr);
    if (st == CLF_OK) snprintf(in->weight_type, sizeof in->weight_type, "%s", clf_type_get(sh.type_attn)->name);
    model_chat(m); /* the template parsed once, here */
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        in->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    in->n_vocab = (int)sh.n_vocab;
    in->n_ctx_train = (int)sh.n_ctx_train;
    in->n_embd = (int)sh.n_embd;
    in->n_layer = (int)sh.n_layer;
    in->n_head = (int)sh.n_head;
    in->n_head_kv = (int)sh.n_head_kv;
    in->head_dim = (int)sh.head_dim;
    in->n_ff = (int)sh.n_ff;
    in->bos = clf_tokenizer_bos(m->tok);
    in->eos = clf_tokenizer_eos(m->tok);
    return CLF_OK;
}

/* The runtime's abort hook: the model's abort callback, and the cancel
 * flag of the session evaluating (api_acquire). */
static int aborted(void *ud) {
    const clinfer_model *m = ud;
    if (m->opt.abort && m->opt.abort(m->opt.abort_user_data)) return 1;
    return m->current && atomic_load(&m->current->cancel);
}

/* Kernels missing from the cache take seconds to build: say so, once. */
static void building(void *ud) {
    clinfer_model *m = ud;
    if (!m->opt.notice || m->noticed++) return;
    char line[512];
    snprintf(line, sizeof line, "building kernels for %s (%s)", m->rt ? m->rt->dev.name : "the device",
             m->rt && m->rt->cache_dir[0] ? "first run on this device; cached afterwards" : "the kernel cache is off");
    m->opt.notice(m->opt.notice_user_data, line);
}

static int load_progress(void *ud, int done, int total) {
    const clinfer_model *m = ud;
    return m->opt.progress && m->opt.progress(m->opt.progress_user_data, total ? (float)done / total : 1.0f);
}

/* The runtime's other notices (the packed-weights cache), each as it comes. */
static void notice(void *ud, const char *line) {
    const clinfer_model *m = ud;
    if (m->opt.notice) m->opt.notice(m->opt.notice_user_data, line);
}

/* Before a stage's weights load: the abort hook, the notices, progress,
 * how the weights are held. */
static void prepare(clf_runtime *rt, void *ud) {
    clinfer_model *m = ud;
    if (!m->rt) m->rt = rt; /* stage 0's, for the notice */
    clf_runtime_set_abort(rt, aborted, m);
    clf_runtime_on_build(rt, building, m);
    clf_runtime_on_notice(rt, notice, m);
    clf_runtime_on_progress(rt, load_progress, m);
    rt->weights_in_memory = m->opt.no_mmap;
    rt->weights_mlock = m->opt.mlock;
}

static clf_status load(const char *path, const char *device, const clinfer_model_params *mp,
                       const clinfer_load_options *p, clinfer_model *m) {
    char file[4096];
    clf_gguf *g = NULL;
    clf_status st = clf_model_path(path, file, sizeof file);
    if (st == CLF_OK) st = clf_gguf_open(file, &g);
    /* a file without the tokenizer.ggml.* keys (weights alone, or another
     * program's GGUF) has nothing to tokenize with: say so, not which key */
    if (st == CLF_OK && !clf_gguf_find(g, "tokenizer.ggml.model") && !clf_gguf_find(g, "tokenizer.ggml.tokens"))
        st = clf_fail(CLF_ERR_FORMAT,
                      "%s has no vocabulary (no tokenizer.ggml.* keys): clinfer needs the tokenizer in the GGUF file",
                      file);
    if (st == CLF_OK) st = clf_tokenizer_load(g, &m->tok);
    /* llama.cpp's ggml-vocab-*.gguf: a vocabulary and no tensor at all */
    if (st == CLF_OK && !mp->vocab_only && clf_gguf_n_tensors(g) == 0)
        st = clf_fail(CLF_ERR_FORMAT,
                      "%s holds a vocabulary only, no weights: `clinfer tokenize` (a vocab_only load) reads it, "
                      "nothing runs it",
                      file);
    if (st == CLF_OK) st = read_info(g, mp->vocab_only, m);
    if (st == CLF_OK) m->digest = clf_gguf_header_digest(g) ^ ((uint64_t)clf_gguf_size(g) * 0x9e3779b97f4a7c15u);
    if (st == CLF_OK && !mp->vocab_only) {
        clf_place pl = {.device = device,
                        .devices = p->devices,
                        .ratio = p->split_ratio,
                        .mpi = p->mpi,
                        .model = path,
                        .n_seq = p->plan_n_seq,
                        .n_ctx = p->plan_n_ctx};
        clf_type kv = api_kv_type(p->plan_kv_type) == CLF_TYPE_COUNT ? CLF_F32 : api_kv_type(p->plan_kv_type);
        st = clf_stages_open(&pl, g, p->plan_n_ctx, kv, prepare, m, &m->stages);
        if (st == CLF_OK) {
            m->rt = m->stages.rt[0];
            m->llama = m->stages.m[0];
        }
        if (st == CLF_OK && clf_tokenizer_n_vocab(m->tok) != m->llama->hp.n_vocab)
            st = clf_fail(CLF_ERR_FORMAT, "the tokenizer has %d tokens but the model %d", clf_tokenizer_n_vocab(m->tok),
                          m->llama->hp.n_vocab);
        if (st == CLF_OK) {
            snprintf(m->info.device, sizeof m->info.device, "%s", m->rt->dev.name);
            clf_stages_devices(&m->stages, m->info.devices, sizeof m->info.devices);
            m->info.n_stages = m->stages.n;
            for (int i = 0; i < m->stages.n; i++) m->info.device_bytes += m->stages.m[i]->device_bytes;
        }
    }
    clf_gguf_close(g); /* the weights are on the device; the tokenizer keeps its own copy */
    /* whatever failed after the abort callback said stop failed for it:
     * LLVM (PoCL's compiler) deletes its temporary files on SIGINT */
    if (st != CLF_OK && st != CLF_ERR_INTERRUPTED && p->abort && p->abort(p->abort_user_data))
        st = clf_fail(CLF_ERR_INTERRUPTED, "loading stopped on request");
    return st;
}

clinfer_status clinfer_model_path(const char *path, char *buf, size_t n) {
    API_NOT_NULL(buf);
    if (n == 0) return (clinfer_status)clf_fail(CLF_ERR_ARG, "clinfer_model_path: no room");
    return (clinfer_status)clf_model_path(path, buf, n);
}

clinfer_status clinfer_model_load(const char *path, const char *device, const clinfer_model_params *params,
                                  clinfer_model **out) {
    return clinfer_model_load_with(path, device, params, NULL, out);
}

clinfer_status clinfer_model_load_with(const char *path, const char *device, const clinfer_model_params *params,
                                       const clinfer_load_options *options, clinfer_model **out) {
    API_NOT_NULL(out);
    *out = NULL;
    clinfer_model_params p = clinfer_model_default_params();
    clinfer_load_options o = clinfer_load_default_options();
    API_TRY(api_read_params(&p, sizeof p, params, "clinfer_model_params"));
    API_TRY(api_read_params(&o, sizeof o, options, "clinfer_load_options"));
    clinfer_model *m = calloc(1, sizeof *m);
    if (!m) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
    m->opt = o;
    m->opt.devices = m->opt.split_ratio = NULL; /* the caller's strings, not kept */
    if (pthread_mutex_init(&m->device_lock, NULL)) {
        free(m);
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "cannot create a mutex");
    }
    if (pthread_mutex_init(&m->trie_lock, NULL)) {
        pthread_mutex_destroy(&m->device_lock);
        free(m);
        return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "cannot create a mutex");
    }
    double t0 = clf_now_s();
    clf_status st = load(path, device, &p, &o, m);
    if (st != CLF_OK) {
        clinfer_model_free(m);
        return (clinfer_status)st;
    }
    m->info.load_seconds = clf_now_s() - t0;
    *out = m;
    return CLINFER_OK;
}

clf_status api_model_chat(const clinfer_model *m, clf_chat *c) {
    if (m->chat_st != CLF_OK) {
        memset(c, 0, sizeof *c);
        return clf_fail(m->chat_st, "%s", m->chat_err ? m->chat_err : "the model's chat template cannot be run");
    }
    clf_chat_copy(&m->chat, c);
    return CLF_OK;
}

clinfer_status clinfer_model_set_chat_template(clinfer_model *m, const char *tmpl) {
    API_NOT_NULL(m);
    if (!tmpl) {
        free(m->chat_template);
        m->chat_template = NULL;
    } else {
        /* it must parse (once: the chat kept here is the model's); kept as a copy */
        clf_chat c;
        char *copy = strdup(tmpl);
        if (!copy) return (clinfer_status)clf_fail(CLF_ERR_MEMORY, "out of host memory");
        clf_status st = clf_chat_keep(m->tok, copy, &c);
        if (st != CLF_OK) {
            free(copy);
            return (clinfer_status)clf_fail_ctx(st, "the chat template given: ");
        }
        clf_chat_release(&m->chat);
        free(m->chat_template);
        free(m->chat_err);
        m->chat_template = copy;
        m->chat = c;
        m->chat_st = CLF_OK;
        m->chat_err = NULL;
        snprintf(m->info.chat_format, sizeof m->info.chat_format, "%s", clf_chat_format_name(c.format));
        return CLINFER_OK;
    }
    model_chat(m); /* the file's again */
    return CLINFER_OK;
}

void clinfer_model_free(clinfer_model *m) {
    if (!m) return;
    clf_chat_release(&m->chat);
    free(m->chat_err);
    free(m->chat_template);
    api_lora_free_all(m);
    clf_stages_close(&m->stages);
    clf_tokenizer_free(m->tok);
    pthread_mutex_destroy(&m->device_lock);
    clf_vocab_trie_free(m->trie);
    pthread_mutex_destroy(&m->trie_lock);
    free(m);
}

clinfer_status clinfer_model_get_info(const clinfer_model *m, clinfer_model_info *info) {
    API_NOT_NULL(m);
    API_NOT_NULL(info);
    return (clinfer_status)api_write_info(info, &m->info, sizeof m->info, "clinfer_model_info");
}

clf_status api_need_weights(const clinfer_model *m, const char *fn) {
    if (m->llama) return CLF_OK;
    /* "vocab_only" names the parameter; both words stay for callers that look for either */
    return clf_fail(CLF_ERR_ARG,
                    "%s: the model was loaded for its vocabulary only (vocab_only): it has no weights and no device; "
                    "load it without vocab_only",
                    fn);
}

int clinfer_model_n_vocab(const clinfer_model *m) { return m ? m->info.n_vocab : 0; }

double clinfer_model_build_seconds(const clinfer_model *m) {
    double s = 0;
    for (int i = 0; m && i < m->stages.n; i++) s += m->stages.rt[i]->build_s;
    return s;
}

/* ---- text ------------------------------------------------------------------- */

clinfer_status clinfer_tokenize(const clinfer_model *m, const char *text, size_t len, int add_special,
                                int parse_special, int32_t **tokens, int *n) {
    API_NOT_NULL(m);
    API_NOT_NULL(text);
    API_NOT_NULL(tokens);
    API_NOT_NULL(n);
    *tokens = NULL;
    *n = 0;
    return (clinfer_status)clf_tokenize(m->tok, text, len, add_special, parse_special, tokens, n);
}

clinfer_status clinfer_detokenize(const clinfer_model *m, const int32_t *tokens, int n, int special, char **text,
                                  size_t *len) {
    API_NOT_NULL(m);
    API_NOT_NULL(text);
    API_NOT_NULL(len);
    *text = NULL;
    *len = 0;
    if (n < 0 || (n > 0 && !tokens)) return (clinfer_status)clf_fail(CLF_ERR_ARG, "clinfer_detokenize: no tokens");
    return (clinfer_status)clf_detokenize(m->tok, tokens, n, special ? CLF_DETOK_SPECIAL : 0, text, len);
}

const char *clinfer_token_piece(const clinfer_model *m, int32_t token, size_t *len) {
    size_t n = 0;
    const char *p = m ? clf_token_piece(m->tok, token, &n) : NULL;
    if (len) *len = p ? n : 0;
    return p;
}

int clinfer_token_is_eog(const clinfer_model *m, int32_t token) { return m && clf_token_is_eog(m->tok, token); }

/* The model's chat format and the messages as the library's (*cm: free it). */
static clf_status chat_messages(const clinfer_model *m, const clinfer_chat_message *msgs, int n, const char *fn,
                                clf_chat *c, clf_chat_msg **cm) {
    *cm = NULL;
    if (n < 0 || (n > 0 && !msgs)) return clf_fail(CLF_ERR_ARG, "%s: no messages", fn);
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return clf_fail(CLF_ERR_ARG, "%s: message %d has no role or content", fn, i);
    CLF_TRY(api_model_chat(m, c));
    if (!(*cm = malloc((size_t)(n ? n : 1) * sizeof **cm))) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; i < n; i++) (*cm)[i] = (clf_chat_msg){msgs[i].role, msgs[i].content};
    return CLF_OK;
}

clinfer_status clinfer_chat_apply(const clinfer_model *m, const clinfer_chat_message *msgs, int n, int add_assistant,
                                  char **text, size_t *len) {
    API_NOT_NULL(m);
    API_NOT_NULL(text);
    API_NOT_NULL(len);
    *text = NULL;
    *len = 0;
    clf_chat c;
    clf_chat_msg *cm;
    clf_status st = chat_messages(m, msgs, n, "clinfer_chat_apply", &c, &cm);
    if (st == CLF_OK) st = clf_chat_render(&c, cm, n, add_assistant, text, len);
    free(cm);
    return (clinfer_status)st;
}

clinfer_status clinfer_chat_tokenize(const clinfer_model *m, const clinfer_chat_message *msgs, int n, int add_assistant,
                                     int32_t **tokens, int *n_tokens) {
    API_NOT_NULL(m);
    API_NOT_NULL(tokens);
    API_NOT_NULL(n_tokens);
    *tokens = NULL;
    *n_tokens = 0;
    clf_chat c;
    clf_chat_msg *cm;
    clf_status st = chat_messages(m, msgs, n, "clinfer_chat_tokenize", &c, &cm);
    if (st == CLF_OK) st = clf_chat_tokenize(&c, m->tok, cm, n, add_assistant, 1, tokens, n_tokens);
    free(cm);
    return (clinfer_status)st;
}

clinfer_status clinfer_chat_tokenize_next(const clinfer_model *m, const char *role, const char *content,
                                          int32_t **tokens, int *n_tokens) {
    API_NOT_NULL(m);
    API_NOT_NULL(role);
    API_NOT_NULL(content);
    API_NOT_NULL(tokens);
    API_NOT_NULL(n_tokens);
    *tokens = NULL;
    *n_tokens = 0;
    clf_chat c;
    API_TRY(api_model_chat(m, &c));
    return (clinfer_status)clf_chat_tokenize_next(&c, m->tok, role, content, tokens, n_tokens);
}

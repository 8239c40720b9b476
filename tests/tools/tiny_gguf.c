/* tiny_gguf: small GGUF files for the tests that run the `clinfer` binary
 * (tests/cli_errors.sh, tests/valgrind_run.sh) and the fuzzers' seeds.
 *
 *   tiny_gguf model PATH [TYPE] [--no-eog] [--nan] [--seed S] [--ff N] [--kquant] [--arch A]
 *                  [--layers N] [--embd D] [--head-dim H] [--window W] [--rot R] [--rope-freqs] [--untied]
 *                  [--experts E --used K] [--ff-exp N] [--ff-any N]
 *       a random model (tests/support: tiny_model_write, default a one-layer
 *       Llama) with a tiny byte-level BPE vocabulary (tests/fuzz/fuzz_vocab.h),
 *       so that `clinfer run` works on it; weights of TYPE (default F32);
 *       --no-eog gives it no end-of-generation token, so a run stops only at
 *       -n; --ff N: the feed-forward width (default 64; 384 N bytes of F32
 *       weights: a large file that still loads in a moment); --nan fills
 *       output_norm.weight with NaN, so every logit is NaN; --kquant: rows of
 *       whole 256-weight super-blocks (n_embd 256 in 4 heads of 64 sharing 1
 *       KV head, n_ff 512), 2 layers, an untied output head: every matrix can
 *       be a K-quant (tests/peer/record_kquant.py). The family
 *       options: --arch (llama, qwen2, qwen3, qwen3moe, gemma3, phi3, gpt-oss, or any name: the
 *       file then has Llama's tensors), --layers, --embd (the embedding width
 *       when it differs from the 2 heads of 16), --head-dim (a multiple of
 *       16: 32 for the quantized caches), --window (gemma3's and gpt-oss's
 *       sliding window; gpt-oss also gets YaRN, attention sinks and every
 *       bias, and needs --untied), --rot (rotated dims), --rope-freqs (Llama 3.1 factors),
 *       --untied (an output matrix), --experts E --used K (a mixture of
 *       experts: qwen3moe, gpt-oss, or llama for Mixtral), --ff-exp N (qwen3moe's
 *       and gpt-oss's expert width), --ff-any N (the feed-forward width unchecked: a
 *       Mixtral's odd expert width). tests/peer/record.py gives these files
 *       to llama.cpp.
 *   tiny_gguf seeds DIR
 *       DIR/gguf: valid files of every shape the reader knows (models of
 *       every weight type, both vocabularies, every value type, nested
 *       arrays, no tensors at all, a K-quant super-block); DIR/tokenizer:
 *       texts for fuzz_tokenizer.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fuzz/fuzz_vocab.h"
#include "gguf_write.h"
#include "quant.h"
#include "ref_llama.h"

/* The default: one layer, 2 heads of 16 on 1 KV head. */
static const tiny_model TINY = {.arch = "llama", .n_layer = 1, .n_head = 2, .n_head_kv = 1, .head_dim = 16, .n_ff = 64,
                                .type = CLF_F32, .tied = 1};

static int fail(const char *what) {
    fprintf(stderr, "tiny_gguf: %s: %s\n", what, clf_last_error());
    return 1;
}

/* A tiny model with a vocabulary: the random model is written first, then
 * copied key by key and tensor by tensor beside the vocabulary's keys. */
/* tm gives the family and shapes; the vocabulary sets n_vocab. */
static int write_model(const char *path, tiny_model tm, int spm, int eog, int nan, uint64_t seed) {
    fz_vocab v;
    fz_vocab_build2(&v, spm, eog);
    tm.n_vocab = v.n;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.base.gguf", path);
    int rc = tiny_model_write(&tm, seed, tmp);
    clf_gguf *g = NULL;
    clf_gguf_writer *w = NULL;
    clf_status st = rc ? clf_fail(CLF_ERR_IO, "tiny_model_write failed") : clf_gguf_open(tmp, &g);
    if (st == CLF_OK) st = clf_gguf_writer_create(&w);
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_kv(g); i++) st = clf_gguf_set_kv(w, clf_gguf_kv_at(g, i));
    if (st == CLF_OK) st = fz_vocab_set2(w, &v, spm, eog);
    for (int64_t i = 0; st == CLF_OK && i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        float nans[256];
        const int nan_norm = nan && !strcmp(name, "output_norm.weight") && t->ne[0] <= 256;
        for (int j = 0; nan_norm && j < t->ne[0]; j++) nans[j] = NAN;
        st = clf_gguf_add_tensor(w, name, t->type, t->n_dims, t->ne, nan_norm ? nans : t->data);
    }
    if (st == CLF_OK) st = clf_gguf_write(w, path);
    clf_gguf_writer_free(w);
    clf_gguf_close(g);
    unlink(tmp);
    fz_vocab_free(&v);
    return st == CLF_OK ? 0 : fail(path);
}

/* Every value type, arrays of each, a string array, nested arrays, and a
 * 1-, 3- and 4-dimensional tensor. */
static int write_kinds(const char *path) {
    clf_gguf_writer *w;
    if (clf_gguf_writer_create(&w) != CLF_OK) return fail("writer");
    uint8_t raw[64];
    for (int i = 0; i < 64; i++) raw[i] = (uint8_t)(i * 37 + 11);
    clf_status st = CLF_OK;
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                        "str", "arr", "u64", "i64", "f64"};
    for (int t = 0; st == CLF_OK && t <= CLF_GGUF_FLOAT64; t++) {
        char key[64];
        snprintf(key, sizeof key, "kinds.%s", names[t]);
        size_t es = clf_gguf_vtype_size((clf_gguf_vtype)t);
        if (es) {
            clf_gguf_kv kv = {.key = {key, strlen(key)}, .type = (clf_gguf_vtype)t, .data = raw, .data_bytes = es};
            if (t == CLF_GGUF_BOOL) raw[0] = 1;
            st = clf_gguf_set_kv(w, &kv);
            snprintf(key, sizeof key, "kinds.arr_%s", names[t]);
            if (st == CLF_OK) st = clf_gguf_set_arr(w, key, (clf_gguf_vtype)t, raw + 8, 3);
        }
    }
    const char *strs[] = {"", "one", "tw\xc3\xb6", "<|im_end|>"};
    if (st == CLF_OK) st = clf_gguf_set_str(w, "kinds.str", "a string");
    if (st == CLF_OK) st = clf_gguf_set_strs(w, "kinds.arr_str", strs, 4);
    if (st == CLF_OK) st = clf_gguf_set_strs(w, "kinds.arr_empty", strs, 0);
    /* [[u16 x2], [u16 x0]] */
    uint8_t nest[12 + 4 + 12];
    uint32_t t16 = CLF_GGUF_UINT16;
    uint64_t two = 2, zero = 0;
    memcpy(nest, &t16, 4), memcpy(nest + 4, &two, 8), memcpy(nest + 12, raw, 4);
    memcpy(nest + 16, &t16, 4), memcpy(nest + 20, &zero, 8);
    clf_gguf_kv kv = {.key = {"kinds.nested", 12}, .type = CLF_GGUF_ARRAY, .arr_type = CLF_GGUF_ARRAY, .arr_n = 2,
                      .data = nest, .data_bytes = 28};
    if (st == CLF_OK) st = clf_gguf_set_kv(w, &kv);
    if (st == CLF_OK) st = clf_gguf_set_u32(w, "general.alignment", 64);
    float x[4 * 3 * 2];
    for (int i = 0; i < 24; i++) x[i] = (float)i - 7.5f;
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.vec", CLF_F32, 1, (int64_t[]){5}, x);
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.3d", CLF_F32, 3, (int64_t[]){4, 3, 2}, x);
    uint8_t q[2 * 20];
    for (int i = 0; i < 40; i++) q[i] = (uint8_t)(i * 13);
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.4d.q4_1", CLF_Q4_1, 4, (int64_t[]){32, 1, 2, 1}, q);
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.q4_0", CLF_Q4_0, 2, (int64_t[]){32, 2}, q);
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.f16", CLF_F16, 2, (int64_t[]){4, 5}, q);
    uint8_t k[sizeof(clf_block_q6_K)]; /* a 256-weight super-block */
    for (size_t i = 0; i < sizeof k; i++) k[i] = (uint8_t)(i * 29 + 3);
    if (st == CLF_OK) st = clf_gguf_add_tensor(w, "t.q6_k", CLF_Q6_K, 1, (int64_t[]){256}, k);
    if (st == CLF_OK) st = clf_gguf_write(w, path);
    clf_gguf_writer_free(w);
    return st == CLF_OK ? 0 : fail(path);
}

static int write_empty(const char *path) {
    clf_gguf_writer *w;
    if (clf_gguf_writer_create(&w) != CLF_OK) return fail("writer");
    clf_status st = clf_gguf_write(w, path);
    clf_gguf_writer_free(w);
    return st == CLF_OK ? 0 : fail(path);
}

static int write_text(const char *dir, const char *name, const void *p, size_t n) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "tiny_gguf: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

static int mkdir_p(const char *dir) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tiny_gguf: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    return 0;
}

static int write_seeds(const char *dir) {
    char g[4096], t[4096], p[4300];
    snprintf(g, sizeof g, "%s/gguf", dir);
    snprintf(t, sizeof t, "%s/tokenizer", dir);
    if (mkdir_p(dir) || mkdir_p(g) || mkdir_p(t)) return 1;
    int rc = 0;
    static const clf_type types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0, CLF_Q4_1};
    tiny_model tm = TINY;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        snprintf(p, sizeof p, "%s/llama-bpe-%s.gguf", g, clf_type_get(types[i])->name);
        tm.type = types[i];
        rc |= write_model(p, tm, 0, 1, 0, 1 + i);
    }
    tm.arch = "qwen2", tm.type = CLF_Q8_0;
    snprintf(p, sizeof p, "%s/qwen2-spm-Q8_0.gguf", g), rc |= write_model(p, tm, 1, 1, 0, 7);
    snprintf(p, sizeof p, "%s/vocab-bpe.gguf", g), rc |= fz_vocab_write(p, 0) != CLF_OK;
    snprintf(p, sizeof p, "%s/vocab-spm.gguf", g), rc |= fz_vocab_write(p, 1) != CLF_OK;
    snprintf(p, sizeof p, "%s/kinds.gguf", g), rc |= write_kinds(p);
    snprintf(p, sizeof p, "%s/empty.gguf", g), rc |= write_empty(p);
    /* tokenizer inputs: byte 0 = vocabulary (bit 0), add_special (bit 1), detok flags (bits 2-3) */
    static const char *const texts[] = {
        "\x00Hello world! The quick brown fox, and then... 12345 67",
        "\x01Hello world! The quick brown fox, and then... 12345 67",
        "\x02<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "\x03<|im_start|>user\nWhat is 2+2?<|im_end|>\n<s></s><unk> <tool>x",
        "\x04 caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 \xd0\xbf\xd1\x80\xd0\xb8",
        "\x05   leading spaces\t\ttabs\r\n\r\nnewlines   ",
        "\x08\xff\xfe invalid \xc3 utf-8 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf",
        "\x09\xff\xfe invalid \xc3 utf-8 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf",
        "\x0c'll 've 're I'M don't can'T",
        "\x0d<0x41><0xFF>\xe2\x96\x81\xe2\x96\x81the and",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text-%02zu", i);
        size_t n = 1 + strlen(texts[i] + 1); /* byte 0 may be NUL */
        rc |= write_text(t, name, texts[i], n);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "model")) {
        tiny_model tm = TINY;
        int eog = 1, nan = 0;
        uint64_t seed = 42;
        for (int i = 3; i < argc; i++) {
            const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
            if (!strcmp(a, "--no-eog")) eog = 0;
            else if (!strcmp(a, "--nan")) nan = 1;
            else if (!strcmp(a, "--kquant"))
                tm.n_layer = 2, tm.n_head = 4, tm.n_head_kv = 1, tm.head_dim = 64, tm.n_ff = 512, tm.tied = 0;
            else if (!strcmp(a, "--rope-freqs")) tm.rope_freqs = 1;
            else if (!strcmp(a, "--untied")) tm.tied = 0;
            else if (!strcmp(a, "--seed") && v) seed = strtoull(argv[++i], NULL, 10);
            else if (!strcmp(a, "--ff") && v && (tm.n_ff = atoi(argv[++i])) > 0 && tm.n_ff % 32 == 0) {}
            else if (!strcmp(a, "--arch") && v) tm.arch = argv[++i];
            else if (!strcmp(a, "--layers") && v) tm.n_layer = atoi(argv[++i]);
            else if (!strcmp(a, "--embd") && v) tm.n_embd = atoi(argv[++i]);
            else if (!strcmp(a, "--head-dim") && v && (tm.head_dim = atoi(argv[++i])) > 0 && tm.head_dim % 16 == 0) {}
            else if (!strcmp(a, "--window") && v) tm.window = atoi(argv[++i]);
            else if (!strcmp(a, "--rot") && v) tm.n_rot = atoi(argv[++i]);
            else if (!strcmp(a, "--experts") && v) tm.n_expert = atoi(argv[++i]);
            else if (!strcmp(a, "--used") && v) tm.n_expert_used = atoi(argv[++i]);
            else if (!strcmp(a, "--ff-exp") && v) tm.n_ff_exp = atoi(argv[++i]);
            else if (!strcmp(a, "--ff-any") && v) tm.n_ff = atoi(argv[++i]);
            else if (clf_type_from_name(a) >= 0) tm.type = (clf_type)clf_type_from_name(a);
            else {
                fprintf(stderr, "tiny_gguf: unknown option '%s'\n", a);
                return 2;
            }
        }
        return write_model(argv[2], tm, 0, eog, nan, seed);
    }
    if (argc == 3 && !strcmp(argv[1], "seeds")) return write_seeds(argv[2]);
    fprintf(stderr, "usage: tiny_gguf model PATH [TYPE] [--no-eog] [--nan] [--seed S] [--ff N] [--kquant] [--arch A] "
                    "[--layers N] [--embd D] [--head-dim H] [--window W] [--rot R] [--rope-freqs] [--untied] "
                    "[--experts E --used K] [--ff-exp N] [--ff-any N] | tiny_gguf seeds DIR\n");
    return 2;
}

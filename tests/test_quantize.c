/* `clinfer quantize` (run as $CLINFER_BIN): a tiny random F32 GGUF converted
 * to every type, each output checked against the source values within the
 * type's error bound, metadata and alignment kept; re-quantization from
 * quantized inputs; failures leave no file; the peers, as recorded by
 * tests/peer/record_quantize.py: gguf-py's and ggml's conversion byte for
 * byte, llama.cpp's verdict on the converted default model; and clinfer
 * running it; llama-quantize's MXFP4_MOE of a file with experts
 * (tests/peer/record_mxfp4.py). */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf_write.h"
#include "model_path.h"
#include "peer_kquant.h"
#include "testutil.h"

static char dir[64];

/* Declares char var[] holding dir/name. */
#define PATH(var, name)                                                                                   \
    char var[160];                                                                                        \
    snprintf(var, sizeof var, "%s/%s", dir, name)

/* Runs a shell command; its exit status (-1 when it did not exit). */
static int run(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *bin(void) {
    const char *b = getenv("CLINFER_BIN");
    if (!b) fail_msg("CLINFER_BIN is not set (run through ctest)");
    return b;
}

/* ---- the tiny source model ------------------------------------------------- */

typedef struct src_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    int matrix; /* converted (2+ dims, more than one row) */
} src_tensor;

static const src_tensor TENSORS[] = {
    {"token_embd.weight", 2, {64, 11, 1, 1}, 1},
    {"blk.0.attn_q.weight", 2, {96, 37, 1, 1}, 1},
    {"blk.0.ffn_down.weight", 2, {160, 7, 1, 1}, 1},
    {"blk.0.cube.weight", 3, {32, 3, 5, 1}, 1},
    {"blk.0.odd.weight", 2, {33, 5, 1, 1}, 1}, /* rows not whole blocks: F32 for quantized types */
    {"blk.0.row.weight", 2, {64, 1, 1, 1}, 0},
    {"blk.0.attn_norm.weight", 1, {64, 1, 1, 1}, 0},
    {"blk.0.ffn_up.weight", 2, {256, 3, 1, 1}, 1}, /* whole K-quant super-blocks */
};
enum { N_T = sizeof TENSORS / sizeof TENSORS[0] };

static int64_t nel(const src_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

static float *src_data[N_T];

static void write_source(const char *path) {
    uint64_t s = tu_seed() ^ 0x9a47ull;
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    TU_OK(clf_gguf_set_u32(w, "general.alignment", 64));
    TU_OK(clf_gguf_set_u32(w, "general.file_type", 0));
    TU_OK(clf_gguf_set_f32(w, "llama.rope.freq_base", 10000.0f));
    const char *toks[] = {"<s>", "a", "b c"};
    TU_OK(clf_gguf_set_strs(w, "tokenizer.ggml.tokens", toks, 3));
    for (int i = 0; i < N_T; i++) {
        free(src_data[i]);
        src_data[i] = malloc((size_t)nel(&TENSORS[i]) * sizeof(float));
        tu_fill_uniform(&s, src_data[i], (size_t)nel(&TENSORS[i]), -1, 1);
        TU_OK(clf_gguf_add_tensor(w, TENSORS[i].name, CLF_F32, TENSORS[i].n_dims, TENSORS[i].ne, src_data[i]));
    }
    TU_OK(clf_gguf_write(w, path));
    clf_gguf_writer_free(w);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/clinfer-quant-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    PATH(src, "src.gguf");
    write_source(src);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < N_T; i++) free(src_data[i]);
    return run("rm -rf %s", dir);
}

/* ---- checks ------------------------------------------------------------------- */

/* ||dequant(out) - src|| / ||src|| of one tensor. */
static double tensor_err(const clf_gguf *g, int i) {
    const clf_gguf_tensor *t = clf_gguf_find_tensor(g, TENSORS[i].name);
    assert_non_null(t);
    for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], TENSORS[i].ne[d]);
    size_t n = (size_t)nel(&TENSORS[i]);
    float *x = malloc(n * sizeof *x);
    double *ref = malloc(n * sizeof *ref);
    clf_dequantize(t->type, t->data, x, (int64_t)n);
    for (size_t j = 0; j < n; j++) ref[j] = src_data[i][j];
    double e = tu_rel_err(x, ref, n);
    free(x);
    free(ref);
    return e;
}

/* Metadata equal to the source's, but general.file_type. */
static void check_metadata(const clf_gguf *src, const clf_gguf *out, uint32_t ftype) {
    assert_int_equal(clf_gguf_alignment(out), 64);
    for (int64_t i = 0; i < clf_gguf_n_kv(src); i++) {
        const clf_gguf_kv *a = clf_gguf_kv_at(src, i);
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)a->key.len, a->key.ptr);
        const clf_gguf_kv *b = clf_gguf_find(out, key);
        if (!b) fail_msg("key %s not copied", key);
        assert_int_equal(b->type, a->type);
        if (strcmp(key, "general.file_type") == 0) continue;
        assert_int_equal(b->data_bytes, a->data_bytes);
        assert_memory_equal(b->data, a->data, a->data_bytes);
    }
    uint32_t ft;
    TU_OK(clf_gguf_get_u32(out, "general.file_type", &ft));
    assert_int_equal(ft, ftype);
}

/* A target and the type of each of TENSORS in its output: llama.cpp's mix
 * (the tied token embeddings are the output head: Q6_K, or Q8_0 when the
 * rows are not whole 256-weight super-blocks; Q4_K_M gives some layers'
 * ffn_down Q6_K, Q2_K/Q3_K_M theirs Q3_K/Q4_K), then the fallbacks for
 * rows of 96, 160 and 32: Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0; 33 columns fit no block: F32. */
typedef struct target { const char *arg; uint32_t ftype; clf_type types[N_T]; } target;

#define MIXED(head, q, down, up) {head, q, down, q, CLF_F32, CLF_F32, CLF_F32, up}
static const target TARGETS[] = {
    {"F32", 0, {CLF_F32, CLF_F32, CLF_F32, CLF_F32, CLF_F32, CLF_F32, CLF_F32, CLF_F32}},
    {"f16", 1, {CLF_F16, CLF_F16, CLF_F16, CLF_F16, CLF_F16, CLF_F32, CLF_F32, CLF_F16}},
    {"BF16", 32, {CLF_BF16, CLF_BF16, CLF_BF16, CLF_BF16, CLF_BF16, CLF_F32, CLF_F32, CLF_BF16}},
    {"Q8_0", 7, MIXED(CLF_Q8_0, CLF_Q8_0, CLF_Q8_0, CLF_Q8_0)},
    {"q4_0", 2, MIXED(CLF_Q8_0, CLF_Q4_0, CLF_Q4_0, CLF_Q4_0)},
    {"Q4_1", 3, MIXED(CLF_Q8_0, CLF_Q4_1, CLF_Q4_1, CLF_Q4_1)},
    {"Q5_0", 8, MIXED(CLF_Q8_0, CLF_Q5_0, CLF_Q5_0, CLF_Q5_0)},
    {"Q5_1", 9, MIXED(CLF_Q8_0, CLF_Q5_1, CLF_Q5_1, CLF_Q5_1)},
    {"IQ4_NL", 25, MIXED(CLF_Q8_0, CLF_IQ4_NL, CLF_IQ4_NL, CLF_IQ4_NL)},
    {"Q6_K", 18, MIXED(CLF_Q8_0, CLF_Q8_0, CLF_Q8_0, CLF_Q6_K)},
    {"Q5_K_M", 17, MIXED(CLF_Q8_0, CLF_Q5_1, CLF_Q8_0, CLF_Q5_K)},
    {"Q4_K_M", 15, MIXED(CLF_Q8_0, CLF_Q5_0, CLF_Q8_0, CLF_Q4_K)},
    {"Q4_K_S", 14, MIXED(CLF_Q8_0, CLF_Q5_0, CLF_Q5_0, CLF_Q4_K)},
    {"Q3_K_M", 12, MIXED(CLF_Q8_0, CLF_Q4_0, CLF_Q5_0, CLF_Q3_K)},
    {"Q2_K", 10, MIXED(CLF_Q8_0, CLF_Q4_0, CLF_Q4_0, CLF_Q2_K)},
    /* experts (the 3-D cube) MXFP4, every other matrix Q8_0 */
    {"MXFP4_MOE", 38, {CLF_Q8_0, CLF_Q8_0, CLF_Q8_0, CLF_MXFP4, CLF_F32, CLF_F32, CLF_F32, CLF_Q8_0}},
};

/* Relative error bounds on uniform [-1, 1] data: F16 rounds to 11 bits
 * (~2e-4), BF16 to 8 (~2e-3); a b-bit grid over the range steps ~2/2^b. */
static double type_tol(clf_type t) {
    switch (t) {
    case CLF_F32: return 0.0;
    case CLF_F16: return 1e-3;
    case CLF_BF16: return 5e-3;
    case CLF_Q8_0: return 0.01;
    case CLF_Q6_K: return 0.03;
    case CLF_Q5_0: case CLF_Q5_1: case CLF_Q5_K: return 0.06;
    case CLF_Q4_0: case CLF_Q4_1: case CLF_Q4_K: case CLF_IQ4_NL: return 0.12;
    case CLF_Q3_K: return 0.25;
    case CLF_MXFP4: return 0.2; /* E2M1: 3-bit magnitudes, a power-of-two scale */
    default: return 0.5; /* Q2_K */
    }
}

static void test_every_type(void **state) {
    (void)state;
    PATH(src_path, "src.gguf");
    clf_gguf *src;
    TU_OK(clf_gguf_open(src_path, &src));
    for (size_t k = 0; k < sizeof TARGETS / sizeof TARGETS[0]; k++) {
        const target *tg = &TARGETS[k];
        char out_name[32];
        snprintf(out_name, sizeof out_name, "out-%s.gguf", tg->arg);
        PATH(out, out_name);
        assert_int_equal(run("%s quantize %s %s %s 2>/dev/null", bin(), src_path, out, tg->arg), 0);
        clf_gguf *g;
        TU_OK(clf_gguf_open(out, &g));
        check_metadata(src, g, tg->ftype);
        assert_int_equal(clf_gguf_n_tensors(g), N_T);
        printf("  %-6s", tg->arg);
        for (int i = 0; i < N_T; i++) {
            const clf_gguf_tensor *t = clf_gguf_find_tensor(g, TENSORS[i].name);
            if (t->type != tg->types[i])
                fail_msg("%s as %s: stored %s, llama.cpp's mix %s", TENSORS[i].name, tg->arg,
                         clf_type_get(t->type)->name, clf_type_get(tg->types[i])->name);
            assert_int_equal(t->offset % 64, 0);
            double e = tensor_err(g, i), tol = type_tol(t->type);
            if (!(e <= tol)) fail_msg("%s as %s (%s): error %g > %g", TENSORS[i].name, tg->arg, clf_type_get(t->type)->name, e, tol);
            if (t->type != CLF_F32) printf(" %s %.1e", clf_type_get(t->type)->name, e);
        }
        printf("  (relative errors of the converted matrices)\n");
        clf_gguf_close(g);
    }
    clf_gguf_close(src);
}

/* From quantized inputs: Q8_0 -> Q4_1 (with --allow-requantize) and F16 against the F32 source; the
 * same type again is a byte copy; Q4_K_M -> F32 is the dequantized weights. */
static void test_requantize(void **state) {
    (void)state;
    PATH(src, "src.gguf");
    PATH(q8, "chain-q8.gguf");
    PATH(q41, "chain-q41.gguf");
    PATH(f16, "chain-f16.gguf");
    PATH(again, "chain-q8b.gguf");
    assert_int_equal(run("%s quantize %s %s Q8_0 2>/dev/null", bin(), src, q8), 0);
    /* a quantized input is refused unless asked (llama-quantize's --allow-requantize) */
    assert_int_not_equal(run("%s quantize %s %s Q4_1 2>/dev/null", bin(), q8, q41), 0);
    assert_int_equal(run("%s quantize --allow-requantize %s %s Q4_1 2>/dev/null", bin(), q8, q41), 0);
    assert_int_equal(run("%s quantize %s %s F16 2>/dev/null", bin(), q8, f16), 0);
    assert_int_equal(run("%s quantize %s %s Q8_0 2>/dev/null", bin(), q8, again), 0);
    clf_gguf *a, *b, *c, *d;
    TU_OK(clf_gguf_open(q8, &a));
    TU_OK(clf_gguf_open(q41, &b));
    TU_OK(clf_gguf_open(f16, &c));
    TU_OK(clf_gguf_open(again, &d));
    for (int i = 0; i < N_T; i++) {
        double e8 = tensor_err(a, i), e41 = tensor_err(b, i), e16 = tensor_err(c, i);
        /* Q4_1 of Q8_0 values: the 4-bit error plus a little */
        assert_true(e41 <= 0.12);
        /* F16 of Q8_0 values: Q8_0's error; F16 adds ~2e-4 */
        assert_true(fabs(e16 - e8) <= 1e-3);
        const clf_gguf_tensor *x = clf_gguf_tensor_at(a, i), *y = clf_gguf_find_tensor(d, TENSORS[i].name);
        assert_int_equal(x->type, y->type);
        assert_memory_equal(x->data, y->data, x->bytes);
    }
    clf_gguf_close(a);
    clf_gguf_close(b);
    clf_gguf_close(c);
    clf_gguf_close(d);

    /* from a K-quant mix back to F32: exactly the dequantized weights */
    PATH(km, "chain-q4km.gguf");
    PATH(kf, "chain-q4km-f32.gguf");
    assert_int_equal(run("%s quantize %s %s Q4_K_M 2>/dev/null", bin(), src, km), 0);
    assert_int_equal(run("%s quantize %s %s F32 2>/dev/null", bin(), km, kf), 0);
    TU_OK(clf_gguf_open(km, &a));
    TU_OK(clf_gguf_open(kf, &b));
    for (int i = 0; i < N_T; i++) {
        const clf_gguf_tensor *x = clf_gguf_find_tensor(a, TENSORS[i].name), *y = clf_gguf_find_tensor(b, TENSORS[i].name);
        assert_int_equal(y->type, CLF_F32);
        size_t n = (size_t)nel(&TENSORS[i]);
        float *f = malloc(n * sizeof *f);
        clf_dequantize(x->type, x->data, f, (int64_t)n);
        assert_memory_equal(f, y->data, n * sizeof *f);
        free(f);
    }
    clf_gguf_close(a);
    clf_gguf_close(b);
}

static int dir_entries(void) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_failures(void **state) {
    (void)state;
    PATH(src, "src.gguf");
    PATH(out, "never.gguf");
    PATH(text, "text.gguf");
    int before = dir_entries();
    assert_int_equal(run("%s quantize %s/missing.gguf %s Q8_0 2>/dev/null", bin(), dir, out), 3);
    assert_int_equal(run("%s quantize %s %s Q8_0 2>/dev/null", bin(), dir, out), 3); /* a directory */
    FILE *f = fopen(text, "w");
    fputs("this is not a model\n", f);
    fclose(f);
    assert_int_equal(run("%s quantize %s %s Q8_0 2>/dev/null", bin(), text, out), 4);
    unlink(text);
    assert_int_equal(run("%s quantize %s %s IQ2_XS 2>/dev/null", bin(), src, out), 2);
    assert_int_equal(run("%s quantize %s %s 2>/dev/null", bin(), src, out), 2);
    assert_int_equal(run("%s quantize %s /nonexistent-dir/x.gguf Q8_0 2>/dev/null", bin(), src), 3);
    assert_int_equal(run("%s quantize %s %s/x.gguf Q8_0 2>/dev/null", bin(), src, src), 3); /* parent is a file */
    /* a write that fails midway (file size limit of 4 KiB, SIGXFSZ ignored
     * so write() returns EFBIG): no output and no temporary are left */
    assert_int_equal(run("trap '' XFSZ; ulimit -f 4; %s quantize %s %s Q8_0 2>/dev/null", bin(), src, out), 3);
    assert_int_equal(dir_entries(), before);
    /* the message names the problem */
    assert_int_equal(run("%s quantize %s/missing.gguf %s Q8_0 2>&1 | grep -q \"missing.gguf\"", bin(), dir, out), 0);
}

/* Progress: one line rewritten with \r on a terminal (script(1) gives the
 * command one); into a file, only the summary line. */
static void test_progress(void **state) {
    (void)state;
    PATH(src, "src.gguf");
    PATH(out, "progress.gguf");
    PATH(log, "progress.log");
    assert_int_equal(run("%s quantize --force %s %s Q4_K_M 2>%s", bin(), src, out, log), 0);
    assert_int_equal(run("test $(wc -l < %s) -eq 1 && grep -q '^clinfer: wrote ' %s && ! grep -q \"$(printf '\\r')\" %s",
                         log, log, log), 0);
    if (run("command -v script >/dev/null") != 0) {
        printf("[  SKIPPED ] script(1) is absent: the terminal case\n");
        tu_skip_log(0, __func__, "script(1) is absent (util-linux): the terminal case did not run");
        return;
    }
    if (run("script -qec '%s quantize --force %s %s Q4_K_M' /dev/null > %s 2>&1", bin(), src, out, log) != 0) {
        run("cat %s", log);
        fail_msg("quantize under script(1) failed");
    }
    assert_int_equal(run("grep -q \"$(printf '\\r')clinfer: quantizing 1/%d \" %s", N_T, log), 0);
    unlink(out);
}

/* ---- peers ------------------------------------------------------------------------- */

/* tests/data/peer_quantize.txt (tests/peer/record_quantize.py): the peers'
 * conversions, recorded live against gguf-py and llama.cpp's ggml, as the
 * FNV-1a 64 of each converted tensor's bytes ("B SOURCE TARGET TENSOR TYPE
 * HASH"), and llama.cpp's verdict on the default model converted ("L TYPE
 * FILE_HASH FIGURES"). Missing or unreadable: a failure. */
#define PEER_QUANTIZE_DATA "tests/data/peer_quantize.txt"
#define PEER_SEED "11" /* record_quantize.py SEED */

static uint64_t fnv_bytes(const void *p, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (const unsigned char *b = p; n--; b++) h = (h ^ *b) * 0x100000001B3ull;
    return h;
}

static FILE *peer_data(void) {
    FILE *f = fopen(PEER_QUANTIZE_DATA, "r");
    if (!f) fail_msg("cannot open %s (tests run from the repository root)", PEER_QUANTIZE_DATA);
    return f;
}

/* clinfer's conversion of `in` (of source `source`) to `target` holds the
 * recorded tensors, type for type and byte for byte, and converts no
 * other; the number of tensors checked. */
static int check_recorded(const char *source, const char *in, const char *out, const char *target) {
    clf_gguf *gi, *go;
    TU_OK(clf_gguf_open(in, &gi));
    TU_OK(clf_gguf_open(out, &go));
    FILE *f = peer_data();
    char line[512], src[32], tg[32], name[128], type[16];
    uint64_t h;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "B %31s %31s %127s %15s %" SCNx64, src, tg, name, type, &h) != 5 || strcmp(src, source) ||
            strcmp(tg, target))
            continue;
        const clf_gguf_tensor *t = clf_gguf_find_tensor(go, name);
        if (!t) fail_msg("%s as %s: no tensor %s", source, target, name);
        if (strcasecmp(clf_type_get(t->type)->name, type))
            fail_msg("%s as %s: %s is %s, the peers wrote %s", source, target, name, clf_type_get(t->type)->name, type);
        if (fnv_bytes(t->data, t->bytes) != h)
            fail_msg("%s as %s: %s (%s) differs from the peers' conversion", source, target, name, type);
        n++;
    }
    fclose(f);
    int converted = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(go); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(go, i);
        char tn[128];
        snprintf(tn, sizeof tn, "%.*s", (int)t->name.len, t->name.ptr); /* names are length-delimited */
        const clf_gguf_tensor *u = clf_gguf_find_tensor(gi, tn);
        if (!u) fail_msg("%s as %s: %s is not in the source", source, target, tn);
        converted += u->type != t->type;
    }
    if (n == 0 || converted != n)
        fail_msg("%s as %s: %d tensors converted, %d recorded in %s", source, target, converted, n, PEER_QUANTIZE_DATA);
    clf_gguf_close(gi);
    clf_gguf_close(go);
    return n;
}

/* Every type and mix of the recording: converted here, the bytes the peers
 * wrote from the same seeded sources. */
static void test_peer_bytes(void **state) {
    (void)state;
    const char *tiny = getenv("CLINFER_TINY_GGUF");
    if (!tiny) fail_msg("CLINFER_TINY_GGUF is not set (run through ctest)");
    PATH(plain, "peer-plain.gguf");
    PATH(kquant, "peer-kquant.gguf");
    PATH(out, "peer-out.gguf");
    PATH(q8, "peer-plain-q8.gguf");
    assert_int_equal(run("%s model %s F32 --seed " PEER_SEED " >/dev/null", tiny, plain), 0);
    assert_int_equal(run("%s model %s F32 --kquant --seed " PEER_SEED " >/dev/null", tiny, kquant), 0);
    FILE *f = peer_data();
    char line[512], src[32], tg[32], last[64] = "";
    int files = 0, tensors = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "B %31s %31s", src, tg) != 2) continue;
        char key[64];
        snprintf(key, sizeof key, "%s %s", src, tg);
        if (!strcmp(key, last)) continue; /* one conversion per source and target */
        snprintf(last, sizeof last, "%s", key);
        const char *in = !strcmp(src, "plain") ? plain : !strcmp(src, "kquant") ? kquant : NULL;
        if (!strcmp(src, "plain>Q8_0")) {
            assert_int_equal(run("%s quantize --force %s %s Q8_0 2>/dev/null", bin(), plain, q8), 0);
            in = q8;
        }
        if (!in) fail_msg("%s: unknown source '%s'", PEER_QUANTIZE_DATA, src);
        assert_int_equal(run("%s quantize --force --allow-requantize %s %s %s 2>/dev/null", bin(), in, out, tg), 0);
        int n = check_recorded(src, in, out, tg);
        printf("  %-10s as %-7s %2d tensors byte-identical to the peers'\n", src, tg, n);
        files++;
        tensors += n;
    }
    fclose(f);
    assert_true(files >= 16 && tensors >= 100); /* 8 plain types, 6 mixes, 2 from Q8_0 */
}

/* tests/data/peer_mxfp4.txt (tests/peer/record_mxfp4.py): llama-quantize's
 * MXFP4_MOE conversion of a file with experts, and that file back to F32.
 * The source's values are an integer hash of each element's index (24
 * bits, exact in float) scaled by a power of two per block: computed here
 * as the script computes them, so the source is the same file's worth of
 * floats without Python. */
#define PEER_MXFP4_DATA "tests/data/peer_mxfp4.txt"

static float mxfp4_value(int t, uint64_t i) {
    uint64_t h = (i * 2654435761u + (uint64_t)t * 40503u + 1u) & 0xffffffffu;
    h ^= h >> 15;
    h = (h * 2246822519u) & 0xffffffffu;
    h ^= h >> 13;
    double x = (double)(h >> 8) / 8388608.0 - 1.0; /* 2^23 */
    const uint64_t b = i / 32, k = (b * 7 + (uint64_t)t) % 25;
    x = ldexp(x, (int)k - 16);
    if (b % 16 == 3 && i % 32 == 5) x *= 1024.0; /* the block's outlier */
    return (float)x;
}

static void test_peer_mxfp4(void **state) {
    (void)state;
    PATH(src, "mxfp4-src.gguf");
    PATH(mx, "mxfp4-moe.gguf");
    PATH(f32, "mxfp4-f32.gguf");
    FILE *f = fopen(PEER_MXFP4_DATA, "r");
    if (!f) fail_msg("cannot open %s (tests run from the repository root)", PEER_MXFP4_DATA);
    /* the source: the recorded tensors (T lines), norms as the script adds them */
    clf_gguf_writer *w;
    TU_OK(clf_gguf_writer_create(&w));
    TU_OK(clf_gguf_set_str(w, "general.architecture", "llama"));
    TU_OK(clf_gguf_set_u32(w, "llama.block_count", 1));
    TU_OK(clf_gguf_set_u32(w, "llama.expert_count", 4));
    TU_OK(clf_gguf_set_u32(w, "general.file_type", 0));
    char line[512], a[32], name[128], type[16];
    int nt = 0;
    while (fgets(line, sizeof line, f)) {
        int64_t ne[4] = {1, 1, 1, 1};
        if (sscanf(line, "T %127s %" SCNd64 " %" SCNd64 " %" SCNd64, name, &ne[0], &ne[1], &ne[2]) != 4) continue;
        const size_t n = (size_t)(ne[0] * ne[1] * ne[2]);
        float *x = malloc(n * sizeof *x);
        assert_non_null(x);
        for (size_t i = 0; i < n; i++) x[i] = mxfp4_value(nt, i);
        TU_OK(clf_gguf_add_tensor(w, name, CLF_F32, ne[2] > 1 ? 3 : 2, ne, x));
        free(x);
        nt++;
    }
    static const float ones[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                   1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    static const char *const norms[] = {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"};
    for (int i = 0; i < 3; i++) TU_OK(clf_gguf_add_tensor(w, norms[i], CLF_F32, 1, (int64_t[4]){64, 1, 1, 1}, ones));
    TU_OK(clf_gguf_write(w, src));
    clf_gguf_writer_free(w);
    assert_true(nt >= 7);
    /* clinfer's conversions, as llama-quantize made them */
    assert_int_equal(run("%s quantize --force %s %s MXFP4_MOE 2>/dev/null", bin(), src, mx), 0);
    assert_int_equal(run("%s quantize --force --allow-requantize %s %s F32 2>/dev/null", bin(), mx, f32), 0);
    clf_gguf *g[2];
    TU_OK(clf_gguf_open(mx, &g[0]));
    TU_OK(clf_gguf_open(f32, &g[1]));
    int checked[2] = {0, 0}, mxfp4 = 0;
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        uint64_t h;
        if (sscanf(line, "Q %31s %127s %15s %" SCNx64, a, name, type, &h) != 4) continue;
        const int k = strcmp(a, "MXFP4_MOE") != 0;
        const clf_gguf_tensor *t = clf_gguf_find_tensor(g[k], name);
        if (!t) fail_msg("%s as %s: no tensor", name, a);
        if (strcasecmp(clf_type_get(t->type)->name, type))
            fail_msg("%s as %s: %s, llama-quantize wrote %s", name, a, clf_type_get(t->type)->name, type);
        if (fnv_bytes(t->data, t->bytes) != h)
            fail_msg("%s as %s (%s): bytes differ from llama-quantize's", name, a, type);
        checked[k]++;
        mxfp4 += t->type == CLF_MXFP4;
    }
    fclose(f);
    clf_gguf_close(g[0]);
    clf_gguf_close(g[1]);
    printf("  MXFP4_MOE: %d tensors (%d MXFP4), back to F32: %d, byte-identical to llama-quantize's\n", checked[0],
           mxfp4, checked[1]);
    assert_true(checked[0] >= 6 && checked[1] >= 6 && mxfp4 >= 3);
}

/* Every mix recorded by tests/peer/record_kquant.py: the tiny K-quant model
 * rebuilt and quantized by clinfer has, tensor for tensor, the types and
 * bytes llama.cpp's llama_model_quantize wrote from the same source (their
 * hash); no Python needed. */
static void test_peer_kquant_files(void **state) {
    (void)state;
    char mixes[16][16], path[256];
    int n = peer_kquant_mixes(mixes, 16);
    assert_true(n >= 9);
    for (int i = 0; i < n; i++) {
        peer_kquant_model(dir, mixes[i], path, sizeof path);
        printf("  %-7s tensors identical to llama.cpp's quantization\n", mixes[i]);
        unlink(path);
    }
}

/* The default model converted to Q8_0, F16, Q4_0 and Q4_K_M (Q5_0, Q4_K,
 * Q6_K and Q8_0 tensors): the very bytes llama.cpp loaded and judged close
 * to the source when recorded (tests/peer/record_quantize.py); the first
 * three also run in clinfer. */
static void test_default_model_converted(void **state) {
    (void)state;
    char model[4096];
    if (clf_model_path(NULL, model, sizeof model) != CLF_OK) TU_SKIP("%s", clf_last_error());
    static const char *const types[] = {"Q8_0", "F16", "Q4_0"};
    for (int k = 0; k < 3; k++)
        assert_int_equal(run("%s quantize --allow-requantize %s %s/model-%s.gguf %s", bin(), model, dir, types[k], types[k]), 0);
    assert_int_equal(run("%s quantize --allow-requantize %s %s/model-Q4_K_M.gguf Q4_K_M", bin(), model, dir), 0);

    /* llama.cpp: its verdict on exactly these bytes, recorded (L lines) */
    static const char *const judged[] = {"Q8_0", "F16", "Q4_0", "Q4_K_M"};
    for (int k = 0; k < 4; k++) {
        char path[256], line[1024], type[16], want[20];
        snprintf(path, sizeof path, "%s/model-%s.gguf", dir, judged[k]);
        clf_gguf *g;
        TU_OK(clf_gguf_open(path, &g));
        uint64_t h = peer_tensor_hash(g), rh = 0;
        clf_gguf_close(g);
        FILE *f = peer_data();
        int found = 0;
        while (!found && fgets(line, sizeof line, f))
            found = sscanf(line, "L %15s %" SCNx64, type, &rh) == 2 && !strcmp(type, judged[k]);
        fclose(f);
        if (!found) fail_msg("%s: no L line for %s", PEER_QUANTIZE_DATA, judged[k]);
        snprintf(want, sizeof want, "%016" PRIx64, rh);
        if (h != rh)
            fail_msg("the default model as %s: tensors hash %016" PRIx64 ", llama.cpp judged %s (a changed quantizer or "
                     "model: re-record with tests/peer/record_quantize.py)", judged[k], h, want);
        printf("  %-6s the bytes llama.cpp judged: %s", judged[k], strchr(strchr(line + 2, ' ') + 1, ' ') + 1);
    }

    /* clinfer: every file generates; Q8_0 continues greedily as the source,
     * both with float prompts (int8_gemm=0): the source's 5th token is a
     * near-tie (' answer' 14.66, ' United' 14.52), which prefill's int8
     * activations move by ~0.3 and flip */
    const char *prompt = "The capital of France is";
    assert_int_equal(run("CLINFER_TUNE=int8_gemm=0 %s run -m %s -p '%s' -n 6 > %s/gen-src.txt 2>/dev/null", bin(), model,
                         prompt, dir), 0);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(run("CLINFER_TUNE=int8_gemm=0 %s run -m %s/model-%s.gguf -p '%s' -n 6 > %s/gen-%s.txt 2>/dev/null", bin(), dir,
                             types[k], prompt, dir, types[k]), 0);
        assert_int_equal(run("test -s %s/gen-%s.txt", dir, types[k]), 0);
        run("rm -f %s/model-%s.gguf", dir, types[k]);
    }
    assert_int_equal(run("cmp -s %s/gen-src.txt %s/gen-Q8_0.txt", dir, dir), 0);
    run("rm -f %s/model-Q4_K_M.gguf", dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type), cmocka_unit_test(test_requantize),
        cmocka_unit_test(test_failures),   cmocka_unit_test(test_peer_bytes),
        cmocka_unit_test(test_peer_kquant_files), cmocka_unit_test(test_peer_mxfp4),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_default_model_converted),
    };
    return TU_RUN_GROUP(tests, setup, teardown);
}

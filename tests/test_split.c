/* A model split by layers across two OpenCL devices (models/stage.h,
 * models/split.h): the plan's arithmetic, and the logits of a split run
 * against the one-device run — a prompt in pipelined chunks, decodes, a
 * rewind, two sequences through clf_llama_eval_seqs, every token's logits —
 * on tiny models (llama; gemma3's sliding-window ring and tied head over
 * three stages) and the default model. PoCL exposes two CPU devices with
 * POCL_DEVICES="pthread pthread" (set by CMakeLists.txt for this test). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "llama.h"
#include "model_path.h"
#include "ref_llama.h"
#include "split.h"
#include "testutil.h"

/* The same kernels on the same values on either device: the hop copies
 * floats exactly, so the logits are equal (1e-6 allows a device whose
 * kernels differ in summation order). */
#define TOL 1e-6
#define TOP_K 40 /* clf_llama_eval_top's k */

/* ---- the plan ---------------------------------------------------------------- */

static void synthetic(clf_split_model *sm, int n_layer) {
    memset(sm, 0, sizeof *sm);
    sm->n_layer = n_layer;
    sm->n_embd = 576;
    sm->n_vocab = 1000;
    for (int l = 0; l < n_layer; l++) sm->layer_bytes[l] = 10e6, sm->layer_kv[l] = 1e6;
    sm->first_bytes = 20e6;
    sm->last_bytes = 30e6;
    sm->common_bytes = 1e3;
    sm->scratch_bytes = 2e6;
    sm->logits_bytes = 4e3;
}

static void test_plan(void **state) {
    (void)state;
    clf_split_model sm;
    synthetic(&sm, 10);
    clf_split_plan p;
    double even[2] = {1, 1}, mem[2] = {1e9, 1e9};
    TU_OK(clf_split_plan_make(&sm, 2, even, mem, &p));
    assert_int_equal(p.n, 2);
    assert_int_equal(p.st[0].l0, 0);
    assert_int_equal(p.st[0].l1, 5);
    assert_int_equal(p.st[1].l0, 5);
    assert_int_equal(p.st[1].l1, 10);
    assert_true(p.hop_bytes_per_token == 576 * 4);
    /* the embedding on the first stage, the head on the last, the rest on both */
    assert_true(p.st[0].weight_bytes == 5 * 10e6 + 20e6 + 1e3);
    assert_true(p.st[1].weight_bytes == 5 * 10e6 + 30e6 + 1e3);
    assert_true(p.st[0].kv_bytes == 5e6 && p.st[1].kv_bytes == 5e6);
    assert_true(p.st[0].scratch_bytes == 2e6 && p.st[1].scratch_bytes == 2e6 + 4e3);
    assert_true(p.st[1].total_bytes == p.st[1].weight_bytes + p.st[1].kv_bytes + p.st[1].scratch_bytes);

    /* no ratio: in proportion to memory */
    double mem31[2] = {3e9, 1e9};
    TU_OK(clf_split_plan_make(&sm, 2, NULL, mem31, &p));
    assert_int_equal(p.st[0].l1, 8); /* 7.5 rounds up */
    /* every stage keeps a layer, however small its share */
    double tiny[3] = {1000, 1, 1}, mem3[3] = {1e9, 1e9, 1e9};
    TU_OK(clf_split_plan_make(&sm, 3, tiny, mem3, &p));
    assert_int_equal(p.st[0].l1, 8);
    assert_int_equal(p.st[1].l0, 8);
    assert_int_equal(p.st[1].l1, 9);
    assert_int_equal(p.st[2].l1, 10);

    /* a stage that does not fit is refused with its numbers, the plan filled */
    double small[2] = {1e9, 50e6};
    assert_int_equal(clf_split_plan_make(&sm, 2, even, small, &p), CLF_ERR_MEMORY);
    assert_non_null(strstr(clf_last_error(), "stage 1 (layers 5-9) needs"));
    assert_non_null(strstr(clf_last_error(), "its device has 47.7 MiB"));
    assert_int_equal(p.n, 2);
    /* more stages than layers, or a share that is no number */
    assert_int_equal(clf_split_plan_make(&sm, 11, NULL, NULL, &p), CLF_ERR_ARG);
    assert_int_equal(clf_split_plan_make(&sm, 2, NULL, NULL, &p), CLF_ERR_ARG);
    double bad[2] = {1, 0};
    assert_int_equal(clf_split_plan_make(&sm, 2, bad, mem, &p), CLF_ERR_ARG);
}

static void test_parse_ratio(void **state) {
    (void)state;
    double r[4];
    int n;
    TU_OK(clf_split_parse_ratio("3,1.5", r, 4, &n));
    assert_int_equal(n, 2);
    assert_true(r[0] == 3 && r[1] == 1.5);
    TU_OK(clf_split_parse_ratio("1", r, 4, &n));
    assert_int_equal(n, 1);
    static const char *const bad[] = {"", "1,,2", "a", "0,1", "-1,2", "1,", "1x", "inf,1", "1,2,3,4,5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(clf_split_parse_ratio(bad[i], r, 4, &n), CLF_ERR_ARG);
        print_message("  '%s': %s\n", bad[i], clf_last_error());
    }
}

/* ---- split against one device ------------------------------------------------- */

static clf_runtime *rts[2];

static int setup(void **state) {
    (void)state;
    clf_device *devs;
    int n;
    if (clf_devices_list(&devs, &n) != CLF_OK) return -1;
    if (n < 2) {
        fprintf(stderr, "test_split: %d OpenCL device(s); a split needs two (POCL_DEVICES=\"pthread pthread\")\n", n);
        free(devs);
        return -1; /* fails every test: a split is never silently skipped */
    }
    for (int i = 0; i < 2; i++) {
        char sel[32];
        snprintf(sel, sizeof sel, "%d:%d", devs[i].platform_index, devs[i].device_index);
        if (clf_runtime_create(sel, &rts[i]) != CLF_OK) {
            fprintf(stderr, "test_split: %s\n", clf_last_error());
            free(devs);
            return -1;
        }
    }
    free(devs);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) clf_runtime_free(rts[i]);
    return 0;
}

enum { N_ROWS = 25, PROMPT = 20 };

/* The same calls on a context of m, every logits row they return into out
 * ([N_ROWS × V]): a 20-token prompt in chunks of 8, four decodes, a rewind
 * and three tokens again, two sequences batched, a fresh context's every
 * token's logits. */
static void script(clf_llama *m, const int32_t *toks, int V, float *out, float *top_vals, int32_t *top_ids) {
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create_seqs(m, 64, 8, 2, CLF_F32, &c));
    float *row = out;
    TU_OK(clf_llama_eval(c, toks, PROMPT, 0, row));
    row += V;
    for (int i = 0; i < 4; i++, row += V) TU_OK(clf_llama_eval(c, &toks[PROMPT + i], 1, 0, row));
    clf_llama_rewind(c, 15);
    assert_int_equal(c->n_past, 15);
    TU_OK(clf_llama_eval(c, &toks[30], 3, 0, row));
    row += V;
    clf_llama_seq_batch one = {.seq = 1, .tokens = &toks[33], .n = 9, .logits = row};
    TU_OK(clf_llama_eval_seqs(c, &one, 1));
    row += V;
    for (int step = 0; step < 3; step++) {
        clf_llama_seq_batch b[2] = {{.seq = 0, .tokens = &toks[42 + step], .n = 1, .logits = row}, {.seq = 1, .tokens = &toks[45 + step], .n = 1, .logits = row + V}};
        TU_OK(clf_llama_eval_seqs(c, b, 2));
        row += 2 * V;
    }
    assert_int_equal(clf_llama_seq_len(c, 0), 21);
    assert_int_equal(clf_llama_seq_len(c, 1), 12);
    /* a sequence copy: one device's; refused over a split, changing nothing */
    assert_int_equal(clf_llama_seq_copy(c, 0, 1, 5), c->next ? CLF_ERR_ARG : CLF_OK);
    assert_int_equal(clf_llama_seq_len(c, 1), c->next ? 12 : 5);
    clf_llama_ctx_free(c);
    TU_OK(clf_llama_ctx_create(m, 64, 8, CLF_F32, &c));
    TU_OK(clf_llama_eval(c, &toks[50], 12, 1, row));
    row += 12 * V;
    assert_int_equal((row - out) / V, N_ROWS);
    /* and the best TOP_K of a prompt's last logits (over a split, chosen on the host) */
    int bad = -1;
    clf_llama_rewind(c, 0);
    TU_OK(clf_llama_eval_top(c, &toks[50], 12, TOP_K, top_vals, top_ids, &bad));
    assert_int_equal(bad, 0);
    clf_llama_ctx_free(c);
}

/* Runs the script on one device and split at `cuts` (n_stage - 1 layer
 * boundaries, stages alternating between the two devices). */
static void compare(const clf_gguf *g, const int *cuts, int n_stage) {
    clf_llama *ref;
    TU_OK(clf_llama_load(rts[0], g, &ref));
    const int V = ref->hp.n_vocab, L = ref->hp.n_layer;
    int32_t toks[64];
    uint64_t r = tu_seed() ^ 0x5117;
    for (int i = 0; i < 64; i++) toks[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *want = malloc((size_t)N_ROWS * V * sizeof *want), *got = malloc((size_t)N_ROWS * V * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    float want_top[TOP_K], got_top[TOP_K];
    int32_t want_ids[TOP_K], got_ids[TOP_K];
    script(ref, toks, V, want, want_top, want_ids);
    clf_llama_free(ref);

    int l0[4], l1[4];
    clf_runtime *on[4];
    for (int s = 0; s < n_stage; s++) {
        l0[s] = s ? cuts[s - 1] : 0;
        l1[s] = s < n_stage - 1 ? cuts[s] : L;
        on[s] = rts[s % 2];
    }
    clf_llama *stages[4];
    TU_OK(clf_stage_local_load(on, n_stage, g, l0, l1, stages));
    /* each stage holds its own layers only */
    assert_null(stages[0]->out_norm.mem);
    assert_null(stages[n_stage - 1]->tok_embd.mem);
    assert_null(stages[n_stage - 1]->layers[0].attn_norm.mem);
    memset(got, 0xff, (size_t)N_ROWS * V * sizeof *got);
    script(stages[0], toks, V, got, got_top, got_ids);
    clf_stage_local_free(stages, n_stage);

    double worst = 0;
    for (int i = 0; i < N_ROWS; i++) {
        double e = tu_rel_err_f(got + (size_t)i * V, want + (size_t)i * V, (size_t)V);
        if (e > worst) worst = e;
    }
    print_message("  %d layers in %d stages: max rel diff split vs one device %.2e (tol %.0e)\n", L, n_stage, worst,
                  TOL);
    assert_true(worst <= TOL);
    assert_memory_equal(got_ids, want_ids, sizeof want_ids);
    assert_true(tu_rel_err_f(got_top, want_top, TOP_K) <= TOL);
    free(want);
    free(got);
}

/* A link as an MPI rank 0 sees one: its pass relays the activations
 * through stages whose contexts have no link of their own, each
 * clf_llama_stage_pass returning activations but the last's logits. */
typedef struct relay {
    clf_llama *m[2];
    clf_llama_ctx *c[2];
    float *x;
} relay;

static const clf_stage_ops relay_ops;

static clf_status relay_create(void *next, int n_ctx, int n_batch, int n_seq, clf_type kv, clf_stage_link **out) {
    relay *r = calloc(1, sizeof *r);
    clf_stage_link *l = calloc(1, sizeof *l);
    memcpy(r->m, next, sizeof r->m);
    r->x = malloc((size_t)n_batch * r->m[0]->hp.n_embd * sizeof(float));
    for (int i = 0; i < 2; i++) CLF_TRY(clf_llama_ctx_create_seqs(r->m[i], n_ctx, n_batch, n_seq, kv, &r->c[i]));
    l->ops = &relay_ops;
    l->impl = r;
    *out = l;
    return CLF_OK;
}

static clf_status relay_pass(clf_stage_link *l, const clf_stage_pass *p, const float *x, float *logits) {
    relay *r = l->impl;
    CLF_TRY(clf_llama_stage_pass(r->c[0], p, x, r->x));
    return clf_llama_stage_pass(r->c[1], p, r->x, logits);
}

static void relay_rewind(clf_stage_link *l, int seq, int pos) {
    relay *r = l->impl;
    for (int i = 0; i < 2; i++) clf_llama_seq_rewind(r->c[i], seq, pos);
}

static void relay_free(clf_stage_link *l) {
    relay *r = l->impl;
    for (int i = 0; i < 2; i++) clf_llama_ctx_free(r->c[i]);
    free(r->x);
    free(r);
    free(l);
}

static const clf_stage_ops relay_ops = {relay_create, relay_pass, relay_rewind, relay_free};

static void test_relay(void **state) {
    (void)state;
    tiny_model tm = {.arch = "qwen3", .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_embd = 96,
                     .n_ff = 160, .n_vocab = 97, .type = CLF_Q8_0};
    char path[] = "/tmp/clinfer-split-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_llama *ref, *first, *rest[2];
    TU_OK(clf_llama_load(rts[0], g, &ref));
    const int V = ref->hp.n_vocab;
    int32_t toks[64];
    uint64_t r = tu_seed() ^ 0x7e1a;
    for (int i = 0; i < 64; i++) toks[i] = (int32_t)(tu_next(&r) % (uint64_t)V);
    float *want = malloc((size_t)N_ROWS * V * sizeof *want), *got = malloc((size_t)N_ROWS * V * sizeof *got);
    float want_top[TOP_K], got_top[TOP_K];
    int32_t want_ids[TOP_K], got_ids[TOP_K];
    script(ref, toks, V, want, want_top, want_ids);
    clf_llama_free(ref);
    TU_OK(clf_llama_load_range(rts[0], g, 0, 1, &first));
    TU_OK(clf_llama_load_range(rts[1], g, 1, 3, &rest[0]));
    TU_OK(clf_llama_load_range(rts[0], g, 3, 4, &rest[1]));
    /* a first stage that is not the last, with nowhere to send its activations */
    clf_llama_ctx *alone;
    TU_OK(clf_llama_ctx_create(first, 16, 4, CLF_F32, &alone));
    assert_int_equal(clf_llama_eval(alone, toks, 2, 0, got), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "layers 0-0 end before the head"));
    assert_int_equal(alone->n_past, 0);
    clf_llama_ctx_free(alone);
    clf_llama_set_next(first, &relay_ops, rest);
    /* a stage that is not the last, without a link: its pass returns activations */
    script(first, toks, V, got, got_top, got_ids);
    double worst = 0;
    for (int i = 0; i < N_ROWS; i++) {
        double e = tu_rel_err_f(got + (size_t)i * V, want + (size_t)i * V, (size_t)V);
        if (e > worst) worst = e;
    }
    print_message("  relayed by the caller over 3 stages: max rel diff %.2e (tol %.0e)\n", worst, TOL);
    assert_true(worst <= TOL);
    assert_memory_equal(got_ids, want_ids, sizeof want_ids);
    assert_true(tu_rel_err_f(got_top, want_top, TOP_K) <= TOL);
    /* a pass that does not continue its sequences is refused */
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(rest[0], 16, 4, CLF_F32, &c));
    clf_stage_segment seg = {0, 0, 2, 3};
    clf_stage_pass p = {2, &seg, 1, 0, NULL, 0};
    float x[2 * 96] = {0};
    assert_int_equal(clf_llama_stage_pass(c, &p, x, x), CLF_ERR_ARG);
    assert_non_null(strstr(clf_last_error(), "starts at 3 of sequence 0, which holds 0"));
    clf_llama_ctx_free(c);
    clf_llama_free(first);
    clf_llama_free(rest[0]);
    clf_llama_free(rest[1]);
    free(want);
    free(got);
    clf_gguf_close(g);
    unlink(path);
}

/* A local link whose pass number fail_at fails: what a failing hop leaves. */
typedef struct flaky {
    clf_llama *next;
    int calls, fail_at;
} flaky;

typedef struct flaky_link {
    clf_stage_link *inner; /* the local link */
    flaky *f;
} flaky_link;

static const clf_stage_ops flaky_ops;

static clf_status flaky_create(void *next, int n_ctx, int n_batch, int n_seq, clf_type kv, clf_stage_link **out) {
    flaky_link *fl = calloc(1, sizeof *fl);
    fl->f = next;
    CLF_TRY(clf_stage_local_ops.ctx_create(fl->f->next, n_ctx, n_batch, n_seq, kv, &fl->inner));
    clf_stage_link *l = calloc(1, sizeof *l);
    l->ops = &flaky_ops;
    l->impl = fl;
    *out = l;
    return CLF_OK;
}

static clf_status flaky_pass(clf_stage_link *l, const clf_stage_pass *p, const float *x, float *logits) {
    flaky_link *fl = l->impl;
    if (++fl->f->calls == fl->f->fail_at) return clf_fail(CLF_ERR_CL, "injected failure of pass %d", fl->f->calls);
    return fl->inner->ops->pass(fl->inner, p, x, logits);
}

static void flaky_rewind(clf_stage_link *l, int seq, int pos) {
    flaky_link *fl = l->impl;
    fl->inner->ops->seq_rewind(fl->inner, seq, pos);
}

static void flaky_free(clf_stage_link *l) {
    flaky_link *fl = l->impl;
    fl->inner->ops->free(fl->inner);
    free(fl);
    free(l);
}

static const clf_stage_ops flaky_ops = {flaky_create, flaky_pass, flaky_rewind, flaky_free};

/* A hop that fails mid-prompt: every stage keeps the chunks (passes) that
 * reached them all, and evaluation goes on from there with one device's
 * logits. */
static void test_failed_hop(void **state) {
    (void)state;
    tiny_model tm = {.arch = "llama", .n_layer = 2, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                     .n_vocab = 97, .type = CLF_F32};
    char path[] = "/tmp/clinfer-split-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_llama *ref, *a, *z;
    TU_OK(clf_llama_load(rts[0], g, &ref));
    TU_OK(clf_llama_load_range(rts[0], g, 0, 1, &a));
    TU_OK(clf_llama_load_range(rts[1], g, 1, 2, &z));
    flaky f = {z, 0, 0};
    clf_llama_set_next(a, &flaky_ops, &f);
    const int V = 97;
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (int32_t)(i * 31 % V);
    float want[97], got[97];
    clf_llama_ctx *r, *c;
    TU_OK(clf_llama_ctx_create_seqs(ref, 64, 8, 2, CLF_F32, &r));
    TU_OK(clf_llama_ctx_create_seqs(a, 64, 8, 2, CLF_F32, &c));
    clf_llama_ctx *down = ((flaky_link *)c->next->impl)->inner->impl;
    /* clf_llama_eval: chunks 8, 8, 4; the second hop fails */
    f.calls = 0, f.fail_at = 2;
    assert_int_equal(clf_llama_eval(c, toks, 20, 0, got), CLF_ERR_CL);
    assert_int_equal(c->n_past, 8);
    assert_int_equal(down->n_past, 8);
    TU_OK(clf_llama_eval(c, toks + 8, 12, 0, got));
    TU_OK(clf_llama_eval(r, toks, 20, 0, want));
    assert_true(tu_rel_err_f(got, want, V) <= TOL);
    /* clf_llama_eval_seqs: sequence 1's 17 tokens in passes of 8, 8, 1; the second hop fails, the
     * third pass already enqueued here */
    f.calls = 0, f.fail_at = 2;
    clf_llama_seq_batch e = {.seq = 1, .tokens = toks + 20, .n = 17, .logits = got};
    assert_int_equal(clf_llama_eval_seqs(c, &e, 1), CLF_ERR_CL);
    assert_int_equal(clf_llama_seq_len(c, 1), 8);
    assert_int_equal(clf_llama_seq_len(down, 1), 8);
    clf_llama_seq_batch rest = {.seq = 1, .tokens = toks + 28, .n = 9, .logits = got}, all = {.seq = 1, .tokens = toks + 20, .n = 17, .logits = want};
    TU_OK(clf_llama_eval_seqs(c, &rest, 1));
    TU_OK(clf_llama_eval_seqs(r, &all, 1));
    assert_true(tu_rel_err_f(got, want, V) <= TOL);
    assert_int_equal(clf_llama_seq_len(down, 1), 17);
    clf_llama_ctx_free(c);
    clf_llama_ctx_free(r);
    clf_llama_free(a);
    clf_llama_free(z);
    clf_llama_free(ref);
    clf_gguf_close(g);
    unlink(path);
}

static void compare_tiny(const tiny_model *tm, const int *cuts, int n_stage) {
    char path[] = "/tmp/clinfer-split-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(tm, tu_seed(), path), 0);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    compare(g, cuts, n_stage);
    clf_gguf_close(g);
    unlink(path);
}

static void test_tiny_llama(void **state) {
    (void)state;
    tiny_model tm = {.arch = "llama", .n_layer = 4, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                     .n_vocab = 97, .type = CLF_Q8_0};
    int cuts[] = {1};
    compare_tiny(&tm, cuts, 2);
}

/* the ring of the sliding-window layers, a tied head, a middle stage */
static void test_tiny_gemma3_three_stages(void **state) {
    (void)state;
    tiny_model tm = {.arch = "gemma3", .n_layer = 6, .n_head = 2, .n_head_kv = 1, .head_dim = 64, .n_embd = 96, .n_ff = 160,
                     .n_vocab = 97, .type = CLF_F32, .window = 8, .tied = 1};
    int cuts[] = {2, 5};
    compare_tiny(&tm, cuts, 3);
}

static void test_default_model(void **state) {
    (void)state;
    char path[1024];
    if (clf_model_path(NULL, path, sizeof path) != CLF_OK) {
        TU_SKIP("%s: real-model split", clf_last_error());
    }
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    clf_llama_hparams hp;
    TU_OK(clf_llama_hparams_read(g, &hp));
    int cuts[] = {hp.n_layer / 2};
    compare(g, cuts, 2);
    /* a prompt in chunks of 128 crosses in micro-batches of 32, pipelined */
    clf_llama *ref, *stages[2];
    TU_OK(clf_llama_load(rts[0], g, &ref));
    const int V = hp.n_vocab, N = 200;
    int32_t toks[200];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 7919) % V);
    float *want = malloc((size_t)V * sizeof *want), *got = malloc((size_t)V * sizeof *got);
    clf_llama_ctx *c;
    TU_OK(clf_llama_ctx_create(ref, 256, 128, CLF_F32, &c));
    TU_OK(clf_llama_eval(c, toks, N, 0, want));
    clf_llama_ctx_free(c);
    clf_llama_free(ref);
    int l0[2] = {0, cuts[0]}, l1[2] = {cuts[0], hp.n_layer};
    TU_OK(clf_stage_local_load(rts, 2, g, l0, l1, stages));
    TU_OK(clf_llama_ctx_create(stages[0], 256, 128, CLF_F32, &c));
    assert_int_equal(c->n_micro, 32);
    TU_OK(clf_llama_eval(c, toks, N, 0, got));
    clf_llama_ctx_free(c);
    clf_stage_local_free(stages, 2);
    double e = tu_rel_err_f(got, want, (size_t)V);
    print_message("  a 200-token prompt in micro-batches of 32: rel diff %.2e (tol %.0e)\n", e, TOL);
    assert_true(e <= TOL);
    free(want);
    free(got);
    clf_gguf_close(g);
}

/* A stage's weights add up to the model's: nothing lost, nothing twice but
 * a tied head. */
static void test_range_bytes(void **state) {
    (void)state;
    for (int tied = 0; tied < 2; tied++) {
        tiny_model tm = {.arch = "llama", .n_layer = 4, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                         .n_vocab = 97, .type = CLF_Q8_0, .tied = tied, .rope_freqs = 1};
        char path[] = "/tmp/clinfer-split-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
        clf_gguf *g;
        TU_OK(clf_gguf_open(path, &g));
        int n0, n1, n2, nall;
        size_t a = clf_split_range_bytes(g, 0, 1, 4, &n0), b = clf_split_range_bytes(g, 1, 3, 4, &n1),
               c = clf_split_range_bytes(g, 3, 4, 4, &n2), all = clf_split_range_bytes(g, 0, 4, 4, &nall);
        assert_int_equal(all, clf_llama_weight_bytes(g));
        const size_t rope = 32 * sizeof(float); /* rope_freqs: on every stage */
        assert_int_equal(a + b + c, all + 2 * rope);
        assert_int_equal(n0 + n1 + n2, nall + 2);
        clf_split_model sm;
        TU_OK(clf_split_model_from_gguf(g, 64, 8, 1, 4, &sm));
        double sum = sm.first_bytes + sm.last_bytes + sm.common_bytes;
        for (int l = 0; l < 4; l++) sum += sm.layer_bytes[l];
        assert_true(sum == (double)all);
        assert_true(sm.layer_kv[0] == 2.0 * 64 * 4 * 64);
        clf_gguf_close(g);
        unlink(path);
    }
}

/* `clinfer info --devices`: the plan as the library makes it, before loading */
static void test_info_plan(void **state) {
    (void)state;
    tiny_model tm = {.arch = "llama", .n_layer = 4, .n_head = 3, .n_head_kv = 1, .head_dim = 64, .n_ff = 160,
                     .n_vocab = 97, .type = CLF_Q8_0};
    char path[] = "/tmp/clinfer-split-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tiny_model_write(&tm, tu_seed(), path), 0);
    const char *bin = getenv("CLINFER_BIN");
    if (!bin) fail_msg("CLINFER_BIN is not set (run through ctest)");
    char cmd[1024], want[256];
    int st;
    snprintf(cmd, sizeof cmd, "%s info -m %s --ctx 64 --devices 0:0,0:1 --split-ratio 1,3", bin, path);
    char *out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    tu_expect_in(out, "split by layers over 2 devices (context 64, chunks of 64):");
    tu_expect_in(out, "  0     0:0     0-0 ");
    tu_expect_in(out, "  1     0:1     1-3 ");
    tu_expect_in(out, "crossing a boundary: 768 bytes per token (n_embd F32 activations); boundaries: 1");
    assert_null(strstr(out, "does not fit"));
    free(out);
    clf_gguf *g;
    TU_OK(clf_gguf_open(path, &g));
    snprintf(cmd, sizeof cmd, "%s info -m %s --ctx 64 --devices 0:0,0:1 --split-ratio 1,3 --json", bin, path);
    out = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    snprintf(want, sizeof want, "\"layers\": [0, 1], \"weight_bytes\": %zu, \"kv_bytes\": %d",
             clf_split_range_bytes(g, 0, 1, 4, NULL), 2 * 64 * 64 * 4);
    tu_expect_in(out, want);
    snprintf(want, sizeof want, "\"layers\": [1, 4], \"weight_bytes\": %zu, \"kv_bytes\": %d",
             clf_split_range_bytes(g, 1, 4, 4, NULL), 3 * 2 * 64 * 64 * 4);
    tu_expect_in(out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s info -m %s --devices 0:0,0:1 --json | python3 -m json.tool >/dev/null", bin, path);
    assert_int_equal(system(cmd), 0);
    /* `run` over the split samples one device's tokens (its text, with a
     * seed) on a model with a vocabulary (tests/tools/tiny_gguf.c) */
    const char *tool = getenv("CLINFER_TINY_GGUF");
    if (!tool) fail_msg("CLINFER_TINY_GGUF is not set (run through ctest)");
    snprintf(cmd, sizeof cmd, "%s model %s --layers 4 --no-eog", tool, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a b c' -n 12 --seed 3 --ctx 64 2>/dev/null", bin, path);
    char *one = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a b c' -n 12 --seed 3 --ctx 64 --devices 0:0,0:1 2>/dev/null", bin, path);
    char *two = tu_capture(cmd, &st);
    assert_int_equal(st, 0);
    assert_true(strlen(one) > 0);
    assert_string_equal(one, two);
    free(one);
    free(two);
    clf_gguf_close(g);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_parse_ratio),
        cmocka_unit_test(test_range_bytes),
    };
    const struct CMUnitTest device_tests[] = {
        cmocka_unit_test(test_tiny_llama),
        cmocka_unit_test(test_tiny_gemma3_three_stages),
        cmocka_unit_test(test_relay),
        cmocka_unit_test(test_failed_hop),
        cmocka_unit_test(test_default_model),
        cmocka_unit_test(test_info_plan),
    };
    int failed = cmocka_run_group_tests_name("split plan", tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("split on two devices", device_tests, setup, teardown);
    return failed;
}

#include "peer_kquant.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static const clf_gguf *sort_g;

static int by_name(const void *a, const void *b) {
    const clf_gguf_tensor *x = clf_gguf_tensor_at(sort_g, *(const int64_t *)a);
    const clf_gguf_tensor *y = clf_gguf_tensor_at(sort_g, *(const int64_t *)b);
    uint64_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
    int c = memcmp(x->name.ptr, y->name.ptr, (size_t)n);
    return c ? c : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (const unsigned char *b = p; n--; b++) h = (h ^ *b) * 0x100000001B3ull;
    return h;
}

uint64_t peer_tensor_hash(const clf_gguf *g) {
    int64_t n = clf_gguf_n_tensors(g);
    int64_t *ix = malloc((size_t)(n ? n : 1) * sizeof *ix);
    assert_non_null(ix);
    for (int64_t i = 0; i < n; i++) ix[i] = i;
    sort_g = g;
    qsort(ix, (size_t)n, sizeof *ix, by_name);
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t k = 0; k < n; k++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, ix[k]);
        unsigned char ty[4] = {(unsigned char)t->type, (unsigned char)(t->type >> 8), (unsigned char)(t->type >> 16),
                               (unsigned char)(t->type >> 24)};
        h = fnv(h, t->name.ptr, (size_t)t->name.len);
        h = fnv(h, ty, 4);
        h = fnv(h, t->data, t->bytes);
    }
    free(ix);
    return h;
}

/* The recorded hash of mix; fails the test when there is none. */
static uint64_t recorded_hash(const char *mix) {
    FILE *f = fopen(PEER_KQUANT_DATA, "r");
    if (!f) fail_msg("cannot open %s (run from the source directory)", PEER_KQUANT_DATA);
    char line[8192], name[16];
    uint64_t h = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "M %15s %" SCNx64, name, &h) == 2 && !strcmp(name, mix);
    fclose(f);
    if (!found) fail_msg("%s: no model line for %s", PEER_KQUANT_DATA, mix);
    return h;
}

int peer_kquant_mixes(char names[][16], int max) {
    FILE *f = fopen(PEER_KQUANT_DATA, "r");
    if (!f) fail_msg("cannot open %s (run from the source directory)", PEER_KQUANT_DATA);
    char line[8192];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) n += sscanf(line, "M %15s", names[n]) == 1;
    fclose(f);
    return n;
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (!v) fail_msg("%s is not set (run through ctest)", name);
    return v;
}

void peer_kquant_model(const char *dir, const char *mix, char *path, size_t n) {
    char src[512], cmd[2048];
    snprintf(src, sizeof src, "%s/kq-src.gguf", dir);
    /* the seed the recording used (record_kquant.py SEED) */
    snprintf(cmd, sizeof cmd, "test -s %s || %s model %s --kquant --seed 7", src, env("CLINFER_TINY_GGUF"), src);
    if (system(cmd) != 0) fail_msg("%s failed", cmd);
    snprintf(path, n, "%s/kq-%s.gguf", dir, mix);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s %s 2>/dev/null", env("CLINFER_BIN"), src, path, mix);
    if (system(cmd) != 0) fail_msg("%s failed", cmd);
    clf_gguf *g;
    if (clf_gguf_open(path, &g) != CLF_OK) fail_msg("%s: %s", path, clf_last_error());
    uint64_t got = peer_tensor_hash(g), want = recorded_hash(mix);
    clf_gguf_close(g);
    if (got != want)
        fail_msg("%s: tensor hash %016" PRIx64 ", llama.cpp's quantization of the same source %016" PRIx64, mix, got,
                 want);
}

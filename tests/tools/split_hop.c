/* split_hop: what a boundary of a split costs a decoded token. The model
 * in 1, 2 and 4 stages on one device (so that only the hops differ), decode
 * steps timed in blocks taken in turn (the machine's load drifts), medians
 * of the blocks; per hop = (2 stages - 1) and (4 stages - 1) / 3.
 *
 *   split_hop MODEL [DEVICE]     DEVICE: a selector, default the default device
 */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

enum { BLOCKS = 40, STEPS = 20 };

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(void) {
    fprintf(stderr, "split_hop: %s\n", clf_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: split_hop MODEL [DEVICE]\n");
        return 2;
    }
    clf_gguf *g;
    clf_runtime *rt[4];
    clf_llama_hparams hp;
    if (clf_gguf_open(argv[1], &g) || clf_llama_hparams_read(g, &hp)) return fail();
    for (int i = 0; i < 4; i++)
        if (clf_runtime_create(argc == 3 ? argv[2] : NULL, &rt[i])) return fail();
    const int L = hp.n_layer, n_stages[3] = {1, 2, 4};
    if (L < 4) return fprintf(stderr, "split_hop: 4 layers at least\n"), 2;
    clf_llama *stages[3][4];
    clf_llama_ctx *c[3];
    for (int k = 0; k < 3; k++) {
        int n = n_stages[k], l0[4], l1[4];
        for (int i = 0; i < n; i++) l0[i] = i * L / n, l1[i] = (i + 1) * L / n;
        if (clf_stage_local_load(rt, n, g, l0, l1, stages[k]) || clf_llama_ctx_create(stages[k][0], 1024, 32, CLF_F32, &c[k]))
            return fail();
    }
    float *logits = malloc((size_t)hp.n_vocab * sizeof *logits);
    static double t[3][BLOCKS];
    int32_t tok = 1;
    for (int b = 0; b < BLOCKS; b++)
        for (int k = 0; k < 3; k++) {
            clf_llama_rewind(c[k], 0);
            double t0 = clf_now_s();
            for (int i = 0; i < STEPS; i++)
                if (clf_llama_eval(c[k], &tok, 1, 0, logits)) return fail();
            t[k][b] = (clf_now_s() - t0) / STEPS * 1e6;
        }
    double med[3];
    for (int k = 0; k < 3; k++) {
        qsort(t[k], BLOCKS, sizeof t[k][0], cmp);
        med[k] = t[k][BLOCKS / 2];
    }
    printf("%s on %s: n_embd %d (%d bytes a hop), %d layers; us/token, median of %d blocks: 1 stage %.1f, 2 stages "
           "%.1f, 4 stages %.1f; per hop %.1f us (2 stages), %.1f us (4)\n",
           argv[1], rt[0]->dev.name, hp.n_embd, 4 * hp.n_embd, L, BLOCKS, med[0], med[1], med[2], med[1] - med[0],
           (med[2] - med[0]) / 3);
    for (int k = 0; k < 3; k++) {
        clf_llama_ctx_free(c[k]);
        clf_stage_local_free(stages[k], n_stages[k]);
    }
    for (int i = 0; i < 4; i++) clf_runtime_free(rt[i]);
    free(logits);
    clf_gguf_close(g);
    return 0;
}

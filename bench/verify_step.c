/* The time of a speculative step's verification on a model: a batch of n
 * rows of sequence 0 after a 64-token prompt, every row's logits (as
 * clinfer_generate's and the server's verify steps ask them), then rewound;
 * rounds interleave the row counts, so the machine's drift hits them alike.
 * Prints each count's median, minimum and maximum wall time (ms) and the
 * median's ratio to the first count's. Public API only:
 *
 *   cc -O2 bench/verify_step.c -Iinclude -Lbuild -lclinfer -Wl,-rpath,$PWD/build -o /tmp/verify_step
 *   /tmp/verify_step MODEL [ROUNDS [N...]]     (default: 15 rounds of 1 2 4 5 8 rows)
 *
 * Against another build of the library: LD_LIBRARY_PATH=OTHER/build /tmp/verify_step ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clinfer.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what) {
    fprintf(stderr, "verify_step: %s: %s\n", what, clinfer_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: verify_step MODEL [ROUNDS [N...]]\n");
        return 2;
    }
    enum { NMAX = 16, PROMPT = 64 };
    const int rounds = argc > 2 ? atoi(argv[2]) : 15;
    int ns[NMAX], nn = 0;
    for (int i = 3; i < argc && nn < NMAX; i++) {
        ns[nn] = atoi(argv[i]);
        if (ns[nn] < 1 || ns[nn] > NMAX) return fprintf(stderr, "verify_step: rows 1..%d\n", NMAX), 2;
        nn++;
    }
    if (!nn) {
        const int d[] = {1, 2, 4, 5, 8};
        memcpy(ns, d, sizeof d);
        nn = 5;
    }
    if (rounds < 1) return 2;
    clinfer_model *m;
    clinfer_session *s;
    if (clinfer_model_load(argv[1], NULL, NULL, &m) != CLINFER_OK) return fail("load");
    clinfer_session_params sp = clinfer_session_default_params();
    sp.n_ctx = 512;
    if (clinfer_session_create(m, &sp, &s) != CLINFER_OK) return fail("session");
    int32_t prompt[PROMPT], tok[NMAX];
    int8_t every[NMAX];
    for (int i = 0; i < PROMPT; i++) prompt[i] = 100 + i * 37 % 5000;
    for (int i = 0; i < NMAX; i++) tok[i] = 200 + i * 11, every[i] = 1;
    if (clinfer_eval(s, prompt, PROMPT) != CLINFER_OK) return fail("prompt");
    double *t = calloc((size_t)nn * (size_t)rounds, sizeof *t);
    if (!t) return 1;
    for (int r = -2; r < rounds; r++) /* two rounds of warm-up: the kernels built */
        for (int j = 0; j < nn; j++) {
            const clinfer_batch b = {.n_tokens = ns[j], .token = tok, .logits = every};
            const double t0 = now_s();
            if (clinfer_decode(s, &b) != CLINFER_OK) return fail("decode");
            volatile float sink = clinfer_batch_logits(s, ns[j] - 1)[0];
            (void)sink;
            if (r >= 0) t[j * rounds + r] = (now_s() - t0) * 1e3;
            if (clinfer_seq_rewind(s, 0, PROMPT) != CLINFER_OK) return fail("rewind");
        }
    double base = 0;
    for (int j = 0; j < nn; j++) {
        double *tj = t + j * rounds;
        qsort(tj, (size_t)rounds, sizeof *tj, cmp);
        const double med = tj[rounds / 2];
        if (j == 0) base = med;
        printf("%d rows: median %.2f ms (min %.2f, max %.2f), %.2f x %d rows\n", ns[j], med, tj[0], tj[rounds - 1],
               med / base, ns[0]);
    }
    free(t);
    clinfer_session_free(s);
    clinfer_model_free(m);
    return 0;
}

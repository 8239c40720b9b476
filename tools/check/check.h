/* Kernel correctness checks shared by `clinfer selftest` and the cmocka
 * tests: each runs one kernel variant on fresh random data against a plain
 * C reference (double accumulation) and reports ||out - ref|| / ||ref||. */
#ifndef CLF_CHECK_H
#define CLF_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"
#include "tensor.h"

typedef struct clf_check_result {
    double err;       /* relative error (inf when an output was NaN/unwritten) */
    double tol;       /* the stated tolerance */
    char detail[160]; /* shape / variant, for the report */
} clf_check_result;

/* Runs a check with its own shapes; CLF_OK means it ran (compare err/tol). */
typedef clf_status (*clf_check_fn)(clf_runtime *rt, uint64_t seed, clf_check_result *res);

typedef struct clf_check {
    const char *name; /* "gemv_q8_0", "rmsnorm", ... */
    clf_check_fn fn;
} clf_check;

/* Tables of each kernel family, each ended by {NULL, NULL}. */
extern const clf_check clf_checks_matmul[];
extern const clf_check clf_checks_ops[];
extern const clf_check clf_checks_attention[];
/* The same checks at small shapes (`selftest --quick`: a simulator's). */
extern const clf_check clf_checks_matmul_quick[];
extern const clf_check clf_checks_ops_quick[];
extern const clf_check clf_checks_attention_quick[];

/* Helpers for writing checks (tools/check/check.c). */

/* A seeded xorshift64* stream; clf_rng_init mixes (seed, stream) so each
 * check or shape draws its own data from one user-visible seed. */
uint64_t clf_rng_init(uint64_t seed, uint64_t stream);
uint64_t clf_rng_next(uint64_t *s);
float clf_rng_uniform(uint64_t *s, float lo, float hi); /* [lo, hi) */
/* An F32 tensor filled from the stream with values in [lo, hi). */
clf_status clf_rng_fill_tensor(clf_runtime *rt, clf_tensor *t, uint64_t *s, float lo, float hi);

/* ||out - ref|| / ||ref|| (the plain norm when ref is all zero); +inf when
 * out holds a NaN or an infinity, as a poisoned, unwritten element does. */
double clf_rel_err(const float *out, const double *ref, size_t n);

#endif

/* `clinfer selftest`: every kernel check of every family, run on one device
 * and reported line by line, so a user can ask their own driver whether it
 * computes right. */
#ifndef CLF_SELFTEST_H
#define CLF_SELFTEST_H

#include <stdint.h>
#include <stdio.h>

#include "runtime.h"

/* Runs the check tables (tools/check/check.h; quick: their small-shape
 * forms) with data drawn from `seed`, the checks whose names start with one
 * of `only`'s comma-separated prefixes (NULL: all), printing
 * to `out` one line per check: name, detail, error, tolerance, PASS/FAIL.
 * A check that cannot run (a build or launch error) prints its message and
 * counts as failed; the others still run. *n_failed gets the failures. */
clf_status clf_selftest_run(clf_runtime *rt, uint64_t seed, int quick, const char *only, FILE *out, int *n_failed);

#endif

/* CLBlast's SGEMM as the matmul's other GEMM (clf_matmul_set_gemm): a
 * second, independent GEMM for `bench kernels`, `selftest` and the tests.
 * Optional (cmake -DCLINFER_CLBLAST, libclblast-dev); the library never
 * links it. */
#ifndef CLF_CLBLAST_H
#define CLF_CLBLAST_H
#include "matmul.h"

/* 1 when this build has CLBlast. */
int clf_clblast_available(void);
/* Products of n > 1 rows on rt through CLBlast (on: 1) or clinfer's
 * kernels (on: 0). CLF_ERR_ARG, saying how to build it, without CLBlast. */
clf_status clf_matmul_use_clblast(clf_runtime *rt, int on);

#endif

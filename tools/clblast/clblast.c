#include "clblast.h"

#ifdef CLINFER_HAVE_CLBLAST
#include <clblast_c.h>

int clf_clblast_available(void) { return 1; }

/* clf_gemm_f32_fn: Y = (or +=) X · Wᵀ, row-major. */
static clf_status sgemm(cl_command_queue *queue, size_t n, size_t rows, size_t K, cl_mem X, size_t x_off, cl_mem W,
                        cl_mem Y, size_t y_off, size_t ldy, int accumulate) {
    CLBlastStatusCode cs = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, n, rows, K,
                                        1.0f, X, x_off, K, W, 0, K, accumulate ? 1.0f : 0.0f, Y, y_off, ldy, queue,
                                        NULL);
    if (cs != CLBlastSuccess)
        return clf_fail(cs <= -1024 ? CLF_ERR_ARG : CLF_ERR_CL, "CLBlastSgemm (%zu x %zu x %zu) failed: status %d%s%s",
                        n, rows, K, (int)cs, cs > -1024 ? " " : "", cs > -1024 ? clf_cl_error_name(cs) : "");
    return CLF_OK;
}

clf_status clf_matmul_use_clblast(clf_runtime *rt, int on) {
    clf_matmul_set_gemm(rt, on ? sgemm : NULL);
    return CLF_OK;
}
#else
int clf_clblast_available(void) { return 0; }

clf_status clf_matmul_use_clblast(clf_runtime *rt, int on) {
    clf_matmul_set_gemm(rt, NULL);
    return on ? clf_fail(CLF_ERR_ARG, "this build has no CLBlast backend (cmake -DCLINFER_CLBLAST=ON, libclblast-dev)")
              : CLF_OK;
}
#endif

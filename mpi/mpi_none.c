/* clf_mpi.h in a build without MPI: --mpi fails with one clear line. */
#include "clf_mpi.h"

clf_status clf_mpi_start(int *argc, char ***argv, int *rank, int *size) {
    (void)argc, (void)argv;
    *rank = 0, *size = 1;
    return clf_fail(CLF_ERR_ARG, "--mpi: this clinfer was built without MPI (scripts/setup.sh installs Open MPI; "
                                 "then rebuild)");
}

int clf_mpi_worker(void) { return CLF_ERR_ARG; }

int clf_mpi_launched(void) { return 0; } /* nothing to agree with: no MPI here */

clf_status clf_mpi_agree(int *argc, char ***argv, int with_mpi, int *rank, int *size, int *alone) {
    (void)with_mpi, (void)alone;
    return clf_mpi_start(argc, argv, rank, size);
}

void clf_mpi_set_abort(int (*fn)(void)) { (void)fn; }

clf_status clf_mpi_load(clf_runtime *rt, const clf_gguf *g, const char *model, const char *device,
                        const double *ratio, int n_ratio, clf_llama **out) {
    (void)rt, (void)g, (void)model, (void)device, (void)ratio, (void)n_ratio, (void)out;
    return clf_fail(CLF_ERR_ARG, "--mpi: this clinfer was built without MPI");
}

clf_status clf_mpi_flush(void) { return CLF_OK; }

void clf_mpi_on_broken(void (*fn)(void)) { (void)fn; }

const char *clf_mpi_devices(void) { return ""; }

void clf_mpi_get_stats(clf_mpi_stats *s) { *s = (clf_mpi_stats){0}; }

int clf_mpi_end(int status) { return status; }

/* --mpi: the model's stages across the ranks of an MPI job (mpi/clf_mpi.h)
 * instead of this process's devices: stage 0 here, on --device; the
 * others on ranks 1..N-1, each on its own device (the same --device, or
 * its own CLINFER_DEVICE); --split-ratio shares the layers between ranks
 * (default: equal weight bytes). */
#ifndef CLF_CLI_PLACE_MPI_H
#define CLF_CLI_PLACE_MPI_H

#include "place.h"

/* model: -m as given (each rank resolves it itself: clf_model_path); g:
 * the file rank 0 opened. Fills out with the one stage of this process
 * (cli_stages_close frees it); a failure on any rank names it. */
clf_status cli_place_mpi_open(const cli_place *p, const char *model, const clf_gguf *g,
                              void (*prepare)(clf_runtime *rt), cli_stages *out);

#endif

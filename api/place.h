/* Where a model runs: one device, several (the layers split, a range per
 * device: models/split.h, models/stage.h) or the ranks of an MPI job
 * (mpi/clf_mpi.h): the plan, checked before anything loads, and the stages
 * loaded on their devices. What clinfer_load_options' devices, split_ratio
 * and mpi select; `clinfer info` prints the plan. */
#ifndef CLF_API_PLACE_H
#define CLF_API_PLACE_H

#include <stdio.h>

#include "llama.h"
#include "split.h"

typedef struct clf_place {
    const char *device;  /* one device's selector (NULL: the default) */
    const char *devices; /* "SEL,SEL,...": a split when set */
    const char *split;   /* "layers", the only mode (NULL: layers) */
    const char *ratio;   /* "a,b,...": the devices' (ranks') shares */
    int mpi;             /* stage 0 here, the others on the MPI job's ranks */
    const char *model;   /* the model as the caller named it (each MPI rank resolves it itself) */
    /* the sequences and positions a split's plan sizes KV for; 0: one, and
     * the model's context */
    int n_seq, n_ctx;
} clf_place;

/* The devices of --devices and the plan over them for a context of n_ctx
 * (0: the model's, at most 4096) in chunks of n_batch (0: 512 at most),
 * KV elements of kv_bytes: CLF_ERR_ARG for a malformed or inconsistent
 * option, CLF_ERR_DEVICE for a selector that matches nothing,
 * CLF_ERR_MEMORY when a stage does not fit (the plan is filled then too:
 * *planned set). sel[i]: stage i's device as "P:D"; names[i] its name. */
typedef struct clf_place_split {
    clf_split_plan plan;
    char sel[CLF_SPLIT_MAX][16];
    char names[CLF_SPLIT_MAX][128];
    int64_t n_ctx, n_batch;
} clf_place_split;
clf_status clf_place_plan(const clf_place *p, const clf_gguf *g, int64_t n_ctx, int64_t n_batch, int kv_bytes,
                          clf_place_split *out, int *planned);
void clf_place_print(FILE *f, const clf_place_split *s);

/* The model's stages on their devices: one without devices; under mpi the
 * one of this process (rank 0), the others on their ranks. prepare (may be
 * NULL) is called on each runtime before its weights load. */
typedef struct clf_stages {
    int n;
    clf_runtime *rt[CLF_SPLIT_MAX];
    clf_llama *m[CLF_SPLIT_MAX]; /* m[0]: evaluate with it (its contexts reach the others) */
    int n_ctx_fit; /* one device: the largest context that fits beside the weights (clf_fit); 0: not limited */
} clf_stages;

/* The fit of one device: the model's weights and the KV cache and scratch of
 * a context of n_ctx positions (0: the sessions' default, the model's up to
 * 4096) for n_seq sequences, against what the device can still hold (its
 * global memory; on a device that is host memory, also the memory the system
 * has available now). CLF_ERR_MEMORY with the numbers (weights, KV, scratch,
 * free) and the largest context that fits where n_ctx was asked and does not
 * fit, or where the weights alone do not; otherwise CLF_OK and *n_ctx_fit the
 * largest context that fits (at most the default when n_ctx is 0), before
 * anything is allocated. */
clf_status clf_fit(const clf_runtime *rt, const clf_gguf *g, int n_ctx, int n_seq, clf_type kv, int *n_ctx_fit);
clf_status clf_stages_open(const clf_place *p, const clf_gguf *g, int n_ctx, clf_type kv,
                           void (*prepare)(clf_runtime *rt, void *ud), void *ud, clf_stages *out);
void clf_stages_close(clf_stages *s);
/* The stages' devices for a message: "NAME", or "NAME + NAME ..." for a split. */
const char *clf_stages_devices(const clf_stages *s, char *buf, size_t n);

#endif

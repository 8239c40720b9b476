/* Where a command runs its model: one device (--device SEL) or several,
 * the model split by layers (--devices SEL,SEL,... [--split layers]
 * [--split-ratio a,b,...]): the plan, checked before loading anything, and
 * the stages loaded on their devices (models/split.h, models/stage.h). */
#ifndef CLF_CLI_PLACE_H
#define CLF_CLI_PLACE_H

#include <stdio.h>

#include "llama.h"
#include "split.h"

typedef struct cli_place {
    const char *device;  /* --device */
    const char *devices; /* --devices: a split when set */
    const char *split;   /* --split: "layers", the only mode */
    const char *ratio;   /* --split-ratio */
    /* a command that makes its own context (serve: a sequence per slot):
     * the sequences and positions a split's plan sizes KV for; 0: one, and
     * the session's context */
    int n_seq, n_ctx;
} cli_place;

#define CLI_PLACE_USAGE "[--device SEL | --devices SEL,SEL,... [--split layers] [--split-ratio a,b,...]]"
#define CLI_PLACE_OPTIONS(p) \
    CLI_OPT_STR("--device", &(p)->device), CLI_OPT_STR("--devices", &(p)->devices), \
    CLI_OPT_STR("--split", &(p)->split), CLI_OPT_STR("--split-ratio", &(p)->ratio)

/* The devices of --devices and the plan over them for a context of n_ctx
 * (0: the model's, at most 4096) in chunks of n_batch (0: 512 at most),
 * KV elements of kv_bytes: CLF_ERR_ARG for a malformed or inconsistent
 * option, CLF_ERR_DEVICE for a selector that matches nothing,
 * CLF_ERR_MEMORY when a stage does not fit (the plan is filled then too:
 * *planned set). sel[i]: stage i's device as "P:D"; names[i] its name. */
typedef struct cli_split {
    clf_split_plan plan;
    char sel[CLF_SPLIT_MAX][16];
    char names[CLF_SPLIT_MAX][128];
    int64_t n_ctx, n_batch;
} cli_split;
clf_status cli_place_plan(const cli_place *p, const clf_gguf *g, int64_t n_ctx, int64_t n_batch, int kv_bytes,
                          cli_split *out, int *planned);
void cli_place_print(FILE *f, const cli_split *s);

/* The model's stages on their devices: one without --devices. prepare
 * (may be NULL) is called on each runtime before its weights load. */
typedef struct cli_stages {
    int n;
    clf_runtime *rt[CLF_SPLIT_MAX];
    clf_llama *m[CLF_SPLIT_MAX]; /* m[0]: evaluate with it (its contexts reach the others) */
} cli_stages;
clf_status cli_stages_open(const cli_place *p, const clf_gguf *g, int n_ctx, clf_type kv,
                           void (*prepare)(clf_runtime *rt), cli_stages *out);
void cli_stages_close(cli_stages *s);
/* The stages' devices for a message: "NAME", or "NAME + NAME ..." for a split. */
const char *cli_stages_devices(const cli_stages *s, char *buf, size_t n);

#endif

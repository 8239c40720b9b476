/* `clinfer serve --models-dir`: several models behind one server, each
 * loaded on first use (serve_models.c; server/router.h). */
#ifndef CLI_SERVE_MODELS_H
#define CLI_SERVE_MODELS_H

#include "clinfer.h"
#include "http.h"
#include "sampling_opts.h"

typedef struct serve_models_cfg {
    const cli_gen_opts *o;  /* -m (listed first, when given), the placement, --ctx, --kv */
    const char *alias;      /* -m's name in the API (default: its file's name less .gguf) */
    const char *models_dir; /* every *.gguf in it, named by its file's name less .gguf */
    int models_max;         /* loaded at once (0: no limit) */
    int budget_mib;         /* the loaded models' memory together (0: no limit but each load's fit) */
    int parallel, queue, kv_mib, draft_max; /* each model's, as a one-model server's */
    int cache_ram_mib;      /* each model's --cache-ram (its own bound, counted in budget_mib) */
    const char *slot_dir;   /* --slot-save-path, shared: a file names its model, another's is refused */
    const srv_http_config *http;
} serve_models_cfg;

/* Serves until SIGINT or SIGTERM (cmd_serve.c's lifecycle). */
clinfer_status serve_models(const serve_models_cfg *c);

#endif

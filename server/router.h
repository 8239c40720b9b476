/* Several models behind one server (`serve --models-dir`, llama-server's
 * router mode): a catalogue of named model files, each loaded on first use
 * into its own srv_app (its own engine, slots, KV cache, queue and grammar
 * cache), at most models_max at once and within a memory budget, the least
 * recently used idle one unloaded when room is needed. A request for a
 * model still loading waits for it; one whose load failed gets the reason.
 * One model's failure leaves the others serving.
 *
 * The loading itself is the caller's (cli/serve_models.c: the same steps as
 * a one-model `serve`), through srv_router_loader; this file only decides
 * what is loaded when, and who may use it. An srv_app is in use from
 * srv_router_acquire to srv_router_release (the request's own thread), and
 * after that while its scheduler holds jobs not yet released (a stream's
 * answer outlives its handler): it is unloaded only when neither holds. */
#ifndef SRV_ROUTER_H
#define SRV_ROUTER_H

#include "api_openai.h"
#include "clinfer.h"

struct srv_app;
typedef struct srv_router srv_router;

typedef struct srv_router_loader {
    void *ctx;
    /* Loads the file `path` as the model named `name` (the string lives as
     * long as the router: the app's model_id may point to it): *app, and
     * *bytes its memory (weights and KV cache, for the budget, to which the
     * router adds srv_router_set_overhead's). Called
     * without the router's lock, on a request's thread; several at once for
     * different models. */
    clinfer_status (*load)(void *ctx, const char *name, const char *path, struct srv_app **app, double *bytes);
    /* Frees what load made (no request uses it any more). */
    void (*unload)(void *ctx, struct srv_app *app);
} srv_router_loader;

/* models_max: loaded at once (0: no limit); budget: bytes the loaded
 * models may take together (0: no limit beyond each load's own fit check). */
clinfer_status srv_router_create(const srv_router_loader *ld, int models_max, double budget, srv_router **out);
/* Bytes every model takes beside what its loader counts, known before it
 * loads (its --cache-ram bound, host memory): added to each model's count,
 * measured or estimated from its file. Called before srv_router_add.
 * CLINFER_ERR_MEMORY when they alone reach the budget (no model could fit). */
clinfer_status srv_router_set_overhead(srv_router *r, double bytes);
/* Unloads every loaded model: no request may use them any more (the HTTP
 * server stopped). */
void srv_router_free(srv_router *r);
/* A model file under its API name (a name already taken: skipped, 0). */
clinfer_status srv_router_add(srv_router *r, const char *name, const char *path);
/* Every *.gguf in dir (sorted, named by their file names less .gguf): how
 * many, or -1 (the folder cannot be read; clinfer_last_error). */
int srv_router_add_dir(srv_router *r, const char *dir);
int srv_router_count(const srv_router *r);

/* The model a request names (NULL: the catalogue's first), loaded first if
 * it is not and autoload is set: NULL with *e set (404 model_not_found, a
 * 500 saying why a load failed, a 503 when no room frees up in time or the
 * model is not loaded and autoload is 0). Release it after use. */
struct srv_app *srv_router_acquire(srv_router *r, const char *name, int autoload, srv_api_error *e);
void srv_router_release(srv_router *r, struct srv_app *app);
/* The most recently used loaded model, acquired (NULL: none loaded). */
struct srv_app *srv_router_acquire_recent(srv_router *r);

/* POST /models/load and /models/unload: 0, or -1 with *e (unknown: 404;
 * already loaded, or not loaded: 400). Unloading cuts the model's running
 * answers and waits for them to end. */
int srv_router_load(srv_router *r, const char *name, srv_api_error *e);
int srv_router_unload(srv_router *r, const char *name, srv_api_error *e);
/* Shutdown: no more loads; every loaded model's answers cut (unloaded by
 * srv_router_free, once the connections are closed). */
void srv_router_shutdown(srv_router *r);

/* /v1/models (and /models): every model with its status, as llama-server's
 * router lists them: {"value": "loaded" | "loading" | "unloaded"}, and
 * "failed": true with the reason after a failed load. NULL: out of memory. */
char *srv_router_models_json(srv_router *r);

#endif

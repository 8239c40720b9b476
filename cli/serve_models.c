/* `clinfer serve --models-dir DIR`: several models behind one server
 * (server/router.h decides what is loaded when). Each model is loaded, on
 * its first request or POST /models/load, by the same steps as a one-model
 * `serve` (cmd_serve.c): its own engine (--parallel slots, --ctx, a KV
 * cache of --kv-memory), warmed kernels, embedder, grammar cache and
 * scheduler (--queue, --draft-max), so a model's slots, KV memory and
 * queue are its own, and a failed load fails that model alone. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "embeddings.h"
#include "engine.h"
#include "http.h"
#include "memory.h"
#include "router.h"
#include "serve_models.h"
#include "session.h"

/* A loaded model: the app first (the router hands its address back to unload). */
typedef struct loaded {
    srv_app app;
    cli_session s;
    srv_engine *e;
} loaded;

static void unload(void *ctx, srv_app *app) {
    (void)ctx;
    loaded *l = (loaded *)app;
    srv_sched_free(app->sched); /* its thread joined: no step runs */
    /* a compilation still running reads the model: the model is then left
     * (as a one-model server leaves it to the exit), the rest freed */
    int compiling = srv_gcache_free(app->grammars);
    srv_engine_free(l->e);
    srv_embedder_free(app->embedder);
    if (compiling) {
        clinfer_session_free(l->s.s);
        l->s.s = NULL;
    } else
        cli_session_close(&l->s);
    free(l);
}

/* The bytes a loaded model holds, for the budget: its weights on the device
 * and its KV pool (srv_engine_bytes; the router adds --cache-ram's bound). */
static double model_bytes(const loaded *l) {
    double w, kv;
    srv_engine_bytes(l->e, &w, &kv);
    return w + kv;
}

/* One load at a time: cli_session_open sets process-wide state (the
 * Ctrl-C handler, PoCL's thread count, the OpenCL platforms' first query:
 * two at once found no device), and the device's memory is better judged
 * one model after the other. Requests for loaded models go on meanwhile. */
static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;

static clinfer_status load_one(const serve_models_cfg *c, const char *name, const char *path, srv_app **out,
                               double *bytes);

static clinfer_status load(void *ctx, const char *name, const char *path, srv_app **out, double *bytes) {
    pthread_mutex_lock(&loading);
    clinfer_status st = load_one(ctx, name, path, out, bytes);
    pthread_mutex_unlock(&loading);
    return st;
}

static clinfer_status load_one(const serve_models_cfg *c, const char *name, const char *path, srv_app **out,
                               double *bytes) {
    *out = NULL;
    loaded *l = calloc(1, sizeof *l);
    if (!l) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    cli_place place = c->o->place;
    place.n_seq = c->parallel, place.n_ctx = c->o->n_ctx; /* a split's plan counts every slot's KV */
    srv_app *app = &l->app;
    *app = (srv_app){.model_id = name, .n_slots = c->parallel, .created = (long long)time(NULL),
                     .slot_save_path = c->slot_dir};
    clinfer_status st = cli_session_open(path, &place, -1, c->o->kv, &l->s);
    if (st == CLINFER_OK)
        st = srv_engine_create(l->s.m, c->parallel, c->o->n_ctx, c->o->kv, (size_t)c->kv_mib << 20, &l->e);
    if (st == CLINFER_OK) st = srv_engine_warm(l->e);
    if (st == CLINFER_OK) st = cli_check_chat(l->s.m);
    if (st == CLINFER_OK) st = srv_embedder_create(l->s.m, srv_engine_n_ctx(l->e), c->o->kv, &app->embedder);
    if (st == CLINFER_OK) {
        app->m = l->s.m;
        app->n_ctx = srv_engine_n_ctx(l->e);
        st = srv_gcache_create(l->s.m, SRV_GCACHE_ENTRIES, &app->grammars);
    }
    if (st == CLINFER_OK) st = srv_sched_create(l->e, l->s.m, c->parallel, c->queue, &app->sched);
    if (st == CLINFER_OK) st = srv_sched_cache_ram(app->sched, (size_t)c->cache_ram_mib << 20);
    if (st != CLINFER_OK) {
        const clinfer_status kept = st; /* the frees below may set the last error: the message is kept */
        char why[512];
        snprintf(why, sizeof why, "%s", clinfer_last_error());
        srv_sched_free(app->sched); /* NULL when it was not made */
        srv_gcache_free(app->grammars);
        srv_engine_free(l->e);
        srv_embedder_free(app->embedder);
        cli_session_close(&l->s);
        free(l);
        return clinfer_fail(kept, "%s", why);
    }
    srv_sched_speculate(app->sched, c->draft_max); /* greedy requests: prompt lookup */
    *bytes = model_bytes(l);
    *out = app;
    return CLINFER_OK;
}

/* SIGINT and SIGTERM blocked (threads started now inherit it: the signals
 * go to the main thread, which waits for them) or as they were. */
static void hold_signals(int block, sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(block ? SIG_BLOCK : SIG_SETMASK, block ? &set : old, block ? old : NULL);
}

clinfer_status serve_models(const serve_models_cfg *c) {
    if (cli_mpi) return clinfer_fail(CLINFER_ERR_ARG, "--models-dir loads models on use: not under --mpi");
    srv_router *r;
    const srv_router_loader ld = {.ctx = (void *)c, .load = load, .unload = unload};
    clinfer_status st = srv_router_create(&ld, c->models_max, (double)c->budget_mib * 1048576.0, &r);
    if (st != CLINFER_OK) return st;
    /* each model's --cache-ram: in its count for --models-memory, and within what the host can give */
    const double ram = (double)c->cache_ram_mib * 1048576.0;
    st = srv_router_set_overhead(r, ram);
    if (st == CLINFER_OK) st = srv_mem_check(&(srv_mem){.cache_ram = ram}, 0, 0, srv_host_available());
    if (st == CLINFER_OK && c->o->model) { /* -m beside the folder: listed first (the default), under --alias or its file's name */
        char path[1024];
        st = cli_model_fetch(c->o->model, 0, path, sizeof path);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        size_t k = strlen(base);
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(k > 5 && !strcmp(base + k - 5, ".gguf") ? k - 5 : k), base);
        if (st == CLINFER_OK) st = srv_router_add(r, c->alias ? c->alias : name, path);
    }
    if (st == CLINFER_OK && srv_router_add_dir(r, c->models_dir) < 0) st = CLINFER_ERR_IO; /* clinfer_last_error says why */
    if (st == CLINFER_OK && !srv_router_count(r))
        st = clinfer_fail(CLINFER_ERR_ARG, "--models-dir %s holds no .gguf file (and no -m was given)", c->models_dir);
    if (st != CLINFER_OK) {
        srv_router_free(r);
        return st;
    }

    signal(SIGPIPE, SIG_IGN); /* a client gone is a failed write, not the end */
    sigset_t old;
    hold_signals(1, &old);
    srv_http *h;
    st = srv_http_start(c->http, &h);
    if (st != CLINFER_OK) {
        hold_signals(0, &old);
        srv_router_free(r);
        return st;
    }
    srv_http_set_router(h, r);
    const char *host = c->http->host;
    fprintf(stderr, "clinfer serve: listening on http://%s%s%s:%d/ (%d models, each loaded on first use)\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", srv_http_port(h), srv_router_count(r));
    while (!cli_interrupted) sigsuspend(&old); /* SIGINT, SIGTERM */
    fprintf(stderr, "clinfer serve: %s: stopping\n", cli_interrupt_name());
    /* as a one-model server: no new connections, the running answers cut
     * and sent out, the connections closed, and only then the models freed */
    srv_http_quiesce(h);
    srv_router_shutdown(r);
    srv_http_drain(h, 5);
    srv_http_stop(h);
    srv_router_free(r);
    hold_signals(0, &old);
    return CLINFER_OK;
}

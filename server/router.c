#include "router.h"

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "http.h"

enum {
    ROOM_WAIT_S = 120, /* how long a load waits for a busy model to become idle before a 503 */
    POLL_MS = 20,      /* a wait's re-check: a stream's last job release does not signal the router */
};

typedef enum mstate { M_UNLOADED, M_LOADING, M_LOADED, M_UNLOADING } mstate;

typedef struct entry {
    char *name, *path;
    mstate state;
    srv_app *app;     /* M_LOADED, M_UNLOADING */
    int users;        /* requests between acquire and release */
    double last_used; /* srv_now_s() of the last acquire */
    double bytes;     /* loaded: the loader's count; else the file's size (the weights, before loading); and
                       * the overhead (srv_router_set_overhead) */
    unsigned attempt; /* load attempts: a waiter tells its own attempt's failure from a later one */
    int failed;       /* the last load failed: error says why */
    char error[256];
} entry;

struct srv_router {
    srv_router_loader ld;
    int models_max;
    double budget;
    double overhead; /* bytes each model holds beside its loader's count (--cache-ram's bound) */
    long long created;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a state changed (CLOCK_MONOTONIC) */
    entry *e;
    int n, cap;
    int closed; /* srv_router_shutdown: no more loads */
};

static void unload_locked(srv_router *r, struct entry *e);

clinfer_status srv_router_create(const srv_router_loader *ld, int models_max, double budget, srv_router **out) {
    srv_router *r = calloc(1, sizeof *r);
    if (!(*out = r)) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    r->ld = *ld;
    r->models_max = models_max;
    r->budget = budget;
    r->created = (long long)time(NULL);
    pthread_mutex_init(&r->mu, NULL);
    srv_cond_init_monotonic(&r->cv);
    return CLINFER_OK;
}

clinfer_status srv_router_set_overhead(srv_router *r, double bytes) {
    if (r->budget > 0 && bytes >= r->budget)
        return clinfer_fail(CLINFER_ERR_MEMORY, "--cache-ram (%.1f MiB, each model's) takes all of --models-memory "
                            "(%.1f MiB): no model fits beside it", bytes / 1048576.0, r->budget / 1048576.0);
    r->overhead = bytes;
    return CLINFER_OK;
}

void srv_router_free(srv_router *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        if (r->e[i].state == M_LOADED) unload_locked(r, &r->e[i]);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->n; i++) free(r->e[i].name), free(r->e[i].path);
    free(r->e);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int srv_router_count(const srv_router *r) { return r->n; }

static entry *find(srv_router *r, const char *name) {
    if (!name) return r->n ? &r->e[0] : NULL;
    size_t n = strlen(name);
    for (int i = 0; i < r->n; i++) {
        const char *id = r->e[i].name;
        size_t k = strlen(id);
        /* the name, or the file's name (a one-model server's id: NAME.gguf) */
        if (!strcmp(id, name) || (n == k + 5 && !strncmp(name, id, k) && !strcmp(name + k, ".gguf"))) return &r->e[i];
    }
    return NULL;
}

clinfer_status srv_router_add(srv_router *r, const char *name, const char *path) {
    if (find(r, name)) return CLINFER_OK;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        entry *e = realloc(r->e, (size_t)cap * sizeof *e);
        if (!e) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        r->e = e, r->cap = cap;
    }
    entry *e = &r->e[r->n];
    memset(e, 0, sizeof *e);
    e->name = srv_api_utf8(name, strlen(name), NULL); /* every answer carries it */
    e->path = strdup(path);
    if (!e->name || !e->path) {
        free(e->name), free(e->path);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    struct stat sb;
    e->bytes = (stat(path, &sb) ? 0 : (double)sb.st_size) + r->overhead;
    r->n++;
    return CLINFER_OK;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int srv_router_add_dir(srv_router *r, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        clinfer_fail(CLINFER_ERR_IO, "--models-dir %s: cannot read it", dir);
        return -1;
    }
    char **names = NULL;
    int n = 0, cap = 0, bad = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t k = strlen(de->d_name);
        if (k <= 5 || strcmp(de->d_name + k - 5, ".gguf") || de->d_name[0] == '.') continue;
        if (n == cap) {
            char **p = realloc(names, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *p);
            if (!p) { bad = 1; break; }
            names = p;
        }
        if (!(names[n] = strdup(de->d_name))) { bad = 1; break; }
        n++;
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, by_name); /* a stable order: the first is the default */
    int added = 0;
    for (int i = 0; i < n; i++) {
        char path[4096], name[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(name, sizeof name, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        if (!bad && srv_router_add(r, name, path) != CLINFER_OK) bad = 1;
        added++;
        free(names[i]);
    }
    free(names);
    if (bad) {
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return -1;
    }
    return added;
}

/* ---- who may be unloaded -------------------------------------------------- */

/* Under r->mu. A loaded model no request uses, nor any job of a stream. */
static int idle(const entry *e) { return e->state == M_LOADED && !e->users && !srv_sched_held(e->app->sched); }

/* Under r->mu: the least recently used idle model, or NULL. */
static entry *lru_idle(srv_router *r, const entry *except) {
    entry *best = NULL;
    for (int i = 0; i < r->n; i++)
        if (&r->e[i] != except && idle(&r->e[i]) && (!best || r->e[i].last_used < best->last_used)) best = &r->e[i];
    return best;
}

/* Under r->mu (released during the unload itself): e unloaded. */
static void unload_locked(srv_router *r, entry *e) {
    srv_app *app = e->app;
    e->state = M_UNLOADING;
    pthread_mutex_unlock(&r->mu);
    fprintf(stderr, "clinfer serve: unloading %s\n", e->name);
    r->ld.unload(r->ld.ctx, app);
    pthread_mutex_lock(&r->mu);
    e->app = NULL;
    e->state = M_UNLOADED;
    pthread_cond_broadcast(&r->cv);
}

/* Under r->mu: waits up to POLL_MS for a change (or a busy model's jobs to end). */
static void wait_a_little(srv_router *r) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += POLL_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&r->cv, &r->mu, &until);
}

/* Under r->mu: whether loading e would pass --models-max or the budget with
 * what is loaded (or loading) now. */
static int crowded(const srv_router *r, const entry *e) {
    int n = 0;
    double bytes = e->bytes;
    for (int i = 0; i < r->n; i++)
        if (&r->e[i] != e && r->e[i].state != M_UNLOADED) n++, bytes += r->e[i].bytes;
    return (r->models_max > 0 && n >= r->models_max) || (r->budget > 0 && n > 0 && bytes > r->budget);
}

/* Under r->mu: whether the models loaded (or loading) take more than the budget, two or more of them. */
static int over_budget(const srv_router *r) {
    int n = 0;
    double bytes = 0;
    for (int i = 0; i < r->n; i++)
        if (r->e[i].state != M_UNLOADED) n++, bytes += r->e[i].bytes;
    return r->budget > 0 && n > 1 && bytes > r->budget;
}

/* ---- acquiring ------------------------------------------------------------ */

static void not_found(srv_api_error *e, const char *name) {
    srv_api_error_set(e, 404, "invalid_request_error", "model_not_found", "model",
                      "the model '%.200s' does not exist (GET /v1/models lists them)", name ? name : "");
}

/* Whether the file begins as a GGUF file does: one that does not will fail
 * to load, and makes no room (no model is unloaded for it). */
static int plausible(const char *path) {
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    const int ok = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, "GGUF", 4);
    if (f) fclose(f);
    return ok;
}

/* Under r->mu: e loaded (room made first), or -1 with *err. */
static int load_locked(srv_router *r, entry *e, srv_api_error *err) {
    const double give_up = srv_now_s() + ROOM_WAIT_S;
    for (;;) {
        if (e->state != M_UNLOADED) return 0; /* another request began it: the caller waits */
        if (!crowded(r, e) || !plausible(e->path)) break; /* the loader says why a broken file fails */
        entry *v = lru_idle(r, e);
        if (v) {
            unload_locked(r, v);
            continue;
        }
        if (r->closed) {
            srv_api_error_set(err, 503, "server_error", "shutting_down", NULL, "the server is stopping");
            return -1;
        }
        if (srv_now_s() > give_up) {
            srv_api_error_set(err, 503, "server_error", "models_busy", "model",
                              "cannot load '%s': the models loaded (--models-max %d) are all busy", e->name,
                              r->models_max);
            return -1;
        }
        wait_a_little(r); /* a busy model becomes idle, or a load ends */
    }
    e->state = M_LOADING;
    e->failed = 0;
    ++e->attempt;
    for (;;) {
        pthread_mutex_unlock(&r->mu);
        fprintf(stderr, "clinfer serve: loading %s\n", e->name);
        srv_app *app = NULL;
        double bytes = 0, t0 = srv_now_s();
        clinfer_status st = r->ld.load(r->ld.ctx, e->name, e->path, &app, &bytes);
        pthread_mutex_lock(&r->mu);
        if (st == CLINFER_OK) {
            fprintf(stderr, "clinfer serve: loaded %s in %.2f s\n", e->name, srv_now_s() - t0);
            e->app = app, e->bytes = bytes + r->overhead, e->state = M_LOADED;
            pthread_cond_broadcast(&r->cv);
            /* before its first load a model counts its file alone (its KV
             * cache unknown): now measured, the budget may be passed, and
             * the least recently used idle models go (e held meanwhile) */
            e->users++;
            for (entry *v; over_budget(r) && (v = lru_idle(r, e));) unload_locked(r, v);
            e->users--;
            return 0;
        }
        /* out of memory beside the models loaded: the least recently used idle one goes, and it is tried again */
        entry *v = st == CLINFER_ERR_MEMORY ? lru_idle(r, e) : NULL;
        if (v) {
            fprintf(stderr, "clinfer serve: %s does not fit beside %s: %s\n", e->name, v->name, clinfer_last_error());
            unload_locked(r, v);
            continue;
        }
        snprintf(e->error, sizeof e->error, "%s", clinfer_last_error());
        fprintf(stderr, "clinfer serve: cannot load %s: %s\n", e->name, e->error);
        e->failed = 1, e->state = M_UNLOADED;
        pthread_cond_broadcast(&r->cv);
        srv_api_error_set(err, 500, "server_error", "model_load_failed", "model", "the model '%s' cannot be loaded: %s",
                          e->name, e->error);
        return -1;
    }
}

srv_app *srv_router_acquire(srv_router *r, const char *name, int autoload, srv_api_error *err) {
    pthread_mutex_lock(&r->mu);
    entry *e = find(r, name);
    if (!e) {
        pthread_mutex_unlock(&r->mu);
        not_found(err, name);
        return NULL;
    }
    unsigned waited_for = 0; /* the load attempt this request waited on (0: none) */
    for (;;) {
        if (r->closed) {
            srv_api_error_set(err, 503, "server_error", "shutting_down", NULL, "the server is stopping");
            break;
        }
        if (e->state == M_LOADED) {
            e->users++;
            e->last_used = srv_now_s();
            srv_app *app = e->app;
            pthread_mutex_unlock(&r->mu);
            return app;
        }
        if (e->state == M_UNLOADED && waited_for && waited_for == e->attempt && e->failed) {
            /* the load this request waited for failed: its reason, not another try */
            srv_api_error_set(err, 500, "server_error", "model_load_failed", "model",
                              "the model '%s' cannot be loaded: %s", e->name, e->error);
            break;
        }
        if (e->state == M_UNLOADED) {
            if (!autoload) {
                srv_api_error_set(err, 503, "server_error", "model_not_loaded", "model",
                                  "the model '%s' is not loaded (POST /models/load)", e->name);
                break;
            }
            if (load_locked(r, e, err)) break;
            continue;
        }
        if (e->state == M_LOADING) waited_for = e->attempt;
        wait_a_little(r); /* loading, or unloading */
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

void srv_router_release(srv_router *r, srv_app *app) {
    if (!app) return;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        if (r->e[i].app == app) r->e[i].users--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

srv_app *srv_router_acquire_recent(srv_router *r) {
    pthread_mutex_lock(&r->mu);
    entry *best = NULL;
    for (int i = 0; i < r->n; i++)
        if (r->e[i].state == M_LOADED && (!best || r->e[i].last_used > best->last_used)) best = &r->e[i];
    srv_app *app = best ? best->app : NULL;
    if (best) best->users++;
    pthread_mutex_unlock(&r->mu);
    return app;
}

/* ---- the routes ----------------------------------------------------------- */

int srv_router_load(srv_router *r, const char *name, srv_api_error *err) {
    pthread_mutex_lock(&r->mu);
    entry *e = name ? find(r, name) : NULL;
    if (!e) {
        pthread_mutex_unlock(&r->mu);
        not_found(err, name);
        return -1;
    }
    const mstate was = e->state;
    pthread_mutex_unlock(&r->mu);
    if (was == M_LOADED || was == M_LOADING) {
        srv_api_error_set(err, 400, "invalid_request_error", "model_loaded", "model", "the model '%s' is already %s",
                          e->name, was == M_LOADED ? "loaded" : "loading");
        return -1;
    }
    srv_app *app = srv_router_acquire(r, name, 1, err);
    srv_router_release(r, app);
    return app ? 0 : -1;
}

int srv_router_unload(srv_router *r, const char *name, srv_api_error *err) {
    pthread_mutex_lock(&r->mu);
    entry *e = name ? find(r, name) : NULL;
    int rc = 0;
    if (!e) {
        not_found(err, name);
        rc = -1;
    } else if (e->state != M_LOADED) {
        srv_api_error_set(err, 400, "invalid_request_error", "model_not_loaded", "model", "the model '%s' is not loaded",
                          e->name);
        rc = -1;
    } else {
        /* no new request takes it; its answers are cut and end on their own */
        e->state = M_UNLOADING;
        srv_sched_shutdown(e->app->sched);
        while (e->users || srv_sched_held(e->app->sched)) wait_a_little(r);
        e->state = M_LOADED;
        unload_locked(r, e);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void srv_router_shutdown(srv_router *r) {
    pthread_mutex_lock(&r->mu);
    r->closed = 1;
    for (int i = 0; i < r->n; i++)
        if (r->e[i].state == M_LOADED) srv_sched_shutdown(r->e[i].app->sched);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

char *srv_router_models_json(srv_router *r) {
    json_t *data = json_array();
    pthread_mutex_lock(&r->mu);
    for (int i = 0; data && i < r->n; i++) {
        const entry *e = &r->e[i];
        static const char *const VALUE[] = {"unloaded", "loading", "loaded", "unloading"};
        json_t *status = srv_api_pack("{s:s}", "value", VALUE[e->state]);
        if (status && e->failed && e->state == M_UNLOADED) {
            json_object_set_new(status, "failed", json_true());
            json_object_set_new(status, "error", srv_api_text_json(e->error, strlen(e->error)));
        }
        json_t *m = status ? srv_api_pack("{s:s, s:s, s:I, s:s, s:o}", "id", e->name, "object", "model", "created",
                                          (json_int_t)r->created, "owned_by", "clinfer", "status", status)
                           : NULL;
        if (m && e->state == M_LOADED)
            json_object_set_new(m, "meta", srv_api_pack("{s:i, s:i, s:I}", "n_ctx", e->app->n_ctx, "n_slots",
                                                        e->app->n_slots, "memory_bytes", (json_int_t)e->bytes));
        if (!m || json_array_append_new(data, m)) {
            json_decref(data);
            data = NULL;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return data ? srv_api_dump(srv_api_pack("{s:s, s:o}", "object", "list", "data", data)) : NULL;
}

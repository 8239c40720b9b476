#include "grammar_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler.h" /* srv_now_s, srv_cond_init_monotonic */

/* How often a waiting request looks whether its client is still there. */
#define LOOK_S 0.1

typedef enum estate { E_QUEUED, E_RUNNING, E_READY, E_FAILED } estate;

typedef struct entry {
    char *key; /* the source's kind (one byte), then its text */
    size_t len;
    estate state;
    clinfer_grammar *g; /* E_READY: the cache's reference */
    clinfer_status st;  /* E_FAILED: why, */
    char *error;        /* and the message */
    int waiters;        /* requests waiting for it (or reading its result) */
    unsigned long long used;
    struct entry *next; /* the list, oldest first */
} entry;

struct srv_gcache {
    const clinfer_model *m;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t thread;
    int started, stopping;
    entry *head;
    int cap;
    unsigned long long clock, hits, misses, abandoned;
    srv_gcache_compiler compile;
};

static void entry_free(entry *e) {
    if (!e) return;
    clinfer_grammar_free(e->g);
    free(e->error);
    free(e->key);
    free(e);
}

static void unlink_entry(srv_gcache *c, entry *e) {
    for (entry **p = &c->head; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            return;
        }
}

/* Under the lock: the finished entries nobody waits for, down to the
 * capacity, least recently used first; a failure that was not the
 * source's fault (out of memory) is not kept at all. */
static void evict(srv_gcache *c) {
    for (;;) {
        int finished = 0;
        entry *lru = NULL;
        for (entry *e = c->head; e; e = e->next) {
            if (e->state != E_READY && e->state != E_FAILED) continue;
            if (e->state == E_FAILED && e->st != CLINFER_ERR_ARG && !e->waiters) {
                lru = e;
                finished = c->cap + 1; /* goes now */
                break;
            }
            finished++;
            if (!e->waiters && (!lru || e->used < lru->used)) lru = e;
        }
        if (finished <= c->cap || !lru) return;
        unlink_entry(c, lru);
        entry_free(lru); /* its jobs keep their references */
    }
}

/* A tools key: the choice and parallel as digits, the named function's
 * name and a NUL, then the tools' JSON. */
char *srv_gcache_tools_key(const char *tools, clinfer_tool_choice choice, const char *name, int parallel, size_t *len) {
    size_t nn = name ? strlen(name) : 0, nt = strlen(tools);
    char *k = malloc(nn + nt + 4);
    if (!k) return NULL;
    k[0] = (char)('0' + (int)choice);
    k[1] = parallel ? '1' : '0';
    memcpy(k + 2, name ? name : "", nn);
    k[2 + nn] = 0;
    memcpy(k + 3 + nn, tools, nt);
    k[3 + nn + nt] = 0;
    *len = nn + nt + 3;
    return k;
}

/* Compiles a source (on the cache's thread, without the lock). */
static clinfer_status compile(const clinfer_model *m, srv_gsource kind, const char *src, size_t n,
                              clinfer_grammar **out) {
    *out = NULL;
    if (kind == SRV_GSRC_GBNF) return clinfer_grammar_create(m, src, n, NULL, out);
    if (kind == SRV_GSRC_SCHEMA) {
        char *gbnf = NULL;
        clinfer_status st = clinfer_json_schema_to_gbnf(src, n, &gbnf);
        if (st == CLINFER_OK) st = clinfer_grammar_create(m, gbnf, strlen(gbnf), NULL, out);
        clinfer_free(gbnf);
        return st;
    }
    /* SRV_GSRC_TOOLS: srv_gcache_tools_key's fields */
    const char *name = src + 2, *tools = name + strlen(name) + 1;
    clinfer_tools *t;
    clinfer_status st = clinfer_tools_create(m, tools, strlen(tools), &t);
    if (st == CLINFER_OK)
        st = clinfer_tools_grammar(t, (clinfer_tool_choice)(src[0] - '0'), *name ? name : NULL, src[1] == '1', out);
    clinfer_tools_free(t);
    return st;
}

static void *worker(void *arg) {
    srv_gcache *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        entry *e = c->head;
        while (e && e->state != E_QUEUED) e = e->next;
        if (!e) {
            pthread_cond_wait(&c->work, &c->mu);
            continue;
        }
        e->state = E_RUNNING;
        srv_gcache_compiler f = c->compile ? c->compile : compile;
        pthread_mutex_unlock(&c->mu);
        clinfer_grammar *g;
        clinfer_status st = f(c->m, (srv_gsource)e->key[0], e->key + 1, e->len - 1, &g);
        char *error = st == CLINFER_OK ? NULL : strdup(clinfer_last_error());
        pthread_mutex_lock(&c->mu);
        e->st = st;
        if (st == CLINFER_OK) {
            e->g = g;
            e->state = E_READY;
        } else {
            e->error = error;
            e->state = E_FAILED;
        }
        e->used = ++c->clock;
        pthread_cond_broadcast(&c->done);
        evict(c);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

clinfer_status srv_gcache_create(const clinfer_model *m, int capacity, srv_gcache **out) {
    srv_gcache *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    c->m = m;
    c->cap = capacity < 1 ? 1 : capacity;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work, NULL);
    srv_cond_init_monotonic(&c->done);
    int err = pthread_create(&c->thread, NULL, worker, c);
    if (err) {
        srv_gcache_free(c);
        return clinfer_fail(CLINFER_ERR_MEMORY, "cannot start the grammar compiler's thread: %s", strerror(err));
    }
    c->started = 1;
    *out = c;
    return CLINFER_OK;
}

void srv_gcache_free(srv_gcache *c) {
    if (!c) return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->stopping = 1;
        pthread_cond_signal(&c->work);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    while (c->head) {
        entry *e = c->head;
        c->head = e->next;
        entry_free(e);
    }
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Under the lock: the entry of key, or NULL. */
static entry *find(srv_gcache *c, const char *key, size_t len) {
    for (entry *e = c->head; e; e = e->next)
        if (e->len == len && !memcmp(e->key, key, len)) return e;
    return NULL;
}

static struct timespec at(double t) {
    return (struct timespec){(time_t)t, (long)((t - (double)(time_t)t) * 1e9)};
}

srv_gcache_result srv_gcache_get(srv_gcache *c, srv_gsource kind, const char *src, size_t len,
                                 const srv_gcache_wait *w, clinfer_grammar **out, clinfer_status *st) {
    *out = NULL;
    *st = CLINFER_OK;
    char *key = malloc(len + 2);
    if (!key) {
        *st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return SRV_GCACHE_FAILED;
    }
    key[0] = (char)kind;
    memcpy(key + 1, src, len);
    key[len + 1] = 0; /* the compilers read it as text */
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, key, len + 1);
    int mine = 0;
    if (!e) { /* queued for the cache's thread, which compiles one at a time */
        if (!(e = calloc(1, sizeof *e))) {
            pthread_mutex_unlock(&c->mu);
            free(key);
            *st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
            return SRV_GCACHE_FAILED;
        }
        e->key = key;
        e->len = len + 1;
        key = NULL;
        entry **p = &c->head;
        while (*p) p = &(*p)->next;
        *p = e;
        c->misses++;
        mine = 1;
        pthread_cond_signal(&c->work);
    }
    free(key);
    e->waiters++;
    srv_gcache_result r;
    for (;;) {
        if (e->state == E_READY) {
            *out = clinfer_grammar_retain(e->g);
            e->used = ++c->clock;
            c->hits += !mine;
            r = SRV_GCACHE_OK;
            break;
        }
        if (e->state == E_FAILED) {
            *st = clinfer_fail(e->st, "%s", e->error ? e->error : "out of host memory");
            r = SRV_GCACHE_FAILED;
            break;
        }
        double now = srv_now_s();
        if (w && now >= w->deadline) {
            r = e->state == E_RUNNING ? SRV_GCACHE_TIMEOUT : SRV_GCACHE_BUSY;
            break;
        }
        if (w && w->gone) { /* asked without the lock: it may write to the client */
            pthread_mutex_unlock(&c->mu);
            int gone = w->gone(w->arg);
            pthread_mutex_lock(&c->mu);
            if (gone) {
                r = SRV_GCACHE_GONE;
                break;
            }
        }
        double until = now + LOOK_S;
        if (w && w->deadline < until) until = w->deadline;
        const struct timespec ts = at(until);
        pthread_cond_timedwait(&c->done, &c->mu, &ts);
    }
    if (--e->waiters == 0 && e->state == E_QUEUED) { /* nobody wants it any more: never started */
        unlink_entry(c, e);
        entry_free(e);
        c->abandoned++;
    }
    evict(c);
    pthread_mutex_unlock(&c->mu);
    return r;
}

void srv_gcache_stats_get(srv_gcache *c, srv_gcache_stats *out) {
    pthread_mutex_lock(&c->mu);
    int n = 0;
    for (entry *e = c->head; e; e = e->next) n += e->state == E_READY;
    *out = (srv_gcache_stats){c->hits, c->misses, n, c->abandoned};
    pthread_mutex_unlock(&c->mu);
}

void srv_gcache_set_compiler(srv_gcache *c, srv_gcache_compiler f) {
    pthread_mutex_lock(&c->mu);
    c->compile = f;
    pthread_mutex_unlock(&c->mu);
}

/* clinfer serve: an OpenAI-compatible HTTP server (server/). It listens
 * first (/health answers 503 while the model loads), serves until SIGINT or
 * SIGTERM, then stops accepting, cuts the running answers cleanly and exits
 * 0. Under --mpi a stage that fails on a rank ends it too: the job stops
 * with that rank's error (a broken pipeline would fail every request). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adapters.h"
#include "cli.h"
#include "embeddings.h"
#include "engine.h"
#include "http.h"
#include "memory.h"
#include "draft.h"
#include "reasoning.h"
#include "sampling_opts.h"
#include "serve_models.h"
#include "session.h"

static const char *USAGE =
    "clinfer serve [--host 127.0.0.1] [--port 8080] [--parallel N] [-c|--ctx N] [--kv-memory MIB] " CLI_DRAFT_USAGE " [--draft-streams N] [--queue N] "
    "[--api-key KEY] [--request-timeout S] [--max-per-client N] [--alias NAME] [--reasoning-format auto|none|deepseek] "
    "[--reasoning-budget -1|0|N] [--slot-save-path DIR] [--cache-ram MIB] [--models-dir DIR [--models-max N] [--models-memory MIB]] "
    CLI_MODEL_USAGE;

/* SIGINT and SIGTERM blocked (threads started now inherit it: the signals
 * go to the main thread, which waits for them) or as they were. */
static void hold_signals(int block, sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(block ? SIG_BLOCK : SIG_SETMASK, block ? &set : old, block ? old : NULL);
}

/* A rank reported a failed pass (the scheduler's thread): wake the main
 * thread's wait as SIGTERM would; the job then ends with that failure. */
static volatile sig_atomic_t pipeline_broken;
static void stop_on_broken(void) {
    pipeline_broken = 1;
    kill(getpid(), SIGTERM);
}

/* The model's name in the API: --alias, else its file's name, made valid
 * UTF-8 (every answer, and /metrics' label, carries it); NULL: out of
 * memory. */
static char *model_id(const char *alias, const char *path) {
    const char *s = alias ? alias : strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    return srv_api_utf8(s, strlen(s), NULL);
}

int cmd_serve(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *host = "127.0.0.1", *api_key = getenv("CLINFER_API_KEY"), *alias = NULL;
    int port = 8080, parallel = 4, queue = 64, request_timeout = SRV_REQUEST_TIMEOUT_S, kv_mib = 0,
        cache_ram_mib = 0, max_per_client = SRV_MAX_PER_CLIENT, reasoning_budget = -1;
    const char *reasoning_format = "auto", *slot_dir = NULL;
    serve_models_cfg models = {.models_max = 4}; /* --models-dir: cli/serve_models.c */
    cli_draft_opts dr = {0}; /* speculation: by prompt lookup (--draft-max), or a draft model's (-md) */
    /* -md: a step of more decoding requests drafts nothing: on this project's CPU 4 streams ran
     * 0.68-0.98x greedy with drafts (bench/RESULTS.md); on a GPU a higher bound may pay */
    int draft_streams = 2;
    const cli_option opts[] = {CLI_MODEL_OPTIONS(&o),
                               CLI_OPT_INT("--ctx", &o.n_ctx, 1, 1 << 20, .alias = "-c",
                                           .help = "each sequence's context in tokens (default: the model's, capped)"),
                               CLI_OPT_STR("--host", &host, .arg = "ADDR", .help = "the address to listen on (default 127.0.0.1)"),
                               CLI_OPT_INT("--port", &port, 0, 65535, .help = "the port (default 8080; 0: any free one)"),
                               CLI_OPT_INT("--parallel", &parallel, 1, 256, .alias = "-np",
                                           .help = "requests decoded together (default 4)"),
                               CLI_OPT_INT("--kv-memory", &kv_mib, 1, 1 << 24, .arg = "MIB",
                                           .help = "the KV cache's memory, shared by the sequences"),
                               CLI_DRAFT_OPTIONS(&dr), /* --draft-max, -md, --draft-min, --draft-p-min */
                               CLI_OPT_INT("--draft-streams", &draft_streams, 0, 256,
                                           .help = "with -md: no drafts in a step decoding more requests than N "
                                                   "(default 2; 0: no bound)"),
                               CLI_OPT_INT("--queue", &queue, 0, 1 << 16, .help = "requests waiting at most (default 64); more get 503"),
                               CLI_OPT_STR("--api-key", &api_key, .arg = "KEY",
                                           .help = "require this bearer key (default $CLINFER_API_KEY)"),
                               CLI_OPT_INT("--request-timeout", &request_timeout, 1, 3600, .arg = "S",
                                           .help = "seconds a request may take to arrive"),
                               CLI_OPT_INT("--max-per-client", &max_per_client, 1, SRV_MAX_CONNECTIONS,
                                           .help = "connections one client address may hold"),
                               CLI_OPT_STR("--alias", &alias, .alias = "-a", .arg = "NAME", .help = "the model's name in the API (default: its file's)"),
                               CLI_OPT_STR("--reasoning-format", &reasoning_format, .arg = "auto|none|deepseek",
                                           .help = "a model's reasoning as reasoning_content (auto, deepseek) or in content (none)"),
                               CLI_OPT_INT("--reasoning-budget", &reasoning_budget, -1, 1 << 24,
                                           .help = "-1: think as the model does; 0: no thinking (the template's "
                                                   "enable_thinking false); N: the thought closed after N tokens"),
                               CLI_OPT_STR("--slot-save-path", &slot_dir, .arg = "DIR",
                                           .help = "the folder POST /slots/{id}?action=save|restore writes and reads "
                                                   "(made if missing); without it slots are not saved"),
                               CLI_OPT_INT("--cache-ram", &cache_ram_mib, 0, 1 << 24, .arg = "MIB",
                                           .help = "keep prompt caches given up for other requests in host RAM, up to "
                                                   "MIB, and reuse them (default 0: off)"),
                               CLI_OPT_STR("--models-dir", &models.models_dir, .arg = "DIR",
                                           .help = "serve every *.gguf in DIR (and -m), each loaded on first use"),
                               CLI_OPT_INT("--models-max", &models.models_max, 0, 1024,
                                           .help = "--models-dir: models loaded at once (default 4; 0: no limit)"),
                               CLI_OPT_INT("--models-memory", &models.budget_mib, 0, 1 << 30, .arg = "MIB",
                                           .help = "--models-dir: the loaded models' weights and KV together (0: no limit)"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    srv_reasoning_format rfmt;
    if (srv_reasoning_format_parse(reasoning_format, &rfmt))
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "--reasoning-format %s: not auto, none or deepseek", reasoning_format));
    /* an empty key (a variable set from nothing) would turn authentication off unnoticed */
    if (api_key && !*api_key)
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "the API key (--api-key or CLINFER_API_KEY) is empty: give one, or "
                                               "unset it to serve without a key"));
    if (slot_dir) { /* the folder exists (made here, one level) before anything is served */
        struct stat sb;
        if (mkdir(slot_dir, 0700) != 0 && errno != EEXIST)
            return cli_error(clinfer_fail(CLINFER_ERR_IO, "--slot-save-path %s: %s", slot_dir, strerror(errno)));
        if (stat(slot_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return cli_error(clinfer_fail(CLINFER_ERR_IO, "--slot-save-path %s is not a folder", slot_dir));
    }
    if (!dr.model && (dr.min || dr.p_min > 0 || draft_streams != 2))
        return cli_usage(USAGE, "--draft-min, --draft-p-min and --draft-streams go with -md FILE");
    /* -md alone: 4 (llama.cpp's --spec-draft-n-max is 3; on this project's CPU 4 beat 16 by far:
     * a verify row costs a fraction of a target token there, bench/RESULTS.md) */
    const int draft_max = dr.model && !dr.max ? 4 : dr.max;
    if (dr.model && dr.min > draft_max)
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "--draft-min %d is above --draft-max %d", dr.min, draft_max));
    /* one draft model cannot serve a folder of models of several
     * vocabularies, and pairing each with its own needs a naming rule the
     * folder does not have: refused, not silently dropped */
    if (models.models_dir && dr.model)
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "--model-draft goes with one model (-m), not --models-dir: "
                                                       "a draft model drafts for one target's vocabulary"));
    if (models.models_dir && (o.place.lora.n || o.place.lora_scaled.n)) /* one model's adapters, not a folder's */
        return cli_error(clinfer_fail(CLINFER_ERR_ARG, "--lora and --lora-scaled go with -m, not --models-dir"));
    if (models.models_dir) { /* several models, each loaded on use */
        models.o = &o, models.alias = alias, models.parallel = parallel, models.queue = queue, models.kv_mib = kv_mib;
        models.draft_max = draft_max, models.cache_ram_mib = cache_ram_mib, models.slot_dir = slot_dir;
        models.http = &(srv_http_config){host, port, api_key, request_timeout, max_per_client};
        return cli_error(serve_models(&models));
    }
    char path[1024];
    clinfer_status st = cli_model_fetch(o.model, 0, path, sizeof path); /* a catalogue name: fetched on first use */
    if (st != CLINFER_OK) return cli_error(st);
    cli_warn_base_chat(path);

    signal(SIGPIPE, SIG_IGN); /* a client gone is a failed write, not the end */
    sigset_t old;
    hold_signals(1, &old);
    srv_http *h;
    st = srv_http_start(&(srv_http_config){host, port, api_key, request_timeout, max_per_client}, &h);
    if (st != CLINFER_OK) return cli_error(st);
    fprintf(stderr, "clinfer serve: listening on http://%s%s%s:%d/ (loading the model)\n", strchr(host, ':') ? "[" : "",
            host, strchr(host, ':') ? "]" : "", srv_http_port(h));

    cli_session s = {0}, ds = {0}; /* Ctrl-C and SIGTERM stop a load as in `run` (exit 9); ds: -md's model */
    srv_engine *e = NULL;
    srv_draft *draft = NULL;
    char *id = model_id(alias, path);
    srv_app app = {.model_id = id, .n_slots = parallel, .created = (long long)time(NULL), .slot_save_path = slot_dir,
                   .reasoning_format = (int)rfmt, .reasoning_off = reasoning_budget == 0,
                   .reasoning_budget = reasoning_budget > 0 ? reasoning_budget : 0};
    o.place.n_seq = parallel, o.place.n_ctx = o.n_ctx; /* a split's plan counts every slot's KV */
    const double host_avail = srv_host_available(); /* before the load, as its fit reads it */
    st = id ? cli_session_open(path, &o.place, -1, o.kv, &s) : CLINFER_ERR_MEMORY; /* srv_api_utf8 said why */
    if (st == CLINFER_OK) st = srv_engine_create(s.m, parallel, o.n_ctx, o.kv, (size_t)kv_mib << 20, &e);
    if (st == CLINFER_OK) st = srv_engine_warm(e); /* every decode kernel built before "ready" */
    if (st == CLINFER_OK && dr.model) { /* the draft model, its vocabulary checked, a sequence a slot */
        char dpath[1024], why[1024];
        st = cli_model_fetch(dr.model, 0, dpath, sizeof dpath);
        cli_place dplace = o.place; /* the LoRA adapters are the target's */
        dplace.lora = dplace.lora_scaled = (cli_list){0};
        if (st == CLINFER_OK) st = cli_session_open(dpath, &dplace, -1, o.kv, &ds);
        if (st == CLINFER_OK)
            st = srv_draft_create(s.m, ds.m, parallel, srv_engine_n_ctx(e), o.kv,
                                  &(srv_draft_params){draft_max, dr.min, dr.p_min, draft_streams}, &draft);
        if (st != CLINFER_OK) {
            snprintf(why, sizeof why, "%s", clinfer_last_error()); /* clinfer_fail writes where it points */
            st = clinfer_fail(st, "the draft model (-md %s): %s", dr.model, why);
        }
    }
    if (st == CLINFER_OK) { /* the model fitted alone; with what the server holds beside it (memory.h) */
        srv_mem b = {.adapters = srv_lora_bytes(s.m), .draft = srv_draft_bytes(draft),
                     .cache_ram = (double)cache_ram_mib * 1048576.0};
        if (draft)
            b.draft_laws = srv_mem_draft_laws(parallel, srv_draft_max(draft), clinfer_model_n_vocab(s.m),
                                              clinfer_model_n_vocab(ds.m));
        srv_engine_bytes(e, &b.weights, &b.kv);
        double mem = 0; /* the device's, where one holds it all (a split's or MPI's stages were each fitted) */
        int cpu = 0;
        if (cli_mpi || o.place.devices || srv_mem_device(o.place.device, &mem, &cpu) != CLINFER_OK) mem = 0;
        st = srv_mem_check(&b, mem, cpu, host_avail);
    }
    if (st == CLINFER_OK) st = cli_check_chat(s.m);
    if (st == CLINFER_OK) st = srv_embedder_create(s.m, srv_engine_n_ctx(e), o.kv, &app.embedder);
    if (st == CLINFER_OK) {
        app.m = s.m;
        app.n_ctx = srv_engine_n_ctx(e);
        hold_signals(1, &old);
        st = srv_gcache_create(s.m, SRV_GCACHE_ENTRIES, &app.grammars);
        if (st == CLINFER_OK) st = srv_sched_create(e, s.m, parallel, queue, &app.sched);
        if (st == CLINFER_OK) srv_sched_speculate(app.sched, draft_max); /* prompt lookup, greedy or sampled requests */
        if (st == CLINFER_OK && draft) st = srv_sched_set_draft(app.sched, draft); /* -md: its drafts instead */
        if (st == CLINFER_OK) st = srv_sched_cache_ram(app.sched, (size_t)cache_ram_mib << 20);
    }
    if (st == CLINFER_OK) {
        srv_http_set_app(h, &app);
        clinfer_kv_pool pool;
        srv_engine_kv_pool(e, &pool);
        fprintf(stderr, "clinfer serve: ready: %s on %s, %d slots of up to %d tokens sharing a KV cache of %d tokens\n",
                app.model_id, s.info.devices, parallel, app.n_ctx, pool.n_blocks * pool.block);
        if (cli_mpi) clinfer_mpi_on_broken(stop_on_broken);
        while (!cli_interrupted) sigsuspend(&old); /* SIGINT, SIGTERM */
        fprintf(stderr, "clinfer serve: %s: stopping\n", pipeline_broken ? "a stage failed" : cli_interrupt_name());
    }
    /* no new connections or requests; the running answers cut and sent
     * out; then the connections closed, and only then the scheduler freed
     * (their threads use it to the end) */
    srv_http_quiesce(h);
    if (app.sched) srv_sched_shutdown(app.sched);
    srv_http_drain(h, 5);
    srv_http_stop(h);
    srv_sched_free(app.sched);
    /* after the jobs (each held its own reference anyway); a compilation
     * still running is not waited for (a hostile schema's would hold up the
     * exit), and reads the model until the process ends: the model is then
     * left to the exit */
    int compiling = srv_gcache_free(app.grammars);
    hold_signals(0, &old);
    srv_engine_free(e);
    srv_draft_free(draft);
    cli_session_close(&ds);
    srv_embedder_free(app.embedder);
    if (compiling) {
        clinfer_session_free(s.s);
        s.s = NULL;
    } else
        cli_session_close(&s);
    free(id);
    return cli_error(st);
}

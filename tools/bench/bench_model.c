#include "bench_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "energy.h"
#include "json.h"
#include "options.h"
#include "estimate.h"
#include "llama.h"
#include "place.h"
#include "quant_mix.h"
#include "roof.h"

static const char *USAGE =
    "clinfer bench [-m MODEL] [-p 512] [-n 128] [-r 5] [--kv f32|f16|q8_0|q4_0] [--batch B] [--parallel N] [--json]\n"
    "              [--price USD_PER_HOUR]\n"
    "              [--device SEL | --all-devices | --devices SEL,SEL,... [--split layers] [--split-ratio a,b,...]]\n"
    "  --batch: the prompt's chunks (default: the whole prompt at once); over --devices they pipeline\n"
    "  --parallel: also tg with N sequences a step, each its own -p prompt first (the aggregate rate)\n"
    "  --price: the machine's cost an hour: dollars per million prompt and generated tokens at the measured rates\n"
    "  energy per token: the CPU packages' RAPL counters (/sys/class/powercap), where the host exposes them";

/* The process's peak resident set so far (VmHWM of /proc/self/status),
 * bytes; -1 where /proc is missing or says nothing (not Linux). It counts
 * everything the process touched: the file's mapped pages that were read,
 * the weights' copies, the KV cache, the OpenCL driver's own. */
static double peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kb = strtod(line + 6, NULL); /* "VmHWM:   123456 kB" */
            break;
        }
    fclose(f);
    return kb >= 0 ? kb * 1024 : -1;
}

/* decode steps before timing (kernel builds), and profiled per device */
enum { WARMUP_TOKENS = 4, PROFILE_TOKENS = 16 };

typedef struct {
    const char *model_path, *device;
    clf_place split; /* --devices: the model split across them */
    int n_prompt, n_gen, reps, all_devices, json, n_batch, parallel;
    clinfer_kv_type kv; /* --kv (cli/options.h) */
    float price;        /* --price: dollars an hour; 0: none */
} opts;

typedef struct {
    double median, stddev; /* tokens/s */
    double gflops, gbs;    /* at the median */
    double joules, watts;  /* a token's energy, the mean power over the reps' interval (RAPL); < 0: none */
} figure;

/* The energy of a timed run of `tokens` tokens over `seconds`. */
static void energy_of(const clf_energy *e, const clf_energy_mark *a, double seconds, double tokens, figure *f) {
    clf_energy_mark b = clf_energy_read(e);
    double j = clf_energy_joules(e, a, &b);
    f->joules = j >= 0 && tokens > 0 ? j / tokens : -1;
    f->watts = j >= 0 && seconds > 0 ? j / seconds : -1;
}

/* What a generated token costs the device, beside the copy roof. */
typedef struct {
    double launches;      /* kernels enqueued per token (clf_launch's count) */
    double bytes;         /* read per token: every weight once + the KV cache */
    double kv_bytes;      /* of which the KV cache, at the run's mean length */
    double roof_share;    /* tg GB/s / the copy roof measured in this run */
} token_cost;

static void summarize(double *tps, int n, figure *f) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += tps[i] / n;
    for (int i = 0; i < n; i++) var += (tps[i] - mean) * (tps[i] - mean) / (n > 1 ? n - 1 : 1);
    f->median = clf_bench_median(tps, n);
    f->stddev = sqrt(var);
}

/* tg with o->parallel sequences a step (the server's batched decode): each
 * its own prompt of n_prompt tokens first (one pass each), then n_gen
 * steps of one token a sequence, every sequence's logits read, as a server
 * reads them; the aggregate tokens/s over reps. */
static clf_status bench_parallel(const opts *o, const clf_llama *m, const int32_t *toks, int n_toks, clf_type kv,
                                 double *tps, figure *f, clf_profile_entry **prof, int *nprof) {
    const int n = o->parallel, n_ctx = o->n_prompt + o->n_gen + WARMUP_TOKENS + PROFILE_TOKENS;
    clf_llama_ctx *c = NULL;
    clf_llama_seq_batch *b = calloc((size_t)n, sizeof *b);
    float *logits = malloc((size_t)n * m->hp.n_vocab * sizeof *logits);
    int32_t *next = malloc((size_t)n * sizeof *next);
    clf_status st = b && logits && next ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    if (st == CLF_OK) st = clf_llama_ctx_create_seqs(m, n_ctx, o->n_prompt > n ? o->n_prompt : n, n, kv, &c);
    for (int r = -1; st == CLF_OK && r < o->reps; r++) { /* r = -1: the warm-up */
        for (int i = 0; i < n; i++) clf_llama_seq_rewind(c, i, 0);
        for (int i = 0; st == CLF_OK && o->n_prompt > 0 && i < n; i++) {
            clf_llama_seq_batch p = {.seq = i, .tokens = toks, .n = o->n_prompt, .logits = logits + (size_t)i * m->hp.n_vocab};
            st = clf_llama_eval_seqs(c, &p, 1);
        }
        const int steps = r < 0 ? WARMUP_TOKENS : o->n_gen;
        double t0 = clf_now_s();
        for (int k = 0; st == CLF_OK && k < steps; k++) {
            for (int i = 0; i < n; i++) {
                next[i] = toks[(k + i) % n_toks];
                b[i] = (clf_llama_seq_batch){.seq = i, .tokens = &next[i], .n = 1, .logits = logits + (size_t)i * m->hp.n_vocab};
            }
            st = clf_llama_eval_seqs(c, b, n);
        }
        if (r >= 0) tps[r] = (double)n * steps / (clf_now_s() - t0);
    }
    if (st == CLF_OK) summarize(tps, o->reps, f);
    /* where a step's time goes, by kernel */
    if (st == CLF_OK) st = clf_profile_start(m->rt);
    for (int k = 0; st == CLF_OK && k < PROFILE_TOKENS; k++) {
        for (int i = 0; i < n; i++) b[i] = (clf_llama_seq_batch){.seq = i, .tokens = &next[i], .n = 1, .logits = logits + (size_t)i * m->hp.n_vocab};
        st = clf_llama_eval_seqs(c, b, n);
    }
    if (st == CLF_OK) st = clf_profile_stop(m->rt, prof, nprof);
    clf_llama_ctx_free(c);
    free(b);
    free(logits);
    free(next);
    return st;
}

/* A figure's dollars and joules, as members of its JSON object. */
static void json_money(FILE *out, const opts *o, const figure *f, int energy) {
    if (o->price > 0) fprintf(out, ", \"usd_per_mtok\": %.6g", clf_usd_per_mtok(o->price, f->median));
    if (energy && f->joules >= 0) fprintf(out, ", \"joules_per_token\": %.6g, \"watts\": %.4g", f->joules, f->watts);
}

/* Dollars per million tokens and energy per token, after the table. */
static void text_money(FILE *out, const opts *o, const clf_energy *e, const figure *pp, const figure *tg,
                       const figure *tgp) {
    if (o->price > 0) {
        fprintf(out, "\ncost at $%.2f an hour:", o->price);
        const char *sep = " ";
        if (o->n_prompt > 0) {
            fprintf(out, "%s$%.4g per million prompt tokens (pp%d)", sep, clf_usd_per_mtok(o->price, pp->median),
                    o->n_prompt);
            sep = "; ";
        }
        if (o->n_gen > 0)
            fprintf(out, "%s$%.4g per million generated tokens (tg%d)", sep, clf_usd_per_mtok(o->price, tg->median),
                    o->n_gen);
        if (tgp->median > 0)
            fprintf(out, "; $%.4g at %d sequences a step (tg%d x%d)", clf_usd_per_mtok(o->price, tgp->median),
                    o->parallel, o->n_gen, o->parallel);
        fprintf(out, "\n");
    }
    if (!e->n) {
        fprintf(out, "energy per token: unavailable (%s)\n", e->why);
        return;
    }
    char names[256];
    clf_energy_names(e, names, sizeof names);
    fprintf(out, "energy per token (RAPL %s: everything on the CPU package counted):", names);
    const figure *f[2] = {pp, tg};
    const char *what[2] = {"pp", "tg"};
    const int n[2] = {o->n_prompt, o->n_gen};
    const char *sep = " ";
    for (int i = 0; i < 2; i++) {
        if (n[i] <= 0) continue;
        if (f[i]->joules >= 0) fprintf(out, "%s%s%d %.4g J (%.1f W)", sep, what[i], n[i], f[i]->joules, f[i]->watts);
        else fprintf(out, "%s%s%d unread", sep, what[i], n[i]);
        sep = "; ";
    }
    fprintf(out, "\n");
}

/* open_s: the seconds clf_gguf_open took (once, before every device): part
 * of each device's load and time to first token. */
static clf_status bench_device(const opts *o, const clf_gguf *g, double open_s, const char *sel, FILE *out,
                               int first) {
    clf_place place = o->split;
    place.device = sel;
    clf_stages stages;
    int n_ctx = o->n_prompt + o->n_gen + PROFILE_TOKENS;
    place.mpi = cli_mpi;
    place.model = o->model_path;
    static const clf_type kv_types[] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0}; /* clinfer_kv_type's order */
    clf_type kv = kv_types[o->kv];
    /* the load: the file's opening (open_s) and its weights onto the
     * device(s); no tokenizer (bench feeds token ids) */
    const double t_load = clf_now_s();
    CLF_TRY(clf_stages_open(&place, g, n_ctx, kv, NULL, NULL, &stages));
    const double load_s = open_s + (clf_now_s() - t_load);
    clf_runtime *rt = stages.rt[0];
    clf_llama *m = stages.m[0];
    /* a split's device: its stages' */
    char dev_name[400];
    clf_stages_devices(&stages, dev_name, sizeof dev_name);
    clf_llama_ctx *c = NULL;
    float *logits = NULL;
    int32_t *toks = NULL;
    double *tps = NULL;
    clf_profile_entry *prof = NULL, *prof_par = NULL;
    int nprof = 0, nprof_par = 0;
    clf_roofs roof;
    clf_model_shape shape; /* FLOPs and KV bytes as `clinfer info` counts them */
    clf_status st = clf_model_shape_from_gguf(g, &shape);
    int n_batch = o->n_batch ? o->n_batch : o->n_prompt > 0 ? o->n_prompt : 1;
    if (st == CLF_OK) st = clf_llama_ctx_create(m, n_ctx, n_batch, kv, &c);
    if (st != CLF_OK) goto done;
    const clf_llama_hparams *hp = &m->hp;
    /* token ids for every read below: the prompt, the generated run, and
     * the warm-up's and profile's PROFILE_TOKENS steps from position 0 */
    int n_toks = o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen;
    if (n_toks < PROFILE_TOKENS) n_toks = PROFILE_TOKENS;
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    toks = malloc((size_t)n_toks * sizeof *toks);
    tps = malloc((size_t)o->reps * sizeof *tps);
    if (!logits || !toks || !tps) {
        st = clf_fail(CLF_ERR_MEMORY, "out of host memory");
        goto done;
    }
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < n_toks; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        toks[i] = (int32_t)(s % (uint64_t)hp->n_vocab);
    }
    /* time to first token, measured once, before any warm-up: from the
     * load's start through the context's creation, the n_prompt-token
     * prompt in one pass and one generated token (llama-bench's -pg P,1
     * after its load); kernels not yet built are built here, as in a
     * first `run` with the kernel cache as it is */
    clf_llama_rewind(c, 0);
    if (o->n_prompt > 0) st = clf_llama_eval(c, toks, o->n_prompt, 0, logits);
    if (st == CLF_OK) st = clf_llama_eval(c, toks, 1, 0, logits);
    const double ttft_s = open_s + (clf_now_s() - t_load);
    /* the process's peak through the first token: the weights, the KV
     * cache and a prompt pass's scratch, before the roofs' measures
     * allocate their own buffers (hundreds of MB: not the model's); with
     * --all-devices, every device before this one included */
    const double rss = peak_rss_bytes();
    /* the device's roofs, after: not part of the first token's time */
    if (st == CLF_OK) st = clf_roofs_measure(rt, &roof);
    if (st != CLF_OK) goto done;
    /* bytes an element (a row's over its head_dim: a quantized row's scales counted) */
    const double kv_elt = (double)clf_kv_row_bytes(kv, hp->head_dim) / hp->head_dim;
    /* a token reads every product's weights once; of the embedding table
     * only its own row */
    double weight_bytes = -(double)clf_tensor_bytes(&m->tok_embd);
    for (int i = 0; i < stages.n; i++) weight_bytes += (double)stages.m[i]->device_bytes;
    /* of a mixture of experts, a token reads its chosen ones only, a prompt those any of its tokens chose
     * (at most all: counted as min(n_expert, tokens · used) of the mean expert's bytes) */
    double unchosen_tg = 0, unchosen_pp = 0;
    for (int i = 0; i < stages.n; i++) {
        const clf_llama *sm = stages.m[i];
        const int E = sm->hp.n_expert, k = sm->hp.n_expert_used;
        for (int l = sm->l0; E && l < sm->l1; l++) {
            double all = 0;
            for (int e = 0; e < E; e++) {
                const clf_moe_expert *x = &sm->layers[l].experts[e];
                for (int j = 0; j < x->n_gu; j++) all += (double)x->gu[j].bytes;
                all += (double)x->down.bytes;
            }
            const double pp_used = (double)o->n_prompt * k < E ? (double)o->n_prompt * k : E;
            unchosen_tg += all * (E - k) / E;
            unchosen_pp += all * (E - pp_used) / E;
        }
    }
    if (cli_mpi) weight_bytes += (double)clf_llama_weight_bytes(g) - (double)m->device_bytes; /* the other ranks' */
    double kv_per_pos = clf_kv_bytes_per_token(&shape, 1) * kv_elt;
    figure pp = {.joules = -1}, tg = {.joules = -1}, tgp = {0};
    token_cost tc = {0};
    clf_energy energy;
    clf_energy_open(&energy);
    /* warm-up: builds every kernel variant both paths use */
    clf_llama_rewind(c, 0);
    if (o->n_prompt > 0) st = clf_llama_eval(c, toks, o->n_prompt, 0, logits);
    for (int i = 0; st == CLF_OK && i < WARMUP_TOKENS; i++) st = clf_llama_eval(c, toks + i, 1, 0, logits);
    if (st != CLF_OK) goto done;
    if (o->n_prompt > 0) {
        clf_energy_mark e0 = clf_energy_read(&energy);
        const double w0 = clf_now_s(); /* the counters' interval */
        for (int r = 0; r < o->reps && st == CLF_OK; r++) {
            clf_llama_rewind(c, 0);
            double t0 = clf_now_s();
            st = clf_llama_eval(c, toks, o->n_prompt, 0, logits);
            tps[r] = o->n_prompt / (clf_now_s() - t0);
        }
        if (st != CLF_OK) goto done;
        energy_of(&energy, &e0, clf_now_s() - w0, (double)o->reps * o->n_prompt, &pp);
        summarize(tps, o->reps, &pp);
        /* causal attention and one row of logits, as the pass computes them */
        pp.gflops = clf_flops_prefill(&shape, o->n_prompt) / o->n_prompt * pp.median * 1e-9;
        pp.gbs = (weight_bytes - unchosen_pp + kv_per_pos * o->n_prompt) / (o->n_prompt / pp.median) * 1e-9;
    }
    if (o->n_gen > 0) {
        uint64_t launches0 = 0;
        for (int i = 0; i < stages.n; i++) launches0 += stages.rt[i]->launches;
        clf_energy_mark e0 = clf_energy_read(&energy);
        const double w0 = clf_now_s();
        for (int r = 0; r < o->reps && st == CLF_OK; r++) {
            clf_llama_rewind(c, 0);
            double t0 = clf_now_s();
            for (int i = 0; i < o->n_gen && st == CLF_OK; i++) st = clf_llama_eval(c, toks + i, 1, 0, logits);
            tps[r] = o->n_gen / (clf_now_s() - t0);
        }
        if (st != CLF_OK) goto done;
        energy_of(&energy, &e0, clf_now_s() - w0, (double)o->reps * o->n_gen, &tg);
        summarize(tps, o->reps, &tg);
        /* every stage's launches in this process (an MPI job's other ranks
         * count their own) */
        uint64_t launched = 0;
        for (int i = 0; i < stages.n; i++) launched += stages.rt[i]->launches;
        tc.launches = (double)(launched - launches0) / ((double)o->reps * o->n_gen);
        /* and the KV cache so far: on average half the run's length */
        tc.kv_bytes = kv_per_pos * (o->n_gen / 2.0);
        tc.bytes = weight_bytes - unchosen_tg + tc.kv_bytes;
        tg.gbs = tc.bytes * tg.median * 1e-9;
        tg.gflops = clf_flops_token(&shape, o->n_gen / 2) * tg.median * 1e-9;
        /* the copy roof again, after the runs: on a machine shared with
         * other work the roof is the faster of the two */
        double end_gbs = 0;
        st = clf_roofs_measure_copy(rt, &end_gbs);
        if (st != CLF_OK) goto done;
        if (end_gbs > roof.copy_gbs) roof.copy_gbs = end_gbs;
        tc.roof_share = tg.gbs / roof.copy_gbs;
        /* where a generated token's time goes, by kernel (one device's) */
        if (stages.n > 1) goto report;
        clf_llama_rewind(c, 0);
        st = clf_profile_start(rt);
        for (int i = 0; st == CLF_OK && i < PROFILE_TOKENS; i++) st = clf_llama_eval(c, toks + i, 1, 0, logits);
        clf_status st2 = clf_profile_stop(rt, &prof, &nprof);
        if (st == CLF_OK) st = st2;
        if (st != CLF_OK) goto done;
    }

    if (o->n_gen > 0 && o->parallel > 1 && st == CLF_OK && stages.n == 1)
        st = bench_parallel(o, m, toks, n_toks, kv, tps, &tgp, &prof_par, &nprof_par);
    if (st != CLF_OK) goto done;

report:;
    double params = 0, size = 0;
    for (int64_t i = 0; i < clf_gguf_n_tensors(g); i++) {
        const clf_gguf_tensor *t = clf_gguf_tensor_at(g, i);
        params += (double)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        size += t->bytes;
    }
    const clf_gguf_tensor *wq = clf_gguf_find_tensor(g, "blk.0.attn_q.weight");
    /* the file's type as llama-bench names it (Q4_K_M, not its first tensor's
     * Q4_K), else the type of its first layer's query matrix */
    uint32_t ftype = 0;
    const clf_quant_mix *mix =
        clf_gguf_get_u32(g, "general.file_type", &ftype) == CLF_OK ? clf_quant_mix_of_ftype(ftype) : NULL;
    const char *wtype = mix ? mix->name : wq ? clf_type_get(wq->type)->name : "?";
    double prof_total = 0;
    for (int i = 0; i < nprof; i++) prof_total += prof[i].ms;
    const double file_bytes = (double)clf_gguf_size(g);
    if (o->json) {
        fprintf(out, "%s  {\"device\": \"%s\", \"model\": \"%s %s\", \"size_bytes\": %.0f, \"params\": %.0f, \"kv\": \"%s\"",
                first ? "" : ",\n", dev_name, hp->arch, wtype, size, params, clf_type_get(kv)->name);
        fprintf(out, ", \"roof\": {\"copy_gbs\": %.2f, \"fma_gflops\": %.2f}", roof.copy_gbs, roof.fma_gflops);
        /* load, time to first token of an n_prompt-token prompt (load
         * included), the process's peak RSS (null: no /proc) */
        fprintf(out, ", \"file_bytes\": %.0f, \"load_s\": %.4f, \"ttft_s\": %.4f, \"ttft_prompt\": %d, \"peak_rss\": ",
                file_bytes, load_s, ttft_s, o->n_prompt);
        if (rss >= 0) fprintf(out, "%.0f", rss);
        else fprintf(out, "null");
        if (o->price > 0) fprintf(out, ", \"usd_per_hour\": %.6g", o->price);
        if (energy.n) {
            char names[256];
            clf_energy_names(&energy, names, sizeof names);
            fprintf(out, ", \"energy\": {\"available\": true, \"source\": ");
            cli_json_str(out, names);
            fprintf(out, ", \"scope\": \"CPU packages (RAPL): everything running on them\"}");
        } else {
            fprintf(out, ", \"energy\": {\"available\": false, \"reason\": ");
            cli_json_str(out, energy.why);
            fprintf(out, "}");
        }
        if (o->n_prompt > 0) {
            fprintf(out, ", \"pp\": {\"n\": %d, \"tps\": %.3f, \"stddev\": %.3f, \"gflops\": %.2f, \"gbs\": %.3f",
                    o->n_prompt, pp.median, pp.stddev, pp.gflops, pp.gbs);
            json_money(out, o, &pp, 1);
            fprintf(out, "}");
        }
        if (o->n_gen > 0) {
            fprintf(out,
                    ", \"tg\": {\"n\": %d, \"tps\": %.3f, \"stddev\": %.3f, \"gbs\": %.2f, \"gflops\": %.3f, "
                    "\"bytes_per_token\": %.0f, "
                    "\"kv_bytes_per_token\": %.0f, \"roof_share\": %.4f, \"launches_per_token\": %.2f, "
                    "\"launches_per_layer\": %.2f",
                    o->n_gen, tg.median, tg.stddev, tg.gbs, tg.gflops, tc.bytes, tc.kv_bytes, tc.roof_share, tc.launches,
                    tc.launches / hp->n_layer);
            json_money(out, o, &tg, 1);
            fprintf(out, "}");
            fprintf(out, ", \"tg_kernel_share\": [");
            for (int i = 0; i < nprof; i++)
                fprintf(out, "%s{\"kernel\": \"%s\", \"launches_per_token\": %.1f, \"share\": %.4f}", i ? ", " : "",
                        prof[i].name, prof[i].launches / (double)PROFILE_TOKENS, prof_total > 0 ? prof[i].ms / prof_total : 0);
            fprintf(out, "]");
        }
        if (tgp.median > 0) {
            fprintf(out, ", \"tg_parallel\": {\"n\": %d, \"sequences\": %d, \"tps\": %.3f, \"stddev\": %.3f", o->n_gen,
                    o->parallel, tgp.median, tgp.stddev);
            json_money(out, o, &tgp, 0);
            fprintf(out, "}");
        }
        fprintf(out, "}");
    } else {
        if (first) {
            fprintf(out, "| model | size | params | backend | device | test | t/s | achieved | of roof |\n");
            fprintf(out, "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: |\n");
        }
        char model[96];
        snprintf(model, sizeof model, "%s %s", hp->arch, wtype);
        if (o->n_prompt > 0)
            fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | pp%d | %.2f ± %.2f | %.1f GFLOP/s | %.0f%% of %.0f GFLOP/s |\n",
                    model, size / 1048576, params / 1e6, dev_name, o->n_prompt, pp.median, pp.stddev, pp.gflops,
                    100 * pp.gflops / roof.fma_gflops, roof.fma_gflops);
        if (o->n_gen > 0)
            fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | tg%d | %.2f ± %.2f | %.1f GB/s | %.0f%% of %.1f GB/s |\n",
                    model, size / 1048576, params / 1e6, dev_name, o->n_gen, tg.median, tg.stddev, tg.gbs,
                    100 * tg.gbs / roof.copy_gbs, roof.copy_gbs);
        if (tgp.median > 0)
            fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | tg%d x%d | %.2f ± %.2f | %.2fx tg%d | |\n", model,
                    size / 1048576, params / 1e6, dev_name, o->n_gen, o->parallel, tgp.median, tgp.stddev,
                    tgp.median / tg.median, o->n_gen);
        /* the load, the first token and the memory: once, in seconds and bytes */
        fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | load | %.2f s | file open + weights to the device | |\n",
                model, size / 1048576, params / 1e6, dev_name, load_s);
        fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | ttft%d | %.2f s | load + pp%d + 1 token, once | |\n",
                model, size / 1048576, params / 1e6, dev_name, o->n_prompt, ttft_s, o->n_prompt);
        if (rss >= 0)
            fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | peak RSS | %.2f GiB | %.2fx the file (VmHWM) | |\n",
                    model, size / 1048576, params / 1e6, dev_name, rss / 1073741824, rss / file_bytes);
        else
            fprintf(out, "| %s | %.2f MiB | %.2f M | OpenCL | %s | peak RSS | n/a | no /proc/self/status | |\n", model,
                    size / 1048576, params / 1e6, dev_name);
        if (o->n_gen > 0)
            fprintf(out,
                    "\ndecode (%s): %.1f launches/token (%.1f per layer, %d layers); reads %.2f MB/token (weights "
                    "%.2f MB%s, KV cache %.2f MB at mean length %d); moves %.1f GB/s = %.0f%% of the copy roof "
                    "(%.1f GB/s: the faster of this run's measures before and after)\n",
                    dev_name, tc.launches, tc.launches / hp->n_layer, hp->n_layer, tc.bytes * 1e-6,
                    (tc.bytes - tc.kv_bytes) * 1e-6, hp->n_expert ? ": the chosen experts only" : "",
                    tc.kv_bytes * 1e-6, o->n_gen / 2, tg.gbs, 100 * tc.roof_share,
                    roof.copy_gbs);
        text_money(out, o, &energy, &pp, &tg, &tgp);
        if (nprof) {
            fprintf(out, "\nshare of a generated token's kernel time (%s, KV %s):\n", rt->dev.name, clf_type_get(kv)->name);
            for (int i = 0; i < nprof; i++)
                fprintf(out, "  %-28s %5.1f%%  %6.1f launches/token  %8.1f us/token\n", prof[i].name,
                        100 * prof[i].ms / prof_total, prof[i].launches / (double)PROFILE_TOKENS, prof[i].ms * 1000 / PROFILE_TOKENS);
            fprintf(out, "  kernel time %.2f ms/token of %.2f ms/token wall\n\n", prof_total / PROFILE_TOKENS, 1000 / tg.median);
        }
        if (nprof_par) {
            double total = 0;
            for (int i = 0; i < nprof_par; i++) total += prof_par[i].ms;
            fprintf(out, "share of a step's kernel time with %d sequences:\n", o->parallel);
            for (int i = 0; i < nprof_par; i++)
                fprintf(out, "  %-28s %5.1f%%  %6.1f launches/step  %8.1f us/step\n", prof_par[i].name,
                        100 * prof_par[i].ms / total, prof_par[i].launches / (double)PROFILE_TOKENS,
                        prof_par[i].ms * 1000 / PROFILE_TOKENS);
            fprintf(out, "  kernel time %.2f ms/step of %.2f ms/step wall\n\n", total / PROFILE_TOKENS,
                    1000 * o->parallel / tgp.median);
        }
    }
done:
    free(prof);
    free(prof_par);
    free(logits);
    free(toks);
    free(tps);
    clf_llama_ctx_free(c);
    clf_stages_close(&stages);
    return st;
}

int clf_bench_model_main(int argc, char **argv) {
    opts o = {NULL, NULL, {0}, 512, 128, 5, 0, 0, 0, 0, CLINFER_KV_F32, 0};
    const cli_option table[] = {
        CLI_OPT_STR("-m", &o.model_path, .arg = "MODEL", .help = "a GGUF file or a catalogue name (default: the cache's default)"),
        CLI_OPT_STR("--device", &o.device, .arg = "SEL", .help = "the OpenCL device (P:D or a name's part)"),
        CLI_OPT_INT("-p", &o.n_prompt, 0, 1 << 20, .help = "the prompt's tokens, pp (default 512; 0: none)"),
        CLI_OPT_INT("-n", &o.n_gen, 0, 1 << 20, .help = "tokens generated, tg (default 128; 0: none)"),
        CLI_OPT_INT("-r", &o.reps, 1, 1000, .help = "repetitions (default 5): the mean and spread"),
        CLI_OPT_KV("--kv", &o.kv, .help = "the KV cache's type: f32, f16, q8_0 or q4_0"),
        CLI_OPT_FLAG("--all-devices", &o.all_devices, .help = "every device in turn"),
        CLI_OPT_FLAG("--json", &o.json, .help = "as JSON"),
        CLI_OPT_STR("--devices", &o.split.devices, .arg = "SEL,SEL,...", .help = "the model split by layers over these"),
        CLI_OPT_STR("--split", &o.split.split, .arg = "layers", .help = "how --devices splits (only: layers)"),
        CLI_OPT_STR("--split-ratio", &o.split.ratio, .arg = "a,b,...", .help = "the share of layers of each device"),
        CLI_OPT_INT("--batch", &o.n_batch, 1, 1 << 20, .help = "the prompt's chunks (default: the whole prompt at once)"),
        CLI_OPT_INT("--parallel", &o.parallel, 1, 4096, .help = "also tg with N sequences a step (the aggregate rate)"),
        CLI_OPT_POSITIVE("--price", &o.price, .arg = "USD_PER_HOUR",
                         .help = "the machine's price: dollars per million prompt and generated tokens"),
        {0}};
    int rc = cli_parse(argc, argv, table, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (o.n_prompt == 0 && o.n_gen == 0) return cli_usage(USAGE, "nothing to measure (-p 0 -n 0)");
    if (o.all_devices && o.split.devices) return cli_usage(USAGE, "--all-devices and --devices exclude each other");
    if (cli_mpi && o.all_devices) return cli_usage(USAGE, "--mpi runs one model: not with --all-devices");
    char path[1024];
    clf_gguf *g;
    clf_status st = (clf_status)cli_model_fetch(o.model_path, 0, path, sizeof path); /* a catalogue name: fetched on first use */
    const double t_open = clf_now_s(); /* the load starts here: the fetch is not part of it */
    if (st == CLF_OK) st = clf_gguf_open(path, &g);
    const double open_s = clf_now_s() - t_open;
    if (st != CLF_OK) return cli_error(st);
    if (o.json) printf("[\n");
    if (o.all_devices) {
        clf_device *devs;
        int n;
        st = clf_devices_list(&devs, &n);
        for (int i = 0; st == CLF_OK && i < n; i++) {
            char sel[32];
            snprintf(sel, sizeof sel, "%d:%d", devs[i].platform_index, devs[i].device_index);
            st = bench_device(&o, g, open_s, sel, stdout, i == 0);
        }
        free(devs);
    } else {
        st = bench_device(&o, g, open_s, o.device, stdout, 1);
    }
    if (o.json) printf("\n]\n");
    clf_gguf_close(g);
    return cli_error(st);
}

/* What `run`, `chat`, `perplexity` and `serve` share: a model loaded where
 * the options say (one device, a split, MPI ranks) with a session on it,
 * through the public API, and the streaming of a generation to a file. */
#ifndef CLF_SESSION_H
#define CLF_SESSION_H

#include <stdio.h>

#include "clinfer.h"
#include "options.h"

/* --device, or a split over --devices (and --split, --split-ratio). */
typedef struct cli_place {
    const char *device, *devices, *split, *ratio;
    /* serve: the sequences and positions a split's plan sizes KV for */
    int n_seq, n_ctx;
    int threads; /* -t: PoCL's compute units, 0 for its default */
    int no_mmap, mlock; /* the weights in process memory, not the packed-weights cache's mapping; locked in RAM */
    /* --chat-template TEXT, --chat-template-file FILE: run instead of the file's template */
    const char *chat_template, *chat_template_file;
    /* --lora FILE[,FILE...], --lora-scaled FILE:SCALE[,...] (llama.cpp's): adapters loaded on the model, each
     * at its scale (the server's default) */
    cli_list lora, lora_scaled;
} cli_place;

#define CLI_PLACE_USAGE \
    "[--device SEL | --devices SEL,SEL,... [--split layers] [--split-ratio a,b,...]] [--no-mmap] [--mlock] " \
    "[--chat-template TEXT | --chat-template-file FILE] [--lora FILE] [--lora-scaled FILE:SCALE]"
#define CLI_PLACE_OPTIONS(p) \
    CLI_OPT_STR("--device", &(p)->device, .arg = "SEL", \
                .help = "the OpenCL device: P:D or a name's part (`clinfer devices`; default $CLINFER_DEVICE)"), \
    CLI_OPT_STR("--devices", &(p)->devices, .arg = "SEL,SEL,...", .help = "split the layers over these devices"), \
    CLI_OPT_STR("--split", &(p)->split, .arg = "layers", .help = "how --devices splits the model (only: layers)"), \
    CLI_OPT_STR("--split-ratio", &(p)->ratio, .arg = "a,b,...", .help = "the share of layers each of --devices holds"), \
    CLI_OPT_FLAG("--no-mmap", &(p)->no_mmap, \
                 .help = "pack the weights into process memory, not into the packed-weights cache mapped in place"), \
    CLI_OPT_FLAG("--mlock", &(p)->mlock, .help = "lock the weights in RAM (no paging out; bounded by ulimit -l)"), \
    CLI_OPT_TEXT("--chat-template", &(p)->chat_template, .arg = "TEXT", \
                 .help = "a Jinja chat template to run instead of the model file's"), \
    CLI_OPT_STR("--chat-template-file", &(p)->chat_template_file, .arg = "FILE", \
                .help = "the same, read from FILE"), \
    CLI_OPT_LIST("--lora", &(p)->lora, .arg = "FILE[,FILE]", \
                 .help = "apply a LoRA adapter (llama.cpp's GGUF) at scale 1; repeatable"), \
    CLI_OPT_LIST("--lora-scaled", &(p)->lora_scaled, .arg = "FILE:SCALE[,...]", \
                 .help = "apply a LoRA adapter at SCALE; repeatable")

typedef struct cli_session {
    clinfer_model *m;
    clinfer_session *s; /* NULL when opened with n_ctx -1 */
    clinfer_model_info info;
    double warm_seconds, kernel_seconds; /* cli_session_warm's time, and the kernel builds within it */
    /* -md: the draft model, its session and the drafter s speculates with (NULL: none) */
    clinfer_model *draft_m;
    clinfer_session *draft_s;
    clinfer_drafter *drafter;
    const char **lora_v[2]; /* the place's --lora and --lora-scaled lists (cli_parse's), freed on close */
} cli_session;

/* Speculative decoding's options of `run` and `chat` (llama.cpp's names):
 * --draft-max N by prompt lookup, or with -md FILE a draft model drafting
 * up to N tokens (default 16; its length then adapts). */
typedef struct cli_draft_opts {
    const char *model; /* -md, --model-draft */
    int max, min;      /* --draft-max (0: off without -md, 16 with), --draft-min */
    float p_min;       /* --draft-p-min */
} cli_draft_opts;
#define CLI_DRAFT_USAGE "[--draft-max N] [-md FILE [--draft-min N] [--draft-p-min P]]"
#define CLI_DRAFT_OPTIONS(d) \
    CLI_OPT_INT("--draft-max", &(d)->max, 0, 1024, \
                .help = "speculate up to N tokens: by prompt lookup, or with -md the draft model's; 0: off"), \
    CLI_OPT_STR("--model-draft", &(d)->model, .alias = "-md", .arg = "FILE", \
                .help = "a draft model of the same vocabulary drafts for speculative decoding"), \
    CLI_OPT_INT("--draft-min", &(d)->min, 0, 1024, .help = "with -md: a shorter draft is not used (default 0)"), \
    CLI_OPT_FLOAT("--draft-p-min", &(d)->p_min, 0, 1, \
                  .help = "with -md: the draft stops before a token the draft model gives less (default 0)")

/* With -md: loads the draft model beside s's (same device options), a
 * session of s's context on it and the drafter (the vocabularies
 * checked); without, nothing. CLI_ERR_ARG for --draft-min or --draft-p-min
 * without -md. */
clinfer_status cli_session_add_draft(cli_session *s, const cli_draft_opts *d, const cli_place *place,
                                     clinfer_kv_type kv);

/* model: -m or NULL for the default; n_ctx 0 for the model's own (capped),
 * -1 for no session (`serve` makes its own). Installs the Ctrl-C handler
 * first: Ctrl-C while loading is CLINFER_ERR_INTERRUPTED, as in a prompt
 * (the model's abort callback). */
clinfer_status cli_session_open(const char *model, const cli_place *place, int n_ctx, clinfer_kv_type kv,
                                cli_session *s);
void cli_session_close(cli_session *s);

/* -t N (0: nothing to do): PoCL reads its thread count once, when its
 * platform starts, so this comes before the first OpenCL call; after it,
 * cli_threads_check says in one line when the device is another driver's,
 * which ignores it. cli_session_open does both. */
void cli_threads_begin(int n);
void cli_threads_check(int n, const char *device);

/* Builds the kernels each further token needs and those of a prompt of
 * n_prompt tokens (a one-token pass and one of min(n_prompt, 16) tokens,
 * then the session cleared), so that none is built, nor its compiler heard,
 * once text is printing, and the speeds line times warm kernels as `bench`
 * does: `run` and `chat` call it before the prompt. From 13 tokens on a
 * prompt takes the kernels of any longer one (host/compute/matmul.c's
 * cpu_tm), so 16 stand for all. */
clinfer_status cli_session_warm(cli_session *s, int n_prompt);

/* clinfer_generate streaming the text to `out` (a failed write stops it):
 * `prompt` after what the session holds, then up to max_gen tokens
 * (draft_max: its speculation by prompt lookup, 0 off; with s's drafter,
 * -md's, that drafter's, draft_max capping it when > 0); stops
 * at an end-of-generation token, at max_gen, at a full context or on
 * Ctrl-C (CLINFER_ERR_INTERRUPTED, with the signal's name). */
clinfer_status cli_generate(cli_session *s, clinfer_sampler *smp, const int32_t *prompt, int n_prompt, int max_gen,
                            int draft_max, FILE *out, clinfer_generate_result *r);

/* A model's reasoning in chat (server/reasoning.h's <think> tags): as the
 * model writes it, apart (dim on a terminal, the answer on a line after
 * it), or hidden. */
typedef enum cli_reasoning { CLI_REASONING_INLINE, CLI_REASONING_APART, CLI_REASONING_HIDE } cli_reasoning;
/* The mode --reasoning-format (NULL: auto; none: inline; auto, deepseek:
 * apart) and --hide-reasoning ask for: CLINFER_ERR_ARG for another name. */
clinfer_status cli_reasoning_mode(const char *format, int hide, cli_reasoning *out);
#define CLI_REASONING_OPTIONS(fmt, hide, budget)                                                                           \
    CLI_OPT_STR("--reasoning-format", (fmt), .arg = "auto|none|deepseek",                                                 \
                .help = "a model's <think> reasoning apart from its answer, dim (auto, deepseek), or as written (none)"), \
        CLI_OPT_FLAG("--hide-reasoning", (hide), .help = "do not show a model's reasoning, only its answer"),            \
        CLI_OPT_INT("--reasoning-budget", (budget), -1, 1 << 24,                                                           \
                    .help = "a <think> thought closed after N tokens, the answer following (-1: unlimited, default)")
/* cli_generate with the reasoning shown as `mode` says (the syntax read off
 * the prompt's end: a generation prompt that opens <think>, or a reply
 * that does), under a budget of `budget` tokens of thought (-1: none;
 * --reasoning-budget): <think> tags' close forced after them, as the
 * server's reasoning_budget (server/reasoning.h's srv_budget), its tokens
 * counted in n_generated. */
clinfer_status cli_generate_reasoning(cli_session *s, clinfer_sampler *smp, const int32_t *prompt, int n_prompt,
                                      int max_gen, int draft_max, cli_reasoning mode, int budget, FILE *out,
                                      clinfer_generate_result *r);

void cli_print_stats(const cli_session *s, const clinfer_generate_result *r);

#endif

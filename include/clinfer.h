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
} clinfer_device_info;

/* The OpenCL devices of every platform. CLINFER_ERR_DEVICE when there is no
 * OpenCL platform. Thread-safe. */
CLINFER_API clinfer_status clinfer_device_count(int *n);
/* Device `index` (0 .. count-1) into *info, whose size the caller sets. */
CLINFER_API clinfer_status clinfer_device_get(int index, clinfer_device_info *info);

/* ---- models --------------------------------------------------------------- */

typedef struct clinfer_model clinfer_model;

typedef struct clinfer_model_params {
    size_t size;    /* sizeof(clinfer_model_params) */
    int vocab_only; /* load the vocabulary only: tokenize, detokenize and chat templates, no device and no sessions */
} clinfer_model_params;

CLINFER_API clinfer_model_params clinfer_model_default_params(void);

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
} clinfer_model_info;

CLINFER_API clinfer_status clinfer_model_get_info(const clinfer_model *m, clinfer_model_info *info);
/* The vocabulary size (the length of a logits row); 0 for a NULL model. */
CLINFER_API int clinfer_model_n_vocab(const clinfer_model *m);

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
/* End of generation: EOS or an end-of-turn token (<|im_end|>, <|eot_id|>, ...). */
CLINFER_API int clinfer_token_is_eog(const clinfer_model *m, int32_t token);

typedef struct clinfer_chat_message {
    /* "system", "user", "assistant" or "tool" (a tool's result: ChatML's
     * "tool" turn, Llama 3's "ipython"; CLINFER_ERR_ARG in formats without
     * one: Gemma, Phi-3, Zephyr); another role is CLINFER_ERR_ARG */
    const char *role;
    const char *content;
} clinfer_chat_message;

/* Renders a conversation in the model's chat format (recognised from its
 * tokenizer.chat_template, else from its turn tokens as for Gemma, else
 * ChatML): the template's default system message when the conversation has
 * none (a system message goes where the format puts it), each message, and
 * with add_assistant the header that starts the answer. *text: clinfer_free
 * it. CLINFER_ERR_FORMAT for a template clinfer does not know. The text is
 * for reading: tokenized with parse_special, control-token text inside a
 * message ("<|im_end|>" typed by a user) would become the control token and
 * could close the turn; clinfer_chat_tokenize gives a prompt's tokens. */
CLINFER_API clinfer_status clinfer_chat_apply(const clinfer_model *m, const clinfer_chat_message *msgs, int n,
                                              int add_assistant, char **text, size_t *len);
/* The same conversation as the prompt's token ids in *tokens (clinfer_free
 * it), BOS first where the model adds one: the template's markers are
 * control tokens and the messages' contents are text, whatever they hold. */
CLINFER_API clinfer_status clinfer_chat_tokenize(const clinfer_model *m, const clinfer_chat_message *msgs, int n,
                                                 int add_assistant, int32_t **tokens, int *n_tokens);

/* ---- sessions: a context (KV cache) on a model ----------------------------- */

typedef struct clinfer_session clinfer_session;

typedef enum clinfer_kv_type {
    CLINFER_KV_F32 = 0,
    CLINFER_KV_F16 = 1, /* half the memory, a little less precise */
} clinfer_kv_type;

typedef struct clinfer_session_params {
    size_t size;             /* sizeof(clinfer_session_params) */
    int n_ctx;               /* tokens the session holds; 0: the model's training context, at most 4096 */
    int n_batch;             /* the most tokens evaluated at once; 0: min(n_ctx, 512) */
    clinfer_kv_type kv_type; /* default CLINFER_KV_F32 */
} clinfer_session_params;

CLINFER_API clinfer_session_params clinfer_session_default_params(void);
/* params NULL: the defaults. */
CLINFER_API clinfer_status clinfer_session_create(clinfer_model *m, const clinfer_session_params *params,
                                                  clinfer_session **out);
CLINFER_API void clinfer_session_free(clinfer_session *s);
CLINFER_API int clinfer_session_n_ctx(const clinfer_session *s);
/* Tokens the session holds. */
CLINFER_API int clinfer_session_n_past(const clinfer_session *s);
/* Forgets the tokens from position pos on (0 clears the session). A model
 * with sliding-window layers (Gemma 3) keeps their keys in a ring of the
 * window and one batch: going back more than a batch (but not to 0) clears
 * the session; clinfer_session_n_past tells. */
CLINFER_API clinfer_status clinfer_session_rewind(clinfer_session *s, int pos);

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
/* Records a token (of the prompt or generated) for the repetition penalty. */
CLINFER_API void clinfer_sampler_accept(clinfer_sampler *smp, int32_t token);
/* Forgets the history and restarts the random draws from the seed. */
CLINFER_API void clinfer_sampler_reset(clinfer_sampler *smp);

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
    double prompt_seconds, generate_seconds;
} clinfer_generate_result;

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

/* Asks the session's running (or next starting) clinfer_generate to stop
 * before its next token; it returns CLINFER_ERR_INTERRUPTED. Safe from any
 * thread and from a signal handler. Each clinfer_generate call clears the
 * request when it ends. */
CLINFER_API void clinfer_session_cancel(clinfer_session *s);

#ifdef __cplusplus
}
#endif

#endif

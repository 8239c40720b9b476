#include "logprobs.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct lp_stage {
    const clinfer_model *m;
    FILE *out;
    int n_vocab, n_top;
    int pending; /* logits holds the ones the next accepted token was drawn from */
    float *logits;
    int32_t top_ids[CLI_MAX_TOP_LOGPROBS];
    float top_lp[CLI_MAX_TOP_LOGPROBS];
} lp_stage;

/* The first stage sees the logits as the model gave them. */
static clinfer_status keep(void *ud, float *logits, int n_vocab) {
    lp_stage *st = ud;
    if (n_vocab != st->n_vocab) return clinfer_fail(CLINFER_ERR_ARG, "logprobs: %d logits, the model has %d", n_vocab, st->n_vocab);
    memcpy(st->logits, logits, (size_t)n_vocab * sizeof *logits);
    st->pending = 1;
    return CLINFER_OK;
}

static void token_json(const lp_stage *st, int32_t token, float lp) {
    size_t n;
    const char *p = clinfer_token_piece(st->m, token, &n);
    fprintf(st->out, "{\"token\": %d, \"text\": ", (int)token);
    cli_json_strn(st->out, p ? p : "", p ? n : 0);
    fprintf(st->out, ", \"logprob\": %.9g", lp > -9999.0f ? lp : -9999.0); /* JSON has no -inf */
}

/* A prompt token comes without logits (nothing pending): no line. */
static void accepted(void *ud, int32_t token) {
    lp_stage *st = ud;
    if (!st->pending) return;
    st->pending = 0;
    float lp;
    if (clinfer_logprobs(st->logits, st->n_vocab, token, &lp, st->n_top, st->top_ids, st->top_lp) != CLINFER_OK) {
        fprintf(stderr, "clinfer: logprobs: %s\n", clinfer_last_error());
        return;
    }
    token_json(st, token, lp);
    fputs(", \"top_logprobs\": [", st->out);
    for (int i = 0; i < st->n_top; i++) {
        if (i) fputs(", ", st->out);
        token_json(st, st->top_ids[i], st->top_lp[i]);
        fputc('}', st->out);
    }
    fputs("]}\n", st->out);
    fflush(st->out);
}

static void reset(void *ud) { ((lp_stage *)ud)->pending = 0; }

static void stage_free(void *ud) {
    lp_stage *st = ud;
    if (st) free(st->logits);
    free(st);
}

clinfer_status cli_logprobs_attach(const clinfer_model *m, clinfer_sampler *smp, int n_top, FILE *out) {
    if (n_top < 0 || n_top > CLI_MAX_TOP_LOGPROBS)
        return clinfer_fail(CLINFER_ERR_ARG, "--logprobs %d: 0..%d", n_top, CLI_MAX_TOP_LOGPROBS);
    lp_stage *st = calloc(1, sizeof *st);
    const int n_vocab = clinfer_model_n_vocab(m);
    if (!st || !(st->logits = malloc((size_t)n_vocab * sizeof *st->logits))) {
        stage_free(st);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    }
    st->m = m;
    st->out = out;
    st->n_vocab = n_vocab;
    st->n_top = n_top < n_vocab ? n_top : n_vocab;
    clinfer_sampler_stage stage = {.size = sizeof stage, .name = "logprobs", .apply = keep, .accept = accepted,
                                   .reset = reset, .free = stage_free, .user_data = st};
    clinfer_status s = clinfer_sampler_add_stage(smp, &stage);
    if (s != CLINFER_OK) stage_free(st);
    return s;
}

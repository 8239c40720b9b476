/* simple: load a model, tokenize a prompt, stream the greedy continuation.
 *
 *   cc simple.c $(pkg-config --cflags --libs clinfer) -o simple
 *   ./simple [MODEL] [PROMPT] [N]
 *
 * MODEL "" or absent: the default model. Prints what `clinfer run -m MODEL
 * -p PROMPT -n N` prints on stdout. */
#include <clinfer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_piece(void *user, int32_t token, const char *piece, size_t len) {
    (void)user, (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop */
}

int main(int argc, char **argv) {
    const char *path = argc > 1 && argv[1][0] ? argv[1] : NULL;
    const char *prompt = argc > 2 ? argv[2] : "The capital of France is";
    clinfer_model *model = NULL;
    clinfer_session *session = NULL;
    int32_t *tokens = NULL;
    int n = 0;
    clinfer_generate_params gp = clinfer_generate_default_params();
    gp.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
    gp.on_token = print_piece;
    clinfer_generate_result r = {.size = sizeof r};

    clinfer_status st = clinfer_model_load(path, NULL, NULL, &model);
    if (st == CLINFER_OK) st = clinfer_session_create(model, NULL, &session);
    if (st == CLINFER_OK) st = clinfer_tokenize(model, prompt, strlen(prompt), 1, 0, &tokens, &n);
    if (st == CLINFER_OK) st = clinfer_generate(session, tokens, n, &gp, &r); /* NULL sampler: greedy */
    if (r.n_generated > 0) printf("\n");
    if (st != CLINFER_OK)
        fprintf(stderr, "simple: %s: %s\n", clinfer_status_name(st), clinfer_last_error());
    else
        fprintf(stderr, "simple: clinfer %s, %d tokens in %.2f s\n", clinfer_version(), r.n_generated,
                r.generate_seconds);
    clinfer_free(tokens);
    clinfer_session_free(session);
    clinfer_model_free(model);
    return st;
}

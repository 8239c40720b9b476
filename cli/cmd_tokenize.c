/* clinfer tokenize -m MODEL -p TEXT [--special] [--no-bos] [--pieces]:
 * the ids of TEXT, space separated on one line (for tests and users). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"

static const char *USAGE = "clinfer tokenize [-m MODEL] -p TEXT [--special] [--no-bos] [--pieces]";

static void print_piece(const char *p, size_t n) {
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c); /* UTF-8 bytes pass through; a split character prints as its bytes */
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int special = 0, no_bos = 0, pieces = 0;
    const cli_option opts[] = {CLI_OPT_STR("-m", &model, .arg = "MODEL",
                                           .help = "a GGUF file or a catalogue name (default: $CLINFER_MODEL, else "
                                                   "the cache's default)"),
                               CLI_OPT_TEXT("-p", &text, .alias = "--prompt", .help = "the text"),
                               CLI_OPT_FLAG("--special", &special, .help = "parse control tokens such as <|im_start|> in TEXT"),
                               CLI_OPT_FLAG("--no-bos", &no_bos, .help = "do not add BOS even where the model asks for it"),
                               CLI_OPT_FLAG("--pieces", &pieces, .help = "print id:'piece' pairs instead of bare ids"),
                               {0}};
    int rc = cli_parse(argc, argv, opts, USAGE, NULL, 0, NULL);
    if (rc >= 0) return rc;
    if (!text) return cli_usage(USAGE, "-p TEXT is required");
    clinfer_model_params mp = clinfer_model_default_params();
    mp.vocab_only = 1;
    clinfer_model *m = NULL;
    int32_t *ids = NULL;
    int n = 0;
    clinfer_status st = clinfer_model_load(model, NULL, &mp, &m);
    if (st == CLINFER_OK) st = clinfer_tokenize(m, text, strlen(text), !no_bos, special, &ids, &n);
    for (int i = 0; st == CLINFER_OK && i < n; i++) {
        if (i) putchar(' ');
        printf("%d", ids[i]);
        if (pieces) {
            size_t len;
            const char *p = clinfer_token_piece(m, ids[i], &len);
            putchar(':');
            print_piece(p, len);
        }
    }
    if (st == CLINFER_OK) putchar('\n');
    clinfer_free(ids);
    clinfer_model_free(m);
    return cli_error(st);
}

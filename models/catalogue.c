#include "catalogue.h"
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated at build time from models/catalogue.tsv (cmake/embed.cmake). */
typedef struct { const char *name; const unsigned char *data; size_t len; } clf_catalogue_source;
extern const clf_catalogue_source clf_catalogue_sources[];

/* Copies field s[0..n) into out (cap bytes); 0 when it does not fit. */
static int copy_field(const char *s, size_t n, char *out, size_t cap) {
    if (n == 0 || n >= cap) return 0;
    memcpy(out, s, n);
    out[n] = 0;
    return 1;
}

static int is(const char *s, size_t n, const char *word) { return n == strlen(word) && !memcmp(s, word, n); }

/* One line "name file packages version size sha256 assemble instruct"
 * (tabs); 0 for a comment, a blank line or a malformed row. */
static int parse_row(const char *line, size_t len, clf_catalogue_entry *e) {
    if (len == 0 || line[0] == '#') return 0;
    const char *f[8];
    size_t fl[8], start = 0;
    int nf = 0;
    for (size_t i = 0; i <= len && nf < 8; i++)
        if (i == len || line[i] == '\t') {
            f[nf] = line + start;
            fl[nf++] = i - start;
            start = i + 1;
        }
    char size[24];
    if (nf < 8 || !copy_field(f[0], fl[0], e->name, sizeof e->name) ||
        !copy_field(f[1], fl[1], e->file, sizeof e->file) ||
        !copy_field(f[2], fl[2], e->packages, sizeof e->packages) ||
        !copy_field(f[3], fl[3], e->version, sizeof e->version) || !copy_field(f[4], fl[4], size, sizeof size) ||
        fl[5] != 64 || !copy_field(f[5], fl[5], e->sha256, sizeof e->sha256) ||
        !(is(f[6], fl[6], "wheel") || is(f[6], fl[6], "concat")) ||
        !(is(f[7], fl[7], "yes") || is(f[7], fl[7], "no")))
        return 0;
    e->concat = is(f[6], fl[6], "concat");
    e->instruct = is(f[7], fl[7], "yes");
    char *end;
    e->size = strtoull(size, &end, 10);
    return *end == 0;
}

/* $CLINFER_CATALOGUE's text (malloc'd, *n bytes; NULL when it cannot be
 * read), read on each call: small, and no state shared between threads. */
static char *read_override(const char *path, size_t *n) {
    clf_buf b = {0};
    FILE *f = fopen(path, "rb");
    if (f) {
        /* up to 1 MiB (what lies beyond is not read); out of memory: none */
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, f)) > 0 && b.n + k <= (1u << 20) && clf_buf_add(&b, buf, k) == CLF_OK)
            ;
        fclose(f);
    }
    char *text = b.p ? clf_buf_take(&b, n) : NULL;
    if (!text) *n = 0;
    return text;
}

int clf_catalogue_at(int i, clf_catalogue_entry *e) {
    const char *path = getenv("CLINFER_CATALOGUE");
    size_t n = clf_catalogue_sources[0].len;
    char *own = path && *path ? read_override(path, &n) : NULL;
    const char *s = path && *path ? own : (const char *)clf_catalogue_sources[0].data;
    int found = 0;
    for (const char *p = s, *end = s + n; s && p < end && !found;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        if (parse_row(p, (size_t)(eol - p), e) && i-- == 0) found = 1;
        p = eol + 1;
    }
    free(own);
    return found;
}

int clf_catalogue_find(const char *name, clf_catalogue_entry *e) {
    for (int i = 0; clf_catalogue_at(i, e); i++)
        if (!strcmp(e->name, name)) return 1;
    return 0;
}

void clf_catalogue_names(char *buf, size_t n) {
    clf_catalogue_entry e;
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int i = 0; clf_catalogue_at(i, &e) && used < n; i++) {
        int k = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", e.name);
        if (k < 0) break;
        used += (size_t)k;
    }
}

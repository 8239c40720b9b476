#include "catalogue.h"

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

/* One line "name file packages version size sha256 assemble" (tabs); 0 for
 * a comment, a blank line or a malformed row. */
static int parse_row(const char *line, size_t len, clf_catalogue_entry *e) {
    if (len == 0 || line[0] == '#') return 0;
    const char *f[7];
    size_t fl[7], start = 0;
    int nf = 0;
    for (size_t i = 0; i <= len && nf < 7; i++)
        if (i == len || line[i] == '\t') {
            f[nf] = line + start;
            fl[nf++] = i - start;
            start = i + 1;
        }
    char size[24];
    if (nf < 7 || !copy_field(f[0], fl[0], e->name, sizeof e->name) ||
        !copy_field(f[1], fl[1], e->file, sizeof e->file) || !copy_field(f[4], fl[4], size, sizeof size) ||
        fl[5] != 64 || !copy_field(f[5], fl[5], e->sha256, sizeof e->sha256))
        return 0;
    char *end;
    e->size = strtoull(size, &end, 10);
    return *end == 0;
}

int clf_catalogue_at(int i, clf_catalogue_entry *e) {
    const char *s = (const char *)clf_catalogue_sources[0].data;
    size_t n = clf_catalogue_sources[0].len;
    for (const char *p = s, *end = s + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
        if (parse_row(p, (size_t)(eol - p), e) && i-- == 0) return 1;
        p = eol + 1;
    }
    return 0;
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

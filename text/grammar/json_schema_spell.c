/* JSON Schema -> GBNF: the GBNF spelling of bytes, code points and JSON
 * strings (json_schema_impl.h). */
#include "json_schema_impl.h"

/* Bytes as a GBNF literal's inside ("..." escapes). */
static void sb_lit_bytes(clf_buf *b, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '"' || ch == '\\') {
            clf_buf_putc(b, '\\');
            clf_buf_putc(b, (char)ch);
        } else if (ch < 0x20 || ch == 0x7f) {
            clf_buf_printf(b, "\\x%02X", ch);
        } else {
            clf_buf_putc(b, (char)ch);
        }
    }
}

/* A string's JSON spelling as a JSON writer gives it (json.dumps with
 * ensure_ascii=False): " \ and control characters escaped, the rest as is. */
static void json_spell_cp(clf_buf *b, uint32_t cp) {
    static const char short_esc[] = {['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r'};
    if (cp == '"' || cp == '\\') {
        clf_buf_putc(b, '\\');
        clf_buf_putc(b, (char)cp);
    } else if (cp < 0x20) {
        if (cp < sizeof short_esc && short_esc[cp]) {
            clf_buf_putc(b, '\\');
            clf_buf_putc(b, short_esc[cp]);
        } else {
            clf_buf_printf(b, "\\u%04x", cp);
        }
    } else if (cp < 0x80) {
        clf_buf_putc(b, (char)cp);
    } else {
        char u[4];
        size_t n = clf_utf8_encode(cp, u); /* 0 for a surrogate, which no valid string holds */
        clf_buf_add(b, u, n);
    }
}

/* Decodes one UTF-8 character of s[*i, n) and steps over it. jansson's
 * strings are valid UTF-8; a byte that starts no character (which cannot
 * happen) reads as itself. */
uint32_t clf_js_utf8_next(const char *s, size_t n, size_t *i) {
    uint32_t cp;
    size_t l = clf_utf8_decode(s + *i, n - *i, &cp);
    if (!l) cp = (unsigned char)s[*i], l = 1;
    *i += l;
    return cp;
}

/* GBNF for the JSON spelling of code points cps[0, n) (quotes around when
 * `quotes`): one literal, but for a \u00XX escape whose last hex digit is a
 * letter, which either case spells (Python writes \u001f, jansson \u001F). */
void clf_js_spell_cps(clf_buf *b, const uint32_t *cps, size_t n, int quotes) {
    clf_buf run = SB_INIT;
    int tokens = 0;
    if (quotes) clf_buf_putc(&run, '"');
    for (size_t i = 0; i <= n; i++) {
        int letter = i < n && cps[i] < 0x20 && (cps[i] & 15) >= 10 && cps[i] != '\n' && cps[i] != '\r' &&
                     cps[i] != '\f' && cps[i] != '\b';
        if (i == n && quotes) clf_buf_putc(&run, '"');
        if (letter) clf_buf_printf(&run, "\\u00%c", cps[i] >> 4 ? '1' : '0');
        else if (i < n) json_spell_cp(&run, cps[i]);
        if ((letter || i == n) && run.n) {
            if (tokens++) clf_buf_putc(b, ' ');
            clf_buf_putc(b, '"');
            sb_lit_bytes(b, clf_buf_str(&run), run.n);
            clf_buf_putc(b, '"');
            run.n = 0;
        }
        if (letter) {
            char lo = (char)('a' + (cps[i] & 15) - 10);
            if (tokens++) clf_buf_putc(b, ' ');
            clf_buf_printf(b, "[%c%c]", lo, lo - 32);
        }
    }
    if (!tokens) clf_buf_puts(b, "\"\"");
    if (run.failed) b->failed = 1;
    free(run.p);
}

/* GBNF for the JSON spelling of the string s[0, n), quotes included. */
void clf_js_spell_string(clf_buf *b, const char *s, size_t n) {
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    if (!cps) {
        b->failed = 1;
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) cps[m++] = clf_js_utf8_next(s, n, &i);
    if (m > 1) clf_buf_putc(b, '(');
    clf_js_spell_cps(b, cps, m, 1);
    if (m > 1) clf_buf_putc(b, ')');
    free(cps);
}

/* The Jinja engine's lexer: text, {{ }}, {% %} and {# #}, with jinja2's
 * whitespace control as Hugging Face sets it (trim_blocks: the newline
 * after a block or comment tag goes; lstrip_blocks: the spaces and tabs
 * before one on its line go; "-" strips all whitespace on its side, "+"
 * keeps it), the one trailing newline jinja2 drops, and the expression
 * tokens inside tags. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

typedef struct lexer {
    jj_arena *a;
    const char *s;
    size_t n, pos;
    int line;
    jj_tok *toks;
    int nt, cap;
} lexer;

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f'; }

static jj_tok *push(lexer *L, jj_tok_type t) {
    if (L->nt == L->cap) {
        int cap = L->cap ? L->cap * 2 : 256;
        jj_tok *p = jj_alloc(L->a, (size_t)cap * sizeof *p);
        if (L->nt) memcpy(p, L->toks, (size_t)L->nt * sizeof *p);
        L->toks = p, L->cap = cap;
    }
    jj_tok *k = &L->toks[L->nt++];
    memset(k, 0, sizeof *k);
    k->t = t, k->line = L->line;
    return k;
}

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* a UTF-8 encoding of code point u into o; its length */
static int put_u8(char *o, unsigned u) {
    if (u < 0x80) { o[0] = (char)u; return 1; }
    if (u < 0x800) { o[0] = (char)(0xC0 | u >> 6); o[1] = (char)(0x80 | (u & 63)); return 2; }
    if (u < 0x10000) {
        o[0] = (char)(0xE0 | u >> 12); o[1] = (char)(0x80 | (u >> 6 & 63)); o[2] = (char)(0x80 | (u & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | u >> 18); o[1] = (char)(0x80 | (u >> 12 & 63));
    o[2] = (char)(0x80 | (u >> 6 & 63)); o[3] = (char)(0x80 | (u & 63));
    return 4;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* A string literal at L->pos (its quote): Python's unicode-escape decoding,
 * as jinja2 does; an unknown escape keeps its backslash. */
static clf_status lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1, end = i;
    /* its length first: the decoded text is never longer than the literal */
    while (end < L->n && L->s[end] != q) end += L->s[end] == '\\' ? 2 : 1;
    if (end > L->n) end = L->n;
    char *o = jj_alloc(L->a, end - L->pos + 1), *w = o;
    for (;; i++) {
        if (i >= L->n) return clf_fail(CLF_ERR_FORMAT, "chat template line %d: unterminated string", L->line);
        char ch = L->s[i];
        if (ch == q) break;
        if (ch != '\\') { *w++ = ch; continue; }
        if (i + 1 >= L->n) continue;
        char e = L->s[++i];
        switch (e) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case '\\': *w++ = '\\'; break;
        case '\'': *w++ = '\''; break;
        case '"': *w++ = '"'; break;
        case 'a': *w++ = '\a'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'v': *w++ = '\v'; break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned u = 0;
            for (int k = 0; k < nd; k++) {
                int h = i + 1 + k < L->n ? hexval(L->s[i + 1 + k]) : -1;
                if (h < 0) return clf_fail(CLF_ERR_FORMAT, "chat template line %d: truncated \\%c escape", L->line, e);
                u = u * 16 + (unsigned)h;
            }
            if (u > 0x10FFFF) return clf_fail(CLF_ERR_FORMAT, "chat template line %d: illegal Unicode character", L->line);
            i += (size_t)nd;
            w += put_u8(w, u);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned u = (unsigned)(e - '0');
                for (int k = 0; k < 2 && i + 1 < L->n && L->s[i + 1] >= '0' && L->s[i + 1] <= '7'; k++)
                    u = u * 8 + (unsigned)(L->s[++i] - '0');
                w += put_u8(w, u);
            } else {
                *w++ = '\\', *w++ = e;
            }
        }
    }
    jj_tok *t = push(L, TK_STRING);
    t->s = o, t->n = (size_t)(w - o);
    L->line += count_lines(L->s + L->pos, i - L->pos);
    L->pos = i + 1;
    return CLF_OK;
}

static const char *const OPS2[] = {"**", "//", "==", "!=", "<=", ">="};

/* The tokens of a tag from L->pos to its end ("%}" or "}}" outside
 * brackets); *strip_after: 1 for "-", 2 for "+", 0 otherwise. */
static clf_status lex_tag(lexer *L, int block, int *strip_after) {
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_ws(L->s[L->pos])) L->line += L->s[L->pos++] == '\n';
        if (L->pos >= L->n)
            return clf_fail(CLF_ERR_FORMAT, "chat template line %d: unexpected end of template in a tag", L->line);
        const char *p = L->s + L->pos;
        size_t left = L->n - L->pos;
        const char *end = block ? "%}" : "}}";
        if (depth == 0) {
            if (left >= 3 && (p[0] == '-' || p[0] == '+') && !memcmp(p + 1, end, 2)) {
                *strip_after = p[0] == '-' ? 1 : 2;
                L->pos += 3;
                push(L, block ? TK_BLOCK_END : TK_VAR_END);
                return CLF_OK;
            }
            if (left >= 2 && !memcmp(p, end, 2)) {
                *strip_after = 0;
                L->pos += 2;
                push(L, block ? TK_BLOCK_END : TK_VAR_END);
                return CLF_OK;
            }
        }
        char ch = *p;
        if (ch == '\'' || ch == '"') {
            CLF_TRY(lex_string(L));
        } else if (isalpha((unsigned char)ch) || ch == '_') {
            size_t k = 1;
            while (k < left && (isalnum((unsigned char)p[k]) || p[k] == '_')) k++;
            jj_tok *t = push(L, TK_NAME);
            t->s = jj_strndup(L->a, p, k), t->n = k;
            L->pos += k;
        } else if (isdigit((unsigned char)ch)) {
            size_t k = 0;
            while (k < left && (isdigit((unsigned char)p[k]) || p[k] == '_')) k++;
            int is_float = 0;
            if (k + 1 < left && p[k] == '.' && isdigit((unsigned char)p[k + 1])) {
                is_float = 1;
                k++;
                while (k < left && (isdigit((unsigned char)p[k]) || p[k] == '_')) k++;
            }
            if (k < left && (p[k] == 'e' || p[k] == 'E')) {
                size_t e = k + 1;
                if (e < left && (p[e] == '+' || p[e] == '-')) e++;
                if (e < left && isdigit((unsigned char)p[e])) {
                    while (e < left && isdigit((unsigned char)p[e])) e++;
                    k = e, is_float = 1;
                }
            }
            char num[64];
            size_t m = 0;
            for (size_t x = 0; x < k && m < sizeof num - 1; x++)
                if (p[x] != '_') num[m++] = p[x];
            num[m] = 0;
            jj_tok *t = push(L, is_float ? TK_FLOAT : TK_INT);
            if (is_float) t->f = strtod(num, NULL);
            else t->i = strtoll(num, NULL, 10);
            L->pos += k;
        } else {
            size_t k = 0;
            for (size_t o = 0; o < sizeof OPS2 / sizeof *OPS2; o++)
                if (left >= 2 && !memcmp(p, OPS2[o], 2)) k = 2;
            if (!k && strchr("+-*/%~<>=()[]{}.,:|!", ch)) k = 1;
            if (!k || (k == 1 && ch == '!'))
                return clf_fail(CLF_ERR_FORMAT, "chat template line %d: unexpected character '%c'", L->line, ch);
            if (ch == '(' || ch == '[' || ch == '{') depth++;
            if ((ch == ')' || ch == ']' || ch == '}') && depth > 0) depth--;
            /* operators point at static strings: no allocation per token */
            static const char *const ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                              ">", "=", "(", ")", "[", "]", "{", "}", ".", ",", ":", "|", NULL};
            jj_tok *t = push(L, TK_OP);
            for (int o = 0; ops[o]; o++)
                if (strlen(ops[o]) == k && !memcmp(ops[o], p, k)) t->s = ops[o];
            t->n = k;
            L->pos += k;
        }
    }
}

/* {% raw %}...{% endraw %}: the text between as it is (the raw tag's 3
 * tokens become it); "-" on either tag strips the whitespace on its side. */
static clf_status lex_raw(lexer *L, int strip_start, int *strip_end) {
    L->nt -= 3;
    size_t b = L->pos;
    if (strip_start == 1) /* (jinja2 keeps the newline after {% raw %}: no trim_blocks there) */
        while (b < L->n && is_ws(L->s[b])) b++;
    for (size_t i = b; i + 1 < L->n; i++) {
        if (L->s[i] != '{' || L->s[i + 1] != '%') continue;
        size_t j = i + 2;
        int minus = j < L->n && L->s[j] == '-';
        if (j < L->n && (L->s[j] == '-' || L->s[j] == '+')) j++;
        while (j < L->n && is_ws(L->s[j])) j++;
        if (L->n - j < 6 || memcmp(L->s + j, "endraw", 6)) continue;
        j += 6;
        while (j < L->n && is_ws(L->s[j])) j++;
        int sign_after = j < L->n && L->s[j] == '-' ? 1 : j < L->n && L->s[j] == '+' ? 2 : 0;
        if (sign_after) j++;
        if (L->n - j < 2 || memcmp(L->s + j, "%}", 2)) continue;
        size_t e = i;
        if (minus)
            while (e > b && is_ws(L->s[e - 1])) e--;
        if (e > b) {
            jj_tok *t = push(L, TK_TEXT);
            t->s = L->s + b, t->n = e - b;
        }
        L->line += count_lines(L->s + L->pos, j + 2 - L->pos);
        L->pos = j + 2;
        *strip_end = sign_after; /* what follows {% endraw %}: as after any block tag */
        return CLF_OK;
    }
    return clf_fail(CLF_ERR_FORMAT, "chat template line %d: missing {%% endraw %%}", L->line);
}

clf_status jj_lex(jj_arena *a, const char *src, size_t len, jj_tok **toks, int *n) {
    lexer L = {.a = a, .line = 1};
    /* newlines as jinja2 reads them: \r\n and \r are \n, one trailing newline dropped */
    char *s = jj_alloc(a, len + 1);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--;
    L.s = s, L.n = m;
    int line_starting = 1; /* the last tag ended a line (or nothing came yet) */
    while (L.pos < L.n) {
        /* the next tag */
        size_t t = L.pos;
        while (t + 1 < L.n && !(L.s[t] == '{' && (L.s[t + 1] == '{' || L.s[t + 1] == '%' || L.s[t + 1] == '#'))) t++;
        if (t + 1 >= L.n) t = L.n;
        size_t text_end = t;
        char kind = t < L.n ? L.s[t + 1] : 0;
        char sign = t + 2 < L.n ? L.s[t + 2] : 0;
        if (kind) {
            if (sign == '-') {
                while (text_end > L.pos && is_ws(L.s[text_end - 1])) text_end--;
            } else if (sign != '+' && kind != '{') {
                /* lstrip_blocks: only spaces between the line's start and the tag */
                size_t l = text_end;
                while (l > L.pos && L.s[l - 1] != '\n') l--;
                if (l > L.pos || line_starting) {
                    size_t k = l;
                    while (k < text_end && is_ws(L.s[k])) k++;
                    if (k == text_end) text_end = l;
                }
            }
        }
        if (text_end > L.pos) {
            jj_tok *tk = push(&L, TK_TEXT);
            tk->s = L.s + L.pos, tk->n = text_end - L.pos;
        }
        L.line += count_lines(L.s + L.pos, t - L.pos);
        if (!kind) break;
        L.pos = t + 2 + (sign == '-' || sign == '+');
        int strip = 0;
        if (kind == '#') {
            /* a comment: up to "#}" */
            size_t e = L.pos;
            while (e + 1 < L.n && !(L.s[e] == '#' && L.s[e + 1] == '}')) e++;
            if (e + 1 >= L.n)
                return clf_fail(CLF_ERR_FORMAT, "chat template line %d: missing end of comment tag", L.line);
            if (e > L.pos && L.s[e - 1] == '-') strip = 1;
            else if (e > L.pos && L.s[e - 1] == '+') strip = 2;
            L.line += count_lines(L.s + L.pos, e - L.pos);
            L.pos = e + 2;
        } else {
            push(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN);
            CLF_TRY(lex_tag(&L, kind == '%', &strip));
            jj_tok *k = &L.toks[L.nt - 3];
            if (kind == '%' && L.nt >= 3 && k[0].t == TK_BLOCK_BEGIN && k[1].t == TK_NAME && !strcmp(k[1].s, "raw") &&
                k[2].t == TK_BLOCK_END)
                CLF_TRY(lex_raw(&L, strip, &strip));
        }
        /* after the tag: "-" strips all whitespace, trim_blocks one newline after %} and #} */
        size_t before = L.pos;
        if (strip == 1) {
            while (L.pos < L.n && is_ws(L.s[L.pos])) L.line += L.s[L.pos++] == '\n';
        } else if (strip == 0 && kind != '{' && L.pos < L.n && L.s[L.pos] == '\n') {
            L.pos++, L.line++;
        }
        line_starting = L.pos > before ? L.s[L.pos - 1] == '\n' : 0;
        if (L.pos == before && kind != '{' && strip != 2) line_starting = 0;
    }
    push(&L, TK_EOF);
    *toks = L.toks, *n = L.nt;
    return CLF_OK;
}

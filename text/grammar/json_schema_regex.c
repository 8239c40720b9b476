/* JSON Schema -> GBNF: a pattern (a regular expression) compiled to grammar
 * over the string's JSON spelling, and the code point sets it and the
 * object names use (json_schema_impl.h). */
#include "json_schema_impl.h"

/* ---- patterns ---------------------------------------------------------------
 * A regular expression (Python's re, as jsonschema runs it, with ASCII
 * classes: \d [0-9], \w [A-Za-z0-9_], \s [ \t\n\r\f\v]; `.` anything but
 * \n; `$` only at the very end) as grammar over the string's JSON spelling. */

int clf_js_set_add(cpset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        uint32_t(*r)[2] = realloc(s->r, (size_t)cap * sizeof *r);
        if (!r) return -1;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return 0;
}
static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}
static void set_norm(cpset *s) {
    if (s->n == 0) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
    int k = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[k][1] + 1) {
            if (s->r[i][1] > s->r[k][1]) s->r[k][1] = s->r[i][1];
        } else {
            s->r[++k][0] = s->r[i][0];
            s->r[k][1] = s->r[i][1];
        }
    }
    s->n = k + 1;
}
int clf_js_set_negate(cpset *s) {
    set_norm(s);
    cpset t = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i][0] > next && clf_js_set_add(&t, next, s->r[i][0] - 1)) return -1;
        next = s->r[i][1] + 1;
    }
    if (next <= 0x10FFFF && clf_js_set_add(&t, next, 0x10FFFF)) return -1;
    free(s->r);
    *s = t;
    return 0;
}
static int set_has(const cpset *s, uint32_t cp) {
    for (int i = 0; i < s->n; i++)
        if (cp >= s->r[i][0] && cp <= s->r[i][1]) return 1;
    return 0;
}

static void class_cp(clf_buf *o, uint32_t cp) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') || cp == ' ')
        clf_buf_putc(o, (char)cp);
    else if (cp < 0x80) clf_buf_printf(o, "\\x%02X", cp);
    else if (cp < 0x10000) clf_buf_printf(o, "\\u%04X", cp);
    else clf_buf_printf(o, "\\U%08X", cp);
}

/* Code points in s as grammar over their JSON spelling: the plain ones as
 * one class, ", \ and control characters as their escapes. */
void clf_js_set_emit(clf_buf *o, cpset *s) {
    set_norm(s);
    clf_buf cls = SB_INIT;
    int plain = 0, alts = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i][0], hi = s->r[i][1];
        /* cut out the escaped characters and the surrogates (no UTF-8) */
        static const uint32_t cuts[][2] = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}};
        uint32_t pieces[8][2];
        int np = 1;
        pieces[0][0] = lo;
        pieces[0][1] = hi;
        for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
            int nn = 0;
            uint32_t next[8][2];
            for (int j = 0; j < np; j++) {
                uint32_t a = pieces[j][0], b = pieces[j][1];
                if (b < cuts[k][0] || a > cuts[k][1]) {
                    next[nn][0] = a;
                    next[nn++][1] = b;
                    continue;
                }
                if (a < cuts[k][0]) {
                    next[nn][0] = a;
                    next[nn++][1] = cuts[k][0] - 1;
                }
                if (b > cuts[k][1]) {
                    next[nn][0] = cuts[k][1] + 1;
                    next[nn++][1] = b;
                }
            }
            memcpy(pieces, next, sizeof next);
            np = nn;
        }
        for (int j = 0; j < np; j++) {
            class_cp(&cls, pieces[j][0]);
            if (pieces[j][1] > pieces[j][0]) {
                clf_buf_putc(&cls, '-');
                class_cp(&cls, pieces[j][1]);
            }
            plain = 1;
        }
    }
    clf_buf_putc(o, '(');
    if (plain) {
        clf_buf_putc(o, '[');
        clf_buf_puts(o, clf_buf_str(&cls));
        clf_buf_putc(o, ']');
        alts = 1;
    }
    free(cls.p);
    for (uint32_t cp = 0; cp <= '\\'; cp++) {
        if (!(cp < 0x20 || cp == '"' || cp == '\\') || !set_has(s, cp)) continue;
        if (alts++) clf_buf_puts(o, " | ");
        clf_js_spell_cps(o, &cp, 1, 0);
    }
    if (!alts) clf_buf_puts(o, "[^\\x00-\\U0010FFFF]"); /* cannot happen: sets are never empty */
    clf_buf_putc(o, ')');
}

typedef struct rx {
    const char *p;
    size_t n, i;
    const char *ptr;
    int depth;
} rx;

static clf_status rx_bad(rx *x, const char *what) {
    return clf_js_bad(x->ptr, "pattern: %s at offset %zu", what, x->i);
}
static int rx_peek(rx *x, uint32_t *cp) {
    if (x->i >= x->n) return 0;
    size_t j = x->i;
    *cp = clf_js_utf8_next(x->p, x->n, &j);
    return 1;
}
static uint32_t rx_get(rx *x) { return clf_js_utf8_next(x->p, x->n, &x->i); }

/* The class \d \w \s (or their negations) named by letter e into s. */
/* Whether \e is a class (\d \w \s and their negations). */
static int is_class_escape(uint32_t e) { return (e | 0x20) == 'd' || (e | 0x20) == 'w' || (e | 0x20) == 's'; }

static int class_escape(uint32_t e, cpset *s) {
    cpset t = {0};
    int neg = e == 'D' || e == 'W' || e == 'S', r = 0;
    switch (e | 0x20) {
    case 'd': r = clf_js_set_add(&t, '0', '9'); break;
    case 'w': r = clf_js_set_add(&t, '0', '9') || clf_js_set_add(&t, 'A', 'Z') || clf_js_set_add(&t, 'a', 'z') || clf_js_set_add(&t, '_', '_'); break;
    case 's': r = clf_js_set_add(&t, '\t', '\r') || clf_js_set_add(&t, ' ', ' '); break;
    default: return 1;
    }
    if (r || (neg && clf_js_set_negate(&t))) {
        free(t.r);
        return -1;
    }
    for (int i = 0; i < t.n && !r; i++) r = clf_js_set_add(s, t.r[i][0], t.r[i][1]);
    free(t.r);
    return r;
}

static int hexval(uint32_t ch) {
    return ch >= '0' && ch <= '9' ? (int)(ch - '0') : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (int)((ch | 0x20) - 'a' + 10) : -1;
}
/* An escaped character after the backslash (not a class): its code point. */
static clf_status rx_escape_char(rx *x, uint32_t e, uint32_t *cp) {
    static const char simple[] = "tnrfv0";
    static const uint32_t vals[] = {'\t', '\n', '\r', '\f', '\v', 0};
    for (int i = 0; simple[i]; i++)
        if (e == (uint32_t)simple[i]) {
            if (e == '0' && rx_peek(x, cp) && *cp >= '0' && *cp <= '7') return rx_bad(x, "octal escapes are not supported");
            *cp = vals[i];
            return CLF_OK;
        }
    if (e == 'x' || e == 'u' || e == 'U') {
        int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int i = 0; i < nd; i++) {
            uint32_t h;
            if (!rx_peek(x, &h) || hexval(h) < 0) return rx_bad(x, "a \\x, \\u or \\U escape needs hex digits");
            rx_get(x);
            v = v * 16 + (uint32_t)hexval(h);
        }
        if (v > 0x10FFFF) return rx_bad(x, "an escape beyond U+10FFFF");
        *cp = v;
        return CLF_OK;
    }
    if (e >= '1' && e <= '9') return rx_bad(x, "backreferences are not supported");
    if (e == 'b' || e == 'B' || e == 'A' || e == 'Z' || e == 'z' || e == 'G')
        return rx_bad(x, "\\b, \\B, \\A, \\Z anchors are not supported");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return rx_bad(x, "an unknown escape");
    *cp = e;
    return CLF_OK;
}

static clf_status rx_class(rx *x, cpset *s) {
    uint32_t ch;
    int neg = 0, first = 1;
    if (rx_peek(x, &ch) && ch == '^') {
        rx_get(x);
        neg = 1;
    }
    for (;;) {
        if (!rx_peek(x, &ch)) return rx_bad(x, "an unclosed [");
        rx_get(x);
        if (ch == ']' && !first) break;
        first = 0;
        uint32_t lo = ch;
        if (ch == '\\') {
            if (!rx_peek(x, &ch)) return rx_bad(x, "a \\ at the end");
            rx_get(x);
            int r = class_escape(ch, s);
            if (r < 0) return clf_js_oom();
            if (r == 0) continue;
            if (ch == 'b') lo = '\b';
            else CLF_TRY(rx_escape_char(x, ch, &lo));
        } else if (ch == '[' && rx_peek(x, &ch) && (ch == ':' || ch == '=' || ch == '.')) {
            return rx_bad(x, "POSIX classes are not supported");
        }
        uint32_t hi = lo, nx;
        if (rx_peek(x, &nx) && nx == '-' && x->i + 1 < x->n && x->p[x->i + 1] != ']') {
            rx_get(x);
            hi = rx_get(x);
            if (hi == '\\') {
                if (!rx_peek(x, &ch)) return rx_bad(x, "a \\ at the end");
                rx_get(x);
                if (ch == 'b') hi = '\b';
                else if (is_class_escape(ch)) return rx_bad(x, "a class as a range's end"); /* (asked without building it) */
                else CLF_TRY(rx_escape_char(x, ch, &hi));
            }
            if (hi < lo) return rx_bad(x, "a range whose end is before its start");
        }
        if (clf_js_set_add(s, lo, hi)) return clf_js_oom();
    }
    if (neg && clf_js_set_negate(s)) return clf_js_oom();
    if (s->n == 0) return rx_bad(x, "an empty class");
    return CLF_OK;
}

static clf_status rx_alt(rx *x, clf_buf *o, int top, int *nullable);

/* One atom and its quantifier. *done: at | or ) or the end. */
static clf_status rx_piece(rx *x, clf_buf *o, int top, int *nullable, int *done) {
    uint32_t ch;
    *done = 0;
    if (!rx_peek(x, &ch) || ch == '|' || ch == ')') {
        *done = 1;
        return CLF_OK;
    }
    if (ch == '$') {
        rx_get(x);
        uint32_t nx;
        if (top && (!rx_peek(x, &nx) || nx == '|')) { /* the branch's end: nothing follows */
            *done = 2;
            return CLF_OK;
        }
        return rx_bad(x, "$ only at the end of the pattern (or of a top-level branch)");
    }
    if (ch == '^') return rx_bad(x, "^ only at the start of the pattern (or of a top-level branch)");
    if (ch == '*' || ch == '+' || ch == '?') return rx_bad(x, "a quantifier with nothing to repeat");
    clf_buf atom = SB_INIT;
    int nul = 0;
    clf_status st = CLF_OK;
    rx_get(x);
    if (ch == '(') {
        uint32_t q;
        if (rx_peek(x, &q) && q == '?') {
            rx_get(x);
            uint32_t k;
            if (!rx_peek(x, &k)) return rx_bad(x, "an unclosed (");
            if (k == ':') rx_get(x);
            else if (k == 'P' || k == '<') {
                rx_get(x);
                if (k == 'P') {
                    if (!rx_peek(x, &k) || k != '<') return rx_bad(x, "(?P= backreferences are not supported");
                    rx_get(x);
                }
                if (rx_peek(x, &k) && (k == '=' || k == '!')) return rx_bad(x, "lookbehind is not supported");
                while (rx_peek(x, &k) && k != '>') rx_get(x);
                if (!rx_peek(x, &k)) return rx_bad(x, "an unclosed group name");
                rx_get(x);
            } else if (k == '=' || k == '!') return rx_bad(x, "lookahead is not supported");
            else return rx_bad(x, "inline flags and other (? groups are not supported");
        }
        if (++x->depth > 64) return rx_bad(x, "groups nested deeper than 64");
        clf_buf_putc(&atom, '(');
        st = rx_alt(x, &atom, 0, &nul);
        x->depth--;
        if (st == CLF_OK && (!rx_peek(x, &q) || q != ')')) st = rx_bad(x, "an unclosed (");
        if (st == CLF_OK) rx_get(x);
        clf_buf_putc(&atom, ')');
    } else if (ch == '[') {
        cpset s = {0};
        st = rx_class(x, &s);
        if (st == CLF_OK) clf_js_set_emit(&atom, &s);
        free(s.r);
    } else if (ch == '.') {
        cpset s = {0};
        if (clf_js_set_add(&s, '\n', '\n') || clf_js_set_negate(&s)) st = clf_js_oom();
        else clf_js_set_emit(&atom, &s);
        free(s.r);
    } else {
        uint32_t cp = ch;
        if (ch == '\\') {
            if (!rx_peek(x, &ch)) {
                free(atom.p);
                return rx_bad(x, "a \\ at the end");
            }
            rx_get(x);
            cpset s = {0};
            int r = class_escape(ch, &s);
            if (r < 0) st = clf_js_oom();
            else if (r == 0) clf_js_set_emit(&atom, &s);
            else st = rx_escape_char(x, ch, &cp);
            free(s.r);
            if (st == CLF_OK && r == 1) {
                cpset one = {0};
                if (clf_js_set_add(&one, cp, cp)) st = clf_js_oom();
                else clf_js_set_emit(&atom, &one);
                free(one.r);
            }
        } else {
            cpset one = {0};
            if (clf_js_set_add(&one, cp, cp)) st = clf_js_oom();
            else clf_js_set_emit(&atom, &one);
            free(one.r);
        }
    }
    if (st != CLF_OK) {
        free(atom.p);
        return st;
    }
    /* the quantifier */
    long lo = 1, hi = 1;
    if (rx_peek(x, &ch)) {
        if (ch == '*' || ch == '+' || ch == '?') {
            rx_get(x);
            lo = ch == '+';
            hi = ch == '?' ? 1 : -1;
        } else if (ch == '{') {
            size_t save = x->i;
            rx_get(x);
            long m = -1, n = -1;
            char *end;
            const char *q = x->p + x->i;
            if (*q >= '0' && *q <= '9') {
                m = strtol(q, &end, 10);
                q = end;
            }
            if (*q == ',') {
                q++;
                if (*q >= '0' && *q <= '9') {
                    n = strtol(q, &end, 10);
                    q = end;
                } else n = -2; /* {m,} */
            } else n = m;
            if (*q == '}' && (m >= 0 || n >= 0)) {
                x->i = (size_t)(q + 1 - x->p);
                lo = m < 0 ? 0 : m;
                hi = n == -2 ? -1 : n;
                if (lo > MAX_REPEAT || hi > MAX_REPEAT) {
                    free(atom.p);
                    return rx_bad(x, "a count above 4096");
                }
                if (hi >= 0 && hi < lo) {
                    free(atom.p);
                    return rx_bad(x, "a {m,n} with n < m");
                }
            } else {
                x->i = save; /* Python: a { that is no quantifier is itself */
            }
        }
        if (lo != 1 || hi != 1) {
            uint32_t q;
            if (rx_peek(x, &q) && q == '?') rx_get(x); /* lazy: the same language */
            else if (rx_peek(x, &q) && q == '+') {
                free(atom.p);
                return rx_bad(x, "possessive quantifiers are not supported");
            }
            if (rx_peek(x, &q) && (q == '*' || q == '+' || q == '?')) {
                free(atom.p);
                return rx_bad(x, "a quantifier after a quantifier");
            }
        }
    }
    if (nul && hi < 0) {
        free(atom.p);
        return rx_bad(x, "an unbounded repeat of a group that matches the empty string");
    }
    clf_buf_puts(o, clf_buf_str(&atom));
    if (lo == 0 && hi == 1) clf_buf_putc(o, '?');
    else if (lo == 0 && hi < 0) clf_buf_putc(o, '*');
    else if (lo == 1 && hi < 0) clf_buf_putc(o, '+');
    else if (hi < 0) clf_buf_printf(o, "{%ld,}", lo);
    else if (lo == hi && lo != 1) clf_buf_printf(o, "{%ld}", lo);
    else if (lo != hi) clf_buf_printf(o, "{%ld,%ld}", lo, hi);
    *nullable = nul || lo == 0;
    if (atom.failed) o->failed = 1;
    free(atom.p);
    return CLF_OK;
}

/* Alternatives; at the top level each may be anchored by ^ and $, and an
 * unanchored side matches anything (re.search). */
static clf_status rx_alt(rx *x, clf_buf *o, int top, int *nullable) {
    *nullable = 0;
    for (int branch = 0;; branch++) {
        if (branch) clf_buf_puts(o, " | ");
        int start = 1, end = 0;
        uint32_t ch;
        if (top) {
            if (rx_peek(x, &ch) && ch == '^') {
                rx_get(x);
                start = 0;
            }
            if (start) clf_buf_puts(o, "char* ");
        }
        int nul = 1;
        size_t branch_at = o->n;
        for (;;) {
            int done, pn = 0;
            size_t before = o->n;
            CLF_TRY(rx_piece(x, o, top, &pn, &done));
            if (done == 2) end = 1;
            if (done) break;
            nul = nul && pn;
            if (o->n > before) clf_buf_putc(o, ' ');
        }
        if (top && !end) clf_buf_puts(o, "char*");
        else if (o->n == branch_at) clf_buf_puts(o, "\"\"");
        if (nul) *nullable = 1;
        if (!rx_peek(x, &ch) || ch != '|') break;
        rx_get(x);
    }
    return CLF_OK;
}

clf_status clf_js_visit_pattern(conv *c, json_t *pat, const char *name, const char *ptr, clf_buf *out) {
    if (!json_is_string(pat)) return clf_js_bad(ptr, "\"pattern\" must be a string");
    rx x = {.p = json_string_value(pat), .n = json_string_length(pat), .ptr = ptr};
    clf_buf b = SB_INIT;
    int nul;
    clf_buf_puts(&b, "\"\\\"\" (");
    clf_js_prim(c, P_CHAR);
    clf_status st = rx_alt(&x, &b, 1, &nul);
    if (st == CLF_OK && x.i < x.n) st = rx_bad(&x, "an unmatched )");
    clf_buf_puts(&b, ") \"\\\"\"");
    if (st == CLF_OK) st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    free(b.p);
    return st;
}

/* GBNF: the parser and the compiled rules (see grammar.h and
 * grammar_impl.h). The syntax is llama.cpp's grammars/README.md: rules
 * `name ::= alternatives`, "literals" and [classes] with \x \u \U \t \r \n
 * \\ \" \[ \] escapes, `.` (any character), ( groups ), |, * + ? {m} {m,}
 * {m,n}, # comments. A rule ends at a newline outside parentheses (a line
 * that starts with `|` continues it). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "map.h"
#include "utf8.h"

/* ---- bounds ------------------------------------------------------------------
 * A grammar is untrusted input (a request's, a file's): every size the
 * parser builds and every walk the checks make is bounded, checked as it
 * goes, and an excess is CLF_ERR_ARG naming the bound. The values are
 * far above what hand-written grammars and the JSON-Schema converter's
 * output (at most 4 MiB, json_schema.c) need. */
enum {
    /* the text: twice the converter's largest output */
    GRAMMAR_MAX_TEXT = 8 << 20,
    /* ( groups ) open at once: the parser recurses once per group (a few
     * hundred bytes of C stack each); the matcher's stack is 512 deep */
    GRAMMAR_MAX_NESTING = 1024,
    /* elements of all rules together (8 bytes each: 32 MiB) */
    GRAMMAR_MAX_ELEMENTS = 4 << 20,
    /* rules, named and generated (groups, repetitions, classes) */
    GRAMMAR_MAX_RULES = 256 << 10,
};

/* ---- building the flat rule array ----------------------------------------- */

static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

typedef struct cprange {
    uint32_t lo, hi;
} cprange;

typedef struct gbuf { /* one rule's elements while it is parsed */
    gel *e;
    int n, cap;
} gbuf;

static int buf_push(gbuf *b, int type, int32_t val) {
    if (grow((void **)&b->e, &b->cap, b->n + 1, sizeof *b->e)) return -1;
    b->e[b->n++] = (gel){(uint8_t)type, val};
    return 0;
}

typedef struct parser {
    const char *src, *p, *end;
    clf_grammar *g;
    gbuf *rules; /* [n_rules]: each rule's elements, n = 0 while undefined */
    int *defined;
    int cap_rules, cap_rule_arrays; /* names' capacity; rules' and defined's */
    int any_rule; /* `.`'s rule, -1 until used */
    int nesting;  /* groups open */
    long n_el;    /* elements pushed, all rules */
    clf_map names_map; /* rule name -> its id (the core's map) */
    clf_map sets_map;  /* a byte set's 32 bytes -> its index in g->sets */
    cprange *class_buf;        /* a class's ranges while it is parsed (off the C stack: groups recurse) */
    int32_t *chain_k;          /* [cap_chain] a bounded repetition's optional rules: k, else 0 */
    int cap_chain;
    clf_status st;
} parser;

static clf_status perr(parser *ps, const char *at, const char *fmt, const char *what) {
    int line = 1, col = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    if (ps->st == CLF_OK) ps->st = clf_fail(CLF_ERR_ARG, "grammar: line %d, column %d: %s%s", line, col, fmt, what);
    return ps->st;
}

static int oom(parser *ps) {
    if (ps->st == CLF_OK) ps->st = clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    return -1;
}

/* buf_push, counted against GRAMMAR_MAX_ELEMENTS (-1: over it, the error
 * set, or out of memory, left for the caller's oom()). */
static int ps_push(parser *ps, gbuf *b, int type, int32_t val) {
    if (++ps->n_el > GRAMMAR_MAX_ELEMENTS) {
        if (ps->st == CLF_OK)
            ps->st = clf_fail(CLF_ERR_ARG, "grammar: more than %d elements (the bound on a grammar's size)",
                              GRAMMAR_MAX_ELEMENTS);
        return -1;
    }
    return buf_push(b, type, val);
}

/* A rule id for a name (made when first seen); -1 when out of memory. */
static int add_rule(parser *ps, const char *name, size_t n);
static int rule_id(parser *ps, const char *name, size_t n) {
    const int64_t *id = clf_map_get(&ps->names_map, name, n);
    return id ? (int)*id : add_rule(ps, name, n);
}

static int add_rule(parser *ps, const char *name, size_t n) {
    clf_grammar *g = ps->g;
    if (g->n_rules >= GRAMMAR_MAX_RULES) {
        if (ps->st == CLF_OK)
            ps->st = clf_fail(CLF_ERR_ARG, "grammar: more than %d rules, generated ones included (the bound on a "
                              "grammar's size)", GRAMMAR_MAX_RULES);
        return -1;
    }
    if (grow((void **)&g->names, &ps->cap_rules, g->n_rules + 1, sizeof *g->names)) return -1;
    int cap = ps->cap_rules;
    if (ps->cap_rule_arrays < cap) { /* only when names grew: a realloc each rule copies each time (ASan's always) */
        gbuf *r = realloc(ps->rules, (size_t)cap * sizeof *r);
        int *d = r ? realloc(ps->defined, (size_t)cap * sizeof *d) : NULL;
        if (r) ps->rules = r;
        if (!d) return -1;
        ps->defined = d;
        ps->cap_rule_arrays = cap;
    }
    char *s = malloc(n + 1);
    if (!s) return -1;
    memcpy(s, name, n);
    s[n] = 0;
    if (clf_map_set(&ps->names_map, name, n, g->n_rules) != CLF_OK) {
        free(s);
        return -1;
    }
    int id = g->n_rules++;
    g->names[id] = s;
    ps->rules[id] = (gbuf){0};
    ps->defined[id] = 0;
    return id;
}

/* A generated rule (groups, repetitions, classes): "parent-N". */
static int new_rule(parser *ps) {
    char name[32];
    snprintf(name, sizeof name, "\x01%d", ps->g->n_rules); /* cannot be typed: never collides */
    int id = add_rule(ps, name, strlen(name));
    if (id >= 0) ps->defined[id] = 1;
    return id;
}

/* A byte set's index, shared between equal sets. */
static int set_id(parser *ps, const uint64_t s[4]) {
    clf_grammar *g = ps->g;
    const int64_t *seen = clf_map_get(&ps->sets_map, s, sizeof g->sets[0]);
    if (seen) return (int)*seen;
    int cap = g->cap_sets;
    if (grow((void **)&g->sets, &cap, g->n_sets + 1, sizeof *g->sets)) return -1;
    g->cap_sets = cap;
    memcpy(g->sets[g->n_sets], s, sizeof g->sets[0]);
    if (clf_map_set(&ps->sets_map, s, sizeof g->sets[0], g->n_sets) != CLF_OK) return -1;
    return g->n_sets++;
}

static int push_byte_range(parser *ps, gbuf *b, int lo, int hi) {
    uint64_t s[4] = {0};
    for (int c = lo; c <= hi; c++) s[c >> 6] |= 1ull << (c & 63);
    int id = set_id(ps, s);
    return id < 0 || ps_push(ps, b, G_BYTES, id) ? oom(ps) : 0;
}

/* ---- characters: code point ranges lowered to UTF-8 byte sequences -------- */

/* Appends to rule r one alternative per run of byte ranges that encodes
 * [lo, hi] (Go's regexp/syntax utf8 split: by encoded length, then so that
 * every byte position is one range). */
static int utf8_alts(parser *ps, gbuf *r, uint32_t lo, uint32_t hi) {
    static const uint32_t LEN_MAX[] = {0x7F, 0x7FF, 0xFFFF};
    if (lo > hi) return 0;
    for (int i = 0; i < 3; i++)
        if (lo <= LEN_MAX[i] && hi > LEN_MAX[i])
            return utf8_alts(ps, r, lo, LEN_MAX[i]) || utf8_alts(ps, r, LEN_MAX[i] + 1, hi) ? -1 : 0;
    char a[4], b[4]; /* the ranges hold no surrogate (split off before): each encodes */
    int n = (int)clf_utf8_encode(lo, a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) return utf8_alts(ps, r, lo, lo | m) || utf8_alts(ps, r, (lo | m) + 1, hi) ? -1 : 0;
            if ((hi & m) != m) return utf8_alts(ps, r, lo, (hi & ~m) - 1) || utf8_alts(ps, r, hi & ~m, hi) ? -1 : 0;
        }
    }
    clf_utf8_encode(hi, b);
    if (r->n && ps_push(ps, r, G_ALT, 0)) return oom(ps);
    for (int i = 0; i < n; i++)
        if (push_byte_range(ps, r, (unsigned char)a[i], (unsigned char)b[i])) return -1;
    return 0;
}

static int cmp_range(const void *x, const void *y) {
    const cprange *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* A character class (ranges, negated or not) into `into`: one byte-set
 * element when it is ASCII, else a reference to a rule of its UTF-8
 * sequences. Surrogates are not characters: never matched. */
static int emit_class(parser *ps, int into_rule, gbuf *into_tmp, cprange *rg, int n, int negate) {
    /* into: rule into_rule, or into_tmp when it is < 0 (ps->rules moves as new rules are made) */
#define INTO (into_rule >= 0 ? &ps->rules[into_rule] : into_tmp)
    qsort(rg, (size_t)n, sizeof *rg, cmp_range);
    cprange set[512 + 4];
    int m = 0;
    for (int i = 0; i < n; i++) { /* merge */
        if (m && rg[i].lo <= set[m - 1].hi + 1) {
            if (rg[i].hi > set[m - 1].hi) set[m - 1].hi = rg[i].hi;
        } else
            set[m++] = rg[i];
    }
    if (negate) {
        cprange inv[512 + 4];
        int k = 0;
        uint32_t next = 0;
        for (int i = 0; i < m; i++) {
            if (set[i].lo > next) inv[k++] = (cprange){next, set[i].lo - 1};
            next = set[i].hi + 1;
        }
        if (next <= 0x10FFFF) inv[k++] = (cprange){next, 0x10FFFF};
        memcpy(set, inv, (size_t)k * sizeof *set);
        m = k;
    }
    cprange out[512 + 8];
    int k = 0;
    for (int i = 0; i < m; i++) { /* cut out the surrogates */
        cprange x = set[i];
        if (x.hi > 0x10FFFF) x.hi = 0x10FFFF;
        if (x.lo > x.hi) continue;
        if (x.lo < 0xD800 && x.hi >= 0xD800) {
            out[k++] = (cprange){x.lo, 0xD7FF};
            if (x.hi > 0xDFFF) out[k++] = (cprange){0xE000, x.hi};
        } else if (x.lo >= 0xD800 && x.lo <= 0xDFFF) {
            if (x.hi > 0xDFFF) out[k++] = (cprange){0xE000, x.hi};
        } else
            out[k++] = x;
    }
    if (k && out[k - 1].hi < 0x80) { /* ASCII: one byte set */
        uint64_t s[4] = {0};
        for (int i = 0; i < k; i++)
            for (uint32_t c = out[i].lo; c <= out[i].hi; c++) s[c >> 6] |= 1ull << (c & 63);
        int id = set_id(ps, s);
        return id < 0 || ps_push(ps, INTO, G_BYTES, id) ? oom(ps) : 0;
    }
    int r = new_rule(ps);
    if (r < 0) return oom(ps);
    for (int i = 0; i < k; i++) /* ps->rules may move while it grows: index each time */
        if (utf8_alts(ps, &ps->rules[r], out[i].lo, out[i].hi)) return -1;
    if (!k) { /* matches nothing: an alternative no byte enters */
        uint64_t none[4] = {0};
        int id = set_id(ps, none);
        if (id < 0 || ps_push(ps, &ps->rules[r], G_BYTES, id)) return oom(ps);
    }
    return ps_push(ps, INTO, G_REF, r) ? oom(ps) : 0;
#undef INTO
}

/* ---- the parser ------------------------------------------------------------ */

static int is_word(int c) { return isalnum(c) || c == '-' || c == '_'; }

/* Skips blanks and comments; newlines too when `newline`. */
static void space(parser *ps, int newline) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || (newline && c == '\n')) ps->p++;
        else if (c == '#')
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        else
            break;
    }
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class: an escape or a UTF-8 character. */
static int parse_char(parser *ps, uint32_t *cp) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return perr(ps, at, "unexpected end of grammar", ""), -1;
    unsigned char c = (unsigned char)*ps->p++;
    if (c == '\\') {
        if (ps->p >= ps->end) return perr(ps, at, "unfinished escape", ""), -1;
        char e = *ps->p++;
        int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (nhex) {
            uint32_t v = 0;
            for (int i = 0; i < nhex; i++) {
                int h = ps->p < ps->end ? hexval((unsigned char)*ps->p) : -1;
                if (h < 0) return perr(ps, at, "bad hex escape", ""), -1;
                v = v << 4 | (uint32_t)h;
                ps->p++;
            }
            if (v > 0x10FFFF) return perr(ps, at, "code point beyond U+10FFFF", ""), -1;
            /* a surrogate is no character: its UTF-8 form is not UTF-8 */
            if (v >= 0xD800 && v <= 0xDFFF) return perr(ps, at, "a surrogate (U+D800-U+DFFF) is not a character", ""), -1;
            *cp = v;
            return 0;
        }
        switch (e) {
        case 'n': *cp = '\n'; return 0;
        case 't': *cp = '\t'; return 0;
        case 'r': *cp = '\r'; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return 0;
        default: return perr(ps, at, "unknown escape", ""), -1;
        }
    }
    /* a UTF-8 character of the grammar's own text (RFC 3629: utf8.h) */
    size_t l = clf_utf8_decode(at, (size_t)(ps->end - at), cp);
    if (!l) return perr(ps, at, "invalid UTF-8 in the grammar", ""), -1;
    ps->p = at + l;
    return 0;
}

static int parse_alternates(parser *ps, int rule, int nested);

/* A repetition of elements [start, b->n) of b, {min, max} (max < 0: no
 * bound), as llama.cpp rewrites it: min copies, then a star rule
 * (S ::= x S | ) or max - min nested optional rules. */
static int repeat(parser *ps, int rule, int start, int min, int max) {
    gbuf *b = &ps->rules[rule];
    int n = b->n - start;
    if (n == 0) return 0; /* "" repeated is "" */
    if ((long)n * (max > min ? max : min + 1) > 1 << 20)
        return perr(ps, ps->p, "a repetition too large (over a million elements)", ""), -1;
    gel *x = malloc((size_t)(n ? n : 1) * sizeof *x);
    if (!x) return oom(ps);
    memcpy(x, b->e + start, (size_t)n * sizeof *x);
    b->n = start;
    int rc = 0;
    for (int i = 0; i < min && !rc; i++)
        for (int k = 0; k < n && !rc; k++) rc = ps_push(ps, &ps->rules[rule], x[k].type, x[k].val);
    if (!rc && max < 0) {
        int s = new_rule(ps);
        rc = s < 0;
        for (int k = 0; k < n && !rc; k++) rc = ps_push(ps, &ps->rules[s], x[k].type, x[k].val);
        rc = rc || ps_push(ps, &ps->rules[s], G_REF, s) || ps_push(ps, &ps->rules[s], G_ALT, 0) ||
             ps_push(ps, &ps->rules[rule], G_REF, s);
    } else if (!rc && max > min) {
        int tail = -1; /* O_k ::= x O_{k-1} | , innermost first */
        for (int i = 0; i < max - min && !rc; i++) {
            int o = new_rule(ps);
            rc = o < 0;
            int had = ps->cap_chain;
            if (!rc && grow((void **)&ps->chain_k, &ps->cap_chain, o + 1, sizeof *ps->chain_k)) rc = 1;
            if (!rc && ps->cap_chain > had) memset(ps->chain_k + had, 0, (size_t)(ps->cap_chain - had) * sizeof *ps->chain_k);
            if (!rc) ps->chain_k[o] = i + 1; /* O_{i + 1} */
            for (int k = 0; k < n && !rc; k++) rc = ps_push(ps, &ps->rules[o], x[k].type, x[k].val);
            if (!rc && tail >= 0) rc = ps_push(ps, &ps->rules[o], G_REF, tail);
            rc = rc || ps_push(ps, &ps->rules[o], G_ALT, 0);
            tail = o;
        }
        rc = rc || ps_push(ps, &ps->rules[rule], G_REF, tail);
    }
    free(x);
    return rc ? oom(ps) : 0;
}

static int parse_int(parser *ps, int *v) {
    if (ps->p >= ps->end || !isdigit((unsigned char)*ps->p)) return -1;
    long x = 0;
    while (ps->p < ps->end && isdigit((unsigned char)*ps->p)) {
        x = x * 10 + (*ps->p++ - '0');
        if (x > 10000) return -1;
    }
    *v = (int)x;
    return 0;
}

/* One sequence of symbols into rule `rule` (up to `|`, `)` or the end). */
static int parse_sequence(parser *ps, int rule, int nested) {
    int last = -1; /* where the last symbol's elements start */
    while (ps->p < ps->end) {
        const char *at = ps->p;
        char c = *ps->p;
        int start = ps->rules[rule].n;
        if (c == '"') {
            ps->p++;
            while (ps->p < ps->end && *ps->p != '"') {
                uint32_t cp;
                if (parse_char(ps, &cp)) return -1;
                char u[4];
                size_t n = clf_utf8_encode(cp, u); /* parse_char gives no surrogate */
                for (size_t i = 0; i < n; i++)
                    if (push_byte_range(ps, &ps->rules[rule], (unsigned char)u[i], (unsigned char)u[i])) return -1;
            }
            if (ps->p >= ps->end) return perr(ps, at, "unterminated literal", ""), -1;
            ps->p++;
            last = start;
        } else if (c == '[') {
            ps->p++;
            int negate = ps->p < ps->end && *ps->p == '^';
            if (negate) ps->p++;
            cprange *rg = ps->class_buf;
            int n = 0;
            while (ps->p < ps->end && *ps->p != ']') {
                uint32_t lo, hi;
                if (parse_char(ps, &lo)) return -1;
                hi = lo;
                if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    if (parse_char(ps, &hi)) return -1;
                    if (hi < lo) return perr(ps, at, "a class range ends before it starts", ""), -1;
                }
                if (n == 512) return perr(ps, at, "a class of more than 512 ranges", ""), -1;
                rg[n++] = (cprange){lo, hi};
            }
            if (ps->p >= ps->end) return perr(ps, at, "unterminated character class", ""), -1;
            ps->p++;
            if (emit_class(ps, rule, NULL, rg, n, negate)) return -1;
            last = start;
        } else if (c == '.') {
            ps->p++;
            if (ps->any_rule < 0) {
                cprange all = {0, 0x10FFFF};
                gbuf tmp = {0};
                if (emit_class(ps, -1, &tmp, &all, 1, 0)) return free(tmp.e), -1;
                ps->any_rule = tmp.e[0].val;
                free(tmp.e);
            }
            if (ps_push(ps, &ps->rules[rule], G_REF, ps->any_rule)) return oom(ps);
            last = start;
        } else if (is_word((unsigned char)c)) {
            const char *s = ps->p;
            while (ps->p < ps->end && is_word((unsigned char)*ps->p)) ps->p++;
            const char *e = ps->p;
            space(ps, 1);
            if (ps->p + 2 < ps->end && !memcmp(ps->p, "::=", 3)) { /* the next rule: this sequence is over */
                ps->p = s;
                return 0;
            }
            ps->p = e;
            int r = rule_id(ps, s, (size_t)(e - s));
            if (r < 0 || ps_push(ps, &ps->rules[rule], G_REF, r)) return oom(ps);
            last = start;
        } else if (c == '(') {
            ps->p++;
            if (ps->nesting >= GRAMMAR_MAX_NESTING) {
                char n[64];
                snprintf(n, sizeof n, "%d (the bound on nesting)", GRAMMAR_MAX_NESTING);
                return perr(ps, at, "groups nested deeper than ", n), -1;
            }
            space(ps, 1);
            int r = new_rule(ps);
            if (r < 0) return oom(ps);
            ps->nesting++;
            int bad = parse_alternates(ps, r, 1);
            ps->nesting--;
            if (bad) return -1;
            if (ps->p >= ps->end || *ps->p != ')') return perr(ps, at, "missing ')'", ""), -1;
            ps->p++;
            if (ps_push(ps, &ps->rules[rule], G_REF, r)) return oom(ps);
            last = start;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last < 0) return perr(ps, at, "a repetition with nothing before it", ""), -1;
            ps->p++;
            int min = c == '+', max = c == '?' ? 1 : -1;
            if (c == '{') {
                space(ps, 0);
                min = 0;
                if (ps->p < ps->end && *ps->p != ',' && parse_int(ps, &min)) return perr(ps, at, "bad {m,n}", ""), -1;
                space(ps, 0);
                max = min;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    space(ps, 0);
                    max = -1;
                    if (ps->p < ps->end && *ps->p != '}' && parse_int(ps, &max)) return perr(ps, at, "bad {m,n}", ""), -1;
                }
                space(ps, 0);
                if (ps->p >= ps->end || *ps->p != '}') return perr(ps, at, "bad {m,n}: missing '}'", ""), -1;
                ps->p++;
                if (max >= 0 && max < min) return perr(ps, at, "{m,n} with n < m", ""), -1;
            }
            if (repeat(ps, rule, last, min, max)) return -1;
            last = -1; /* x** is not GBNF */
        } else if (c == '<') {
            return perr(ps, at, "token references (<...>) are not supported", ""), -1;
        } else
            break;
        space(ps, nested);
    }
    return 0;
}

static int parse_alternates(parser *ps, int rule, int nested) {
    for (;;) {
        if (parse_sequence(ps, rule, nested)) return -1;
        const char *save = ps->p;
        if (!nested) space(ps, 1); /* `|` at the start of the next line continues the rule */
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            space(ps, 1);
            if (ps_push(ps, &ps->rules[rule], G_ALT, 0)) return oom(ps);
            continue;
        }
        if (!nested) ps->p = save;
        return 0;
    }
}

static int parse_rule(parser *ps) {
    const char *at = ps->p, *s = ps->p;
    while (ps->p < ps->end && is_word((unsigned char)*ps->p)) ps->p++;
    if (ps->p == s) return perr(ps, at, "expected a rule name", ""), -1;
    int r = rule_id(ps, s, (size_t)(ps->p - s));
    if (r < 0) return oom(ps);
    if (ps->defined[r]) return perr(ps, at, "rule defined twice: ", ps->g->names[r]), -1;
    ps->defined[r] = 1;
    space(ps, 0);
    if (ps->p + 2 >= ps->end || memcmp(ps->p, "::=", 3)) return perr(ps, ps->p, "expected '::='", ""), -1;
    ps->p += 3;
    space(ps, 1);
    if (parse_alternates(ps, r, 0)) return -1;
    space(ps, 0);
    if (ps->p < ps->end && *ps->p != '\n' && !is_word((unsigned char)*ps->p))
        return perr(ps, ps->p, "unexpected character", ""), -1;
    space(ps, 1);
    return 0;
}

/* ---- checks: every rule defined, no left recursion, nesting in bounds ------
 * Each is linear in the grammar's elements (worklists and explicit stacks,
 * no recursion on the C stack): a grammar of GRAMMAR_MAX_RULES rules in
 * one chain is checked as fast as a flat one. */

/* The least set of rules with an alternative whose every element is in
 * the set (a REF) or, unless bytes_block, a byte set: with bytes_block
 * the rules that match the empty text (nullable), without it the rules
 * that derive some finite text (productive: one that only ever calls
 * itself again never ends). -1: out of memory. */
static int fixpoint(const clf_grammar *g, int bytes_block, uint8_t *mark) {
    int n_alt = 0;
    for (int i = 0; i < g->n_el; i++) n_alt += g->el[i].type == G_ALT || g->el[i].type == G_END;
    int *need = calloc((size_t)n_alt + 1, sizeof *need), *alt_rule = malloc(((size_t)n_alt + 1) * sizeof *alt_rule);
    int *occ_start = calloc((size_t)g->n_rules + 1, sizeof *occ_start), *occ = malloc(((size_t)g->n_el + 1) * sizeof *occ);
    int *queue = malloc(((size_t)g->n_rules + 1) * sizeof *queue);
    int rc = need && alt_rule && occ_start && occ && queue ? 0 : -1;
    if (!rc) {
        /* per alternative: the elements still unproved; per rule: where it is referenced */
        for (int r = 0, a = 0; r < g->n_rules; r++)
            for (int i = g->rule_start[r];; i++) {
                gel e = g->el[i];
                if (e.type == G_ALT || e.type == G_END) {
                    alt_rule[a++] = r;
                    if (e.type == G_END) break;
                } else if (e.type == G_REF) {
                    need[a]++;
                    occ_start[e.val + 1]++;
                } else if (bytes_block)
                    need[a] = INT32_MAX / 2; /* never 0 */
            }
        for (int r = 0; r < g->n_rules; r++) occ_start[r + 1] += occ_start[r];
        int *fill = queue; /* borrowed: the next slot per rule */
        memcpy(fill, occ_start, (size_t)g->n_rules * sizeof *fill);
        for (int r = 0, a = 0; r < g->n_rules; r++)
            for (int i = g->rule_start[r];; i++) {
                gel e = g->el[i];
                if (e.type == G_ALT || e.type == G_END) {
                    a++;
                    if (e.type == G_END) break;
                } else if (e.type == G_REF)
                    occ[fill[e.val]++] = a;
            }
        int head = 0, tail = 0;
        for (int a = 0; a < n_alt; a++)
            if (need[a] == 0 && !mark[alt_rule[a]]) mark[alt_rule[a]] = 1, queue[tail++] = alt_rule[a];
        while (head < tail) {
            int r = queue[head++];
            for (int k = occ_start[r]; k < occ_start[r + 1]; k++) {
                int a = occ[k];
                if (--need[a] == 0 && !mark[alt_rule[a]]) mark[alt_rule[a]] = 1, queue[tail++] = alt_rule[a];
            }
        }
    }
    free(need);
    free(alt_rule);
    free(occ_start);
    free(occ);
    free(queue);
    return rc;
}

/* Depth first over "r can start with s without reading a byte", on an
 * explicit stack: a cycle is left recursion, which would expand forever.
 * The rule it returns to, -1 when there is none, -2 out of memory. */
static int left_cycle(const clf_grammar *g, const uint8_t *nullable, uint8_t *mark) {
    typedef struct lframe {
        int r, i, at_start;
    } lframe;
    lframe *st = malloc((size_t)(g->n_rules ? g->n_rules : 1) * sizeof *st); /* a path holds each rule once */
    if (!st) return -2;
    int found = -1;
    for (int root = 0; root < g->n_rules && found < 0; root++) {
        if (mark[root]) continue;
        int n = 0;
        st[n++] = (lframe){root, g->rule_start[root], 1};
        mark[root] = 1;
        while (n && found < 0) {
            lframe *f = &st[n - 1];
            gel e = g->el[f->i];
            if (e.type == G_END) {
                mark[f->r] = 2;
                n--;
                continue;
            }
            f->i++;
            if (e.type == G_ALT) {
                f->at_start = 1;
                continue;
            }
            if (!f->at_start) continue;
            if (e.type != G_REF) {
                f->at_start = 0;
                continue;
            }
            f->at_start = nullable[e.val];
            if (mark[e.val] == 1) found = e.val;
            else if (!mark[e.val]) {
                mark[e.val] = 1;
                st[n++] = (lframe){e.val, g->rule_start[e.val], 1};
            }
        }
    }
    free(st);
    return found;
}

/* The matcher's stack depth the grammar needs along paths without
 * recursion: a reference with more of its sequence after it keeps its
 * continuation on the stack (one level), one that ends its sequence
 * replaces it (a tail call). Over the rules' strongly connected
 * components (Tarjan's, on explicit stacks), the longest such path from
 * the root to a leaf, references inside a component counted 0 (their depth
 * is the text's, met while matching). Alternatives that call a rule
 * deriving no text are never taken: not counted. -1: out of memory. */
static int static_depth(const clf_grammar *g, const uint8_t *productive) {
    int n = g->n_rules;
    int *idx = malloc((size_t)n * sizeof *idx), *low = malloc((size_t)n * sizeof *low);
    int *comp = malloc((size_t)n * sizeof *comp), *stk = malloc((size_t)n * sizeof *stk);
    int *best = malloc((size_t)n * sizeof *best), *members = malloc((size_t)n * sizeof *members);
    typedef struct tframe {
        int r, i;
    } tframe;
    tframe *call = malloc((size_t)n * sizeof *call);
    int result = -1;
    if (!idx || !low || !comp || !stk || !best || !members || !call) goto out;
    for (int r = 0; r < n; r++) idx[r] = -1, comp[r] = -1;
    int counter = 0, sp = 0, n_comp = 0;
    for (int root = 0; root < n; root++) {
        if (idx[root] >= 0) continue;
        int depth = 0;
        call[depth++] = (tframe){root, g->rule_start[root]};
        idx[root] = low[root] = counter++;
        stk[sp++] = root;
        while (depth) {
            tframe *f = &call[depth - 1];
            gel e = g->el[f->i];
            if (e.type != G_END) {
                f->i++;
                if (e.type != G_REF) continue;
                int v = e.val;
                if (idx[v] < 0) {
                    idx[v] = low[v] = counter++;
                    stk[sp++] = v;
                    call[depth++] = (tframe){v, g->rule_start[v]};
                } else if (comp[v] < 0 && idx[v] < low[f->r])
                    low[f->r] = idx[v];
                continue;
            }
            int r = f->r;
            depth--;
            if (depth && low[r] < low[call[depth - 1].r]) low[call[depth - 1].r] = low[r];
            if (low[r] != idx[r]) continue;
            /* r roots a component: its members are off the stack; every
             * component they reach is done (Tarjan's order) */
            int m = 0, v;
            do {
                v = stk[--sp];
                comp[v] = n_comp;
                members[m++] = v;
            } while (v != r);
            int b = 0;
            for (int k = 0; k < m; k++) {
                int q = members[k];
                if (!productive[q]) continue;
                int alt_ok = 1, alt_best = 0;
                for (int i = g->rule_start[q];; i++) {
                    gel x = g->el[i];
                    if (x.type == G_ALT || x.type == G_END) {
                        if (alt_ok && alt_best > b) b = alt_best;
                        alt_ok = 1, alt_best = 0;
                        if (x.type == G_END) break;
                        continue;
                    }
                    if (x.type != G_REF) continue;
                    if (!productive[x.val]) alt_ok = 0;
                    if (comp[x.val] == n_comp) continue;
                    int cont = g->el[i + 1].type != G_ALT && g->el[i + 1].type != G_END;
                    int d = cont + best[comp[x.val]];
                    if (d > alt_best) alt_best = d;
                }
            }
            best[n_comp++] = b;
        }
    }
    result = best[comp[g->root]];
out:
    free(idx);
    free(low);
    free(comp);
    free(stk);
    free(best);
    free(members);
    free(call);
    return result;
}

static int rule_len(const clf_grammar *g, int r) {
    return (r + 1 < g->n_rules ? g->rule_start[r + 1] : g->n_el) - g->rule_start[r];
}

/* Keeps chain_k only where the chain is as repeat() made it and its x
 * reads at least a byte (a byte set, or a rule that cannot match the
 * empty text: with an x that may match nothing, O_k and O_K read the same
 * texts of any length). From O_1 up (consecutive ids): O_1 ::= x | ;
 * O_k ::= x O_{k-1} | , every O_k (k >= 2) the same length. */
static void chains_check(clf_grammar *g, const uint8_t *nullable) {
    for (int r = 0; r < g->n_rules; r++) {
        int k = g->chain_k[r], ok = k > 0;
        if (!ok) continue;
        int i = g->rule_start[r], reads = 0;
        for (; g->el[i].type != G_ALT && g->el[i].type != G_END; i++)
            reads |= g->el[i].type == G_BYTES || (g->el[i].type == G_REF && !nullable[g->el[i].val]);
        ok = reads && g->el[i].type == G_ALT && g->el[i + 1].type == G_END; /* x ..., then an empty alternative */
        if (ok && k > 1) /* O_{k-1} kept, x then O_{k-1} */
            ok = g->chain_k[r - 1] == k - 1 && g->el[i - 1].type == G_REF && g->el[i - 1].val == r - 1 &&
                 (k == 2 || rule_len(g, r) == rule_len(g, r - 1));
        if (!ok) g->chain_k[r] = 0;
    }
}

static const char *shown_name(const clf_grammar *g, int r) {
    /* a generated rule shows as the first named rule that uses it */
    for (int k = 0; k < 4 && g->names[r][0] == '\x01'; k++) {
        int parent = -1;
        for (int q = 0; q < g->n_rules && parent < 0; q++)
            for (int i = g->rule_start[q]; g->el[i].type != G_END; i++)
                if (g->el[i].type == G_REF && g->el[i].val == r && q != r) {
                    parent = q;
                    break;
                }
        if (parent < 0) break;
        r = parent;
    }
    return g->names[r][0] == '\x01' ? "(a group)" : g->names[r];
}

clf_status clf_grammar_compile(const char *gbnf, size_t len, const char *root, clf_grammar **out) {
    *out = NULL;
    if (!gbnf) return clf_fail(CLF_ERR_ARG, "grammar: no text");
    if (len > GRAMMAR_MAX_TEXT)
        return clf_fail(CLF_ERR_ARG, "grammar: %zu bytes, more than %d (the bound on a grammar's text)", len,
                        GRAMMAR_MAX_TEXT);
    clf_grammar *g = calloc(1, sizeof *g);
    if (!g) return clf_fail(CLF_ERR_MEMORY, "grammar: out of host memory");
    parser ps = {.src = gbnf, .p = gbnf, .end = gbnf + len, .g = g, .any_rule = -1};
    if (!(ps.class_buf = malloc(512 * sizeof *ps.class_buf))) oom(&ps);
    space(&ps, 1);
    while (ps.st == CLF_OK && ps.p < ps.end)
        if (parse_rule(&ps)) break;
    if (ps.st == CLF_OK && g->n_rules == 0) perr(&ps, ps.p, "the grammar has no rules", "");
    for (int r = 0; ps.st == CLF_OK && r < g->n_rules; r++)
        if (!ps.defined[r]) clf_fail(ps.st = CLF_ERR_ARG, "grammar: rule '%s' is used but not defined", g->names[r]);
    /* flatten: each rule's alternatives, then END */
    int total = 0;
    for (int r = 0; r < g->n_rules; r++) total += ps.rules[r].n + 1;
    if (ps.st == CLF_OK) {
        g->el = malloc((size_t)total * sizeof *g->el);
        g->el_rule = malloc((size_t)total * sizeof *g->el_rule);
        g->rule_start = malloc((size_t)(g->n_rules ? g->n_rules : 1) * sizeof *g->rule_start);
        g->chain_k = calloc((size_t)(g->n_rules ? g->n_rules : 1), sizeof *g->chain_k);
        if (!g->el || !g->el_rule || !g->rule_start || !g->chain_k) oom(&ps);
    }
    if (ps.st == CLF_OK) {
        int k = 0;
        for (int r = 0; r < g->n_rules; r++) {
            g->rule_start[r] = k;
            if (ps.rules[r].n) memcpy(g->el + k, ps.rules[r].e, (size_t)ps.rules[r].n * sizeof *g->el);
            k += ps.rules[r].n;
            g->el[k++] = (gel){G_END, r};
            for (int i = g->rule_start[r]; i < k; i++) g->el_rule[i] = r;
        }
        if (ps.chain_k) memcpy(g->chain_k, ps.chain_k, (size_t)(ps.cap_chain < g->n_rules ? ps.cap_chain : g->n_rules) * sizeof *g->chain_k);
        g->n_el = k;
        const char *want = root ? root : "root";
        g->root = -1;
        for (int r = 0; r < g->n_rules; r++)
            if (!strcmp(g->names[r], want)) g->root = r;
        if (g->root < 0) clf_fail(ps.st = CLF_ERR_ARG, "grammar: no rule '%s' (the start rule)", want);
    }
    if (ps.st == CLF_OK) {
        uint8_t *nullable = calloc((size_t)g->n_rules, 1), *mark = calloc((size_t)g->n_rules, 1);
        if (!nullable || !mark || fixpoint(g, 1, nullable) || fixpoint(g, 0, mark)) oom(&ps);
        else if (chains_check(g, nullable), !mark[g->root])
            clf_fail(ps.st = CLF_ERR_ARG, "grammar: rule '%s' admits no text (every alternative calls a rule that never ends)",
                     g->names[g->root]);
        if (ps.st == CLF_OK) {
            /* non-recursive nesting the matcher's stack cannot hold: refused now, not mid-generation */
            int d = static_depth(g, mark);
            if (d < 0) oom(&ps);
            else if (d + 1 > GSTATE_MAX_DEPTH)
                clf_fail(ps.st = CLF_ERR_ARG, "grammar: rules nest %d deep, more than the %d levels the matcher's stack "
                         "holds (the bound on nesting)", d + 1, GSTATE_MAX_DEPTH);
        }
        if (ps.st == CLF_OK) {
            memset(mark, 0, (size_t)g->n_rules);
            int c = left_cycle(g, nullable, mark);
            if (c == -2) oom(&ps);
            else if (c >= 0)
                clf_fail(ps.st = CLF_ERR_ARG, "grammar: rule '%s' is left-recursive (it can reach itself before reading a character)",
                         shown_name(g, c));
        }
        free(nullable);
        free(mark);
    }
    for (int r = 0; r < g->n_rules; r++) free(ps.rules[r].e);
    free(ps.rules);
    free(ps.defined);
    clf_map_free(&ps.names_map);
    clf_map_free(&ps.sets_map);
    free(ps.class_buf);
    free(ps.chain_k);
    if (ps.st != CLF_OK) {
        clf_grammar_free(g);
        return ps.st;
    }
    *out = g;
    return CLF_OK;
}

void clf_grammar_free(clf_grammar *g) {
    if (!g) return;
    for (int r = 0; r < g->n_rules; r++) free(g->names[r]);
    free(g->names);
    free(g->el);
    free(g->rule_start);
    free(g->sets);
    free(g->chain_k);
    free(g->el_rule);
    free(g);
}

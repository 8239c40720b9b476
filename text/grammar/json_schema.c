/* JSON Schema -> GBNF (json_schema.h). One walk over the schema writes one
 * rule per object, array, alternation, enum, pattern and $ref target (named
 * from the path, so the grammar reads like the schema), over a fixed set of
 * primitive rules (JSON values, whitespace, formats). Written after
 * llama.cpp's common/json-schema-to-grammar.cpp (property order, the
 * integer-range rules, the format rules), in C, and exact where that one
 * is loose: enum values are filtered by type, allOf is merged keyword by
 * keyword, oneOf is refused unless its branches are provably disjoint, an
 * unsupported keyword is an error rather than dropped.
 *
 * By concern: this file is the walk, its entry and the names of rules;
 * json_schema_spell.c spells strings as GBNF, json_schema_merge.c merges
 * allOf, json_schema_regex.c compiles patterns; json_schema_impl.h is what
 * they share. Text is written into the core's clf_buf. */
#include "json_schema_impl.h"

/* ---- the converter ------------------------------------------------------- */

clf_status clf_js_bad(const char *ptr, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return clf_fail(CLF_ERR_ARG, "json schema: %s (at %s)", msg, ptr && *ptr ? ptr : "#");
}
clf_status clf_js_oom(void) { return clf_fail(CLF_ERR_MEMORY, "json schema: out of host memory"); }

/* A JSON value's canonical text (json_equal's equality: object keys
 * sorted), malloc'd: values compared through a hash, not pair by pair. */
char *clf_js_value_key(json_t *v) { return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS); }

/* Adds each element of arr to m (value_key -> 1); -1: out of memory. */
int clf_js_add_keys(clf_map *m, json_t *arr) {
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x) {
        char *k = clf_js_value_key(x);
        int bad = !k || clf_map_sets(m, k, 1);
        free(k);
        if (bad) return -1;
    }
    return 0;
}
int clf_js_has_key(const clf_map *m, json_t *v) {
    char *k = clf_js_value_key(v);
    int r = k && clf_map_gets(m, k) != NULL;
    free(k);
    return r;
}

/* Keeps j alive until the conversion ends (merged schemas). */
json_t *clf_js_own(conv *c, json_t *j) {
    if (!j) return NULL;
    if (c->n_owned == c->cap_owned) {
        int cap = c->cap_owned ? 2 * c->cap_owned : 64;
        json_t **o = realloc(c->owned, (size_t)cap * sizeof *o);
        if (!o) {
            json_decref(j);
            return NULL;
        }
        c->owned = o;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = j;
    return j;
}

/* A JSON pointer one step down: parent + "/" + key (~ and / escaped). */
static char *ptr_join(const char *parent, const char *key) {
    clf_buf b = SB_INIT;
    clf_buf_puts(&b, parent);
    clf_buf_putc(&b, '/');
    for (const char *k = key; *k; k++) {
        if (*k == '~') clf_buf_puts(&b, "~0");
        else if (*k == '/') clf_buf_puts(&b, "~1");
        else clf_buf_putc(&b, *k);
    }
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
char *clf_js_ptr_index(const char *parent, const char *key, size_t i) {
    char idx[32];
    snprintf(idx, sizeof idx, "%zu", i);
    char *p = ptr_join(parent, key);
    char *q = p ? ptr_join(p, idx) : NULL;
    free(p);
    return q;
}

/* A fresh rule name from base ([a-zA-Z0-9-], unique). */
static const char *rule_name(conv *c, const char *base) {
    char clean[72];
    size_t n = 0;
    for (const char *p = base; *p && n < 56; p++) {
        char ch = *p;
        int word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (word) clean[n++] = ch;
        else if (n > 0 && clean[n - 1] != '-') clean[n++] = '-';
    }
    while (n > 0 && clean[n - 1] == '-') n--;
    if (n == 0) clean[n++] = 'r';
    clean[n] = 0;
    if (c->n_names >= MAX_RULES) return NULL;
    char cand[96];
    snprintf(cand, sizeof cand, "%s", clean);
    if (clf_map_gets(&c->taken, cand)) { /* base-2, base-3, ...: each base goes on where it stopped */
        int64_t *next = clf_map_gets(&c->next_k, clean);
        int k = next ? (int)*next : 2;
        do snprintf(cand, sizeof cand, "%s-%d", clean, k++);
        while (clf_map_gets(&c->taken, cand));
        if (clf_map_sets(&c->next_k, clean, k)) return NULL;
    }
    if (c->n_names == c->cap_names) {
        int cap = c->cap_names ? 2 * c->cap_names : 64;
        char **nm = realloc(c->names, (size_t)cap * sizeof *nm);
        if (!nm) return NULL;
        c->names = nm;
        c->cap_names = cap;
    }
    char *s = strdup(cand);
    if (!s || clf_map_sets(&c->taken, cand, c->n_names)) {
        free(s);
        return NULL;
    }
    c->names[c->n_names++] = s;
    return s;
}

static void add_rule(conv *c, const char *name, const char *body) {
    clf_buf_puts(&c->rules, name);
    clf_buf_puts(&c->rules, " ::= ");
    clf_buf_puts(&c->rules, body);
    clf_buf_putc(&c->rules, '\n');
}

/* ---- primitive rules --------------------------------------------------------
 * space: between tokens, one space or a newline and up to 40 columns of
 * indentation (json.dumps' compact, default and indent= output to 20 levels
 * at indent 2). Bounded on purpose: with `[ \t\n]*` a model may emit
 * whitespace forever while the grammar stays satisfied, a generation that
 * never ends; with a bound every gap ends. */
static const struct {
    const char *name, *body;
    unsigned deps;
} PRIMS[P_COUNT] = {
    [P_SPACE] = {"space", "(\" \" | \"\\n\" [ \\t]{0,40})?", 0},
    [P_CHAR] = {"char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\"", 1u << P_CHAR},
    [P_INTEGRAL] = {"integral", "\"0\" | [1-9] [0-9]{0,19}", 0},
    /* 1.0 and 1.00 are integers too (JSON Schema: a number with a zero fraction) */
    [P_INTEGER] = {"integer", "\"-\"? integral (\".\" \"0\"{1,20})?", 1u << P_INTEGRAL},
    [P_NUMBER] = {"number", "\"-\"? integral (\".\" [0-9]{1,20})? ([eE] [-+]? [0-9]{1,4})?", 1u << P_INTEGRAL},
    /* for bounds of 0: numbers without a sign, zeros, and not zeros */
    [P_UNUMBER] = {"unsigned", "integral (\".\" [0-9]{1,20})? ([eE] [-+]? [0-9]{1,4})?", 1u << P_INTEGRAL},
    [P_ZERO] = {"zero", "\"0\" (\".\" \"0\"{1,20})? ([eE] [-+]? [0-9]{1,4})?", 0},
    [P_NZFRAC] = {"nonzero-fraction", NULL, 0}, /* written by nzfrac_rule */
    [P_UNONZERO] = {"nonzero",
                    "([1-9] [0-9]{0,19} (\".\" [0-9]{1,20})? | \"0.\" nonzero-fraction) ([eE] [-+]? [0-9]{1,4})?",
                    1u << P_NZFRAC},
    [P_BOOLEAN] = {"boolean", "\"true\" | \"false\"", 0},
    [P_NULL] = {"null", "\"null\"", 0},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 (1u << P_OBJECT) | (1u << P_ARRAY) | (1u << P_STRING) | (1u << P_NUMBER) | (1u << P_BOOLEAN) |
                     (1u << P_NULL)},
    [P_OBJECT] = {"object",
                  "\"{\" space (string space \":\" space value space (\",\" space string space \":\" space value "
                  "space)*)? \"}\"",
                  (1u << P_SPACE) | (1u << P_STRING) | (1u << P_VALUE)},
    [P_ARRAY] = {"array", "\"[\" space (value space (\",\" space value space)*)? \"]\"",
                 (1u << P_SPACE) | (1u << P_VALUE)},
    [P_UUID] = {"uuid",
                "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                "[0-9a-fA-F]{12} \"\\\"\"",
                0},
    /* a dot-atom local part and a host name with a top-level label of
     * letters: what mail systems take, without RFC 5321's quoted forms */
    [P_EMAIL] = {"email",
                 "\"\\\"\" [a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+ (\".\" [a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)* \"@\" "
                 "([a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])? \".\")+ [a-zA-Z]{2,63} \"\\\"\"",
                 0},
    /* the calendar exactly: days per month, 29 February of leap years */
    [P_DIV4] = {"div4", "[02468] [48] | [13579] [26] | [2468] \"0\"", 0}, /* 04..96 by 4 */
    [P_MDAY] = {"mday",
                "(\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | (\"0\" [469] | \"11\") "
                "\"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])",
                0},
    /* years 0001-9999 (Python's date, and rfc3339-validator, have no year
     * 0); leap: by 4 but not 100, or by 400 */
    [P_DATE] = {"date",
                "([0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\") \"-\" mday | "
                "([0-9]{2} div4 | div4 \"00\") \"-02-29\"",
                (1u << P_MDAY) | (1u << P_DIV4)},
    [P_TIMEPART] = {"timepart",
                    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,20})? ([zZ] | [-+] "
                    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])",
                    0},
    [P_TIME] = {"time", "\"\\\"\" timepart \"\\\"\"", 1u << P_TIMEPART},
    [P_DATETIME] = {"date-time", "\"\\\"\" date [tT] timepart \"\\\"\"", (1u << P_DATE) | (1u << P_TIMEPART)},
};

const char *clf_js_prim(conv *c, int p) {
    if (!(c->prims & (1u << p))) {
        c->prims |= 1u << p;
        if (p == P_NZFRAC) { /* up to 20 fraction digits, one of them not 0 */
            clf_buf b = SB_INIT;
            for (int k = 0; k < FRAC_DIGITS; k++) {
                if (k) clf_buf_puts(&b, " | ");
                if (k) clf_buf_printf(&b, "\"0\"{%d} ", k);
                clf_buf_puts(&b, "[1-9]");
                if (FRAC_DIGITS - 1 - k > 0) clf_buf_printf(&b, " [0-9]{0,%d}", FRAC_DIGITS - 1 - k);
            }
            add_rule(c, PRIMS[p].name, clf_buf_str(&b));
            if (b.failed) c->rules.failed = 1;
            free(b.p);
        } else {
            add_rule(c, PRIMS[p].name, PRIMS[p].body);
        }
        for (int d = 0; d < P_COUNT; d++)
            if (PRIMS[p].deps & (1u << d)) clf_js_prim(c, d);
    }
    return PRIMS[p].name;
}

/* ---- keywords ------------------------------------------------------------ */

int clf_js_in_list(const char *k, const char *const *list) {
    for (; *list; list++)
        if (strcmp(k, *list) == 0) return 1;
    return 0;
}
/* Annotations and containers: no assertion, nothing to enforce. */
static const char *const IGNORED[] = {"title", "description", "$schema", "$id", "$comment", "examples", "default",
                                      "deprecated", "readOnly", "writeOnly", "$anchor", "$vocabulary",
                                      "contentMediaType", "contentEncoding", "contentSchema", "$defs",
                                      "definitions", NULL};
/* Assertions this converter cannot turn into grammar. */
static const char *const REFUSED[] = {"not", "if", "then", "else", "dependentRequired", "dependentSchemas",
                                      "dependencies", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contains",
                                      "minContains", "maxContains", "additionalItems", "$dynamicRef",
                                      "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", NULL};
/* Assertions it enforces. Any other keyword is an annotation (JSON Schema:
 * an unknown keyword asserts nothing), ignored as validators ignore it. */
static const char *const HANDLED[] = {"type", "enum", "const", "properties", "required", "additionalProperties",
                                      "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "anyOf",
                                      "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
                                      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                      "multipleOf", "minProperties", "maxProperties", "patternProperties", NULL};

int clf_js_asserts(const char *k) { return !clf_js_in_list(k, IGNORED) && (clf_js_in_list(k, HANDLED) || clf_js_in_list(k, REFUSED)); }

clf_status clf_js_check_refused(json_t *s, const char *ptr) {
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (clf_js_in_list(k, REFUSED)) return clf_js_bad(ptr, "keyword \"%s\" is not supported", k);
    }
    return CLF_OK;
}

const char *const clf_js_type_names[7] = {"null", "boolean", "object", "array", "number", "string", "integer"};

static int type_bit(const char *name) {
    for (int i = 0; i < 7; i++)
        if (strcmp(name, clf_js_type_names[i]) == 0) return 1 << i;
    return 0;
}
/* The types `type` allows (T_ALL without it); integer is within number. */
clf_status clf_js_type_mask(json_t *s, const char *ptr, int *mask) {
    json_t *t = json_object_get(s, "type");
    *mask = T_ALL;
    if (!t) return CLF_OK;
    if (json_is_string(t)) {
        *mask = type_bit(json_string_value(t));
        if (!*mask) return clf_js_bad(ptr, "type \"%s\" is not a JSON Schema type", json_string_value(t));
        return CLF_OK;
    }
    if (!json_is_array(t)) return clf_js_bad(ptr, "\"type\" must be a string or an array of strings");
    *mask = 0;
    size_t i;
    json_t *e;
    json_array_foreach(t, i, e) {
        int b = json_is_string(e) ? type_bit(json_string_value(e)) : 0;
        if (!b) return clf_js_bad(ptr, "\"type\"[%zu] is not a JSON Schema type", i);
        *mask |= b;
    }
    return CLF_OK;
}
static int value_type(json_t *v) {
    switch (json_typeof(v)) {
    case JSON_NULL: return T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOLEAN;
    case JSON_OBJECT: return T_OBJECT;
    case JSON_ARRAY: return T_ARRAY;
    case JSON_STRING: return T_STRING;
    case JSON_INTEGER: return T_INTEGER | T_NUMBER;
    case JSON_REAL: {
        double x = json_real_value(v);
        return x == floor(x) ? T_INTEGER | T_NUMBER : T_NUMBER;
    }
    }
    return 0;
}

/* ---- $ref ---------------------------------------------------------------- */

clf_status clf_js_resolve(conv *c, const char *ref, const char *ptr, json_t **out) {
    if (ref[0] != '#') return clf_js_bad(ptr, "$ref \"%s\": only local references (#/$defs/..., #/definitions/...)", ref);
    json_t *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') return clf_js_bad(ptr, "$ref \"%s\": anchors are not supported, only JSON pointers", ref);
    while (*p == '/') {
        p++;
        char key[512];
        size_t n = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~' && (*p == '0' || *p == '1')) ch = *p++ == '0' ? '~' : '/';
            else if (ch == '%' && p[0] && p[1]) {
                char hex[3] = {p[0], p[1], 0};
                char *end;
                long v = strtol(hex, &end, 16);
                if (*end == 0 && v > 0) {
                    ch = (char)v;
                    p += 2;
                }
            }
            if (n + 1 >= sizeof key) return clf_js_bad(ptr, "$ref \"%s\": a step longer than 511 bytes", ref);
            key[n++] = ch;
        }
        key[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, key);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long idx = strtoul(key, &end, 10);
            cur = *key && *end == 0 ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur) return clf_js_bad(ptr, "$ref \"%s\": nothing there", ref);
    }
    *out = cur;
    return CLF_OK;
}

/* ---- visiting ------------------------------------------------------------ */

static clf_status visit(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty);

static clf_status visit_ref(conv *c, const char *ref, const char *ptr, clf_buf *out, int *empty) {
    int64_t *seen = clf_map_gets(&c->ref_index, ref);
    if (seen) {
        ref_memo *m = &c->refs[*seen];
        if (m->state == 1) {
            if (m->nest == c->nest)
                return clf_js_bad(ptr, "$ref \"%s\" refers to itself before any object or array opens (left recursion)",
                           ref);
            m->used_early = 1;
            clf_buf_puts(out, m->name);
            return CLF_OK;
        }
        if (m->empty) *empty = 1;
        else clf_buf_puts(out, m->name);
        return CLF_OK;
    }
    json_t *target;
    CLF_TRY(clf_js_resolve(c, ref, ptr, &target));
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? 2 * c->cap_refs : 16;
        ref_memo *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) return clf_js_oom();
        c->refs = r;
        c->cap_refs = cap;
    }
    const char *last = strrchr(ref, '/');
    char base[80];
    snprintf(base, sizeof base, "%s", strcmp(ref, "#") == 0 ? "top" : last ? last + 1 : ref);
    const char *name = rule_name(c, base);
    char *dup = strdup(ref);
    if (!name || !dup) {
        free(dup);
        return name ? clf_js_oom() : clf_js_bad(ptr, "the grammar needs more than %d rules", MAX_RULES);
    }
    if (clf_map_sets(&c->ref_index, ref, c->n_refs)) {
        free(dup);
        return clf_js_oom();
    }
    int me = c->n_refs++;
    c->refs[me] = (ref_memo){.ref = dup, .name = (char *)name, .state = 1, .nest = c->nest};
    clf_buf body = SB_INIT;
    int e = 0;
    int saved_nest = c->nest;
    clf_status st = visit(c, target, name, ref, &body, &e);
    c->nest = saved_nest;
    ref_memo *m = &c->refs[me];
    m->state = 2;
    if (st == CLF_OK && e) {
        m->empty = 1;
        if (m->used_early) st = clf_js_bad(ref, "this schema admits no value, yet a schema within it refers to it");
        *empty = 1;
    } else if (st == CLF_OK) {
        add_rule(c, name, clf_buf_str(&body));
        clf_buf_puts(out, name);
    }
    if (body.failed) st = clf_js_oom();
    free(body.p);
    return st;
}

/* A rule holding body, named from base; its name goes to out. */
clf_status clf_js_emit_rule(conv *c, const char *base, const char *body, clf_buf *out) {
    const char *name = rule_name(c, base);
    if (!name) return clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    add_rule(c, name, body);
    clf_buf_puts(out, name);
    return CLF_OK;
}

static char *sub_name(const char *name, const char *what) {
    clf_buf b = SB_INIT;
    clf_buf_puts(&b, name);
    clf_buf_putc(&b, '-');
    clf_buf_puts(&b, what);
    return b.p;
}

/* ---- enum and const ------------------------------------------------------- */

/* A double as Python's repr writes it: the shortest digits that read back,
 * fixed notation for exponents -4..15 (always with a fraction), else d.ddde+XX. */
static void py_repr(double x, char *buf, size_t cap) {
    char t[40];
    int p;
    for (p = 1; p < 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, x);
        if (strtod(t, NULL) == x) break;
    }
    snprintf(t, sizeof t, "%.*e", p - 1, x);
    const char *q = t;
    int neg = *q == '-';
    if (neg) q++;
    char digits[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int e = atoi(q + 1);
    clf_buf b = SB_INIT;
    if (neg) clf_buf_putc(&b, '-');
    if (e >= -4 && e < 16) {
        if (e < 0) {
            clf_buf_puts(&b, "0.");
            for (int i = 0; i < -e - 1; i++) clf_buf_putc(&b, '0');
            clf_buf_puts(&b, digits);
        } else {
            for (int i = 0; i <= e; i++) clf_buf_putc(&b, i < nd ? digits[i] : '0');
            clf_buf_putc(&b, '.');
            if (nd > e + 1) clf_buf_puts(&b, digits + e + 1);
            else clf_buf_putc(&b, '0');
        }
    } else {
        clf_buf_putc(&b, digits[0]);
        if (nd > 1) {
            clf_buf_putc(&b, '.');
            clf_buf_puts(&b, digits + 1);
        }
        clf_buf_printf(&b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    snprintf(buf, cap, "%s", clf_buf_str(&b));
    free(b.p);
}

/* A JSON value as GBNF: its tokens, space between them; object members in
 * the value's order; a whole number also as N.0 (Python: 1 == 1.0). */
static void value_lit(conv *c, json_t *v, clf_buf *o) {
    char num[64];
    switch (json_typeof(v)) {
    case JSON_NULL: clf_buf_puts(o, "\"null\""); break;
    case JSON_TRUE: clf_buf_puts(o, "\"true\""); break;
    case JSON_FALSE: clf_buf_puts(o, "\"false\""); break;
    case JSON_STRING: clf_js_spell_string(o, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: /* 0: -0 too, the same value */
        clf_buf_printf(o, "(%s\"%lld\" (\".\" \"0\"{1,20})?)", json_integer_value(v) ? "" : "\"-\"? ",
                       (long long)json_integer_value(v));
        break;
    case JSON_REAL: {
        double x = json_real_value(v);
        py_repr(x, num, sizeof num);
        if (x == 0) clf_buf_puts(o, "(\"-\"? \"0\" (\".\" \"0\"{1,20})?)");
        else if (x == floor(x) && fabs(x) < 1e16) clf_buf_printf(o, "(\"%.0f\" (\".\" \"0\"{1,20})?)", x);
        else clf_buf_printf(o, "\"%s\"", num);
        break;
    }
    case JSON_ARRAY: {
        clf_buf_printf(o, "\"[\" %s", clf_js_prim(c, P_SPACE));
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i) clf_buf_puts(o, " \",\" space");
            clf_buf_putc(o, ' ');
            value_lit(c, e, o);
            clf_buf_puts(o, " space");
        }
        clf_buf_puts(o, " \"]\"");
        break;
    }
    case JSON_OBJECT: {
        clf_buf_printf(o, "\"{\" %s", clf_js_prim(c, P_SPACE));
        const char *k;
        json_t *e;
        int first = 1;
        json_object_foreach(v, k, e) {
            if (!first) clf_buf_puts(o, " \",\" space");
            first = 0;
            clf_buf_putc(o, ' ');
            clf_js_spell_string(o, k, strlen(k));
            clf_buf_puts(o, " space \":\" space ");
            value_lit(c, e, o);
            clf_buf_puts(o, " space");
        }
        clf_buf_puts(o, " \"}\"");
        break;
    }
    }
}

static void sort_unique(const char **names, int *n);
static clf_status trie_alts(conv *c, const char *name, const char *ptr, const char **s, int n, const char *end,
                            clf_buf *out);

static clf_status visit_enum(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    json_t *vals = json_object_get(s, "enum"), *cst = json_object_get(s, "const");
    if (vals && cst) return clf_js_bad(ptr, "\"enum\" with \"const\" is not supported");
    if (vals && !json_is_array(vals)) return clf_js_bad(ptr, "\"enum\" must be an array");
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (clf_js_asserts(k) && strcmp(k, "enum") && strcmp(k, "const") && strcmp(k, "type"))
            return clf_js_bad(ptr, "\"%s\" beside \"%s\" is not supported (only \"type\" may join it)", k,
                       vals ? "enum" : "const");
    }
    int mask;
    CLF_TRY(clf_js_type_mask(s, ptr, &mask));
    if (mask & T_NUMBER) mask |= T_INTEGER;
    clf_buf body = SB_INIT;
    int n = 0;
    size_t count = vals ? json_array_size(vals) : 1;
    /* many strings or integers: a trie each (an alternation of thousands
     * would be as many ways to read the text at once, past the matcher's
     * bound); the rest, and a short enum, one alternative per value */
    const int wide = count > ENUM_TRIE;
    const char **strs = wide ? malloc(count * sizeof *strs) : NULL, **ints = wide ? malloc(count * sizeof *ints) : NULL;
    char *digits = wide ? malloc(count * 24) : NULL;
    int n_strs = 0, n_ints = 0;
    clf_status st = wide && (!strs || !ints || !digits) ? clf_js_oom() : CLF_OK;
    for (size_t i = 0; i < count && st == CLF_OK; i++) {
        json_t *e = vals ? json_array_get(vals, i) : cst;
        int t = value_type(e);
        if (!(t & mask)) continue;
        if (wide && json_is_string(e) && strlen(json_string_value(e)) == json_string_length(e)) { /* no NUL inside */
            strs[n_strs++] = json_string_value(e);
            continue;
        }
        if (wide && json_number_value(e) != 0 && /* 0 below, with its "-0" */
            (json_is_integer(e) || (json_is_real(e) && t & T_INTEGER && fabs(json_real_value(e)) < 1e16))) {
            char *d = digits + 24 * (size_t)n_ints;
            if (json_is_integer(e)) snprintf(d, 24, "%lld", (long long)json_integer_value(e));
            else snprintf(d, 24, "%.0f", json_real_value(e));
            ints[n_ints++] = d;
            continue;
        }
        if (n++) clf_buf_puts(&body, " | ");
        value_lit(c, e, &body);
    }
    if (st == CLF_OK && n > MAX_BRANCH)
        st = clf_js_bad(ptr, "an enum of more than %d values that are neither strings nor integers (the grammar matcher "
                      "reads at most %d ways at once)", MAX_BRANCH, MAX_BRANCH);
    if (st == CLF_OK && n_strs) {
        sort_unique(strs, &n_strs);
        if (n++) clf_buf_puts(&body, " | ");
        clf_buf_puts(&body, "\"\\\"\" ");
        char *tn = sub_name(name, "str");
        st = tn ? trie_alts(c, tn, ptr, strs, n_strs, "\"\\\"\"", &body) : clf_js_oom();
        free(tn);
    }
    if (st == CLF_OK && n_ints) {
        sort_unique(ints, &n_ints);
        if (n++) clf_buf_puts(&body, " | ");
        char *tn = sub_name(name, "int");
        st = tn ? trie_alts(c, tn, ptr, ints, n_ints, "(\".\" \"0\"{1,20})?", &body) : clf_js_oom();
        free(tn);
    }
    free(strs);
    free(ints);
    free(digits);
    if (st != CLF_OK) {
    } else if (n == 0) *empty = 1;
    else if (body.failed) st = clf_js_oom();
    else st = clf_js_emit_rule(c, name, clf_buf_str(&body), out);
    free(body.p);
    return st;
}

/* ---- integers in a range -------------------------------------------------- */

static const char *const NUMBER_BOUNDS[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", NULL};

static void digit_class(clf_buf *o, int lo, int hi) {
    if (lo == hi) clf_buf_printf(o, "[%c]", lo);
    else clf_buf_printf(o, "[%c-%c]", lo, hi);
}
static void any_digits(clf_buf *o, int n) {
    if (n == 1) clf_buf_puts(o, "[0-9]");
    else if (n > 1) clf_buf_printf(o, "[0-9]{%d}", n);
}
static int all_of_digit(const char *s, int n, char d) {
    for (int i = 0; i < n; i++)
        if (s[i] != d) return 0;
    return 1;
}
/* The digit strings of length L from a to b (a <= b), exactly. */
static void range_same(clf_buf *o, const char *a, const char *b, int L) {
    int i = 0;
    while (i < L && a[i] == b[i]) i++;
    if (i > 0) {
        clf_buf_putc(o, '"');
        clf_buf_add(o, a, (size_t)i);
        clf_buf_putc(o, '"');
    }
    if (i == L) return;
    if (i > 0) clf_buf_putc(o, ' ');
    int rest = L - i - 1;
    if (rest == 0) {
        digit_class(o, a[i], b[i]);
        return;
    }
    int a0 = all_of_digit(a + i + 1, rest, '0'), b9 = all_of_digit(b + i + 1, rest, '9');
    if (a0 && b9) {
        digit_class(o, a[i], b[i]);
        clf_buf_putc(o, ' ');
        any_digits(o, rest);
        return;
    }
    char nines[INT_DIGITS + 1], zeros[INT_DIGITS + 1];
    memset(nines, '9', (size_t)rest);
    memset(zeros, '0', (size_t)rest);
    int lo = a[i], hi = b[i], alt = 0;
    clf_buf_putc(o, '(');
    if (!a0) {
        digit_class(o, a[i], a[i]);
        clf_buf_puts(o, " (");
        range_same(o, a + i + 1, nines, rest);
        clf_buf_putc(o, ')');
        lo++;
        alt = 1;
    }
    if (!b9) hi--;
    if (lo <= hi) {
        if (alt) clf_buf_puts(o, " | ");
        digit_class(o, lo, hi);
        clf_buf_putc(o, ' ');
        any_digits(o, rest);
        alt = 1;
    }
    if (!b9) {
        if (alt) clf_buf_puts(o, " | ");
        digit_class(o, b[i], b[i]);
        clf_buf_puts(o, " (");
        range_same(o, zeros, b + i + 1, rest);
        clf_buf_putc(o, ')');
    }
    clf_buf_putc(o, ')');
}
/* Decimal strings without leading zeros from lo to hi (lo <= hi). */
static void range_dec(clf_buf *o, const char *lo, const char *hi) {
    int la = (int)strlen(lo), lb = (int)strlen(hi);
    for (int L = la; L <= lb; L++) {
        char a[INT_DIGITS + 1], b[INT_DIGITS + 1];
        if (L == la) memcpy(a, lo, (size_t)L);
        else {
            memset(a, '0', (size_t)L);
            a[0] = '1';
        }
        if (L == lb) memcpy(b, hi, (size_t)L);
        else memset(b, '9', (size_t)L);
        if (L > la) clf_buf_puts(o, " | ");
        range_same(o, a, b, L);
    }
}

/* A bound as an int64 (ceil for a lower one, floor for an upper one;
 * exclusive moves it by one). *set: whether there is one. */
static clf_status int_bound(json_t *s, const char *key, const char *ptr, int upper, int exclusive, int *set,
                            int64_t *v) {
    json_t *b = json_object_get(s, key);
    if (!b) return CLF_OK;
    if (!json_is_number(b)) return clf_js_bad(ptr, "\"%s\" must be a number", key);
    double x = json_number_value(b);
    if (fabs(x) > 1e18) return clf_js_bad(ptr, "\"%s\" %g: integer bounds beyond +-1e18 are not supported", key, x);
    int64_t r;
    if (json_is_integer(b)) {
        r = json_integer_value(b);
    } else {
        double f = upper ? floor(x) : ceil(x);
        r = (int64_t)f;
        if (exclusive && f != x) exclusive = 0; /* 2.5 exclusive: 3 is already above it */
    }
    if (exclusive) r += upper ? -1 : 1;
    if (!*set || (upper ? r < *v : r > *v)) *v = r;
    *set = 1;
    return CLF_OK;
}

/* ---- numbers in a range ---------------------------------------------------- */

/* Bounds on a number other than a lone 0 are held exactly over a documented
 * spelling: no exponent and at most NUM_FRAC fraction digits (`-`? integral
 * (`.` digits)?), so the grammar compares decimals digit by digit. Every
 * text it admits validates: a decimal d <= b (or >= b) rounds to a double
 * on the same side of b's double (rounding is monotonic), and d < b stays
 * strict after rounding because bound_dec refuses an exclusive bound whose
 * double's ulp comes near the 10^-NUM_FRAC spacing of the admitted texts. */
#define NUM_FRAC 6
#define NUM_MAX 1e15 /* |bound| below this: its integral part fits an int64 */

typedef struct {
    int set, neg, excl;
    char ip[24];           /* integral digits, no leading zero ("0" for none) */
    char fp[NUM_FRAC + 1]; /* fraction digits, no trailing zero */
} num_bound;

/* x as a decimal: the shortest %e spelling that reads back as x, written out
 * without the exponent. Refused by name beyond NUM_MAX or NUM_FRAC decimals. */
static clf_status bound_dec(double x, const char *key, const char *ptr, num_bound *d) {
    if (!(fabs(x) < NUM_MAX))
        return clf_js_bad(ptr, "\"%s\" %g on a number: bounds of magnitude 1e15 or more are not supported", key, x);
    char e[40], dig[24];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    int nd = 0;
    const char *q = e;
    if (*q == '-') q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') dig[nd++] = *q;
    int ex = atoi(q + 1);
    memset(d->ip, 0, sizeof d->ip);
    memset(d->fp, 0, sizeof d->fp);
    char fr[64] = {0};
    if (ex >= 0) {
        for (int i = 0; i <= ex; i++) d->ip[i] = i < nd ? dig[i] : '0';
        for (int i = ex + 1; i < nd; i++) fr[i - ex - 1] = dig[i];
    } else {
        d->ip[0] = '0';
        int z = -ex - 1;
        if (z + nd > (int)sizeof fr - 1) z = (int)sizeof fr - 1 - nd;
        memset(fr, '0', (size_t)z);
        memcpy(fr + z, dig, (size_t)nd);
    }
    int lf = (int)strlen(fr);
    while (lf > 0 && fr[lf - 1] == '0') fr[--lf] = 0;
    if (lf > NUM_FRAC)
        return clf_js_bad(ptr, "\"%s\" %g on a number: at most %d decimals are supported", key, x, NUM_FRAC);
    memcpy(d->fp, fr, (size_t)lf);
    d->neg = x < 0;
    d->excl = key[0] == 'e';
    if (d->excl && 2 * (nextafter(fabs(x), INFINITY) - fabs(x)) >= 1e-6) /* 1e-6: 10^-NUM_FRAC */
        return clf_js_bad(ptr, "\"%s\" %g on a number: an exclusive bound of magnitude 2^32 or more is not supported",
                          key, x);
    d->set = 1;
    return CLF_OK;
}

/* Magnitudes compared (integral then fraction digits). */
static int mag_cmp(const char *ia, const char *fa, const char *ib, const char *fb) {
    size_t la = strlen(ia), lb = strlen(ib);
    if (la != lb) return la < lb ? -1 : 1;
    int c = strcmp(ia, ib);
    if (c) return c < 0 ? -1 : 1;
    size_t na = strlen(fa), nb = strlen(fb);
    for (size_t i = 0; i < na || i < nb; i++) { /* fractions padded with zeros */
        char x = i < na ? fa[i] : '0', y = i < nb ? fb[i] : '0';
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}
static int is_zero(const num_bound *b) { return strcmp(b->ip, "0") == 0 && !b->fp[0]; }
/* Signed values compared. */
static int num_cmp(const num_bound *a, const num_bound *b) {
    if (a->neg != b->neg) return a->neg ? -1 : 1;
    int c = mag_cmp(a->ip, a->fp, b->ip, b->fp);
    return a->neg ? -c : c;
}

static int digits_zero(const char *s) {
    for (; *s; s++)
        if (*s != '0') return 0;
    return 1;
}
/* Fraction digit strings s, 1..r long, with 0.s >= 0.a (> when ea) and,
 * b not NULL, 0.s <= 0.b (< when eb): alternatives into o, 1 when there is
 * one. *e: whether the empty string (the value 0) satisfies both. */
static int frac_alts(clf_buf *o, const char *a, int ea, const char *b, int eb, int r, int *e) {
    *e = (digits_zero(a) && !ea) && (!b || !digits_zero(b) || !eb);
    if (r == 0) return 0;
    if (digits_zero(a) && !ea && !b) {
        if (r == 1) clf_buf_puts(o, "[0-9]");
        else clf_buf_printf(o, "[0-9]{1,%d}", r);
        return 1;
    }
    int n = 0, run = -1; /* run: the first digit of the current run of free digits */
    char a0 = *a ? *a : '0', b0 = b && *b ? *b : '0';
    const char *an = *a ? a + 1 : a, *bn = b && *b ? b + 1 : b;
    for (int d = '0'; d <= '9' + 1; d++) {
        int lo = 2, hi = 2; /* 2 free, 1 follows the bound, 0 dead */
        if (d <= '9') {
            if (!(digits_zero(a) && !ea)) lo = d > a0 ? 2 : d == a0 ? 1 : 0;
            if (b) hi = d < b0 ? 2 : d == b0 ? 1 : 0;
        }
        int free_d = d <= '9' && lo == 2 && hi == 2;
        if (free_d && run < 0) run = d;
        if (!free_d && run >= 0) { /* close the run [run, d) */
            if (n++) clf_buf_puts(o, " | ");
            digit_class(o, run, d - 1);
            if (r > 1) clf_buf_printf(o, " [0-9]{0,%d}", r - 1);
            run = -1;
        }
        if (d > '9' || !lo || !hi || free_d) continue;
        clf_buf sub = SB_INIT;
        int se = 0;
        int sx = frac_alts(&sub, lo == 1 ? an : "", lo == 1 ? ea : 0, hi == 1 ? bn : NULL, eb, r - 1, &se);
        if (sx || se) {
            if (n++) clf_buf_puts(o, " | ");
            clf_buf_printf(o, "\"%c\"", d);
            if (sx) clf_buf_printf(o, se ? " (%s)?" : " (%s)", clf_buf_str(&sub));
        }
        if (sub.failed) o->failed = 1;
        free(sub.p);
    }
    return n > 0;
}
/* The fraction text (".", digits; or none) for frac_alts' bounds, appended
 * after a space; 0 when no fraction text satisfies them. */
static int frac_text(clf_buf *o, const char *a, int ea, const char *b, int eb) {
    clf_buf x = SB_INIT;
    int e = 0, nx = frac_alts(&x, a, ea, b, eb, NUM_FRAC, &e);
    if (nx) clf_buf_printf(o, e ? " (\".\" (%s))?" : " \".\" (%s)", clf_buf_str(&x));
    if (x.failed) o->failed = 1;
    free(x.p);
    return nx || e;
}
/* Magnitudes m (no sign) with m >= lo (> when lo->excl) and, hi->set, m <= hi
 * (< when hi->excl): alternatives appended to o; the count of them. */
static int mag_alts(clf_buf *o, const num_bound *lo, const num_bound *hi) {
    if (hi->set) {
        int c = mag_cmp(lo->ip, lo->fp, hi->ip, hi->fp);
        if (c > 0 || (c == 0 && (lo->excl || hi->excl))) return 0;
    }
    int n = 0;
    clf_buf t = SB_INIT;
    if (hi->set && strcmp(lo->ip, hi->ip) == 0) { /* one integral part */
        clf_buf_printf(&t, "\"%s\"", lo->ip);
        if (frac_text(&t, lo->fp, lo->excl, hi->fp, hi->excl)) {
            clf_buf_puts(o, clf_buf_str(&t));
            n++;
        }
        free(t.p);
        return n;
    }
    clf_buf_printf(&t, "\"%s\"", lo->ip); /* lo's integral part: the fraction at least lo's */
    if (frac_text(&t, lo->fp, lo->excl, NULL, 0)) {
        clf_buf_puts(o, clf_buf_str(&t));
        n++;
    }
    free(t.p);
    long long il = atoll(lo->ip), ih = hi->set ? atoll(hi->ip) : 0;
    if (!hi->set || il + 1 <= ih - 1) { /* the integral parts between: any fraction */
        char a[32], b[32];
        snprintf(a, sizeof a, "%lld", il + 1);
        if (hi->set) snprintf(b, sizeof b, "%lld", ih - 1);
        else {
            memset(b, '9', INT_DIGITS);
            b[INT_DIGITS] = 0;
        }
        if (n++) clf_buf_puts(o, " | ");
        clf_buf_puts(o, "(");
        range_dec(o, a, b);
        clf_buf_printf(o, ") (\".\" [0-9]{1,%d})?", NUM_FRAC);
    }
    if (hi->set) { /* hi's integral part: the fraction at most hi's */
        t = (clf_buf)SB_INIT;
        clf_buf_printf(&t, "\"%s\"", hi->ip);
        if (frac_text(&t, "", 0, hi->fp, hi->excl)) {
            if (n++) clf_buf_puts(o, " | ");
            clf_buf_puts(o, clf_buf_str(&t));
        }
        free(t.p);
    }
    return n;
}

/* A number between bounds (json_schema.h's spelling above): "-" and a
 * magnitude for the values below 0 (and -0 where 0 is in range), a magnitude
 * for those at or above it. */
static clf_status number_range(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    num_bound lo = {0}, hi = {0};
    for (int i = 0; NUMBER_BOUNDS[i]; i++) {
        json_t *j = json_object_get(s, NUMBER_BOUNDS[i]);
        if (!j) continue;
        num_bound b;
        CLF_TRY(bound_dec(json_number_value(j), NUMBER_BOUNDS[i], ptr, &b));
        num_bound *cur = i < 2 ? &lo : &hi;
        int cmp = cur->set ? num_cmp(&b, cur) : 0;
        /* the tighter bound; at a tie the exclusive one */
        if (!cur->set || (i < 2 ? cmp > 0 : cmp < 0) || (cmp == 0 && b.excl)) *cur = b;
    }
    if (lo.set && is_zero(&lo)) lo.neg = 0;
    if (hi.set && is_zero(&hi)) hi.neg = 0;
    clf_buf body = SB_INIT;
    int n = 0;
    num_bound zero = {.set = 1, .ip = "0"}, none = {0};
    /* below 0 (and -0): "-" m, m in [max(0, -hi), -lo] */
    if (!lo.set || lo.neg || is_zero(&lo)) {
        num_bound mlo = hi.set && (hi.neg || is_zero(&hi)) ? hi : zero, mhi = lo.set ? lo : none;
        if (!(hi.set && (hi.neg || is_zero(&hi)))) mlo.excl = 0;
        clf_buf m = SB_INIT;
        if (mag_alts(&m, &mlo, &mhi)) {
            clf_buf_printf(&body, "\"-\" (%s)", clf_buf_str(&m));
            n++;
        }
        if (m.failed) body.failed = 1;
        free(m.p);
    }
    /* at or above 0: m in [max(0, lo), hi] */
    if (!hi.set || !hi.neg) {
        num_bound mlo = lo.set && !lo.neg ? lo : zero;
        clf_buf m = SB_INIT;
        if (mag_alts(&m, &mlo, &hi)) {
            if (n++) clf_buf_puts(&body, " | ");
            clf_buf_puts(&body, clf_buf_str(&m));
        }
        if (m.failed) body.failed = 1;
        free(m.p);
    }
    clf_status st = CLF_OK;
    if (body.failed) st = clf_js_oom();
    else if (!n) *empty = 1;
    else st = clf_js_emit_rule(c, name, clf_buf_str(&body), out);
    free(body.p);
    return st;
}

/* A number's bounds. A lone bound of 0 (x >= 0, x > 0, x <= 0, x < 0) in
 * any spelling: the sign and whether the digits are all zeros decide it,
 * exponent or not. Any other bounds: number_range. */
static clf_status visit_number(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    const char *lower = NULL, *upper = NULL;
    int nonzero = 0;
    for (int i = 0; NUMBER_BOUNDS[i]; i++) {
        json_t *b = json_object_get(s, NUMBER_BOUNDS[i]);
        if (!b) continue;
        if (!json_is_number(b)) return clf_js_bad(ptr, "\"%s\" must be a number", NUMBER_BOUNDS[i]);
        nonzero |= json_number_value(b) != 0;
        if (i < 2) lower = NUMBER_BOUNDS[i];
        else upper = NUMBER_BOUNDS[i];
    }
    if (json_object_get(s, "multipleOf"))
        return clf_js_bad(ptr, "\"multipleOf\" on a number (not an integer) is not supported");
    /* bounds of 0: exact in every spelling (below; of two on a side the
     * exclusive one, listed last, is the tighter); others: number_range's */
    if (nonzero) return number_range(c, s, name, ptr, out, empty);
    if (!lower && !upper) {
        clf_buf_puts(out, clf_js_prim(c, P_NUMBER));
        return CLF_OK;
    }
    if (lower && upper) {
        if (lower[0] == 'e' || upper[0] == 'e') *empty = 1; /* 0 <= x <= 0: zeros; an exclusive side: nothing */
        else clf_buf_printf(out, "(\"-\"? %s)", clf_js_prim(c, P_ZERO));
        return CLF_OK;
    }
    if (lower && lower[0] == 'm') clf_buf_printf(out, "(%s | \"-\" %s)", clf_js_prim(c, P_UNUMBER), clf_js_prim(c, P_ZERO));
    else if (lower) clf_buf_puts(out, clf_js_prim(c, P_UNONZERO));
    else if (upper[0] == 'm') clf_buf_printf(out, "(\"-\" %s | %s)", clf_js_prim(c, P_UNUMBER), clf_js_prim(c, P_ZERO));
    else clf_buf_printf(out, "\"-\" %s", clf_js_prim(c, P_UNONZERO));
    return CLF_OK;
}

static clf_status int_multiple(conv *c, json_t *s, const char *name, const char *ptr, int64_t k, clf_buf *out,
                               int *empty);

static clf_status visit_integer(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    int has_lo = 0, has_hi = 0;
    int64_t lo = 0, hi = 0;
    json_t *mo = json_object_get(s, "multipleOf");
    if (mo) { /* a whole divisor; 1 asserts nothing on an integer */
        double k = json_is_number(mo) ? json_number_value(mo) : 0;
        if (!(k > 0)) return clf_js_bad(ptr, "\"multipleOf\" must be a number above 0");
        if (k != floor(k) || k > 1e15)
            return clf_js_bad(ptr, "\"multipleOf\" %g on an integer: only whole divisors below 1e15 are supported", k);
        if (k > 1) return int_multiple(c, s, name, ptr, (int64_t)k, out, empty);
    }
    CLF_TRY(int_bound(s, "minimum", ptr, 0, 0, &has_lo, &lo));
    CLF_TRY(int_bound(s, "exclusiveMinimum", ptr, 0, 1, &has_lo, &lo));
    CLF_TRY(int_bound(s, "maximum", ptr, 1, 0, &has_hi, &hi));
    CLF_TRY(int_bound(s, "exclusiveMaximum", ptr, 1, 1, &has_hi, &hi));
    if (!has_lo && !has_hi) {
        clf_buf_puts(out, clf_js_prim(c, P_INTEGER));
        return CLF_OK;
    }
    if (has_lo && has_hi && lo > hi) {
        *empty = 1;
        return CLF_OK;
    }
    char nines[INT_DIGITS + 1];
    memset(nines, '9', INT_DIGITS);
    nines[INT_DIGITS] = 0;
    clf_buf b = SB_INIT;
    int alt = 0;
    clf_buf_putc(&b, '(');
    if (!has_lo || lo < 0) { /* negatives: "-" and a magnitude */
        char m1[32], m2[32];
        snprintf(m1, sizeof m1, "%llu", has_hi && hi < 0 ? (unsigned long long)(-(hi + 1)) + 1 : 1ull);
        if (has_lo) snprintf(m2, sizeof m2, "%llu", (unsigned long long)(-(lo + 1)) + 1);
        else snprintf(m2, sizeof m2, "%s", nines);
        clf_buf_puts(&b, "\"-\" (");
        range_dec(&b, m1, m2);
        clf_buf_putc(&b, ')');
        alt = 1;
    }
    if (!has_hi || hi >= 0) {
        char m1[32], m2[32];
        snprintf(m1, sizeof m1, "%lld", has_lo && lo > 0 ? (long long)lo : 0ll);
        if (has_hi) snprintf(m2, sizeof m2, "%lld", (long long)hi);
        else snprintf(m2, sizeof m2, "%s", nines);
        if (alt) clf_buf_puts(&b, " | ");
        range_dec(&b, m1, m2);
        if (!has_lo || lo <= 0) clf_buf_puts(&b, " | \"-0\""); /* -0 is 0 */
    }
    clf_buf_puts(&b, ") (\".\" \"0\"{1,20})?"); /* a zero fraction: still an integer */
    clf_status st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    free(b.p);
    return st;
}

/* ---- integers that are multiples ------------------------------------------ */

#define MULT_ENUM 4096 /* multiples in a bounded range spelled out (a trie) */
#define MULT_DFA 1000  /* divisors held by a remainder automaton when unbounded */

static int64_t floor_div(int64_t a, int64_t k) { return a / k - (a % k != 0 && a < 0); }
static int64_t ceil_div(int64_t a, int64_t k) { return a / k + (a % k != 0 && a > 0); }

/* An integer multiple of k bounded on one side (int_multiple): the side
 * toward 0 spelled out (the multiples between the bound and 0, "-0" where 0
 * is in range), the unbounded side as magnitudes m >= a: those with as many
 * digits as a spelled out, longer ones read through remainder automaton
 * states that also count the digits still owed (k * (digits of a + 1)
 * rules). sign: "-" when the unbounded side is the negative one. */
static clf_status one_sided_multiple(conv *c, const char *name, const char *ptr, int64_t k, int has_lo, int64_t lo,
                                     int64_t hi, clf_buf *out) {
    const char *frac = "(\".\" \"0\"{1,20})?";
    const char *sign = has_lo ? "" : "-";
    int64_t a = has_lo ? (lo > 0 ? lo : 0) : (hi < 0 ? -hi : 1); /* the unbounded side's least magnitude */
    int L = 1;
    for (int64_t t = a; t >= 10; t /= 10) L++;
    if (L > 17) return clf_js_bad(ptr, "\"multipleOf\" with a bound of more than 17 digits is not supported");
    int64_t top = 1; /* 10^L: the least magnitude with more digits than a */
    for (int i = 0; i < L; i++) top *= 10;
    /* the spelled-out values: magnitudes [a, top) on the unbounded side, and the finite side */
    int64_t n_u = floor_div(top - 1, k) - ceil_div(a, k) + 1;
    int64_t fin = has_lo ? (lo < 0 ? -lo : -1) : (hi >= 0 ? hi : -1); /* the finite side's largest magnitude, -1: none */
    int64_t n_f = fin >= 0 ? floor_div(fin, k) + 1 : 0;
    if (n_u + n_f + 1 > MULT_ENUM)
        return clf_js_bad(ptr, "\"multipleOf\" %lld with one bound: more than %d multiples to spell out are not "
                               "supported", (long long)k, MULT_ENUM);
    if ((int64_t)(L + 1) * k > MULT_ENUM)
        return clf_js_bad(ptr, "\"multipleOf\" %lld with one bound: more than %d automaton states are not supported",
                          (long long)k, MULT_ENUM);
    int n = 0;
    char *digits = malloc((size_t)(n_u + n_f + 1) * 24);
    const char **strs = malloc((size_t)(n_u + n_f + 1) * sizeof *strs);
    clf_status st = !digits || !strs ? clf_js_oom() : CLF_OK;
    for (int64_t q = ceil_div(a, k); st == CLF_OK && q * k < top; q++, n++) {
        snprintf(digits + (size_t)n * 24, 24, "%s%lld", sign, (long long)(q * k));
        strs[n] = digits + (size_t)n * 24;
    }
    for (int64_t q = 0; st == CLF_OK && fin >= 0 && q * k <= fin; q++, n++) { /* the other sign's, 0 included */
        snprintf(digits + (size_t)n * 24, 24, "%s%lld", has_lo && q ? "-" : "", (long long)(q * k));
        strs[n] = digits + (size_t)n * 24;
    }
    if (st == CLF_OK && (has_lo ? lo <= 0 : hi >= 0)) { /* 0 is in range: "-0" too */
        snprintf(digits + (size_t)n * 24, 24, "-0");
        strs[n] = digits + (size_t)n * 24;
        n++;
    }
    clf_buf b = SB_INIT;
    if (st == CLF_OK && n) {
        sort_unique(strs, &n);
        char *tn = sub_name(name, "few");
        st = tn ? trie_alts(c, tn, ptr, strs, n, frac, &b) : clf_js_oom();
        free(tn);
        clf_buf_puts(&b, " | ");
    }
    free(digits);
    free(strs);
    /* the automaton: R[r*(L+1)+j], remainder r, j digits still owed */
    int ns = (int)(k * (L + 1));
    const char **rn = st == CLF_OK ? malloc((size_t)ns * sizeof *rn) : NULL;
    if (st == CLF_OK && !rn) st = clf_js_oom();
    char *base = st == CLF_OK ? sub_name(name, "mod") : NULL;
    if (st == CLF_OK && !base) st = clf_js_oom();
    for (int i = 0; st == CLF_OK && i < ns; i++)
        if (!(rn[i] = rule_name(c, base))) st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    free(base);
    clf_buf r = SB_INIT;
    for (int64_t rem = 0; st == CLF_OK && rem < k; rem++)
        for (int j = 0; j <= L && st == CLF_OK; j++) {
            r.n = 0;
            if (r.p) r.p[0] = 0;
            clf_buf_putc(&r, '(');
            for (int d = 0; d < 10; d++)
                clf_buf_printf(&r, "%s\"%d\" %s", d ? " | " : "", d, rn[((10 * rem + d) % k) * (L + 1) + (j ? j - 1 : 0)]);
            clf_buf_puts(&r, j == 0 && rem == 0 ? ")?" : ")");
            if (r.failed) st = clf_js_oom();
            else add_rule(c, rn[rem * (L + 1) + j], clf_buf_str(&r));
        }
    free(r.p);
    if (st == CLF_OK) {
        clf_buf_printf(&b, "%s(", *sign ? "\"-\" " : "");
        for (int d = 1; d < 10; d++) clf_buf_printf(&b, "%s\"%d\" %s", d > 1 ? " | " : "", d, rn[(d % k) * (L + 1) + L]);
        clf_buf_printf(&b, ") %s", frac);
        st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    }
    free(rn);
    free(b.p);
    return st;
}

/* An integer that is a multiple of k (> 1): between bounds, the multiples
 * spelled out (at most MULT_ENUM); without bounds, the decimal digits read
 * through an automaton of the remainders mod k (k <= MULT_DFA), one rule a
 * remainder, the digits' rule ending where the remainder is 0; one side
 * bounded, one_sided_multiple. Wider ranges are refused by name. A zero fraction follows, as
 * for any integer. */
static clf_status int_multiple(conv *c, json_t *s, const char *name, const char *ptr, int64_t k, clf_buf *out,
                               int *empty) {
    int has_lo = 0, has_hi = 0;
    int64_t lo = 0, hi = 0;
    CLF_TRY(int_bound(s, "minimum", ptr, 0, 0, &has_lo, &lo));
    CLF_TRY(int_bound(s, "exclusiveMinimum", ptr, 0, 1, &has_lo, &lo));
    CLF_TRY(int_bound(s, "maximum", ptr, 1, 0, &has_hi, &hi));
    CLF_TRY(int_bound(s, "exclusiveMaximum", ptr, 1, 1, &has_hi, &hi));
    const char *frac = "(\".\" \"0\"{1,20})?";
    if (has_lo && has_hi) {
        int64_t first = ceil_div(lo, k), last = floor_div(hi, k);
        if (first > last) {
            *empty = 1;
            return CLF_OK;
        }
        if (last - first + 1 > MULT_ENUM)
            return clf_js_bad(ptr, "\"multipleOf\" %lld between the bounds: more than %d multiples are not supported",
                              (long long)k, MULT_ENUM);
        int n = (int)(last - first + 1), zero = first <= 0 && last >= 0; /* zero: "-0" too, it is 0 */
        char *digits = malloc((size_t)(n + zero) * 24);
        const char **strs = malloc((size_t)(n + zero) * sizeof *strs);
        clf_status st = !digits || !strs ? clf_js_oom() : CLF_OK;
        for (int i = 0; st == CLF_OK && i < n; i++) {
            snprintf(digits + (size_t)i * 24, 24, "%lld", (long long)((first + i) * k));
            strs[i] = digits + (size_t)i * 24;
        }
        if (st == CLF_OK && zero) {
            snprintf(digits + (size_t)n * 24, 24, "-0");
            strs[n] = digits + (size_t)n * 24;
            n++;
        }
        if (st == CLF_OK) {
            sort_unique(strs, &n);
            st = trie_alts(c, name, ptr, strs, n, frac, out);
        }
        free(digits);
        free(strs);
        return st;
    }
    if (has_lo || has_hi) return one_sided_multiple(c, name, ptr, k, has_lo, lo, hi, out);
    if (k > MULT_DFA)
        return clf_js_bad(ptr, "\"multipleOf\" %lld without bounds: divisors above %d are not supported", (long long)k,
                          MULT_DFA);
    /* the remainder rules: names first (they refer to each other) */
    char *base = sub_name(name, "mod");
    if (!base) return clf_js_oom();
    const char **rn = malloc((size_t)k * sizeof *rn);
    clf_status st = rn ? CLF_OK : clf_js_oom();
    for (int64_t r = 0; st == CLF_OK && r < k; r++)
        if (!(rn[r] = rule_name(c, base))) st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    free(base);
    clf_buf b = SB_INIT;
    for (int64_t r = 0; st == CLF_OK && r < k; r++) { /* after remainder r, a digit d: (10r + d) mod k */
        b.n = 0;
        if (b.p) b.p[0] = 0;
        clf_buf_puts(&b, "(");
        for (int d = 0; d < 10; d++) clf_buf_printf(&b, "%s\"%d\" %s", d ? " | " : "", d, rn[(10 * r + d) % k]);
        clf_buf_puts(&b, r == 0 ? ")?" : ")");
        if (b.failed) st = clf_js_oom();
        else add_rule(c, rn[r], clf_buf_str(&b));
    }
    if (st == CLF_OK) { /* "-"? and no leading zero */
        b.n = 0;
        if (b.p) b.p[0] = 0;
        clf_buf_puts(&b, "\"-\"? (\"0\"");
        for (int d = 1; d < 10; d++) clf_buf_printf(&b, " | \"%d\" %s", d, rn[d % k]);
        clf_buf_printf(&b, ") %s", frac);
        st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    }
    free(b.p);
    free(rn);
    return st;
}

/* ---- strings ------------------------------------------------------------- */

static clf_status count_kw(json_t *s, const char *key, const char *ptr, long *v) {
    json_t *j = json_object_get(s, key);
    if (!j) return CLF_OK;
    double x = json_is_number(j) ? json_number_value(j) : -1;
    if (x < 0 || x != floor(x)) return clf_js_bad(ptr, "\"%s\" must be a non-negative integer", key);
    if (x > MAX_REPEAT) return clf_js_bad(ptr, "\"%s\" %.0f: at most %d is supported", key, x, MAX_REPEAT);
    *v = (long)x;
    return CLF_OK;
}

static clf_status visit_string(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
    long lo = 0, hi = -1;
    CLF_TRY(count_kw(s, "minLength", ptr, &lo));
    CLF_TRY(count_kw(s, "maxLength", ptr, &hi));
    int lengths = json_object_get(s, "minLength") || json_object_get(s, "maxLength");
    if ((fmt != NULL) + (pat != NULL) + lengths > 1)
        return clf_js_bad(ptr, "only one of \"format\", \"pattern\", \"minLength\"/\"maxLength\" per string is supported");
    if (fmt) {
        static const struct {
            const char *name;
            int p;
        } formats[] = {{"date", P_DATE}, {"date-time", P_DATETIME}, {"time", P_TIME}, {"uuid", P_UUID},
                       {"email", P_EMAIL}};
        if (!json_is_string(fmt)) return clf_js_bad(ptr, "\"format\" must be a string");
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
            if (strcmp(json_string_value(fmt), formats[i].name) != 0) continue;
            if (formats[i].p == P_DATE) {
                /* date is a part of date0's neighbours: its string form is a rule of its own */
                clf_buf b = SB_INIT;
                clf_buf_printf(&b, "\"\\\"\" %s \"\\\"\"", clf_js_prim(c, P_DATE));
                clf_status st = clf_js_emit_rule(c, name, clf_buf_str(&b), out);
                free(b.p);
                return st;
            }
            clf_buf_puts(out, clf_js_prim(c, formats[i].p));
            return CLF_OK;
        }
        return clf_js_bad(ptr, "format \"%s\" is not supported (date, date-time, time, uuid, email are)",
                   json_string_value(fmt));
    }
    if (pat) return clf_js_visit_pattern(c, pat, name, ptr, out);
    if (!lengths) {
        clf_buf_puts(out, clf_js_prim(c, P_STRING));
        return CLF_OK;
    }
    if (hi >= 0 && hi < lo) {
        *empty = 1;
        return CLF_OK;
    }
    clf_buf b = SB_INIT;
    clf_buf_printf(&b, "\"\\\"\" %s", clf_js_prim(c, P_CHAR));
    if (hi < 0) clf_buf_printf(&b, "{%ld,}", lo);
    else if (lo == hi) clf_buf_printf(&b, "{%ld}", lo);
    else clf_buf_printf(&b, "{%ld,%ld}", lo, hi);
    clf_buf_puts(&b, " \"\\\"\"");
    clf_status st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    free(b.p);
    return st;
}

/* ---- arrays -------------------------------------------------------------- */

static clf_status visit_sub(conv *c, json_t *s, const char *name, const char *what, const char *ptr,
                            const char *key, long idx, clf_buf *out, int *empty) {
    char *nm = sub_name(name, what);
    char *p = idx >= 0 ? clf_js_ptr_index(ptr, key, (size_t)idx) : ptr_join(ptr, key);
    clf_status st = nm && p ? visit(c, s, nm, p, out, empty) : clf_js_oom();
    free(nm);
    free(p);
    return st;
}

/* ---- arrays of distinct enum values ---------------------------------------- */

#define UNIQUE_MAX 8 /* enum values under uniqueItems: a rule per subset used (2^8) */

/* uniqueItems: true over items that are an enum (or const) of scalars other
 * than non-integral numbers: the elements chosen so far are the state, one
 * rule per subset S (U-S: a "," and a value not in S, then U-(S+it); the end
 * once minItems are there; no more once maxItems are). Values are distinct
 * as JSON Schema compares them (true is not 1; "1" and "1.0" are the same
 * value, spelled by the one value's rule). Anything else is refused. */
static clf_status unique_enum_array(conv *c, json_t *s, const char *name, const char *ptr, long lo, long hi,
                                    clf_buf *out, int *empty) {
    json_t *items = json_object_get(s, "items");
    if (json_object_get(s, "prefixItems") || !json_is_object(items) ||
        !(json_object_get(items, "enum") || json_object_get(items, "const")))
        return clf_js_bad(ptr, "keyword \"uniqueItems\": true is supported only over \"items\" that are an enum or "
                               "const (no prefixItems)");
    const char *k;
    json_t *v;
    json_object_foreach(items, k, v) if (clf_js_asserts(k) && strcmp(k, "enum") && strcmp(k, "const") &&
                                         strcmp(k, "type")) return clf_js_bad(ptr, "keyword \"uniqueItems\": true "
                                                                                    "with \"%s\" in items is not supported",
                                                                              k);
    json_t *vals = json_object_get(items, "enum"), *cst = json_object_get(items, "const");
    if (vals && !json_is_array(vals)) return clf_js_bad(ptr, "\"enum\" must be an array");
    size_t count = vals ? json_array_size(vals) : 1;
    json_t *kept[UNIQUE_MAX];
    clf_buf vb[UNIQUE_MAX];
    int m = 0;
    clf_status st = CLF_OK;
    c->nest++;
    for (size_t i = 0; i < count && st == CLF_OK; i++) {
        json_t *x = vals ? json_array_get(vals, i) : cst;
        if (json_is_object(x) || json_is_array(x) || json_is_real(x)) {
            st = clf_js_bad(ptr, "keyword \"uniqueItems\": true over an enum with objects, arrays or non-integer "
                                 "numbers is not supported");
            break;
        }
        int dup = 0;
        for (int j = 0; j < m && !dup; j++) dup = json_equal(kept[j], x);
        if (dup) continue;
        json_t *sub = clf_js_own(c, json_pack("{s:O}", "const", x));
        if (!sub) {
            st = clf_js_oom();
            break;
        }
        if (json_object_get(items, "type") && json_object_set(sub, "type", json_object_get(items, "type"))) {
            st = clf_js_oom();
            break;
        }
        if (m == UNIQUE_MAX) {
            st = clf_js_bad(ptr, "keyword \"uniqueItems\": true over more than %d enum values is not supported",
                            UNIQUE_MAX);
            break;
        }
        clf_buf x_out = SB_INIT;
        int e = 0;
        char what[16];
        snprintf(what, sizeof what, "u%d", m);
        st = visit_sub(c, sub, name, what, ptr, "items", -1, &x_out, &e);
        if (st == CLF_OK && !e) {
            kept[m] = x;
            vb[m++] = x_out;
        } else free(x_out.p);
    }
    c->nest--;
    if (st == CLF_OK && m < lo) *empty = 1;
    const char *sp = clf_js_prim(c, P_SPACE);
    int ns = 1 << m;
    const char **rn = NULL;
    if (st == CLF_OK && !*empty) rn = calloc((size_t)ns, sizeof *rn);
    if (st == CLF_OK && !*empty && !rn) st = clf_js_oom();
    char *base = st == CLF_OK && !*empty ? sub_name(name, "set") : NULL;
    if (st == CLF_OK && !*empty && !base) st = clf_js_oom();
    /* names of the subsets that can go on (fewer than m, fewer than hi elements) */
    for (int S = 1; st == CLF_OK && !*empty && S < ns; S++) {
        int pc = __builtin_popcount((unsigned)S);
        if (pc < m && (hi < 0 || pc < hi) && !(rn[S] = rule_name(c, base)))
            st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    }
    free(base);
    clf_buf b = SB_INIT;
    for (int S = 1; st == CLF_OK && !*empty && S < ns; S++) {
        if (!rn[S]) continue;
        b.n = 0;
        if (b.p) b.p[0] = 0;
        int pc = __builtin_popcount((unsigned)S), alts = 0;
        clf_buf_putc(&b, '(');
        for (int i = 0; i < m; i++) {
            if (S & (1 << i)) continue;
            clf_buf_printf(&b, "%s\",\" %s %s %s%s%s", alts++ ? " | " : "", sp, clf_buf_str(&vb[i]), sp,
                           rn[S | (1 << i)] ? " " : "", rn[S | (1 << i)] ? rn[S | (1 << i)] : "");
        }
        clf_buf_puts(&b, pc >= lo ? ")?" : ")");
        if (b.failed) st = clf_js_oom();
        else add_rule(c, rn[S], clf_buf_str(&b));
    }
    if (st == CLF_OK && !*empty) { /* "[", the first element (unless none may come), "]" */
        b.n = 0;
        if (b.p) b.p[0] = 0;
        clf_buf_printf(&b, "\"[\" %s ", sp);
        if (hi != 0 && m > 0) {
            clf_buf_putc(&b, '(');
            for (int i = 0; i < m; i++)
                clf_buf_printf(&b, "%s%s %s%s%s", i ? " | " : "", clf_buf_str(&vb[i]), sp, rn[1 << i] ? " " : "",
                               rn[1 << i] ? rn[1 << i] : "");
            clf_buf_puts(&b, lo > 0 ? ") " : ")? ");
        }
        clf_buf_puts(&b, "\"]\"");
        st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    }
    free(b.p);
    free(rn);
    for (int i = 0; i < m; i++) free(vb[i].p);
    return st;
}

static clf_status visit_array(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long lo = 0, hi = -1;
    CLF_TRY(count_kw(s, "minItems", ptr, &lo));
    CLF_TRY(count_kw(s, "maxItems", ptr, &hi));
    json_t *uniq = json_object_get(s, "uniqueItems");
    if (uniq && !json_is_boolean(uniq)) return clf_js_bad(ptr, "\"uniqueItems\" must be a boolean");
    if (json_is_true(uniq)) return unique_enum_array(c, s, name, ptr, lo, hi, out, empty);
    if (items && json_is_array(items))
        return clf_js_bad(ptr, "\"items\" as an array (draft 2019 and older): use \"prefixItems\"");
    if (prefix && !json_is_array(prefix)) return clf_js_bad(ptr, "\"prefixItems\" must be an array");
    if (!items && !prefix && !json_object_get(s, "minItems") && !json_object_get(s, "maxItems")) {
        clf_buf_puts(out, clf_js_prim(c, P_ARRAY));
        return CLF_OK;
    }
    size_t k = prefix ? json_array_size(prefix) : 0;
    if (k > MAX_REPEAT) return clf_js_bad(ptr, "\"prefixItems\" longer than %d", MAX_REPEAT);
    clf_buf *pe = calloc(k + 1, sizeof *pe);
    if (!pe) return clf_js_oom();
    for (size_t j = 0; j <= k; j++) pe[j].max = SB_MAX;
    c->nest++;
    clf_status st = CLF_OK;
    long n = hi; /* the most elements possible, -1: any */
    size_t kk = k;
    for (size_t j = 0; j < k && st == CLF_OK; j++) {
        int e = 0;
        char what[32];
        snprintf(what, sizeof what, "%zu", j);
        st = visit_sub(c, json_array_get(prefix, j), name, what, ptr, "prefixItems", (long)j, &pe[j], &e);
        if (e && kk == k) kk = j; /* no element can stand here, nor after */
    }
    int ie = 0;
    if (st == CLF_OK) {
        if (!items) clf_buf_puts(&pe[k], clf_js_prim(c, P_VALUE));
        else st = visit_sub(c, items, name, "item", ptr, "items", -1, &pe[k], &ie);
    }
    c->nest--;
    if (st == CLF_OK) {
        if (kk < k || ie) n = n < 0 || n > (long)kk ? (long)kk : n;
        if (n >= 0 && lo > n) *empty = 1;
    }
    if (st != CLF_OK || *empty) goto done;
    clf_buf b = SB_INIT;
    const char *sp = clf_js_prim(c, P_SPACE);
    clf_buf_printf(&b, "\"[\" %s ", sp);
    size_t upto = n >= 0 && (size_t)n < kk ? (size_t)n : kk;
    /* prefix element j: the first lo mandatory, then each optional with all
     * that follows it: ( "," e_j REST )? -- nested groups for a few, a rule
     * each past PREFIX_NEST (the grammar parser bounds nesting at 1024) */
    for (size_t j = 0; j < upto && (long)j < lo; j++) {
        if (j) clf_buf_printf(&b, "\",\" %s ", sp);
        clf_buf_printf(&b, "%s %s ", clf_buf_str(&pe[j]), sp);
    }
    clf_buf rest = SB_INIT; /* what follows the prefix elements: the items */
    long rlo = lo > (long)upto ? lo - (long)upto : 0, rhi = n < 0 ? -1 : n - (long)upto;
    if (upto == kk && rhi != 0) {
        const char *it = clf_buf_str(&pe[k]);
        if (upto == 0) { /* the first element has no comma */
            if (rlo == 0) clf_buf_putc(&rest, '(');
            clf_buf_printf(&rest, "%s %s", it, sp);
            long l2 = rlo > 0 ? rlo - 1 : 0, h2 = rhi < 0 ? -1 : rhi - 1;
            if (h2 != 0) {
                clf_buf_printf(&rest, " (\",\" %s %s %s)", sp, it, sp);
                if (l2 == 0 && h2 < 0) clf_buf_putc(&rest, '*');
                else if (l2 == 1 && h2 < 0) clf_buf_putc(&rest, '+');
                else if (h2 < 0) clf_buf_printf(&rest, "{%ld,}", l2);
                else if (l2 == h2) clf_buf_printf(&rest, "{%ld}", l2);
                else clf_buf_printf(&rest, "{%ld,%ld}", l2, h2);
            }
            if (rlo == 0) clf_buf_puts(&rest, ")?");
            clf_buf_putc(&rest, ' ');
        } else {
            clf_buf_printf(&rest, "(\",\" %s %s %s)", sp, it, sp);
            if (rlo == 0 && rhi < 0) clf_buf_putc(&rest, '*');
            else if (rlo == 0 && rhi == 1) clf_buf_putc(&rest, '?');
            else if (rlo == 1 && rhi < 0) clf_buf_putc(&rest, '+');
            else if (rhi < 0) clf_buf_printf(&rest, "{%ld,}", rlo);
            else if (rlo == rhi) clf_buf_printf(&rest, "{%ld}", rlo);
            else clf_buf_printf(&rest, "{%ld,%ld}", rlo, rhi);
            clf_buf_putc(&rest, ' ');
        }
    }
    size_t first_opt = lo < (long)upto ? (size_t)lo : upto;
    const int as_rules = upto - first_opt > PREFIX_NEST;
    for (size_t j = upto; j-- > first_opt && st == CLF_OK;) { /* inside out */
        clf_buf g = SB_INIT;
        if (!as_rules) clf_buf_putc(&g, '(');
        if (j) clf_buf_printf(&g, "\",\" %s ", sp);
        clf_buf_printf(&g, "%s %s %s", clf_buf_str(&pe[j]), sp, clf_buf_str(&rest));
        if (!as_rules) clf_buf_puts(&g, ")? ");
        rest.n = 0;
        if (as_rules) {
            char what[32];
            snprintf(what, sizeof what, "prefix-%zu", j);
            char *pn = sub_name(name, what);
            st = !pn ? clf_js_oom() : g.failed ? clf_js_oom() : clf_js_emit_rule(c, pn, clf_buf_str(&g), &rest);
            free(pn);
            clf_buf_puts(&rest, "? ");
        } else {
            clf_buf_puts(&rest, clf_buf_str(&g));
        }
        free(g.p);
    }
    clf_buf_puts(&b, clf_buf_str(&rest));
    if (rest.failed) b.failed = 1;
    free(rest.p);
    clf_buf_puts(&b, "\"]\"");
    st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    free(b.p);
done:
    for (size_t j = 0; j <= k; j++) free(pe[j].p);
    free(pe);
    return st;
}

/* ---- objects ------------------------------------------------------------- */

/* ---- tries over sorted strings ----------------------------------------------
 * Both the "any other name" rule of objects and wide enums are tries over
 * a sorted list: a node is a run of the list sharing its first `depth`
 * bytes, its children the runs that share one more character. Nodes go on
 * an explicit stack (a name's length is untrusted: no recursion per
 * character); each node's work is its run's length, so a trie costs the
 * list's size. */

typedef struct tnode {
    int lo, hi;   /* the run [lo, hi) of the sorted list */
    size_t depth; /* bytes shared */
    const char *name; /* its rule */
} tnode;

typedef struct tstack {
    tnode *v;
    int n, cap;
} tstack;

static int tpush(tstack *s, tnode x) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        tnode *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

/* In sorted strings [i, hi), all longer than `depth` bytes from i on (a
 * string ending at depth sorts first and is taken out before): the end of
 * the run from i whose character at byte `depth` is the same; that
 * character in *cp and where it ends in *at. The tries below split at it. */
static int same_next_char(const char *const *s, int i, int hi, size_t depth, uint32_t *cp, size_t *at) {
    *at = depth;
    *cp = clf_js_utf8_next(s[i], strlen(s[i]), at);
    int j = i + 1;
    for (size_t at2 = depth; j < hi; j++, at2 = depth)
        if (clf_js_utf8_next(s[j], strlen(s[j]), &at2) != *cp) break;
    return j;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Sorts and deduplicates names[0, *n) (byte order is code point order in UTF-8). */
static void sort_unique(const char **names, int *n) {
    if (*n < 2) return; /* nothing to sort (and qsort's array must not be NULL) */
    qsort(names, (size_t)*n, sizeof *names, cmp_str);
    int m = 0;
    for (int i = 0; i < *n; i++)
        if (!m || strcmp(names[m - 1], names[i])) names[m++] = names[i];
    *n = m;
}

/* A JSON string other than the given names (plain spellings), after its
 * opening quote: a trie, one rule per node, each with the ways to leave
 * every name (a character none has here, an escape, or the end where no
 * name ends). names: sorted, distinct, none longer than MAX_NAME. */
static clf_status not_names(conv *c, const char *name, const char *ptr, const char **names, int n, clf_buf *out) {
    const char *ch = clf_js_prim(c, P_CHAR);
    /* shared by every node: the rest of a string once it is no name */
    char *rest_n = sub_name(name, "rest"), *esc_n = sub_name(name, "escape");
    clf_buf tmp = SB_INIT;
    clf_status st = rest_n && esc_n ? CLF_OK : clf_js_oom();
    const char *rest = NULL, *esc = NULL;
    if (st == CLF_OK) {
        clf_buf_printf(&tmp, "%s* \"\\\"\"", ch);
        clf_buf nm = SB_INIT;
        st = clf_js_emit_rule(c, rest_n, clf_buf_str(&tmp), &nm);
        rest = nm.p;
        tmp.n = 0;
        if (st == CLF_OK) {
            clf_buf_printf(&tmp, "\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) %s", rest);
            clf_buf en = SB_INIT;
            st = clf_js_emit_rule(c, esc_n, clf_buf_str(&tmp), &en);
            esc = en.p;
        }
    }
    free(rest_n);
    free(esc_n);
    tstack stk = {0};
    const char *root = st == CLF_OK ? rule_name(c, name) : NULL;
    if (st == CLF_OK && !root) st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    if (st == CLF_OK) {
        clf_buf_puts(out, root);
        if (tpush(&stk, (tnode){0, n, 0, root})) st = clf_js_oom();
    }
    cpset kids = {0};
    while (st == CLF_OK && stk.n) {
        tnode t = stk.v[--stk.n];
        int i = t.lo, ends = strlen(names[i]) == t.depth; /* sorted: a name that ends here comes first */
        if (ends) i++;
        kids.n = 0;
        clf_buf b = SB_INIT;
        if (!ends) clf_buf_puts(&b, "\"\\\"\" | ");
        /* the children: runs with one more character in common */
        int first_kid = stk.n;
        while (i < t.hi && st == CLF_OK) {
            size_t at;
            uint32_t cp;
            int j = same_next_char(names, i, t.hi, t.depth, &cp, &at);
            if (clf_js_set_add(&kids, cp, cp) || tpush(&stk, (tnode){i, j, at, NULL})) st = clf_js_oom();
            i = j;
        }
        if (st == CLF_OK && kids.n + 1 > MAX_BRANCH)
            st = clf_js_bad(ptr, "more than %d property names differ at character %zu (beside additional properties: the "
                           "grammar matcher reads at most %d ways at once)", MAX_BRANCH, t.depth, MAX_BRANCH);
        /* a character no name has here, then anything */
        cpset other = {0};
        for (int k = 0; k < kids.n && st == CLF_OK; k++)
            if (clf_js_set_add(&other, kids.r[k][0], kids.r[k][1])) st = clf_js_oom();
        if (st == CLF_OK && (clf_js_set_add(&other, 0, 0x1F) || clf_js_set_add(&other, '"', '"') || clf_js_set_add(&other, '\\', '\\') ||
                             clf_js_set_negate(&other)))
            st = clf_js_oom();
        if (st == CLF_OK) {
            if (other.n) {
                clf_js_set_emit(&b, &other);
                clf_buf_printf(&b, " %s | ", rest);
            }
            clf_buf_puts(&b, esc);
        }
        free(other.r);
        for (int k = first_kid; k < stk.n && st == CLF_OK; k++) {
            tnode *kid = &stk.v[k];
            size_t at = t.depth, len = strlen(names[kid->lo]);
            uint32_t cp = clf_js_utf8_next(names[kid->lo], len, &at);
            if (!(kid->name = rule_name(c, name))) {
                st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
                break;
            }
            clf_buf_puts(&b, " | ");
            clf_js_spell_cps(&b, &cp, 1, 0);
            clf_buf_printf(&b, " %s", kid->name);
        }
        if (st == CLF_OK) {
            if (b.failed) st = clf_js_oom();
            else add_rule(c, t.name, clf_buf_str(&b));
        }
        free(b.p);
    }
    free(kids.r);
    free(stk.v);
    free((char *)rest);
    free((char *)esc);
    free(tmp.p);
    return st;
}

/* Strings s[0, n) (raw bytes, sorted, distinct, each ending with a NUL) as
 * GBNF that reads the JSON spelling of one of them, then `end` (a closing
 * quote, a number's fraction): a radix trie, a rule per branching node,
 * each edge the longest run the strings below it share. */
static clf_status trie_alts(conv *c, const char *name, const char *ptr, const char **s, int n, const char *end,
                            clf_buf *out) {
    tstack stk = {0};
    clf_status st = CLF_OK;
    const char *root = rule_name(c, name);
    if (!root) return clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
    clf_buf_puts(out, root);
    if (tpush(&stk, (tnode){0, n, 0, root})) return clf_js_oom();
    uint32_t *cps = NULL;
    size_t cap_cps = 0;
    while (st == CLF_OK && stk.n) {
        tnode t = stk.v[--stk.n];
        int i = t.lo, alts = 0;
        clf_buf b = SB_INIT;
        if (strlen(s[i]) == t.depth) { /* one ends here */
            clf_buf_puts(&b, end);
            alts++;
            i++;
        }
        while (i < t.hi && st == CLF_OK) {
            size_t at;
            uint32_t cp;
            int j = same_next_char(s, i, t.hi, t.depth, &cp, &at);
            /* the run [i, j) shares more: as far as its first and last agree (sorted) */
            size_t common = j - 1 > i ? 0 : strlen(s[i]);
            if (j - 1 > i) {
                const char *x = s[i], *y = s[j - 1];
                size_t k = t.depth;
                while (x[k] && x[k] == y[k]) k++;
                while (k > t.depth && ((unsigned char)x[k] & 0xC0) == 0x80) k--; /* a whole character */
                common = k;
            }
            size_t m = 0, p = t.depth;
            if (common - t.depth + 1 > cap_cps) {
                cap_cps = 2 * cap_cps > common - t.depth + 1 ? 2 * cap_cps : common - t.depth + 1;
                uint32_t *g = realloc(cps, cap_cps * sizeof *g);
                if (!g) {
                    st = clf_js_oom();
                    break;
                }
                cps = g;
            }
            while (p < common) cps[m++] = clf_js_utf8_next(s[i], common, &p);
            if (alts++) clf_buf_puts(&b, " | ");
            clf_js_spell_cps(&b, cps, m, 0);
            if (j - i == 1 && common == strlen(s[i])) { /* a leaf: the string's end */
                clf_buf_printf(&b, " %s", end);
            } else {
                const char *kid = rule_name(c, name);
                if (!kid) {
                    st = clf_js_bad(NULL, "the grammar needs more than %d rules", MAX_RULES);
                    break;
                }
                clf_buf_printf(&b, " %s", kid);
                if (tpush(&stk, (tnode){i, j, common, kid})) st = clf_js_oom();
            }
            i = j;
        }
        if (st == CLF_OK && alts > MAX_BRANCH)
            st = clf_js_bad(ptr, "more than %d values differ at character %zu (the grammar matcher reads at most %d ways "
                           "at once)", MAX_BRANCH, t.depth, MAX_BRANCH);
        if (st == CLF_OK) {
            if (b.failed) st = clf_js_oom();
            else add_rule(c, t.name, clf_buf_str(&b));
        }
        free(b.p);
    }
    free(cps);
    free(stk.v);
    return st;
}

static int in_required(json_t *req, const char *k) {
    size_t i;
    json_t *e;
    json_array_foreach(req, i, e) if (json_is_string(e) && strcmp(json_string_value(e), k) == 0) return 1;
    return 0;
}

/* patternProperties as far as a grammar holds it exactly: one pattern,
 * additionalProperties false (so the names beyond the listed ones are the
 * pattern's), no listed or required name the pattern matches (its value
 * would answer to two schemas) and no required name unlisted. *pat: the
 * pattern. */
static clf_status pattern_props_check(json_t *s, const char *ptr, const char **pat) {
    json_t *pp = json_object_get(s, "patternProperties"), *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    if (!json_is_object(pp)) return clf_js_bad(ptr, "\"patternProperties\" must be an object");
    if (json_object_size(pp) == 0) return CLF_OK;
    if (json_object_size(pp) > 1)
        return clf_js_bad(ptr, "keyword \"patternProperties\" with more than one pattern is not supported");
    if (!json_is_false(json_object_get(s, "additionalProperties")))
        return clf_js_bad(ptr, "keyword \"patternProperties\" is supported only with additionalProperties false");
    const char *p = NULL, *k;
    json_t *v;
    json_object_foreach(pp, k, v) p = k;
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!props || !json_object_get(props, json_string_value(json_array_get(req, i))))
            return clf_js_bad(ptr, "keyword \"patternProperties\" with a required name not in \"properties\" is "
                                   "not supported");
    if (props && json_object_size(props)) { /* a grammar of the pattern alone, each listed name tried */
        json_t *one = json_pack("{s:s,s:s}", "type", "string", "pattern", p);
        char *sj = one ? json_dumps(one, JSON_COMPACT) : NULL, *gb = NULL;
        json_decref(one);
        if (!sj) return clf_js_oom();
        clf_status st = clf_json_schema_to_gbnf(sj, strlen(sj), &gb);
        free(sj);
        clf_grammar *g = NULL;
        if (st == CLF_OK) st = clf_grammar_compile(gb, strlen(gb), "root", &g);
        free(gb);
        json_object_foreach(props, k, v) {
            if (st != CLF_OK) break;
            json_t *ks = json_string(k);
            char *q = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
            json_decref(ks);
            if (!q) st = clf_js_oom();
            else if (clf_grammar_accepts(g, q, strlen(q)))
                st = clf_js_bad(ptr, "keyword \"patternProperties\": the pattern matches the listed property \"%s\" "
                                     "(not supported)", k);
            free(q);
        }
        clf_grammar_free(g);
        CLF_TRY(st);
    }
    *pat = p;
    return CLF_OK;
}

static clf_status visit_object(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return clf_js_bad(ptr, "\"properties\" must be an object");
    if (req && !json_is_array(req)) return clf_js_bad(ptr, "\"required\" must be an array of strings");
    /* minProperties/maxProperties where the rest of the schema already
     * holds them: at most the distinct required names at least; at most as
     * many properties as listed with additionalProperties false. Counting
     * members in the grammar otherwise is not done (refused by name). */
    long minp = 0, maxp = -1;
    CLF_TRY(count_kw(s, "minProperties", ptr, &minp));
    CLF_TRY(count_kw(s, "maxProperties", ptr, &maxp));
    if (minp > 0) {
        long distinct = 0;
        for (size_t i = 0; req && i < json_array_size(req); i++) {
            json_t *x = json_array_get(req, i);
            int dup = !json_is_string(x);
            for (size_t j = 0; j < i && !dup; j++) dup = json_equal(x, json_array_get(req, j));
            distinct += !dup;
        }
        if (minp > distinct)
            return clf_js_bad(ptr, "\"minProperties\" %ld above the %ld required properties is not supported", minp,
                              distinct);
    }
    if (maxp >= 0 && (!json_is_false(addl) || (long)(props ? json_object_size(props) : 0) > maxp))
        return clf_js_bad(ptr, "\"maxProperties\" %ld is supported only with additionalProperties false and at most "
                          "that many properties listed", maxp);
    json_t *pp = json_object_get(s, "patternProperties");
    const char *pat = NULL;
    if (pp) CLF_TRY(pattern_props_check(s, ptr, &pat));
    if (!props && !req && !addl) {
        clf_buf_puts(out, clf_js_prim(c, P_OBJECT));
        return CLF_OK;
    }
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    for (size_t i = 0; i < nr; i++)
        if (!json_is_string(json_array_get(req, i))) return clf_js_bad(ptr, "\"required\" must be an array of strings");
    size_t cap = np + nr + 1;
    clf_buf *kv = calloc(cap, sizeof *kv);
    int *must = calloc(cap, sizeof *must);
    const char **keys = calloc(cap, sizeof *keys);
    if (!kv || !must || !keys) {
        free(kv);
        free(must);
        free(keys);
        return clf_js_oom();
    }
    for (size_t i = 0; i < cap; i++) kv[i].max = SB_MAX;
    const char *sp = clf_js_prim(c, P_SPACE);
    clf_status st = CLF_OK;
    int n = 0, nkeys = 0;
    clf_map required = {0}; /* name -> 1: listed in required; 2: seen below as not listed */
    for (size_t i = 0; i < nr && st == CLF_OK; i++)
        if (clf_map_sets(&required, json_string_value(json_array_get(req, i)), 1)) st = clf_js_oom();
    c->nest++;
    const char *k;
    json_t *v;
    /* the listed properties, in the schema's order */
    if (props) json_object_foreach(props, k, v) {
        if (st != CLF_OK) break;
        keys[nkeys++] = k;
        int e = 0, r = clf_map_gets(&required, k) != NULL;
        clf_buf val = SB_INIT;
        char *p = ptr_join(ptr, "properties");
        st = p ? visit_sub(c, v, name, k, p, k, -1, &val, &e) : clf_js_oom();
        free(p);
        if (st == CLF_OK && e && r) *empty = 1;
        if (st == CLF_OK && !e) {
            clf_js_spell_string(&kv[n], k, strlen(k));
            clf_buf_printf(&kv[n], " %s \":\" %s %s %s", sp, sp, clf_buf_str(&val), sp);
            must[n++] = r;
        }
        free(val.p);
    }
    /* required but not listed: what additionalProperties allows */
    int addl_empty = json_is_false(addl);
    clf_buf addv = SB_INIT;
    if (st == CLF_OK && !addl_empty) {
        if (!addl || json_is_true(addl)) clf_buf_puts(&addv, clf_js_prim(c, P_VALUE));
        else st = visit_sub(c, addl, name, "additional", ptr, "additionalProperties", -1, &addv, &addl_empty);
    }
    for (size_t i = 0; i < nr && st == CLF_OK && !*empty; i++) {
        const char *rk = json_string_value(json_array_get(req, i));
        int64_t *seen = clf_map_gets(&required, rk);
        int listed = (props && json_object_get(props, rk)) || (seen && *seen == 2);
        if (seen) *seen = 2;
        if (listed) continue;
        if (addl_empty) {
            *empty = 1;
            break;
        }
        keys[nkeys++] = rk;
        clf_js_spell_string(&kv[n], rk, strlen(rk));
        clf_buf_printf(&kv[n], " %s \":\" %s %s %s", sp, sp, clf_buf_str(&addv), sp);
        must[n++] = 1;
    }
    c->nest--;
    if (st != CLF_OK || *empty) goto done;
    /* additional properties: a name none of the above, any number of them */
    clf_buf tail = SB_INIT;
    if (!addl_empty) {
        clf_buf key = SB_INIT;
        char *kn = sub_name(name, "key");
        if (!kn) st = clf_js_oom();
        for (int i = 0; i < nkeys && st == CLF_OK; i++) {
            const char *q = keys[i];
            for (; *q && st == CLF_OK; q++)
                if ((unsigned char)*q < 0x20 || *q == '"' || *q == '\\')
                    st = clf_js_bad(ptr, "a property name with \", \\ or a control character beside additional "
                                  "properties is not supported");
            if (st == CLF_OK && q - keys[i] > MAX_NAME)
                st = clf_js_bad(ptr, "a property name of %zu bytes: at most %d beside additional properties "
                              "(additionalProperties not false)", (size_t)(q - keys[i]), MAX_NAME);
        }
        if (st != CLF_OK) {
        } else if (nkeys == 0) {
            clf_buf_puts(&key, clf_js_prim(c, P_STRING));
        } else { /* the opening quote, then a name none of keys */
            clf_buf_puts(&key, "\"\\\"\" ");
            sort_unique(keys, &nkeys);
            st = not_names(c, kn, ptr, keys, nkeys, &key);
        }
        free(kn);
        if (st == CLF_OK) {
            clf_buf body = SB_INIT;
            clf_buf_printf(&body, "%s %s \":\" %s %s %s", clf_buf_str(&key), sp, sp, clf_buf_str(&addv), sp);
            char *an = sub_name(name, "kv");
            st = an ? clf_js_emit_rule(c, an, clf_buf_str(&body), &tail) : clf_js_oom();
            free(an);
            free(body.p);
        }
        free(key.p);
    } else if (pat) { /* additionalProperties false: the other names are those matching the one pattern */
        json_t *ks = clf_js_own(c, json_pack("{s:s,s:s}", "type", "string", "pattern", pat));
        clf_buf key = SB_INIT, val = SB_INIT;
        int ke = 0, ve = 0;
        char *pp_ptr = ptr_join(ptr, "patternProperties");
        if (!ks || !pp_ptr) st = clf_js_oom();
        c->nest++;
        if (st == CLF_OK) st = visit_sub(c, ks, name, "pkey", pp_ptr, pat, -1, &key, &ke);
        if (st == CLF_OK) st = visit_sub(c, json_object_get(pp, pat), name, "pval", pp_ptr, pat, -1, &val, &ve);
        c->nest--;
        if (st == CLF_OK && !ke && !ve) {
            clf_buf body = SB_INIT;
            clf_buf_printf(&body, "%s %s \":\" %s %s %s", clf_buf_str(&key), sp, sp, clf_buf_str(&val), sp);
            char *an = sub_name(name, "kv");
            st = an ? clf_js_emit_rule(c, an, clf_buf_str(&body), &tail) : clf_js_oom();
            free(an);
            free(body.p);
        }
        free(pp_ptr);
        free(key.p);
        free(val.p);
    }
    /* The members in order, each optional one skippable, the additional ones
     * (tail) last, factored so that at any point the ways on are the
     * members that may come next and no more (a comma and its space read
     * once, not once per member):
     *   member-i ::= kv_i after-(i+1) | member-(i+1)   (the second only when i is optional)
     *   member-n ::= tail after-n
     *   after-i  ::= ("," space member-i)?             ("," space member-i when a required one is ahead) */
    char **mem = calloc((size_t)n + 1, sizeof *mem), **aft = calloc((size_t)n + 1, sizeof *aft);
    if (!mem || !aft) st = clf_js_oom();
    int req_ahead = 0;
    for (int i = n; i >= 0 && st == CLF_OK; i--) {
        char what[32];
        if (i < n && must[i]) req_ahead = 1;
        if (i < n || tail.n) {
            snprintf(what, sizeof what, "member-%d", i);
            char *mn = sub_name(name, what);
            const char *r = mn ? rule_name(c, mn) : NULL;
            free(mn);
            if (!r || !(mem[i] = strdup(r))) {
                st = r || !mn ? clf_js_oom() : clf_js_bad(ptr, "the grammar needs more than %d rules", MAX_RULES);
                break;
            }
        }
        if (mem[i] && (i > 0 || i == n)) { /* after-0 only as the tail's own (no listed members) */
            snprintf(what, sizeof what, "after-%d", i);
            char *an = sub_name(name, what);
            const char *r = an ? rule_name(c, an) : NULL;
            free(an);
            if (!r || !(aft[i] = strdup(r))) {
                st = clf_js_oom();
                break;
            }
        }
        clf_buf b = SB_INIT;
        if (i == n && mem[n]) {
            clf_buf_printf(&b, "%s %s", clf_buf_str(&tail), aft[n]);
        } else if (i < n) {
            clf_buf_printf(&b, "%s", clf_buf_str(&kv[i]));
            if (aft[i + 1]) clf_buf_printf(&b, " %s", aft[i + 1]);
            if (!must[i] && mem[i + 1]) clf_buf_printf(&b, " | %s", mem[i + 1]);
        }
        if (st == CLF_OK && mem[i]) add_rule(c, mem[i], clf_buf_str(&b));
        if (st == CLF_OK && aft[i]) {
            b.n = 0;
            if (req_ahead) clf_buf_printf(&b, "\",\" %s %s", sp, mem[i]);
            else clf_buf_printf(&b, "(\",\" %s %s)?", sp, mem[i]);
            add_rule(c, aft[i], clf_buf_str(&b));
        }
        if (b.failed) st = clf_js_oom();
        free(b.p);
    }
    if (st == CLF_OK) {
        clf_buf b = SB_INIT;
        clf_buf_printf(&b, "\"{\" %s ", sp);
        if (mem[0]) clf_buf_printf(&b, "%s%s ", mem[0], req_ahead ? "" : "?");
        clf_buf_puts(&b, "\"}\"");
        st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
        free(b.p);
    }
    if (mem)
        for (int i = 0; i <= n; i++) free(mem[i]);
    if (aft)
        for (int i = 0; i <= n; i++) free(aft[i]);
    free(mem);
    free(aft);
    free(tail.p);
done:
    free(addv.p);
    for (size_t i = 0; i < cap; i++) free(kv[i].p);
    free(kv);
    free(must);
    free(keys);
    clf_map_free(&required);
    return st;
}

/* ---- anyOf / oneOf ---------------------------------------------------------
 * oneOf is anyOf only when no value can match two branches. That is
 * decided here, conservatively: the branches' types are pairwise disjoint,
 * or all are objects whose one required property holds const/enum strings
 * that no two branches share (a discriminator). Anything else is refused:
 * the grammar could not exclude values that match two branches. */

static json_t *deref(conv *c, json_t *s) {
    for (int i = 0; i < 16 && json_is_object(s); i++) {
        json_t *r = json_object_get(s, "$ref"), *t;
        if (!json_is_string(r) || clf_js_resolve(c, json_string_value(r), NULL, &t) != CLF_OK) return s;
        s = t;
    }
    return s;
}
static int branch_types(conv *c, json_t *s) {
    s = deref(c, s);
    if (json_is_false(s)) return 0;
    if (!json_is_object(s)) return T_ALL;
    int m;
    if (clf_js_type_mask(s, NULL, &m) != CLF_OK) return T_ALL;
    if (m & T_NUMBER) m |= T_INTEGER;
    json_t *vals = json_object_get(s, "enum"), *cst = json_object_get(s, "const");
    if (vals || cst) {
        int vm = 0;
        size_t i;
        json_t *e;
        if (cst) vm = value_type(cst);
        else json_array_foreach(vals, i, e) vm |= value_type(e);
        m &= vm;
    }
    return m;
}
static json_t *discriminator(conv *c, json_t *s, const char *prop) {
    s = deref(c, s);
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    if (!json_is_object(props) || !json_is_array(req) || !in_required(req, prop)) return NULL;
    json_t *p = deref(c, json_object_get(props, prop));
    json_t *v = json_object_get(p, "const");
    if (json_is_string(v)) return json_pack("[O]", v);
    v = json_object_get(p, "enum");
    if (!json_is_array(v)) return NULL;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (!json_is_string(e)) return NULL;
    return json_incref(v);
}
static int disjoint(conv *c, json_t *branches) {
    size_t n = json_array_size(branches);
    int ok = 1, seen = 0;
    for (size_t i = 0; i < n && ok; i++) {
        int m = branch_types(c, json_array_get(branches, i));
        if (m & seen) ok = 0;
        seen |= m;
    }
    if (ok) return 1;
    /* a discriminator: a property of the first branch every branch requires */
    json_t *first = deref(c, json_array_get(branches, 0));
    json_t *props = json_object_get(first, "properties");
    const char *k;
    json_t *v;
    json_object_foreach(props, k, v) {
        clf_map all = {0}; /* the discriminating values so far */
        int good = 1;
        for (size_t i = 0; i < n && good; i++) {
            json_t *b = json_array_get(branches, i);
            if (branch_types(c, b) & ~T_OBJECT) good = 0;
            json_t *d = good ? discriminator(c, b, k) : NULL;
            if (!d) good = 0;
            size_t j;
            json_t *x;
            if (good) json_array_foreach(d, j, x) if (clf_js_has_key(&all, x)) good = 0;
            if (good && clf_js_add_keys(&all, d)) good = 0;
            json_decref(d);
        }
        clf_map_free(&all);
        if (good) return 1;
    }
    return 0;
}

static clf_status visit_any(conv *c, json_t *s, const char *kw, const char *name, const char *ptr, clf_buf *out,
                            int *empty) {
    json_t *br = json_object_get(s, kw);
    if (!json_is_array(br) || json_array_size(br) == 0) return clf_js_bad(ptr, "\"%s\" must be a non-empty array", kw);
    json_t *rest = clf_js_rest_of(c, s, kw);
    json_t *list = clf_js_own(c, json_array());
    if (!list) return clf_js_oom();
    size_t i;
    json_t *e;
    json_array_foreach(br, i, e) {
        if (!rest) {
            json_array_append(list, e);
            continue;
        }
        json_t *m;
        int me = 0;
        json_t *one = json_pack("[O]", e);
        if (!one) return clf_js_oom();
        char *p = clf_js_ptr_index(ptr, kw, i);
        clf_status st = p ? clf_js_merge(c, one, rest, p, &m, &me) : clf_js_oom();
        free(p);
        json_decref(one);
        CLF_TRY(st);
        json_array_append(list, me ? json_false() : m);
    }
    if (kw[0] == 'o' && !disjoint(c, list))
        return clf_js_bad(ptr, "oneOf: cannot tell that no value matches two branches (distinct types, or a required "
                        "property with distinct const/enum strings, are understood); anyOf would admit such values");
    if (json_array_size(list) > ENUM_TRIE) { /* branches of const/enum only: one enum, written as tries */
        json_t *all = clf_js_own(c, json_array());
        if (!all) return clf_js_oom();
        int only_values = 1;
        json_array_foreach(list, i, e) {
            json_t *b = e, *v = json_is_object(b) ? json_object_get(b, "enum") : NULL;
            json_t *cv = json_is_object(b) ? json_object_get(b, "const") : NULL;
            const char *k;
            json_t *x;
            int mask = 0;
            if (!json_is_object(b) || (!v) == (!cv) || (v && !json_is_array(v)) || clf_js_type_mask(b, NULL, &mask) != CLF_OK)
                only_values = 0;
            else json_object_foreach(b, k, x) if (clf_js_asserts(k) && strcmp(k, "enum") && strcmp(k, "const") && strcmp(k, "type"))
                only_values = 0;
            if (!only_values) break;
            if (mask & T_NUMBER) mask |= T_INTEGER;
            size_t j, nv = v ? json_array_size(v) : 1;
            for (j = 0; j < nv; j++) {
                json_t *y = v ? json_array_get(v, j) : cv;
                if ((value_type(y) & mask) && json_array_append(all, y)) return clf_js_oom();
            }
        }
        if (only_values) {
            json_t *one = clf_js_own(c, json_pack("{s:O}", "enum", all));
            return one ? visit_enum(c, one, name, ptr, out, empty) : clf_js_oom();
        }
    }
    if (json_array_size(list) > MAX_BRANCH)
        return clf_js_bad(ptr, "\"%s\" of %zu branches: at most %d (the grammar matcher reads at most %d ways at once; "
                        "branches of const/enum values only are merged and have no such bound)", kw,
                   json_array_size(list), MAX_BRANCH, MAX_BRANCH);
    clf_buf b = SB_INIT;
    int alts = 0;
    clf_status st = CLF_OK;
    json_array_foreach(list, i, e) {
        int be = 0;
        clf_buf x = SB_INIT;
        char what[32];
        snprintf(what, sizeof what, "%zu", i);
        char *nm = sub_name(name, what), *p = clf_js_ptr_index(ptr, kw, i);
        st = nm && p ? visit(c, e, nm, p, &x, &be) : clf_js_oom();
        free(nm);
        free(p);
        if (st == CLF_OK && !be) {
            if (alts++) clf_buf_puts(&b, " | ");
            clf_buf_puts(&b, clf_buf_str(&x));
        }
        free(x.p);
        if (st != CLF_OK) break;
    }
    if (st == CLF_OK) {
        if (!alts) *empty = 1;
        else st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
    }
    free(b.p);
    return st;
}

/* ---- one schema ---------------------------------------------------------- */

static const char *const STRING_KW[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const ARRAY_KW[] = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", NULL};
static const char *const OBJECT_KW[] = {"properties", "required", "additionalProperties", "minProperties",
                                        "maxProperties", "patternProperties", NULL};

static int has_any(json_t *s, const char *const *kws) {
    for (; *kws; kws++)
        if (json_object_get(s, *kws)) return 1;
    return 0;
}

static clf_status visit(conv *c, json_t *s, const char *name, const char *ptr, clf_buf *out, int *empty) {
    if (c->depth >= MAX_DEPTH) return clf_js_bad(ptr, "schemas nested deeper than %d", MAX_DEPTH);
    if (json_is_true(s)) {
        clf_buf_puts(out, clf_js_prim(c, P_VALUE));
        return CLF_OK;
    }
    if (json_is_false(s)) {
        *empty = 1;
        return CLF_OK;
    }
    if (!json_is_object(s)) return clf_js_bad(ptr, "a schema must be an object or a boolean");
    CLF_TRY(clf_js_check_refused(s, ptr));
    c->depth++;
    clf_status st = CLF_OK;
    json_t *ref = json_object_get(s, "$ref"), *m = NULL;
    int me = 0;
    if (ref && !json_is_string(ref)) {
        st = clf_js_bad(ptr, "\"$ref\" must be a string");
    } else if (ref && !clf_js_rest_of(c, s, "$ref")) {
        st = visit_ref(c, json_string_value(ref), ptr, out, empty);
    } else if (ref || json_object_get(s, "allOf")) {
        json_t *none = clf_js_own(c, json_array());
        st = none ? clf_js_merge(c, none, s, ptr, &m, &me) : clf_js_oom();
        if (st == CLF_OK && me) *empty = 1;
        else if (st == CLF_OK) st = visit(c, m, name, ptr, out, empty);
    } else if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf")) {
        st = clf_js_bad(ptr, "\"anyOf\" with \"oneOf\" in one schema is not supported");
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        st = visit_any(c, s, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", name, ptr, out, empty);
    } else if (json_object_get(s, "enum") || json_object_get(s, "const")) {
        st = visit_enum(c, s, name, ptr, out, empty);
    } else {
        int mask;
        st = clf_js_type_mask(s, ptr, &mask);
        if (st == CLF_OK && (mask & T_NUMBER)) mask &= ~T_INTEGER;
        if (st == CLF_OK && mask == T_ALL && !has_any(s, STRING_KW) && !has_any(s, NUMBER_BOUNDS) && !json_object_get(s, "multipleOf") &&
            !has_any(s, ARRAY_KW) && !has_any(s, OBJECT_KW)) {
            clf_buf_puts(out, clf_js_prim(c, P_VALUE));
        } else if (st == CLF_OK) {
            clf_buf b = SB_INIT;
            int alts = 0;
            for (int t = 0; t < 7 && st == CLF_OK; t++) {
                if (!(mask & (1 << t))) continue;
                clf_buf x = SB_INIT;
                int te = 0;
                char *nm = sub_name(name, clf_js_type_names[t]);
                const char *tn = mask == (1 << t) ? name : nm;
                if (!nm) st = clf_js_oom();
                else switch (1 << t) {
                    case T_NULL: clf_buf_puts(&x, clf_js_prim(c, P_NULL)); break;
                    case T_BOOLEAN: clf_buf_puts(&x, clf_js_prim(c, P_BOOLEAN)); break;
                    case T_NUMBER: st = visit_number(c, s, tn, ptr, &x, &te); break;
                    case T_INTEGER: st = visit_integer(c, s, tn, ptr, &x, &te); break;
                    case T_STRING: st = visit_string(c, s, tn, ptr, &x, &te); break;
                    case T_ARRAY: st = visit_array(c, s, tn, ptr, &x, &te); break;
                    case T_OBJECT: st = visit_object(c, s, tn, ptr, &x, &te); break;
                    }
                free(nm);
                if (st == CLF_OK && !te) {
                    if (alts++) clf_buf_puts(&b, " | ");
                    clf_buf_puts(&b, clf_buf_str(&x));
                }
                free(x.p);
            }
            if (st == CLF_OK) {
                if (!alts) *empty = 1;
                else if (alts == 1) clf_buf_puts(out, clf_buf_str(&b));
                else st = b.failed ? clf_js_oom() : clf_js_emit_rule(c, name, clf_buf_str(&b), out);
            }
            free(b.p);
        }
    }
    c->depth--;
    return st;
}

clf_status clf_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf) {
    if (!schema || !gbnf) return clf_fail(CLF_ERR_ARG, "json schema: NULL argument");
    *gbnf = NULL;
    if (len > MAX_SCHEMA)
        return clf_fail(CLF_ERR_ARG, "json schema: %zu bytes, more than %u (the bound on a schema's text)", len,
                        MAX_SCHEMA);
    json_error_t err;
    json_t *root = json_loadb(schema, len, JSON_DECODE_ANY, &err);
    if (!root) return clf_fail(CLF_ERR_ARG, "json schema: not JSON: %s (line %d, column %d)", err.text, err.line,
                               err.column);
    conv c = {.root = root, .rules = SB_INIT};
    /* the primitives' names and root are taken */
    for (int i = 0; i <= P_COUNT; i++) {
        const char *taken = rule_name(&c, i < P_COUNT ? PRIMS[i].name : "root");
        if (taken && strcmp(taken, i < P_COUNT ? PRIMS[i].name : "root") != 0) taken = NULL;
    }
    clf_buf top = SB_INIT;
    int empty = 0;
    clf_status st = visit_ref(&c, "#", "#", &top, &empty);
    if (st == CLF_OK && empty) st = clf_js_bad("#", "the schema admits no value");
    clf_buf out = SB_INIT;
    if (st == CLF_OK) {
        clf_buf_printf(&out, "root ::= %s %s %s\n", clf_js_prim(&c, P_SPACE), clf_buf_str(&top), clf_js_prim(&c, P_SPACE));
        clf_buf_puts(&out, clf_buf_str(&c.rules));
        if (out.failed || c.rules.failed || top.failed) st = clf_js_bad("#", "the grammar is larger than 4 MiB (or memory ran out)");
    }
    if (st == CLF_OK && out.n > MAX_OUT) st = clf_js_bad("#", "the grammar is larger than 4 MiB");
    if (st == CLF_OK) {
        /* A recursion no value escapes (an object that requires an object
         * of its own kind) leaves the walk's emptiness checks non-empty:
         * the engine finds such rules, and that is this schema's error. Any
         * other refusal would be the converter's bug, left for the caller
         * (and the fuzzer) to see. */
        clf_grammar *g = NULL;
        if (clf_grammar_compile(out.p, out.n, NULL, &g) != CLF_OK && strstr(clf_last_error(), "admits no text"))
            st = clf_js_bad("#", "the schema admits no finite value (a $ref recursion no value ends)");
        clf_grammar_free(g);
    }
    if (st == CLF_OK) *gbnf = out.p;
    else free(out.p);
    free(top.p);
    free(c.rules.p);
    for (int i = 0; i < c.n_names; i++) free(c.names[i]);
    free(c.names);
    clf_map_free(&c.taken);
    clf_map_free(&c.next_k);
    clf_map_free(&c.ref_index);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    free(c.refs);
    for (int i = 0; i < c.n_owned; i++) json_decref(c.owned[i]);
    free(c.owned);
    json_decref(root);
    return st;
}

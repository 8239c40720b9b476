/* The Jinja engine's values: the arena they live in, Python's str() and
 * repr() of them, json.dumps as transformers' tojson calls it, JSON in. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jinja_impl.h"

/* ---- arena ---- */
struct jj_chunk {
    jj_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *jj_alloc(jj_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > a->cap || a->used > a->cap - n) {
        a->failed = 1;
        if (a->fail) longjmp(*a->fail, 1);
        return NULL;
    }
    jj_chunk *h = a->head;
    if (!h || h->cap - h->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        h = malloc(sizeof *h + cap);
        if (!h) {
            a->failed = 2;
            if (a->fail) longjmp(*a->fail, 1);
            return NULL;
        }
        h->cap = cap, h->used = 0, h->next = a->head;
        a->head = h;
    }
    void *p = (char *)h->data + h->used;
    h->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *jj_strndup(jj_arena *a, const char *s, size_t n) {
    char *p = jj_alloc(a, n + 1);
    if (p && n) memcpy(p, s, n);
    return p;
}

void jj_arena_free(jj_arena *a) {
    for (jj_chunk *h = a->head, *nx; h; h = nx) nx = h->next, free(h);
    a->head = NULL;
    a->used = 0;
}

/* ---- constructors ---- */
static jv g_none = {.t = JV_NONE}, g_true = {.t = JV_BOOL, .u.b = 1}, g_false = {.t = JV_BOOL, .u.b = 0};

static jv *jv_new(jj_ctx *c, jv_type t) {
    jv *v = jj_alloc(c->a, sizeof *v);
    v->t = t;
    return v;
}
jv *jv_undef(jj_ctx *c, const char *name) {
    jv *v = jv_new(c, JV_UNDEF);
    v->u.undef.name = name;
    return v;
}
jv *jv_undef_of(jj_ctx *c, jv *obj, jv *key, int attr) {
    jv *v = jv_new(c, JV_UNDEF);
    v->u.undef.obj = obj, v->u.undef.key = key, v->u.undef.attr = attr;
    return v;
}

/* jinja2: "'x' is undefined", "'dict object' has no attribute 'y'",
 * "None has no element 0" */
const char *jj_undef_message(jj_ctx *c, jv *v) {
    jj_buf b = {0};
    if (!v->u.undef.obj) {
        jj_buf_addc(c, &b, "'");
        jj_buf_addc(c, &b, v->u.undef.name ? v->u.undef.name : "value");
        jj_buf_addc(c, &b, "' is undefined");
        return b.s;
    }
    char type[48];
    jv *o = v->u.undef.obj;
    if (o->t == JV_NONE) snprintf(type, sizeof type, "None");
    else snprintf(type, sizeof type, "%s object", jv_type_name(o));
    if (v->u.undef.attr) {
        jj_buf_addc(c, &b, "'");
        jj_buf_addc(c, &b, type);
        jj_buf_addc(c, &b, "' has no attribute ");
    } else {
        jj_buf_addc(c, &b, type);
        jj_buf_addc(c, &b, " has no element ");
    }
    jv_repr_append(c, &b, v->u.undef.key);
    return b.s;
}
jv *jv_none(void) { return &g_none; }
jv *jv_bool(int b) { return b ? &g_true : &g_false; }
jv *jv_int(jj_ctx *c, long long i) {
    jv *v = jv_new(c, JV_INT);
    v->u.i = i;
    return v;
}
jv *jv_float(jj_ctx *c, double f) {
    jv *v = jv_new(c, JV_FLOAT);
    v->u.f = f;
    return v;
}
jv *jv_str_ref(jj_ctx *c, const char *s, size_t n) {
    if (n > c->lim->max_output) jj_fail(c, "a string longer than the output bound (%zu bytes)", c->lim->max_output);
    jv *v = jv_new(c, JV_STR);
    v->u.str.s = s, v->u.str.n = n;
    return v;
}
jv *jv_str(jj_ctx *c, const char *s, size_t n) {
    if (n > c->lim->max_output) jj_fail(c, "a string longer than the output bound (%zu bytes)", c->lim->max_output);
    return jv_str_ref(c, jj_strndup(c->a, s, n), n);
}
jv *jv_cstr(jj_ctx *c, const char *s) { return jv_str_ref(c, s, strlen(s)); }
jv *jv_list(jj_ctx *c) { return jv_new(c, JV_LIST); }
jv *jv_dict(jj_ctx *c) { return jv_new(c, JV_DICT); }
jv *jv_func(jj_ctx *c, const char *name, jj_builtin fn, jv *self) {
    jv *v = jv_new(c, JV_FUNC);
    v->u.fn.fn = fn, v->u.fn.self = self, v->u.fn.name = name;
    return v;
}

void jv_list_push(jj_ctx *c, jv *l, jv *v) {
    if (l->u.list.n == l->u.list.cap) {
        int cap = l->u.list.cap ? l->u.list.cap * 2 : 4;
        jv **p = jj_alloc(c->a, (size_t)cap * sizeof *p);
        if (l->u.list.n) memcpy(p, l->u.list.items, (size_t)l->u.list.n * sizeof *p);
        l->u.list.items = p, l->u.list.cap = cap;
    }
    l->u.list.items[l->u.list.n++] = v;
}

/* Dicts are small (a message's fields): a linear search keeps the order. */
jv *jv_dict_getv(jv *d, jv *k) {
    for (int i = 0; i < d->u.dict.n; i++)
        if (jv_equal(d->u.dict.keys[i], k)) return d->u.dict.vals[i];
    return NULL;
}
jv *jv_dict_get(jv *d, const char *k, size_t n) {
    for (int i = 0; i < d->u.dict.n; i++) {
        jv *key = d->u.dict.keys[i];
        if (key->t == JV_STR && key->u.str.n == n && !memcmp(key->u.str.s, k, n)) return d->u.dict.vals[i];
    }
    return NULL;
}
void jv_dict_set(jj_ctx *c, jv *d, jv *k, jv *v) {
    for (int i = 0; i < d->u.dict.n; i++)
        if (jv_equal(d->u.dict.keys[i], k)) {
            d->u.dict.vals[i] = v;
            return;
        }
    if (d->u.dict.n == d->u.dict.cap) {
        int cap = d->u.dict.cap ? d->u.dict.cap * 2 : 4;
        jv **pk = jj_alloc(c->a, (size_t)cap * sizeof *pk), **pv = jj_alloc(c->a, (size_t)cap * sizeof *pv);
        if (d->u.dict.n) {
            memcpy(pk, d->u.dict.keys, (size_t)d->u.dict.n * sizeof *pk);
            memcpy(pv, d->u.dict.vals, (size_t)d->u.dict.n * sizeof *pv);
        }
        d->u.dict.keys = pk, d->u.dict.vals = pv, d->u.dict.cap = cap;
    }
    d->u.dict.keys[d->u.dict.n] = k;
    d->u.dict.vals[d->u.dict.n++] = v;
}
void jv_dict_setc(jj_ctx *c, jv *d, const char *k, jv *v) { jv_dict_set(c, d, jv_cstr(c, k), v); }

/* ---- Python's truth, equality ---- */
int jv_truthy(jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0;
    case JV_STR: return v->u.str.n != 0;
    case JV_LIST: return v->u.list.n != 0 || v->u.list.gen;
    case JV_DICT: return v->u.dict.n != 0 || v->u.dict.is_ns;
    case JV_FUNC: case JV_LOOP: return 1;
    }
    return 0;
}
int jv_is_num(jv *v) { return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL; }
double jv_num(jv *v) { return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : v->u.b; }

/* Python's ==; values nested deeper than 1000 (a list built inside itself
 * by a loop) compare unequal rather than run the stack out */
static int equal_at(jv *x, jv *y, int depth);
int jv_equal(jv *x, jv *y) { return equal_at(x, y, 0); }
static int equal_at(jv *x, jv *y, int depth) {
    if (x == y) return 1;
    if (depth > 1000) return 0;
    if (jv_is_num(x) && jv_is_num(y)) {
        if (x->t != JV_FLOAT && y->t != JV_FLOAT)
            return (x->t == JV_INT ? x->u.i : x->u.b) == (y->t == JV_INT ? y->u.i : y->u.b);
        return jv_num(x) == jv_num(y);
    }
    if (x->t != y->t) return 0;
    switch (x->t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return x->u.str.n == y->u.str.n && !memcmp(x->u.str.s, y->u.str.s, x->u.str.n);
    case JV_LIST:
        if (x->u.list.n != y->u.list.n) return 0;
        for (int i = 0; i < x->u.list.n; i++)
            if (!equal_at(x->u.list.items[i], y->u.list.items[i], depth + 1)) return 0;
        return 1;
    case JV_DICT:
        if (x->u.dict.n != y->u.dict.n || x->u.dict.is_ns || y->u.dict.is_ns) return 0;
        for (int i = 0; i < x->u.dict.n; i++) {
            jv *o = jv_dict_getv(y, x->u.dict.keys[i]);
            if (!o || !equal_at(x->u.dict.vals[i], o, depth + 1)) return 0;
        }
        return 1;
    default: return 0;
    }
}

const char *jv_type_name(jv *v) {
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "function", "LoopContext"};
    if (v->t == JV_LIST && v->u.list.tuple) return "tuple";
    if (v->t == JV_LIST && v->u.list.gen) return "generator";
    if (v->t == JV_LIST && v->u.list.view) return v->u.list.view == 1 ? "dict_items" : v->u.list.view == 2 ? "dict_keys" : "dict_values";
    if (v->t == JV_DICT && v->u.dict.is_ns) return "Namespace";
    return names[v->t];
}

/* ---- buffers ---- */
void jj_buf_add(jj_ctx *c, jj_buf *b, const char *s, size_t n) {
    if (b->n + n > c->lim->max_output)
        jj_fail(c, "output longer than the bound of %zu bytes", c->lim->max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = jj_alloc(c->a, cap);
        if (b->n) memcpy(p, b->s, b->n);
        b->s = p, b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
void jj_buf_addc(jj_ctx *c, jj_buf *b, const char *s) { jj_buf_add(c, b, s, strlen(s)); }

/* ---- UTF-8 ---- */
size_t jj_u8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}
size_t jj_u8_off(const char *s, size_t n, size_t i) {
    size_t k = 0, b = 0;
    for (; b < n; b++) {
        if (((unsigned char)s[b] & 0xC0) != 0x80) {
            if (k == i) return b;
            k++;
        }
    }
    return n;
}

/* ---- Python's float repr: the shortest digits that read back ---- */
static void float_repr(double f, char *out, size_t cap, int json) {
    if (isnan(f)) { snprintf(out, cap, "%s", json ? "NaN" : "nan"); return; }
    if (isinf(f)) { snprintf(out, cap, "%s", f < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf")); return; }
    if (f == 0) { snprintf(out, cap, "%s", signbit(f) ? "-0.0" : "0.0"); return; }
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e: [-]d[.ddd]e[+-]XX: the digits and the decimal exponent */
    char digits[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    digits[nd] = 0;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp10 >= -5 + 1 && exp10 < 16) { /* repr's fixed notation: 1e-4 <= |f| < 1e16 */
        if (exp10 < 0) {
            *o++ = '0', *o++ = '.';
            for (int i = 0; i < -exp10 - 1; i++) *o++ = '0';
            memcpy(o, digits, (size_t)nd), o += nd;
        } else {
            for (int i = 0; i <= exp10; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp10 + 1) memcpy(o, digits + exp10 + 1, (size_t)(nd - exp10 - 1)), o += nd - exp10 - 1;
            else *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) *o++ = '.', memcpy(o, digits + 1, (size_t)(nd - 1)), o += nd - 1;
        snprintf(o, cap - (size_t)(o - out), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

/* ---- str() and repr() ---- */
static void str_repr(jj_ctx *c, jj_buf *b, const char *s, size_t n) {
    int sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char qc = sq && !dq ? '"' : '\'';
    jj_buf_add(c, b, &qc, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        if (ch == '\\') jj_buf_addc(c, b, "\\\\");
        else if (ch == (unsigned char)qc) { tmp[0] = '\\', tmp[1] = (char)qc; jj_buf_add(c, b, tmp, 2); }
        else if (ch == '\n') jj_buf_addc(c, b, "\\n");
        else if (ch == '\r') jj_buf_addc(c, b, "\\r");
        else if (ch == '\t') jj_buf_addc(c, b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) { snprintf(tmp, sizeof tmp, "\\x%02x", ch); jj_buf_addc(c, b, tmp); }
        else jj_buf_add(c, b, (const char *)&ch, 1);
    }
    jj_buf_add(c, b, &qc, 1);
}

static void append_scalar(jj_ctx *c, jj_buf *b, jv *v, int repr) {
    char tmp[64];
    switch (v->t) {
    case JV_UNDEF: break;
    case JV_NONE: jj_buf_addc(c, b, "None"); break;
    case JV_BOOL: jj_buf_addc(c, b, v->u.b ? "True" : "False"); break;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", v->u.i); jj_buf_addc(c, b, tmp); break;
    case JV_FLOAT: float_repr(v->u.f, tmp, sizeof tmp, 0); jj_buf_addc(c, b, tmp); break;
    case JV_STR:
        if (repr) str_repr(c, b, v->u.str.s, v->u.str.n);
        else jj_buf_add(c, b, v->u.str.s, v->u.str.n);
        break;
    case JV_LOOP: jj_buf_addc(c, b, "<LoopContext>"); break;
    case JV_FUNC:
        snprintf(tmp, sizeof tmp, "<function %.40s>", v->u.fn.name ? v->u.fn.name : "");
        jj_buf_addc(c, b, tmp);
        break;
    default: break;
    }
}

void jv_repr_append(jj_ctx *c, jj_buf *b, jv *v) {
    jj_step(c);
    /* a namespace holding itself, a list nested a million deep: bounded */
    if (++c->depth > 4 * c->lim->max_depth)
        jj_fail(c, "a value nested deeper than the bound of %d to print", 4 * c->lim->max_depth);
    if (v->t == JV_LIST && v->u.list.gen) {
        jj_buf_addc(c, b, "<generator object>");
    } else if (v->t == JV_LIST && v->u.list.view) {
        jj_buf_addc(c, b, jv_type_name(v));
        jj_buf_addc(c, b, "([");
        for (int i = 0; i < v->u.list.n; i++) {
            if (i) jj_buf_addc(c, b, ", ");
            jv_repr_append(c, b, v->u.list.items[i]);
        }
        jj_buf_addc(c, b, "])");
    } else if (v->t == JV_LIST) {
        jj_buf_addc(c, b, v->u.list.tuple ? "(" : "[");
        for (int i = 0; i < v->u.list.n; i++) {
            if (i) jj_buf_addc(c, b, ", ");
            jv_repr_append(c, b, v->u.list.items[i]);
        }
        if (v->u.list.tuple && v->u.list.n == 1) jj_buf_addc(c, b, ",");
        jj_buf_addc(c, b, v->u.list.tuple ? ")" : "]");
    } else if (v->t == JV_DICT && v->u.dict.is_ns) {
        jj_buf_addc(c, b, "<Namespace ");
        for (int i = 0; i < v->u.dict.n; i++) {
            if (i) jj_buf_addc(c, b, ", ");
            jv_str_append(c, b, v->u.dict.keys[i]);
            jj_buf_addc(c, b, "=");
            jv_repr_append(c, b, v->u.dict.vals[i]);
        }
        jj_buf_addc(c, b, ">");
    } else if (v->t == JV_DICT) {
        jj_buf_addc(c, b, "{");
        for (int i = 0; i < v->u.dict.n; i++) {
            if (i) jj_buf_addc(c, b, ", ");
            jv_repr_append(c, b, v->u.dict.keys[i]);
            jj_buf_addc(c, b, ": ");
            jv_repr_append(c, b, v->u.dict.vals[i]);
        }
        jj_buf_addc(c, b, "}");
    } else if (v->t == JV_UNDEF) {
        jj_buf_addc(c, b, "Undefined");
    } else {
        append_scalar(c, b, v, 1);
    }
    c->depth--;
}

void jv_str_append(jj_ctx *c, jj_buf *b, jv *v) {
    if (v->t == JV_LIST || v->t == JV_DICT) jv_repr_append(c, b, v);
    else append_scalar(c, b, v, 0);
}

jv *jv_to_str(jj_ctx *c, jv *v) {
    if (v->t == JV_STR) return v;
    jj_buf b = {0};
    jv_str_append(c, &b, v);
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}

jv *jv_escape(jj_ctx *c, jv *v) {
    if (v->t == JV_STR && v->u.str.safe) return v;
    jv *s = jv_to_str(c, v);
    jj_buf b = {0};
    size_t run = 0;
    for (size_t i = 0; i < s->u.str.n; i++) {
        const char *e = NULL;
        switch (s->u.str.s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        }
        if (e) {
            jj_buf_add(c, &b, s->u.str.s + run, i - run);
            jj_buf_addc(c, &b, e);
            run = i + 1;
        }
    }
    jj_buf_add(c, &b, s->u.str.s + run, s->u.str.n - run);
    jv *r = jv_str_ref(c, b.s, b.n);
    r->u.str.safe = 1;
    return r;
}

/* ---- json.dumps ---- */
static void json_str(jj_ctx *c, jj_buf *b, const char *s, size_t n) {
    jj_buf_addc(c, b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", ch), esc = tmp;
        }
        if (!esc && ch >= 0x80 && c->json_ascii) {
            /* ensure_ascii: the code point as \uXXXX (a surrogate pair above the BMP) */
            unsigned u = 0;
            size_t k = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
            if (i + k > n) k = 1;
            u = k == 1 ? ch : k == 2 ? ch & 0x1F : k == 3 ? ch & 0x0F : ch & 0x07;
            for (size_t j = 1; j < k; j++) u = u << 6 | ((unsigned char)s[i + j] & 0x3F);
            char esc2[16];
            if (u >= 0x10000) {
                u -= 0x10000;
                snprintf(esc2, sizeof esc2, "\\u%04x\\u%04x", 0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
            } else {
                snprintf(esc2, sizeof esc2, "\\u%04x", u);
            }
            jj_buf_add(c, b, s + run, i - run);
            jj_buf_addc(c, b, esc2);
            i += k - 1;
            run = i + 1;
            continue;
        }
        if (esc) {
            jj_buf_add(c, b, s + run, i - run);
            jj_buf_addc(c, b, esc);
            run = i + 1;
        }
    }
    jj_buf_add(c, b, s + run, n - run);
    jj_buf_addc(c, b, "\"");
}

static void json_newline(jj_ctx *c, jj_buf *b, int indent, int level) {
    jj_buf_addc(c, b, "\n");
    for (int i = 0; i < indent * level; i++) jj_buf_addc(c, b, " ");
}

static int key_cmp(const void *x, const void *y) {
    jv *a = *(jv *const *)x, *b = *(jv *const *)y;
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->u.str.n < b->u.str.n ? a->u.str.n : b->u.str.n;
        int r = memcmp(a->u.str.s, b->u.str.s, n);
        return r ? r : (a->u.str.n > b->u.str.n) - (a->u.str.n < b->u.str.n);
    }
    return 0;
}

void jv_json_append(jj_ctx *c, jj_buf *b, jv *v, int indent, const char *item_sep, const char *key_sep,
                    int sort_keys, int level) {
    char tmp[64];
    jj_step(c);
    if (level > c->lim->max_depth) jj_fail(c, "tojson: nesting deeper than the bound of %d", c->lim->max_depth);
    switch (v->t) {
    case JV_NONE: jj_buf_addc(c, b, "null"); break;
    case JV_BOOL: jj_buf_addc(c, b, v->u.b ? "true" : "false"); break;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", v->u.i); jj_buf_addc(c, b, tmp); break;
    case JV_FLOAT: float_repr(v->u.f, tmp, sizeof tmp, 1); jj_buf_addc(c, b, tmp); break;
    case JV_STR: json_str(c, b, v->u.str.s, v->u.str.n); break;
    case JV_LIST:
        if (v->u.list.gen || v->u.list.view) jj_fail(c, "Object of type %s is not JSON serializable", jv_type_name(v));
        if (!v->u.list.n) { jj_buf_addc(c, b, "[]"); break; }
        jj_buf_addc(c, b, "[");
        for (int i = 0; i < v->u.list.n; i++) {
            if (i) jj_buf_addc(c, b, item_sep);
            if (indent >= 0) json_newline(c, b, indent, level + 1);
            jv_json_append(c, b, v->u.list.items[i], indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(c, b, indent, level);
        jj_buf_addc(c, b, "]");
        break;
    case JV_DICT: {
        if (v->u.dict.is_ns) jj_fail(c, "Object of type Namespace is not JSON serializable");
        if (!v->u.dict.n) { jj_buf_addc(c, b, "{}"); break; }
        int n = v->u.dict.n;
        int *order = jj_alloc(c->a, (size_t)n * sizeof *order);
        for (int i = 0; i < n; i++) order[i] = i;
        if (sort_keys) { /* a stable insertion sort of the keys */
            for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && key_cmp(&v->u.dict.keys[order[j - 1]], &v->u.dict.keys[order[j]]) > 0; j--) {
                    int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
                }
        }
        jj_buf_addc(c, b, "{");
        for (int i = 0; i < n; i++) {
            jv *k = v->u.dict.keys[order[i]];
            if (i) jj_buf_addc(c, b, item_sep);
            if (indent >= 0) json_newline(c, b, indent, level + 1);
            if (k->t == JV_STR) json_str(c, b, k->u.str.s, k->u.str.n);
            else if (k->t == JV_INT || k->t == JV_FLOAT || k->t == JV_BOOL || k->t == JV_NONE) {
                jj_buf tb = {0};
                jv_json_append(c, &tb, k, -1, ", ", ": ", 0, level);
                json_str(c, b, tb.s, tb.n);
            } else jj_fail(c, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
            jj_buf_addc(c, b, key_sep);
            jv_json_append(c, b, v->u.dict.vals[order[i]], indent, item_sep, key_sep, sort_keys, level + 1);
        }
        if (indent >= 0) json_newline(c, b, indent, level);
        jj_buf_addc(c, b, "}");
        break;
    }
    default: jj_fail(c, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

/* ---- JSON in (the context) ---- */
static jv *from_json(jj_ctx *c, json_t *j, int depth) {
    if (depth > c->lim->max_depth) jj_fail(c, "JSON nested deeper than the bound of %d", c->lim->max_depth);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv *d = jv_dict(c);
        const char *k;
        json_t *x;
        json_object_foreach(j, k, x) jv_dict_set(c, d, jv_str(c, k, strlen(k)), from_json(c, x, depth + 1));
        return d;
    }
    case JSON_ARRAY: {
        jv *l = jv_list(c);
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x) jv_list_push(c, l, from_json(c, x, depth + 1));
        return l;
    }
    case JSON_STRING: return jv_str(c, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int(c, (long long)json_integer_value(j));
    case JSON_REAL: return jv_float(c, json_real_value(j));
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    default: return jv_none();
    }
}

jv *jv_from_json_text(jj_ctx *c, const char *text, size_t n) {
    json_error_t err;
    json_t *j = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!j) return NULL;
    /* the jansson tree is freed whatever happens: a failure converting it
     * (a bound) comes here first (c->a->fail is &c->fail) */
    jmp_buf saved;
    memcpy(saved, c->fail, sizeof saved);
    if (setjmp(c->fail)) {
        memcpy(c->fail, saved, sizeof saved);
        json_decref(j);
        longjmp(c->fail, 1);
    }
    jv *v = from_json(c, j, 0);
    memcpy(c->fail, saved, sizeof saved);
    json_decref(j);
    return v;
}

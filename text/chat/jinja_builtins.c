/* The Jinja engine's builtins: the filters and tests chat templates use
 * (jinja2's, with transformers' tojson), attribute access with Python's
 * str, dict and list methods (the sandbox's: a method that would modify a
 * list or dict is refused, as ImmutableSandboxedEnvironment does), and the
 * globals (range, dict, namespace, raise_exception, strftime_now). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_impl.h"

/* ---- arguments ---- */
jv *jj_arg(jj_args *a, int pos, const char *name) {
    int k = 0;
    for (int i = 0; i < a->n; i++) {
        if (a->names[i]) {
            if (name && !strcmp(a->names[i], name)) return a->v[i];
        } else if (k++ == pos) {
            return a->v[i];
        }
    }
    return NULL;
}
static const char *arg_str(jj_ctx *c, jj_args *a, int pos, const char *name, const char *what) {
    jv *v = jj_arg(a, pos, name);
    if (!v || v->t == JV_NONE) return NULL;
    if (v->t != JV_STR) jj_fail(c, "%s: expected a string, got %s", what, jv_type_name(v));
    return jj_strndup(c->a, v->u.str.s, v->u.str.n);
}
static long long arg_int(jj_ctx *c, jj_args *a, int pos, const char *name, long long dflt) {
    jv *v = jj_arg(a, pos, name);
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    jj_fail(c, "expected an integer, got %s", jv_type_name(v));
}
static int arg_bool(jj_args *a, int pos, const char *name, int dflt) {
    jv *v = jj_arg(a, pos, name);
    return v ? jv_truthy(v) : dflt;
}
static jv *need_str(jj_ctx *c, jv *v, const char *what) {
    if (v->t == JV_UNDEF) jj_fail(c, "%s", jj_undef_message(c, v));
    if (v->t != JV_STR) jj_fail(c, "%s: expected a string, got %s", what, jv_type_name(v));
    return v;
}

/* ---- UTF-8 code points and Python's whitespace ---- */
static size_t cp_at(const char *s, size_t n, size_t i, unsigned *cp) {
    unsigned char ch = (unsigned char)s[i];
    size_t k = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
    if (i + k > n) k = 1;
    unsigned u = k == 1 ? ch : k == 2 ? ch & 0x1F : k == 3 ? ch & 0x0F : ch & 0x07;
    for (size_t j = 1; j < k; j++) u = u << 6 | ((unsigned char)s[i + j] & 0x3F);
    *cp = u;
    return k;
}
static size_t cp_before(const char *s, size_t i) {
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80 && i - j < 4) j--;
    return j;
}
static int py_space(unsigned u) {
    return (u >= 9 && u <= 13) || u == ' ' || (u >= 0x1c && u <= 0x1f) || u == 0x85 || u == 0xa0 || u == 0x1680 ||
           (u >= 0x2000 && u <= 0x200a) || u == 0x2028 || u == 0x2029 || u == 0x202f || u == 0x205f || u == 0x3000;
}
static int in_chars(unsigned u, const char *chars) {
    size_t n = strlen(chars);
    for (size_t i = 0; i < n;) {
        unsigned x;
        i += cp_at(chars, n, i, &x);
        if (x == u) return 1;
    }
    return 0;
}
/* str.strip / lstrip / rstrip (chars NULL: whitespace) */
static jv *strip(jj_ctx *c, jv *s, const char *chars, int left, int right) {
    const char *p = s->u.str.s;
    size_t b = 0, e = s->u.str.n;
    while (left && b < e) {
        unsigned u;
        size_t k = cp_at(p, e, b, &u);
        if (chars ? !in_chars(u, chars) : !py_space(u)) break;
        b += k;
    }
    while (right && e > b) {
        size_t j = cp_before(p, e);
        unsigned u;
        cp_at(p, e, j, &u);
        if (chars ? !in_chars(u, chars) : !py_space(u)) break;
        e = j;
    }
    return jv_str_ref(c, p + b, e - b);
}

static jv *case_map(jj_ctx *c, jv *s, int mode) { /* 0 lower, 1 upper, 2 capitalize, 3 str.title, 4 jinja's title */
    char *o = jj_strndup(c->a, s->u.str.s, s->u.str.n);
    int prev_letter = 0, word_start = 1;
    for (size_t i = 0; i < s->u.str.n; i++) {
        char ch = o[i];
        int letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        int up;
        if (mode == 0) up = 0;
        else if (mode == 1) up = 1;
        else if (mode == 2) up = i == 0;
        else if (mode == 3) up = !prev_letter;
        else up = word_start;
        if (up && ch >= 'a' && ch <= 'z') o[i] = (char)(ch - 32);
        if (!up && ch >= 'A' && ch <= 'Z') o[i] = (char)(ch + 32);
        prev_letter = letter || ((unsigned char)ch >= 0x80);
        /* jinja's title: words begin after whitespace, -, (, {, [, < */
        word_start = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == '-' ||
                     ch == '(' || ch == '{' || ch == '[' || ch == '<';
    }
    return jv_str_ref(c, o, s->u.str.n);
}

static jv *replace(jj_ctx *c, jv *s, jv *old, jv *new_, long long count) {
    jj_work(c, s->u.str.n);
    jj_buf b = {0};
    size_t n = s->u.str.n, on = old->u.str.n, i = 0;
    long long done = 0;
    if (on == 0) { /* Python inserts new between every code point */
        for (; i <= n; done++) {
            if (count >= 0 && done >= count) break;
            jj_step(c);
            jj_buf_add(c, &b, new_->u.str.s, new_->u.str.n);
            if (i == n) { i++; break; }
            unsigned u;
            size_t k = cp_at(s->u.str.s, n, i, &u);
            jj_buf_add(c, &b, s->u.str.s + i, k);
            i += k;
        }
        if (i <= n) jj_buf_add(c, &b, s->u.str.s + i, n - i);
        return jv_str_ref(c, b.s ? b.s : "", b.n);
    }
    for (const char *at; i < n && (count < 0 || done < count); i = (size_t)(at - s->u.str.s) + on, done++) {
        if (!(at = memmem(s->u.str.s + i, n - i, old->u.str.s, on))) break;
        jj_step(c);
        jj_buf_add(c, &b, s->u.str.s + i, (size_t)(at - s->u.str.s) - i);
        jj_buf_add(c, &b, new_->u.str.s, new_->u.str.n);
    }
    if (i < n) jj_buf_add(c, &b, s->u.str.s + i, n - i);
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}

/* str.split / rsplit */
static jv *split(jj_ctx *c, jv *s, jv *sep, long long maxsplit, int from_right) {
    jv *l = jv_list(c);
    const char *p = s->u.str.s;
    size_t n = s->u.str.n;
    if (sep && sep->t != JV_NONE) {
        if (sep->t != JV_STR) jj_fail(c, "split: the separator must be a string");
        size_t sn = sep->u.str.n;
        if (!sn) jj_fail(c, "empty separator");
        jj_work(c, n);
        if (!from_right) {
            size_t start = 0;
            long long k = 0;
            for (const char *at; (maxsplit < 0 || k < maxsplit) && (at = memmem(p + start, n - start, sep->u.str.s, sn));
                 k++) {
                jj_step(c);
                jv_list_push(c, l, jv_str_ref(c, p + start, (size_t)(at - p) - start));
                start = (size_t)(at - p) + sn;
            }
            jv_list_push(c, l, jv_str_ref(c, p + start, n - start));
        } else {
            /* from the right: the string and the separator reversed, searched
             * forward (memmem, linear; a scan back quadratic on "aaa...") */
            jv *r = jv_list(c);
            char *rp = jj_alloc(c->a, n + 1), *rs = jj_alloc(c->a, sn + 1);
            for (size_t i = 0; i < n; i++) rp[i] = p[n - 1 - i];
            for (size_t i = 0; i < sn; i++) rs[i] = sep->u.str.s[sn - 1 - i];
            size_t from = 0; /* in rp: what is left of p is p[0, n - from) */
            long long k = 0;
            for (const char *at; (maxsplit < 0 || k < maxsplit) && (at = memmem(rp + from, n - from, rs, sn)); k++) {
                jj_step(c);
                const size_t q = (size_t)(at - rp); /* p's separator at [n - q - sn, n - q) */
                jv_list_push(c, r, jv_str_ref(c, p + n - q, q - from));
                from = q + sn;
            }
            jv_list_push(c, r, jv_str_ref(c, p, n - from));
            for (int i = r->u.list.n - 1; i >= 0; i--) jv_list_push(c, l, r->u.list.items[i]);
        }
        return l;
    }
    /* runs of whitespace (ASCII here) */
    if (!from_right) {
        size_t i = 0;
        long long k = 0;
        for (;;) {
            while (i < n && py_space((unsigned char)p[i])) i++;
            if (i >= n) break;
            if (maxsplit >= 0 && k >= maxsplit) {
                size_t e = n;
                while (e > i && py_space((unsigned char)p[e - 1])) e--;
                jv_list_push(c, l, jv_str_ref(c, p + i, e - i));
                break;
            }
            size_t j = i;
            while (j < n && !py_space((unsigned char)p[j])) j++;
            jj_step(c);
            jv_list_push(c, l, jv_str_ref(c, p + i, j - i));
            i = j, k++;
        }
    } else {
        jv *r = jv_list(c);
        size_t e = n;
        long long k = 0;
        for (;;) {
            while (e > 0 && py_space((unsigned char)p[e - 1])) e--;
            if (!e) break;
            if (maxsplit >= 0 && k >= maxsplit) {
                size_t b = 0;
                while (b < e && py_space((unsigned char)p[b])) b++;
                jv_list_push(c, r, jv_str_ref(c, p + b, e - b));
                break;
            }
            size_t b = e;
            while (b > 0 && !py_space((unsigned char)p[b - 1])) b--;
            jj_step(c);
            jv_list_push(c, r, jv_str_ref(c, p + b, e - b));
            e = b, k++;
        }
        for (int i = r->u.list.n - 1; i >= 0; i--) jv_list_push(c, l, r->u.list.items[i]);
    }
    return l;
}

static int affix(jv *s, jv *x, int end) {
    if (x->t != JV_STR || x->u.str.n > s->u.str.n) return 0;
    return !memcmp(s->u.str.s + (end ? s->u.str.n - x->u.str.n : 0), x->u.str.s, x->u.str.n);
}

/* str.format: {} {0} {name}, {{ and }}; a format spec is not supported */
static jv *str_format(jj_ctx *c, jv *s, jj_args *a) {
    jj_buf b = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.n;
    int auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { jj_buf_addc(c, &b, "{"); i++; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { jj_buf_addc(c, &b, "}"); i++; continue; }
        if (p[i] != '{') { jj_buf_add(c, &b, p + i, 1); continue; }
        size_t j = i + 1;
        while (j < n && p[j] != '}') j++;
        if (j >= n) jj_fail(c, "Single '{' encountered in format string");
        char field[64];
        size_t fl = j - i - 1 < sizeof field - 1 ? j - i - 1 : sizeof field - 1;
        memcpy(field, p + i + 1, fl);
        field[fl] = 0;
        if (strchr(field, ':') || strchr(field, '!')) jj_fail(c, "str.format: format specs are not supported");
        jv *v;
        if (!fl) v = jj_arg(a, auto_i++, NULL);
        else if (field[0] >= '0' && field[0] <= '9') v = jj_arg(a, atoi(field), NULL);
        else v = jj_arg(a, 1 << 30, field);
        if (!v) jj_fail(c, "str.format: no argument for {%s}", field);
        jv_str_append(c, &b, v);
        i = j;
    }
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}

/* ---- methods ---- */
static jv *m_unsafe(jj_ctx *c, jv *self, jj_args *a) {
    (void)a;
    jj_fail(c, "access to attribute '%s' of '%s' object is unsafe.", self->u.list.items[0]->u.str.s,
            self->u.list.items[1]->u.str.s);
}

#define METHOD(name) static jv *m_##name(jj_ctx *c, jv *self, jj_args *a)
METHOD(strip) { return strip(c, self, arg_str(c, a, 0, NULL, "strip"), 1, 1); }
METHOD(lstrip) { return strip(c, self, arg_str(c, a, 0, NULL, "lstrip"), 1, 0); }
METHOD(rstrip) { return strip(c, self, arg_str(c, a, 0, NULL, "rstrip"), 0, 1); }
METHOD(split) { return split(c, self, jj_arg(a, 0, "sep"), arg_int(c, a, 1, "maxsplit", -1), 0); }
METHOD(rsplit) { return split(c, self, jj_arg(a, 0, "sep"), arg_int(c, a, 1, "maxsplit", -1), 1); }
METHOD(lower) { (void)a; return case_map(c, self, 0); }
METHOD(upper) { (void)a; return case_map(c, self, 1); }
METHOD(capitalize) { (void)a; return case_map(c, self, 2); }
METHOD(title) { (void)a; return case_map(c, self, 3); }
METHOD(format) { return str_format(c, self, a); }
static jv *starts_ends(jj_ctx *c, jv *self, jj_args *a, int end) {
    jv *x = jj_arg(a, 0, NULL);
    if (!x) jj_fail(c, "%s takes at least 1 argument", end ? "endswith" : "startswith");
    if (x->t == JV_LIST) {
        for (int i = 0; i < x->u.list.n; i++)
            if (affix(self, x->u.list.items[i], end)) return jv_bool(1);
        return jv_bool(0);
    }
    if (x->t != JV_STR) jj_fail(c, "%s arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", jv_type_name(x));
    return jv_bool(affix(self, x, end));
}
METHOD(startswith) { return starts_ends(c, self, a, 0); }
METHOD(endswith) { return starts_ends(c, self, a, 1); }
METHOD(replace) {
    jv *o = jj_arg(a, 0, NULL), *n = jj_arg(a, 1, NULL);
    if (!o || !n || o->t != JV_STR || n->t != JV_STR) jj_fail(c, "replace: expected two strings");
    return replace(c, self, o, n, arg_int(c, a, 2, "count", -1));
}
METHOD(find) {
    jv *x = jj_arg(a, 0, NULL);
    if (!x || x->t != JV_STR) jj_fail(c, "find: expected a string");
    jj_work(c, self->u.str.n);
    const char *at = memmem(self->u.str.s, self->u.str.n, x->u.str.s, x->u.str.n);
    return jv_int(c, at ? (long long)jj_u8_len(self->u.str.s, (size_t)(at - self->u.str.s)) : -1);
}
METHOD(count_str) {
    jv *x = jj_arg(a, 0, NULL);
    if (!x || x->t != JV_STR) jj_fail(c, "count: expected a string");
    long long k = 0;
    jj_work(c, self->u.str.n);
    if (!x->u.str.n) return jv_int(c, (long long)jj_u8_len(self->u.str.s, self->u.str.n) + 1);
    for (const char *at = self->u.str.s, *end = at + self->u.str.n;
         (at = memmem(at, (size_t)(end - at), x->u.str.s, x->u.str.n)); at += x->u.str.n)
        k++;
    return jv_int(c, k);
}
METHOD(join_str) {
    jv *x = jj_arg(a, 0, NULL);
    if (!x) jj_fail(c, "join takes exactly one argument");
    jv *items = jj_iterable_list(c, x);
    jj_buf b = {0};
    for (int i = 0; i < items->u.list.n; i++) {
        if (i) jj_buf_add(c, &b, self->u.str.s, self->u.str.n);
        jv *it = items->u.list.items[i];
        if (it->t != JV_STR) jj_fail(c, "sequence item %d: expected str instance, %s found", i, jv_type_name(it));
        jj_buf_add(c, &b, it->u.str.s, it->u.str.n);
    }
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}
static int all_chars(jv *s, int (*pred)(int)) {
    if (!s->u.str.n) return 0;
    for (size_t i = 0; i < s->u.str.n; i++)
        if (!pred((unsigned char)s->u.str.s[i])) return 0;
    return 1;
}
static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }
static int is_alpha(int ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch >= 0x80; }
static int is_space(int ch) { return py_space((unsigned)ch); }
METHOD(isdigit) { (void)a, (void)c; return jv_bool(all_chars(self, is_digit)); }
METHOD(isalpha) { (void)a, (void)c; return jv_bool(all_chars(self, is_alpha)); }
METHOD(isspace) { (void)a, (void)c; return jv_bool(all_chars(self, is_space)); }
METHOD(splitlines) {
    (void)a;
    jv *l = jv_list(c);
    size_t i = 0, n = self->u.str.n;
    const char *p = self->u.str.s;
    while (i < n) {
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r') j++;
        jv_list_push(c, l, jv_str_ref(c, p + i, j - i));
        if (j < n && p[j] == '\r' && j + 1 < n && p[j + 1] == '\n') j++;
        i = j + 1;
    }
    return l;
}

METHOD(items) {
    (void)a;
    jv *l = jv_list(c);
    l->u.list.view = 1;
    for (int i = 0; i < self->u.dict.n; i++) {
        jv *t = jv_list(c);
        t->u.list.tuple = 1;
        jv_list_push(c, t, self->u.dict.keys[i]);
        jv_list_push(c, t, self->u.dict.vals[i]);
        jv_list_push(c, l, t);
    }
    return l;
}
METHOD(keys) {
    (void)a;
    jv *l = jv_list(c);
    l->u.list.view = 2;
    for (int i = 0; i < self->u.dict.n; i++) jv_list_push(c, l, self->u.dict.keys[i]);
    return l;
}
METHOD(values) {
    (void)a;
    jv *l = jv_list(c);
    l->u.list.view = 3;
    for (int i = 0; i < self->u.dict.n; i++) jv_list_push(c, l, self->u.dict.vals[i]);
    return l;
}
METHOD(get) {
    jv *k = jj_arg(a, 0, NULL);
    if (!k) jj_fail(c, "get expected at least 1 argument, got 0");
    jv *v = jv_dict_getv(self, k);
    if (v) return v;
    jv *d = jj_arg(a, 1, NULL);
    return d ? d : jv_none();
}
METHOD(index_list) {
    jv *x = jj_arg(a, 0, NULL);
    for (int i = 0; x && i < self->u.list.n; i++)
        if (jv_equal(self->u.list.items[i], x)) return jv_int(c, i);
    jj_fail(c, "value is not in list");
}
METHOD(count_list) {
    jv *x = jj_arg(a, 0, NULL);
    long long k = 0;
    for (int i = 0; x && i < self->u.list.n; i++) k += jv_equal(self->u.list.items[i], x);
    return jv_int(c, k);
}

typedef struct method { const char *name; jj_builtin fn; } method;
static const method STR_METHODS[] = {
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"split", m_split}, {"rsplit", m_rsplit},
    {"lower", m_lower}, {"upper", m_upper}, {"capitalize", m_capitalize}, {"title", m_title},
    {"format", m_format}, {"startswith", m_startswith}, {"endswith", m_endswith}, {"replace", m_replace},
    {"find", m_find}, {"count", m_count_str}, {"join", m_join_str}, {"isdigit", m_isdigit},
    {"isalpha", m_isalpha}, {"isspace", m_isspace}, {"splitlines", m_splitlines}, {NULL, NULL}};
static const method DICT_METHODS[] = {{"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"get", m_get}, {NULL, NULL}};
static const method LIST_METHODS[] = {{"index", m_index_list}, {"count", m_count_list}, {NULL, NULL}};
static const char *const LIST_UNSAFE[] = {"append", "pop", "extend", "insert", "remove", "clear", "sort", "reverse", NULL};
static const char *const DICT_UNSAFE[] = {"pop", "update", "setdefault", "popitem", "clear", NULL};

static jv *find_method(jj_ctx *c, const method *m, jv *self, const char *name, size_t n) {
    for (; m->name; m++)
        if (strlen(m->name) == n && !memcmp(m->name, name, n)) return jv_func(c, m->name, m->fn, self);
    return NULL;
}
static jv *find_unsafe(jj_ctx *c, const char *const *names, jv *self, const char *name, size_t n) {
    for (; *names; names++)
        if (strlen(*names) == n && !memcmp(*names, name, n)) {
            jv *info = jv_list(c);
            jv_list_push(c, info, jv_cstr(c, *names));
            jv_list_push(c, info, jv_cstr(c, jv_type_name(self)));
            return jv_func(c, *names, m_unsafe, info);
        }
    return NULL;
}

/* obj.name as jinja2's getattr: the Python attribute (a method), else the item, else undefined */
jv *jj_getattr(jj_ctx *c, jv *obj, const char *name, size_t n) {
    jv *r = NULL;
    switch (obj->t) {
    case JV_UNDEF: jj_fail(c, "%s", jj_undef_message(c, obj));
    case JV_LOOP: return jj_loop_attr(c, obj, name, n);
    case JV_STR: r = find_method(c, STR_METHODS, obj, name, n); break;
    case JV_DICT:
        if (obj->u.dict.is_ns) {
            r = jv_dict_get(obj, name, n);
            break;
        }
        r = find_method(c, DICT_METHODS, obj, name, n);
        if (!r) r = find_unsafe(c, DICT_UNSAFE, obj, name, n);
        if (!r) r = jv_dict_get(obj, name, n);
        break;
    case JV_LIST:
        r = find_method(c, LIST_METHODS, obj, name, n);
        if (!r) r = find_unsafe(c, LIST_UNSAFE, obj, name, n);
        break;
    default: break;
    }
    return r ? r : jv_undef_of(c, obj, jv_str(c, name, n), 1);
}

jv *jj_iterable_list(jj_ctx *c, jv *v) {
    switch (v->t) {
    case JV_LIST: return v;
    case JV_UNDEF: return jv_list(c);
    case JV_DICT: {
        jv *l = jv_list(c);
        for (int i = 0; i < v->u.dict.n; i++) jv_list_push(c, l, v->u.dict.keys[i]);
        return l;
    }
    case JV_STR: {
        jv *l = jv_list(c);
        for (size_t i = 0; i < v->u.str.n;) {
            unsigned u;
            size_t k = cp_at(v->u.str.s, v->u.str.n, i, &u);
            jv_list_push(c, l, jv_str_ref(c, v->u.str.s + i, k));
            i += k;
        }
        return l;
    }
    default: jj_fail(c, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- sorting: a stable merge sort whose comparison may fail (it jumps out) ---- */
typedef struct sort_key { jv *key, *item; } sort_key;
static void merge_sort(jj_ctx *c, sort_key *x, sort_key *tmp, int n, int reverse) {
    if (n < 2) return;
    int h = n / 2;
    merge_sort(c, x, tmp, h, reverse);
    merge_sort(c, x + h, tmp, n - h, reverse);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) {
        jj_step(c);
        int cmp = jv_compare(c, x[j].key, x[i].key);
        /* stable: take the left unless the right is strictly first */
        if (reverse ? cmp > 0 : cmp < 0) tmp[k++] = x[j++];
        else tmp[k++] = x[i++];
    }
    while (i < h) tmp[k++] = x[i++];
    while (j < n) tmp[k++] = x[j++];
    memcpy(x, tmp, (size_t)n * sizeof *x);
}
static jv *fold_case(jj_ctx *c, jv *v, int case_sensitive) {
    return !case_sensitive && v->t == JV_STR ? case_map(c, v, 0) : v;
}
/* item's attribute "a.b.0" as jinja2's attrgetter: getitem per part */
static jv *attr_path(jj_ctx *c, jv *item, const char *path) {
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, '.');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        jv *key;
        if (n && strspn(p, "0123456789") >= n) key = jv_int(c, strtoll(p, NULL, 10));
        else key = jv_str(c, p, n);
        item = jj_getitem(c, item, key);
        if (!e) break;
        p = e + 1;
    }
    return item;
}

/* ---- filters ---- */
static jv *f_tojson(jj_ctx *c, jv *v, jj_args *a) {
    /* transformers: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
    jv *ind = jj_arg(a, 1, "indent"), *seps = jj_arg(a, 2, "separators");
    int indent = -1;
    if (ind && ind->t != JV_NONE) {
        if (ind->t == JV_INT) indent = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : (int)ind->u.i;
        else jj_fail(c, "tojson: indent must be an integer");
    }
    const char *item_sep = indent >= 0 ? "," : ", ", *key_sep = ": ";
    if (seps && seps->t != JV_NONE) {
        if (seps->t != JV_LIST || seps->u.list.n != 2 || seps->u.list.items[0]->t != JV_STR || seps->u.list.items[1]->t != JV_STR)
            jj_fail(c, "tojson: separators must be two strings");
        item_sep = jj_strndup(c->a, seps->u.list.items[0]->u.str.s, seps->u.list.items[0]->u.str.n);
        key_sep = jj_strndup(c->a, seps->u.list.items[1]->u.str.s, seps->u.list.items[1]->u.str.n);
    }
    jj_buf b = {0};
    c->json_ascii = arg_bool(a, 0, "ensure_ascii", 0);
    jv_json_append(c, &b, v, indent, item_sep, key_sep, arg_bool(a, 3, "sort_keys", 0), 0);
    c->json_ascii = 0;
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}
static jv *f_length(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    switch (v->t) {
    case JV_UNDEF: return jv_int(c, 0);
    case JV_STR: jj_work(c, v->u.str.n); return jv_int(c, (long long)jj_u8_len(v->u.str.s, v->u.str.n));
    case JV_LIST:
        if (v->u.list.gen) jj_fail(c, "object of type 'generator' has no len()");
        return jv_int(c, v->u.list.n);
    case JV_DICT: return jv_int(c, v->u.dict.n);
    default: jj_fail(c, "object of type '%s' has no len()", jv_type_name(v));
    }
}
static jv *f_trim(jj_ctx *c, jv *v, jj_args *a) {
    return strip(c, jv_to_str(c, v), arg_str(c, a, 0, "chars", "trim"), 1, 1);
}
static jv *f_string(jj_ctx *c, jv *v, jj_args *a) { (void)a; return jv_to_str(c, v); }
static jv *f_safe(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    jv *s = jv_to_str(c, v), *r = jv_str_ref(c, s->u.str.s, s->u.str.n);
    r->u.str.safe = 1;
    return r;
}
static jv *f_escape(jj_ctx *c, jv *v, jj_args *a) { (void)a; return jv_escape(c, v); }
static jv *f_default(jj_ctx *c, jv *v, jj_args *a) {
    jv *d = jj_arg(a, 0, "default_value");
    if (v->t == JV_UNDEF || (arg_bool(a, 1, "boolean", 0) && !jv_truthy(v))) return d ? d : jv_cstr(c, "");
    return v;
}
static jv *f_join(jj_ctx *c, jv *v, jj_args *a) {
    jv *items = jj_iterable_list(c, v);
    const char *attr = arg_str(c, a, 1, "attribute", "join");
    jv *sep = jj_arg(a, 0, "d");
    jj_buf b = {0};
    for (int i = 0; i < items->u.list.n; i++) {
        if (i && sep) jv_str_append(c, &b, sep);
        jv *it = items->u.list.items[i];
        jv_str_append(c, &b, attr ? attr_path(c, it, attr) : it);
    }
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}
static jv *f_items(jj_ctx *c, jv *v, jj_args *a) {
    if (v->t == JV_UNDEF) return jv_list(c);
    if (v->t != JV_DICT) jj_fail(c, "Can only get item pairs from a mapping.");
    jv *l = m_items(c, v, a);
    l->u.list.gen = 1, l->u.list.view = 0;
    return l;
}
static jv *f_upper(jj_ctx *c, jv *v, jj_args *a) { (void)a; return case_map(c, jv_to_str(c, v), 1); }
static jv *f_lower(jj_ctx *c, jv *v, jj_args *a) { (void)a; return case_map(c, jv_to_str(c, v), 0); }
static jv *f_title(jj_ctx *c, jv *v, jj_args *a) { (void)a; return case_map(c, jv_to_str(c, v), 4); }
static jv *f_capitalize(jj_ctx *c, jv *v, jj_args *a) { (void)a; return case_map(c, jv_to_str(c, v), 2); }
static jv *f_list(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    jv *items = jj_iterable_list(c, v), *l = jv_list(c);
    for (int i = 0; i < items->u.list.n; i++) jv_list_push(c, l, items->u.list.items[i]);
    return l;
}
static jv *f_replace(jj_ctx *c, jv *v, jj_args *a) {
    jv *o = jj_arg(a, 0, "old"), *n = jj_arg(a, 1, "new");
    if (!o || !n) jj_fail(c, "replace: expected two arguments");
    return replace(c, jv_to_str(c, v), jv_to_str(c, o), jv_to_str(c, n), arg_int(c, a, 2, "count", -1));
}
static jv *f_dictsort(jj_ctx *c, jv *v, jj_args *a) {
    if (v->t != JV_DICT) jj_fail(c, "dictsort: expected a mapping, got %s", jv_type_name(v));
    int cs = arg_bool(a, 0, "case_sensitive", 0);
    const char *by = arg_str(c, a, 1, "by", "dictsort");
    int by_value = by && !strcmp(by, "value");
    int n = v->u.dict.n;
    jv *items = m_items(c, v, a);
    sort_key *x = jj_alloc(c->a, (size_t)(n + 1) * sizeof *x), *tmp = jj_alloc(c->a, (size_t)(n + 1) * sizeof *tmp);
    for (int i = 0; i < n; i++) {
        x[i].item = items->u.list.items[i];
        x[i].key = fold_case(c, by_value ? v->u.dict.vals[i] : v->u.dict.keys[i], cs);
    }
    merge_sort(c, x, tmp, n, arg_bool(a, 2, "reverse", 0));
    jv *l = jv_list(c);
    for (int i = 0; i < n; i++) jv_list_push(c, l, x[i].item);
    return l;
}
static jv *f_sort(jj_ctx *c, jv *v, jj_args *a) {
    jv *items = jj_iterable_list(c, v);
    int n = items->u.list.n, cs = arg_bool(a, 1, "case_sensitive", 0);
    const char *attr = arg_str(c, a, 2, "attribute", "sort");
    sort_key *x = jj_alloc(c->a, (size_t)(n + 1) * sizeof *x), *tmp = jj_alloc(c->a, (size_t)(n + 1) * sizeof *tmp);
    for (int i = 0; i < n; i++) {
        x[i].item = items->u.list.items[i];
        x[i].key = fold_case(c, attr ? attr_path(c, x[i].item, attr) : x[i].item, cs);
    }
    merge_sort(c, x, tmp, n, arg_bool(a, 0, "reverse", 0));
    jv *l = jv_list(c);
    for (int i = 0; i < n; i++) jv_list_push(c, l, x[i].item);
    return l;
}
static jv *min_max(jj_ctx *c, jv *v, jj_args *a, int max) {
    jv *items = jj_iterable_list(c, v);
    int cs = arg_bool(a, 0, "case_sensitive", 0);
    const char *attr = arg_str(c, a, 1, "attribute", "min");
    jv *best = NULL, *best_key = NULL;
    for (int i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.items[i];
        jv *k = fold_case(c, attr ? attr_path(c, it, attr) : it, cs);
        if (!best || (max ? jv_compare(c, k, best_key) > 0 : jv_compare(c, k, best_key) < 0)) best = it, best_key = k;
    }
    return best ? best : jv_undef(c, "min/max of an empty sequence");
}
static jv *f_min(jj_ctx *c, jv *v, jj_args *a) { return min_max(c, v, a, 0); }
static jv *f_max(jj_ctx *c, jv *v, jj_args *a) { return min_max(c, v, a, 1); }
static jv *f_unique(jj_ctx *c, jv *v, jj_args *a) {
    jv *items = jj_iterable_list(c, v), *l = jv_list(c), *seen = jv_list(c);
    l->u.list.gen = 1;
    int cs = arg_bool(a, 0, "case_sensitive", 0);
    const char *attr = arg_str(c, a, 1, "attribute", "unique");
    for (int i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.items[i];
        jv *k = fold_case(c, attr ? attr_path(c, it, attr) : it, cs);
        int dup = 0;
        for (int j = 0; j < seen->u.list.n && !dup; j++) {
            jj_step(c);
            dup = jv_equal(seen->u.list.items[j], k);
        }
        if (!dup) jv_list_push(c, seen, k), jv_list_push(c, l, it);
    }
    return l;
}
static jv *f_first(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    jv *items = jj_iterable_list(c, v);
    return items->u.list.n ? items->u.list.items[0] : jv_undef(c, "first of an empty sequence");
}
static jv *f_last(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    if (v->t == JV_LIST && v->u.list.gen) jj_fail(c, "'generator' object is not reversible");
    jv *items = jj_iterable_list(c, v);
    return items->u.list.n ? items->u.list.items[items->u.list.n - 1] : jv_undef(c, "last of an empty sequence");
}
static jv *f_reverse(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    if (v->t == JV_STR) {
        jv *chars = jj_iterable_list(c, v);
        jj_buf b = {0};
        for (int i = chars->u.list.n - 1; i >= 0; i--) jv_str_append(c, &b, chars->u.list.items[i]);
        return jv_str_ref(c, b.s ? b.s : "", b.n);
    }
    jv *items = jj_iterable_list(c, v), *l = jv_list(c);
    for (int i = items->u.list.n - 1; i >= 0; i--) jv_list_push(c, l, items->u.list.items[i]);
    return l;
}
static jv *f_int(jj_ctx *c, jv *v, jj_args *a) {
    jv *d = jj_arg(a, 0, "default");
    if (v->t == JV_UNDEF) jj_fail(c, "%s", jj_undef_message(c, v)); /* int(Undefined) raises */
    if (v->t == JV_INT) return v;
    if (v->t == JV_BOOL) return jv_int(c, v->u.b);
    if (v->t == JV_FLOAT && isfinite(v->u.f)) return jv_int(c, jj_float_int(c, v->u.f));
    if (v->t == JV_STR) {
        jv *s = strip(c, v, NULL, 1, 1);
        char buf[64];
        if (s->u.str.n && s->u.str.n < sizeof buf) {
            memcpy(buf, s->u.str.s, s->u.str.n);
            buf[s->u.str.n] = 0;
            char *e;
            long long i = strtoll(buf, &e, 10);
            if (!*e) return jv_int(c, i);
            double f = strtod(buf, &e);
            if (!*e && isfinite(f)) return jv_int(c, jj_float_int(c, f));
        }
    }
    return d ? d : jv_int(c, 0);
}
static jv *f_float(jj_ctx *c, jv *v, jj_args *a) {
    jv *d = jj_arg(a, 0, "default");
    if (v->t == JV_UNDEF) jj_fail(c, "%s", jj_undef_message(c, v));
    if (jv_is_num(v)) return jv_float(c, jv_num(v));
    if (v->t == JV_STR) {
        jv *s = strip(c, v, NULL, 1, 1);
        char buf[64];
        if (s->u.str.n && s->u.str.n < sizeof buf) {
            memcpy(buf, s->u.str.s, s->u.str.n);
            buf[s->u.str.n] = 0;
            char *e;
            double f = strtod(buf, &e);
            if (!*e) return jv_float(c, f);
        }
    }
    return d ? d : jv_float(c, 0);
}
static jv *f_abs(jj_ctx *c, jv *v, jj_args *a) {
    (void)a;
    if (v->t == JV_INT) return jv_int(c, v->u.i < 0 ? jj_neg_int(c, v->u.i) : v->u.i);
    if (v->t == JV_BOOL) return jv_int(c, v->u.b);
    if (v->t == JV_FLOAT) return jv_float(c, fabs(v->u.f));
    jj_fail(c, "bad operand type for abs(): '%s'", jv_type_name(v));
}
static jv *f_round(jj_ctx *c, jv *v, jj_args *a) {
    if (!jv_is_num(v)) jj_fail(c, "round: expected a number");
    long long p = arg_int(c, a, 0, "precision", 0);
    const char *m = arg_str(c, a, 1, "method", "round");
    /* Python's round(int, n) is an int */
    if ((v->t == JV_INT || v->t == JV_BOOL) && p >= 0 && (!m || !strcmp(m, "common"))) return jv_int(c, v->t == JV_INT ? v->u.i : v->u.b);
    double s = pow(10, (double)p), x = jv_num(v) * s;
    x = !m || !strcmp(m, "common") ? nearbyint(x) : !strcmp(m, "ceil") ? ceil(x) : floor(x);
    return jv_float(c, x / s);
}
static jv *f_indent(jj_ctx *c, jv *v, jj_args *a) {
    jv *w = jj_arg(a, 0, "width");
    jj_buf ind = {0};
    if (w && w->t == JV_STR) jj_buf_add(c, &ind, w->u.str.s, w->u.str.n);
    else for (long long i = 0, n = w ? arg_int(c, a, 0, "width", 4) : 4; i < n && i < 256; i++) jj_buf_addc(c, &ind, " ");
    if (!ind.s) jj_buf_add(c, &ind, "", 0);
    int first = arg_bool(a, 1, "first", 0), blank = arg_bool(a, 2, "blank", 0);
    /* jinja2 appends "\n" to the value itself: a string only */
    if (v->t == JV_UNDEF) jj_fail(c, "%s", jj_undef_message(c, v));
    if (v->t != JV_STR) jj_fail(c, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
    jv *s = v;
    /* jinja2: s += "\n", then the lines (splitlines), every line but the first indented (blank ones too with blank) */
    jj_buf src = {0};
    jj_buf_add(c, &src, s->u.str.s, s->u.str.n);
    jj_buf_addc(c, &src, "\n");
    jv *lines = m_splitlines(c, jv_str_ref(c, src.s, src.n), a);
    jj_buf b = {0};
    if (first) jj_buf_add(c, &b, ind.s, ind.n);
    for (int i = 0; i < lines->u.list.n; i++) {
        jv *ln = lines->u.list.items[i];
        if (i) {
            jj_buf_addc(c, &b, "\n");
            if (blank || ln->u.str.n) jj_buf_add(c, &b, ind.s, ind.n);
        }
        jj_buf_add(c, &b, ln->u.str.s, ln->u.str.n);
    }
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}
/* select / reject / selectattr / rejectattr */
static jv *select_common(jj_ctx *c, jv *v, jj_args *a, int attr, int keep) {
    jv *l = jv_list(c);
    l->u.list.gen = 1;
    if (!jv_truthy(v)) return l; /* jinja2: "if value:" before iterating */
    jv *items = jj_iterable_list(c, v);
    int base = 0;
    const char *path = NULL;
    if (attr) {
        path = arg_str(c, a, 0, NULL, "selectattr");
        if (!path) jj_fail(c, "selectattr: missing attribute");
        base = 1;
    }
    jv *test = jj_arg(a, base, NULL);
    jj_args rest = {0};
    if (test) {
        if (test->t != JV_STR) jj_fail(c, "select: the test's name must be a string");
        rest.n = a->n - base - 1;
        rest.v = a->v + base + 1;
        rest.names = a->names + base + 1;
    }
    const char *tname = test ? jj_strndup(c->a, test->u.str.s, test->u.str.n) : NULL;
    if (tname && !jj_test_known(tname)) jj_fail(c, "No test named '%s'.", tname);
    for (int i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.items[i];
        jv *x = path ? attr_path(c, it, path) : it;
        int ok = tname ? jj_apply_test(c, tname, x, &rest) : jv_truthy(x);
        if (ok == keep) jv_list_push(c, l, it);
    }
    return l;
}
static jv *f_select(jj_ctx *c, jv *v, jj_args *a) { return select_common(c, v, a, 0, 1); }
static jv *f_reject(jj_ctx *c, jv *v, jj_args *a) { return select_common(c, v, a, 0, 0); }
static jv *f_selectattr(jj_ctx *c, jv *v, jj_args *a) { return select_common(c, v, a, 1, 1); }
static jv *f_rejectattr(jj_ctx *c, jv *v, jj_args *a) { return select_common(c, v, a, 1, 0); }
static jv *f_map(jj_ctx *c, jv *v, jj_args *a) {
    jv *l = jv_list(c);
    l->u.list.gen = 1;
    if (!jv_truthy(v)) return l; /* jinja2: "if value:" before iterating */
    jv *items = jj_iterable_list(c, v);
    const char *attr = arg_str(c, a, 1 << 30, "attribute", "map");
    jv *dflt = jj_arg(a, 1 << 30, "default");
    jv *fname = jj_arg(a, 0, NULL);
    jj_args rest = {0};
    if (!attr) {
        if (!fname || fname->t != JV_STR) jj_fail(c, "map: expected a filter's name or attribute=");
        rest.n = a->n - 1, rest.v = a->v + 1, rest.names = a->names + 1;
    }
    const char *f = fname && !attr ? jj_strndup(c->a, fname->u.str.s, fname->u.str.n) : NULL;
    if (f && !jj_filter_known(f)) jj_fail(c, "No filter named '%s'.", f);
    for (int i = 0; i < items->u.list.n; i++) {
        jv *it = items->u.list.items[i];
        jv *x;
        if (attr) {
            x = attr_path(c, it, attr);
            if (x->t == JV_UNDEF && dflt) x = dflt;
        } else {
            x = jj_apply_filter(c, f, it, &rest, 0);
        }
        jv_list_push(c, l, x);
    }
    return l;
}
static jv *f_sum(jj_ctx *c, jv *v, jj_args *a) {
    jv *items = jj_iterable_list(c, v);
    const char *attr = arg_str(c, a, 0, "attribute", "sum");
    jv *acc = jj_arg(a, 1, "start");
    if (!acc) acc = jv_int(c, 0);
    for (int i = 0; i < items->u.list.n; i++) {
        jv *x = attr ? attr_path(c, items->u.list.items[i], attr) : items->u.list.items[i];
        if (!jv_is_num(acc) || !jv_is_num(x)) jj_fail(c, "sum: unsupported operand types");
        acc = acc->t != JV_FLOAT && x->t != JV_FLOAT ? jv_int(c, (acc->t == JV_INT ? acc->u.i : acc->u.b) + (x->t == JV_INT ? x->u.i : x->u.b))
                                                      : jv_float(c, jv_num(acc) + jv_num(x));
    }
    return acc;
}
static jv *f_wordcount(jj_ctx *c, jv *v, jj_args *a) {
    /* jinja2: the runs of \w (letters, digits, _; any non-ASCII taken as a letter) */
    (void)a;
    jv *s = jv_to_str(c, v);
    long long k = 0;
    int in = 0;
    for (size_t i = 0; i < s->u.str.n; i++) {
        unsigned char ch = (unsigned char)s->u.str.s[i];
        int w = ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch >= 0x80;
        k += w && !in;
        in = w;
    }
    return jv_int(c, k);
}
static jv *f_center(jj_ctx *c, jv *v, jj_args *a) {
    jv *s = jv_to_str(c, v);
    long long w = arg_int(c, a, 0, "width", 80), n = (long long)jj_u8_len(s->u.str.s, s->u.str.n);
    if (w <= n) return s;
    if (w > (long long)c->lim->max_output) jj_fail(c, "center: width over the output bound");
    long long pad = w - n, left = pad / 2 + (pad & w & 1);
    jj_buf b = {0};
    for (long long i = 0; i < left; i++) jj_buf_addc(c, &b, " ");
    jj_buf_add(c, &b, s->u.str.s, s->u.str.n);
    for (long long i = 0; i < pad - left; i++) jj_buf_addc(c, &b, " ");
    return jv_str_ref(c, b.s, b.n);
}
static jv *f_format(jj_ctx *c, jv *v, jj_args *a) {
    /* "%s" | format(x): printf-style with the arguments as a tuple */
    jv *t = jv_list(c);
    t->u.list.tuple = 1;
    for (int i = 0; i < a->n; i++) jv_list_push(c, t, a->v[i]);
    jv *fmt = need_str(c, v, "format");
    jj_node fake = {0};
    (void)fake;
    /* reuse the % operator through a tiny evaluation */
    jj_buf b = {0};
    int k = 0;
    for (size_t i = 0; i < fmt->u.str.n; i++) {
        char ch = fmt->u.str.s[i];
        if (ch != '%' || i + 1 >= fmt->u.str.n) { jj_buf_add(c, &b, &ch, 1); continue; }
        char f = fmt->u.str.s[++i];
        if (f == '%') { jj_buf_addc(c, &b, "%"); continue; }
        if (k >= t->u.list.n) jj_fail(c, "not enough arguments for format string");
        jv *x = t->u.list.items[k++];
        if (f == 's') jv_str_append(c, &b, x);
        else if (f == 'd' && jv_is_num(x)) {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%lld", x->t == JV_FLOAT ? jj_float_int(c, x->u.f) : x->t == JV_INT ? x->u.i : x->u.b);
            jj_buf_addc(c, &b, tmp);
        } else jj_fail(c, "format: unsupported format character '%c'", f);
    }
    return jv_str_ref(c, b.s ? b.s : "", b.n);
}

typedef jv *(*filter_fn)(jj_ctx *c, jv *v, jj_args *a);
typedef struct filter { const char *name; filter_fn fn; } filter;
static const filter FILTERS[] = {
    {"tojson", f_tojson}, {"length", f_length}, {"count", f_length}, {"trim", f_trim}, {"string", f_string},
    {"safe", f_safe}, {"default", f_default}, {"d", f_default}, {"join", f_join}, {"items", f_items},
    {"upper", f_upper}, {"lower", f_lower}, {"title", f_title}, {"capitalize", f_capitalize}, {"list", f_list},
    {"replace", f_replace}, {"dictsort", f_dictsort}, {"sort", f_sort}, {"min", f_min}, {"max", f_max},
    {"unique", f_unique}, {"first", f_first}, {"last", f_last}, {"reverse", f_reverse}, {"int", f_int},
    {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"indent", f_indent}, {"select", f_select},
    {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},
    {"sum", f_sum}, {"wordcount", f_wordcount}, {"center", f_center}, {"format", f_format},
    {"e", f_escape}, {"escape", f_escape}, {NULL, NULL}};

int jj_filter_known(const char *name) {
    for (const filter *f = FILTERS; f->name; f++)
        if (!strcmp(f->name, name)) return 1;
    return 0;
}

jv *jj_apply_filter(jj_ctx *c, const char *name, jv *v, jj_args *a, int line) {
    (void)line;
    jj_step(c);
    for (const filter *f = FILTERS; f->name; f++)
        if (!strcmp(f->name, name)) {
            /* most filters take a string: an undefined value is "" there, as str(Undefined) */
            return f->fn(c, v, a);
        }
    jj_fail(c, "No filter named '%s' found.", name);
}

/* ---- tests ---- */
static int t_cmp(jj_ctx *c, jv *v, jj_args *a, const char *op) {
    jv *o = jj_arg(a, 0, NULL);
    if (!o) jj_fail(c, "test '%s' needs an argument", op);
    if (!strcmp(op, "eq")) return jv_equal(v, o);
    if (!strcmp(op, "ne")) return !jv_equal(v, o);
    int k = jv_compare(c, v, o);
    if (!strcmp(op, "lt")) return k < 0;
    if (!strcmp(op, "le")) return k <= 0;
    if (!strcmp(op, "gt")) return k > 0;
    return k >= 0;
}

static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "mapping", "iterable", "sequence", "number", "integer", "float",
    "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "odd", "even", "divisibleby", "lower", "upper",
    "callable", "sameas", "gt", "lt", "ge", "le", "greaterthan", "lessthan", ">", "<", ">=", "<=", "in", NULL};

int jj_test_known(const char *name) {
    for (const char *const *t = TESTS; *t; t++)
        if (!strcmp(*t, name)) return 1;
    return 0;
}

int jj_apply_test(jj_ctx *c, const char *n, jv *v, jj_args *a) {
    jj_step(c);
    if (!strcmp(n, "defined")) return v->t != JV_UNDEF;
    if (!strcmp(n, "undefined")) return v->t == JV_UNDEF;
    if (!strcmp(n, "none")) return v->t == JV_NONE;
    if (!strcmp(n, "string")) return v->t == JV_STR;
    if (!strcmp(n, "mapping")) return v->t == JV_DICT && !v->u.dict.is_ns;
    if (!strcmp(n, "iterable") || !strcmp(n, "sequence")) /* a generator iterates, has no len() */
        return v->t == JV_STR || (v->t == JV_LIST && !(n[0] == 's' && v->u.list.gen)) ||
               (v->t == JV_DICT && !v->u.dict.is_ns) || v->t == JV_UNDEF;
    if (!strcmp(n, "number")) return jv_is_num(v);
    if (!strcmp(n, "integer")) return v->t == JV_INT;
    if (!strcmp(n, "float")) return v->t == JV_FLOAT;
    if (!strcmp(n, "boolean")) return v->t == JV_BOOL;
    if (!strcmp(n, "true")) return v->t == JV_BOOL && v->u.b;
    if (!strcmp(n, "false")) return v->t == JV_BOOL && !v->u.b;
    if (!strcmp(n, "callable")) return v->t == JV_FUNC;
    if (!strcmp(n, "equalto") || !strcmp(n, "eq") || !strcmp(n, "==")) return t_cmp(c, v, a, "eq");
    if (!strcmp(n, "ne") || !strcmp(n, "!=")) return t_cmp(c, v, a, "ne");
    if (!strcmp(n, "gt") || !strcmp(n, "greaterthan") || !strcmp(n, ">")) return t_cmp(c, v, a, "gt");
    if (!strcmp(n, "lt") || !strcmp(n, "lessthan") || !strcmp(n, "<")) return t_cmp(c, v, a, "lt");
    if (!strcmp(n, "ge") || !strcmp(n, ">=")) return t_cmp(c, v, a, "ge");
    if (!strcmp(n, "le") || !strcmp(n, "<=")) return t_cmp(c, v, a, "le");
    if (!strcmp(n, "sameas")) {
        jv *o = jj_arg(a, 0, NULL);
        if (!o) jj_fail(c, "sameas needs an argument");
        /* Python's "is": one object; equal small values are one object there (None, bools, small ints, strings) */
        return v == o || (v->t == o->t && v->t != JV_LIST && v->t != JV_DICT && jv_equal(v, o));
    }
    if (!strcmp(n, "in")) {
        jv *o = jj_arg(a, 0, NULL);
        if (!o) jj_fail(c, "in needs an argument");
        if (o->t == JV_STR && v->t == JV_STR) {
            jj_work(c, o->u.str.n);
            return memmem(o->u.str.s, o->u.str.n, v->u.str.s, v->u.str.n) != NULL;
        }
        if (o->t == JV_DICT) return jv_dict_getv(o, v) != NULL;
        jv *items = jj_iterable_list(c, o);
        for (int i = 0; i < items->u.list.n; i++)
            if (jv_equal(items->u.list.items[i], v)) return 1;
        return 0;
    }
    if (!strcmp(n, "odd") || !strcmp(n, "even") || !strcmp(n, "divisibleby")) {
        /* Python's value % 2 == 1, value % 2 == 0, value % num == 0 (bools and floats too) */
        if (v->t == JV_UNDEF) jj_fail(c, "%s", jj_undef_message(c, v));
        if (!jv_is_num(v)) jj_fail(c, "unsupported operand type(s) for %%: '%s' and 'int'", jv_type_name(v));
        long long d = !strcmp(n, "divisibleby") ? arg_int(c, a, 0, "num", 1) : 2;
        if (d == 0) jj_fail(c, "integer division or modulo by zero");
        double r = fmod(jv_num(v), (double)d);
        if (r != 0 && ((r < 0) != (d < 0))) r += (double)d;
        return n[0] == 'o' ? r == 1 : r == 0;
    }
    if (!strcmp(n, "lower") || !strcmp(n, "upper")) {
        v = jv_to_str(c, v); /* jinja2: str(value).islower() */
        int any = 0;
        for (size_t i = 0; i < v->u.str.n; i++) {
            char ch = v->u.str.s[i];
            if (ch >= 'a' && ch <= 'z') { if (n[0] == 'u') return 0; any = 1; }
            if (ch >= 'A' && ch <= 'Z') { if (n[0] == 'l') return 0; any = 1; }
        }
        return any;
    }
    jj_fail(c, "No test named '%s' found.", n);
}

/* ---- globals ---- */
static jv *g_range(jj_ctx *c, jv *self, jj_args *a) {
    (void)self;
    long long lo = 0, hi, st = 1;
    if (a->n == 1) hi = arg_int(c, a, 0, NULL, 0);
    else if (a->n >= 2) lo = arg_int(c, a, 0, NULL, 0), hi = arg_int(c, a, 1, NULL, 0), st = a->n > 2 ? arg_int(c, a, 2, NULL, 1) : 1;
    else jj_fail(c, "range expected at least 1 argument, got 0");
    if (st == 0) jj_fail(c, "range() arg 3 must not be zero");
    /* the count and the items in unsigned arithmetic: hi - lo, and i * st,
     * may pass a long long where every item fits one */
    const unsigned long long span = st > 0 ? (hi > lo ? (unsigned long long)hi - (unsigned long long)lo : 0)
                                           : (lo > hi ? (unsigned long long)lo - (unsigned long long)hi : 0);
    const unsigned long long mag = st > 0 ? (unsigned long long)st : 0 - (unsigned long long)st;
    const unsigned long long n = span / mag + (span % mag != 0);
    /* the sandbox's MAX_RANGE */
    if (n > 100000) jj_fail(c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    jv *l = jv_list(c);
    for (unsigned long long i = 0; i < n; i++)
        jj_step(c), jv_list_push(c, l, jv_int(c, (long long)((unsigned long long)lo + i * (unsigned long long)st)));
    return l;
}
static jv *g_dict(jj_ctx *c, jv *self, jj_args *a) {
    (void)self;
    jv *d = jv_dict(c);
    for (int i = 0; i < a->n; i++) {
        if (a->names[i]) {
            jv_dict_setc(c, d, a->names[i], a->v[i]);
        } else if (a->v[i]->t == JV_DICT) {
            for (int k = 0; k < a->v[i]->u.dict.n; k++) jv_dict_set(c, d, a->v[i]->u.dict.keys[k], a->v[i]->u.dict.vals[k]);
        } else {
            jj_fail(c, "dict: positional arguments must be mappings");
        }
    }
    return d;
}
static jv *g_namespace(jj_ctx *c, jv *self, jj_args *a) {
    jv *d = g_dict(c, self, a);
    d->u.dict.is_ns = 1;
    return d;
}
static jv *g_raise(jj_ctx *c, jv *self, jj_args *a) {
    (void)self;
    jv *m = jj_arg(a, 0, NULL);
    jv *s = m ? jv_to_str(c, m) : jv_cstr(c, "");
    c->raised = 1;
    jj_fail(c, "%.*s", (int)(s->u.str.n > 400 ? 400 : s->u.str.n), s->u.str.s);
}
static jv *g_strftime_now(jj_ctx *c, jv *self, jj_args *a) {
    (void)self;
    jv *f = jj_arg(a, 0, NULL);
    if (!f || f->t != JV_STR) jj_fail(c, "strftime_now: expected a format string");
    char fmt[256], out[512];
    if (f->u.str.n >= sizeof fmt) jj_fail(c, "strftime_now: format too long");
    memcpy(fmt, f->u.str.s, f->u.str.n);
    fmt[f->u.str.n] = 0;
    struct tm tm;
    time_t t = c->now ? c->now : time(NULL);
    if (c->now) gmtime_r(&t, &tm);
    else localtime_r(&t, &tm);
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return jv_str(c, out, n);
}

void jj_install_globals(jj_ctx *c, jv *g) {
    jv_dict_setc(c, g, "range", jv_func(c, "range", g_range, NULL));
    jv_dict_setc(c, g, "dict", jv_func(c, "dict", g_dict, NULL));
    jv_dict_setc(c, g, "namespace", jv_func(c, "namespace", g_namespace, NULL));
    jv_dict_setc(c, g, "raise_exception", jv_func(c, "raise_exception", g_raise, NULL));
    jv_dict_setc(c, g, "strftime_now", jv_func(c, "strftime_now", g_strftime_now, NULL));
}

/* The Jinja engine's evaluator: statements write to the output, expressions
 * give values, with jinja2's scoping (a for loop's body is a fresh scope
 * each iteration, a macro sees the scope it was defined in, not its
 * caller's), Python's operators, and every bound of clf_jinja_limits
 * checked as it goes. Also the public entry points of jinja.h. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

static _Thread_local int g_last_raise;
int clf_jinja_last_was_raise(void) { return g_last_raise; }

void jj_fail(jj_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (c->raised) {
        clf_vfail(CLF_ERR_FORMAT, fmt, ap);
    } else {
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        clf_fail(CLF_ERR_FORMAT, "chat template: %s", msg);
    }
    va_end(ap);
    c->st = CLF_ERR_FORMAT;
    longjmp(c->fail, 1);
}

void jj_step(jj_ctx *c) {
    if (++c->steps > c->lim->max_steps)
        jj_fail(c, "rendering took more than the bound of %ld steps", c->lim->max_steps);
}

void jj_work(jj_ctx *c, size_t bytes) {
    c->steps += (long)(bytes / JJ_STEP_BYTES);
    jj_step(c);
}

long long jj_float_int(jj_ctx *c, double f) {
    /* [-2^63, 2^63): both ends exact as doubles; NaN fails the test too */
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) jj_fail(c, "integer overflow");
    return (long long)f;
}

/* x op y for op + - *: Python's ints are unbounded, a long long is not; a
 * result past 64 bits fails the render ("integer overflow") where it would
 * wrap to a wrong number. */
static long long int_op(jj_ctx *c, char op, long long x, long long y) {
    long long r;
    int over = op == '+' ? __builtin_add_overflow(x, y, &r) : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                                                        : __builtin_mul_overflow(x, y, &r);
    if (over) jj_fail(c, "integer overflow");
    return r;
}

long long jj_neg_int(jj_ctx *c, long long i) {
    if (i == LLONG_MIN) jj_fail(c, "integer overflow"); /* 2^63: wider than a long long */
    return -i;
}

static jj_scope *scope_new(jj_ctx *c, jj_scope *parent) {
    jj_scope *s = jj_alloc(c->a, sizeof *s);
    s->parent = parent;
    s->vars = jv_dict(c);
    return s;
}
static jv *lookup(jj_scope *s, const char *name) {
    size_t n = strlen(name);
    for (; s; s = s->parent) {
        jv *v = jv_dict_get(s->vars, name, n);
        if (v) return v;
    }
    return NULL;
}

static void enter(jj_ctx *c) {
    jj_step(c);
    if (++c->depth > 4 * c->lim->max_depth)
        jj_fail(c, "evaluation nested deeper than the bound of %d", 4 * c->lim->max_depth);
}

static void undefined_error(jj_ctx *c, jv *v) __attribute__((noreturn));
static void undefined_error(jj_ctx *c, jv *v) {
    jj_fail(c, "%s", jj_undef_message(c, v));
}

/* ---- operators ---- */
static jv *concat_str(jj_ctx *c, jv *a, jv *b) {
    size_t n = a->u.str.n + b->u.str.n;
    if (n > c->lim->max_output) jj_fail(c, "a string longer than the output bound (%zu bytes)", c->lim->max_output);
    char *s = jj_alloc(c->a, n + 1);
    memcpy(s, a->u.str.s, a->u.str.n);
    memcpy(s + a->u.str.n, b->u.str.s, b->u.str.n);
    return jv_str_ref(c, s, n);
}

static long long floordiv(long long a, long long b) {
    long long q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}

static jv *binary(jj_ctx *c, const char *op, jv *a, jv *b) {
    if (op[0] == '~') {
        jj_buf buf = {0};
        jv_str_append(c, &buf, a);
        jv_str_append(c, &buf, b);
        return jv_str_ref(c, buf.s ? buf.s : "", buf.n);
    }
    if (a->t == JV_UNDEF) undefined_error(c, a);
    if (b->t == JV_UNDEF) undefined_error(c, b);
    int ints = (a->t == JV_INT || a->t == JV_BOOL) && (b->t == JV_INT || b->t == JV_BOOL);
    long long x = a->t == JV_INT ? a->u.i : a->t == JV_BOOL ? a->u.b : 0;
    long long y = b->t == JV_INT ? b->u.i : b->t == JV_BOOL ? b->u.b : 0;
    int nums = jv_is_num(a) && jv_is_num(b);
    switch (op[0]) {
    case '+':
        if (ints) return jv_int(c, int_op(c, '+', x, y));
        if (nums) return jv_float(c, jv_num(a) + jv_num(b));
        if (a->t == JV_STR && b->t == JV_STR) {
            if (a->u.str.safe == b->u.str.safe) {
                jv *r = concat_str(c, a, b);
                r->u.str.safe = a->u.str.safe;
                return r;
            }
            /* Markup + str escapes the str, and is Markup */
            jv *r = concat_str(c, jv_escape(c, a), jv_escape(c, b));
            r->u.str.safe = 1;
            return r;
        }
        if (a->t == JV_LIST && b->t == JV_LIST) {
            jv *l = jv_list(c);
            for (int i = 0; i < a->u.list.n; i++) jv_list_push(c, l, a->u.list.items[i]);
            for (int i = 0; i < b->u.list.n; i++) jv_list_push(c, l, b->u.list.items[i]);
            return l;
        }
        if (a->t == JV_STR) jj_fail(c, "can only concatenate str (not \"%s\") to str", jv_type_name(b));
        break;
    case '-':
        if (ints) return jv_int(c, int_op(c, '-', x, y));
        if (nums) return jv_float(c, jv_num(a) - jv_num(b));
        break;
    case '*':
        if (op[1] == '*') {
            if (ints && y >= 0) {
                long long r = 1;
                if (x == 0 || x == 1) r = y == 0 ? 1 : x;
                else if (x == -1) r = y % 2 ? -1 : 1;
                else /* |x| >= 2: past 63 steps it overflows, and int_op fails */
                    for (long long k = 0; k < y; k++) r = int_op(c, '*', r, x);
                return jv_int(c, r);
            }
            if (nums) return jv_float(c, pow(jv_num(a), jv_num(b)));
            break;
        }
        if (ints) return jv_int(c, int_op(c, '*', x, y));
        if (nums) return jv_float(c, jv_num(a) * jv_num(b));
        if ((a->t == JV_STR || a->t == JV_LIST) && (b->t == JV_INT || b->t == JV_BOOL)) {
            jv *l = a->t == JV_STR ? NULL : jv_list(c);
            jj_buf buf = {0};
            for (long long k = 0; k < y; k++) {
                jj_step(c);
                if (l) for (int i = 0; i < a->u.list.n; i++) jv_list_push(c, l, a->u.list.items[i]);
                else jj_buf_add(c, &buf, a->u.str.s, a->u.str.n);
            }
            return l ? l : jv_str_ref(c, buf.s ? buf.s : "", buf.n);
        }
        break;
    case '/':
        if (op[1] == '/') {
            if (nums && jv_num(b) == 0) jj_fail(c, "integer division or modulo by zero");
            if (ints) {
                if (x == (-9223372036854775807LL - 1) && y == -1) jj_fail(c, "integer overflow");
                return jv_int(c, floordiv(x, y));
            }
            if (nums) return jv_float(c, floor(jv_num(a) / jv_num(b)));
            break;
        }
        if (nums) {
            if (jv_num(b) == 0) jj_fail(c, "division by zero");
            return jv_float(c, jv_num(a) / jv_num(b));
        }
        break;
    case '%':
        if (nums && jv_num(b) == 0) jj_fail(c, "integer division or modulo by zero");
        if (ints) {
            if (x == (-9223372036854775807LL - 1) && y == -1) return jv_int(c, 0);
            long long r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return jv_int(c, r);
        }
        if (nums) {
            double r = fmod(jv_num(a), jv_num(b));
            if (r != 0 && ((r < 0) != (jv_num(b) < 0))) r += jv_num(b);
            return jv_float(c, r);
        }
        if (a->t == JV_STR) {
            /* printf-style formatting: %s, %d, %%, with one value or a tuple */
            jj_buf buf = {0};
            int k = 0;
            for (size_t i = 0; i < a->u.str.n; i++) {
                char ch = a->u.str.s[i];
                if (ch != '%' || i + 1 >= a->u.str.n) {
                    jj_buf_add(c, &buf, &ch, 1);
                    continue;
                }
                char f = a->u.str.s[++i];
                if (f == '%') { jj_buf_addc(c, &buf, "%"); continue; }
                jv *arg = b->t == JV_LIST && b->u.list.tuple ? (k < b->u.list.n ? b->u.list.items[k] : NULL)
                                                             : (k == 0 ? b : NULL);
                k++;
                if (!arg) jj_fail(c, "not enough arguments for format string");
                if (f == 's') jv_str_append(c, &buf, arg);
                else if (f == 'r') jv_repr_append(c, &buf, arg);
                else if (f == 'd' || f == 'i') {
                    if (!jv_is_num(arg)) jj_fail(c, "%%d format: a real number is required, not %s", jv_type_name(arg));
                    char tmp[32];
                    snprintf(tmp, sizeof tmp, "%lld", arg->t == JV_FLOAT ? jj_float_int(c, arg->u.f) : arg->t == JV_INT ? arg->u.i : arg->u.b);
                    jj_buf_addc(c, &buf, tmp);
                } else jj_fail(c, "unsupported format character '%c'", f);
            }
            return jv_str_ref(c, buf.s ? buf.s : "", buf.n);
        }
        break;
    }
    jj_fail(c, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

int jv_compare(jj_ctx *c, jv *x, jv *y) {
    if (jv_is_num(x) && jv_is_num(y)) {
        if (x->t != JV_FLOAT && y->t != JV_FLOAT) {
            long long a = x->t == JV_INT ? x->u.i : x->u.b, b = y->t == JV_INT ? y->u.i : y->u.b;
            return (a > b) - (a < b);
        }
        double a = jv_num(x), b = jv_num(y);
        return (a > b) - (a < b);
    }
    if (x->t == JV_STR && y->t == JV_STR) {
        size_t n = x->u.str.n < y->u.str.n ? x->u.str.n : y->u.str.n;
        int r = memcmp(x->u.str.s, y->u.str.s, n);
        return r ? (r > 0) - (r < 0) : (x->u.str.n > y->u.str.n) - (x->u.str.n < y->u.str.n);
    }
    if (x->t == JV_LIST && y->t == JV_LIST) {
        for (int i = 0; i < x->u.list.n && i < y->u.list.n; i++) {
            if (jv_equal(x->u.list.items[i], y->u.list.items[i])) continue;
            enter(c);
            int r = jv_compare(c, x->u.list.items[i], y->u.list.items[i]);
            c->depth--;
            return r;
        }
        return (x->u.list.n > y->u.list.n) - (x->u.list.n < y->u.list.n);
    }
    if (x->t == JV_UNDEF) undefined_error(c, x);
    if (y->t == JV_UNDEF) undefined_error(c, y);
    jj_fail(c, "'<' not supported between instances of '%s' and '%s'", jv_type_name(x), jv_type_name(y));
}

static int contains(jj_ctx *c, jv *hay, jv *needle) {
    switch (hay->t) {
    case JV_STR:
        if (needle->t != JV_STR) jj_fail(c, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle->u.str.n) return 1;
        jj_work(c, hay->u.str.n);
        return memmem(hay->u.str.s, hay->u.str.n, needle->u.str.s, needle->u.str.n) != NULL; /* linear */
    case JV_LIST:
        for (int i = 0; i < hay->u.list.n; i++) {
            jj_step(c);
            if (jv_equal(hay->u.list.items[i], needle)) return 1;
        }
        return 0;
    case JV_DICT: return jv_dict_getv(hay, needle) != NULL;
    case JV_UNDEF: return 0; /* Undefined iterates as empty */
    default: jj_fail(c, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

/* ---- subscripts ---- */
static long long norm_index(long long i, long long n) { return i < 0 ? i + n : i; }

static jv *slice(jj_ctx *c, jv *obj, jv *start, jv *stop, jv *step) {
    if (obj->t == JV_UNDEF) undefined_error(c, obj);
    long long st = 1;
    if (step && step->t != JV_NONE) {
        if (step->t != JV_INT) jj_fail(c, "slice indices must be integers or None");
        st = step->u.i;
        if (st == 0) jj_fail(c, "slice step cannot be zero");
    }
    int is_str = obj->t == JV_STR;
    /* jinja2 compiles a slice to Python's own subscript (not its getitem): it fails */
    if (!is_str && (obj->t != JV_LIST || obj->u.list.gen || obj->u.list.view))
        jj_fail(c, "'%s' object is not subscriptable", jv_type_name(obj));
    if (is_str) jj_work(c, obj->u.str.n);
    long long n = is_str ? (long long)jj_u8_len(obj->u.str.s, obj->u.str.n) : obj->u.list.n;
    long long lo, hi;
    /* Python's slice.indices */
    if (st > 0) lo = 0, hi = n;
    else lo = n - 1, hi = -1;
    if (start && start->t != JV_NONE) {
        if (start->t != JV_INT) jj_fail(c, "slice indices must be integers or None");
        lo = start->u.i;
        if (lo < 0) lo += n, lo = lo < 0 ? (st < 0 ? -1 : 0) : lo;
        else if (lo >= n) lo = st < 0 ? n - 1 : n;
    }
    if (stop && stop->t != JV_NONE) {
        if (stop->t != JV_INT) jj_fail(c, "slice indices must be integers or None");
        hi = stop->u.i;
        if (hi < 0) hi += n, hi = hi < 0 ? (st < 0 ? -1 : 0) : hi;
        else if (hi >= n) hi = st < 0 ? n - 1 : n;
    }
    jv *l = is_str ? NULL : jv_list(c);
    jj_buf buf = {0};
    /* a string's code points' byte offsets, found once (ASCII: the index
     * itself): jj_u8_off per item was quadratic, a 1 MB slice ran minutes */
    size_t *off = NULL;
    if (is_str && (size_t)n != obj->u.str.n) {
        off = jj_alloc(c->a, ((size_t)n + 1) * sizeof *off);
        size_t k = 0; /* as jj_u8_off: code point k starts at the k-th byte that is no continuation */
        for (size_t b = 0; b < obj->u.str.n; b++)
            if (((unsigned char)obj->u.str.s[b] & 0xC0) != 0x80) off[k++] = b;
        off[n] = obj->u.str.n;
    }
    for (long long i = lo; st > 0 ? i < hi : i > hi; i += st) {
        jj_step(c);
        if (is_str) {
            size_t b0 = off ? off[i] : (size_t)i, b1 = off ? off[i + 1] : (size_t)i + 1;
            jj_buf_add(c, &buf, obj->u.str.s + b0, b1 - b0);
        } else {
            jv_list_push(c, l, obj->u.list.items[i]);
        }
    }
    return is_str ? jv_str_ref(c, buf.s ? buf.s : "", buf.n) : l;
}

/* obj[key] as jinja2's getitem: the item, else the attribute of a string key, else undefined */
jv *jj_getitem(jj_ctx *c, jv *obj, jv *key) {
    if (obj->t == JV_UNDEF) undefined_error(c, obj);
    if (obj->t == JV_LIST && (obj->u.list.gen || obj->u.list.view)) return jv_undef_of(c, obj, key, 0);
    if (obj->t == JV_DICT && !obj->u.dict.is_ns) {
        jv *v = jv_dict_getv(obj, key);
        if (v) return v;
    } else if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        long long i = key->t == JV_INT ? key->u.i : key->u.b;
        if (obj->t == JV_LIST) {
            i = norm_index(i, obj->u.list.n);
            if (i >= 0 && i < obj->u.list.n) return obj->u.list.items[i];
        } else {
            jj_work(c, obj->u.str.n);
            long long n = (long long)jj_u8_len(obj->u.str.s, obj->u.str.n);
            i = norm_index(i, n);
            if (i >= 0 && i < n) {
                size_t b0 = jj_u8_off(obj->u.str.s, obj->u.str.n, (size_t)i);
                size_t b1 = jj_u8_off(obj->u.str.s, obj->u.str.n, (size_t)i + 1);
                return jv_str_ref(c, obj->u.str.s + b0, b1 - b0);
            }
        }
    }
    if (key->t == JV_STR) return jj_getattr(c, obj, key->u.str.s, key->u.str.n);
    return jv_undef_of(c, obj, key, 0);
}

/* ---- calls ---- */
static void exec_body(jj_ctx *c, const jj_node *n, jj_scope *s);

static jv *call_macro(jj_ctx *c, jv *f, jj_args *a) {
    const jj_node *m = f->u.fn.macro;
    if (++c->recursion > c->lim->max_recursion)
        jj_fail(c, "macro calls nested deeper than the bound of %d", c->lim->max_recursion);
    jj_scope *s = scope_new(c, f->u.fn.closure);
    int np = m->n, pos = 0;
    jv **bound = jj_alloc(c->a, (size_t)(np + 1) * sizeof *bound);
    for (int i = 0; i < a->n; i++) {
        if (!a->names[i]) {
            if (pos >= np) jj_fail(c, "macro '%s' takes not more than %d argument(s)", m->s, np);
            bound[pos++] = a->v[i];
            continue;
        }
        int k = 0;
        while (k < np && strcmp(m->names[k], a->names[i])) k++;
        if (k == np) jj_fail(c, "macro '%s' takes no keyword argument '%s'", m->s, a->names[i]);
        bound[k] = a->v[i];
    }
    for (int k = 0; k < np; k++) {
        jv *v = bound[k];
        if (!v) v = m->kids[k] ? jj_eval(c, m->kids[k], s) : jv_undef(c, m->names[k]);
        jv_dict_setc(c, s->vars, m->names[k], v);
    }
    if (f->u.fn.caller) jv_dict_setc(c, s->vars, "caller", f->u.fn.caller);
    jj_buf *saved = c->out, buf = {0};
    c->out = &buf;
    exec_body(c, m->kids[np], s);
    c->out = saved;
    c->recursion--;
    return jv_str_ref(c, buf.s ? buf.s : "", buf.n);
}

jv *jj_call(jj_ctx *c, jv *f, jj_args *a) {
    if (f->t == JV_UNDEF) undefined_error(c, f);
    if (f->t != JV_FUNC) jj_fail(c, "'%s' object is not callable", jv_type_name(f));
    if (f->u.fn.macro) return call_macro(c, f, a);
    return f->u.fn.fn(c, f->u.fn.self, a);
}

static void eval_args(jj_ctx *c, const jj_node *n, jj_scope *s, int from, jj_args *a) {
    a->n = n->n - from;
    a->v = jj_alloc(c->a, (size_t)(a->n + 1) * sizeof *a->v);
    a->names = jj_alloc(c->a, (size_t)(a->n + 1) * sizeof *a->names);
    for (int i = 0; i < a->n; i++) {
        a->v[i] = jj_eval(c, n->kids[from + i], s);
        a->names[i] = n->names[from + i];
    }
}

/* ---- expressions ---- */
jv *jj_eval(jj_ctx *c, const jj_node *n, jj_scope *s) {
    enter(c);
    jv *r = NULL;
    switch (n->k) {
    case N_CONST: r = n->val; break;
    case N_NAME: {
        r = lookup(s, n->s);
        if (!r) r = jv_undef(c, n->s);
        break;
    }
    case N_GETATTR: {
        jv *o = jj_eval(c, n->kids[0], s);
        if (o->t == JV_UNDEF) undefined_error(c, o);
        r = jj_getattr(c, o, n->s, strlen(n->s));
        break;
    }
    case N_GETITEM: {
        jv *o = jj_eval(c, n->kids[0], s);
        const jj_node *k = n->kids[1];
        if (k->k == N_SLICE) {
            jv *p[3];
            for (int i = 0; i < 3; i++) p[i] = k->kids[i] ? jj_eval(c, k->kids[i], s) : NULL;
            r = slice(c, o, p[0], p[1], p[2]);
        } else {
            r = jj_getitem(c, o, jj_eval(c, k, s));
        }
        break;
    }
    case N_CALL: {
        jv *f = jj_eval(c, n->kids[0], s);
        jj_args a;
        eval_args(c, n, s, 1, &a);
        r = jj_call(c, f, &a);
        break;
    }
    case N_FILTER: {
        jv *v = jj_eval(c, n->kids[0], s);
        jj_args a;
        eval_args(c, n, s, 1, &a);
        r = jj_apply_filter(c, n->s, v, &a, n->line);
        break;
    }
    case N_TEST: {
        jv *v = jj_eval(c, n->kids[0], s);
        jj_args a;
        eval_args(c, n, s, 1, &a);
        r = jv_bool(jj_apply_test(c, n->s, v, &a) != n->negate);
        break;
    }
    case N_UNARY: {
        jv *v = jj_eval(c, n->kids[0], s);
        if (v->t == JV_UNDEF) undefined_error(c, v);
        if (!jv_is_num(v)) jj_fail(c, "bad operand type for unary %s: '%s'", n->s, jv_type_name(v));
        if (n->s[0] == '+') r = v->t == JV_BOOL ? jv_int(c, v->u.b) : v;
        else r = v->t == JV_FLOAT ? jv_float(c, -v->u.f) : jv_int(c, jj_neg_int(c, v->t == JV_INT ? v->u.i : v->u.b));
        break;
    }
    case N_BINARY: r = binary(c, n->s, jj_eval(c, n->kids[0], s), jj_eval(c, n->kids[1], s)); break;
    case N_COMPARE: {
        jv *a = jj_eval(c, n->kids[0], s), *b = jj_eval(c, n->kids[1], s);
        const char *op = n->s;
        int v;
        if (a->t == JV_STR && b->t == JV_STR) jj_work(c, a->u.str.n < b->u.str.n ? a->u.str.n : b->u.str.n);
        if (!strcmp(op, "==")) v = jv_equal(a, b);
        else if (!strcmp(op, "!=")) v = !jv_equal(a, b);
        else if (!strcmp(op, "in")) v = contains(c, b, a);
        else if (!strcmp(op, "notin")) v = !contains(c, b, a);
        else {
            int k = jv_compare(c, a, b);
            v = op[0] == '<' ? (op[1] ? k <= 0 : k < 0) : (op[1] ? k >= 0 : k > 0);
        }
        r = jv_bool(v);
        break;
    }
    case N_AND: {
        jv *a = jj_eval(c, n->kids[0], s);
        r = jv_truthy(a) ? jj_eval(c, n->kids[1], s) : a;
        break;
    }
    case N_OR: {
        jv *a = jj_eval(c, n->kids[0], s);
        r = jv_truthy(a) ? a : jj_eval(c, n->kids[1], s);
        break;
    }
    case N_NOT: r = jv_bool(!jv_truthy(jj_eval(c, n->kids[0], s))); break;
    case N_COND:
        if (jv_truthy(jj_eval(c, n->kids[1], s))) r = jj_eval(c, n->kids[0], s);
        else r = n->kids[2] ? jj_eval(c, n->kids[2], s) : jv_undef(c, NULL);
        break;
    case N_LIST: case N_TUPLE:
        r = jv_list(c);
        r->u.list.tuple = n->k == N_TUPLE;
        for (int i = 0; i < n->n; i++) jv_list_push(c, r, jj_eval(c, n->kids[i], s));
        break;
    case N_DICT:
        r = jv_dict(c);
        for (int i = 0; i + 1 < n->n; i += 2) jv_dict_set(c, r, jj_eval(c, n->kids[i], s), jj_eval(c, n->kids[i + 1], s));
        break;
    default: jj_fail(c, "line %d: not an expression", n->line);
    }
    c->depth--;
    return r;
}

/* ---- statements ---- */
static void assign(jj_ctx *c, const jj_node *target, jv *v, jj_scope *s) {
    if (target->k == N_NAME) {
        jv_dict_set(c, s->vars, target->val, v);
    } else if (target->k == N_TUPLE) {
        if (v->t == JV_UNDEF) undefined_error(c, v);
        jv *items = jj_iterable_list(c, v);
        if (items->u.list.n != target->n)
            jj_fail(c, "%s values to unpack (expected %d, got %d)", items->u.list.n > target->n ? "too many" : "not enough",
                    target->n, items->u.list.n);
        for (int i = 0; i < target->n; i++) assign(c, target->kids[i], items->u.list.items[i], s);
    } else if (target->k == N_GETATTR) {
        jv *ns = lookup(s, target->kids[0]->s);
        if (!ns || ns->t != JV_DICT || !ns->u.dict.is_ns) jj_fail(c, "cannot assign attribute on non-namespace object");
        jv_dict_setc(c, ns, target->s, v);
    }
}

static jv *loop_cycle(jj_ctx *c, jv *self, jj_args *a) {
    if (a->n == 0) jj_fail(c, "no items for cycling given");
    return a->v[self->u.loop.i % a->n];
}

/* loop.<name> */
jv *jj_loop_attr(jj_ctx *c, jv *loop, const char *name, size_t n) {
    int i = loop->u.loop.i, len = loop->u.loop.items->u.list.n;
    jv **items = loop->u.loop.items->u.list.items;
    char k[16];
    if (n >= sizeof k) return jv_undef(c, "loop attribute");
    memcpy(k, name, n);
    k[n] = 0;
    if (!strcmp(k, "index")) return jv_int(c, i + 1);
    if (!strcmp(k, "index0")) return jv_int(c, i);
    if (!strcmp(k, "revindex")) return jv_int(c, len - i);
    if (!strcmp(k, "revindex0")) return jv_int(c, len - i - 1);
    if (!strcmp(k, "first")) return jv_bool(i == 0);
    if (!strcmp(k, "last")) return jv_bool(i == len - 1);
    if (!strcmp(k, "length")) return jv_int(c, len);
    if (!strcmp(k, "depth")) return jv_int(c, 1);
    if (!strcmp(k, "depth0")) return jv_int(c, 0);
    if (!strcmp(k, "previtem")) return i > 0 ? items[i - 1] : jv_undef(c, "previtem");
    if (!strcmp(k, "nextitem")) return i + 1 < len ? items[i + 1] : jv_undef(c, "nextitem");
    if (!strcmp(k, "cycle")) return jv_func(c, "cycle", loop_cycle, loop);
    return jv_undef(c, jj_strndup(c->a, name, n));
}

static void exec_for(jj_ctx *c, const jj_node *n, jj_scope *s) {
    jv *it = jj_eval(c, n->kids[1], s);
    jv *items = jj_iterable_list(c, it);
    const jj_node *target = n->kids[0], *cond = n->kids[2], *body = n->kids[3], *els = n->kids[4];
    if (cond) { /* the loop's "if": filtered before loop.length and friends are known */
        jv *kept = jv_list(c);
        for (int i = 0; i < items->u.list.n; i++) {
            jj_step(c);
            jj_scope *t = scope_new(c, s);
            assign(c, target, items->u.list.items[i], t);
            if (jv_truthy(jj_eval(c, cond, t))) jv_list_push(c, kept, items->u.list.items[i]);
        }
        items = kept;
    }
    int len = items->u.list.n;
    jv *loop_key = jv_cstr(c, "loop");
    for (int i = 0; i < len; i++) {
        if (++c->iterations > c->lim->max_iterations)
            jj_fail(c, "loops ran more than the bound of %ld iterations", c->lim->max_iterations);
        jj_scope *t = scope_new(c, s);
        jv *loop = jj_alloc(c->a, sizeof *loop);
        loop->t = JV_LOOP, loop->u.loop.items = items, loop->u.loop.i = i;
        jv_dict_set(c, t->vars, loop_key, loop);
        assign(c, target, items->u.list.items[i], t);
        exec_body(c, body, t);
        if (c->brk == 1) {
            c->brk = 0;
            break;
        }
        c->brk = 0;
    }
    if (len == 0 && els) exec_body(c, els, s);
}

static void exec_stmt(jj_ctx *c, const jj_node *n, jj_scope *s) {
    enter(c);
    switch (n->k) {
    case N_BODY: exec_body(c, n, s); break;
    case N_TEXT: jj_buf_add(c, c->out, n->val->u.str.s, n->val->u.str.n); break;
    case N_PRINT: jv_str_append(c, c->out, jj_eval(c, n->kids[0], s)); break;
    case N_IF: {
        int i = 0;
        for (; i + 1 < n->n; i += 2)
            if (jv_truthy(jj_eval(c, n->kids[i], s))) {
                exec_body(c, n->kids[i + 1], s);
                break;
            }
        if (i + 1 >= n->n && (n->n & 1)) exec_body(c, n->kids[n->n - 1], s);
        break;
    }
    case N_FOR: exec_for(c, n, s); break;
    case N_SET: assign(c, n->kids[0], jj_eval(c, n->kids[1], s), s); break;
    case N_SET_BLOCK: {
        jj_buf *saved = c->out, buf = {0};
        c->out = &buf;
        exec_body(c, n->kids[1], s);
        c->out = saved;
        jv *v = jv_str_ref(c, buf.s ? buf.s : "", buf.n);
        if (n->kids[2]) {
            /* the filter chain, innermost (NULL operand) first */
            const jj_node *chain[64];
            int k = 0;
            for (const jj_node *f = n->kids[2]; f && k < 64; f = f->kids[0]) chain[k++] = f;
            while (k--) {
                jj_args a;
                eval_args(c, chain[k], s, 1, &a);
                v = jj_apply_filter(c, chain[k]->s, v, &a, chain[k]->line);
            }
        }
        assign(c, n->kids[0], v, s);
        break;
    }
    case N_FILTER_BLOCK: {
        jj_buf *saved = c->out, buf = {0};
        c->out = &buf;
        exec_body(c, n->kids[0], s);
        c->out = saved;
        jv *v = jv_str_ref(c, buf.s ? buf.s : "", buf.n);
        const jj_node *chain[64];
        int k = 0;
        for (const jj_node *f = n->kids[1]; f && k < 64; f = f->kids[0]) chain[k++] = f;
        while (k--) {
            jj_args a;
            eval_args(c, chain[k], s, 1, &a);
            v = jj_apply_filter(c, chain[k]->s, v, &a, chain[k]->line);
        }
        jv_str_append(c, c->out, v);
        break;
    }
    case N_MACRO: {
        jv *f = jv_func(c, n->s, NULL, NULL);
        f->u.fn.macro = n, f->u.fn.closure = s;
        jv_dict_setc(c, s->vars, n->s, f);
        break;
    }
    case N_CALL_BLOCK: {
        /* caller(): the body as a macro without parameters */
        const jj_node *call = n->kids[0];
        jj_node *body_macro = jj_alloc(c->a, sizeof *body_macro);
        body_macro->k = N_MACRO, body_macro->s = "caller", body_macro->n = 0;
        body_macro->kids = (jj_node **)&n->kids[1];
        jv *caller = jv_func(c, "caller", NULL, NULL);
        caller->u.fn.macro = body_macro, caller->u.fn.closure = s;
        jv *f = jj_eval(c, call->kids[0], s);
        if (f->t != JV_FUNC || !f->u.fn.macro) jj_fail(c, "{%% call %%} needs a macro");
        jv *g = jv_func(c, f->u.fn.name, NULL, NULL);
        *g = *f;
        g->u.fn.caller = caller;
        jj_args a;
        eval_args(c, call, s, 1, &a);
        jv_str_append(c, c->out, jj_call(c, g, &a));
        break;
    }
    case N_BREAK: c->brk = 1; break;
    case N_CONTINUE: c->brk = 2; break;
    default: jv_str_append(c, c->out, jj_eval(c, n, s));
    }
    c->depth--;
}

static void exec_body(jj_ctx *c, const jj_node *n, jj_scope *s) {
    if (n->k != N_BODY) {
        exec_stmt(c, n, s);
        return;
    }
    for (int i = 0; i < n->n && !c->brk; i++) exec_stmt(c, n->kids[i], s);
}

/* ---- the public face ---- */
void clf_jinja_default_limits(clf_jinja_limits *l) {
    l->max_template = 1 << 20;
    l->max_depth = 200;
    l->max_iterations = 1000000;
    l->max_recursion = 100;
    l->max_output = 4 << 20;
    l->max_memory = 512u << 20;
    l->max_steps = 50000000;
}

clf_status clf_jinja_parse(const char *text, size_t len, const clf_jinja_limits *limits, clf_jinja_template **out) {
    *out = NULL;
    clf_jinja_template *t = calloc(1, sizeof *t);
    if (!t) return clf_fail(CLF_ERR_MEMORY, "out of memory for a chat template");
    if (limits) t->lim = *limits;
    else clf_jinja_default_limits(&t->lim);
    if (len > t->lim.max_template) {
        size_t max = t->lim.max_template;
        free(t);
        return clf_fail(CLF_ERR_FORMAT, "chat template of %zu bytes, over the bound of %zu (max_template)", len, max);
    }
    /* tokens and tree: at most about 100 bytes a template byte ("((((...") */
    t->a.cap = 128 * len + (1 << 20);
    jmp_buf jb;
    t->a.fail = &jb;
    if (setjmp(jb)) {
        clf_status st = t->a.failed == 2 ? CLF_ERR_MEMORY : CLF_ERR_FORMAT;
        clf_fail(st, "chat template: out of memory parsing it");
        clf_jinja_free(t);
        return st;
    }
    jj_tok *toks;
    int n;
    clf_status st = jj_lex(&t->a, text, len, &toks, &n);
    if (st == CLF_OK) st = jj_parse(t, toks, n);
    if (st != CLF_OK) {
        if (t->a.failed) clf_fail(t->a.failed == 2 ? CLF_ERR_MEMORY : CLF_ERR_FORMAT, "chat template: out of memory parsing it");
        clf_jinja_free(t);
        return st;
    }
    t->a.fail = NULL;
    *out = t;
    return CLF_OK;
}

void clf_jinja_free(clf_jinja_template *t) {
    if (!t) return;
    jj_arena_free(&t->a);
    free(t);
}

clf_status clf_jinja_render(const clf_jinja_template *t, const char *context_json, time_t now, char **out,
                            size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    g_last_raise = 0;
    jj_arena a = {.cap = t->lim.max_memory};
    jj_ctx *c = calloc(1, sizeof *c);
    if (!c) return clf_fail(CLF_ERR_MEMORY, "out of memory for a chat template's rendering");
    c->a = &a, c->lim = &t->lim, c->now = now;
    a.fail = &c->fail;
    jj_buf buf = {0};
    c->out = &buf;
    if (setjmp(c->fail)) {
        clf_status st = CLF_ERR_FORMAT;
        if (a.failed == 1)
            clf_fail(st, "chat template: the rendering allocated more than the bound of %zu bytes (max_memory)", t->lim.max_memory);
        else if (a.failed == 2)
            st = clf_fail(CLF_ERR_MEMORY, "chat template: out of memory");
        g_last_raise = c->raised;
        jj_arena_free(&a);
        free(c);
        return st;
    }
    /* the builtins, then the context's variables over them, then the template's */
    c->globals = scope_new(c, NULL);
    jj_install_globals(c, c->globals->vars);
    jj_scope *root = scope_new(c, c->globals);
    if (context_json && *context_json) {
        jv *ctx = jv_from_json_text(c, context_json, strlen(context_json));
        if (!ctx || ctx->t != JV_DICT) jj_fail(c, "the context is not a JSON object");
        root->vars = ctx;
    }
    exec_body(c, t->root, root);
    char *r = malloc(buf.n + 1);
    if (!r) {
        jj_arena_free(&a);
        free(c);
        return clf_fail(CLF_ERR_MEMORY, "out of memory for a chat template's output");
    }
    if (buf.n) memcpy(r, buf.s, buf.n);
    r[buf.n] = 0;
    *out = r;
    if (out_len) *out_len = buf.n;
    jj_arena_free(&a);
    free(c);
    return CLF_OK;
}

/* The Jinja engine's parser: tokens to a syntax tree, with jinja2's
 * precedence (ternary, or, and, not, comparisons, + -, ~, * / // %, **,
 * unary - +, then primaries with their subscripts, attributes, calls,
 * filters and tests). An unknown filter or test fails when it runs (jinja2
 * 3 defers those inside if blocks to run time; templates carry such
 * filters, from_json, in branches not taken). Nesting is bounded
 * (limits.max_depth).
 *
 * Node layouts (jinja_impl.h's jj_node):
 *   N_BODY kids: statements            N_TEXT val        N_PRINT kids[0]
 *   N_IF kids: cond, body, cond, body, ..., [else body] (odd n: an else)
 *   N_FOR kids: target, iterable, condition|NULL, body, else|NULL
 *   N_SET kids: target, value          N_SET_BLOCK kids: target, body, filter|NULL
 *   N_MACRO s name, names params (n), kids[0..n-1] defaults|NULL, kids[n] body
 *   N_CALL_BLOCK kids: call, body      N_FILTER_BLOCK kids: body, filter (operand NULL)
 *   N_GETATTR kids[0], s   N_GETITEM kids: obj, index|N_SLICE   N_SLICE kids: 3, each NULL-able
 *   N_CALL/N_FILTER/N_TEST kids[0] callee/operand, kids[1..] arguments, names[i] keywords
 *   N_UNARY/N_BINARY/N_COMPARE s operator   N_COND kids: then, cond, else|NULL
 *   N_LIST/N_TUPLE kids items   N_DICT kids: key, value, ... */
#include <stdio.h>
#include <string.h>

#include "jinja_impl.h"

typedef struct parser {
    jj_arena *a;
    jj_tok *t;
    int n, i;
    int depth, max_depth;
    jmp_buf fail;
} parser;

static void perr(parser *p, const char *fmt, const char *what) __attribute__((noreturn));
static void perr(parser *p, const char *fmt, const char *what) {
    char msg[200];
    snprintf(msg, sizeof msg, fmt, what);
    clf_fail(CLF_ERR_FORMAT, "chat template line %d: %s", p->t[p->i].line, msg);
    longjmp(p->fail, 1);
}

static jj_tok *cur(parser *p) { return &p->t[p->i]; }
static int is_op(parser *p, const char *op) {
    jj_tok *t = cur(p);
    return t->t == TK_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int is_name(parser *p, const char *name) {
    jj_tok *t = cur(p);
    return t->t == TK_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}
static int is_name_at(parser *p, int k, const char *name) {
    if (p->i + k >= p->n) return 0;
    jj_tok *t = &p->t[p->i + k];
    return t->t == TK_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}
static void expect_op(parser *p, const char *op) {
    if (!is_op(p, op)) perr(p, "expected '%s'", op);
    p->i++;
}
static const char *expect_name(parser *p) {
    if (cur(p)->t != TK_NAME) perr(p, "expected a name%s", "");
    const char *s = cur(p)->s;
    p->i++;
    return s;
}
static void expect_block_end(parser *p) {
    if (cur(p)->t != TK_BLOCK_END) perr(p, "expected the end of the statement ('%s')", "%}");
    p->i++;
}

static jj_node *node(parser *p, jj_kind k) {
    jj_node *n = jj_alloc(p->a, sizeof *n);
    n->k = k, n->line = cur(p)->line;
    return n;
}
/* appends a kid (and its keyword) */
static void add(parser *p, jj_node *n, jj_node *kid, const char *name) {
    if ((n->n & (n->n - 1)) == 0) { /* grow at powers of two */
        int cap = n->n ? n->n * 2 : 2;
        jj_node **k = jj_alloc(p->a, (size_t)cap * sizeof *k);
        const char **nm = jj_alloc(p->a, (size_t)cap * sizeof *nm);
        if (n->n) memcpy(k, n->kids, (size_t)n->n * sizeof *k), memcpy(nm, n->names, (size_t)n->n * sizeof *nm);
        n->kids = k, n->names = nm;
    }
    n->kids[n->n] = kid;
    n->names[n->n++] = name;
}
static jj_node *node2(parser *p, jj_kind k, const char *s, jj_node *a, jj_node *b) {
    jj_node *n = node(p, k);
    n->s = s;
    add(p, n, a, NULL);
    if (b) add(p, n, b, NULL);
    return n;
}

static void enter(parser *p) {
    if (++p->depth > p->max_depth) perr(p, "nesting deeper than the bound (max_depth)%s", "");
}

static jj_node *parse_expr(parser *p);
static jj_node *parse_or(parser *p);
static jj_node *parse_unary(parser *p, int with_filter);

static void parse_call_args(parser *p, jj_node *call) {
    expect_op(p, "(");
    while (!is_op(p, ")")) {
        if (call->n > 1) expect_op(p, ",");
        if (is_op(p, ")")) break;
        const char *kw = NULL;
        if (cur(p)->t == TK_NAME && p->i + 1 < p->n && p->t[p->i + 1].t == TK_OP && p->t[p->i + 1].n == 1 &&
            p->t[p->i + 1].s[0] == '=') {
            kw = cur(p)->s;
            p->i += 2;
        }
        add(p, call, parse_expr(p), kw);
    }
    p->i++;
}

static jj_node *parse_primary(parser *p) {
    jj_tok *t = cur(p);
    jj_node *n;
    enter(p);
    if (t->t == TK_NAME) {
        static jv vt = {.t = JV_BOOL, .u.b = 1}, vf = {.t = JV_BOOL, .u.b = 0}, vn = {.t = JV_NONE};
        n = node(p, N_CONST);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->val = &vt;
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->val = &vf;
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->val = &vn;
        else {
            /* a name: its text as a value too, the key a set or a for stores under */
            n->k = N_NAME, n->s = t->s;
            n->val = jj_alloc(p->a, sizeof(jv));
            n->val->t = JV_STR, n->val->u.str.s = t->s, n->val->u.str.n = t->n;
        }
        p->i++;
    } else if (t->t == TK_STRING) {
        /* adjacent strings concatenate */
        size_t len = 0;
        int k = p->i;
        while (k < p->n && p->t[k].t == TK_STRING) len += p->t[k++].n;
        char *s = jj_alloc(p->a, len + 1);
        len = 0;
        for (; p->i < k; p->i++) memcpy(s + len, p->t[p->i].s, p->t[p->i].n), len += p->t[p->i].n;
        n = node(p, N_CONST);
        n->val = jj_alloc(p->a, sizeof(jv));
        n->val->t = JV_STR, n->val->u.str.s = s, n->val->u.str.n = len;
    } else if (t->t == TK_INT || t->t == TK_FLOAT) {
        n = node(p, N_CONST);
        n->val = jj_alloc(p->a, sizeof(jv));
        if (t->t == TK_INT) n->val->t = JV_INT, n->val->u.i = t->i;
        else n->val->t = JV_FLOAT, n->val->u.f = t->f;
        p->i++;
    } else if (is_op(p, "(")) {
        p->i++;
        if (is_op(p, ")")) {
            p->i++;
            n = node(p, N_TUPLE);
        } else {
            n = parse_expr(p);
            if (is_op(p, ",")) {
                jj_node *tu = node(p, N_TUPLE);
                add(p, tu, n, NULL);
                while (is_op(p, ",")) {
                    p->i++;
                    if (is_op(p, ")")) break;
                    add(p, tu, parse_expr(p), NULL);
                }
                n = tu;
            }
            expect_op(p, ")");
        }
    } else if (is_op(p, "[")) {
        p->i++;
        n = node(p, N_LIST);
        while (!is_op(p, "]")) {
            if (n->n) expect_op(p, ",");
            if (is_op(p, "]")) break;
            add(p, n, parse_expr(p), NULL);
        }
        p->i++;
    } else if (is_op(p, "{")) {
        p->i++;
        n = node(p, N_DICT);
        while (!is_op(p, "}")) {
            if (n->n) expect_op(p, ",");
            if (is_op(p, "}")) break;
            add(p, n, parse_expr(p), NULL);
            expect_op(p, ":");
            add(p, n, parse_expr(p), NULL);
        }
        p->i++;
    } else {
        perr(p, "unexpected %s in an expression", t->t == TK_EOF ? "end of template" : t->t == TK_OP ? "operator" : "tag end");
    }
    p->depth--;
    return n;
}

/* subscripts, attributes, calls after a primary */
static jj_node *parse_postfix(parser *p, jj_node *n) {
    for (;;) {
        if (is_op(p, ".")) {
            p->i++;
            jj_tok *t = cur(p);
            if (t->t == TK_NAME) {
                n = node2(p, N_GETATTR, t->s, n, NULL);
                p->i++;
            } else if (t->t == TK_INT) { /* x.0: an item */
                jj_node *k = node(p, N_CONST);
                k->val = jj_alloc(p->a, sizeof(jv));
                k->val->t = JV_INT, k->val->u.i = t->i;
                n = node2(p, N_GETITEM, NULL, n, k);
                p->i++;
            } else {
                perr(p, "expected an attribute name after '%s'", ".");
            }
        } else if (is_op(p, "[")) {
            p->i++;
            jj_node *idx[3] = {NULL, NULL, NULL};
            int slice = 0;
            for (int part = 0; part < 3; part++) {
                if (!is_op(p, ":") && !is_op(p, "]")) idx[part] = parse_expr(p);
                if (is_op(p, ":") && part < 2) {
                    slice = 1;
                    p->i++;
                } else {
                    break;
                }
            }
            expect_op(p, "]");
            if (slice) {
                jj_node *s = node(p, N_SLICE);
                for (int k = 0; k < 3; k++) add(p, s, idx[k], NULL);
                n = node2(p, N_GETITEM, NULL, n, s);
            } else {
                if (!idx[0]) perr(p, "expected a subscript%s", "");
                n = node2(p, N_GETITEM, NULL, n, idx[0]);
            }
        } else if (is_op(p, "(")) {
            jj_node *c = node(p, N_CALL);
            add(p, c, n, NULL);
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

/* | filter(args) and is [not] test [arg] */
static jj_node *parse_filter_expr(parser *p, jj_node *n) {
    for (;;) {
        if (is_op(p, "|")) {
            p->i++;
            const char *name = expect_name(p);
            jj_node *f = node(p, N_FILTER);
            f->s = name;
            add(p, f, n, NULL);
            if (is_op(p, "(")) parse_call_args(p, f);
            n = f;
        } else if (is_name(p, "is")) {
            p->i++;
            jj_node *t = node(p, N_TEST);
            if (is_name(p, "not")) t->negate = 1, p->i++;
            const char *name = expect_name(p);
            t->s = name;
            add(p, t, n, NULL);
            jj_tok *k = cur(p);
            if (is_op(p, "(")) {
                parse_call_args(p, t);
            } else if ((k->t == TK_NAME || k->t == TK_STRING || k->t == TK_INT || k->t == TK_FLOAT || is_op(p, "[") ||
                        is_op(p, "{")) &&
                       !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
                /* jinja2's rule: any other name is the test's argument ("x is defined if" does not parse) */
                if (is_name(p, "is")) perr(p, "you cannot chain multiple tests with %s", "is");
                jj_node *arg = parse_primary(p);
                arg = parse_postfix(p, arg);
                add(p, t, arg, NULL);
            }
            n = t;
        } else if (is_op(p, "(")) {
            jj_node *c = node(p, N_CALL);
            add(p, c, n, NULL);
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static jj_node *parse_unary(parser *p, int with_filter) {
    jj_node *n;
    enter(p);
    if (is_op(p, "-") || is_op(p, "+")) {
        const char *op = cur(p)->s;
        p->i++;
        n = node2(p, N_UNARY, op, parse_unary(p, 0), NULL);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jj_node *parse_pow(parser *p) {
    jj_node *n = parse_unary(p, 1);
    while (is_op(p, "**")) {
        p->i++;
        n = node2(p, N_BINARY, "**", n, parse_unary(p, 1));
    }
    return n;
}
static jj_node *parse_math2(parser *p) {
    jj_node *n = parse_pow(p);
    while (is_op(p, "*") || is_op(p, "/") || is_op(p, "//") || is_op(p, "%")) {
        const char *op = cur(p)->s;
        p->i++;
        n = node2(p, N_BINARY, op, n, parse_pow(p));
    }
    return n;
}
/* jinja2's order: ~ binds tighter than + and -, looser than * and / */
static jj_node *parse_concat(parser *p) {
    jj_node *n = parse_math2(p);
    while (is_op(p, "~")) {
        p->i++;
        n = node2(p, N_BINARY, "~", n, parse_math2(p));
    }
    return n;
}
static jj_node *parse_math1(parser *p) {
    jj_node *n = parse_concat(p);
    while (is_op(p, "+") || is_op(p, "-")) {
        const char *op = cur(p)->s;
        p->i++;
        n = node2(p, N_BINARY, op, n, parse_concat(p));
    }
    return n;
}
/* a < b < c is Python's (a < b) and (b < c) */
static jj_node *parse_compare(parser *p) {
    jj_node *n = parse_math1(p), *last = NULL;
    for (;;) {
        const char *op;
        if (is_op(p, "==") || is_op(p, "!=") || is_op(p, "<") || is_op(p, "<=") || is_op(p, ">") || is_op(p, ">=")) {
            op = cur(p)->s;
            p->i++;
        } else if (is_name(p, "in")) {
            op = "in";
            p->i++;
        } else if (is_name(p, "not") && is_name_at(p, 1, "in")) {
            op = "notin";
            p->i += 2;
        } else {
            return n;
        }
        jj_node *right = parse_math1(p);
        if (!last) {
            n = last = node2(p, N_COMPARE, op, n, right);
        } else {
            last = node2(p, N_COMPARE, op, last->kids[1], right);
            n = node2(p, N_AND, NULL, n, last);
        }
    }
}
static jj_node *parse_not(parser *p) {
    if (is_name(p, "not")) {
        p->i++;
        enter(p);
        jj_node *n = node2(p, N_NOT, NULL, parse_not(p), NULL);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}
static jj_node *parse_and(parser *p) {
    jj_node *n = parse_not(p);
    while (is_name(p, "and")) {
        p->i++;
        n = node2(p, N_AND, NULL, n, parse_not(p));
    }
    return n;
}
static jj_node *parse_or(parser *p) {
    jj_node *n = parse_and(p);
    while (is_name(p, "or")) {
        p->i++;
        n = node2(p, N_OR, NULL, n, parse_and(p));
    }
    return n;
}
/* x if c else y (else optional: undefined) */
static jj_node *parse_expr(parser *p) {
    enter(p);
    jj_node *n = parse_or(p);
    while (is_name(p, "if")) {
        p->i++;
        jj_node *c = node(p, N_COND);
        add(p, c, n, NULL);
        add(p, c, parse_or(p), NULL);
        jj_node *e = NULL;
        if (is_name(p, "else")) {
            p->i++;
            e = parse_expr(p);
        }
        add(p, c, e, NULL);
        n = c;
    }
    p->depth--;
    return n;
}

/* an expression, or a tuple of them without parentheses (for's and set's targets, values) */
static jj_node *parse_tuple(parser *p, int names_only) {
    jj_node *first = names_only ? parse_primary(p) : parse_expr(p);
    if (names_only && first->k != N_NAME) perr(p, "cannot assign to %s", "this");
    if (!is_op(p, ",")) return first;
    jj_node *t = node(p, N_TUPLE);
    add(p, t, first, NULL);
    while (is_op(p, ",")) {
        p->i++;
        jj_node *x = names_only ? parse_primary(p) : parse_expr(p);
        if (names_only && x->k != N_NAME) perr(p, "cannot assign to %s", "this");
        add(p, t, x, NULL);
    }
    return t;
}

/* ---- statements ---- */
static jj_node *parse_body(parser *p, const char *const *ends);

/* the block tag's name after {% (the index stays on it) */
static int at_block(parser *p, const char *const *names) {
    if (cur(p)->t != TK_BLOCK_BEGIN || p->i + 1 >= p->n) return 0;
    jj_tok *t = &p->t[p->i + 1];
    if (t->t != TK_NAME) return 0;
    for (; *names; names++)
        if (!strcmp(t->s, *names)) return 1;
    return 0;
}

static jj_node *parse_filter_chain(parser *p) {
    /* name(args) | name(args) ... applied to a NULL operand */
    jj_node *n = NULL;
    do {
        if (n) p->i++;
        const char *name = expect_name(p);
        jj_node *f = node(p, N_FILTER);
        f->s = name;
        add(p, f, n, NULL);
        if (is_op(p, "(")) parse_call_args(p, f);
        n = f;
    } while (is_op(p, "|"));
    return n;
}

static jj_node *parse_statement(parser *p) {
    p->i++; /* {% */
    jj_tok *t = cur(p);
    if (t->t != TK_NAME) perr(p, "expected a statement name%s", "");
    const char *kw = t->s;
    jj_node *n;
    enter(p);
    p->i++;
    if (!strcmp(kw, "if")) {
        n = node(p, N_IF);
        add(p, n, parse_expr(p), NULL);
        expect_block_end(p);
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        for (;;) {
            add(p, n, parse_body(p, ends), NULL);
            p->i++;
            const char *e = expect_name(p);
            if (!strcmp(e, "elif")) {
                add(p, n, parse_expr(p), NULL);
                expect_block_end(p);
            } else if (!strcmp(e, "else")) {
                expect_block_end(p);
                static const char *const end_if[] = {"endif", NULL};
                add(p, n, parse_body(p, end_if), NULL);
                p->i += 2;
                expect_block_end(p);
                break;
            } else {
                expect_block_end(p);
                break;
            }
        }
    } else if (!strcmp(kw, "for")) {
        n = node(p, N_FOR);
        add(p, n, parse_tuple(p, 1), NULL);
        if (!is_name(p, "in")) perr(p, "expected 'in' in a for%s", "");
        p->i++;
        /* the iterable: no ternary here (its "if" is the loop's filter) */
        add(p, n, parse_or(p), NULL);
        jj_node *cond = NULL;
        if (is_name(p, "if")) {
            p->i++;
            cond = parse_expr(p);
        }
        add(p, n, cond, NULL);
        if (is_name(p, "recursive")) perr(p, "recursive loops are not supported%s", "");
        expect_block_end(p);
        static const char *const ends[] = {"else", "endfor", NULL};
        add(p, n, parse_body(p, ends), NULL);
        p->i++;
        jj_node *els = NULL;
        if (is_name(p, "else")) {
            p->i++;
            expect_block_end(p);
            static const char *const end_for[] = {"endfor", NULL};
            els = parse_body(p, end_for);
            p->i++;
        }
        p->i++; /* endfor */
        expect_block_end(p);
        add(p, n, els, NULL);
    } else if (!strcmp(kw, "set")) {
        jj_node *target;
        if (cur(p)->t == TK_NAME && p->i + 2 < p->n && p->t[p->i + 1].t == TK_OP && p->t[p->i + 1].s[0] == '.' &&
            p->t[p->i + 1].n == 1) {
            target = node(p, N_GETATTR);
            jj_node *obj = node(p, N_NAME);
            obj->s = cur(p)->s;
            p->i += 2;
            target->s = expect_name(p);
            add(p, target, obj, NULL);
        } else {
            target = parse_tuple(p, 1);
        }
        if (is_op(p, "=")) {
            p->i++;
            n = node(p, N_SET);
            add(p, n, target, NULL);
            add(p, n, parse_tuple(p, 0), NULL);
            expect_block_end(p);
        } else {
            n = node(p, N_SET_BLOCK);
            add(p, n, target, NULL);
            jj_node *filter = NULL;
            if (is_op(p, "|")) {
                p->i++;
                filter = parse_filter_chain(p);
            }
            expect_block_end(p);
            static const char *const ends[] = {"endset", NULL};
            add(p, n, parse_body(p, ends), NULL);
            add(p, n, filter, NULL);
            p->i += 2;
            expect_block_end(p);
        }
    } else if (!strcmp(kw, "macro")) {
        n = node(p, N_MACRO);
        n->s = expect_name(p);
        expect_op(p, "(");
        while (!is_op(p, ")")) {
            if (n->n) expect_op(p, ",");
            const char *param = expect_name(p);
            jj_node *def = NULL;
            if (is_op(p, "=")) {
                p->i++;
                def = parse_expr(p);
            }
            add(p, n, def, param);
        }
        p->i++;
        expect_block_end(p);
        static const char *const ends[] = {"endmacro", NULL};
        jj_node *body = parse_body(p, ends);
        p->i += 2;
        if (cur(p)->t == TK_NAME) p->i++; /* {% endmacro name %} */
        expect_block_end(p);
        int np = n->n;
        add(p, n, body, NULL);
        n->n = np; /* the body rides after the parameters */
    } else if (!strcmp(kw, "call")) {
        n = node(p, N_CALL_BLOCK);
        jj_node *call = parse_expr(p);
        if (call->k != N_CALL) perr(p, "expected a call in {%% call %s}", "%");
        add(p, n, call, NULL);
        expect_block_end(p);
        static const char *const ends[] = {"endcall", NULL};
        add(p, n, parse_body(p, ends), NULL);
        p->i += 2;
        expect_block_end(p);
    } else if (!strcmp(kw, "filter")) {
        n = node(p, N_FILTER_BLOCK);
        jj_node *f = parse_filter_chain(p);
        expect_block_end(p);
        static const char *const ends[] = {"endfilter", NULL};
        add(p, n, parse_body(p, ends), NULL);
        add(p, n, f, NULL);
        p->i += 2;
        expect_block_end(p);
    } else if (!strcmp(kw, "generation")) {
        /* transformers' AssistantTracker: renders its body as is */
        expect_block_end(p);
        static const char *const ends[] = {"endgeneration", NULL};
        n = parse_body(p, ends);
        p->i += 2;
        expect_block_end(p);
    } else if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        n = node(p, kw[0] == 'b' ? N_BREAK : N_CONTINUE);
        expect_block_end(p);
    } else {
        perr(p, "unknown statement '%s'", kw);
    }
    p->depth--;
    return n;
}

static jj_node *parse_body(parser *p, const char *const *ends) {
    jj_node *body = node(p, N_BODY);
    for (;;) {
        jj_tok *t = cur(p);
        if (t->t == TK_EOF) {
            if (ends) { /* the block's last end tag: "endif" rather than "elif" */
                int k = 0;
                while (ends[k + 1]) k++;
                perr(p, "unexpected end of template, expected '%s'", ends[k]);
            }
            return body;
        }
        if (t->t == TK_TEXT) {
            jj_node *x = node(p, N_TEXT);
            x->val = jj_alloc(p->a, sizeof(jv));
            x->val->t = JV_STR, x->val->u.str.s = t->s, x->val->u.str.n = t->n;
            add(p, body, x, NULL);
            p->i++;
        } else if (t->t == TK_VAR_BEGIN) {
            p->i++;
            jj_node *x = node2(p, N_PRINT, NULL, parse_expr(p), NULL);
            if (cur(p)->t != TK_VAR_END) perr(p, "expected the end of the print statement ('%s')", "}}");
            p->i++;
            add(p, body, x, NULL);
        } else if (t->t == TK_BLOCK_BEGIN) {
            if (ends && at_block(p, ends)) return body;
            static const char *const stray[] = {"endif", "endfor", "elif", "else", "endset", "endmacro", "endcall",
                                                "endfilter", "endgeneration", NULL};
            if (at_block(p, stray)) {
                p->i++;
                perr(p, "unexpected '%s'", cur(p)->s);
            }
            add(p, body, parse_statement(p), NULL);
        } else {
            perr(p, "unexpected token%s", "");
        }
    }
}

clf_status jj_parse(clf_jinja_template *t, jj_tok *toks, int n) {
    parser p = {.a = &t->a, .t = toks, .n = n, .max_depth = t->lim.max_depth};
    if (setjmp(p.fail)) return CLF_ERR_FORMAT;
    jmp_buf *outer = t->a.fail;
    t->a.fail = &p.fail;
    t->root = parse_body(&p, NULL);
    t->a.fail = outer;
    return CLF_OK;
}

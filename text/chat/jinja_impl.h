/* The Jinja engine's insides (jinja.h is its face): values, the arena a
 * parse or a rendering allocates from, tokens, the syntax tree, and the
 * evaluator's state. */
#ifndef CLF_JINJA_IMPL_H
#define CLF_JINJA_IMPL_H

#include <setjmp.h>
#include <stdint.h>

#include "jinja.h"

/* ---- arena: everything of a parse or a rendering, freed at once ---- */
typedef struct jj_chunk jj_chunk;
typedef struct jj_arena {
    jj_chunk *head;
    size_t used, cap; /* bytes allocated so far, and the bound */
    jmp_buf *fail;    /* where an allocation past the bound (or failing) jumps */
    int failed;       /* set before the jump: the bound (1) or malloc (2) */
} jj_arena;
void *jj_alloc(jj_arena *a, size_t n); /* zeroed */
char *jj_strndup(jj_arena *a, const char *s, size_t n);
void jj_arena_free(jj_arena *a);

/* ---- values ---- */
typedef enum jv_type { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC, JV_LOOP } jv_type;

typedef struct jv jv;
typedef struct jj_ctx jj_ctx;
typedef struct jj_node jj_node;
typedef struct jj_scope jj_scope;

/* arguments of a call: positional, then keyword (names[i] non-NULL) */
typedef struct jj_args {
    int n;
    jv **v;
    const char **names; /* n entries, NULL for a positional one */
} jj_args;

typedef jv *(*jj_builtin)(jj_ctx *c, jv *self, jj_args *a);

struct jv {
    jv_type t;
    union {
        int b;
        long long i;
        double f;
        /* UTF-8, n bytes; safe: markupsafe's Markup (the "safe" filter's),
         * which escapes a plain string added to it */
        struct { const char *s; size_t n; int safe; } str;
        /* gen: a jinja2 filter's generator (map, select..., unique, items): always
         * true, no len(), not subscriptable, not JSON */
        /* view: a dict's items() (1), keys() (2), values() (3): printed so */
        struct { jv **items; int n, cap; int tuple, gen, view; } list;
        /* insertion order; is_ns: a namespace() (its attributes settable) */
        struct { jv **keys, **vals; int n, cap; int is_ns; } dict;
        struct {
            jj_builtin fn; jv *self; const char *name; /* builtin or bound method */
            const jj_node *macro; jj_scope *closure;   /* a macro */
            jv *caller;                                /* a {% call %}'s body */
        } fn;
        /* what was undefined, for jinja2's message: a name alone, or obj's
         * attribute (attr) or item key */
        struct { const char *name; jv *obj, *key; int attr; } undef;
        /* a for loop's "loop": its attributes computed when read (a loop
         * of a million iterations allocates little) */
        struct { jv *items; int i; } loop;
    } u;
};

/* ---- tokens ---- */
typedef enum jj_tok_type {
    TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP, TK_EOF
} jj_tok_type;
typedef struct jj_tok {
    jj_tok_type t;
    const char *s; size_t n; /* text, name, string's value, operator */
    long long i; double f;
    int line;
} jj_tok;

/* ---- syntax tree ---- */
typedef enum jj_kind {
    /* statements */
    N_BODY, N_TEXT, N_PRINT, N_IF, N_FOR, N_SET, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK, N_FILTER_BLOCK,
    N_BREAK, N_CONTINUE,
    /* expressions */
    N_CONST, N_NAME, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_UNARY, N_BINARY,
    N_AND, N_OR, N_NOT, N_COND, N_LIST, N_TUPLE, N_DICT, N_COMPARE
} jj_kind;

struct jj_node {
    jj_kind k;
    int line;
    const char *s;  /* name, attribute, operator, filter or test */
    jv *val;        /* N_CONST, N_TEXT's text */
    jj_node **kids; /* by kind; see jinja_parse.c */
    int n;
    const char **names; /* call arguments' keywords, macro parameters; n entries */
    int negate;         /* N_TEST: is not */
};

/* ---- rendering ---- */
struct jj_scope {
    jj_scope *parent;
    jv *vars; /* a dict */
};

typedef struct jj_buf { char *s; size_t n, cap; } jj_buf;

struct jj_ctx {
    jj_arena *a;
    const clf_jinja_limits *lim;
    jmp_buf fail;
    clf_status st;
    int raised;                 /* raise_exception's message is the error */
    long steps, iterations;
    int depth, recursion;
    time_t now;
    jj_scope *globals;
    jj_buf *out;
    int brk;                    /* 1 break, 2 continue pending */
    int json_ascii;             /* tojson's ensure_ascii: \uXXXX for non-ASCII */
};

struct clf_jinja_template {
    jj_arena a;
    jj_node *root;
    clf_jinja_limits lim;
};

/* values (jinja_value.c) */
jv *jv_undef(jj_ctx *c, const char *name);
jv *jv_undef_of(jj_ctx *c, jv *obj, jv *key, int attr); /* obj.key / obj[key] missing */
/* jinja2's UndefinedError message for an undefined value */
const char *jj_undef_message(jj_ctx *c, jv *v);
jv *jv_none(void);
jv *jv_bool(int b);
jv *jv_int(jj_ctx *c, long long i);
jv *jv_float(jj_ctx *c, double f);
jv *jv_str(jj_ctx *c, const char *s, size_t n); /* copies */
jv *jv_str_ref(jj_ctx *c, const char *s, size_t n); /* does not copy */
jv *jv_cstr(jj_ctx *c, const char *s);
jv *jv_list(jj_ctx *c);
jv *jv_dict(jj_ctx *c);
jv *jv_func(jj_ctx *c, const char *name, jj_builtin fn, jv *self);
void jv_list_push(jj_ctx *c, jv *l, jv *v);
jv *jv_dict_get(jv *d, const char *k, size_t n); /* NULL if absent */
jv *jv_dict_getv(jv *d, jv *k);
void jv_dict_set(jj_ctx *c, jv *d, jv *k, jv *v);
void jv_dict_setc(jj_ctx *c, jv *d, const char *k, jv *v);
int jv_truthy(jv *v);
int jv_equal(jv *x, jv *y);
int jv_is_num(jv *v); /* int, float or bool */
double jv_num(jv *v);
/* Python's str(): none "None", True, lists and dicts as repr */
void jv_str_append(jj_ctx *c, jj_buf *b, jv *v);
void jv_repr_append(jj_ctx *c, jj_buf *b, jv *v);
jv *jv_to_str(jj_ctx *c, jv *v);
/* markupsafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39; (a Markup as is) */
jv *jv_escape(jj_ctx *c, jv *v);
/* json.dumps(v, ensure_ascii=False, indent=, separators=, sort_keys=) */
void jv_json_append(jj_ctx *c, jj_buf *b, jv *v, int indent, const char *item_sep, const char *key_sep,
                    int sort_keys, int level);
jv *jv_from_json_text(jj_ctx *c, const char *text, size_t n); /* NULL if not JSON */
const char *jv_type_name(jv *v);
void jj_buf_add(jj_ctx *c, jj_buf *b, const char *s, size_t n);
void jj_buf_addc(jj_ctx *c, jj_buf *b, const char *s);
/* the number of code points of UTF-8, and the byte offset of code point i */
size_t jj_u8_len(const char *s, size_t n);
size_t jj_u8_off(const char *s, size_t n, size_t i);

/* errors: record and jump to the rendering's end (never return) */
void jj_fail(jj_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void jj_step(jj_ctx *c);
/* A step that scans `bytes` of a string (its length, an index, a search,
 * a comparison): a step more every JJ_STEP_BYTES, so that the step bound
 * bounds such work too (a loop of s[-1] on a 4 MB string ran hours) */
enum { JJ_STEP_BYTES = 64 };
void jj_work(jj_ctx *c, size_t bytes);
/* Python's int(f) of a finite float where it fits a long long; past that
 * range (Python's int would be wider) an "integer overflow" failure, not
 * C's undefined conversion. Likewise -i of an int. */
long long jj_float_int(jj_ctx *c, double f);
long long jj_neg_int(jj_ctx *c, long long i);

/* lexing and parsing (jinja_lex.c, jinja_parse.c) */
clf_status jj_lex(jj_arena *a, const char *src, size_t len, jj_tok **toks, int *n);
clf_status jj_parse(clf_jinja_template *t, jj_tok *toks, int n);
int jj_filter_known(const char *name);
int jj_test_known(const char *name);

/* evaluation (jinja_eval.c) and the builtins (jinja_builtins.c) */
jv *jj_eval(jj_ctx *c, const jj_node *n, jj_scope *s);
jv *jj_call(jj_ctx *c, jv *f, jj_args *a);
jv *jj_apply_filter(jj_ctx *c, const char *name, jv *v, jj_args *a, int line);
int jj_apply_test(jj_ctx *c, const char *name, jv *v, jj_args *a);
jv *jj_getattr(jj_ctx *c, jv *obj, const char *name, size_t n);
jv *jj_loop_attr(jj_ctx *c, jv *loop, const char *name, size_t n);
jv *jj_getitem(jj_ctx *c, jv *obj, jv *key);
jv *jj_iterable_list(jj_ctx *c, jv *v); /* for loops: a list of the items */
void jj_install_globals(jj_ctx *c, jv *g);
jv *jj_arg(jj_args *a, int pos, const char *name); /* NULL if not given */
int jv_compare(jj_ctx *c, jv *x, jv *y); /* <0, 0, >0; fails on unorderable */

#endif

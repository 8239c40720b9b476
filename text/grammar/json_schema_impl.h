/* What the JSON Schema converter's files share (json_schema.c the walk and
 * its entry, json_schema_spell.c the GBNF spelling of strings,
 * json_schema_merge.c allOf, json_schema_regex.c patterns and code point
 * sets): the bounds, the converter's state and the functions one file
 * gives another. */
#ifndef CLF_JSON_SCHEMA_IMPL_H
#define CLF_JSON_SCHEMA_IMPL_H

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "grammar.h"
#include "json_schema.h"
#include "map.h"
#include "utf8.h"

/* ---- bounds ------------------------------------------------------------------
 * A schema is untrusted input (a request's response_format or tool
 * parameters, a file): the converter's depth, sizes and work are bounded,
 * checked as it goes, and an excess is CLF_ERR_ARG naming the bound. Every
 * step is linear in the schema (hashed names, tries built from sorted
 * lists, no recursion per character), so a schema within these bounds
 * converts in well under a second. */
#define MAX_SCHEMA (1u << 20) /* schema text, bytes: a server's whole request body (SRV_MAX_BODY) */
#define MAX_OUT (4u << 20)    /* grammar text, bytes (the grammar parser takes up to 8 MiB) */
#define MAX_RULES 65536       /* rules written; the grammar parser's bound (262,144 with its own) is above */
#define MAX_DEPTH 48          /* schema nesting, merges of merges: the walk recurses per level */
#define MAX_REPEAT 4096       /* a count (minItems, maxLength, {m,n}) the grammar spells out */
/* Alternatives open at one point of the text: the matcher reads at most
 * GSTATE_MAX_STACKS (2048) ways at once, so an alternation wider than that
 * could never run. Enums and const-only anyOf are tries (each point has as
 * many ways as distinct next characters), so only as many values as differ
 * at one character count. */
#define MAX_BRANCH 2048
/* A property name's length, in bytes, where other names are allowed too
 * (additionalProperties not false): the grammar for "any other name" has a
 * rule per character of the names; longer ones are an error. */
#define MAX_NAME 1024
/* Optional prefixItems nest in groups up to this many, then in a rule each. */
#define PREFIX_NEST 32
/* An enum longer than this is written as tries (strings, integers). */
#define ENUM_TRIE 64
#define INT_DIGITS 20  /* digits of an integral part: an int64/uint64 fits */
#define FRAC_DIGITS 20 /* digits of a fraction (a double's repr needs 17) */

/* ---- growing text: the toolkit's buffer (buf.h) -----------------------------
 * Every text the converter writes is a clf_buf bounded by SB_MAX, so a
 * runaway schema fails as memory (reported once, at the end) before any
 * buffer passes 8 MiB; the whole grammar's MAX_OUT is checked at the end. */
#define SB_MAX (2 * (size_t)MAX_OUT - 1)
#define SB_INIT {.max = SB_MAX}

/* ---- the converter's state ------------------------------------------------ */

typedef struct ref_memo {
    char *ref, *name;
    int state; /* 1: being written, 2: written */
    int nest;  /* containers entered when it started (a cycle at the same count consumes nothing) */
    int empty, used_early;
} ref_memo;

typedef struct conv {
    json_t *root;
    clf_buf rules;
    char **names;
    int n_names, cap_names;
    clf_map taken;     /* the names, for rule_name */
    clf_map next_k;    /* per cleaned base: the next -k suffix to try */
    clf_map ref_index; /* $ref string -> its refs[] index */
    ref_memo *refs;
    int n_refs, cap_refs;
    json_t **owned;
    int n_owned, cap_owned;
    unsigned prims; /* primitive rules written */
    int nest, depth;
} conv;

/* JSON types as bits of a mask, and their names by bit (json_schema.c) */
enum { T_NULL = 1, T_BOOLEAN = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64,
       T_ALL = 127 };
extern const char *const clf_js_type_names[7];

/* the primitive rules (json_schema.c) */
enum {
    P_SPACE, P_CHAR, P_STRING, P_INTEGRAL, P_INTEGER, P_NUMBER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY,
    P_UNUMBER, P_ZERO, P_NZFRAC, P_UNONZERO, P_UUID, P_EMAIL, P_DIV4, P_MDAY, P_DATE, P_TIMEPART, P_TIME, P_DATETIME, P_COUNT
};

/* code point sets, sorted ranges (json_schema_regex.c) */
typedef struct cpset {
    uint32_t (*r)[2];
    int n, cap;
} cpset;

/* ---- json_schema.c: the walk */
int clf_js_add_keys(clf_map *m, json_t *arr);
int clf_js_asserts(const char *k);
clf_status clf_js_bad(const char *ptr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
clf_status clf_js_check_refused(json_t *s, const char *ptr);
clf_status clf_js_emit_rule(conv *c, const char *base, const char *body, clf_buf *out);
int clf_js_has_key(const clf_map *m, json_t *v);
int clf_js_in_list(const char *k, const char *const *list);
clf_status clf_js_oom(void);
json_t *clf_js_own(conv *c, json_t *j);
const char *clf_js_prim(conv *c, int p);
char *clf_js_ptr_index(const char *parent, const char *key, size_t i);
clf_status clf_js_resolve(conv *c, const char *ref, const char *ptr, json_t **out);
clf_status clf_js_type_mask(json_t *s, const char *ptr, int *mask);
char *clf_js_value_key(json_t *v);

/* ---- json_schema_spell.c: GBNF spelling */
void clf_js_spell_string(clf_buf *b, const char *s, size_t n);
void clf_js_spell_cps(clf_buf *b, const uint32_t *cps, size_t n, int quotes);
uint32_t clf_js_utf8_next(const char *s, size_t n, size_t *i);

/* ---- json_schema_merge.c: allOf */
clf_status clf_js_merge(conv *c, json_t *branches, json_t *rest, const char *ptr, json_t **out, int *empty);
json_t *clf_js_rest_of(conv *c, json_t *s, const char *k);

/* ---- json_schema_regex.c: patterns and code point sets */
int clf_js_set_add(cpset *s, uint32_t lo, uint32_t hi);
void clf_js_set_emit(clf_buf *o, cpset *s);
int clf_js_set_negate(cpset *s);
clf_status clf_js_visit_pattern(conv *c, json_t *pat, const char *name, const char *ptr, clf_buf *out);

#endif

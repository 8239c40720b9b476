/* JSON Schema -> GBNF: allOf, merged into one schema keyword by keyword
 * (json_schema_impl.h). */
#include "json_schema_impl.h"

/* ---- allOf: one schema from several, keyword by keyword ------------------ */

static const char *const MIN_LIKE[] = {"minLength", "minItems", "minimum", "exclusiveMinimum", "minProperties", NULL};
static const char *const MAX_LIKE[] = {"maxLength", "maxItems", "maximum", "exclusiveMaximum", "maxProperties", NULL};

static json_t *all_of2(json_t *a, json_t *b) {
    return json_pack("{s:[OO]}", "allOf", a, b);
}

/* Merges branch b (expanding its $ref and allOf) into r; pairs collects
 * each branch's [properties, additionalProperties] for the end. */
static clf_status merge_into(conv *c, json_t *r, json_t *b, const char *ptr, int depth, json_t *pairs, int *empty) {
    if (depth > MAX_DEPTH) return clf_js_bad(ptr, "allOf/$ref nested deeper than %d", MAX_DEPTH);
    if (json_is_true(b)) return CLF_OK;
    if (json_is_false(b)) {
        *empty = 1;
        return CLF_OK;
    }
    if (!json_is_object(b)) return clf_js_bad(ptr, "a schema must be an object or a boolean");
    CLF_TRY(clf_js_check_refused(b, ptr));
    json_t *ref = json_object_get(b, "$ref");
    if (ref) {
        if (!json_is_string(ref)) return clf_js_bad(ptr, "\"$ref\" must be a string");
        json_t *target;
        CLF_TRY(clf_js_resolve(c, json_string_value(ref), ptr, &target));
        CLF_TRY(merge_into(c, r, target, json_string_value(ref), depth + 1, pairs, empty));
    }
    json_t *all = json_object_get(b, "allOf");
    if (all) {
        if (!json_is_array(all) || json_array_size(all) == 0) return clf_js_bad(ptr, "\"allOf\" must be a non-empty array");
        size_t i;
        json_t *e;
        json_array_foreach(all, i, e) {
            char *p = clf_js_ptr_index(ptr, "allOf", i);
            if (!p) return clf_js_oom();
            clf_status st = merge_into(c, r, e, p, depth + 1, pairs, empty);
            free(p);
            CLF_TRY(st);
        }
    }
    int has_items = json_object_get(b, "items") || json_object_get(b, "prefixItems");
    int r_items = json_object_get(r, "items") || json_object_get(r, "prefixItems");
    if (has_items && r_items &&
        (json_object_get(b, "prefixItems") || json_object_get(r, "prefixItems")))
        return clf_js_bad(ptr, "allOf: prefixItems with items or prefixItems in another branch is not supported");
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v) {
        if (!clf_js_asserts(k) || strcmp(k, "$ref") == 0 || strcmp(k, "allOf") == 0) continue;
        json_t *old = json_object_get(r, k);
        if (strcmp(k, "additionalProperties") == 0) {
            json_t *props = json_object_get(b, "properties");
            json_t *pair = json_pack("[OO]", props ? props : json_null(), v);
            if (!pair || json_array_append_new(pairs, pair)) return clf_js_oom();
            continue;
        }
        if (strcmp(k, "const") == 0 || strcmp(k, "enum") == 0) {
            json_t *vals = strcmp(k, "const") == 0 ? json_pack("[O]", v) : json_incref(v);
            if (!vals) return clf_js_oom();
            if (!json_is_array(vals)) {
                json_decref(vals);
                return clf_js_bad(ptr, "\"enum\" must be an array");
            }
            json_t *prev = json_object_get(r, "enum");
            if (prev) { /* the values in both, prev's order */
                json_t *both = json_array();
                clf_map in_vals = {0};
                int fail = !both || clf_js_add_keys(&in_vals, vals);
                size_t i;
                json_t *x;
                json_array_foreach(prev, i, x) if (!fail && clf_js_has_key(&in_vals, x)) fail = json_array_append(both, x);
                clf_map_free(&in_vals);
                json_decref(vals);
                vals = both;
                if (fail) {
                    json_decref(both);
                    return clf_js_oom();
                }
            }
            if (json_object_set_new(r, "enum", vals)) return clf_js_oom();
            continue;
        }
        if (!old) {
            if (json_object_set(r, k, v)) return clf_js_oom();
        } else if (strcmp(k, "type") == 0) {
            int m1, m2;
            CLF_TRY(clf_js_type_mask(r, ptr, &m1));
            CLF_TRY(clf_js_type_mask(b, ptr, &m2));
            if (m1 & T_NUMBER) m1 |= T_INTEGER;
            if (m2 & T_NUMBER) m2 |= T_INTEGER;
            int m = m1 & m2;
            json_t *t = json_array();
            for (int i = 0; i < 7; i++)
                if (m & (1 << i) && !(i == 6 && (m & T_NUMBER))) json_array_append_new(t, json_string(clf_js_type_names[i]));
            if (json_object_set_new(r, "type", t)) return clf_js_oom();
        } else if (strcmp(k, "required") == 0) {
            if (!json_is_array(v) || !json_is_array(old)) return clf_js_bad(ptr, "\"required\" must be an array");
            json_t *u = json_copy(old);
            clf_map seen = {0};
            int fail = !u || clf_js_add_keys(&seen, u);
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x) {
                if (fail || clf_js_has_key(&seen, x)) continue;
                char *key = clf_js_value_key(x);
                fail = !key || clf_map_sets(&seen, key, 1) || json_array_append(u, x);
                free(key);
            }
            clf_map_free(&seen);
            if (fail) {
                json_decref(u);
                return clf_js_oom();
            }
            if (json_object_set_new(r, "required", u)) return clf_js_oom();
        } else if (strcmp(k, "properties") == 0 || strcmp(k, "items") == 0) {
            if (strcmp(k, "items") == 0) {
                if (!json_equal(old, v) && json_object_set_new(r, k, all_of2(old, v))) return clf_js_oom();
                continue;
            }
            if (!json_is_object(v) || !json_is_object(old)) return clf_js_bad(ptr, "\"properties\" must be an object");
            json_t *merged = json_copy(old);
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv) {
                json_t *prev = json_object_get(merged, pk);
                if (!prev) json_object_set(merged, pk, pv);
                else if (!json_equal(prev, pv)) json_object_set_new(merged, pk, all_of2(prev, pv));
            }
            if (json_object_set_new(r, "properties", merged)) return clf_js_oom();
        } else if (clf_js_in_list(k, MIN_LIKE) || clf_js_in_list(k, MAX_LIKE)) {
            if (!json_is_number(v) || !json_is_number(old)) return clf_js_bad(ptr, "\"%s\" must be a number", k);
            double a = json_number_value(old), x = json_number_value(v);
            if (clf_js_in_list(k, MIN_LIKE) ? x > a : x < a) json_object_set(r, k, v);
        } else if (!json_equal(old, v)) {
            return clf_js_bad(ptr, "allOf: \"%s\" differs between branches (cannot intersect them)", k);
        }
    }
    return CLF_OK;
}

/* The branches' additionalProperties, applied to the merged properties:
 * a branch's additionalProperties holds for every property it does not list. */
static clf_status merge_finish(json_t *r, json_t *pairs) {
    if (json_array_size(pairs) == 0) return CLF_OK;
    json_t *props = json_object_get(r, "properties");
    json_t *addl = NULL;
    size_t i;
    json_t *pair;
    json_array_foreach(pairs, i, pair) {
        json_t *own_props = json_array_get(pair, 0), *a = json_array_get(pair, 1);
        if (json_is_true(a) || (json_is_object(a) && json_object_size(a) == 0)) continue;
        const char *pk;
        json_t *pv;
        if (props) {
            json_t *np = json_copy(props);
            json_object_foreach(props, pk, pv) {
                if (json_is_object(own_props) && json_object_get(own_props, pk)) continue;
                json_object_set_new(np, pk, json_is_false(a) ? json_false() : all_of2(pv, a));
            }
            json_object_set_new(r, "properties", np);
            props = np;
        }
        json_t *na = !addl ? json_incref(a) : json_is_false(a) || json_is_false(addl) ? json_false() : all_of2(addl, a);
        json_decref(addl);
        addl = na;
    }
    if (addl && json_object_set_new(r, "additionalProperties", addl)) return clf_js_oom();
    return CLF_OK;
}

/* allOf of branches (JSON array) plus the keywords of `rest` (may be NULL). */
clf_status clf_js_merge(conv *c, json_t *branches, json_t *rest, const char *ptr, json_t **out, int *empty) {
    json_t *r = clf_js_own(c, json_object());
    json_t *pairs = json_array();
    if (!r || !pairs) {
        json_decref(pairs);
        return clf_js_oom();
    }
    clf_status st = CLF_OK;
    if (rest) st = merge_into(c, r, rest, ptr, c->depth, pairs, empty);
    size_t i;
    json_t *e;
    json_array_foreach(branches, i, e) {
        if (st != CLF_OK) break;
        char *p = clf_js_ptr_index(ptr, "allOf", i);
        st = p ? merge_into(c, r, e, p, c->depth + 1, pairs, empty) : clf_js_oom();
        free(p);
    }
    if (st == CLF_OK) st = merge_finish(r, pairs);
    json_decref(pairs);
    *out = r;
    return st;
}

/* s without key k and without annotations: NULL when nothing asserts. */
json_t *clf_js_rest_of(conv *c, json_t *s, const char *k) {
    json_t *r = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v) {
        if (strcmp(key, k) == 0 || !clf_js_asserts(key)) continue;
        if (!r && !(r = clf_js_own(c, json_object()))) return NULL;
        json_object_set(r, key, v);
    }
    return r;
}

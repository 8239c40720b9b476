/* The byte toolkit (host/core/utf8, buf, map) against independent
 * references on fresh random inputs: UTF-8 against a naive decoder (bits
 * read by the table of RFC 3629, then re-encoded by ranges: a valid
 * sequence is the shortest spelling of a scalar value) over every 1-3 byte
 * string and random longer ones, and against Python's codec's verdicts
 * (tests/data/utf8_python.txt, recorded by tests/peer/record_utf8.py); the buffer
 * and the map against trivial models under random operation sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buf.h"
#include "map.h"
#include "testutil.h"
#include "utf8.h"

/* ---- the naive UTF-8 reference ---------------------------------------------- */

/* The shortest spelling of cp, by ranges (0 for no scalar value). */
static size_t ref_encode(uint32_t cp, unsigned char *o) {
    if (cp <= 0x7F) return o[0] = (unsigned char)cp, 1;
    if (cp <= 0x7FF) return o[0] = (unsigned char)(0xC0 + cp / 64), o[1] = (unsigned char)(0x80 + cp % 64), 2;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp <= 0xFFFF)
        return o[0] = (unsigned char)(0xE0 + cp / 4096), o[1] = (unsigned char)(0x80 + cp / 64 % 64),
               o[2] = (unsigned char)(0x80 + cp % 64), 3;
    if (cp <= 0x10FFFF)
        return o[0] = (unsigned char)(0xF0 + cp / 262144), o[1] = (unsigned char)(0x80 + cp / 4096 % 64),
               o[2] = (unsigned char)(0x80 + cp / 64 % 64), o[3] = (unsigned char)(0x80 + cp % 64), 4;
    return 0;
}

/* Tries each length L: the lead's pattern 1..10 (L ones, then a zero), L-1
 * bytes 10xxxxxx, the value gathered, and valid only when its shortest
 * spelling is these very bytes. */
static size_t ref_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    for (size_t len = 1; len <= 4 && len <= n; len++) {
        unsigned lead_ones = 0;
        while (lead_ones < 8 && (s[0] << lead_ones & 0x80)) lead_ones++;
        if (len == 1 ? lead_ones != 0 : lead_ones != len) continue;
        uint32_t v = len == 1 ? s[0] : (uint32_t)(s[0] & ((1u << (7 - len)) - 1));
        int ok = 1;
        for (size_t i = 1; i < len; i++) {
            ok &= (s[i] >> 6) == 2;
            v = v * 64 + (s[i] & 63u);
        }
        unsigned char again[4];
        if (ok && ref_encode(v, again) == len && memcmp(again, s, len) == 0) {
            *cp = v;
            return len;
        }
    }
    return 0;
}

static void check_decode(const unsigned char *s, size_t n) {
    uint32_t a = 0xABCDEF, b = 0xABCDEF;
    size_t la = clf_utf8_decode(s, n, &a), lb = ref_decode(s, n, &b);
    if (la != lb || (la && a != b)) {
        char hex[40] = "";
        for (size_t i = 0; i < n && i < 8; i++) sprintf(hex + 3 * i, "%02x ", s[i]);
        fail_msg("decode of %s(n %zu): %zu U+%X, reference %zu U+%X", hex, n, la, a, lb, b);
    }
}

/* Random bytes, most of them near the edges the rules draw. */
static unsigned char edge_byte(uint64_t *rng) {
    static const unsigned char E[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2,
                                      0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};
    uint64_t r = tu_next(rng);
    return r % 4 ? E[(r >> 8) % sizeof E] : (unsigned char)(r >> 16);
}

static void test_utf8_decode(void **state) {
    (void)state;
    /* every string of 1, 2 and 3 bytes */
    unsigned char s[8];
    for (uint32_t x = 0; x < 1u << 24; x++) {
        s[0] = (unsigned char)(x >> 16), s[1] = (unsigned char)(x >> 8), s[2] = (unsigned char)x;
        if (x < 256) check_decode(s + 2, 1);
        if (x < 65536) check_decode(s + 1, 2);
        check_decode(s, 3);
    }
    /* random 4-8 byte strings, every prefix */
    uint64_t rng = tu_seed();
    for (int it = 0; it < 2000000; it++) {
        size_t n = 4 + tu_next(&rng) % 5;
        for (size_t i = 0; i < n; i++) s[i] = edge_byte(&rng);
        if (tu_next(&rng) % 2) s[0] = (unsigned char)(0xF0 + tu_next(&rng) % 8);
        for (size_t i = 1; i < n && tu_next(&rng) % 3; i++) s[i] = (unsigned char)(0x80 | (tu_next(&rng) & 0x3F));
        for (size_t k = 0; k <= n; k++) check_decode(s, k);
    }
}

static void test_utf8_encode(void **state) {
    (void)state;
    for (uint32_t cp = 0; cp <= 0x110100; cp++) {
        char a[4];
        unsigned char b[4];
        size_t la = clf_utf8_encode(cp, a), lb = ref_encode(cp, b);
        if (la != lb || memcmp(a, b, la)) fail_msg("encode U+%X: %zu bytes, reference %zu", cp, la, lb);
        uint32_t back = 0;
        if (la && (clf_utf8_decode(a, la, &back) != la || back != cp)) fail_msg("U+%X does not decode back", cp);
    }
    char a[4];
    assert_int_equal(clf_utf8_encode(0xFFFFFFFFu, a), 0);
}

/* valid and repair on random strings, against loops over the reference */
static void test_utf8_valid_repair(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    unsigned char s[24];
    char out[3 * sizeof s], want[3 * sizeof s];
    for (int it = 0; it < 300000; it++) {
        size_t n = tu_next(&rng) % sizeof s;
        for (size_t i = 0; i < n; i++) s[i] = tu_next(&rng) % 3 ? (unsigned char)(0x20 + tu_next(&rng) % 90) : edge_byte(&rng);
        int valid = 1;
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l = ref_decode(s + i, n - i, &cp);
            if (l) memcpy(want + k, s + i, l), k += l, i += l;
            else memcpy(want + k, "\xEF\xBF\xBD", 3), k += 3, i++, valid = 0;
        }
        assert_int_equal(clf_utf8_valid(s, n), valid);
        size_t got = clf_utf8_repair(s, n, out);
        assert_int_equal(got, k);
        assert_memory_equal(out, want, k);
        assert_true(clf_utf8_valid(out, got));
    }
}

/* Python's verdicts: valid or not, and the code points of the valid ones. */
static void test_utf8_python(void **state) {
    (void)state;
    FILE *f = fopen("tests/data/utf8_python.txt", "r");
    assert_non_null(f);
    char line[256];
    int lines = 0, valid_lines = 0;
    while (fgets(line, sizeof line, f)) {
        char hex[128], verdict[128];
        assert_int_equal(sscanf(line, "%127s %127s", hex, verdict), 2);
        unsigned char s[64];
        size_t n = strlen(hex) / 2;
        for (size_t i = 0; i < n; i++) {
            unsigned v;
            assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
            s[i] = (unsigned char)v;
        }
        int want = strcmp(verdict, "-") != 0;
        if (clf_utf8_valid(s, n) != want) fail_msg("%s: valid %d, Python %s", hex, !want, verdict);
        lines++;
        if (!want) continue;
        valid_lines++;
        char *p = verdict;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l = clf_utf8_decode(s + i, n - i, &cp);
            assert_true(l > 0);
            char *end;
            unsigned long py = strtoul(p, &end, 16);
            if (cp != py) fail_msg("%s: U+%X, Python U+%lX", hex, cp, py);
            p = *end == ',' ? end + 1 : end;
            i += l;
        }
        assert_int_equal(*p, 0);
    }
    fclose(f);
    assert_true(lines >= 1000 && valid_lines >= 100);
}

/* The loose readings: the lead length by its table, the tail by its rule. */
static void test_utf8_loose(void **state) {
    (void)state;
    for (int b = 0; b < 256; b++) {
        size_t want = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        assert_int_equal(clf_utf8_lead_len_loose((unsigned char)b), want);
    }
    uint64_t rng = tu_seed();
    unsigned char s[8];
    for (int it = 0; it < 1000000; it++) {
        size_t n = tu_next(&rng) % 7;
        for (size_t i = 0; i < n; i++) s[i] = edge_byte(&rng);
        /* hold k when the last k bytes are a lead C0-F7 and k-1 continuation
         * bytes, and the lead announces more than k */
        size_t want = 0;
        for (size_t k = 1; k <= 3 && k <= n; k++) {
            unsigned char lead = s[n - k];
            size_t announced = lead >= 0xF0 && lead <= 0xF7 ? 4 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xC0 && lead <= 0xDF ? 2 : 0;
            int conts = 1;
            for (size_t i = n - k + 1; i < n; i++) conts &= (s[i] & 0xC0) == 0x80;
            if (announced && conts && announced > k) want = k;
        }
        assert_int_equal(clf_utf8_incomplete_tail(s, n), want);
    }
}

/* ---- the buffer against a fixed array ---------------------------------------- */

static void test_buf_model(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    static char model[1 << 16];
    for (int seq = 0; seq < 400; seq++) {
        clf_buf b = {0};
        size_t mn = 0, max = seq % 2 ? 0 : 1 + tu_next(&rng) % 5000;
        int mfailed = 0;
        b.max = max;
        for (int op = 0; op < 300; op++) {
            char tmp[600];
            size_t k = 0;
            clf_status st;
            int what = (int)(tu_next(&rng) % 10);
            if (what < 4) { /* bytes, NULs included */
                k = tu_next(&rng) % 200;
                for (size_t i = 0; i < k; i++) tmp[i] = (char)tu_next(&rng);
                st = clf_buf_add(&b, tmp, k);
            } else if (what < 6) {
                tmp[0] = (char)tu_next(&rng);
                k = 1;
                st = clf_buf_putc(&b, tmp[0]);
            } else if (what < 7) {
                k = tu_next(&rng) % 40;
                for (size_t i = 0; i < k; i++) tmp[i] = (char)('a' + tu_next(&rng) % 26);
                tmp[k] = 0;
                st = clf_buf_puts(&b, tmp);
            } else if (what < 9) { /* printf, sometimes longer than any small scratch */
                int x = (int)tu_next(&rng), w = (int)(tu_next(&rng) % 400);
                k = (size_t)snprintf(tmp, sizeof tmp, "[%*d|%s]", w, x, "z");
                st = clf_buf_printf(&b, "[%*d|%s]", w, x, "z");
            } else if (what < 10 && tu_next(&rng) % 2) { /* reserve, then write into the room as a reader does */
                k = tu_next(&rng) % 300;
                for (size_t i = 0; i < k; i++) tmp[i] = (char)tu_next(&rng);
                st = clf_buf_reserve(&b, k);
                if (st == CLF_OK) {
                    assert_true(b.cap >= b.n + k + 1);
                    assert_int_equal(b.p[b.n], 0);
                    memcpy(b.p + b.n, tmp, k);
                    b.n += k;
                    b.p[b.n] = 0;
                }
            } else { /* clear */
                clf_buf_clear(&b);
                mn = 0, mfailed = 0;
                assert_int_equal(b.n, 0);
                assert_string_equal(clf_buf_str(&b), "");
                continue;
            }
            /* the model: fails (stickily) past the bound */
            if (!mfailed && max && mn + k > max) mfailed = 1;
            if (!mfailed) memcpy(model + mn, tmp, k), mn += k;
            assert_int_equal(st, mfailed ? CLF_ERR_MEMORY : CLF_OK);
            assert_int_equal(b.failed, mfailed);
            assert_int_equal(b.n, mn);
            if (mn) assert_memory_equal(b.p, model, mn);
            if (b.p) assert_int_equal(b.p[b.n], 0);
        }
        size_t n = 99;
        char *t = clf_buf_take(&b, &n);
        if (mfailed) {
            assert_null(t);
        } else {
            assert_non_null(t);
            assert_int_equal(n, mn);
            assert_memory_equal(t, model, mn);
            assert_int_equal(t[n], 0);
        }
        free(t);
        assert_null(b.p);
        assert_int_equal(b.n, 0);
        assert_int_equal(b.max, max);
        clf_buf_free(&b);
    }
}

/* ---- the map against a list ----------------------------------------------------- */

typedef struct {
    unsigned char key[6];
    size_t len;
    int64_t val;
    int present;
} model_kv;

static void test_map_model(void **state) {
    (void)state;
    uint64_t rng = tu_seed();
    for (int seq = 0; seq < 60; seq++) {
        clf_map m = {0};
        /* a key space small enough to repeat: lengths 0-5 over 3 bytes (NUL included) */
        static model_kv model[4096];
        int nm = 0, alphabet = 2 + seq % 3;
        for (int op = 0; op < 20000; op++) {
            unsigned char key[6];
            size_t len = tu_next(&rng) % 6;
            for (size_t i = 0; i < len; i++) key[i] = (unsigned char)(tu_next(&rng) % (uint64_t)alphabet);
            int at = -1;
            for (int i = 0; i < nm; i++)
                if (model[i].len == len && memcmp(model[i].key, key, len) == 0) at = i;
            int what = (int)(tu_next(&rng) % 8);
            if (what < 4) { /* set */
                int64_t v = (int64_t)tu_next(&rng);
                assert_int_equal(clf_map_set(&m, key, len, v), CLF_OK);
                if (at < 0) {
                    at = nm++;
                    memcpy(model[at].key, key, len);
                    model[at].len = len;
                }
                model[at].val = v, model[at].present = 1;
            } else if (what < 6) { /* remove */
                int was = at >= 0 && model[at].present;
                assert_int_equal(clf_map_remove(&m, key, len), was);
                if (at >= 0) model[at].present = 0;
            } else { /* get */
                int64_t *v = clf_map_get(&m, key, len);
                if (at >= 0 && model[at].present) {
                    assert_non_null(v);
                    assert_true(*v == model[at].val);
                } else {
                    assert_null(v);
                }
            }
            /* now and then, every key and the count, and the load factor */
            if (op % 997 == 0) {
                size_t count = 0;
                for (int i = 0; i < nm; i++) {
                    int64_t *v = clf_map_get(&m, model[i].key, model[i].len);
                    if (model[i].present) {
                        count++;
                        assert_non_null(v);
                        assert_true(*v == model[i].val);
                    } else {
                        assert_null(v);
                    }
                }
                assert_int_equal(m.n, count);
                assert_true(m.n * 2 <= m.cap || m.cap == 0);
            }
        }
        clf_map_free(&m);
    }
    /* string keys: "ab" and "ab\0" differ, as byte keys */
    clf_map m = {0};
    assert_int_equal(clf_map_sets(&m, "ab", 1), CLF_OK);
    assert_int_equal(clf_map_set(&m, "ab", 3, 2), CLF_OK);
    assert_true(*clf_map_gets(&m, "ab") == 1);
    assert_true(*clf_map_get(&m, "ab", 3) == 2);
    assert_null(clf_map_gets(&m, "a"));
    clf_map_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_decode), cmocka_unit_test(test_utf8_encode),
        cmocka_unit_test(test_utf8_valid_repair), cmocka_unit_test(test_utf8_python),
        cmocka_unit_test(test_utf8_loose), cmocka_unit_test(test_buf_model),
        cmocka_unit_test(test_map_model),
    };
    return TU_RUN_GROUP(tests, NULL, NULL);
}

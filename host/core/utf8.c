/* UTF-8 (utf8.h): RFC 3629, with the two named loose readings. */
#include "utf8.h"

#include <string.h>

size_t clf_utf8_decode(const void *p, size_t n, uint32_t *cp) {
    const unsigned char *s = p;
    if (n == 0) return 0;
    /* the lead byte: length, payload bits and the least value of that length */
    size_t len;
    uint32_t c, least;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    } else if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2, c = s[0] & 0x1Fu, least = 0x80;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3, c = s[0] & 0x0Fu, least = 0x800;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4, c = s[0] & 0x07u, least = 0x10000;
    } else {
        return 0; /* a continuation byte, C0/C1 (always overlong) or F5-FF */
    }
    if (len > n) return 0;
    /* the continuation bytes, 10xxxxxx each */
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3Fu);
    }
    /* overlong, surrogate, beyond U+10FFFF */
    if (c < least || (c >= 0xD800 && c <= 0xDFFF) || c > CLF_UTF8_MAX) return 0;
    *cp = c;
    return len;
}

size_t clf_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0; /* a surrogate is no character */
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > CLF_UTF8_MAX) return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int clf_utf8_valid(const void *p, size_t n) {
    const unsigned char *s = p;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) { /* the common case, without a call */
            i++;
            continue;
        }
        size_t l = clf_utf8_decode(s + i, n - i, &cp);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

size_t clf_utf8_repair(const void *p, size_t n, char *out) {
    const unsigned char *s = p;
    size_t k = 0;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        size_t l = clf_utf8_decode(s + i, n - i, &cp);
        if (l) { /* a valid character: as it is */
            memcpy(out + k, s + i, l);
            k += l;
            i += l;
        } else { /* one byte: U+FFFD, then the next byte starts afresh */
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
        }
    }
    return k;
}

size_t clf_utf8_lead_len_loose(unsigned char lead) {
    static const unsigned char LEN[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return LEN[lead >> 4];
}

size_t clf_utf8_incomplete_tail(const void *p, size_t n) {
    const unsigned char *s = p;
    /* up to 3 continuation bytes at the end, then the byte before them */
    size_t cont = 0;
    while (cont < 3 && cont < n && (s[n - 1 - cont] & 0xC0) == 0x80) cont++;
    if (cont == n) return 0;
    unsigned char lead = s[n - 1 - cont];
    size_t want = lead >= 0xF0 && lead < 0xF8 ? 4 : lead >= 0xE0 && lead < 0xF0 ? 3 : lead >= 0xC0 && lead < 0xE0 ? 2 : 1;
    return want > cont + 1 ? cont + 1 : 0;
}

/* UTF-8, written once: decode, encode, validate, repair.
 *
 * The strictness, for every function here but the two named "loose" or
 * "tail" below: RFC 3629. A sequence is 1-4 bytes; no overlong forms
 * (C0, C1 and E0 80-9F, F0 80-8F are refused), no surrogates (U+D800-DFFF,
 * ED A0-BF), nothing above U+10FFFF (F4 90-BF and F5-FF are refused). This
 * is what Python's codec, jansson and PCRE2 accept.
 *
 * Two callers need something looser, and get their own names rather than a
 * flag: the tokenizers read a lead byte's announced length without
 * validating (clf_utf8_lead_len_loose, as llama.cpp's unicode_len_utf8), and
 * a stream of token pieces holds back an unfinished last character
 * (clf_utf8_incomplete_tail). */
#ifndef CLF_UTF8_H
#define CLF_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The highest code point, and U+FFFD, the replacement character (EF BF BD). */
#define CLF_UTF8_MAX 0x10FFFFu
#define CLF_UTF8_REPLACEMENT 0xFFFDu

/* Decodes the character at s[0, n): its length in bytes (1-4) with *cp set,
 * or 0 when s does not start with a whole valid sequence (n == 0 included;
 * *cp is then left as it was). */
size_t clf_utf8_decode(const void *s, size_t n, uint32_t *cp);

/* Writes cp's UTF-8 to out[0, 4) and returns its length (1-4); 0 and nothing
 * written for a surrogate or a value above U+10FFFF. */
size_t clf_utf8_encode(uint32_t cp, char out[4]);

/* Whether s[0, n) is all valid UTF-8 (1) or not (0). */
int clf_utf8_valid(const void *s, size_t n);

/* Copies s[0, n) into out with each byte that does not start a valid
 * sequence replaced by U+FFFD (what llama.cpp's decoder and Python's
 * errors="replace" do per byte); out holds at least 3 * n bytes. Returns the
 * bytes written (not NUL-terminated). */
size_t clf_utf8_repair(const void *s, size_t n, char *out);

/* Loose: the length a lead byte announces by its high 4 bits, validating
 * nothing: 1 for 00-BF (ASCII and stray continuation bytes), 2 for C0-DF,
 * 3 for E0-EF, 4 for F0-FF (llama.cpp's unicode_len_utf8). */
size_t clf_utf8_lead_len_loose(unsigned char lead);

/* Tail: how many of s[0, n)'s last bytes are an unfinished character, to
 * hold back until the next piece of a stream: a lead byte (C0-F7) followed by
 * fewer continuation bytes than it announces. 0 when s ends on a boundary,
 * and 0 for anything malformed (it passes through as it is). */
size_t clf_utf8_incomplete_tail(const void *s, size_t n);

#endif

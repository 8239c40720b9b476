/* SentencePiece-style BPE (tokenizer.ggml.model "llama"), as llama.cpp does
 * it: spaces become U+2581 (with one prefixed after BOS or a special token
 * when add_space_prefix), the text starts as one symbol per UTF-8 character,
 * and the adjacent pair whose concatenation is the vocabulary token with the
 * highest score is merged until no pair forms a token. Symbols left without
 * a token are spelled with <0xNN> byte tokens. */
#include "tokenizer_impl.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SPACE[] = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */

clf_status clf_spm_init(clf_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char hex[8], raw[1] = {(char)b};
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->byte_tok[b] = clf_tok_lookup(t, hex, 6);
        if (t->byte_tok[b] < 0) t->byte_tok[b] = clf_tok_lookup(t, raw, 1);
    }
    return CLF_OK;
}

typedef struct spm_work {
    const char *s;
    uint32_t *off, *len; /* len 0 once merged away */
    int32_t *prev, *next;
    clf_bigram_heap heap; /* a: bytes of both symbols when queued; a change means stale */
} spm_work;

static void add_bigram(const clf_tokenizer *t, spm_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = w->len[l] + w->len[r]; /* the symbols are adjacent in s */
    int32_t id = clf_tok_lookup(t, w->s + w->off[l], size);
    if (id >= 0) clf_bigram_push(&w->heap, (clf_bigram){-t->score[id], l, r, (int32_t)size, 0, 0});
}

static clf_status emit_symbol(const clf_tokenizer *t, const char *s, uint32_t n, clf_ids *out) {
    int32_t id = clf_tok_lookup(t, s, n);
    if (id >= 0) return clf_ids_push(out, id);
    for (uint32_t i = 0; i < n; i++) {
        id = t->byte_tok[(unsigned char)s[i]];
        if (id < 0) id = t->unk; /* a vocabulary without byte tokens */
        if (id >= 0) CLF_TRY(clf_ids_push(out, id));
    }
    return CLF_OK;
}

clf_status clf_spm_tokenize(const clf_tokenizer *t, const char *text, size_t n, int prefix_space, clf_ids *out) {
    size_t m = prefix_space ? 3 : 0;
    for (size_t i = 0; i < n; i++) m += text[i] == ' ' ? 3 : 1;
    if (m > INT32_MAX) return clf_fail(CLF_ERR_ARG, "tokenizer: text too long");
    char *s = malloc(m ? m : 1);
    spm_work w = {.s = s};
    w.off = malloc((m ? m : 1) * sizeof *w.off);
    w.len = malloc((m ? m : 1) * sizeof *w.len);
    w.prev = malloc((m ? m : 1) * sizeof *w.prev);
    w.next = malloc((m ? m : 1) * sizeof *w.next);
    w.heap.v = malloc((3 * m + 1) * sizeof *w.heap.v); /* n - 1 pairs, then at most 2 per merge */
    clf_status st = CLF_OK;
    if (!s || !w.off || !w.len || !w.prev || !w.next || !w.heap.v) {
        st = clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for %zu bytes of text", n);
        goto done;
    }
    size_t k = 0;
    if (prefix_space) {
        memcpy(s, SPACE, 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') {
            memcpy(s + k, SPACE, 3);
            k += 3;
        } else {
            s[k++] = text[i];
        }
    }

    /* one symbol per UTF-8 character, by its lead byte (not validated: bytes
     * that are no character fall back to byte tokens) */
    int32_t ns = 0;
    for (size_t i = 0; i < m; ns++) {
        size_t l = clf_utf8_lead_len_loose((unsigned char)s[i]);
        if (l > m - i) l = m - i;
        w.off[ns] = (uint32_t)i;
        w.len[ns] = (uint32_t)l;
        w.prev[ns] = ns - 1;
        w.next[ns] = i + l < m ? ns + 1 : -1;
        i += l;
    }
    for (int32_t i = 0; i + 1 < ns; i++) add_bigram(t, &w, i, i + 1);
    while (w.heap.n) {
        clf_bigram b = clf_bigram_pop(&w.heap);
        if (!w.len[b.left] || !w.len[b.right] || w.len[b.left] + w.len[b.right] != (uint32_t)b.a) continue; /* stale */
        w.len[b.left] += w.len[b.right];
        w.len[b.right] = 0;
        w.next[b.left] = w.next[b.right];
        if (w.next[b.right] >= 0) w.prev[w.next[b.right]] = b.left;
        add_bigram(t, &w, w.prev[b.left], b.left);
        add_bigram(t, &w, b.left, w.next[b.left]);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0 && st == CLF_OK; i = w.next[i])
        st = emit_symbol(t, s + w.off[i], w.len[i], out);
done:
    free(s);
    free(w.off);
    free(w.len);
    free(w.prev);
    free(w.next);
    free(w.heap.v);
    return st;
}

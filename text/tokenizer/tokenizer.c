/* Tokenizer front end: the vocabulary from a clf_vocab_desc (texts, types, scores,
 * special ids, a text -> id hash), special-token splitting, token pieces and
 * streaming detokenization. BPE and SentencePiece proper live in
 * tokenizer_bpe.c and tokenizer_spm.c. */
#include "tokenizer_impl.h"
#include "buf.h"
#include "hash.h"
#include "utf8.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clf_status clf_ids_push(clf_ids *a, int32_t id) {
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for %d ids", cap);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return CLF_OK;
}

static int bigram_before(const clf_bigram *x, const clf_bigram *y) {
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

void clf_bigram_push(clf_bigram_heap *h, clf_bigram x) {
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!bigram_before(&x, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
}

clf_bigram clf_bigram_pop(clf_bigram_heap *h) {
    clf_bigram top = h->v[0], x = h->v[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &x)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = x;
    return top;
}

/* ---- vocabulary hash ---------------------------------------------------- */

/* The text -> id index points into the tokenizer's own texts (no key
 * copies: 150k-token vocabularies), so it is an index of its own, hashed
 * with the one hash (host/core/hash.h). */
static uint32_t hash_bytes(const char *s, size_t n) { return (uint32_t)clf_fnv1a(CLF_FNV1A_SEED, s, n); }

int32_t clf_tok_lookup(const clf_tokenizer *t, const char *s, size_t n) {
    for (uint32_t i = hash_bytes(s, n) & t->map_mask;; i = (i + 1) & t->map_mask) {
        int32_t id = t->map[i];
        if (id < 0) return -1;
        if (t->text_len[id] == n && memcmp(t->text + t->text_off[id], s, n) == 0) return id;
    }
}

static clf_status build_map(clf_tokenizer *t) {
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)t->n_vocab) cap <<= 1;
    t->map = malloc(cap * sizeof *t->map);
    if (!t->map) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for the vocabulary hash");
    memset(t->map, 0xff, cap * sizeof *t->map);
    t->map_mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        int32_t dup = clf_tok_lookup(t, s, t->text_len[id]);
        if (dup >= 0)
            return clf_fail(CLF_ERR_FORMAT, "tokenizer: duplicate token '%s' (ids %d and %d)", s, dup, id);
        uint32_t i = hash_bytes(s, t->text_len[id]) & t->map_mask;
        while (t->map[i] >= 0) i = (i + 1) & t->map_mask;
        t->map[i] = id;
    }
    return CLF_OK;
}

/* ---- loading ------------------------------------------------------------- */

/* An optional token id; one out of range is ignored, as llama.cpp does. */
static void set_id(int64_t v, int32_t n_vocab, int32_t *id) {
    if (v >= 0 && v < n_vocab) *id = (int32_t)v;
}

static void set_flag(int v, int *flag) {
    if (v >= 0) *flag = v;
}

static clf_status copy_texts(clf_tokenizer *t, const clf_str *strs) {
    size_t total = 0;
    char empty[32];
    for (int32_t i = 0; i < t->n_vocab; i++)
        total += (strs[i].len ? strs[i].len : (size_t)snprintf(empty, sizeof empty, "[EMPTY_%d]", i)) + 1;
    if (total > UINT32_MAX) return clf_fail(CLF_ERR_FORMAT, "tokenizer: %zu bytes of token text", total);
    t->text = malloc(total);
    if (!t->text) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for %zu bytes of vocabulary", total);
    size_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        t->text_off[i] = (uint32_t)off;
        if (strs[i].len) { /* an empty token gets llama.cpp's placeholder text, unique like every text */
            memcpy(t->text + off, strs[i].ptr, strs[i].len);
            t->text_len[i] = (uint32_t)strs[i].len;
        } else {
            t->text_len[i] = (uint32_t)snprintf(t->text + off, total - off, "[EMPTY_%d]", i);
        }
        off += t->text_len[i];
        t->text[off++] = 0;
    }
    return CLF_OK;
}

/* Tokens that end generation, found by text as llama.cpp does (GGUFs rarely
 * list them all under tokenizer.ggml.eot_token_id). */
static const char *const EOG_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>",      "<|endoftext|>", "</s>",
    "<|eom_id|>", "<EOT>",      "<|end_of_text|>", "<end_of_utterance>", "<eos>",
    "<|return|>", "<|call|>", /* gpt-oss's Harmony (o200k_harmony): an answer's end, a tool call's */
};

static void mark_eog(clf_tokenizer *t, const clf_vocab_desc *d) {
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; i++) {
        int32_t id = clf_tok_lookup(t, EOG_TEXTS[i], strlen(EOG_TEXTS[i]));
        /* a stop token that the file typed as normal is a conversion bug:
         * llama.cpp treats it as control, so it is special-parsed the same */
        if (id >= 0) t->flags[id] |= CLF_TOKF_EOG | CLF_TOKF_CONTROL;
    }
    const int64_t ids[] = {d->eot, d->eom};
    for (size_t i = 0; i < 2; i++) {
        int32_t id = -1;
        set_id(ids[i], t->n_vocab, &id);
        if (id >= 0) t->flags[id] |= CLF_TOKF_EOG;
    }
    if (t->eos >= 0) t->flags[t->eos] |= CLF_TOKF_EOG;
    /* Harmony (gpt-oss) ends every message with <|end|>, its analysis channel's too: where the
     * vocabulary has <|return|> and <|call|>, generation ends at those, not at <|end|> (llama.cpp's
     * o200k_harmony rule; the token stays a control token) */
    const int32_t ret = clf_tok_lookup(t, "<|return|>", 10), call = clf_tok_lookup(t, "<|call|>", 8);
    const int32_t end = clf_tok_lookup(t, "<|end|>", 7);
    if (ret >= 0 && call >= 0 && end >= 0) t->flags[end] &= ~CLF_TOKF_EOG;
}

static int is_special_type(const clf_tokenizer *t, int32_t id) {
    int ty = t->type[id];
    return ty == CLF_TOKEN_CONTROL || ty == CLF_TOKEN_USER_DEFINED || ty == CLF_TOKEN_UNKNOWN ||
           (t->flags[id] & CLF_TOKF_CONTROL);
}

/* Rendered as "" unless CLF_DETOK_SPECIAL; matched only with parse_special. */
static int is_hidden(const clf_tokenizer *t, int32_t id) {
    return t->type[id] == CLF_TOKEN_CONTROL || t->type[id] == CLF_TOKEN_UNKNOWN || (t->flags[id] & CLF_TOKF_CONTROL);
}

/* llama.cpp's per-model token attributes (they are not in GGUF): Phi-3
 * drops the whitespace after its special tokens, except after these. */
static void mark_rstrip(clf_tokenizer *t, const clf_vocab_desc *d) {
    clf_str name = d->name;
    if (!name.len) return;
    char lower[256];
    size_t n = name.len < sizeof lower - 1 ? name.len : sizeof lower - 1;
    for (size_t i = 0; i < n; i++) lower[i] = (char)tolower((unsigned char)name.ptr[i]);
    lower[n] = 0;
    if (!strstr(lower, "phi-3") && !strstr(lower, "phi3")) return;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t, id)) t->flags[id] |= CLF_TOKF_RSTRIP;
    const char *keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < 3; i++) {
        int32_t id = clf_tok_lookup(t, keep[i], strlen(keep[i]));
        if (id >= 0) t->flags[id] &= (uint8_t)~CLF_TOKF_RSTRIP;
    }
}

typedef struct { uint32_t len; int32_t id; } len_id;

static int by_len_desc(const void *a, const void *b) {
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Special tokens are searched longest first, so "<|im_start|>" wins over a
 * token that is a prefix of it. */
static clf_status collect_special(clf_tokenizer *t) {
    len_id *v = malloc((size_t)t->n_vocab * sizeof *v);
    if (!v) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
    int n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (is_special_type(t, id)) v[n++] = (len_id){t->text_len[id], id};
    qsort(v, (size_t)n, sizeof *v, by_len_desc);
    t->special = malloc((size_t)(n ? n : 1) * sizeof *t->special);
    if (!t->special) {
        free(v);
        return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
    }
    for (int i = 0; i < n; i++) t->special[i] = v[i].id;
    t->n_special = n;
    free(v);
    return CLF_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, else -1. */
static int byte_token_value(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* What a token prints as: GPT-2 byte decoding or U+2581 -> ' ' for normal
 * tokens, the byte of a <0xNN> token, the text of everything special. */
static size_t make_piece(const clf_tokenizer *t, int32_t id, char *out) {
    const char *s = t->text + t->text_off[id];
    size_t n = t->text_len[id], k = 0;
    int ty = t->type[id];
    if (is_special_type(t, id)) {
        memcpy(out, s, n);
        return n;
    }
    if (ty == CLF_TOKEN_BYTE) {
        int b = byte_token_value(s, n);
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
        memcpy(out, s, n);
        return n;
    }
    if (ty != CLF_TOKEN_NORMAL) return 0; /* unused / undefined print as nothing */
    for (size_t i = 0; i < n;) {
        uint32_t cp = CLF_UTF8_REPLACEMENT; /* a byte that starts no valid character: kept as it is */
        size_t l = clf_utf8_decode(s + i, n - i, &cp);
        if (!l) l = 1;
        if (t->kind == CLF_VOCAB_BPE) {
            int b = clf_bpe_cp_to_byte(cp);
            if (b >= 0) out[k++] = (char)b;
            else for (size_t j = 0; j < l; j++) out[k++] = s[i + j]; /* not a byte code point: kept */
        } else if (l == 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            out[k++] = ' ';
        } else {
            for (size_t j = 0; j < l; j++) out[k++] = s[i + j];
        }
        i += l;
    }
    return k;
}

static clf_status make_pieces(clf_tokenizer *t) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->text_len[i];
    t->pieces = malloc(total ? total : 1); /* a piece is never longer than its text */
    if (!t->pieces) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
    size_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        t->piece_off[i] = (uint32_t)off;
        t->piece_len[i] = (uint32_t)make_piece(t, i, t->pieces + off);
        off += t->piece_len[i];
        if (t->piece_len[i] > t->max_piece) t->max_piece = t->piece_len[i];
    }
    return CLF_OK;
}

static clf_status load(clf_tokenizer *t, const clf_vocab_desc *d) {
    clf_str model = d->model, pre = d->pre.ptr ? d->pre : (clf_str){"default", 7};
    if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4)) t->kind = CLF_VOCAB_BPE;
    else if (model.len == 5 && !memcmp(model.ptr, "llama", 5)) t->kind = CLF_VOCAB_SPM;
    else
        return clf_fail(CLF_ERR_FORMAT, "unsupported tokenizer model '%.*s' (gpt2 and llama are)",
                        (int)(model.len > 64 ? 64 : model.len), model.ptr ? model.ptr : "");
    snprintf(t->model, sizeof t->model, "%.*s", (int)model.len, model.ptr);
    snprintf(t->pre, sizeof t->pre, "%.*s", (int)(pre.len < sizeof t->pre ? pre.len : sizeof t->pre - 1), pre.ptr);

    const clf_str *strs = d->tokens;
    uint64_t n = d->n_tokens;
    if (n == 0 || n > INT32_MAX / 2) return clf_fail(CLF_ERR_FORMAT, "tokenizer: %llu tokens", (unsigned long long)n);
    t->n_vocab = (int32_t)n;

    t->text_off = malloc(n * sizeof *t->text_off);
    t->text_len = malloc(n * sizeof *t->text_len);
    t->piece_off = malloc(n * sizeof *t->piece_off);
    t->piece_len = malloc(n * sizeof *t->piece_len);
    t->score = calloc(n, sizeof *t->score);
    t->type = malloc(n);
    t->flags = calloc(n, 1);
    if (!t->text_off || !t->text_len || !t->piece_off || !t->piece_len || !t->score || !t->type || !t->flags)
        return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);
    CLF_TRY(copy_texts(t, strs));
    for (uint64_t i = 0; i < n; i++) {
        int32_t ty = CLF_TOKEN_NORMAL;
        if (d->types) memcpy(&ty, (const char *)d->types + 4 * i, 4);
        t->type[i] = (uint8_t)(ty >= CLF_TOKEN_NORMAL && ty <= CLF_TOKEN_BYTE ? ty : 0);
        if (d->scores && !d->scores_int) {
            memcpy(&t->score[i], (const char *)d->scores + 4 * i, 4);
        } else if (d->scores) {
            int32_t s;
            memcpy(&s, (const char *)d->scores + 4 * i, 4);
            t->score[i] = (float)s;
        }
    }
    CLF_TRY(build_map(t));

    /* llama.cpp's defaults, then the file's keys */
    int spm = t->kind == CLF_VOCAB_SPM;
    t->bos = spm ? 1 : -1;
    t->eos = spm ? 2 : -1;
    t->unk = spm ? 0 : -1;
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    if (t->unk >= t->n_vocab) t->unk = -1;
    set_id(d->bos, t->n_vocab, &t->bos);
    set_id(d->eos, t->n_vocab, &t->eos);
    set_id(d->unk, t->n_vocab, &t->unk);
    t->add_space_prefix = spm;
    t->add_bos = spm;
    t->add_eos = 0;
    CLF_TRY(spm ? clf_spm_init(t) : clf_bpe_init(t, d)); /* BPE may default add_bos by pre-tokenizer */
    set_flag(d->add_space_prefix, &t->add_space_prefix);
    set_flag(d->add_bos, &t->add_bos);
    set_flag(d->add_eos, &t->add_eos);
    if (t->add_bos && t->bos < 0) t->add_bos = 0;
    if (t->add_eos && t->eos < 0) t->add_eos = 0;

    mark_eog(t, d);
    mark_rstrip(t, d);
    CLF_TRY(collect_special(t));
    CLF_TRY(make_pieces(t));

    if (d->chat_template.ptr) {
        clf_str tmpl = d->chat_template;
        t->chat_template = malloc(tmpl.len + 1);
        if (!t->chat_template) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
        memcpy(t->chat_template, tmpl.ptr, tmpl.len);
        t->chat_template[tmpl.len] = 0;
    }
    return CLF_OK;
}

clf_status clf_tokenizer_create(const clf_vocab_desc *d, clf_tokenizer **out) {
    *out = NULL;
    clf_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
    clf_status st = load(t, d);
    if (st != CLF_OK) {
        clf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return CLF_OK;
}

void clf_tokenizer_free(clf_tokenizer *t) {
    if (!t) return;
    clf_bpe_free(t);
    free(t->text);
    free(t->pieces);
    free(t->text_off);
    free(t->text_len);
    free(t->piece_off);
    free(t->piece_len);
    free(t->score);
    free(t->type);
    free(t->flags);
    free(t->map);
    free(t->special);
    free(t->chat_template);
    free(t);
}

/* ---- tokenization -------------------------------------------------------- */

typedef struct frag {
    size_t off, len;
    int32_t id; /* a special token, or -1 for text still to tokenize */
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static clf_status frags_push(frags *f, frag x) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *v = realloc(f->v, cap * sizeof *v);
        if (!v) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return CLF_OK;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); } /* C isspace, any locale */

/* Whether [at, at + n) overlaps one of the plain ranges (in order). */
static int in_plain(const clf_span *plain, int n_plain, size_t at, size_t n) {
    for (int i = 0; i < n_plain && plain[i].off < at + n; i++)
        if (at < plain[i].off + plain[i].len) return 1;
    return 0;
}

/* Cuts every occurrence of each special token out of the text fragments, one
 * token at a time, longest first (llama.cpp's tokenizer_st_partition). A
 * control token's text inside a plain range stays text. */
static clf_status split_special(const clf_tokenizer *t, const char *text, size_t len, int parse_special,
                                const clf_span *plain, int n_plain, frags *cur) {
    frags next = {0};
    clf_status st = CLF_OK;
    if (len) st = frags_push(cur, (frag){0, len, -1});
    for (int s = 0; s < t->n_special && st == CLF_OK; s++) {
        int32_t id = t->special[s];
        if (!parse_special && is_hidden(t, id)) continue; /* user-defined tokens are always split out */
        const char *tok = t->text + t->text_off[id];
        size_t tl = t->text_len[id];
        next.n = 0;
        for (size_t i = 0; i < cur->n && st == CLF_OK; i++) {
            frag f = cur->v[i];
            size_t from = f.off; /* where to look next: past a match inside a plain range */
            while (f.id < 0 && f.off + f.len - from >= tl && st == CLF_OK) {
                const char *m = memmem(text + from, f.off + f.len - from, tok, tl);
                if (!m) break;
                size_t at = (size_t)(m - text);
                if (n_plain && is_hidden(t, id) && in_plain(plain, n_plain, at, tl)) {
                    from = at + 1;
                    continue;
                }
                if (at > f.off) st = frags_push(&next, (frag){f.off, at - f.off, -1});
                if (st == CLF_OK) st = frags_push(&next, (frag){at, tl, id});
                f.len -= at + tl - f.off;
                f.off = at + tl;
                if (t->flags[id] & CLF_TOKF_RSTRIP)
                    while (f.len && is_space(text[f.off])) {
                        f.off++;
                        f.len--;
                    }
                from = f.off;
            }
            if (st == CLF_OK && (f.id >= 0 || f.len)) st = frags_push(&next, f);
        }
        frags tmp = *cur;
        *cur = next;
        next = tmp;
    }
    free(next.v);
    return st;
}

static clf_status tokenize(const clf_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                           const clf_span *plain, int n_plain, clf_ids *out) {
    if (add_special && t->add_bos) CLF_TRY(clf_ids_push(out, t->bos));
    frags fr = {0};
    clf_status st = split_special(t, text, len, parse_special, plain, n_plain, &fr);
    int prev_special = 1; /* SentencePiece prefixes a space to the text after BOS or a special token */
    for (size_t i = 0; i < fr.n && st == CLF_OK; i++) {
        const frag *f = &fr.v[i];
        if (f->id >= 0) {
            st = clf_ids_push(out, f->id);
            prev_special = 1;
        } else if (t->kind == CLF_VOCAB_BPE) {
            st = clf_bpe_tokenize(t, text + f->off, f->len, out);
        } else {
            st = clf_spm_tokenize(t, text + f->off, f->len, t->add_space_prefix && prev_special, out);
            prev_special = 0;
        }
    }
    free(fr.v);
    if (st == CLF_OK && add_special && t->add_eos) st = clf_ids_push(out, t->eos);
    return st;
}

static clf_status tokenize_ids(const clf_tokenizer *t, const char *text, size_t len, int add_special,
                               int parse_special, const clf_span *plain, int n_plain, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!t || (!text && len)) return clf_fail(CLF_ERR_ARG, "clf_tokenize: no tokenizer or text");
    if (len > (size_t)INT32_MAX / 4) /* so that every count, after UTF-8 repair, fits an int */
        return clf_fail(CLF_ERR_ARG, "clf_tokenize: text of %zu bytes is too long", len);
    clf_ids out = {0};
    clf_status st = tokenize(t, text, len, add_special, parse_special, plain, n_plain, &out);
    if (st != CLF_OK) {
        free(out.v);
        return st;
    }
    *ids = out.v;
    *n = out.n;
    return CLF_OK;
}

clf_status clf_tokenize(const clf_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **ids, int *n) {
    return tokenize_ids(t, text, len, add_special, parse_special, NULL, 0, ids, n);
}

clf_status clf_tokenize_plain(const clf_tokenizer *t, const char *text, size_t len, int add_special,
                              const clf_span *plain, int n_plain, int32_t **ids, int *n) {
    if (n_plain < 0 || (n_plain && !plain)) {
        *ids = NULL;
        *n = 0;
        return clf_fail(CLF_ERR_ARG, "clf_tokenize_plain: no plain ranges");
    }
    return tokenize_ids(t, text, len, add_special, 1, plain, n_plain, ids, n);
}

/* ---- accessors ------------------------------------------------------------ */

int32_t clf_tokenizer_n_vocab(const clf_tokenizer *t) { return t->n_vocab; }
int32_t clf_tokenizer_bos(const clf_tokenizer *t) { return t->bos; }
int32_t clf_tokenizer_eos(const clf_tokenizer *t) { return t->eos; }
int clf_tokenizer_add_bos(const clf_tokenizer *t) { return t->add_bos; }
const char *clf_tokenizer_model(const clf_tokenizer *t) { return t->model; }
const char *clf_tokenizer_pre(const clf_tokenizer *t) { return t->pre; }
const char *clf_tokenizer_chat_template(const clf_tokenizer *t) { return t->chat_template; }
size_t clf_tokenizer_max_piece(const clf_tokenizer *t) {
    return t->max_piece + 3; /* a piece after the 1-3 bytes of a held-back sequence */
}

int32_t clf_tokenizer_find(const clf_tokenizer *t, const char *text) { return clf_tok_lookup(t, text, strlen(text)); }

static int in_range(const clf_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab; }

int clf_token_is_eog(const clf_tokenizer *t, int32_t id) { return in_range(t, id) && (t->flags[id] & CLF_TOKF_EOG); }
int clf_token_type(const clf_tokenizer *t, int32_t id) { return in_range(t, id) ? t->type[id] : 0; }
const char *clf_token_text(const clf_tokenizer *t, int32_t id) {
    return in_range(t, id) ? t->text + t->text_off[id] : NULL;
}

const char *clf_token_piece(const clf_tokenizer *t, int32_t id, size_t *len) {
    if (!in_range(t, id)) return NULL;
    *len = t->piece_len[id];
    return t->pieces + t->piece_off[id];
}

/* ---- streaming detokenization --------------------------------------------- */

void clf_detok_init(clf_detok *d, const clf_tokenizer *t, int flags) {
    memset(d, 0, sizeof *d);
    d->t = t;
    d->flags = flags;
}

clf_status clf_detok_push(clf_detok *d, int32_t id, char *buf, size_t cap, size_t *n) {
    const clf_tokenizer *t = d->t;
    *n = 0;
    if (!in_range(t, id))
        return clf_fail(CLF_ERR_ARG, "detokenize: token id %d outside the vocabulary of %d", id, t->n_vocab);
    const char *p = t->pieces + t->piece_off[id];
    size_t len = t->piece_len[id];
    if (!(d->flags & CLF_DETOK_SPECIAL) && is_hidden(t, id)) len = 0;
    if (!d->started && (d->flags & CLF_DETOK_LSTRIP) && t->add_space_prefix && len && p[0] == ' ') {
        p++;
        len--;
    }
    size_t total = (size_t)d->n_held + len;
    if (cap < total) return clf_fail(CLF_ERR_ARG, "detokenize: buffer of %zu bytes, %zu needed", cap, total);
    d->started = 1;
    memcpy(buf, d->held, (size_t)d->n_held);
    memcpy(buf + d->n_held, p, len);
    size_t k = total - clf_utf8_incomplete_tail(buf, total); /* an unfinished last character waits for the next piece */
    d->n_held = (int)(total - k);
    memcpy(d->held, buf + k, (size_t)d->n_held);
    *n = k;
    return CLF_OK;
}

size_t clf_detok_flush(clf_detok *d, char *buf, size_t cap) {
    size_t k = (size_t)d->n_held < cap ? (size_t)d->n_held : cap;
    memcpy(buf, d->held, k);
    memmove(d->held, d->held + k, (size_t)d->n_held - k);
    d->n_held -= (int)k;
    return k;
}

clf_status clf_detokenize(const clf_tokenizer *t, const int32_t *ids, int n, int flags, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    size_t piece_cap = clf_tokenizer_max_piece(t);
    clf_buf out = {0}; /* the text (the core's buffer) */
    char *piece = malloc(piece_cap);
    clf_status st = piece ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "detokenize: out of memory");
    clf_detok d;
    clf_detok_init(&d, t, flags);
    /* each token's piece, then what the stream held back */
    for (int i = 0; i <= n && st == CLF_OK; i++) {
        size_t k;
        if (i < n) st = clf_detok_push(&d, ids[i], piece, piece_cap, &k);
        else k = clf_detok_flush(&d, piece, piece_cap);
        if (st != CLF_OK) break;
        if (clf_buf_add(&out, piece, k) != CLF_OK) st = clf_fail(CLF_ERR_MEMORY, "detokenize: out of memory");
    }
    free(piece);
    if (st != CLF_OK) {
        clf_buf_free(&out);
        return st;
    }
    *text = clf_buf_take(&out, len); /* "" when nothing was written */
    return *text ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "detokenize: out of memory");
}

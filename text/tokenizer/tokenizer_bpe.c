/* Byte-level BPE (tokenizer.ggml.model "gpt2"), as llama.cpp does it:
 *
 *  1. the text is split into pre-tokens by a sequence of regexes chosen by
 *     tokenizer.ggml.pre (each regex splits every piece the previous one
 *     left, and the unmatched gaps are pieces too);
 *  2. each pre-token's bytes become GPT-2 byte tokens, and the adjacent pair
 *     with the lowest merge rank is merged until no pair has a rank (a heap
 *     ordered by (rank, position), stale entries skipped).
 *
 * The regexes are llama.cpp's strings verbatim, run by PCRE2 in UTF + UCP
 * mode, which gives \p{L}, \p{N} and \s their Unicode meaning. */
#include "buf.h"
#include "tokenizer_impl.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* ---- GPT-2 byte <-> code point -------------------------------------------- */

/* The 68 bytes that are not printable Latin-1 map, in order, to 256..323:
 * 0x00-0x20, 0x7f-0xa0, 0xad. */
uint32_t clf_bpe_byte_to_cp(uint8_t b) {
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7f && b <= 0xa0) return 256u + 33 + (b - 0x7fu);
    if (b == 0xad) return 256u + 67;
    return b;
}

int clf_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return clf_bpe_byte_to_cp((uint8_t)cp) == cp ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7f + cp - (256 + 33));
    if (cp == 256 + 67) return 0xad;
    return -1;
}

/* ---- pre-tokenizers ---------------------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                           \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+" \
                    "|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                        \
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+" \
                    "|\\s+(?!\\S)|\\s+"

typedef struct pre_spec {
    const char *names[8]; /* tokenizer.ggml.pre values */
    const char *regex[CLF_PRE_MAX_REGEX];
    int ignore_merges, add_bos;
} pre_spec;

/* llama.cpp's LLAMA_VOCAB_PRE_TYPE_* cases (src/llama-vocab.cpp). */
static const pre_spec PRE_SPECS[] = {
    {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de"}, {RE_GPT2}, 0, 0},
    {{"starcoder", "smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
     {"\\p{N}", RE_GPT2}, 0, 0}, /* digits one by one, then GPT-2 */
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}, {RE_LLAMA3}, 1, 1},
    {{"dbrx", "smaug-bpe"}, {RE_LLAMA3}, 0, 0},
    {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2"}, {RE_QWEN2}, 0, 0},
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0},
};

static const pre_spec *find_pre(const char *name) {
    for (size_t i = 0; i < sizeof PRE_SPECS / sizeof PRE_SPECS[0]; i++)
        for (int j = 0; j < 8 && PRE_SPECS[i].names[j]; j++)
            if (!strcmp(PRE_SPECS[i].names[j], name)) return &PRE_SPECS[i];
    return NULL;
}

static clf_status compile_pre(clf_tokenizer *t, const pre_spec *pre) {
    for (int i = 0; i < CLF_PRE_MAX_REGEX && pre->regex[i]; i++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pre->regex[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                                       &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            return clf_fail(CLF_ERR_FORMAT, "pre-tokenizer '%s': regex %d at offset %zu: %s", t->pre, i, (size_t)at,
                            (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback where JIT is missing */
        t->regex[t->n_regex++] = re;
    }
    return CLF_OK;
}

/* ---- merges ------------------------------------------------------------------ */

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1; }

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static const clf_merge_slot *merge_find(const clf_tokenizer *t, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return NULL;
    uint64_t key = pair_key(a, b);
    for (uint64_t i = mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const clf_merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (!s->key) return NULL;
    }
}

/* Merges are "left right" strings, split at the first space after the first
 * byte (llama.cpp). A merge whose parts or result are not tokens can never
 * produce a token and is left out. */
static clf_status load_merges(clf_tokenizer *t, const clf_str *m, uint64_t n) {
    uint64_t cap = 1;
    while (cap < 2 * n + 2) cap <<= 1;
    t->merges = calloc(cap, sizeof *t->merges);
    if (!t->merges) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
    t->merge_mask = cap - 1;
    clf_buf joined = {0}; /* "left" "right" without the space */
    for (uint64_t r = 0; r < n; r++) {
        const char *s = m[r].ptr, *sp = m[r].len > 1 ? memchr(s + 1, ' ', m[r].len - 1) : NULL;
        if (!sp) continue;
        size_t la = (size_t)(sp - s), lb = m[r].len - la - 1;
        clf_buf_clear(&joined);
        clf_buf_add(&joined, s, la);
        if (clf_buf_add(&joined, sp + 1, lb) != CLF_OK) {
            clf_buf_free(&joined);
            return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
        }
        int32_t a = clf_tok_lookup(t, s, la), b = clf_tok_lookup(t, sp + 1, lb),
                ab = clf_tok_lookup(t, joined.p, la + lb);
        if (a < 0 || b < 0 || ab < 0 || merge_find(t, a, b)) continue; /* the first rank of a pair wins */
        uint64_t key = pair_key(a, b), i = mix64(key) & t->merge_mask;
        while (t->merges[i].key) i = (i + 1) & t->merge_mask;
        t->merges[i] = (clf_merge_slot){key, (int32_t)r, ab};
    }
    clf_buf_free(&joined);
    return CLF_OK;
}

clf_status clf_bpe_init(clf_tokenizer *t, const clf_vocab_desc *d) {
    const pre_spec *pre = find_pre(t->pre);
    if (!pre) return clf_fail(CLF_ERR_FORMAT, "unsupported pre-tokenizer '%s'", t->pre);
    CLF_TRY(compile_pre(t, pre));
    t->ignore_merges = pre->ignore_merges;
    t->add_bos = pre->add_bos; /* until tokenizer.ggml.add_bos_token says otherwise */
    CLF_TRY(load_merges(t, d->merges, d->n_merges));
    for (int b = 0; b < 256; b++) {
        char u[4];
        t->byte_tok[b] = clf_tok_lookup(t, u, clf_utf8_encode(clf_bpe_byte_to_cp((uint8_t)b), u));
    }
    return CLF_OK;
}

void clf_bpe_free(clf_tokenizer *t) {
    for (int i = 0; i < t->n_regex; i++) pcre2_code_free(t->regex[i]);
    t->n_regex = 0;
    free(t->merges);
    t->merges = NULL;
}

/* ---- one pre-token ---------------------------------------------------------- */

typedef struct bpe_work {
    int32_t *id, *prev, *next; /* one symbol per byte; id -2 once merged away */
    clf_bigram_heap heap; /* a, b, c: left id, right id, merged id */
    char *enc;            /* the GPT-2 encoded pre-token, for ignore_merges */
} bpe_work;

static void add_bigram(const clf_tokenizer *t, bpe_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const clf_merge_slot *m = merge_find(t, w->id[l], w->id[r]);
    if (m) clf_bigram_push(&w->heap, (clf_bigram){(float)m->rank, l, r, w->id[l], w->id[r], m->id});
}

static clf_status bpe_word(const clf_tokenizer *t, const unsigned char *s, int32_t n, bpe_work *w, clf_ids *out) {
    if (t->ignore_merges) {
        size_t k = 0;
        for (int32_t i = 0; i < n; i++) k += clf_utf8_encode(clf_bpe_byte_to_cp(s[i]), w->enc + k);
        int32_t id = clf_tok_lookup(t, w->enc, k);
        if (id >= 0) return clf_ids_push(out, id);
    }
    w->heap.n = 0;
    for (int32_t i = 0; i < n; i++) {
        w->id[i] = t->byte_tok[s[i]];
        w->prev[i] = i - 1;
        w->next[i] = i + 1 < n ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < n; i++) add_bigram(t, w, i, i + 1);
    while (w->heap.n) {
        clf_bigram b = clf_bigram_pop(&w->heap);
        if (w->id[b.left] != b.a || w->id[b.right] != b.b || w->next[b.left] != b.right) continue; /* stale */
        w->id[b.left] = b.c;
        w->id[b.right] = -2;
        w->next[b.left] = w->next[b.right];
        if (w->next[b.right] >= 0) w->prev[w->next[b.right]] = b.left;
        add_bigram(t, w, w->prev[b.left], b.left);
        add_bigram(t, w, b.left, w->next[b.left]);
    }
    /* a byte without a token (a broken vocabulary) is dropped, as in llama.cpp */
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (w->id[i] >= 0) CLF_TRY(clf_ids_push(out, w->id[i]));
    return CLF_OK;
}

/* ---- splitting ----------------------------------------------------------------- */

typedef struct span {
    size_t off, len;
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
} spans;

static clf_status spans_push(spans *a, size_t off, size_t len) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        span *v = realloc(a->v, cap * sizeof *v);
        if (!v) return clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = (span){off, len};
    return CLF_OK;
}

/* Splits each span of `in` by the matches of `re`, keeping the gaps. */
static clf_status split_by(const pcre2_code *re, const char *s, const spans *in, spans *out, pcre2_match_data *md) {
    out->n = 0;
    for (size_t k = 0; k < in->n; k++) {
        const char *subj = s + in->v[k].off;
        size_t len = in->v[k].len, pos = 0, last = 0;
        while (pos < len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)subj, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return clf_fail(CLF_ERR_ARG, "pre-tokenizer regex failed: %s", (const char *)msg);
            }
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) { /* no regex here matches empty; step over a code point if one does */
                pos = ms + 1;
                while (pos < len && ((unsigned char)subj[pos] & 0xc0) == 0x80) pos++;
                continue;
            }
            if (ms > last) CLF_TRY(spans_push(out, in->v[k].off + last, ms - last));
            CLF_TRY(spans_push(out, in->v[k].off + ms, me - ms));
            last = pos = me;
        }
        if (last < len) CLF_TRY(spans_push(out, in->v[k].off + last, len - last));
    }
    return CLF_OK;
}

clf_status clf_bpe_tokenize(const clf_tokenizer *t, const char *text, size_t n, clf_ids *out) {
    if (!n) return CLF_OK;
    clf_status st = CLF_OK;
    spans a = {0}, b = {0};
    bpe_work w = {0};
    char *s = malloc(3 * n + 1);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!s || !md) {
        st = clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    size_t len = clf_utf8_repair(text, n, s); /* each byte that starts no character: U+FFFD, as llama.cpp (PCRE2 needs UTF-8) */
    st = spans_push(&a, 0, len);
    for (int i = 0; i < t->n_regex && st == CLF_OK; i++) {
        st = split_by(t->regex[i], s, &a, &b, md);
        spans tmp = a;
        a = b;
        b = tmp;
    }
    if (st != CLF_OK) goto done;
    size_t longest = 0;
    for (size_t i = 0; i < a.n; i++)
        if (a.v[i].len > longest) longest = a.v[i].len;
    w.id = malloc(longest * sizeof *w.id);
    w.prev = malloc(longest * sizeof *w.prev);
    w.next = malloc(longest * sizeof *w.next);
    w.heap.v = malloc(3 * longest * sizeof *w.heap.v); /* n - 1 pairs, then at most 2 per merge */
    w.enc = malloc(2 * longest + 1);
    if (!w.id || !w.prev || !w.next || !w.heap.v || !w.enc) {
        st = clf_fail(CLF_ERR_MEMORY, "tokenizer: out of memory for a pre-token of %zu bytes", longest);
        goto done;
    }
    for (size_t i = 0; i < a.n && st == CLF_OK; i++)
        st = bpe_word(t, (const unsigned char *)s + a.v[i].off, (int32_t)a.v[i].len, &w, out);
done:
    free(w.id);
    free(w.prev);
    free(w.next);
    free(w.heap.v);
    free(w.enc);
    free(a.v);
    free(b.v);
    free(s);
    pcre2_match_data_free(md);
    return st;
}

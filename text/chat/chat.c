#include "chat.h"
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- recognising the format ---------------------------------------------- */

/* A literal system turn in a ChatML template is its default system message:
 * "<|im_start|>system", a newline (itself, or the two characters \n inside
 * a Jinja string as Qwen writes it), then text up to "<|im_end|>" without a
 * quote, brace or backslash (those mean template code around a message). */
static void find_default_system(const char *tmpl, clf_chat *c) {
    static const char HEAD[] = "<|im_start|>system";
    for (const char *p = strstr(tmpl, HEAD); p; p = strstr(p + 1, HEAD)) {
        const char *s = p + strlen(HEAD), *e;
        if (*s == '\n') s++;
        else if (s[0] == '\\' && s[1] == 'n') s += 2;
        else continue;
        if (!(e = strstr(s, "<|im_end|>")) || e == s) continue;
        const char *q = s;
        while (q < e && !strchr("'\"{}\\", *q)) q++;
        if (q < e) continue;
        c->default_system = s;
        c->default_system_len = (size_t)(e - s);
        return;
    }
}

/* Copies tmpl's text after `key` up to a quote, backslash or newline. */
static int copy_literal(const char *tmpl, const char *key, char *out, size_t cap) {
    const char *s = strstr(tmpl, key);
    if (!s) return 0;
    s += strlen(key);
    size_t n = strcspn(s, "\"'\\\n");
    if (n == 0 || n >= cap) return 0;
    memcpy(out, s, n);
    out[n] = 0;
    return 1;
}

/* Llama 3.1+'s dated system turn: the knowledge date as the template writes
 * it; today as strftime_now("%d %b %Y") gives it (English month names,
 * whatever the locale), else the template's date_string default. */
static void find_dated_system(const char *tmpl, clf_chat *c) {
    if (!copy_literal(tmpl, "Cutting Knowledge Date: ", c->knowledge, sizeof c->knowledge)) return;
    if (!strstr(tmpl, "strftime_now") && (copy_literal(tmpl, "set date_string = \"", c->date, sizeof c->date) ||
                                          copy_literal(tmpl, "set date_string = '", c->date, sizeof c->date)))
        return;
    static const char *const MONTH[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm) && tm.tm_mon >= 0 && tm.tm_mon < 12)
        snprintf(c->date, sizeof c->date, "%02d %s %d", tm.tm_mday, MONTH[tm.tm_mon], tm.tm_year + 1900);
    else
        snprintf(c->date, sizeof c->date, "26 Jul 2024"); /* the templates' own fallback */
}

clf_status clf_chat_init(const char *tmpl, clf_chat *c) {
    memset(c, 0, sizeof *c);
    if (!tmpl || strstr(tmpl, "<|im_start|>")) {
        c->format = CLF_CHAT_CHATML;
        if (tmpl) find_default_system(tmpl, c);
    } else if (strstr(tmpl, "<|start_header_id|>")) {
        c->format = CLF_CHAT_LLAMA3;
        find_dated_system(tmpl, c);
    } else if (strstr(tmpl, "<start_of_turn>")) {
        c->format = CLF_CHAT_GEMMA;
    } else if (strstr(tmpl, "<|user|>") && strstr(tmpl, "<|end|>")) {
        c->format = CLF_CHAT_PHI3;
    } else if (strstr(tmpl, "<|user|>")) {
        c->format = CLF_CHAT_ZEPHYR;
    } else {
        return clf_fail(CLF_ERR_FORMAT, "the model's chat template is not one clinfer knows (ChatML, Llama-3, "
                                        "Gemma, Phi-3, Zephyr)");
    }
    return CLF_OK;
}

clf_status clf_chat_init_model(const clf_tokenizer *t, clf_chat *c) {
    const char *tmpl = clf_tokenizer_chat_template(t);
    if (tmpl) return clf_chat_init(tmpl, c);
    /* the turn markers of a format, as special tokens of the vocabulary */
    static const struct { const char *tok[2]; const char *tmpl; } BY_TOKENS[] = {
        {{"<start_of_turn>", "<end_of_turn>"}, "<start_of_turn>"},
        {{"<|start_header_id|>", "<|eot_id|>"}, "<|start_header_id|>"},
        {{"<|user|>", "<|end|>"}, "<|user|><|end|>"},
    };
    for (size_t i = 0; i < sizeof BY_TOKENS / sizeof BY_TOKENS[0]; i++)
        if (clf_tokenizer_find(t, BY_TOKENS[i].tok[0]) >= 0 && clf_tokenizer_find(t, BY_TOKENS[i].tok[1]) >= 0)
            return clf_chat_init(BY_TOKENS[i].tmpl, c);
    return clf_chat_init(NULL, c);
}

const char *clf_chat_format_name(clf_chat_format f) {
    switch (f) {
    case CLF_CHAT_CHATML: return "ChatML";
    case CLF_CHAT_LLAMA3: return "Llama-3";
    case CLF_CHAT_ZEPHYR: return "Zephyr";
    case CLF_CHAT_GEMMA: return "Gemma";
    case CLF_CHAT_PHI3: return "Phi-3";
    }
    return "?";
}

/* ---- rendering ----------------------------------------------------------- */

/* Text goes into the core's clf_buf; its failure (memory) said here. */
static clf_status put(clf_buf *b, const char *s, size_t n) {
    return clf_buf_add(b, s, n) == CLF_OK ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
}

static clf_status puts_(clf_buf *b, const char *s) { return put(b, s, strlen(s)); }

/* The callers' (buf, len) pair as a clf_buf and back (cap 0: whatever the
 * caller's allocation, the next append reallocs it). */
static clf_buf as_buf(char **buf, size_t *len) { return (clf_buf){.p = *buf, .n = *buf ? *len : 0}; }
static clf_status from_buf(clf_buf *b, char **buf, size_t *len, clf_status st) {
    *buf = b->p;
    *len = b->n;
    return st;
}

/* Where the messages' texts lie in a rendered text (clf_chat_tokenize reads
 * control tokens only outside them); NULL when nobody asks. */
typedef struct spans {
    clf_span *v;
    int n, cap;
} spans;

static clf_status mark(spans *sp, size_t off, size_t n) {
    if (!sp || !n) return CLF_OK;
    if (sp->n && sp->v[sp->n - 1].off + sp->v[sp->n - 1].len == off) { /* the prefix, then its message */
        sp->v[sp->n - 1].len += n;
        return CLF_OK;
    }
    if (sp->n == sp->cap) {
        int cap = sp->cap ? 2 * sp->cap : 8;
        clf_span *v = realloc(sp->v, (size_t)cap * sizeof *v);
        if (!v) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (clf_span){off, n};
    return CLF_OK;
}

/* Jinja's trim (Python's strip) on ASCII whitespace: Llama 3 and Gemma
 * templates trim every message text. */
static void trim(const char **s, size_t *n) {
    while (*n && strchr(" \t\n\r\v\f", (*s)[0])) (*s)++, (*n)--;
    while (*n && strchr(" \t\n\r\v\f", (*s)[*n - 1])) (*n)--;
}

/* One turn: the format's header for `role`, then `prefix` as it is, then
 * the content (trimmed where the template trims), then the turn's end. The
 * prefix and content are the caller's text: marked plain in sp. */
static clf_status turn(const clf_chat *c, const char *role, const char *prefix, const char *content, clf_buf *b,
                       spans *sp) {
    char head[96];
    const char *end = clf_chat_turn_end(c);
    int trimmed = 0;
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool"))
        return clf_fail(CLF_ERR_ARG, "the chat role '%.32s' is not system, user, assistant or tool", role);
    /* a tool's result: ChatML templates write its role as it is, Llama 3.1's
     * as "ipython"; Gemma's, Phi-3's and Zephyr's have no such turn */
    if (!strcmp(role, "tool") && c->format != CLF_CHAT_CHATML && c->format != CLF_CHAT_LLAMA3)
        return clf_fail(CLF_ERR_ARG, "the %s chat format has no tool turn", clf_chat_format_name(c->format));
    switch (c->format) {
    case CLF_CHAT_CHATML: snprintf(head, sizeof head, "<|im_start|>%.32s\n", role); break;
    case CLF_CHAT_LLAMA3:
        snprintf(head, sizeof head, "<|start_header_id|>%.32s<|end_header_id|>\n\n",
                 strcmp(role, "tool") ? role : "ipython");
        trimmed = 1;
        break;
    case CLF_CHAT_ZEPHYR:
    case CLF_CHAT_PHI3: snprintf(head, sizeof head, "<|%.32s|>\n", role); break;
    case CLF_CHAT_GEMMA:
        if (!strcmp(role, "system"))
            return clf_fail(CLF_ERR_ARG, "Gemma has no system turn: its text opens the first user turn "
                                         "(clf_chat_render)");
        snprintf(head, sizeof head, "<start_of_turn>%.32s\n", strcmp(role, "assistant") ? role : "model");
        trimmed = 1;
        break;
    }
    size_t n = strlen(content);
    if (trimmed) trim(&content, &n);
    CLF_TRY(puts_(b, head));
    size_t start = b->n;
    CLF_TRY(puts_(b, prefix));
    CLF_TRY(put(b, content, n));
    CLF_TRY(mark(sp, start, b->n - start));
    return puts_(b, end);
}

clf_status clf_chat_append(const clf_chat *c, const char *role, const char *content, char **buf, size_t *len) {
    clf_buf b = as_buf(buf, len);
    return from_buf(&b, buf, len, turn(c, role, "", content, &b, NULL));
}

static clf_status put_reply_start(const clf_chat *c, clf_buf *b) {
    switch (c->format) {
    case CLF_CHAT_CHATML: return puts_(b, "<|im_start|>assistant\n");
    case CLF_CHAT_LLAMA3: return puts_(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    case CLF_CHAT_ZEPHYR:
    case CLF_CHAT_PHI3: return puts_(b, "<|assistant|>\n");
    case CLF_CHAT_GEMMA: return puts_(b, "<start_of_turn>model\n");
    }
    return clf_fail(CLF_ERR_ARG, "bad chat format");
}

clf_status clf_chat_append_reply_start(const clf_chat *c, char **buf, size_t *len) {
    clf_buf b = as_buf(buf, len);
    return from_buf(&b, buf, len, put_reply_start(c, &b));
}

static clf_status render(const clf_chat *c, const clf_chat_msg *msgs, int n, int with_reply, clf_buf *b, spans *sp) {
    const char *sys = n > 0 && !strcmp(msgs[0].role, "system") ? msgs[0].content : NULL;
    char *prefix = NULL;
    clf_status st = CLF_OK;
    int i = 0;
    if (c->knowledge[0]) { /* Llama 3.1+: the dated system turn, always */
        char dated[96];
        snprintf(dated, sizeof dated, "Cutting Knowledge Date: %s\nToday Date: %s\n\n", c->knowledge, c->date);
        st = turn(c, "system", dated, sys ? sys : "", b, sp);
        i = sys != NULL;
    } else if (c->format == CLF_CHAT_GEMMA && sys) { /* the system text opens the first turn */
        size_t k = strlen(sys);
        if (!(prefix = malloc(k + 3))) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        memcpy(prefix, sys, k);
        memcpy(prefix + k, "\n\n", 3);
        i = 1;
    } else if (c->default_system && !sys) {
        char *d = strndup(c->default_system, c->default_system_len);
        st = d ? turn(c, "system", "", d, b, sp) : clf_fail(CLF_ERR_MEMORY, "out of host memory");
        free(d);
    }
    for (int first = i; st == CLF_OK && i < n; i++)
        st = turn(c, msgs[i].role, i == first && prefix ? prefix : "", msgs[i].content, b, sp);
    free(prefix);
    if (st == CLF_OK && with_reply) st = put_reply_start(c, b);
    if (st == CLF_OK && !b->p) st = put(b, "", 0); /* an empty text is "" */
    return st;
}

clf_status clf_chat_render(const clf_chat *c, const clf_chat_msg *msgs, int n, int reply_start, char **buf,
                           size_t *len) {
    clf_buf b = {0};
    clf_status st = render(c, msgs, n, reply_start, &b, NULL);
    if (st != CLF_OK) clf_buf_free(&b);
    *buf = b.p;
    *len = b.n;
    return st;
}

clf_status clf_chat_tokenize(const clf_chat *c, const clf_tokenizer *t, const clf_chat_msg *msgs, int n,
                             int reply_start, int add_special, int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    clf_buf b = {0};
    spans sp = {0};
    clf_status st = render(c, msgs, n, reply_start, &b, &sp);
    if (st == CLF_OK) st = clf_tokenize_plain(t, b.p, b.n, add_special, sp.v, sp.n, ids, n_ids);
    clf_buf_free(&b);
    free(sp.v);
    return st;
}

clf_status clf_chat_tokenize_next(const clf_chat *c, const clf_tokenizer *t, const char *role, const char *content,
                                  int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    clf_buf b = {0};
    spans sp = {0};
    clf_status st = puts_(&b, clf_chat_turn_end(c));
    if (st == CLF_OK) st = turn(c, role, "", content, &b, &sp);
    if (st == CLF_OK) st = put_reply_start(c, &b);
    if (st == CLF_OK) st = clf_tokenize_plain(t, b.p, b.n, 0, sp.v, sp.n, ids, n_ids);
    clf_buf_free(&b);
    free(sp.v);
    return st;
}

const char *clf_chat_turn_end(const clf_chat *c) {
    switch (c->format) {
    case CLF_CHAT_CHATML: return "<|im_end|>\n";
    case CLF_CHAT_LLAMA3: return "<|eot_id|>";
    case CLF_CHAT_ZEPHYR: return "</s>\n";
    case CLF_CHAT_GEMMA: return "<end_of_turn>\n";
    case CLF_CHAT_PHI3: return "<|end|>\n";
    }
    return "";
}

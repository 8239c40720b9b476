#include "chat.h"
#include "buf.h"
#include "jinja.h"

#include <jansson.h>
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

/* Today as strftime_now("%d %b %Y") gives it (English month names,
 * whatever the locale). */
static void today(clf_chat *c) {
    static const char *const MONTH[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm) && tm.tm_mon >= 0 && tm.tm_mon < 12)
        snprintf(c->date, sizeof c->date, "%02d %s %d", tm.tm_mday, MONTH[tm.tm_mon], tm.tm_year + 1900);
    else
        snprintf(c->date, sizeof c->date, "26 Jul 2024"); /* the templates' own fallback */
}

/* Llama 3.1+'s dated system turn: the knowledge date as the template writes
 * it; today where the template calls strftime_now, else its date_string
 * default. */
static void find_dated_system(const char *tmpl, clf_chat *c) {
    if (!copy_literal(tmpl, "Cutting Knowledge Date: ", c->knowledge, sizeof c->knowledge)) return;
    if (!strstr(tmpl, "strftime_now") && (copy_literal(tmpl, "set date_string = \"", c->date, sizeof c->date) ||
                                          copy_literal(tmpl, "set date_string = '", c->date, sizeof c->date)))
        return;
    c->date_today = 1;
    today(c);
}

/* The hand-written format a template's text names; CLF_CHAT_JINJA when none. */
static void recognise(const char *tmpl, clf_chat *c) {
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
        c->format = CLF_CHAT_JINJA;
    }
}

static clf_status jinja_messages(const clf_chat_msg *msgs, int n, char **json);
static clf_status find_turn_end(clf_chat *c);

/* The vocabulary's BOS and EOS texts for the template, and whether the
 * tokenizer adds BOS itself. */
static void special_tokens(const clf_tokenizer *t, clf_chat *c) {
    int32_t ids[2] = {clf_tokenizer_bos(t), clf_tokenizer_eos(t)};
    char *out[2] = {c->bos, c->eos};
    for (int i = 0; i < 2; i++) {
        size_t n = 0;
        const char *p = ids[i] >= 0 ? clf_token_piece(t, ids[i], &n) : NULL;
        out[i][0] = 0;
        if (p && n < sizeof c->bos) memcpy(out[i], p, n), out[i][n] = 0;
    }
    c->strip_bos = clf_tokenizer_add_bos(t) && ids[0] >= 0;
}

/* clf_chat_init, with the vocabulary's special tokens where t is given
 * (before the turn end is found: the template sees them), and the parse
 * kept in c->parsed where `keep` (else freed before returning). The
 * template is parsed once here either way: the turn end's two renderings
 * run that parse. */
static clf_status init(const char *tmpl, const clf_tokenizer *t, int keep, clf_chat *c) {
    memset(c, 0, sizeof *c);
    recognise(tmpl, c);
    if (t) special_tokens(t, c);
    if (!tmpl) return CLF_OK;
    /* the template runs: it must parse (CLF_ERR_FORMAT with the engine's message) */
    clf_jinja_template *p;
    CLF_TRY(clf_jinja_parse(tmpl, strlen(tmpl), NULL, &p));
    c->jinja = tmpl;
    c->parsed = p;
    if (c->format == CLF_CHAT_JINJA) find_turn_end(c);
    if (!keep) {
        clf_jinja_free(p);
        c->parsed = NULL;
    }
    return CLF_OK;
}

clf_status clf_chat_init(const char *tmpl, clf_chat *c) { return init(tmpl, NULL, 0, c); }

clf_status clf_chat_init_with(const clf_tokenizer *t, const char *tmpl, clf_chat *c) { return init(tmpl, t, 0, c); }

/* clf_chat_init_model, the parse kept where `keep`. */
static clf_status init_model(const clf_tokenizer *t, int keep, clf_chat *c) {
    const char *tmpl = clf_tokenizer_chat_template(t);
    if (tmpl) {
        clf_status st = init(tmpl, t, keep, c);
        if (st == CLF_OK) return st;
        /* a template the engine cannot parse: the format it names, by hand, if any */
        memset(c, 0, sizeof *c);
        recognise(tmpl, c);
        if (c->format == CLF_CHAT_JINJA) return st;
        special_tokens(t, c);
        return CLF_OK;
    }
    /* the turn markers of a format, as special tokens of the vocabulary */
    static const struct { const char *tok[2]; const char *tmpl; } BY_TOKENS[] = {
        {{"<start_of_turn>", "<end_of_turn>"}, "<start_of_turn>"},
        {{"<|start_header_id|>", "<|eot_id|>"}, "<|start_header_id|>"},
        {{"<|user|>", "<|end|>"}, "<|user|><|end|>"},
    };
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof BY_TOKENS / sizeof BY_TOKENS[0]; i++)
        if (clf_tokenizer_find(t, BY_TOKENS[i].tok[0]) >= 0 && clf_tokenizer_find(t, BY_TOKENS[i].tok[1]) >= 0) {
            recognise(BY_TOKENS[i].tmpl, c); /* a format by hand: no template to run */
            return CLF_OK;
        }
    recognise(NULL, c);
    return CLF_OK;
}

clf_status clf_chat_init_model(const clf_tokenizer *t, clf_chat *c) { return init_model(t, 0, c); }

clf_status clf_chat_keep(const clf_tokenizer *t, const char *tmpl, clf_chat *c) {
    if (!t && !tmpl) {
        memset(c, 0, sizeof *c);
        return clf_fail(CLF_ERR_ARG, "clf_chat_keep: neither a vocabulary nor a template");
    }
    return tmpl ? init(tmpl, t, 1, c) : init_model(t, 1, c);
}

void clf_chat_release(clf_chat *c) {
    if (!c) return;
    clf_jinja_free((clf_jinja_template *)c->parsed); /* the keeper's own: const for its borrowers */
    c->parsed = NULL;
}

void clf_chat_copy(const clf_chat *kept, clf_chat *c) {
    *c = *kept;
    if (c->date_today) today(c); /* the date of this request, not of the load */
}

const char *clf_chat_format_name(clf_chat_format f) {
    switch (f) {
    case CLF_CHAT_CHATML: return "ChatML";
    case CLF_CHAT_LLAMA3: return "Llama-3";
    case CLF_CHAT_ZEPHYR: return "Zephyr";
    case CLF_CHAT_GEMMA: return "Gemma";
    case CLF_CHAT_PHI3: return "Phi-3";
    case CLF_CHAT_JINJA: return "Jinja";
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
    if (c->format == CLF_CHAT_JINJA)
        return clf_fail(CLF_ERR_ARG, "the model's chat template has no turn format clinfer writes by hand");
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
    case CLF_CHAT_JINJA: break;
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
    case CLF_CHAT_JINJA: break;
    }
    return clf_fail(CLF_ERR_ARG, "the model's chat template has no turn format clinfer writes by hand");
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

/* ---- the template run -------------------------------------------------- */

static clf_status jinja_messages(const clf_chat_msg *msgs, int n, char **json) {
    *json = NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") && strcmp(msgs[i].role, "assistant") &&
            strcmp(msgs[i].role, "tool")) {
            json_decref(a);
            return clf_fail(CLF_ERR_ARG, "the chat role '%.32s' is not system, user, assistant or tool", msgs[i].role);
        }
        /* content NULL or not UTF-8 packs to NULL: refused, never a message silently left out */
        json_t *o = json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content);
        if (!o) {
            json_decref(a);
            return clf_fail(CLF_ERR_ARG, "message %d is not UTF-8 text", i);
        }
        if (json_array_append_new(a, o)) {
            json_decref(a);
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
    }
    *json = a ? json_dumps(a, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(a);
    return *json ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
}

static clf_status jinja_render(const clf_chat *c, const clf_chat_msg *msgs, int n, int reply_start, char **buf,
                               size_t *len) {
    char *json;
    CLF_TRY(jinja_messages(msgs, n, &json));
    clf_status st = clf_chat_jinja_render(c, json, NULL, reply_start, buf, len);
    free(json);
    return st;
}

/* What the template writes after an answer and before the next message:
 * renders [user U] with the generation prompt, and [user U, assistant A,
 * role R] (with it where `reply`); where the second starts with the first
 * and then A, the rest is *delta (malloc'd; the answer's turn end, R's
 * turn, the next reply's header). CLF_ERR_FORMAT where the template does
 * not write conversations that way. */
static const char U_MARK[] = "clinfer-user-9f3a", A_MARK[] = "clinfer-answer-9f3a";
static clf_status jinja_delta(const clf_chat *c, const char *role, const char *content, int reply, char **delta,
                              size_t *n) {
    *delta = NULL;
    *n = 0;
    clf_chat_msg two[3] = {{"user", U_MARK}, {"assistant", A_MARK}, {role, content}};
    char *r1 = NULL, *r2 = NULL;
    size_t n1, n2, na = strlen(A_MARK);
    clf_status st = jinja_render(c, two, 1, 1, &r1, &n1);
    if (st == CLF_OK) st = jinja_render(c, two, 3, reply, &r2, &n2);
    if (st == CLF_OK && (n2 < n1 + na || memcmp(r1, r2, n1) || memcmp(r2 + n1, A_MARK, na)))
        st = clf_fail(CLF_ERR_FORMAT, "the chat template does not continue a conversation after an answer");
    if (st == CLF_OK) {
        *n = n2 - n1 - na;
        memmove(r2, r2 + n1 + na, *n + 1);
        *delta = r2;
        r2 = NULL;
    }
    free(r1);
    free(r2);
    return st;
}

/* CLF_CHAT_JINJA's turn end: [user U, assistant A] rendered whole is
 * [user U] with the generation prompt, A, then the turn's end. */
static clf_status find_turn_end(clf_chat *c) {
    clf_chat_msg two[2] = {{"user", U_MARK}, {"assistant", A_MARK}};
    char *r1 = NULL, *r2 = NULL;
    size_t n1, n2, na = strlen(A_MARK);
    c->turn_end_text[0] = 0;
    clf_status st = jinja_render(c, two, 1, 1, &r1, &n1);
    if (st == CLF_OK) st = jinja_render(c, two, 2, 0, &r2, &n2);
    if (st == CLF_OK && n2 >= n1 + na && !memcmp(r1, r2, n1) && !memcmp(r2 + n1, A_MARK, na) &&
        n2 - n1 - na < sizeof c->turn_end_text)
        memcpy(c->turn_end_text, r2 + n1 + na, n2 - n1 - na + 1);
    free(r1);
    free(r2);
    return CLF_OK; /* "" where it cannot be told */
}

clf_status clf_chat_render(const clf_chat *c, const clf_chat_msg *msgs, int n, int reply_start, char **buf,
                           size_t *len) {
    if (c->jinja) {
        if (n < 0 || (n > 0 && !msgs)) return clf_fail(CLF_ERR_ARG, "no messages");
        return jinja_render(c, msgs, n, reply_start, buf, len);
    }
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
    if (c->jinja) { /* the rendering, its messages' texts found in it as text */
        char *text;
        size_t len;
        CLF_TRY(clf_chat_render(c, msgs, n, reply_start, &text, &len));
        return clf_chat_tokenize_rendered(t, text, len, n > 0 ? (const char *)&msgs[0].content : NULL, sizeof *msgs, n,
                                          add_special, ids, n_ids);
    }
    clf_buf b = {0};
    spans sp = {0};
    clf_status st = render(c, msgs, n, reply_start, &b, &sp);
    if (st == CLF_OK) st = clf_tokenize_plain(t, b.p, b.n, add_special, sp.v, sp.n, ids, n_ids);
    clf_buf_free(&b);
    free(sp.v);
    return st;
}

clf_status clf_chat_tokenize_rendered(const clf_tokenizer *t, char *text, size_t len, const char *first, size_t stride,
                                      int n, int add_special, int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    const char **texts = malloc((size_t)(n > 0 ? n : 1) * sizeof *texts);
    clf_span *sv = NULL;
    int nsv = 0;
    clf_status st = texts ? CLF_OK : clf_fail(CLF_ERR_MEMORY, "out of host memory");
    for (int i = 0; st == CLF_OK && i < n; i++) memcpy(&texts[i], first + (size_t)i * stride, sizeof *texts);
    if (st == CLF_OK) st = clf_chat_find_spans(text, len, texts, n, &sv, &nsv);
    if (st == CLF_OK) st = clf_tokenize_plain(t, text, len, add_special, sv, nsv, ids, n_ids);
    free(texts);
    free(sv);
    free(text);
    return st;
}

clf_status clf_chat_tokenize_next(const clf_chat *c, const clf_tokenizer *t, const char *role, const char *content,
                                  int32_t **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (c->jinja) {
        char *d;
        size_t n;
        clf_status st = jinja_delta(c, role, content, 1, &d, &n);
        if (st == CLF_OK) return clf_chat_tokenize_rendered(t, d, n, (const char *)&content, sizeof content, 1, 0, ids, n_ids);
        if (c->format == CLF_CHAT_JINJA) return st;
        /* a known format whose template does not continue that way: by hand */
    }
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
    case CLF_CHAT_JINJA: return c->turn_end_text;
    }
    return "";
}

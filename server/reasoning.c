/* The reasoning splitter (reasoning.h): a small state machine over a
 * held-back buffer. Each feed appends to what is held, then decides as much
 * of it as it can: text that cannot be the start of the tag the state waits
 * for goes out, a possible tag's beginning stays held until the next piece
 * (or the end) says what it is. */
#include "reasoning.h"

#include <stdlib.h>
#include <string.h>

/* the states of srv_think.state */
enum {
    ST_START,   /* tags: the reply's beginning, which may open <think> */
    ST_THINK,   /* tags: inside <think> */
    ST_AFTER,   /* tags: after </think>, dropping blanks before the answer */
    ST_CONTENT, /* the answer: everything goes to content */
    ST_HEADER,  /* Harmony: a message's header, up to <|message|> */
    ST_BODY_R,  /* Harmony: the analysis channel's message */
    ST_BODY_C,  /* Harmony: another channel's message (final, commentary) */
    ST_BODY_T,  /* Harmony: a message to a recipient (a tool call): header, body and end to content, for the tool parser */
    ST_BODY_D,  /* Harmony: a message to a recipient that is no call here (no tools offered, or not a function):
                 * dropped, as llama.cpp drops an "unsolicited" call */
    ST_F_START, /* functionary v3.2: the reply's start, which may be "all\n" */
    ST_F_TEXT,  /* functionary v3.2: to content, each ">>>all\n" taken out */
};

/* The longest Harmony header held waiting for its <|message|> (bytes): a
 * recipient's header is ~100; a model that never writes <|message|> has
 * what is held flushed to content, and the rest of its reply with it. */
enum { MAX_HEADER = 512 };

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
static const char F_ALL[] = "all\n", F_MORE_ALL[] = ">>>all\n";
static const char H_MESSAGE[] = "<|message|>", H_CHANNEL[] = "<|channel|>";
/* what ends a Harmony message */
static const char *const H_ENDS[] = {"<|end|>", "<|return|>", "<|call|>"};

int srv_reasoning_format_parse(const char *name, srv_reasoning_format *out) {
    if (!strcmp(name, "auto")) *out = SRV_REASONING_AUTO;
    else if (!strcmp(name, "none")) *out = SRV_REASONING_NONE;
    else if (!strcmp(name, "deepseek") || !strcmp(name, "deepseek-legacy")) *out = SRV_REASONING_DEEPSEEK;
    else return -1;
    return 0;
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

srv_think_syntax srv_think_detect(const char *prompt, size_t n, int *open) {
    *open = 0;
    while (n && blank(prompt[n - 1])) n--; /* "<think>\n" ends Qwen3's and R1's generation prompts */
    size_t k = sizeof OPEN - 1;
    if (n >= k && !memcmp(prompt + n - k, OPEN, k)) {
        *open = 1;
        return SRV_THINK_TAGS;
    }
    static const char HARMONY[] = "<|start|>assistant";
    k = sizeof HARMONY - 1;
    if (n >= k && !memcmp(prompt + n - k, HARMONY, k)) return SRV_THINK_HARMONY;
    if (n >= 3 && !memcmp(prompt + n - 3, ">>>", 3)) return SRV_THINK_FUNCTIONARY;
    return SRV_THINK_TAGS;
}

void srv_think_init(srv_think *t, srv_think_syntax syntax, int open) {
    *t = (srv_think){.syntax = syntax};
    if (syntax == SRV_THINK_OFF) t->state = ST_CONTENT;
    else if (syntax == SRV_THINK_HARMONY) t->state = ST_HEADER;
    else if (syntax == SRV_THINK_FUNCTIONARY) t->state = ST_F_START;
    else t->state = open ? ST_THINK : ST_START;
}

void srv_think_free(srv_think *t) { srv_buf_free(&t->hold); }

int srv_think_in_reasoning(const srv_think *t) { return t->state == ST_THINK || t->state == ST_BODY_R; }

/* The longest end of s[0, n) that is a proper beginning of tag: bytes that
 * must stay held. */
static size_t partial(const char *s, size_t n, const char *tag) {
    size_t m = strlen(tag);
    for (size_t k = n < m - 1 ? n : m - 1; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *tag) {
    size_t m = strlen(tag);
    for (size_t i = 0; i + m <= n; i++)
        if (s[i] == tag[0] && !memcmp(s + i, tag, m)) return s + i;
    return NULL;
}

/* Drops the first k held bytes. */
static void consume(srv_think *t, size_t k) {
    if (!k) return; /* also: nothing held yet (hold.p NULL) */
    memmove(t->hold.p, t->hold.p + k, t->hold.n - k);
    t->hold.n -= k;
    t->hold.p[t->hold.n] = 0;
}

/* Reasoning text s[0, n): its leading blanks dropped until some was
 * written; trailing blanks are the caller's to hold. */
static int put_reasoning(srv_think *t, const char *s, size_t n, srv_buf *out) {
    if (t->started != 1)
        while (n && blank(*s)) s++, n--;
    if (!n) return 0;
    if (t->started == 2 && srv_buf_add(out, "\n", 1)) return -1; /* between two analysis messages */
    t->n_reasoning += t->started == 2;
    t->started = 1;
    t->n_reasoning += n;
    return srv_buf_add(out, s, n);
}

/* One step on what is held: 1 when it changed state (step again), 0 when
 * it waits for more text, -1 when memory ran out. */
static int step(srv_think *t, int final, srv_buf *reasoning, srv_buf *content) {
    char *h = t->hold.p ? t->hold.p : "";
    size_t n = t->hold.n;
    switch (t->state) {
    case ST_CONTENT:
        if (n && srv_buf_add(content, h, n)) return -1;
        if (n) consume(t, n);
        return 0;
    case ST_START: { /* "<think>" after blanks opens the reasoning; anything else is the answer */
        size_t b = 0, k = sizeof OPEN - 1;
        while (b < n && blank(h[b])) b++;
        if (n - b >= k && !memcmp(h + b, OPEN, k)) {
            consume(t, b + k);
            t->state = ST_THINK;
            return 1;
        }
        if (!final && n - b < k && !memcmp(h + b, OPEN, n - b)) return 0; /* blanks, or a beginning of <think> */
        t->state = ST_CONTENT;
        return 1;
    }
    case ST_THINK: {
        const char *at = find(h, n, CLOSE);
        size_t upto = at ? (size_t)(at - h) : final ? n : n - partial(h, n, CLOSE);
        size_t keep = upto;
        while (keep && blank(h[keep - 1])) keep--; /* blanks at its end: held until text follows */
        if (put_reasoning(t, h, keep, reasoning)) return -1;
        if (at) {
            consume(t, upto + sizeof CLOSE - 1);
            t->state = ST_AFTER;
            return 1;
        }
        consume(t, final ? n : keep);
        return 0;
    }
    case ST_F_START: { /* "all\n" opens text (gone); anything else (a call's recipient) is the answer as it is */
        size_t k = sizeof F_ALL - 1;
        if (n >= k && !memcmp(h, F_ALL, k)) consume(t, k), t->f_text = 1;
        else if (!final && n < k && !memcmp(h, F_ALL, n)) return 0; /* a beginning of it */
        t->state = ST_F_TEXT;
        return 1;
    }
    case ST_F_TEXT: { /* the text up to a ">>>all\n" (gone), a beginning of one held */
        const char *at = find(h, n, F_MORE_ALL);
        size_t upto = at ? (size_t)(at - h) : final ? n : n - partial(h, n, F_MORE_ALL);
        if (upto && srv_buf_add(content, h, upto)) return -1;
        consume(t, at ? upto + sizeof F_MORE_ALL - 1 : upto);
        return at != NULL;
    }
    case ST_AFTER: { /* the blanks between </think> and the answer go */
        size_t b = 0;
        while (b < n && blank(h[b])) b++;
        consume(t, b);
        if (b == n) return 0;
        t->state = ST_CONTENT;
        return 1;
    }
    case ST_HEADER: { /* "<|start|>assistant<|channel|>NAME<|message|>": which channel follows */
        const char *at = find(h, n < MAX_HEADER ? n : MAX_HEADER, H_MESSAGE);
        if (!at) { /* a reply that does not open with a header is plain text; so is a header that never closes */
            if (final || (n >= 1 && h[0] != '<') || (n >= 2 && h[1] != '|') || n >= MAX_HEADER) t->state = ST_CONTENT;
            return t->state == ST_CONTENT;
        }
        size_t hn = (size_t)(at - h);
        const char *ch = find(h, hn, H_CHANNEL), *to = find(h, hn, " to=");
        int analysis = ch && !strncmp(ch + sizeof H_CHANNEL - 1, "analysis", 8);
        size_t k = hn + sizeof H_MESSAGE - 1;
        /* a recipient: a function's (a call, where tools were offered), or another (a built-in tool's, as
         * browser.search; " to=assistant", a stray one gpt-oss writes, is none): llama.cpp's unsolicited calls */
        int call = find(h, hn, "to=functions.") != NULL && !t->no_tools;
        int dropped = !call && (find(h, hn, "to=functions.") || (to && strncmp(to + 4, "assistant", 9)));
        if (call && srv_buf_add(content, h, k)) return -1; /* the header as the model wrote it */
        consume(t, k);
        t->state = call ? ST_BODY_T : dropped ? ST_BODY_D : analysis ? ST_BODY_R : ST_BODY_C;
        return 1;
    }
    case ST_BODY_R:
    case ST_BODY_C:
    case ST_BODY_T:
    case ST_BODY_D: {
        const char *end = NULL;
        size_t tag = 0, hold = 0;
        for (size_t i = 0; i < sizeof H_ENDS / sizeof *H_ENDS; i++) {
            const char *at = find(h, n, H_ENDS[i]);
            if (at && (!end || at < end)) end = at, tag = strlen(H_ENDS[i]);
            size_t p = partial(h, n, H_ENDS[i]);
            if (p > hold) hold = p;
        }
        size_t upto = end ? (size_t)(end - h) : final ? n : n - hold;
        if (t->state == ST_BODY_R) {
            size_t keep = upto;
            while (keep && blank(h[keep - 1])) keep--;
            if (put_reasoning(t, h, keep, reasoning)) return -1;
            if (!end) {
                consume(t, final ? n : keep);
                return 0;
            }
            if (t->started) t->started = 2; /* a next analysis message starts on a line of its own */
        } else if (t->state != ST_BODY_D && upto && srv_buf_add(content, h, upto)) {
            return -1;
        }
        if (!end) {
            consume(t, upto);
            return 0;
        }
        if (t->state == ST_BODY_T && srv_buf_add(content, end, tag)) return -1; /* its <|call|> */
        consume(t, upto + tag);
        t->state = ST_HEADER;
        return 1;
    }
    }
    return 0;
}

int srv_think_feed(srv_think *t, const char *text, size_t n, int final, srv_buf *reasoning, srv_buf *content) {
    if (n && srv_buf_add(&t->hold, text, n)) return -1;
    int rc;
    while ((rc = step(t, final, reasoning, content)) > 0) {}
    return rc;
}

clinfer_status srv_think_tools_parse(int f_text, const clinfer_tools *tools, const char *text, size_t n,
                                     int final, clinfer_tool_reply **out) {
    if (!f_text) return clinfer_tools_parse(tools, text, n, final, out);
    /* the parser reads the reply as the model wrote it, "all\n" first (text: calls only after ">>>"), and its
     * content, a prefix of that, loses those bytes again (a copy: the parse reads all of the text anyway) */
    const size_t k = sizeof F_ALL - 1;
    char *s = malloc(k + n + 1);
    if (!s) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    memcpy(s, F_ALL, k);
    if (n) memcpy(s + k, text, n);
    s[k + n] = 0;
    clinfer_status st = clinfer_tools_parse(tools, s, k + n, final, out);
    free(s);
    if (st == CLINFER_OK) (*out)->content_len = (*out)->content_len > k ? (*out)->content_len - k : 0;
    return st;
}

/* ---- the reasoning budget ------------------------------------------------ */

/* the states of srv_budget.state */
enum { B_COUNTING, B_FORCING, B_DONE };

const char *srv_budget_close_text(srv_think_syntax syntax) {
    switch (syntax) {
    case SRV_THINK_TAGS: return "</think>\n\n";
    case SRV_THINK_HARMONY: return "<|end|><|start|>assistant<|channel|>final<|message|>";
    case SRV_THINK_FUNCTIONARY:
    case SRV_THINK_OFF: break;
    }
    return NULL;
}

int srv_budget_init_tokens(srv_budget *b, srv_think_syntax syntax, int open, int budget, const int32_t *close,
                           int n_close) {
    *b = (srv_budget){.budget = budget, .n_close = n_close};
    srv_think_init(&b->think, syntax, open);
    /* never forces: unlimited (< 0), no syntax, no close tokens */
    b->state = budget < 0 || syntax == SRV_THINK_OFF || n_close <= 0 ? B_DONE : B_COUNTING;
    if (n_close > 0) {
        if (!(b->close = malloc((size_t)n_close * sizeof *close))) return -1;
        memcpy(b->close, close, (size_t)n_close * sizeof *close);
    }
    return 0;
}

clinfer_status srv_budget_init(srv_budget *b, const clinfer_model *m, srv_think_syntax syntax, int open, int budget) {
    const char *text = srv_budget_close_text(syntax);
    int32_t *ids = NULL;
    int n = 0;
    *b = (srv_budget){.state = B_DONE};
    if (text) {
        clinfer_status st = clinfer_tokenize(m, text, strlen(text), 0, 1, &ids, &n);
        if (st != CLINFER_OK) return st;
    }
    int rc = srv_budget_init_tokens(b, syntax, open, budget, ids, n);
    clinfer_free(ids);
    return rc ? clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory") : CLINFER_OK;
}

int srv_budget_next(srv_budget *b, int32_t *token) {
    /* the budget spent inside a thought: the close starts */
    if (b->state == B_COUNTING && b->n_thought >= b->budget && srv_think_in_reasoning(&b->think)) {
        b->state = B_FORCING;
        b->at = 0;
    }
    if (b->state != B_FORCING) return 0;
    *token = b->close[b->at++];
    if (b->at == b->n_close) b->state = B_DONE; /* once a reply */
    return 1;
}

int srv_budget_forcing(const srv_budget *b) { return b->state == B_FORCING; }

int srv_budget_push(srv_budget *b, const char *text, size_t n) {
    const int before = srv_think_in_reasoning(&b->think);
    b->scratch_r.n = b->scratch_c.n = 0; /* what the splitter decides is not wanted here */
    if (srv_think_feed(&b->think, text, n, 0, &b->scratch_r, &b->scratch_c)) return -1;
    const int after = srv_think_in_reasoning(&b->think);
    if (b->state == B_COUNTING && before && after) b->n_thought++;
    /* tags: a thought the model closed itself is the only one */
    if (b->state == B_COUNTING && before && !after && b->think.syntax == SRV_THINK_TAGS) b->state = B_DONE;
    return 0;
}

void srv_budget_free(srv_budget *b) {
    srv_think_free(&b->think);
    srv_buf_free(&b->scratch_r);
    srv_buf_free(&b->scratch_c);
    free(b->close);
    b->close = NULL;
}

int srv_budget_take(srv_budget *b, clinfer_sampler *smp, clinfer_detokenizer *d, clinfer_next *out) {
    int32_t tok;
    if (!srv_budget_next(b, &tok)) return 0;
    *out = (clinfer_next){.token = tok};
    /* its text as the detokenizer gives a sampled token's, then recorded
     * as one (repetition penalties see it; a grammar waiting for the end
     * of the thought is not on the sampler yet) */
    if (clinfer_detokenizer_push(d, tok, &out->piece, &out->len) != CLINFER_OK ||
        clinfer_sampler_accept(smp, tok) != CLINFER_OK)
        return -1;
    return 1;
}

/* A sequence's state in a file (clinfer_session_save_seq,
 * clinfer_session_load_seq). The file, integers little-endian as the host
 * writes them (another byte order fails the magic's check):
 *
 *   magic    "CLFSEQ\n\0", u32 version
 *   model    u64 digest (clinfer_model.digest: the GGUF header's FNV-1a
 *            and the file's size), i32 n_vocab
 *   geometry clf_seq_geom: i32 kv_type, n_layer, n_layer_swa, n_kv_head,
 *            head_dim, block, window
 *   tokens   i32 n_tokens, then n_tokens i32 ids
 *   KV       models/llama_state.h: per pool a u32 block count, then each
 *            block's i32 index and used slots and its K and V bytes
 *   check    u64 XXH3-64 of every byte before it, and nothing after
 *
 * What is read is checked before it is used: the header against this
 * session (another model, geometry or type is refused, saying which),
 * every count against the session's bounds; the checksum at the end
 * catches an altered file (the sequence is emptied then). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "api.h"
#include "llama_state.h"

#define MAGIC "CLFSEQ\n"  /* 8 bytes with its NUL */
#define VERSION 1u

typedef struct head {
    char magic[8];
    uint32_t version;
    uint32_t pad;
    uint64_t digest;
    int32_t n_vocab;
    clf_seq_geom geom;
    int32_t n_tokens;
    int32_t pad2; /* no padding the compiler would leave unset */
} head;

/* A stream with the running checksum: a file, or memory (f NULL: a
 * growable buffer written, or a caller's buffer read). */
typedef struct stream {
    FILE *f;
    XXH3_state_t *h;
    const char *path; /* what messages call it */
    unsigned char *mem;
    size_t cap, len, pos; /* memory: bytes allocated, held, read */
    size_t bytes;         /* written or read so far */
} stream;

static clf_status raw_put(stream *s, const void *p, size_t n) {
    if (s->f) {
        if (n && fwrite(p, 1, n, s->f) != n) return clf_fail(CLF_ERR_IO, "writing %s: %s", s->path, strerror(errno));
    } else if (n) {
        if (s->len + n > s->cap) {
            size_t cap = s->cap ? s->cap : 1 << 16;
            while (cap < s->len + n) cap *= 2;
            unsigned char *m = realloc(s->mem, cap);
            if (!m) return clf_fail(CLF_ERR_MEMORY, "out of host memory (%zu bytes of a sequence's state)", cap);
            s->mem = m, s->cap = cap;
        }
        memcpy(s->mem + s->len, p, n);
        s->len += n;
    }
    s->bytes += n;
    return CLF_OK;
}

static clf_status put(void *user, const void *p, size_t n) {
    stream *s = user;
    CLF_TRY(raw_put(s, p, n));
    XXH3_64bits_update(s->h, p, n);
    return CLF_OK;
}

static clf_status raw_get(stream *s, void *p, size_t n) {
    if (s->f) {
        if (n && fread(p, 1, n, s->f) != n)
            return ferror(s->f) ? clf_fail(CLF_ERR_IO, "reading %s: %s", s->path, strerror(errno))
                                : clf_fail(CLF_ERR_FORMAT, "%s is truncated (%zu bytes read)", s->path, s->bytes);
    } else if (n) {
        if (n > s->len - s->pos)
            return clf_fail(CLF_ERR_FORMAT, "%s is truncated (%zu bytes read)", s->path, s->bytes);
        memcpy(p, s->mem + s->pos, n);
        s->pos += n;
    }
    s->bytes += n;
    return CLF_OK;
}

static clf_status get(void *user, void *p, size_t n) {
    stream *s = user;
    CLF_TRY(raw_get(s, p, n));
    XXH3_64bits_update(s->h, p, n);
    return CLF_OK;
}

/* Nothing left to read. */
static int at_end(stream *s) {
    unsigned char extra;
    return s->f ? fread(&extra, 1, 1, s->f) == 0 : s->pos == s->len;
}

static clf_status geom_of(clinfer_session *s, clf_seq_geom *g) {
    if (s->m->stages.n > 1) return clf_fail(CLF_ERR_ARG, "a sequence's state cannot be saved or restored over a split");
    return clf_llama_seq_geom(s->c, g);
}

/* A save's arguments: the sequence, and its length as the tokens given. */
static clf_status save_args(const clinfer_session *s, int seq, const int32_t *tokens, int n_tokens) {
    if (seq < 0 || seq >= s->c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d of %d", seq, s->c->n_seq);
    const int len = clf_llama_seq_len(s->c, seq);
    if (n_tokens != len || (n_tokens > 0 && !tokens))
        return clf_fail(CLF_ERR_ARG, "saving sequence %d: it holds %d tokens, %d were given", seq, len, n_tokens);
    return CLF_OK;
}

/* The whole state into st: header, tokens, KV, checksum. */
static clf_status save_to(clinfer_session *s, int seq, const int32_t *tokens, int n_tokens, stream *st) {
    CLF_TRY(save_args(s, seq, tokens, n_tokens));
    head h = {.version = VERSION, .digest = s->m->digest, .n_vocab = s->m->info.n_vocab, .n_tokens = n_tokens};
    memcpy(h.magic, MAGIC, sizeof h.magic);
    CLF_TRY(geom_of(s, &h.geom));
    if (!(st->h = XXH3_createState())) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    XXH3_64bits_reset(st->h);
    clf_status rc = put(st, &h, sizeof h);
    if (rc == CLF_OK) rc = put(st, tokens, (size_t)n_tokens * sizeof *tokens);
    if (rc == CLF_OK) {
        /* the device's queue is the model's: the reads take their turn */
        pthread_mutex_lock(&s->m->device_lock);
        rc = clf_llama_seq_save(s->c, seq, put, st, NULL);
        pthread_mutex_unlock(&s->m->device_lock);
    }
    if (rc == CLF_OK) {
        const uint64_t sum = XXH3_64bits_digest(st->h);
        rc = raw_put(st, &sum, sizeof sum);
    }
    return rc;
}

clinfer_status clinfer_session_save_seq(clinfer_session *s, int seq, const int32_t *tokens, int n_tokens,
                                        const char *path, size_t *bytes) {
    API_NOT_NULL(s);
    API_NOT_NULL(path);
    /* written beside the file, then renamed over it: a reader never sees half */
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return (clinfer_status)clf_fail(CLF_ERR_ARG, "path too long: %s", path);
    stream st = {.path = path};
    clf_status rc = save_args(s, seq, tokens, n_tokens); /* before a file is made */
    if (rc == CLF_OK && !(st.f = fopen(tmp, "wb"))) rc = clf_fail(CLF_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    if (rc == CLF_OK) rc = save_to(s, seq, tokens, n_tokens, &st);
    if (st.f && fclose(st.f) != 0 && rc == CLF_OK) rc = clf_fail(CLF_ERR_IO, "writing %s: %s", tmp, strerror(errno));
    if (rc == CLF_OK && rename(tmp, path) != 0) rc = clf_fail(CLF_ERR_IO, "renaming %s: %s", tmp, strerror(errno));
    if (rc != CLF_OK && st.f) unlink(tmp);
    XXH3_freeState(st.h);
    if (rc == CLF_OK && bytes) *bytes = st.bytes;
    return (clinfer_status)rc;
}

clinfer_status clinfer_session_save_seq_buf(clinfer_session *s, int seq, const int32_t *tokens, int n_tokens,
                                            void **buf, size_t *bytes) {
    API_NOT_NULL(s);
    API_NOT_NULL(buf);
    API_NOT_NULL(bytes);
    *buf = NULL;
    *bytes = 0;
    stream st = {.path = "the state"};
    clf_status rc = save_to(s, seq, tokens, n_tokens, &st);
    XXH3_freeState(st.h);
    if (rc != CLF_OK) {
        free(st.mem);
        return (clinfer_status)rc;
    }
    *buf = st.mem;
    *bytes = st.len;
    return CLINFER_OK;
}

/* The header against the session: the same model, geometry and type. */
static clf_status check_head(const clinfer_session *s, const head *h, const clf_seq_geom *g, const char *path) {
    if (memcmp(h->magic, MAGIC, sizeof h->magic) != 0)
        return clf_fail(CLF_ERR_FORMAT, "%s is not a clinfer slot file", path);
    if (h->version != VERSION)
        return clf_fail(CLF_ERR_FORMAT, "%s is a slot file of version %u; this clinfer reads version %u", path,
                        h->version, VERSION);
    if (h->digest != s->m->digest || h->n_vocab != s->m->info.n_vocab)
        return clf_fail(CLF_ERR_FORMAT, "%s was saved from another model (digest %016llx, %d tokens of vocabulary; "
                        "this model's %016llx, %d)", path, (unsigned long long)h->digest, (int)h->n_vocab,
                        (unsigned long long)s->m->digest, s->m->info.n_vocab);
    const clf_seq_geom *f = &h->geom;
    if (f->kv_type != g->kv_type)
        return clf_fail(CLF_ERR_FORMAT, "%s holds a KV cache of type %s; this session's is %s", path,
                        f->kv_type >= 0 && f->kv_type < CLF_TYPE_COUNT ? clf_type_get((clf_type)f->kv_type)->name : "?",
                        clf_type_get((clf_type)g->kv_type)->name);
    if (memcmp(f, g, sizeof *g) != 0)
        return clf_fail(CLF_ERR_FORMAT, "%s holds another KV geometry (%d+%d layers x %d heads x %d, blocks of %d, "
                        "window %d; this session: %d+%d x %d x %d, %d, %d)", path, f->n_layer, f->n_layer_swa,
                        f->n_kv_head, f->head_dim, f->block, f->window, g->n_layer, g->n_layer_swa, g->n_kv_head,
                        g->head_dim, g->block, g->window);
    return CLF_OK;
}

/* The whole state from st into sequence seq. */
static clf_status load_from(clinfer_session *s, int seq, stream *st, int32_t *tokens, int cap, int *n_tokens) {
    if (seq < 0 || seq >= s->c->n_seq) return clf_fail(CLF_ERR_ARG, "sequence %d of %d", seq, s->c->n_seq);
    if (cap < 0 || (cap > 0 && !tokens)) return clf_fail(CLF_ERR_ARG, "tokens: %d ids at NULL", cap);
    clf_seq_geom g;
    CLF_TRY(geom_of(s, &g));
    if (!(st->h = XXH3_createState())) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    XXH3_64bits_reset(st->h);
    const char *path = st->path;
    head h;
    clf_status rc = get(st, &h, sizeof h);
    if (rc == CLF_OK) rc = check_head(s, &h, &g, path);
    if (rc == CLF_OK && (h.n_tokens < 0 || h.n_tokens > s->c->n_ctx))
        rc = clf_fail(h.n_tokens < 0 ? CLF_ERR_FORMAT : CLF_ERR_CONTEXT, "%s holds %d tokens; the session's sequences "
                      "hold %d", path, (int)h.n_tokens, s->c->n_ctx);
    if (rc == CLF_OK && h.n_tokens > cap)
        rc = clf_fail(CLF_ERR_ARG, "%s holds %d tokens; room was given for %d", path, (int)h.n_tokens, cap);
    if (rc == CLF_OK) rc = get(st, tokens, (size_t)h.n_tokens * sizeof *tokens);
    for (int i = 0; rc == CLF_OK && i < h.n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->info.n_vocab)
            rc = clf_fail(CLF_ERR_FORMAT, "%s: token %d is %d, out of the vocabulary", path, i, (int)tokens[i]);
    if (rc == CLF_OK) {
        pthread_mutex_lock(&s->m->device_lock);
        rc = clf_llama_seq_load(s->c, seq, h.n_tokens, get, st);
        if (rc == CLF_OK) {
            /* the checksum of all before it, then the end */
            uint64_t want = XXH3_64bits_digest(st->h), sum;
            if (raw_get(st, &sum, sizeof sum) != CLF_OK)
                rc = clf_fail(CLF_ERR_FORMAT, "%s is truncated (no checksum)", path);
            else if (sum != want)
                rc = clf_fail(CLF_ERR_FORMAT, "%s is damaged: its checksum does not match", path);
            else if (!at_end(st))
                rc = clf_fail(CLF_ERR_FORMAT, "%s has bytes after its end", path);
            if (rc != CLF_OK) clf_llama_seq_rewind(s->c, seq, 0);
        }
        pthread_mutex_unlock(&s->m->device_lock);
    }
    if (seq == 0) s->has_logits = 0;
    if (rc == CLF_OK) *n_tokens = h.n_tokens;
    return rc;
}

clinfer_status clinfer_session_load_seq(clinfer_session *s, int seq, const char *path, int32_t *tokens, int cap,
                                        int *n_tokens, size_t *bytes) {
    API_NOT_NULL(s);
    API_NOT_NULL(path);
    API_NOT_NULL(n_tokens);
    stream st = {.path = path};
    struct stat sb;
    clf_status rc = CLF_OK;
    /* opened without blocking (a FIFO would wait for a writer), then only a regular file read */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) rc = clf_fail(CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        rc = clf_fail(CLF_ERR_IO, "%s is not a regular file", path);
    else if (!(st.f = fdopen(fd, "rb")))
        rc = clf_fail(CLF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (fd >= 0 && !st.f) close(fd);
    if (rc == CLF_OK) rc = load_from(s, seq, &st, tokens, cap, n_tokens);
    if (st.f) fclose(st.f);
    XXH3_freeState(st.h);
    if (rc == CLF_OK && bytes) *bytes = st.bytes;
    return (clinfer_status)rc;
}

clinfer_status clinfer_session_load_seq_buf(clinfer_session *s, int seq, const void *buf, size_t bytes,
                                            int32_t *tokens, int cap, int *n_tokens) {
    API_NOT_NULL(s);
    API_NOT_NULL(n_tokens);
    if (!buf && bytes) return (clinfer_status)clf_fail(CLF_ERR_ARG, "%s: buf is NULL", __func__);
    stream st = {.path = "the state", .mem = (unsigned char *)buf, .len = bytes};
    clf_status rc = load_from(s, seq, &st, tokens, cap, n_tokens);
    XXH3_freeState(st.h);
    return (clinfer_status)rc;
}

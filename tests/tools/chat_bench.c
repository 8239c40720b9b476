/* What a chat template's rendering costs a request (bench/RESULTS.md,
 * issue 41 item 1: the template parsed once, at load):
 *
 *   chat_bench MODEL [TEMPLATE.jinja|-] [ROUNDS]
 *
 * MODEL: a path or a cache name, loaded for its vocabulary only; its own
 * template, or TEMPLATE.jinja's text (clinfer_model_set_chat_template, as
 * --chat-template-file; "-": the file's). Renders, ROUNDS times (default
 * 300), a 6-turn conversation offering two tools (system, user, an
 * assistant's call, the tool's result, the assistant's answer, user; the
 * generation prompt) through the public API as the server does for each
 * request (clinfer_tools_chat_apply; not where the format has no tool
 * calls), and the same turns without tools or calls (clinfer_chat_apply); prints each one's median, p10 and p90 µs a
 * rendering and the prompt's bytes, then one line of JSON. The public API
 * alone: the same source builds against any revision's library (the
 * before-and-after figures). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clinfer.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b) b[fread(b, 1, (size_t)n, f)] = 0;
    fclose(f);
    return b;
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather in a city now\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"description\":\"The city\"},"
    "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"description\":\"Searches the web\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"},"
    "\"max_results\":{\"type\":\"integer\",\"minimum\":1}},\"required\":[\"query\"]}}}]";

/* one rendering's µs, ROUNDS of them: median, p10, p90 into r[0..3) */
typedef int (*render_fn)(const clinfer_model *m, const clinfer_tools *t, size_t *bytes);

static const clinfer_tool_call CALL = {"call_1", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"};
static const clinfer_tool_message CONV[] = {
    {"system", "You are a helpful assistant. Answer briefly and use the tools when they help.", NULL, 0, NULL},
    {"user", "What is the weather in Paris today, and should I take an umbrella?", NULL, 0, NULL},
    {"assistant", NULL, &CALL, 1, NULL},
    {"tool", "{\"temperature\": 14, \"condition\": \"light rain\", \"humidity\": 0.82}", NULL, 0, "call_1"},
    {"assistant", "It is 14 °C with light rain in Paris: take an umbrella.", NULL, 0, NULL},
    {"user", "Thanks. And what about Lyon tomorrow?", NULL, 0, NULL},
};
static const clinfer_chat_message PLAIN[] = {
    {"system", "You are a helpful assistant. Answer briefly and use the tools when they help."},
    {"user", "What is the weather in Paris today, and should I take an umbrella?"},
    {"assistant", "I cannot look it up, but Paris in this season is often rainy."},
    {"user", "Then I will take an umbrella. What should I see there in one day?"},
    {"assistant", "The Louvre in the morning, a walk along the Seine, Montmartre at sunset."},
    {"user", "Thanks. And what about Lyon tomorrow?"},
};

static int with_tools(const clinfer_model *m, const clinfer_tools *t, size_t *bytes) {
    char *text;
    if (clinfer_tools_chat_apply(m, t, CONV, 6, 1, &text, bytes) != CLINFER_OK) return -1;
    clinfer_free(text);
    return 0;
}

static int plain(const clinfer_model *m, const clinfer_tools *t, size_t *bytes) {
    (void)t;
    char *text;
    if (clinfer_chat_apply(m, PLAIN, 6, 1, &text, bytes) != CLINFER_OK) return -1;
    clinfer_free(text);
    return 0;
}

static int timed(const char *what, render_fn fn, const clinfer_model *m, const clinfer_tools *t, int rounds,
                 double r[3], size_t *bytes) {
    double *us = malloc((size_t)rounds * sizeof *us);
    if (!us) return -1;
    for (int i = 0; i < rounds; i++) {
        double t0 = now_us();
        if (fn(m, t, bytes)) {
            fprintf(stderr, "chat_bench: %s: %s\n", what, clinfer_last_error());
            free(us);
            return -1;
        }
        us[i] = now_us() - t0;
    }
    qsort(us, (size_t)rounds, sizeof *us, cmp_d);
    r[0] = us[rounds / 2], r[1] = us[rounds / 10], r[2] = us[rounds * 9 / 10];
    printf("%-22s median %8.1f µs  p10 %8.1f  p90 %8.1f  (%zu bytes, %d rounds)\n", what, r[0], r[1], r[2], *bytes,
           rounds);
    free(us);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: chat_bench MODEL [TEMPLATE.jinja|-] [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 3 ? atoi(argv[3]) : 300;
    if (rounds < 10) rounds = 10;
    clinfer_model_params p = clinfer_model_default_params();
    p.vocab_only = 1;
    clinfer_model *m;
    if (clinfer_model_load(argv[1], NULL, &p, &m) != CLINFER_OK) {
        fprintf(stderr, "chat_bench: %s\n", clinfer_last_error());
        return 1;
    }
    int rc = 1;
    clinfer_tools *t = NULL;
    if (argc > 2 && strcmp(argv[2], "-")) {
        char *tmpl = slurp(argv[2]);
        if (!tmpl || clinfer_model_set_chat_template(m, tmpl) != CLINFER_OK) {
            fprintf(stderr, "chat_bench: %s: %s\n", argv[2], tmpl ? clinfer_last_error() : "cannot read it");
            free(tmpl);
            goto out;
        }
        free(tmpl);
    }
    /* a format without tool calls (Gemma 3's) times the plain conversation alone */
    double rt[3] = {0}, rp[3];
    size_t nt = 0, np = 0;
    if (clinfer_tools_create(m, TOOLS, strlen(TOOLS), &t) != CLINFER_OK)
        printf("6 turns, 2 tools       not timed: %s\n", clinfer_last_error());
    else if (timed("6 turns, 2 tools", with_tools, m, t, rounds, rt, &nt))
        goto out;
    if (timed("6 turns, no tools", plain, m, t, rounds, rp, &np)) goto out;
    printf("{\"tools_median_us\": %.1f, \"tools_p90_us\": %.1f, \"tools_bytes\": %zu, \"plain_median_us\": %.1f, "
           "\"plain_p90_us\": %.1f, \"plain_bytes\": %zu, \"rounds\": %d}\n",
           rt[0], rt[2], nt, rp[0], rp[2], np, rounds);
    rc = 0;
out:
    clinfer_tools_free(t);
    clinfer_model_free(m);
    return rc;
}

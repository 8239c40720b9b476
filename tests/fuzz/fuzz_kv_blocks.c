/* libFuzzer harness for the paged KV cache's block bookkeeping
 * (host/compute/kv_blocks.c): random bytes as a program of operations on
 * a small pool, checked against a reference model after every step.
 *
 * Each block holds B simulated slots; a sequence's reference is a flat
 * array of the values written at its positions. Operations (a byte picks
 * one, the next ones its arguments): append n tokens to a sequence (write
 * with copy on write of shared blocks), rewind a sequence, copy a prefix
 * of one sequence to another (blocks shared), give back the blocks below
 * a point (a sliding window), empty a sequence. Properties:
 *  - every block's reference count is the number of table entries naming
 *    it, and the free list holds exactly the blocks counted 0, once each;
 *  - every readable position of every sequence reads back, through its
 *    table, the value the reference holds (no write reaches a block
 *    another sequence sees; a copy keeps the slots before the write);
 *  - a write refused for want of blocks changes nothing, and is refused
 *    only when the free list is short of what clf_kv_blocks_need says.
 *
 * tests/test_kv_blocks.c includes this file and feeds it random programs
 * in the ordinary suite. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_blocks.h"

enum { KB_SEQ = 4, KB_TBL = 6, KB_B = 4, KB_BLOCKS = 12, KB_POS = KB_TBL * KB_B };

typedef struct kb_state {
    clf_kv_blocks b;
    int slots[KB_BLOCKS * KB_B];      /* the simulated pool */
    int ref[KB_SEQ][KB_POS], len[KB_SEQ], lo[KB_SEQ]; /* the reference: values, length, first readable */
    int next_value;
} kb_state;

static clf_status kb_copy(void *user, int from, int to, int n) {
    kb_state *s = user;
    memcpy(s->slots + to * KB_B, s->slots + from * KB_B, (size_t)n * sizeof *s->slots);
    return CLF_OK;
}

static void kb_check(const kb_state *s) {
    int count[KB_BLOCKS] = {0}, in_free[KB_BLOCKS] = {0};
    for (int q = 0; q < KB_SEQ; q++)
        for (int i = 0; i < KB_TBL; i++) {
            int blk = s->b.tbl[q * KB_TBL + i];
            if (blk < -1 || blk >= KB_BLOCKS) abort();
            if (blk >= 0) count[blk]++;
        }
    for (int i = 0; i < s->b.n_free; i++) {
        int blk = s->b.free_stack[i];
        if (blk < 0 || blk >= KB_BLOCKS || in_free[blk]++) abort();
    }
    for (int blk = 0; blk < KB_BLOCKS; blk++)
        if (s->b.ref[blk] != count[blk] || (count[blk] == 0) != (in_free[blk] == 1)) abort();
    for (int q = 0; q < KB_SEQ; q++)
        for (int p = s->lo[q]; p < s->len[q]; p++) {
            int blk = s->b.tbl[q * KB_TBL + p / KB_B];
            if (blk < 0 || s->slots[blk * KB_B + p % KB_B] != s->ref[q][p]) abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kb_state *s = calloc(1, sizeof *s);
    if (!s || clf_kv_blocks_init(&s->b, KB_BLOCKS, KB_SEQ, KB_TBL) != CLF_OK) abort();
    for (size_t i = 0; i + 2 < size; i += 3) {
        const int op = data[i] % 5, q = data[i + 1] % KB_SEQ, arg = data[i + 2];
        if (op == 0) { /* append 1..9 tokens */
            const int n = 1 + arg % 9, pos = s->len[q];
            if (pos + n > KB_POS) continue;
            int32_t before[KB_SEQ * KB_TBL];
            memcpy(before, s->b.tbl, sizeof before);
            const int need = clf_kv_blocks_need(&s->b, q, pos / KB_B, (pos + n - 1) / KB_B), n_free = s->b.n_free;
            clf_status st = clf_kv_blocks_write(&s->b, q, pos / KB_B, (pos + n - 1) / KB_B, pos % KB_B, kb_copy, s);
            if (st != CLF_OK) {
                if (st != CLF_ERR_CONTEXT || need <= n_free || memcmp(before, s->b.tbl, sizeof before)) abort();
                continue;
            }
            for (int p = pos; p < pos + n; p++) {
                const int blk = s->b.tbl[q * KB_TBL + p / KB_B];
                if (s->b.ref[blk] != 1) abort(); /* written blocks are the sequence's own */
                s->slots[blk * KB_B + p % KB_B] = s->ref[q][p] = ++s->next_value;
            }
            s->len[q] = pos + n;
        } else if (op == 1) { /* rewind */
            const int pos = arg % (s->len[q] + 1);
            clf_kv_blocks_drop_from(&s->b, q, (pos + KB_B - 1) / KB_B);
            s->len[q] = pos;
            if (s->lo[q] > pos) s->lo[q] = pos;
        } else if (op == 2) { /* copy a prefix of q to d */
            const int d = arg % KB_SEQ, n = (arg / KB_SEQ) % (s->len[q] + 1);
            if (d == q || s->lo[q] > 0) continue; /* a copy needs every position below n (the model checks) */
            clf_kv_blocks_share(&s->b, q, d, (n + KB_B - 1) / KB_B);
            memcpy(s->ref[d], s->ref[q], (size_t)n * sizeof **s->ref);
            s->len[d] = n, s->lo[d] = 0;
        } else if (op == 3) { /* a sliding window gives back the blocks below end */
            const int end = arg % (s->len[q] / KB_B + 1);
            clf_kv_blocks_drop_below(&s->b, q, end);
            if (s->lo[q] < end * KB_B) s->lo[q] = end * KB_B;
            if (s->lo[q] > s->len[q]) s->lo[q] = s->len[q];
        } else { /* empty */
            clf_kv_blocks_drop_from(&s->b, q, 0);
            s->len[q] = s->lo[q] = 0;
        }
        kb_check(s);
    }
    clf_kv_blocks_free(&s->b);
    free(s);
    return 0;
}

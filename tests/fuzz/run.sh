#!/bin/sh
# Runs each libFuzzer harness for a bounded time, FUZZ_JOBS at once (make test-fuzz, part of
# make test). Fails on any finding: a crash, a sanitizer report, a leak, a
# violated property, a timeout or running out of memory.
#
# usage: run.sh FUZZ_BUILD_DIR TINY_GGUF SECONDS
#
# Seeds: small valid files written by tiny_gguf (regenerated each run),
# tests/fuzz/seeds-request/ (request bodies), tests/fuzz/seeds-grammar/
# (grammars, some at the parser's bounds: 8 KiB inputs reach them),
# tests/data/schemas/ and tests/fuzz/seeds-json-schema/ (JSON Schemas),
# tests/data/templates/ (chat templates) and
# tests/fuzz/regressions/.
# What the fuzzers discover is kept in FUZZ_BUILD_DIR/corpus/ between runs;
# findings land in
# FUZZ_BUILD_DIR/findings/. A finding is fixed, then kept as a regression:
# copy it to tests/fuzz/regressions/gguf-<what> or tokenizer-<what>, where
# tests/test_fuzz_regressions.c replays it in the ordinary suite.
set -u
B=$1 TOOL=$2 SECS=$3
SRC=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$B/seeds"
"$TOOL" seeds "$B/seeds" || { echo "fuzz: cannot write the seed corpus"; exit 1; }
mkdir -p "$B/corpus/gguf" "$B/corpus/tokenizer" "$B/findings"
status=0
# fuzz_request (`clinfer serve`'s request parser) where the server was built
mkdir -p "$B/corpus/request" "$B/seeds/request"
cp "$SRC"/tests/fuzz/seeds-request/* "$B/seeds/request/"
# fuzz_kv_blocks (the paged KV cache's bookkeeping) starts from nothing: any bytes are a program
mkdir -p "$B/corpus/kv_blocks" "$B/seeds/kv_blocks"
# fuzz_grammar (GBNF: a grammar, a NUL, a text) from tests/fuzz/seeds-grammar/
mkdir -p "$B/corpus/grammar" "$B/seeds/grammar"
cp "$SRC"/tests/fuzz/seeds-grammar/* "$B/seeds/grammar/"
# fuzz_json_schema (JSON Schema -> GBNF) from the schema suite, tests/data/schemas/, and
# tests/fuzz/seeds-json-schema/ (schemas at the converter's bounds: long names, wide enums, deep nesting)
mkdir -p "$B/corpus/json_schema" "$B/seeds/json_schema"
cp "$SRC"/tests/data/schemas/*.json "$SRC"/tests/fuzz/seeds-json-schema/* "$B/seeds/json_schema/"
# fuzz_jinja (chat templates: a template, a NUL, a JSON context) from the conformance corpus, tests/data/templates/
mkdir -p "$B/corpus/jinja" "$B/seeds/jinja"
cp "$SRC"/tests/data/templates/*.jinja "$B/seeds/jinja/"
harnesses="gguf tokenizer kv_blocks grammar json_schema jinja"
[ -x "$B/tests/fuzz/fuzz_request" ] && harnesses="$harnesses request"
# one harness: its verdict on stdout, 1 on a finding
fuzz_one() {
    h=$1
    case $h in gguf) max_len=131072 ;; tokenizer) max_len=4096 ;; request) max_len=8192 ;; kv_blocks) max_len=3072 ;; grammar) max_len=8192 ;; json_schema) max_len=8192 ;; jinja) max_len=32768 ;; esac
    log="$B/fuzz_$h.log"
    "$B/tests/fuzz/fuzz_$h" -max_total_time="$SECS" -max_len=$max_len -timeout=20 -rss_limit_mb=3072 \
        -print_final_stats=1 -artifact_prefix="$B/findings/$h-" \
        "$B/corpus/$h" "$B/seeds/$h" "$SRC/tests/fuzz/regressions" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    corpus=$(ls "$B/corpus/$h" | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz_$h: ${runs:-?} inputs in $SECS s, no findings (corpus: $corpus files)"
    else
        echo "fuzz_$h: FINDING (exit $rc); the log's end ($log):"
        tail -n 40 "$log"
        echo "fuzz_$h: the input is in $B/findings/ (replay: $B/tests/fuzz/fuzz_$h FILE)"
        return 1
    fi
}
# FUZZ_JOBS harnesses at a time (default: the cores; each is one process
# on one core), each for SECS seconds
jobs=${FUZZ_JOBS:-$(nproc)}
set -- $harnesses
while [ $# -gt 0 ]; do
    batch=""
    i=0
    while [ $# -gt 0 ] && [ $i -lt "$jobs" ]; do
        batch="$batch $1"
        shift
        i=$((i + 1))
    done
    for h in $batch; do fuzz_one "$h" >"$B/verdict_$h" & done
    wait
    for h in $batch; do
        cat "$B/verdict_$h"
        grep -q "^fuzz_$h: .* no findings" "$B/verdict_$h" || status=1
    done
done
exit $status

#!/bin/sh
# examples/simple.c, built in the tree against libclinfer.so, streams the
# same greedy text as `clinfer run` on the default model (`make model`).
# usage: example_simple.sh CLINFER SIMPLE
set -u
BIN=$1 SIMPLE=$2
W=$(mktemp -d /tmp/clinfer-example-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE
PROMPT="The three primary colours are"
"$BIN" run -p "$PROMPT" -n 24 >"$W/want" 2>"$W/err" || { cat "$W/err"; echo "FAIL: clinfer run"; exit 1; }
"$SIMPLE" "" "$PROMPT" 24 >"$W/got" 2>"$W/err" || { cat "$W/err"; echo "FAIL: simple"; exit 1; }
[ -s "$W/got" ] || { echo "FAIL: simple printed nothing"; exit 1; }
cmp -s "$W/want" "$W/got" || { diff "$W/want" "$W/got"; echo "FAIL: simple's text differs from clinfer run's"; exit 1; }
echo "example_simple: passed ($(wc -c <"$W/got") bytes, as clinfer run)"

#!/bin/sh
# The tiny models of every family (tests/tools/tiny_gguf) greedy on
# Oclgrind's simulated GPU, which has no cl_khr_fp16 (the gpu kernels, F16
# weights and F16 caches through vload_half/vstore_half), under its checks
# (tests/oclgrind.sh): no report, and the text PoCL gives for the same
# model, prompt and cache type. Registered with ctest (CMakeLists.txt).
#
# usage: oclgrind_models.sh CLINFER TINY_GGUF SOURCE_DIR
set -u
BIN=$1 TOOL=$2 SRC=$3
if ! command -v oclgrind >/dev/null 2>&1; then
    echo "oclgrind is not installed (scripts/setup.sh installs it): skipped"
    exit 77
fi
W=$(mktemp -d /tmp/clinfer-oclgrind-models-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
# a prompt of some 40 tokens (byte-level vocabulary): prefill through the GEMM, then decode
PROMPT="The quick brown fox jumps over the lazy dog, twice."
fails=0 n=0
# name | tiny_gguf arguments | --kv
while IFS='|' read -r name args kv; do
    [ -n "$name" ] || continue
    # shellcheck disable=SC2086
    "$TOOL" model "$W/$name.gguf" $args --no-eog >/dev/null || { echo "FAIL: cannot write $name"; exit 1; }
    set -- run -m "$W/$name.gguf" -p "$PROMPT" -n 12 --kv "$kv" --seed 3
    if ! CLINFER_CACHE_DIR="$W/kcache" "$BIN" "$@" >"$W/$name.pocl" 2>"$W/$name.pocl.err"; then
        echo "FAIL: $name on PoCL:"; cat "$W/$name.pocl.err"; fails=$((fails + 1)); continue
    fi
    if ! sh "$SRC/tests/oclgrind.sh" "$BIN" "$@" >"$W/$name.ocl" 2>&1; then
        echo "FAIL: $name on Oclgrind:"; cat "$W/$name.ocl"; fails=$((fails + 1)); continue
    fi
    # oclgrind.sh prints its timing line, then clinfer's output, then its verdict
    sed -e '1d' -e '$d' "$W/$name.ocl" | grep -v "^clinfer: " >"$W/$name.ocl.out"
    grep -v "^clinfer: " "$W/$name.pocl" >"$W/$name.pocl.out"
    n=$((n + 1))
    if cmp -s "$W/$name.pocl.out" "$W/$name.ocl.out"; then
        echo "$name ($args, kv $kv): the same text on both, $(head -1 "$W/$name.ocl" | sed 's/.*in //')"
    else
        echo "FAIL: $name ($args, kv $kv): PoCL and Oclgrind differ"
        echo "--- PoCL:"; cat "$W/$name.pocl.out"; echo "--- Oclgrind:"; cat "$W/$name.ocl.out"
        fails=$((fails + 1))
    fi
done <<EOF
llama-f16|F16|f16
llama-f16-f32kv|F16 --rope-freqs --untied|f32
qwen2-q8_0|Q8_0 --arch qwen2|f16
qwen3-q4_0|Q4_0 --arch qwen3|f16
gemma3-q4_1|Q4_1 --arch gemma3 --window 8 --layers 2|f16
phi3-f32|F32 --arch phi3 --rot 8|f32
kquant-q4_k|Q4_K --kquant|q8_0
kquant-q6_k|Q6_K --kquant|q4_0
kquant-f16|F16 --kquant|f16
EOF
[ "$fails" -eq 0 ] || { echo "$fails of the models failed"; exit 1; }
echo "$n models: Oclgrind's text equals PoCL's, no Oclgrind reports"

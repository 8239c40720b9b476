#!/bin/sh
# Tiny models (tests/tools/tiny_gguf; heads of 32 for the quantized
# caches: the K-quant models take Oclgrind over ten minutes) greedy on Oclgrind's simulated GPU,
# which has no cl_khr_fp16 (the gpu kernels; F16 weights and F16 caches
# through vload_half/vstore_half), under its checks (tests/oclgrind.sh): no
# report, and PoCL's tokens for the same model, prompt and cache type. The
# tiny models put most of their weight on one token, so the comparison is
# of each step's top 3 token ids (equal) and their logprobs (within 0.05:
# PoCL's cpu kernels and the gpu ones quantize activations on different
# paths), from `run --logprobs 3`. Registered with ctest (CMakeLists.txt) in parts
# that run in parallel: PART picks the models (moe: a mixture of experts,
# cl/moe.cl's routing, gather and scatter-add beside the products; gptoss:
# gpt-oss's sinks, YaRN, window, biases and softmax-weight routing).
#
# usage: oclgrind_models.sh CLINFER TINY_GGUF SOURCE_DIR PART
set -u
BIN=$1 TOOL=$2 SRC=$3 PART=$4
. "$(dirname "$0")/support/skip.sh"
command -v oclgrind >/dev/null 2>&1 || skip_test missing "oclgrind is not installed (scripts/setup.sh installs it)"
W=$(mktemp -d /tmp/clinfer-oclgrind-models-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
# some 20 tokens (byte-level vocabulary): prefill through the GEMM and prefill attention, then decode
PROMPT="The quick brown fox."
fails=0 n=0
# part | name | tiny_gguf arguments | --kv
while IFS='|' read -r part name args kv; do
    [ "$part" = "$PART" ] || continue
    # shellcheck disable=SC2086
    "$TOOL" model "$W/$name.gguf" $args --no-eog </dev/null >/dev/null || { echo "FAIL: cannot write $name"; exit 1; }
    set -- run -m "$W/$name.gguf" -p "$PROMPT" -n 4 --kv "$kv" --logprobs 3
    if ! CLINFER_CACHE_DIR="$W/kcache" "$BIN" "$@" </dev/null >"$W/$name.pocl" 2>"$W/$name.pocl.err"; then
        echo "FAIL: $name on PoCL:"; cat "$W/$name.pocl.err"; fails=$((fails + 1)); continue
    fi
    if ! sh "$SRC/tests/oclgrind.sh" "$BIN" "$@" </dev/null >"$W/$name.ocl" 2>&1; then
        echo "FAIL: $name on Oclgrind:"; cat "$W/$name.ocl"; fails=$((fails + 1)); continue
    fi
    n=$((n + 1))
    # the JSON lines of --logprobs (oclgrind.sh puts clinfer's stderr with its stdout)
    if python3 - "$W/$name.pocl.err" "$W/$name.ocl" <<'EOF'; then
import json, sys
def steps(path):
    out = []
    for line in open(path, encoding="utf-8", errors="replace"):
        at = line.find('{"token"')  # clinfer's text may precede it on the line
        if at >= 0:
            j = json.loads(line[at:])
            out.append([(j["token"], j["logprob"])] + [(t["token"], t["logprob"]) for t in j["top_logprobs"]])
    return out
a, b = steps(sys.argv[1]), steps(sys.argv[2])
ok = len(a) == 4 and len(a) == len(b) and all(
    len(x) == len(y) and all(p[0] == q[0] and abs(p[1] - q[1]) <= 5e-2 for p, q in zip(x, y)) for x, y in zip(a, b))
if not ok:
    print("PoCL:    ", a)
    print("Oclgrind:", b)
sys.exit(0 if ok else 1)
EOF
        echo "$name ($args, kv $kv): PoCL's tokens and logprobs, $(head -1 "$W/$name.ocl" | sed 's/.*in //')"
    else
        echo "FAIL: $name ($args, kv $kv): PoCL and Oclgrind differ"
        fails=$((fails + 1))
    fi
done <<EOF
a|llama-f16|F16|f16
a|qwen3-q4_0|Q4_0 --arch qwen3 --rope-freqs --untied|f32
a|gemma3-q4_1|Q4_1 --arch gemma3 --window 8 --layers 2|f16
b|qwen2-q8_0|Q8_0 --arch qwen2 --head-dim 32|q8_0
b|phi3-f16|F16 --arch phi3 --head-dim 32|q4_0
moe|qwen3moe-q8_0|Q8_0 --arch qwen3moe --experts 4 --used 2 --ff-exp 32|f32
gptoss|gptoss-q8_0|Q8_0 --arch gpt-oss --embd 64 --head-dim 32 --layers 2 --window 8 --experts 4 --used 2 --ff-exp 32 --untied|f32
EOF
[ "$n" -gt 0 ] || { echo "FAIL: no models in part $PART"; exit 1; }
[ "$fails" -eq 0 ] || { echo "$fails of the models failed"; exit 1; }
echo "$n models: Oclgrind gives PoCL's tokens, no Oclgrind reports"

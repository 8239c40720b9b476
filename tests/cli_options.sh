#!/bin/sh
# What llama.cpp users type, and what every command's --help says: the
# aliases (-c, -s, -t, -np, -f, -p -), --version, -ngl refused with its hint,
# every option of every table listed with a meaning (an option added
# without its .help fails here), quantize's requantize refusal and
# catalogue names. On tiny models written by tiny_gguf; `chat` on a
# terminal is tests/chat_pty.py.
#
# usage: cli_options.sh CLINFER TINY_GGUF
set -u
BIN=$1 TOOL=$2
W=$(mktemp -d /tmp/clinfer-opts-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL CLINFER_KERNEL_DIR
export CLINFER_CACHE_DIR="${CLINFER_CACHE_DIR:-$W/kcache}"
failures=0 cases=0
"$TOOL" model "$W/tiny.gguf" || { echo "FAIL: cannot write the tiny model"; exit 1; }
TINY=$W/tiny.gguf

fail() {
    echo "FAIL: $1"
    [ -f "$W/err" ] && sed 's/^/  | /' "$W/err" | head -20
    failures=$((failures + 1))
}
ok() { echo "ok   $1"; }
# check NAME COMMAND...: COMMAND succeeds (stdout in $W/out, stderr in $W/err)
check() {
    name=$1
    shift
    cases=$((cases + 1))
    if "$@" >"$W/out" 2>"$W/err" </dev/null; then ok "$name"; return 0; fi
    fail "$name: exit status $?"
    return 1
}
# refuse NAME PATTERN COMMAND...: exit 2 and a usage error matching PATTERN (ERE)
refuse() {
    name=$1 pat=$2
    shift 2
    cases=$((cases + 1))
    "$@" >"$W/out" 2>"$W/err" </dev/null
    rc=$?
    if [ $rc -ne 2 ]; then fail "$name: exit status $rc, expected 2"
    elif ! head -n 1 "$W/err" | grep -Eq -- "$pat"; then fail "$name: '$(head -n 1 "$W/err")' does not match '$pat'"
    else ok "$name: $(head -n 1 "$W/err" | cut -c1-110)"; fi
}

# 1. --version, top level and per command: the library's version, one line
check "--version" "$BIN" --version && v=$(cat "$W/out")
cases=$((cases + 1))
if printf '%s\n' "$v" | grep -Eq '^clinfer [0-9]+\.[0-9]+\.[0-9]+$'; then ok "version line '$v'"
else fail "version line '$v'"; fi
for cmd in "-V" "run -V" "chat --version" "quantize -V" "bench --version"; do
    cases=$((cases + 1))
    # shellcheck disable=SC2086 # two words
    out=$("$BIN" $cmd 2>&1)
    if [ "$out" = "$v" ]; then ok "clinfer $cmd"; else fail "clinfer $cmd: '$out', expected '$v'"; fi
done

# 2. every command's --help: each option of its table with a meaning, and
#    every option its usage line names among them
for cmd in devices tokenize run chat perplexity embed serve info quantize bench "bench kernels" "bench launches" \
    "bench --grammar x" tune selftest; do
    cases=$((cases + 1))
    # shellcheck disable=SC2086
    if ! "$BIN" $cmd --help >"$W/help" 2>"$W/err"; then fail "$cmd --help: exit status $?"; continue; fi
    sed -n '/^options:$/,$p' "$W/help" | tail -n +2 >"$W/list"
    n=$(wc -l <"$W/list")
    bad=$(grep -c "(undocumented)" "$W/list")
    # the options of the usage part (before "options:"), each must lead a line of the list
    missing=""
    for o in $(sed '/^options:$/,$d' "$W/help" | grep -oE '(^|[][ (|])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[][ (|]//' |
        sort -u); do
        grep -Eq -- "^  (-[a-zA-Z0-9]+, )?$o( |,|$)" "$W/list" || missing="$missing $o"
    done
    if [ "$n" -lt 3 ]; then fail "$cmd --help: no option list"
    elif [ "$bad" -ne 0 ]; then fail "$cmd --help: $bad options without a meaning: $(grep '(undocumented)' "$W/list" | tr -s ' ')"
    elif [ -n "$missing" ]; then fail "$cmd --help: the usage names$missing, the list does not"
    elif grep -Eqv '^  -[^ ]+.* [^ ]' "$W/list"; then fail "$cmd --help: a line of the list without its meaning"
    else ok "$cmd --help: $n options, each with its meaning"; fi
done
# the top-level help lists quantize's types as they are
check "top-level --help" "$BIN" --help
cases=$((cases + 1))
if grep -q "F16 or F32" "$W/out"; then fail "the top-level help still lists quantize's old five types"
else ok "top-level help current"; fi

# 3. llama.cpp's spellings: -ngl is one unknown option with the hint, not -n gl
refuse "-ngl 99" "^clinfer: usage error: unknown option '-ngl': .*--device SEL" "$BIN" run -m "$TINY" -p hi -ngl 99
refuse "--n-gpu-layers" "^clinfer: usage error: unknown option '--n-gpu-layers': .*--device SEL" \
    "$BIN" serve -m "$TINY" --n-gpu-layers=99
refuse "-fa (no -f a)" "^clinfer: usage error: unknown option '-fa'$" "$BIN" chat -m "$TINY" -fa
refuse "-nx (a number's value)" "^clinfer: usage error: unknown option '-nx'$" "$BIN" run -m "$TINY" -p hi -nx
refuse "-c is --ctx" "^clinfer: usage error: --ctx 0 is out of range \(1\.\.1048576\)$" "$BIN" run -m "$TINY" -p hi -c 0
refuse "-s is --seed" "^clinfer: usage error: --seed 'x' is not an integer" "$BIN" run -m "$TINY" -p hi -s x
refuse "-t is --threads" "^clinfer: usage error: --threads 0 is out of range" "$BIN" run -m "$TINY" -p hi -t 0
refuse "-np is --parallel (a word, not -n p)" "^clinfer: usage error: --parallel 0 is out of range" \
    "$BIN" serve -m "$TINY" -np 0
refuse "--system without --chat" "^clinfer: usage error: --system goes with --chat" \
    "$BIN" run -m "$TINY" -p hi --system "be brief"
refuse "-p and -f" "^clinfer: usage error: -p and -f do not go together$" "$BIN" run -m "$TINY" -p hi -f "$TINY"

# 4. the prompt from -p TEXT, -p - (stdin) and -f FILE: the same tokens, so
#    the same greedy text; -n5 (a value attached) and the aliases still work
prompt="The quick brown fox $(od -An -N4 -tu4 /dev/urandom | tr -d ' ')"
printf '%s' "$prompt" >"$W/prompt.txt"
check "-p TEXT" "$BIN" run -m "$TINY" -p "$prompt" -n5 -c 64 -s 7 && cp "$W/out" "$W/ref"
cases=$((cases + 1))
if printf '%s' "$prompt" | "$BIN" run -m "$TINY" -p - -n 5 --ctx 64 >"$W/out" 2>"$W/err" && [ -s "$W/ref" ] &&
    cmp -s "$W/out" "$W/ref"; then ok "-p - reads the prompt from stdin"
else fail "-p -: not the text of -p TEXT"; fi
check "-f FILE" "$BIN" run -m "$TINY" -f "$W/prompt.txt" -n 5 -c 64
cases=$((cases + 1))
if cmp -s "$W/out" "$W/ref"; then ok "-f FILE gives -p TEXT's text"; else fail "-f FILE: not the text of -p TEXT"; fi
cases=$((cases + 1))
if "$BIN" run -m "$TINY" -p - -n 2 </dev/null >"$W/out" 2>"$W/err"; then fail "-p - with an empty stdin ran"
elif grep -q "the prompt is empty" "$W/err"; then ok "-p - with an empty stdin: the prompt is empty"
else fail "-p - with an empty stdin: $(head -n 1 "$W/err")"; fi

# 4b. speculation: -md (llama.cpp's draft-model flag; the tiny model as its
#     own draft) and --draft-max give -p TEXT's greedy text; sampled runs
#     speculate too (drafts counted on the speeds line)
check "run -md (greedy)" "$BIN" run -m "$TINY" -md "$TINY" --draft-max 4 -p "$prompt" -n5 -c 64 -s 7
cases=$((cases + 1))
if cmp -s "$W/out" "$W/ref"; then ok "-md: -p TEXT's greedy text"; else fail "-md: not the text of plain decoding"; fi
check "run --draft-max --temp 0.8" "$BIN" run -m "$TINY" -p "$prompt$prompt" -n 16 -c 128 --temp 0.8 --draft-max 4
check "run --model-draft --temp 0.8" "$BIN" run -m "$TINY" --model-draft "$TINY" --draft-min 1 --draft-p-min 0.1 \
    -p "$prompt" -n 8 -c 64 --temp 0.8

# 5. -t N: PoCL's compute units (set before the platform starts)
check "devices -t 1" "$BIN" devices -t 1 --json
cases=$((cases + 1))
if grep -q '"Portable Computing Language"' "$W/out"; then
    if grep -q '"compute_units": 1,' "$W/out"; then ok "-t 1: PoCL reports 1 compute unit"
    else fail "-t 1: $(grep -o '"compute_units": [0-9]*' "$W/out" | head -n 1)"; fi
else ok "-t on another driver (not checked)"; fi
check "run -t 1" "$BIN" run -m "$TINY" -p hi -n 2 -t 1

# 6. quantize: requantizing is refused in one line unless --allow-requantize;
#    widening to F16 is not requantizing; IN by catalogue name
"$TOOL" model "$W/q8.gguf" Q8_0 || exit 1
refuse "requantize refused" "^clinfer: usage error: '.*q8\.gguf' is already quantized \([0-9]+ tensors, mostly Q8_0\): .*--allow-requantize" \
    "$BIN" quantize "$W/q8.gguf" "$W/q4.gguf" Q4_0
cases=$((cases + 1))
if [ -e "$W/q4.gguf" ]; then fail "the refused quantize wrote its output"; else ok "nothing written when refused"; fi
check "--allow-requantize" "$BIN" quantize --allow-requantize "$W/q8.gguf" "$W/q4.gguf" Q4_0
check "quantized to F16: allowed" "$BIN" quantize "$W/q8.gguf" "$W/f16.gguf" F16
check "from F32: allowed" "$BIN" quantize "$TINY" "$W/q4b.gguf" Q4_0
# a catalogue of its own naming the Q8_0 file (its size and hash: taken from the
# cache, never fetched; no index is reachable on port 1)
mkdir "$W/models"
cp "$W/q8.gguf" "$W/models/tinyq8.gguf"
printf 'tinyq8\ttinyq8.gguf\tno-such-package\t1.0\t%s\t%s\twheel\tno\n' "$(wc -c <"$W/q8.gguf" | tr -d ' ')" \
    "$(sha256sum "$W/q8.gguf" | cut -d' ' -f1)" >"$W/catalogue.tsv"
refuse "quantize by catalogue name" "^clinfer: usage error: '$W/models/tinyq8\.gguf' is already quantized" \
    env CLINFER_MODEL_DIR="$W/models" CLINFER_CATALOGUE="$W/catalogue.tsv" CLINFER_PACKAGE_INDEX=http://127.0.0.1:1/pypi \
    "$BIN" quantize tinyq8 "$W/c.gguf" Q4_0
check "catalogue name, F16" env CLINFER_MODEL_DIR="$W/models" CLINFER_CATALOGUE="$W/catalogue.tsv" \
    CLINFER_PACKAGE_INDEX=http://127.0.0.1:1/pypi "$BIN" quantize tinyq8 "$W/c.gguf" F16
refuse "a misspelt --allow-requantize" "^clinfer: usage error: unknown option '--allow-requantise'" \
    "$BIN" quantize --allow-requantise "$W/q8.gguf" "$W/x.gguf" Q4_0

# 9. --chat-template-file / --chat-template: run instead of the file's template;
#    one the Jinja engine cannot parse is a format error (exit 4) naming its line
printf '{%% for m in messages %%}[{{ m.role }}] {{ m.content }}\n{%% endfor %%}{%% if add_generation_prompt %%}[assistant] {%% endif %%}' \
    >"$W/t.jinja"
check "run --chat --chat-template-file" "$BIN" run -m "$TINY" --chat -p hi -n 1 --chat-template-file "$W/t.jinja"
check "run --chat --chat-template" "$BIN" run -m "$TINY" --chat -p hi -n 1 --chat-template "$(cat "$W/t.jinja")"
cases=$((cases + 1))
"$BIN" run -m "$TINY" --chat -p hi -n 1 --chat-template '{% if %}' >"$W/out" 2>"$W/err" </dev/null
rc=$?
if [ $rc -eq 4 ] && grep -q "chat template line 1" "$W/err"; then ok "a template that does not parse: $(cut -c1-100 "$W/err")"
else fail "a template that does not parse: exit status $rc"; fi
refuse "both --chat-template and --chat-template-file" "chat-template" \
    "$BIN" run -m "$TINY" --chat -p hi -n 1 --chat-template x --chat-template-file "$W/t.jinja"

echo "$((cases - failures))/$cases passed"
[ $failures -eq 0 ]

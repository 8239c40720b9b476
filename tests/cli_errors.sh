#!/bin/sh
# Every failure a user can cause ends in one clear line on stderr
# ("clinfer: <status name>: <message>") and its own exit status
# (host/status.h; README "Exit statuses"). Registered with ctest
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
#    believes the device has: a testing aid, host/runtime.c)
expect "model > global memory" 7 "^clinfer: out of memory: model weights need [0-9.]+ KiB but .* has 20.0 KiB of global memory" \
    env CLINFER_GLOBAL_MEM_MB=0.01953125 "$BIN" run -m "$TINY" -p hi -n 2
expect "tensor > max allocation" 7 "^clinfer: out of memory: tensor token_embd.weight \([0-9.]+ KiB\) exceeds .*max allocation of 10.0 KiB" \
    env CLINFER_MAX_ALLOC_MB=0.009765625 "$BIN" run -m "$TINY" -p hi -n 2

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

# 7. an unwritable cache dir: a warning, and the run still works
: >"$W/a-file"
cases=$((cases + 1))
if CLINFER_CACHE_DIR="$W/a-file/cache" "$BIN" run -m "$TINY" -p hi -n 2 >"$W/out" 2>"$W/err" &&
    grep -q "^clinfer: warning: kernel cache dir .* is not writable; caching off" "$W/err" && [ "$(error_lines | wc -l)" -eq 0 ]
then echo "ok   unwritable cache dir                 exit 0  (warning, still runs)"
else fail "unwritable cache dir: expected a warning and success"; fi

# 8. model files: missing, a directory, not GGUF, empty, truncated
expect "missing model file" 3 "^clinfer: I/O error: cannot open '$W/none.gguf': No such file or directory" \
    "$BIN" run -m "$W/none.gguf" -p hi
expect "directory as model" 3 "^clinfer: I/O error: '$W' is a directory" \
    "$BIN" run -m "$W" -p hi
printf 'this is a text file, not a model\n' >"$W/text.gguf"
expect "non-GGUF file" 4 "^clinfer: format error: .*text.gguf: not a GGUF file" \
    "$BIN" run -m "$W/text.gguf" -p hi
: >"$W/empty.gguf"
expect "empty file" 4 "^clinfer: format error: .*empty.gguf: not a GGUF file" \
    "$BIN" run -m "$W/empty.gguf" -p hi
head -c 3000 "$TINY" >"$W/cut.gguf"
expect "truncated model" 4 "^clinfer: format error: .*cut.gguf: .*(truncated|past the end|impossible)" \
    "$BIN" run -m "$W/cut.gguf" -p hi
expect "no model at all" 3 "^clinfer: I/O error: no -m given and the default model .* is not there" \
    env CLINFER_MODEL_DIR="$W/no-models" XDG_CACHE_HOME= "$BIN" run -p hi
expect "unreadable info target" 4 "^clinfer: format error: " \
    "$BIN" info -m "$W/text.gguf"

# 9. usage errors
cases=$((cases + 1))
"$BIN" run -m "$TINY" -p hi -n zero >"$W/out" 2>"$W/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(head -n 1 "$W/err")" = "clinfer: bad -n 'zero'" ]; then echo "ok   bad -n                               exit 2  clinfer: bad -n 'zero'"
else fail "bad -n: exit $rc"; fi
cases=$((cases + 1))
if "$BIN" no-such-command >/dev/null 2>&1; then fail "unknown command: exit 0"; else
    rc=$?; [ $rc -eq 2 ] && echo "ok   unknown command                      exit 2" || fail "unknown command: exit $rc"; fi

# 10. Ctrl-C during generation: stops at the next token, prints the stats
#     line, exits 9 (interrupted). --no-eog: the model cannot stop by itself.
cases=$((cases + 1))
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

# 11. quantize: a failure leaves nothing behind, an existing output intact
mkdir "$W/q"
expect "quantize: bad input" 4 "^clinfer: format error: .*text.gguf: not a GGUF file" \
    "$BIN" quantize "$W/text.gguf" "$W/q/out.gguf" Q8_0
expect "quantize: no output dir" 3 "^clinfer: I/O error: cannot create a temporary file beside '$W/nodir/out.gguf'" \
    "$BIN" quantize "$TINY" "$W/nodir/out.gguf" Q8_0
# a type without its mix (Q4_K is a tensor type; the targets are Q4_K_S/Q4_K_M)
cases=$((cases + 1))
"$BIN" quantize "$TINY" "$W/q/out.gguf" Q4_K >"$W/out" 2>"$W/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(head -n 1 "$W/err")" = "clinfer: unknown type 'Q4_K'" ]; then echo "ok   quantize: unknown target             exit 2  clinfer: unknown type 'Q4_K'"
else fail "quantize: unknown target: exit $rc"; fi
printf 'previous contents\n' >"$W/q/keep.gguf"
# the file size limit makes the write fail half-way (EFBIG; SIGXFSZ ignored)
expect "quantize: write fails midway" 3 "^clinfer: I/O error: cannot write '$W/q/keep.gguf': File too large" \
    sh -c 'trap "" XFSZ; ulimit -f 16; exec "$0" "$@"' "$BIN" quantize "$TINY" "$W/q/keep.gguf" F32
cases=$((cases + 1))
left=$(ls -A "$W/q")
if [ "$left" = "keep.gguf" ] && [ "$(cat "$W/q/keep.gguf")" = "previous contents" ]; then
    echo "ok   failed quantize leaves nothing behind"
else fail "failed quantize left: $left"; fi

echo "$cases cases, $failures failures"
[ $failures -eq 0 ]

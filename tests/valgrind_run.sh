#!/bin/sh
# valgrind memcheck over `clinfer run` on a tiny model (prefill, decode,
# chat rendering, sampling, streaming detokenization, teardown): no memory
# errors and no definite leaks. Registered with ctest (CMakeLists.txt).
#
# usage: valgrind_run.sh CLINFER TINY_GGUF SOURCE_DIR
#
# Compiling kernels with PoCL's LLVM under valgrind takes minutes, so the
# kernel caches are filled by a native run first. Under valgrind the CPU
# looks different (no AVX-512), and PoCL would build for it again: both
# runs therefore pin PoCL's target to plain x86-64 with its SSE2 builtin
# library (POCL_LLVM_CPU_NAME, POCL_KERNELLIB_NAME; ignored by other OpenCL
# implementations), so the valgrind run finds every kernel in the cache.
set -u
BIN=$1 TOOL=$2 SRC=$3
. "$(dirname "$0")/support/skip.sh"
command -v valgrind >/dev/null 2>&1 || skip_test missing "valgrind is not installed (scripts/setup.sh installs it)"
W=$(mktemp -d /tmp/clinfer-valgrind-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
"$TOOL" model "$W/tiny.gguf" Q8_0 --no-eog || { echo "FAIL: cannot write the tiny model"; exit 1; }

export POCL_CACHE_DIR="$W/pocl" CLINFER_CACHE_DIR="$W/kcache"
export POCL_LLVM_CPU_NAME=x86-64 POCL_KERNELLIB_NAME=sse2
unset CLINFER_KERNEL_DIR CLINFER_MAX_ALLOC_MB CLINFER_GLOBAL_MEM_MB
set -- run -m "$W/tiny.gguf" --chat -p "Hello world, how are you?" -n 12 --temp 0.8 --top-k 20 --seed 7

if ! "$BIN" "$@" >"$W/native.out" 2>"$W/native.err"; then
    echo "FAIL: the native warm-up run failed:"; cat "$W/native.err"; exit 1
fi
start=$(date +%s)
valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --track-origins=yes --num-callers=40 \
    --suppressions="$SRC/tests/sanitizers/valgrind.supp" \
    "$BIN" "$@" >"$W/vg.out" 2>"$W/vg.err"
rc=$?
echo "valgrind run: exit $rc in $(( $(date +%s) - start )) s"
grep -E "^==[0-9]+== (ERROR SUMMARY|   definitely lost|   indirectly lost)" "$W/vg.err"
grep "^clinfer:" "$W/vg.err"
if [ $rc -ne 0 ]; then
    echo "FAIL: valgrind found errors (exit $rc):"
    cat "$W/vg.err"
    exit 1
fi
if ! grep -Eq "^clinfer: .* \| generated 12 tokens" "$W/vg.err"; then
    echo "FAIL: the run under valgrind did not generate its 12 tokens:"; cat "$W/vg.err"; exit 1
fi
echo "PASS: no memory errors, no definite leaks"

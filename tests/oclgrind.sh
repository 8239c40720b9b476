#!/bin/sh
# `clinfer ARGS...` on Oclgrind's simulated OpenCL 1.2 GPU (no cl_khr_fp16,
# every work-item its own context) under its checks: data races in global
# and local memory (--data-races, uniform writes included), uninitialised
# values (--uninitialized), API misuse (--check-api), and its default
# out-of-bounds and barrier-divergence checks. Any report fails the test
# and is printed, as is a non-zero exit of clinfer. Registered with ctest
# (CMakeLists.txt: the oclgrind_* tests).
#
# usage: oclgrind.sh CLINFER ARGS...
#
# Kernels build with -cl-opt-disable: clang's optimiser emits `freeze`,
# which Oclgrind 21.10's uninitialised-value plugin cannot run (a fatal
# "Unsupported instruction: freeze"); and with -DCLF_NO_SINCOS, since that
# plugin also aborts builtins that write through a private pointer
# (cl/common.cl CLF_SINCOS). The kernel cache is off, so every program is
# built here with those options. The wrapper command preloads Oclgrind's
# runtime in place of the ICD loader: Oclgrind is the only platform the
# process sees, and no ICD file is installed for the rest of the suite.
set -u
. "$(dirname "$0")/support/skip.sh"
command -v oclgrind >/dev/null 2>&1 || skip_test missing "oclgrind is not installed (scripts/setup.sh installs it)"
BIN=$1
shift
W=$(mktemp -d /tmp/clinfer-oclgrind-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
export CLINFER_CACHE_DIR=
# every new buffer written whole from the host first: Oclgrind's uninitialised-value plugin
# otherwise gives it the shadow of the released buffer it replaces (host/cl/cl_error.c)
export CLINFER_FILL_BUFFERS=1
unset CLINFER_KERNEL_DIR CLINFER_DEVICE CLINFER_MATMUL_VARIANT CLINFER_ATTN_VARIANT CLINFER_OPS_VARIANT \
    CLINFER_MAX_ALLOC_MB CLINFER_GLOBAL_MEM_MB
start=$(date +%s)
oclgrind --data-races --uniform-writes --uninitialized --check-api --max-errors 20 \
    --build-options "-cl-opt-disable -DCLF_NO_SINCOS" --log "$W/report" "$BIN" "$@" >"$W/out" 2>&1
rc=$?
echo "oclgrind $*: exit $rc in $(( $(date +%s) - start )) s"
cat "$W/out"
if [ -s "$W/report" ]; then
    echo "FAIL: Oclgrind reported:"
    cat "$W/report"
    exit 1
fi
[ "$rc" -eq 0 ] || { echo "FAIL: clinfer exited $rc"; exit 1; }
echo "no Oclgrind reports"

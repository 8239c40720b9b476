#!/bin/sh
# `make test`: every stage of the suite, each timed, then a report (stage
# wall times, the ten slowest tests, every skip; tests/report.py). A stage
# that fails does not stop the later ones, so one run shows everything
# that is wrong; the run fails if any stage did, or (under CI=true) if a
# test skipped for a reason other than a capability this machine lacks.
#
# usage: suite.sh [STAGE...]     (default: all of them, in this order)
#   release    the ctest suite of $BUILD (Release)
#   asan       the same suite built with ASan+UBSan in $ASAN_BUILD
#   fuzz       each libFuzzer harness for $FUZZ_SECONDS (clang, $FUZZ_BUILD)
# The Makefile passes BUILD, ASAN_BUILD, FUZZ_BUILD, FUZZ_SECONDS, JOBS,
# TEST_JOBS and TEST_MODELS. Builds and model fetches are timed as stages of
# their own.
#
# ctest runs TEST_JOBS (default: the cores) tests side by side; tests that
# must not share the machine hold a RESOURCE_LOCK (CMakeLists.txt). One
# kernel cache serves every pass ($BUILD/kcache: its key holds the source,
# the options, the device and the driver, and writes are atomic), so only
# the tests that check a cold start build kernels twice.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build} ASAN_BUILD=${ASAN_BUILD:-build-asan} FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30} JOBS=${JOBS:-$(nproc)} TEST_JOBS=${TEST_JOBS:-$(nproc)}
TEST_MODELS=${TEST_MODELS:-smollm2-135m gemma3-270m}
STAGES=${*:-release asan fuzz}
# The sanitizers' options. Narrow, commented suppressions for what PoCL/LLVM
# allocate inside our process (tests/sanitizers/); everything else is an
# error. use_tls=0: LeakSanitizer's exit-time tracer crashes ("Tracer caught
# signal 11") reading the thread-local storage of PoCL's worker threads once
# a shared library with TLS (libclinfer.so's error buffer) is loaded: every
# `clinfer run --devices 0:0,0:1` inside test_split did. Not scanning TLS as
# roots can only report more leaks, never hide one.
SAN_ENV="ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
LSAN_OPTIONS=suppressions=$(pwd)/tests/sanitizers/lsan.supp:use_tls=0
UBSAN_OPTIONS=suppressions=$(pwd)/tests/sanitizers/ubsan.supp:print_stacktrace=1:halt_on_error=1"
abs() { case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
BUILD=$(abs "$BUILD") ASAN_BUILD=$(abs "$ASAN_BUILD") FUZZ_BUILD=$(abs "$FUZZ_BUILD")
R=$BUILD/report
mkdir -p "$R"
: >"$R/stages.tsv"
rm -f "$R"/*.xml "$R"/*.reruns "$BUILD/skips.log" "$ASAN_BUILD/skips.log" # this run's alone in the report
failed=0
KCACHE=$BUILD/kcache

# stage NAME COMMAND...: runs it, records its wall time and verdict
stage() {
    name=$1
    shift
    echo "== $name: $*"
    t0=$(date +%s.%N)
    "$@"
    rc=$?
    t1=$(date +%s.%N)
    verdict=passed
    [ $rc -eq 0 ] || { verdict="FAILED (exit $rc)"; failed=1; }
    printf '%s\t%s\t%s\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$verdict" >>"$R/stages.tsv"
    echo "== $name: $verdict"
    return $rc
}

configure_build() { # DIR TARGET CMAKE_ARGS...
    dir=$1 target=$2
    shift 2
    cmake -S . -B "$dir" "$@" >/dev/null && cmake --build "$dir" -j "$JOBS" --target "$target" -- --no-print-directory
}

# ctest_pass DIR NAME [ENV...]: the suite of DIR, its JUnit file and skip log in $R
ctest_pass() {
    dir=$1 name=$2
    shift 2
    rm -f "$dir/skips.log"
    (cd "$dir" && env "$@" ctest --output-on-failure -j "$TEST_JOBS" --output-junit "$R/$name.xml")
}

# The ASan pass: a test that failed is run once more only when its output
# shows LeakSanitizer's exit-time tracer crashing and no sanitizer finding
# (tests/report.py lsan-retries); the log says which. Any other failure fails.
asan_pass() {
    ctest_pass "$ASAN_BUILD" asan $SAN_ENV && return 0
    retry=$(python3 tests/report.py lsan-retries "$R/asan.xml")
    failures=$(python3 - "$R/asan.xml" <<'EOF'
import sys, xml.etree.ElementTree as ET
print(" ".join(tc.get("name") for tc in ET.parse(sys.argv[1]).getroot().iter("testcase")
               if tc.get("status") in ("fail", "failed")))
EOF
)
    for t in $failures; do
        case " $retry " in
        *" $t "*) ;;
        *) echo "asan: $t failed with no LeakSanitizer tracer crash in its output: no rerun"; return 1 ;;
        esac
    done
    for t in $retry; do
        echo "asan: $t failed on LeakSanitizer's exit-time tracer crash ('Tracer caught signal'): run once more"
        (cd "$ASAN_BUILD" && env $SAN_ENV ctest --output-on-failure -R "^$t\$") || return 1
        echo "$t" >>"$R/asan.reruns" # the report counts it as passed on its rerun, and says so
    done
    return 0
}

# disk_check: the suite writes its three builds (with the kernel cache),
# the test models' cache and temporary model files (F32 conversions, tiny
# and K-quant files) of up to ~1.5 GB at once under $TMPDIR. A full disk
# fails dozens of tests at random with "No space left on device" or a
# kernel build that cannot write its cache; say it once, before anything
# runs. SUITE_DISK_MB: the space the whole suite needs (its peak on a clean
# clone, caches empty: 9.6 GB on 2026-12-05, most of it the three builds; see
# docs/testing.md; 12 GB leaves a margin); SUITE_DISK_MB=0 skips the check.
SUITE_DISK_MB=${SUITE_DISK_MB:-12000}
disk_check() {
    [ "$SUITE_DISK_MB" -gt 0 ] || return 0
    tmp=${TMPDIR:-/tmp}
    have=$(df -Pm "$(dirname "$BUILD")" | awk 'NR == 2 { print $4 }')
    have_tmp=$(df -Pm "$tmp" | awk 'NR == 2 { print $4 }')
    [ "$have_tmp" -lt "$have" ] && have=$have_tmp
    where=$(dirname "$BUILD")
    [ "$(df -P "$where" | awk 'NR == 2 { print $1 }')" = "$(df -P "$tmp" | awk 'NR == 2 { print $1 }')" ] ||
        where="$where or $tmp"
    if [ "$have" -lt "$SUITE_DISK_MB" ]; then
        echo "make test: $have MB free under $where; the suite needs about $SUITE_DISK_MB MB" \
            "(three builds, the model cache, temporary model files). Free some space (or set SUITE_DISK_MB)."
        return 1
    fi
    echo "disk: $have MB free, about $SUITE_DISK_MB MB needed"
}

stage deps sh scripts/setup.sh || exit 1
stage disk disk_check || exit 1
case " $STAGES " in *" release "* | *" asan "* | *" fuzz "*)
    stage build configure_build "$BUILD" all -DCMAKE_BUILD_TYPE=Release || { failed=1; STAGES=; } ;;
esac
case " $STAGES " in *" release "* | *" asan "*)
    stage models "$BUILD/clinfer" pull $TEST_MODELS || failed=1 ;;
esac
for s in $STAGES; do
    case $s in
    release) stage release ctest_pass "$BUILD" release ;;
    asan)
        stage asan-build configure_build "$ASAN_BUILD" all -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_SANITIZE=ON \
            -DCLINFER_TEST_KCACHE="$KCACHE" &&
            stage asan asan_pass ;;
    fuzz)
        stage fuzz-build configure_build "$FUZZ_BUILD" fuzz_all -DCMAKE_C_COMPILER=clang \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_FUZZ=ON &&
            stage fuzz sh tests/fuzz/run.sh "$FUZZ_BUILD" "$BUILD/tiny_gguf" "$FUZZ_SECONDS" ;;
    *) echo "suite.sh: unknown stage '$s' (release, asan, fuzz)"; exit 2 ;;
    esac
done

python3 tests/report.py summary "$R/stages.tsv" "release=$R/release.xml:$BUILD/skips.log" \
    "asan=$R/asan.xml:$ASAN_BUILD/skips.log" || failed=1
[ $failed -eq 0 ] && echo "make test: passed" || echo "make test: FAILED"
exit $failed

# Skipping from a shell test, the one way (sourced: . tests/support/skip.sh).
# Each skip prints one line and appends "TEST<TAB>KIND<TAB>REASON" to
# $CLINFER_SKIP_LOG (ctest sets it), which `make test` lists at its end
# (tests/report.py). KIND is
#   capability  this machine lacks something no install step brings;
#   missing     anything else (a tool scripts/setup.sh installs, a model
#               `make test` fetches): under CI=true the report fails on it.
# The log names the test by $CLINFER_TEST_NAME (ctest sets it), else the script.

# skip_note KIND REASON...: a part of the test did not run; it goes on.
skip_note() {
    _kind=$1
    shift
    echo "SKIPPED ($_kind): $*"
    if [ -n "${CLINFER_SKIP_LOG:-}" ]; then
        printf '%s\t%s\t%s\n' "${CLINFER_TEST_NAME:-$(basename "$0" .sh)}" "$_kind" "$*" >>"$CLINFER_SKIP_LOG"
    fi
}

# skip_test KIND REASON...: the whole test cannot run; exit 77 (ctest's
# SKIP_RETURN_CODE for these tests).
skip_test() {
    skip_note "$@"
    exit 77
}

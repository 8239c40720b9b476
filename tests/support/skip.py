"""Skipping from a Python test, the one way: as tests/support/skip.sh does
(one printed line, a line in $CLINFER_SKIP_LOG, kind "capability" or
"missing"; tests/report.py lists them and fails CI on "missing")."""
import os
import sys


def note(test, kind, reason):
    """A part of `test` did not run; it goes on."""
    assert kind in ("capability", "missing"), kind
    print(f"SKIPPED ({kind}): {reason}", flush=True)
    log = os.environ.get("CLINFER_SKIP_LOG")
    if log:
        reason = " ".join(str(reason).split())
        with open(log, "a") as f:
            f.write(f"{test}\t{kind}\t{reason}\n")


def skip(test, kind, reason):
    """The whole test cannot run: exit 77 (ctest's SKIP_RETURN_CODE)."""
    note(test, kind, reason)
    sys.exit(77)

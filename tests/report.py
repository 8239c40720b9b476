#!/usr/bin/env python3
"""What `make test` prints at its end, and the ASan pass's one rerun rule.

  report.py summary STAGES_TSV [NAME=JUNIT_XML[:SKIP_LOG]] ...
      each stage's wall time (STAGES_TSV: "stage<TAB>seconds<TAB>status"
      lines, written by tests/suite.sh), the ten slowest tests over every
      ctest pass named, and every skip: the lines tests appended to their
      pass's SKIP_LOG (TU_SKIP in C, tests/support/skip.sh and skip.py) and
      any test ctest reports skipped without such a line. Under CI=true it
      exits 1 when a skip is not of kind "capability" (something this
      machine lacks that no install step brings), since `make test`
      installs and fetches everything else; 0 otherwise.

  report.py lsan-retries JUNIT_XML
      the failed tests of an ASan pass whose only trouble is
      LeakSanitizer's exit-time tracer crashing ("Tracer caught signal",
      seen while PoCL's worker threads live): their names, one a line.
      Any other failure is not listed: tests/suite.sh fails on it at once.
"""
import os
import sys
import xml.etree.ElementTree as ET

TRACER = "Tracer caught signal"
# what a real finding prints: any of these in the output means no rerun
FINDINGS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer: detected", "runtime error:", "SUMMARY: UndefinedBehaviorSanitizer",
            "SUMMARY: AddressSanitizer")


def cases(junit):
    """(name, status, seconds, output) for each test of a ctest JUnit file."""
    if not os.path.exists(junit):
        return []
    out = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        status = tc.get("status") or ("fail" if tc.find("failure") is not None else
                                      "skipped" if tc.find("skipped") is not None else "run")
        text = "".join(e.text or "" for e in tc.iter() if e.tag in ("system-out", "failure", "system-err"))
        out.append((tc.get("name"), status, float(tc.get("time") or 0), text))
    return out


def lsan_retries(junit):
    for name, status, _, text in cases(junit):
        if status in ("fail", "failed") and TRACER in text and not any(f in text for f in FINDINGS):
            print(name)
    return 0


def fmt_time(s):
    return f"{int(s // 60)} min {s % 60:04.1f} s" if s >= 60 else f"{s:.1f} s"


def summary(stages_tsv, passes):
    print("\n== make test: stage wall times")
    total = 0.0
    if os.path.exists(stages_tsv):
        for line in open(stages_tsv):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            stage, secs, status = parts[0], float(parts[1]), parts[2]
            total += secs
            print(f"  {stage:<14} {fmt_time(secs):>14}  {status}")
    print(f"  {'total':<14} {fmt_time(total):>14}")

    timed, skips, unexplained, rerun_notes = [], [], [], []
    for arg in passes:
        name, _, files = arg.partition("=")
        junit, _, skip_log = files.partition(":")
        logged = []
        if skip_log and os.path.exists(skip_log):
            for line in open(skip_log, errors="replace"):
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3:
                    logged.append(parts)
        for test, kind, reason in logged:
            skips.append((name, test, kind, reason))
        reruns_file = os.path.splitext(junit)[0] + ".reruns"  # tests/suite.sh: passed on a rerun after a tracer crash
        reruns = set(open(reruns_file).read().split()) if os.path.exists(reruns_file) else set()
        for test, status, secs, _ in cases(junit):
            if test in reruns:
                status = "passed on its rerun after LeakSanitizer's tracer crash"
                rerun_notes.append((name, test))
            timed.append((secs, name, test, status))
            if status in ("skipped", "notrun") and not any(t == test for t, _, _ in logged):
                unexplained.append((name, test))

    print("\n== the ten slowest tests")
    for secs, name, test, status in sorted(timed, reverse=True)[:10]:
        print(f"  {fmt_time(secs):>14}  {name:<8} {test}{'' if status in ('run', 'passed') else '  (' + status + ')'}")

    for name, test in rerun_notes:
        print(f"\n{name}: {test} passed on its rerun after LeakSanitizer's exit-time tracer crash")
    ran = [t for t in timed if t[3] not in ("notrun", "skipped", "disabled")]
    n_failed = sum(1 for t in ran if t[3] not in ("run", "passed") and not t[3].startswith("passed"))
    n_skipped = len(timed) - len(ran)
    ci = os.environ.get("CI") == "true"
    bad = [s for s in skips if s[2] != "capability"]
    print(f"\n== skips: {len(skips) + len(unexplained)}")
    for name, test, kind, reason in skips:
        print(f"  {name:<8} {test}  [{kind}] {reason}")
    for name, test in unexplained:
        print(f"  {name:<8} {test}  [no reason given] skipped by ctest without a line in the skip log")
    if not skips and not unexplained:
        print("  none")
    rc = 0
    if ci and (bad or unexplained):
        print(f"\nFAIL: {len(bad) + len(unexplained)} skip(s) under CI=true that are not a capability this machine lacks "
              "(`make test` installs and fetches everything else)")
        rc = 1
    # one closing line over every ctest pass (a test's own partial skips are listed above)
    print(f"\nsuite: {len(ran) - n_failed} passed, {n_failed} failed, {n_skipped} skipped")
    return rc


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "summary":
        return summary(sys.argv[2], sys.argv[3:])
    if len(sys.argv) == 3 and sys.argv[1] == "lsan-retries":
        return lsan_retries(sys.argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

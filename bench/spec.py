#!/usr/bin/env python3
"""Speculative decoding by prompt lookup against plain decoding, through
`clinfer run` (greedy): interleaved rounds of plain and --draft-max D on
prompts whose answer quotes the prompt (a list to repeat, code to copy) and
one that does not; per-round ratio of the generation speeds `run` prints,
medians; the texts must be the same (exits 1 otherwise).

    python3 bench/spec.py [--rounds 3] [--draft 8,16] [-n 128] [--bin build/clinfer] [-m MODEL]
"""
import argparse, re, statistics, subprocess, sys

PROMPTS = {
    "list": "Repeat the following list exactly, one item per line:\napple, banana, cherry, date, elderberry, fig, grape, "
            "honeydew, kiwi, lemon, mango, nectarine, orange, papaya, quince, raspberry, strawberry, tangerine, ugli "
            "fruit, vanilla, watermelon.\nHere is the list repeated exactly:\napple, banana,",
    "code": "Copy this C function exactly:\n\nint sum(const int *a, int n) {\n    int s = 0;\n    for (int i = 0; i < n; i++)"
            "\n        s += a[i];\n    return s;\n}\n\nint max(const int *a, int n) {\n    int m = a[0];\n    for (int i = 1; i "
            "< n; i++)\n        if (a[i] > m) m = a[i];\n    return m;\n}\n\nHere is the copy:\n\nint sum(const int *a, int n) {",
    "story": "Once upon a time, in a small village by the sea,",
}
SPEED = re.compile(r"generated (\d+) tokens, ([\d.]+) t/s(?: \| drafted (\d+), accepted (\d+))?")


def run(binary, model, prompt, n, draft):
    argv = [binary, "run", "-p", prompt, "-n", str(n), "--draft-max", str(draft)] + (["-m", model] if model else [])
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    m = SPEED.search(p.stderr)
    return p.stdout, int(m.group(1)), float(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--draft", default="8,16")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--bin", default="build/clinfer")
    ap.add_argument("-m", default=None)
    a = ap.parse_args()
    drafts = [0] + [int(x) for x in a.draft.split(",")]
    same = True
    print("| prompt | --draft-max | generated | t/s (median) | drafted | accepted | speed-up (median of rounds) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, prompt in PROMPTS.items():
        res = {d: [] for d in drafts}
        for _ in range(a.rounds):
            for d in drafts:
                res[d].append(run(a.bin, a.m, prompt, a.n, d))
        for d in drafts:
            same &= all(r[0] == res[0][0][0] for r in res[d])
            ratio = [r[2] / p[2] for r, p in zip(res[d], res[0])]
            last = res[d][-1]
            print(f"| {name} | {d} | {last[1]} | {statistics.median(r[2] for r in res[d]):.1f} | {last[3]} | {last[4]} |"
                  f" {statistics.median(ratio):.2f}× (min {min(ratio):.2f}, max {max(ratio):.2f}) |", flush=True)
    print("texts identical to plain decoding:", "yes" if same else "NO")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Speculative decoding with a draft model against plain decoding, through
`clinfer run --chat`: interleaved rounds of plain and `-md DRAFT` on free
text (a story, an explanation, code), greedy and sampled (--temp T, a seed
per round, the same for both); per-round ratio of the generation speeds
`run` prints, medians. Greedy texts must be the same as plain decoding's
(exits 1 otherwise); sampled texts differ (speculation draws from the
random stream otherwise: the same law, other tokens).

    python3 bench/spec_draft.py -m TARGET -md DRAFT [--rounds 3] [-n 128] [--temp 0.8] [--draft-max 16]
        [--bin build/clinfer] [--modes greedy,sampled]
"""
import argparse, re, statistics, subprocess, sys

PROMPTS = {
    "story": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "explanation": "Explain how a refrigerator keeps food cold, step by step.",
    "code": "Write a Python function that checks whether a string is a palindrome, with a docstring and two examples.",
}
SPEED = re.compile(r"eval (\d+) tokens, ([\d.]+) t/s \| generated (\d+) tokens(?: \| drafted (\d+), accepted (\d+))?")


def run(a, prompt, temp, seed, draft):
    argv = [a.bin, "run", "--chat", "-m", a.m, "-p", prompt, "-n", str(a.n), "--temp", str(temp), "--seed", str(seed)]
    if draft:
        argv += ["-md", a.md, "--draft-max", str(a.draft_max)]
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    m = SPEED.search(p.stderr)
    return p.stdout, int(m.group(3)), float(m.group(2)), int(m.group(4) or 0), int(m.group(5) or 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", required=True)
    ap.add_argument("-md", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--temp", type=float, default=0.8)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--bin", default="build/clinfer")
    ap.add_argument("--modes", default="greedy,sampled", help="greedy, sampled or both")
    a = ap.parse_args()
    same = True
    print("| prompt | sampling | plain t/s (median) | -md t/s (median) | drafted | accepted | speed-up (median of rounds) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, prompt in PROMPTS.items():
        modes = a.modes.split(",")
        for temp in [t for t, name in ((0, "greedy"), (a.temp, "sampled")) if name in modes]:
            plain, spec = [], []
            for r in range(a.rounds):  # interleaved: the machine's drift hits both alike
                plain.append(run(a, prompt, temp, 100 + r, False))
                spec.append(run(a, prompt, temp, 100 + r, True))
            if temp == 0:
                same &= all(s[0] == p[0] for s, p in zip(spec, plain))
            ratio = [s[2] / p[2] for s, p in zip(spec, plain)]
            drafted, accepted = sum(s[3] for s in spec), sum(s[4] for s in spec)
            print(f"| {name} | {'greedy' if temp == 0 else f'--temp {temp}'} |"
                  f" {statistics.median(p[2] for p in plain):.1f} | {statistics.median(s[2] for s in spec):.1f} |"
                  f" {drafted} | {accepted} ({100 * accepted / max(drafted, 1):.0f}%) |"
                  f" {statistics.median(ratio):.2f}× (min {min(ratio):.2f}, max {max(ratio):.2f}) |", flush=True)
    print("greedy texts identical to plain decoding:", "yes" if same else "NO")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The speeds line of `clinfer run` against `clinfer bench` on the same lengths (issue 29).

usage: run_vs_bench.py CLINFER [-m MODEL] [--rounds 7] [--tolerance 0.10]

Two measurements of the same thing, taken in turns: each round runs `bench
-p 512 -n 64 -r 1`, then `run -p <512-token text> -n 64` (its "prompt
eval" is bench's pp512: a prompt's pass from an empty context), then `run
-p <a few tokens> -n 65` (its "eval", 64 tokens each evaluated after the one
sampled from the prompt's logits, from a near-empty context, is bench's
tg64). The figure is the median over rounds of each round's run/bench
ratio, so a machine whose speed drifts (other people's jobs) moves both
sides of a ratio alike. Exit 1 when a median is further than the tolerance
from 1; the figures go to bench/RESULTS.md ('Speeds line against bench')."""
import argparse
import json
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("clinfer")
ap.add_argument("-m", dest="model", default=None)
ap.add_argument("--tolerance", type=float, default=0.10)
ap.add_argument("--rounds", type=int, default=7)
a = ap.parse_args()
model = ["-m", a.model] if a.model else []


def n_tokens(text):
    r = subprocess.run([a.clinfer, "tokenize", *model, "-p", text], capture_output=True, text=True, check=True)
    return len(r.stdout.split())


# a text of exactly 512 tokens (BOS included where the model adds one)
words = "the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches".split()
text = ""
i = 0
while n_tokens(text) < 512:
    text += (" " if text else "") + " ".join(words[(i + k) % len(words)] for k in range(8))
    i += 8
while n_tokens(text) > 512:
    text = text[: text.rfind(" ")]
if n_tokens(text) != 512:  # a last word of several tokens
    text = text[: text.rfind(" ")] + " a"
n = n_tokens(text)


def run_stats(prompt, n_gen):
    r = subprocess.run([a.clinfer, "run", *model, "-p", prompt, "-n", str(n_gen)], capture_output=True, text=True)
    line = [l for l in r.stderr.splitlines() if "| prompt eval" in l]
    if r.returncode != 0 or not line:
        sys.exit(f"run failed: {r.stderr}")
    m = re.search(r"prompt eval (\d+) tokens, ([0-9.]+) t/s \| (?:eval (\d+) tokens, ([0-9.]+) t/s|eval none)", line[-1])
    return line[-1], int(m.group(1)), float(m.group(2)), int(m.group(3) or 0), float(m.group(4) or 0)


def bench():
    b = subprocess.run([a.clinfer, "bench", *model, "-p", "512", "-n", "64", "-r", "1", "--json"],
                       capture_output=True, text=True)
    if b.returncode != 0:
        sys.exit(f"bench failed: {b.stderr}")
    bj = json.loads(b.stdout)[0]
    return bj["pp"]["tps"], bj["tg"]["tps"]


def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


pp_ratio, tg_ratio = [], []
print(f"prompt: {n} tokens; {a.rounds} rounds of bench pp512/tg64, run's prompt eval, run's eval (t/s)")
for r in range(a.rounds):
    pp_b, tg_b = bench()
    line1, np1, pp_run, _, _ = run_stats(text, 64)
    line2, _, _, ne2, tg_run = run_stats(" ".join(words[:10]), 65)  # greedy on a pangram: no early end
    if np1 != 512:
        sys.exit(f"FAIL the prompt eval counted {np1} tokens, not 512")
    if ne2 < 16:  # the model ended its text at once: too few tokens to time
        sys.exit(f"the text ended after {ne2} eval tokens: nothing to compare")
    pp_ratio.append(pp_run / pp_b)
    tg_ratio.append(tg_run / tg_b)
    print(f"round {r + 1}: bench {pp_b:.1f} / {tg_b:.1f}; run {pp_run:.1f} ({np1} tokens) / {tg_run:.1f} "
          f"({ne2} tokens); ratios {pp_ratio[-1]:.3f} / {tg_ratio[-1]:.3f}")
print("last run lines:\n  " + line1 + "\n  " + line2)
bad = 0
for what, rs in (("prompt eval / pp512", pp_ratio), ("eval / tg64", tg_ratio)):
    m = median(rs)
    ok = abs(m - 1) <= a.tolerance
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: median ratio {m:.3f} (min {min(rs):.3f}, max {max(rs):.3f}), "
          f"allowed 1 ± {a.tolerance:.2f}")
sys.exit(1 if bad else 0)

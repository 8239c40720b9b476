#!/usr/bin/env python3
"""The speeds line of `clinfer run` against `clinfer bench` on the same lengths (issue 29).

usage: run_vs_bench.py CLINFER [-m MODEL] [--tolerance 0.10] [--noise 0.05]

Two measurements of the same thing in one sitting, not a speed threshold:
`run -p <512-token text> -n 64`'s "prompt eval" is bench's pp512 (a
prompt's pass from an empty context); `run -p <a few tokens> -n 65`'s
"eval" (64 tokens each evaluated after the one sampled from the prompt's
logits, from a near-empty context) is bench's tg64. Each pair must agree
within the tolerance plus a noise margin: bench's own spread (its stddev
over -r runs) where it measures one, else --noise. On a machine shared with
other work the two can still drift apart; the figures go to
bench/RESULTS.md ('Speeds line against bench'). Exit 1 when a pair differs
by more."""
import argparse
import json
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("clinfer")
ap.add_argument("-m", dest="model", default=None)
ap.add_argument("--tolerance", type=float, default=0.10)
ap.add_argument("--noise", type=float, default=0.05)
ap.add_argument("-r", dest="reps", type=int, default=3)
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


b = subprocess.run([a.clinfer, "bench", *model, "-p", "512", "-n", "64", "-r", str(a.reps), "--json"],
                   capture_output=True, text=True)
if b.returncode != 0:
    sys.exit(f"bench failed: {b.stderr}")
bj = json.loads(b.stdout)[0]
line1, np1, pp_run, _, _ = run_stats(text, 64)
line2, _, _, ne2, tg_run = run_stats(" ".join(words[:10]), 65)  # greedy on a pangram: no early end
pp_b, tg_b = bj["pp"]["tps"], bj["tg"]["tps"]
print(f"prompt: {n} tokens; bench pp512 {pp_b:.1f} ± {bj['pp']['stddev']:.1f} t/s, tg64 {tg_b:.1f} ± "
      f"{bj['tg']['stddev']:.1f} t/s")
print("run:  ", line1)
print("run:  ", line2)
bad = 0
for what, got, want, sd, cnt in (("prompt eval vs pp512", pp_run, pp_b, bj["pp"]["stddev"], np1),
                                 ("eval vs tg64", tg_run, tg_b, bj["tg"]["stddev"], ne2)):
    noise = sd / want if a.reps > 1 and sd > 0 else a.noise
    lim = a.tolerance + noise
    d = abs(got - want) / want
    ok = d <= lim
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got:.1f} against {want:.1f} t/s ({cnt} tokens): {100 * d:.1f}% "
          f"apart, allowed {100 * lim:.1f}%")
if ne2 < 16:  # the model ended its text at once: too few tokens to time
    print(f"SKIP eval vs tg64: the text ended after {ne2} eval tokens")
    bad -= not (ne2 == 0 or abs(tg_run - tg_b) / tg_b <= a.tolerance + a.noise)
if np1 != 512:
    print(f"FAIL the prompt eval counted {np1} tokens, not 512")
    bad += 1
sys.exit(1 if bad else 0)

#!/usr/bin/env python3
"""clinfer against llama.cpp (through llama-cpp-python) on one GGUF, same
prompt and generation lengths, same threads, interleaved in one run.

  python3 bench/compare.py [-m MODEL] [-p 512] [-n 128] [-r 3] [--rounds 3] [--json FILE]

Each round measures llama.cpp (pp then tg, r repetitions, medians), then
`clinfer bench --json` with the same settings; the ratio of each round is
clinfer / llama.cpp and the table quotes the median ratio over rounds, since
the machine's speed drifts between rounds but not within one. Beside it,
each engine's fastest round against the other's: on a machine shared with
other work, what each reaches when it is quietest.
--json FILE also writes the table, each round and clinfer's last bench
record as JSON (bench/plot.py draws it).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_path(m):
    """-m as clinfer reads it: a file, else a name of models/catalogue.tsv
    (empty: its first, the default) in the model cache."""
    if m and os.path.exists(m):
        return m
    with open(os.path.join(ROOT, "models", "catalogue.tsv")) as f:
        rows = [line.split("\t") for line in f if line.strip() and not line.startswith("#")]
    row = next((r for r in rows if r[0] == m), None) if m else rows[0]
    if row is None:
        return m
    base = os.environ.get("CLINFER_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "models")
    return os.path.join(base, row[1])


def peer_round(llm, n_vocab, p, n, reps):
    rnd = random.Random(1)
    toks = [rnd.randrange(n_vocab) for _ in range(max(p, n) + 1)]
    pp, tg = [], []
    for _ in range(reps):
        if p:
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(toks[:p])
            pp.append(p / (time.perf_counter() - t0))
        if n:
            llm.reset()
            t0 = time.perf_counter()
            for t in toks[:n]:
                llm.eval([t])
            tg.append(n / (time.perf_counter() - t0))
    return (statistics.median(pp) if pp else None, statistics.median(tg) if tg else None)


def clinfer_round(binary, model, p, n, reps, device, threads):
    cmd = [binary, "bench", "-m", model, "-p", str(p), "-n", str(n), "-r", str(reps), "--json"]
    if device:
        cmd += ["--device", device]
    # the same threads on PoCL's CPU device as llama.cpp's (ignored elsewhere)
    env = dict(os.environ)
    env.setdefault("POCL_MAX_PTHREAD_COUNT", str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out)[0]
    return (r["pp"]["tps"] if p else None, r["tg"]["tps"] if n else None, r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="", help="a GGUF file or a catalogue name (default: the default model)")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default=None)
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    a = ap.parse_args()
    a.model = model_path(a.model)

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.p + a.n + 16, n_batch=max(a.p, 1), n_ubatch=max(a.p, 1),
                          n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    n_vocab = llm.n_vocab()
    peer_round(llm, n_vocab, min(a.p, 32), 4, 1)  # warm-up
    rows = []
    for i in range(a.rounds):
        ppl, tgl = peer_round(llm, n_vocab, a.p, a.n, a.r)
        ppc, tgc, rec = clinfer_round(a.clinfer, a.model, a.p, a.n, a.r, a.device, a.threads)
        rows.append((ppl, ppc, tgl, tgc, os.getloadavg()[0]))
        print(f"round {i + 1}: llama.cpp pp{a.p} {ppl or 0:.1f} tg{a.n} {tgl or 0:.1f} | "
              f"clinfer pp{a.p} {ppc or 0:.1f} tg{a.n} {tgc or 0:.1f} t/s | load {rows[-1][4]:.2f}", file=sys.stderr)

    def med(k):
        v = [r[k] for r in rows if r[k]]
        return statistics.median(v) if v else 0

    def ratio(a_, b_):
        v = [r[b_] / r[a_] for r in rows if r[a_] and r[b_]]
        return statistics.median(v) if v else 0

    def best(a_, b_):  # each engine's fastest round: its speed when the machine was quietest
        pa, pb = max((r[a_] or 0) for r in rows), max((r[b_] or 0) for r in rows)
        return pb / pa if pa else 0

    name = os.path.basename(a.model)
    # other work on the machine slows llama.cpp's spinning threads far more
    # than PoCL's: the 1-minute load average after each round says how quiet it was
    print(f"model {name}, llama-cpp-python {llama_cpp.__version__}, {a.threads} threads, "
          f"{a.rounds} rounds x {a.r} reps (medians), load {max(r[4] for r in rows):.2f} at most")
    print("| test | llama.cpp t/s | clinfer t/s | clinfer / llama.cpp (median of per-round ratios) | best round / best round |")
    print("| --- | ---: | ---: | ---: | ---: |")
    if a.p:
        print(f"| pp{a.p} | {med(0):.1f} | {med(1):.1f} | {ratio(0, 1):.2f}x | {best(0, 1):.2f}x |")
    if a.n:
        print(f"| tg{a.n} | {med(2):.1f} | {med(3):.1f} | {ratio(2, 3):.2f}x | {best(2, 3):.2f}x |")
    if a.json:
        tests = []
        if a.p:
            tests.append({"test": f"pp{a.p}", "llama_cpp_tps": med(0), "clinfer_tps": med(1), "ratio": ratio(0, 1),
                          "best_ratio": best(0, 1)})
        if a.n:
            tests.append({"test": f"tg{a.n}", "llama_cpp_tps": med(2), "clinfer_tps": med(3), "ratio": ratio(2, 3),
                          "best_ratio": best(2, 3)})
        doc = {"model": name, "file_type": rec["model"].split(" ", 1)[-1], "llama_cpp_python": llama_cpp.__version__,
               "threads": a.threads, "rounds": a.rounds, "reps": a.r, "tests": tests,
               "per_round": [dict(zip(("llama_cpp_pp", "clinfer_pp", "llama_cpp_tg", "clinfer_tg", "load"), r))
                             for r in rows],
               "clinfer_last": rec}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

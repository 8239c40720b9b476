# Interleaved rounds of `clinfer bench` under several tunings (CLINFER_TUNE),
# optionally beside llama.cpp's own llama-bench, on one model: pp512/tg128
# medians and the medians of per-round ratios against the first entry.
#
#   python3 bench/widths.py MODEL [--rounds 5] [--llama-bench PATH] [--] TUNE ...
#   (a TUNE of "-" is the device's own tuning)
#
# Each round runs every entry once, in order, so drift falls on all alike.
# The environment passes through: POCL_KERNELLIB_NAME=avx2 makes PoCL compile
# for LLVM's haswell (AVX2 only, 16 vector registers) on an AVX-512 CPU.
import argparse, json, os, statistics, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("tunes", nargs="+")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--reps", type=int, default=2, help="clinfer bench -r and llama-bench -r per round")
ap.add_argument("--llama-bench", help="llama-bench binary: its pp512/tg128 at 2 threads each round")
ap.add_argument("--clinfer", default="build/clinfer")
a = ap.parse_args()


def clinfer(tune):
    env = dict(os.environ)
    if tune != "-":
        env["CLINFER_TUNE"] = tune
    out = subprocess.run([a.clinfer, "bench", "-m", a.model, "-p", "512", "-n", "128", "-r", str(a.reps), "--json"],
                         env=env, capture_output=True, text=True, check=True).stdout
    d = json.loads(out)[0]
    return d["pp"]["tps"], d["tg"]["tps"], d["tg"].get("roof_share", 0.0)


def llama_bench():
    out = subprocess.run([a.llama_bench, "-m", a.model, "-p", "512", "-n", "128", "-t", "2", "-r", str(a.reps),
                          "-o", "json"], capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == 512)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] == 128)
    return pp, tg, 0.0


entries = [("clinfer " + t, lambda t=t: clinfer(t)) for t in a.tunes]
if a.llama_bench:
    entries.append(("llama-bench", llama_bench))
res = {name: [] for name, _ in entries}
for r in range(a.rounds):
    for name, fn in entries:
        res[name].append(fn())
        pp, tg, share = res[name][-1]
        print("round %d  %-44s pp512 %8.1f  tg128 %7.1f  copy roof %4.0f%%" % (r, name, pp, tg, 100 * share), flush=True)

base = entries[0][0]
print("\nmedians over %d rounds; ratios: median of per-round ratios against %s" % (a.rounds, base))
for name, _ in entries:
    pp = statistics.median(x[0] for x in res[name])
    tg = statistics.median(x[1] for x in res[name])
    rpp = statistics.median(x[0] / b[0] for x, b in zip(res[name], res[base]))
    rtg = statistics.median(x[1] / b[1] for x, b in zip(res[name], res[base]))
    share = statistics.median(x[2] for x in res[name])
    print("%-44s pp512 %8.1f (%.2fx)  tg128 %7.1f (%.2fx)  copy roof %3.0f%%" % (name, pp, rpp, tg, rtg, 100 * share))

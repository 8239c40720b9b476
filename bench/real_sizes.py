#!/usr/bin/env python3
"""clinfer against llama.cpp's llama-bench on real-size models (issue 39):
load time (warm, and cold with --cold), peak memory, pp512 and tg128, in
interleaved rounds.

  python3 bench/real_sizes.py FILE.gguf [FILE.gguf ...] [--rounds 3] [-r 3] \\
      [-p 512] [-n 128] [-t 2] [--cold] [--llama-bench PATH] [--clinfer PATH] [--out DIR]

FILEs: bench/shapes.py's random-weight GGUFs (any GGUF works). llama-bench:
bench/peer_build.sh's (default $XDG_CACHE_HOME/clinfer/peer/bin/llama-bench).
Each round, for each file, in this order:
  1. clinfer's load: `clinfer run -m F -p x -n 1 -t T -c 64` under
     /usr/bin/time: the whole process's wall seconds and peak RSS (VmHWM,
     %M), and the load seconds clinfer prints on stderr ("| load 4.55 s |":
     the model's load_seconds, kernels and the prompt not included). -c 64
     keeps the KV cache out of the memory figure, as llama-bench's is.
  2. llama-bench's load: `llama-bench -m F -p 0 -n 4 -r 1 -t T` under
     /usr/bin/time: the whole process (load, one warm-up and one 4-token run).
  3. `clinfer bench -m F -p P -n N -r R --json` (POCL_MAX_PTHREAD_COUNT=T).
  4. `llama-bench -m F -p P -n N -r R -t T -o json`.
With --cold, the file's pages are dropped from the page cache
(posix_fadvise DONTNEED on that file only: the rest of the machine's cache is
left alone) before an extra clinfer load and an extra llama-bench load,
reported as the cold columns.
The table gives each figure's median over rounds and clinfer / llama.cpp as
the median of the per-round ratios (bench/compare.py's rule: the machine's
speed drifts between rounds more than within one; ratios are "higher is
better for clinfer": llama.cpp's time over clinfer's for loads, clinfer's
t/s over llama.cpp's for speeds, llama.cpp's RSS over clinfer's). ttft is
an estimate, not a measurement: the warm process wall of step 1/2 plus P
tokens at the pp rate (the time to the first token of a P-token prompt,
load included).
Writes OUT/real_sizes-<stamp>.json (default bench/results/issue39/): the
machine, commands, every round's raw figures and the medians.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "peer", "bin")
LOAD_RE = re.compile(r"\| load ([0-9.]+) s")


def timed(cmd, env=None):
    """(stdout, stderr, wall seconds, peak RSS bytes) of cmd under /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        p = subprocess.run(["/usr/bin/time", "-o", tf.name, "-f", "%e %M"] + cmd, capture_output=True, text=True,
                           env=env)
        if p.returncode != 0:
            raise SystemExit(f"real_sizes: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        wall, kb = tf.read().split()[-2:]
    return p.stdout, p.stderr, float(wall), int(kb) * 1024


def evict(path):
    """Drop path's pages from the page cache (this file only)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def clinfer_env(t):
    env = dict(os.environ)
    env["POCL_MAX_PTHREAD_COUNT"] = str(t)
    return env


def clinfer_load(a, f):
    _, err, wall, rss = timed([a.clinfer, "run", "-m", f, "-p", "x", "-n", "1", "-t", str(a.t), "-c", "64"],
                              clinfer_env(a.t))
    m = LOAD_RE.search(err)
    return {"load_s": float(m.group(1)) if m else None, "wall_s": wall, "rss": rss}


def peer_load(a, f):
    _, _, wall, rss = timed([a.llama_bench, "-m", f, "-p", "0", "-n", "4", "-r", "1", "-t", str(a.t)])
    return {"wall_s": wall, "rss": rss}


def clinfer_speed(a, f):
    out, _, _, _ = timed([a.clinfer, "bench", "-m", f, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "--json"],
                         clinfer_env(a.t))
    rec = json.loads(out)[0]
    return {"pp": rec["pp"]["tps"] if a.p else None, "tg": rec["tg"]["tps"] if a.n else None,
            "tg_roof_share": rec.get("tg", {}).get("roof_share"), "copy_gbs": rec["roof"]["copy_gbs"],
            "model": rec["model"], "device": rec["device"]}


def peer_speed(a, f):
    out, _, _, _ = timed([a.llama_bench, "-m", f, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-t", str(a.t),
                          "-o", "json"])
    recs = json.loads(out)
    pp = next((r["avg_ts"] for r in recs if r["n_prompt"] == a.p and r["n_gen"] == 0), None)
    tg = next((r["avg_ts"] for r in recs if r["n_gen"] == a.n and r["n_prompt"] == 0), None)
    return {"pp": pp, "tg": tg, "model_type": recs[0].get("model_type"), "build": recs[0].get("build_commit"),
            "cpu": recs[0].get("cpu_info")}


def one_round(a, f):
    r = {}
    if a.cold:
        evict(f)
        r["clinfer_cold"] = clinfer_load(a, f)
        evict(f)
        r["llama_cold"] = peer_load(a, f)
    r["clinfer_load"] = clinfer_load(a, f)
    r["llama_load"] = peer_load(a, f)
    r["clinfer_speed"] = clinfer_speed(a, f)
    r["llama_speed"] = peer_speed(a, f)
    r["loadavg"] = os.getloadavg()[0]
    return r


def summarize(a, f, rounds):
    """The medians and the per-round ratios' medians of one file."""
    def med(get):
        v = [get(r) for r in rounds if get(r) is not None]
        return statistics.median(v) if v else None

    def ratio(num, den):  # median over rounds of num/den
        v = [num(r) / den(r) for r in rounds if num(r) and den(r)]
        return statistics.median(v) if v else None

    p = a.p
    s = {
        "file": f, "size_bytes": os.path.getsize(f), "model": rounds[0]["clinfer_speed"]["model"],
        "clinfer": {
            "load_s": med(lambda r: r["clinfer_load"]["load_s"]),
            "load_wall_s": med(lambda r: r["clinfer_load"]["wall_s"]),
            "peak_rss": med(lambda r: r["clinfer_load"]["rss"]),
            "pp": med(lambda r: r["clinfer_speed"]["pp"]),
            "tg": med(lambda r: r["clinfer_speed"]["tg"]),
            "tg_roof_share": med(lambda r: r["clinfer_speed"]["tg_roof_share"]),
            "ttft_est_s": med(lambda r: r["clinfer_load"]["wall_s"] + p / r["clinfer_speed"]["pp"]
                              if p and r["clinfer_speed"]["pp"] else None),
        },
        "llama": {
            "load_wall_s": med(lambda r: r["llama_load"]["wall_s"]),
            "peak_rss": med(lambda r: r["llama_load"]["rss"]),
            "pp": med(lambda r: r["llama_speed"]["pp"]),
            "tg": med(lambda r: r["llama_speed"]["tg"]),
            "ttft_est_s": med(lambda r: r["llama_load"]["wall_s"] + p / r["llama_speed"]["pp"]
                              if p and r["llama_speed"]["pp"] else None),
        },
        "ratio": {  # clinfer's advantage: > 1 is clinfer ahead
            "load_wall": ratio(lambda r: r["llama_load"]["wall_s"], lambda r: r["clinfer_load"]["wall_s"]),
            "peak_rss": ratio(lambda r: r["llama_load"]["rss"], lambda r: r["clinfer_load"]["rss"]),
            "pp": ratio(lambda r: r["clinfer_speed"]["pp"], lambda r: r["llama_speed"]["pp"]),
            "tg": ratio(lambda r: r["clinfer_speed"]["tg"], lambda r: r["llama_speed"]["tg"]),
        },
    }
    if a.cold:
        s["clinfer"]["cold_load_s"] = med(lambda r: r["clinfer_cold"]["load_s"])
        s["clinfer"]["cold_wall_s"] = med(lambda r: r["clinfer_cold"]["wall_s"])
        s["llama"]["cold_wall_s"] = med(lambda r: r["llama_cold"]["wall_s"])
        s["ratio"]["cold_wall"] = ratio(lambda r: r["llama_cold"]["wall_s"], lambda r: r["clinfer_cold"]["wall_s"])
    return s


def table(a, sums):
    g = 1e9
    lines = [f"| model | file GB | engine | load s (process wall) | cold wall s | peak RSS GB (x file) | "
             f"pp{a.p} t/s | tg{a.n} t/s | ttft{a.p} est. s |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    fmt = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    for s in sums:
        c, l, r, size = s["clinfer"], s["llama"], s["ratio"], s["size_bytes"]
        name = os.path.basename(s["file"])
        lines.append(f"| {name} | {size / g:.2f} | clinfer | {fmt(c['load_s'])} ({fmt(c['load_wall_s'])}) | "
                     f"{fmt(c.get('cold_wall_s'))} | {c['peak_rss'] / g:.2f} ({c['peak_rss'] / size:.1f}x) | "
                     f"{fmt(c['pp'], 1)} | {fmt(c['tg'], 2)} | {fmt(c['ttft_est_s'])} |")
        lines.append(f"| | | llama-bench | ({fmt(l['load_wall_s'])}) | {fmt(l.get('cold_wall_s'))} | "
                     f"{l['peak_rss'] / g:.2f} ({l['peak_rss'] / size:.1f}x) | {fmt(l['pp'], 1)} | {fmt(l['tg'], 2)} | "
                     f"{fmt(l['ttft_est_s'])} |")
        lines.append(f"| | | clinfer vs llama.cpp | {fmt(r['load_wall'])}x | {fmt(r.get('cold_wall'))}x | "
                     f"{fmt(r['peak_rss'])}x | {fmt(r['pp'])}x | {fmt(r['tg'])}x | |")
    return "\n".join(lines)


def machine():
    name, cores = platform.processor(), os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except Exception:  # noqa: BLE001 - lscpu missing: platform's word
        pass
    mem = None
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    return {"cpu": name, "cores": cores, "mem_bytes": mem}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-r", type=int, default=3, help="repetitions inside each bench (both engines)")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=os.cpu_count(), help="threads for both engines")
    ap.add_argument("--cold", action="store_true", help="also a load with the file out of the page cache")
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--llama-bench", default=os.path.join(PEER, "llama-bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "issue39"))
    a = ap.parse_args()
    for f in a.files:
        if not os.path.exists(f):
            raise SystemExit(f"real_sizes: no file {f} (bench/shapes.py makes them)")
    if not os.access(a.llama_bench, os.X_OK):
        raise SystemExit(f"real_sizes: no llama-bench at {a.llama_bench} (sh bench/peer_build.sh builds it)")
    started = datetime.datetime.now(datetime.timezone.utc)
    rounds = {f: [] for f in a.files}
    for i in range(a.rounds):
        for f in a.files:  # interleaved: each round visits every file, both engines
            t0 = time.perf_counter()
            r = one_round(a, f)
            rounds[f].append(r)
            c, l = r["clinfer_speed"], r["llama_speed"]
            print(f"round {i + 1} {os.path.basename(f)}: clinfer load {r['clinfer_load']['load_s']} s "
                  f"(wall {r['clinfer_load']['wall_s']:.2f} s, {r['clinfer_load']['rss'] / 1e9:.2f} GB) "
                  f"pp {c['pp'] or 0:.1f} tg {c['tg'] or 0:.2f} | llama-bench wall {r['llama_load']['wall_s']:.2f} s "
                  f"({r['llama_load']['rss'] / 1e9:.2f} GB) pp {l['pp'] or 0:.1f} tg {l['tg'] or 0:.2f} | "
                  f"loadavg {r['loadavg']:.2f} | {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    sums = [summarize(a, f, rounds[f]) for f in a.files]
    print(table(a, sums))
    os.makedirs(a.out, exist_ok=True)
    doc = {"started": started.isoformat(timespec="seconds"),
           "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "argv": sys.argv[1:], "threads": a.t, "p": a.p, "n": a.n, "r": a.r,
           "rounds": a.rounds, "llama_bench": {"path": a.llama_bench, **{k: rounds[a.files[0]][0]["llama_speed"][k]
                                                                      for k in ("build", "cpu")}},
           "summary": sums, "per_round": rounds}
    path = os.path.join(a.out, f"real_sizes-{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

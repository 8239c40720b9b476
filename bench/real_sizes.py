#!/usr/bin/env python3
"""clinfer against llama.cpp's llama-bench on real-size models (issue 39):
load time cold and warm, peak memory, time to first token, pp512 and tg128,
in interleaved rounds.

  python3 bench/real_sizes.py FILE.gguf [FILE.gguf ...] [--rounds 3] [-r 3] \\
      [-p 512] [-n 128] [-t 2] [--no-cold] [--llama-bench PATH] [--clinfer PATH] [--out DIR]

FILEs: bench/shapes.py's random-weight GGUFs (any GGUF works). llama-bench:
bench/peer_build.sh's (default $XDG_CACHE_HOME/clinfer/peer/bin/llama-bench).

clinfer's packed-weights cache: every clinfer process runs with
CLINFER_WEIGHT_CACHE set. "Warm" is a folder made once per run (beside the
output, removed at the end) and primed by one load of each file before the
rounds: the cache entry is there and the file is in the page cache. "Cold"
is a fresh empty folder for that one load (removed right after) with the
file's pages dropped from the page cache first (posix_fadvise DONTNEED on
that file only: the rest of the machine's cache is left alone). A build
without the cache ignores the variable: cold is then the plain load from
disk, warm the plain load from the page cache. llama.cpp has no such cache:
its cold load is the evicted file, its warm load the file in the page cache.

Each round, for each file, in this order (every process under /usr/bin/time:
its wall seconds and peak RSS, VmHWM, %M):
  1. load, cold (unless --no-cold): clinfer `run -m F -p x -n 1 -t T -c 64`,
     then llama-bench `-m F -p 0 -n 4 -r 1 -t T`, each after evict(F).
     clinfer's process wall and the load seconds it prints on stderr ("| load
     4.55 s |": the model's load_seconds, kernels and the prompt not
     included); llama-bench's whole process (load, one warm-up and one
     4-token run). -c 64 keeps the KV cache out of the memory figure, as
     llama-bench's (a context of 4) is.
  2. load, warm: the same two commands, the file in the page cache. Their
     peak RSS is the table's peak RSS.
  3. time to first token, measured (not estimated), warm: the whole process
     wall of each engine from its start to its first generated token of a
     P-token prompt, load included.
     clinfer: `run -m F -f PROMPT -n 2 -c P+16 -t T --temp 0`, PROMPT a text
     that tokenizes to P tokens (checked: run's "prompt eval N tokens"); the
     process loads the model and the tokenizer, evaluates the P tokens in one
     pass, samples the first token, evaluates it and samples the second:
     load + P prompt tokens + one token evaluated, then exit.
     llama.cpp: `llama-bench -m F -p 0 -n 0 -pg P,1 -r 1 --no-warmup -t T`:
     the whole process: load, context, P prompt tokens and one generated
     token (a decode of one token), then its report and exit.
     Both also report their peak RSS with that context as run (clinfer: f32
     KV cache of P+16 positions, its bytes in the JSON; llama.cpp: f16, P+1).
     `clinfer bench`'s own ttft_s (in-process, from the file's opening) is
     kept beside it in the JSON.
  4. `clinfer bench -m F -p P -n N -r R --json` (POCL_MAX_PTHREAD_COUNT=T).
  5. `llama-bench -m F -p P -n N -r R -t T -o json`.

The table gives each figure's median over rounds and clinfer / llama.cpp as
the median of the per-round ratios (bench/compare.py's rule: the machine's
speed drifts between rounds more than within one). Ratios are "higher is
better for clinfer": llama.cpp's time over clinfer's for loads and ttft,
clinfer's t/s over llama.cpp's for speeds, llama.cpp's RSS over clinfer's.
tg's share of the copy roof: tokens/s x the bytes a token reads (clinfer
bench's bytes_per_token: every weight once and the KV cache) over the copy
roof clinfer measured in the same bench; llama.cpp's with the same bytes and
roof at its own tokens/s.
Writes OUT/real_sizes-<stamp>.json (default bench/results/issue39/): the
machine, commands, every round's raw figures and the medians.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "peer", "bin")
LOAD_RE = re.compile(r"\| load ([0-9.]+) s")
PROMPT_RE = re.compile(r"prompt eval ([0-9]+) tokens")
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def timed(cmd, env=None):
    """(stdout, stderr, wall seconds, peak RSS bytes) of cmd under /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        p = subprocess.run(["/usr/bin/time", "-o", tf.name, "-f", "%e %M"] + cmd, capture_output=True, text=True,
                           env=env, stdin=subprocess.DEVNULL)
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


def clinfer_env(a, cache):
    """clinfer's environment: T threads and the packed-weights cache folder."""
    env = dict(os.environ)
    env["POCL_MAX_PTHREAD_COUNT"] = str(a.t)
    env["CLINFER_WEIGHT_CACHE"] = cache
    return env


def clinfer_load(a, f, cache):
    _, err, wall, rss = timed([a.clinfer, "run", "-m", f, "-p", "x", "-n", "1", "-t", str(a.t), "-c", "64"],
                              clinfer_env(a, cache))
    m = LOAD_RE.search(err)
    return {"load_s": float(m.group(1)) if m else None, "wall_s": wall, "rss": rss}


def clinfer_cold(a, f):
    """A load with no cache entry (a fresh empty folder) and the file evicted."""
    d = tempfile.mkdtemp(prefix="cold-", dir=a.scratch)
    try:
        evict(f)
        return clinfer_load(a, f, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def peer_load(a, f):
    _, _, wall, rss = timed([a.llama_bench, "-m", f, "-p", "0", "-n", "4", "-r", "1", "-t", str(a.t)])
    return {"wall_s": wall, "rss": rss}


def count_tokens(a, f, text):
    out = subprocess.run([a.clinfer, "tokenize", "-m", f, "-p", text], capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL).stdout
    return len(out.split())


def make_prompt(a, f):
    """A prompt file of a.p tokens in f's vocabulary (BOS counted where the
    model adds one); its path and its token count."""
    words = a.p
    text = ""
    for _ in range(12):  # each word is about one token: a few corrections at most
        text = " ".join(WORDS[i % len(WORDS)] for i in range(max(words, 1)))
        n = count_tokens(a, f, text)
        if n == a.p:
            break
        words += a.p - n
    path = os.path.join(a.scratch, f"prompt-{os.path.basename(f)}.txt")
    with open(path, "w") as fh:
        fh.write(text)  # no newline: it would be a token
    return path, n


def clinfer_ttft(a, f, prompt, cache):
    _, err, wall, rss = timed([a.clinfer, "run", "-m", f, "-f", prompt, "-n", "2", "-c", str(a.p + 16), "-t",
                               str(a.t), "--temp", "0"], clinfer_env(a, cache))
    m, pm = LOAD_RE.search(err), PROMPT_RE.search(err)
    return {"wall_s": wall, "rss": rss, "load_s": float(m.group(1)) if m else None,
            "prompt_tokens": int(pm.group(1)) if pm else None}


def peer_ttft(a, f):
    out, _, wall, rss = timed([a.llama_bench, "-m", f, "-p", "0", "-n", "0", "-pg", f"{a.p},1", "-r", "1",
                               "--no-warmup", "-t", str(a.t), "-o", "json"])
    recs = json.loads(out)
    return {"wall_s": wall, "rss": rss, "pg_ns": recs[0].get("avg_ns") if recs else None}


def clinfer_speed(a, f, cache):
    out, _, _, _ = timed([a.clinfer, "bench", "-m", f, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "--json"],
                         clinfer_env(a, cache))
    rec = json.loads(out)[0]
    tg = rec.get("tg", {})
    return {"pp": rec["pp"]["tps"] if a.p else None, "tg": tg.get("tps"), "tg_roof_share": tg.get("roof_share"),
            "tg_bytes_per_token": tg.get("bytes_per_token"), "copy_gbs": rec["roof"]["copy_gbs"],
            "load_s": rec.get("load_s"), "ttft_s": rec.get("ttft_s"), "peak_rss": rec.get("peak_rss"),
            "model": rec["model"], "device": rec["device"]}


def peer_speed(a, f):
    out, _, _, _ = timed([a.llama_bench, "-m", f, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-t", str(a.t),
                          "-o", "json"])
    recs = json.loads(out)
    pp = next((r["avg_ts"] for r in recs if r["n_prompt"] == a.p and r["n_gen"] == 0), None)
    tg = next((r["avg_ts"] for r in recs if r["n_gen"] == a.n and r["n_prompt"] == 0), None)
    return {"pp": pp, "tg": tg, "model_type": recs[0].get("model_type"), "build": recs[0].get("build_commit"),
            "cpu": recs[0].get("cpu_info")}


def one_round(a, f, prompt):
    r = {}
    if not a.no_cold:
        r["clinfer_cold"] = clinfer_cold(a, f)
        evict(f)
        r["llama_cold"] = peer_load(a, f)
    r["clinfer_load"] = clinfer_load(a, f, a.warm)
    r["llama_load"] = peer_load(a, f)
    if a.p:
        r["clinfer_ttft"] = clinfer_ttft(a, f, prompt, a.warm)
        r["llama_ttft"] = peer_ttft(a, f)
    r["clinfer_speed"] = clinfer_speed(a, f, a.warm)
    r["llama_speed"] = peer_speed(a, f)
    r["loadavg"] = os.getloadavg()[0]
    return r


def kv_bytes(a, f, ctx):
    """clinfer's f32 KV cache at ctx positions, as `clinfer info` counts it."""
    p = subprocess.run([a.clinfer, "info", "-m", f, "--ctx", str(ctx), "--json"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    m = re.search(r'"kv_ctx_f32": ([0-9]+)', p.stdout)
    return int(m.group(1)) if m else None


def get(r, *keys):
    """r[k0][k1]... or None where a step did not run."""
    for k in keys:
        if not isinstance(r, dict) or r.get(k) is None:
            return None
        r = r[k]
    return r


def llama_roof_share(r):
    """llama.cpp's tg at clinfer's bytes a token, over clinfer's copy roof."""
    c, t = r["clinfer_speed"], get(r, "llama_speed", "tg")
    if not (t and c.get("tg_bytes_per_token") and c.get("copy_gbs")):
        return None
    return t * c["tg_bytes_per_token"] * 1e-9 / c["copy_gbs"]


def summarize(a, f, rounds, kv):
    """The medians and the per-round ratios' medians of one file."""
    def med(fn):
        v = [fn(r) for r in rounds]
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None

    def ratio(num, den):  # median over rounds of num/den
        v = [(num(r), den(r)) for r in rounds]
        v = [n / d for n, d in v if n and d]
        return statistics.median(v) if v else None

    size = os.path.getsize(f)
    c = {
        "load_cold_wall_s": med(lambda r: get(r, "clinfer_cold", "wall_s")),
        "load_cold_s": med(lambda r: get(r, "clinfer_cold", "load_s")),
        "load_warm_wall_s": med(lambda r: get(r, "clinfer_load", "wall_s")),
        "load_warm_s": med(lambda r: get(r, "clinfer_load", "load_s")),
        "peak_rss": med(lambda r: get(r, "clinfer_load", "rss")),
        "ttft_s": med(lambda r: get(r, "clinfer_ttft", "wall_s")),
        "ttft_rss": med(lambda r: get(r, "clinfer_ttft", "rss")),
        "ttft_prompt_tokens": med(lambda r: get(r, "clinfer_ttft", "prompt_tokens")),
        "bench_load_s": med(lambda r: get(r, "clinfer_speed", "load_s")),
        "bench_ttft_s": med(lambda r: get(r, "clinfer_speed", "ttft_s")),
        "bench_peak_rss": med(lambda r: get(r, "clinfer_speed", "peak_rss")),
        "pp": med(lambda r: get(r, "clinfer_speed", "pp")),
        "tg": med(lambda r: get(r, "clinfer_speed", "tg")),
        "tg_roof_share": med(lambda r: get(r, "clinfer_speed", "tg_roof_share")),
        "kv_bytes_load": kv.get(64), "kv_bytes_ttft": kv.get(a.p + 16),
    }
    l = {  # noqa: E741 - llama.cpp's, beside c
        "load_cold_wall_s": med(lambda r: get(r, "llama_cold", "wall_s")),
        "load_warm_wall_s": med(lambda r: get(r, "llama_load", "wall_s")),
        "peak_rss": med(lambda r: get(r, "llama_load", "rss")),
        "ttft_s": med(lambda r: get(r, "llama_ttft", "wall_s")),
        "ttft_rss": med(lambda r: get(r, "llama_ttft", "rss")),
        "pp": med(lambda r: get(r, "llama_speed", "pp")),
        "tg": med(lambda r: get(r, "llama_speed", "tg")),
        "tg_roof_share": med(llama_roof_share),
    }
    for e in (c, l):
        for k in ("peak_rss", "ttft_rss"):
            e[k + "_per_file"] = e[k] / size if e[k] else None
    s = {
        "file": f, "size_bytes": size, "model": rounds[0]["clinfer_speed"]["model"], "clinfer": c, "llama": l,
        "ratio": {  # clinfer's advantage: > 1 is clinfer ahead
            "load_cold": ratio(lambda r: get(r, "llama_cold", "wall_s"), lambda r: get(r, "clinfer_cold", "wall_s")),
            "load_warm": ratio(lambda r: get(r, "llama_load", "wall_s"), lambda r: get(r, "clinfer_load", "wall_s")),
            "peak_rss": ratio(lambda r: get(r, "llama_load", "rss"), lambda r: get(r, "clinfer_load", "rss")),
            "ttft": ratio(lambda r: get(r, "llama_ttft", "wall_s"), lambda r: get(r, "clinfer_ttft", "wall_s")),
            "pp": ratio(lambda r: get(r, "clinfer_speed", "pp"), lambda r: get(r, "llama_speed", "pp")),
            "tg": ratio(lambda r: get(r, "clinfer_speed", "tg"), lambda r: get(r, "llama_speed", "tg")),
            "tg_roof_share": ratio(lambda r: get(r, "clinfer_speed", "tg_roof_share"), llama_roof_share),
        },
    }
    return s


def table(a, sums):
    g = 1e9
    fmt = lambda v, d=2, suf="": "-" if v is None else f"{v:.{d}f}{suf}"  # noqa: E731
    rss = lambda v, size: "-" if v is None else f"{v / g:.2f} ({v / size:.2f}x)"  # noqa: E731
    lines = [f"| model | file GB | engine | load cold s | load warm s | peak RSS GB (x file) | ttft{a.p} s | "
             f"pp{a.p} t/s | tg{a.n} t/s | tg of copy roof |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in sums:
        c, l, r, size = s["clinfer"], s["llama"], s["ratio"], s["size_bytes"]
        name = os.path.basename(s["file"])
        # clinfer's process wall, its load seconds in parentheses
        cold = f"{fmt(c['load_cold_wall_s'])} ({fmt(c['load_cold_s'])})" if c["load_cold_wall_s"] else "-"
        warm = f"{fmt(c['load_warm_wall_s'])} ({fmt(c['load_warm_s'])})"
        lines.append(f"| {name} | {size / g:.2f} | clinfer | {cold} | {warm} | {rss(c['peak_rss'], size)} | "
                     f"{fmt(c['ttft_s'])} | {fmt(c['pp'], 1)} | {fmt(c['tg'], 2)} | "
                     f"{fmt(c['tg_roof_share'] and 100 * c['tg_roof_share'], 0, '%')} |")
        lines.append(f"| | | llama-bench | {fmt(l['load_cold_wall_s'])} | {fmt(l['load_warm_wall_s'])} | "
                     f"{rss(l['peak_rss'], size)} | {fmt(l['ttft_s'])} | {fmt(l['pp'], 1)} | {fmt(l['tg'], 2)} | "
                     f"{fmt(l['tg_roof_share'] and 100 * l['tg_roof_share'], 0, '%')} |")
        lines.append(f"| | | clinfer vs llama.cpp | {fmt(r['load_cold'], 2, 'x')} | {fmt(r['load_warm'], 2, 'x')} | "
                     f"{fmt(r['peak_rss'], 2, 'x')} | {fmt(r['ttft'], 2, 'x')} | {fmt(r['pp'], 2, 'x')} | "
                     f"{fmt(r['tg'], 2, 'x')} | {fmt(r['tg_roof_share'], 2, 'x')} |")
    lines.append("")
    lines.append("loads and ttft: each process's wall (clinfer's load_seconds in parentheses); ratios: llama.cpp's "
                 "time or RSS over clinfer's, clinfer's t/s over llama.cpp's (median of per-round ratios).")
    for s in sums:
        c, l, size = s["clinfer"], s["llama"], s["size_bytes"]
        kv1, kv2 = c["kv_bytes_load"], c["kv_bytes_ttft"]
        lines.append(
            f"{os.path.basename(s['file'])}: peak RSS with the context as run: loads clinfer -c 64 (f32 KV "
            f"{fmt(kv1 and kv1 / 1e6)} MB), llama-bench a context of 4; ttft runs clinfer -c {a.p + 16} (f32 KV "
            f"{fmt(kv2 and kv2 / 1e6)} MB) {rss(c['ttft_rss'], size)} GB, llama-bench {a.p + 1} (f16) "
            f"{rss(l['ttft_rss'], size)} GB; clinfer bench's own: ttft {fmt(c['bench_ttft_s'])} s in-process, "
            f"peak RSS {rss(c['bench_peak_rss'], size)} GB")
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
    ap.add_argument("-p", type=int, default=512, help="prompt tokens: pp and ttft (0: neither)")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=os.cpu_count(), help="threads for both engines")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold loads (file evicted, no cache entry)")
    ap.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)  # the default now; older command lines
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--llama-bench", default=os.path.join(PEER, "llama-bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "issue39"))
    a = ap.parse_args()
    for f in a.files:
        if not os.path.exists(f):
            raise SystemExit(f"real_sizes: no file {f} (bench/shapes.py makes them)")
    if not os.access(a.llama_bench, os.X_OK):
        raise SystemExit(f"real_sizes: no llama-bench at {a.llama_bench} (sh bench/peer_build.sh builds it)")
    os.makedirs(a.out, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    # the run's scratch (prompts, the warm and cold cache folders): on the
    # output's disk, not a tmpfs, so a cache entry is read as from a disk
    a.scratch = tempfile.mkdtemp(prefix=".real_sizes-", dir=a.out)
    a.warm = os.path.join(a.scratch, "warm")
    os.makedirs(a.warm)
    try:
        prompts, kv = {}, {}
        for f in a.files:
            clinfer_load(a, f, a.warm)  # primes the warm cache entry (and the page cache)
            prompts[f] = make_prompt(a, f) if a.p else (None, 0)
            if a.p and prompts[f][1] != a.p:
                print(f"real_sizes: {os.path.basename(f)}: the prompt has {prompts[f][1]} tokens, not {a.p}",
                      file=sys.stderr)
            kv[f] = {ctx: kv_bytes(a, f, ctx) for ctx in (64, a.p + 16)}
        rounds = {f: [] for f in a.files}
        for i in range(a.rounds):
            for f in a.files:  # interleaved: each round visits every file, both engines
                t0 = time.perf_counter()
                r = one_round(a, f, prompts[f][0])
                rounds[f].append(r)
                c, l = r["clinfer_speed"], r["llama_speed"]
                cl, ll = r["clinfer_load"], r["llama_load"]
                cold = (f"cold {r['clinfer_cold']['wall_s']:.2f}/{r['llama_cold']['wall_s']:.2f} s, "
                        if "clinfer_cold" in r else "")
                ttft = (f"ttft {r['clinfer_ttft']['wall_s']:.2f}/{r['llama_ttft']['wall_s']:.2f} s, "
                        if "clinfer_ttft" in r else "")
                print(f"round {i + 1} {os.path.basename(f)} (clinfer/llama.cpp): {cold}"
                      f"warm {cl['wall_s']:.2f}/{ll['wall_s']:.2f} s (clinfer load {cl['load_s']} s), "
                      f"RSS {cl['rss'] / 1e9:.2f}/{ll['rss'] / 1e9:.2f} GB, {ttft}"
                      f"pp {c['pp'] or 0:.1f}/{l['pp'] or 0:.1f}, tg {c['tg'] or 0:.2f}/{l['tg'] or 0:.2f} | "
                      f"loadavg {r['loadavg']:.2f} | {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        shutil.rmtree(a.scratch, ignore_errors=True)
    sums = [summarize(a, f, rounds[f], kv[f]) for f in a.files]
    print(table(a, sums))
    doc = {"started": started.isoformat(timespec="seconds"),
           "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "machine": machine(), "argv": sys.argv[1:], "threads": a.t, "p": a.p, "n": a.n, "r": a.r,
           "rounds": a.rounds, "cold": not a.no_cold,
           "prompt_tokens": {f: prompts[f][1] for f in a.files},
           "llama_bench": {"path": a.llama_bench, **{k: rounds[a.files[0]][0]["llama_speed"][k]
                                                     for k in ("build", "cpu")}},
           "summary": sums, "per_round": rounds}
    path = os.path.join(a.out, f"real_sizes-{started.strftime('%Y%m%dT%H%M%SZ')}.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

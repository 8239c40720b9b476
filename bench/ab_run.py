# A/B of two clinfer builds through `clinfer run` (the path a user takes: the
# public API's generation loop): interleaved rounds, base then main; a ~500
# token prompt, up to 128 generated (greedy; an early end of turn changes
# only the count, the speeds are per token); per-round ratio main/base of
# the speeds that `run` prints. usage: BASE=... MAIN=... python3 bench/ab_run.py [rounds]
import os, re, statistics, subprocess, sys
M = os.path.expanduser(os.environ.get("MODEL", "~/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
B = {"base": os.environ.get("BASE", "base/build/clinfer"), "main": os.environ.get("MAIN", "build/clinfer")}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
prompt = " ".join(["The quick brown fox jumps over the lazy dog near the quiet river bank."] * 34)
speed = re.compile(r"prompt eval (\d+) tokens, ([\d.]+) t/s \| eval (\d+) tokens, ([\d.]+) t/s")
res = {k: [] for k in B}
for r in range(rounds):
    for k, b in B.items():
        env = dict(os.environ, CLINFER_CACHE_DIR="/tmp/kc-" + k)
        p = subprocess.run([b, "run", "-m", M, "-p", prompt, "-n", "128", "--ctx", "1024"], env=env,
                           capture_output=True, text=True, check=True)
        m = speed.search(p.stderr)
        res[k].append((float(m.group(2)), float(m.group(4))))
        print(r, k, m.group(1), m.group(2), m.group(3), m.group(4), flush=True)
for i, name in ((0, "prompt"), (1, "generation")):
    ratio = [m[i] / b[i] for m, b in zip(res["main"], res["base"])]
    print("%s base %.1f main %.1f t/s, ratio median %.3f (min %.3f max %.3f)" % (
        name, statistics.median(x[i] for x in res["base"]), statistics.median(x[i] for x in res["main"]),
        statistics.median(ratio), min(ratio), max(ratio)))

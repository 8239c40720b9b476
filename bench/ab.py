# A/B of two clinfer builds: interleaved rounds, base then main; clinfer bench --json pp512/tg128 (-r 3 medians); per-round ratio main/base
import json, subprocess, statistics, os, sys
M = os.path.expanduser("~/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf")
B = {"base": os.environ.get("BASE", "base/build/clinfer"), "main": os.environ.get("MAIN", "build/clinfer")}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
res = {k: [] for k in B}
for r in range(rounds):
    for k, b in B.items():
        env = dict(os.environ, CLINFER_CACHE_DIR="/tmp/kc-" + k)
        out = subprocess.run([b, "bench", "-m", M, "-p", "512", "-n", "128", "-r", "3", "--json"], env=env,
                             capture_output=True, text=True, check=True).stdout
        d = json.loads(out)[0]
        res[k].append((d["pp"]["tps"], d["tg"]["tps"]))
        print(r, k, d["pp"]["tps"], d["tg"]["tps"], flush=True)
pp = [m[0] / b[0] for m, b in zip(res["main"], res["base"])]
tg = [m[1] / b[1] for m, b in zip(res["main"], res["base"])]
print("pp512 base %.1f main %.1f ratio median %.3f" % (statistics.median(x[0] for x in res["base"]), statistics.median(x[0] for x in res["main"]), statistics.median(pp)))
print("tg128 base %.1f main %.1f ratio median %.3f" % (statistics.median(x[1] for x in res["base"]), statistics.median(x[1] for x in res["main"]), statistics.median(tg)))

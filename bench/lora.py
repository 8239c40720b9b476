"""LoRA adapters' cost on decoding (bench/RESULTS.md), interleaved rounds.

  python3 bench/lora.py tg CLINFER MODEL ADAPTER... [--rounds 5] [-n 128]
      `clinfer run` greedy on a story prompt: the generation's t/s of the
      base and of each adapter alone (--lora), round by round; medians and
      their ratio to the base's.
  python3 bench/lora.py streams CLINFER MODEL A1 A2 A3 A4 [--rounds 3] [-n 128] [--streams 8]
      one `clinfer serve --parallel STREAMS` with the four adapters loaded at
      scale 0: STREAMS concurrent completions with no adapter (every "lora"
      scale 0) against the same with request i using adapter i % 4 (its
      "lora" field); the generated tokens over the wall time of each batch.

Adapters: tests/peer/record_lora.py adapter MODEL OUT --rank 16 --type F16
--targets attn_q,attn_v (or every projection). Standard library only.
"""
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time

PROMPT = "Once upon a time, in a small village by the sea, there lived"


def opt(args, name, default):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return int(v)
    return default


def tg(binary, model, adapters, rounds, n):
    runs = {a: [] for a in [None] + adapters}
    for r in range(rounds):
        for a in runs:
            cmd = [binary, "run", "-m", model, "-p", PROMPT, "-n", str(n), "--temp", "0"]
            cmd += ["--lora", a] if a else []
            err = subprocess.run(cmd, capture_output=True).stderr.decode(errors="replace")
            m = re.findall(r" eval (\d+) tokens, ([\d.]+) t/s", err)
            assert m, err
            runs[a].append(float(m[-1][1]))
            print(f"round {r}: {a or 'base'}: {runs[a][-1]:.1f} t/s", flush=True)
    base = statistics.median(runs[None])
    for a, v in runs.items():
        med = statistics.median(v)
        print(f"{a or 'base'}: median {med:.1f} t/s ({med / base:.0%} of the base) over {v}")


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    c.close()
    return r["usage"]["completion_tokens"]


def streams(binary, model, adapters, rounds, n, k):
    cmd = [binary, "serve", "--port", "0", "--parallel", str(k), "--ctx", "512", "-m", model]
    cmd += ["--lora-scaled", ",".join(a + ":0" for a in adapters)]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    port = None
    while port is None:
        line = p.stderr.readline()
        assert line, "the server ended"
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        port = int(m.group(1)) if m else None
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    off = [{"id": i, "scale": 0} for i in range(len(adapters))]
    res = {"base": [], "adapters": []}
    try:
        for r in range(rounds):
            for mode in res:
                out = [0] * k

                def one(i):
                    lora = off if mode == "base" else [{"id": i % len(adapters), "scale": 1.0}]
                    out[i] = post(port, {"prompt": PROMPT, "max_tokens": n, "temperature": 0, "lora": lora,
                                         "ignore_eos": True})

                t0 = time.time()
                th = [threading.Thread(target=one, args=(i,)) for i in range(k)]
                [t.start() for t in th]
                [t.join() for t in th]
                res[mode].append(sum(out) / (time.time() - t0))
                print(f"round {r}: {mode}: {res[mode][-1]:.1f} t/s over {k} streams ({sum(out)} tokens)", flush=True)
    finally:
        p.terminate()
        p.wait()
    b, a = statistics.median(res["base"]), statistics.median(res["adapters"])
    print(f"{k} streams: base median {b:.1f} t/s; {len(adapters)} adapters median {a:.1f} t/s ({a / b:.0%})")


def main():
    args = sys.argv[1:]
    rounds, n = opt(args, "--rounds", 5), opt(args, "-n", 128)
    k = opt(args, "--streams", 8)
    if len(args) >= 4 and args[0] == "tg":
        tg(args[1], args[2], args[3:], rounds, n)
    elif len(args) >= 4 and args[0] == "streams":
        streams(args[1], args[2], args[3:], rounds, n, k)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

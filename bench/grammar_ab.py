#!/usr/bin/env python3
"""What a JSON Schema costs generation, clinfer beside llama.cpp, in one run.

Each round, interleaved: `clinfer bench --json-schema SCHEMA -r 1` (tg of
-n tokens sampled at temperature 1 with and without the grammar, same
seeds), then llama-server (built from the vendored llama.cpp of
llama-cpp-python 0.3.36) answering the same chat prompt at temperature 1,
without and with `response_format: json_schema`, its own tg from the
answer's `timings.predicted_per_second`. Prints each round and the
medians of the per-round ratios grammar / free for each engine.

    LLAMA_SERVER=/path/to/llama-server python3 bench/grammar_ab.py SCHEMA.json [-m MODEL] [--rounds 5] [-n 128]
"""
import argparse, json, os, statistics, subprocess, sys, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPT = "Answer with one JSON object."


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def llama_tg(port, n, seed, schema):
    """tg over replies until n tokens (a reply may end early), as clinfer bench counts it."""
    toks, secs, k = 0, 0.0, 0
    while toks < n:
        body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": n - toks, "temperature": 1.0,
                "seed": seed + k, "cache_prompt": False}
        if schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
        t = post(port, body)["timings"]
        toks += max(t["predicted_n"], 1)
        secs += t["predicted_n"] / t["predicted_per_second"] if t["predicted_n"] else 0
        k += 1
    return toks / secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schema")
    ap.add_argument("-m", "--model", default=os.path.expanduser("~/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--port", type=int, default=18190)
    a = ap.parse_args()
    schema = json.load(open(a.schema))
    server = os.environ.get("LLAMA_SERVER", "llama-server")
    proc = subprocess.Popen([server, "-m", a.model, "--port", str(a.port), "-t", str(os.cpu_count()), "-c", "2048",
                             "-np", "1"], stdout=subprocess.DEVNULL, stderr=open("/tmp/grammar_ab_llama.log", "w"))
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{a.port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        rows = []
        for r in range(a.rounds):
            out = subprocess.run([a.clinfer, "bench", "-m", a.model, "--json-schema", a.schema, "-n", str(a.n), "-r", "1",
                                  "--json"], capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"grammar_ab: clinfer bench failed: {out.stderr}")
            c = json.loads(out.stdout.strip().splitlines()[-1])
            seed = 1000 * r + 1
            lf = llama_tg(a.port, a.n, seed, None)
            lg = llama_tg(a.port, a.n, seed, schema)
            rows.append((c["tg_free"], c["tg_grammar"], c["ratio"], lf, lg, lg / lf, c["grammar_ms_per_token"]))
            print(f"round {r + 1}: clinfer {c['tg_free']:.1f} -> {c['tg_grammar']:.1f} t/s ({100 * c['ratio']:.1f}%), "
                  f"llama.cpp {lf:.1f} -> {lg:.1f} t/s ({100 * lg / lf:.1f}%)", flush=True)
        med = [statistics.median(x[i] for x in rows) for i in range(7)]
        print(f"median of {a.rounds} rounds: clinfer tg{a.n} {med[0]:.1f} free, {med[1]:.1f} under the schema, "
              f"ratio {100 * med[2]:.1f}% ({med[6]:.3f} ms a token); llama.cpp {med[3]:.1f} free, {med[4]:.1f} "
              f"under the schema, ratio {100 * med[5]:.1f}%")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()

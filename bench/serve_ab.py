#!/usr/bin/env python3
"""Servers side by side under the same load: each started once, then
bench/serve.py's levels (streamed greedy completions, the same client)
run against each in turn, round after round (interleaved, so that drift of
the shared machine falls on all alike). Prints every round's aggregate
tokens/s, TTFT p50 and ITL p50 per server and level, and the medians of the
per-round ratios of each server to the first one named.

    SERVERS='main=build/clinfer serve --parallel 16 --ctx 512;llama=llama-server -np 16 -cb -t 2 -c 8192' \\
        python3 bench/serve_ab.py [--rounds 3] [--concurrency 1,8,16] [--requests 32] [--max-tokens 64] [--prompt-tokens N]

Each command gets `-m MODEL --port PORT` appended (MODEL: $MODEL, else the
default model); both clinfer and llama-server take those names.
"""
import argparse, json, os, shlex, statistics, subprocess, sys, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.expanduser(os.environ.get("MODEL", "~/.cache/clinfer/models/SmolLM2-135M-Instruct.Q4_1.gguf"))


def wait_ready(port, proc, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit(f"serve_ab: the server on port {port} exited ({proc.returncode})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"serve_ab: the server on port {port} is not ready after {timeout} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", default="1,8,16")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=18100)
    ap.add_argument("--prompt-tokens", type=int, default=0, help="serve.py's --prompt-tokens")
    a = ap.parse_args()
    servers = [s.split("=", 1) for s in os.environ["SERVERS"].split(";") if s.strip()]
    procs, ports = {}, {}
    try:
        for i, (name, cmd) in enumerate(servers):
            ports[name] = a.port + i
            argv = shlex.split(cmd) + ["-m", MODEL, "--port", str(ports[name])]
            procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(f"/tmp/serve_ab_{name}.log", "w"))
            wait_ready(ports[name], procs[name])
        res = {name: [] for name, _ in servers}  # [round] -> levels
        for r in range(a.rounds):
            for name, _ in servers:
                out = subprocess.run([sys.executable, os.path.join(HERE, "serve.py"), "--url",
                                      f"http://127.0.0.1:{ports[name]}", "--requests", str(a.requests), "--concurrency",
                                      a.concurrency, "--max-tokens", str(a.max_tokens), "--prompt-tokens",
                                      str(a.prompt_tokens), "--json"],
                                     capture_output=True, text=True)
                if out.returncode:
                    sys.exit(f"serve_ab: serve.py against {name} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
                levels = json.loads(out.stdout)["levels"]
                res[name].append(levels)
                for lv in levels:
                    print(f"round {r} {name:>8} c={lv['concurrency']:>3} {lv['tokens_per_s']:7.1f} t/s "
                          f"TTFT p50 {lv['ttft_p50_ms']:6.0f} ms ITL p50 {lv['itl_p50_ms']:6.1f} ms", flush=True)
        first = servers[0][0]
        print(f"\n| server | concurrency | tokens/s (median) | TTFT p50 ms | ITL p50 ms | ratio to {first} (median of rounds) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, _ in servers:
            for k, lv in enumerate(res[name][0]):
                tps = [res[name][r][k]["tokens_per_s"] for r in range(a.rounds)]
                ratio = [res[name][r][k]["tokens_per_s"] / res[first][r][k]["tokens_per_s"] for r in range(a.rounds)]
                print(f"| {name} | {lv['concurrency']} | {statistics.median(tps):.1f} | "
                      f"{statistics.median(res[name][r][k]['ttft_p50_ms'] for r in range(a.rounds)):.0f} | "
                      f"{statistics.median(res[name][r][k]['itl_p50_ms'] for r in range(a.rounds)):.1f} | "
                      f"{statistics.median(ratio):.2f} (min {min(ratio):.2f}, max {max(ratio):.2f}) |")
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()

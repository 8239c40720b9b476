#!/usr/bin/env python3
"""A draft model in the server (`serve -md`) against the same server
without one: two servers on the same target side by side, requests to them
interleaved (plain, then -md, a round at a time: the machine's drift hits
both alike), on free text (a story, an explanation, code), greedy and
sampled (a seed per round, the same for both), alone or as S concurrent
streams; generation speed from each answer's `timings.predicted_per_second`
(S streams: tokens over the wall time), medians of per-round ratios, the
drafts from /metrics. Greedy texts must equal plain decoding's (exits 1
otherwise).

With --peer LLAMA_SERVER, llama.cpp's server runs the same two ways (plain,
`-md DRAFT --spec-draft-n-max K --spec-draft-n-min 0 --spec-draft-p-min P`, 2 threads each) in the
same rounds, after clinfer's pair: its ratio is the peer's figure for the same
draft model on the same machine (its drafts from each answer's timings).

    python3 bench/serve_draft.py -m TARGET -md DRAFT [--rounds 3] [-n 128] [--temp 0.8] [--draft-max 4]
        [--streams 1] [--draft-streams 2] [--bin build/clinfer] [--modes greedy,sampled] [--draft-p-min P]
        [--peer ~/.cache/clinfer/peer/bin/llama-server] [--threads 2]
"""
import argparse, concurrent.futures, json, re, socket, statistics, subprocess, sys, time, urllib.request

PROMPTS = {
    "story": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "explanation": "Explain how a refrigerator keeps food cold, step by step.",
    "code": "Write a Python function that checks whether a string is a palindrome, with a docstring and two examples.",
}


class Server:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv + ["--port", "0"], stderr=subprocess.PIPE, text=True)
        line = self.p.stderr.readline()
        self.url = "http://127.0.0.1:%s" % re.search(r":(\d+)/", line).group(1)
        while "ready" not in line:
            line = self.p.stderr.readline()
            if not line:
                sys.exit("the server did not start")

    def post(self, body):
        r = urllib.request.urlopen(urllib.request.Request(self.url + "/v1/chat/completions",
                                   json.dumps(body).encode(), {"Content-Type": "application/json"}), timeout=600)
        return json.load(r)

    def metric(self, name):
        text = urllib.request.urlopen(self.url + "/metrics").read().decode()
        return float(re.search(r"^clinfer_%s\{[^}]*\} (\S+)$" % name, text, re.M).group(1))

    def stop(self):
        self.p.terminate()
        self.p.wait()


class Peer(Server):
    """llama-server on a free port, ready when /health answers."""

    def __init__(self, argv):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.p = subprocess.Popen(argv + ["--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % port
        for _ in range(600):
            try:
                if urllib.request.urlopen(self.url + "/health", timeout=5).status == 200:
                    return
            except Exception:
                pass
            if self.p.poll() is not None:
                sys.exit("llama-server did not start: " + " ".join(argv))
            time.sleep(0.1)
        sys.exit("llama-server was not ready in 60 s")


def run(srv, a, prompt, temp, seed):
    """(texts, tokens/s): one request, or a.streams at once (their seeds seed, seed + 1, ...)."""
    def one(k):
        return srv.post({"messages": [{"role": "user", "content": prompt}], "max_tokens": a.n, "temperature": temp,
                         "seed": seed + k})
    if a.streams == 1:
        r = one(0)
        return [r["choices"][0]["message"]["content"]], r["timings"]["predicted_per_second"]
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.streams) as ex:
        rs = list(ex.map(one, range(a.streams)))
    return [r["choices"][0]["message"]["content"] for r in rs], sum(r["usage"]["completion_tokens"] for r in rs) / (
        time.time() - t0)


def peer_cell(pp, ps):
    """llama.cpp's -md ÷ plain: median of the rounds' ratios, and its plain t/s."""
    ratio = [x[1] / y[1] for x, y in zip(ps, pp)]
    return (f" llama.cpp {statistics.median(ratio):.2f}× (min {min(ratio):.2f}, max {max(ratio):.2f};"
            f" plain {statistics.median(y[1] for y in pp):.1f} t/s) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", required=True)
    ap.add_argument("-md", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--temp", type=float, default=0.8)
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--draft-p-min", type=float, default=0)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--draft-streams", type=int, default=2)
    ap.add_argument("--bin", default="build/clinfer")
    ap.add_argument("--modes", default="greedy,sampled")
    ap.add_argument("--peer", help="llama-server: the same pair measured with llama.cpp")
    ap.add_argument("--threads", type=int, default=2, help="the peer's threads")
    a = ap.parse_args()
    base = [a.bin, "serve", "-m", a.m, "--parallel", str(max(a.streams, 1)), "--ctx", "1024"]
    plain = Server(base)
    spec = Server(base + ["-md", a.md, "--draft-max", str(a.draft_max), "--draft-p-min", str(a.draft_p_min),
                         "--draft-streams", str(a.draft_streams)])
    peers = None
    if a.peer:
        pbase = [a.peer, "-m", a.m, "-t", str(a.threads), "-c", "1024", "--parallel", str(max(a.streams, 1))]
        peers = (Peer(pbase), Peer(pbase + ["-md", a.md, "-td", str(a.threads), "--spec-draft-n-max", str(a.draft_max),
                                           "--spec-draft-n-min", "0", "--spec-draft-p-min", str(a.draft_p_min)]))
    for srv in (plain, spec) + (peers or ()):  # a warm-up request each: first-use costs out of the rounds
        srv.post({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0})
    same = True
    print(f"streams {a.streams}, --draft-max {a.draft_max}, --draft-p-min {a.draft_p_min}, --draft-streams {a.draft_streams}")
    print("| prompt | sampling | plain t/s (median) | -md t/s (median) | drafted | accepted | speed-up (median of rounds) |" + (" llama.cpp -md ÷ plain |" if peers else ""))
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if peers else ""))
    try:
        for name, prompt in PROMPTS.items():
            for temp in [t for t, m in ((0, "greedy"), (a.temp, "sampled")) if m in a.modes.split(",")]:
                d0, c0 = spec.metric("draft_tokens_total"), spec.metric("draft_tokens_accepted_total")
                p, s, pp, ps = [], [], [], []
                for r in range(a.rounds):
                    p.append(run(plain, a, prompt, temp, 100 + r))
                    s.append(run(spec, a, prompt, temp, 100 + r))
                    if peers:
                        pp.append(run(peers[0], a, prompt, temp, 100 + r))
                        ps.append(run(peers[1], a, prompt, temp, 100 + r))
                if temp == 0:
                    same &= all(x[0] == y[0] for x, y in zip(s, p))
                drafted = spec.metric("draft_tokens_total") - d0
                accepted = spec.metric("draft_tokens_accepted_total") - c0
                ratio = [x[1] / y[1] for x, y in zip(s, p)]
                print(f"| {name} | {'greedy' if temp == 0 else f'--temp {temp}'} |"
                      f" {statistics.median(y[1] for y in p):.1f} | {statistics.median(x[1] for x in s):.1f} |"
                      f" {drafted:.0f} | {accepted:.0f} ({100 * accepted / max(drafted, 1):.0f}%) |"
                      f" {statistics.median(ratio):.2f}× (min {min(ratio):.2f}, max {max(ratio):.2f}) |"
                      + (peer_cell(pp, ps) if peers else ""), flush=True)
    finally:
        plain.stop()
        spec.stop()
        for q in peers or ():
            q.stop()
    print(f"\ngreedy texts identical to plain decoding: {'yes' if same else 'NO'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()

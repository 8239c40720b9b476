#!/usr/bin/env python3
"""Slots that persist (issue 43): a conversation of about --tokens tokens
gets its next answer's first token (a max_tokens 1 chat request, greedy)
three ways, interleaved over --rounds rounds on one `clinfer serve`
(--parallel 1, --slot-save-path, --cache-ram):

  recomputed   a conversation of the same length never seen before (fresh
               text each round: neither a slot nor the RAM cache holds it)
  slot file    every slot erased, the slot file restored
               (POST /slots/0?action=restore), then the request; the time
               is the restore's and the request's together
  RAM cache    the slot taken by a short other prompt (the conversation's
               cache goes to host RAM), then the request, which takes it back

Each row's time is the client's wall time (loopback HTTP included). The
ratio is the median of each round's restored / recomputed. The machine's
load average is printed: the machine may be shared.

    bench/slots.py --bin build/clinfer [-m MODEL] [--tokens 2000] [--rounds 5] [--ctx 4096] [--json]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("river stone lamp garden winter letter market window harbour bridge orchard candle music paper field "
         "mountain village sailor baker teacher story evening morning silver copper forest meadow cloud storm "
         "light shadow road north south city island tower clock wheel bread honey salt iron glass wool").split()


def start(bin_, model, ctx, folder):
    cmd = [bin_, "serve", "--port", "0", "--parallel", "1", "--ctx", str(ctx), "--slot-save-path", folder,
           "--cache-ram", "4096"] + (["-m", model] if model else [])
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    port = None
    for _ in range(8):
        line = p.stderr.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        sys.exit(f"no 'listening' line from {' '.join(cmd)}")
    deadline = time.time() + 600
    while time.time() < deadline:
        try:
            if request(port, "GET", "/health")[0] == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("the server did not become ready")


def request(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data[:1] in (b"{", b"[") else data


def conversation(n_words, seed):
    """Alternating turns of made-up text, about n_words words in all, and a last question."""
    rng = random.Random(seed)
    msgs, left = [], n_words
    while left > 0:
        k = min(left, 150)
        text = " ".join(rng.choice(WORDS) for _ in range(k)) + "."
        msgs.append({"role": "user" if len(msgs) % 2 == 0 else "assistant", "content": text})
        left -= k
    if msgs[-1]["role"] == "user":
        msgs.append({"role": "assistant", "content": "I see."})
    msgs.append({"role": "user", "content": "Which of those words came first?"})
    return msgs


def ask(port, msgs):
    """(seconds, usage) of a max_tokens 1 greedy chat request."""
    t = time.perf_counter()
    st, r = request(port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 1, "temperature": 0})
    dt = time.perf_counter() - t
    if st != 200:
        sys.exit(f"chat request: {st} {r}")
    return dt, r["usage"]


def erase(port):
    st, r = request(port, "POST", "/slots/0?action=erase")
    assert st == 200, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/clinfer")
    ap.add_argument("-m", "--model", default=None, help="default: the catalogue's default model")
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="clinfer-slots-bench-")
    p, port = start(a.bin, a.model, a.ctx, folder)
    try:
        # the conversation's length fitted to --tokens: words scaled once by the measured tokens
        words = a.tokens
        for _ in range(3):
            msgs = conversation(words, 43)
            erase(port)
            _, u = ask(port, msgs)
            if abs(u["prompt_tokens"] - a.tokens) <= a.tokens // 50:
                break
            words = max(10, int(words * a.tokens / u["prompt_tokens"]))
        n_prompt = u["prompt_tokens"]
        # the file: the slot holds the conversation's prompt now
        st, saved = request(port, "POST", "/slots/0?action=save", {"filename": "conv.bin"})
        assert st == 200, saved
        rows = {"recomputed": [], "slot file": [], "RAM cache": []}
        restore_ms, cached = [], {}
        fresh_tokens = []
        for k in range(a.rounds):
            erase(port)
            dt, u = ask(port, conversation(words, 1000 + k))
            assert u["prompt_tokens_details"]["cached_tokens"] == 0, u
            rows["recomputed"].append(dt)
            fresh_tokens.append(u["prompt_tokens"])

            erase(port)
            t = time.perf_counter()
            st, r = request(port, "POST", "/slots/0?action=restore", {"filename": "conv.bin"})
            assert st == 200, r
            restore_ms.append(r["timings"]["restore_ms"])
            dt, u = ask(port, msgs)
            rows["slot file"].append(time.perf_counter() - t)
            cached["slot file"] = u["prompt_tokens_details"]["cached_tokens"]

            ask(port, [{"role": "user", "content": "Hi"}])  # takes the slot: the conversation goes to RAM
            dt, u = ask(port, msgs)
            rows["RAM cache"].append(dt)
            cached["RAM cache"] = u["prompt_tokens_details"]["cached_tokens"]
        _, metrics = request(port, "GET", "/metrics")
        hits = re.search(r"^clinfer_cache_ram_hits_total\{[^}]*\} (\S+)$", metrics.decode(), re.M).group(1)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    load = os.getloadavg()
    out = {"prompt_tokens": n_prompt, "slot_file_bytes": saved["n_written"], "rounds": a.rounds,
           "loadavg": load, "cache_ram_hits": float(hits), "restore_ms_median": statistics.median(restore_ms),
           "cached_tokens": cached, "recomputed_prompt_tokens": fresh_tokens}
    for k, v in rows.items():
        out[k] = {"median_s": statistics.median(v), "all_s": v}
        if k != "recomputed":
            out[k]["ratio_median"] = statistics.median(x / y for x, y in zip(v, rows["recomputed"]))
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"conversation of {n_prompt} prompt tokens; slot file {saved['n_written'] / 2**20:.1f} MiB; "
          f"(recomputed: {min(fresh_tokens)}..{max(fresh_tokens)}); {a.rounds} rounds; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| path | time to first token (median) | / recomputed (median of rounds) | prompt tokens reused |")
    print("| --- | ---: | ---: | ---: |")
    for k, v in rows.items():
        ratio = "1" if k == "recomputed" else f"{out[k]['ratio_median']:.3f} (1/{1 / out[k]['ratio_median']:.0f})"
        print(f"| {k} | {out[k]['median_s'] * 1e3:.0f} ms | {ratio} | {cached.get(k, 0)} |")
    print(f"restore alone (server's restore_ms, median): {out['restore_ms_median']:.1f} ms; "
          f"RAM-cache hits: {out['cache_ram_hits']:.0f}")


if __name__ == "__main__":
    main()

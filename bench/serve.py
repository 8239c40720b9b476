#!/usr/bin/env python3
"""A bounded load test of an OpenAI-compatible server on loopback:
`clinfer serve`, or llama-cpp-python's llama_cpp.server with the same file,
driven by the same client (the standard library only).

For each concurrency level, N streaming completions (greedy, max_tokens
each, one prompt per request from a fixed list) are sent by that many
workers; it reports errors, time to first token (TTFT), the time between
tokens (ITL) at p50/p99, and the aggregate generated tokens per second
(tokens counted as streamed chunks with text, which is one a token on both
servers). A request fails on an HTTP error, an error event, or a stream
without [DONE] or without finish_reason stop/length. Exits 1 when any
request failed.

With --price USD_PER_HOUR each level also reports what a million generated
tokens cost at its aggregate rate (usd_per_mtok = price * 1e6 / (3600 *
tokens/s)): the machine's hour divided among the tokens it streamed, the
prompts' processing counted in the time, not in the tokens.

With --shared-prefix-tokens N it measures the prefix cache instead: every
request begins with the same system prompt of about N tokens (fresh text
each run, so nothing of it is cached before); one request is sent alone,
then --shared-requests K together, and it reports the TTFT of the first
against the p50 of the later ones, and the cached tokens the later ones
report (usage.prompt_tokens_details.cached_tokens).

    bench/serve.py --url http://127.0.0.1:8080 [--requests 64] [--concurrency 1,4,8,16]
                   [--max-tokens 64] [--prompt-tokens N] [--shared-prefix-tokens 1000 [--shared-requests 4]] [--json]
                   [--price USD_PER_HOUR]
"""
import argparse
import concurrent.futures
import http.client
import json
import statistics
import sys
import time
import urllib.parse

PROMPTS = ["Once upon a time, in a small village by the sea,", "The history of the printing press begins",
           "Here is a recipe for a simple tomato soup:", "The three laws of thermodynamics are",
           "Dear diary, today I finally", "In the year 2150, the first city on Mars", "A short guide to learning C:",
           "The old lighthouse keeper looked at the storm and"]
SYSTEM = ("You are a careful assistant for a public library. Answer questions about opening hours, loans, renewals, "
          "fines, room bookings and the catalogue. Keep answers short, polite and accurate; when unsure, say so and "
          "point the reader to the front desk. ")


def one_request(url, model, prompt, max_tokens, timeout, usage=None):
    """(ttft s, [inter-token s], tokens, error or None) of one streamed completion; with a dict
    `usage`, the answer's usage is asked for and stored in it."""
    u = urllib.parse.urlsplit(url)
    req = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    if usage is not None:
        req["stream_options"] = {"include_usage": True}
    body = json.dumps(req).encode()
    t0 = time.perf_counter()
    times, finish = [], None
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return None, [], 0, f"HTTP {r.status}: {r.read()[:200]!r}"
        done = False
        for line in r:  # server-sent events, one `data:` line each
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                done = True
                break
            ev = json.loads(line[6:])
            if "error" in ev:
                return None, [], 0, f"error event: {ev['error']}"
            if usage is not None and ev.get("usage"):
                usage.update(ev["usage"])
            if ev.get("choices") and ev["choices"][0].get("text"):
                times.append(time.perf_counter())
            if ev.get("choices") and ev["choices"][0].get("finish_reason"):
                finish = ev["choices"][0]["finish_reason"]
        c.close()
        if not done:
            return None, [], 0, "the stream ended without [DONE]"
        if finish not in ("stop", "length"):  # e.g. cut short by the next request
            return None, [], 0, f"finish_reason {finish!r} after {len(times)} tokens"
    except (OSError, http.client.HTTPException, ValueError) as e:
        return None, [], 0, f"{type(e).__name__}: {e}"
    if not times:
        return None, [], 0, "no tokens"
    return times[0] - t0, [b - a for a, b in zip(times, times[1:])], len(times), None


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def usd_per_mtok(usd_per_hour, tokens_per_s):
    """Dollars per million tokens at tokens_per_s on a machine costing usd_per_hour."""
    return usd_per_hour * 1e6 / (3600 * tokens_per_s) if tokens_per_s > 0 else None


def level(url, model, n, conc, max_tokens, timeout, prompts=PROMPTS):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        res = list(ex.map(lambda i: one_request(url, model, prompts[i % len(prompts)], max_tokens, timeout),
                          range(n)))
    wall = time.perf_counter() - t0
    ok = [r for r in res if r[3] is None]
    ttft = [r[0] for r in ok]
    itl = [d for r in ok for d in r[1]]
    tokens = sum(r[2] for r in ok)
    return {"concurrency": conc, "requests": n, "errors": n - len(ok), "wall_s": wall, "tokens": tokens,
            "tokens_per_s": tokens / wall, "ttft_p50_ms": pct(ttft, 50) * 1e3, "ttft_p99_ms": pct(ttft, 99) * 1e3,
            "itl_p50_ms": pct(itl, 50) * 1e3, "itl_p99_ms": pct(itl, 99) * 1e3,
            "first_error": next((r[3] for r in res if r[3]), None)}


def shared_prefix(url, model, n_tokens, k, max_tokens, timeout):
    """One request alone, then k together, all beginning with the same system prompt of about n_tokens."""
    u = urllib.parse.urlsplit(url)  # how many characters a token: the server's count of a sample
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    sample = SYSTEM * 8
    c.request("POST", "/v1/completions", body=json.dumps({"model": model, "prompt": sample, "max_tokens": 1}).encode(),
              headers={"Content-Type": "application/json"})
    per_token = len(sample) / json.loads(c.getresponse().read())["usage"]["prompt_tokens"]
    c.close()
    text = f"Session {time.time_ns():x}. "  # first, so that no slot holds this prefix yet
    while len(text) < n_tokens * per_token:
        text += SYSTEM
    text = text[:int(n_tokens * per_token)] + "\n\n"
    first_usage = {}
    first = one_request(url, model, text + PROMPTS[0], max_tokens, timeout, first_usage)
    usages = [{} for _ in range(k)]
    with concurrent.futures.ThreadPoolExecutor(k) as ex:
        later = list(ex.map(lambda i: one_request(url, model, text + PROMPTS[(i + 1) % len(PROMPTS)], max_tokens,
                                                  timeout, usages[i]), range(k)))
    ok = [r for r in later if r[3] is None]
    cached = [x.get("prompt_tokens_details", {}).get("cached_tokens", 0) for x in usages if x]
    return {"prompt_tokens": first_usage.get("prompt_tokens"), "later_requests": k,
            "errors": (first[3] is not None) + k - len(ok), "first_ttft_ms": (first[0] or float("nan")) * 1e3,
            "later_ttft_p50_ms": pct([r[0] for r in ok], 50) * 1e3,
            "first_cached_tokens": first_usage.get("prompt_tokens_details", {}).get("cached_tokens"),
            "later_cached_tokens_p50": pct(cached, 50),
            "first_error": first[3] or next((r[3] for r in later if r[3]), None)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", default="1,4,8,16")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=600, help="seconds a request may take")
    ap.add_argument("--shared-prefix-tokens", type=int, default=0,
                    help="measure the prefix cache: a shared system prompt of about this many tokens")
    ap.add_argument("--shared-requests", type=int, default=4, help="requests sent together after the first")
    ap.add_argument("--prompt-tokens", type=int, default=0,
                    help="lengthen each prompt to about this many tokens (a distinct text before each story opening)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--price", type=float, default=0, metavar="USD_PER_HOUR",
                    help="the machine's cost an hour: dollars per million generated tokens at each level")
    a = ap.parse_args()
    if a.price < 0:
        ap.error("--price must be >= 0")
    u = urllib.parse.urlsplit(a.url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("serve.py: loopback only (127.0.0.1, localhost, ::1)")
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/v1/models")
    model = json.loads(c.getresponse().read())["data"][0]["id"]
    if a.shared_prefix_tokens > 0:
        r = shared_prefix(a.url, model, a.shared_prefix_tokens, a.shared_requests, a.max_tokens, a.timeout)
        if a.json:
            print(json.dumps({"model": model, "max_tokens": a.max_tokens, "shared_prefix": r}, indent=1))
        else:
            print(f"model {model}, max_tokens {a.max_tokens}, greedy, streamed; a shared system prompt of about"
                  f" {a.shared_prefix_tokens} tokens: 1 request alone, then {r['later_requests']} together")
            print("| prompt tokens | errors | TTFT first ms | TTFT later p50 ms | cached first | cached later p50 |")
            print("| --- | --- | --- | --- | --- | --- |")
            print(f"| {r['prompt_tokens']} | {r['errors']} | {r['first_ttft_ms']:.0f} | {r['later_ttft_p50_ms']:.0f} |"
                  f" {r['first_cached_tokens']} | {r['later_cached_tokens_p50']} |")
            if r["first_error"]:
                print(f"  first error: {r['first_error']}")
        sys.exit(1 if r["errors"] else 0)
    prompts = PROMPTS
    if a.prompt_tokens > 0:  # about 4 characters a token; a number first, so that no two prompts share a prefix
        prompts = [(f"Note {k}. " + SYSTEM * (1 + 4 * a.prompt_tokens // len(SYSTEM)))[:4 * a.prompt_tokens] + "\n\n" + p
                   for k, p in enumerate(PROMPTS * 8)]
    rows = []
    for conc in (int(x) for x in a.concurrency.split(",")):
        rows.append(level(a.url, model, a.requests, conc, a.max_tokens, a.timeout, prompts))
        if a.price > 0:
            rows[-1]["usd_per_mtok"] = usd_per_mtok(a.price, rows[-1]["tokens_per_s"])
        if not a.json:
            r = rows[-1]
            if len(rows) == 1:
                print(f"model {model}, {a.requests} requests a level, max_tokens {a.max_tokens}, greedy, streamed")
                print("| concurrency | errors | tokens | wall s | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms |"
                      " ITL p99 ms |" + (f" $/M tokens at ${a.price:g}/h |" if a.price > 0 else ""))
                print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if a.price > 0 else ""))
            cost = r.get("usd_per_mtok")
            print(f"| {r['concurrency']} | {r['errors']} | {r['tokens']} | {r['wall_s']:.1f} | {r['tokens_per_s']:.1f} |"
                  f" {r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | {r['itl_p50_ms']:.1f} | {r['itl_p99_ms']:.1f} |"
                  + (f" {cost:.4g} |" if a.price > 0 else ""), flush=True)
            if r["first_error"]:
                print(f"  first error: {r['first_error']}", flush=True)
    if a.json:
        doc = {"model": model, "max_tokens": a.max_tokens, "levels": rows}
        if a.price > 0:
            doc["usd_per_hour"] = a.price
        print(json.dumps(doc, indent=1))
    sys.exit(1 if any(r["errors"] for r in rows) else 0)


if __name__ == "__main__":
    main()

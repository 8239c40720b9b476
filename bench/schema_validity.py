#!/usr/bin/env python3
"""Structured output's promise, measured: every reply that ends with
finish_reason "stop" validates against its schema.

It starts `clinfer serve` (a free loopback port, the port it prints), and
for each schema of a directory (tests/data/schemas) asks the chat API for
a reply under response_format json_schema at temperature 1.0, with n
choices of seeds seed, seed + 1, ... (choice i is what seed + i alone
gives; the prompt is evaluated once). Each reply that ends with stop is
parsed and validated by the `jsonschema` package (its draft from $schema,
formats checked where it has a checker); a length one was cut by
max_tokens, a prefix the grammar allows, and is only counted. Prints a table, and exits 1 when a stop reply fails
to parse or validate, or a request fails.

With --cache it measures the grammar cache instead: each schema's
request twice, greedy (the same tokens both times) after a request without
it has cached the prompt: the first compiles the grammar and builds the
masks of the states it reaches, the second finds both. It reports each
one's wall time and generation time (timings.predicted_ms).

    bench/schema_validity.py [--bin build/clinfer] [-m MODEL] [--schemas tests/data/schemas]
                             [--limit N] [--seeds 3] [--seed 1] [--max-tokens 512] [--cache] [--json]
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import subprocess
import sys
import time

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def start(binary, model, parallel, ctx):
    cmd = [binary, "serve", "--port", "0", "--parallel", str(parallel), "--ctx", str(ctx)] + (["-m", model] if model else [])
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        p.kill()
        sys.exit(f"schema_validity: no 'listening' line from {cmd}: {line!r}")
    port = int(m.group(1))
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if request(port, "GET", "/health")[0] == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None:
            sys.exit(f"schema_validity: the server exited: {p.stderr.read()[-2000:]}")
        time.sleep(0.1)
    p.kill()
    sys.exit("schema_validity: the server was not ready in 300 s")


def request(port, method, path, body=None, timeout=900):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data[:1] in (b"{", b"[") else data.decode()


def check(schema, text):
    """None when text is a JSON text that validates, else why not."""
    try:
        value = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value), key=str)
    return f"invalid: {errors[0].message}" if errors else None


def one_schema(port, name, schema, seeds, seed, max_tokens):
    msgs = [{"role": "system", "content": "Reply with one JSON value that follows this JSON Schema:\n"
                                          + json.dumps(schema, separators=(",", ":"))},
            {"role": "user", "content": f"Give me an example {schema.get('title', name)}."}]
    body = {"messages": msgs, "temperature": 1.0, "seed": seed, "n": seeds, "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}}
    t = time.time()
    status, r = request(port, "POST", "/v1/chat/completions", body)
    row = {"schema": name, "seconds": time.time() - t, "replies": 0, "stop": 0, "length": 0, "valid": 0,
           "failures": []}
    if status != 200:
        row["failures"].append(f"HTTP {status}: {r}")
        return row
    for c in r["choices"]:
        row["replies"] += 1
        text, finish = c["message"]["content"] or "", c["finish_reason"]
        if finish == "stop":
            row["stop"] += 1
            why = check(schema, text)
            if why:
                row["failures"].append(f"seed {seed + c['index']}: {why}: {text[:200]!r}")
            else:
                row["valid"] += 1
        elif finish == "length":
            row["length"] += 1
        else:
            row["failures"].append(f"seed {seed + c['index']}: finish_reason {finish!r}")
    return row


def run(binary, model, schemas_dir, limit, seeds, seed, max_tokens, parallel):
    """The rows of the schemas of schemas_dir (the first `limit` by name)."""
    names = sorted(f for f in os.listdir(schemas_dir) if f.endswith(".json"))[:limit or None]
    schemas = {}
    for f in names:
        with open(os.path.join(schemas_dir, f)) as fh:
            schemas[f[:-5]] = json.load(fh)
    # n choices take n slots: room for two schemas at once
    p, port = start(binary, model, max(parallel, seeds), 2048)
    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, parallel // seeds)) as ex:
            rows = list(ex.map(lambda kv: one_schema(port, kv[0], kv[1], seeds, seed, max_tokens), schemas.items()))
    finally:
        p.terminate()
        p.wait(60)
    return rows


def cache_speedup(binary, model, schemas_dir, limit, max_tokens):
    names = sorted(f for f in os.listdir(schemas_dir) if f.endswith(".json"))[:limit or None]
    p, port = start(binary, model, 1, 2048)
    rows = []
    try:
        for f in names:
            with open(os.path.join(schemas_dir, f)) as fh:
                schema = json.load(fh)
            msgs = [{"role": "user", "content": f"Give me an example {schema.get('title', f[:-5])} as JSON."}]
            request(port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 1})  # the prompt cached
            row = {"schema": f[:-5]}
            for k in ("first", "second"):
                t = time.time()
                status, r = request(port, "POST", "/v1/chat/completions", {
                    "messages": msgs, "temperature": 0, "max_tokens": max_tokens,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}})
                if status != 200:
                    row = None
                    break
                row[k] = {"wall_ms": (time.time() - t) * 1e3, "gen_ms": r["timings"]["predicted_ms"],
                          "tokens": r["usage"]["completion_tokens"], "text": r["choices"][0]["message"]["content"]}
            if row:
                assert row["first"]["text"] == row["second"]["text"]
                rows.append(row)
    finally:
        p.terminate()
        p.wait(60)
    return rows


def cache_table(rows):
    out = ["| schema | tokens | first: wall ms | gen ms | second: wall ms | gen ms | speedup (wall) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        a, b = r["first"], r["second"]
        out.append(f"| {r['schema']} | {a['tokens']} | {a['wall_ms']:.0f} | {a['gen_ms']:.0f} | {b['wall_ms']:.0f} | "
                   f"{b['gen_ms']:.0f} | {a['wall_ms'] / b['wall_ms']:.2f}x |")
    fa = sum(r["first"]["wall_ms"] for r in rows)
    fb = sum(r["second"]["wall_ms"] for r in rows)
    out.append(f"| **{len(rows)} schemas** | {sum(r['first']['tokens'] for r in rows)} | {fa:.0f} | "
               f"{sum(r['first']['gen_ms'] for r in rows):.0f} | {fb:.0f} | "
               f"{sum(r['second']['gen_ms'] for r in rows):.0f} | {fa / fb:.2f}x |")
    return "\n".join(out)


def table(rows):
    out = ["| schema | replies | stop | length | valid of stop | seconds |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['schema']} | {r['replies']} | {r['stop']} | {r['length']} | {r['valid']}/{r['stop']} | "
                   f"{r['seconds']:.1f} |")
    stop = sum(r["stop"] for r in rows)
    valid = sum(r["valid"] for r in rows)
    out.append(f"| **{len(rows)} schemas** | {sum(r['replies'] for r in rows)} | {stop} | "
               f"{sum(r['length'] for r in rows)} | {valid}/{stop} ({100.0 * valid / stop if stop else 0:.1f}%) | "
               f"{sum(r['seconds'] for r in rows):.0f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("-m", "--model", default=None, help="a GGUF file or catalogue name (default: serve's)")
    ap.add_argument("--schemas", default=os.path.join(ROOT, "tests", "data", "schemas"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N schemas (by name)")
    ap.add_argument("--seeds", type=int, default=3, help="replies a schema (n choices)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--parallel", type=int, default=6, help="the server's slots")
    ap.add_argument("--cache", action="store_true", help="the grammar cache: each schema's request twice")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.cache:
        rows = cache_speedup(a.bin, a.model, a.schemas, a.limit, a.max_tokens)
        print(json.dumps(rows, indent=1) if a.json else cache_table(rows))
        return
    rows = run(a.bin, a.model, a.schemas, a.limit, a.seeds, a.seed, a.max_tokens, a.parallel)
    print(json.dumps(rows, indent=1) if a.json else table(rows))
    failures = [f"{r['schema']}: {f}" for r in rows for f in r["failures"]]
    for f in failures:
        print("FAIL", f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

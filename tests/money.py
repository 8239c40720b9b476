#!/usr/bin/env python3
"""What a token costs, recomputed here from the figures each command reports:
`clinfer bench --price` (JSON and text: dollars per million prompt,
generated and parallel tokens from the measured rates), energy per token
through a fake powercap tree (a FIFO serving counter readings in turn, so
the joules are known exactly) and where there is none, `clinfer info
--price` (training 6*N*D and serving at the stated roofs, against info's own
FLOP and byte counts), and bench/serve.py --price against a `clinfer serve`
on loopback. Small runs on a tiny model.

  python3 tests/money.py CLINFER_BIN TINY_GGUF_BIN
"""
import fcntl
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
passed = 0


def ok(what):
    global passed
    passed += 1
    print(f"ok: {what}")


def close(got, want, rel=1e-4, what=""):
    assert abs(got - want) <= rel * abs(want) + 1e-12, f"{what}: {got} != {want}"


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120)
    if check:
        assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}"
    return p


def per_mtok(price, tps):
    return price * 1e6 / (3600 * tps)


def bench_price(clinfer, model, d):
    price = round(random.uniform(0.1, 40), 2)
    empty = os.path.join(d, "no-powercap")
    os.mkdir(empty)
    env = {"CLINFER_POWERCAP_DIR": empty}
    out = run([clinfer, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "1", "--parallel", "2", "--price",
               str(price), "--json"], env).stdout
    r = json.loads(out)[0]
    assert r["usd_per_hour"] == price, r
    for k in ("pp", "tg", "tg_parallel"):
        close(r[k]["usd_per_mtok"], per_mtok(price, r[k]["tps"]), 1e-3, k)
    assert r["tg_parallel"]["sequences"] == 2
    # no counters: said so, and no figure
    assert r["energy"]["available"] is False and empty in r["energy"]["reason"], r["energy"]
    assert "joules_per_token" not in r["pp"] and "joules_per_token" not in r["tg"], r
    ok(f"bench --price {price} --json: $/M tokens pp {r['pp']['usd_per_mtok']:.4g}, tg {r['tg']['usd_per_mtok']:.4g}, "
       f"x2 {r['tg_parallel']['usd_per_mtok']:.4g}; energy unavailable stated")
    # text: the cost line from the table's own rates
    txt = run([clinfer, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "1", "--price", str(price)], env).stdout
    tps = {m.group(1): float(m.group(2)) for m in re.finditer(r"\| (pp16|tg8) \| ([0-9.]+) ±", txt)}
    cost = re.search(r"cost at \$([0-9.]+) an hour: \$([0-9.e+-]+) per million prompt tokens \(pp16\); "
                     r"\$([0-9.e+-]+) per million generated tokens \(tg8\)", txt)
    assert cost and len(tps) == 2, txt
    assert float(cost.group(1)) == price
    close(float(cost.group(2)), per_mtok(price, tps["pp16"]), 2e-3, "text pp")
    close(float(cost.group(3)), per_mtok(price, tps["tg8"]), 2e-3, "text tg")
    assert re.search(r"energy per token: unavailable \(.*no-powercap", txt), txt
    # without --price: no money in the JSON
    r = json.loads(run([clinfer, "bench", "-m", model, "-p", "4", "-n", "2", "-r", "1", "--json"], env).stdout)[0]
    assert "usd_per_hour" not in r and "usd_per_mtok" not in r["tg"], r
    ok("bench --price text: the cost line agrees with the table's t/s")


def fifo_server(path, values):
    """Each read of the FIFO gets the next value: the counter as bench reads it (one read() each). The
    server holds the FIFO open read-write, so that its buffer outlives each reader, and puts a value in
    only once the one before was taken. Returns a function saying how many were taken."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    taken = [0]

    def pending():
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]

    def serve():
        for v in values:
            os.write(fd, f"{v}\n".encode())
            while pending():
                time.sleep(0.0002)
            taken[0] += 1
    threading.Thread(target=serve, daemon=True).start()
    return lambda: taken[0]


def bench_energy(clinfer, model, d):
    pc = os.path.join(d, "powercap")
    pkg = os.path.join(pc, "intel-rapl:0")
    os.makedirs(os.path.join(pkg, "intel-rapl:0:0"))  # a sub-zone: never read
    with open(os.path.join(pkg, "intel-rapl:0:0", "energy_uj"), "w") as f:
        f.write("1\n")
    with open(os.path.join(pkg, "name"), "w") as f:
        f.write("package-0\n")
    rng = 262143328850  # max_energy_range_uj as a real package reports it
    with open(os.path.join(pkg, "max_energy_range_uj"), "w") as f:
        f.write(f"{rng}\n")
    os.mkfifo(os.path.join(pkg, "energy_uj"))
    # readings: at open, pp before/after, tg before/after (tg wraps past the range)
    pp0 = random.randrange(rng // 2)
    dpp, dtg = random.randrange(1, 10**9), random.randrange(1, 10**9)
    tg0 = rng - 1 - random.randrange(dtg)
    vals = [pp0, pp0, pp0 + dpp, tg0, (tg0 + dtg) % rng]
    reps = 2
    taken = fifo_server(os.path.join(pkg, "energy_uj"), vals)
    out = run([clinfer, "bench", "-m", model, "-p", "16", "-n", "8", "-r", str(reps), "--json"],
              {"CLINFER_POWERCAP_DIR": pc}).stdout
    time.sleep(0.05)
    assert taken() == len(vals), f"bench read the counter {taken()} times, not once at open + 2 runs x 2"
    r = json.loads(out)[0]
    assert r["energy"]["available"] is True and r["energy"]["source"] == "package-0", r["energy"]
    close(r["pp"]["joules_per_token"], dpp * 1e-6 / (reps * 16), 1e-5, "pp J/token")
    close(r["tg"]["joules_per_token"], dtg * 1e-6 / (reps * 8), 1e-5, "tg J/token (wrapped)")
    for k in ("pp", "tg"):  # the mean power over the runs: joules over at least the timed part
        j = r[k]["joules_per_token"] * reps * r[k]["n"]
        assert 0 < r[k]["watts"] <= j * r[k]["tps"] / (reps * r[k]["n"]) * 1.01, r[k]
    ok(f"bench energy through a fake powercap: pp {r['pp']['joules_per_token']:.4g} J/token, "
       f"tg {r['tg']['joules_per_token']:.4g} J/token (a wrap undone)")
    # the text line
    taken = fifo_server(os.path.join(pkg, "energy_uj"), vals)
    txt = run([clinfer, "bench", "-m", model, "-p", "16", "-n", "8", "-r", str(reps)],
              {"CLINFER_POWERCAP_DIR": pc}).stdout
    time.sleep(0.05)
    assert taken() == len(vals), taken()
    m = re.search(r"energy per token \(RAPL package-0: .*\): pp16 ([0-9.e+-]+) J \([0-9.]+ W\); "
                  r"tg8 ([0-9.e+-]+) J", txt)
    assert m, txt
    close(float(m.group(1)), dpp * 1e-6 / (reps * 16), 1e-3, "text pp J")
    close(float(m.group(2)), dtg * 1e-6 / (reps * 8), 1e-3, "text tg J")
    ok("bench energy text line")


def info_price(clinfer, model):
    g, b = round(random.uniform(20, 2000), 1), round(random.uniform(5, 500), 1)
    price, util = round(random.uniform(0.5, 30), 2), round(random.uniform(0.05, 1), 2)
    par = random.choice([1, 3, 64])
    base = [clinfer, "info", "-m", model, "--gflops", str(g), "--gbs", str(b), "--price", str(price), "--json"]
    for extra, tokens in ((["--util", str(util), "--parallel", str(par)], None),
                          (["--util", str(util), "--train-tokens", "3e9", "--serve-tokens", "12345"], 3e9)):
        r = json.loads(run(base + extra).stdout)
        m, n = r["money"], r["params_total"]
        u = util
        assert m["usd_per_hour"] == price and abs(m["util"] - u) < 1e-6, m
        tr = m["training"]
        want_tokens = tokens if tokens else 20 * n
        assert tr["tokens_rule"] == ("given" if tokens else "chinchilla: 20 x params"), tr
        close(tr["tokens"], want_tokens, 1e-5, "train tokens")
        close(tr["flops"], 6 * n * want_tokens, 1e-5, "6ND")
        secs = 6 * n * want_tokens / (u * g * 1e9)
        close(tr["seconds"], secs, 1e-5, "train seconds")
        close(tr["usd"], secs / 3600 * price, 1e-5, "train usd")
        sv = m["serving"]
        p = sv["parallel"]
        assert p == (1 if tokens else par), sv
        serve_tokens = 12345 if tokens else 1e6
        close(sv["tokens"], serve_tokens, 1e-6, "serve tokens")
        close(sv["flops_per_token"], r["flops"]["per_token_c1"], 1e-5, "a token's FLOPs = info's at c = 1")
        # a step reads the weights once and each sequence's K and V: info's decode bytes at c = 1 are the
        # weights + the K/V attended (one position) + the token's own (no sliding window reaches c = 1)
        kv = r["inference_memory"]["kv_per_token_f32"]
        step_bytes = r["bytes_moved"]["decode_c1"] + (p - 1) * 2 * kv
        close(sv["bytes_per_step"], step_bytes, 1e-5, "a step's bytes")
        tc, tm = p * sv["flops_per_token"] / (u * g * 1e9), step_bytes / (b * 1e9)
        close(sv["t_compute_step_s"], tc, 1e-4, "t_compute")
        close(sv["t_memory_step_s"], tm, 1e-4, "t_memory")
        assert sv["bound"] == ("memory" if tm >= tc else "compute"), (sv, tc, tm)
        step = max(tc, tm)
        close(sv["seconds"], serve_tokens / p * step, 1e-4, "serve seconds")
        close(sv["usd"], serve_tokens / p * step / 3600 * price, 1e-4, "serve usd")
        close(sv["usd_per_mtok"], per_mtok(price, p / step), 1e-4, "serve $/M")
    ok(f"info --price --json: training and serving recomputed (roofs {g} GFLOP/s, {b} GB/s, util {util}, x{par})")
    txt = run([clinfer, "info", "-m", model, "--price", str(price)]).stdout  # the default device's roofs, measured
    for s in (f"money at ${price:.2f} an hour", "Chinchilla's compute-optimal ratio", "6 * N * D",
              "per million tokens", "measured on"):
        assert s in txt, (s, txt)
    assert re.search(r"(memory|compute)-bound: [0-9.]+ ms a step", txt), txt
    for bad in (["--util", "0"], ["--util", "1.5"], ["--price", "-1"], ["--train-tokens", "0"]):
        p = run([clinfer, "info", "-m", model, "--gflops", "1", "--gbs", "1", "--price", "1", *bad], check=False)
        assert p.returncode == 2 and "usage error" in p.stderr, (bad, p.returncode, p.stderr)
    ok("info --price text (roofs measured on the default device) and its usage errors")


def serve_price(clinfer, tiny, d):
    if run([clinfer, "serve", "--help"], check=False).returncode != 0:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
        import skip
        skip.note("money", "missing", "serve.py --price: this build has no `clinfer serve` (scripts/setup.sh installs its libraries)")
        return
    model = os.path.join(d, "tiny-noeog.gguf")
    run([tiny, "model", model, "--no-eog"])
    p = subprocess.Popen([clinfer, "serve", "--port", "0", "-m", model, "--parallel", "2"], stderr=subprocess.PIPE,
                         text=True)
    try:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", p.stderr.readline())
        assert m, "no 'listening' line"
        for line in p.stderr:  # the model loads and its kernels build after listening: wait for ready
            if "ready:" in line:
                break
        else:
            raise AssertionError("the server never said ready")
        price = round(random.uniform(0.5, 30), 2)
        out = run([sys.executable, os.path.join(ROOT, "bench", "serve.py"), "--url", m.group(1), "--requests", "4",
                   "--concurrency", "1,2", "--max-tokens", "8", "--price", str(price), "--json"]).stdout
        doc = json.loads(out)
        assert doc["usd_per_hour"] == price and len(doc["levels"]) == 2, doc
        for lv in doc["levels"]:
            assert lv["errors"] == 0 and lv["tokens"] > 0, lv
            close(lv["usd_per_mtok"], per_mtok(price, lv["tokens_per_s"]), 1e-9, "serve.py $/M")
        ok(f"bench/serve.py --price {price}: $/M tokens at concurrency 1, 2: "
           + ", ".join(f"{lv['usd_per_mtok']:.4g}" for lv in doc["levels"]))
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)


def main():
    clinfer, tiny = sys.argv[1], sys.argv[2]
    seed = int(os.environ.get("CLINFER_SEED", random.randrange(1 << 30)))
    random.seed(seed)
    print(f"seed {seed} (CLINFER_SEED replays it)")
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "tiny.gguf")
        run([tiny, "model", model, "Q8_0"])
        bench_price(clinfer, model, d)
        bench_energy(clinfer, model, d)
        info_price(clinfer, model)
        serve_price(clinfer, tiny, d)
    print(f"{passed} passed, 0 failed")


if __name__ == "__main__":
    main()

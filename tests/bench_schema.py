#!/usr/bin/env python3
"""`clinfer bench --json` on a tiny model: one valid JSON document whose
records carry the fields bench/compare.py, bench/real_sizes.py and
bench/RESULTS.md rely on; the text table's load, ttft and peak RSS rows.

  python3 tests/bench_schema.py CLINFER_BIN TINY_GGUF_BIN
"""
import json
import subprocess
import sys
import tempfile


def main():
    clinfer, tiny = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        model = f"{d}/tiny.gguf"
        subprocess.run([tiny, "model", model, "Q8_0"], check=True)
        out = subprocess.run([clinfer, "bench", "-m", model, "-p", "16", "-n", "8", "-r", "3", "--json"],
                             check=True, capture_output=True, text=True).stdout
        # runs shorter than the warm-up and the 16 profiled steps (these read
        # past the token array before; the sanitizer build catches a repeat)
        for p, n in (("4", "2"), ("0", "1"), ("1", "0")):
            small = subprocess.run([clinfer, "bench", "-m", model, "-p", p, "-n", n, "-r", "1", "--json"],
                                   capture_output=True, text=True)
            assert small.returncode == 0, f"bench -p {p} -n {n}: exit {small.returncode}\n{small.stderr}"
            rec = json.loads(small.stdout)[0]
            assert ("pp" in rec) == (p != "0") and ("tg" in rec) == (n != "0"), rec
        # the text table's load, first-token and memory rows
        txt = subprocess.run([clinfer, "bench", "-m", model, "-p", "4", "-n", "2", "-r", "1"],
                             check=True, capture_output=True, text=True).stdout
        for row in ("| load | ", "| ttft4 | ", "| peak RSS | "):
            assert row in txt, (row, txt)
    doc = json.loads(out)
    assert isinstance(doc, list) and len(doc) == 1, doc
    r = doc[0]
    for key, kind in (("device", str), ("model", str), ("size_bytes", (int, float)), ("params", (int, float)),
                      ("kv", str), ("roof", dict), ("pp", dict), ("tg", dict), ("tg_kernel_share", list)):
        assert isinstance(r.get(key), kind), f"{key}: {r.get(key)!r}"
    assert r["pp"]["n"] == 16 and r["tg"]["n"] == 8
    for k in ("tps", "stddev", "gflops"):
        assert r["pp"][k] >= 0, k
    assert r["pp"]["tps"] > 0 and r["tg"]["tps"] > 0 and r["tg"]["gbs"] > 0
    assert r["roof"]["copy_gbs"] > 0 and r["roof"]["fma_gflops"] > 0
    # load, time to first token (load + the 16-token prompt + 1 token, so
    # longer than the load) and the peak RSS (VmHWM: Linux has /proc)
    assert r["file_bytes"] >= r["size_bytes"] > 0, r
    assert 0 < r["load_s"] < r["ttft_s"] and r["ttft_prompt"] == 16, r
    assert r["peak_rss"] is None or r["peak_rss"] > r["size_bytes"], r
    if sys.platform.startswith("linux"):
        assert r["peak_rss"] is not None, r
    shares = r["tg_kernel_share"]
    assert shares and abs(sum(s["share"] for s in shares) - 1) < 1e-3, shares
    assert any(s["kernel"].startswith("gemv_") for s in shares), shares  # a GEMV ran
    # the launch counter agrees with the profile's launches, a token's bytes
    # with its GB/s, and the roof share with the copy roof of the same run
    tg = r["tg"]
    assert tg["launches_per_token"] > 0 and tg["launches_per_layer"] > 0, tg
    profiled = sum(s["launches_per_token"] for s in shares)
    assert abs(profiled - tg["launches_per_token"]) < 0.5, (profiled, tg)
    assert tg["bytes_per_token"] > tg["kv_bytes_per_token"] > 0, tg
    assert abs(tg["bytes_per_token"] * tg["tps"] * 1e-9 - tg["gbs"]) <= 0.01 + 1e-3 * tg["gbs"], tg
    assert abs(tg["roof_share"] - tg["gbs"] / r["roof"]["copy_gbs"]) < 1e-3 + 0.01 * tg["roof_share"], tg
    # bench launches: a token's launches plain and replayed from a command
    # buffer (where the device has one) leave the same residual
    out = subprocess.run([clinfer, "bench", "launches", "--layers", "2", "--rounds", "3", "--json"],
                         check=True, capture_output=True, text=True).stdout
    lau = json.loads(out)
    per_layer = {"layer11": 11, "layer7": 7, "ops11": 11}
    assert lau["layers"] == 2 and [w["name"] for w in lau["workloads"]] == list(per_layer), lau
    for w in lau["workloads"]:
        assert w["launches"] == 2 * per_layer[w["name"]] and w["plain_us"] > 0, w
        if lau["command_buffer"]:
            assert w["identical"] is True and w["replay_us"] > 0, w
    print(f"bench JSON ok: pp16 {r['pp']['tps']:.1f} t/s, tg8 {r['tg']['tps']:.1f} t/s, {len(shares)} kernels, "
          f"{tg['launches_per_token']:.1f} launches/token")
    print(f"bench launches JSON ok: command buffer {lau['command_buffer']}")
    print("3 passed, 0 failed")


if __name__ == "__main__":
    main()

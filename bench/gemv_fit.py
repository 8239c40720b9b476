#!/usr/bin/env python3
"""What bounds a decode GEMV: from `clinfer bench kernels --json`, the
gemv_cold rows (weights from memory, x quantized once) of each type fitted
as t = t0 + bytes / B (least relative squares): t0 the fixed cost of a launch as
the kernel's own time sees it (waking the driver's threads, dealing the
work-groups, the last one's tail), B the rate it streams at once going.

  python3 bench/gemv_fit.py kernels.json

Prints per type t0 (us), B (GB/s) and B against the run's copy roof, and
per row the measured and fitted time: a token of many small products pays
t0 per launch, which no faster loop removes.
"""
import json
import sys


def fit(points):
    """t = a + b·x over (x, t) by least squares of the relative error (each
    point weighted 1/t², so the head's 20 MB does not drown the 0.1 MB
    products); (a, b)."""
    w = [1.0 / (t * t) for _, t in points]
    sw = sum(w)
    sx = sum(wi * x for wi, (x, _) in zip(w, points))
    st = sum(wi * t for wi, (_, t) in zip(w, points))
    sxx = sum(wi * x * x for wi, (x, _) in zip(w, points))
    sxt = sum(wi * x * t for wi, (x, t) in zip(w, points))
    d = sw * sxx - sx * sx
    if len(points) < 2 or d == 0:
        return None
    b = (sw * sxt - sx * st) / d
    return (st - b * sx) / sw, b


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = json.load(open(sys.argv[1]))
    roof = d["roofs"]["copy_gbs"]
    rows = [r for r in d["matmul"] if r["kind"] == "gemv_cold"]
    print("copy roof of the run: %.1f GB/s" % roof)
    print("| type | launch cost t0 (us) | streaming B (GB/s) | B / copy | rows: shape MB measured -> fitted us |")
    print("| --- | ---: | ---: | ---: | --- |")
    for ty in sorted({r["type"] for r in rows}):
        pts = []
        for r in rows:
            if r["type"] == ty:
                mb = r["gbs"] * r["ms"] * 1e-3 * 1e9 / 1e6  # bytes moved, from the row's own rate
                pts.append((mb, r["ms"] * 1e3, "%d->%d" % (r["in"], r["out"])))
        f = fit([(x, t) for x, t, _ in pts])
        if not f or f[1] <= 0:
            continue
        t0, us_per_mb = f
        bw = 1e-3 / (us_per_mb * 1e-6)  # MB/us -> GB/s
        detail = ", ".join("%s %.2f MB %.1f -> %.1f" % (s, x, t, t0 + us_per_mb * x) for x, t, s in sorted(pts))
        print("| %s | %.1f | %.1f | %.0f%% | %s |" % (ty, t0, bw, 100 * bw / roof, detail))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/plot.py on small recorded JSON (tests/data/plot/: a trimmed
`clinfer bench kernels --json`, a `clinfer bench --json`, two
`bench/compare.py --json` and two `clinfer bench --price --parallel N --json`
of tiny models, recorded under load): every picture is written, a PNG of its own size.

  python3 tests/plot_smoke.py
"""
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "plot")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    return struct.unpack(">II", head[16:24])


def main():
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, os.path.join(ROOT, "bench", "plot.py"), "--kernels", f"{DATA}/kernels.json",
               "--bench", f"{DATA}/bench.json", "--compare", f"{DATA}/compare_a.json",
               f"{DATA}/compare_b.json", "--cost", f"{DATA}/cost_a.json", f"{DATA}/cost_b.json", "--out", out]
        written = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
        names = sorted(os.path.basename(w) for w in written)
        assert names == ["cost.png", "decode.png", "roofline.png", "vs_llamacpp.png"], names
        for w in written:
            wpx, hpx = png_size(w)
            assert wpx >= 400 and hpx >= 300 and os.path.getsize(w) > 10000, (w, wpx, hpx)
        # nothing to draw is a usage error, not an empty folder
        bad = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), "--out", out],
                             capture_output=True, text=True)
        assert bad.returncode == 2 and "nothing to draw" in bad.stderr, bad
        # cost from records without a price: said so
        bad = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "plot.py"), "--cost", f"{DATA}/bench.json",
                              "--out", out], capture_output=True, text=True)
        assert bad.returncode == 1 and "--price" in bad.stderr, bad
    print(f"plot.py ok: {', '.join(names)}")
    print("3 passed, 0 failed")


if __name__ == "__main__":
    main()

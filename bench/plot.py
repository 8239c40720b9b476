#!/usr/bin/env python3
"""bench/RESULTS.md's pictures from clinfer's JSON, as PNGs.

  python3 bench/plot.py [--kernels K.json] [--bench B.json] [--compare C.json ...] [--cost B.json ...]
                        [--out bench/plots]

--kernels: `clinfer bench kernels --json`; --bench: `clinfer bench --json`;
--compare: `bench/compare.py --json FILE`, one per file type. Writes what
its inputs allow:
  roofline.png       every product and attention kernel by arithmetic
                     intensity (FLOP per byte moved) against achieved
                     GFLOP/s, log-log, under the measured copy and FMA
                     roofs; a model's pp and tg as stars (--kernels or --bench)
  decode.png         a generated token's kernel time by kernel, its launches
                     and its share of the copy roof (--bench)
  vs_llamacpp.png    pp and tg against llama.cpp per file type (--compare)
  cost.png           dollars per million generated tokens against the
                     sequences a decode step (1: tg, N: tg_parallel), one
                     line per model and weight type, the prompt's dollars
                     per million as a dashed level (--cost: `clinfer bench
                     --price P --parallel N --json` outputs, any number)

matplotlib comes from Debian's python3-matplotlib (scripts/setup.sh): run
from another python3 (pyenv, a venv) that lacks it, the script runs itself
again under /usr/bin/python3.
"""
import argparse
import json
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"

try:
    import matplotlib
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.path.exists(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    sys.exit("plot.py: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TYPE_COLORS = {}


def color(name):
    """One colour per weight type, the same in every picture."""
    if name not in TYPE_COLORS:
        TYPE_COLORS[name] = plt.get_cmap("tab20")(len(TYPE_COLORS) % 20)
    return TYPE_COLORS[name]


def load(path):
    with open(path) as f:
        return json.load(f)


def roofline(kern, bench, out):
    """Kernels and the model's pp/tg by arithmetic intensity under the roofs."""
    roofs = kern["roofs"] if kern else bench[0]["roof"]
    copy, fma = roofs["copy_gbs"], roofs["fma_gflops"]
    pts = []  # (intensity, gflops, label, marker, colour)
    for m in (kern or {}).get("matmul", []):
        if m["gbs"] > 0 and m["gflops"] > 0:
            pts.append((m["gflops"] / m["gbs"], m["gflops"], m["type"], "o" if m["kind"] == "gemv" else "s",
                        color(m["type"])))
    for a in (kern or {}).get("attention", []):
        if a.get("kernel") == "attn_prefill" and a["tiled_bytes"] > 0:
            pts.append((a["flops"] / a["tiled_bytes"], a["tiled_gflops"], "attention prefill", "^", "black"))
    for r in bench or []:  # a whole model: FLOPs and bytes as `clinfer bench` counts them
        for test, c in (("pp", "darkred"), ("tg", "red")):
            f = r.get(test, {})
            if f.get("gflops", 0) > 0 and f.get("gbs", 0) > 0:
                pts.append((f["gflops"] / f["gbs"], f["gflops"], f"{r['model']} {test}{f['n']}", "*", c))
    fig, ax = plt.subplots(figsize=(9.5, 5.5), dpi=110)
    xs = [p[0] for p in pts] or [1]
    lo, hi = min(min(xs) / 2, 0.1), max(max(xs) * 2, 4 * fma / copy)
    ridge = fma / copy
    ax.plot([lo, ridge, hi], [lo * copy, fma, fma], "k-", lw=1.5)
    ax.annotate(f"copy roof {copy:.1f} GB/s", (lo * 1.5, lo * 1.5 * copy * 1.15), rotation=0, fontsize=8)
    ax.annotate(f"FMA roof {fma:.0f} GFLOP/s", (ridge * 1.3, fma * 1.1), fontsize=8)
    for x, y, label, marker, c in pts:
        ax.scatter([x], [y], marker=marker, s=110 if marker == "*" else 30, color=c, edgecolors="k", linewidths=0.3,
                   zorder=3)
    # one legend entry per colour (weight type, model test) and per marker shape
    from matplotlib.lines import Line2D
    handles, seen = [], set()
    for x, y, label, marker, c in pts:
        if label not in seen:
            seen.add(label)
            m = marker if marker in "*^" else "o"
            handles.append(Line2D([], [], ls="", marker=m, color=c, markeredgecolor="k", markeredgewidth=0.3,
                                  markersize=9 if m == "*" else 6, label=label))
    shapes = [("o", "GEMV (n = 1)"), ("s", "GEMM (n = 512-2048)")]
    handles += [Line2D([], [], ls="", marker=m, color="w", markeredgecolor="k", label=t) for m, t in shapes]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved GFLOP/s")
    dev = kern["device"]["name"] if kern else bench[0]["device"]
    ax.set_title(f"roofline: {dev}; roofs measured in the same run\n"
                 f"(weights that fit the cache can pass the copy roof, which streams from memory)", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def decode(bench, out):
    """Where a generated token's kernel time goes, with its launches and roof share."""
    recs = [r for r in bench if "tg" in r and r.get("tg_kernel_share")]
    fig, axes = plt.subplots(len(recs), 1, figsize=(8, 1.6 + 0.28 * max(len(r["tg_kernel_share"]) for r in recs)
                                                    * len(recs)), dpi=110, squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        ks = r["tg_kernel_share"]
        names = [f"{k['kernel']} ({k['launches_per_token']:.0f}/token)" for k in ks]
        ax.barh(range(len(ks)), [100 * k["share"] for k in ks], color=[color(k["kernel"]) for k in ks])
        ax.set_yticks(range(len(ks)))
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("% of a generated token's kernel time", fontsize=8)
        tg = r["tg"]
        extra = ""
        if "launches_per_token" in tg:
            extra = (f"; {tg['launches_per_token']:.0f} launches/token ({tg['launches_per_layer']:.1f}/layer), "
                     f"{tg['bytes_per_token'] / 1e6:.1f} MB/token, {100 * tg['roof_share']:.0f}% of the "
                     f"{r['roof']['copy_gbs']:.1f} GB/s copy roof")
        ax.set_title(f"{r['model']} tg{tg['n']}: {tg['tps']:.1f} t/s{extra}", fontsize=8)
        ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def vs_llamacpp(compares, out):
    """clinfer / llama.cpp per file, pp and tg side by side."""
    def label(c):
        loads = [r["load"] for r in c.get("per_round", []) if "load" in r]
        return f"{c['model']}\n(attn_q: {c['file_type']})" + (f"\nload <= {max(loads):.1f}" if loads else "")

    labels = [label(c) for c in compares]
    tests = sorted({t["test"] for c in compares for t in c["tests"]}, key=lambda t: (not t.startswith("pp"), t))
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(compares) + 2), 4.5), dpi=110)
    w = 0.8 / max(len(tests), 1)
    for j, name in enumerate(tests):
        xs, ys, notes, bx, by = [], [], [], [], []
        for i, c in enumerate(compares):
            t = next((t for t in c["tests"] if t["test"] == name), None)
            if t:
                xs.append(i + (j - (len(tests) - 1) / 2) * w)
                ys.append(t["ratio"])
                notes.append(f"{t['ratio']:.2f}x\n{t['clinfer_tps']:.0f}/{t['llama_cpp_tps']:.0f}")
                if "best_ratio" in t:
                    bx.append(xs[-1])
                    by.append(t["best_ratio"])
        bars = ax.bar(xs, ys, w, label=name, color="tab:blue" if name.startswith("pp") else "tab:orange")
        if bx:
            ax.scatter(bx, by, marker="_", s=400, color="k", zorder=3,
                       label="best round / best round" if j == 0 else None)
        for b, note in zip(bars, notes):
            ax.annotate(note, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=6)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(compares)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("clinfer / llama.cpp (median of per-round ratios)")
    ax.set_ylim(0, max([max(t["ratio"], t.get("best_ratio", 0)) for c in compares for t in c["tests"]] + [1]) * 1.25)
    c0 = compares[0]
    ax.set_title(f"clinfer against llama.cpp (llama-cpp-python {c0['llama_cpp_python']}), {c0['threads']} thread{'s' if c0['threads'] != 1 else ''}, "
                 f"{c0['rounds']} rounds x {c0['reps']} reps\nlabels: ratio, clinfer / llama.cpp t/s", fontsize=8)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def cost(benches, out):
    """$ per million tokens against concurrency, per model and weight type, from bench --price records."""
    lines = {}  # model -> {sequences: $/M generated}, and its prompt's $/M
    prompt, prices, devices = {}, set(), set()
    for doc in benches:
        for r in doc:
            if "usd_per_hour" not in r:
                sys.exit("plot.py: --cost needs `clinfer bench --price USD_PER_HOUR --json` output")
            prices.add(r["usd_per_hour"])
            devices.add(r["device"])
            # the model's arch and attn_q type, and its size: files whose first tensor types agree differ in size
            name = r["model"] = f"{r['model']} ({r['size_bytes'] / 2**20:.0f} MiB)"
            pts = lines.setdefault(name, {})
            if "tg" in r:
                pts.setdefault(1, []).append(r["tg"]["usd_per_mtok"])
            if "tg_parallel" in r:
                pts.setdefault(r["tg_parallel"]["sequences"], []).append(r["tg_parallel"]["usd_per_mtok"])
            if "pp" in r:
                prompt.setdefault(r["model"], []).append((r["pp"]["usd_per_mtok"], r["pp"]["n"]))
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for model in sorted(lines):
        xs = sorted(lines[model])
        ys = [sorted(lines[model][x])[len(lines[model][x]) // 2] for x in xs]  # a median where runs repeat
        ax.plot(xs, ys, "o-", color=color(model), label=f"{model}: generated")
        for x, y in zip(xs, ys):
            ax.annotate(f"${y:.3g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6)
        if model in prompt:
            pv = sorted(v for v, _ in prompt[model])
            ax.axhline(pv[len(pv) // 2], color=color(model), ls="--", lw=1,
                       label=f"{model}: prompt (pp{prompt[model][0][1]})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    xs = sorted({x for pts in lines.values() for x in pts})
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel("sequences a decode step (clinfer bench --parallel)")
    ax.set_ylabel("$ per million tokens")
    price = ", ".join(f"${p:g}" for p in sorted(prices))
    ax.set_title(f"what a token costs at {price} an hour: {', '.join(sorted(devices))}\n"
                 f"(the measured rates; price * 1e6 / (3600 * tokens/s))", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", help="clinfer bench kernels --json output")
    ap.add_argument("--bench", help="clinfer bench --json output")
    ap.add_argument("--compare", nargs="*", default=[], help="bench/compare.py --json outputs")
    ap.add_argument("--cost", nargs="*", default=[], help="clinfer bench --price P [--parallel N] --json outputs")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots"))
    a = ap.parse_args()
    if not (a.kernels or a.bench or a.compare or a.cost):
        ap.error("nothing to draw: give --kernels, --bench, --compare or --cost")
    os.makedirs(a.out, exist_ok=True)
    kern = load(a.kernels) if a.kernels else None
    bench = load(a.bench) if a.bench else None
    written = []
    if kern or bench:
        written.append(os.path.join(a.out, "roofline.png"))
        roofline(kern, bench, written[-1])
    if bench and any("tg" in r for r in bench):
        written.append(os.path.join(a.out, "decode.png"))
        decode(bench, written[-1])
    if a.compare:
        written.append(os.path.join(a.out, "vs_llamacpp.png"))
        vs_llamacpp([load(p) for p in a.compare], written[-1])
    if a.cost:
        written.append(os.path.join(a.out, "cost.png"))
        cost([load(p) for p in a.cost], written[-1])
    for w in written:
        print(w)


if __name__ == "__main__":
    main()

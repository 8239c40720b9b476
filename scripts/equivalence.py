#!/usr/bin/env python3
"""Whether the work tree computes exactly what a git revision does: the
check for refactors that must change nothing for users (issue 38's house
move). Builds REV in a worktree of its own beside the work tree's build, then:

  1. kernels: every family in cl/ compiled to LLVM IR at REV and now
     (scripts/kernel_ir_diff.py), under each option set --opts gives the
     family ("FAMILY: -DA=1 -DB=2", as the host passes them), else under
     the kernels' own defaults;
  2. logits: tests/tools/mpi_logits (a prompt with every row's logits,
     decode steps, a rewind, batches of two sequences, 200 tokens) on each
     MODEL and on tiny models written by REV's tiny_gguf, byte for byte;
  3. text: `clinfer run` greedy, with --chat and with --draft-max, on each
     MODEL: the same bytes out;
  4. the library: libclinfer.so's exported symbols, and the files
     `cmake --install` puts in place.

    scripts/equivalence.py REV BUILD [--model PATH]... [--opts "FAMILY: -DA=1 -DB=2"]...

BUILD is the work tree's Release build (its mpi_logits, tiny_gguf, clinfer);
REV's build goes to /tmp/equivalence-REV (kept for a rerun). Prints one line
a check and exits 1 on any difference.
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def build_rev(rev):
    sha = run(["git", "-C", ROOT, "rev-parse", "--short", rev]).stdout.strip()
    tree = f"/tmp/equivalence-{sha}"
    if not os.path.isdir(tree):
        r = run(["git", "-C", ROOT, "worktree", "add", "--detach", tree, rev])
        if r.returncode:
            sys.exit(r.stderr)
    b = os.path.join(tree, "build")
    for cmd in (["cmake", "-S", tree, "-B", b, "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", b, "-j2", "--target", "clinfer", "clinfer_shared", "mpi_logits", "tiny_gguf"]):
        r = run(cmd)
        if r.returncode:
            sys.exit(f"building {rev}: {' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return tree, b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rev")
    ap.add_argument("build")
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--opts", action="append", default=[])
    a = ap.parse_args()
    new = os.path.abspath(a.build)
    tree, old = build_rev(a.rev)
    fails = 0

    def verdict(ok, what):
        nonlocal fails
        fails += not ok
        print(("same  " if ok else "DIFF  ") + what, flush=True)

    # 1. kernels
    families = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "cl")) if f.endswith(".cl") and f not in
                      ("types.cl", "common.cl"))
    for fam in families:
        sets = [o.split(":", 1)[1].strip() for o in a.opts if o.split(":", 1)[0].strip() == fam]
        for opts in sets or [""]:
            r = run([sys.executable, os.path.join(ROOT, "scripts/kernel_ir_diff.py"), a.rev, fam, *opts.split()])
            if "clang failed" in r.stdout + r.stderr and not opts:
                print(f"----  {fam}: needs the host's -D options (--opts)")
                continue
            verdict(r.returncode == 0, f"kernels {(r.stdout or r.stderr).strip().splitlines()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        # 2. logits
        models = list(a.model)
        for i, args in enumerate([["F32"], ["Q8_0"], ["Q4_K", "--kquant"], ["Q4_0", "--arch", "gemma3", "--window", "8"]]):
            path = os.path.join(tmp, f"tiny{i}.gguf")
            r = run([os.path.join(old, "tiny_gguf"), "model", path, *args])
            if r.returncode:
                verdict(False, f"tiny_gguf {' '.join(args)}: {r.stderr.strip()}")
                continue
            models.append(path)
        for m in models:
            outs = []
            for b, tag in ((old, "old"), (new, "new")):
                out = os.path.join(tmp, tag + ".logits")
                r = run([os.path.join(b, "mpi_logits"), m, out])
                outs.append(out if r.returncode == 0 else None)
                if r.returncode:
                    print(f"      {tag} mpi_logits {m}: {r.stderr.strip()[-300:]}")
            same = all(outs) and filecmp.cmp(outs[0], outs[1], shallow=False)
            verdict(same, f"logits {os.path.basename(m)}: {os.path.getsize(outs[0]) // 4 if outs[0] else 0} floats")
        # 3. text
        for m in a.model:
            for extra in ([], ["--chat"], ["--draft-max", "8"]):
                texts = []
                for b in (old, new):
                    r = run([os.path.join(b, "clinfer"), "run", "-m", m, "-p", "The capital of France is", "-n", "48",
                             "--temp", "0", *extra])
                    texts.append((r.returncode, r.stdout))
                    if r.returncode:
                        print(f"      {b}: clinfer run failed: {r.stderr.strip()[-300:]}")
                verdict(texts[0] == texts[1] and texts[0][0] == 0,
                        f"run {os.path.basename(m)} {' '.join(extra)}: {len(texts[1][1])} bytes")
        # 4. the library
        syms = []
        for b in (old, new):
            r = run(["nm", "-D", "--defined-only", os.path.join(b, "libclinfer.so")])
            syms.append({line.split()[-1] for line in r.stdout.splitlines()})
        gone, added = sorted(syms[0] - syms[1]), sorted(syms[1] - syms[0])
        print(f"      exported: {len(syms[0])} at {a.rev}, {len(syms[1])} now; gone: {' '.join(gone) or '-'}; "
              f"added: {' '.join(added) or '-'}")
        lists = []
        for b, tag in ((old, "old"), (new, "new")):
            prefix = os.path.join(tmp, "prefix-" + tag)
            run(["cmake", "--build", b, "-j2"])
            run(["cmake", "--install", b, "--prefix", prefix])
            lists.append(sorted(os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix) for f in fs))
        print(f"      installed: {len(lists[0])} files at {a.rev}, {len(lists[1])} now; gone: "
              f"{' '.join(sorted(set(lists[0]) - set(lists[1]))) or '-'}; added: "
              f"{' '.join(sorted(set(lists[1]) - set(lists[0]))) or '-'}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()

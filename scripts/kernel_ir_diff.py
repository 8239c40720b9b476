#!/usr/bin/env python3
"""Whether a kernel family compiles to the same code as at a git revision.

    scripts/kernel_ir_diff.py REV FAMILY [-D options...]

Assembles FAMILY's source as host/cl/program.c does (cl/types.cl where the
revision has it, cl/common.cl, cl/FAMILY.cl), at REV and in the work tree,
compiles both with clang to LLVM IR at -O2 (x86-64, Sapphire Rapids: the
int8 kernels' builtins need AVX-512) and compares every function, by name,
metadata and attribute numbers aside. For refactors that must not change
what the kernels compute (macro lists, constants from cl/types.cl); the
kernels' order in the program may differ. Exit status 1 on a difference.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source(rev, family):
    text = ""
    for part in ["types", "common", family]:
        path = f"cl/{part}.cl"
        if rev is None:
            full = os.path.join(ROOT, path)
            text += open(full).read() if os.path.exists(full) else ""
        else:
            r = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], capture_output=True, text=True)
            text += r.stdout if r.returncode == 0 else ""
    return text


def functions(text, opts, tmp, tag):
    src, out = os.path.join(tmp, tag + ".cl"), os.path.join(tmp, tag + ".ll")
    open(src, "w").write(text)
    cmd = ["clang", "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-target",
           "x86_64-pc-linux-gnu", "-march=sapphirerapids", "-O2", "-S", "-emit-llvm", "-w", *opts, src, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:  # the host passes every -D a family needs (host/compute/matmul.c: cpu_options)
        sys.exit(f"{tag}: clang failed:\n" + "\n".join(r.stderr.splitlines()[:6]))
    ll = open(out).read()
    fns = {}
    for m in re.finditer(r"^define [^\n]*?@([\w.]+)\(.*?^}\n", ll, re.S | re.M):
        fns[m.group(1)] = re.sub(r"#[0-9]+", "#N", re.sub(r"![0-9]+", "!N", m.group(0)))
    return fns, sorted(line for line in ll.splitlines() if line.startswith("@"))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rev, family, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory() as tmp:
        (a, ga), (b, gb) = functions(source(rev, family), opts, tmp, "old"), functions(source(None, family), opts, tmp, "new")
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    print(f"{family} {' '.join(opts)}: {len(a)} functions at {rev}, {len(b)} now; "
          f"{len(differ)} differ{': ' + ' '.join(differ) if differ else ''}")
    for name, names in (("only at " + rev, set(a) - set(b)), ("only now", set(b) - set(a))):
        if names:
            print(f"  {name}: {' '.join(sorted(names))}")
    if ga != gb:
        print("  the globals differ")
    sys.exit(1 if differ or set(a) != set(b) or ga != gb else 0)


if __name__ == "__main__":
    main()

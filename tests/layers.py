#!/usr/bin/env python3
"""The library's layers and their one-way arrows, as the build enforces them.

    layers.py SRC BUILD

Each layer is a CMake object library (CMakeLists.txt, clf_layer) whose
include folders are its own and those of the layers below it. Two checks:

1. every #include "..." of a layer's files names a header of its own
   folders or of a layer below (the table here, which must match the build),
   and a folder's private header (*_impl.h) only from that folder;
2. the build refuses a wrong-way include: for each layer, one of its files'
   own compile command (BUILD/compile_commands.json) compiles a probe that
   includes a header of each layer it may not see, and each must fail for
   want of the file; the same command compiles a probe including one of the
   layer's own headers, so a broken probe cannot pass.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# bottom up: name, folders, the layers below it that it sees
LAYERS = [
    ("kernels", ["cl"], []),
    ("core", ["host/core"], ["kernels"]),
    ("cl", ["host/cl"], ["core", "kernels"]),
    ("compute", ["host/compute"], ["cl", "core", "kernels"]),
    ("text", ["text/tokenizer", "text/chat", "text/grammar", "text/sampler"], ["core", "kernels"]),
    ("models", ["models", "models/gguf"], ["compute", "cl", "core", "kernels", "text"]),
    ("mpi", ["mpi"], ["models", "compute", "cl", "core", "kernels", "text"]),
    ("api", ["api", "include"], ["mpi", "models", "compute", "cl", "core", "kernels", "text"]),
]
FRONT = [("front ends", ["server", "cli", "tools"])]  # above every layer: a layer may not see them


def headers(src, folders):
    """What a layer offers to include: its headers (the kernels: their sources)."""
    return sorted(f for d in folders for f in os.listdir(os.path.join(src, d)) if f.endswith((".h", ".cl")))


def files(src, folders):
    """A layer's C files (the kernels are OpenCL C, read by the device's compiler)."""
    return [os.path.join(d, f) for d in folders for f in sorted(os.listdir(os.path.join(src, d)))
            if f.endswith((".c", ".h"))]


def main():
    src, build = sys.argv[1], sys.argv[2]
    folders = {n: f for n, f, _ in LAYERS + [(n, f, []) for n, f in FRONT]}
    fails = []
    # 1. the includes as written
    for name, own, below in LAYERS:
        seen = {h for n in [name] + below for h in headers(src, folders[n])}
        for path in files(src, own):
            for h in re.findall(r'#include "([^"]+)"', open(os.path.join(src, path)).read()):
                if "/" in h or h not in seen:
                    fails.append(f"{path} includes \"{h}\": not a header of {name} or a layer below it")
                elif h.endswith("_impl.h") and not os.path.exists(os.path.join(src, os.path.dirname(path), h)):
                    fails.append(f"{path} includes \"{h}\": a folder's private header, from outside it")
    # 2. the build refuses what a layer may not see
    db = {os.path.relpath(e["file"], src): e for e in json.load(open(os.path.join(build, "compile_commands.json")))}
    probes = 0
    with tempfile.TemporaryDirectory() as tmp:
        def compiles(entry, header):
            probe = os.path.join(tmp, "probe.c")
            open(probe, "w").write(f'#include "{header}"\n')
            args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
            i = args.index("-o")
            args[i + 1] = os.devnull
            args = [probe if a == entry["file"] else a for a in args] + ["-fsyntax-only"]
            r = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
            return r.returncode == 0, r.stderr
        for name, own, below in LAYERS:
            if not files(src, own):
                continue  # the kernels: no C file, no compile command
            entry = next((db[p] for p in files(src, own) if p in db), None)
            if entry is None:
                fails.append(f"{name}: none of its files is in compile_commands.json")
                continue
            ok, err = compiles(entry, headers(src, own)[0])
            if not ok:
                fails.append(f"{name}: a probe including its own {headers(src, own)[0]} does not compile:\n{err}")
                continue
            for other in [n for n, _, _ in LAYERS] + [n for n, _ in FRONT]:
                if other == name or other in below:
                    continue
                h = next((h for h in headers(src, folders[other]) if h not in headers(src, own + [f for b in below for f in folders[b]])), None)
                if h is None:
                    continue
                ok, err = compiles(entry, h)
                probes += 1
                if ok or "No such file" not in err:
                    fails.append(f"{name} ({entry['file']}'s command) compiles an include of {other}'s \"{h}\"")
    for f in fails:
        print("FAIL", f)
    if not fails:
        print(f"ok   {len(LAYERS)} layers: every include points down; the build refused all {probes} planted "
              "wrong-way includes")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

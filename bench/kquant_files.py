#!/usr/bin/env python3
"""The files of RESULTS.md's "K-quants: pp512/tg128 against llama.cpp
(issue 12)": the default model's F32 conversion (clinfer quantize) and a
random Llama whose rows are whole 256-weight super-blocks (tiny_gguf
--kquant, widened to n_embd 1024, n_ff 2816, 8 layers), each quantized to
Q4_K_M and Q6_K by llama.cpp's own quantizer (llama_model_quantize, no
importance matrix, as tests/peer/record_kquant.py).

  python3 bench/kquant_files.py OUT_DIR [--clinfer build/clinfer] [--tiny build/tiny_gguf]
"""
import argparse
import ctypes
import os
import subprocess

import llama_cpp

from compare import model_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FTYPES = [("Q4_K_M", 15), ("Q6_K", 18)]  # LLAMA_FTYPE_MOSTLY_*


def quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        raise SystemExit(f"kquant_files: llama.cpp failed to quantize {src} to ftype {ftype}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--tiny", default=os.path.join(ROOT, "build", "tiny_gguf"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    smol = os.path.join(a.out, "smol_f32.gguf")
    l256 = os.path.join(a.out, "llama256_f32.gguf")
    subprocess.run([a.clinfer, "quantize", model_path(""), smol, "F32"], check=True)
    subprocess.run([a.tiny, "model", l256, "--kquant", "--embd", "1024", "--ff", "2816", "--layers", "8",
                    "--seed", "7"], check=True)
    for src, stem in ((smol, "smol"), (l256, "llama256")):
        for name, ftype in FTYPES:
            quantize(src, os.path.join(a.out, f"{stem}_{name}.gguf"), ftype)
            print(f"{stem}_{name}.gguf")


if __name__ == "__main__":
    main()

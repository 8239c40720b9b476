#!/usr/bin/env python3
"""Records the peers' verdicts on `clinfer quantize` (tests/data/peer_quantize.txt),
comparing live as it records: the test (tests/test_quantize.c) then checks
clinfer's output against the recording without llama.cpp or gguf-py.

  python3 tests/peer/record_quantize.py build/tiny_gguf build/clinfer > tests/data/peer_quantize.txt

Needs the `gguf` and `llama_cpp` packages (llama-cpp-python 0.3.36 built
from its source distribution, as bench/ does) and the default model in the
cache.

1. Bytes. Two seeded tiny F32 sources (tiny_gguf model SRC F32 --seed 11,
   rows of 32; and the same with --kquant, rows of whole 256-weight
   super-blocks) are converted by `clinfer quantize` to every type and mix
   it writes, and Q8_0 of the first again to Q4_1 and F16
   (--allow-requantize). Each converted tensor must be byte-identical to
   the peers' conversion of the same input values: the `gguf` package's
   (gguf-py, numpy) where it quantizes the type, llama.cpp's
   ggml_quantize_chunk (what llama-quantize calls per tensor, no
   importance matrix) for K-quants and IQ4_NL. A difference stops the
   recording. Recorded: the FNV-1a 64 of each converted tensor's bytes.
2. llama.cpp's verdict. The default model converted to Q8_0, F16, Q4_0 and
   Q4_K_M must load in llama.cpp, generate, and keep its next-token logits
   over a short text close to the source's (mean cosine and argmax
   agreement over positions, bounds per type below). Recorded: the
   converted file's tensor hash (tests/support/peer_kquant.c's
   peer_tensor_hash) with the figures, so the verdict holds for exactly
   those bytes.

Lines:
  # comment
  B SOURCE TARGET TENSOR TYPE HASH   a converted tensor (SOURCE: plain, kquant, plain>Q8_0)
  L TYPE HASH VERDICT...             the default model converted to TYPE: its tensor hash, llama.cpp's figures
"""
import ctypes
import glob
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile

import gguf
import llama_cpp
import numpy as np
from gguf.quants import dequantize, quantize
from record_kquant import fnv1a64  # the hash tests/support/peer_kquant.c computes (this folder is on sys.path)

SEED = 11
PLAIN = ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"]
KQUANT = ["Q6_K", "Q5_K_M", "Q4_K_M", "Q4_K_S", "Q3_K_M", "Q2_K"]
CHAIN = ["Q4_1", "F16"]  # from the plain source's Q8_0
# The default model (Q4_1 weights) converted: Q8_0 and F16 are near-lossless;
# Q4_0 re-rounds 4-bit weights onto another 4-bit grid (~10% weight error),
# so it must only load and stay related; Q4_K_M re-rounds them mostly onto
# Q5_0's grid (rows of 576 fall back): measured mean cosine 0.976, argmax
# agreement 0.89.
MODEL_TYPES = [("Q8_0", 0.99, 0.85), ("F16", 0.99, 0.85), ("Q4_0", 0.5, 0.2), ("Q4_K_M", 0.96, 0.8)]
TEXT = b"The quick brown fox jumps over the lazy dog. Paris is the capital of France, and"
GT = gguf.GGMLQuantizationType

# llama.cpp's extra CPU buffer types (AMX tiles, repacked Q4_0/IQ4_NL) off:
# on a Xeon with AMX in this project's VMs, ggml-cpu's AMX matmul crashes
# (SIGSEGV in ggml_backend_amx_mul_mat, llama-cpp-python 0.3.36); its plain
# CPU kernels are the ones every machine has.
_default_params = llama_cpp.llama_cpp.llama_model_default_params


def _plain_cpu_params():
    p = _default_params()
    p.use_extra_bufts = False
    return p


llama_cpp.llama_cpp.llama_model_default_params = _plain_cpu_params


def ggml_quantize(x, qtype):
    """x (rows of floats) quantized by llama.cpp's ggml_quantize_chunk."""
    lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so*"))[0])
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_void_p]
    x = np.ascontiguousarray(x, dtype=np.float32)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    out = np.zeros(x.size // block * size, dtype=np.uint8)
    f(int(qtype), x.ctypes.data, out.ctypes.data, 0, x.size // x.shape[-1], x.shape[-1], None)
    return out


def peer_bytes(src, dst_type):
    """The peers' conversion of gguf-py tensor `src` to dst_type, as bytes."""
    x = dequantize(src.data, src.tensor_type).astype(np.float32)
    if dst_type == GT.F32:
        want = x
    elif dst_type == GT.F16:
        want = x.astype(np.float16)
    else:
        try:
            want = quantize(x, dst_type)
        except NotImplementedError:
            want = ggml_quantize(x, dst_type)
    return want.view(np.uint8).ravel().tobytes()


def record_bytes(src_path, out_path, source, target):
    """B lines for every tensor clinfer converted, after comparing it with the peers'."""
    src = {t.name: t for t in gguf.GGUFReader(src_path).tensors}
    n = 0
    for t in gguf.GGUFReader(out_path).tensors:
        s = src[t.name]
        if s.tensor_type == t.tensor_type:
            continue
        got = np.asarray(t.data).view(np.uint8).ravel().tobytes()
        want = peer_bytes(s, t.tensor_type)
        if got != want:
            raise SystemExit(f"record_quantize: {source} -> {target}: {t.name} ({s.tensor_type.name} -> "
                             f"{t.tensor_type.name}) differs from the peers' conversion")
        print(f"B {source} {target} {t.name} {t.tensor_type.name} {fnv1a64([want]):016x}")
        n += 1
    if not n:
        raise SystemExit(f"record_quantize: {source} -> {target}: no converted tensor")
    print(f"record_quantize: {source} -> {target}: {n} tensors byte-identical to the peers'", file=sys.stderr)


def tensor_hash(path):
    """peer_tensor_hash (tests/support/peer_kquant.c): by name, name bytes, type u32 LE, data."""
    ts = sorted(gguf.GGUFReader(path).tensors, key=lambda t: t.name.encode())

    def chunks():
        for t in ts:
            yield t.name.encode()
            yield int(t.tensor_type).to_bytes(4, "little")
            yield np.asarray(t.data).view(np.uint8).ravel().tobytes()
    return fnv1a64(chunks())


def logits(path):
    """The logits over TEXT, and a short greedy generation."""
    m = llama_cpp.Llama(model_path=path, n_ctx=64, logits_all=True, verbose=False)
    toks = m.tokenize(TEXT)
    m.eval(toks)
    out = np.array(m.scores[: m.n_tokens], dtype=np.float64)
    m.reset()
    gen = m.create_completion("The capital of France is", max_tokens=8, temperature=0.0)["choices"][0]["text"]
    del m
    return toks, out, gen


def quantize_cmd(clinfer, *args):
    subprocess.run([clinfer, "quantize", *args], check=True, stderr=subprocess.DEVNULL)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tiny, clinfer = sys.argv[1:]
    catalogue = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "catalogue.tsv")
    default = next(line.split("\t")[1] for line in open(catalogue) if line.strip() and not line.startswith("#"))
    model = os.path.join(os.environ.get("CLINFER_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "models"), default)
    sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
    print(f"# gguf {importlib.metadata.version('gguf')}, llama-cpp-python {llama_cpp.__version__}: "
          "tests/peer/record_quantize.py")
    print(f"# sources: tiny_gguf model SRC F32 --seed {SEED} (plain), the same with --kquant (kquant)")
    print(f"# default model: {os.path.basename(model)} sha256 {sha}")
    with tempfile.TemporaryDirectory() as d:
        srcs = {"plain": os.path.join(d, "plain.gguf"), "kquant": os.path.join(d, "kquant.gguf")}
        subprocess.run([tiny, "model", srcs["plain"], "F32", "--seed", str(SEED)], check=True)
        subprocess.run([tiny, "model", srcs["kquant"], "F32", "--kquant", "--seed", str(SEED)], check=True)
        for source, targets in (("plain", PLAIN), ("kquant", KQUANT)):
            for target in targets:
                out = os.path.join(d, f"{source}-{target}.gguf")
                quantize_cmd(clinfer, srcs[source], out, target)
                record_bytes(srcs[source], out, source, target)
        q8 = os.path.join(d, "plain-Q8_0.gguf")
        for target in CHAIN:
            out = os.path.join(d, f"chain-{target}.gguf")
            quantize_cmd(clinfer, "--allow-requantize", q8, out, target)
            record_bytes(q8, out, "plain>Q8_0", target)
        sys.stdout.flush()

        ref_toks, ref, _ = logits(model)
        for typ, min_cos, min_agree in MODEL_TYPES:
            out = os.path.join(d, f"model-{typ}.gguf")
            quantize_cmd(clinfer, "--allow-requantize", model, out, typ)
            toks, lg, gen = logits(out)
            if toks != ref_toks or not np.all(np.isfinite(lg)) or not gen.strip():
                raise SystemExit(f"record_quantize: the default model as {typ}: llama.cpp tokenizes differently, "
                                 f"gives non-finite logits or generates nothing ({gen!r})")
            cos = np.sum(lg * ref, axis=1) / (np.linalg.norm(lg, axis=1) * np.linalg.norm(ref, axis=1))
            agree = float(np.mean(lg.argmax(axis=1) == ref.argmax(axis=1)))
            if cos.mean() < min_cos or agree < min_agree:
                raise SystemExit(f"record_quantize: the default model as {typ}: mean cosine {cos.mean():.5f} "
                                 f"(>= {min_cos}), argmax agreement {agree:.2f} (>= {min_agree})")
            print(f"L {typ} {tensor_hash(out):016x} loads in llama.cpp; mean cosine {cos.mean():.5f} (>= {min_cos}, min "
                  f"{cos.min():.4f}), argmax agreement {agree:.2f} (>= {min_agree}); generates {gen.strip()[:40]!r}")
            sys.stdout.flush()
            os.unlink(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

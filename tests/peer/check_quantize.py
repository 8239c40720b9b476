#!/usr/bin/env python3
"""Checks GGUF files written by `clinfer quantize` against the peers.

  check_quantize.py bytes SOURCE.gguf OUT.gguf ...
      every converted matrix must be byte-identical to the `gguf` Python
      package's reference conversion of the same source weights (gguf-py
      parses and quantizes in numpy, slowly: use small files), or, for the
      types gguf-py cannot quantize (K-quants, IQ4_NL), to llama.cpp's ggml
      (ggml_quantize_chunk without an importance matrix, from the
      llama-cpp-python package)
  check_quantize.py logits SOURCE.gguf OUT.gguf[:MIN_MEAN_COS[:MIN_AGREE]] ...
      the file must load in llama.cpp (the llama-cpp-python package),
      generate a few tokens, and its next-token logits over a short text
      must stay close to the source model's: mean cosine similarity over positions (default >= 0.99) and
      the share of positions with the same argmax (default >= 0.85). One
      position can dip (llama.cpp quantizes activations differently per
      weight type and a small model amplifies it), so the mean is the measure.

Exit status 0 when every file passes, 1 otherwise, 77 when a package is
missing (the caller skips)."""
import sys

try:
    import gguf
    import llama_cpp
    import numpy as np
    from gguf.quants import dequantize, quantize
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"check_quantize: {e}", file=sys.stderr)
    sys.exit(77)

TEXT = b"The quick brown fox jumps over the lazy dog. Paris is the capital of France, and"
GT = gguf.GGMLQuantizationType


def ggml_quantize(x, qtype):
    """x (rows of floats) quantized by llama.cpp's ggml_quantize_chunk."""
    import ctypes
    import glob
    import os
    lib = None
    for path in glob.glob(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so*")):
        lib = ctypes.CDLL(path)
        break
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_void_p]
    x = np.ascontiguousarray(x, dtype=np.float32)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    out = np.zeros(x.size // block * size, dtype=np.uint8)
    f(int(qtype), x.ctypes.data, out.ctypes.data, 0, x.size // x.shape[-1], x.shape[-1], None)
    return out


def check_bytes(src_path, out_path):
    src = {t.name: t for t in gguf.GGUFReader(src_path).tensors}
    checked = 0
    for t in gguf.GGUFReader(out_path).tensors:
        s = src[t.name]
        if s.tensor_type == t.tensor_type:
            continue
        x = dequantize(s.data, s.tensor_type).astype(np.float32)
        if t.tensor_type == GT.F32:
            want = x
        elif t.tensor_type == GT.F16:
            want = x.astype(np.float16)
        else:
            try:
                want = quantize(x, t.tensor_type)
            except NotImplementedError:
                want = ggml_quantize(x, t.tensor_type)
        got = np.asarray(t.data).view(np.uint8).ravel()
        if not np.array_equal(got, want.view(np.uint8).ravel()):
            return f"FAIL {out_path}: {t.name} ({s.tensor_type.name} -> {t.tensor_type.name}) differs from the peer's"
        checked += 1
    if not checked:
        return f"FAIL {out_path}: no converted tensor to compare"
    return f"ok   {out_path}: {checked} converted tensors byte-identical to the peers' conversion (gguf-py, ggml)"


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


def check_logits(ref_toks, ref, arg):
    path, *lim = arg.split(":")
    min_cos = float(lim[0]) if lim else 0.99
    min_agree = float(lim[1]) if len(lim) > 1 else 0.85
    toks, out, gen = logits(path)
    if toks != ref_toks:
        return f"FAIL {path}: tokenizes differently"
    if not np.all(np.isfinite(out)):
        return f"FAIL {path}: non-finite logits"
    if not gen.strip():
        return f"FAIL {path}: generates nothing"
    cos = np.sum(out * ref, axis=1) / (np.linalg.norm(out, axis=1) * np.linalg.norm(ref, axis=1))
    agree = float(np.mean(out.argmax(axis=1) == ref.argmax(axis=1)))
    good = cos.mean() >= min_cos and agree >= min_agree
    return (f"{'ok  ' if good else 'FAIL'} {path}: loads in llama.cpp; mean cosine {cos.mean():.5f} "
            f"(>= {min_cos}, min {cos.min():.4f}), argmax agreement {agree:.2f} (>= {min_agree}); generates {gen!r}")


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("bytes", "logits"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, src, outs = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "bytes":
        lines = [check_bytes(src, o) for o in outs]
    else:
        print(f"llama-cpp-python {llama_cpp.__version__}; source {src}")
        ref_toks, ref, _ = logits(src)
        lines = [check_logits(ref_toks, ref, o) for o in outs]
    print("\n".join(lines))
    return 0 if all(line.startswith("ok") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())

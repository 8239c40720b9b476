#!/usr/bin/env python3
"""Records reference (de)quantizations for tests/test_quant.c.

  python3 tests/peer/record_quants.py > tests/data/quants.bin

Dequantization of every type clinfer reads, by the `gguf` package's numpy
dequantizers (gguf.quants), of random blocks whose f16 scales range over
random and extreme finite values (largest, subnormal, zero, negative); and
quantization by gguf.quants where it has a quantizer (Q4_0, Q4_1, Q5_0,
Q5_1, Q8_0, BF16) of inputs from 1e-6 to 1e4 in magnitude, outliers,
constant and zero blocks. Where llama-cpp-python is installed, the same
inputs quantized by llama.cpp's own ggml (ggml_quantize_chunk without an
importance matrix: the reference quantizers `llama-quantize` uses) are
recorded for the types gguf.quants cannot quantize (K-quants, IQ4_NL).
MXFP4's records come last (so the earlier ones keep their bytes): its
dequantization of random blocks (every E8M0 exponent byte, 255 included),
and ggml's quantization (quantize_row_mxfp4_ref, what llama-quantize's
MXFP4_MOE writes for experts) of the inputs above plus edge blocks: maxima
next to powers of two, ties between grid values, values too small for any
exponent (below 2^-125: ggml's exponent byte wraps), the largest floats,
infinities and NaNs.

Records, little-endian, back to back:
  char kind[4]   "DEQ\\0": bytes -> floats, "QNT\\0": floats -> bytes
  u32 type       GGML type id
  u32 n          elements (whole blocks)
  DEQ: the row's bytes, then n float32; QNT: n float32, then the bytes
The seed is fixed so the file is reproducible.
"""
import ctypes
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

rng = np.random.default_rng(20240612)

# byte offsets of the f16 scale fields in each block type (ggml-common.h)
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.IQ4_NL: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
EXTREME_F16 = [0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x0000, 0x8000, 0x3C00, 0x1400]
DEQ_BLOCKS = {T.Q2_K: 24, T.Q3_K: 24, T.Q4_K: 24, T.Q5_K: 24, T.Q6_K: 24}
QNT_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.BF16]
GGML_ONLY = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL]


def random_f16(n):
    """Finite f16 bit patterns: a third extreme, the rest random finite."""
    bits = rng.integers(0, 1 << 16, n, dtype=np.uint32)
    bits = np.where((bits & 0x7C00) == 0x7C00, bits & 0xBFFF, bits)  # exponent 31 -> 15 (finite)
    pick = rng.random(n) < 0.33
    bits[pick] = rng.choice(EXTREME_F16, int(pick.sum()))
    return bits.astype(np.uint16)


def deq_record(t):
    block, size = GGML_QUANT_SIZES[t]
    nb = DEQ_BLOCKS.get(t, 96 if block > 1 else 1024)
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in F16_FIELDS.get(t, []):
        raw[:, off:off + 2] = random_f16(nb).view(np.uint8).reshape(nb, 2)
    if t == T.BF16:  # any bits, infinities and NaNs included: the conversion is a shift
        raw[:8] = np.array([0x80, 0x7F, 0x80, 0xFF, 0xC0, 0x7F, 0x01, 0x00] * 2, dtype=np.uint8).reshape(8, 2)
    y = dequantize(raw.reshape(-1), t).astype(np.float32).reshape(-1)
    return b"DEQ\0" + np.array([t, nb * block], "<u4").tobytes() + raw.tobytes() + y.astype("<f4").tobytes()


def inputs(block, nb):
    """nb blocks of test inputs, one kind per block in turn."""
    out = []
    for b in range(nb):
        kind = b % 8
        mag = 10.0 ** rng.uniform(-6, 4)
        if kind == 0:
            x = rng.normal(0, mag, block)
        elif kind == 1:
            x = rng.uniform(-mag, mag * 3, block)
        elif kind == 2:  # one outlier
            x = rng.normal(0, mag * 1e-2, block)
            x[rng.integers(block)] = mag * rng.choice([-1, 1])
        elif kind == 3:  # constant
            x = np.full(block, rng.normal(0, mag))
        elif kind == 4:
            x = np.zeros(block)
        elif kind == 5:  # one sign only
            x = np.abs(rng.normal(0, mag, block)) * rng.choice([-1, 1])
        elif kind == 6:  # a few distinct values (ties in the rounding)
            x = rng.integers(-8, 8, block) * mag / 8
        else:  # weights as in a trained model: heavy tails
            x = rng.standard_t(3, block) * mag * 1e-2
        out.append(x)
    return np.concatenate(out).astype(np.float32)


def qnt_record(t, x, q):
    return b"QNT\0" + np.array([t, x.size], "<u4").tobytes() + x.astype("<f4").tobytes() + q.tobytes()


def ggml_quantizer():
    """ggml_quantize_chunk from llama-cpp-python's bundled ggml (or the
    libggml-base.so named by $CLINFER_GGML_LIB), or None."""
    import glob
    import os
    paths, version = [], None
    if os.environ.get("CLINFER_GGML_LIB"):
        paths, version = [os.environ["CLINFER_GGML_LIB"]], os.environ["CLINFER_GGML_LIB"]
    else:
        try:
            import llama_cpp
        except ImportError:
            return None, None
        libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
        paths = glob.glob(os.path.join(libdir, "libggml-base.so")) + glob.glob(os.path.join(libdir, "libggml.so"))
        version = f"llama-cpp-python {llama_cpp.__version__}"
    for path in paths:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "ggml_quantize_chunk"):
            f = lib.ggml_quantize_chunk
            f.restype = ctypes.c_size_t
            f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_void_p]
            return f, version
    return None, None


def mxfp4_edges():
    """Blocks at MXFP4's edges (one per row of 32)."""
    f32 = np.float32
    rows = []
    for p in (-3, 0, 7):  # maxima at, just below and just above powers of two
        for m in (1.0, np.nextafter(f32(1), f32(0)), np.nextafter(f32(1), f32(2))):
            x = rng.uniform(-1, 1, 32).astype(f32) * f32(2.0 ** p)
            x[5] = f32(m) * f32(2.0 ** p)
            rows.append(x)
    d = f32(2.0 ** -3)  # max 14 d = 1.75: e = 125, d = 2^-3; 0.5, 2.5, 3.5, 5, 7, 10 d: halfway between values
    ties = (8, 1, 5, 7, 10, 14, -5, -7, -10, -14, 0.5, -0.5, 2.5, 3.5, -2.5, -3.5)
    rows.append(np.array([f32(v) * d for v in ties] * 2))
    rows.append(np.full(32, f32(1e-40)))  # subnormal: floor(log2) - 2 + 127 < 0
    rows.append(rng.uniform(-1, 1, 32).astype(f32) * f32(2.0 ** -126))
    rows.append(np.full(32, np.finfo(f32).max))
    x = rng.uniform(-1, 1, 32).astype(f32)
    x[3] = np.inf
    rows.append(x)
    x = rng.uniform(-1, 1, 32).astype(f32)
    x[7] = np.nan
    x[9] = -np.inf
    rows.append(x)
    x = rng.uniform(-1, 1, 32).astype(f32)
    x[0] = np.nan
    rows.append(x)
    return np.concatenate(rows).astype(f32)


def main():
    out = sys.stdout.buffer
    for t in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.BF16]:
        out.write(deq_record(t))
    for t in QNT_TYPES:
        block = GGML_QUANT_SIZES[t][0]
        x = inputs(32, 64)
        out.write(qnt_record(t, x, quantize(x.reshape(-1, 32), t).reshape(-1)))
    chunk, version = ggml_quantizer()
    if chunk is None:
        print("record_quants: llama_cpp not installed: no ggml records for "
              + ", ".join(t.name for t in GGML_ONLY), file=sys.stderr)
        return
    print(f"record_quants: ggml from {version}", file=sys.stderr)
    for t in GGML_ONLY:
        block, size = GGML_QUANT_SIZES[t]
        nb = 48 if block == 256 else 256
        x = np.ascontiguousarray(inputs(block, nb))
        q = np.zeros(nb * size, dtype=np.uint8)
        # one row of nb blocks, no importance matrix
        chunk(int(t), x.ctypes.data, q.ctypes.data, 0, 1, x.size, None)
        out.write(qnt_record(t, x, q))
    # MXFP4 last: its dequantization by gguf.quants, its quantization by ggml
    out.write(deq_record(T.MXFP4))
    x = np.ascontiguousarray(np.concatenate([inputs(32, 256), mxfp4_edges()]).astype(np.float32))
    size = GGML_QUANT_SIZES[T.MXFP4][1]
    q = np.zeros(x.size // 32 * size, dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        chunk(int(T.MXFP4), x.ctypes.data, q.ctypes.data, 0, 1, x.size, None)
    out.write(qnt_record(T.MXFP4, x, q))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Records llama-quantize's MXFP4_MOE conversion of a tiny file with experts
(tests/data/peer_mxfp4.txt), for tests/test_quantize.c's test_peer_mxfp4:

  python3 tests/peer/record_mxfp4.py LLAMA_QUANTIZE > tests/data/peer_mxfp4.txt

LLAMA_QUANTIZE: llama.cpp's binary (~/.cache/clinfer/peer/bin/llama-quantize,
llama-cpp-python 0.3.36's llama.cpp). Needs the `gguf` package.

The source: a one-layer Llama-shaped F32 GGUF with Mixtral's expert tensors
(blk.0.ffn_{gate,up,down}_exps: 3 dimensions, 4 experts) beside 2-D
matrices, a router and norms. Its values come from an integer hash of each
element's index, scaled by a power of two per block of 32 (2^-16 to 2^8,
and one block in 16 with an outlier 2^10 above the rest: Q8_0's f16 scales
stay finite, subnormal ones included), so every value is
an exact float32 that the test computes alike in C (test_quantize.c's
mxfp4_value) without this script. llama-quantize converts it to MXFP4_MOE
(experts MXFP4, the other matrices Q8_0), and that file back to F32
(--allow-requantize: ggml's MXFP4 dequantizer). Recorded: each converted
tensor's type and the FNV-1a 64 of its bytes.

Lines:
  # comment
  T NAME NE0 NE1 NE2            a source tensor (its dimensions; NE2 1: a matrix)
  Q TARGET NAME TYPE HASH       a tensor of llama-quantize's TARGET file
                                (MXFP4_MOE, or F32 converted from that)
"""
import importlib.metadata
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np

# name, (ne0, ne1, ne2): ggml's order, ne0 the row length
TENSORS = [
    ("token_embd.weight", (64, 48, 1)),
    ("output.weight", (64, 48, 1)),
    ("blk.0.attn_q.weight", (64, 64, 1)),
    ("blk.0.ffn_gate_inp.weight", (64, 4, 1)),
    ("blk.0.ffn_gate_exps.weight", (64, 96, 4)),
    ("blk.0.ffn_up_exps.weight", (64, 96, 4)),
    ("blk.0.ffn_down_exps.weight", (96, 64, 4)),
]
NORMS = ["output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"]


def values(t, n):
    """Element i of source tensor number t (test_quantize.c's mxfp4_value)."""
    i = np.arange(n, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(t * 40503 + 1)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    x = (h >> np.uint64(8)).astype(np.float64) / 2.0 ** 23 - 1.0  # 24 bits: exact in float32
    b = i // np.uint64(32)
    k = (b * np.uint64(7) + np.uint64(t)) % np.uint64(25)
    x = x * np.exp2(k.astype(np.float64) - 16.0)
    outlier = (b % np.uint64(16) == np.uint64(3)) & (i % np.uint64(32) == np.uint64(5))
    x = np.where(outlier, x * 1024.0, x)
    return x.astype(np.float32)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_source(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(128)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(96)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(4)
    w.add_expert_used_count(2)
    w.add_file_type(0)
    for t, (name, ne) in enumerate(TENSORS):
        w.add_tensor(name, values(t, ne[0] * ne[1] * ne[2]).reshape(ne[::-1] if ne[2] > 1 else ne[1::-1]))
    for name in NORMS:
        w.add_tensor(name, np.ones(64, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def record(target, path, src):
    for t in gguf.GGUFReader(path).tensors:
        if t.name in NORMS or t.tensor_type == src.get(t.name):
            continue
        print(f"Q {target} {t.name} {t.tensor_type.name} {fnv1a64(np.asarray(t.data).view(np.uint8).tobytes()):016x}")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    quantize = sys.argv[1]
    print(f"# gguf {importlib.metadata.version('gguf')}, llama-quantize of llama-cpp-python "
          f"{importlib.metadata.version('llama_cpp_python')}")
    print("# tests/peer/record_mxfp4.py")
    for name, ne in TENSORS:
        print(f"T {name} {ne[0]} {ne[1]} {ne[2]}")
    with tempfile.TemporaryDirectory() as d:
        src, mx, f32 = (os.path.join(d, f) for f in ("src.gguf", "mxfp4.gguf", "f32.gguf"))
        write_source(src)
        subprocess.run([quantize, src, mx, "MXFP4_MOE"], check=True, capture_output=True)
        subprocess.run([quantize, "--allow-requantize", mx, f32, "F32"], check=True, capture_output=True)
        src_types = {t.name: t.tensor_type for t in gguf.GGUFReader(src).tensors}
        record("MXFP4_MOE", mx, src_types)
        mx_types = {t.name: t.tensor_type for t in gguf.GGUFReader(mx).tensors}
        record("F32", f32, mx_types)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Records llama.cpp on tiny Llamas in every K-quant mix and fallback type,
as reference data for the K-quant kernels (tests/data/peer_kquant.txt).

  python3 tests/peer/record_kquant.py build/tiny_gguf build/clinfer > tests/data/peer_kquant.txt

The source is `tiny_gguf model SRC --kquant --seed 7` (F32; rows of whole
256-weight super-blocks: n_embd 256, 4 heads / 1 KV head, n_ff 512, 2
layers, untied head, a 281-token byte-level BPE vocabulary). Each mix is
quantized by llama.cpp (llama_model_quantize, no importance matrix) and by
`clinfer quantize`; the two must hold the same tensors, type for type and
byte for byte (else this script fails). The quantized files (~0.2 to 2.5 MB)
are not committed: a test rebuilds them with tiny_gguf and clinfer quantize
and checks their tensor hash against the recorded one, so the logits below
hold for exactly those bytes.

Output, one line each:
  # comments
  M <mix> <hash> <type>:<count> ...   a model: FNV-1a 64 (hex) over its tensors
                                      sorted by name (name bytes, type as u32
                                      LE, data bytes), and its tensor types
  P <prompt ids...>                   a new case of the last model
  S <step> <l2 norm> <id>:<logit> ... top-20 after the prompt and each token
  G <ids...>                          the greedy continuation (N_GEN tokens)
Steps are recorded under teacher forcing on llama.cpp's own greedy tokens.

Tolerances for a consumer: llama.cpp's CPU products round the activations
first (ggml-cpu's vec_dot_type): to Q8_K (8 bits per 256 values) against
Q2_K..Q6_K weights, to Q8_0 (8 bits per 32) against Q4_0, Q5_0, Q8_0 and
IQ4_NL, to Q8_1 against Q4_1 and Q5_1, to BF16 against BF16. So its logits
differ from a product with F32 activations by that rounding, about
amax/254 per block (~0.3-0.5% of a dot product, more for Q8_K's wider
blocks): compare with a margin over it, and allow greedy flips only where
llama.cpp's top-2 margin is that small (as tests/test_model_peer.c does for
Q4_1), or bound the error by the activation rounding measured on the
device (tools/check/check_matmul.c's int8 tolerance).
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import gguf
import llama_cpp
import numpy as np

SEED = 7
MIXES = [  # name, LLAMA_FTYPE_MOSTLY_*
    ("Q4_K_M", 15), ("Q5_K_M", 17), ("Q6_K", 18), ("Q3_K_M", 12), ("Q2_K", 10),
    ("Q5_0", 8), ("Q5_1", 9), ("IQ4_NL", 25), ("BF16", 32),
]
PROMPTS = ["Hello world", "The quick brown fox", "1 2 3 4"]
N_GEN = 16
TOP = 20


def fnv1a64(chunks):
    h = 0xCBF29CE484222325
    for b in chunks:
        for c in b:
            h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def tensors(path):
    """{name: (type, bytes)} of a GGUF."""
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        out[t.name] = (int(t.tensor_type), np.asarray(t.data).view(np.uint8).ravel().tobytes())
    return out


def tensor_hash(ts):
    def chunks():
        for name in sorted(ts, key=lambda n: n.encode()):
            typ, data = ts[name]
            yield name.encode()
            yield typ.to_bytes(4, "little")
            yield data
    return fnv1a64(chunks())


def llama_quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        raise SystemExit(f"record_kquant: llama.cpp failed to quantize to ftype {ftype}")


def record(path):
    llm = llama_cpp.Llama(model_path=path, n_ctx=128, n_batch=128, n_threads=2, logits_all=True, verbose=False)
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        print("P " + " ".join(map(str, ids)))
        llm.eval(ids)
        gen = []
        for step in range(N_GEN + 1):
            logits = np.array(llm.eval_logits[-1], dtype=np.float64)
            order = np.argsort(-logits, kind="stable")[:TOP]
            print(f"S {step} {np.linalg.norm(logits):.5f} " + " ".join(f"{i}:{logits[i]:.5f}" for i in order))
            if step == N_GEN:
                break
            gen.append(int(order[0]))
            llm.eval([gen[-1]])
        print("G " + " ".join(map(str, gen)))
    del llm


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tiny, clinfer = sys.argv[1:]
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src.gguf")
        subprocess.run([tiny, "model", src, "--kquant", "--seed", str(SEED)], check=True)
        print(f"# llama-cpp-python {llama_cpp.__version__}; source: tiny_gguf model SRC --kquant --seed {SEED}")
        print(f"# {len(PROMPTS)} prompts, {N_GEN} greedy tokens, top-{TOP} logits per step")
        print("# llama.cpp rounds activations in its products (Q8_K for K-quants, Q8_0/Q8_1, BF16):"
              " tolerances in tests/peer/record_kquant.py")
        for mix, ftype in MIXES:
            ll, cl = os.path.join(d, f"ll-{mix}.gguf"), os.path.join(d, f"cl-{mix}.gguf")
            llama_quantize(src, ll, ftype)
            subprocess.run([clinfer, "quantize", src, cl, mix], check=True, stderr=subprocess.DEVNULL)
            a, b = tensors(ll), tensors(cl)
            if a.keys() != b.keys():
                raise SystemExit(f"record_kquant: {mix}: tensor names differ: {sorted(a.keys() ^ b.keys())}")
            for name in sorted(a):
                if a[name][0] != b[name][0]:
                    raise SystemExit(f"record_kquant: {mix}: {name} is {gguf.GGMLQuantizationType(a[name][0]).name} in "
                                     f"llama.cpp's file, {gguf.GGMLQuantizationType(b[name][0]).name} in clinfer's")
                if a[name][1] != b[name][1]:
                    raise SystemExit(f"record_kquant: {mix}: {name} ({gguf.GGMLQuantizationType(a[name][0]).name}) "
                                     "bytes differ from llama.cpp's")
            counts = {}
            for typ, _ in a.values():
                n = gguf.GGMLQuantizationType(typ).name
                counts[n] = counts.get(n, 0) + 1
            print(f"M {mix} {tensor_hash(a):016x} " + " ".join(f"{k}:{v}" for k, v in sorted(counts.items())))
            sys.stdout.flush()
            record(ll)
            print(f"record_kquant: {mix}: {len(a)} tensors identical to llama.cpp's", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

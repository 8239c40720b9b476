#!/usr/bin/env python3
"""Random-weight GGUFs at the shapes people run (issue 39), written block by
block straight from random codes: no F32 intermediate, memory stays at one
chunk (~32 MB) whatever the model's size.

  python3 bench/shapes.py OUT.gguf --shape {llama-1b,llama-3b,llama-8b} \\
      --type {q4_0,q8_0,q4_k,q6_k} [--seed S] [--vocab-from GGUF] [--check] [--check-mix [LLAMA_QUANTIZE]]

Shapes (Llama architecture, GQA 8 KV heads, RMS eps 1e-5, RoPE base 500000,
context 131072 as the real models declare it):
  llama-1b  Llama 3.2 1B:  2048 wide, 16 layers, FFN 8192, 32/8 heads of 64, tied embeddings
  llama-3b  Llama 3.2 3B:  3072 wide, 28 layers, FFN 8192, 24/8 heads of 128, tied embeddings
  llama-8b  Llama 3.1 8B:  4096 wide, 32 layers, FFN 14336, 32/8 heads of 128, untied output
The vocabulary and every tokenizer.* key come from the default model
(SmolLM2-135M-Instruct, n_vocab 49152; --vocab-from another GGUF), so the
embedding and output matrices are 49152 rows, not Llama 3's 128256: with this
vocabulary the 8B shape has 7.4B parameters. Llama 3.1/3.2's RoPE scaling
(the rope_freqs tensor) is left out: random weights have no long context to
keep.

Types: each matrix gets the type llama.cpp's llama-quantize would give it for
the file type named (tools/quantize/quant_mix.c is the same rule):
  q8_0  Q8_0 everywhere (general.file_type 7)
  q6_k  Q6_K everywhere (18)
  q4_0  Q4_0, but the output matrix (the token embedding when tied) Q6_K (2)
  q4_k  Q4_K, but Q6_K for the output matrix (the token embedding when tied)
        and for attn_v and ffn_down in the "more bits" layers (the first and
        last eighth and every third between): llama.cpp's Q4_K_M mix, so the
        file is a Q4_K_M in all but name (file type 15, which llama-bench and
        clinfer bench call Q4_K_M)
Norm vectors are F32 ones.

Codes are uniform random; scales are f16, jittered +-25% between blocks and
set so the weights' RMS is ~0.02 (that of a trained 1-8B Llama's matrices):
  Q4_0  d*(q-8)                 q in 0..15
  Q8_0  d*q                     q in -127..127
  Q4_K  d*sc*q - dmin*m         q in 0..15, sc = m in 32..63, dmin = 7.5*d (zero mean)
  Q6_K  d*sc*(q-32)             q in 0..63, sc in 16..31
--check reads the file back with gguf-py and dequantizes the first rows of
every matrix (gguf.quants.dequantize): all finite, RMS within 0.01..0.04.
--check-mix runs `llama-quantize --dry-run --allow-requantize` on the file
with the type's llama.cpp name (Q4_K_M for q4_k) and compares the type it
plans for each tensor with the file's (default: bench/peer_build.sh's
llama-quantize); every shape and type matched on 2026-12-05, and the sizes
it plans equal the files' (1B Q4_K_M 636.07 MiB).
Check a file with both engines:
  llama-bench -m OUT.gguf -p 16 -n 4          (bench/peer_build.sh builds it)
  build/clinfer run -m OUT.gguf -p hi -n 4

Sizes: llama-1b q4_k 0.67 GB, q4_0 0.63 GB, q6_k 0.88 GB, q8_0 1.14 GB; llama-3b q4_k 1.81 GB;
llama-8b q4_0 4.21 GB, q4_k 4.47 GB. The 8B q4_0 takes ~35 s on 2 shared cores, 280 MB RSS.
Needs numpy and the `gguf` package (llama.cpp's gguf-py; /work/peer/venv).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

SHAPES = {  # n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, tied
    "llama-1b": (2048, 16, 8192, 32, 8, 64, True),
    "llama-3b": (3072, 28, 8192, 24, 8, 128, True),
    "llama-8b": (4096, 32, 14336, 32, 8, 128, False),
}
TYPES = {  # --type: (base type, general.file_type as llama.h's LLAMA_FTYPE_MOSTLY_*)
    "q4_0": (Q.Q4_0, 2),
    "q8_0": (Q.Q8_0, 7),
    "q4_k": (Q.Q4_K, 15),
    "q6_k": (Q.Q6_K, 18),
}
BLOCK = {Q.Q4_0: (32, 18), Q.Q8_0: (32, 34), Q.Q4_K: (256, 144), Q.Q6_K: (256, 210)}  # weights, bytes
RMS = 0.02  # target RMS of a weight
CHUNK = 32 << 20  # bytes generated and written at once

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_NAME = {"q4_0": "Q4_0", "q8_0": "Q8_0", "q4_k": "Q4_K_M", "q6_k": "Q6_K"}  # llama-quantize's type names
PEER_QUANTIZE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "peer",
                             "bin", "llama-quantize")


def default_model():
    base = os.environ.get("CLINFER_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "models")
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


def more_bits(i, n):
    """llama.cpp's use_more_bits: the first and last eighth and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def plan(shape, qtype, n_vocab):
    """[(name, ne (row length first, as GGUF lists it), type)] in convert_hf_to_gguf's order."""
    E, L, F, H, HKV, HD, tied = SHAPES[shape]
    base, ftype = TYPES[qtype]
    head = Q.Q8_0 if base == Q.Q8_0 else Q.Q6_K  # llama-quantize's output matrix rule
    out = [("token_embd.weight", [E, n_vocab], head if tied else base)]
    for i in range(L):
        p = f"blk.{i}."
        hot = ftype == 15 and more_bits(i, L)  # Q4_K_M's more-bits layers
        out += [(p + "attn_norm.weight", [E], Q.F32),
                (p + "attn_q.weight", [E, H * HD], base),
                (p + "attn_k.weight", [E, HKV * HD], base),
                (p + "attn_v.weight", [E, HKV * HD], Q.Q6_K if hot else base),
                (p + "attn_output.weight", [H * HD, E], base),
                (p + "ffn_norm.weight", [E], Q.F32),
                (p + "ffn_gate.weight", [E, F], base),
                (p + "ffn_up.weight", [E, F], base),
                (p + "ffn_down.weight", [F, E], Q.Q6_K if hot else base)]
    out.append(("output_norm.weight", [E], Q.F32))
    if not tied:
        out.append(("output.weight", [E, n_vocab], head))
    return out


def nbytes(ne, qt):
    n = int(np.prod(ne))
    if qt == Q.F32:
        return 4 * n
    bs, bb = BLOCK[qt]
    assert ne[0] % bs == 0, (ne, qt)
    return n // bs * bb


def f16_bytes(x):
    """(n,) float -> (n, 2) uint8, little-endian f16."""
    return x.astype("<f2").view(np.uint8).reshape(-1, 2)


def random_bytes(rng, n):
    """n uniform random bytes (the bit generator's raw words: ~20x numpy's rng.bytes)."""
    w = rng.bit_generator.random_raw((n + 7) // 8).astype(np.uint64, copy=False)
    return w.view(np.uint8)[:n]


def blocks(rng, qt, nb):
    """nb random blocks of type qt as an (nb, block bytes) uint8 array."""
    bs, bb = BLOCK[qt]
    b = random_bytes(rng, nb * bb).reshape(nb, bb)
    jitter = rng.uniform(0.75, 1.25, nb)
    if qt == Q.Q4_0:  # d f16 | qs[16]: w = d*(q-8); RMS of q-8 over 0..15 is sqrt(21.5)
        b[:, 0:2] = f16_bytes(RMS * jitter / np.sqrt(21.5))
    elif qt == Q.Q8_0:  # d f16 | qs[32] int8: w = d*q; -128 is not a code ggml writes
        q = b[:, 2:].view(np.int8)
        q[q == -128] = -127
        b[:, 0:2] = f16_bytes(RMS * jitter / np.sqrt(127 * 128 / 3))
    elif qt == Q.Q4_K:  # d f16 | dmin f16 | scales[12] (6-bit sc, m of 8 sub-blocks) | qs[128]
        sc = rng.integers(32, 64, (nb, 8), dtype=np.uint8)
        m = sc  # with dmin = 7.5*d: w = d*sc*(q-7.5), zero mean; RMS of q-7.5 is sqrt(255/12)
        d = RMS * jitter / (np.sqrt(255 / 12) * np.sqrt((sc.astype(np.float64) ** 2).mean(1)))
        b[:, 0:2] = f16_bytes(d)
        b[:, 2:4] = f16_bytes(7.5 * d)
        # ggml's get_scale_min_k4 packing: j<4 in the low 6 bits of bytes j, j+4;
        # j>=4 in the nibbles of byte j+4 and the top 2 bits of bytes j-4, j
        s = b[:, 4:16]
        s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
        s[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
        s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    elif qt == Q.Q6_K:  # ql[128] | qh[64] | scales[16] int8 | d f16: w = d*sc*(q-32)
        sc = rng.integers(16, 32, (nb, 16), dtype=np.int8)
        b[:, 192:208] = sc.view(np.uint8)
        # RMS of q-32 over 0..63: sqrt(341.5)
        b[:, 208:210] = f16_bytes(RMS * jitter / (np.sqrt(341.5) * np.sqrt((sc.astype(np.float64) ** 2).mean(1))))
    return b


def copy_vocab(w, src):
    """Every tokenizer.* key of src, and its vocab size."""
    r = gguf.GGUFReader(src)
    n_vocab = None
    for k, f in r.fields.items():
        if not k.startswith("tokenizer."):
            continue
        sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(k, f.contents(), f.types[0], sub_type=sub)
        if k == "tokenizer.ggml.tokens":
            n_vocab = len(f.data)
    if not n_vocab:
        raise SystemExit(f"shapes: {src} has no tokenizer.ggml.tokens")
    return n_vocab


def write(path, shape, qtype, seed, vocab_from):
    E, L, F, H, HKV, HD, tied = SHAPES[shape]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(f"random {shape} {qtype} (bench/shapes.py, seed {seed})")
    w.add_block_count(L)
    w.add_context_length(131072)
    w.add_embedding_length(E)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(TYPES[qtype][1])
    w.add_quantization_version(2)
    n_vocab = copy_vocab(w, vocab_from)
    w.add_vocab_size(n_vocab)
    tensors = plan(shape, qtype, n_vocab)
    for name, ne, qt in tensors:
        # gguf-py takes numpy's order (ne reversed) and a quantized row in bytes
        np_shape = list(reversed(ne))
        if qt != Q.F32:
            np_shape[-1] = np_shape[-1] // BLOCK[qt][0] * BLOCK[qt][1]
        w.add_tensor_info(name, np_shape, np.float32 if qt == Q.F32 else np.uint8, nbytes(ne, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    # the tensors' data, streamed: each tensor aligned, written a chunk at a time
    fout = w.fout[0]
    rng = np.random.default_rng(seed)
    total = 0
    for name, ne, qt in tensors:
        w.write_padding(fout, fout.tell())
        if qt == Q.F32:
            np.ones(int(np.prod(ne)), np.float32).tofile(fout)
            total += 4 * int(np.prod(ne))
        else:
            nb = int(np.prod(ne)) // BLOCK[qt][0]
            per = max(1, CHUNK // BLOCK[qt][1])
            for i in range(0, nb, per):
                blocks(rng, qt, min(per, nb - i)).tofile(fout)
            total += nb * BLOCK[qt][1]
    w.write_padding(fout, fout.tell())
    w.close()
    return tensors, total


def check(path, rows=4):
    """Dequantize the first rows of each matrix with gguf-py: finite, RMS near 0.02."""
    r = gguf.GGUFReader(path)
    bad = 0
    rms_all = []
    for t in r.tensors:
        if t.tensor_type == Q.F32:
            ok = np.all(t.data == 1.0)
            bad += not ok
            continue
        data = np.asarray(t.data)  # (rows, row bytes)
        x = gguf.quants.dequantize(data[:rows], t.tensor_type)
        rms = float(np.sqrt((x.astype(np.float64) ** 2).mean()))
        rms_all.append(rms)
        ok = np.isfinite(x).all() and 0.01 < rms < 0.04 and x.shape[-1] == t.shape[0]
        if not ok:
            bad += 1
            print(f"shapes --check: {t.name} {t.tensor_type.name}: rms {rms:.4f}, finite {np.isfinite(x).all()}",
                  file=sys.stderr)
    print(f"{path}: {len(r.tensors)} tensors; first {rows} rows of each matrix dequantized by gguf-py: "
          f"RMS {min(rms_all):.4f}..{max(rms_all):.4f}, {'all finite' if not bad else f'{bad} BAD'}")
    return bad == 0


def check_mix(path, qtype, quantize):
    """The type llama-quantize --dry-run plans for each tensor against the file's own."""
    p = subprocess.run([quantize, "--dry-run", "--allow-requantize", path, LLAMA_NAME[qtype]], capture_output=True,
                       text=True)
    txt = p.stdout + p.stderr
    # "[  12/ 146] blk.0.attn_v.weight - [ 2048, 512, 1, 1], type = q4_K, size = ... (q6_K)": the
    # planned type in parentheses; a tensor left as it is (a norm) has none
    planned = {m.group(1): (m.group(3) or m.group(2)).lower()
               for m in re.finditer(r"\]\s+(\S+)\s+- \[.*?type =\s+(\S+),.*?(?:\((\w+)\))?$", txt, re.M)}
    have = {t.name: t.tensor_type.name.lower() for t in gguf.GGUFReader(path).tensors}
    diff = [(n, have[n], planned.get(n)) for n in have if have[n] != planned.get(n)]
    size = re.search(r"quant size\s*=\s*([0-9.]+ MiB)", txt)
    print(f"{path}: llama-quantize --dry-run {LLAMA_NAME[qtype]} plans {len(planned)} tensors, "
          f"{size.group(1) if size else '?'}; {len(diff)} of {len(have)} types differ from the file's"
          + (f": {diff[:5]}" if diff else ""))
    return p.returncode == 0 and not diff and len(planned) == len(have)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--type", choices=sorted(TYPES), required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab-from", default=default_model(), help="the GGUF whose tokenizer.* keys are copied")
    ap.add_argument("--check", action="store_true", help="read the file back and dequantize rows with gguf-py")
    ap.add_argument("--check-mix", nargs="?", const=PEER_QUANTIZE, metavar="LLAMA_QUANTIZE",
                    help="compare each tensor's type with llama-quantize --dry-run's plan")
    a = ap.parse_args()
    t0 = time.perf_counter()
    tensors, total = write(a.out, a.shape, a.type, a.seed, a.vocab_from)
    n_params = sum(int(np.prod(ne)) for _, ne, _ in tensors)
    mix = {}
    for _, ne, qt in tensors:
        mix[qt.name] = mix.get(qt.name, 0) + 1
    print(f"{a.out}: {a.shape} {a.type}, {n_params / 1e9:.2f} B parameters, {os.path.getsize(a.out) / 1e9:.2f} GB "
          f"({', '.join(f'{v} {k}' for k, v in mix.items())}) in {time.perf_counter() - t0:.1f} s")
    ok = check(a.out) if a.check else True
    ok = check_mix(a.out, a.type, a.check_mix) and ok if a.check_mix else ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

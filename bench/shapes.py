#!/usr/bin/env python3
"""Random-weight GGUFs at the shapes people run (issue 39), written block by
block straight from random codes: no F32 intermediate, memory stays at one
chunk (~32 MB) whatever the model's size.

  python3 bench/shapes.py OUT.gguf --shape {llama-1b,llama-3b,llama-8b} \\
      --type {q4_0,q8_0,q4_k,q6_k,mxfp4} [--layers N] [--seed S] [--vocab-from GGUF] [--check]
      [--check-mix [LLAMA_QUANTIZE]]

Shapes (Llama architecture, GQA 8 KV heads, RMS eps 1e-5, RoPE base 500000,
context 131072 as the real models declare it):
  llama-1b  Llama 3.2 1B:  2048 wide, 16 layers, FFN 8192, 32/8 heads of 64, tied embeddings
  llama-3b  Llama 3.2 3B:  3072 wide, 28 layers, FFN 8192, 24/8 heads of 128, tied embeddings
  llama-8b  Llama 3.1 8B:  4096 wide, 32 layers, FFN 14336, 32/8 heads of 128, untied output
Mixtures of experts (issue 40), their experts as one 3-D tensor per
projection (ffn_{gate,up,down}_exps) and a router (ffn_gate_inp, F32, as
llama-quantize leaves it):
  qwen3moe-30b-a3b  Qwen3-30B-A3B: qwen3moe, 2048 wide, 48 layers, 128 experts of FFN 768, 8 used,
                    32/4 heads of 128, QK norm, RoPE base 1e6, untied output
  mixtral-8x7b      Mixtral-8x7B: llama with experts, 4096 wide, 32 layers, 8 experts of FFN 14336,
                    2 used, 32/8 heads of 128, RoPE base 1e6, untied output
  gpt-oss-20b       gpt-oss-20b: gpt-oss, 2880 wide, 24 layers, 32 experts of FFN 2880, 4 used,
                    64/8 heads of 64, biases, attention sinks, sliding window 128 on every other layer,
                    YaRN x32 from 4096, untied output (--type mxfp4 only, as the real file is)
--layers N keeps the first N layers of a shape (a file that fits this
machine's disk twice over, with clinfer's packed-weights cache entry beside
it): every layer has the real shape, so per-layer costs and the ratio of two
engines hold, and a token's time scales with N.
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
        clinfer bench call Q4_K_M). With 8 experts (Mixtral) llama.cpp's mix
        has attn_k and attn_v Q8_0 and attn_output Q5_K.
  mxfp4 llama.cpp's MXFP4_MOE (38): the expert tensors MXFP4, every other
        matrix Q8_0
Norm vectors are F32 ones.

Codes are uniform random; scales are f16, jittered +-25% between blocks and
set so the weights' RMS is ~0.02 (that of a trained 1-8B Llama's matrices):
  Q4_0  d*(q-8)                 q in 0..15
  Q8_0  d*q                     q in -127..127
  Q4_K  d*sc*q - dmin*m         q in 0..15, sc = m in 32..63, dmin = 7.5*d (zero mean)
  Q6_K  d*sc*(q-32)             q in 0..63, sc in 16..31
  Q5_K  d*sc*q - dmin*m         q in 0..31, sc = m in 32..63, dmin = 15.5*d (zero mean)
  MXFP4 2^(e-128)*kv[q]         q in 0..15 (kv: -12..12, E2M1), e in 119..120
Biases are zeros, attention sinks zeros (F32).
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
    "qwen3moe-30b-a3b": (2048, 48, 768, 32, 4, 128, False),
    "mixtral-8x7b": (4096, 32, 14336, 32, 8, 128, False),
    "gpt-oss-20b": (2880, 24, 2880, 64, 8, 64, False),
}
MOE = {  # shape: (general.architecture, experts, used); n_ff above is each expert's
    "qwen3moe-30b-a3b": ("qwen3moe", 128, 8),
    "mixtral-8x7b": ("llama", 8, 2),
    "gpt-oss-20b": ("gpt-oss", 32, 4),
}
ROPE_BASE = {"qwen3moe-30b-a3b": 1e6, "mixtral-8x7b": 1e6, "gpt-oss-20b": 150000.0}
TYPES = {  # --type: (base type, general.file_type as llama.h's LLAMA_FTYPE_MOSTLY_*)
    "q4_0": (Q.Q4_0, 2),
    "q8_0": (Q.Q8_0, 7),
    "q4_k": (Q.Q4_K, 15),
    "q6_k": (Q.Q6_K, 18),
    "mxfp4": (Q.MXFP4, 38),
}
BLOCK = {Q.Q4_0: (32, 18), Q.Q8_0: (32, 34), Q.Q4_K: (256, 144), Q.Q6_K: (256, 210), Q.Q5_K: (256, 176),
         Q.MXFP4: (32, 17)}  # weights, bytes
RMS = 0.02  # target RMS of a weight
CHUNK = 32 << 20  # bytes generated and written at once

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_NAME = {"q4_0": "Q4_0", "q8_0": "Q8_0", "q4_k": "Q4_K_M", "q6_k": "Q6_K", "mxfp4": "MXFP4_MOE"}  # llama-quantize's type names
PEER_QUANTIZE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "peer",
                             "bin", "llama-quantize")


def default_model():
    base = os.environ.get("CLINFER_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "models")
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


def more_bits(i, n):
    """llama.cpp's use_more_bits: the first and last eighth and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def plan(shape, qtype, n_vocab, n_layer=None):
    """[(name, ne (row length first, as GGUF lists it), type)] in convert_hf_to_gguf's order."""
    E, L, F, H, HKV, HD, tied = SHAPES[shape]
    L = n_layer or L
    arch, n_exp, _ = MOE.get(shape, ("llama", 0, 0))
    base, ftype = TYPES[qtype]
    if (ftype == 38) != (arch == "gpt-oss"):
        raise SystemExit(f"shapes: {shape} as {qtype}: mxfp4 is gpt-oss's type, and gpt-oss has no other")
    mx = ftype == 38
    dense = Q.Q8_0 if mx else base  # MXFP4_MOE: every matrix but the experts Q8_0
    head = Q.Q8_0 if base == Q.Q8_0 or mx else Q.Q6_K  # llama-quantize's output matrix rule
    exps = lambda ne: ne + [n_exp]  # one 3-D tensor of n_exp matrices
    out = [("token_embd.weight", [E, n_vocab], head if tied else dense)]
    for i in range(L):
        p = f"blk.{i}."
        hot = ftype == 15 and more_bits(i, L)  # Q4_K_M's more-bits layers
        eight = ftype == 15 and n_exp == 8  # llama-quantize's 8-expert rule (Mixtral)
        wv = Q.Q8_0 if eight else Q.Q6_K if hot else dense
        out += [(p + "attn_norm.weight", [E], Q.F32)]
        if arch == "gpt-oss":
            out += [(p + "post_attention_norm.weight", [E], Q.F32)]
        out += [(p + "attn_q.weight", [E, H * HD], dense),
                (p + "attn_k.weight", [E, HKV * HD], Q.Q8_0 if eight else dense),
                (p + "attn_v.weight", [E, HKV * HD], wv),
                (p + "attn_output.weight", [H * HD, E], Q.Q5_K if eight else dense)]
        if arch == "qwen3moe":
            out += [(p + "attn_q_norm.weight", [HD], Q.F32), (p + "attn_k_norm.weight", [HD], Q.F32)]
        if arch == "gpt-oss":
            out += [(p + "attn_q.bias", [H * HD], Q.F32), (p + "attn_k.bias", [HKV * HD], Q.F32),
                    (p + "attn_v.bias", [HKV * HD], Q.F32), (p + "attn_output.bias", [E], Q.F32),
                    (p + "attn_sinks.weight", [H], Q.F32)]
        else:
            out += [(p + "ffn_norm.weight", [E], Q.F32)]
        if not n_exp:
            out += [(p + "ffn_gate.weight", [E, F], base),
                    (p + "ffn_up.weight", [E, F], base),
                    (p + "ffn_down.weight", [F, E], Q.Q6_K if hot else base)]
            continue
        xb = Q.MXFP4 if mx else base
        out += [(p + "ffn_gate_inp.weight", [E, n_exp], Q.F32),
                (p + "ffn_gate_exps.weight", exps([E, F]), xb),
                (p + "ffn_up_exps.weight", exps([E, F]), xb),
                (p + "ffn_down_exps.weight", exps([F, E]), Q.Q6_K if hot else xb)]
        if arch == "gpt-oss":
            out += [(p + "ffn_gate_inp.bias", [n_exp], Q.F32), (p + "ffn_gate_exps.bias", [F, n_exp], Q.F32),
                    (p + "ffn_up_exps.bias", [F, n_exp], Q.F32), (p + "ffn_down_exps.bias", [E, n_exp], Q.F32)]
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
    elif qt == Q.Q5_K:  # d f16 | dmin f16 | scales[12] | qh[32] | qs[128]: w = d*sc*q - dmin*m, q 5 bits
        sc = rng.integers(32, 64, (nb, 8), dtype=np.uint8)
        m = sc  # with dmin = 15.5*d: zero mean; RMS of q-15.5 over 0..31 is sqrt(1023/12)
        d = RMS * jitter / (np.sqrt(1023 / 12) * np.sqrt((sc.astype(np.float64) ** 2).mean(1)))
        b[:, 0:2] = f16_bytes(d)
        b[:, 2:4] = f16_bytes(15.5 * d)
        s = b[:, 4:16]  # the same 6-bit packing as Q4_K
        s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
        s[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
        s[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    elif qt == Q.MXFP4:  # e (E8M0) | qs[16]: w = 2^(e-127) * 0.5 * kv[q]; RMS of kv over 0..15 is sqrt(34.25)
        # 2^(e-128) * sqrt(34.25): 0.011 at e = 119, 0.023 at 120; half the blocks each, RMS ~0.018
        b[:, 0] = 119 + rng.integers(0, 2, nb).astype(np.uint8)
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


def write(path, shape, qtype, seed, vocab_from, n_layer=None):
    E, L, F, H, HKV, HD, tied = SHAPES[shape]
    L = n_layer or L
    arch, n_exp, n_used = MOE.get(shape, ("llama", 0, 0))
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"random {shape}{f' ({L} layers)' if L != SHAPES[shape][1] else ''} {qtype} "
               f"(bench/shapes.py, seed {seed})")
    w.add_block_count(L)
    w.add_context_length(131072 if arch != "qwen3moe" else 40960)
    w.add_embedding_length(E)
    w.add_feed_forward_length(F if arch != "qwen3moe" else 6144)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(ROPE_BASE.get(shape, 500000.0))
    w.add_layer_norm_rms_eps(1e-6 if arch == "qwen3moe" else 1e-5)
    if n_exp:
        w.add_expert_count(n_exp)
        w.add_expert_used_count(n_used)
        if arch != "llama":  # Mixtral's experts are llama.feed_forward_length wide
            w.add_expert_feed_forward_length(F)
    if arch == "gpt-oss":
        w.add_sliding_window(128)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(32.0)
        w.add_rope_scaling_orig_ctx_len(4096)
    w.add_file_type(TYPES[qtype][1])
    w.add_quantization_version(2)
    n_vocab = copy_vocab(w, vocab_from)
    w.add_vocab_size(n_vocab)
    tensors = plan(shape, qtype, n_vocab, L)
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
        if qt == Q.F32:  # norms ones; biases, sinks and the router's... see below
            fill = 1.0 if name.endswith("norm.weight") else 0.0
            if name.endswith("ffn_gate_inp.weight"):  # the router: random, so that tokens spread over experts
                rng.normal(0, RMS, int(np.prod(ne))).astype(np.float32).tofile(fout)
            else:
                np.full(int(np.prod(ne)), fill, np.float32).tofile(fout)
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
            ok = np.all(t.data == 1.0) if t.name.endswith("norm.weight") else np.isfinite(t.data).all()
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
    ap.add_argument("--layers", type=int, help="keep the first N layers of the shape")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab-from", default=default_model(), help="the GGUF whose tokenizer.* keys are copied")
    ap.add_argument("--check", action="store_true", help="read the file back and dequantize rows with gguf-py")
    ap.add_argument("--check-mix", nargs="?", const=PEER_QUANTIZE, metavar="LLAMA_QUANTIZE",
                    help="compare each tensor's type with llama-quantize --dry-run's plan")
    a = ap.parse_args()
    t0 = time.perf_counter()
    tensors, total = write(a.out, a.shape, a.type, a.seed, a.vocab_from, a.layers)
    n_params = sum(int(np.prod(ne)) for _, ne, _ in tensors)
    mix = {}
    for _, ne, qt in tensors:
        mix[qt.name] = mix.get(qt.name, 0) + 1
    print(f"{a.out}: {a.shape}{f' ({a.layers} layers)' if a.layers else ''} {a.type}, {n_params / 1e9:.2f} B parameters, {os.path.getsize(a.out) / 1e9:.2f} GB "
          f"({', '.join(f'{v} {k}' for k, v in mix.items())}) in {time.perf_counter() - t0:.1f} s")
    ok = check(a.out) if a.check else True
    ok = check_mix(a.out, a.type, a.check_mix) and ok if a.check_mix else ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""Llama-3-70B's shape as a GGUF with no weights (a sparse file of 39.6 GiB
that takes 44 KiB on disk): every tensor's name, shape and Q4_K_M type as
llama-quantize picks it (the rule tools/quantize/quant_mix.c follows: Q6_K head,
attn_v and ffn_down Q6_K in the "more bits" layers, attn_v Q5_K elsewhere
for a 70B), for `clinfer info` to plan with (bench/RESULTS.md, issue 16):

    python3 bench/llama70b_shape.py /tmp/l70.gguf
    build/clinfer info -m /tmp/l70.gguf --ctx 8192 --kv f16 --devices 0:0,0:0,0:0,0:0

Needs the `gguf` Python package (llama.cpp's gguf-py)."""
import os, sys
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

out = sys.argv[1]
L, E, F, H, HKV, V = 80, 8192, 28672, 64, 8, 128256
HD = E // H
def more_bits(i, n): return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2
BLOCK = {Q.Q4_K: (256, 144), Q.Q5_K: (256, 176), Q.Q6_K: (256, 210), Q.F32: (1, 4)}
w = gguf.GGUFWriter(out, "llama")
w.add_block_count(L); w.add_context_length(8192); w.add_embedding_length(E); w.add_feed_forward_length(F)
w.add_head_count(H); w.add_head_count_kv(HKV); w.add_rope_freq_base(500000.0); w.add_layer_norm_rms_eps(1e-5)
w.add_rope_dimension_count(HD); w.add_vocab_size(V); w.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
total = 0
def t(name, shape, qt):  # shape as GGUF lists it: ne0 (row length) first
    global total
    n = int(np.prod(shape)); bs, bb = BLOCK[qt]
    nbytes = n // bs * bb
    total += (nbytes + 31) // 32 * 32
    np_shape = list(reversed(shape))  # numpy order; a quantized row in bytes
    if qt != Q.F32: np_shape[-1] = np_shape[-1] // bs * bb
    w.add_tensor_info(name, np_shape, np.float32 if qt == Q.F32 else np.uint8, nbytes, raw_dtype=qt)
t("token_embd.weight", [E, V], Q.Q4_K)
for i in range(L):
    p = f"blk.{i}."
    t(p + "attn_norm.weight", [E], Q.F32)
    t(p + "attn_q.weight", [E, E], Q.Q4_K)
    t(p + "attn_k.weight", [E, HKV * HD], Q.Q4_K)
    # 70B: attn_v is 8x smaller than attn_q, so Q5_K where Q4_K would be
    t(p + "attn_v.weight", [E, HKV * HD], Q.Q6_K if more_bits(i, L) else Q.Q5_K)
    t(p + "attn_output.weight", [E, E], Q.Q4_K)
    t(p + "ffn_norm.weight", [E], Q.F32)
    t(p + "ffn_gate.weight", [E, F], Q.Q4_K)
    t(p + "ffn_up.weight", [E, F], Q.Q4_K)
    t(p + "ffn_down.weight", [F, E], Q.Q6_K if more_bits(i, L) else Q.Q4_K)
t("output_norm.weight", [E], Q.F32)
t("output.weight", [E, V], Q.Q6_K)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_ti_data_to_file()
w.close()
size = os.path.getsize(out)
size = (size + 31) // 32 * 32
with open(out, "r+b") as f: f.truncate(size + total)  # sparse: no weights on disk
print(f"{out}: {(size + total) / 2**30:.2f} GiB of which {total / 2**30:.2f} GiB tensors (sparse)")

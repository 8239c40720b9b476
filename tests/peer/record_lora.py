"""Random LoRA adapters in llama.cpp's GGUF format, and llama.cpp's logits with them.

Writing an adapter for a base file (gguf-py, from /work/peer/venv):
  python3 tests/peer/record_lora.py adapter BASE.gguf OUT.gguf [--rank R] [--alpha A]
      [--type F32|F16] [--targets attn_q,attn_v,...] [--seed S]
writes general.type = adapter, adapter.type = lora, adapter.lora.alpha and,
per adapted weight W of shape [out × in] (GGUF ne [in, out]), W.lora_a
(ne [in, r]) and W.lora_b (ne [r, out]), as convert_lora_to_gguf.py does;
A and B random, sized so that the adapter's delta s·B(A x) is as large as
W x itself (a test that applies it wrongly sees it).

Recording (llama-cpp-python):
  python3 tests/peer/record_lora.py --tiny build/tiny_gguf tests/data
writes tests/data/peer_lora_{tiny,phi3,gemma3}.txt and their adapters
tests/data/lora_*.gguf (a few KB each: committed, so the suite needs no
venv) for the tiny models of record.py's "llama3", "phi3" and "gemma3"
arguments: prompts of random ids, llama.cpp's top-20 logits at each step of
a greedy continuation (record.py's format), once per configuration
"C <adapter>:<scale>[,<adapter>:<scale>]" line; "A <name> <file>" names the adapters.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

TARGETS = "attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down"


def write_adapter(base, out, rank=8, alpha=16.0, typ="F32", targets=TARGETS, seed=1):
    import gguf

    r = gguf.GGUFReader(base)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    want = set(targets.split(","))
    rng = np.random.RandomState(seed)
    w = gguf.GGUFWriter(out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(alpha))
    dt = np.float16 if typ == "F16" else np.float32
    scale = alpha / rank
    for t in r.tensors:
        parts = t.name.split(".")
        if len(parts) != 4 or parts[0] != "blk" or parts[3] != "weight" or parts[2] not in want:
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])
        # W's rows have norm ~ std(W)·sqrt(in); A x's entries ~ |x|, B's row
        # sums those r entries: B ~ std(W)·sqrt(in/r)/scale keeps |s·B A x| ~ |W x|
        wf = np.asarray(t.data, dtype=np.float32) if t.tensor_type in (gguf.GGMLQuantizationType.F32,
                                                                        gguf.GGMLQuantizationType.F16) \
            else gguf.quants.dequantize(t.data, t.tensor_type)  # a quantized base: its weights' spread
        wstd = float(np.std(wf))
        a = rng.standard_normal((rank, n_in)) / np.sqrt(n_in)
        b = rng.standard_normal((n_out, rank)) * wstd * np.sqrt(n_in / rank) / scale
        # numpy [rows, cols] is GGUF ne [cols, rows]: A ne [in, r], B ne [r, out]
        w.add_tensor(t.name + ".lora_a", a.astype(dt))
        w.add_tensor(t.name + ".lora_b", b.astype(dt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# family (record.py's) -> data file, its adapters (name -> file, write_adapter's arguments), the configurations
TINY = {
    "llama3": ("peer_lora_tiny.txt", {
        # F32, every projection, rank 8; F16, rank 16, three of them
        "a": ("lora_tiny_a.gguf", dict(rank=8, alpha=16.0, typ="F32", targets=TARGETS, seed=21)),
        "b": ("lora_tiny_b.gguf", dict(rank=16, alpha=8.0, typ="F16", targets="attn_q,attn_v,ffn_down", seed=22)),
    }, [[("a", 1.0)], [("b", 0.5)], [("a", 0.75), ("b", -1.25)]]),
    # Phi-3's fused attn_qkv and gate|up ffn_up
    "phi3": ("peer_lora_phi3.txt", {
        "a": ("lora_phi3_a.gguf", dict(rank=8, alpha=8.0, typ="F32", targets="attn_qkv,attn_output,ffn_up,ffn_down",
                                       seed=23)),
    }, [[("a", 1.0)]]),
    # Gemma 3's post-norms after attn_output and ffn_down (the adapter's delta goes before them)
    "gemma3": ("peer_lora_gemma3.txt", {
        "a": ("lora_gemma3_a.gguf", dict(rank=16, alpha=32.0, typ="F16", targets=TARGETS, seed=24)),
    }, [[("a", 1.0)]]),
}


def record_tiny(tool, outdir):
    import ctypes

    import llama_cpp
    import record

    for fam, (data, adapters, configs) in TINY.items():
        args = record.FAMILIES[fam]
        with tempfile.TemporaryDirectory() as tmp:
            base = os.path.join(tmp, "base.gguf")
            subprocess.run([tool, "model", base] + args.split(), check=True)
            files = {n: os.path.join(outdir, f) for n, (f, _) in adapters.items()}
            for n, (_, kw) in adapters.items():
                write_adapter(base, files[n], **kw)
            llm = record.load(base, kv_f32=True)
            handles = {n: llama_cpp.llama_adapter_lora_init(llm.model, files[n].encode()) for n in adapters}
            assert all(handles.values())
            rng = np.random.RandomState(1043)
            prompts = [[int(i) for i in rng.randint(0, llm.n_vocab(), record.TINY_PROMPT)] for _ in range(2)]
            with open(os.path.join(outdir, data), "w") as out:
                print(f"# llama-cpp-python {llama_cpp.__version__}, base sha256 {record.sha256(base)}, "
                      + ", ".join(f"{adapters[n][0]} sha256 {record.sha256(files[n])}" for n in adapters), file=out)
                print(f"# tiny_gguf model PATH {args}; A <name> <adapter file>; per configuration C "
                      f"(adapter:scale,...): 2 prompts of {record.TINY_PROMPT} random ids, {record.TINY_GEN} greedy "
                      f"tokens, top-{record.TOP} logits per step, F32 KV cache", file=out)
                print(f"M {args}", file=out)
                for n in adapters:
                    print(f"A {n} tests/data/{adapters[n][0]}", file=out)
                for cfg in configs:
                    arr = (llama_cpp.llama_adapter_lora_p_ctypes * len(cfg))(*[handles[n] for n, _ in cfg])
                    sc = (ctypes.c_float * len(cfg))(*[s for _, s in cfg])
                    assert llama_cpp.llama_set_adapters_lora(llm.ctx, arr, len(cfg), sc) == 0
                    print("C " + ",".join(f"{n}:{s}" for n, s in cfg), file=out)
                    for ids in prompts:
                        record.record_case(llm, ids, record.TINY_GEN, out)
            del llm


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--tiny":
        record_tiny(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "adapter":
        kw, rest = {}, sys.argv[4:]
        for i in range(0, len(rest) - 1, 2):
            k, v = rest[i].lstrip("-"), rest[i + 1]
            kw[{"type": "typ"}.get(k, k)] = int(v) if k in ("rank", "seed") else float(v) if k == "alpha" else v
        write_adapter(sys.argv[2], sys.argv[3], **kw)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

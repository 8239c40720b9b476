#!/usr/bin/env python3
"""Records llama.cpp's logits and greedy continuations, as reference data
for tests/test_model_peer.c.

A real model (the default SmolLM2, as shipped and converted to F32; Gemma 3
270M), on text prompts tokenized by llama.cpp:
  python3 tests/peer/record.py MODEL.gguf > tests/data/peer_smollm2_q4_1.txt
  build/clinfer quantize MODEL.gguf /tmp/f32.gguf F32
  python3 tests/peer/record.py /tmp/f32.gguf > tests/data/peer_smollm2_f32.txt
  python3 tests/peer/record.py --gemma gemma-3-270m-q4_k_m.gguf > tests/data/peer_gemma3_270m.txt
  build/clinfer quantize gemma-3-270m-q4_k_m.gguf /tmp/g32.gguf F32   (or gguf-py's dequantize)
  python3 tests/peer/record.py --gemma /tmp/g32.gguf > tests/data/peer_gemma3_270m_f32.txt

Tiny random models of every family, written by tests/tools/tiny_gguf with
each family's quirks switched on (see FAMILIES), on random token ids:
  python3 tests/peer/record.py --tiny build/tiny_gguf tests/data [NAME...]
writes tests/data/peer_tiny_<name>.txt for each (or for the NAMEs given).

Output, one line each (ids are token ids, logits are raw):
  # comments (package version, model sha256)
  M <tiny_gguf arguments after the path>     tiny models: how to write the file again
  P <prompt ids...>                          a new case
  S <step> <l2 norm of logits> <id>:<logit> ...  top-20 after the prompt (step 0)
                                             and after each generated token
  G <ids...>                                 the greedy continuation
Steps are recorded under teacher forcing on the peer's own greedy tokens.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea, there lived",
    "1, 2, 3, 4,",
]
# Gemma 3: its chat turns, and a text longer than the 512-token sliding
# window (the prompt's last tokens attend past it in the local layers).
GEMMA_PROMPTS = [
    "The capital of France is",
    "<start_of_turn>user\nWhat is the boiling point of water?<end_of_turn>\n<start_of_turn>model\n",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea, there lived",
    " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(60)) + " Line 60:",
]
N_GEN = 32
TOP = 20

# name -> tiny_gguf arguments: F32 weights and an F32 KV cache, so
# llama.cpp and clinfer differ only in summation order (and for gemma3 in
# llama.cpp's GELU, a table of F16 inputs); the default
# tiny model has 2 query heads of 16 on 1 KV head (GQA) and a vocabulary of
# 281 (odd).
FAMILIES = {
    "llama3": "F32 --layers 2 --rope-freqs --untied --seed 11",
    "qwen2": "F32 --arch qwen2 --layers 2 --seed 12",
    "qwen3": "F32 --arch qwen3 --layers 2 --embd 64 --seed 13",
    "gemma3": "F32 --arch gemma3 --layers 6 --embd 64 --window 8 --seed 14",
    "phi3": "F32 --arch phi3 --layers 2 --rot 8 --untied --seed 15",
    # mixtures of experts: 8 experts, odd expert widths (not a multiple of 32)
    "qwen3moe": "F32 --arch qwen3moe --layers 2 --embd 64 --experts 8 --used 3 --ff-exp 24 --seed 16",
    "mixtral": "F32 --layers 2 --experts 8 --used 2 --ff-any 40 --untied --seed 17",
    # gpt-oss: sinks, every bias, YaRN, even layers sliding (a window of 8 the
    # prompt outgrows), softmax-weight routing over 8 experts, 4 used
    "gptoss": "F32 --arch gpt-oss --layers 4 --embd 64 --experts 8 --used 4 --ff-exp 40 --window 8 --untied --seed 18",
}
TINY_PROMPT = 20  # longer than gemma3's and gpt-oss's window of 8
TINY_GEN = 16


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def load(path, kv_f32=False):
    # llama.cpp's default KV cache is F16; an F32 one (type 0) leaves only
    # summation order between the two engines
    kv = {"type_k": 0, "type_v": 0} if kv_f32 else {}
    return llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=1024, n_threads=2, verbose=False, **kv)


def record_case(llm, ids, n_gen, out):
    llm.reset()
    print("P " + " ".join(map(str, ids)), file=out)
    llm.eval(ids)
    gen = []
    for step in range(n_gen + 1):
        # the last token's row, all llama.cpp computes without logits_all
        # (which would keep n_ctx x 262k floats for Gemma 3)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        order = np.argsort(-logits, kind="stable")[:TOP]
        top = " ".join(f"{i}:{logits[i]:.5f}" for i in order)
        print(f"S {step} {np.linalg.norm(logits):.4f} {top}", file=out)
        if step == n_gen:
            break
        tok = int(order[0])
        gen.append(tok)
        llm.eval([tok])
    print("G " + " ".join(map(str, gen)), file=out)


def record_text(path, prompts):
    llm = load(path)
    print(f"# llama-cpp-python {llama_cpp.__version__}, model sha256 {sha256(path)}")
    print(f"# {len(prompts)} prompts, {N_GEN} greedy tokens, top-{TOP} logits per step")
    for text in prompts:
        record_case(llm, llm.tokenize(text.encode(), add_bos=True, special=True) if prompts is GEMMA_PROMPTS
                    else llm.tokenize(text.encode(), add_bos=False, special=True), N_GEN, sys.stdout)


def record_tiny(tool, outdir, names=None):
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in FAMILIES.items():
            if names and name not in names:
                continue
            path = os.path.join(tmp, name + ".gguf")
            subprocess.run([tool, "model", path] + args.split(), check=True)
            llm = load(path, kv_f32=True)
            rng = np.random.RandomState(1000 + len(name))
            with open(os.path.join(outdir, f"peer_tiny_{name}.txt"), "w") as out:
                print(f"# llama-cpp-python {llama_cpp.__version__}, model sha256 {sha256(path)}", file=out)
                print(f"# tiny_gguf model PATH {args}: 2 prompts of {TINY_PROMPT} random ids, "
                      f"{TINY_GEN} greedy tokens, top-{TOP} logits per step, F32 KV cache", file=out)
                print(f"M {args}", file=out)
                for _ in range(2):
                    ids = [int(i) for i in rng.randint(0, llm.n_vocab(), TINY_PROMPT)]
                    record_case(llm, ids, TINY_GEN, out)
            del llm


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--tiny":
        record_tiny(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 3 and sys.argv[1] == "--gemma":
        record_text(sys.argv[2], GEMMA_PROMPTS)
    elif len(sys.argv) == 2:
        record_text(sys.argv[1], PROMPTS)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

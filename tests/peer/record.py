#!/usr/bin/env python3
"""Records llama.cpp's logits and greedy continuations on the default model,
as reference data for tests/test_model_peer.c.

  python3 tests/peer/record.py MODEL.gguf > tests/data/peer_smollm2_q4_1.txt
  build/clinfer quantize MODEL.gguf /tmp/f32.gguf F32
  python3 tests/peer/record.py /tmp/f32.gguf > tests/data/peer_smollm2_f32.txt

Output, one line each (ids are token ids, logits are raw):
  # comments (package version, model sha256)
  P <prompt ids...>                          a new case
  S <step> <l2 norm of logits> <id>:<logit> ...  top-20 after the prompt (step 0)
                                             and after each generated token
  G <ids...>                                 the greedy continuation (32 tokens)
Steps are recorded under teacher forcing on the peer's own greedy tokens.
"""
import hashlib
import sys

import llama_cpp
import numpy as np

PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    ",
    "Once upon a time, in a small village by the sea, there lived",
    "1, 2, 3, 4,",
]
N_GEN = 32
TOP = 20


def main():
    path = sys.argv[1]
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=2,
                          logits_all=True, verbose=False)
    print(f"# llama-cpp-python {llama_cpp.__version__}, model sha256 {sha}")
    print(f"# {len(PROMPTS)} prompts, {N_GEN} greedy tokens, top-{TOP} logits per step")
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        print("P " + " ".join(map(str, ids)))
        llm.eval(ids)
        gen = []
        for step in range(N_GEN + 1):
            logits = np.array(llm.eval_logits[-1], dtype=np.float64)
            order = np.argsort(-logits, kind="stable")[:TOP]
            top = " ".join(f"{i}:{logits[i]:.5f}" for i in order)
            print(f"S {step} {np.linalg.norm(logits):.4f} {top}")
            if step == N_GEN:
                break
            tok = int(order[0])
            gen.append(tok)
            llm.eval([tok])
        print("G " + " ".join(map(str, gen)))


if __name__ == "__main__":
    main()

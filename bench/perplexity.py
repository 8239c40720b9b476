#!/usr/bin/env python3
"""Perplexity of clinfer and of llama.cpp (llama-cpp-python) on the same
GGUF files, text and chunking (llama.cpp's method: non-overlapping chunks of
--ctx tokens, the second half of each scored), in one run.

  python3 bench/perplexity.py -f genesis.txt --ctx 512 --chunks 20 MODEL.gguf [MODEL2.gguf ...]

--peer-only: llama.cpp's figures alone (for weight types clinfer cannot run yet).
"""
import argparse
import math
import os
import re
import subprocess

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peer_ppl(model, text, n_ctx, chunks, threads):
    llm = llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx, logits_all=True,
                          n_threads=threads, n_threads_batch=threads, verbose=False)
    toks = llm.tokenize(text.encode(), add_bos=llm.metadata.get("tokenizer.ggml.add_bos_token") == "true",
                        special=False)
    n = min(len(toks) // n_ctx, chunks)
    bos = llm.token_bos() if llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" else None
    total, count = 0.0, 0
    for k in range(n):
        chunk = toks[k * n_ctx:(k + 1) * n_ctx]
        orig = list(chunk)
        if bos is not None:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.eval_logits, dtype=np.float64)
        for j in range(n_ctx // 2, n_ctx - 1):
            l = logits[j]
            m = l.max()
            total += math.log(np.exp(l - m).sum()) - (l[orig[j + 1]] - m)
            count += 1
    return math.exp(total / count), count


def clinfer_ppl(binary, model, path, n_ctx, chunks):
    out = subprocess.run([binary, "perplexity", "-m", model, "-f", path, "--ctx", str(n_ctx), "--chunks",
                          str(chunks)], check=True, capture_output=True, text=True).stdout
    m = re.search(r"perplexity ([0-9.]+) over (\d+)", out)
    return float(m.group(1)), int(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("-f", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--clinfer", default=os.path.join(ROOT, "build", "clinfer"))
    ap.add_argument("--peer-only", action="store_true")
    a = ap.parse_args()
    text = open(a.f, encoding="utf-8").read()
    print(f"text {os.path.basename(a.f)}, ctx {a.ctx}, {a.chunks} chunks, llama-cpp-python {llama_cpp.__version__}")
    print("| model | clinfer ppl | llama.cpp ppl | difference | scored tokens |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for model in a.models:
        theirs, n2 = peer_ppl(model, text, a.ctx, a.chunks, a.threads)
        if a.peer_only:
            print(f"| {os.path.basename(model)} | | {theirs:.4f} | | {n2} |")
            continue
        ours, n1 = clinfer_ppl(a.clinfer, model, a.f, a.ctx, a.chunks)
        assert n1 == n2, f"scored {n1} vs {n2} tokens"
        print(f"| {os.path.basename(model)} | {ours:.4f} | {theirs:.4f} | {100 * (ours / theirs - 1):+.2f}% | {n1} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Records llama.cpp's embeddings, as reference data for tests/test_embed.c:
mean pooling over the hidden states after the output norm, the pooled
vector's L2 norm, then the vector L2-normalised (llama-cpp-python's
embed(normalize=True)), one text at a time from an empty cache.

  python3 tests/peer/record_embed.py SmolLM2-135M-Instruct.Q4_1.gguf > tests/data/peer_embed_smollm2.txt
  python3 tests/peer/record_embed.py gemma-3-270m-q4_k_m.gguf > tests/data/peer_embed_gemma3.txt
  build/clinfer quantize SmolLM2-135M-Instruct.Q4_1.gguf /tmp/f32.gguf F32
  python3 tests/peer/record_embed.py /tmp/f32.gguf > tests/data/peer_embed_smollm2_f32.txt

How it was run (llama-cpp-python 0.3.36 from its source tree, on the
llama.cpp it vendors, built at vendor/llama.cpp/build-native; its Python
dependencies in a venv outside the repository):
  python3 -m venv /tmp/embedpeer && /tmp/embedpeer/bin/pip install numpy diskcache jinja2 typing_extensions
  PYTHONPATH=/work/peer/llama_cpp_python-0.3.36 \\
  LLAMA_CPP_LIB_PATH=/work/peer/llama_cpp_python-0.3.36/vendor/llama.cpp/build-native/bin \\
      /tmp/embedpeer/bin/python tests/peer/record_embed.py MODEL.gguf > OUT
(`pip install llama-cpp-python==0.3.36` serves as well.)

Output, one line each:
  # comments (package version, model sha256, each text as a Python literal)
  X <hex>             a new case: the text's UTF-8 bytes in hex
  T <ids...>          its tokens as llama.cpp made them (BOS where the model adds it, special tokens as text)
  N <norm>            the L2 norm of the mean-pooled vector, before normalisation
  E <floats...>       the normalised vector (n_embd values)
"""
import hashlib
import sys

import llama_cpp
import numpy as np

TEXTS = [
    "Hello world",
    "The capital of France is Paris, a city on the Seine.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "A",
    "Embeddings map a text to a vector; texts that mean alike lie close together.",
    # longer than a chunk of 512 (clinfer's n_batch) and than Gemma 3's
    # 512-token sliding window
    " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(50)),
]


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: record_embed.py MODEL.gguf")
    path = sys.argv[1]
    # mean pooling asked for: the files name none (llama.cpp's default then is none, a vector per token);
    # n_batch holds every text whole (llama-cpp-python's embed truncates to it), and so must n_ubatch:
    # llama.cpp pools within a micro-batch, so a text over two (its default 512) would be the mean of
    # the last one's tokens only
    m = llama_cpp.Llama(model_path=path, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                        n_ctx=1024, n_batch=1024, n_ubatch=1024, n_threads=2, verbose=False)
    print(f"# llama-cpp-python {llama_cpp.__version__}, embedding=True, pooling mean, n_ubatch 1024")
    print(f"# {path.rsplit('/', 1)[-1]} sha256 {sha256(path)}")
    for text in TEXTS:
        ids = m.tokenize(text.encode("utf-8"))  # add_bos where the model asks, special tokens as text
        raw = np.array(m.embed(text, normalize=False), dtype=np.float64)
        unit = np.array(m.embed(text, normalize=True), dtype=np.float64)
        print(f"# text {text!r}")
        print("X " + text.encode("utf-8").hex())
        print("T " + " ".join(map(str, ids)))
        print(f"N {np.linalg.norm(raw):.9g}")
        print("E " + " ".join(f"{x:.9g}" for x in unit))


if __name__ == "__main__":
    main()

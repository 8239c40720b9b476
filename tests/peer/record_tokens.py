#!/usr/bin/env python3
"""Records llama.cpp's token ids for hard texts, as reference data for
tests/test_tokenizer.c:

  python3 tests/peer/record_tokens.py MODEL.gguf > tests/data/tokens_smollm2.txt
  python3 tests/peer/record_tokens.py --pre ggml-vocab-gpt-2.gguf > tests/data/tokens_pretok.txt
  python3 tests/peer/record_tokens.py ggml-vocab-phi-3.gguf > tests/data/tokens_phi3.txt
  python3 tests/peer/record_tokens.py gemma-3-270m-q4_k_m.gguf > tests/data/tokens_gemma3.txt

The first, third and fourth use a vocabulary as it is (the third:
SentencePiece with Phi-3's special tokens, after which llama.cpp drops
whitespace; the fourth: Gemma 3's 262k SentencePiece vocabulary, no space
prefix, user-defined whitespace and HTML tokens). The second runs the
GPT-2 vocabulary (llama.cpp's models/ggml-vocab-gpt-2.gguf) under each
pre-tokenizer in PRES, overriding tokenizer.ggml.pre, so the regexes of
vocabularies not at hand (Llama 3, Qwen2, ...) are checked too.

Output: '#' comment lines (package version, file sha256, and each case's
text as a Python literal), then one line per case:
  [PRE] SPECIAL HEX | IDS
PRE (--pre only) the pre-tokenizer name, SPECIAL 1 when special tokens
(<|im_start|>, ...) were parsed, HEX the UTF-8 bytes of the text in hex
('-' for the empty text), IDS the ids llama.cpp produced without BOS.
"""
import hashlib
import sys

import llama_cpp

CODE = (
    "def fib(n):\n"
    "    \"\"\"Fibonacci, slowly.\"\"\"\n"
    "    if n < 2:\n"
    "        return n  # base case\n"
    "\treturn fib(n - 1) + fib(n - 2)\n"
    "\n"
    "int main(void) { printf(\"%d\\n\", x->y[i++] != 0 && a <= b); }\n"
)

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog. In 1969, Apollo 11 landed on the Moon; "
    "Neil Armstrong's words were: \"That's one small step for [a] man, one giant leap for mankind.\" "
    "Prices rose 3.5% (from $1,299.99 to $1,345.49) — a so-called 'moderate' increase… "
    "E-mail: someone@example.com, URL: https://example.org/path?q=1&r=2#frag.\n\n"
    "Lists:\n  - first item\n  - second item\n\t* nested\n"
)

TEXTS = [
    "",
    " ",
    "  ",
    "          ",
    " " * 200,
    "\t",
    "\n",
    "\n\n\n",
    "\t\n \r\n  \t x",
    "a\n\nb  \n  c",
    "Hello world",
    " Hello world",
    "Hello  world   !",
    "3333333",
    "12,345.67",
    "0.000001 1e-10 3.14159265358979 2**64 = 18446744073709551616",
    "I'm don't she'll THEY'RE we've you'd It's y'all 'tis rock'n'roll",
    "I'M DON'T SHE'LL They'Re",
    "Crème brûlée à la façon de Zoë, naïve résumé, Ångström, Łódź, Æsir, straße",
    "Привет, как дела? Съешь же ещё этих мягких французских булок да выпей чаю.",
    "我想在apple工作1314151天～ 日本語のテキストです。 한국어 텍스트",
    "Γειά σου Κόσμε · مرحبا بالعالم · नमस्ते दुनिया · สวัสดีชาวโลก",
    "👨‍👩‍👧 family, 👍🏽 thumbs, 🇫🇷 flag, ❤️ heart, ✅ done, 🚀🚀🚀",
    "\u00a0non-breaking\u2009thin\u3000ideographic space\u200bzero-width",
    "“curly quotes” ‘single’ – en — em … ellipsis",
    "w048 7tuijk dsdfhu ------======= ''''''```````\"\"\"\"......!!!!!!??????",
    "a\u0085b x\u2028y \u2029z \u00adsoft \ufeffBOM \x00nul \x7fdel a\r\nb\rc",
    "e\u0301 x\u0300\u0301y 1\u00b2\u00bd \u0661\u0662\u0663 \ufb01 ligature \U0001F600\U0001F601",
    "'s ' ''s' x'sy don't   trailing   ",
    "don'T I'M we'Ve THEY'LL it'D 'S",
    "1 12 123 1234 12345 123456 1234567 x1y22z333",
    "Hello\n\n\nworld\r\n\r\n  end \n \n\t\n",
    "a" * 1000,
    "ab" * 300,
    CODE,
    PARAGRAPH,
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|endoftext|>",
    "abc<|im_end|>def",
    "<|im_start|><|im_end|> <|im_start|>  <|im_end|>",
    "< |im_start| > <|im_start <|im_end|",
    "<repo_name>clinfer<file_sep>main.c<filename>x.py",
    "<s><|system|>\nYou are helpful.<|end|>\n<|user|>\n  What is 2+2?<|end|>\n<|assistant|>\n",
    "<|user|>Hi</s> <s>  x <unk> y<|endoftext|>\t\n z <|placeholder1|><|placeholder2|>",
    "text </s>",
    # Gemma: its turns, and user-defined tokens (HTML tags, runs of
    # whitespace) that are split out before SentencePiece
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\n  Hi\t\t<end_of_turn>\n\n\n<eos>",
    "<table><tr><td>1</td></tr></table> <b>bold</b><em>x</em> <h1>T</h1>",
    "\t\t\tindented\n\n\n\n    four  two\n\t \t",
    "<unused0> [multimodal] <start_of_image><end_of_image> <mask> <pad>",
]


PRES = ["gpt-2", "smollm", "llama-bpe", "dbrx", "qwen2", "default"]


def case_lines(llm, text, special, prefix=""):
    ids = llm.tokenize(text.encode(), add_bos=False, special=bool(special))
    data = text.encode().hex() or "-"
    shown = repr(text) if len(text) <= 120 else repr(text[:117]) + "..."
    return [f"# {shown}", f"{prefix}{special} {data} | {' '.join(map(str, ids))}"]


def main():
    args = sys.argv[1:]
    pre_mode = args[:1] == ["--pre"]
    if pre_mode:
        args = args[1:]
    if len(args) != 1:
        sys.exit(__doc__)
    path = args[0]
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    name = path.rsplit("/", 1)[-1]
    print(f"# token ids of hard texts on {name} (tests/peer/record_tokens.py{' --pre' if pre_mode else ''})")
    print(f"# llama-cpp-python {llama_cpp.__version__}, {name} sha256 {sha}")
    if not pre_mode:
        print("# SPECIAL HEX | IDS  (no BOS; HEX '-' for the empty text)")
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        for text in TEXTS:
            for special in (0, 1) if "<" in text else (0,):
                print("\n".join(case_lines(llm, text, special)))
        return
    print("# PRE SPECIAL HEX | IDS  (tokenizer.ggml.pre overridden; no BOS; HEX '-' for the empty text)")
    for pre in PRES:
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False,
                              kv_overrides={"tokenizer.ggml.pre": pre})
        for text in TEXTS:
            print("\n".join(case_lines(llm, text, 0, pre + " ")))


if __name__ == "__main__":
    main()

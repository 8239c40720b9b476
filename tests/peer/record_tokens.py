#!/usr/bin/env python3
"""Records llama.cpp's token ids for hard texts on the default model's
vocabulary, as reference data for tests/test_tokenizer.c.

  python3 tests/peer/record_tokens.py MODEL.gguf > tests/data/tokens_smollm2.txt

Output: '#' comment lines (package version, model sha256, and each case's
text as a Python literal), then one line per case:
  SPECIAL HEX | IDS
SPECIAL is 1 when special tokens (<|im_start|>, ...) were parsed, HEX the
UTF-8 bytes of the text in hex ('-' for the empty text), IDS the ids
llama.cpp produced without BOS.
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
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    print("# token ids of hard texts on the default model's vocabulary (tests/peer/record_tokens.py)")
    print(f"# llama-cpp-python {llama_cpp.__version__}, model sha256 {sha}")
    print("# SPECIAL HEX | IDS  (no BOS; HEX '-' for the empty text)")
    for text in TEXTS:
        for special in (0, 1) if "<" in text else (0,):
            ids = llm.tokenize(text.encode(), add_bos=False, special=bool(special))
            data = text.encode().hex() or "-"
            shown = repr(text) if len(text) <= 120 else repr(text[:117]) + "..."
            print(f"# {shown}")
            print(f"{special} {data} | {' '.join(map(str, ids))}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Renders the default model's own chat template (tokenizer.chat_template,
with jinja2 as Hugging Face does) for a fixed conversation, as reference
output for tests/test_chat.c.

  python3 tests/peer/record_chat.py MODEL.gguf > tests/data/chat_smollm2.txt
"""
import sys

import jinja2
from gguf import GGUFReader

CONVERSATIONS = [
    [{"role": "user", "content": "Hi there!"}],
    [{"role": "system", "content": "Answer in French."},
     {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "Quatre."},
     {"role": "user", "content": "And 3+3?\nThanks."}],
]


# Meta's Llama 3 Instruct template (BOS comes from the tokenizer, so bos_token is "").
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def esc(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def main():
    r = GGUFReader(sys.argv[1])
    f = r.fields["tokenizer.chat_template"]
    tmpl = bytes(f.parts[f.data[0]]).decode()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    for name, text in (("model", tmpl), ("llama3", LLAMA3)):
        t = env.from_string(text)
        for conv in CONVERSATIONS:
            out = t.render(messages=conv, add_generation_prompt=True, bos_token="", eos_token="")
            # one record: T template, M role content..., R rendering; "\\" and "\n" escaped
            print(f"T {name}")
            for m in conv:
                print(f"M {m['role']} {esc(m['content'])}")
            print("R " + esc(out))

if __name__ == "__main__":
    main()

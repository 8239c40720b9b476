#!/usr/bin/python3
"""Renders every chat template of tests/data/templates/ (llama.cpp's
models/templates, the conformance corpus) with Debian's python3-jinja2 in
the environment Hugging Face's apply_chat_template makes, over a fixed set
of conversations: the reference tests/test_jinja.c holds the Jinja engine
(text/chat/jinja*.c) to, byte for byte.

  /usr/bin/python3 tests/peer/record_templates.py > tests/data/templates/expected.json

The environment, as transformers' chat template utilities make it:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
jinja2.ext.loopcontrols and the {% generation %} tag, tojson overridden
(json.dumps(x, ensure_ascii=False, indent=, separators=, sort_keys=)),
raise_exception and strftime_now globals; render(messages=, tools=,
documents=None, add_generation_prompt=, bos_token=, eos_token=).
strftime_now formats a fixed time (NOW, UTC) so that the output does not
depend on the day. bos_token and eos_token are fixed strings.

Output: JSON {"now": NOW, "conversations": [{"name", "context"}],
"templates": [{"name", "results": [{"conv", "output"} or {"conv",
"error", "raise"}]}]}: "raise" is true where the error is the template's
own raise_exception (the engine must fail with exactly that message), false
for other errors (the engine must fail).
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox
from jinja2 import nodes

NOW = 1741343400  # 2025-03-07 10:30:00 UTC
HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "data", "templates")


class TemplateRaise(Exception):
    pass


def raise_exception(message):
    raise TemplateRaise(message)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, tz=datetime.timezone.utc).strftime(fmt)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(jinja2.ext.Extension):
    """transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city's name, e.g. \"Paris\"."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add",
        "description": "Adds two numbers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "integer", "minimum": 0}},
            "required": ["a", "b"]}}},
]

CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
          "content": "{\"temperature\": 18.5, \"sky\": \"clear\"}"}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CHAT = [SYSTEM,
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+3?\nThanks."}]

CONVERSATIONS = [
    ("chat", {"messages": CHAT, "add_generation_prompt": True}),
    ("chat_nogen", {"messages": CHAT, "add_generation_prompt": False}),
    ("single", {"messages": [{"role": "user", "content": "Hi there!"}], "add_generation_prompt": True}),
    ("no_system", {"messages": CHAT[1:], "add_generation_prompt": True}),
    ("whitespace", {"messages": [
        {"role": "system", "content": "  Be brief. \n"},
        {"role": "user", "content": "\n  H\u00e9llo \u2615 \"quoted\" 'single' \\ back\t"},
        {"role": "assistant", "content": " Hi! \n"},
        {"role": "user", "content": "Bye <|im_end|> {{ x }}"}], "add_generation_prompt": True}),
    ("tools", {"messages": [SYSTEM, {"role": "user", "content": "Weather in Paris?"}],
               "tools": TOOLS, "add_generation_prompt": True}),
    ("tools_no_system", {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                         "tools": TOOLS, "add_generation_prompt": True}),
    ("tool_call", {"messages": [SYSTEM, {"role": "user", "content": "Weather in Paris?"}, CALL, RESULT],
                   "tools": TOOLS, "add_generation_prompt": True}),
    ("tool_call_answer", {"messages": [{"role": "user", "content": "Weather in Paris?"}, CALL, RESULT,
                                       {"role": "assistant", "content": "It is 18.5 \u00b0C and clear."}],
                          "tools": TOOLS, "add_generation_prompt": False}),
    # OpenAI's wire form: arguments as a JSON string, content null, two calls at once
    ("parallel_calls", {"messages": [
        {"role": "user", "content": "Weather in Paris and 2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "5"}],
        "tools": TOOLS, "add_generation_prompt": True}),
    ("long_chat", {"messages": [SYSTEM] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "x" * i} for i in range(9)],
        "add_generation_prompt": True}),
    ("reasoning", {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Two and two make four."},
        {"role": "user", "content": "And 3+3?"}], "add_generation_prompt": True}),
    ("reasoning_last", {"messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "Two and two make four."}],
        "add_generation_prompt": False}),
]


def context(c):
    ctx = {"messages": c["messages"], "tools": c.get("tools"), "documents": None,
           "add_generation_prompt": c["add_generation_prompt"],
           "bos_token": "<s>", "eos_token": "</s>"}
    return ctx


def main():
    env = environment()
    convs = [{"name": n, "context": context(c)} for n, c in CONVERSATIONS]
    out = {"now": NOW, "conversations": convs, "templates": []}
    for name in sorted(os.listdir(TEMPLATES)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
            text = f.read()
        results = []
        try:
            t = env.from_string(text)
        except Exception as e:  # jinja2 refuses it when it compiles: every rendering fails
            t, err = None, f"{type(e).__name__}: {e}"
        for conv in convs:
            r = {"conv": conv["name"]}
            if t is None:
                r.update(error=err, **{"raise": False})
            else:
                try:
                    r["output"] = t.render(**json.loads(json.dumps(conv["context"])))
                except TemplateRaise as e:
                    r.update(error=str(e), **{"raise": True})
                except Exception as e:
                    r.update(error=f"{type(e).__name__}: {e}", **{"raise": False})
            results.append(r)
        out["templates"].append({"name": name, "results": results})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Renders tool-calling conversations with the models' own Jinja templates
(jinja2, with Hugging Face's tojson): reference output for
tests/test_tools.c.

  python3 tests/peer/record_tools.py LLAMA_CPP/models/templates > tests/data/tool_templates.json

Templates: Qwen2.5-7B-Instruct, Qwen3-0.6B and Llama 3.1/3.2 as llama.cpp
keeps them; SmolLM2's own (tests/data/chat_templates.txt) defines no tool
format, so its reference is Qwen2.5's template with SmolLM2's default
system message. Each record: the template clinfer recognises the format
from, the date (Llama), the tools and messages (a call's arguments as the
compact JSON string OpenAI sends; the template gets the dict), and the
rendering with the generation prompt, or null where the template raises.
"""
import datetime
import json
import os
import sys

import jinja2

DATE = datetime.date(2025, 3, 7)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather at a place, in °C or °F.",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "A city"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now <|im_end|> (UTC)."}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}, "tags": {"type": "array"}}}}}


def call(i, name, args):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


CONVERSATIONS = [
    ([WEATHER, TIME], [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call(1, "get_weather", {"location": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 22}"},
        {"role": "assistant", "content": "It is 22 °C in Paris."},
        {"role": "user", "content": "  And the time?\n"}]),
    ([WEATHER, TIME, SEARCH], [
        {"role": "system", "content": "Be brief.\n"},
        {"role": "user", "content": "Weather in Oslo and news about it"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            call(2, "get_weather", {"location": "Oslo"}),
            call(3, "search", {"query": "Oslo \"news\"", "limit": 3, "tags": ["a", {"b": None}], "x": 1.5})]},
        {"role": "tool", "tool_call_id": "call_2", "content": "-3"},
        {"role": "tool", "tool_call_id": "call_3", "content": "nothing new"}]),
    ([SEARCH], [
        {"role": "system", "content": "You search."},
        {"role": "user", "content": "Find cats"}]),
    (None, [
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "", "tool_calls": [call(4, "get_time", {})]},
        {"role": "tool", "tool_call_id": "call_4", "content": "12:00"}]),
    ([TIME], [
        {"role": "user", "content": "Hi"}]),
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def smollm2_template(here):
    with open(os.path.join(here, "..", "data", "chat_templates.txt")) as f:
        for line in f:
            if line.startswith("J ") and "SmolLM" in line:
                return line[2:].rstrip("\n").replace("\\n", "\n").replace("\\\\", "\\")
    raise SystemExit("no SmolLM2 template in chat_templates.txt")


def main():
    d = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    read = lambda n: open(os.path.join(d, n)).read()
    qwen25 = read("Qwen-Qwen2.5-7B-Instruct.jinja")
    smol = smollm2_template(here)
    smol_default = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    templates = [
        ("smollm2", smol, qwen25.replace("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", smol_default)),
        ("qwen2.5", qwen25, qwen25),
        ("qwen3", read("Qwen-Qwen3-0.6B.jinja"), read("Qwen-Qwen3-0.6B.jinja")),
        ("llama3.1", read("meta-llama-Llama-3.1-8B-Instruct.jinja"), read("meta-llama-Llama-3.1-8B-Instruct.jinja")),
        ("llama3.2", read("meta-llama-Llama-3.2-3B-Instruct.jinja"), read("meta-llama-Llama-3.2-3B-Instruct.jinja")),
    ]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=DATE.strftime)
    out = []
    for name, tmpl, ref in templates:
        t = env.from_string(ref)
        for tools, msgs in CONVERSATIONS:
            kw = {"tools": tools} if tools is not None else {}
            try:
                r = t.render(messages=msgs, add_generation_prompt=True, bos_token="", eos_token="", **kw)
            except jinja2.exceptions.TemplateError:
                r = None
            wire = []  # the messages as the API gets them
            for m in msgs:
                w = dict(m)
                if "tool_calls" in m:
                    w["tool_calls"] = [{"id": c["id"], "name": c["function"]["name"],
                                        "arguments": json.dumps(c["function"]["arguments"], separators=(",", ":"))}
                                       for c in m["tool_calls"]]
                wire.append(w)
            out.append({"name": name, "template": tmpl, "date": DATE.strftime("%d %b %Y"),  # where the template calls strftime_now
                        "tools": json.dumps(tools, separators=(",", ":")) if tools is not None else None,
                        "messages": wire, "rendering": r})
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()

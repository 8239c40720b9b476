"""Tool calls in each format family's own syntax through the official
openai client: the default model (SmolLM2) under a corpus template of each
family (--chat-template-file: Mistral's two forms, gpt-oss's Harmony,
DeepSeek R1 and V3.1, Granite, Command R, Qwen3-Coder's and GLM's XML
(values typed by the schema), Kimi K2, functionary v3.1 and v3.2). The model's answers need not
be sensible: tool_choice required / named holds them to the format's
grammar, so what comes back is the format's call syntax as the model
wrote it, parsed by the server (whole and streamed). The templates render
the tools, a prior call and its result (the prompt side). The parsing of
real models' replies per format is tests/test_tool_formats.c's."""
import json
import os

import jsonschema
import openai
import pytest

from conftest import Server

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "templates")
FAMILIES = [
    "Mistral-Small-3.2-24B-Instruct-2506.jinja",  # [TOOL_CALLS]F[ARGS]{...}
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",  # [TOOL_CALLS][{...}]
    "openai-gpt-oss-120b.jinja",  # Harmony
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "ibm-granite-granite-3.3-2B-Instruct.jinja",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "Qwen3-Coder.jinja",  # <tool_call>\n<function=F>\n<parameter=P>\nV\n</parameter>...
    "GLM-4.6.jinja",  # <tool_call>F\n<arg_key>P</arg_key>\n<arg_value>V</arg_value>...
    "moonshotai-Kimi-K2.jinja",  # <|tool_calls_section_begin|>... (Kimi-K2-Instruct's refuses a prior call under jinja2)
    "meetkai-functionary-medium-v3.1.jinja",  # <function=F>{...}</function>
    "meetkai-functionary-medium-v3.2.jinja",  # (the prompt's >>>) F\n{...}>>>F\n{...}; all\n text
]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city.", "enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "description": "Days ahead.", "minimum": 1, "maximum": 7}},
        "required": ["city"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "description": "The zone.", "enum": ["UTC", "CET", "JST"]}},
        "required": ["zone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMA = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
Q = [{"role": "user", "content": "What is the weather in Paris?"}]
M = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module", params=FAMILIES)
def client(request):
    s = Server("--parallel", "1", "--ctx", "2048", "--chat-template-file", os.path.join(DATA, request.param))
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    rc, err = s.stop()
    assert rc == 0, err


def check_call(call, names=SCHEMA):
    assert call.type == "function" and call.id
    assert call.function.name in names
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA[call.function.name])


def test_required_call(client):
    r = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=False, temperature=1.0, seed=3, max_tokens=300)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1, c
    check_call(c.message.tool_calls[0])
    assert not c.message.content


def test_named_call_streamed(client):
    # the deltas: no content (nothing of the call's syntax leaks), one call of get_time whose arguments validate
    kw = dict(model=M, messages=Q, tools=TOOLS, temperature=1.0, seed=5, max_tokens=300, parallel_tool_calls=False,
              tool_choice={"type": "function", "function": {"name": "get_time"}})
    whole = client.chat.completions.create(**kw).choices[0]
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            calls.setdefault(tc.index, [tc.function.name, ""])
            calls[tc.index][1] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == whole.finish_reason == "tool_calls"
    assert content == "" and not whole.message.content
    assert [tuple(v) for _, v in sorted(calls.items())] == \
        [(t.function.name, t.function.arguments) for t in whole.message.tool_calls]
    for t in whole.message.tool_calls:
        check_call(t, names={"get_time"})


def test_prior_call_and_result(client):
    # the template renders the assistant's call and the tool's result (an OpenAI-style id: Mistral's
    # templates, which take 9 characters only, get it mapped)
    msgs = Q + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_7f3a9b1c2d4e", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_7f3a9b1c2d4e", "content": json.dumps({"temp_c": 21})},
    ]
    r = client.chat.completions.create(model=M, messages=msgs, tools=TOOLS, max_tokens=4, temperature=0)
    assert r.choices[0].finish_reason in ("length", "stop", "tool_calls")
    assert r.usage.prompt_tokens > 40  # the tools, the call and its result


def test_auto(client):
    # text or calls; a call that comes back validates
    r = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, temperature=1.0, seed=9, max_tokens=32)
    for call in r.choices[0].message.tool_calls or []:
        if r.choices[0].finish_reason == "tool_calls":
            check_call(call)

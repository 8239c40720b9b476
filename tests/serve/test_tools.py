"""Tool calls through the official openai client: the default model
(SmolLM2, ChatML: Qwen2.5's tool format), Gemma 3 (no tool format: 400).
The schemas bound every string and number, so a call ends on its own
(the grammar ends the reply) whatever the model writes."""
import json

import jsonschema
import openai
import pytest

from conftest import Server

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima", "Tokyo"]},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "enum": ["UTC", "CET", "JST"]},
        "24h": {"type": "boolean"}},
        "required": ["zone"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMA = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
Q = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
M = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the server's model id


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


def check_call(call, names=SCHEMA):
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in names
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA[call.function.name])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_required_call_validates(client, seed):
    r = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=False, temperature=1.0, seed=seed, max_tokens=200)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
    check_call(c.message.tool_calls[0])
    assert not c.message.content


def test_named_call(client):
    r = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, temperature=1.0, seed=7, max_tokens=200,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and calls and len(calls) <= 16
    for call in calls:
        check_call(call, names={"get_time"})
    assert len({call.id for call in calls}) == len(calls)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_auto_fails_closed(client, seed):
    # text or calls; whatever opens a call is a valid one, so the text never holds a tag
    r = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, temperature=1.0, seed=seed, max_tokens=48)
    m = r.choices[0].message
    assert "<tool_call>" not in (m.content or "")
    for call in m.tool_calls or []:
        if r.choices[0].finish_reason == "tool_calls":
            check_call(call)


def reassemble(stream):
    """The deltas of a stream as (content, [(id, name, arguments)], finish)."""
    content, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            if tc.index not in calls:
                assert tc.id and tc.type == "function" and tc.function.name
                calls[tc.index] = [tc.id, tc.function.name, ""]
            else:
                assert not tc.id and not tc.function.name
            calls[tc.index][2] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert sorted(calls) == list(range(len(calls)))
    return content, [tuple(calls[i]) for i in range(len(calls))], finish


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_stream_reassembles_to_the_whole(client, choice):
    kw = dict(model=M, messages=Q, tools=TOOLS, tool_choice=choice, temperature=1.0, seed=11, max_tokens=120)
    whole = client.chat.completions.create(**kw).choices[0]
    content, calls, finish = reassemble(client.chat.completions.create(stream=True, **kw))
    assert finish == whole.finish_reason
    assert content == (whole.message.content or "")
    want = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
    assert [(name, args) for _, name, args in calls] == want
    assert len({i for i, _, _ in calls}) == len(calls)
    if choice == "required":
        assert calls


def reassemble_choices(stream):
    """A stream of n choices as {index: [chunk choices]} in their order."""
    by = {}
    for chunk in stream:
        for c in chunk.choices:
            by.setdefault(c.index, []).append(c)
    return by


def test_n_choices_parse_their_own_calls(client):
    # choice i is what n = 1 with seed + i gives; each parses its own calls and finish
    kw = dict(model=M, messages=Q, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, temperature=1.0,
              max_tokens=200)
    r = client.chat.completions.create(n=3, seed=21, logprobs=True, **kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    for c in r.choices:
        one = client.chat.completions.create(seed=21 + c.index, **kw).choices[0]
        assert c.finish_reason == one.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1
        got = [(t.function.name, t.function.arguments) for t in c.message.tool_calls]
        assert got == [(t.function.name, t.function.arguments) for t in one.message.tool_calls]
        for t in c.message.tool_calls:
            check_call(t)
            # logprobs list the tokens generated, the call's among them
            assert t.function.arguments in "".join(x.token for x in c.logprobs.content)
    ids = [t.id for c in r.choices for t in c.message.tool_calls]
    assert len(set(ids)) == len(ids)
    # streamed: each choice's deltas under its own index reassemble to its whole answer
    by = reassemble_choices(client.chat.completions.create(n=3, seed=21, stream=True, **kw))
    assert sorted(by) == [0, 1, 2]
    for c in r.choices:
        class One:  # the chunks of one choice, as reassemble reads them
            def __init__(self, ch):
                self.choices = [ch]
        content, calls, finish = reassemble(One(x) for x in by[c.index])
        assert finish == "tool_calls" and content == (c.message.content or "")
        assert [(n, a) for _, n, a in calls] == [(t.function.name, t.function.arguments) for t in c.message.tool_calls]


def test_round_trip(client):
    first = client.chat.completions.create(model=M, messages=Q, tools=TOOLS, tool_choice="required",
                                           parallel_tool_calls=False, temperature=0, max_tokens=200)
    call = first.choices[0].message.tool_calls[0]
    check_call(call)
    history = Q + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                             "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    final = client.chat.completions.create(model=M, messages=history, tools=TOOLS, temperature=0, max_tokens=24)
    c = final.choices[0]
    assert "<tool_call>" not in (c.message.content or "")
    if c.finish_reason == "tool_calls":
        for again in c.message.tool_calls:
            check_call(again)
    # the call and its result are in the prompt: more than the first prompt and its call
    assert final.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens
    # tool_choice none: the tools are not offered (the history still renders, as without tools)
    none = client.chat.completions.create(model=M, messages=history, tools=TOOLS, tool_choice="none",
                                          temperature=0, max_tokens=8)
    assert none.choices[0].message.tool_calls is None and isinstance(none.choices[0].message.content, str)
    plain = client.chat.completions.create(model=M, messages=history, temperature=0, max_tokens=8)
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens < final.usage.prompt_tokens
    assert none.choices[0].message.content == plain.choices[0].message.content


@pytest.mark.parametrize("body,param", [
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools"),
    ({"tools": {"a": 1}}, "tools"),
])
def test_bad_tool_requests(smol, body, param):
    status, r = smol.request("POST", "/v1/chat/completions", {"messages": Q, "max_tokens": 1, **body})
    assert status == 400 and r["error"]["param"] == param, r


def test_tool_message_needs_its_call(smol):
    msgs = Q + [{"role": "tool", "tool_call_id": "call_x", "content": "1"}]
    status, r = smol.request("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 1})
    assert status == 400 and "call_x" in r["error"]["message"], r


def test_gemma_refuses_tools(tiny):
    s = tiny("--ctx", "256", model="gemma3-270m")
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    G = c.models.list().data[0].id
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=G, messages=Q, tools=TOOLS, max_tokens=1)
    assert "Gemma" in str(e.value) and "tool" in str(e.value)
    # and plain chat still works there
    assert c.chat.completions.create(model=G, messages=Q, max_tokens=1).choices[0].finish_reason

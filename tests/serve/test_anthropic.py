"""POST /v1/messages and /v1/messages/count_tokens through the official
anthropic package: plain, system, streamed (messages.stream and the raw
events), a tools round trip with tool_result, stop_sequences, count_tokens,
max_tokens missing, and the errors in Anthropic's shape. The requests
become chat requests, so a greedy answer equals /v1/chat/completions' for
the same conversation (asserted throughout)."""
import json
import time

import anthropic
import jsonschema
import openai
import pytest

from test_tools import SCHEMA, TOOLS

M = "SmolLM2-135M-Instruct.Q4_1.gguf"
Q = [{"role": "user", "content": "What is the capital of France?"}]
# Anthropic's tools: {name, description, input_schema}
ATOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
           "input_schema": t["function"]["parameters"]} for t in TOOLS]


# greedy: temperature/top_p/top_k are the API's fields, no longer the SDK's (2.x) arguments
T0 = {"temperature": 0}


@pytest.fixture(scope="module")
def client(smol):
    return anthropic.Anthropic(base_url=smol.url, api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def oai(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


def chat(oai, messages, **kw):
    return oai.chat.completions.create(model=M, messages=messages, extra_body=T0, **kw)


def text_of(msg):
    return "".join(b.text for b in msg.content if b.type == "text")


def test_plain_equals_chat(client, oai):
    r = client.messages.create(model=M, max_tokens=12, messages=Q, extra_body=T0)
    c = chat(oai, Q, max_tokens=12)
    assert r.type == "message" and r.role == "assistant" and r.id.startswith("msg_") and r.model == M
    assert text_of(r) == c.choices[0].message.content and text_of(r)
    assert r.stop_reason == ("max_tokens" if c.choices[0].finish_reason == "length" else "end_turn")
    assert r.stop_sequence is None
    # the prompt: evaluated or read from a slot's cache (Anthropic's cache_read_input_tokens)
    assert r.usage.input_tokens + r.usage.cache_read_input_tokens == c.usage.prompt_tokens == 37
    assert r.usage.output_tokens == c.usage.completion_tokens


def test_system_and_blocks_equal_chat(client, oai):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Blue."}]},
            {"role": "user", "content": "Another one?"}]
    r = client.messages.create(model=M, max_tokens=8, system=[{"type": "text", "text": "Answer in one word."}],
                               messages=msgs, extra_body=T0)
    c = chat(oai, [{"role": "system", "content": "Answer in one word."},
                   {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
                   {"role": "user", "content": "Another one?"}], max_tokens=8)
    assert text_of(r) == c.choices[0].message.content
    n = client.messages.count_tokens(model=M, system="Answer in one word.", messages=msgs)
    assert n.input_tokens == c.usage.prompt_tokens == r.usage.input_tokens + r.usage.cache_read_input_tokens


def test_stream(client):
    whole = client.messages.create(model=M, max_tokens=10, messages=Q, extra_body=T0)
    with client.messages.stream(model=M, max_tokens=10, messages=Q, extra_body=T0) as s:
        deltas = [t for t in s.text_stream]
        final = s.get_final_message()
    assert len(deltas) >= 2 and "".join(deltas) == text_of(whole) == text_of(final)
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens
    # the raw events, in their order
    events = list(client.messages.create(model=M, max_tokens=10, messages=Q, extra_body=T0, stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["message_start", "content_block_start"]
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(types[2:-3]) == {"content_block_delta"}
    assert events[0].message.usage.input_tokens == 37 and events[-2].delta.stop_reason == whole.stop_reason


def test_stop_sequences(client, oai):
    free = client.messages.create(model=M, max_tokens=16, messages=Q, extra_body=T0)
    text = text_of(free)
    word = text.split()[1] if len(text.split()) > 1 else text[1:3]
    r = client.messages.create(model=M, max_tokens=16, messages=Q, extra_body=T0, stop_sequences=["zzz", word])
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == word
    assert text_of(r) == text[:text.index(word)]
    c = chat(oai, Q, max_tokens=16, stop=["zzz", word])
    assert text_of(r) == c.choices[0].message.content
    with client.messages.stream(model=M, max_tokens=16, messages=Q, extra_body=T0, stop_sequences=[word]) as s:
        final = s.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == word


def test_tools_round_trip(client, oai):
    q = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    first = client.messages.create(model=M, max_tokens=200, messages=q, tools=ATOOLS, extra_body=T0,
                                   tool_choice={"type": "any", "disable_parallel_tool_use": True})
    uses = [b for b in first.content if b.type == "tool_use"]
    assert first.stop_reason == "tool_use" and len(uses) == 1 and uses[0].id.startswith("toolu_")
    jsonschema.validate(uses[0].input, SCHEMA[uses[0].name])
    c = chat(oai, q, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=200)
    tc = c.choices[0].message.tool_calls[0]
    assert (tc.function.name, json.loads(tc.function.arguments)) == (uses[0].name, uses[0].input)
    assert c.usage.prompt_tokens == first.usage.input_tokens + first.usage.cache_read_input_tokens
    # streamed: input_json_delta adds up to the same input
    with client.messages.stream(model=M, max_tokens=200, messages=q, tools=ATOOLS, extra_body=T0,
                                tool_choice={"type": "any", "disable_parallel_tool_use": True}) as s:
        final = s.get_final_message()
    su = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and (su[0].name, su[0].input) == (uses[0].name, uses[0].input)
    # a named tool: that one is called
    named = client.messages.create(model=M, max_tokens=200, messages=q, tools=ATOOLS, extra_body=T0,
                                   tool_choice={"type": "tool", "name": "get_time"})
    nu = [b for b in named.content if b.type == "tool_use"]
    assert named.stop_reason == "tool_use" and nu[0].name == "get_time"
    jsonschema.validate(nu[0].input, SCHEMA["get_time"])
    # the result back in a tool_result block: the answer equals chat's
    result = json.dumps({"temperature": 21, "sky": "clear"})
    history = q + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                                 "content": [{"type": "text", "text": result}]}]}]
    r = client.messages.create(model=M, max_tokens=16, messages=history, tools=ATOOLS, extra_body=T0,
                               tool_choice={"type": "none"})
    c2 = chat(oai, q + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": uses[0].id, "type": "function", "function": {"name": uses[0].name,
                                                             "arguments": json.dumps(uses[0].input,
                                                                                     separators=(",", ":"))}}]},
                        {"role": "tool", "tool_call_id": uses[0].id, "content": result}],
              tools=TOOLS, tool_choice="none", max_tokens=16)
    assert text_of(r) == c2.choices[0].message.content and r.stop_reason != "tool_use"
    n = client.messages.count_tokens(model=M, messages=history, tools=ATOOLS)
    assert n.input_tokens > first.usage.input_tokens + first.usage.cache_read_input_tokens
    # is_error: the result's text says so (chat's tool messages have no such mark)
    history[-1]["content"][0]["is_error"] = True
    e = client.messages.count_tokens(model=M, messages=history, tools=ATOOLS)
    c3 = chat(oai, q + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": uses[0].id, "type": "function", "function": {"name": uses[0].name,
                                                             "arguments": json.dumps(uses[0].input,
                                                                                     separators=(",", ":"))}}]},
                        {"role": "tool", "tool_call_id": uses[0].id, "content": "Error: " + result}],
              tools=TOOLS, max_tokens=1)
    assert e.input_tokens == c3.usage.prompt_tokens > n.input_tokens


def test_max_tokens_missing(smol):
    status, r = smol.request("POST", "/v1/messages", {"model": M, "messages": Q})
    assert status == 400 and r == {"type": "error", "error": {"type": "invalid_request_error",
                                                              "message": "max_tokens: Field required"}}


@pytest.mark.parametrize("kw,word", [
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}, "image"),
    ({"thinking": {"type": "sideways"}}, "thinking"),
    ({"extra_body": {"temperature": 1.5}}, "temperature"),
    ({"extra_body": {"top_k": -1}}, "top_k"),
    ({"output_config": {"effort": "high"}}, "effort"),
    ({"speed": "fast"}, "speed"),
    ({"diagnostics": {"previous_message_id": "msg_x"}}, "diagnostics"),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, "bash_20250124"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice"),
    ({"messages": [{"role": "system", "content": "x"}]}, "role"),
    ({"stop_sequences": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x",
                                                  "content": "1"}]}]}, "tool"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": Q + [{"role": "assistant", "content": "The capital is"}]}, "prefill"),
    ({"extra_body": {"mcp_servers": [{"type": "url", "url": "http://x", "name": "x"}]}}, "mcp_servers"),
])
def test_errors(client, kw, word):
    body = {"model": M, "max_tokens": 1, "messages": Q, **kw}
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(**body)
    assert e.value.status_code == 400
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"
    assert word in e.value.body["error"]["message"], e.value.body


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"model": "m", "max_tokens": 1}',
                                  b'{"model": "m", "max_tokens": 1, "messages": [7]}',
                                  b'{"model": "m", "max_tokens": 1, "messages": {}}',
                                  b'{"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}',
                                  b'{"model": "m", "max_tokens": "1", "messages": [{"role": "user", "content": "x"}]}',
                                  b'{"model": "m", "max_tokens": 1, "system": 5, "messages": [{"role": "user", '
                                  b'"content": "x"}]}'])
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_malformed(smol, path, body):
    if path.endswith("count_tokens") and b'"max_tokens": "1"' in body:
        return  # count_tokens takes no max_tokens: that body is fine there (asserted below)
    status, r = smol.request("POST", path, body, {"Content-Type": "application/json"})
    assert status == 400 and r["type"] == "error" and r["error"]["type"] == "invalid_request_error", r
    assert r["error"]["message"]


def test_count_tokens_ignores_max_tokens(smol):
    status, r = smol.request("POST", "/v1/messages/count_tokens", {"model": M, "messages": Q})
    assert (status, r) == (200, {"input_tokens": 37})


def test_api_key_and_error_shapes(tiny):
    s = tiny("--api-key", "k3y")
    body = {"model": M, "max_tokens": 2, "messages": Q}
    status, r = s.request("POST", "/v1/messages", body)
    assert status == 401 and r["type"] == "error" and r["error"]["type"] == "authentication_error", r
    status, r = s.request("POST", "/v1/messages", body, {"x-api-key": "wrong"})
    assert status == 401 and r["error"]["type"] == "authentication_error"
    # /v1/responses keeps OpenAI's shape
    status, r = s.request("POST", "/v1/responses", {"input": "x"})
    assert status == 401 and r["error"]["code"] == "invalid_api_key"
    c = anthropic.Anthropic(base_url=s.url, api_key="k3y", max_retries=0)  # sends x-api-key, anthropic-version
    r = c.messages.create(model=M, max_tokens=3, messages=Q)
    assert r.usage.output_tokens == 3 and r.stop_reason == "max_tokens"  # the tiny model never ends a turn
    assert c.messages.count_tokens(model=M, messages=Q).input_tokens > 0
    bearer = anthropic.Anthropic(base_url=s.url, auth_token="k3y", max_retries=0)  # Authorization: Bearer
    assert bearer.messages.create(model=M, max_tokens=1, messages=Q).usage.output_tokens == 1
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=s.url, api_key="nope", max_retries=0).messages.create(**body)
    status, r = s.request("GET", "/v1/messages", headers={"x-api-key": "k3y"})
    assert status == 405 and r["type"] == "error" and r["error"]["type"] == "invalid_request_error", r


@pytest.mark.parametrize("path,body,token", [
    ("/v1/messages", {"model": M, "max_tokens": 3000, "messages": Q}, b"text_delta"),
    ("/v1/responses", {"input": "a", "max_output_tokens": 3000}, b"response.output_text.delta"),
])
def test_disconnect_frees_the_slot(tiny, path, body, token):
    """A client gone mid-stream cancels its job, as on chat (test_http.py)."""
    from test_http import open_stream, read_until
    s = tiny("--parallel", "1")
    c = open_stream(s.port, body, path)
    assert token in read_until(c, token)
    c.close()
    deadline = time.time() + 60  # a wait for a state, not a time limit
    while s.metric("requests_running") != 0 and time.time() < deadline:
        time.sleep(0.02)
    assert s.metric("requests_cancelled_total") == 1
    r = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0).messages.create(model=M, max_tokens=4,
                                                                                       messages=Q)
    assert r.usage.output_tokens == 4 and s.metric("generated_tokens_total") < 3000

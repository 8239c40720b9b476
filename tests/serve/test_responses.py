"""POST /v1/responses through the official openai package's client.responses:
plain, streamed (the typed events), a tools round trip, text.format
json_schema, previous_response_id, and the errors. The requests become
chat requests, so a greedy answer equals /v1/chat/completions' for the same
conversation (asserted throughout)."""
import concurrent.futures
import json

import jsonschema
import openai
import pytest

from test_tools import SCHEMA, TOOLS

M = "SmolLM2-135M-Instruct.Q4_1.gguf"
Q = "What is the capital of France?"
# the Responses API's function tools are flat: {type, name, description, parameters}
FLAT = [{"type": "function", **t["function"]} for t in TOOLS]


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


def chat(client, messages, **kw):
    return client.chat.completions.create(model=M, messages=messages, temperature=0, **kw)


def test_plain_equals_chat(client):
    r = client.responses.create(model=M, input=Q, max_output_tokens=12, temperature=0)
    c = chat(client, [{"role": "user", "content": Q}], max_tokens=12)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == M
    assert r.output_text == c.choices[0].message.content and r.output_text
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.output[0].content[0].type == "output_text"
    assert r.usage.input_tokens == c.usage.prompt_tokens == 37
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    cut = c.choices[0].finish_reason == "length"
    assert r.status == ("incomplete" if cut else "completed")
    assert (r.incomplete_details.reason if cut else r.incomplete_details) == ("max_output_tokens" if cut else None)


def test_instructions_and_items_equal_chat(client):
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Name a colour."}]},
             {"role": "assistant", "content": [{"type": "output_text", "text": "Blue."}]},
             {"role": "user", "content": "Another one?"}]
    r = client.responses.create(model=M, instructions="Answer in one word.", input=items, max_output_tokens=8,
                                temperature=0)
    c = chat(client, [{"role": "system", "content": "Answer in one word."},
                      {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
                      {"role": "user", "content": "Another one?"}], max_tokens=8)
    assert r.output_text == c.choices[0].message.content
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.instructions == "Answer in one word."


def test_stream_events(client):
    whole = client.responses.create(model=M, input=Q, max_output_tokens=10, temperature=0)
    events = list(client.responses.create(model=M, input=Q, max_output_tokens=10, temperature=0, stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete" if whole.status == "incomplete" else "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) >= 2 and "".join(deltas) == whole.output_text
    assert events[-1].response.output_text == whole.output_text
    assert events[-1].response.usage.output_tokens == whole.usage.output_tokens
    # a reply cut short streams as such, its text whole
    with client.responses.stream(model=M, input=Q, max_output_tokens=10, temperature=0) as s:
        text = "".join(e.delta for e in s if e.type == "response.output_text.delta")
    assert text == whole.output_text


def check_call(item):
    assert item.type == "function_call" and item.call_id.startswith("call_") and item.name in SCHEMA
    jsonschema.validate(json.loads(item.arguments), SCHEMA[item.name])


def test_tools_round_trip(client):
    q = "What is the weather in Paris, in celsius?"
    first = client.responses.create(model=M, input=q, tools=FLAT, tool_choice="required",
                                    parallel_tool_calls=False, temperature=0, max_output_tokens=200)
    calls = [o for o in first.output if o.type == "function_call"]
    assert len(calls) == 1 and first.status == "completed"
    check_call(calls[0])
    # the same through chat: the same call
    c = chat(client, [{"role": "user", "content": q}], tools=TOOLS, tool_choice="required",
             parallel_tool_calls=False, max_tokens=200)
    tc = c.choices[0].message.tool_calls[0]
    assert (tc.function.name, tc.function.arguments) == (calls[0].name, calls[0].arguments)
    # streamed: the arguments' deltas add up to the call, and the SDK's own accumulation agrees
    events = list(client.responses.create(model=M, input=q, tools=FLAT, tool_choice="required",
                                          parallel_tool_calls=False, temperature=0, max_output_tokens=200,
                                          stream=True))
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    with client.responses.stream(model=M, input=q, tools=FLAT, tool_choice="required", parallel_tool_calls=False,
                                 temperature=0, max_output_tokens=200) as s:
        sdk = s.get_final_response()
    assert [(o.call_id[:5], o.name, o.arguments) for o in sdk.output] == [("call_", calls[0].name,
                                                                           calls[0].arguments)]
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert args == done[0].arguments == calls[0].arguments
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert added[0].type == "function_call" and added[0].name == calls[0].name
    # the result back, as an input list: the answer equals chat's
    output = json.dumps({"temperature": 21, "sky": "clear"})
    items = [{"role": "user", "content": q}, calls[0].model_dump(exclude_none=True),
             {"type": "function_call_output", "call_id": calls[0].call_id, "output": output}]
    final = client.responses.create(model=M, input=items, tools=FLAT, tool_choice="none", temperature=0,
                                    max_output_tokens=16)
    history = [{"role": "user", "content": q},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": calls[0].call_id, "type": "function",
                    "function": {"name": calls[0].name, "arguments": calls[0].arguments}}]},
               {"role": "tool", "tool_call_id": calls[0].call_id, "content": output}]
    c2 = chat(client, history, tools=TOOLS, tool_choice="none", max_tokens=16)
    assert final.output_text == c2.choices[0].message.content
    assert final.usage.input_tokens == c2.usage.prompt_tokens


def test_text_format_json_schema(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "population": {"type": "integer", "minimum": 0, "maximum": 99999999}},
              "required": ["city", "population"], "additionalProperties": False}
    r = client.responses.create(model=M, input="Give a city and its population as JSON.", temperature=0,
                                max_output_tokens=80, text={"format": {"type": "json_schema", "name": "city",
                                                                       "schema": schema, "strict": True}})
    assert r.status == "completed"
    jsonschema.validate(json.loads(r.output_text), schema)
    assert r.text.format.type == "json_schema"
    c = chat(client, [{"role": "user", "content": "Give a city and its population as JSON."}], max_tokens=80,
             response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}})
    assert r.output_text == c.choices[0].message.content
    # json_object: the grammar holds the reply to an object, as chat's response_format does
    j = client.responses.create(model=M, input="Some JSON, please.", temperature=0, max_output_tokens=24,
                                text={"format": {"type": "json_object"}})
    cj = chat(client, [{"role": "user", "content": "Some JSON, please."}], max_tokens=24,
              response_format={"type": "json_object"})
    assert j.output_text == cj.choices[0].message.content and j.output_text.startswith("{")


def test_previous_response_id(client):
    first = client.responses.create(model=M, input="Name a colour.", max_output_tokens=6, temperature=0)
    second = client.responses.create(model=M, previous_response_id=first.id, input="Another one?",
                                     max_output_tokens=6, temperature=0)
    assert second.previous_response_id == first.id
    c = chat(client, [{"role": "user", "content": "Name a colour."},
                      {"role": "assistant", "content": first.output_text},
                      {"role": "user", "content": "Another one?"}], max_tokens=6)
    assert second.output_text == c.choices[0].message.content
    assert second.usage.input_tokens == c.usage.prompt_tokens
    # a chain: the third sees both turns before it
    third = client.responses.create(model=M, previous_response_id=second.id, input="And a third?",
                                    max_output_tokens=2, temperature=0)
    assert third.usage.input_tokens > second.usage.input_tokens + second.usage.output_tokens
    # store: false is not kept
    gone = client.responses.create(model=M, input="Hi", max_output_tokens=1, store=False)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=M, previous_response_id=gone.id, input="Again", max_output_tokens=1)
    assert e.value.body["code"] == "previous_response_not_found"
    assert e.value.body["param"] == "previous_response_id" and gone.id in e.value.body["message"]


@pytest.mark.parametrize("kw,param", [
    ({"previous_response_id": "resp_nope"}, "previous_response_id"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"background": True}, "background"),
    ({"include": ["reasoning.encrypted_content"]}, "include"),
    ({"truncation": "auto"}, "truncation"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"tools": [{"type": "web_search"}]}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object", "patternProperties":
                                                                         {"^a": {"type": "string"}}}}}},
     "text.format"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]}, "input"),
    ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]}, "input"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input"),
    ({"input": 7}, "input"),
])
def test_errors(client, kw, param):
    body = {"model": M, "input": "Hi", "max_output_tokens": 1, **kw}
    with pytest.raises(openai.APIStatusError) as e:
        client.responses.create(**body)
    assert e.value.status_code == (404 if param == "previous_response_id" else 400), e.value.body
    assert e.value.body["param"] == param, e.value.body
    assert e.value.body["type"] == "invalid_request_error" and e.value.body["message"]


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'{"input": null}', b'{"input": []}',
                                  b'{"input": [1]}', b'{"input": [{"role": "user"}]}',
                                  b'{"input": "x", "text": 5}', b'{"input": "x", "metadata": 5}',
                                  b'{"input": "x", "instructions": []}', b'{"input": "x", "tools": {}}'])
def test_malformed(smol, body):
    status, r = smol.request("POST", "/v1/responses", body, {"Content-Type": "application/json"})
    assert status == 400 and r["error"]["type"] == "invalid_request_error" and r["error"]["message"], r


def test_kept_responses_are_bounded(tiny):
    """The server keeps its last 256 responses: the 257th ago has expired (a 404 saying so)."""
    s = tiny("--parallel", "4", "--ctx", "128")
    first = s.request("POST", "/v1/responses", {"input": "n0", "max_output_tokens": 1})[1]["id"]

    def one(i):
        status, r = s.request("POST", "/v1/responses", {"input": f"n{i}", "max_output_tokens": 1})
        assert status == 200 and r["status"] == "incomplete", r  # the tiny model never ends a turn
        return r["id"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        later = list(pool.map(one, range(1, 256)))
    second = one(256)  # the 257th: the first has expired, the second is the oldest kept
    ids = [first, second]
    status, r = s.request("POST", "/v1/responses", {"input": "x", "max_output_tokens": 1,
                                                    "previous_response_id": ids[0]})
    assert status == 404 and r["error"]["code"] == "previous_response_not_found", r
    assert "256" in r["error"]["message"]
    for kept in (later[0], second):
        status, r = s.request("POST", "/v1/responses", {"input": "x", "max_output_tokens": 1,
                                                        "previous_response_id": kept})
        assert status == 200 and r["previous_response_id"] == kept, r

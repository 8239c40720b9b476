"""Structured output through the official openai client and raw HTTP: the
default model (SmolLM2) under response_format json_schema / json_object
and llama-server's grammar / json_schema. What is asserted is the
grammar's promise, never how the model fills it: a reply that ends with
stop parses and validates (jsonschema, re.fullmatch), a reply cut by
max_tokens is length with max_tokens tokens."""
import importlib.util
import json
import os
import re
from typing import Literal

import jsonschema
import openai
import pydantic
import pytest

from conftest import BIN

M = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the server's model id
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pets": {"type": "array", "maxItems": 3, "items": {"type": "string", "enum": ["cat", "dog", "fish"]}},
    "email": {"type": "string", "format": "email"}},
    "required": ["name", "age"], "additionalProperties": False}
ASK = [{"role": "user", "content": "Describe a person as JSON."}]
DATE = 'root ::= [0-9]{4} "-" [0-9]{2} "-" [0-9]{2}'


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


def schema_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def check_reply(choice, tokens, max_tokens, schema):
    """The grammar's promise: stop is a whole valid JSON text, length was cut at max_tokens."""
    text = choice.message.content
    if choice.finish_reason == "stop":
        jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
    else:
        assert choice.finish_reason == "length" and tokens == max_tokens, (choice, tokens)


class Owner(pydantic.BaseModel):
    pet: Literal["cat", "dog", "fish"]
    pets: int = pydantic.Field(ge=0, le=9)


def test_parse_pydantic(client):
    # the client's own strict schema (additionalProperties false, every field required); two fields of bounded
    # values and bounded blanks between them: whole within 400 tokens whatever the model writes
    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    r = parse(model=M, messages=[{"role": "user", "content": "Which pet do you own, and how many?"}],
              response_format=Owner, temperature=1.0, seed=5, max_tokens=400)
    c = r.choices[0]
    assert c.finish_reason == "stop"
    assert isinstance(c.message.parsed, Owner)
    assert c.message.parsed == Owner.model_validate_json(c.message.content)


@pytest.mark.parametrize("seed", [1, 4])
def test_json_schema_seeds_validate(client, seed):
    # n = 3: seeds seed, seed + 1, seed + 2, each choice under its own reference to the one grammar
    r = client.chat.completions.create(model=M, messages=ASK, response_format=schema_format(PERSON), temperature=1.0,
                                       seed=seed, n=3, max_tokens=120)
    assert len(r.choices) == 3
    for c in r.choices:
        one = client.chat.completions.create(model=M, messages=ASK, response_format=schema_format(PERSON),
                                             temperature=1.0, seed=seed + c.index, max_tokens=120)
        assert one.choices[0].message.content == c.message.content
        check_reply(one.choices[0], one.usage.completion_tokens, 120, PERSON)


def test_json_object(client):
    for seed in (2, 3, 5):
        r = client.chat.completions.create(model=M, messages=[{"role": "user", "content": "Any JSON, please."}],
                                           response_format={"type": "json_object"}, temperature=1.0, seed=seed,
                                           max_tokens=60)
        c = r.choices[0]
        assert c.message.content.lstrip().startswith("{")
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)
        else:
            assert c.finish_reason == "length" and r.usage.completion_tokens == 60


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_grammar_field(smol, path):
    # llama-server's grammar: a finite language, so every reply ends (stop) at high temperature
    for seed in range(4):
        body = {"grammar": DATE, "temperature": 1.8, "seed": seed, "max_tokens": 32,
                "stop": ["-"]}  # not applied under a grammar: it would cut the date
        body.update({"prompt": "Today is "} if "chat" not in path else {"messages": ASK})
        status, r = smol.request("POST", path, body)
        assert status == 200, r
        c = r["choices"][0]
        text = c["text"] if "chat" not in path else c["message"]["content"]
        assert c["finish_reason"] == "stop" and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text), c


def test_json_schema_field(smol):
    # llama-server's top-level json_schema, on the completions API too
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    status, r = smol.request("POST", "/v1/completions", {"prompt": "JSON:", "json_schema": schema, "max_tokens": 300,
                                                         "temperature": 1.0, "seed": 9})
    assert status == 200, r
    c = r["choices"][0]
    assert c["finish_reason"] == "stop"  # one boolean, and the bounded blanks around it: whole within 300 tokens
    jsonschema.validate(json.loads(c["text"]), schema)


@pytest.mark.parametrize("body,param,text", [
    ({"response_format": schema_format({"type": "object", "patternProperties": {"^a": {}}})}, "response_format",
     "patternProperties"),
    ({"json_schema": {"type": "string", "format": "hostname-ish"}}, "json_schema", "hostname-ish"),
    ({"grammar": 'root ::= "a" (b'}, "grammar", "line 1, column"),
    ({"grammar": "root ::= x\nx ::= [a"}, "grammar", "line 2"),
    ({"grammar": "root ::= [^\\x00-\\U0010FFFF]"}, "grammar", "no token"),
    ({"grammar": DATE, "json_schema": {}}, "grammar", "'json_schema' and 'grammar'"),
    ({"response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}]},
     "response_format", "'tools'"),
])
def test_refused_before_generation(smol, body, param, text):
    status, r = smol.request("POST", "/v1/chat/completions", {"messages": ASK, "max_tokens": 4, **body})
    assert status == 400 and r["error"]["param"] == param and text in r["error"]["message"], r


def test_bad_keyword_through_the_client(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=M, messages=ASK, max_tokens=4, response_format=schema_format(
            {"type": "object", "properties": {"a": {"type": "number", "multipleOf": 0.5}}}))
    assert "multipleOf" in str(e.value)


def test_stream_reassembles_to_the_whole(client):
    kw = dict(model=M, messages=ASK, response_format=schema_format(PERSON), temperature=1.0, seed=13, max_tokens=120)
    whole = client.chat.completions.create(**kw).choices[0]
    text, finish = "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert (text, finish) == (whole.message.content, whole.finish_reason)


def test_cut_mid_structure_is_length(client):
    # two required keys take more than 3 tokens: the grammar cannot be done, so not stop
    r = client.chat.completions.create(model=M, messages=ASK, response_format=schema_format(PERSON), temperature=1.0,
                                       seed=3, max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    with pytest.raises(ValueError):
        json.loads(r.choices[0].message.content)


def test_same_schema_reuses_the_compiled_grammar(smol, client):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    hits, misses = smol.metric("grammar_cache_hits_total"), smol.metric("grammar_cache_misses_total")
    for seed in (1, 2):
        client.chat.completions.create(model=M, messages=ASK, response_format=schema_format(schema, "digit"),
                                       temperature=1.0, seed=seed, max_tokens=30)
    assert smol.metric("grammar_cache_misses_total") == misses + 1  # compiled once
    assert smol.metric("grammar_cache_hits_total") == hits + 1      # then found
    # the same schema through llama-server's field is the same GBNF: found too
    smol.request("POST", "/v1/chat/completions", {"messages": ASK, "json_schema": schema, "max_tokens": 30})
    assert smol.metric("grammar_cache_hits_total") == hits + 2


def test_validity_suite_short_run():
    # bench/schema_validity.py on the first schemas of the suite, as CI's share of the full run
    schemas = os.path.join(ROOT, "tests", "data", "schemas")
    assert os.path.isdir(schemas), "tests/data/schemas (the schema suite) is missing"
    spec = importlib.util.spec_from_file_location("schema_validity", os.path.join(ROOT, "bench", "schema_validity.py"))
    sv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sv)
    rows = sv.run(BIN, None, schemas, 3, 2, 1, 256, 4)
    assert len(rows) == 3 and all(r["replies"] == 2 for r in rows), rows
    assert not [f for r in rows for f in r["failures"]], rows
    assert all(r["valid"] == r["stop"] for r in rows)

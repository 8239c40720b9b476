"""One request must never stop the server (issue 37): what can never be
served is refused with a 400 before any work (a request larger than the
whole KV cache, a logit_bias that bans every token, malformed tool
history, a json_object's schema is enforced), and what was admitted is
never cut short; /metrics shows slots and KV blocks coming back after
requests and cancels, a client that left while its request waited has it
dropped, and the tools' grammar is shared through the grammar cache (its
waits, deadlines and clients leaving: tests/test_serve_sched.c)."""
import json
import socket
import time

import pytest

from conftest import TINY, Server
from test_http import CHAT, COMP, MSG, open_stream, read_until

BLOCK = 32  # tokens a KV block (the paged cache's)
POOL = 8192  # the tiny model's cache in --kv-memory 1 (its ready: line): 256 blocks


@pytest.fixture(scope="module")
def small_kv():
    """The tiny model (it never ends a turn), 2 slots of 65536 tokens sharing a cache of POOL tokens."""
    s = Server("--parallel", "2", "--ctx", "65536", "--kv-memory", "1", model=TINY)
    yield s
    rc, err = s.stop()
    assert rc == 0, err


def wait_for(cond, seconds=30):
    deadline = time.time() + seconds
    while not cond() and time.time() < deadline:
        time.sleep(0.02)
    assert cond()


def idle(s):
    """Every slot free and no block set aside; the used and free blocks add up to the cache."""
    return (s.metric("slots_busy") == 0 and s.metric("slots_idle") == s.metric("slots")
            and s.metric("kv_blocks_reserved") == 0
            and s.metric("kv_blocks_used") + s.metric("kv_blocks_free") == s.metric("kv_blocks"))


# ---- item 4: a request larger than the whole KV cache ----------------------------------------------------------

def test_larger_than_the_cache_is_refused_before_any_work(small_kv):
    gen0 = small_kv.metric("generated_tokens_total")
    status, r = small_kv.request("POST", COMP, {"prompt": "a", "max_tokens": POOL + 10})
    assert status == 400, r
    assert r["error"]["code"] == "context_length_exceeded" and r["error"]["param"] == "max_tokens", r
    assert "KV cache" in r["error"]["message"]
    for stream in (False, True):  # n choices' copies are counted: 2 x 5000 tokens cannot share 8192
        status, r = small_kv.request("POST", COMP, {"prompt": "a", "max_tokens": 5000, "n": 2, "stream": stream})
        assert status == 400 and r["error"]["code"] == "context_length_exceeded", r
    # a long prompt with n = 2: its last block copied per choice, the answers' own blocks
    status, r = small_kv.request("POST", COMP, {"prompt": [1] * 6000, "max_tokens": 1500, "n": 2})
    assert status == 400 and r["error"]["code"] == "context_length_exceeded", r
    assert small_kv.metric("generated_tokens_total") == gen0  # nothing was generated for them


def test_what_fits_is_never_cut_short(small_kv):
    # n = 2 of a long prompt that fits: both choices run to max_tokens
    status, r = small_kv.request("POST", COMP, {"prompt": [1] * 3000, "max_tokens": 300, "n": 2})
    assert status == 200, r
    assert [c["finish_reason"] for c in r["choices"]] == ["length", "length"]
    assert r["usage"] == {**r["usage"], "prompt_tokens": 3000, "completion_tokens": 600}
    # without max_tokens the answer is bounded by what the cache holds (as by the context): length, not an error
    status, r = small_kv.request("POST", CHAT, {"messages": MSG})
    assert status == 200, r
    assert r["choices"][0]["finish_reason"] == "length"
    assert r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] == POOL
    # streamed: every chunk text, the last a finish_reason, no error event
    c = open_stream(small_kv.port, {"messages": MSG}, CHAT)
    raw = read_until(c, b"data: [DONE]", limit=1 << 24)
    c.close()
    data = [json.loads(line[6:]) for line in raw.decode().split("\n")
            if line.startswith("data: ") and line != "data: [DONE]"]
    assert not any("error" in d for d in data), data[-1]
    assert data[-1]["choices"][0]["finish_reason"] == "length"
    wait_for(lambda: idle(small_kv))


# ---- item 7: logit_bias that bans every token ------------------------------------------------------------------

def vocab_size(s):
    """The tiny model's vocabulary: the first token id the server refuses in a prompt."""
    status, r = s.request("POST", COMP, {"prompt": [1 << 30], "max_tokens": 1})
    assert status == 400
    return int(r["error"]["message"].rsplit(" ", 1)[1].rstrip(")"))


def test_logit_bias_banning_every_token(small_kv):
    n = vocab_size(small_kv)
    prompt0 = small_kv.metric("prompt_tokens_total")
    status, r = small_kv.request("POST", COMP, {"prompt": "a", "max_tokens": 2,
                                                "logit_bias": {str(i): -100 for i in range(n)}})
    assert status == 400 and r["error"]["param"] == "logit_bias" and "every token" in r["error"]["message"], r
    assert small_kv.metric("prompt_tokens_total") == prompt0  # refused before the prompt was evaluated
    # all but one banned: that one is the answer
    status, r = small_kv.request("POST", COMP, {"prompt": "a", "max_tokens": 2,
                                                "logit_bias": {str(i): -100 for i in range(n) if i != 7}})
    assert status == 200 and r["usage"]["completion_tokens"] == 2, r


# ---- item 13: llama-server's json_object with a schema ----------------------------------------------------------

def test_json_object_schema_is_enforced(small_kv):
    # no object at all: the schema, not any object (blanks around it bounded: whole within 200 tokens)
    fmt = {"type": "json_object", "schema": {"enum": [True]}}
    status, r = small_kv.request("POST", CHAT, {"messages": MSG, "max_tokens": 200, "response_format": fmt})
    assert status == 200, r
    assert r["choices"][0]["finish_reason"] == "stop" and json.loads(r["choices"][0]["message"]["content"]) is True
    fmt = {"type": "json_object", "schema": 5}
    status, r = small_kv.request("POST", CHAT, {"messages": MSG, "max_tokens": 2, "response_format": fmt})
    assert status == 400 and r["error"]["param"] == "response_format", r


# ---- item 8: tools ------------------------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}


def call(cid, args='{"a": 1}'):
    return {"id": cid, "type": "function", "function": {"name": "add", "arguments": args}}


@pytest.mark.parametrize("msgs,tools,field", [
    # one id for two calls, in one message or across the history
    (MSG + [{"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c1")]}], [TOOL],
     "messages[1].tool_calls[1].id"),
    (MSG + [{"role": "assistant", "content": None, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "2"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]}], [TOOL],
     "messages[3].tool_calls[0].id"),
    # arguments that are not a JSON object's text
    (MSG + [{"role": "assistant", "content": None, "tool_calls": [call("c1", "{a: 1")]}], [TOOL],
     "messages[1].tool_calls[0].function.arguments"),
    (MSG + [{"role": "assistant", "content": None, "tool_calls": [call("c1", "[1]")]}], [TOOL],
     "messages[1].tool_calls[0].function.arguments"),
    # parameters that are not an object's schema
    (MSG, [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}],
     "tools[0].function.parameters"),
])
def test_bad_tool_history_and_parameters(smol, msgs, tools, field):
    status, r = smol.request("POST", CHAT, {"messages": msgs, "tools": tools, "max_tokens": 1})
    assert status == 400 and field in r["error"]["message"], r
    assert r["error"]["param"] == ("tools" if field.startswith("tools") else "messages")


# ---- items 11 and 12: slots and blocks come back; a client gone while queued ------------------------------------

def test_metrics_return_to_idle_and_queued_client_gone(tiny):
    s = tiny("--parallel", "1", "--ctx", "65536")
    assert idle(s) and s.metric("kv_blocks") == 65536 // BLOCK
    status, r = s.request("POST", COMP, {"prompt": "a", "max_tokens": 40})
    assert status == 200 and r["usage"]["completion_tokens"] == 40
    wait_for(lambda: idle(s))
    used = s.metric("kv_blocks_used")
    assert 0 < used <= 2  # the idle slot's cache (kept for the next prompt), nothing else
    # a stream takes the slot (the tiny model runs until the context is full, unless closed)
    running = open_stream(s.port, {"prompt": "a", "max_tokens": 60000})
    assert read_until(running, b"data: ").startswith(b"HTTP/1.1 200")
    assert s.metric("slots_busy") == 1 and s.metric("kv_blocks_reserved") == (60001 + BLOCK - 1) // BLOCK
    # a non-streamed request waits behind it; its client closes the connection entirely
    done0, cancelled0 = s.metric("requests_completed_total"), s.metric("requests_cancelled_total")
    q = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    data = json.dumps({"prompt": "b", "max_tokens": 5}).encode()
    q.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    wait_for(lambda: s.metric("requests_queued") == 1)
    q.close()
    # dropped while it waits (counted as cancelled), not generated once the slot frees
    wait_for(lambda: s.metric("requests_queued") == 0 and s.metric("requests_cancelled_total") == cancelled0 + 1)
    assert s.metric("slots_busy") == 1  # the stream still runs
    running.close()  # a cancelled stream gives back its slot and its blocks
    wait_for(lambda: idle(s) and s.metric("requests_cancelled_total") == cancelled0 + 2)
    assert s.metric("requests_completed_total") == done0


# ---- item 3: grammars compile through the cache (tools' too), on its thread --------------------------------------

def test_tools_grammar_shared_through_the_cache(smol):
    """The tools' call grammar (a JSON Schema of the parameters) is compiled once for the same tools, as a schema is."""
    tool = {"type": "function", "function": {"name": "hardening_probe", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "maxLength": 7}}, "required": ["q"]}}}
    hits, misses = smol.metric("grammar_cache_hits_total"), smol.metric("grammar_cache_misses_total")
    for _ in range(2):
        status, r = smol.request("POST", CHAT, {"messages": MSG, "tools": [tool], "tool_choice": "required",
                                                "max_tokens": 1})
        assert status == 200, r
    assert smol.metric("grammar_cache_misses_total") == misses + 1
    assert smol.metric("grammar_cache_hits_total") == hits + 1

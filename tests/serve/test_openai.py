"""The official openai package as the client, against the default model."""
import concurrent.futures
import os
import subprocess

import openai
import pytest

from conftest import BIN, Server

Q = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model(client):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "SmolLM2-135M-Instruct.Q4_1.gguf"
    return models[0].id


def test_health_loading_then_ready(smol):
    # the port is open before the model is loaded (a second or so here)
    assert smol.health[0][0] == 503 and smol.health[-1] == (200, {"status": "ok"})


def test_chat(client, model):
    r = client.chat.completions.create(model=model, messages=Q, max_tokens=12, temperature=0)
    c = r.choices[0]
    n = r.usage.completion_tokens
    assert c.message.role == "assistant" and c.message.content
    # a real model may end its answer early: the count and the reason agree (exact counts: test_counts_tiny)
    assert 1 <= n <= 12 and c.finish_reason == ("length" if n == 12 else "stop")
    assert r.usage.total_tokens == r.usage.prompt_tokens + n
    # ChatML with SmolLM2's default system turn: 37 tokens, as `clinfer run --chat` counts them
    assert r.usage.prompt_tokens == 37
    assert r.model_extra["timings"]["predicted_n"] == n


def test_chat_stream_matches_whole(client, model):
    whole = client.chat.completions.create(model=model, messages=Q, max_tokens=16, temperature=0)
    chunks = list(client.chat.completions.create(model=model, messages=Q, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == 37
    # a chunk per token (or more), not one at the end (the tiny model's random bytes would merge while
    # a piece holds back an incomplete UTF-8 sequence; this answer is text)
    assert len(chunks) >= whole.usage.completion_tokens


def test_counts_tiny(tiny):
    """On the tiny model, which never ends a turn: exactly max_tokens, "length", a chunk per token."""
    s = tiny("--parallel", "1", "--ctx", "128")
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    m = c.models.list().data[0].id
    r = c.chat.completions.create(model=m, messages=Q, max_tokens=12, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12 and r.model_extra["timings"]["predicted_n"] == 12
    chunks = list(c.chat.completions.create(model=m, messages=Q, max_tokens=16, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert [x.choices[0].finish_reason for x in chunks if x.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == 16
    r = c.completions.create(model=m, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.usage.completion_tokens == 8 and r.choices[0].finish_reason == "length"
    # cut at the context's end, not at max_tokens: the last token is sampled, not evaluated
    p = c.completions.create(model=m, prompt="hello " * 10, max_tokens=1).usage.prompt_tokens
    assert p < 128
    r = c.completions.create(model=m, prompt="hello " * 10, max_tokens=1000, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.prompt_tokens + r.usage.completion_tokens == 129


def test_completion_and_stream(client, model):
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and 1 <= r.usage.completion_tokens <= 8
    s = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0,
                                  stream=True)
    assert "".join(c.choices[0].text for c in s) == r.choices[0].text


def test_default_max_tokens_is_16_for_completions(client, model):
    r = client.completions.create(model=model, prompt="Once upon a time", temperature=0)
    assert r.usage.completion_tokens <= 16 and r.choices[0].finish_reason in ("stop", "length")


def test_stop_strings(client, model):
    full = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=16, temperature=0)
    text = full.choices[0].text
    assert len(text) >= 8, text
    stop = text[len(text) // 2:][:3]  # a stop string that may begin inside a token run, wherever the answer goes
    r = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=16, temperature=0, stop=[stop, "zzz"])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == text[:text.index(stop)]
    s = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=16, temperature=0, stop=stop,
                                  stream=True)
    parts = list(s)
    assert "".join(c.choices[0].text for c in parts) == r.choices[0].text
    assert parts[-1].choices[0].finish_reason == "stop"


def test_seed_reproducible(client, model):
    def sample(seed):
        return client.chat.completions.create(model=model, messages=Q, max_tokens=24, temperature=1.0, seed=seed,
                                              extra_body={"top_k": 0}).choices[0].message.content

    a, b = sample(1234), sample(1234)
    assert a == b
    assert any(sample(s) != a for s in (1, 2, 3))  # the seed is used at all


def test_errors_as_client_exceptions(client, model):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-model", messages=Q)
    assert e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=Q, temperature=5)
    assert "temperature" in e.value.message
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model, messages=[])
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=Q, n=9)
    assert "more than this server's 8 slots" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=Q, presence_penalty=0.5)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model, prompt="hello " * 600)
    assert e.value.code == "context_length_exceeded" and "longer than the context of 512 tokens" in e.value.message


PROMPTS = ["The capital of France is", "Water boils at", "The three primary colors are", "A haiku about the sea:",
           "def fibonacci(n):", "The largest planet in the solar system", "In 1492, Columbus", "My favourite food is"]


def run_cli(prompt, n):
    out = subprocess.run([BIN, "run", "-p", prompt, "-n", str(n)], capture_output=True, text=True, check=True)
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def test_batched_equals_unbatched(client, model):
    """8 concurrent greedy requests give each the text `clinfer run` gives alone."""
    n = 24
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        served = list(ex.map(lambda p: client.completions.create(model=model, prompt=p, max_tokens=n,
                                                                 temperature=0).choices[0].text, PROMPTS))
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        alone = list(ex.map(lambda p: run_cli(p, n), PROMPTS))
    assert served == alone


def test_api_key(tiny):
    s = tiny("--api-key", "sesame")
    for key, ok in (("sesame", True), ("sesamf", False), ("sesame2", False), ("", False)):
        c = openai.OpenAI(base_url=s.url + "/v1", api_key=key or "x", max_retries=0)
        if ok:
            assert c.completions.create(model=c.models.list().data[0].id, prompt="a", max_tokens=2).choices
        else:
            with pytest.raises(openai.AuthenticationError):
                c.models.list()
    assert s.request("GET", "/health")[0] == 200 and s.request("GET", "/")[0] == 200  # public
    status, body = s.request("GET", "/metrics")
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert s.last_headers.get("WWW-Authenticate") == "Bearer"

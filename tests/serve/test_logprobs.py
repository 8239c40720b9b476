"""logprobs, top_logprobs, n > 1 and logit_bias through the official openai
client, on the default model: the numbers against `clinfer run --logprobs`
(the library's clinfer_logprobs over the same logits), streamed against
whole, the choices' seeds and their shared prompt, a bias that bans and one
that forces."""
import json
import math
import subprocess

import openai
import pytest

from conftest import BIN

P = "The capital of France is"
Q = [{"role": "user", "content": "Name three colours."}]
M = "SmolLM2-135M-Instruct.Q4_1.gguf"  # the default model, by the name /v1/models gives


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


def run_logprobs(prompt, n, top):
    """`clinfer run --logprobs` (greedy): its text and a record a token."""
    p = subprocess.run([BIN, "run", "-p", prompt, "-n", str(n), "--logprobs", str(top), "--ctx", "512"],
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stderr.decode(errors="replace").splitlines() if l.startswith("{")]
    return p.stdout.decode(errors="replace"), lines


def close(a, b, tol=2e-3):
    return abs(a - b) <= tol * max(1.0, abs(b))


def test_completion_logprobs_match_the_library(client):
    r = client.completions.create(model=M, prompt=P, max_tokens=8, temperature=0, logprobs=5)
    c = r.choices[0]
    lp = c.logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert "".join(lp.tokens) == c.text
    assert lp.text_offset == [sum(len(t.encode()) for t in lp.tokens[:i]) for i in range(n)]
    for tok, tlp, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 5
        best = max(top, key=top.get)
        assert best == tok and close(top[best], tlp)  # greedy: the chosen token is the likeliest
        assert sum(math.exp(v) for v in top.values()) <= 1 + 1e-5
        assert tlp <= 0
    # the same prompt through the CLI: the same tokens and numbers
    _, ref = run_logprobs(P, n, 5)
    assert len(ref) >= n
    for tok, tlp, top, want in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, ref):
        assert tok == want["text"] and close(tlp, want["logprob"]), (tok, tlp, want)
        got = sorted(top.items(), key=lambda kv: -kv[1])
        assert [t for t, _ in got] == [w["text"] for w in want["top_logprobs"]]
        assert all(close(v, w["logprob"]) for (_, v), w in zip(got, want["top_logprobs"]))


def test_chat_logprobs_shape_and_stream(client):
    kw = dict(model=M, messages=Q, max_tokens=16, temperature=0, logprobs=True, top_logprobs=3)
    whole = client.chat.completions.create(**kw)
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens
    assert "".join(t.token for t in content) == whole.choices[0].message.content
    for t in content:
        assert bytes(t.bytes).decode(errors="replace") == t.token
        assert len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token
        assert close(t.top_logprobs[0].logprob, t.logprob)
        assert [a.logprob for a in t.top_logprobs] == sorted((a.logprob for a in t.top_logprobs), reverse=True)
    chunks = list(client.chat.completions.create(**kw, stream=True))
    streamed = [t for ch in chunks if ch.choices and ch.choices[0].logprobs for t in ch.choices[0].logprobs.content]
    assert [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in streamed] == \
           [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in content]
    # without logprobs asked for, none
    plain = client.chat.completions.create(model=M, messages=Q, max_tokens=4, temperature=0)
    assert plain.choices[0].logprobs is None


def test_logprobs_follow_the_text_a_stop_string_cuts(client):
    """Text held back while it may begin a stop string holds its tokens back: each chunk's tokens are the text
    sent so far; where a stop string cuts a token, the token still counts (its text partly sent)."""
    kw = dict(model=M, prompt=P, max_tokens=12, temperature=0, logprobs=2)
    free = client.completions.create(**kw).choices[0]
    toks = free.logprobs.tokens
    assert len(toks) >= 4
    # a stop string that starts inside the third token's text and runs into the fourth
    stop = (toks[2] + toks[3])[1:] if len(toks[2]) > 1 else toks[3]
    cut = free.text.find(stop)
    assert cut >= 0
    whole = client.completions.create(**kw, stop=[stop]).choices[0]
    assert whole.text == free.text[:cut] and whole.finish_reason == "stop"
    lp = whole.logprobs
    assert lp.tokens == toks[:len(lp.tokens)]
    assert "".join(lp.tokens).startswith(whole.text)
    assert sum(map(len, lp.tokens[:-1])) < len(whole.text) or not whole.text  # the last one reaches the cut
    text, tokens = "", []
    for ch in client.completions.create(**kw, stop=[stop], stream=True):
        if not ch.choices:
            continue
        c = ch.choices[0]
        text += c.text
        if c.logprobs:
            tokens += c.logprobs.tokens
        if c.finish_reason is None:
            assert text.startswith("".join(tokens)), (text, tokens)  # no token ahead of its text
    assert text == whole.text and tokens == lp.tokens


def test_n_choices_share_the_prompt(client, smol):
    kw = dict(model=M, prompt=P, max_tokens=8, temperature=1.0, seed=7, logprobs=0)
    before = smol.metric("prompt_tokens_total")
    r = client.completions.create(**kw, n=3)
    evaluated = smol.metric("prompt_tokens_total") - before
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == sum(len(c.logprobs.tokens) for c in r.choices)
    # the prompt once: counted once and evaluated once (not three times)
    assert r.usage.prompt_tokens == len(subprocess.run([BIN, "tokenize", "-p", P], capture_output=True,
                                                       text=True).stdout.split())
    assert evaluated == r.usage.prompt_tokens - r.usage.prompt_tokens_details.cached_tokens
    # each choice its own seed (seed + i): as n = 1 with that seed, and reproducible
    again = client.completions.create(**kw, n=3)
    assert [c.text for c in again.choices] == [c.text for c in r.choices]
    alone = [client.completions.create(**{**kw, "seed": 7 + i}).choices[0].text for i in range(3)]
    assert alone == [c.text for c in r.choices]
    # streamed: chunks carry their choice's index, and reassemble to the same texts
    texts = ["", "", ""]
    finished = set()
    for ch in client.completions.create(**kw, n=3, stream=True):
        for c in ch.choices:
            texts[c.index] += c.text
            if c.finish_reason:
                finished.add(c.index)
    assert texts == [c.text for c in r.choices] and finished == {0, 1, 2}


def test_n_chat_greedy_choices_agree(client):
    r = client.chat.completions.create(model=M, messages=Q, max_tokens=10, temperature=0, n=2)
    assert len(r.choices) == 2 and r.choices[0].message.content == r.choices[1].message.content
    one = client.chat.completions.create(model=M, messages=Q, max_tokens=10, temperature=0)
    assert one.choices[0].message.content == r.choices[0].message.content
    assert r.usage.prompt_tokens == one.usage.prompt_tokens
    assert r.usage.completion_tokens == 2 * one.usage.completion_tokens


def test_n_above_the_slots(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=M, prompt=P, n=9)
    assert e.value.param == "n" and "8 slots" in e.value.message


def token_id(text):
    out = subprocess.run([BIN, "tokenize", "--no-bos", "-p", text], capture_output=True, text=True).stdout.split()
    assert len(out) == 1, out
    return int(out[0])


def test_logit_bias_bans_and_forces(client):
    _, ref = run_logprobs(P, 6, 0)
    first = ref[0]["token"]
    r = client.completions.create(model=M, prompt=P, max_tokens=6, temperature=0, logprobs=0,
                                  logit_bias={str(first): -100})
    assert ref[0]["text"] not in r.choices[0].logprobs.tokens
    # sampled, hot: the banned token still never comes
    r = client.completions.create(model=M, prompt=P, max_tokens=24, temperature=2, top_p=1, seed=3, extra_body={"top_k": 0},
                                  logprobs=0, logit_bias={str(first): -100})
    assert ref[0]["text"] not in r.choices[0].logprobs.tokens
    banana = token_id(" banana")
    r = client.completions.create(model=M, prompt=P, max_tokens=5, temperature=1, seed=5, logit_bias={str(banana): 100})
    assert r.choices[0].text == " banana" * 5
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=M, prompt=P, logit_bias={"49152": 1})
    assert e.value.param == "logit_bias" and "not in the vocabulary" in e.value.message

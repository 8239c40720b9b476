"""/v1/embeddings through the official openai client, /tokenize and
/detokenize as llama-server shapes them, and --alias, against the default
model (SmolLM2-135M: 576-wide vectors)."""
import base64
import concurrent.futures
import json
import math
import os
import struct
import subprocess

import openai
import pytest

from conftest import BIN

TEXTS = ["The capital of France is Paris.", "A", "def f(x):\n    return x * 2\n", "Embeddings map texts to vectors."]


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def f32(v):
    """Each value as the float32 it stands for (JSON carries 9 digits: a float32 exactly, not as a double)."""
    return list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v)))


def vectors(client, model, inputs, **kw):
    r = client.embeddings.create(model=model, input=inputs, **kw)
    assert [d.index for d in r.data] == list(range(len(r.data)))
    return r, [d.embedding for d in r.data]


def tokens(smol, text, add_special=True):
    status, r = smol.request("POST", "/tokenize", {"content": text, "add_special": add_special, "parse_special": False})
    assert status == 200, r
    return r["tokens"]


def test_shapes_and_normalisation(smol, client, model):
    r, vs = vectors(client, model, TEXTS)
    assert r.object == "list" and r.model == model and len(vs) == len(TEXTS)
    assert all(d.object == "embedding" for d in r.data)
    for v in vs:
        assert len(v) == 576
        assert abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5
    n = sum(len(tokens(smol, t)) for t in TEXTS)
    assert r.usage.prompt_tokens == n and r.usage.total_tokens == n
    # different texts, different vectors; one text, one vector
    assert max(abs(a - b) for a, b in zip(vs[0], vs[1])) > 0.05
    _, again = vectors(client, model, TEXTS[0])
    assert again[0] == vs[0]


def test_list_equals_one_by_one(client, model):
    _, together = vectors(client, model, TEXTS)
    alone = [vectors(client, model, t)[1][0] for t in TEXTS]
    assert together == alone


def test_float_and_base64_agree(smol, client, model):
    # the openai client asks for base64 unless told; raw HTTP for both, decoded here
    status, f = smol.request("POST", "/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "float"})
    assert status == 200, f
    status, b = smol.request("POST", "/v1/embeddings", {"input": TEXTS[:2], "encoding_format": "base64"})
    assert status == 200, b
    for df, db in zip(f["data"], b["data"]):
        raw = base64.b64decode(db["embedding"])
        assert len(raw) == 4 * 576
        assert list(struct.unpack("<576f", raw)) == f32(df["embedding"])
    _, via_client = vectors(client, model, TEXTS[:2])  # base64, decoded by the client
    assert via_client == [f32(d["embedding"]) for d in f["data"]]


def test_token_ids_as_input(smol, client, model):
    _, by_text = vectors(client, model, TEXTS[:3])
    ids = [tokens(smol, t) for t in TEXTS[:3]]
    _, by_ids = vectors(client, model, ids)
    assert by_ids == by_text
    _, one = vectors(client, model, ids[0])  # a single list of ids is one input
    assert one == by_text[:1]


def test_vectors_equal_the_cli(smol, client, model, tmp_path):
    """`clinfer embed` on the same model: the same vectors (one library call for both)."""
    args = [BIN, "embed", "--ctx", "512"]
    for t in TEXTS:
        args += ["-p", t]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    cli = [json.loads(line) for line in out.stdout.splitlines()]
    _, served = vectors(client, model, TEXTS, encoding_format="float")
    assert len(cli) == len(served)
    for a, b in zip(cli, served):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-7
    # -f: a line per input, the same vectors (the texts without a newline in them)
    one_line = [t for t in TEXTS if "\n" not in t]
    path = os.path.join(tmp_path, "inputs.txt")
    with open(path, "w") as f:
        f.write("\n".join(one_line) + "\n")
    out = subprocess.run([BIN, "embed", "--ctx", "512", "-f", path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [cli[TEXTS.index(t)] for t in one_line]


def test_while_generating(smol, client, model):
    """Embeddings between the scheduler's steps: the same vectors while completions run, and the completions
    as they are alone."""
    _, want = vectors(client, model, TEXTS)
    ask = dict(model=model, prompt="Once upon a time", max_tokens=48, temperature=0)
    alone = client.completions.create(**ask).choices[0].text
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        gens = [ex.submit(client.completions.create, **ask) for _ in range(3)]
        embs = [ex.submit(vectors, client, model, TEXTS) for _ in range(3)]
        assert all(e.result()[1] == want for e in embs)
        assert all(g.result().choices[0].text == alone for g in gens)


LONG = "hello " * 600  # over the 512-token context
BAD = [
    ({}, "'input' is required"),
    ({"input": ""}, "'input' is empty"),
    ({"input": []}, "empty list"),
    ({"input": [""]}, "'input[0]' is empty"),
    ({"input": ["a", ""]}, "'input[1]' is empty"),
    ({"input": [[]]}, "'input[0]' must be a non-empty"),
    ({"input": [1, "a"]}, "'input[1]' is not a token id"),
    ({"input": [[1, -2]]}, "'input[0][1]' is not a token id"),
    ({"input": [1, 99999999]}, "not a token id (the vocabulary has 49152)"),
    ({"input": 5}, "must be a non-empty string"),
    ({"input": ["a", 5]}, "'input[1]' must be"),
    ({"input": "a", "encoding_format": "hex"}, "'encoding_format' 'hex' is not float or base64"),
    ({"input": "a", "encoding_format": 1}, "'encoding_format'"),
    ({"input": "a", "dimensions": 3}, "'dimensions' must be the model's 576"),
    ({"input": "a", "dimensions": 0}, "out of its range"),
    ({"input": "a", "model": 3}, "'model'"),
    ({"input": ["a"] * 2049}, "more than 2048"),
]


@pytest.mark.parametrize("body,text", BAD, ids=[repr(b[0])[:40] for b in BAD])
def test_bad_inputs(smol, body, text):
    status, r = smol.request("POST", "/v1/embeddings", body)
    assert status == 400, r
    assert r["error"]["type"] == "invalid_request_error" and text in r["error"]["message"], r


def test_longer_than_the_context(smol, client, model):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=model, input=["short", LONG])
    assert e.value.code == "context_length_exceeded"
    assert "input 1 is" in e.value.message and "longer than the context of 512 tokens" in e.value.message


def test_tokenize_and_back(smol):
    text = "Hello world, ça va? 🦙 <|im_start|>"
    status, r = smol.request("POST", "/tokenize", {"content": text})
    assert status == 200
    ids = r["tokens"]
    assert all(isinstance(i, int) for i in ids)
    # the defaults (llama-server's): no BOS added, control-token text parsed as the token
    out = subprocess.run([BIN, "tokenize", "--special", "--no-bos", "-p", text], capture_output=True, text=True)
    assert ids == [int(x) for x in out.stdout.split()]
    status, r = smol.request("POST", "/tokenize", {"content": text, "parse_special": False})
    assert r["tokens"] != ids and 1 not in r["tokens"]  # <|im_start|> as text
    status, r = smol.request("POST", "/tokenize", {"content": text, "with_pieces": True})
    assert [p["id"] for p in r["tokens"]] == ids
    raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in r["tokens"])
    assert raw == text.encode()
    assert any(isinstance(p["piece"], list) for p in r["tokens"])  # the llama's bytes split over tokens
    status, r = smol.request("POST", "/detokenize", {"tokens": ids})
    assert status == 200 and r == {"content": text}
    status, r = smol.request("POST", "/detokenize", {"tokens": []})
    assert status == 200 and r == {"content": ""}


@pytest.mark.parametrize("path,body,text", [
    ("/tokenize", {}, "'content' is required"),
    ("/tokenize", {"content": 5}, "'content'"),
    ("/tokenize", {"content": "a", "with_pieces": "yes"}, "'with_pieces'"),
    ("/detokenize", {}, "'tokens' must be an array"),
    ("/detokenize", {"tokens": [1, 49152]}, "'tokens[1]' is not a token id"),
    ("/detokenize", {"tokens": ["a"]}, "'tokens[0]'"),
])
def test_tokenize_bad(smol, path, body, text):
    status, r = smol.request("POST", path, body)
    assert status == 400 and text in r["error"]["message"], r


def test_alias(tiny):
    s = tiny("--alias", "org/my-model")
    status, models = s.request("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["org/my-model"]
    status, r = s.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 2, "model": "anything"})
    assert status == 200 and r["model"] == "org/my-model"
    status, r = s.request("POST", "/v1/embeddings", {"input": "a", "model": "gpt-4"})
    assert status == 200 and r["model"] == "org/my-model"
    assert len(r["data"][0]["embedding"]) > 0


def test_behind_the_api_key(tiny):
    s = tiny("--api-key", "k3y")
    for path, body in [("/v1/embeddings", {"input": "a"}), ("/tokenize", {"content": "a"}), ("/detokenize", {"tokens": [1]})]:
        status, r = s.request("POST", path, body)
        assert status == 401 and r["error"]["code"] == "invalid_api_key", (path, r)
        status, r = s.request("POST", path, body, headers={"Authorization": "Bearer k3y"})
        assert status == 200, (path, r)

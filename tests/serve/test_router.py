"""Several models behind one server (`serve --models-dir`, server/router.c)
through the official openai and anthropic packages over a socket: two
models at once with interleaved requests whose greedy answers equal each
model served alone; --models-max 1 and --models-memory evicting the least recently used model
and loading it again, with requests for both racing their loads; the
/models/load and /models/unload routes; an unknown model's error on every
endpoint, in that endpoint's shape; a broken file in the folder failing
alone. The second model is the tiny one (its answers need not be text)."""
import concurrent.futures
import os
import subprocess

import anthropic
import openai
import pytest

from conftest import BIN, TINY, Server

SMOL = "SmolLM2-135M-Instruct.Q4_1"  # -m's name in a router: its file's, less .gguf
PROMPTS = ["What is the capital of France?", "Name three colours.", "Say hello in Spanish."]
OPTS = ("--parallel", "8", "--ctx", "512")  # as the smol fixture's: the same batches' shapes


def folder(tmp, *names, broken=()):
    """A models folder: the tiny model under each name, and files that are not GGUF."""
    os.makedirs(tmp, exist_ok=True)
    for n in names:
        os.symlink(TINY, os.path.join(tmp, n + ".gguf"))
    for n in broken:
        with open(os.path.join(tmp, n + ".gguf"), "wb") as f:
            f.write(b"not a model\n")
    return str(tmp)


def oai(s):
    return openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)


def answer(s, model, prompt, n=16):
    r = oai(s).chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}], max_tokens=n,
                                       temperature=0)
    return r.choices[0].message.content


def status(s):
    code, body = s.request("GET", "/v1/models")
    assert code == 200, body
    return {m["id"]: m["status"] for m in body["data"]}


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    """SmolLM2 (-m) and the tiny model, with a broken file beside them."""
    d = folder(tmp_path_factory.mktemp("models"), "tiny", broken=["broken"])
    s = Server("--models-dir", d, *OPTS, model="smollm2-135m")
    yield s
    rc, err = s.stop()
    assert rc == 0, err


def test_two_models_interleaved_equal_alone(router, smol, tiny):
    """Every model's status listed, none loaded before its first request;
    then both models' answers, asked at once and interleaved, are each
    model's answers served alone."""
    st = status(router)
    assert set(st) == {SMOL, "tiny", "broken"}
    assert all(v["value"] == "unloaded" for v in st.values()), st
    alone_tiny = tiny(*OPTS)
    want = {(SMOL, p): answer(smol, "any", p) for p in PROMPTS}
    want.update({("tiny", p): answer(alone_tiny, "any", p) for p in PROMPTS})
    jobs = [(m, p) for p in PROMPTS for m in (SMOL, "tiny")] * 2
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
        got = list(ex.map(lambda mp: answer(router, *mp), jobs))
    for (m, p), g in zip(jobs, got):
        assert g == want[(m, p)], (m, p)
    st = status(router)
    assert st[SMOL]["value"] == "loaded" and st["tiny"]["value"] == "loaded", st
    # the file's name (a one-model server's id) names it too
    assert answer(router, SMOL + ".gguf", PROMPTS[0]) == want[(SMOL, PROMPTS[0])]


def test_unknown_model_on_every_endpoint(router):
    c = oai(router)
    calls = [
        lambda: c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}], max_tokens=2),
        lambda: c.completions.create(model="nope", prompt="hi", max_tokens=2),
        lambda: c.embeddings.create(model="nope", input="hi"),
        lambda: c.responses.create(model="nope", input="hi", max_output_tokens=2),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as e:
            call()
        assert e.value.body["code"] == "model_not_found" and "'nope'" in e.value.body["message"]
    a = anthropic.Anthropic(base_url=router.url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as e:
        a.messages.create(model="nope", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        a.messages.count_tokens(model="nope", messages=[{"role": "user", "content": "hi"}])
    code, body = router.request("POST", "/tokenize", {"model": "nope", "content": "hi"})
    assert code == 404 and body["error"]["code"] == "model_not_found"
    code, body = router.request("POST", "/v1/chat/completions", {"model": 7, "messages": []})
    assert code == 400 and body["error"]["param"] == "model"


def test_broken_file_fails_alone(router):
    """A file that is not a model: a 500 saying why, listed as failed; the others serve on."""
    for _ in range(2):  # tried again on the next request, failing the same way
        with pytest.raises(openai.InternalServerError) as e:
            answer(router, "broken", "hi", 2)
        assert e.value.body["code"] == "model_load_failed" and "not a GGUF file" in e.value.body["message"]
    st = status(router)["broken"]
    assert st["value"] == "unloaded" and st["failed"] is True and "not a GGUF file" in st["error"]
    a = anthropic.Anthropic(base_url=router.url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as e:
        a.messages.create(model="broken", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["error"]["type"] == "api_error"
    assert answer(router, "tiny", "hi", 4)


def test_evicted_and_reloaded(tiny, tmp_path):
    """--models-max 1: a request for the other model unloads the one used
    last and loads its own; requests for both racing their loads all get
    their answers; the first model answers the same once loaded again."""
    s = Server("--models-dir", folder(tmp_path, "a", "b", broken=["c"]), "--models-max", "1", "--parallel", "2",
               "--ctx", "256")
    try:
        first = answer(s, "a", "hi", 6)
        assert status(s)["a"]["value"] == "loaded" and status(s)["b"]["value"] == "unloaded"
        with pytest.raises(openai.InternalServerError):  # a file that is not GGUF makes no room
            answer(s, "c", "hi", 2)
        assert status(s)["a"]["value"] == "loaded"
        assert answer(s, "b", "hi", 6) == first  # the same file under another name
        st = status(s)
        assert st["a"]["value"] == "unloaded" and st["b"]["value"] == "loaded", st
        jobs = ["a", "b"] * 4
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            got = list(ex.map(lambda m: answer(s, m, "hi", 6), jobs))
        assert got == [first] * len(jobs)
        assert sum(v["value"] == "loaded" for v in status(s).values()) == 1
        assert answer(s, "b", "hi", 6) == first and answer(s, "a", "hi", 6) == first
        assert status(s)["a"]["value"] == "loaded" and status(s)["b"]["value"] == "unloaded"
    finally:
        rc, err = s.stop()
    assert rc == 0, err
    assert err.count("clinfer serve: loading a") >= 2 and err.count("clinfer serve: unloading ") >= 3, err
    assert "unloading a\nclinfer serve: loading c" not in err, err


def test_load_and_unload_routes(tiny, tmp_path):
    s = Server("--models-dir", folder(tmp_path, "a", "b"), "--parallel", "1", "--ctx", "128")
    try:
        assert s.request("POST", "/models/load", {"model": "a"}) == (200, {"success": True})
        assert status(s)["a"]["value"] == "loaded"
        code, body = s.request("POST", "/models/load", {"model": "a"})
        assert code == 400 and "already loaded" in body["error"]["message"]
        # GET /models: llama-server's router listing, the same as /v1/models
        assert s.request("GET", "/models") == s.request("GET", "/v1/models")
        assert s.request("POST", "/models/unload", {"model": "a"}) == (200, {"success": True})
        assert status(s)["a"]["value"] == "unloaded"
        code, body = s.request("POST", "/models/unload", {"model": "a"})
        assert code == 400 and "not loaded" in body["error"]["message"]
        code, body = s.request("POST", "/models/load", {"model": "nope"})
        assert code == 404 and body["error"]["code"] == "model_not_found"
        code, body = s.request("POST", "/models/load", {})
        assert code == 400 and body["error"]["param"] == "model"
        # a model unloaded while a stream runs: the stream is cut, not the server
        stream = oai(s).chat.completions.create(model="b", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=2000, stream=True)
        next(iter(stream))
        assert s.request("POST", "/models/unload", {"model": "b"}) == (200, {"success": True})
        finish = [c.choices[0].finish_reason for c in stream if c.choices]
        assert finish[-1] == "length"
        assert answer(s, "b", "hi", 3)  # loaded again on use
    finally:
        rc, err = s.stop()
    assert rc == 0, err


def test_one_model_server_has_no_router(tiny):
    s = tiny("--parallel", "1", "--ctx", "128")
    code, body = s.request("POST", "/models/load", {"model": "x"})
    assert code == 400 and "--models-dir" in body["error"]["message"]
    code, body = s.request("GET", "/models")
    assert code == 200 and len(body["data"]) == 1


def test_memory_budget(tmp_path):
    """--models-memory: a model's weights and KV cache (meta.memory_bytes)
    count; when a second one passes the budget, the one used last goes."""
    s = Server("--models-dir", folder(tmp_path, "a", "b"), "--models-memory", "2", "--parallel", "2", "--ctx", "4096")
    try:
        assert answer(s, "a", "hi", 3)
        _, body = s.request("GET", "/v1/models")
        used = body["data"][0]["meta"]["memory_bytes"]
        assert 1 << 20 < used < 2 << 20, used  # one fits in 2 MiB, two do not
        assert answer(s, "b", "hi", 3)
        st = status(s)
        assert st["a"]["value"] == "unloaded" and st["b"]["value"] == "loaded", st
        assert answer(s, "a", "hi", 3)  # now counted in full before it loads: b goes first
        st = status(s)
        assert st["a"]["value"] == "loaded" and st["b"]["value"] == "unloaded", st
    finally:
        rc, err = s.stop()
    assert rc == 0, err


def test_cache_ram_in_the_budget(tmp_path):
    """--cache-ram's bound counts in each model's memory for --models-memory:
    with it, one tiny model fits 12 MiB and two do not (without, both would);
    a bound that takes the whole budget is refused at start."""
    d = folder(tmp_path / "m", "a", "b")
    s = Server("--models-dir", d, "--models-memory", "12", "--cache-ram", "8", "--parallel", "2", "--ctx", "4096")
    try:
        assert answer(s, "a", "hi", 3)
        _, body = s.request("GET", "/v1/models")
        used = body["data"][0]["meta"]["memory_bytes"]
        assert (8 << 20) + (1 << 20) < used < (8 << 20) + (2 << 20), used  # 8 MiB of RAM cache, the model's < 2
        assert answer(s, "b", "hi", 3)
        st = status(s)
        assert st["a"]["value"] == "unloaded" and st["b"]["value"] == "loaded", st
    finally:
        rc, err = s.stop()
    assert rc == 0, err
    p = subprocess.run([BIN, "serve", "--port", "0", "--models-dir", d, "--models-memory", "8", "--cache-ram", "8"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "takes all of --models-memory" in p.stderr, p.stderr

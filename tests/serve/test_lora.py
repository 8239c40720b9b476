"""LoRA adapters in `clinfer serve` (server/adapters.c) through the openai
package and raw HTTP, on the tiny Llama of tests/data/peer_lora_tiny.txt
with its two adapters (tests/peer/record_lora.py; test_lora checks their
logits against llama.cpp): GET /lora-adapters lists --lora and
--lora-scaled's adapters at their scales; a request's "lora" field chooses
its own (those not listed at 0), all at 0 is the base's answer, POST
/lora-adapters sets the scales of requests without the field; requests
with different adapters served at once answer as each alone; bad ids and
shapes are 400s."""
import concurrent.futures
import json
import os
import subprocess

import openai
import pytest

from conftest import Server

SRC = os.path.join(os.path.dirname(__file__), "..", "..")
A = os.path.abspath(os.path.join(SRC, "tests/data/lora_tiny_a.gguf"))
B = os.path.abspath(os.path.join(SRC, "tests/data/lora_tiny_b.gguf"))
PROMPTS = [[92, 145, 154, 223, 50, 112, 99, 117], [51, 278, 78, 222, 46, 38, 272, 35]]


def base_args():
    with open(os.path.join(SRC, "tests/data/peer_lora_tiny.txt")) as f:
        return next(line[2:].split() for line in f if line.startswith("M "))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("lora") / "base.gguf")
    subprocess.run([os.environ["CLINFER_TINY_GGUF"], "model", path] + base_args(), check=True)
    return path


def complete(s, prompt, lora=None):
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    extra = {"lora": lora} if lora is not None else None
    r = c.completions.create(model="m", prompt=prompt, max_tokens=12, temperature=0, extra_body=extra)
    return r.choices[0].text


def test_lora_server(base):
    plain = Server("--parallel", "4", "--ctx", "128", model=base)
    try:
        base_text = [complete(plain, p) for p in PROMPTS]
    finally:
        assert plain.stop()[0] == 0
    s = Server("--parallel", "4", "--ctx", "128", "--lora", A, "--lora-scaled", B + ":0.5", model=base)
    try:
        st, body = s.request("GET", "/lora-adapters")
        assert st == 200
        assert [(a["id"], a["path"], a["scale"]) for a in body] == [(0, A, 1.0), (1, B, 0.5)]
        # every adapter at 0: the base's answers
        zero = [{"id": 0, "scale": 0}, {"id": 1, "scale": 0}]
        assert [complete(s, p, zero) for p in PROMPTS] == base_text
        # the global scales (a at 1, b at 0.5) against the same named in the request
        both = [complete(s, p) for p in PROMPTS]
        assert [complete(s, p, [{"id": 0, "scale": 1.0}, {"id": 1, "scale": 0.5}]) for p in PROMPTS] == both
        only_a = [complete(s, p, [{"id": 0, "scale": 1.0}]) for p in PROMPTS]
        assert only_a != base_text and both != only_a
        # POST sets the globals (those not listed: 0)
        st, body = s.request("POST", "/lora-adapters", json.dumps([{"id": 0, "scale": 1.0}]).encode())
        assert st == 200 and body == {"success": True}
        assert [a["scale"] for a in s.request("GET", "/lora-adapters")[1]] == [1.0, 0.0]
        assert [complete(s, p) for p in PROMPTS] == only_a
        # at once: four requests of four configurations, each as alone
        cfgs = [zero, [{"id": 0, "scale": 1.0}], [{"id": 0, "scale": 1.0}, {"id": 1, "scale": 0.5}],
                [{"id": 1, "scale": -1.0}]]
        alone = [complete(s, PROMPTS[i % 2], cfgs[i]) for i in range(4)]
        for _ in range(2):
            with concurrent.futures.ThreadPoolExecutor(4) as ex:
                got = list(ex.map(lambda i: complete(s, PROMPTS[i % 2], cfgs[i]), range(4)))
            assert got == alone
        # refusals
        for bad in ([{"id": 2, "scale": 1}], {"id": 0}, [{"id": "x", "scale": 1}]):
            st, body = s.request("POST", "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 2, "lora": bad})
            assert st == 400, body
            assert "lora" in body["error"]["message"]
        st, _ = s.request("POST", "/lora-adapters", {"id": 0, "scale": 1})
        assert st == 400
        st, _ = s.request("POST", "/lora-adapters", json.dumps([{"id": 7, "scale": 1}]).encode())
        assert st == 400
    finally:
        rc, err = s.stop()
        assert rc == 0, err


def test_lora_slot_files(base, tmp_path):
    """A slot file holds the base's cache only: saving a slot that an adapter computed is a 400, and once a
    request without adapters ran there it saves."""
    s = Server("--parallel", "1", "--ctx", "128", "--slot-save-path", str(tmp_path), "--lora", A, model=base)
    try:
        complete(s, PROMPTS[0], [{"id": 0, "scale": 1.0}])
        st, body = s.request("POST", "/slots/0?action=save", {"filename": "a.bin"})
        assert st == 400 and "LoRA" in body["error"]["message"], body
        base_text = complete(s, PROMPTS[0], [{"id": 0, "scale": 0.0}])
        st, body = s.request("POST", "/slots/0?action=save", {"filename": "a.bin"})
        assert st == 200, body
        # restored, the base's cache serves a request at scale 0 (a restored slot holds no adapter
        # entry, the job one scale per loaded adapter: both mean the base's KV)
        assert s.request("POST", "/slots/0?action=erase", {})[0] == 200
        st, body = s.request("POST", "/slots/0?action=restore", {"filename": "a.bin"})
        assert st == 200 and body["n_restored"] > 0, body
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        r = c.completions.create(model="m", prompt=PROMPTS[0], max_tokens=12, temperature=0,
                                 extra_body={"lora": [{"id": 0, "scale": 0.0}]})
        assert r.choices[0].text == base_text
        assert r.usage.prompt_tokens_details.cached_tokens > 0, r.usage
    finally:
        rc, err = s.stop()
        assert rc == 0, err

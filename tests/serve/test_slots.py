"""Slots that persist (server/slots.c, llama-server's endpoints): GET /slots,
POST /slots/{id}?action=save|restore|erase under --slot-save-path. A
conversation's slot saved, every slot erased, the file restored: the next
turn reuses the restored prefix and its greedy answer is the one it got
without the round trip; /metrics counts the actions. And the refusals: no
--slot-save-path (501), names that are not plain (400), a bad slot or
action (400), a missing file (404), a file of another model or damaged
(400, saying why), a slot running a request (409). A restore, from a file or
host memory (--cache-ram), touches its own slot alone: the other slots keep
their caches and answers, and a pool too short for the file loses one idle
cache, not all of them."""
import os
import random
import subprocess

import openai
import pytest

from conftest import TINY, Server
from test_draft import refused
from test_lora import A as LORA_A, base_args
from test_http import COMP, open_stream, read_until
from test_limits import wait_for


def chat(client, messages):
    r = client.chat.completions.create(model="m", messages=messages, max_tokens=24, temperature=0)
    return r.choices[0].message.content, r.usage.prompt_tokens_details.cached_tokens


def slots(s):
    status, body = s.request("GET", "/slots")
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def smol_slots(folder):
    """The default model, 2 slots, saving into `folder`."""
    s = Server("--parallel", "2", "--ctx", "1024", "--slot-save-path", str(folder))
    yield s
    rc, err = s.stop()
    assert rc == 0, err


def test_round_trip(smol_slots, folder):
    s = smol_slots
    client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
    turn1 = [{"role": "user", "content": "Name three colours of the rainbow."}]
    a1, _ = chat(client, turn1)
    held = [x for x in slots(s) if x["n_cached_tokens"] > 0]
    assert len(held) == 1 and not held[0]["is_processing"] and held[0]["n_ctx"] == 1024
    k, n = held[0]["id"], held[0]["n_cached_tokens"]

    status, r = s.request("POST", f"/slots/{k}?action=save", {"filename": "conv-1.bin"})
    assert status == 200, r
    assert r["id_slot"] == k and r["filename"] == "conv-1.bin" and r["n_saved"] == n
    assert r["n_written"] == os.path.getsize(folder / "conv-1.bin") and r["timings"]["save_ms"] >= 0

    # the next turn as it goes without the round trip
    turn2 = turn1 + [{"role": "assistant", "content": a1}, {"role": "user", "content": "And three animals?"}]
    want, cached = chat(client, turn2)
    assert cached > 0

    # every slot forgotten, the file restored into slot k
    for x in slots(s):
        status, r = s.request("POST", f"/slots/{x['id']}?action=erase")
        assert status == 200 and r["id_slot"] == x["id"] and r["n_erased"] >= 0, r
    assert all(x["n_cached_tokens"] == 0 for x in slots(s))
    status, r = s.request("POST", f"/slots/{k}?action=restore", {"filename": "conv-1.bin"})
    assert status == 200, r
    assert r["id_slot"] == k and r["n_restored"] == n and r["n_read"] == os.path.getsize(folder / "conv-1.bin")
    assert "restore_ms" in r["timings"]
    assert [x["n_cached_tokens"] for x in slots(s) if x["id"] == k] == [n]

    got, cached_after = chat(client, turn2)
    assert cached_after == cached  # the restored prefix, as the live cache gave it
    assert got == want
    assert s.metric("slot_saves_total") == 1
    assert s.metric("slot_restores_total") == 1
    assert s.metric("slot_erases_total") == 2


@pytest.mark.parametrize("name", ["../x.bin", "a/b", "/etc/passwd", ".hidden", "", "x" * 300, "a b", "..", "é.bin"])
def test_names_refused(smol_slots, name):
    status, r = smol_slots.request("POST", "/slots/0?action=save", {"filename": name})
    assert status == 400 and r["error"]["param"] == "filename", r


def test_bad_requests(smol_slots):
    s = smol_slots
    for path, body, code in [
        ("/slots/9?action=save", {"filename": "a.bin"}, 400),
        ("/slots/x?action=save", {"filename": "a.bin"}, 400),
        ("/slots/0?action=keep", {"filename": "a.bin"}, 400),
        ("/slots/0", {"filename": "a.bin"}, 400),
        ("/slots/0?action=save", {"filename": 5}, 400),
        ("/slots/0?action=save", {}, 400),
        ("/slots/0?action=restore", {"filename": "no-such.bin"}, 404),
    ]:
        status, r = s.request("POST", path, body)
        assert status == code, (path, body, r)
        assert r["error"]["message"], r


def test_other_model_and_damaged(smol_slots, folder, tiny):
    """A tiny model's file is refused by the default model's server; a damaged file too."""
    t = tiny("--parallel", "1", "--ctx", "256", "--slot-save-path", str(folder))
    status, r = t.request("POST", COMP, {"prompt": "once upon a time", "max_tokens": 2})
    assert status == 200, r
    status, r = t.request("POST", "/slots/0?action=save", {"filename": "tiny.bin"})
    assert status == 200 and r["n_saved"] > 0, r
    status, r = smol_slots.request("POST", "/slots/1?action=restore", {"filename": "tiny.bin"})
    assert status == 400 and "another model" in r["error"]["message"], r
    # restored where it came from, then damaged: a byte of its KV flipped
    status, r = t.request("POST", "/slots/0?action=restore", {"filename": "tiny.bin"})
    assert status == 200, r
    data = bytearray((folder / "tiny.bin").read_bytes())
    data[-20] ^= 1
    (folder / "tiny-bad.bin").write_bytes(bytes(data))
    status, r = t.request("POST", "/slots/0?action=restore", {"filename": "tiny-bad.bin"})
    assert status == 400 and "checksum" in r["error"]["message"], r
    (folder / "tiny-short.bin").write_bytes(bytes(data[: len(data) // 2]))
    status, r = t.request("POST", "/slots/0?action=restore", {"filename": "tiny-short.bin"})
    assert status == 400 and "truncated" in r["error"]["message"], r
    assert t.metric("slot_action_failures_total") == 2


def test_no_folder(tiny):
    t = tiny("--parallel", "1", "--ctx", "65536")
    status, r = t.request("POST", "/slots/0?action=save", {"filename": "a.bin"})
    assert status == 501 and "--slot-save-path" in r["error"]["message"], r
    assert slots(t)[0]["is_processing"] is False


def test_busy_slot(tiny, tmp_path):
    t = tiny("--parallel", "1", "--ctx", "65536", "--slot-save-path", str(tmp_path))
    c = open_stream(t.port, {"prompt": "a", "max_tokens": 100000})  # the tiny model never ends
    read_until(c, b"data:")
    wait_for(lambda: slots(t)[0]["is_processing"])
    view = slots(t)[0]
    assert view["n_prompt_tokens"] > 0 and view["next_token"][0]["n_decoded"] >= 0
    status, r = t.request("POST", "/slots/0?action=save", {"filename": "a.bin"})
    assert status == 409 and "processing" in r["error"]["message"], r
    c.close()
    wait_for(lambda: not slots(t)[0]["is_processing"])
    status, r = t.request("POST", "/slots/0?action=save", {"filename": "a.bin"})
    assert status == 200, r


def test_cache_ram(tmp_path):
    """--cache-ram: one slot; conversation A, then B takes the slot (A's
    cache goes to host RAM), then A's next request finds its prefix there:
    counted in /metrics, reused (cached_tokens), and the same greedy answer
    as A's first."""
    s = Server("--parallel", "1", "--ctx", "1024", "--cache-ram", "64")
    try:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        a = [{"role": "user", "content": "Write one sentence about the sea, the wind and the ships that sail "
                                         "between the islands in the long summer evenings, when the light stays late over the water, the "
                                         "harbour bells ring and the fishermen mend their nets on the quay."}]
        b = [{"role": "user", "content": "List the planets of the solar system in order from the sun, with one "
                                         "fact about each of them and its number of moons, then say which of them could hold an ocean, "
                                         "which has the longest day and which was found last, and by whom."}]
        first, cached0 = chat(client, a)
        assert cached0 == 0
        chat(client, b)
        assert s.metric("cache_ram_stores_total") == 1 and s.metric("cache_ram_entries") == 1
        assert s.metric("cache_ram_bytes") > 0
        again, cached = chat(client, a)
        assert s.metric("cache_ram_hits_total") == 1
        assert cached > 0 and s.metric("cache_ram_tokens_total") == cached
        assert again == first
        # B went to RAM in turn; the bound holds
        assert s.metric("cache_ram_entries") == 2
        assert s.metric("cache_ram_bytes") <= 64 << 20
    finally:
        rc, err = s.stop()
        assert rc == 0, err


def test_router(tmp_path):
    """--models-dir: the slot endpoints reach the model the body (or ?model=) names."""
    d = tmp_path / "models"
    d.mkdir()
    os.symlink(TINY, d / "tiny.gguf")
    s = Server("--models-dir", str(d), "--parallel", "1", "--ctx", "256", "--slot-save-path", str(tmp_path),
               "--cache-ram", "16")
    try:
        status, r = s.request("POST", COMP, {"model": "tiny", "prompt": "once upon a time", "max_tokens": 2})
        assert status == 200, r
        status, r = s.request("GET", "/slots?model=tiny")
        assert status == 200 and r[0]["n_cached_tokens"] > 0, r
        n = r[0]["n_cached_tokens"]
        status, r = s.request("POST", "/slots/0?action=save", {"model": "tiny", "filename": "r.bin"})
        assert status == 200 and r["n_saved"] == n, r
        status, r = s.request("POST", "/slots/0?action=erase&model=tiny")
        assert status == 200 and r["n_erased"] == n, r
        status, r = s.request("POST", "/slots/0?action=restore", {"model": "tiny", "filename": "r.bin"})
        assert status == 200 and r["n_restored"] == n, r
        assert s.metric("slot_restores_total") == 1 and s.metric("cache_ram_max_bytes") == 16 << 20
    finally:
        rc, err = s.stop()
        assert rc == 0, err


# ---- a restore touches its own slot alone ----------------------------------------

def letters(n, seed):
    """n random letters: the tiny model's tokens are nearly its bytes, and two such prompts share nothing."""
    r = random.Random(seed)
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def hold(t, prompts, max_tokens=64):
    """Each prompt's cache in a slot of its own: streams opened one after the other, each running (its
    slot taken) before the next is sent, then all cut; their slots keep their prompts."""
    cs = []
    for p in prompts:
        cs.append(open_stream(t.port, {"prompt": p, "max_tokens": max_tokens}))
        assert b"data:" in read_until(cs[-1], b"data:")
    for c in cs:
        c.close()
    wait_for(lambda: not any(x["is_processing"] for x in slots(t)))


def complete(t, prompt):
    """The greedy answer and the prompt tokens it reused."""
    status, r = t.request("POST", COMP, {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    assert status == 200, r
    return r["choices"][0]["text"], r["usage"]["prompt_tokens_details"]["cached_tokens"]


def slot_of(t, lo, hi=1 << 30):
    """The slot whose cache holds lo to hi tokens (one only)."""
    held = [x["id"] for x in slots(t) if lo <= x["n_cached_tokens"] < hi]
    assert len(held) == 1, slots(t)
    return held[0]


def test_restore_keeps_the_other_slot(tiny, tmp_path):
    """Two slots with cached prompts; a file restored into one: the other's
    next request reuses its prefix as before, and answers as before."""
    t = tiny("--parallel", "2", "--ctx", "1024", "--slot-save-path", str(tmp_path))
    a, b = letters(300, 1), letters(400, 2)
    hold(t, [a, b])
    ka, kb = slot_of(t, 250, 350), slot_of(t, 350)
    assert ka != kb
    want_a, cached_a = complete(t, a)
    want_b, cached_b = complete(t, b)
    assert cached_a > 250 and cached_b > 350
    status, r = t.request("POST", f"/slots/{ka}?action=save", {"filename": "a.bin"})
    assert status == 200, r
    status, r = t.request("POST", f"/slots/{ka}?action=restore", {"filename": "a.bin"})
    assert status == 200 and r["n_restored"] > 250, r
    assert slot_of(t, 350) == kb
    assert complete(t, b) == (want_b, cached_b)
    assert complete(t, a) == (want_a, cached_a)
    assert t.metric("slot_restores_total") == 1


def test_restore_into_a_full_pool(tiny, tmp_path):
    """A pool of 8192 tokens, two slots holding 3000 and 3300, and a file of
    2500 restored into the third: the pool is short, and one slot's cache
    (the least recently used) makes room; the other keeps its own, reused.
    A file longer than a slot's context costs no slot its cache."""
    t = tiny("--parallel", "3", "--ctx", "8192", "--kv-memory", "1", "--slot-save-path", str(tmp_path))
    x, b, c = letters(2500, 3), letters(3000, 4), letters(3300, 5)
    complete(t, x)
    status, r = t.request("POST", f"/slots/{slot_of(t, 2300)}?action=save", {"filename": "x.bin"})
    assert status == 200 and r["n_saved"] > 2300, r
    hold(t, [b, c], max_tokens=800)  # set aside together: 3800 and 4100 of the 8192
    kc = slot_of(t, 3150)
    held = [x["id"] for x in slots(t) if x["n_cached_tokens"] >= 2700]
    assert len(held) == 2 and kc in held, slots(t)
    kb = [k for k in held if k != kc][0]
    target = [x["id"] for x in slots(t) if x["id"] not in held][0]
    status, r = t.request("POST", f"/slots/{target}?action=restore", {"filename": "x.bin"})
    assert status == 200 and r["n_restored"] > 2300, r
    kept = [x for x in slots(t) if x["id"] in held and x["n_cached_tokens"] > 0]
    assert len(kept) == 1, slots(t)  # one made room; before, both did (room for a whole context)
    _, cached = complete(t, b if kept[0]["id"] == kb else c)
    assert cached == kept[0]["n_cached_tokens"] - 2, (cached, kept)
    # a file of more tokens than a slot's context is refused by its header: no slot's cache goes for it
    u = tiny("--parallel", "2", "--ctx", "1024", "--slot-save-path", str(tmp_path))
    hold(u, [b[:500]])
    k = slot_of(u, 400)
    status, r = u.request("POST", f"/slots/{1 - k}?action=restore", {"filename": "x.bin"})
    assert status == 400 and "tokens" in r["error"]["message"], r
    assert slot_of(u, 400) == k


def test_ram_restore_keeps_the_other_slot(tiny):
    """--cache-ram: A and B in two slots; C takes A's, the least recently
    used (A kept in host memory); A's next request loads it back into a slot
    (C's, now the least recently used): B's cache stays, reused, and B
    answers as before."""
    t = tiny("--parallel", "2", "--ctx", "1024", "--cache-ram", "16")
    a, b, c = letters(300, 6), letters(400, 7), letters(350, 8)
    hold(t, [a, b])
    kb = slot_of(t, 350)
    want_a, _ = complete(t, a)
    complete(t, b)
    complete(t, c)  # shares nothing with either: A's slot, A to host memory
    assert t.metric("cache_ram_stores_total") == 1 and slot_of(t, 320, 380) != kb
    want_b, cached_b = complete(t, b)
    got_a, cached_a = complete(t, a)
    assert t.metric("cache_ram_hits_total") == 1 and cached_a > 250 and got_a == want_a
    assert slot_of(t, 380) == kb
    assert complete(t, b) == (want_b, cached_b)


def test_unrelated_prompts_take_empty_slots(tiny):
    """Prompts that share nothing take the empty slots (then the least
    recently used), not the first slot again: each keeps its cache, reused
    by its next turn."""
    t = tiny("--parallel", "3", "--ctx", "1024")
    a, b = letters(300, 9), letters(400, 10)
    want_a, _ = complete(t, a)
    want_b, _ = complete(t, b)
    ka, kb = slot_of(t, 250, 350), slot_of(t, 350)
    assert ka != kb
    assert complete(t, a) == (want_a, slots(t)[ka]["n_cached_tokens"] - 2)
    assert complete(t, b) == (want_b, slots(t)[kb]["n_cached_tokens"] - 2)


# ---- what a server holds beside its model, counted at start -----------------------

def test_memory_refused_at_start(tmp_path):
    """--cache-ram past the host's memory is refused before the server is
    ready, the message naming every part it counts: the model's weights and
    KV, a draft model's (-md) and the laws its sampled drafts keep, LoRA
    adapters, --cache-ram."""
    err = refused("-m", TINY, "-md", TINY, "--cache-ram", str(1 << 24))
    assert "does not fit the host's memory" in err and "lower --cache-ram" in err, err
    for part in ("weights", "KV cache", "draft model (-md, weights and KV)", "draft laws (-md, sampled drafts)",
                 "--cache-ram 16384.0 GiB"):
        assert part in err, (part, err)
    base = str(tmp_path / "base.gguf")
    subprocess.run([os.environ["CLINFER_TINY_GGUF"], "model", base] + base_args(), check=True)
    err = refused("-m", base, "--lora", LORA_A, "--cache-ram", str(1 << 24))
    assert "LoRA adapters 0." in err and "--cache-ram" in err, err  # a tiny adapter: a fraction of a MiB
    # within the host's memory: served
    t = Server("--cache-ram", "16", "-md", TINY, model=TINY)
    rc, err = t.stop()
    assert rc == 0, err

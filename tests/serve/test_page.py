"""The chat page in headless Chromium, driven as a user would (keys typed,
buttons clicked with the mouse) over the DevTools protocol on
--remote-debugging-pipe (no extra package): an answer streams in; stop
mid-stream ends the server's job; settings reach the request; Markdown and
code are rendered while model output cannot inject markup; conversations
survive a reload and a new chat starts empty. Screenshots land in
$CLINFER_SCREENSHOT (and its name with -markdown) when that is set."""
import base64
import fcntl
import http.client
import http.server
import json
import os
import random
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class DevTools:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self):
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="clinfer-chromium-")

        def fds():  # the child's 3 and 4 (moved out of the way first: either may be 3 or 4 now)
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.p = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                   "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                                   "--window-size=900,700", "about:blank"],
                                  preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b""
        self.next_id = 0
        self.events = []  # (method, params) of the events read so far

    def _read(self, timeout=None):
        """The next message, or None after timeout seconds."""
        while b"\0" not in self.buf:
            if timeout is not None and not select.select([self.out_r], [], [], timeout)[0]:
                return None
            piece = os.read(self.out_r, 1 << 16)
            assert piece, "chromium closed the pipe"
            self.buf += piece
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if "method" in reply:
                self.events.append((reply["method"], reply.get("params", {})))
            elif reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def event(self, method, timeout=30):
        """The first event METHOD not taken yet (waiting for it)."""
        deadline = time.time() + timeout
        while True:
            for i, (m, params) in enumerate(self.events):
                if m == method:
                    del self.events[i]
                    return params
            left = deadline - time.time()
            assert left > 0, f"no {method} event"
            reply = self._read(left)
            if reply and "method" in reply:
                self.events.append((reply["method"], reply.get("params", {})))

    def eval(self, session, js):
        r = self.call("Runtime.evaluate", session, expression=js, returnByValue=True, awaitPromise=True)
        return r["result"].get("value")

    def close(self):
        self.p.kill()
        self.p.wait()
        os.close(self.cmd_w)
        os.close(self.out_r)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab of the page, driven with the keyboard and the mouse."""

    def __init__(self, dt, url):
        self.dt = dt
        target = dt.call("Target.createTarget", url=url)["targetId"]
        self.s = dt.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.loaded()

    def eval(self, js):
        return self.dt.eval(self.s, js)

    def wait(self, js, what, timeout=30):
        deadline = time.time() + timeout
        while not self.eval(js):
            assert time.time() < deadline, what
            time.sleep(0.02)

    def loaded(self):  # the document, its scripts and the model's name
        self.wait("document.readyState === 'complete' && !window.__old && "
                  "document.getElementById('model').textContent !== ''", "the page did not load")

    def reload(self):
        self.eval("window.__old = 1")
        self.dt.call("Page.reload", self.s)
        self.loaded()

    def type(self, element, text):
        self.click(element)
        self.dt.call("Input.insertText", self.s, text=text)

    def enter(self):
        for kind in ("keyDown", "keyUp"):
            self.dt.call("Input.dispatchKeyEvent", self.s, type=kind, key="Enter", code="Enter",
                         windowsVirtualKeyCode=13, text="\r" if kind == "keyDown" else "")

    def click(self, selector):
        """A mouse click in the middle of the element (which must be visible)."""
        box = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
                        " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                        " return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; })()")
        assert box, f"{selector} is not visible"
        for kind in ("mousePressed", "mouseReleased"):
            self.dt.call("Input.dispatchMouseEvent", self.s, type=kind, x=box[0], y=box[1], button="left",
                         clickCount=1)

    def ask(self, text):
        self.type("#q", text)
        self.enter()

    def text(self, selector):
        return self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent ?? null")

    def visible(self, selector):
        return self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                         " const c = e && getComputedStyle(e);"
                         " return !!c && c.display !== 'none' && c.visibility !== 'hidden'; })()")


@pytest.fixture
def chromium():
    if not CHROMIUM:
        pytest.skip("no chromium (scripts/setup.sh installs it)")
    dt = DevTools()
    yield dt
    dt.close()


def screenshot(page, suffix=""):
    shot = os.environ.get("CLINFER_SCREENSHOT")
    if shot:
        shot = suffix.join(os.path.splitext(shot)) if suffix else shot
        png = page.dt.call("Page.captureScreenshot", page.s, format="png")["data"]
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))


def test_page_answers(smol, chromium):
    page = Page(chromium, smol.url + "/?max_tokens=48")
    assert page.text("#model") == "· SmolLM2-135M-Instruct.Q4_1.gguf"
    page.ask("What is the capital of France?")
    page.wait("!!document.querySelector('#answer-1[data-done]')", "no answer", timeout=60)
    answer = page.text("#answer-1")
    assert page.text(".user") == "What is the capital of France?"
    assert "Paris" in answer or len(answer) > 20, answer
    assert page.eval("document.body.dataset.state") == "idle" and not page.visible("#status")
    # the speeds of this answer, under it and in the footer
    assert "tokens/s" in page.text("#stats-1") and "tokens/s" in page.text("#stats")
    screenshot(page)


def test_page_streams_an_answer(tiny, chromium):
    """The answer's text grows while the page shows "generating": every
    render is recorded in the page itself (a MutationObserver), so neither
    the polling rate nor the length of a real model's answer decides the
    test (the tiny model never ends a turn: 2000 tokens always come)."""
    s = tiny("--parallel", "1", "--ctx", "4096")
    page = Page(chromium, s.url + "/?max_tokens=2000")
    page.eval("window.__seen = new Set(); window.__states = new Set();"
              "new MutationObserver(() => { const a = document.getElementById('answer-1');"
              " if (a && !a.dataset.done) __seen.add(a.textContent);"
              " __states.add(document.body.dataset.state + getComputedStyle(document.querySelector('#status'))"
              ".visibility); }).observe(document.body, {subtree: true, childList: true, characterData: true,"
              " attributes: true}); 1")
    page.ask("go on")
    page.wait("!!document.querySelector('#answer-1[data-done]')", "no answer", timeout=120)
    partial = page.eval("[...__seen].filter(t => t !== '').length")
    assert partial >= 2, page.eval("[...__seen]")  # at least two partial states before the end
    assert "generatingvisible" in page.eval("[...__states]")  # the "generating" state shown while it streams
    assert page.eval("document.body.dataset.state") == "idle" and not page.visible("#status")
    assert s.metric("generated_tokens_total") == 2000


def test_page_stop_mid_stream(tiny, chromium):
    """Stop aborts the request: the answer stops growing, the server counts
    the request cancelled and frees its slot (the tiny model never ends a
    turn, so only the stop can end this one before 30000 tokens)."""
    s = tiny("--parallel", "1", "--ctx", "32768")
    page = Page(chromium, s.url + "/?max_tokens=30000")
    page.ask("go on for ever")
    page.wait("(document.getElementById('answer-1') || {}).textContent?.length > 20", "nothing streamed")
    assert page.eval("document.body.dataset.state") == "generating"
    assert page.visible("#stop") and not page.visible("#send")
    assert s.metric("requests_running") == 1
    page.click("#stop")
    page.wait("document.body.dataset.state === 'idle'", "still generating after stop")
    assert page.eval("!!document.querySelector('#answer-1[data-stopped]')")
    assert page.visible("#send") and not page.visible("#stop")
    n = len(page.text("#answer-1"))
    deadline = time.time() + 60  # a wait for a state, not a time limit
    while s.metric("requests_running") != 0:
        assert time.time() < deadline, "the server still runs the stopped request"
        time.sleep(0.05)
    assert s.metric("requests_cancelled_total") == 1
    generated = s.metric("generated_tokens_total")
    assert 0 < generated < 30000
    time.sleep(0.5)
    assert len(page.text("#answer-1")) == n  # no longer growing
    assert s.metric("generated_tokens_total") == generated
    assert "stopped" in page.text("#stats-1")
    # what streamed before the stop is kept: a reload shows it
    page.reload()
    assert len(page.text("#answer-1")) == n


def test_page_settings(tiny, chromium):
    """A system prompt, a temperature and max tokens typed into the settings
    are in the request the page sends (seen in Chromium's network stack) and
    the server honours them (max tokens: the tiny model never ends a turn, so
    the answer has exactly that many); they are kept across a reload."""
    s = tiny()
    page = Page(chromium, s.url + "/")
    system, temperature, max_tokens = f"You are terse {random.randrange(1000)}.", random.choice([0.2, 0.7, 1.3]), \
        random.randrange(3, 12)
    page.click("#settings summary")
    page.type("#system", system)
    page.type("#temperature", str(temperature))
    page.eval("document.getElementById('max-tokens').select()")  # typing replaces the default
    chromium.call("Input.insertText", page.s, text=str(max_tokens))
    chromium.call("Fetch.enable", page.s, patterns=[{"urlPattern": "*/v1/chat/completions"}])
    page.ask("hello")
    paused = chromium.event("Fetch.requestPaused")
    chromium.call("Fetch.continueRequest", page.s, requestId=paused["requestId"])
    body = json.loads(paused["request"]["postData"])
    assert body["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": "hello"}]
    assert body["temperature"] == temperature and body["max_tokens"] == max_tokens and body["stream"]
    page.wait("!!document.querySelector('#answer-1[data-done]')", "no answer")
    assert page.text("#stats-1").startswith(f"{max_tokens} tokens, "), page.text("#stats-1")
    chromium.call("Fetch.disable", page.s)
    page.reload()
    assert page.eval("['system', 'temperature', 'max-tokens'].map(i => document.getElementById(i).value)") == \
        [system, str(temperature), str(max_tokens)]


class Scripted(http.server.ThreadingHTTPServer):
    """A stand-in for the server on loopback: the page and its assets come
    from the real one; /v1/chat/completions answers ANSWER's pieces as
    server-sent events, slowly (so the page renders partial Markdown), and
    keeps each request's body."""

    def __init__(self, upstream, pieces, usage, timings):
        self.upstream, self.pieces, self.usage, self.timings, self.bodies = upstream, pieces, usage, timings, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(h):
                with urllib.request.urlopen(self.upstream + h.path) as r:
                    data, ctype = r.read(), r.headers["Content-Type"]
                h.send_response(200)
                h.send_header("Content-Type", ctype)
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data)

            def do_POST(h):
                self.bodies.append(json.loads(h.rfile.read(int(h.headers["Content-Length"]))))
                h.send_response(200)
                h.send_header("Content-Type", "text/event-stream")
                h.end_headers()
                chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in self.pieces]
                chunks.append({"choices": [], "usage": self.usage, "timings": self.timings})
                for c in chunks:
                    h.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                    h.wfile.flush()
                    time.sleep(0.05)
                h.wfile.write(b"data: [DONE]\n\n")

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


HOSTILE = ["Here is", " a function:\n\n", "```python\n", "def add(a, b):\n", "    return a + b\n", "```\n\n",
           "**Note** ", "<script>window.pwned = 1</script>", " <img src=x onerror=\"window.pwned = 2\">",
           " [docs](javascript:window.pwned=3)", "\n"]


def rendered_safely(page, n):
    """Answer n: Markdown and a highlighted code block; the model's markup as text, nothing run."""
    a = f"#answer-{n}"
    time.sleep(0.2)  # an <img onerror> would have fired by now
    assert page.eval("window.pwned === undefined"), page.eval("window.pwned")
    assert page.text(f"{a} strong") == "Note"
    assert "def add(a, b):" in page.text(f"{a} pre code")
    tokens = page.eval(f"[...document.querySelectorAll('{a} pre code [class^=hljs-]')].map(e => e.textContent)")
    assert "def" in tokens and "return" in tokens, tokens  # highlighted by highlight.js
    assert '<script>window.pwned = 1</script>' in page.text(a)  # shown, as text
    assert page.eval("document.querySelectorAll('#log script, #log img, #log [onerror]').length") == 0
    assert page.eval("[...document.querySelectorAll('#log a')].every(e => !/^\\s*javascript:/i.test("
                     "e.getAttribute('href') || ''))")


def test_page_markdown_conversations(tiny, chromium):
    s = tiny()
    if any(s.request("GET", f"/assets/{a}")[0] != 200 for a in ("marked.js", "purify.js", "highlight.js")):
        pytest.skip("built without libjs-marked, node-dompurify or libjs-highlight.js (scripts/setup.sh)")
    usage = {"prompt_tokens": random.randrange(5, 50), "completion_tokens": random.randrange(10, 99)}
    tps = round(random.uniform(10, 900), 1)
    fake = Scripted(s.url, HOSTILE, usage, {"predicted_per_second": tps, "prompt_n": usage["prompt_tokens"],
                                            "prompt_per_second": 321.0})
    try:
        page = Page(chromium, fake.url + "/")
        page.ask("write a function")
        seen = set()
        page.wait("document.body.dataset.state === 'generating'", "not generating")
        while not page.eval("!!document.querySelector('#answer-1[data-done]')"):
            seen.add(page.eval("(document.getElementById('answer-1') || {}).innerHTML || ''"))
            time.sleep(0.01)
        assert len(seen - {""}) >= 3, seen  # rendered as it streamed
        rendered_safely(page, 1)
        screenshot(page, "-markdown")
        assert page.text("#stats-1").startswith(f"{usage['completion_tokens']} tokens, {tps:.1f} tokens/s")
        assert page.eval("[...document.querySelectorAll('.chat')].map(e => e.textContent)") == \
            ["write a function×"]
        # a reload: the same conversation, rendered (and sanitized) again
        page.reload()
        assert page.text(".user") == "write a function"
        rendered_safely(page, 1)
        # a new chat starts empty and asks without the first one's messages
        page.click("#new")
        assert page.eval("document.getElementById('log').children.length") == 0
        page.ask("second question")
        page.wait("!!document.querySelector('#answer-1[data-done]')", "no answer in the new chat")
        assert fake.bodies[-1]["messages"] == [{"role": "user", "content": "second question"}]
        titles = page.eval("[...document.querySelectorAll('.chat span')].map(e => e.textContent)")
        assert sorted(titles) == ["second question", "write a function"], titles
        # back to the first: its messages, and a follow-up carries them
        page.click(".chat:not(.current) span")
        assert page.text(".user") == "write a function"
        page.ask("and a test?")
        page.wait("!!document.querySelector('#answer-3[data-done]')", "no follow-up answer")
        sent = fake.bodies[-1]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"] and sent[1]["content"] == "".join(HOSTILE)
        page.reload()  # the one shown is kept too
        assert page.eval("[...document.querySelectorAll('.user')].map(e => e.textContent)") == \
            ["write a function", "and a test?"]
        assert page.text(".chat.current span") == "write a function"
        page.click(".chat:not(.current) button")  # delete the other one: gone, after a reload too
        page.reload()
        assert page.eval("[...document.querySelectorAll('.chat span')].map(e => e.textContent)") == \
            ["write a function"]
    finally:
        fake.shutdown()
        fake.server_close()


ASSETS = {"marked.js": ["/usr/share/javascript/marked/marked.min.js"],
          "purify.js": ["/usr/share/nodejs/dompurify/dist/purify.min.js"],
          "highlight.js": [os.path.join(os.path.dirname(__file__), "../../server/assets/highlight-notice.js"),
                           "/usr/share/javascript/highlight.js/highlight.min.js"],
          "highlight.css": ["/usr/share/javascript/highlight.js/styles/default.css"]}


def test_assets(tiny):
    """The page's libraries: Debian's files as they are (a notice first where
    the file has none), each opening with its licence notice, public under
    --api-key, GET and HEAD only; a name not embedded is 404."""
    if not all(os.path.exists(f) for files in ASSETS.values() for f in files):
        pytest.skip("libjs-marked, node-dompurify or libjs-highlight.js missing (scripts/setup.sh)")
    s = tiny("--api-key", "k")
    for name, files in ASSETS.items():
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("GET", "/assets/" + name)
        r = c.getresponse()
        data = r.read()
        assert r.status == 200, (name, r.status)
        assert r.getheader("Content-Type").startswith("text/css" if name.endswith(".css") else "text/javascript")
        want = b"".join(open(f, "rb").read() for f in files)
        assert data == want, name
        assert re.search(rb"licen[cs]e|\(c\)|copyright", data[:400], re.I), name
        c.close()
    assert s.request("HEAD", "/assets/marked.js")[0] == 200
    assert s.request("GET", "/assets/nothing.js")[0] == 404
    assert s.request("GET", "/assets/")[0] == 404
    status, body = s.request("POST", "/assets/marked.js", body=b"{}")
    assert status == 405 and body["error"]["code"] == "method_not_allowed"


def test_page_picks_a_model(chromium, tmp_path):
    """A server with several models (--models-dir): the page offers them
    (?model=NAME picks one), and the one picked answers, loaded for it."""
    from conftest import Server
    from test_router import folder
    s = Server("--models-dir", folder(tmp_path, "a", "b"), "--parallel", "1", "--ctx", "256")
    try:
        page = Page(chromium, s.url + "/?max_tokens=4")
        page.wait("!document.getElementById('models').hidden", "no model picker")
        assert page.eval("[...document.querySelectorAll('#models option')].map(o => o.value)") == ["a", "b"]
        assert page.eval("document.getElementById('models').value") == "a"
        page.eval("(() => { const p = document.getElementById('models'); p.value = 'b';"
                  " p.dispatchEvent(new Event('change')); })()")
        page.ask("hi")
        page.wait("!!document.querySelector('#answer-1[data-done]')", "no answer", timeout=60)
        _, body = s.request("GET", "/v1/models")
        assert {m["id"]: m["status"]["value"] for m in body["data"]} == {"a": "unloaded", "b": "loaded"}
        # the pick is remembered; ?model= overrides it
        assert Page(chromium, s.url).eval("document.getElementById('models').value") == "b"
        other = Page(chromium, s.url + "/?model=a")
        other.wait("!document.getElementById('models').hidden", "no model picker")
        assert other.eval("document.getElementById('models').value") == "a"
    finally:
        rc, err = s.stop()
    assert rc == 0, err

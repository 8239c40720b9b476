"""The chat page in headless Chromium, driven as a user would: it loads,
a question typed into it and sent with Enter gets an answer streamed in
(the DevTools protocol over --remote-debugging-pipe: no extra package). A
screenshot lands in $CLINFER_SCREENSHOT when that is set."""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

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

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                piece = os.read(self.out_r, 1 << 16)
                assert piece, "chromium closed the pipe"
                self.buf += piece
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def eval(self, session, js):
        r = self.call("Runtime.evaluate", session, expression=js, returnByValue=True, awaitPromise=True)
        return r["result"].get("value")

    def close(self):
        self.p.kill()
        self.p.wait()
        os.close(self.cmd_w)
        os.close(self.out_r)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.mark.skipif(not CHROMIUM, reason="no chromium (scripts/setup.sh installs it)")
def test_page_streams_an_answer(smol):
    dt = DevTools()
    try:
        target = dt.call("Target.createTarget", url=smol.url + "/?max_tokens=48")["targetId"]
        page = dt.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        deadline = time.time() + 30
        while dt.eval(page, "document.readyState + '/' + document.getElementById('model').textContent") != \
                "complete/· SmolLM2-135M-Instruct.Q4_1.gguf":
            assert time.time() < deadline, "the page did not load"
            time.sleep(0.05)
        # type the question and press Enter, as a person does
        dt.eval(page, "document.getElementById('q').focus()")
        dt.call("Input.insertText", page, text="What is the capital of France?")
        for kind in ("keyDown", "keyUp"):
            dt.call("Input.dispatchKeyEvent", page, type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                    text="\r" if kind == "keyDown" else "")
        seen = set()  # the answer's text as it grows: streamed, not all at once
        while not dt.eval(page, "!!document.querySelector('#answer-1[data-done]')"):
            assert time.time() < deadline, "no answer"
            seen.add(dt.eval(page, "(document.getElementById('answer-1') || {}).textContent || ''"))
            time.sleep(0.01)
        answer = dt.eval(page, "document.getElementById('answer-1').textContent")
        assert dt.eval(page, "document.querySelector('.user').textContent") == "What is the capital of France?"
        assert "Paris" in answer or len(answer) > 20, answer
        assert len(seen - {""}) >= 2, seen  # at least two partial states before the end
        assert "tokens/s" in dt.eval(page, "document.getElementById('stats').textContent")
        shot = os.environ.get("CLINFER_SCREENSHOT")
        if shot:
            png = dt.call("Page.captureScreenshot", page, format="png")["data"]
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))
    finally:
        dt.close()

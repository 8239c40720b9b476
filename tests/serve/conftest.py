"""`clinfer serve` started as a user would: on a free loopback port (the
port it prints), ready once /health answers 200, stopped with SIGTERM
(exit 0). CLINFER_BIN is the command, CLINFER_TINY_MODEL a tiny random
model that never ends a turn (for the tests where text does not matter);
the default model is the catalogue's default (SmolLM2-135M)."""
import http.client
import json
import os
import re
import signal
import subprocess
import time

import pytest

BIN = os.environ["CLINFER_BIN"]
TINY = os.environ["CLINFER_TINY_MODEL"]


class Server:
    def __init__(self, *args, model=None):
        cmd = [BIN, "serve", "--port", "0", *args] + (["-m", model] if model else [])
        self.p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        for _ in range(8):  # warnings (a base model's) may come first
            line = self.p.stderr.readline()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
            if m or not line.startswith("clinfer: warning:"):
                break
        assert m, f"no 'listening' line: {line!r}"
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"
        self.health = []  # the statuses /health gave until ready
        deadline = time.time() + 120
        while time.time() < deadline:
            status, body = self.request("GET", "/health")
            self.health.append((status, body))
            if status == 200:
                break
            assert status == 503 and body["status"] == "loading model", body
            assert self.p.poll() is None, self.p.stderr.read()
            time.sleep(0.02)
        assert self.health[-1][0] == 200

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, decoded JSON or text); body: a dict (JSON) or bytes."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        self.last_headers = dict(r.getheaders())
        c.close()
        if r.getheader("Content-Type", "").startswith("application/json"):
            return r.status, json.loads(data)
        return r.status, data.decode()

    def metric(self, name, headers=None):
        _, text = self.request("GET", "/metrics", headers=headers)
        m = re.search(rf"^clinfer_{name}\{{[^}}]*\}} (\S+)$", text, re.M)
        return float(m.group(1))

    def stop(self, timeout=30):
        """SIGTERM (unless it has ended already); the exit status and what it printed."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        err = self.p.communicate(timeout=timeout)[1] if not self.p.stderr.closed else ""
        return self.p.returncode, err


@pytest.fixture(scope="session")
def smol():
    """The default model, 8 slots of 512 tokens."""
    s = Server("--parallel", "8", "--ctx", "512")
    yield s
    rc, err = s.stop()
    assert rc == 0, err


@pytest.fixture
def tiny():
    """Servers on the tiny model with the options given; each must stop with 0."""
    started = []

    def start(*args, model=TINY):
        s = Server(*args, model=model)
        started.append(s)
        return s

    yield start
    for s in started:  # stopped here or by the test: exit 0 either way (a crash is not)
        rc, err = s.stop()
        assert rc == 0, err


def pytest_runtest_logreport(report):
    """Every skipped test goes into $CLINFER_SKIP_LOG as tests/support/skip.py
    writes it ("missing": under CI=true tests/report.py fails the run)."""
    if report.skipped:
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
        import skip
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        skip.note("serve:" + report.nodeid.split("::", 1)[-1], "missing", reason)

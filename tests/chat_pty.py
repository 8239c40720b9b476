#!/usr/bin/env python3
"""`clinfer chat` as a user meets it: on a pseudo-terminal, /help lists the
commands (and is not sent to the model), the up arrow recalls the last line
(libedit), and /exit prints the totals line; with stdin not a terminal, the
answers alone on stdout (no banner, no prompt, no echo).

On the cache's SmolLM2 (a chat template); exits 77 (skipped) without it.
No check depends on what the model answers or how long it runs.

usage: chat_pty.py CLINFER
"""
import os
import pty
import re
import select
import subprocess
import sys
import time

BIN = sys.argv[1]
MODEL_DIR = os.environ.get("CLINFER_MODEL_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clinfer", "models")
MODEL = os.path.join(MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(MODEL):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
    import skip
    skip.skip("chat_pty", "missing", "no %s (make test-models)" % MODEL)
ARGS = [BIN, "chat", "-m", MODEL, "-n", "4", "-c", "256"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


class Term:
    """The child on a pseudo-terminal; `seen` is everything it wrote."""

    def __init__(self):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(BIN, ARGS)
        self.seen = b""

    def read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return True
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # EIO: the child is gone
            return False
        self.seen += data
        return bool(data)

    def wait_for(self, pattern, start, timeout=300):
        """Whether `pattern` (bytes, a regex) appears after offset `start`."""
        end = time.time() + timeout
        while time.time() < end:
            if re.search(pattern, self.seen[start:]):
                return True
            if not self.read(0.2):
                return bool(re.search(pattern, self.seen[start:]))
        return False

    def send(self, data):
        mark = len(self.seen)
        os.write(self.fd, data)
        return mark

    def finish(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end and self.read(0.2):
            pass
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


PROMPT = rb"(^|\n|\r)> "
t = Term()
check(t.wait_for(PROMPT, 0), "the prompt on a terminal")
check(b"/help" in t.seen, "the banner names /help")

mark = t.send(b"/help\r")
check(t.wait_for(rb"/reset.*\n.*/exit", mark) and t.wait_for(PROMPT, mark), "/help lists the commands")
mark = t.send(b"/bogus\r")
check(t.wait_for(rb"unknown command '/bogus'", mark) and t.wait_for(PROMPT, mark),
      "an unknown /command is not sent to the model")

word = "zebra%d" % (os.getpid() % 1000)
mark = t.send(word.encode() + b"\r")
check(t.wait_for(PROMPT, mark + len(word) + 1), "an answer, then the prompt again")
# the up arrow: libedit puts the last line back on the prompt line
mark = t.send(b"\x1b[A")
check(t.wait_for(re.escape(word.encode()), mark, timeout=10), "the up arrow recalls the last line")
mark = t.send(b"\r")
check(t.wait_for(PROMPT, mark + 1), "the recalled line is sent as a turn")
mark = t.send(b"/exit\r")
rc = t.finish()
check(rc == 0, "exit status %d after /exit" % rc)
tail = t.seen[mark:].decode(errors="replace")
m = re.search(r"clinfer chat: (\d+) turns \| prompt eval (\d+) tokens in [0-9.]+ s \([0-9.]+ t/s\) \| "
              r"eval (\d+) tokens in [0-9.]+ s \([0-9.]+ t/s\)", tail)
check(bool(m), "the totals line at exit")
if m:
    turns, n_prompt, n_eval = (int(g) for g in m.groups())
    check(turns == 2, "2 turns counted (%d)" % turns)
    # a real model's answers may end at any token: no lower bound; at most -n 4 evaluations a turn
    check(n_prompt > 2 * len(word) // 8 and 0 <= n_eval <= 2 * 4, "tokens counted (prompt %d, eval %d, -n 4 a turn)"
          % (n_prompt, n_eval))

# stdin not a terminal: text in, answers out
p = subprocess.run(ARGS, input=b"hello\n/help\nhi there\n", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   timeout=300)
out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
check(p.returncode == 0, "filter: exit status %d" % p.returncode)
check(out.strip() != "" and "> " not in out and "clinfer" not in out and "/reset" not in out,
      "filter: only answers on stdout (%r)" % out[:80])
check("> " not in err and "context" not in err, "filter: no prompt nor banner on stderr")
check("/reset" in err and re.search(r"clinfer chat: 2 turns \|", err) is not None,
      "filter: /help still answers (stderr) and 2 turns reach the model")

print("%d failures" % len(failures) if failures else "all passed")
sys.exit(1 if failures else 0)

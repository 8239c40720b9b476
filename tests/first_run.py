#!/usr/bin/env python3
"""What a newcomer sees on a first run, through a pseudo-terminal (issue 29).

usage: first_run.py CLINFER TINY_GGUF_TOOL

On an empty kernel cache (CLINFER_CACHE_DIR and PoCL's own cache fresh) the
answer on the terminal holds no compiler line ("N warnings generated."), the
kernels are built before the text starts (the build notice comes before it),
weight progress is redrawn with \\r on a terminal only (a file gets plain
lines), and the speeds line counts what it measures: -n 1 has no eval rate,
-n N has N - 1 eval tokens (llama.cpp's "prompt eval" / "eval" split)."""
import os
import pty
import re
import select
import subprocess
import sys
import tempfile

BIN, TOOL = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("  | " + detail.replace("\n", "\n  | "))


def on_tty(argv, env):
    """Runs argv with stdout and stderr on one pseudo-terminal: what the user sees, in order."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 600)
        if not r:
            p.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    p.wait()
    os.close(master)
    return p.returncode, out.decode("utf-8", "replace").replace("\r\n", "\n")


def stats_line(text):
    lines = [l for l in text.split("\n") if re.match(r"^clinfer: .* \| load [0-9.]+ s", l)]
    return lines[-1] if lines else ""


with tempfile.TemporaryDirectory(prefix="clinfer-first-") as w:
    tiny = os.path.join(w, "tiny.gguf")
    subprocess.run([TOOL, "model", tiny, "--no-eog"], check=True)  # no end token: the counts below are exact
    env = dict(os.environ)
    for v in ("CLINFER_KERNEL_WARNINGS", "CLINFER_KERNEL_DIR", "CLINFER_DEVICE", "CLINFER_MODEL"):
        env.pop(v, None)
    env["CLINFER_CACHE_DIR"] = os.path.join(w, "kcache")
    env["POCL_CACHE_DIR"] = os.path.join(w, "pocl")  # PoCL compiles afresh: its warnings would show

    # 1. the first run, on a terminal
    rc, seen = on_tty([BIN, "run", "-m", tiny, "-p", "hi", "-n", "5"], env)
    check(rc == 0, "first run on a terminal: exit 0", seen)
    check(not re.search(r"warnings? generated", seen), "first run: no compiler warnings on the terminal", seen)
    notice = seen.find("building kernels")
    stats = stats_line(seen)
    check(notice >= 0, "first run: kernels announced", seen)
    # the answer lies between the notice's line and the speeds line; nothing of the library in it
    answer = seen[seen.find("\n", notice) + 1:seen.rfind(stats)] if notice >= 0 and stats else ""
    check(stats != "" and "clinfer" not in answer and "warning" not in answer,
          "first run: the kernels are built before the text, the text is only the model's", repr(seen))
    m = re.search(r"\| prompt eval (\d+) tokens, [0-9.]+ t/s \| eval (\d+) tokens, [0-9.]+ t/s \| generated (\d+) tokens", stats)
    n_prompt = len(subprocess.run([BIN, "tokenize", "-m", tiny, "-p", "hi"], capture_output=True, text=True,
                                  env=env).stdout.split())
    check(m is not None and int(m.group(1)) == n_prompt and int(m.group(3)) == 5 and int(m.group(2)) == 4,
          "-n 5: prompt eval N tokens, eval 4 tokens (the first comes from the prompt pass), generated 5", stats)
    check(re.search(r"\| kernels [0-9.]+ s \|", stats) is not None, "first run: kernel builds timed apart", stats)

    # 2. -n 1: no meaningless rate
    rc, seen = on_tty([BIN, "run", "-m", tiny, "-p", "hi", "-n", "1"], env)
    stats = stats_line(seen)
    check(rc == 0 and "| eval none (" in stats and "generated 1 tokens" in stats and
          not re.search(r"\| eval [0-9]+ tokens", stats), "-n 1: 'eval none', no generated rate", stats)

    # 3. into a file (a log): plain lines only (a load under a second shows no progress at all)
    with open(os.path.join(w, "err"), "wb") as err:
        r = subprocess.run([BIN, "run", "-m", tiny, "-p", "hi", "-n", "3"], stdout=subprocess.DEVNULL, stderr=err,
                           env=env)
    logged = open(os.path.join(w, "err"), "rb").read()
    check(r.returncode == 0 and b"\r" not in logged, "stderr to a file: no \\r progress", repr(logged))
    check(re.search(rb"\| eval 2 tokens, [0-9.]+ t/s \| generated 3 tokens", logged) is not None,
          "stderr to a file: the same speeds line (-n 3: eval 2)", repr(logged))

    # 4. the developers' switch keeps PoCL's warnings: -w is the only difference
    env2 = dict(env, CLINFER_KERNEL_WARNINGS="1", CLINFER_CACHE_DIR=os.path.join(w, "kcache2"),
                POCL_CACHE_DIR=os.path.join(w, "pocl2"))
    r = subprocess.run([BIN, "run", "-m", tiny, "-p", "hi", "-n", "2"], capture_output=True, env=env2)
    check(r.returncode == 0, "CLINFER_KERNEL_WARNINGS=1: builds and runs", r.stderr.decode(errors="replace"))

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("all passed")

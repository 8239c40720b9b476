"""The server's limits: slots and queue (a burst is taken while slots are
free), and connections (a client's connections capped, a request's headers
and body bounded in time, /health answering for the others)."""
import json
import socket
import threading
import time

from test_http import COMP, open_stream, read_until

LONG = {"prompt": "a", "max_tokens": 100000}  # the tiny model never ends: these run until closed


def status_of(c):
    head = read_until(c, b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None


def wait_for(cond, seconds=30):
    deadline = time.time() + seconds
    while not cond() and time.time() < deadline:
        time.sleep(0.02)
    assert cond()


def burst(port, n):
    """n streaming requests sent at once; their sockets and statuses."""
    socks, statuses = [None] * n, [None] * n
    go = threading.Barrier(n)

    def one(i):
        go.wait()
        socks[i] = open_stream(port, LONG)
        statuses[i] = status_of(socks[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return socks, statuses


def test_burst_fills_slots_then_queue(tiny):
    """--parallel 4 --queue 4: 8 requests at once are all taken; a 9th is refused."""
    s = tiny("--parallel", "4", "--queue", "4", "--ctx", "65536")
    socks, statuses = burst(s.port, 8)
    assert statuses == [200] * 8
    wait_for(lambda: s.metric("requests_running") == 4)
    assert s.metric("requests_queued") == 4
    status, answer = s.request("POST", COMP, {"prompt": "c", "max_tokens": 2})
    assert status == 503 and answer["error"]["code"] == "queue_full"
    for c in socks:
        c.close()


def test_queue_zero(tiny):
    """--queue 0: no waiting room, but a free slot takes the request."""
    s = tiny("--parallel", "2", "--queue", "0", "--ctx", "65536")
    status, r = s.request("POST", COMP, {"prompt": "a", "max_tokens": 3})
    assert status == 200 and r["usage"]["completion_tokens"] == 3
    socks, statuses = burst(s.port, 2)
    assert statuses == [200, 200]
    status, answer = s.request("POST", COMP, {"prompt": "c", "max_tokens": 2})
    assert status == 503 and answer["error"]["code"] == "queue_full"
    for c in socks:
        c.close()

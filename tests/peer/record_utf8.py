#!/usr/bin/env python3
"""Records Python's UTF-8 codec's verdicts on byte strings near the edges
(overlongs, surrogates, U+10FFFF, truncations, stray continuation bytes)
into tests/data/utf8_python.txt, for tests/test_bytes.c.

One line per string: its bytes in hex, then "-" when bytes.decode('utf-8')
refuses it, or its code points in hex joined by ",". The strings come from a
fixed seed, so the file is reproducible: python3 tests/peer/record_utf8.py
"""
import os
import random

EDGE = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC,
        0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFB, 0xFC, 0xFE, 0xFF]


CPS = [0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x3FFFF, 0x40000,
       0xFFFFF, 0x100000, 0x10FFFF]


def sample(rng):
    if rng.random() < 0.5:  # edge bytes and random bytes
        n = rng.randint(1, 8)
        return bytes(rng.choice(EDGE) if rng.random() < 0.7 else rng.randrange(256) for _ in range(n))
    # characters near the edges of each length, then perhaps one byte changed or the end cut
    s = bytearray()
    for _ in range(rng.randint(1, 3)):
        cp = rng.choice(CPS) if rng.random() < 0.5 else rng.randrange(0x110000)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        s += chr(cp).encode("utf-8")
    r = rng.random()
    if r < 0.3:
        s[rng.randrange(len(s))] = rng.choice(EDGE)
    elif r < 0.45 and len(s) > 1:
        del s[rng.randrange(1, len(s)) :]
    return bytes(s)


def main():
    rng = random.Random(38)
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "utf8_python.txt")
    seen = set()
    lines = []
    while len(lines) < 4000:
        b = sample(rng)
        if b in seen:
            continue
        seen.add(b)
        try:
            verdict = ",".join("%x" % ord(c) for c in b.decode("utf-8"))
        except UnicodeDecodeError:
            verdict = "-"
        lines.append("%s %s" % (b.hex(), verdict))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

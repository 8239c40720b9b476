#!/usr/bin/env python3
"""Constrained decoding, one build against another, in interleaved rounds:
`clinfer bench -m MODEL --json-schema bench/schemas/api_object.json -n 128
-r 1 --json` from each build in turn, then the medians of tg free, tg under
the schema, their ratio and the grammar's cost a token, per build.

    python3 bench/schema_builds_ab.py MODEL ROUNDS BEFORE/clinfer AFTER/clinfer
"""
import json, subprocess, statistics, sys
if len(sys.argv) != 5:
    sys.exit(__doc__)
model, rounds = sys.argv[1], int(sys.argv[2])
bins = {"before": sys.argv[3], "after": sys.argv[4]}
rows = {k: [] for k in bins}
for r in range(rounds):
    for k, b in bins.items():
        out = subprocess.run([b, "bench", "-m", model, "--json-schema", "bench/schemas/api_object.json", "-n", "128", "-r", "1", "--json"],
                             capture_output=True, text=True)
        c = json.loads(out.stdout.strip().splitlines()[-1])
        rows[k].append((c["tg_free"], c["tg_grammar"], c["ratio"], c["grammar_ms_per_token"]))
        print(f"round {r+1} {k}: {c['tg_free']:.1f} -> {c['tg_grammar']:.1f} t/s ({100*c['ratio']:.1f}%), {c['grammar_ms_per_token']:.3f} ms/token", flush=True)
for k, v in rows.items():
    med = [statistics.median(x[i] for x in v) for i in range(4)]
    print(f"median {k}: free {med[0]:.1f}, schema {med[1]:.1f} t/s, ratio {100*med[2]:.1f}%, grammar {med[3]:.3f} ms/token")

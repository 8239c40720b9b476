#!/bin/sh
# constrained/free tg128 on SmolLM2 and Gemma 3 270M, before (BEFORE: a build
# of main 5d000d2, its clinfer and clinfer-tools) and after (./build), one
# process each, alternating before/after and the models, 4 rounds
cd "$(dirname "$0")/../../.." || exit 1
BEFORE=${BEFORE:?a build directory of main before the device mask}
for i in 1 2 3 4; do
  for m in smollm2-135m gemma3-270m; do
    echo "== $i $m before $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$BEFORE"/clinfer bench -m $m --json-schema bench/schemas/api_object.json -r 3 -n 128 --json 2>&1 | tail -1
    echo "== $i $m after $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    ./build/clinfer bench -m $m --json-schema bench/schemas/api_object.json -r 3 -n 128 --json 2>&1 | tail -1
  done
done
echo END

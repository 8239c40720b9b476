#!/bin/sh
# constrained/free tg128 on SmolLM2 and Gemma 3 270M, the default (k best) path, 4 processes each, alternating models
cd "$(dirname "$0")/../../.." || exit 1
for i in 1 2 3 4; do
  for m in smollm2-135m gemma3-270m; do
    echo "== $i $m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    ./build/clinfer bench -m $m --json-schema bench/schemas/api_object.json -r 3 -n 128 --json 2>&1 | tail -1
  done
done
echo END

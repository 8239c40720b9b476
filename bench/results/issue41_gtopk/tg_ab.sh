#!/bin/sh
# Constrained/free tg before (CLINFER_GRAMMAR_TOP_K=0: the whole-row path)
# and after (the device's k best), one process each, alternating, 3 pairs.
cd "$(dirname "$0")/../../.." || exit 1
for i in 1 2 3; do
  for mode in 0 default; do
    if [ $mode = 0 ]; then export CLINFER_GRAMMAR_TOP_K=0; else unset CLINFER_GRAMMAR_TOP_K; fi
    echo "== pair $i mode $mode $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    nice -n 15 ./build/clinfer bench --json-schema bench/schemas/api_object.json -r 3 -n 128 --json 2>&1 | tail -1
  done
done
echo END

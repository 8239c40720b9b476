#!/bin/sh
# models/fetch.sh without the network: an unknown name fails listing the
# catalogue; a model already in the cache and intact is found by its size
# and SHA-256, not fetched again (checked on the default model when this
# machine has it).
#
# usage: fetch_model.sh SOURCE_DIR
set -u
. "$(dirname "$0")/support/skip.sh"
SRC=$1
W=$(mktemp -d /tmp/clinfer-fetch-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
failures=0

sh "$SRC/models/fetch.sh" no-such-model >"$W/out" 2>"$W/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "^fetch.sh: 'no-such-model' is not in the catalogue (smollm2-135m, gemma3-270m" "$W/err"
then echo "ok   unknown name: exit 2, lists the catalogue"
else echo "FAIL: unknown name: exit $rc, stderr: $(cat "$W/err")"; failures=$((failures + 1)); fi

CACHE=${CLINFER_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/models}
FILE=$(awk -F'\t' '!/^#/ && NF { print $2; exit }' "$SRC/models/catalogue.tsv")
if [ -f "$CACHE/$FILE" ]; then
  mkdir "$W/cache" && ln -s "$CACHE/$FILE" "$W/cache/$FILE"
  out=$(CLINFER_MODEL_DIR="$W/cache" sh "$SRC/models/fetch.sh" 2>"$W/err")
  rc=$?
  if [ "$rc" -eq 0 ] && [ "$out" = "$W/cache/$FILE" ] && [ ! -s "$W/err" ]
  then echo "ok   cached default: its path, nothing fetched"
  else echo "FAIL: cached default: exit $rc, stdout '$out', stderr: $(cat "$W/err")"; failures=$((failures + 1)); fi
else
  skip_note missing "cached default: $CACHE/$FILE is not here (make model)"
fi
exit $((failures > 0))

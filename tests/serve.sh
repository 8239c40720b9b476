#!/bin/sh
# `clinfer serve` through its clients: the official openai and anthropic
# Python packages (pip-installed into a venv over Debian's python3 and
# pytest), raw HTTP,
# and headless Chromium on the chat page (tests/serve/).
#
# usage: serve.sh CLINFER TINY_GGUF BUILD_DIR [PYTEST_ARGS...]
# PYTEST_ARGS (default: the whole tests/serve folder) let ctest run the
# folder as two tests that share the venv (serve, serve_apis).
set -u
BIN=$1 TOOL=$2 BUILD=$3
shift 3
SRC=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/clinfer-serve-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL CLINFER_API_KEY

PY=""
for p in python3 /usr/bin/python3; do
    if "$p" -c "import pytest, venv" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "FAIL: no python3 with pytest and venv (make deps installs them)"; exit 1; }
VENV=$BUILD/servevenv
# the venv made and filled once, under a lock: the two serve tests start together
exec 9>"$BUILD/servevenv.lock"
flock 9 || { echo "FAIL: flock $BUILD/servevenv.lock"; exit 1; }
[ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$VENV" || { echo "FAIL: python3 -m venv"; exit 1; }
"$VENV/bin/python" -c "import openai, anthropic, jsonschema" 2>/dev/null ||
    "$VENV/bin/python" -m pip install -q openai anthropic jsonschema >"$W/log" 2>&1 ||
    { cat "$W/log"; echo "FAIL: pip install openai anthropic jsonschema"; exit 1; }
flock -u 9
[ $# -gt 0 ] || set -- "$SRC/tests/serve"
"$TOOL" model "$W/tiny-noeog.gguf" --no-eog || { echo "FAIL: tiny_gguf"; exit 1; }
CLINFER_BIN=$BIN CLINFER_TINY_MODEL=$W/tiny-noeog.gguf CLINFER_TINY_GGUF=$TOOL \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"

#!/bin/sh
# The Python package as a user installs it: the library installed
# (`cmake --install` into a scratch prefix, found by the loader), a venv
# with the system's site-packages (numpy, pytest, setuptools), `pip install
# ./bindings/python` without network, then its pytest suite against the
# installed clinfer command and the default model.
#
# usage: python.sh BUILD_DIR SOURCE_DIR TINY_GGUF
set -u
BUILD=$1 SRC=$2 TOOL=$3
W=$(mktemp -d /tmp/clinfer-python-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL CLINFER_LIBRARY

# The first python3 with what the package and its tests need (a pyenv one
# may lack pytest; scripts/setup.sh installs Debian's python3-pytest,
# python3-numpy and python3-venv).
PY=""
for p in python3 /usr/bin/python3; do
    if "$p" -c "import numpy, pytest, setuptools, venv" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "FAIL: no python3 with numpy, pytest and setuptools (make deps installs them)"; exit 1; }

VENV=$BUILD/pyvenv
[ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$VENV" || { echo "FAIL: python3 -m venv"; exit 1; }
# pip builds in the folder it is given: a copy keeps the source tree clean
cp -r "$SRC/bindings/python" "$W/src"
"$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index --force-reinstall "$W/src" \
    >"$W/log" 2>&1 || { cat "$W/log"; echo "FAIL: pip install ./bindings/python"; exit 1; }
"$TOOL" model "$W/tiny-noeog.gguf" --no-eog || { echo "FAIL: tiny_gguf"; exit 1; }
cmake --install "$BUILD" --prefix "$W/prefix" >"$W/log" 2>&1 || { cat "$W/log"; echo "FAIL: cmake --install"; exit 1; }

# from a neutral folder, so that `import clinfer` is the installed package
cd "$W" && CLINFER_BIN=$W/prefix/bin/clinfer LD_LIBRARY_PATH=$W/prefix/lib CLINFER_TINY_MODEL=$W/tiny-noeog.gguf \
    CLINFER_SOURCE_DIR=$SRC \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$W/src/tests"

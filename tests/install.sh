#!/bin/sh
# What a user of the library does, on a tiny model: `cmake --install` into a
# scratch prefix, build examples/simple.c with `pkg-config --cflags --libs
# clinfer` and with find_package(clinfer) from a CMake project, and from the
# .deb (`cpack -G DEB`, unpacked with dpkg -x, not installed); each program
# must print what the installed `clinfer run` prints. Also: the library
# exports only the API, the package declares its run-time dependencies, and
# the license (MIT) travels with every form: the .deb's copyright file in
# Debian's format with LICENSE's text, the .pc, the CMake package, the
# Python sdist and wheel.
# Registered with ctest (CMakeLists.txt).
#
# usage: install.sh BUILD_DIR SOURCE_DIR TINY_GGUF
set -u
. "$(dirname "$0")/support/skip.sh"
BUILD=$1 SRC=$(cd "$2" && pwd) TOOL=$3
W=$(mktemp -d /tmp/clinfer-install-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL PKG_CONFIG_PATH
CC=${CC:-cc}
failures=0

fail() {
    echo "FAIL: $1"
    [ -s "$W/log" ] && sed 's/^/  | /' "$W/log"
    failures=$((failures + 1))
}

# PREFIX LIBDIR NAME PROGRAM: PROGRAM (built against PREFIX) prints the
# same text as PREFIX's clinfer.
same_as_cli() {
    "$1/bin/clinfer" run -m "$W/tiny.gguf" -p "hi" -n 12 >"$W/want" 2>"$W/log" || { fail "$3: clinfer run"; return; }
    LD_LIBRARY_PATH="$2" "$4" "$W/tiny.gguf" "hi" 12 >"$W/got" 2>"$W/log" || { fail "$3: the example failed"; return; }
    cmp -s "$W/want" "$W/got" || { diff "$W/want" "$W/got" >"$W/log"; fail "$3: the example's text differs from clinfer run's"; }
}

# 0. the README's install section, its lines as they are, in a scratch
# HOME (the tiny model as the default: $CLINFER_MODEL) from a tree whose
# build/ is this build; pip offline into the venv the lines make, over the
# system's NumPy. Then the program it built runs without LD_LIBRARY_PATH,
# and every line that generates printed what `clinfer run` prints.
readme_install() {
    H=$W/home T=$W/tree
    mkdir -p "$H" "$T" "$W/shim"
    ln -s "$(cd "$BUILD" && pwd)" "$T/build" && ln -s "$SRC/examples" "$T/examples" && cp -r "$SRC/bindings" "$T/bindings"
    awk '/^<!-- tests\/install.sh runs the lines of the next block -->/ { on = 1; next }
         on && /^```sh/ { inside = 1; next } inside && /^```/ { exit } inside' "$SRC/README.md" >"$W/readme.sh"
    [ "$(grep -c . "$W/readme.sh")" -ge 5 ] || { fail "README: no install block found"; return; }
    PY=""
    for p in python3 /usr/bin/python3; do
        if "$p" -c "import numpy, setuptools, venv" 2>/dev/null; then PY=$(command -v "$p"); break; fi
    done
    [ -n "$PY" ] || { skip_note missing "README install block: no python3 with numpy, setuptools, venv"; return; }
    ln -s "$PY" "$W/shim/python3"
    "$BUILD/clinfer" run -m "$W/tiny.gguf" -p "The capital of France is" -n 16 >"$W/want" 2>"$W/log" || { fail "clinfer run"; return; }
    (cd "$T" && env -u LD_LIBRARY_PATH -u CLINFER_LIBRARY -u PKG_CONFIG_PATH HOME="$H" PATH="$W/shim:$PATH" \
        CLINFER_MODEL="$W/tiny.gguf" PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0 PIP_DISABLE_PIP_VERSION_CHECK=1 \
        sh -e "$W/readme.sh") >"$W/readme.out" 2>"$W/log" || { fail "README install block: $(tail -n 1 "$W/log")"; return; }
    env -u LD_LIBRARY_PATH CLINFER_MODEL="$W/tiny.gguf" "$T/simple" "" "The capital of France is" 16 >"$W/got" 2>"$W/log" </dev/null &&
        cmp -s "$W/want" "$W/got" || fail "README install block: ./simple without LD_LIBRARY_PATH"
    # clinfer run, ./simple and the Python line each printed it
    "$PY" -c 'import sys; w, o = (open(f, "rb").read() for f in sys.argv[1:3]); sys.exit(o.count(w.strip()) < 3)' \
        "$W/want" "$W/readme.out" || { cp "$W/readme.out" "$W/log"; fail "README install block: not three times what clinfer run prints"; }
    [ "$failures" -eq 0 ] && echo "ok   the README's install block"
    # run from the source tree, the package finds the tree's build/ without $CLINFER_LIBRARY
    if [ "$(cd "$BUILD" && pwd -P)" = "$(cd "$SRC/build" 2>/dev/null && pwd -P)" ]; then
        got=$(cd "$W" && env -u CLINFER_LIBRARY CLINFER_MODEL="$W/tiny.gguf" PATH=/usr/bin:/bin PYTHONPATH="$SRC/bindings/python" "$PY" -c \
            'import clinfer, clinfer._lib as l; print(l._find()); clinfer.Model(vocab_only=True)' 2>"$W/log")
        [ "$got" = "$SRC/build/libclinfer.so.0" ] || fail "Python from the tree: found '$got', not build/libclinfer.so.0"
    fi
}
"$TOOL" model "$W/tiny.gguf" >"$W/log" 2>&1 || { fail "tiny_gguf"; exit 1; }
readme_install

# FILE WHAT: FILE is a Debian machine-readable copyright file whose
# stand-alone MIT paragraph is LICENSE's permission text, line for line,
# and which licenses Files: * under it.
same_license() {
    python3 - "$1" "$SRC/LICENSE" >"$W/log" 2>&1 <<'PY' || fail "$2: not the MIT license in Debian's format"
import re, sys
cp, lic = open(sys.argv[1]).read(), open(sys.argv[2]).read()
paras = [p.split("\n") for p in re.split(r"\n\s*\n", cp.strip())]
assert paras[0][0] == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", paras[0][0]
star = [p for p in paras if p[0] == "Files: *"]
assert star and "License: MIT" in star[0], star
alone = [p for p in paras if p[0] == "License: MIT"]
assert len(alone) == 1, "one stand-alone License: MIT paragraph"
text = ["" if l == " ." else l[1:] for l in alone[0][1:]]
assert all(l.startswith(" ") or l == " ." for l in alone[0][1:]), "continuation lines start with a space"
want = lic.strip().split("\n")
want = want[want.index(next(l for l in want if l.startswith("Permission"))):]
assert text == want, "the text differs from LICENSE"
assert "Copyright (c) 2026 the clinfer authors" in lic and lic.startswith("MIT License"), "LICENSE"
PY
}

# 0. the license in the tree and the Python package's metadata (sdist and wheel)
cmp -s "$SRC/LICENSE" "$SRC/bindings/python/LICENSE" || fail "bindings/python/LICENSE differs from LICENSE"
same_license "$SRC/cmake/copyright" "cmake/copyright"
PY=""
for p in python3 /usr/bin/python3; do "$p" -c "import setuptools, wheel" 2>/dev/null && { PY=$p; break; }; done
if [ -n "$PY" ]; then
    cp -r "$SRC/bindings/python" "$W/pysrc"
    (cd "$W/pysrc" && "$PY" -c "from setuptools import build_meta as b; b.build_sdist('$W/dist'); b.build_wheel('$W/dist')") \
        >"$W/log" 2>&1 || fail "building the Python sdist and wheel"
    "$PY" - "$W/dist" "$SRC/LICENSE" >"$W/log" 2>&1 <<'PY' || fail "the Python package's metadata lacks the MIT license"
import email, glob, sys, tarfile, zipfile
dist, lic = sys.argv[1], open(sys.argv[2]).read()
whl, = glob.glob(dist + "/clinfer-*.whl")
sdist, = glob.glob(dist + "/clinfer-*.tar.gz")
with zipfile.ZipFile(whl) as z:
    names = z.namelist()
    meta = email.message_from_bytes(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    lic_in = [n for n in names if n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n]
    assert lic_in and z.read(lic_in[0]).decode() == lic, names
with tarfile.open(sdist) as t:
    pkg = email.message_from_bytes(t.extractfile(next(m for m in t.getmembers() if m.name.endswith("/PKG-INFO"))).read())
    assert t.extractfile(next(m for m in t.getmembers() if m.name.endswith("/LICENSE"))).read().decode() == lic
for m in (meta, pkg):
    assert m.get("License") == "MIT" or m.get("License-Expression") == "MIT", m.get("License")
    assert "License :: OSI Approved :: MIT License" in m.get_all("Classifier", []), m.get_all("Classifier")
PY
else
    fail "no python3 with setuptools and wheel (scripts/setup.sh installs python3-setuptools python3-wheel)"
fi

# 1. cmake --install and pkg-config
P=$W/prefix
cmake --install "$BUILD" --prefix "$P" >"$W/log" 2>&1 || fail "cmake --install"
for f in bin/clinfer bin/clinfer-tools include/clinfer.h lib/libclinfer.so lib/libclinfer.so.0 lib/libclinfer.so.0.1.0 \
         include/clinfer_pull.h lib/libclinfer-pull.so.0 lib/pkgconfig/clinfer.pc lib/cmake/clinfer/clinferConfig.cmake lib/cmake/clinfer/clinferConfigVersion.cmake \
         share/doc/clinfer/copyright; do
    [ -e "$P/$f" ] || fail "cmake --install did not install $f"
done
# `clinfer` finds its library and hands the internal commands to clinfer-tools beside it
"$P/bin/clinfer" info -m "$W/tiny.gguf" >"$W/log" 2>&1 || fail "installed clinfer info (clinfer-tools): $(tail -n 2 "$W/log")"
readelf -d "$P/lib/libclinfer.so" | grep -q 'SONAME.*\[libclinfer\.so\.0\]' || fail "libclinfer.so has no SONAME libclinfer.so.0"
# everything else is hidden (-fvisibility=hidden, CLINFER_API)
nm -D --defined-only "$P/lib/libclinfer.so" | awk '{print $3}' | grep -v '^clinfer_' >"$W/log"
[ -s "$W/log" ] && fail "libclinfer.so exports more than the API"
nm -D --defined-only "$P/lib/libclinfer.so" | grep -q ' T clinfer_generate$' || fail "libclinfer.so does not export clinfer_generate"
# fetching is the optional part's, with its network libraries; the library has neither
nm -D --defined-only "$P/lib/libclinfer-pull.so.0" | grep -q ' T clinfer_model_pull$' || fail "libclinfer-pull.so does not export clinfer_model_pull"
readelf -d "$P/lib/libclinfer.so" | grep -E 'NEEDED.*lib(curl|zip|crypto)' && fail "libclinfer.so needs a network library"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$(pkg-config --modversion clinfer)" = 0.1.0 ] || fail "pkg-config --modversion clinfer is not 0.1.0"
[ "$(pkg-config --variable=prefix clinfer)" = "$P" ] || fail "clinfer.pc's prefix is not the one installed into"
pkg-config --print-variables clinfer >/dev/null && grep -q 'MIT' "$P/lib/pkgconfig/clinfer.pc" \
    || fail "clinfer.pc does not name the MIT license"
# shellcheck disable=SC2046
if $CC -std=c11 -Wall -Werror "$SRC/examples/simple.c" $(pkg-config --cflags --libs clinfer) -o "$W/simple-pc" \
    >"$W/log" 2>&1; then same_as_cli "$P" "$P/lib" "pkg-config" "$W/simple-pc"; else fail "pkg-config build"; fi
unset PKG_CONFIG_PATH

# 2. find_package(clinfer) from a CMake project
mkdir -p "$W/proj"
cat >"$W/proj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18)
project(user C)
find_package(clinfer 0.1 REQUIRED)
if(NOT clinfer_LICENSE STREQUAL "MIT")
  message(FATAL_ERROR "clinferConfig.cmake: clinfer_LICENSE is '\${clinfer_LICENSE}', not MIT")
endif()
add_executable(simple "$SRC/examples/simple.c")
target_link_libraries(simple PRIVATE clinfer::clinfer)
EOF
if { cmake -S "$W/proj" -B "$W/proj/build" -DCMAKE_PREFIX_PATH="$P" && cmake --build "$W/proj/build"; } >"$W/log" 2>&1
then same_as_cli "$P" "$P/lib" "find_package" "$W/proj/build/simple"; else fail "find_package(clinfer) build"; fi

# 3. the .deb, unpacked into a scratch root
(cd "$BUILD" && cpack -G DEB -B "$W/pkg") >"$W/log" 2>&1 || fail "cpack -G DEB"
DEB=$(ls "$W"/pkg/clinfer_0.1.0_*.deb 2>/dev/null | head -n 1)
if [ -n "$DEB" ]; then
    dpkg-deb -f "$DEB" Depends >"$W/depends"
    for dep in libpcre2-8-0 libjansson4 ocl-icd-libopencl1; do
        grep -q "$dep" "$W/depends" || { cp "$W/depends" "$W/log"; fail "the .deb does not depend on $dep"; }
    done
    dpkg-deb -f "$DEB" Recommends | grep -q opencl-icd || fail "the .deb does not recommend an OpenCL ICD"
    dpkg -x "$DEB" "$W/root"
    dpkg-deb -c "$DEB" | grep -q ' ./usr/share/doc/clinfer/copyright$' || fail "the .deb has no /usr/share/doc/clinfer/copyright"
    same_license "$W/root/usr/share/doc/clinfer/copyright" ".deb copyright"
    export PKG_CONFIG_PATH="$W/root/usr/lib/pkgconfig"
    pkg-config --variable=prefix clinfer | grep -qx /usr || fail "the .deb's clinfer.pc does not say prefix=/usr"
    # shellcheck disable=SC2046
    if $CC -std=c11 -Wall -Werror "$SRC/examples/simple.c" $(pkg-config --define-prefix --cflags --libs clinfer) -o "$W/simple-deb" \
        >"$W/log" 2>&1; then same_as_cli "$W/root/usr" "$W/root/usr/lib" ".deb" "$W/simple-deb"; else fail ".deb build"; fi
else
    fail "cpack made no clinfer_0.1.0_*.deb"
fi

[ "$failures" -eq 0 ] && echo "install: all passed" || echo "install: $failures failed"
[ "$failures" -eq 0 ]

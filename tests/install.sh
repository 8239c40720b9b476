#!/bin/sh
# What a user of the library does, on a tiny model: `cmake --install` into a
# scratch prefix, build examples/simple.c with `pkg-config --cflags --libs
# clinfer` and with find_package(clinfer) from a CMake project, and from the
# .deb (`cpack -G DEB`, unpacked with dpkg -x, not installed); each program
# must print what the installed `clinfer run` prints. Also: the library
# exports only the API, and the package declares its run-time dependencies.
# Registered with ctest (CMakeLists.txt).
#
# usage: install.sh BUILD_DIR SOURCE_DIR TINY_GGUF
set -u
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

"$TOOL" model "$W/tiny.gguf" >"$W/log" 2>&1 || { fail "tiny_gguf"; exit 1; }

# PREFIX LIBDIR NAME PROGRAM: PROGRAM (built against PREFIX) prints the
# same text as PREFIX's clinfer.
same_as_cli() {
    "$1/bin/clinfer" run -m "$W/tiny.gguf" -p "hi" -n 12 >"$W/want" 2>"$W/log" || { fail "$3: clinfer run"; return; }
    LD_LIBRARY_PATH="$2" "$4" "$W/tiny.gguf" "hi" 12 >"$W/got" 2>"$W/log" || { fail "$3: the example failed"; return; }
    cmp -s "$W/want" "$W/got" || { diff "$W/want" "$W/got" >"$W/log"; fail "$3: the example's text differs from clinfer run's"; }
}

# 1. cmake --install and pkg-config
P=$W/prefix
cmake --install "$BUILD" --prefix "$P" >"$W/log" 2>&1 || fail "cmake --install"
for f in bin/clinfer bin/clinfer-tools include/clinfer.h lib/libclinfer.so lib/libclinfer.so.0 lib/libclinfer.so.0.1.0 \
         lib/pkgconfig/clinfer.pc lib/cmake/clinfer/clinferConfig.cmake lib/cmake/clinfer/clinferConfigVersion.cmake; do
    [ -e "$P/$f" ] || fail "cmake --install did not install $f"
done
# `clinfer` finds its library and hands the internal commands to clinfer-tools beside it
"$P/bin/clinfer" info -m "$W/tiny.gguf" >"$W/log" 2>&1 || fail "installed clinfer info (clinfer-tools): $(tail -n 2 "$W/log")"
readelf -d "$P/lib/libclinfer.so" | grep -q 'SONAME.*\[libclinfer\.so\.0\]' || fail "libclinfer.so has no SONAME libclinfer.so.0"
# everything else is hidden (-fvisibility=hidden, CLINFER_API)
nm -D --defined-only "$P/lib/libclinfer.so" | awk '{print $3}' | grep -v '^clinfer_' >"$W/log"
[ -s "$W/log" ] && fail "libclinfer.so exports more than the API"
nm -D --defined-only "$P/lib/libclinfer.so" | grep -q ' T clinfer_generate$' || fail "libclinfer.so does not export clinfer_generate"
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$(pkg-config --modversion clinfer)" = 0.1.0 ] || fail "pkg-config --modversion clinfer is not 0.1.0"
[ "$(pkg-config --variable=prefix clinfer)" = "$P" ] || fail "clinfer.pc's prefix is not the one installed into"
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

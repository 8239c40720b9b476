#!/bin/sh
# llama.cpp's own tools (llama-bench, llama-quantize, llama-server), the peer
# the benchmarks compare against, built from the llama.cpp tree vendored in the
# llama-cpp-python source distribution, so the peer is the same llama.cpp the
# Python bindings in bench/compare.py run.
#
#   sh bench/peer_build.sh [OUT]
#
# OUT defaults to $XDG_CACHE_HOME/clinfer/peer (else ~/.cache/clinfer/peer);
# the tools land in OUT/bin. The sdist is $PEER_SDIST, else
# /work/peer/dl/llama_cpp_python-0.3.36.tar.gz, else it is downloaded with
#   pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36
# into OUT/dl. CPU only, Release, -DGGML_NATIVE=ON (the build machine's ISA,
# as clinfer's own CPU kernels get), no CURL (the tools never download).
# On a CPU with AMX (Sapphire Rapids and later) the AMX paths are compiled
# out (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 beside -march=native):
# this llama.cpp's AMX matmul segfaults on the first prompt on such a VM
# (ggml_backend_amx_mul_mat; llama.cpp issue 20824, closed unfixed), even on
# the default model; its AVX-512 repacked kernels stay on.
# Jobs: $JOBS (default 2), run under nice -n 15 (a shared machine).
# What is built already is skipped: a tool present in OUT/bin is not rebuilt
# unless it was built with other flags (OUT/bin/.flags), and an unpacked tree
# or configured build folder is reused.
set -eu

VERSION=0.3.36
OUT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/clinfer/peer}
JOBS=${JOBS:-2}
TOOLS="llama-bench llama-quantize llama-server"

# Step 1: the compiler flags, and nothing to do when every tool is there
# built with them.
FLAGS=""
if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
if [ "$(cat "$OUT/bin/.flags" 2>/dev/null)" != "native $FLAGS" ]; then
    rm -f "$OUT/bin/llama-bench" "$OUT/bin/llama-quantize" "$OUT/bin/llama-server"
fi
missing=""
for t in $TOOLS; do
    [ -x "$OUT/bin/$t" ] || missing="$missing $t"
done
if [ -z "$missing" ]; then
    echo "peer_build: all of ($TOOLS) in $OUT/bin already"
    exit 0
fi
mkdir -p "$OUT/bin" "$OUT/dl"

# Step 2: the source distribution (a local copy, else pip download).
SDIST=${PEER_SDIST:-}
if [ -z "$SDIST" ]; then
    for c in /work/peer/dl/llama_cpp_python-$VERSION.tar.gz "$OUT/dl/llama_cpp_python-$VERSION.tar.gz"; do
        [ -f "$c" ] && SDIST=$c && break
    done
fi
if [ -z "$SDIST" ]; then
    python3 -m pip download --no-binary :all: --no-deps -d "$OUT/dl" "llama-cpp-python==$VERSION"
    SDIST=$OUT/dl/llama_cpp_python-$VERSION.tar.gz
fi

# Step 3: unpack only vendor/llama.cpp (once).
SRC=$OUT/src/llama_cpp_python-$VERSION/vendor/llama.cpp
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    mkdir -p "$OUT/src"
    tar xzf "$SDIST" -C "$OUT/src" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi

# Step 4: configure (cheap when nothing changed) and build the missing tools.
# Shared libraries off, so each tool is one self-contained file in OUT/bin.
B=$OUT/build
cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DGGML_OPENMP=ON >"$B.configure.log" 2>&1 || { cat "$B.configure.log"; exit 1; }
# shellcheck disable=SC2086
nice -n 15 cmake --build "$B" -j "$JOBS" --target $missing
for t in $missing; do
    cp "$B/bin/$t" "$OUT/bin/$t"
done
echo "native $FLAGS" >"$OUT/bin/.flags"
echo "peer_build: built ($missing ) into $OUT/bin; $("$OUT/bin/llama-bench" --version 2>&1 | head -1)"

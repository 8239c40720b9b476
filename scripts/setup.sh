#!/bin/sh
# Installs what clinfer needs to build and test on Debian/Ubuntu, skipping
# what is already present. Uses sudo when not root.
set -e
# The Python bindings' tests (a venv over Debian's numpy and pytest, pip
# installing offline) and the .deb (cpack's dpkg-shlibdeps, file); then
# `clinfer serve`: HTTP and JSON libraries, and the browser its chat page
# is checked in (the tests pip-install the openai and anthropic clients
# and jsonschema into a venv, and jsonschema with rfc3339-validator for
# tests/json_schema.sh);
# Open MPI for `--mpi` (one model across the ranks of an MPI job);
# binutils' readelf and nm, with which tests/install.sh and
# tests/front_door.sh check what libclinfer.so exports and clinfer links;
# Oclgrind, the simulated GPU the oclgrind_* tests run the kernels on
# (Debian's package registers no ICD: only its wrapper command uses it).
PKGS="cmake make gcc binutils pkg-config ocl-icd-opencl-dev opencl-headers pocl-opencl-icd \
libclblast-dev libcmocka-dev libpcre2-dev libopenblas-dev python3 python3-pip \
clang libclang-rt-14-dev valgrind oclgrind \
python3-numpy python3-pytest python3-venv python3-setuptools python3-wheel dpkg-dev file \
libmicrohttpd-dev libjansson-dev chromium openmpi-bin libopenmpi-dev"
PKGS="$PKGS libedit-dev" # `clinfer chat`'s line editing and history
PKGS="$PKGS libxxhash-dev" # XXH3: the packed-weights cache's checksums (models/weight_cache.c)
# `clinfer pull` (pull/pull.c): HTTPS, wheels (zips) and SHA-256
PKGS="$PKGS libcurl4-openssl-dev libzip-dev libssl-dev"
PKGS="$PKGS python3-matplotlib" # bench/plot.py (Debian's python3; plot.py finds it from another python3)
PKGS="$PKGS python3-jinja2" # tests/peer/record_templates.py: the chat templates' reference renderings
PKGS="$PKGS libjs-marked node-dompurify libjs-highlight.js" # the chat page's Markdown, sanitizer, code colours
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# A python3 outside dpkg (pyenv, venv) with pip counts as present.
case "$missing" in *python3*)
  if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    missing=$(echo "$missing" | sed -E 's/ python3-pip( |$)/\1/; s/ python3( |$)/\1/')
  fi;;
esac
[ -z "$missing" ] && exit 0
echo "setup: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing

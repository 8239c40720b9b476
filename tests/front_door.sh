#!/bin/sh
# The front ends and the optional part pull/ on the public API alone: every
# #include "..." in cli/, server/ and pull/ names clinfer.h, clinfer_pull.h
# or a file of the same folder (`clinfer serve`'s command, cli/cmd_serve.c,
# also the server's headers; the build gives them no other project include
# folder; this also catches a relative path such as "../models/llama.h"),
# and `clinfer` needs nothing of libclinfer but the exported clinfer_*
# functions (pull/'s own are pull_*, never clf_*). Inside the library, each
# layer sees only itself and the layers below it, and the build refuses the
# rest (tests/layers.py).
# usage: front_door.sh SRC CLINFER BUILD
SRC=$1 BIN=$2 BUILD=$3
rc=0
for dir in cli server pull; do
    for f in "$SRC/$dir"/*.c "$SRC/$dir"/*.h; do
        grep -o '#include "[^"]*"' "$f" | sed 's/#include "\(.*\)"/\1/' | while read -r h; do
            case $h in */*) echo "FAIL $f includes \"$h\": a path past its folder"; exit 1 ;; esac
            [ "$h" = clinfer.h ] || [ "$h" = clinfer_pull.h ] || [ -e "$SRC/$dir/$h" ] || { [ $dir = cli ] && [ -e "$SRC/server/$h" ]; } || { echo "FAIL $f includes \"$h\": not the public API"; exit 1; }
        done || rc=1
    done
done
readelf -d "$BIN" | grep -q 'NEEDED.*libclinfer\.so' || { echo "FAIL $BIN does not link libclinfer.so"; rc=1; }
# the static library's internal symbols (clf_*) must not be in the program
nm "$BIN" | grep -q ' [TtDdBb] clf_' && { echo "FAIL $BIN holds internal clf_* symbols"; rc=1; }
[ $rc = 0 ] && echo "ok   cli/, server/ and pull/ include only the public API and their own files; clinfer links libclinfer.so"
python3 "$SRC/tests/layers.py" "$SRC" "$BUILD" || rc=1
exit $rc

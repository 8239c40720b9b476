#!/bin/sh
# The JSON Schema converter against Python's jsonschema
# (tests/json_schema_cases.py), in a venv over the system's python3 with
# jsonschema and rfc3339-validator (its date-time check) pip-installed when
# missing, as tests/serve.sh does for openai.
#
# usage: json_schema.sh SCHEMA_GBNF BUILD_DIR [SEED]
set -u
TOOL=$1 BUILD=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
VENV=$BUILD/schemavenv
W=$(mktemp -d /tmp/clinfer-schema-XXXXXX) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV" || { echo "FAIL: python3 -m venv"; exit 1; }
"$VENV/bin/python" -c "import jsonschema, rfc3339_validator" 2>/dev/null ||
    "$VENV/bin/python" -m pip install -q jsonschema rfc3339-validator >"$W/log" 2>&1 ||
    { cat "$W/log"; echo "FAIL: pip install jsonschema rfc3339-validator"; exit 1; }
shift 2
"$VENV/bin/python" "$SRC/tests/json_schema_cases.py" "$TOOL" "$SRC" "$@"

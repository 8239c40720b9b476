#!/usr/bin/env python3
"""The JSON Schema converter (text/grammar/json_schema.c) against Python's
jsonschema, through tests/tools/schema_gbnf (the grammar's verdict on a
text):

1. tests/data/json_schema_cases.json: each case's valid and invalid
   instances are what jsonschema says they are (the data file is right),
   and the grammar agrees on each, in three spellings (compact,
   json.dumps' default, indent=2); each refused schema fails naming what
   it refuses.
2. Random instances, fresh each run (seed printed): values generated from
   each schema (the cases' and tests/data/schemas/*.json), then mutated
   (a node replaced by another type, a key dropped or added, a string or
   a number nudged, an array grown or cut, the text truncated); the grammar
   must accept exactly those jsonschema validates.

The reference: jsonschema's 2020-12 validator with format checking; `email`
and `uuid` held to the grammar's forms (jsonschema's own checks are looser:
any text with an @, any hex the uuid module takes), `pattern` searched with
re.ASCII (\\d \\w \\s ASCII) and `$` as the very end (ECMA-262's, not
Python's before-a-final-newline), and date-time/time rejecting a trailing
newline (rfc3339-validator's regex lets one through). Instances keep the
schema's property order (the grammar's documented spelling).

  python3 json_schema_cases.py SCHEMA_GBNF SOURCE_DIR [SEED]
"""
import copy
import glob
import json
import os
import random
import re
import re._parser as sre_parse
import subprocess
import sys
import tempfile

import jsonschema

EMAIL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
                   r"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}", re.ASCII)
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", re.ASCII)


def make_checker():
    fc = jsonschema.FormatChecker(())  # 2020-12's checks (the global one mixes in draft 3's "time")
    fc.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    missing = [f for f in ("date", "date-time", "time") if f not in fc.checkers]
    if missing:
        sys.exit(f"FAIL: jsonschema cannot check {missing} (pip install rfc3339-validator)")
    for name in ("date", "date-time", "time"):
        orig = fc.checkers[name][0]
        fc.checkers[name] = ((lambda o: lambda s: not isinstance(s, str) or (not s.endswith("\n") and o(s)))(orig),
                             fc.checkers[name][1])
    fc.checkers["email"] = (lambda s: not isinstance(s, str) or EMAIL.fullmatch(s) is not None, ())
    fc.checkers["uuid"] = (lambda s: not isinstance(s, str) or UUID.fullmatch(s) is not None, ())
    return fc


def ecma_pattern(p):
    return re.sub(r"(?<!\\)\$", r"\\Z", p)


def pattern_kw(validator, patrn, instance, schema):
    if validator.is_type(instance, "string") and not re.search(ecma_pattern(patrn), instance, re.ASCII):
        yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")


Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern_kw})
CHECKER = make_checker()


def reference(schema):
    Validator.check_schema(schema)
    v = Validator(schema, format_checker=CHECKER)
    return v.is_valid


def verdict_of_text(valid, text):
    try:  # JSON alone: not Python's NaN and Infinity
        value = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError:
        return False
    return valid(value)


def spellings(v):
    return [json.dumps(v, ensure_ascii=False, separators=(",", ":")), json.dumps(v, ensure_ascii=False),
            json.dumps(v, ensure_ascii=False, indent=2)]


def run_grammar(tool, schema, texts):
    """The grammar's verdicts on texts, or ('ERROR', message)."""
    with tempfile.TemporaryDirectory() as d:
        sp, tp = os.path.join(d, "schema.json"), os.path.join(d, "texts")
        with open(sp, "w", encoding="utf-8") as f:
            json.dump(schema, f, ensure_ascii=False)
        with open(tp, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps(t) + "\n")
        r = subprocess.run([tool, sp, tp], capture_output=True, text=True)
        if r.returncode == 2:
            return ("ERROR", r.stdout.strip())
        if r.returncode != 0:
            raise RuntimeError(f"schema_gbnf exit {r.returncode}: {r.stdout}{r.stderr[-3000:]}")
        return [line == "1" for line in r.stdout.split()]


# ---- random instances ------------------------------------------------------------

POOL = list("abcxyzABC019 _-.@/:") + ["\"", "\\", "\n", "\t", "é", "中", "😀", "\u007f"]


def resolve(root, ref):
    node = root
    for part in ref[2:].split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def flatten(root, s, depth=0):
    """A schema with $ref and allOf folded in, for generating (not validating)."""
    if not isinstance(s, dict) or depth > 8:
        return s
    s = dict(s)
    if "$ref" in s:
        target = flatten(root, resolve(root, s.pop("$ref")), depth + 1)
        if isinstance(target, dict):
            s = merge_gen(target, s)
    for b in s.pop("allOf", []):
        s = merge_gen(s, flatten(root, b, depth + 1))
    return s


def merge_gen(a, b):
    if not isinstance(b, dict):
        return a
    out = dict(a)
    for k, v in b.items():
        if k == "properties" and k in out:
            out[k] = {**out[k], **v}
        elif k == "required" and k in out:
            out[k] = list(dict.fromkeys(out[k] + v))
        else:
            out[k] = v
    return out


def gen_pattern(rng, items):
    out = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "NOT_LITERAL":
            out.append(rng.choice([c for c in "ab1 " if ord(c) != av]))
        elif name == "ANY":
            out.append(rng.choice("ab1 -"))
        elif name == "IN":
            out.append(gen_class(rng, av))
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, sub = av
            hi = min(hi, lo + 3)
            for _ in range(rng.randint(lo, hi)):
                out.append(gen_pattern(rng, sub))
        elif name == "SUBPATTERN":
            out.append(gen_pattern(rng, av[3]))
        elif name == "BRANCH":
            out.append(gen_pattern(rng, rng.choice(av[1])))
        elif name == "AT":
            pass
    return "".join(out)


def gen_class(rng, items):
    neg = any(str(op) == "NEGATE" for op, _ in items)
    chars = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            chars.append(chr(av))
        elif name == "RANGE":
            chars.append(chr(rng.randint(av[0], av[1])))
        elif name == "CATEGORY":
            chars.append({"CATEGORY_DIGIT": "7", "CATEGORY_WORD": "w", "CATEGORY_SPACE": " "}.get(str(av), "x"))
    if neg:
        cand = [c for c in "aZ5 -_." if not re.fullmatch("[" + "".join(re.escape(c) for c in chars) + "]", c)]
        return rng.choice(cand or ["~"])
    return rng.choice(chars or ["a"])


def gen_string(rng, s):
    fmt = s.get("format")
    if fmt == "date":
        return f"{rng.randint(1, 2999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 31):02d}"
    if fmt == "time":
        return (f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
                + rng.choice(["", ".5", ".123"]) + rng.choice(["Z", "+02:00", "-11:30", "z"]))
    if fmt == "date-time":
        return gen_string(rng, {"format": "date"}) + rng.choice("Tt") + gen_string(rng, {"format": "time"})
    if fmt == "uuid":
        h = "%032x" % rng.getrandbits(128)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if fmt == "email":
        return rng.choice(["ann", "bob.smith", "x+y"]) + "@" + rng.choice(["example.com", "mail.example.org", "a.io"])
    if "pattern" in s:
        return gen_pattern(rng, sre_parse.parse(s["pattern"]))
    lo = s.get("minLength", 0)
    hi = s.get("maxLength", lo + 8)
    return "".join(rng.choice(POOL) for _ in range(rng.randint(lo, max(lo, min(hi, lo + 8)))))


def infer_types(s):
    if "type" in s:
        return s["type"] if isinstance(s["type"], list) else [s["type"]]
    if any(k in s for k in ("properties", "required", "additionalProperties", "patternProperties")):
        return ["object"]
    if any(k in s for k in ("items", "prefixItems", "minItems", "maxItems")):
        return ["array"]
    if any(k in s for k in ("minLength", "maxLength", "pattern", "format")):
        return ["string"]
    if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return ["integer"]
    return ["null", "boolean", "object", "array", "number", "string", "integer"]


def gen(rng, root, s, depth=0):
    if s is True or s == {}:
        return gen_any(rng, depth)
    if s is False:
        return None
    s = flatten(root, s)
    for kw in ("anyOf", "oneOf"):
        if kw in s:
            rest = {k: v for k, v in s.items() if k != kw}
            return gen(rng, root, merge_gen(rest, flatten(root, rng.choice(s[kw]))), depth)
    if "const" in s:
        return copy.deepcopy(s["const"])
    if "enum" in s:
        return copy.deepcopy(rng.choice(s["enum"]))
    t = rng.choice(infer_types(s))
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "integer" and s.get("multipleOf", 1) != 1:
        k = s["multipleOf"]
        if any(b in s for b in BOUNDS):
            lo = s.get("minimum", s.get("exclusiveMinimum", -10**6) + 1)
            hi = s["maximum"] if "maximum" in s else s.get("exclusiveMaximum", 10**6 + 1) - 1
            first, last = -(-int(lo) // k), int(hi) // k
            if first <= last:
                return k * rng.choice([first, last, rng.randint(first, last)])
        return k * rng.randint(-10**6, 10**6) + rng.choice([0, 0, 0, 1])
    if t == "integer":
        lo = s.get("minimum", s.get("exclusiveMinimum", -1000) + (1 if "exclusiveMinimum" in s else 0))
        hi = s.get("maximum", s.get("exclusiveMaximum", 1000) - (1 if "exclusiveMaximum" in s else 0))
        lo, hi = int(lo), int(hi)
        return rng.choice([lo, hi, rng.randint(min(lo, hi), max(lo, hi))])
    if t == "number":
        if nonzero_bounds(s):  # in range (and near its ends), at most 6 decimals (json_schema.h's spelling)
            lo = s.get("minimum", s.get("exclusiveMinimum"))
            hi = s.get("maximum", s.get("exclusiveMaximum"))
            lo = hi - 1000 if lo is None else lo
            hi = lo + 1000 if hi is None else hi
            x = rng.choice([lo, hi, lo + 1e-6, hi - 1e-6, lo - 1e-6, hi + 1e-6, rng.uniform(lo, hi)])
            return round(x, rng.randint(0, 6))
        return rng.choice([0, -3, 17, 2.5, -0.125, 1e-5, 1.5e20, 123456.789, 0.1])
    if t == "string":
        return gen_string(rng, s)
    if t == "array":
        out = [gen(rng, root, p, depth + 1) for p in s.get("prefixItems", [])]
        lo = s.get("minItems", 0)
        hi = min(s.get("maxItems", lo + 3), lo + 3)
        items = s.get("items", True)
        while len(out) < rng.randint(lo, max(lo, hi)) and items is not False and depth < 6:
            out.append(gen(rng, root, items, depth + 1))
        return out
    if t == "object":
        out = {}
        props, req = s.get("properties", {}), s.get("required", [])
        addl = s.get("additionalProperties", True)
        for k, sub in props.items():
            if k in req or rng.random() < 0.6:
                out[k] = gen(rng, root, sub, depth + 1)
        for k in req:
            if k not in out:
                out[k] = gen(rng, root, addl if isinstance(addl, dict) else True, depth + 1)
        for pat, sub in s.get("patternProperties", {}).items():
            for _ in range(rng.randint(0, 2)):
                out[gen_pattern(rng, sre_parse.parse(pat))] = gen(rng, root, sub, depth + 1)
        if addl is not False and rng.random() < 0.3:
            out["extra_" + rng.choice("abc")] = gen(rng, root, addl if isinstance(addl, dict) else True, depth + 1)
        return out
    return None


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def nonzero_bounds(s):
    """Whether s bounds a number by other than 0: held over json_schema.h's spelling (no exponent, 6 decimals)."""
    t = s.get("type", "number")
    return ("number" in t if isinstance(t, list) else t == "number") and any(s.get(k, 0) != 0 for k in BOUNDS)


def any_nonzero_bounds(s):
    if isinstance(s, dict):
        return nonzero_bounds(s) or any(any_nonzero_bounds(v) for v in s.values())
    if isinstance(s, list):
        return any(any_nonzero_bounds(v) for v in s)
    return False


UNSPELLED = re.compile(r"[0-9][eE]|\.[0-9]{7}")


def random_number_schema(rng):
    """A fresh schema bounding a number (decimals, negatives, exclusive or not, one side or two)."""
    def dec():
        return round(rng.uniform(-50, 50), rng.randint(0, 3)) if rng.random() < 0.8 else rng.randint(-3, 3)
    s = {"type": rng.choice(["number", "number", ["number", "null"]])}
    a, b = sorted([dec(), dec()])
    if rng.random() < 0.8:
        s[rng.choice(["minimum", "exclusiveMinimum"])] = a
    if rng.random() < 0.8 or len(s) == 1:
        s[rng.choice(["maximum", "exclusiveMaximum"])] = b
    if rng.random() < 0.3:
        s = {"type": "object", "properties": {"x": s, "y": {"type": "number"}}, "required": ["x"]}
    return s


def random_multiple_schema(rng):
    """A fresh schema holding an integer to a multiple, unbounded or between bounds."""
    s = {"type": "integer", "multipleOf": rng.choice([2, 3, 5, 7, 10, 12, 25, 100, 999])}
    r = rng.random()
    if r < 0.7:  # both bounds, or one
        a = rng.randint(-500, 500)
        if r < 0.5:
            s[rng.choice(["minimum", "exclusiveMinimum"])] = a
        if r > 0.3:
            s[rng.choice(["maximum", "exclusiveMaximum"])] = a + rng.randint(0, 2000)
        if not (0.3 < r < 0.5) and s["multipleOf"] > 100:  # one bound: k * (digits + 1) automaton states, at most 4096
            s["multipleOf"] = 100
    if rng.random() < 0.3:
        s = {"type": "array", "items": s, "maxItems": 3}
    return s


def random_unique_schema(rng):
    """A fresh array of distinct enum values (scalars), counts bounded or not."""
    pool = ["a", "b", "c", "x y", 0, 1, -2, 17, True, False, None]
    s = {"type": "array", "items": {"enum": rng.sample(pool, rng.randint(1, 6))}, "uniqueItems": True}
    if rng.random() < 0.3:
        s["items"]["type"] = rng.choice(["string", "integer", ["string", "null"]])
    if rng.random() < 0.5:
        s["minItems"] = rng.randint(0, 3)
    if rng.random() < 0.5:
        s["maxItems"] = rng.randint(s.get("minItems", 0), 5)
    return s


def random_pattern_props_schema(rng):
    """A fresh object whose other names answer to one pattern (additionalProperties false)."""
    pat = rng.choice(["^x_[a-z]+$", "[0-9]", "^zz", "^(a|b)$", "_", "^[a-c]{1,2}$"])
    sub = rng.choice([{"type": "integer"}, {"type": "string", "maxLength": 3}, {"enum": [1, "a", None]}, True])
    s = {"type": "object", "patternProperties": {pat: sub}, "additionalProperties": False}
    if rng.random() < 0.6:
        s["properties"] = {"id": {"type": "integer"}, "Name": {"type": "string"}}
        if rng.random() < 0.5:
            s["required"] = ["id"]
    return s


def gen_any(rng, depth):
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice([None, True, False, 0, -7, 3.25, "", "txt", "q\"uote"])
    if r < 0.75:
        return [gen_any(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("abcd"): gen_any(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def other_value(rng, v):
    cands = [None, True, 0, -1, 2.5, "s", "", [], {}, [1], {"k": 1}, 10**6, "2024-02-30"]
    return copy.deepcopy(rng.choice([c for c in cands if c != v or type(c) != type(v)]))


def mutate(rng, v):
    """v changed at one random place (a deep copy)."""
    v = copy.deepcopy(v)
    nodes = []

    def walk(x, parent, key):
        nodes.append((x, parent, key))
        if isinstance(x, dict):
            for k in list(x):
                walk(x[k], x, k)
        elif isinstance(x, list):
            for i in range(len(x)):
                walk(x[i], x, i)

    walk(v, None, None)
    x, parent, key = rng.choice(nodes)
    r = rng.random()
    if isinstance(x, dict) and r < 0.5:
        if x and rng.random() < 0.5:
            del x[rng.choice(list(x))]
        else:
            x["zz_" + rng.choice("ab")] = other_value(rng, None)
        return v
    if isinstance(x, list) and r < 0.5:
        if x and rng.random() < 0.5:
            x.pop(rng.randrange(len(x)))
        else:
            x.append(copy.deepcopy(x[0]) if x and rng.random() < 0.5 else other_value(rng, None))
        return v
    if isinstance(x, str) and r < 0.6:
        i = rng.randint(0, len(x))
        new = rng.choice([x[:i] + rng.choice(POOL) + x[i:], x[:i] + x[i + 1:], x.upper(), x + "\n", x[:i] + "9" + x[i:]])
    elif isinstance(x, bool) or x is None:
        new = other_value(rng, x)
    elif isinstance(x, (int, float)) and r < 0.7:
        new = rng.choice([x + 1, x - 1, -x, x * 10, x + 0.5, float(x), x + 1e-6, x - 1e-6])
        if isinstance(new, float) and isinstance(x, float):
            new = round(new, 6)  # no float noise: 0.1 + 1 - 1 is not 0.1
    else:
        new = other_value(rng, x)
    if parent is None:
        return new
    parent[key] = new
    return v


def main():
    tool, src = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    failures = 0

    def fail(msg):
        nonlocal failures
        failures += 1
        if failures <= 30:
            print("FAIL:", msg)

    def judged(name, schema, texts, want, what):
        """The grammar's verdict on each text against want (jsonschema's); False when it refused the schema."""
        got = run_grammar(tool, schema, texts)
        if isinstance(got, tuple):
            fail(f"{name}: the converter refused it: {got[1]}")
            return False
        for t, w, g in zip(texts, want, got):
            if w != g:
                fail(f"{name}: {what}{t!r}: jsonschema says {w}, the grammar {g}")
        return True

    with open(os.path.join(src, "tests/data/json_schema_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    schemas = []
    n_fixed = 0
    for case in cases:
        name, schema = case["name"], case["schema"]
        if "error" in case:
            got = run_grammar(tool, schema, [])
            if not (isinstance(got, tuple) and case["error"] in got[1]):
                fail(f"{name}: expected an error naming {case['error']!r}, got {got!r}")
            continue
        valid = reference(schema)
        texts, want = [], []
        for label, insts in ((True, case.get("valid", [])), (False, case.get("invalid", [])),
                             ("outside", case.get("outside", []))):
            for inst in insts:
                if label == "outside":  # valid, in a spelling the grammar does not admit (json_schema.h)
                    if not verdict_of_text(valid, inst):
                        fail(f"{name}: {inst!r} is in 'outside' but jsonschema rejects it")
                    texts.append(inst)
                    want.append(False)
                    continue
                if isinstance(inst, dict) and set(inst) == {"$text"}:  # a text spelled by hand
                    got_ref = verdict_of_text(valid, inst["$text"])
                    if got_ref != label:
                        fail(f"{name}: the data file says {inst['$text']!r} is {label}, jsonschema {got_ref}")
                    texts.append(inst["$text"])
                    want.append(label)
                    continue
                if valid(inst) != label:
                    fail(f"{name}: the data file says {inst!r} is {'valid' if label else 'invalid'}; "
                         f"jsonschema disagrees")
                for t in spellings(inst):
                    texts.append(t)
                    want.append(label)
        if not judged(name, schema, texts, want, ""):
            continue
        n_fixed += len(texts)
        schemas.append((name, schema))
    for path in sorted(glob.glob(os.path.join(src, "tests/data/schemas/*.json"))):
        with open(path, encoding="utf-8") as f:
            schemas.append((os.path.basename(path), json.load(f)))
    makers = [random_number_schema] * 40 + [random_multiple_schema] * 20 + [random_unique_schema] * 20 + \
        [random_pattern_props_schema] * 20
    for i, make in enumerate(makers):
        s = make(rng)
        try:
            Validator(s).is_valid(0)
        except Exception:
            continue
        schemas.append((f"random-{i} {json.dumps(s)}", s))
    n_random, n_valid, n_unspelled = 0, 0, 0
    for name, schema in schemas:
        valid = reference(schema)
        bounded = any_nonzero_bounds(schema)
        texts, want = [], []
        for _ in range(40):
            v = gen(rng, schema, schema)
            for inst in (v, mutate(rng, v), mutate(rng, mutate(rng, v))):
                for t in rng.sample(spellings(inst), 1):
                    texts.append(t)
                    want.append(valid(inst))
            t = rng.choice(spellings(v))
            cut = t[:rng.randrange(len(t))] if len(t) > 1 else t + "x"
            texts.append(cut)
            want.append(verdict_of_text(valid, cut))
        if bounded:  # a valid text with a number spelled outside json_schema.h's spelling (exponent, 7 decimals): not judged
            keep = [i for i, (t, w) in enumerate(zip(texts, want)) if not (w and UNSPELLED.search(t))]
            n_unspelled += len(texts) - len(keep)
            texts, want = [texts[i] for i in keep], [want[i] for i in keep]
        got = run_grammar(tool, schema, [])
        if isinstance(got, tuple) and name.startswith("random-") and "admits no value" in got[1]:
            continue  # an empty range (a < x < a)
        if not judged(name, schema, texts, want, "random "):
            continue
        n_random += len(texts)
        n_valid += sum(want)
    print(f"{n_fixed} texts of {len(cases)} cases, {n_random} random texts ({n_valid} valid) over "
          f"{len(schemas)} schemas ({n_unspelled} valid texts outside the bounded numbers' spelling not judged): "
          f"{failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
